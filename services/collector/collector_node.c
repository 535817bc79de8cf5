/*
 * collector_node — worker set, SUB sockets, scrapes and PUSH to the aggregators.
 */
#include "collector_node.h"

#include <assert.h>
#include <cjson/cJSON.h>
#include <czmq.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector_checkpoint.h"
#include "collector_scrape.h"
#include "collector_stream.h"
#include "collector_upstream.h"
#include "ipl_clock.h"
#include "ipl_drops.h"
#include "ipl_error.h"
#include "ipl_log.h"
#include "ipl_loop.h"
#include "ipl_policy_view.h"
#include "ipl_proto.h"
#include "ipl_split.h"
#include "ipl_zmq.h"

_Static_assert((int)COLLECTOR_OP_STORED == (int)IPL_KV_OP_STORED &&
                   (int)COLLECTOR_OP_REMOVED == (int)IPL_KV_OP_REMOVED &&
                   (int)COLLECTOR_OP_CLEARED == (int)IPL_KV_OP_CLEARED,
               "collector ops are proto's KV ops");
_Static_assert((int)COLLECTOR_KV_EXACT == (int)IPL_KV_EXACT &&
                   (int)COLLECTOR_KV_SYNCING == (int)IPL_KV_SYNCING &&
                   (int)COLLECTOR_KV_DEGRADED == (int)IPL_KV_DEGRADED,
               "collector kv states are proto's");
_Static_assert(COLLECTOR_CHECKPOINT_COUNTERS == COLLECTOR_SAMPLE_COUNTERS,
               "a checkpoint keeps every restart-evidence counter of a sample");

#define S_MAX_KV_FRAME    (64 << 20) /* a vLLM batch; the decoder bounds what it accepts */
#define S_DRAIN_BUDGET    1000       /* messages per worker per loop round */
#define S_POLICY_CHECK_MS 200
#define S_MAX_WAIT_MS     100   /* loop rounds at least this often: replay timers */
#define S_RESEND_CHUNK    8192u /* hashes per KV_EVENT in a full-state resend */

typedef struct {
    uint64_t batches, events, gaps, restarts, unknown_parents;
    uint64_t replays_ok, replays_failed, replayed_batches, degradations, promoted;
} s_mirror_t; /* stream counters already added to the metrics */

/* What became of a resumed checkpoint (collector_stream_stats.resume), and "corrupt". */
static const char *const s_resume_results[] = {"proven",    "continued", "evicted", "restarted",
                                               "discarded", "failed",    "corrupt"};
#define S_NRESUME (sizeof s_resume_results / sizeof s_resume_results[0])

typedef struct s_worker {
    collector_node_t *node;
    size_t id; /* scrape target; unique for the node's lifetime */
    collector_worker_spec_t spec;
    zsock_t *sub;
    zsock_t *replay; /* DEALER to the worker's replay ROUTER while a replay runs */
    collector_stream_t *stream;
    int sent_kv_state;      /* in the last LOAD (-1: none yet) */
    uint64_t restarts_seen; /* the stream's restart count at the last scrape */
    /* load */
    bool has_sample;
    collector_sample_t sample;
    bool up;
    bool scraped;
    uint64_t scrape_ms; /* monotonic ms of the last finished scrape */
    uint64_t scrapes_ok, scrapes_failed;
    char last_error[160];
    uint64_t added_ms; /* monotonic */
    /* checkpoint */
    bool ckpt_saved;          /* its file holds generation ckpt_generation */
    uint64_t ckpt_generation; /* of the stream, when last saved */
    bool ckpt_has_seq;
    uint64_t ckpt_seq; /* last_seq in the file */
    uint64_t ckpt_ms;  /* monotonic ms of the last save (0: never) */
    uint64_t ckpt_writes, ckpt_failures;
    char ckpt_error[200];
    bool resume_counted;
    s_mirror_t mirrored;
    ipl_metric_t *m_batches, *m_events, *m_gaps, *m_restarts, *m_unknown_parents;
    ipl_metric_t *m_replays_ok, *m_replays_failed, *m_replayed, *m_degradations;
    ipl_metric_t *m_scrape_ok, *m_scrape_failed, *m_kv_state;
    ipl_metric_t *m_state[COLLECTOR_NSTATES], *m_state_seconds, *m_ghosts, *m_promoted;
} s_worker_t;

struct collector_node {
    pthread_mutex_t lock; /* guards workers and their counters against admin readers */
    ipl_metrics_t *metrics;
    collector_upstream_t *upstream;
    uint64_t *resend_buf; /* S_RESEND_CHUNK hashes */
    s_worker_t **workers;
    size_t nworkers, workers_cap;
    size_t next_id;
    bool have_list;
    ipl_policy_view_t *policy;
    uint64_t policy_version;
    char *prefix, *node_name; /* NULL: not given */
    uint64_t interval_ms;
    uint64_t next_scrape_ms, next_policy_ms;
    collector_scrape_t *scrape;
    zmq_pollitem_t *items;
    size_t items_cap;
    char *ckpt_dir; /* NULL: no checkpoints */
    uint64_t ckpt_interval_ms, next_ckpt_ms;
    ipl_metric_t *m_workers;
    ipl_metric_t *m_ckpt_ok, *m_ckpt_failed, *m_resumes[S_NRESUME];
};

/* ------------------------------------------------------------------------------------------ */
/* worker specs */

static char *s_strndup_trim(const char *s, size_t len)
{
    while (len > 0 && (*s == ' ' || *s == '\t')) {
        s++;
        len--;
    }
    while (len > 0 && (s[len - 1] == ' ' || s[len - 1] == '\t'))
        len--;
    return strndup(s, len);
}

static char *s_metrics_url(const char *url)
{
    size_t len = strlen(url);
    while (len > 0 && url[len - 1] == '/')
        len--;
    char *out = malloc(len + sizeof "/metrics");
    if (out) {
        memcpy(out, url, len);
        memcpy(out + len, "/metrics", sizeof "/metrics");
    }
    return out;
}

static void s_spec_free(collector_worker_spec_t *s)
{
    free(s->name);
    free(s->url);
    free(s->kv_endpoint);
    free(s->replay_endpoint);
    free(s->metrics_url);
    memset(s, 0, sizeof *s);
}

static int s_spec_copy(collector_worker_spec_t *dst, const collector_worker_spec_t *src)
{
    dst->name = strdup(src->name);
    dst->url = strdup(src->url);
    dst->kv_endpoint = strdup(src->kv_endpoint);
    dst->replay_endpoint = strdup(src->replay_endpoint);
    dst->metrics_url = strdup(src->metrics_url);
    if (!dst->name || !dst->url || !dst->kv_endpoint || !dst->replay_endpoint ||
        !dst->metrics_url) {
        s_spec_free(dst);
        return IPL_E_NOMEM;
    }
    return 0;
}

static bool s_spec_equal(const collector_worker_spec_t *a, const collector_worker_spec_t *b)
{
    return !strcmp(a->name, b->name) && !strcmp(a->url, b->url) &&
           !strcmp(a->kv_endpoint, b->kv_endpoint) &&
           !strcmp(a->replay_endpoint, b->replay_endpoint) &&
           !strcmp(a->metrics_url, b->metrics_url);
}

void collector_worker_specs_free(collector_worker_spec_t **specs_p, size_t n)
{
    if (!specs_p || !*specs_p) return;
    for (size_t i = 0; i < n; i++)
        s_spec_free(&(*specs_p)[i]);
    free(*specs_p);
    *specs_p = NULL;
}

/* Parses one `name=url|kv[|replay]` item into *spec. */
static int s_spec_parse(const char *item, size_t len, collector_worker_spec_t *spec, char *err,
                        size_t errlen)
{
    const char *end = item + len;
    const char *eq = memchr(item, '=', len);
    const char *fields[4] = {0};
    size_t flen[4] = {0};
    size_t nf = 0;
    if (eq) {
        const char *p = eq + 1;
        while (nf < 4) {
            const char *bar = memchr(p, '|', (size_t)(end - p));
            fields[nf] = p;
            flen[nf] = (size_t)((bar ? bar : end) - p);
            nf++;
            if (!bar) break;
            p = bar + 1;
            if (nf == 4) {
                nf = 5; /* too many */
                break;
            }
        }
    }
    memset(spec, 0, sizeof *spec);
    if (eq) spec->name = s_strndup_trim(item, (size_t)(eq - item));
    if (nf >= 2 && nf <= 3) {
        spec->url = s_strndup_trim(fields[0], flen[0]);
        spec->kv_endpoint = s_strndup_trim(fields[1], flen[1]);
        spec->replay_endpoint = nf == 3 ? s_strndup_trim(fields[2], flen[2]) : strdup("");
    }
    if (!eq || nf < 2 || nf > 3 || !spec->name || !*spec->name || !spec->url || !*spec->url ||
        !spec->kv_endpoint || !*spec->kv_endpoint || !spec->replay_endpoint) {
        snprintf(err, errlen,
                 "--workers: item \"%.*s\" is not name=url|kv_endpoint[|replay_endpoint] "
                 "(e.g. w0=http://127.0.0.1:8100|tcp://127.0.0.1:5600|tcp://127.0.0.1:5700)",
                 (int)(len > 200 ? 200 : len), item);
        s_spec_free(spec);
        return IPL_E_INVAL;
    }
    spec->metrics_url = s_metrics_url(spec->url);
    if (!spec->metrics_url) {
        s_spec_free(spec);
        snprintf(err, errlen, "out of memory");
        return IPL_E_NOMEM;
    }
    return 0;
}

int collector_worker_specs_parse(const char *text, collector_worker_spec_t **out, size_t *n,
                                 char *err, size_t errlen)
{
    assert(text && out && n && err);
    *out = NULL;
    *n = 0;
    size_t cap = 0, len;
    const char *cursor = text, *item;
    while (ipl_split_next(&cursor, &item, &len)) {
        if (*n == cap) {
            cap = cap ? cap * 2 : 8;
            collector_worker_spec_t *grown = realloc(*out, cap * sizeof *grown);
            if (!grown) {
                collector_worker_specs_free(out, *n);
                snprintf(err, errlen, "out of memory");
                return IPL_E_NOMEM;
            }
            *out = grown;
        }
        int rc = s_spec_parse(item, len, &(*out)[*n], err, errlen);
        if (rc != 0) {
            collector_worker_specs_free(out, *n);
            *n = 0;
            return rc;
        }
        for (size_t i = 0; i < *n; i++) {
            if (!strcmp((*out)[i].name, (*out)[*n].name)) {
                snprintf(err, errlen,
                         "--workers: worker \"%s\" is listed twice; names must be unique",
                         (*out)[i].name);
                (*n)++;
                collector_worker_specs_free(out, *n);
                *n = 0;
                return IPL_E_INVAL;
            }
        }
        (*n)++;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* sending */

static void s_send(collector_node_t *self, int type, const void *body)
{
    collector_upstream_send(self->upstream, type, body);
}

ipl_kv_event_t collector_node_event(const collector_op_t *op, const char *worker)
{
    return (ipl_kv_event_t){.seq = 0,
                            .worker = (char *)worker,
                            .epoch = op->epoch,
                            .src_seq = op->src_seq,
                            .op = (uint64_t)op->op,
                            .parent = op->parent,
                            .hashes = (uint64_t *)op->hashes,
                            .hashes_len = op->nhashes,
                            .block_size = op->block_size};
}

static void s_on_op(void *arg, const collector_op_t *op)
{
    s_worker_t *w = arg;
    ipl_kv_event_t ev = collector_node_event(op, w->spec.name);
    s_send(w->node, IPL_MSG_KV_EVENT, &ev);
}

/* A worker whose KV events we cannot even subscribe to has an unknown cache: DEGRADED. */
static int s_kv_state(const s_worker_t *w)
{
    return w->sub ? collector_stream_kv_state(w->stream) : IPL_KV_DEGRADED;
}

/* The collector's own view (RECOVERING distinct from SYNCING). */
static int s_state(const s_worker_t *w)
{
    return w->sub ? collector_stream_state(w->stream) : COLLECTOR_KV_DEGRADED;
}

/* The LOAD describing worker `w` now. */
static ipl_load_t s_load_of(s_worker_t *w)
{
    uint32_t bs = w->sample.block_size ? (uint32_t)w->sample.block_size
                                       : collector_stream_block_size(w->stream);
    return (ipl_load_t){.seq = 0,
                        .worker = w->spec.name,
                        .ts_ms = ipl_wall_ms(),
                        .running = w->sample.running > 0 ? (uint64_t)w->sample.running : 0,
                        .waiting = w->sample.waiting > 0 ? (uint64_t)w->sample.waiting : 0,
                        .kv_usage = w->sample.kv_usage,
                        .block_size = bs,
                        .num_blocks = w->sample.num_blocks,
                        .health = w->up ? IPL_HEALTH_UP : IPL_HEALTH_DOWN,
                        .kv_state = (uint64_t)s_kv_state(w)};
}

static void s_send_load(collector_node_t *self, s_worker_t *w)
{
    ipl_load_t load = s_load_of(w);
    w->sent_kv_state = (int)load.kv_state;
    s_send(self, IPL_MSG_LOAD, &load);
}

/* ------------------------------------------------------------------------------------------ */
/* workers */

static void s_drop(collector_node_t *self, const char *worker, const char *reason, size_t bytes)
{
    char labels[96];
    snprintf(labels, sizeof labels, "reason=\"%s\"", reason);
    ipl_metric_inc(ipl_metrics_counter(self->metrics, "inferplane_collector_decode_errors_total",
                                       "KV-event messages from workers that could not be used, "
                                       "by reason.",
                                       labels));
    ipl_drops_count(self->metrics, reason, "worker=%s bytes=%zu", worker, bytes);
}

static void s_worker_metrics(collector_node_t *self, s_worker_t *w)
{
    char esc[256], labels[300];
    ipl_metrics_escape(esc, sizeof esc, w->spec.name);
    snprintf(labels, sizeof labels, "worker=\"%s\"", esc);
    ipl_metrics_t *m = self->metrics;
    w->m_batches = ipl_metrics_counter(m, "inferplane_collector_batches_total",
                                       "KV-event batches decoded, per worker.", labels);
    w->m_events = ipl_metrics_counter(m, "inferplane_collector_events_decoded_total",
                                      "KV events decoded, per worker.", labels);
    w->m_gaps = ipl_metrics_counter(m, "inferplane_collector_sequence_gaps_total",
                                    "Gaps in a worker's KV-event sequence.", labels);
    w->m_restarts = ipl_metrics_counter(m, "inferplane_collector_worker_restarts_total",
                                        "Worker restarts seen (sequence went back).", labels);
    w->m_unknown_parents =
        ipl_metrics_counter(m, "inferplane_collector_unknown_parents_total",
                            "BlockStored events skipped because their parent was unknown.", labels);
    char rr[340];
    snprintf(rr, sizeof rr, "%s,result=\"ok\"", labels);
    w->m_replays_ok =
        ipl_metrics_counter(m, "inferplane_collector_replays_total",
                            "KV-event replays from the worker's buffer, by result.", rr);
    snprintf(rr, sizeof rr, "%s,result=\"failed\"", labels);
    w->m_replays_failed =
        ipl_metrics_counter(m, "inferplane_collector_replays_total",
                            "KV-event replays from the worker's buffer, by result.", rr);
    w->m_replayed = ipl_metrics_counter(m, "inferplane_collector_replayed_batches_total",
                                        "KV-event batches applied from replays.", labels);
    w->m_degradations = ipl_metrics_counter(
        m, "inferplane_collector_degraded_total",
        "Times the worker's KV history had a hole that could not be replayed (it became "
        "RECOVERING: a subset rebuilt from the events after it).",
        labels);
    for (int k = 0; k < COLLECTOR_NSTATES; k++) {
        char sl[340];
        snprintf(sl, sizeof sl, "%s,state=\"%s\"", labels, collector_kv_state_name(k));
        w->m_state[k] = ipl_metrics_gauge(m, "inferplane_collector_worker_state",
                                          "1 for the worker's KV state as the collector sees it "
                                          "(exact, syncing, recovering, degraded), else 0.",
                                          sl);
    }
    w->m_state_seconds =
        ipl_metrics_gauge(m, "inferplane_collector_worker_state_seconds",
                          "Seconds the worker has been in its current KV state.", labels);
    w->m_ghosts = ipl_metrics_gauge(m, "inferplane_collector_ghost_blocks",
                                    "Blocks of a RECOVERING worker known only by translation "
                                    "(not routed on until an event shows them cached).",
                                    labels);
    w->m_promoted = ipl_metrics_counter(m, "inferplane_collector_recovered_blocks_total",
                                        "Blocks of a RECOVERING worker confirmed cached (a new "
                                        "block extended their chain) and routed on again.",
                                        labels);
    w->m_kv_state = ipl_metrics_gauge(m, "inferplane_collector_kv_state",
                                      "Exactness of the worker's KV state as sent: 0 exact, 1 "
                                      "syncing (recovering included), 2 degraded.",
                                      labels);
    char rl[340];
    snprintf(rl, sizeof rl, "%s,result=\"ok\"", labels);
    w->m_scrape_ok = ipl_metrics_counter(m, "inferplane_collector_scrapes_total",
                                         "Scrapes of worker /metrics, by result.", rl);
    snprintf(rl, sizeof rl, "%s,result=\"failed\"", labels);
    w->m_scrape_failed = ipl_metrics_counter(m, "inferplane_collector_scrapes_total",
                                             "Scrapes of worker /metrics, by result.", rl);
}

static void s_worker_free(collector_node_t *self, s_worker_t **w_p)
{
    s_worker_t *w = *w_p;
    if (!w) return;
    if (self->scrape) collector_scrape_cancel(self->scrape, w->id);
    zsock_destroy(&w->sub);
    zsock_destroy(&w->replay);
    collector_stream_destroy(&w->stream);
    s_spec_free(&w->spec);
    free(w);
    *w_p = NULL;
}

/* The stream's replay seam: a fresh DEALER per replay, so that a late reply of an abandoned
 * replay can never be taken for one of the next. */
static bool s_replay(void *arg, collector_replay_op_t op, uint64_t start_seq)
{
    s_worker_t *w = arg;
    zsock_destroy(&w->replay);
    if (op != COLLECTOR_REPLAY_START) return true;
    w->replay = zsock_new(ZMQ_DEALER);
    if (!w->replay) return false;
    zsock_set_linger(w->replay, 0);
    zsock_set_maxmsgsize(w->replay, S_MAX_KV_FRAME);
    /* vLLM's ROUTER drops what does not fit our queue: take a whole buffer (10,000 batches) */
    zsock_set_rcvhwm(w->replay, 0);
    uint8_t seq8[8];
    for (int i = 0; i < 8; i++)
        seq8[i] = (uint8_t)(start_seq >> (56 - 8 * i));
    void *sock = zsock_resolve(w->replay);
    if (zsock_connect(w->replay, "%s", w->spec.replay_endpoint) < 0 ||
        zmq_send(sock, "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 ||
        zmq_send(sock, seq8, 8, ZMQ_DONTWAIT) < 0) {
        IPL_LOG_EVERY(5, IPL_LOG_WARN, "replay_request_failed",
                      "worker=%s endpoint=\"%s\" error=\"%s\"", w->spec.name,
                      w->spec.replay_endpoint, zmq_strerror(zmq_errno()));
        zsock_destroy(&w->replay);
        return false;
    }
    IPL_DEBUG("replay_requested", "worker=%s start_seq=%" PRIu64, w->spec.name, start_seq);
    return true;
}

/* ------------------------------------------------------------------------------------------ */
/* checkpoints */

static void s_count_resume(collector_node_t *self, const char *result)
{
    for (size_t i = 0; i < S_NRESUME; i++)
        if (!strcmp(s_resume_results[i], result)) ipl_metric_inc(self->m_resumes[i]);
}

/* Resumes w's stream from its checkpoint, if one is there and sound. False: start it afresh
 * (no file, or one that was ignored: logged and counted). */
static bool s_resume(collector_node_t *self, s_worker_t *w)
{
    if (!self->ckpt_dir) return false;
    uint8_t *buf;
    size_t len;
    char err[256];
    int rc = collector_checkpoint_load(self->ckpt_dir, w->spec.name, &buf, &len, err, sizeof err);
    if (rc == IPL_E_NOTFOUND) return false;
    collector_checkpoint_t ck = {0};
    if (rc == 0) {
        rc = collector_checkpoint_decode(buf, len, &ck, err, sizeof err);
        free(buf);
    }
    if (rc == 0 && strcmp(ck.worker, w->spec.name) != 0) {
        char q[160];
        snprintf(err, sizeof err, "it belongs to worker %s", ipl_log_quote(q, sizeof q, ck.worker));
        rc = IPL_E_INVAL;
    }
    if (rc == 0) rc = collector_stream_resume(w->stream, &ck.image);
    if (rc == 0) {
        /* the first scrape tells whether the worker restarted while we were away */
        w->sample.start_time = ck.start_time;
        memcpy(w->sample.counters, ck.counters, sizeof w->sample.counters);
        w->has_sample = true;
        w->ckpt_saved = true;
        w->ckpt_has_seq = true;
        w->ckpt_seq = ck.image.last_seq;
        IPL_INFO("checkpoint_loaded",
                 "worker=%s last_seq=%" PRIu64 " blocks=%zu ghosts=%zu age_ms=%lld", w->spec.name,
                 ck.image.last_seq, ck.image.nblocks, ck.image.nghosts,
                 (long long)(ipl_wall_ms() - ck.written_ms));
    } else {
        char *path = collector_checkpoint_path(self->ckpt_dir, w->spec.name);
        char q[2][512];
        IPL_WARN("checkpoint_ignored", "worker=%s path=%s error=%s", w->spec.name,
                 ipl_log_quote(q[0], sizeof q[0], path ? path : ""),
                 ipl_log_quote(q[1], sizeof q[1], err));
        free(path);
        s_count_resume(self, "corrupt");
        w->resume_counted = true;
    }
    collector_checkpoint_clear(&ck);
    return rc == 0;
}

/* Saves w's checkpoint when its stream changed since the last save (or `force`). Takes and
 * releases the node's lock around what reads the stream; the file is written without it. */
static void s_save(collector_node_t *self, s_worker_t *w, bool force)
{
    pthread_mutex_lock(&self->lock);
    const collector_stream_stats_t *st = collector_stream_stats(w->stream);
    uint64_t generation = st->generation;
    if (!force && w->ckpt_saved && generation == w->ckpt_generation) {
        pthread_mutex_unlock(&self->lock);
        return;
    }
    collector_checkpoint_t ck = {.worker = w->spec.name, .written_ms = ipl_wall_ms()};
    ck.start_time = w->has_sample ? w->sample.start_time : 0;
    for (int i = 0; i < COLLECTOR_CHECKPOINT_COUNTERS; i++)
        ck.counters[i] = w->has_sample ? w->sample.counters[i] : -1;
    int rc = collector_stream_image(w->stream, &ck.image);
    uint8_t *buf = NULL;
    size_t len = 0;
    if (rc == 0) rc = collector_checkpoint_encode(&ck, &buf, &len);
    uint64_t seq = ck.image.last_seq;
    collector_stream_image_free(&ck.image);
    pthread_mutex_unlock(&self->lock);

    char err[256] = "";
    if (rc == IPL_E_NOTFOUND) { /* nothing applied (e.g. a restarted worker): no stale file */
        collector_checkpoint_remove(self->ckpt_dir, w->spec.name);
        rc = 0;
    } else if (rc == 0) {
        rc = collector_checkpoint_save(self->ckpt_dir, w->spec.name, buf, len, err, sizeof err);
    } else {
        snprintf(err, sizeof err, "cannot encode: %s", ipl_strerror(rc));
    }
    free(buf);
    pthread_mutex_lock(&self->lock);
    if (rc == 0) {
        w->ckpt_saved = true;
        w->ckpt_generation = generation;
        w->ckpt_has_seq = len > 0;
        w->ckpt_seq = seq;
        w->ckpt_ms = ipl_mono_ms();
        w->ckpt_writes++;
        w->ckpt_error[0] = '\0';
        ipl_metric_inc(self->m_ckpt_ok);
    } else {
        w->ckpt_failures++;
        snprintf(w->ckpt_error, sizeof w->ckpt_error, "%s", err);
        ipl_metric_inc(self->m_ckpt_failed);
        char q[300];
        IPL_LOG_EVERY(30, IPL_LOG_WARN, "checkpoint_failed", "worker=%s error=%s", w->spec.name,
                      ipl_log_quote(q, sizeof q, err));
    }
    pthread_mutex_unlock(&self->lock);
}

/* Every worker's checkpoint (the loop thread: the worker set only changes on it). */
static void s_save_all(collector_node_t *self, bool force)
{
    if (!self->ckpt_dir) return;
    for (size_t i = 0; i < self->nworkers; i++)
        s_save(self, self->workers[i], force);
}

void collector_node_checkpoint(collector_node_t *self)
{
    assert(self);
    s_save_all(self, true);
}

static s_worker_t *s_worker_new(collector_node_t *self, const collector_worker_spec_t *spec)
{
    s_worker_t *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->node = self;
    w->id = self->next_id++;
    w->sent_kv_state = -1;
    w->added_ms = ipl_mono_ms();
    if (s_spec_copy(&w->spec, spec) != 0) {
        free(w);
        return NULL;
    }
    /* an epoch no earlier incarnation of this collector used */
    w->stream = collector_stream_new(spec->name, ipl_wall_ms(), s_on_op, w);
    if (!w->stream) {
        s_worker_free(self, &w);
        return NULL;
    }
    /* without a replay endpoint every gap is unrecoverable (DEGRADED) */
    if (*spec->replay_endpoint) collector_stream_set_replay(w->stream, s_replay, w);
    collector_stream_tick(w->stream, ipl_mono_ms());
    if (*spec->kv_endpoint) {
        w->sub = zsock_new(ZMQ_SUB);
        if (!w->sub) {
            s_worker_free(self, &w);
            return NULL;
        }
        zsock_set_linger(w->sub, 0);
        zsock_set_maxmsgsize(w->sub, S_MAX_KV_FRAME);
        zsock_set_rcvhwm(w->sub, 100000);
        zsock_set_subscribe(w->sub, "");
        if (zsock_connect(w->sub, "%s", spec->kv_endpoint) < 0) {
            IPL_ERROR("kv_connect_failed", "worker=%s endpoint=\"%s\" error=\"%s\"", spec->name,
                      spec->kv_endpoint, zmq_strerror(zmq_errno()));
            zsock_destroy(&w->sub); /* keep scraping it; its KV state is unknown */
        }
    }
    s_worker_metrics(self, w);
    /* the aggregator forgets older incarnations' blocks; the worker's history is replayed,
     * from its checkpoint when there is one */
    if (!s_resume(self, w)) collector_stream_start(w->stream);
    char q[3][256];
    IPL_INFO("worker_added", "worker=%s url=%s kv=%s replay=%s", spec->name,
             ipl_log_quote(q[0], sizeof q[0], spec->url),
             ipl_log_quote(q[1], sizeof q[1], spec->kv_endpoint),
             ipl_log_quote(q[2], sizeof q[2], spec->replay_endpoint));
    return w;
}

/* Makes the worker set equal to `specs` (under the lock). Unchanged workers keep their
 * sockets and streams; removed ones are cleared at the aggregators. */
static void s_reconcile(collector_node_t *self, const collector_worker_spec_t *specs, size_t n)
{
    pthread_mutex_lock(&self->lock);
    /* remove workers that are gone or changed */
    for (size_t i = 0; i < self->nworkers;) {
        s_worker_t *w = self->workers[i];
        bool keep = false;
        for (size_t k = 0; k < n && !keep; k++)
            keep = s_spec_equal(&w->spec, &specs[k]);
        if (keep) {
            i++;
            continue;
        }
        IPL_INFO("worker_removed", "worker=%s", w->spec.name);
        if (self->ckpt_dir) collector_checkpoint_remove(self->ckpt_dir, w->spec.name);
        ipl_kv_event_t ev = {.worker = w->spec.name,
                             .epoch = collector_stream_stats(w->stream)->epoch,
                             .op = IPL_KV_OP_CLEARED};
        s_send(self, IPL_MSG_KV_EVENT, &ev);
        s_worker_free(self, &self->workers[i]);
        self->workers[i] = self->workers[--self->nworkers];
    }
    /* add the new ones */
    for (size_t k = 0; k < n; k++) {
        bool have = false;
        for (size_t i = 0; i < self->nworkers && !have; i++)
            have = !strcmp(self->workers[i]->spec.name, specs[k].name);
        if (have) continue;
        if (self->nworkers == self->workers_cap) {
            size_t cap = self->workers_cap ? self->workers_cap * 2 : 8;
            s_worker_t **grown = realloc(self->workers, cap * sizeof *grown);
            if (!grown) break;
            self->workers = grown;
            self->workers_cap = cap;
        }
        s_worker_t *w = s_worker_new(self, &specs[k]);
        if (!w) {
            IPL_ERROR("worker_add_failed", "worker=%s", specs[k].name);
            continue;
        }
        self->workers[self->nworkers++] = w;
    }
    self->have_list = true;
    pthread_mutex_unlock(&self->lock);
}

bool collector_node_follows(const ipl_worker_t *w, const char *prefix, const char *node_name)
{
    bool by_node = node_name && *node_name, by_prefix = prefix && *prefix;
    if (by_node && w->node && *w->node) return strcmp(w->node, node_name) == 0;
    if (by_prefix) return w->name && strncmp(w->name, prefix, strlen(prefix)) == 0;
    return !by_node;
}

/* Policy mode: applies a new policy version's workers (collector_node_follows). */
static void s_check_policy(collector_node_t *self)
{
    if (!self->policy || ipl_policy_view_version(self->policy) == self->policy_version) return;
    ipl_policy_snap_t *snap = ipl_policy_view_get(self->policy);
    if (!snap) return;
    const ipl_policy_t *pol = snap->policy;
    collector_worker_spec_t *specs = calloc(pol->workers_len ? pol->workers_len : 1, sizeof *specs);
    size_t n = 0;
    for (uint32_t i = 0; specs && i < pol->workers_len; i++) {
        const ipl_worker_t *pw = &pol->workers[i];
        if (!pw->name || !*pw->name || !pw->url ||
            !collector_node_follows(pw, self->prefix, self->node_name))
            continue;
        collector_worker_spec_t *s = &specs[n];
        s->name = strdup(pw->name);
        s->url = strdup(pw->url);
        s->kv_endpoint = strdup(pw->kv_endpoint ? pw->kv_endpoint : "");
        s->replay_endpoint = strdup(pw->replay_endpoint ? pw->replay_endpoint : "");
        s->metrics_url = (pw->metrics_url && *pw->metrics_url) ? strdup(pw->metrics_url)
                                                               : s_metrics_url(pw->url);
        if (!s->name || !s->url || !s->kv_endpoint || !s->replay_endpoint || !s->metrics_url) {
            s_spec_free(s);
            continue;
        }
        n++;
    }
    IPL_INFO("policy_applied", "version=%" PRIu64 " workers=%zu of=%u", pol->version, n,
             pol->workers_len);
    self->policy_version = pol->version;
    ipl_policy_view_release(self->policy, &snap);
    if (specs) s_reconcile(self, specs, n);
    collector_worker_specs_free(&specs, n);
}

/* ------------------------------------------------------------------------------------------ */
/* scrapes */

static s_worker_t *s_worker_by_id(collector_node_t *self, size_t id)
{
    for (size_t i = 0; i < self->nworkers; i++)
        if (self->workers[i]->id == id) return self->workers[i];
    return NULL;
}

static void s_on_scrape(void *arg, size_t target, const collector_sample_t *sample,
                        const char *error)
{
    collector_node_t *self = arg;
    pthread_mutex_lock(&self->lock);
    s_worker_t *w = s_worker_by_id(self, target);
    if (w) {
        w->scraped = true;
        w->scrape_ms = ipl_mono_ms();
        if (sample) {
            if (!w->up) IPL_INFO("worker_up", "worker=%s", w->spec.name);
            /* a new process that has not published yet still holds the old one's blocks at
             * the aggregator: drop them now (unless its sequence already told the stream) */
            uint64_t restarts = collector_stream_stats(w->stream)->restarts;
            if (w->has_sample && restarts == w->restarts_seen &&
                collector_sample_restarted(&w->sample, sample))
                collector_stream_restarted(w->stream, "metrics_reset");
            w->restarts_seen = collector_stream_stats(w->stream)->restarts;
            w->sample = *sample;
            w->has_sample = w->up = true;
            w->last_error[0] = '\0';
            w->scrapes_ok++;
            ipl_metric_inc(w->m_scrape_ok);
        } else {
            if (w->up || w->scrapes_failed == 0)
                IPL_WARN("worker_down", "worker=%s url=\"%s\" error=\"%s\"", w->spec.name,
                         w->spec.metrics_url, error);
            w->up = false;
            snprintf(w->last_error, sizeof w->last_error, "%s", error ? error : "failed");
            w->scrapes_failed++;
            ipl_metric_inc(w->m_scrape_failed);
        }
        s_send_load(self, w);
    }
    pthread_mutex_unlock(&self->lock);
}

static void s_scrape_round(collector_node_t *self)
{
    for (size_t i = 0; i < self->nworkers; i++) {
        s_worker_t *w = self->workers[i];
        int rc = collector_scrape_start(self->scrape, w->id, w->spec.metrics_url);
        if (rc == IPL_E_AGAIN)
            IPL_LOG_EVERY(10, IPL_LOG_DEBUG, "scrape_overrun", "worker=%s", w->spec.name);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* KV events */

static void s_drain_sub(collector_node_t *self, s_worker_t *w)
{
    void *sock = zsock_resolve(w->sub);
    for (int budget = S_DRAIN_BUDGET; budget > 0; budget--) {
        zmq_msg_t part[3];
        int nparts;
        size_t total = ipl_zmq_recv_parts(sock, part, 3, &nparts);
        if (total == 0) return;
        if (total != 3) {
            s_drop(self, w->spec.name, "bad_frames", zmq_msg_size(&part[0]));
        } else {
            int rc =
                collector_stream_message(w->stream, zmq_msg_data(&part[1]), zmq_msg_size(&part[1]),
                                         zmq_msg_data(&part[2]), zmq_msg_size(&part[2]));
            if (rc != 0) s_drop(self, w->spec.name, ipl_strerror(rc), zmq_msg_size(&part[2]));
        }
        ipl_zmq_close_parts(part, nparts);
    }
}

/* Replies of the worker's replay: [b"", seq, payload] or [b"", topic, seq, payload]. The
 * stream may end the replay (the socket goes) or start another one while handling a reply. */
static void s_drain_replay(collector_node_t *self, s_worker_t *w)
{
    for (int budget = S_DRAIN_BUDGET; budget > 0 && w->replay; budget--) {
        zmq_msg_t part[4];
        int nparts;
        size_t total = ipl_zmq_recv_parts(zsock_resolve(w->replay), part, 4, &nparts);
        if (total == 0) return;
        const uint8_t *frames[3];
        size_t lens[3], n = 0;
        /* after the empty delimiter: 2 or 3 frames; anything else is passed on as invalid */
        if (total >= 3 && total <= 4 && zmq_msg_size(&part[0]) == 0) {
            for (int i = 1; i < nparts; i++, n++) {
                frames[n] = zmq_msg_data(&part[i]);
                lens[n] = zmq_msg_size(&part[i]);
            }
        }
        int rc = collector_stream_replay_reply(w->stream, frames, lens, n);
        if (rc != 0)
            s_drop(self, w->spec.name, "bad_replay_reply", zmq_msg_size(&part[nparts - 1]));
        ipl_zmq_close_parts(part, nparts);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* full-state resend to an aggregator that (re)connected (collector_upstream.h) */

typedef struct {
    collector_node_t *node;
    size_t agg;
    ipl_kv_event_t ev;
} s_resend_t;

static int s_resend_flush(s_resend_t *r)
{
    int rc = collector_upstream_send_to(r->node->upstream, r->agg, IPL_MSG_KV_EVENT, &r->ev);
    r->ev.hashes_len = 0;
    return rc;
}

static int s_resend_hash(void *arg, uint64_t hash)
{
    s_resend_t *r = arg;
    r->ev.hashes[r->ev.hashes_len++] = hash;
    return r->ev.hashes_len == S_RESEND_CHUNK ? s_resend_flush(r) : 0;
}

/* Per worker: CLEARED, STORED chunks of every block it holds, its LOAD. */
static int s_resend(void *arg, size_t agg)
{
    collector_node_t *self = arg;
    s_resend_t r = {.node = self, .agg = agg};
    for (size_t i = 0; i < self->nworkers; i++) {
        s_worker_t *w = self->workers[i];
        const collector_stream_stats_t *st = collector_stream_stats(w->stream);
        r.ev = (ipl_kv_event_t){.worker = w->spec.name,
                                .epoch = st->epoch,
                                .src_seq = st->last_seq,
                                .op = IPL_KV_OP_CLEARED,
                                .hashes = self->resend_buf,
                                .block_size = collector_stream_block_size(w->stream)};
        int rc = s_resend_flush(&r);
        r.ev.op = IPL_KV_OP_STORED;
        if (rc == 0) rc = collector_stream_foreach(w->stream, s_resend_hash, &r);
        if (rc == 0 && r.ev.hashes_len > 0) rc = s_resend_flush(&r);
        if (rc == 0 && w->scraped) {
            ipl_load_t load = s_load_of(w);
            rc = collector_upstream_send_to(self->upstream, agg, IPL_MSG_LOAD, &load);
        }
        if (rc != 0) return rc; /* retried whole later */
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* metrics mirror, readiness, debug */

/* How long w has been in its current state (monotonic ms). */
static uint64_t s_state_age_ms(const s_worker_t *w, uint64_t now)
{
    uint64_t since = w->sub ? collector_stream_stats(w->stream)->state_since_ms : w->added_ms;
    return now > since ? now - since : 0;
}

static void s_collect(void *arg, ipl_metrics_t *metrics)
{
    (void)metrics;
    collector_node_t *self = arg;
    uint64_t now = ipl_mono_ms();
    pthread_mutex_lock(&self->lock);
    ipl_metric_set(self->m_workers, (double)self->nworkers);
    for (size_t i = 0; i < self->nworkers; i++) {
        s_worker_t *w = self->workers[i];
        const collector_stream_stats_t *st = collector_stream_stats(w->stream);
        s_mirror_t *m = &w->mirrored;
        ipl_metric_add(w->m_batches, (double)(st->batches - m->batches));
        ipl_metric_add(w->m_events, (double)(st->events - m->events));
        ipl_metric_add(w->m_gaps, (double)(st->gaps - m->gaps));
        ipl_metric_add(w->m_restarts, (double)(st->restarts - m->restarts));
        ipl_metric_add(w->m_unknown_parents, (double)(st->unknown_parents - m->unknown_parents));
        ipl_metric_add(w->m_replays_ok, (double)(st->replays_ok - m->replays_ok));
        ipl_metric_add(w->m_replays_failed, (double)(st->replays_failed - m->replays_failed));
        ipl_metric_add(w->m_replayed, (double)(st->replayed_batches - m->replayed_batches));
        ipl_metric_add(w->m_degradations, (double)(st->degradations - m->degradations));
        ipl_metric_add(w->m_promoted, (double)(st->promoted - m->promoted));
        *m = (s_mirror_t){st->batches,        st->events,           st->gaps,
                          st->restarts,       st->unknown_parents,  st->replays_ok,
                          st->replays_failed, st->replayed_batches, st->degradations,
                          st->promoted};
        ipl_metric_set(w->m_kv_state, (double)s_kv_state(w));
        int state = s_state(w);
        for (int k = 0; k < COLLECTOR_NSTATES; k++)
            ipl_metric_set(w->m_state[k], k == state ? 1 : 0);
        ipl_metric_set(w->m_state_seconds, (double)s_state_age_ms(w, now) / 1000.0);
        ipl_metric_set(w->m_ghosts, (double)st->ghosts);
        if (!w->resume_counted && strcmp(st->resume, "none") && strcmp(st->resume, "resuming")) {
            s_count_resume(self, st->resume);
            w->resume_counted = true;
        }
    }
    pthread_mutex_unlock(&self->lock);
}

bool collector_node_ready(void *arg, char *detail, size_t size)
{
    collector_node_t *self = arg;
    pthread_mutex_lock(&self->lock);
    bool ready = self->have_list;
    if (ready)
        snprintf(detail, size, "%zu workers", self->nworkers);
    else
        snprintf(detail, size, "waiting for the policy's worker list");
    pthread_mutex_unlock(&self->lock);
    return ready;
}

static void s_debug_workers(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp)
{
    (void)req;
    collector_node_t *self = arg;
    cJSON *root = cJSON_CreateObject();
    uint64_t now = ipl_mono_ms();
    pthread_mutex_lock(&self->lock);
    cJSON_AddBoolToObject(root, "have_worker_list", self->have_list);
    if (self->ckpt_dir)
        cJSON_AddStringToObject(root, "checkpoint_dir", self->ckpt_dir);
    else
        cJSON_AddNullToObject(root, "checkpoint_dir");
    cJSON_AddStringToObject(root, "source", self->policy ? "policy" : "static");
    if (self->policy) cJSON_AddNumberToObject(root, "policy_version", (double)self->policy_version);
    cJSON *aggs = cJSON_AddArrayToObject(root, "aggregators");
    for (size_t i = 0; i < collector_upstream_count(self->upstream); i++) {
        collector_upstream_info_t info;
        collector_upstream_info(self->upstream, i, &info);
        cJSON *a = cJSON_CreateObject();
        cJSON_AddStringToObject(a, "endpoint", info.endpoint);
        cJSON_AddBoolToObject(a, "connected", info.connected);
        cJSON_AddBoolToObject(a, "resend_pending", info.resend_pending);
        cJSON_AddNumberToObject(a, "connects", (double)info.connects);
        cJSON_AddNumberToObject(a, "disconnects", (double)info.disconnects);
        cJSON_AddNumberToObject(a, "resends", (double)info.resends);
        cJSON_AddNumberToObject(a, "dropped", (double)info.dropped);
        cJSON_AddItemToArray(aggs, a);
    }
    cJSON *arr = cJSON_AddArrayToObject(root, "workers");
    for (size_t i = 0; i < self->nworkers; i++) {
        s_worker_t *w = self->workers[i];
        const collector_stream_stats_t *st = collector_stream_stats(w->stream);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", w->spec.name);
        cJSON_AddStringToObject(o, "url", w->spec.url);
        cJSON_AddStringToObject(o, "kv_endpoint", w->spec.kv_endpoint);
        cJSON_AddStringToObject(o, "replay_endpoint", w->spec.replay_endpoint);
        cJSON_AddStringToObject(o, "metrics_url", w->spec.metrics_url);
        cJSON_AddBoolToObject(o, "subscribed", w->sub != NULL);
        /* kv_state: as the collector sees it (recovering included); wire_kv_state: as sent */
        cJSON_AddStringToObject(o, "kv_state", collector_kv_state_name(s_state(w)));
        cJSON_AddStringToObject(o, "wire_kv_state", collector_kv_state_name(s_kv_state(w)));
        cJSON_AddStringToObject(o, "kv_state_reason", w->sub ? st->why : "not_subscribed");
        cJSON_AddNumberToObject(o, "kv_state_seconds", (double)s_state_age_ms(w, now) / 1000.0);
        if (st->state == COLLECTOR_STATE_RECOVERING && st->has_recover_seq)
            cJSON_AddNumberToObject(o, "recovering_since_seq", (double)st->recover_seq);
        else
            cJSON_AddNullToObject(o, "recovering_since_seq");
        cJSON_AddBoolToObject(o, "replaying", st->replaying);
        cJSON_AddNumberToObject(o, "pending_batches", (double)st->pending);
        if (st->retry_at_ms)
            cJSON_AddNumberToObject(o, "retry_in_ms",
                                    st->retry_at_ms > now ? (double)(st->retry_at_ms - now) : 0);
        else
            cJSON_AddNullToObject(o, "retry_in_ms");
        cJSON_AddStringToObject(o, "health", !w->scraped ? "unknown" : w->up ? "up" : "down");
        cJSON_AddNumberToObject(o, "epoch", (double)st->epoch);
        if (st->has_seq)
            cJSON_AddNumberToObject(o, "last_seq", (double)st->last_seq);
        else
            cJSON_AddNullToObject(o, "last_seq");
        cJSON_AddNumberToObject(o, "batches", (double)st->batches);
        cJSON_AddNumberToObject(o, "events", (double)st->events);
        cJSON_AddNumberToObject(o, "blocks_stored", (double)st->blocks_stored);
        cJSON_AddNumberToObject(o, "blocks_removed", (double)st->blocks_removed);
        cJSON_AddNumberToObject(o, "clears", (double)st->clears);
        cJSON_AddNumberToObject(o, "gaps", (double)st->gaps);
        cJSON_AddNumberToObject(o, "missed_batches", (double)st->missed_batches);
        cJSON_AddNumberToObject(o, "restarts", (double)st->restarts);
        cJSON_AddNumberToObject(o, "unknown_parents", (double)st->unknown_parents);
        cJSON_AddNumberToObject(o, "unknown_removed", (double)st->unknown_removed);
        cJSON_AddNumberToObject(o, "skipped_events", (double)st->skipped_events);
        cJSON_AddNumberToObject(o, "private_blocks", (double)st->private_blocks);
        cJSON_AddNumberToObject(o, "decode_errors", (double)st->decode_errors);
        cJSON_AddNumberToObject(o, "duplicates", (double)st->duplicates);
        cJSON_AddNumberToObject(o, "replays", (double)st->replays);
        cJSON_AddNumberToObject(o, "replays_ok", (double)st->replays_ok);
        cJSON_AddNumberToObject(o, "replays_failed", (double)st->replays_failed);
        cJSON_AddNumberToObject(o, "replayed_batches", (double)st->replayed_batches);
        cJSON_AddNumberToObject(o, "degradations", (double)st->degradations);
        cJSON_AddNumberToObject(o, "retries", (double)st->retries);
        cJSON_AddNumberToObject(o, "mapped_blocks", (double)st->mapped);
        cJSON_AddNumberToObject(o, "ghost_blocks", (double)st->ghosts);
        cJSON_AddNumberToObject(o, "recovered_blocks", (double)st->promoted);
        cJSON_AddNumberToObject(o, "ghost_removed", (double)st->ghost_removed);
        cJSON *ck = cJSON_AddObjectToObject(o, "checkpoint");
        cJSON_AddStringToObject(ck, "resume", st->resume);
        cJSON_AddBoolToObject(ck, "enabled", self->ckpt_dir != NULL);
        if (w->ckpt_has_seq)
            cJSON_AddNumberToObject(ck, "saved_seq", (double)w->ckpt_seq);
        else
            cJSON_AddNullToObject(ck, "saved_seq");
        if (w->ckpt_ms)
            cJSON_AddNumberToObject(ck, "saved_age_ms", (double)(now - w->ckpt_ms));
        else
            cJSON_AddNullToObject(ck, "saved_age_ms");
        cJSON_AddNumberToObject(ck, "writes", (double)w->ckpt_writes);
        cJSON_AddNumberToObject(ck, "failures", (double)w->ckpt_failures);
        cJSON_AddStringToObject(ck, "last_error", w->ckpt_error);
        cJSON_AddNumberToObject(o, "scrapes_ok", (double)w->scrapes_ok);
        cJSON_AddNumberToObject(o, "scrapes_failed", (double)w->scrapes_failed);
        if (w->scraped)
            cJSON_AddNumberToObject(o, "last_scrape_age_ms", (double)(now - w->scrape_ms));
        else
            cJSON_AddNullToObject(o, "last_scrape_age_ms");
        cJSON_AddStringToObject(o, "last_error", w->last_error);
        cJSON *load = cJSON_AddObjectToObject(o, "load");
        cJSON_AddNumberToObject(load, "running", w->sample.running);
        cJSON_AddNumberToObject(load, "waiting", w->sample.waiting);
        cJSON_AddNumberToObject(load, "kv_usage", w->sample.kv_usage);
        cJSON_AddNumberToObject(load, "block_size", (double)w->sample.block_size);
        cJSON_AddNumberToObject(load, "num_blocks", (double)w->sample.num_blocks);
        cJSON_AddItemToArray(arr, o);
    }
    pthread_mutex_unlock(&self->lock);
    ipl_http_resp_json(resp, 200, &root);
}

void collector_node_routes(collector_node_t *self, ipl_httpd_t *httpd)
{
    assert(self);
    if (httpd) ipl_httpd_route(httpd, "GET", "/debug/workers", s_debug_workers, self);
}

/* ------------------------------------------------------------------------------------------ */
/* life cycle and loop */

/* The comma-separated --aggregator list (ipl_split) → collector_upstream, which reports an
 * empty list or too many endpoints. */
static int s_connect_upstream(collector_node_t *self, const char *list, char *err, size_t errlen)
{
    char *eps[COLLECTOR_UPSTREAM_MAX];
    int count = ipl_split_dup(list, eps, COLLECTOR_UPSTREAM_MAX);
    int rc = count < 0 ? count : 0;
    size_t n = count < 0 ? 0 : (size_t)count;
    if (rc == 0) {
        self->upstream =
            collector_upstream_new((const char *const *)eps, n, self->metrics, err, errlen);
        self->resend_buf = malloc(S_RESEND_CHUNK * sizeof *self->resend_buf);
        if (self->upstream && !self->resend_buf) rc = IPL_E_NOMEM;
        if (!self->upstream) rc = IPL_E_INVAL;
    }
    if (rc == IPL_E_NOMEM) snprintf(err, errlen, "out of memory");
    for (size_t i = 0; i < n && i < COLLECTOR_UPSTREAM_MAX; i++)
        free(eps[i]);
    return rc;
}

collector_node_t *collector_node_new(const collector_config_t *config, ipl_metrics_t *metrics,
                                     char *err, size_t errlen)
{
    assert(config && metrics && err);
    collector_node_t *self = calloc(1, sizeof *self);
    if (!self) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&self->lock, NULL);
    self->metrics = metrics;
    self->interval_ms = config->scrape_interval_ms > 0 ? (uint64_t)config->scrape_interval_ms : 100;
    self->m_workers = ipl_metrics_gauge(metrics, "inferplane_collector_workers",
                                        "Workers this collector follows.", NULL);
    if (config->checkpoint_dir && *config->checkpoint_dir) {
        self->ckpt_dir = strdup(config->checkpoint_dir);
        if (!self->ckpt_dir) {
            snprintf(err, errlen, "out of memory");
            collector_node_destroy(&self);
            return NULL;
        }
        self->ckpt_interval_ms =
            config->checkpoint_interval_ms > 0 ? (uint64_t)config->checkpoint_interval_ms : 2000;
        const char *help = "Checkpoint files written, by result.";
        self->m_ckpt_ok = ipl_metrics_counter(
            metrics, "inferplane_collector_checkpoint_writes_total", help, "result=\"ok\"");
        self->m_ckpt_failed = ipl_metrics_counter(
            metrics, "inferplane_collector_checkpoint_writes_total", help, "result=\"failed\"");
        for (size_t i = 0; i < S_NRESUME; i++) {
            char labels[64];
            snprintf(labels, sizeof labels, "result=\"%s\"", s_resume_results[i]);
            self->m_resumes[i] = ipl_metrics_counter(
                metrics, "inferplane_collector_checkpoint_resumes_total",
                "Workers resumed from a checkpoint at start-up, by what the replay from it "
                "showed (proven, continued: exact at once; evicted: recovering; restarted, "
                "discarded: rebuilt; failed: not proven; corrupt: the file was ignored).",
                labels);
        }
    }
    const char *reasons[] = {"truncated", "wrong_type",     "out_of_range", "unknown_type",
                             "invalid",   "trailing_bytes", "bad_frames"};
    ipl_drops_register(metrics, reasons, sizeof reasons / sizeof reasons[0]);
    for (size_t i = 0; i < sizeof reasons / sizeof reasons[0]; i++) {
        char labels[64];
        snprintf(labels, sizeof labels, "reason=\"%s\"", reasons[i]);
        ipl_metrics_counter(metrics, "inferplane_collector_decode_errors_total",
                            "KV-event messages from workers that could not be used, by reason.",
                            labels);
    }
    long timeout = (long)(self->interval_ms * 10);
    if (timeout < 500) timeout = 500;
    if (timeout > 5000) timeout = 5000;
    self->scrape = collector_scrape_new(s_on_scrape, self, timeout);
    if (!self->scrape) {
        snprintf(err, errlen, "cannot initialise libcurl");
        collector_node_destroy(&self);
        return NULL;
    }
    if (s_connect_upstream(self, config->aggregators, err, errlen) != 0) {
        collector_node_destroy(&self);
        return NULL;
    }
    if (config->worker_prefix && *config->worker_prefix)
        self->prefix = strdup(config->worker_prefix);
    if (config->node_name && *config->node_name) self->node_name = strdup(config->node_name);
    if (config->workers && *config->workers) {
        collector_worker_spec_t *specs;
        size_t n;
        if (collector_worker_specs_parse(config->workers, &specs, &n, err, errlen) != 0) {
            collector_node_destroy(&self);
            return NULL;
        }
        s_reconcile(self, specs, n);
        collector_worker_specs_free(&specs, n);
    } else {
        self->policy = ipl_policy_view_new(config->policy_sub, config->policy_req);
        if (!self->policy) {
            snprintf(err, errlen,
                     "cannot follow the policy at --policy-sub \"%s\" / "
                     "--policy-req \"%s\"",
                     config->policy_sub ? config->policy_sub : "",
                     config->policy_req ? config->policy_req : "");
            collector_node_destroy(&self);
            return NULL;
        }
    }
    ipl_metrics_on_collect(metrics, s_collect, self);
    uint64_t now = ipl_mono_ms();
    self->next_scrape_ms = now;
    self->next_policy_ms = now;
    self->next_ckpt_ms = now + self->ckpt_interval_ms;
    return self;
}

void collector_node_destroy(collector_node_t **self_p)
{
    if (!self_p || !*self_p) return;
    collector_node_t *self = *self_p;
    s_save_all(self, false); /* at shutdown: what changed since the last round */
    ipl_policy_view_destroy(&self->policy);
    for (size_t i = 0; i < self->nworkers; i++)
        s_worker_free(self, &self->workers[i]);
    free(self->workers);
    collector_scrape_destroy(&self->scrape);
    collector_upstream_destroy(&self->upstream);
    free(self->resend_buf);
    free(self->prefix);
    free(self->node_name);
    free(self->items);
    free(self->ckpt_dir);
    pthread_mutex_destroy(&self->lock);
    free(self);
    *self_p = NULL;
}

size_t collector_node_nworkers(collector_node_t *self)
{
    pthread_mutex_lock(&self->lock);
    size_t n = self->nworkers;
    pthread_mutex_unlock(&self->lock);
    return n;
}

static int s_items_reserve(collector_node_t *self, size_t n)
{
    if (n <= self->items_cap) return 0;
    zmq_pollitem_t *items = realloc(self->items, n * sizeof *items);
    if (!items) return IPL_E_NOMEM;
    self->items = items;
    self->items_cap = n;
    return 0;
}

/* Under the lock, every round: a LOAD as soon as a worker's exactness changed (deciders stop
 * trusting a DEGRADED index at once, not at the next scrape), and pending resends. */
static void s_after_round(collector_node_t *self)
{
    for (size_t i = 0; i < self->nworkers; i++) {
        s_worker_t *w = self->workers[i];
        if (w->scraped && s_kv_state(w) != w->sent_kv_state) s_send_load(self, w);
    }
    collector_upstream_resend(self->upstream, s_resend, self);
}

int collector_node_poll(collector_node_t *self, int timeout_ms, int stop_fd)
{
    assert(self);
    uint64_t now = ipl_mono_ms();
    if (self->policy && now >= self->next_policy_ms) {
        s_check_policy(self);
        self->next_policy_ms = now + S_POLICY_CHECK_MS;
    }
    if (now >= self->next_scrape_ms) {
        s_scrape_round(self);
        self->next_scrape_ms = now + self->interval_ms;
    }
    if (self->ckpt_dir && now >= self->next_ckpt_ms) {
        s_save_all(self, false);
        self->next_ckpt_ms = now + self->ckpt_interval_ms;
    }
    pthread_mutex_lock(&self->lock);
    for (size_t i = 0; i < self->nworkers; i++) /* replay timeouts, DEGRADED retries */
        collector_stream_tick(self->workers[i]->stream, now);
    s_after_round(self);
    pthread_mutex_unlock(&self->lock);

    /* wait for: stop fd, every worker's SUB and replay DEALER, the aggregator connection
     * monitors, curl's sockets; until the next timer */
    int64_t wait = (int64_t)(self->next_scrape_ms - now);
    if (self->policy && (int64_t)(self->next_policy_ms - now) < wait)
        wait = (int64_t)(self->next_policy_ms - now);
    long curl_wait = collector_scrape_timeout(self->scrape);
    if (curl_wait >= 0 && curl_wait < wait) wait = curl_wait;
    if (timeout_ms >= 0 && timeout_ms < wait) wait = timeout_ms;
    if (wait > S_MAX_WAIT_MS) wait = S_MAX_WAIT_MS;
    if (wait < 0) wait = 0;

    size_t ncurl_max = 64;
    if (s_items_reserve(self, 1 + 2 * self->nworkers + COLLECTOR_UPSTREAM_MAX + ncurl_max) != 0)
        return IPL_E_IO;
    size_t n = 0, first_sub = 0; /* the stop fd goes last (ipl_loop_poll) */
    for (size_t i = 0; i < self->nworkers; i++) {
        /* a worker without a socket keeps its slot with a NULL socket and no events */
        zsock_t *sub = self->workers[i]->sub;
        self->items[n++] =
            (zmq_pollitem_t){sub ? zsock_resolve(sub) : NULL, -1, (short)(sub ? ZMQ_POLLIN : 0), 0};
    }
    for (size_t i = 0; i < self->nworkers; i++) {
        zsock_t *replay = self->workers[i]->replay;
        self->items[n++] = (zmq_pollitem_t){replay ? zsock_resolve(replay) : NULL, -1,
                                            (short)(replay ? ZMQ_POLLIN : 0), 0};
    }
    size_t first_mon = n;
    n += collector_upstream_pollitems(self->upstream, self->items + n, COLLECTOR_UPSTREAM_MAX);
    size_t first_curl = n;
    n += collector_scrape_pollitems(self->scrape, self->items + n, ncurl_max);
    /* zmq_poll rejects items with neither socket nor fd: give those a harmless stand-in */
    for (size_t i = first_sub; i < first_mon; i++)
        if (!self->items[i].socket)
            self->items[i] = (zmq_pollitem_t){NULL, stop_fd >= 0 ? stop_fd : 0, 0, 0};
    int rc = ipl_loop_poll(self->items, (int)n, stop_fd, (long)wait);
    if (rc < 0) return rc;
    pthread_mutex_lock(&self->lock);
    if (rc > 0) {
        for (size_t i = 0; i < self->nworkers; i++)
            if (self->items[first_sub + i].revents & ZMQ_POLLIN)
                s_drain_sub(self, self->workers[i]);
        collector_upstream_dispatch(self->upstream, self->items + first_mon,
                                    first_curl - first_mon);
    }
    /* replays, also the ones a SUB batch just started (non-blocking reads) */
    for (size_t i = 0; i < self->nworkers; i++)
        if (self->workers[i]->replay) s_drain_replay(self, self->workers[i]);
    s_after_round(self);
    pthread_mutex_unlock(&self->lock);
    /* curl: its sockets' readiness and its timer (even when nothing was ready) */
    collector_scrape_dispatch(self->scrape, self->items + first_curl, n - first_curl);
    return 0;
}

static int s_round(void *self, long timeout_ms, int stop_fd)
{
    return collector_node_poll(self, (int)timeout_ms, stop_fd);
}

int collector_node_run(collector_node_t *self)
{
    assert(self);
    return ipl_loop_run_rounds(s_round, self, 1000);
}
