/*
 * aggregator_server — sockets, receive loop, publication, snapshots, /debug/state.
 */
#include "aggregator_server.h"

#include <assert.h>
#include <cjson/cJSON.h>
#include <czmq.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipl_clock.h"
#include "ipl_curve.h"
#include "ipl_drops.h"
#include "ipl_error.h"
#include "ipl_log.h"
#include "ipl_loop.h"
#include "ipl_zmq.h"

#define S_MAX_FRAME        (16 << 20) /* a KV_EVENT of 65,536 hashes is ~600 KB */
#define S_DRAIN_BUDGET     4096       /* frames handled per socket per poll round */
#define S_HWM              100000     /* messages queued per peer before PUB drops / ROUTER fails */
#define S_DEBUG_MAX_HASHES 100000

enum { S_PULL = 0, S_PUB = 1, S_SNAPSHOT = 2 };

struct aggregator_server {
    aggregator_state_t *state;
    pthread_mutex_t lock; /* guards state */
    zsock_t *sock[3];
    char *endpoint[3];
    uint64_t heartbeat_ms, stale_ms;
    uint64_t next_heartbeat_ms;
    ipl_metrics_t *metrics;
    ipl_metric_t *applied_stored, *applied_removed, *applied_cleared, *applied_load;
    ipl_metric_t *block_ops, *published, *publish_failed, *heartbeats;
    ipl_metric_t *snapshots, *snapshot_failed;
    ipl_metric_t *g_memberships, *g_blocks, *g_workers, *g_seq, *g_memory;
    ipl_metric_t *g_kv_state[3];
    uint64_t incarnation; /* wall-clock ms at start: tells a restarted aggregator apart */
    uint64_t started_ms;  /* monotonic */
};

static const char *s_flag[3] = {"--pull", "--pub", "--snapshot"};

/* ------------------------------------------------------------------------------------------ */
/* metrics */

static void s_drop(aggregator_server_t *self, const char *socket, const char *reason, size_t bytes)
{
    ipl_drops_count(self->metrics, reason, "socket=%s bytes=%zu", socket, bytes);
}

static void s_collect(void *arg, ipl_metrics_t *metrics)
{
    (void)metrics;
    aggregator_server_t *self = arg;
    pthread_mutex_lock(&self->lock);
    const ipl_index_t *idx = aggregator_state_index(self->state);
    ipl_metric_set(self->g_memberships, (double)ipl_index_memberships(idx));
    ipl_metric_set(self->g_blocks, (double)ipl_index_blocks(idx));
    ipl_metric_set(self->g_workers, (double)ipl_index_nworkers(idx));
    ipl_metric_set(self->g_seq, (double)aggregator_state_seq(self->state));
    ipl_metric_set(self->g_memory, (double)ipl_index_memory_bytes(idx));
    size_t counts[3];
    aggregator_state_kv_counts(self->state, counts);
    for (int k = 0; k < 3; k++)
        ipl_metric_set(self->g_kv_state[k], (double)counts[k]);
    pthread_mutex_unlock(&self->lock);
}

static void s_metrics_init(aggregator_server_t *self)
{
    ipl_metrics_t *m = self->metrics;
    const char *ev = "inferplane_aggregator_events_applied_total";
    const char *ev_help = "KV_EVENT messages applied to the index, by op.";
    self->applied_stored = ipl_metrics_counter(m, ev, ev_help, "op=\"stored\"");
    self->applied_removed = ipl_metrics_counter(m, ev, ev_help, "op=\"removed\"");
    self->applied_cleared = ipl_metrics_counter(m, ev, ev_help, "op=\"cleared\"");
    self->applied_load = ipl_metrics_counter(m, "inferplane_aggregator_loads_applied_total",
                                             "LOAD messages applied.", NULL);
    self->block_ops = ipl_metrics_counter(m, "inferplane_aggregator_block_ops_total",
                                          "Block hashes carried by applied KV_EVENTs.", NULL);
    self->published = ipl_metrics_counter(m, "inferplane_aggregator_published_total",
                                          "Deltas published on the PUB socket.", NULL);
    self->publish_failed =
        ipl_metrics_counter(m, "inferplane_aggregator_publish_failed_total",
                            "Deltas that could not be published (socket error).", NULL);
    self->heartbeats = ipl_metrics_counter(m, "inferplane_aggregator_heartbeats_total",
                                           "Heartbeat rounds (a LOAD per worker).", NULL);
    self->snapshots = ipl_metrics_counter(m, "inferplane_aggregator_snapshots_total",
                                          "Snapshots sent completely.", NULL);
    self->snapshot_failed =
        ipl_metrics_counter(m, "inferplane_aggregator_snapshot_failed_total",
                            "Snapshots abandoned (peer gone or its queue full).", NULL);
    self->g_memberships = ipl_metrics_gauge(m, "inferplane_aggregator_memberships",
                                            "(block, worker) pairs in the index.", NULL);
    self->g_blocks = ipl_metrics_gauge(m, "inferplane_aggregator_blocks",
                                       "Distinct blocks held by any worker.", NULL);
    self->g_workers = ipl_metrics_gauge(m, "inferplane_aggregator_workers",
                                        "Workers known to the aggregator.", NULL);
    self->g_seq = ipl_metrics_gauge(m, "inferplane_aggregator_state_seq",
                                    "Current state sequence number.", NULL);
    self->g_memory = ipl_metrics_gauge(m, "inferplane_aggregator_index_memory_bytes",
                                       "Memory used by the prefix index.", NULL);
    const char *kv_names[3] = {"kv_state=\"exact\"", "kv_state=\"syncing\"",
                               "kv_state=\"degraded\""};
    for (int k = 0; k < 3; k++)
        self->g_kv_state[k] = ipl_metrics_gauge(
            m, "inferplane_aggregator_workers_by_kv_state",
            "Workers by the exactness of their KV state (degraded: load-only routing).",
            kv_names[k]);
    /* pre-create the common drop reasons so dashboards see zeros */
    const char *reasons[] = {"truncated",    "wrong_type", "bad_version",
                             "unknown_type", "invalid",    "multipart"};
    ipl_drops_register(m, reasons, sizeof reasons / sizeof reasons[0]);
    ipl_metrics_on_collect(m, s_collect, self);
}

/* ------------------------------------------------------------------------------------------ */
/* life cycle */

static zsock_t *s_bind(int type, const char *endpoint, const char *flag, char *err, size_t errlen)
{
    zsock_t *sock = zsock_new(type);
    if (!sock) {
        snprintf(err, errlen, "cannot create a ZeroMQ socket for %s", flag);
        return NULL;
    }
    zsock_set_linger(sock, 0);
    zsock_set_maxmsgsize(sock, S_MAX_FRAME);
    zsock_set_sndhwm(sock, S_HWM);
    zsock_set_rcvhwm(sock, S_HWM);
    if (type == ZMQ_ROUTER)
        zsock_set_router_mandatory(sock, 1); /* a gone peer is an error, not a silent drop */
    ipl_curve_server(sock); /* CURVE with --curve-dir (ipl_curve.h) */
    if (ipl_zmq_bind(zsock_resolve(sock), endpoint, flag, NULL, "use a free tcp://host:port", err,
                     errlen) != 0)
        zsock_destroy(&sock);
    return sock;
}

aggregator_server_t *aggregator_server_new(const aggregator_config_t *config,
                                           ipl_metrics_t *metrics, char *err, size_t errlen)
{
    assert(config && metrics && err);
    aggregator_server_t *self = calloc(1, sizeof *self);
    if (!self) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&self->lock, NULL);
    self->metrics = metrics;
    self->heartbeat_ms = config->heartbeat_ms ? config->heartbeat_ms : 1000;
    self->stale_ms = config->stale_ms ? config->stale_ms : 5000;
    self->next_heartbeat_ms = ipl_mono_ms() + self->heartbeat_ms;
    self->incarnation = ipl_wall_ms();
    self->started_ms = ipl_mono_ms();
    self->state = aggregator_state_new();
    if (!self->state) {
        snprintf(err, errlen, "out of memory");
        aggregator_server_destroy(&self);
        return NULL;
    }
    const char *eps[3] = {config->pull, config->pub, config->snapshot};
    const int types[3] = {ZMQ_PULL, ZMQ_PUB, ZMQ_ROUTER};
    for (int i = 0; i < 3; i++) {
        self->sock[i] = s_bind(types[i], eps[i], s_flag[i], err, errlen);
        if (!self->sock[i]) {
            aggregator_server_destroy(&self);
            return NULL;
        }
        self->endpoint[i] = zsock_last_endpoint(self->sock[i]);
    }
    s_metrics_init(self);
    return self;
}

void aggregator_server_destroy(aggregator_server_t **self_p)
{
    if (!self_p || !*self_p) return;
    aggregator_server_t *self = *self_p;
    for (int i = 0; i < 3; i++) {
        zsock_destroy(&self->sock[i]);
        free(self->endpoint[i]);
    }
    aggregator_state_destroy(&self->state);
    pthread_mutex_destroy(&self->lock);
    free(self);
    *self_p = NULL;
}

const char *aggregator_server_endpoint(const aggregator_server_t *self, int which)
{
    assert(self);
    return (which >= 0 && which < 3) ? self->endpoint[which] : NULL;
}

aggregator_state_t *aggregator_server_state(aggregator_server_t *self)
{
    assert(self);
    return self->state;
}

/* ------------------------------------------------------------------------------------------ */
/* ingest and publication */

/* Publishes one delta on PUB. A PUB socket never blocks: at its HWM it drops, and the
 * subscriber sees a sequence gap and resyncs from a snapshot. */
static int s_publish(void *arg, int type, const void *body)
{
    aggregator_server_t *self = arg;
    int rc = ipl_msg_send(zsock_resolve(self->sock[S_PUB]), type, body, ZMQ_DONTWAIT);
    ipl_metric_inc(rc == 0 ? self->published : self->publish_failed);
    return 0; /* keep going: a failed publication is a gap for subscribers, not for us */
}

static void s_count_applied(aggregator_server_t *self, const ipl_msg_t *msg)
{
    if (msg->type == IPL_MSG_LOAD) {
        ipl_metric_inc(self->applied_load);
        return;
    }
    const ipl_kv_event_t *ev = &msg->u.kv_event;
    ipl_metric_inc(ev->op == IPL_KV_OP_STORED    ? self->applied_stored
                   : ev->op == IPL_KV_OP_REMOVED ? self->applied_removed
                                                 : self->applied_cleared);
    ipl_metric_add(self->block_ops, (double)ev->hashes_len);
}

static void s_ingest(aggregator_server_t *self, const void *buf, size_t len)
{
    ipl_msg_t msg;
    memset(&msg, 0, sizeof msg);
    int rc = ipl_msg_decode(buf, len, &msg);
    if (rc != 0) {
        s_drop(self, "pull", ipl_strerror(rc), len);
        return;
    }
    pthread_mutex_lock(&self->lock);
    rc = aggregator_state_apply(self->state, &msg, ipl_mono_ms());
    if (rc == 0) s_publish(self, msg.type, &msg.u); /* under the lock: deltas leave in seq order */
    pthread_mutex_unlock(&self->lock);
    if (rc == 0)
        s_count_applied(self, &msg);
    else
        s_drop(self, "pull", ipl_strerror(rc), len);
    ipl_msg_clear(&msg);
}

static void s_drain_pull(aggregator_server_t *self)
{
    void *sock = zsock_resolve(self->sock[S_PULL]);
    for (int budget = S_DRAIN_BUDGET; budget > 0; budget--) {
        zmq_msg_t a;
        int kept;
        size_t parts = ipl_zmq_recv_parts(sock, &a, 1, &kept);
        if (parts == 1)
            s_ingest(self, zmq_msg_data(&a), zmq_msg_size(&a));
        else if (parts > 1)
            s_drop(self, "pull", "multipart", zmq_msg_size(&a));
        ipl_zmq_close_parts(&a, kept);
        if (parts == 0) return;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* snapshots */

typedef struct {
    void *sock;
    const void *id;
    size_t id_len;
    int rc;
} s_reply_t;

static int s_reply(void *arg, int type, const void *body)
{
    s_reply_t *r = arg;
    if (zmq_send(r->sock, r->id, r->id_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) {
        r->rc = IPL_E_IO;
        return r->rc;
    }
    r->rc = ipl_msg_send(r->sock, type, body, ZMQ_DONTWAIT);
    return r->rc;
}

static void s_snapshot(aggregator_server_t *self, const zmq_msg_t *id, const void *buf, size_t len)
{
    ipl_msg_t msg;
    memset(&msg, 0, sizeof msg);
    int rc = ipl_msg_decode(buf, len, &msg);
    if (rc == 0 && msg.type != IPL_MSG_SNAPSHOT_REQ) rc = IPL_E_UNKNOWN;
    ipl_msg_clear(&msg);
    if (rc != 0) {
        s_drop(self, "snapshot", ipl_strerror(rc), len);
        return;
    }
    s_reply_t r = {zsock_resolve(self->sock[S_SNAPSHOT]), zmq_msg_data((zmq_msg_t *)id),
                   zmq_msg_size((zmq_msg_t *)id), 0};
    ipl_snapshot_end_t end;
    uint64_t t0 = ipl_mono_us();
    /* Under the lock, and on the thread that applies deltas: the snapshot is exactly the
     * state at end.seq. */
    pthread_mutex_lock(&self->lock);
    rc = aggregator_state_snapshot(self->state, AGGREGATOR_SNAPSHOT_CHUNK, s_reply, &r, &end);
    pthread_mutex_unlock(&self->lock);
    if (rc == 0) rc = s_reply(&r, IPL_MSG_SNAPSHOT_END, &end);
    if (rc != 0) {
        ipl_metric_inc(self->snapshot_failed);
        IPL_LOG_EVERY(5, IPL_LOG_WARN, "snapshot_failed", "error=%s errno=%d", ipl_strerror(rc),
                      zmq_errno());
        return;
    }
    ipl_metric_inc(self->snapshots);
    IPL_DEBUG("snapshot_sent", "seq=%" PRIu64 " workers=%" PRIu64 " blocks=%" PRIu64 " us=%" PRIu64,
              end.seq, end.workers, end.blocks, ipl_mono_us() - t0);
}

static void s_drain_snapshot(aggregator_server_t *self)
{
    void *sock = zsock_resolve(self->sock[S_SNAPSHOT]);
    for (int budget = 64; budget > 0; budget--) {
        zmq_msg_t part[2]; /* [identity, SNAPSHOT_REQ] */
        int kept;
        size_t parts = ipl_zmq_recv_parts(sock, part, 2, &kept);
        if (parts == 2)
            s_snapshot(self, &part[0], zmq_msg_data(&part[1]), zmq_msg_size(&part[1]));
        else if (parts > 2)
            s_drop(self, "snapshot", "multipart", zmq_msg_size(&part[1]));
        else if (parts == 1)
            s_drop(self, "snapshot", "invalid", zmq_msg_size(&part[0])); /* no identity */
        ipl_zmq_close_parts(part, kept);
        if (parts == 0) return;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* loop */

static void s_heartbeat(aggregator_server_t *self, uint64_t now_ms)
{
    pthread_mutex_lock(&self->lock);
    aggregator_state_heartbeat(self->state, now_ms, self->stale_ms, s_publish, self);
    pthread_mutex_unlock(&self->lock);
    ipl_metric_inc(self->heartbeats);
}

// One round of the loop (an ipl_loop_round_fn): aggregator_server_poll.
static int s_round(void *arg, long timeout_ms, int stop_fd)
{
    aggregator_server_t *self = arg;
    uint64_t now = ipl_mono_ms();
    if (now >= self->next_heartbeat_ms) {
        s_heartbeat(self, now);
        self->next_heartbeat_ms = now + self->heartbeat_ms;
    }
    uint64_t until_hb = self->next_heartbeat_ms - now;
    if (timeout_ms < 0 || (uint64_t)timeout_ms > until_hb) timeout_ms = (long)until_hb;
    zmq_pollitem_t items[3] = {
        {zsock_resolve(self->sock[S_PULL]), 0, ZMQ_POLLIN, 0},
        {zsock_resolve(self->sock[S_SNAPSHOT]), 0, ZMQ_POLLIN, 0},
    };
    int n = ipl_loop_poll(items, 2, stop_fd, timeout_ms);
    if (n < 0) return n;
    if (items[0].revents & ZMQ_POLLIN) s_drain_pull(self);
    if (items[1].revents & ZMQ_POLLIN) s_drain_snapshot(self);
    return 0;
}

int aggregator_server_poll(aggregator_server_t *self, int timeout_ms, int stop_fd)
{
    assert(self);
    return s_round(self, timeout_ms, stop_fd);
}

int aggregator_server_run(aggregator_server_t *self)
{
    assert(self);
    return ipl_loop_run_rounds(s_round, self, 1000); // until stopping
}

/* ------------------------------------------------------------------------------------------ */
/* /debug/state */

static const char *s_health_name(uint64_t h)
{
    return h == IPL_HEALTH_UP ? "up" : h == IPL_HEALTH_DOWN ? "down" : "unknown";
}

static const char *s_kv_state_name(uint64_t s)
{
    return s == IPL_KV_EXACT ? "exact" : s == IPL_KV_SYNCING ? "syncing" : "degraded";
}

typedef struct {
    cJSON *array;
    size_t left;
} s_hash_list_t;

static int s_hash_json(void *arg, uint64_t hash)
{
    s_hash_list_t *l = arg;
    if (l->left == 0) return 1;
    char hex[24];
    snprintf(hex, sizeof hex, "0x%016" PRIx64, hash);
    cJSON_AddItemToArray(l->array, cJSON_CreateString(hex));
    l->left--;
    return 0;
}

static cJSON *s_state_json(aggregator_server_t *self, size_t max_hashes)
{
    cJSON *root = cJSON_CreateObject();
    uint64_t now = ipl_mono_ms();
    pthread_mutex_lock(&self->lock);
    const ipl_index_t *idx = aggregator_state_index(self->state);
    cJSON_AddNumberToObject(root, "incarnation", (double)self->incarnation);
    cJSON_AddNumberToObject(root, "uptime_ms", (double)(now - self->started_ms));
    cJSON_AddNumberToObject(root, "seq", (double)aggregator_state_seq(self->state));
    cJSON_AddNumberToObject(root, "blocks", (double)ipl_index_blocks(idx));
    cJSON_AddNumberToObject(root, "memberships", (double)ipl_index_memberships(idx));
    cJSON_AddNumberToObject(root, "index_memory_bytes", (double)ipl_index_memory_bytes(idx));
    size_t counts[3];
    aggregator_state_kv_counts(self->state, counts);
    cJSON *kv = cJSON_AddObjectToObject(root, "kv_states");
    for (int k = 0; k < 3; k++)
        cJSON_AddNumberToObject(kv, s_kv_state_name((uint64_t)k), (double)counts[k]);
    cJSON *workers = cJSON_AddArrayToObject(root, "workers");
    int n = aggregator_state_nworkers(self->state);
    for (int id = 0; id < n; id++) {
        aggregator_worker_info_t w;
        if (aggregator_state_worker(self->state, id, &w) != 0) continue;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", w.name);
        cJSON_AddNumberToObject(o, "blocks", (double)w.blocks);
        cJSON_AddStringToObject(o, "kv_state", s_kv_state_name(w.load.kv_state));
        cJSON_AddStringToObject(o, "health", s_health_name(w.load.health));
        cJSON_AddNumberToObject(o, "epoch", (double)w.epoch);
        cJSON_AddNumberToObject(o, "src_seq", (double)w.src_seq);
        cJSON_AddNumberToObject(o, "kv_events", (double)w.kv_events);
        cJSON_AddNumberToObject(o, "last_update_age_ms", (double)(now - w.updated_ms));
        if (w.has_load)
            cJSON_AddNumberToObject(o, "last_load_age_ms", (double)(now - w.load_ms));
        else
            cJSON_AddNullToObject(o, "last_load_age_ms");
        cJSON *load = cJSON_AddObjectToObject(o, "load");
        cJSON_AddNumberToObject(load, "seq", (double)w.load.seq);
        cJSON_AddNumberToObject(load, "ts_ms", (double)w.load.ts_ms);
        cJSON_AddNumberToObject(load, "running", (double)w.load.running);
        cJSON_AddNumberToObject(load, "waiting", (double)w.load.waiting);
        cJSON_AddNumberToObject(load, "kv_usage", w.load.kv_usage);
        cJSON_AddNumberToObject(load, "block_size", (double)w.load.block_size);
        cJSON_AddNumberToObject(load, "num_blocks", (double)w.load.num_blocks);
        if (max_hashes > 0) {
            s_hash_list_t l = {cJSON_AddArrayToObject(o, "hashes"), max_hashes};
            ipl_index_foreach(idx, id, s_hash_json, &l);
        }
        cJSON_AddItemToArray(workers, o);
    }
    pthread_mutex_unlock(&self->lock);
    return root;
}

static void s_debug_state(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp)
{
    aggregator_server_t *self = arg;
    size_t max_hashes = 0;
    const char *q = ipl_http_req_query(req, "hashes");
    if (q) {
        char *end;
        unsigned long long v = strtoull(q, &end, 10);
        if (*q == '\0' || *end != '\0') {
            ipl_http_resp_error(resp, 400, "invalid_request_error",
                                "hashes: expected a number of hashes per worker, e.g. ?hashes=100");
            return;
        }
        max_hashes = v > S_DEBUG_MAX_HASHES ? S_DEBUG_MAX_HASHES : (size_t)v;
    }
    cJSON *root = s_state_json(self, max_hashes);
    ipl_http_resp_json(resp, 200, &root);
}

void aggregator_server_routes(aggregator_server_t *self, ipl_httpd_t *httpd)
{
    assert(self);
    if (httpd) ipl_httpd_route(httpd, "GET", "/debug/state", s_debug_state, self);
}
