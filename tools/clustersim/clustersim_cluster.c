/*
 * clustersim_cluster — the event loop, the workers and the feed of the replica (see the header).
 *
 * Events (clustersim_queue; payload fields in brackets):
 *
 *   ARRIVAL [id = request]      route it; it reaches its worker request_s later
 *   STEP    [id = worker]       a step boundary: submit the requests that reached the worker,
 *                               execute one engine step, schedule the next boundary
 *   SAMPLE  [id = worker]       read the worker's load; deliver it after the event delay
 *   LOAD    [id = worker, a = running << 32 | waiting, b = sample ts (ms), x = kv usage]
 *   KV      [p = s_kv_t]        apply one step's KV events (already in our hashes)
 *   OBSERVE [id = request]      its first token reached the gateway: feed the TTFT back
 *
 * A worker's state machine:
 *
 *     idle ──request reaches it──► stepping (one STEP event pending) ──step did nothing──► idle
 *                                   ▲      │ step took d: next STEP at +d
 *                                   └──────┘
 *
 * Requests routed to a stepping worker wait in its `pending` FIFO (with the time they reach
 * it) and are submitted at the next boundary at or after that time, so the engine's
 * scheduler sees exactly the requests that had reached it when the step began.
 *
 * The engine executes a whole step at its boundary (sim_engine_step): its state is then the
 * state at the step's end. What a load sample taken during the step reports is corrected for
 * that: requests that finish at the step's end still count as running until then.
 */
#include "clustersim_cluster.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clustersim_kvmap.h"
#include "clustersim_queue.h"
#include "decider_state.h"
#include "ipl_error.h"
#include "ipl_hash.h"
#include "sim_engine.h"
#include "sim_profile.h"

enum { EV_ARRIVAL = 1, EV_STEP, EV_SAMPLE, EV_LOAD, EV_KV, EV_OBSERVE };

#define S_CLOCK_BASE_MS 1000000000ull /* virtual time 0 on the router's clocks */
#define S_STALL_RETRY_S 0.005         /* a step that scheduled nothing is retried this much later */
#define S_NAME_MAX      32

// One step's KV events in our hashes, waiting for delivery. ops[i] covers hashes
// [ops[i].off, ops[i].off + ops[i].n); a STORED's parent is our hash of the block before them
// (0: none), the layout hint the collector sends.
typedef struct {
    uint32_t op, off, n;
    uint64_t parent;
} s_kv_op_t;

typedef struct {
    uint32_t worker;
    uint32_t nops;
    s_kv_op_t *ops;
    uint64_t *hashes;
} s_kv_t;
// One allocation holds the header, then the hashes, then the ops.
_Static_assert(sizeof(s_kv_t) % sizeof(uint64_t) == 0, "hashes follow the header aligned");

typedef struct {
    uint32_t req;
    sim_req_t *handle;
    bool first_token; // seen (its OBSERVE event is scheduled)
} s_inflight_t;

typedef struct {
    clustersim_cluster_t *cluster;
    uint32_t id;
    char name[S_NAME_MAX];
    sim_engine_t *engine;
    bool stepping;   // a STEP event is pending
    double clock;    // the engine's clock as last seen (saves asking it under its lock)
    double step_end; // end of the step executed last
    uint32_t finished_in_step;
    // Requests that reached the worker but not yet the engine: FIFO of request ids.
    uint32_t *pending;
    uint32_t phead, pn, pcap;
    s_inflight_t *inflight;
    uint32_t nin, incap;
    sim_profile_t profile; // its worker set's (request_s applied by the cluster)
    double request_s;
    uint32_t num_blocks;
    bool sampling; // a SAMPLE event is pending
    double phase;  // sample times are phase + k × period
    double tail;   // latest delivery time scheduled (deliveries stay in order)
} s_worker_t;

struct clustersim_cluster {
    clustersim_config_t cfg;
    const clustersim_workload_t *wl;
    const char *strategy;
    // Strategy "oracle": every worker's true cache, updated as the engines commit and evict.
    ipl_index_t *truth;
    uint32_t truth_prefix[IPL_INDEX_MAX_WORKERS];
    bool truth_matched;    // truth_prefix holds this decision's match
    sim_profile_t profile; // the default set's (cfg.profile, cfg.num_gpu_blocks)

    clustersim_queue_t *queue;
    clustersim_kvmap_t *kvmap;
    decider_state_t *state;
    decider_router_t *router;
    decider_decision_t decision;
    ipl_policy_t policy;
    ipl_pool_t *pools;
    ipl_worker_t *pw;
    char (*pool_names)[S_NAME_MAX];
    char (*pool_models)[S_NAME_MAX];
    char (*set_names)[S_NAME_MAX]; // heterogeneous sets: "set-P"
    uint32_t npools;

    s_worker_t *workers;
    uint32_t nworkers;

    double now;
    uint64_t rng;
    uint32_t next_root; // cursor into the workload's roots
    const uint32_t *roots;
    uint32_t nroots;
    uint32_t *tokens; // scratch: one prompt + output
    uint64_t *hashes; // scratch: one prompt's block hashes
    size_t hash_cap;
    double *arrival;              // actual arrival time per request
    decider_features_t *features; // per request, as decided (calibration)
    const char **set;             // per request: the winner's worker set (calibration)
    clustersim_record_t *records;
    uint32_t done; // requests completed or rejected
    clustersim_stats_t stats;
    int error; // first error inside a callback
};

/* --- config --------------------------------------------------------------------------------- */

void clustersim_config_defaults(clustersim_config_t *cfg)
{
    *cfg = (clustersim_config_t){
        .pools = 2,
        .workers_per_pool = 3,
        .split = false,
        .profile = NULL,
        .num_gpu_blocks = 0,
        .block_size = 16,
        .max_num_seqs = 256,
        .max_num_batched_tokens = 8192,
        .delay_min_s = 0.005,
        .delay_max_s = 0.050,
        .sample_period_s = 0.1,
        .seed = 1,
        .calibrate = true,
    };
    decider_router_config_defaults(&cfg->router);
    const sim_profile_t *p = sim_profile_find(NULL);
    if (p && p->prefill_token_s > 0) cfg->router.prefill_tokens_per_s = 1.0 / p->prefill_token_s;
}

/* --- small helpers -------------------------------------------------------------------------- */

static uint64_t s_rand(clustersim_cluster_t *self) // splitmix64
{
    uint64_t x = self->rng;
    self->rng += 0x9e3779b97f4a7c15ULL;
    return ipl_mix64(x);
}

static double s_delay(clustersim_cluster_t *self)
{
    double span = self->cfg.delay_max_s - self->cfg.delay_min_s;
    if (span <= 0) return self->cfg.delay_min_s;
    return self->cfg.delay_min_s + span * (double)(s_rand(self) >> 11) / 9007199254740992.0;
}

static uint64_t s_ms(double t)
{
    return S_CLOCK_BASE_MS + (uint64_t)llround(t * 1000.0);
}

static void s_push(clustersim_cluster_t *self, const clustersim_event_t *ev)
{
    if (clustersim_queue_push(self->queue, ev) != 0 && !self->error) self->error = IPL_E_NOMEM;
    size_t n = clustersim_queue_size(self->queue);
    if (n > self->stats.max_queue) self->stats.max_queue = n;
}

// When a message worker w produces at time `at` reaches the replica: after the delay, and
// never before an earlier message of w (one stream per worker, as collector → aggregator).
static double s_delivery_time(clustersim_cluster_t *self, s_worker_t *w, double at)
{
    double t = at + s_delay(self);
    if (t < w->tail) t = w->tail;
    w->tail = t;
    return t;
}

/* --- the replica's feed --------------------------------------------------------------------- */

typedef struct {
    uint32_t running, waiting;
    double kv_usage;
} s_load_t;

// The worker's load as a scrape at `now` would see it.
static s_load_t s_read_load(clustersim_cluster_t *self, s_worker_t *w)
{
    sim_engine_stats_t st;
    sim_engine_stats(w->engine, &st);
    s_load_t l = {.running = st.running, .waiting = st.waiting, .kv_usage = st.kv_usage};
    if (self->now < w->step_end) l.running += w->finished_in_step; // the step is still running
    for (uint32_t k = 0; k < w->pn; k++) {
        uint32_t r = w->pending[(w->phead + k) % w->pcap];
        if (self->arrival[r] + w->request_s > self->now) break;
        l.waiting++;
    }
    return l;
}

static void s_apply_load(clustersim_cluster_t *self, uint32_t worker, const s_load_t *l,
                         uint64_t ts_ms)
{
    ipl_msg_t msg = {.type = IPL_MSG_LOAD};
    msg.u.load = (ipl_load_t){.worker = self->workers[worker].name,
                              .ts_ms = ts_ms,
                              .running = l->running,
                              .waiting = l->waiting,
                              .kv_usage = l->kv_usage,
                              .block_size = self->cfg.block_size,
                              .num_blocks = self->workers[worker].num_blocks,
                              .health = IPL_HEALTH_UP,
                              .kv_state = IPL_KV_EXACT};
    if (decider_state_apply(self->state, &msg, s_ms(self->now)) != 0 && !self->error)
        self->error = IPL_E_RANGE;
    self->stats.load_samples++;
}

static void s_arm_sampling(clustersim_cluster_t *self, s_worker_t *w)
{
    if (w->sampling) return;
    double period = self->cfg.sample_period_s;
    double k = floor((self->now - w->phase) / period) + 1;
    clustersim_event_t ev = {.t = w->phase + k * period, .kind = EV_SAMPLE, .id = w->id};
    if (ev.t <= self->now) ev.t = self->now + period; // rounding
    w->sampling = true;
    s_push(self, &ev);
}

static void s_on_sample(clustersim_cluster_t *self, s_worker_t *w)
{
    s_load_t l = s_read_load(self, w);
    clustersim_event_t ev = {.t = s_delivery_time(self, w, self->now),
                             .kind = EV_LOAD,
                             .id = w->id,
                             .a = (uint64_t)l.running << 32 | l.waiting,
                             .b = s_ms(self->now),
                             .x = l.kv_usage};
    s_push(self, &ev);
    // An idle worker's sample stays true until something is routed to it (which re-arms):
    // stop sampling it rather than deliver the same sample every period.
    bool idle = l.running == 0 && l.waiting == 0 && w->pn == 0 && w->nin == 0;
    if (idle) {
        w->sampling = false;
        return;
    }
    ev = (clustersim_event_t){
        .t = self->now + self->cfg.sample_period_s, .kind = EV_SAMPLE, .id = w->id};
    s_push(self, &ev);
}

// Called by the engine (under its lock, inside sim_engine_step) with the step's events: the
// collector's work — our hashes from the token ids — then delivery after the delay.
static void s_on_kv_events(void *arg, const sim_kvbatch_t *batch, double now_s)
{
    s_worker_t *w = arg;
    clustersim_cluster_t *self = w->cluster;
    size_t n = sim_kvbatch_count(batch);
    size_t total = 0;
    sim_kv_event_t ev;
    for (size_t i = 0; i < n; i++) {
        sim_kvbatch_get(batch, i, &ev);
        total += ev.nhashes;
    }
    s_kv_t *kv = malloc(sizeof *kv + n * sizeof(s_kv_op_t) + total * sizeof(uint64_t));
    if (!kv) {
        self->error = IPL_E_NOMEM;
        return;
    }
    kv->worker = w->id;
    kv->nops = 0;
    kv->hashes = (uint64_t *)(kv + 1); // 8-byte aligned right after the header
    kv->ops = (s_kv_op_t *)(kv->hashes + total);
    uint32_t off = 0;
    for (size_t i = 0; i < n; i++) {
        sim_kvbatch_get(batch, i, &ev);
        s_kv_op_t *op = &kv->ops[kv->nops];
        *op = (s_kv_op_t){.off = off};
        if (ev.kind == SIM_KV_STORED) {
            op->op = IPL_KV_OP_STORED;
            uint64_t parent = ipl_hash_chain_start(0);
            if (ev.has_parent && !clustersim_kvmap_get(self->kvmap, ev.parent.lo, &parent)) {
                self->stats.kv_unknown += ev.nhashes; // the collector would resync; count it
                continue;
            }
            op->parent = ev.has_parent ? parent : 0;
            for (uint32_t j = 0; j < ev.nhashes; j++) {
                parent =
                    ipl_block_hash(parent, ev.tokens + (size_t)j * ev.block_size, ev.block_size);
                if (clustersim_kvmap_hold(self->kvmap, ev.hashes[j].lo, parent) != 0) {
                    self->error = IPL_E_NOMEM;
                    break;
                }
                kv->hashes[off + op->n++] = parent;
            }
        } else if (ev.kind == SIM_KV_REMOVED) {
            op->op = IPL_KV_OP_REMOVED;
            for (uint32_t j = 0; j < ev.nhashes; j++) {
                uint64_t ours;
                if (clustersim_kvmap_release(self->kvmap, ev.hashes[j].lo, &ours))
                    kv->hashes[off + op->n++] = ours;
                else
                    self->stats.kv_unknown++;
            }
        } else {
            op->op = IPL_KV_OP_CLEARED; // not produced in clustersim (no resets)
        }
        if (self->truth && op->n) {
            const uint64_t *h = kv->hashes + op->off;
            int rc = op->op == IPL_KV_OP_STORED
                         ? ipl_index_add_chain(self->truth, (int)w->id, op->parent, h, op->n)
                         : ipl_index_remove(self->truth, (int)w->id, h, op->n);
            if (rc != 0) self->error = rc;
        }
        off += op->n;
        self->stats.kv_blocks += op->n;
        kv->nops++;
    }
    // The engine publishes at the step's end (now_s); self->now is the step's start.
    clustersim_event_t e = {.t = s_delivery_time(self, w, now_s > self->now ? now_s : self->now),
                            .kind = EV_KV,
                            .p = kv};
    s_push(self, &e);
}

static void s_apply_kv(clustersim_cluster_t *self, s_kv_t *kv)
{
    for (uint32_t i = 0; i < kv->nops; i++) {
        const s_kv_op_t *op = &kv->ops[i];
        if (op->op != IPL_KV_OP_CLEARED && op->n == 0) continue;
        ipl_msg_t msg = {.type = IPL_MSG_KV_EVENT};
        msg.u.kv_event = (ipl_kv_event_t){.worker = self->workers[kv->worker].name,
                                          .op = op->op,
                                          .parent = op->parent,
                                          .hashes = kv->hashes + op->off,
                                          .hashes_len = op->n,
                                          .block_size = self->cfg.block_size};
        int rc = decider_state_apply(self->state, &msg, s_ms(self->now));
        if (rc != 0 && !self->error) self->error = rc;
    }
    self->stats.kv_batches++;
    free(kv);
}

/* --- requests ------------------------------------------------------------------------------- */

static void s_reject(clustersim_cluster_t *self, uint32_t r)
{
    // A rejected turn ends its conversation: the later turns are rejected with it.
    for (int32_t i = (int32_t)r; i >= 0; i = clustersim_workload_req(self->wl, (uint32_t)i)->next) {
        self->records[i].arrival_s = self->arrival[r];
        self->done++;
        self->stats.rejected++;
    }
}

static void s_schedule_step(clustersim_cluster_t *self, s_worker_t *w, double t)
{
    clustersim_event_t ev = {.t = t, .kind = EV_STEP, .id = w->id};
    w->stepping = true;
    s_push(self, &ev);
}

static int s_pending_push(s_worker_t *w, uint32_t r)
{
    if (w->pn == w->pcap) {
        uint32_t cap = w->pcap ? w->pcap * 2 : 16;
        uint32_t *p = malloc(cap * sizeof *p);
        if (!p) return IPL_E_NOMEM;
        for (uint32_t k = 0; k < w->pn; k++)
            p[k] = w->pending[(w->phead + k) % w->pcap];
        free(w->pending);
        w->pending = p;
        w->pcap = cap;
        w->phead = 0;
    }
    w->pending[(w->phead + w->pn) % w->pcap] = r;
    w->pn++;
    return 0;
}

// The router's offline oracle hook (decider_router_offline_t): the prompt tokens `worker` truly
// holds, as the engine would hit them (whole blocks, never the whole prompt: vLLM computes at
// least one token).
static uint64_t s_oracle(void *arg, const char *worker, const decider_request_t *req)
{
    clustersim_cluster_t *self = arg;
    if (!self->truth_matched) {
        ipl_index_match(self->truth, req->hashes, req->nhashes, self->truth_prefix,
                        IPL_INDEX_MAX_WORKERS);
        self->truth_matched = true;
    }
    int id = ipl_index_find_worker(self->truth, worker);
    if (id < 0 || !req->prompt_tokens) return 0;
    uint64_t blocks = self->truth_prefix[id];
    uint64_t most = (req->prompt_tokens - 1) / self->cfg.block_size;
    return (blocks < most ? blocks : most) * self->cfg.block_size;
}

static void s_on_arrival(clustersim_cluster_t *self, uint32_t r)
{
    const clustersim_req_t *req = clustersim_workload_req(self->wl, r);
    self->arrival[r] = self->now;
    self->records[r].arrival_s = self->now;
    self->records[r].prompt_tokens = req->prompt_tokens;
    clustersim_workload_prompt(self->wl, r, self->tokens);
    size_t nh = ipl_block_hashes(ipl_hash_chain_start(0), self->tokens, req->prompt_tokens,
                                 self->cfg.block_size, self->hashes, self->hash_cap);
    const char *model = self->pool_models[0];
    if (self->cfg.split) model = self->pool_models[req->model % self->npools];
    decider_request_t dreq = {.model = model,
                              .tenant = clustersim_workload_tenant(self->wl, req->tenant),
                              .strategy = self->strategy,
                              .prompt_tokens = req->prompt_tokens,
                              .block_size = self->cfg.block_size,
                              .hashes = self->hashes,
                              .nhashes = nh};
    uint64_t ms = s_ms(self->now);
    // The aggregator streams continuously: the replica is as old as the delivery delay.
    uint64_t age_ms = (uint64_t)llround(self->cfg.delay_max_s * 1000.0);
    self->truth_matched = false;
    int st = decider_router_route_at(self->router, &self->policy, self->state, age_ms, &dreq,
                                     &self->decision, ms, ms);
    if (st != IPL_ROUTE_OK || !self->decision.worker) {
        s_reject(self, r);
        return;
    }
    self->stats.decisions++;
    const char *reason = self->decision.reason ? self->decision.reason : "";
    if (!strcmp(reason, "cache_hit"))
        self->stats.reason_cache_hit++;
    else if (!strcmp(reason, "load_gate"))
        self->stats.reason_load_gate++;
    else
        self->stats.reason_other++;
    uint32_t wid = (uint32_t)(self->decision.worker - self->policy.workers);
    self->features[r] = self->decision.features;
    self->set[r] = self->decision.set;
    self->records[r].worker = (int32_t)wid;
    self->records[r].predicted_ttft_s = self->decision.predicted_ttft_s;
    self->records[r].predicted_cached = (uint32_t)self->decision.cached_tokens;
    s_worker_t *w = &self->workers[wid];
    if (s_pending_push(w, r) != 0) {
        self->error = IPL_E_NOMEM;
        return;
    }
    if (!w->stepping) s_schedule_step(self, w, self->now + w->request_s);
    s_arm_sampling(self, w);
}

// Submits the pending requests that reached the worker by now.
static void s_submit_ready(clustersim_cluster_t *self, s_worker_t *w)
{
    while (w->pn) {
        uint32_t r = w->pending[w->phead];
        if (self->arrival[r] + w->request_s > self->now) break;
        w->phead = (w->phead + 1) % w->pcap;
        w->pn--;
        const clustersim_req_t *req = clustersim_workload_req(self->wl, r);
        clustersim_workload_prompt(self->wl, r, self->tokens);
        clustersim_workload_output(self->wl, r, self->tokens + req->prompt_tokens);
        sim_req_spec_t spec = {.prompt = self->tokens,
                               .nprompt = req->prompt_tokens,
                               .output = self->tokens + req->prompt_tokens,
                               .noutput = req->output_tokens,
                               .finish = SIM_FINISH_LENGTH};
        sim_req_t *h = sim_engine_submit(w->engine, &spec);
        if (!h) { // larger than the worker's whole KV cache: it could never run
            s_reject(self, r);
            continue;
        }
        if (w->nin == w->incap) {
            uint32_t cap = w->incap ? w->incap * 2 : 16;
            s_inflight_t *p = realloc(w->inflight, cap * sizeof *p);
            if (!p) {
                sim_engine_release(w->engine, &h);
                self->error = IPL_E_NOMEM;
                return;
            }
            w->inflight = p;
            w->incap = cap;
        }
        w->inflight[w->nin++] = (s_inflight_t){.req = r, .handle = h};
    }
}

// Calibration: the requests whose first token came out in the step just executed are
// observed when that token reaches the gateway (the step's end).
static void s_first_tokens(clustersim_cluster_t *self, s_worker_t *w)
{
    for (uint32_t k = 0; k < w->nin; k++) {
        s_inflight_t *in = &w->inflight[k];
        if (in->first_token) continue;
        sim_req_status_t st;
        sim_engine_status(w->engine, in->handle, &st);
        if (st.first_token_s < 0) continue;
        in->first_token = true;
        self->records[in->req].cached_tokens = st.cached_tokens; // for s_on_observe
        clustersim_event_t ev = {.t = st.first_token_s, .kind = EV_OBSERVE, .id = in->req};
        s_push(self, &ev);
    }
}

static void s_on_observe(clustersim_cluster_t *self, uint32_t r)
{
    if (!self->set[r]) return;
    // The gateway learns the cached tokens from the response's usage: the predictor learns
    // the prefill the request really had, not the one the router expected (a prefix evicted
    // in between would teach it that prefill is slow).
    decider_features_t x = self->features[r];
    const clustersim_record_t *rec = &self->records[r];
    x.uncached_tokens = (double)(rec->prompt_tokens - rec->cached_tokens);
    (void)decider_router_observe(self->router, self->set[r], &x, self->now - self->arrival[r]);
}

// Records the requests that finished in the step just executed; releases them.
static void s_collect(clustersim_cluster_t *self, s_worker_t *w)
{
    w->finished_in_step = 0;
    for (uint32_t k = w->nin; k-- > 0;) {
        s_inflight_t *in = &w->inflight[k];
        sim_req_status_t st;
        sim_engine_status(w->engine, in->handle, &st);
        if (st.finish == SIM_FINISH_NONE) continue;
        uint32_t r = in->req;
        clustersim_record_t *rec = &self->records[r];
        rec->first_token_s = st.first_token_s;
        rec->finish_s = st.finish_s;
        rec->cached_tokens = st.cached_tokens;
        w->finished_in_step++;
        self->done++;
        sim_engine_release(w->engine, &in->handle);
        int32_t next = clustersim_workload_req(self->wl, r)->next;
        if (next >= 0) { // the user reads the answer, thinks, and sends the next turn
            clustersim_event_t ev = {
                .t = st.finish_s + clustersim_workload_req(self->wl, (uint32_t)next)->arrival_s,
                .kind = EV_ARRIVAL,
                .id = (uint32_t)next};
            s_push(self, &ev);
        }
        // Order-preserving removal keeps later scans (and so event order) deterministic.
        memmove(in, in + 1, (w->nin - k - 1) * sizeof *in);
        w->nin--;
    }
}

static void s_on_step(clustersim_cluster_t *self, s_worker_t *w)
{
    w->stepping = false;
    if (w->clock < self->now) sim_engine_advance(w->engine, self->now - w->clock);
    s_submit_ready(self, w);
    double d = sim_engine_step(w->engine);
    sim_engine_stats_t st;
    sim_engine_stats(w->engine, &st);
    w->clock = st.now_s;
    if (d > 0) {
        self->stats.steps++;
        w->step_end = st.now_s;
        if (self->cfg.calibrate) s_first_tokens(self, w);
        if (st.running + st.waiting < w->nin)
            s_collect(self, w);
        else
            w->finished_in_step = 0;
        s_schedule_step(self, w, w->step_end);
    } else if (st.running + st.waiting > 0) {
        // Nothing fitted (a preemption freed room for the next pass): try again shortly.
        self->stats.stalls++;
        s_schedule_step(self, w, self->now + S_STALL_RETRY_S);
    } else if (w->pn) {
        uint32_t r = w->pending[w->phead];
        s_schedule_step(self, w, self->arrival[r] + w->request_s);
    }
}

/* --- building ------------------------------------------------------------------------------- */

static int s_fail(char *err, size_t errlen, int rc, const char *what)
{
    snprintf(err, errlen, "%s", what);
    return rc;
}

static int s_build_policy(clustersim_cluster_t *self)
{
    const clustersim_config_t *c = &self->cfg;
    self->npools = c->split ? c->pools : 1;
    self->nworkers = c->pools * c->workers_per_pool;
    self->pools = calloc(self->npools, sizeof *self->pools);
    self->pool_names = calloc(self->npools, sizeof *self->pool_names);
    self->pool_models = calloc(self->npools, sizeof *self->pool_models);
    self->pw = calloc(self->nworkers, sizeof *self->pw);
    self->workers = calloc(self->nworkers, sizeof *self->workers);
    bool hetero = c->npool_profiles || c->npool_blocks;
    self->set_names = hetero ? calloc(c->pools, sizeof *self->set_names) : NULL;
    if (!self->pools || !self->pool_names || !self->pool_models || !self->pw || !self->workers ||
        (hetero && !self->set_names))
        return IPL_E_NOMEM;
    for (uint32_t p = 0; hetero && p < c->pools; p++)
        snprintf(self->set_names[p], S_NAME_MAX, "set-%u", p);
    for (uint32_t p = 0; p < self->npools; p++) {
        if (c->split) {
            snprintf(self->pool_names[p], S_NAME_MAX, "pool-%u", p);
            snprintf(self->pool_models[p], S_NAME_MAX, "model-%u", p);
        } else {
            snprintf(self->pool_names[p], S_NAME_MAX, "chat");
            snprintf(self->pool_models[p], S_NAME_MAX, "sim-model");
        }
        self->pools[p] = (ipl_pool_t){
            .name = self->pool_names[p], .model = self->pool_models[p], .strategy = ""};
    }
    for (uint32_t i = 0; i < self->nworkers; i++) {
        s_worker_t *w = &self->workers[i];
        uint32_t set = i / c->workers_per_pool, k = i % c->workers_per_pool;
        uint32_t pool = c->split ? set : 0;
        w->cluster = self;
        w->id = i;
        snprintf(w->name, sizeof w->name, "w%u-%u", set, k);
        if (self->truth && ipl_index_worker(self->truth, w->name) != (int)i) return IPL_E_RANGE;
        // Sample phases spread evenly, as independent scrapers would be.
        w->phase = c->sample_period_s * (double)((i * 2654435761u) % 1000u) / 1000.0;
        self->pw[i] = (ipl_worker_t){.name = w->name,
                                     .pool = self->pool_names[pool],
                                     .model = self->pool_models[pool],
                                     .url = w->name,
                                     .kv_endpoint = "",
                                     .replay_endpoint = "",
                                     .metrics_url = "",
                                     .worker_set = hetero ? self->set_names[set] : NULL,
                                     .block_size = c->block_size};
        // Its worker set's engine: the default, or the heterogeneous set's profile and KV.
        w->profile = self->profile;
        w->num_blocks = self->profile.num_gpu_blocks;
        if (c->npool_profiles) {
            const sim_profile_t *sp = sim_profile_find(c->pool_profiles[set % c->npool_profiles]);
            if (!sp) return IPL_E_INVAL;
            w->profile = *sp;
            w->num_blocks = c->num_gpu_blocks ? c->num_gpu_blocks : sp->num_gpu_blocks;
        }
        if (c->npool_blocks && c->pool_blocks[set % c->npool_blocks])
            w->num_blocks = c->pool_blocks[set % c->npool_blocks];
        w->profile.num_gpu_blocks = w->num_blocks;
        w->request_s = w->profile.request_s;
    }
    self->policy = (ipl_policy_t){.version = 1,
                                  .source = "clustersim",
                                  .pools = self->pools,
                                  .pools_len = self->npools,
                                  .workers = self->pw,
                                  .workers_len = self->nworkers};
    return 0;
}

static int s_build_engines(clustersim_cluster_t *self)
{
    const clustersim_config_t *c = &self->cfg;
    for (uint32_t i = 0; i < self->nworkers; i++) {
        s_worker_t *w = &self->workers[i];
        sim_profile_t engine_profile = w->profile;
        engine_profile.request_s = 0; // the cluster applies it before submitting
        sim_engine_config_t ec = {.block_size = c->block_size,
                                  .num_gpu_blocks = w->num_blocks,
                                  .max_num_seqs = c->max_num_seqs,
                                  .max_num_batched_tokens = c->max_num_batched_tokens,
                                  .time_scale = 1.0,
                                  .profile = engine_profile,
                                  .hash_algo = SIM_HASH_XXHASH_CBOR,
                                  .pythonhashseed = "0",
                                  .seed = c->seed,
                                  .model_name = w->name,
                                  .manual = true,
                                  .on_kv_events = s_on_kv_events,
                                  .on_kv_events_arg = w,
                                  // Our collector maps engine hashes as opaque ids (kvmap):
                                  // vLLM's exact digests would only cost time.
                                  .fast_hash = true};
        w->engine = sim_engine_new(&ec);
        if (!w->engine) return IPL_E_NOMEM;
        // Every replica starts knowing every worker is idle and up.
        s_load_t idle = {0};
        s_apply_load(self, i, &idle, s_ms(0));
    }
    self->stats.load_samples = 0;
    return 0;
}

clustersim_cluster_t *clustersim_cluster_new(const clustersim_config_t *cfg,
                                             const clustersim_workload_t *workload,
                                             const char *strategy, char *err, size_t errlen)
{
    const sim_profile_t *profile = sim_profile_find(cfg->profile);
    if (!profile) {
        char names[256];
        snprintf(err, errlen, "unknown profile \"%s\" (known: %s)", cfg->profile,
                 sim_profile_names(names, sizeof names));
        return NULL;
    }
    if (cfg->pools == 0 || cfg->workers_per_pool == 0 || cfg->block_size == 0 ||
        cfg->max_num_seqs == 0 || cfg->max_num_batched_tokens == 0 || !(cfg->sample_period_s > 0) ||
        cfg->delay_min_s < 0 || cfg->delay_max_s < cfg->delay_min_s) {
        snprintf(err, errlen,
                 "pools, workers per pool, block size, max_num_seqs, "
                 "max_num_batched_tokens and the sample period must be > 0, and "
                 "0 <= delay min <= delay max");
        return NULL;
    }
    if ((uint64_t)cfg->pools * cfg->workers_per_pool > IPL_INDEX_MAX_WORKERS) {
        snprintf(err, errlen, "%u workers: the decider's index holds at most %d",
                 cfg->pools * cfg->workers_per_pool, IPL_INDEX_MAX_WORKERS);
        return NULL;
    }
    for (uint32_t p = 0; p < cfg->npool_profiles; p++)
        if (!sim_profile_find(cfg->pool_profiles[p])) {
            char names[256];
            snprintf(err, errlen, "unknown profile \"%s\" (known: %s)", cfg->pool_profiles[p],
                     sim_profile_names(names, sizeof names));
            return NULL;
        }
    if (!decider_router_strategy_known(strategy)) {
        snprintf(err, errlen, "unknown strategy \"%s\" (known: %s)", strategy,
                 decider_router_strategies());
        return NULL;
    }
    clustersim_cluster_t *self = calloc(1, sizeof *self);
    if (!self) {
        s_fail(err, errlen, IPL_E_NOMEM, "out of memory");
        return NULL;
    }
    self->cfg = *cfg;
    self->wl = workload;
    self->strategy = strategy;
    self->profile = *profile;
    if (cfg->num_gpu_blocks) self->profile.num_gpu_blocks = cfg->num_gpu_blocks;
    self->rng = cfg->seed * 0x2545f4914f6cdd1dULL + 0x632be59bd9b4e019ULL;
    decider_decision_init(&self->decision);

    uint32_t n = clustersim_workload_count(workload);
    uint32_t max_tokens = clustersim_workload_max_tokens(workload);
    self->roots = clustersim_workload_roots(workload, &self->nroots);
    self->hash_cap = max_tokens / cfg->block_size + 1;
    self->tokens = malloc(((size_t)max_tokens + 1) * sizeof *self->tokens);
    self->hashes = malloc(self->hash_cap * sizeof *self->hashes);
    self->arrival = malloc((size_t)n * sizeof *self->arrival);
    self->features = calloc(n, sizeof *self->features);
    self->set = calloc(n, sizeof *self->set);
    self->records = calloc(n, sizeof *self->records);
    self->queue = clustersim_queue_new();
    self->kvmap = clustersim_kvmap_new();
    self->state = decider_state_new();
    decider_router_config_t rc = cfg->router;
    rc.default_strategy = strategy;
    rc.seed = (cfg->seed * 0x9e3779b97f4a7c15ULL) | 1; // never 0: 0 means "from the clock"
    rc.offline.terse = true; // nobody reads the explanations: decide without writing them
    if (!strcmp(strategy, "oracle")) {
        self->truth = ipl_index_new();
        rc.offline.oracle = s_oracle;
        rc.offline.oracle_arg = self;
    }
    self->router = decider_router_new(&rc);
    if (!self->tokens || !self->hashes || !self->arrival || !self->records || !self->features ||
        !self->set || (!strcmp(strategy, "oracle") && !self->truth) || !self->queue ||
        !self->kvmap || !self->state || !self->router || s_build_policy(self) != 0 ||
        s_build_engines(self) != 0) {
        s_fail(err, errlen, IPL_E_NOMEM, "out of memory building the cluster");
        clustersim_cluster_destroy(&self);
        return NULL;
    }
    for (uint32_t i = 0; i < n; i++) {
        self->arrival[i] = -1;
        self->records[i] = (clustersim_record_t){
            .arrival_s = -1, .first_token_s = -1, .finish_s = -1, .worker = -1};
    }
    return self;
}

void clustersim_cluster_destroy(clustersim_cluster_t **self_p)
{
    if (!self_p || !*self_p) return;
    clustersim_cluster_t *self = *self_p;
    clustersim_event_t ev;
    while (self->queue && clustersim_queue_pop(self->queue, &ev))
        if (ev.kind == EV_KV) free(ev.p);
    for (uint32_t i = 0; self->workers && i < self->nworkers; i++) {
        s_worker_t *w = &self->workers[i];
        for (uint32_t k = 0; k < w->nin; k++)
            sim_engine_release(w->engine, &w->inflight[k].handle);
        sim_engine_destroy(&w->engine);
        free(w->pending);
        free(w->inflight);
    }
    decider_decision_clear(&self->decision);
    decider_router_destroy(&self->router);
    decider_state_destroy(&self->state);
    clustersim_kvmap_destroy(&self->kvmap);
    clustersim_queue_destroy(&self->queue);
    free(self->workers);
    free(self->pw);
    free(self->pools);
    free(self->pool_names);
    free(self->pool_models);
    free(self->set_names);
    free(self->tokens);
    free(self->hashes);
    free(self->arrival);
    free(self->features);
    free(self->set);
    free(self->records);
    ipl_index_destroy(&self->truth);
    free(self);
    *self_p = NULL;
}

/* --- the loop ------------------------------------------------------------------------------- */

static void s_push_next_root(clustersim_cluster_t *self)
{
    if (self->next_root >= self->nroots) return;
    uint32_t r = self->roots[self->next_root++];
    clustersim_event_t ev = {
        .t = clustersim_workload_req(self->wl, r)->arrival_s, .kind = EV_ARRIVAL, .id = r};
    s_push(self, &ev);
}

int clustersim_cluster_run(clustersim_cluster_t *self, char *err, size_t errlen)
{
    uint32_t n = clustersim_workload_count(self->wl);
    s_push_next_root(self);
    clustersim_event_t ev;
    while (!self->error && clustersim_queue_pop(self->queue, &ev)) {
        self->now = ev.t;
        self->stats.events++;
        switch (ev.kind) {
        case EV_ARRIVAL:
            // Open-loop arrivals enter the queue one at a time, in order.
            if (clustersim_workload_req(self->wl, ev.id)->prev < 0) s_push_next_root(self);
            s_on_arrival(self, ev.id);
            break;
        case EV_STEP:
            s_on_step(self, &self->workers[ev.id]);
            break;
        case EV_SAMPLE:
            s_on_sample(self, &self->workers[ev.id]);
            break;
        case EV_LOAD: {
            s_load_t l = {
                .running = (uint32_t)(ev.a >> 32), .waiting = (uint32_t)ev.a, .kv_usage = ev.x};
            s_apply_load(self, ev.id, &l, ev.b);
            break;
        }
        case EV_KV:
            s_apply_kv(self, ev.p);
            break;
        case EV_OBSERVE:
            s_on_observe(self, ev.id);
            break;
        default:
            break;
        }
    }
    self->stats.virtual_s = self->now;
    for (uint32_t i = 0; i < self->nworkers; i++) {
        sim_engine_stats_t st;
        sim_engine_stats(self->workers[i].engine, &st);
        self->stats.preemptions += st.preemptions;
    }
    if (self->error) {
        snprintf(err, errlen, "simulation failed: %s", ipl_strerror(self->error));
        return self->error;
    }
    if (self->done != n) {
        snprintf(err, errlen, "simulation ended with %u of %u requests accounted for", self->done,
                 n);
        return IPL_E_INVAL;
    }
    return 0;
}

const clustersim_record_t *clustersim_cluster_records(const clustersim_cluster_t *self, size_t *n)
{
    *n = clustersim_workload_count(self->wl);
    return self->records;
}

void clustersim_cluster_stats(const clustersim_cluster_t *self, clustersim_stats_t *out)
{
    *out = self->stats;
}

void clustersim_cluster_write_csv(const clustersim_cluster_t *self, FILE *out, bool header)
{
    if (header)
        fprintf(out, "strategy,request,arrival_s,worker,predicted_ttft_s,ttft_s,predicted_cached,"
                     "cached,prompt_tokens,queued,queued_tokens,running,uncached_tokens,group\n");
    uint32_t n = clustersim_workload_count(self->wl);
    for (uint32_t r = 0; r < n; r++) {
        const clustersim_record_t *rec = &self->records[r];
        const decider_features_t *x = &self->features[r];
        fprintf(out, "%s,%u,%.6f,%d,%.6f,%.6f,%u,%u,%u,%.0f,%.0f,%.0f,%.0f,%d\n", self->strategy, r,
                rec->arrival_s, rec->worker, rec->predicted_ttft_s,
                rec->first_token_s >= 0 ? rec->first_token_s - rec->arrival_s : -1.0,
                rec->predicted_cached, rec->cached_tokens, rec->prompt_tokens, x->queued,
                x->queued_tokens, x->running, x->uncached_tokens,
                clustersim_workload_req(self->wl, r)->group);
    }
}

decider_router_t *clustersim_cluster_router(clustersim_cluster_t *self)
{
    return self->router;
}
