/*
 * bench_ingest — KV-event ingest on one core: a recorded stream of vLLM-format batches through
 * the real code paths, back to back in one thread:
 *
 *   vLLM payload ─► collector_stream_message ─► ipl_vllm_kv decode ─► re-hash (XXH3 chain)
 *        ─► KV_EVENT ipl_msg_encode ─► ipl_msg_decode ─► aggregator_state_apply ─► ipl_index
 *
 * (the two proto steps are the collector → aggregator hop without the socket). Figures:
 * ingest_events_per_s = block events (hashes in BlockStored + BlockRemoved) / wall time, and
 * ingest_events_per_cpu_s the same per second of this thread's CPU time (what one core can do
 * when the machine is shared). Every pass is checked against the generator: each block
 * reached the index, no parent was unknown, memberships equal the blocks the workers hold.
 *
 * The stream is generated before the clock starts, in vLLM >= 0.26 map format by the
 * simulator's encoder (sim_kvwire_encode), per worker:
 *   - each batch (one engine step): the evictions needed to stay within the worker's KV
 *     capacity (one BlockRemoved per block, as vLLM sends them), then 1-4 BlockStored events
 *     of 1-32 blocks x 16 tokens (random token ids below 151,936);
 *   - 30% of stores use one of 512 shared "system prompt" families (Zipf-like popularity):
 *     the family prefix (1-32 blocks, same tokens on every worker, so the index holds
 *     (block, worker) sets of several workers) when the worker does not hold it, else a
 *     continuation of it; the other 70% continue a live chain of the worker;
 *   - engine hashes are random 64-bit values (vLLM sends the last 8 bytes of SHA-256);
 *   - batches of the workers interleave at random, each worker's numbered from 0.
 * The index is warmed to steady state (every worker at capacity) before the recorded part.
 *
 *   build/bench/bench_ingest [--workers 16] [--capacity 16384] [--events 3000000] [--passes 5]
 *                            [--seed 1]
 * Figures: the median of `--passes` runs (each on a fresh pipeline), then one more run timed
 * stage by stage for the ingest_*_ns_per_event breakdown.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aggregator/aggregator_state.h"
#include "bench.h"
#include "collector/collector_node.h"
#include "collector/collector_stream.h"
#include "ipl_clock.h"
#include "ipl_error.h"
#include "ipl_index.h"
#include "ipl_proto.h"
#include "sim_kvbatch.h"
#include "sim_kvwire.h"

#define S_BLOCK      16
#define S_VOCAB      151936u
#define S_FAMILIES   512
#define S_MAX_STORE  32 /* blocks per BlockStored */
#define S_MAX_STORES 4  /* BlockStored events per batch */
#define S_FAMILY_PCT 30
#define S_MAX_TIPS   4096
#define S_NONE       UINT64_MAX

/* ---- the generator: one simulated vLLM worker's prefix cache -------------------------------- */

typedef struct {
    uint64_t engine; /* the engine's hash of the chain's last block */
    uint64_t pos;    /* its FIFO position */
} s_tip_t;

typedef struct {
    uint64_t seq;    /* next batch sequence number */
    uint64_t *fifo;  /* engine hashes by position (ring of fifo_cap) */
    int32_t *family; /* the family whose prefix starts at this position, or -1 */
    uint8_t *dead;   /* evicted ahead of its turn (rest of a family prefix) */
    size_t fifo_cap; /* power of two */
    uint64_t head, tail;
    size_t live;
    s_tip_t tips[S_MAX_TIPS];
    size_t ntips;
    uint64_t fam_pos[S_FAMILIES];  /* FIFO position of the family's first block, or S_NONE */
    uint64_t fam_last[S_FAMILIES]; /* engine hash of its last block */
    uint64_t next_engine;
    bool full; /* has evicted: at capacity */
} s_worker_t;

typedef struct {
    s_worker_t *workers;
    int nworkers;
    size_t capacity;
    uint32_t fam_len[S_FAMILIES];
    bench_rng_t rng;
    sim_kvbatch_t *batch;
    uint64_t stored, removed; /* block events generated */
    /* scratch */
    sim_hash_t hashes[S_MAX_STORE];
    uint32_t tokens[S_MAX_STORE * S_BLOCK];
} s_gen_t;

static uint32_t s_family_token(int f, uint32_t i)
{
    return (uint32_t)(bench_mix(((uint64_t)f << 32) | i) % S_VOCAB);
}

static void s_gen_init(s_gen_t *g, int nworkers, size_t capacity, uint64_t seed)
{
    memset(g, 0, sizeof *g);
    g->nworkers = nworkers;
    g->capacity = capacity;
    g->rng = bench_rng(seed);
    g->batch = sim_kvbatch_new();
    g->workers = calloc((size_t)nworkers, sizeof *g->workers);
    if (!g->batch || !g->workers) BENCH_DIE("out of memory");
    size_t cap = 1;
    while (cap < capacity + 2 * S_MAX_STORE * S_MAX_STORES)
        cap *= 2;
    for (int f = 0; f < S_FAMILIES; f++)
        g->fam_len[f] = (uint32_t)bench_range(&g->rng, 1, S_MAX_STORE);
    for (int w = 0; w < nworkers; w++) {
        s_worker_t *wk = &g->workers[w];
        wk->fifo_cap = cap;
        wk->fifo = malloc(cap * sizeof *wk->fifo);
        wk->family = malloc(cap * sizeof *wk->family);
        wk->dead = calloc(cap, 1);
        if (!wk->fifo || !wk->family || !wk->dead) BENCH_DIE("out of memory");
        for (int f = 0; f < S_FAMILIES; f++)
            wk->fam_pos[f] = S_NONE;
        wk->next_engine = (uint64_t)w << 40;
    }
}

static void s_gen_free(s_gen_t *g)
{
    for (int w = 0; w < g->nworkers; w++) {
        free(g->workers[w].fifo);
        free(g->workers[w].family);
        free(g->workers[w].dead);
    }
    free(g->workers);
    sim_kvbatch_destroy(&g->batch);
}

static void s_remove(s_gen_t *g, s_worker_t *wk, uint64_t pos)
{
    size_t i = pos & (wk->fifo_cap - 1);
    sim_hash_t h = sim_hash_from_u64(wk->fifo[i]);
    if (sim_kvbatch_removed(g->batch, &h) != 0) BENCH_DIE("out of memory");
    wk->dead[i] = 1;
    wk->live--;
    g->removed++;
}

/* Evicts oldest-first until `need` more blocks fit; a family prefix goes as a whole. */
static void s_evict(s_gen_t *g, s_worker_t *wk, size_t need)
{
    while (wk->live + need > g->capacity && wk->head < wk->tail) {
        uint64_t pos = wk->head++;
        size_t i = pos & (wk->fifo_cap - 1);
        if (wk->dead[i]) continue;
        wk->full = true;
        s_remove(g, wk, pos);
        int f = wk->family[i];
        if (f >= 0) {
            for (uint32_t k = 1; k < g->fam_len[f]; k++)
                if (!wk->dead[(pos + k) & (wk->fifo_cap - 1)]) s_remove(g, wk, pos + k);
            wk->fam_pos[f] = S_NONE;
        }
    }
}

/* Appends n new blocks (engine hashes into g->hashes); returns the position of the first. */
static uint64_t s_append(s_gen_t *g, s_worker_t *wk, uint32_t n, int family)
{
    uint64_t first = wk->tail;
    for (uint32_t k = 0; k < n; k++) {
        uint64_t e = bench_mix(wk->next_engine++);
        size_t i = wk->tail & (wk->fifo_cap - 1);
        wk->fifo[i] = e;
        wk->family[i] = k == 0 ? family : -1;
        wk->dead[i] = 0;
        wk->tail++;
        g->hashes[k] = sim_hash_from_u64(e);
    }
    wk->live += n;
    g->stored += n;
    return first;
}

static bool s_pos_live(const s_worker_t *wk, uint64_t pos)
{
    return pos >= wk->head && !wk->dead[pos & (wk->fifo_cap - 1)];
}

static void s_add_tip(s_gen_t *g, s_worker_t *wk, uint64_t engine, uint64_t pos)
{
    s_tip_t t = {engine, pos};
    if (wk->ntips < S_MAX_TIPS)
        wk->tips[wk->ntips++] = t;
    else
        wk->tips[bench_rand(&g->rng) % S_MAX_TIPS] = t;
}

/* A live tip of the worker (removing dead ones), or NULL. */
static const s_tip_t *s_pick_tip(s_gen_t *g, s_worker_t *wk)
{
    while (wk->ntips > 0) {
        size_t k = bench_rand(&g->rng) % wk->ntips;
        if (s_pos_live(wk, wk->tips[k].pos)) return &wk->tips[k];
        wk->tips[k] = wk->tips[--wk->ntips];
    }
    return NULL;
}

static void s_store(s_gen_t *g, const sim_hash_t *parent, uint32_t n)
{
    if (sim_kvbatch_stored(g->batch, g->hashes, n, parent, g->tokens, S_BLOCK, NULL) != 0)
        BENCH_DIE("out of memory");
}

/* One engine step of worker w into g->batch. */
static void s_step(s_gen_t *g, int w)
{
    s_worker_t *wk = &g->workers[w];
    sim_kvbatch_reset(g->batch);
    int nstores = (int)bench_range(&g->rng, 1, S_MAX_STORES);
    int fam[S_MAX_STORES];
    uint32_t nb[S_MAX_STORES];
    size_t need = 0;
    for (int s = 0; s < nstores; s++) {
        fam[s] = -1;
        nb[s] = (uint32_t)bench_range(&g->rng, 1, S_MAX_STORE);
        if (bench_range(&g->rng, 0, 99) < S_FAMILY_PCT) {
            double u = (double)(bench_rand(&g->rng) >> 11) / 9007199254740992.0;
            fam[s] = (int)(u * u * S_FAMILIES); /* popular families first */
            if (wk->fam_pos[fam[s]] == S_NONE) nb[s] = g->fam_len[fam[s]];
        }
        need += nb[s];
    }
    s_evict(g, wk, need);
    for (int s = 0; s < nstores; s++) {
        int f = fam[s];
        const s_tip_t *tip = f < 0 ? s_pick_tip(g, wk) : NULL;
        if (f < 0 && !tip) f = (int)(bench_rand(&g->rng) % S_FAMILIES);
        if (f >= 0 && wk->fam_pos[f] == S_NONE) {
            /* the family's prefix, from the root */
            uint32_t n = g->fam_len[f];
            for (uint32_t i = 0; i < n * S_BLOCK; i++)
                g->tokens[i] = s_family_token(f, i);
            uint64_t pos = s_append(g, wk, n, f);
            wk->fam_pos[f] = pos;
            wk->fam_last[f] = g->hashes[n - 1].lo;
            s_store(g, NULL, n);
            continue;
        }
        /* a continuation of the family's prefix or of a live chain */
        sim_hash_t parent = sim_hash_from_u64(f >= 0 ? wk->fam_last[f] : tip->engine);
        uint32_t n = nb[s];
        for (uint32_t i = 0; i < n * S_BLOCK; i++)
            g->tokens[i] = (uint32_t)(bench_rand(&g->rng) % S_VOCAB);
        uint64_t pos = s_append(g, wk, n, -1);
        s_store(g, &parent, n);
        s_add_tip(g, wk, g->hashes[n - 1].lo, pos + n - 1);
    }
}

/* ---- the pipeline under test ---------------------------------------------------------------- */

typedef struct {
    aggregator_state_t *state;
    msgpack_sbuffer wire;
    const char *worker; /* name of the stream being driven */
    bool timed;         /* split the time between the stages */
    uint64_t proto_ns, apply_ns;
    uint64_t ops, errors;
} s_sink_t;

static void s_on_op(void *arg, const collector_op_t *op)
{
    s_sink_t *k = arg;
    uint64_t t0 = k->timed ? bench_now_ns() : 0;
    ipl_kv_event_t ev = collector_node_event(op, k->worker);
    msgpack_sbuffer_clear(&k->wire);
    ipl_msg_t msg;
    if (ipl_msg_encode(IPL_MSG_KV_EVENT, &ev, &k->wire) != 0 ||
        ipl_msg_decode(k->wire.data, k->wire.size, &msg) != 0) {
        k->errors++;
        return;
    }
    uint64_t t1 = k->timed ? bench_now_ns() : 0;
    if (aggregator_state_apply(k->state, &msg, ipl_mono_ms()) != 0) k->errors++;
    ipl_msg_clear(&msg);
    k->ops++;
    if (k->timed) {
        uint64_t t2 = bench_now_ns();
        k->proto_ns += t1 - t0;
        k->apply_ns += t2 - t1;
    }
}

typedef struct {
    int worker;
    uint64_t seq;
    uint8_t *payload;
    size_t len;
} s_record_t;

typedef struct {
    s_record_t *recs;
    size_t n, cap;
    uint64_t stored, removed;
} s_stream_t;

typedef struct {
    collector_stream_t **streams;
    char (*names)[16];
    s_sink_t sink;
} s_pipeline_t;

static void s_pipeline_init(s_pipeline_t *p, int nworkers)
{
    memset(p, 0, sizeof *p);
    p->sink.state = aggregator_state_new();
    msgpack_sbuffer_init(&p->sink.wire);
    p->streams = calloc((size_t)nworkers, sizeof *p->streams);
    p->names = calloc((size_t)nworkers, sizeof *p->names);
    if (!p->sink.state || !p->streams || !p->names) BENCH_DIE("out of memory");
    for (int w = 0; w < nworkers; w++) {
        snprintf(p->names[w], sizeof p->names[w], "w%d", w);
        p->streams[w] = collector_stream_new(p->names[w], 1, s_on_op, &p->sink);
        if (!p->streams[w]) BENCH_DIE("out of memory");
        p->sink.worker = p->names[w];
        collector_stream_start(p->streams[w]);
    }
}

static void s_pipeline_free(s_pipeline_t *p, int nworkers)
{
    for (int w = 0; w < nworkers; w++)
        collector_stream_destroy(&p->streams[w]);
    free(p->streams);
    free(p->names);
    aggregator_state_destroy(&p->sink.state);
    msgpack_sbuffer_destroy(&p->sink.wire);
}

static void s_feed(s_pipeline_t *p, int w, uint64_t seq, const uint8_t *payload, size_t len)
{
    uint8_t seq8[8];
    for (int i = 0; i < 8; i++)
        seq8[i] = (uint8_t)(seq >> (56 - 8 * i));
    p->sink.worker = p->names[w];
    int rc = collector_stream_message(p->streams[w], seq8, sizeof seq8, payload, len);
    if (rc != 0) BENCH_DIE("worker %d batch %" PRIu64 ": %s", w, seq, ipl_strerror(rc));
}

/* Generates one batch of a random worker; returns its payload (caller frees). */
static uint8_t *s_next_batch(s_gen_t *g, int *w, uint64_t *seq, size_t *len)
{
    *w = (int)(bench_rand(&g->rng) % (uint64_t)g->nworkers);
    s_step(g, *w);
    *seq = g->workers[*w].seq++;
    uint8_t *payload =
        sim_kvwire_encode(g->batch, 1.7e9 + (double)*seq * 0.01, SIM_KV_FORMAT_MAP, true, len);
    if (!payload) BENCH_DIE("out of memory");
    return payload;
}

/* Generates batches into `st` until `done` says stop. */
static void s_record(s_gen_t *g, s_stream_t *st,
                     bool (*done)(const s_gen_t *, const s_stream_t *, uint64_t), uint64_t arg)
{
    uint64_t s0 = g->stored, r0 = g->removed;
    while (!done(g, st, arg)) {
        if (st->n == st->cap) {
            st->cap = st->cap ? 2 * st->cap : 4096;
            st->recs = realloc(st->recs, st->cap * sizeof *st->recs);
            if (!st->recs) BENCH_DIE("out of memory");
        }
        s_record_t *r = &st->recs[st->n++];
        r->payload = s_next_batch(g, &r->worker, &r->seq, &r->len);
        st->stored = g->stored - s0;
        st->removed = g->removed - r0;
    }
}

/* Warm-up: until every worker has evicted (its cache is full: steady state). */
static bool s_warm_done(const s_gen_t *g, const s_stream_t *st, uint64_t arg)
{
    (void)st;
    (void)arg;
    for (int w = 0; w < g->nworkers; w++)
        if (!g->workers[w].full) return false;
    return true;
}

static bool s_events_done(const s_gen_t *g, const s_stream_t *st, uint64_t events)
{
    (void)g;
    return st->stored + st->removed >= events;
}

static void s_stream_free(s_stream_t *st)
{
    for (size_t i = 0; i < st->n; i++)
        free(st->recs[i].payload);
    free(st->recs);
    memset(st, 0, sizeof *st);
}

static size_t s_stream_bytes(const s_stream_t *st)
{
    size_t b = 0;
    for (size_t i = 0; i < st->n; i++)
        b += st->recs[i].len;
    return b;
}

/* Checks that the pipeline saw exactly what the generator produced. */
static void s_check(const s_pipeline_t *p, const s_gen_t *g)
{
    uint64_t stored = 0, removed = 0, bad = 0;
    for (int w = 0; w < g->nworkers; w++) {
        const collector_stream_stats_t *st = collector_stream_stats(p->streams[w]);
        stored += st->blocks_stored;
        removed += st->blocks_removed;
        bad += st->unknown_parents + st->unknown_removed + st->skipped_events + st->gaps +
               st->decode_errors;
        if (st->kv_state != COLLECTOR_KV_EXACT) bad++;
    }
    size_t live = 0;
    for (int w = 0; w < g->nworkers; w++)
        live += g->workers[w].live;
    const ipl_index_t *ix = aggregator_state_index(p->sink.state);
    if (stored != g->stored || removed != g->removed || bad || p->sink.errors ||
        ipl_index_memberships(ix) != live)
        BENCH_DIE("pipeline disagrees with the generator: stored %" PRIu64 "/%" PRIu64
                  " removed %" PRIu64 "/%" PRIu64 " anomalies %" PRIu64 " errors %" PRIu64
                  " memberships %zu/%zu",
                  stored, g->stored, removed, g->removed, bad, p->sink.errors,
                  ipl_index_memberships(ix), live);
}

typedef struct {
    double wall_s, cpu_s;
    uint64_t collector_ns, proto_ns, apply_ns;
} s_pass_t;

static void s_apply(s_pipeline_t *p, const s_stream_t *st)
{
    for (size_t i = 0; i < st->n; i++)
        s_feed(p, st->recs[i].worker, st->recs[i].seq, st->recs[i].payload, st->recs[i].len);
}

/* The measured stream of an untimed-split pass, in a function of its own (noipa: never
 * inlined, never merged with s_apply) so that callgrind counts exactly its instructions,
 * whatever the machine's load (docs/benchmarks.md):
 *   valgrind --tool=callgrind --toggle-collect=s_apply_measured \
 *            build/bench/bench_ingest --events 300000 --passes 1 */
static __attribute__((noipa)) void s_apply_measured(s_pipeline_t *p, const s_stream_t *st)
{
    s_apply(p, st);
    __asm__ volatile("" ::: "memory"); /* not a tail call: callgrind sees the return here */
}

/* One pass: a fresh pipeline, the warm-up untimed, then the measured stream timed. */
static s_pass_t s_pass(const s_gen_t *g, const s_stream_t *warm, const s_stream_t *meas, bool split)
{
    s_pipeline_t p;
    s_pipeline_init(&p, g->nworkers);
    s_apply(&p, warm);
    p.sink.timed = split;
    p.sink.proto_ns = p.sink.apply_ns = 0;
    uint64_t c0 = bench_cpu_ns(), t0 = bench_now_ns();
    if (split)
        s_apply(&p, meas);
    else
        s_apply_measured(&p, meas);
    uint64_t t1 = bench_now_ns(), c1 = bench_cpu_ns();
    s_check(&p, g);
    s_pass_t r = {.wall_s = (double)(t1 - t0) / 1e9, .cpu_s = (double)(c1 - c0) / 1e9};
    r.proto_ns = p.sink.proto_ns;
    r.apply_ns = p.sink.apply_ns;
    r.collector_ns = (t1 - t0) - r.proto_ns - r.apply_ns;
    BENCH_LOG("pass: %zu batches in %.3f s wall, %.3f s cpu; index %zu blocks, %zu "
              "memberships",
              meas->n, r.wall_s, r.cpu_s, ipl_index_blocks(aggregator_state_index(p.sink.state)),
              ipl_index_memberships(aggregator_state_index(p.sink.state)));
    s_pipeline_free(&p, g->nworkers);
    return r;
}

static int s_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    int nworkers = (int)bench_arg_int(argc, argv, "workers", 16);
    size_t capacity = (size_t)bench_arg_int(argc, argv, "capacity", 16384);
    uint64_t events = (uint64_t)bench_arg_int(argc, argv, "events", 3000000);
    uint64_t seed = (uint64_t)bench_arg_int(argc, argv, "seed", 1);
    int passes = (int)bench_arg_int(argc, argv, "passes", 5);
    if (nworkers < 1 || nworkers > 1024 || capacity < 256 || events < 1000 || passes < 1 ||
        passes > 15)
        BENCH_DIE("usage: bench_ingest [--workers 1..1024] [--capacity >= 256] "
                  "[--events >= 1000] [--passes 1..15] [--seed N]");

    s_gen_t g;
    s_gen_init(&g, nworkers, capacity, seed);
    s_stream_t warm = {0}, meas = {0};
    s_record(&g, &warm, s_warm_done, 0);
    s_record(&g, &meas, s_events_done, events);
    uint64_t block_events = meas.stored + meas.removed;
    BENCH_LOG("%d workers x %zu blocks; warm-up %zu batches; measured %zu batches, %.1f MB, "
              "%" PRIu64 " blocks stored + %" PRIu64 " removed",
              nworkers, capacity, warm.n, meas.n, (double)s_stream_bytes(&meas) / 1e6, meas.stored,
              meas.removed);

    double rate[15], cpu_rate[15];
    for (int i = 0; i < passes; i++) {
        s_pass_t r = s_pass(&g, &warm, &meas, false);
        rate[i] = (double)block_events / r.wall_s;
        cpu_rate[i] = (double)block_events / r.cpu_s;
    }
    s_pass_t split = s_pass(&g, &warm, &meas, true);
    qsort(rate, (size_t)passes, sizeof *rate, s_cmp_double);
    qsort(cpu_rate, (size_t)passes, sizeof *cpu_rate, s_cmp_double);
    BENCH_LOG("block events/s over %d passes: min %.0f median %.0f max %.0f", passes, rate[0],
              rate[passes / 2], rate[passes - 1]);

    char note[256];
    snprintf(note, sizeof note,
             "median of %d passes; %d workers, %" PRIu64 " block events, map format", passes,
             nworkers, block_events);
    bench_figure("ingest_events_per_s", rate[passes / 2], "events/s", note);
    bench_figure("ingest_events_per_cpu_s", cpu_rate[passes / 2], "events/s",
                 "the same, per second of this thread's CPU time");
    double n = (double)block_events;
    bench_figure("ingest_collector_ns_per_event", (double)split.collector_ns / n, "ns",
                 "vLLM decode + sequence + re-hash (timed pass)");
    bench_figure("ingest_proto_ns_per_event", (double)split.proto_ns / n, "ns",
                 "KV_EVENT encode + decode (timed pass)");
    bench_figure("ingest_apply_ns_per_event", (double)split.apply_ns / n, "ns",
                 "aggregator_state_apply / ipl_index (timed pass)");

    s_stream_free(&warm);
    s_stream_free(&meas);
    s_gen_free(&g);
    return 0;
}
