/*
 * sim_kvpub — the PUB socket and the replay ROUTER thread; the payload bytes come from
 * sim_kvwire.
 */
#include "sim_kvpub.h"

#include <assert.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "ipl_clock.h"
#include "ipl_error.h"
#include "ipl_log.h"
#include "ipl_zmq.h"

/* --- configuration ------------------------------------------------------------------------- */

static int s_copy_str(const cJSON *item, const char *key, char *dst, size_t size, char *err,
                      size_t errlen)
{
    if (cJSON_IsNull(item)) {
        dst[0] = '\0';
        return 0;
    }
    if (!cJSON_IsString(item) || strlen(item->valuestring) >= size) {
        snprintf(err, errlen,
                 "--kv-events-config: \"%s\" must be a string shorter than %zu "
                 "bytes",
                 key, size);
        return IPL_E_INVAL;
    }
    snprintf(dst, size, "%s", item->valuestring);
    return 0;
}

static int s_get_int(const cJSON *item, const char *key, int64_t min, int64_t *out, char *err,
                     size_t errlen)
{
    if (!cJSON_IsNumber(item) || item->valuedouble < (double)min || item->valuedouble > 1e12 ||
        item->valuedouble != (double)(int64_t)item->valuedouble) {
        snprintf(err, errlen, "--kv-events-config: \"%s\" must be an integer >= %lld", key,
                 (long long)min);
        return IPL_E_INVAL;
    }
    *out = (int64_t)item->valuedouble;
    return 0;
}

int sim_kvconfig_parse(const char *json, sim_kvconfig_t *out, char *err, size_t errlen)
{
    *out = (sim_kvconfig_t){.buffer_steps = 10000, .hwm = 100000};
    snprintf(out->endpoint, sizeof out->endpoint, "tcp://*:5557");
    if (!json || !*json) return 0;
    cJSON *root = cJSON_Parse(json);
    if (!cJSON_IsObject(root)) {
        snprintf(err, errlen,
                 "--kv-events-config is not a JSON object; use vLLM's form, e.g. "
                 "'{\"enable_kv_cache_events\":true,\"publisher\":\"zmq\","
                 "\"endpoint\":\"tcp://*:5557\"}'");
        cJSON_Delete(root);
        return IPL_E_INVAL;
    }
    int rc = 0;
    char publisher[32] = "";
    bool publisher_set = false;
    const cJSON *it;
    cJSON_ArrayForEach(it, root)
    {
        const char *k = it->string;
        if (strcmp(k, "enable_kv_cache_events") == 0) {
            if (!cJSON_IsBool(it)) {
                snprintf(err, errlen, "--kv-events-config: \"%s\" must be true or false", k);
                rc = IPL_E_INVAL;
            } else {
                out->enabled = cJSON_IsTrue(it);
            }
        } else if (strcmp(k, "publisher") == 0) {
            rc = s_copy_str(it, k, publisher, sizeof publisher, err, errlen);
            publisher_set = publisher[0] != '\0';
        } else if (strcmp(k, "endpoint") == 0) {
            rc = s_copy_str(it, k, out->endpoint, sizeof out->endpoint, err, errlen);
        } else if (strcmp(k, "replay_endpoint") == 0) {
            rc = s_copy_str(it, k, out->replay_endpoint, sizeof out->replay_endpoint, err, errlen);
        } else if (strcmp(k, "topic") == 0) {
            rc = s_copy_str(it, k, out->topic, sizeof out->topic, err, errlen);
        } else if (strcmp(k, "buffer_steps") == 0) {
            rc = s_get_int(it, k, 0, &out->buffer_steps, err, errlen);
        } else if (strcmp(k, "hwm") == 0) {
            rc = s_get_int(it, k, 0, &out->hwm, err, errlen);
        } /* max_queue_size and keys of other vLLM versions: accepted, no effect */
        if (rc) break;
    }
    cJSON_Delete(root);
    if (rc) return rc;
    if (publisher_set && strcmp(publisher, "zmq") != 0 && strcmp(publisher, "null") != 0) {
        snprintf(err, errlen,
                 "--kv-events-config: publisher \"%s\" is unknown (use \"zmq\" or "
                 "\"null\")",
                 publisher);
        return IPL_E_INVAL;
    }
    if (strcmp(publisher, "null") == 0) out->enabled = false;
    if (out->enabled && !out->endpoint[0]) {
        snprintf(err, errlen, "--kv-events-config: \"endpoint\" is empty");
        return IPL_E_INVAL;
    }
    return 0;
}

int sim_kv_bind_parse(const char *text, sim_kv_bind_t *out)
{
    if (text && strcmp(text, "auto") == 0)
        *out = SIM_KV_BIND_AUTO;
    else if (text && strcmp(text, "bind") == 0)
        *out = SIM_KV_BIND_BIND;
    else if (text && strcmp(text, "connect") == 0)
        *out = SIM_KV_BIND_CONNECT;
    else
        return IPL_E_INVAL;
    return 0;
}

bool sim_kv_endpoint_binds(const char *endpoint)
{
    return strchr(endpoint, '*') || strstr(endpoint, "::") || strncmp(endpoint, "ipc://", 6) == 0 ||
           strncmp(endpoint, "inproc://", 9) == 0;
}

/* --- publisher ----------------------------------------------------------------------------- */

typedef struct {
    uint64_t seq;
    uint8_t *data;
    size_t len;
} s_entry_t;

struct sim_kvpub {
    sim_kvconfig_t cfg;
    sim_kvpub_opts_t opts;
    void *ctx;
    void *pub;
    void *router; /* NULL without replay */
    pthread_mutex_t lock;
    uint64_t next_seq;
    uint64_t dropped;
    uint64_t replay_requests;
    uint64_t replay_invalid;
    s_entry_t *ring; /* buffer_steps entries, oldest at ring_head */
    size_t ring_cap, ring_len, ring_head;
    pthread_t thread;
    bool thread_started;
    int stop_pipe[2];
};

static void s_seq8(uint64_t seq, uint8_t out[8])
{
    for (int i = 0; i < 8; i++)
        out[i] = (uint8_t)(seq >> (56 - 8 * i));
}

static int s_open(sim_kvpub_t *self, char *err, size_t errlen)
{
    self->ctx = zmq_ctx_new();
    if (!self->ctx) {
        snprintf(err, errlen, "cannot create a ZeroMQ context: %s", zmq_strerror(errno));
        return IPL_E_IO;
    }
    zmq_ctx_set(self->ctx, ZMQ_IO_THREADS, 1);
    int linger = 0;
    int hwm = self->cfg.hwm > 0x7fffffff ? 0x7fffffff : (int)self->cfg.hwm;
    self->pub = zmq_socket(self->ctx, ZMQ_PUB);
    if (!self->pub) return IPL_E_IO;
    zmq_setsockopt(self->pub, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(self->pub, ZMQ_SNDHWM, &hwm, sizeof hwm);
    bool bind = self->opts.bind == SIM_KV_BIND_BIND ||
                (self->opts.bind == SIM_KV_BIND_AUTO && sim_kv_endpoint_binds(self->cfg.endpoint));
    const char *fix = "check --kv-events-config's endpoint (bind: tcp://*:PORT, connect: "
                      "tcp://HOST:PORT)";
    if (bind && ipl_zmq_bind(self->pub, self->cfg.endpoint, "the KV-event PUB socket", NULL, fix,
                             err, errlen) != 0)
        return IPL_E_IO;
    if (!bind && zmq_connect(self->pub, self->cfg.endpoint) != 0) {
        snprintf(err, errlen, "cannot connect the KV-event PUB socket to \"%s\": %s; %s",
                 self->cfg.endpoint, zmq_strerror(errno), fix);
        return IPL_E_IO;
    }
    if (!self->cfg.replay_endpoint[0]) return 0;
    self->router = zmq_socket(self->ctx, ZMQ_ROUTER);
    if (!self->router) return IPL_E_IO;
    /* A replay streams up to buffer_steps messages at once: let them all queue. */
    int rhwm = self->cfg.buffer_steps + 16 > 0x7fffffff ? 0 : (int)self->cfg.buffer_steps + 16;
    zmq_setsockopt(self->router, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(self->router, ZMQ_SNDHWM, &rhwm, sizeof rhwm);
    return ipl_zmq_bind(self->router, self->cfg.replay_endpoint, "the KV-event replay ROUTER", NULL,
                        "check --kv-events-config's replay_endpoint", err, errlen);
}

/* Sends the frames of one replay reply; the identity frame first. */
static void s_send_reply(sim_kvpub_t *self, const void *id, size_t idlen, const s_entry_t *e)
{
    static const uint8_t end_seq[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    uint8_t seq8[8];
    const void *seq = end_seq;
    if (e) {
        s_seq8(e->seq, seq8);
        seq = seq8;
    }
    zmq_send(self->router, id, idlen, ZMQ_SNDMORE | ZMQ_DONTWAIT);
    zmq_send(self->router, "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT);
    if (self->opts.replay_layout == 3) {
        if (e)
            zmq_send(self->router, self->cfg.topic, strlen(self->cfg.topic),
                     ZMQ_SNDMORE | ZMQ_DONTWAIT);
        else
            zmq_send(self->router, "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT);
    }
    zmq_send(self->router, seq, 8, ZMQ_SNDMORE | ZMQ_DONTWAIT);
    zmq_send(self->router, e ? e->data : (const uint8_t *)"", e ? e->len : 0, ZMQ_DONTWAIT);
}

/* Reads one multipart request; answers it when it is [identity, "", seq8]. */
static void s_serve_replay(sim_kvpub_t *self)
{
    uint8_t frames[3][256];
    size_t lens[3] = {0};
    int nframes = 0;
    bool ok = true;
    for (;;) {
        uint8_t scratch[256];
        uint8_t *dst = nframes < 3 ? frames[nframes] : scratch;
        int n = zmq_recv(self->router, dst, 256, ZMQ_DONTWAIT);
        if (n < 0) return;       /* nothing (more) to read */
        if (n > 256) ok = false; /* truncated frame: not a valid request */
        if (nframes < 3) lens[nframes] = (size_t)(n > 256 ? 256 : n);
        nframes++;
        int more = 0;
        size_t sz = sizeof more;
        zmq_getsockopt(self->router, ZMQ_RCVMORE, &more, &sz);
        if (!more) break;
    }
    if (!ok || nframes != 3 || lens[1] != 0 || lens[2] != 8) {
        pthread_mutex_lock(&self->lock);
        self->replay_invalid++;
        pthread_mutex_unlock(&self->lock);
        IPL_LOG_EVERY(10, IPL_LOG_WARN, "kv_replay_invalid", "frames=%d want=%s", nframes,
                      "\"[identity, empty, start_seq(8 bytes big-endian)]\"");
        return;
    }
    uint64_t start = 0;
    for (int i = 0; i < 8; i++)
        start = (start << 8) | frames[2][i];
    pthread_mutex_lock(&self->lock);
    self->replay_requests++;
    size_t sent = 0;
    for (size_t i = 0; i < self->ring_len; i++) {
        const s_entry_t *e = &self->ring[(self->ring_head + i) % self->ring_cap];
        if (e->seq >= start) {
            s_send_reply(self, frames[0], lens[0], e);
            sent++;
        }
    }
    s_send_reply(self, frames[0], lens[0], NULL);
    pthread_mutex_unlock(&self->lock);
    IPL_DEBUG("kv_replay", "start_seq=%llu batches=%zu", (unsigned long long)start, sent);
}

static void *s_replay_thread(void *arg)
{
    sim_kvpub_t *self = arg;
    zmq_pollitem_t items[2] = {
        {.socket = self->router, .events = ZMQ_POLLIN},
        {.fd = self->stop_pipe[0], .events = ZMQ_POLLIN},
    };
    for (;;) {
        int rc = zmq_poll(items, 2, -1);
        if (rc < 0) {
            if (errno == EINTR) continue;
            break;
        }
        if (items[1].revents) break;
        if (items[0].revents & ZMQ_POLLIN)
            for (int i = 0; i < 64; i++) {
                int ev = 0;
                size_t sz = sizeof ev;
                zmq_getsockopt(self->router, ZMQ_EVENTS, &ev, &sz);
                if (!(ev & ZMQ_POLLIN)) break;
                s_serve_replay(self);
            }
    }
    return NULL;
}

sim_kvpub_t *sim_kvpub_new(const sim_kvconfig_t *cfg, const sim_kvpub_opts_t *opts, char *err,
                           size_t errlen)
{
    assert(cfg && cfg->enabled && opts);
    sim_kvpub_t *self = calloc(1, sizeof *self);
    if (!self) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    self->cfg = *cfg;
    self->opts = *opts;
    if (self->opts.replay_layout != 2) self->opts.replay_layout = 3;
    self->stop_pipe[0] = self->stop_pipe[1] = -1;
    pthread_mutex_init(&self->lock, NULL);
    self->ring_cap = cfg->buffer_steps > 0 ? (size_t)cfg->buffer_steps : 0;
    if (self->ring_cap && !(self->ring = calloc(self->ring_cap, sizeof *self->ring))) {
        snprintf(err, errlen, "out of memory for %zu replay entries", self->ring_cap);
        sim_kvpub_destroy(&self);
        return NULL;
    }
    if (s_open(self, err, errlen) != 0) {
        sim_kvpub_destroy(&self);
        return NULL;
    }
    if (self->router) {
        if (pipe(self->stop_pipe) != 0 ||
            pthread_create(&self->thread, NULL, s_replay_thread, self) != 0) {
            snprintf(err, errlen, "cannot start the replay thread: %s", strerror(errno));
            sim_kvpub_destroy(&self);
            return NULL;
        }
        self->thread_started = true;
    }
    char ep[300];
    IPL_INFO("kv_events", "endpoint=%s replay=%s format=%s replay_layout=%d",
             ipl_log_quote(ep, sizeof ep, cfg->endpoint),
             cfg->replay_endpoint[0] ? cfg->replay_endpoint : "off",
             opts->format == SIM_KV_FORMAT_MAP     ? "map"
             : opts->format == SIM_KV_FORMAT_ARRAY ? "array"
                                                   : "array-legacy",
             self->opts.replay_layout);
    return self;
}

void sim_kvpub_destroy(sim_kvpub_t **self_p)
{
    assert(self_p);
    sim_kvpub_t *self = *self_p;
    if (!self) return;
    if (self->thread_started) {
        ssize_t w = write(self->stop_pipe[1], "x", 1);
        (void)w;
        pthread_join(self->thread, NULL);
    }
    for (int i = 0; i < 2; i++)
        if (self->stop_pipe[i] >= 0) close(self->stop_pipe[i]);
    if (self->router) zmq_close(self->router);
    if (self->pub) zmq_close(self->pub);
    if (self->ctx) zmq_ctx_term(self->ctx);
    for (size_t i = 0; i < self->ring_len; i++)
        free(self->ring[(self->ring_head + i) % self->ring_cap].data);
    free(self->ring);
    pthread_mutex_destroy(&self->lock);
    free(self);
    *self_p = NULL;
}

int sim_kvpub_publish(sim_kvpub_t *self, const sim_kvbatch_t *batch)
{
    if (sim_kvbatch_count(batch) == 0) return 0;
    size_t len = 0;
    uint8_t *data =
        sim_kvwire_encode(batch, ipl_wall_s(), self->opts.format, !self->opts.bytes_hashes, &len);
    pthread_mutex_lock(&self->lock);
    uint64_t seq = self->next_seq++;
    if (!data) {
        /* The sequence number is used up, so subscribers see the loss as a gap. */
        pthread_mutex_unlock(&self->lock);
        IPL_LOG_EVERY(10, IPL_LOG_ERROR, "kv_encode_failed", "seq=%llu", (unsigned long long)seq);
        return IPL_E_NOMEM;
    }
    uint8_t seq8[8];
    s_seq8(seq, seq8);
    int64_t n = self->opts.drop_every_n;
    if (n > 0 && seq % (uint64_t)n == (uint64_t)n - 1) {
        self->dropped++;
        IPL_DEBUG("kv_batch_dropped", "seq=%llu reason=drop_every_n", (unsigned long long)seq);
    } else {
        zmq_send(self->pub, self->cfg.topic, strlen(self->cfg.topic), ZMQ_SNDMORE | ZMQ_DONTWAIT);
        zmq_send(self->pub, seq8, 8, ZMQ_SNDMORE | ZMQ_DONTWAIT);
        zmq_send(self->pub, data, len, ZMQ_DONTWAIT);
    }
    if (self->ring_cap == 0) {
        free(data);
    } else {
        if (self->ring_len == self->ring_cap) {
            free(self->ring[self->ring_head].data);
            self->ring_head = (self->ring_head + 1) % self->ring_cap;
            self->ring_len--;
        }
        self->ring[(self->ring_head + self->ring_len) % self->ring_cap] =
            (s_entry_t){.seq = seq, .data = data, .len = len};
        self->ring_len++;
    }
    pthread_mutex_unlock(&self->lock);
    return 0;
}

void sim_kvpub_restart(sim_kvpub_t *self)
{
    pthread_mutex_lock(&self->lock);
    for (size_t i = 0; i < self->ring_len; i++)
        free(self->ring[(self->ring_head + i) % self->ring_cap].data);
    self->ring_len = self->ring_head = 0;
    self->next_seq = 0;
    pthread_mutex_unlock(&self->lock);
}

void sim_kvpub_stats(sim_kvpub_t *self, sim_kvpub_stats_t *out)
{
    pthread_mutex_lock(&self->lock);
    *out = (sim_kvpub_stats_t){.next_seq = self->next_seq,
                               .dropped = self->dropped,
                               .replay_requests = self->replay_requests,
                               .replay_invalid = self->replay_invalid};
    pthread_mutex_unlock(&self->lock);
}

int sim_kvpub_last_endpoint(sim_kvpub_t *self, bool replay, char *buf, size_t size)
{
    void *sock = replay ? self->router : self->pub;
    if (!sock || size == 0) return IPL_E_NOTFOUND;
    size_t len = size;
    if (zmq_getsockopt(sock, ZMQ_LAST_ENDPOINT, buf, &len) != 0) return IPL_E_NOTFOUND;
    buf[size - 1] = '\0';
    return 0;
}
