/*
 * Unit tests of every strategy (decider_strategies.c) on hand-computed cases, through the
 * router's public API (the memory they read is tested in test_decider_memory.c).
 *
 * Fixture: pool "chat" (model "m", block size 16) with workers w1, w2, w3, each with 100 KV
 * blocks; a prompt of 10 full blocks (160 tokens) whose first blocks w1, w2, w3 hold 2, 5
 * and 8 of (so 8, 5 and 2 blocks to prefill).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "decider_router.h"
#include "decider_state.h"
#include "decider_strategies.h"
#include "ipl_index.h"
#include "ipl_log.h"

#define NB   10
#define BS   16
#define WALL 1000000u
#define MONO 5000u

static uint64_t s_hashes[100];
static ipl_pool_t s_pools[] = {{.name = "chat", .model = "m", .strategy = ""}};
static ipl_worker_t s_workers[] = {
    {.name = "w1", .pool = "chat", .model = "m", .url = "http://1", .block_size = BS},
    {.name = "w2", .pool = "chat", .model = "m", .url = "http://2", .block_size = BS},
    {.name = "w3", .pool = "chat", .model = "m", .url = "http://3", .block_size = BS},
};
static ipl_policy_t s_policy = {.version = 1,
                                .source = "t",
                                .pools = s_pools,
                                .pools_len = 1,
                                .workers = s_workers,
                                .workers_len = 3};

typedef struct {
    decider_state_t *state;
    decider_router_t *router;
    decider_decision_t d;
    uint64_t wall, mono;
} s_fix_t;

static void s_load_blocks(s_fix_t *f, const char *w, uint64_t running, uint64_t waiting,
                          double kv_usage, uint64_t health, uint32_t num_blocks);

static void s_load(s_fix_t *f, const char *w, uint64_t running, uint64_t waiting, double kv_usage,
                   uint64_t health)
{
    s_load_blocks(f, w, running, waiting, kv_usage, health, 100);
}

static void s_load_blocks(s_fix_t *f, const char *w, uint64_t running, uint64_t waiting,
                          double kv_usage, uint64_t health, uint32_t num_blocks)
{
    ipl_msg_t m = {.type = IPL_MSG_LOAD};
    m.u.load = (ipl_load_t){.worker = (char *)w,
                            .ts_ms = f->wall - 10,
                            .running = running,
                            .waiting = waiting,
                            .kv_usage = kv_usage,
                            .block_size = BS,
                            .num_blocks = num_blocks,
                            .health = health,
                            .kv_state = IPL_KV_EXACT};
    assert_int_equal(decider_state_apply(f->state, &m, 0), 0);
}

static void s_store(s_fix_t *f, const char *w, const uint64_t *hashes, size_t n)
{
    ipl_msg_t m = {.type = IPL_MSG_KV_EVENT};
    m.u.kv_event = (ipl_kv_event_t){.worker = (char *)w,
                                    .op = IPL_KV_OP_STORED,
                                    .hashes = (uint64_t *)hashes,
                                    .hashes_len = (uint32_t)n};
    assert_int_equal(decider_state_apply(f->state, &m, 0), 0);
}

static int s_setup(void **state)
{
    static s_fix_t f;
    memset(&f, 0, sizeof f);
    for (int i = 0; i < 100; i++)
        s_hashes[i] = 0x5eed000 + (uint64_t)i;
    decider_router_config_t cfg;
    decider_router_config_defaults(&cfg);
    cfg.seed = 3;
    f.router = decider_router_new(&cfg);
    f.state = decider_state_new();
    f.wall = WALL;
    f.mono = MONO;
    s_load(&f, "w1", 0, 0, 0, IPL_HEALTH_UP);
    s_load(&f, "w2", 0, 0, 0, IPL_HEALTH_UP);
    s_load(&f, "w3", 0, 0, 0, IPL_HEALTH_UP);
    s_store(&f, "w1", s_hashes, 2);
    s_store(&f, "w2", s_hashes, 5);
    s_store(&f, "w3", s_hashes, 8);
    decider_decision_init(&f.d);
    *state = &f;
    return 0;
}

static int s_teardown(void **state)
{
    s_fix_t *f = *state;
    decider_router_destroy(&f->router);
    decider_state_destroy(&f->state);
    decider_decision_clear(&f->d);
    return 0;
}

/* Routes `n` blocks of `hashes` (n × 16 tokens) with `strategy`. Each decision is made after
 * the previous one's in-flight count and optimistic blocks expired (11 s of wall clock, 4 s of
 * monotonic clock later, with fresh load samples), so decisions are independent unless a test
 * wants otherwise (`advance` false). */
static int s_route_n(s_fix_t *f, const char *strategy, const uint64_t *hashes, size_t n,
                     bool advance)
{
    if (advance) {
        f->wall += 11000;
        f->mono += 4000;
    }
    decider_request_t req = {.model = "m",
                             .strategy = strategy,
                             .prompt_tokens = n * BS,
                             .block_size = BS,
                             .hashes = hashes,
                             .nhashes = n};
    int rc =
        decider_router_route_at(f->router, &s_policy, f->state, 0, &req, &f->d, f->wall, f->mono);
    // Every reason a strategy gives is one the router lists (the decider's metric series).
    bool listed = false;
    for (const char *const *r = decider_router_reasons(); *r && !listed; r++)
        listed = !strcmp(*r, f->d.reason);
    if (!listed) fail_msg("reason \"%s\" is not in decider_router_reasons()", f->d.reason);
    return rc;
}

static int s_route(s_fix_t *f, const char *strategy)
{
    return s_route_n(f, strategy, s_hashes, NB, true);
}

static const decider_candidate_t *s_cand(const s_fix_t *f, const char *name)
{
    for (uint32_t i = 0; i < f->d.ncands; i++)
        if (!strcmp(f->d.cands[i].c.worker, name)) return &f->d.cands[i];
    fail_msg("no candidate %s", name);
    return NULL;
}

// Reloads every worker with the same wall clock as the next decision will see.
static void s_reload(s_fix_t *f, const uint64_t q[3], const double kv[3])
{
    f->wall += 11000;
    f->mono += 4000;
    const char *names[] = {"w1", "w2", "w3"};
    for (int i = 0; i < 3; i++)
        s_load(f, names[i], 0, q[i], kv[i], IPL_HEALTH_UP);
    f->wall -= 11000;
    f->mono -= 4000;
}

static void test_the_list(void **state)
{
    (void)state;
    // every name of the wire's list has a pick function and a source
    for (size_t i = 0; i < ipl_strategy_count(); i++)
        assert_non_null(decider_strategy_source(ipl_strategy_name(i)));
    assert_true(decider_router_strategy_known("sglang-cache-aware"));
    assert_false(decider_router_strategy_known("gie"));
    assert_non_null(strstr(decider_strategy_source("dynamo-cost"), "overlap_score_weight"));
    assert_null(decider_strategy_source("nope"));
}

// Dynamo's documented example (docs/architecture/kv_cache_routing.md), weight 1: W1 8 + 10 =
// 18, W2 5 + 5 = 10 (selected), W3 2 + 9 = 11. Prefill blocks 8, 5, 2 come from the overlaps;
// decode blocks = active (KV usage 0.02, 0, 0.07 of 100 blocks = 2, 0, 7) + new blocks.
static void test_dynamo_worked_example(void **state)
{
    s_fix_t *f = *state;
    s_reload(f, (uint64_t[]){0, 0, 0}, (double[]){0.02, 0.0, 0.07});
    assert_int_equal(s_route(f, "dynamo-cost"), IPL_ROUTE_OK);
    assert_string_equal(f->d.strategy, "dynamo-cost");
    assert_string_equal(f->d.worker->name, "w2");
    assert_string_equal(f->d.reason, "min_cost");
    assert_float_equal(s_cand(f, "w1")->score, 18.0, 1e-9);
    assert_float_equal(s_cand(f, "w2")->score, 10.0, 1e-9);
    assert_float_equal(s_cand(f, "w3")->score, 11.0, 1e-9);
    assert_string_equal(s_cand(f, "w2")->c.note,
                        "cost 10.0 = 1.0 x 5.0 prefill + 5.0 decode blocks");
    assert_non_null(strstr(f->d.detail, "w2 has the lowest cost 10.0"));
    assert_non_null(strstr(f->d.detail, "next best w3 11.0"));
    // Every candidate still carries its predicted TTFT, for the explanation.
    assert_true(s_cand(f, "w1")->c.predicted_ttft_s > s_cand(f, "w3")->c.predicted_ttft_s);
}

// GIE v1.2 defaults: queue 2, kv-cache utilization 2, prefix 3, max score.
//   queues 0, 2, 4 → queue scores 1, 0.5, 0; KV usage 0.5, 0.2, 0.9 → 0.5, 0.8, 0.1;
//   prefix 2/10, 5/10, 8/10 → 0.2, 0.5, 0.8.
//   w1 = 2 + 1.0 + 0.6 = 3.6; w2 = 1 + 1.6 + 1.5 = 4.1 (max); w3 = 0 + 0.2 + 2.4 = 2.6.
static void test_gie_default_weights(void **state)
{
    s_fix_t *f = *state;
    s_reload(f, (uint64_t[]){0, 2, 4}, (double[]){0.5, 0.2, 0.9});
    assert_int_equal(s_route(f, "gie-default"), IPL_ROUTE_OK);
    assert_string_equal(f->d.worker->name, "w2");
    assert_string_equal(f->d.reason, "max_score");
    assert_float_equal(s_cand(f, "w1")->score, 3.6, 1e-9);
    assert_float_equal(s_cand(f, "w2")->score, 4.1, 1e-9);
    assert_float_equal(s_cand(f, "w3")->score, 2.6, 1e-9);
    assert_string_equal(s_cand(f, "w2")->c.note,
                        "score 4.100 = 2 x 0.500 queue + 2 x 0.800 kv + 3 x 0.500 prefix");
    // Equal queues: every queue score is 1 (the scorer's rule), so prefix and KV decide:
    // w1 2 + 1.0 + 0.6 = 3.6, w2 2 + 1.6 + 1.5 = 5.1, w3 2 + 0.2 + 2.4 = 4.6.
    s_reload(f, (uint64_t[]){3, 3, 3}, (double[]){0.5, 0.2, 0.9});
    assert_int_equal(s_route(f, "gie-default"), IPL_ROUTE_OK);
    assert_float_equal(s_cand(f, "w2")->score, 5.1, 1e-9);
    assert_float_equal(s_cand(f, "w3")->score, 4.6, 1e-9);
}

static void test_least_loaded_random_round_robin(void **state)
{
    s_fix_t *f = *state;
    s_reload(f, (uint64_t[]){3, 1, 2}, (double[]){0, 0, 0});
    assert_int_equal(s_route(f, "least-loaded"), IPL_ROUTE_OK);
    assert_string_equal(f->d.worker->name, "w2");
    assert_string_equal(f->d.reason, "least_loaded");

    // round-robin: w1, w2, w3, w1 ... and a DOWN worker is skipped.
    const char *want[] = {"w1", "w2", "w3", "w1"};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(s_route(f, "round-robin"), IPL_ROUTE_OK);
        assert_string_equal(f->d.worker->name, want[i]);
        assert_string_equal(f->d.reason, "round_robin");
    }
    s_load(f, "w3", 0, 0, 0, IPL_HEALTH_DOWN);
    const char *skip[] = {"w2", "w1", "w2"};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(s_route(f, "round-robin"), IPL_ROUTE_OK);
        assert_string_equal(f->d.worker->name, skip[i]);
    }
    int seen[3] = {0};
    for (int i = 0; i < 300; i++) {
        assert_int_equal(s_route(f, "random"), IPL_ROUTE_OK);
        seen[f->d.worker->name[1] - '1']++;
    }
    assert_int_equal(seen[2], 0);
    assert_true(seen[0] > 100 && seen[1] > 100);
}

// SGLang cache_aware: balance thresholds abs 64 AND rel 1.5; cache_threshold 0.3 on the
// routing-history tree (not the KV index).
static void test_sglang_cache_aware(void **state)
{
    s_fix_t *f = *state;
    uint64_t other[100];
    for (int i = 0; i < 100; i++)
        other[i] = 0x77000 + (uint64_t)i;
    // Balanced, empty tree: every tree is 0 blocks, ties go to the lower load (w3, 0).
    s_reload(f, (uint64_t[]){5, 3, 0}, (double[]){0, 0, 0});
    assert_int_equal(s_route_n(f, "sglang-cache-aware", other, 100, true), IPL_ROUTE_OK);
    assert_string_equal(f->d.worker->name, "w3");
    assert_string_equal(f->d.reason, "smallest_tree");
    // The same 100 blocks + 20 more: match rate 100/120 > 0.3 → w3 again, even though the KV
    // index knows nothing of it and w3 is now the most loaded.
    uint64_t longer[120];
    memcpy(longer, other, sizeof other);
    for (int i = 100; i < 120; i++)
        longer[i] = 0x99000 + (uint64_t)i;
    s_reload(f, (uint64_t[]){0, 1, 9}, (double[]){0, 0, 0});
    assert_int_equal(s_route_n(f, "sglang-cache-aware", longer, 120, true), IPL_ROUTE_OK);
    assert_string_equal(f->d.worker->name, "w3");
    assert_string_equal(f->d.reason, "cache_match");
    assert_non_null(strstr(f->d.detail, "matches 100 of 120 prompt blocks"));
    assert_non_null(strstr(s_cand(f, "w3")->c.note, "tree match 100/120 blocks, tree 100 blocks"));
    // 30 of 100 blocks shared: rate 0.3 is not above the threshold → the smallest tree, not w3
    // (120 blocks): w1 and w2 have none; w1 has the lower load.
    uint64_t partial[100];
    memcpy(partial, other, 30 * sizeof *partial);
    for (int i = 30; i < 100; i++)
        partial[i] = 0xaa000 + (uint64_t)i;
    s_reload(f, (uint64_t[]){1, 2, 0}, (double[]){0, 0, 0});
    assert_int_equal(s_route_n(f, "sglang-cache-aware", partial, 100, true), IPL_ROUTE_OK);
    assert_string_equal(f->d.worker->name, "w1");
    assert_string_equal(f->d.reason, "smallest_tree");
    // Imbalanced: max − min = 90 > 64 and 100 > 1.5 × 10 → the least loaded, w2, whatever the
    // tree says (w1 holds this prompt).
    s_reload(f, (uint64_t[]){100, 10, 30}, (double[]){0, 0, 0});
    assert_int_equal(s_route_n(f, "sglang-cache-aware", partial, 100, true), IPL_ROUTE_OK);
    assert_string_equal(f->d.worker->name, "w2");
    assert_string_equal(f->d.reason, "imbalanced");
    // 100 vs 40: the gap 60 is within 64: balanced, the tree wins (w3 holds all 120 blocks,
    // w1 and w2 the 30 they share with `partial`).
    s_reload(f, (uint64_t[]){40, 40, 100}, (double[]){0, 0, 0});
    assert_int_equal(s_route_n(f, "sglang-cache-aware", longer, 120, true), IPL_ROUTE_OK);
    assert_string_equal(f->d.reason, "cache_match");
    assert_string_equal(f->d.worker->name, "w3");
    // 300 vs 210: gap 90 > 64 but 300 < 1.5 × 210 = 315: balanced.
    s_reload(f, (uint64_t[]){210, 250, 300}, (double[]){0, 0, 0});
    assert_int_equal(s_route_n(f, "sglang-cache-aware", longer, 120, true), IPL_ROUTE_OK);
    assert_string_equal(f->d.reason, "cache_match");
}

// production-stack prefixaware: random among the longest matches of the routing history.
static void test_prefix_hash(void **state)
{
    s_fix_t *f = *state;
    uint64_t x[40];
    for (int i = 0; i < 40; i++)
        x[i] = 0xbb000 + (uint64_t)i;
    assert_int_equal(s_route_n(f, "prefix-hash", x, 20, true), IPL_ROUTE_OK);
    assert_string_equal(f->d.reason, "prefix_miss");
    assert_true(s_cand(f, "w1")->c.eligible && s_cand(f, "w2")->c.eligible &&
                s_cand(f, "w3")->c.eligible);
    const char *first = f->d.worker->name;
    // A longer prompt sharing those 20 blocks: only the worker that got them is eligible.
    for (int k = 0; k < 5; k++) {
        assert_int_equal(s_route_n(f, "prefix-hash", x, 40, true), IPL_ROUTE_OK);
        assert_string_equal(f->d.worker->name, first);
        assert_string_equal(f->d.reason, "prefix_match");
        assert_non_null(strstr(f->d.detail, k == 0 ? "(20 of 40 blocks)" : "(40 of 40 blocks)"));
    }
    for (uint32_t i = 0; i < f->d.ncands; i++)
        assert_int_equal(f->d.cands[i].c.eligible, !strcmp(f->d.cands[i].c.worker, first));
    // The worker down: nobody healthy shares the prefix → all healthy are candidates again.
    s_load(f, first, 0, 0, 0, IPL_HEALTH_DOWN);
    assert_int_equal(s_route_n(f, "prefix-hash", x, 40, false), IPL_ROUTE_OK);
    assert_string_not_equal(f->d.worker->name, first);
    assert_string_equal(f->d.reason, "prefix_miss");
}

// The pool's strategy, and the router's default when the pool names none.
static void test_pool_strategy_and_default(void **state)
{
    s_fix_t *f = *state;
    s_pools[0].strategy = "dynamo-cost";
    assert_int_equal(s_route(f, NULL), IPL_ROUTE_OK);
    assert_string_equal(f->d.strategy, "dynamo-cost");
    s_pools[0].strategy = "";
    assert_int_equal(s_route(f, NULL), IPL_ROUTE_OK);
    assert_string_equal(f->d.strategy, "ttft");
    // ttft on the fixture: w3 prefills 2 blocks (32 tokens), the others 5 and 8.
    assert_string_equal(f->d.worker->name, "w3");
    assert_string_equal(f->d.reason, "cache_hit");
}

// A prompt routed to a busy worker stays there while its prefill is still ahead (pending),
// even after the ledger's optimistic blocks (TTL 2 s) expired and before any KV event; then,
// unconfirmed, it stops attracting.
static void test_ttft_waits_for_a_pending_prefix(void **state)
{
    s_fix_t *f = *state;
    uint64_t p[40];
    for (int i = 0; i < 40; i++)
        p[i] = 0x7a7a000 + (uint64_t)i;
    // Every worker 20 waiting × 256 tokens: ~1.7 s of wait; the prompt's 640 tokens 0.21 s.
    const uint64_t q[3] = {20, 20, 20};
    const double kv[3] = {0, 0, 0};
    s_reload(f, q, kv);
    assert_int_equal(s_route_n(f, "ttft", p, 40, true), IPL_ROUTE_OK);
    assert_string_equal(f->d.reason, "least_loaded");
    const char *first = f->d.worker->name;
    assert_true(f->d.predicted_ttft_s > 1.5); // pending until ~1.9 + 2 s from now
    // 3.5 s later (the ledger assumed it for 2-3 s), fresh samples, nothing in flight.
    f->wall += 11000;
    f->mono += 3500;
    const char *names[] = {"w1", "w2", "w3"};
    for (int i = 0; i < 3; i++)
        s_load(f, names[i], 0, 20, 0, IPL_HEALTH_UP);
    assert_int_equal(s_route_n(f, "ttft", p, 40, false), IPL_ROUTE_OK);
    assert_string_equal(f->d.worker->name, first);
    assert_string_equal(f->d.reason, "cache_hit");
    assert_int_equal(f->d.cached_tokens, 640);
    assert_non_null(strstr(s_cand(f, first)->c.note, "40 blocks pending"));
    // No KV event confirms it: the second routing added nothing pending (the prompt was
    // pending whole), and the ledger's assumption from it lasts at most 1.5 × its TTL (3 s):
    // forgotten.
    f->mono += 3100;
    assert_int_equal(s_route_n(f, "ttft", p, 40, false), IPL_ROUTE_OK);
    assert_int_equal(f->d.cached_tokens, 0);
}

// The load gate weighs only the requests beyond those in this router's backlog: w3 holds 98 of
// 100 blocks of a family of prompts (distinct last 2 blocks); 6 of them routed there at once
// make its queue 6 > 0 + 4, but they are the router's own (32 tokens of prefill each, in its
// backlog): the 7th still goes to w3. The same queue from a sample after the backlog drained
// (load the router cannot account for) is gated. (Workers of 1,000 blocks here: on 100, the
// seven prompts of 100 blocks could not all be held by w3 at once, and the KV gate would say
// so.)
static void test_ttft_gate_spares_the_own_backlog(void **state)
{
    s_fix_t *f = *state;
    for (const char *const *w = (const char *const[]){"w1", "w2", "w3", NULL}; *w; w++)
        s_load_blocks(f, *w, 0, 0, 0, IPL_HEALTH_UP, 1000);
    s_store(f, "w3", s_hashes, 98);
    uint64_t p[100];
    memcpy(p, s_hashes, sizeof p);
    f->wall += 11000;
    f->mono += 4000;
    for (uint64_t k = 0; k < 7; k++) {
        p[98] = 0xf00000 + 2 * k;
        p[99] = 0xf00001 + 2 * k;
        assert_int_equal(s_route_n(f, "ttft", p, 100, false), IPL_ROUTE_OK);
        assert_string_equal(f->d.worker->name, "w3");
        assert_string_equal(f->d.reason, "cache_hit");
        assert_int_equal(s_cand(f, "w3")->queue, k);
        assert_true(s_cand(f, "w3")->c.eligible);
    }
    f->wall += 11000;
    f->mono += 1000;
    s_load(f, "w3", 0, 6, 0, IPL_HEALTH_UP);
    p[98] = 0xf10000;
    assert_int_equal(s_route_n(f, "ttft", p, 100, false), IPL_ROUTE_OK);
    assert_int_equal(s_cand(f, "w3")->queue, 6);
    assert_false(s_cand(f, "w3")->c.eligible);
    assert_non_null(strstr(s_cand(f, "w3")->c.note, "load gate: queue 6 > least loaded 0 + 4"));
    assert_string_equal(f->d.reason, "load_gate");
}

// A new prefix goes to the worker given the fewest prefixes (placements), not the one routed
// the fewest requests: w3 serves the fixture's prompt (5 cache hits: its recent routings) but
// was given no prefix; three new prompts, on idle workers at equal cost, go to w1 and w2 (no
// routings at all) and then to w3 — by recent routings alone the third would go to w1 or w2
// again.
static void test_ttft_places_a_prefix_where_fewest_were_placed(void **state)
{
    s_fix_t *f = *state;
    for (int k = 0; k < 5; k++) {
        assert_int_equal(s_route(f, "ttft"), IPL_ROUTE_OK);
        assert_string_equal(f->d.worker->name, "w3");
    }
    uint64_t p[3][NB];
    bool got[4] = {false};
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < NB; i++)
            p[k][i] = 0xab0000 + 0x100 * (uint64_t)k + (uint64_t)i;
        assert_int_equal(s_route_n(f, "ttft", p[k], NB, true), IPL_ROUTE_OK);
        assert_int_equal(f->d.cached_tokens, 0);
        int w = f->d.worker->name[1] - '0';
        assert_false(got[w]); // one new prefix per worker
        got[w] = true;
        if (k < 2) assert_int_not_equal(w, 3);
    }
    assert_true(got[3]);
}

// The load gate moves a request off its prefix only towards a (nearly) idle worker, or past
// SGLang's absolute imbalance (64): with every worker busy (w1 and w2 10 waiting each), w3's
// 20 waiting exceed 10 + 4 and 1.5 × 10, but 10 > load_gate 4 and 20 − 10 <= 64: w3 stays
// eligible for the prompt it holds 8 of 10 blocks of.
static void test_ttft_gate_needs_an_idle_worker_or_a_wide_gap(void **state)
{
    s_fix_t *f = *state;
    const uint64_t q[3] = {10, 10, 20};
    const double kv[3] = {0, 0, 0};
    s_reload(f, q, kv);
    assert_int_equal(s_route(f, "ttft"), IPL_ROUTE_OK);
    assert_int_equal(s_cand(f, "w3")->queue, 20);
    assert_true(s_cand(f, "w3")->c.eligible);
    assert_null(strstr(s_cand(f, "w3")->c.note, "load gate"));
    assert_string_not_equal(f->d.reason, "load_gate");
}

// The delay a placement imposes on the requests behind it (s_imposed): (1 + busy share ×
// the requests routed there until its first token) × its prefill. With nobody queued (busy 0)
// it is the candidate's own prefill; with w1 queueing (1 of 3 busy), w3 — routed to just
// before, so it attracts arrivals — is charged a third of them on top.
static void test_ttft_imposed_delay_needs_busy_workers(void **state)
{
    s_fix_t *f = *state;
    assert_int_equal(s_route(f, "ttft"), IPL_ROUTE_OK);
    for (const char *const *w = (const char *const[]){"w1", "w2", "w3", NULL}; *w; w++)
        assert_float_equal(s_cand(f, *w)->score,
                           s_cand(f, *w)->c.predicted_ttft_s + s_cand(f, *w)->terms.prefill_s,
                           1e-12);
    assert_string_equal(f->d.worker->name, "w3");
    assert_non_null(strstr(s_cand(f, "w2")->c.note, "it imposes on the requests behind it"));
    s_reload(f, (uint64_t[]){5, 0, 0}, (double[]){0, 0, 0});
    assert_int_equal(s_route(f, "ttft"), IPL_ROUTE_OK);
    const decider_candidate_t *w2 = s_cand(f, "w2"), *w3 = s_cand(f, "w3");
    assert_float_equal(w2->score, w2->c.predicted_ttft_s + w2->terms.prefill_s, 1e-12);
    // w3's one routing, 4 s ago, decayed over a minute; a third of its arrivals counted.
    double arrivals = exp(-4.0 / DECIDER_MEMORY_RECENT_TAU_S) / DECIDER_MEMORY_RECENT_TAU_S *
                      w3->c.predicted_ttft_s;
    assert_float_equal(w3->score, w3->c.predicted_ttft_s + (1 + arrivals / 3) * w3->terms.prefill_s,
                       1e-12);
}

// The KV gate: a prompt needing a fifth of a worker's KV or more (30 of 100 blocks) does not go
// to a worker whose running requests hold too much of it (w3: 80 in use + 30 > 100) while
// another can hold it; when none can, nobody is gated; a short prompt (10 blocks) is never
// asked.
static void test_ttft_kv_gate_for_long_prompts(void **state)
{
    s_fix_t *f = *state;
    s_reload(f, (uint64_t[]){0, 0, 0}, (double[]){0, 0, 0.8});
    assert_int_equal(s_route_n(f, "ttft", s_hashes, 30, true), IPL_ROUTE_OK);
    assert_false(s_cand(f, "w3")->c.eligible);
    assert_string_not_equal(f->d.worker->name, "w3");
    assert_string_equal(f->d.reason, "load_gate");
    assert_non_null(strstr(s_cand(f, "w3")->c.note, "KV gate"));
    assert_non_null(strstr(f->d.detail, "cannot hold the prompt's 480 tokens"));
    s_reload(f, (uint64_t[]){0, 0, 0}, (double[]){0.8, 0.8, 0.8});
    assert_int_equal(s_route_n(f, "ttft", s_hashes, 30, true), IPL_ROUTE_OK);
    assert_string_equal(f->d.worker->name, "w3");
    assert_true(s_cand(f, "w3")->c.eligible);
    s_reload(f, (uint64_t[]){0, 0, 0}, (double[]){0, 0, 0.95});
    assert_int_equal(s_route(f, "ttft"), IPL_ROUTE_OK);
    assert_string_equal(f->d.worker->name, "w3");
    // The workers that could hold it (w2, w3) are load-gated (20 queued against w1's 0): the
    // KV gate needs one that fits and that the load gate keeps, else it would leave nobody.
    s_reload(f, (uint64_t[]){0, 20, 20}, (double[]){0.9, 0, 0});
    assert_int_equal(s_route_n(f, "ttft", s_hashes, 30, true), IPL_ROUTE_OK);
    assert_string_equal(f->d.worker->name, "w1");
    assert_true(s_cand(f, "w1")->c.eligible);
}

// Placement by count holds only within the tie band of the best cost: w1, given no prefix, has
// 4 requests queued (not enough for the load gate, but ~0.34 s of predicted wait: far beyond
// the band), so a new prompt goes to w2 or w3, which were given prefixes but are idle.
static void test_ttft_placement_by_count_within_the_band(void **state)
{
    s_fix_t *f = *state;
    uint64_t p[3][NB];
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < NB; i++)
            p[k][i] = 0xcd0000 + 0x100 * (uint64_t)k + (uint64_t)i;
        s_reload(f, (uint64_t[]){4, 0, 0}, (double[]){0, 0, 0});
        assert_int_equal(s_route_n(f, "ttft", p[k], NB, true), IPL_ROUTE_OK);
        assert_int_equal(f->d.cached_tokens, 0);
        assert_string_not_equal(f->d.worker->name, "w1");
    }
    // The first two went to w2 and w3 (one each), so w1 had the fewest for the third, but its
    // wait kept it out of the band.
    assert_true(s_cand(f, "w1")->score > s_cand(f, f->d.worker->name)->score + 0.010);
}

// A terse router, or a terse request, decides the same without writing notes or the detail.
static void test_terse(void **state)
{
    s_fix_t *f = *state;
    decider_router_config_t cfg;
    decider_router_config_defaults(&cfg);
    cfg.seed = 3;
    decider_router_t *asks = decider_router_new(&cfg); // terse per request
    cfg.offline.terse = true;
    decider_router_t *terse = decider_router_new(&cfg);
    decider_decision_t d, e;
    decider_decision_init(&d);
    decider_decision_init(&e);
    const char *strategies[] = {"ttft", "gie-default", "dynamo-cost", "sglang-cache-aware",
                                "prefix-hash"};
    for (size_t k = 0; k < sizeof strategies / sizeof *strategies; k++) {
        decider_request_t req = {.model = "m",
                                 .strategy = strategies[k],
                                 .prompt_tokens = NB * BS,
                                 .block_size = BS,
                                 .hashes = s_hashes,
                                 .nhashes = NB};
        assert_int_equal(
            decider_router_route_at(terse, &s_policy, f->state, 0, &req, &d, f->wall, f->mono),
            IPL_ROUTE_OK);
        req.terse = true;
        assert_int_equal(
            decider_router_route_at(asks, &s_policy, f->state, 0, &req, &e, f->wall, f->mono),
            IPL_ROUTE_OK);
        assert_int_equal(s_route_n(f, strategies[k], s_hashes, NB, false), IPL_ROUTE_OK);
        assert_true(strlen(f->d.detail) > 0);
        const decider_decision_t *quiet[] = {&d, &e};
        for (size_t q = 0; q < 2; q++) {
            assert_string_equal(quiet[q]->worker->name, f->d.worker->name);
            assert_string_equal(quiet[q]->reason, f->d.reason);
            assert_float_equal(quiet[q]->predicted_ttft_s, f->d.predicted_ttft_s, 1e-12);
            assert_string_equal(quiet[q]->detail, "");
            for (uint32_t i = 0; i < quiet[q]->ncands; i++)
                assert_string_equal(quiet[q]->cands[i].c.note, "");
        }
    }
    // The next request of the per-request router explains again.
    decider_request_t req = {.model = "m",
                             .strategy = "ttft",
                             .prompt_tokens = NB * BS,
                             .block_size = BS,
                             .hashes = s_hashes,
                             .nhashes = NB};
    assert_int_equal(
        decider_router_route_at(asks, &s_policy, f->state, 0, &req, &e, f->wall, f->mono),
        IPL_ROUTE_OK);
    assert_true(strlen(e.detail) > 0);
    assert_true(strlen(e.cands[e.winner].c.note) > 0);
    decider_decision_clear(&d);
    decider_decision_clear(&e);
    decider_router_destroy(&terse);
    decider_router_destroy(&asks);
}

/* Makes prompt p hot: asked for twice (decider_memory_heat), at the same clock. */
static void s_heat(s_fix_t *f, const uint64_t *p)
{
    for (int i = 0; i < 2; i++) {
        assert_int_equal(s_route_n(f, "ttft", p, NB, false), 0);
        assert_string_not_equal(f->d.reason, "rebalance"); // not yet hot
    }
}

/* A cold worker (restarted empty, or new) takes a share of the load: a request whose prefix
 * the others hold goes to it now and then (reason "rebalance"), at most one per 100 ms, while
 * it holds under a quarter of the pool's mean blocks and is less loaded than the winner. */
static void test_ttft_rebalances_toward_a_cold_worker(void **state)
{
    s_fix_t *f = *state;
    s_store(f, "w1", s_hashes, 100);
    s_store(f, "w2", s_hashes, 100);
    ipl_msg_t m = {.type = IPL_MSG_KV_EVENT};
    m.u.kv_event = (ipl_kv_event_t){.worker = "w3", .op = IPL_KV_OP_CLEARED};
    assert_int_equal(decider_state_apply(f->state, &m, 0), 0); // w3 empty: mean 66, a newcomer
    s_load(f, "w1", 2, 0, 0.1, IPL_HEALTH_UP);
    s_load(f, "w2", 2, 0, 0.1, IPL_HEALTH_UP);
    s_load(f, "w3", 0, 0, 0, IPL_HEALTH_UP);
    const uint64_t *p = s_hashes + 20; // w1 and w2 hold all of it, w3 none
    s_heat(f, p);
    assert_int_equal(s_route_n(f, "ttft", p, NB, false), 0);
    assert_string_equal(f->d.reason, "rebalance");
    assert_string_equal(f->d.worker->name, "w3");
    assert_non_null(strstr(f->d.detail, "holds 0 of the 66 blocks"));
    // the next one within 100 ms stays on its prefix
    f->mono += 50;
    assert_int_equal(s_route_n(f, "ttft", p, NB, false), 0);
    assert_string_equal(f->d.reason, "cache_hit");
    assert_string_not_equal(f->d.worker->name, "w3");
    f->mono += 60; // 110 ms after the first: one more may go (another prefix: the first is
                   // pending on w3 now, and the cost chooses between its holders)
    s_heat(f, s_hashes + 40);
    assert_int_equal(s_route_n(f, "ttft", s_hashes + 40, NB, false), 0);
    assert_string_equal(f->d.reason, "rebalance");
    assert_string_equal(f->d.worker->name, "w3");
    // a prompt asked for once is not moved: nothing gained by computing it again there
    f->mono += 200;
    assert_int_equal(s_route_n(f, "ttft", s_hashes + 70, NB, false), 0);
    assert_string_equal(f->d.reason, "cache_hit");

    // not when the cold worker is as loaded as the winner (w1 and w2: 2 running + the
    // decisions in flight since their samples)
    f->mono += 200;
    s_load(f, "w3", 20, 0, 0.1, IPL_HEALTH_UP);
    s_heat(f, s_hashes + 60);
    assert_int_equal(s_route_n(f, "ttft", s_hashes + 60, NB, false), 0);
    assert_string_not_equal(f->d.reason, "rebalance");

    // nor once it holds a quarter of the mean (20 of 73)
    f->mono += 200;
    s_load(f, "w3", 0, 0, 0, IPL_HEALTH_UP);
    s_store(f, "w3", s_hashes + 80, 20);
    s_heat(f, s_hashes + 50);
    assert_int_equal(s_route_n(f, "ttft", s_hashes + 50, NB, false), 0);
    assert_string_not_equal(f->d.reason, "rebalance");
}

/* Nor in a cold pool: every worker's holding under 64 blocks on average (the fixture's 5). */
static void test_ttft_no_rebalance_in_a_cold_pool(void **state)
{
    s_fix_t *f = *state;
    s_load(f, "w1", 0, 0, 0, IPL_HEALTH_UP);
    s_load(f, "w2", 6, 0, 0.1, IPL_HEALTH_UP);
    s_load(f, "w3", 6, 0, 0.1, IPL_HEALTH_UP);
    for (int i = 0; i < 3; i++) {
        f->mono += 200;
        assert_int_equal(s_route_n(f, "ttft", s_hashes, NB, false), 0);
        assert_string_not_equal(f->d.reason, "rebalance");
    }
}

/* Only toward a newcomer: a worker seen cold in a cold pool that stays cold as the pool warms
 * (the pool's few prefixes went elsewhere) is not one; one that was warm and lost its cache
 * (a restart: its KV events' CLEARED) is. */
static void test_ttft_rebalances_only_toward_newcomers(void **state)
{
    s_fix_t *f = *state;
    s_load(f, "w1", 2, 0, 0.1, IPL_HEALTH_UP);
    s_load(f, "w2", 2, 0, 0.1, IPL_HEALTH_UP);
    s_load(f, "w3", 0, 0, 0, IPL_HEALTH_UP);
    s_store(f, "w3", s_hashes + 90, 1); // w3 holds 9 blocks of the 5.3 mean: all seen cold pool
    assert_int_equal(s_route_n(f, "ttft", s_hashes, NB, false), 0);
    s_store(f, "w1", s_hashes, 100);
    s_store(f, "w2", s_hashes, 100);
    f->mono += 200;
    s_heat(f, s_hashes + 20);
    assert_int_equal(s_route_n(f, "ttft", s_hashes + 20, NB, false), 0);
    assert_string_not_equal(f->d.reason, "rebalance");

    s_store(f, "w3", s_hashes, 100); // warm
    f->mono += 200;
    assert_int_equal(s_route_n(f, "ttft", s_hashes + 30, NB, false), 0);
    assert_string_not_equal(f->d.reason, "rebalance");
    ipl_msg_t m = {.type = IPL_MSG_KV_EVENT};
    m.u.kv_event = (ipl_kv_event_t){.worker = "w3", .op = IPL_KV_OP_CLEARED};
    assert_int_equal(decider_state_apply(f->state, &m, 0), 0); // restarted empty
    f->mono += 200;
    s_heat(f, s_hashes + 40);
    assert_int_equal(s_route_n(f, "ttft", s_hashes + 40, NB, false), 0);
    assert_string_equal(f->d.reason, "rebalance");
    assert_string_equal(f->d.worker->name, "w3");
}

int main(void)
{
    ipl_log_set_level(IPL_LOG_OFF);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_list),
        cmocka_unit_test_setup_teardown(test_dynamo_worked_example, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_gie_default_weights, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_least_loaded_random_round_robin, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_sglang_cache_aware, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_prefix_hash, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_pool_strategy_and_default, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_ttft_waits_for_a_pending_prefix, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_ttft_gate_spares_the_own_backlog, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_ttft_places_a_prefix_where_fewest_were_placed, s_setup,
                                        s_teardown),
        cmocka_unit_test_setup_teardown(test_ttft_gate_needs_an_idle_worker_or_a_wide_gap, s_setup,
                                        s_teardown),
        cmocka_unit_test_setup_teardown(test_ttft_imposed_delay_needs_busy_workers, s_setup,
                                        s_teardown),
        cmocka_unit_test_setup_teardown(test_ttft_kv_gate_for_long_prompts, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_ttft_placement_by_count_within_the_band, s_setup,
                                        s_teardown),
        cmocka_unit_test_setup_teardown(test_ttft_rebalances_toward_a_cold_worker, s_setup,
                                        s_teardown),
        cmocka_unit_test_setup_teardown(test_ttft_no_rebalance_in_a_cold_pool, s_setup,
                                        s_teardown),
        cmocka_unit_test_setup_teardown(test_ttft_rebalances_only_toward_newcomers, s_setup,
                                        s_teardown),
        cmocka_unit_test_setup_teardown(test_terse, s_setup, s_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
