/*
 * sim_engine — the scheduler, the step loop and request bookkeeping.
 *
 * Lists (intrusive, doubly linked): `waiting` in arrival order (a preempted request goes back
 * to its front), `running` in admission order (preemption takes its tail). A request in either
 * list holds one reference owned by the engine. Everything below runs under `lock`; the engine
 * thread releases it only while a step "runs" (sleeps).
 */
#include "sim_engine.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

#include "ipl_clock.h"
#include "ipl_cond.h"
#include "ipl_error.h"
#include "ipl_log.h"
#include "sim_cache.h"

typedef enum { S_WAITING, S_RUNNING, S_DONE } s_state_t;

typedef struct {
    struct sim_req *head, *tail;
    uint32_t n;
} s_list_t;

struct sim_req {
    int refs;
    s_state_t state;
    uint32_t *tokens; /* prompt then planned output */
    uint32_t nprompt;
    uint32_t noutput;
    sim_finish_t final_finish;
    uint32_t emitted;
    uint64_t computed; /* tokens whose KV is computed (or cached) */
    uint32_t step_new; /* tokens scheduled in the step in flight */
    sim_seq_t seq;
    sim_block_keys_t keys; /* owned strings; seq.keys points here when set */
    sim_hash_t *hashes;    /* chain over the full blocks of tokens[] */
    uint32_t nhashes;
    bool scheduled_once;
    uint32_t cached_tokens;
    uint32_t preemptions;
    sim_finish_t finish;
    double arrival, ready_at, first_sched, first_token, last_token, finish_at;
    pthread_cond_t cond;
    struct sim_req *prev, *next;
};

typedef struct {
    ipl_metric_t *running, *waiting, *usage;
    ipl_metric_t *queries, *hits, *preemptions, *prompt_tokens, *generation_tokens;
    ipl_metric_t *success[4];
    ipl_metric_t *ttft, *itl, *e2e, *queue, *prefill, *decode, *inference;
    ipl_metric_t *iteration_tokens;
} s_metrics_t;

struct sim_engine {
    sim_engine_config_t cfg;
    char *pythonhashseed;
    char *model_name;
    sim_hasher_t *hasher;
    sim_cache_t *cache;
    sim_kvbatch_t *batch; /* events of the step being scheduled / in flight */
    pthread_mutex_t lock;
    pthread_cond_t work; /* new work, or stop */
    s_list_t waiting, running;
    bool stopping;
    bool step_in_flight;
    pthread_t thread;
    bool thread_started;
    uint64_t t0_ns;    /* threaded mode: real time of simulated 0 */
    double vnow;       /* manual mode clock */
    uint32_t *scratch; /* lookup hits */
    uint32_t scratch_cap;
    uint64_t steps, preemptions, prefix_queries, prefix_hits;
    double last_step;
    s_metrics_t m;
};

/* --- vLLM's histogram buckets -------------------------------------------------------------- */
/* As vllm-project/vllm: vllm/v1/metrics/loggers.py; the latency ones are in ipl_metrics. */

static const double s_iter_buckets[] = {1,   8,    16,   32,   64,   128,  256,
                                        512, 1024, 2048, 4096, 8192, 16384};

#define S_N(a) (sizeof(a) / sizeof((a)[0]))

const char *sim_finish_name(sim_finish_t finish)
{
    switch (finish) {
    case SIM_FINISH_STOP:
        return "stop";
    case SIM_FINISH_LENGTH:
        return "length";
    case SIM_FINISH_ABORT:
        return "abort";
    default:
        return NULL;
    }
}

static void s_metrics_init(sim_engine_t *self)
{
    ipl_metrics_t *m = self->cfg.metrics;
    if (!m) return;
    char model[256], labels[320];
    ipl_metrics_escape(model, sizeof model, self->model_name);
    snprintf(labels, sizeof labels, "engine=\"0\",model_name=\"%s\"", model);
    s_metrics_t *x = &self->m;
    x->running = ipl_metrics_gauge(m, "vllm:num_requests_running",
                                   "Number of requests in model execution batches.", labels);
    x->waiting = ipl_metrics_gauge(m, "vllm:num_requests_waiting",
                                   "Number of requests waiting to be processed.", labels);
    x->usage = ipl_metrics_gauge(m, "vllm:kv_cache_usage_perc",
                                 "KV-cache usage. 1 means 100 percent usage.", labels);
    x->queries = ipl_metrics_counter(m, "vllm:prefix_cache_queries_total",
                                     "Prefix cache queries, in terms of number of queried "
                                     "tokens.",
                                     labels);
    x->hits =
        ipl_metrics_counter(m, "vllm:prefix_cache_hits_total",
                            "Prefix cache hits, in terms of number of cached tokens.", labels);
    x->preemptions =
        ipl_metrics_counter(m, "vllm:num_preemptions_total",
                            "Cumulative number of preemption from the engine.", labels);
    x->prompt_tokens = ipl_metrics_counter(m, "vllm:prompt_tokens_total",
                                           "Number of prefill tokens processed.", labels);
    x->generation_tokens = ipl_metrics_counter(m, "vllm:generation_tokens_total",
                                               "Number of generation tokens processed.", labels);
    for (int f = SIM_FINISH_STOP; f <= SIM_FINISH_ABORT; f++) {
        char l[400];
        snprintf(l, sizeof l, "engine=\"0\",finished_reason=\"%s\",model_name=\"%s\"",
                 sim_finish_name((sim_finish_t)f), model);
        x->success[f] = ipl_metrics_counter(m, "vllm:request_success_total",
                                            "Count of successfully processed requests.", l);
    }
    x->ttft = ipl_metrics_histogram(m, "vllm:time_to_first_token_seconds",
                                    "Histogram of time to first token in seconds.", labels,
                                    ipl_metrics_vllm_ttft_buckets, ipl_metrics_vllm_ttft_nbuckets);
    x->itl = ipl_metrics_histogram(m, "vllm:inter_token_latency_seconds",
                                   "Histogram of inter-token latency in seconds.", labels,
                                   ipl_metrics_vllm_itl_buckets, ipl_metrics_vllm_itl_nbuckets);
    x->e2e = ipl_metrics_histogram(m, "vllm:e2e_request_latency_seconds",
                                   "Histogram of e2e request latency in seconds.", labels,
                                   ipl_metrics_vllm_e2e_buckets, ipl_metrics_vllm_e2e_nbuckets);
    x->queue = ipl_metrics_histogram(m, "vllm:request_queue_time_seconds",
                                     "Histogram of time spent in WAITING phase for request.",
                                     labels, ipl_metrics_vllm_e2e_buckets, ipl_metrics_vllm_e2e_nbuckets);
    x->prefill = ipl_metrics_histogram(m, "vllm:request_prefill_time_seconds",
                                       "Histogram of time spent in PREFILL phase for request.",
                                       labels, ipl_metrics_vllm_e2e_buckets, ipl_metrics_vllm_e2e_nbuckets);
    x->decode = ipl_metrics_histogram(m, "vllm:request_decode_time_seconds",
                                      "Histogram of time spent in DECODE phase for request.",
                                      labels, ipl_metrics_vllm_e2e_buckets, ipl_metrics_vllm_e2e_nbuckets);
    x->inference = ipl_metrics_histogram(m, "vllm:request_inference_time_seconds",
                                         "Histogram of time spent in RUNNING phase for request.",
                                         labels, ipl_metrics_vllm_e2e_buckets, ipl_metrics_vllm_e2e_nbuckets);
    x->iteration_tokens = ipl_metrics_histogram(m, "vllm:iteration_tokens_total",
                                                "Histogram of number of tokens per engine_step.",
                                                labels, s_iter_buckets, S_N(s_iter_buckets));
}

static void s_m_add(ipl_metric_t *metric, double v)
{
    if (metric) ipl_metric_add(metric, v);
}

static void s_m_observe(ipl_metric_t *metric, double v)
{
    if (metric) ipl_metric_observe(metric, v < 0 ? 0 : v);
}

static void s_update_gauges(sim_engine_t *self)
{
    if (!self->m.running) return;
    ipl_metric_set(self->m.running, self->running.n);
    ipl_metric_set(self->m.waiting, self->waiting.n);
    ipl_metric_set(self->m.usage, sim_cache_usage(self->cache));
}

/* --- clock --------------------------------------------------------------------------------- */

static double s_now(sim_engine_t *self)
{
    if (self->cfg.manual) return self->vnow;
    return (double)(ipl_mono_ns() - self->t0_ns) / 1e9 * self->cfg.time_scale;
}

/* The absolute CLOCK_MONOTONIC time at which the simulated clock reads `sim_s`. */
static struct timespec s_real_deadline(const sim_engine_t *self, double sim_s)
{
    double real = sim_s / self->cfg.time_scale;
    if (real < 0) real = 0;
    if (real > 1e9) real = 1e9;
    uint64_t ns = self->t0_ns + (uint64_t)(real * 1e9);
    return (struct timespec){.tv_sec = (time_t)(ns / 1000000000ull),
                             .tv_nsec = (long)(ns % 1000000000ull)};
}

/* --- lists --------------------------------------------------------------------------------- */

static void s_list_push_tail(s_list_t *l, sim_req_t *r)
{
    r->prev = l->tail;
    r->next = NULL;
    if (l->tail)
        l->tail->next = r;
    else
        l->head = r;
    l->tail = r;
    l->n++;
}

static void s_list_push_head(s_list_t *l, sim_req_t *r)
{
    r->next = l->head;
    r->prev = NULL;
    if (l->head)
        l->head->prev = r;
    else
        l->tail = r;
    l->head = r;
    l->n++;
}

static void s_list_remove(s_list_t *l, sim_req_t *r)
{
    if (r->prev)
        r->prev->next = r->next;
    else
        l->head = r->next;
    if (r->next)
        r->next->prev = r->prev;
    else
        l->tail = r->prev;
    r->prev = r->next = NULL;
    l->n--;
}

/* --- requests ------------------------------------------------------------------------------ */

static void s_req_free(sim_req_t *r)
{
    sim_seq_release(&r->seq);
    free((char *)r->keys.lora_name);
    free((char *)r->keys.cache_salt);
    pthread_cond_destroy(&r->cond);
    free(r->hashes);
    free(r->tokens);
    free(r);
}

static void s_req_unref(sim_req_t *r)
{
    if (--r->refs == 0) s_req_free(r);
}

/* cfg.fast_hash's block hash: XXH3-64 of the tokens seeded with the parent's, then of each
 * extra key; 16 bytes like xxhash's (the high half a mix of the low), wire value `lo`. */
static sim_hash_t s_fast_hash(const sim_hash_t *parent, const uint32_t *tokens, uint32_t n,
                              const sim_extra_keys_t *extra)
{
    uint64_t h = XXH3_64bits_withSeed(tokens, (size_t)n * sizeof *tokens,
                                      parent ? parent->lo : 0x9e3779b97f4a7c15ULL);
    for (uint32_t k = 0; k < extra->nkeys; k++)
        h = XXH3_64bits_withSeed(extra->keys[k], strlen(extra->keys[k]), h);
    sim_hash_t out = {.len = 16, .lo = h};
    uint64_t hi = h * 0xbf58476d1ce4e5b9ULL ^ (h >> 31);
    for (int i = 0; i < 8; i++) {
        out.bytes[7 - i] = (uint8_t)(hi >> (8 * i));
        out.bytes[15 - i] = (uint8_t)(h >> (8 * i));
    }
    return out;
}

/* Extends the request's hash chain to cover `nblocks` full blocks. vLLM's extra keys: the
 * LoRA name on every block, then the cache salt on the first. */
static void s_ensure_hashes(sim_engine_t *self, sim_req_t *r, uint32_t nblocks)
{
    uint32_t bs = self->cfg.block_size;
    while (r->nhashes < nblocks) {
        sim_extra_keys_t extra = {.nkeys = 0};
        if (r->keys.lora_name) extra.keys[extra.nkeys++] = r->keys.lora_name;
        if (r->keys.cache_salt && r->nhashes == 0) extra.keys[extra.nkeys++] = r->keys.cache_salt;
        const sim_hash_t *parent = r->nhashes ? &r->hashes[r->nhashes - 1] : NULL;
        const uint32_t *tokens = r->tokens + (uint64_t)r->nhashes * bs;
        r->hashes[r->nhashes] = self->cfg.fast_hash
                                    ? s_fast_hash(parent, tokens, bs, &extra)
                                    : sim_hasher_block(self->hasher, parent, tokens, bs, &extra);
        r->nhashes++;
    }
}

static uint64_t s_num_tokens(const sim_req_t *r)
{
    return (uint64_t)r->nprompt + r->emitted;
}

/* Takes a request out of the engine: frees its blocks, records its end, wakes its waiter and
 * drops the engine's reference. */
static void s_finish(sim_engine_t *self, sim_req_t *r, sim_finish_t why, double now)
{
    if (r->state == S_WAITING)
        s_list_remove(&self->waiting, r);
    else if (r->state == S_RUNNING)
        s_list_remove(&self->running, r);
    else
        return;
    sim_cache_free(self->cache, &r->seq);
    r->state = S_DONE;
    r->finish = why;
    r->finish_at = now;
    r->step_new = 0;
    s_m_add(self->m.success[why], 1);
    s_m_observe(self->m.e2e, now - r->arrival);
    if (r->scheduled_once) {
        s_m_observe(self->m.inference, now - r->first_sched);
        if (r->first_token >= 0) s_m_observe(self->m.decode, now - r->first_token);
    }
    pthread_cond_broadcast(&r->cond);
    s_req_unref(r);
}

static void s_preempt(sim_engine_t *self, sim_req_t *r)
{
    s_list_remove(&self->running, r);
    sim_cache_free(self->cache, &r->seq);
    r->computed = 0;
    r->step_new = 0;
    r->state = S_WAITING;
    r->preemptions++;
    s_list_push_head(&self->waiting, r);
    self->preemptions++;
    s_m_add(self->m.preemptions, 1);
    IPL_DEBUG("preempted", "prompt_tokens=%u emitted=%u free_blocks=%u", r->nprompt, r->emitted,
              sim_cache_num_free(self->cache));
}

/* --- scheduling ---------------------------------------------------------------------------- */

typedef struct {
    uint64_t prefill_tokens;
    uint32_t decode_seqs;
    uint64_t context;
    uint64_t scheduled_tokens;
    uint32_t scheduled_seqs;
} s_work_t;

static void s_account(const sim_req_t *r, uint64_t new_tokens, s_work_t *w)
{
    bool decode = r->emitted > 0 && s_num_tokens(r) - r->computed == 1;
    if (decode)
        w->decode_seqs++;
    else
        w->prefill_tokens += new_tokens;
    w->context += r->computed + new_tokens;
    w->scheduled_tokens += new_tokens;
    w->scheduled_seqs++;
}

/* Commits the blocks that the scheduled tokens fill. */
static void s_commit(sim_engine_t *self, sim_req_t *r)
{
    uint32_t nfull = (uint32_t)((r->computed + r->step_new) / self->cfg.block_size);
    s_ensure_hashes(self, r, nfull);
    sim_cache_commit(self->cache, &r->seq, r->hashes, r->tokens, nfull, self->batch);
}

static int s_scratch(sim_engine_t *self, uint32_t n)
{
    if (n <= self->scratch_cap) return 0;
    uint32_t *p = realloc(self->scratch, (size_t)n * sizeof *p);
    if (!p) return IPL_E_NOMEM;
    self->scratch = p;
    self->scratch_cap = n;
    return 0;
}

/* One scheduling pass at `now`. Fills *w; returns the number of scheduled requests. */
static uint32_t s_schedule(sim_engine_t *self, double now, s_work_t *w)
{
    *w = (s_work_t){0};
    uint64_t budget = self->cfg.max_num_batched_tokens;
    bool preempted = false;
    uint32_t bs = self->cfg.block_size;

    /* Running requests first, in admission order. */
    for (sim_req_t *r = self->running.head; r && budget > 0;) {
        uint64_t want = s_num_tokens(r) - r->computed;
        uint64_t n = want < budget ? want : budget;
        bool scheduled = false;
        for (;;) {
            int rc =
                sim_cache_allocate(self->cache, &r->seq, NULL, 0, r->computed + n, self->batch);
            if (rc == 0) {
                scheduled = true;
                break;
            }
            sim_req_t *victim = self->running.tail;
            s_preempt(self, victim);
            preempted = true;
            if (victim == r) break;
        }
        if (!scheduled) break;
        r->step_new = (uint32_t)n;
        s_account(r, n, w);
        s_commit(self, r);
        budget -= n;
        r = r->next; /* read after preemptions, which only ever remove the tail */
    }

    /* Then waiting requests, unless this step preempted one (vLLM does the same). */
    while (!preempted && self->waiting.head && self->running.n < self->cfg.max_num_seqs &&
           budget > 0) {
        sim_req_t *r = self->waiting.head;
        if (r->ready_at > now) break;
        uint64_t total = s_num_tokens(r);
        /* At least one token is always computed, so at most total-1 tokens can hit. */
        uint32_t lookup = (uint32_t)((total - 1) / bs);
        if (s_scratch(self, lookup ? lookup : 1) != 0) break;
        s_ensure_hashes(self, r, lookup);
        uint32_t nhits = sim_cache_lookup(self->cache, r->hashes, lookup, self->scratch);
        uint64_t computed = (uint64_t)nhits * bs;
        uint64_t want = total - computed;
        uint64_t n = want < budget ? want : budget;
        if (sim_cache_allocate(self->cache, &r->seq, self->scratch, nhits, computed + n,
                               self->batch) != 0)
            break; /* FCFS: nothing behind it goes first */
        self->prefix_queries += total;
        self->prefix_hits += computed;
        s_m_add(self->m.queries, (double)total);
        s_m_add(self->m.hits, (double)computed);
        if (!r->scheduled_once) {
            r->scheduled_once = true;
            r->cached_tokens = (uint32_t)computed;
            r->first_sched = now;
            s_m_observe(self->m.queue, now - r->arrival);
        }
        s_list_remove(&self->waiting, r);
        r->state = S_RUNNING;
        r->computed = computed;
        s_list_push_tail(&self->running, r);
        r->step_new = (uint32_t)n;
        s_account(r, n, w);
        s_commit(self, r);
        budget -= n;
    }
    return w->scheduled_seqs;
}

/* Ends the step at `now`: scheduled tokens are computed; caught-up requests sample a token. */
static void s_complete(sim_engine_t *self, double now)
{
    for (sim_req_t *r = self->running.head; r;) {
        sim_req_t *next = r->next;
        if (r->step_new == 0) {
            r = next;
            continue;
        }
        r->computed += r->step_new;
        r->step_new = 0;
        if (r->computed == s_num_tokens(r)) {
            r->emitted++;
            s_m_add(self->m.generation_tokens, 1);
            if (r->first_token < 0) {
                r->first_token = now;
                s_m_observe(self->m.ttft, now - r->arrival);
                s_m_observe(self->m.prefill, now - r->first_sched);
                s_m_add(self->m.prompt_tokens, r->nprompt);
            } else {
                s_m_observe(self->m.itl, now - r->last_token);
            }
            r->last_token = now;
            if (r->emitted >= r->noutput)
                s_finish(self, r, r->final_finish, now);
            else
                pthread_cond_broadcast(&r->cond);
        }
        r = next;
    }
}

static void s_publish(sim_engine_t *self)
{
    if (self->cfg.kv_publish) (void)self->cfg.kv_publish(self->cfg.kv_sink, self->batch);
    if (self->cfg.on_kv_events && sim_kvbatch_count(self->batch))
        self->cfg.on_kv_events(self->cfg.on_kv_events_arg, self->batch, s_now(self));
    sim_kvbatch_reset(self->batch);
}

/* Schedules a step at `start`; returns its duration (0: nothing scheduled). */
static double s_plan(sim_engine_t *self, double start)
{
    s_work_t w;
    if (s_schedule(self, start, &w) == 0) return 0;
    double d = sim_profile_step_s(&self->cfg.profile, w.prefill_tokens, w.decode_seqs, w.context);
    self->steps++;
    self->last_step = d;
    s_m_observe(self->m.iteration_tokens, (double)w.scheduled_tokens);
    return d;
}

/* --- engine thread ------------------------------------------------------------------------- */

static void *s_thread(void *arg)
{
    sim_engine_t *self = arg;
    pthread_mutex_lock(&self->lock);
    while (!self->stopping) {
        if (!self->running.n && !self->waiting.n) {
            pthread_cond_wait(&self->work, &self->lock);
            continue;
        }
        double start = s_now(self);
        if (!self->running.n && self->waiting.head->ready_at > start) {
            struct timespec dl = s_real_deadline(self, self->waiting.head->ready_at);
            pthread_cond_timedwait(&self->work, &self->lock, &dl);
            continue;
        }
        uint64_t preemptions = self->preemptions;
        double d = s_plan(self, start);
        s_update_gauges(self);
        if (d <= 0) {
            s_publish(self);
            if (self->preemptions != preemptions)
                continue; /* the only runner preempted itself: the next pass readmits it */
            /* Nothing fits and nothing was preempted (not expected: submit refuses requests
             * larger than the cache): retry after 5 ms of real time rather than spin. */
            struct timespec dl = s_real_deadline(self, start + 0.005 * self->cfg.time_scale);
            pthread_cond_timedwait(&self->work, &self->lock, &dl);
            continue;
        }
        double end = start + d;
        struct timespec dl = s_real_deadline(self, end);
        self->step_in_flight = true;
        while (!self->stopping &&
               pthread_cond_timedwait(&self->work, &self->lock, &dl) != ETIMEDOUT) {
        }
        self->step_in_flight = false;
        if (self->stopping) break;
        s_complete(self, end);
        s_publish(self);
        s_update_gauges(self);
    }
    pthread_mutex_unlock(&self->lock);
    return NULL;
}

/* --- public -------------------------------------------------------------------------------- */

sim_engine_t *sim_engine_new(const sim_engine_config_t *cfg)
{
    assert(cfg && cfg->block_size > 0 && cfg->num_gpu_blocks > 0 && cfg->max_num_seqs > 0 &&
           cfg->max_num_batched_tokens > 0 && cfg->time_scale > 0);
    sim_engine_t *self = calloc(1, sizeof *self);
    if (!self) return NULL;
    self->cfg = *cfg;
    self->pythonhashseed = cfg->pythonhashseed ? strdup(cfg->pythonhashseed) : NULL;
    self->model_name = strdup(cfg->model_name ? cfg->model_name : "sim-model");
    self->cfg.pythonhashseed = self->pythonhashseed;
    self->cfg.model_name = self->model_name;
    pthread_mutex_init(&self->lock, NULL);
    ipl_cond_init_mono(&self->work);
    self->hasher = sim_hasher_new(cfg->hash_algo, self->pythonhashseed, cfg->seed);
    self->cache = sim_cache_new(cfg->num_gpu_blocks, cfg->block_size);
    self->batch = sim_kvbatch_new();
    if ((cfg->pythonhashseed && !self->pythonhashseed) || !self->model_name || !self->hasher ||
        !self->cache || !self->batch) {
        sim_engine_destroy(&self);
        return NULL;
    }
    self->t0_ns = ipl_mono_ns();
    s_metrics_init(self);
    s_update_gauges(self);
    return self;
}

int sim_engine_start(sim_engine_t *self)
{
    if (self->cfg.manual || self->thread_started) return 0;
    if (pthread_create(&self->thread, NULL, s_thread, self) != 0) return IPL_E_IO;
    self->thread_started = true;
    return 0;
}

void sim_engine_stop(sim_engine_t *self)
{
    pthread_mutex_lock(&self->lock);
    self->stopping = true;
    double now = s_now(self);
    while (self->running.head)
        s_finish(self, self->running.head, SIM_FINISH_ABORT, now);
    while (self->waiting.head)
        s_finish(self, self->waiting.head, SIM_FINISH_ABORT, now);
    s_update_gauges(self);
    pthread_cond_broadcast(&self->work);
    pthread_mutex_unlock(&self->lock);
    if (self->thread_started) {
        pthread_join(self->thread, NULL);
        self->thread_started = false;
    }
}

void sim_engine_destroy(sim_engine_t **self_p)
{
    assert(self_p);
    sim_engine_t *self = *self_p;
    if (!self) return;
    sim_engine_stop(self);
    sim_kvbatch_destroy(&self->batch);
    sim_cache_destroy(&self->cache);
    sim_hasher_destroy(&self->hasher);
    pthread_cond_destroy(&self->work);
    pthread_mutex_destroy(&self->lock);
    free(self->scratch);
    free(self->pythonhashseed);
    free(self->model_name);
    free(self);
    *self_p = NULL;
}

sim_req_t *sim_engine_submit(sim_engine_t *self, const sim_req_spec_t *spec)
{
    assert(spec && spec->nprompt > 0 && spec->noutput > 0);
    uint64_t total = (uint64_t)spec->nprompt + spec->noutput;
    if ((total + self->cfg.block_size - 1) / self->cfg.block_size > self->cfg.num_gpu_blocks)
        return NULL; /* could never run: the caller checks max_model_len against capacity */
    sim_req_t *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->tokens = malloc(total * sizeof *r->tokens);
    r->hashes = malloc((total / self->cfg.block_size + 1) * sizeof *r->hashes);
    if (!r->tokens || !r->hashes) {
        free(r->tokens);
        free(r->hashes);
        free(r);
        return NULL;
    }
    if (spec->keys) {
        r->keys.lora_id = spec->keys->lora_id;
        r->keys.lora_name = spec->keys->lora_name ? strdup(spec->keys->lora_name) : NULL;
        r->keys.cache_salt = spec->keys->cache_salt ? strdup(spec->keys->cache_salt) : NULL;
        if ((spec->keys->lora_name && !r->keys.lora_name) ||
            (spec->keys->cache_salt && !r->keys.cache_salt)) {
            free((char *)r->keys.lora_name);
            free((char *)r->keys.cache_salt);
            free(r->tokens);
            free(r->hashes);
            free(r);
            return NULL;
        }
        r->seq.keys = &r->keys;
    }
    memcpy(r->tokens, spec->prompt, spec->nprompt * sizeof *r->tokens);
    memcpy(r->tokens + spec->nprompt, spec->output, spec->noutput * sizeof *r->tokens);
    r->nprompt = spec->nprompt;
    r->noutput = spec->noutput;
    r->final_finish = spec->finish == SIM_FINISH_STOP ? SIM_FINISH_STOP : SIM_FINISH_LENGTH;
    r->first_token = r->last_token = r->finish_at = -1;
    ipl_cond_init_mono(&r->cond);
    r->refs = 2; /* the caller's and the engine's */
    pthread_mutex_lock(&self->lock);
    if (self->stopping) {
        pthread_mutex_unlock(&self->lock);
        r->refs = 1;
        s_req_free(r);
        return NULL;
    }
    r->arrival = s_now(self);
    r->ready_at = r->arrival + self->cfg.profile.request_s;
    r->state = S_WAITING;
    s_list_push_tail(&self->waiting, r);
    s_update_gauges(self);
    pthread_cond_signal(&self->work);
    pthread_mutex_unlock(&self->lock);
    return r;
}

static void s_status(const sim_req_t *r, sim_req_status_t *st)
{
    *st = (sim_req_status_t){.prompt_tokens = r->nprompt,
                             .cached_tokens = r->cached_tokens,
                             .emitted = r->emitted,
                             .finish = r->finish,
                             .preemptions = r->preemptions,
                             .arrival_s = r->arrival,
                             .first_token_s = r->first_token,
                             .last_token_s = r->last_token,
                             .finish_s = r->finish_at};
}

int sim_engine_wait(sim_engine_t *self, sim_req_t *req, uint32_t seen, int timeout_ms,
                    sim_req_status_t *st)
{
    struct timespec dl;
    uint64_t ns = ipl_mono_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ull;
    dl.tv_sec = (time_t)(ns / 1000000000ull);
    dl.tv_nsec = (long)(ns % 1000000000ull);
    int rc = 0;
    pthread_mutex_lock(&self->lock);
    while (req->emitted <= seen && req->finish == SIM_FINISH_NONE) {
        if (pthread_cond_timedwait(&req->cond, &self->lock, &dl) == ETIMEDOUT) {
            rc = IPL_E_TIMEOUT;
            break;
        }
    }
    s_status(req, st);
    pthread_mutex_unlock(&self->lock);
    return rc;
}

void sim_engine_status(sim_engine_t *self, sim_req_t *req, sim_req_status_t *st)
{
    pthread_mutex_lock(&self->lock);
    s_status(req, st);
    pthread_mutex_unlock(&self->lock);
}

const uint32_t *sim_req_output(const sim_req_t *req, uint32_t *n)
{
    *n = req->noutput;
    return req->tokens + req->nprompt;
}

void sim_engine_abort(sim_engine_t *self, sim_req_t *req)
{
    pthread_mutex_lock(&self->lock);
    if (req->state != S_DONE) {
        s_finish(self, req, SIM_FINISH_ABORT, s_now(self));
        s_update_gauges(self);
        pthread_cond_signal(&self->work);
    }
    pthread_mutex_unlock(&self->lock);
}

void sim_engine_release(sim_engine_t *self, sim_req_t **req_p)
{
    assert(req_p);
    if (!*req_p) return;
    pthread_mutex_lock(&self->lock);
    s_req_unref(*req_p);
    pthread_mutex_unlock(&self->lock);
    *req_p = NULL;
}

void sim_engine_reset_prefix_cache(sim_engine_t *self)
{
    pthread_mutex_lock(&self->lock);
    sim_cache_reset(self->cache, self->batch);
    /* During a step the event joins that step's batch, after its BlockStored events; when
     * idle it goes out at once. Either way no announced block outlives the clear. */
    if (!self->step_in_flight) s_publish(self);
    pthread_mutex_unlock(&self->lock);
    IPL_INFO("prefix_cache_reset", NULL);
}

void sim_engine_restart(sim_engine_t *self)
{
    pthread_mutex_lock(&self->lock);
    double now = s_now(self);
    while (self->running.head)
        s_finish(self, self->running.head, SIM_FINISH_ABORT, now);
    while (self->waiting.head)
        s_finish(self, self->waiting.head, SIM_FINISH_ABORT, now);
    /* A step in flight completes against empty lists: nothing is emitted, nothing published
     * but what this function leaves in the batch (nothing). */
    sim_kvbatch_reset(self->batch);
    sim_cache_wipe(self->cache);
    if (self->cfg.kv_restart) self->cfg.kv_restart(self->cfg.kv_sink);
    self->steps = self->preemptions = self->prefix_queries = self->prefix_hits = 0;
    self->last_step = 0;
    s_update_gauges(self);
    pthread_cond_broadcast(&self->work);
    pthread_mutex_unlock(&self->lock);
    IPL_WARN("engine_restarted", "fault=restart kv_seq=0 cache=empty");
}

void sim_engine_stats(sim_engine_t *self, sim_engine_stats_t *out)
{
    pthread_mutex_lock(&self->lock);
    *out = (sim_engine_stats_t){.running = self->running.n,
                                .waiting = self->waiting.n,
                                .free_blocks = sim_cache_num_free(self->cache),
                                .cached_blocks = sim_cache_num_cached(self->cache),
                                .kv_usage = sim_cache_usage(self->cache),
                                .steps = self->steps,
                                .preemptions = self->preemptions,
                                .prefix_queries = self->prefix_queries,
                                .prefix_hits = self->prefix_hits,
                                .now_s = s_now(self),
                                .last_step_s = self->last_step};
    pthread_mutex_unlock(&self->lock);
}

double sim_engine_now(sim_engine_t *self)
{
    pthread_mutex_lock(&self->lock);
    double now = s_now(self);
    pthread_mutex_unlock(&self->lock);
    return now;
}

double sim_engine_step(sim_engine_t *self)
{
    assert(self->cfg.manual);
    pthread_mutex_lock(&self->lock);
    if (!self->running.n && self->waiting.head && self->waiting.head->ready_at > self->vnow)
        self->vnow = self->waiting.head->ready_at;
    double d = s_plan(self, self->vnow);
    if (d > 0) {
        self->vnow += d;
        s_complete(self, self->vnow);
    }
    s_publish(self);
    s_update_gauges(self);
    pthread_mutex_unlock(&self->lock);
    return d;
}

void sim_engine_advance(sim_engine_t *self, double seconds)
{
    assert(self->cfg.manual && seconds >= 0);
    pthread_mutex_lock(&self->lock);
    self->vnow += seconds;
    pthread_mutex_unlock(&self->lock);
}
