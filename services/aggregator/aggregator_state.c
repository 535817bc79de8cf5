/*
 * aggregator_state — index + load table + state sequence (see the header for the contract).
 *
 * Workers are the index's worker ids; the per-worker table below is indexed by the same id,
 * so a name is resolved once per message (ipl_index_worker) and nothing else is allocated per
 * worker.
 */
#include "aggregator_state.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "ipl_clock.h"
#include "ipl_error.h"

typedef struct {
    ipl_load_t load; /* load.worker NULL; strings are never kept */
    bool has_load;
    uint64_t epoch;
    uint64_t src_seq;
    uint64_t kv_events;
    uint64_t updated_ms;
    uint64_t load_ms;
} s_worker_t;

struct aggregator_state {
    ipl_index_t *index;
    uint64_t seq;
    uint64_t incarnation; /* random per state (process start), stamped with every seq */
    s_worker_t workers[IPL_INDEX_MAX_WORKERS];
};

aggregator_state_t *aggregator_state_new(void)
{
    aggregator_state_t *self = calloc(1, sizeof *self);
    if (!self) return NULL;
    self->index = ipl_index_new();
    if (!self->index) {
        free(self);
        return NULL;
    }
    if (getrandom(&self->incarnation, sizeof self->incarnation, 0) != sizeof self->incarnation)
        self->incarnation = ipl_mono_ns() ^ ((uint64_t)getpid() << 32);
    if (!self->incarnation) self->incarnation = 1; /* 0 means "a sender without one" */
    return self;
}

void aggregator_state_destroy(aggregator_state_t **self_p)
{
    if (!self_p || !*self_p) return;
    ipl_index_destroy(&(*self_p)->index);
    free(*self_p);
    *self_p = NULL;
}

/* The id of the message's worker, creating it. */
static int s_worker_id(aggregator_state_t *self, const char *name)
{
    if (!name || !*name) return IPL_E_INVAL;
    return ipl_index_worker(self->index, name);
}

static int s_apply_kv(aggregator_state_t *self, ipl_kv_event_t *ev, uint64_t now_ms)
{
    if (ev->op != IPL_KV_OP_STORED && ev->op != IPL_KV_OP_REMOVED && ev->op != IPL_KV_OP_CLEARED)
        return IPL_E_INVAL;
    int id = s_worker_id(self, ev->worker);
    if (id < 0) return id;
    int rc = 0;
    switch (ev->op) {
    case IPL_KV_OP_STORED:
        rc = ipl_index_add_chain(self->index, id, ev->parent, ev->hashes, ev->hashes_len);
        break;
    case IPL_KV_OP_REMOVED:
        rc = ipl_index_remove(self->index, id, ev->hashes, ev->hashes_len);
        break;
    default:
        ipl_index_clear_worker(self->index, id);
        break;
    }
    if (rc != 0) return rc;
    s_worker_t *w = &self->workers[id];
    w->epoch = ev->epoch;
    w->src_seq = ev->src_seq;
    w->kv_events++;
    w->updated_ms = now_ms;
    ev->seq = ++self->seq;
    ev->incarnation = self->incarnation;
    return 0;
}

static int s_apply_load(aggregator_state_t *self, ipl_load_t *load, uint64_t now_ms)
{
    int id = s_worker_id(self, load->worker);
    if (id < 0) return id;
    s_worker_t *w = &self->workers[id];
    load->seq = ++self->seq;
    load->incarnation = self->incarnation;
    w->load = *load;
    w->load.worker = NULL;
    w->has_load = true;
    w->updated_ms = w->load_ms = now_ms;
    return 0;
}

int aggregator_state_apply(aggregator_state_t *self, ipl_msg_t *msg, uint64_t now_ms)
{
    assert(self && msg);
    switch (msg->type) {
    case IPL_MSG_KV_EVENT:
        return s_apply_kv(self, &msg->u.kv_event, now_ms);
    case IPL_MSG_LOAD:
        return s_apply_load(self, &msg->u.load, now_ms);
    default:
        return IPL_E_UNKNOWN;
    }
}

/* The snapshot walk's hash buffer, flushed as one KV_EVENT every `chunk` hashes. */
typedef struct {
    ipl_kv_event_t ev;
    size_t chunk;
    aggregator_emit_fn *fn;
    void *arg;
    uint64_t sent;
} s_chunker_t;

static int s_chunk_flush(s_chunker_t *c)
{
    int rc = c->fn(c->arg, IPL_MSG_KV_EVENT, &c->ev);
    c->sent += c->ev.hashes_len;
    /* The walk follows the index's layout (chains in order), so the next chunk continues after
     * this one's last block: that is its parent hint, and the receiver lays it out alike. */
    c->ev.parent = c->ev.hashes_len ? c->ev.hashes[c->ev.hashes_len - 1] : 0;
    c->ev.hashes_len = 0;
    return rc;
}

static int s_chunk_add(void *arg, uint64_t hash)
{
    s_chunker_t *c = arg;
    c->ev.hashes[c->ev.hashes_len++] = hash;
    return c->ev.hashes_len == c->chunk ? s_chunk_flush(c) : 0;
}

/* The LOAD describing worker `id` as the state holds it. */
static ipl_load_t s_load_of(const aggregator_state_t *self, int id)
{
    ipl_load_t load = self->workers[id].load;
    load.worker = (char *)ipl_index_worker_name(self->index, id);
    return load;
}

int aggregator_state_snapshot(aggregator_state_t *self, size_t chunk, aggregator_emit_fn *fn,
                              void *arg, ipl_snapshot_end_t *end)
{
    assert(self && fn && end);
    if (chunk == 0 || chunk > AGGREGATOR_SNAPSHOT_CHUNK) chunk = AGGREGATOR_SNAPSHOT_CHUNK;
    s_chunker_t c = {.chunk = chunk, .fn = fn, .arg = arg};
    c.ev.hashes = malloc(chunk * sizeof *c.ev.hashes);
    if (!c.ev.hashes) return IPL_E_NOMEM;
    int nworkers = ipl_index_nworkers(self->index);
    int rc = 0;
    for (int id = 0; id < nworkers && rc == 0; id++) {
        const s_worker_t *w = &self->workers[id];
        c.ev.seq = self->seq;
        c.ev.incarnation = self->incarnation;
        c.ev.worker = (char *)ipl_index_worker_name(self->index, id);
        c.ev.epoch = w->epoch;
        c.ev.src_seq = w->src_seq;
        c.ev.op = IPL_KV_OP_STORED;
        c.ev.block_size = w->load.block_size;
        c.ev.hashes_len = 0;
        c.ev.parent = 0;
        uint64_t before = c.sent;
        rc = ipl_index_foreach(self->index, id, s_chunk_add, &c);
        /* the rest, or an empty event so that a worker without blocks is still announced */
        if (rc == 0 && (c.ev.hashes_len > 0 || c.sent == before)) rc = s_chunk_flush(&c);
        if (rc == 0) {
            ipl_load_t load = s_load_of(self, id);
            load.seq = self->seq;
            load.incarnation = self->incarnation;
            rc = fn(arg, IPL_MSG_LOAD, &load);
        }
    }
    free(c.ev.hashes);
    *end = (ipl_snapshot_end_t){.seq = self->seq,
                                .workers = (uint64_t)nworkers,
                                .blocks = c.sent,
                                .incarnation = self->incarnation};
    return rc;
}

int aggregator_state_heartbeat(aggregator_state_t *self, uint64_t now_ms, uint64_t stale_ms,
                               aggregator_emit_fn *fn, void *arg)
{
    assert(self && fn);
    int nworkers = ipl_index_nworkers(self->index);
    for (int id = 0; id < nworkers; id++) {
        s_worker_t *w = &self->workers[id];
        if (now_ms - w->updated_ms > stale_ms) {
            w->load.health = IPL_HEALTH_UNKNOWN;
            w->load.kv_state = IPL_KV_DEGRADED;
        }
        ipl_load_t load = s_load_of(self, id);
        load.seq = self->seq + 1;
        load.incarnation = self->incarnation;
        int rc = fn(arg, IPL_MSG_LOAD, &load);
        if (rc != 0) return rc;
        w->load.seq = ++self->seq;
    }
    return 0;
}

void aggregator_state_kv_counts(const aggregator_state_t *self, size_t counts[3])
{
    assert(self && counts);
    counts[0] = counts[1] = counts[2] = 0;
    int n = ipl_index_nworkers(self->index);
    for (int id = 0; id < n; id++) {
        const s_worker_t *w = &self->workers[id];
        if (!w->has_load) continue;
        counts[w->load.kv_state <= IPL_KV_DEGRADED ? w->load.kv_state : IPL_KV_DEGRADED]++;
    }
}

uint64_t aggregator_state_seq(const aggregator_state_t *self)
{
    assert(self);
    return self->seq;
}

const ipl_index_t *aggregator_state_index(const aggregator_state_t *self)
{
    assert(self);
    return self->index;
}

int aggregator_state_nworkers(const aggregator_state_t *self)
{
    assert(self);
    return ipl_index_nworkers(self->index);
}

int aggregator_state_worker(const aggregator_state_t *self, int id, aggregator_worker_info_t *out)
{
    assert(self && out);
    if (id < 0 || id >= ipl_index_nworkers(self->index)) return IPL_E_RANGE;
    const s_worker_t *w = &self->workers[id];
    *out = (aggregator_worker_info_t){
        .name = ipl_index_worker_name(self->index, id),
        .has_load = w->has_load,
        .load = w->load,
        .epoch = w->epoch,
        .src_seq = w->src_seq,
        .kv_events = w->kv_events,
        .blocks = ipl_index_worker_blocks(self->index, id),
        .updated_ms = w->updated_ms,
        .load_ms = w->load_ms,
    };
    return 0;
}
