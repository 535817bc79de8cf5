/*
 * Unit tests of decider_router on hand-computed cases.
 *
 * Fixture: pool "chat" (model "m", block size 4) with workers a, b, c; the predictor's prior:
 * base 0, prefill 1000 tokens/s (queued and own), 10 ms per running request, 0 per queued
 * request; 100 mean uncached tokens per request (so a waiting request costs 0.1 s), load
 * gate 2. A 100-block prompt of 400 tokens; b holds its first 80 blocks.
 *
 *   a: running 3, waiting 0:  0 × 0.1 + 3 × 0.01 + 400 / 1000         = 0.43 s
 *   b: running 0, waiting 1:  1 × 0.1 + 0        + (400 − 320) / 1000 = 0.18 s  ← ttft wins
 *   c: idle:                  0                  + 400 / 1000         = 0.40 s
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "decider_router.h"
#include "decider_state.h"
#include "ipl_error.h"
#include "ipl_log.h"
#include "ipl_metrics.h"

#define NB   100
#define WALL 1000000u // wall ms of "now" in these tests
#define MONO 5000u

static uint64_t s_hashes[NB];
static ipl_pool_t s_pools[] = {{.name = "chat", .model = "m", .strategy = ""}};
static ipl_worker_t s_workers[] = {
    {.name = "a", .pool = "chat", .model = "m-up", .url = "http://a", .block_size = 4},
    {.name = "b", .pool = "chat", .model = "m-up", .url = "http://b", .block_size = 4},
    {.name = "c", .pool = "chat", .model = "m-up", .url = "http://c", .block_size = 4},
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
} s_fix_t;

static void s_load(decider_state_t *st, const char *w, uint64_t running, uint64_t waiting,
                   uint64_t health, uint64_t kv_state, uint64_t ts_ms)
{
    ipl_msg_t m = {.type = IPL_MSG_LOAD};
    m.u.load = (ipl_load_t){.worker = (char *)w,
                            .ts_ms = ts_ms,
                            .running = running,
                            .waiting = waiting,
                            .block_size = 4,
                            .health = health,
                            .kv_state = kv_state};
    assert_int_equal(decider_state_apply(st, &m, 0), 0);
}

static void s_store(decider_state_t *st, const char *w, size_t n)
{
    ipl_msg_t m = {.type = IPL_MSG_KV_EVENT};
    m.u.kv_event = (ipl_kv_event_t){
        .worker = (char *)w, .op = IPL_KV_OP_STORED, .hashes = s_hashes, .hashes_len = (uint32_t)n};
    assert_int_equal(decider_state_apply(st, &m, 0), 0);
}

// The fixture's router (seed 1, no max queue, no temperature, no oracle) or one with those
// settings changed.
static decider_router_t *s_router(uint64_t seed, uint64_t max_queue, double temperature_s,
                                  decider_oracle_fn *fn, void *arg)
{
    decider_router_config_t cfg;
    decider_router_config_defaults(&cfg);
    cfg.prefill_tokens_per_s = 1000;
    cfg.running_cost_s = 0.01;
    cfg.initial_request_tokens = 100;
    cfg.load_gate = 2;
    cfg.base_s = 0;
    cfg.seed = seed;
    cfg.max_queue = max_queue;
    cfg.temperature_s = temperature_s;
    cfg.offline.oracle = fn;
    cfg.offline.oracle_arg = arg;
    decider_router_t *r = decider_router_new(&cfg);
    assert_non_null(r);
    return r;
}

static int s_setup(void **state)
{
    static s_fix_t f;
    for (int i = 0; i < NB; i++)
        s_hashes[i] = 0xabc000 + (uint64_t)i;
    f.router = s_router(1, 0, 0, NULL, NULL);
    f.state = decider_state_new();
    s_load(f.state, "a", 3, 0, IPL_HEALTH_UP, IPL_KV_EXACT, WALL - 10);
    s_load(f.state, "b", 0, 1, IPL_HEALTH_UP, IPL_KV_EXACT, WALL - 10);
    s_load(f.state, "c", 0, 0, IPL_HEALTH_UP, IPL_KV_EXACT, WALL - 10);
    s_store(f.state, "b", 80);
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

static const decider_request_t s_req = {
    .model = "m", .prompt_tokens = 400, .block_size = 4, .hashes = s_hashes, .nhashes = NB};

static int s_route(s_fix_t *f, const decider_request_t *req)
{
    return decider_router_route_at(f->router, &s_policy, f->state, 0, req, &f->d, WALL, MONO);
}

static const decider_candidate_t *s_cand(const s_fix_t *f, const char *name)
{
    for (uint32_t i = 0; i < f->d.ncands; i++)
        if (!strcmp(f->d.cands[i].c.worker, name)) return &f->d.cands[i];
    fail_msg("no candidate %s", name);
    return NULL;
}

static void test_ttft_prefers_the_cached_worker(void **state)
{
    s_fix_t *f = *state;
    assert_int_equal(s_route(f, &s_req), IPL_ROUTE_OK);
    assert_string_equal(f->d.worker->name, "b");
    assert_string_equal(f->d.worker->url, "http://b");
    assert_string_equal(f->d.worker->model, "m-up");
    assert_string_equal(f->d.pool->name, "chat");
    assert_string_equal(f->d.reason, "cache_hit");
    assert_string_equal(f->d.strategy, "ttft");
    assert_int_equal(f->d.cached_tokens, 320);
    assert_float_equal(f->d.predicted_ttft_s, 0.18, 1e-9);
    assert_float_equal(s_cand(f, "a")->c.predicted_ttft_s, 0.43, 1e-9);
    assert_float_equal(s_cand(f, "c")->c.predicted_ttft_s, 0.40, 1e-9);
    assert_int_equal(s_cand(f, "a")->c.cached_tokens, 0);
    assert_int_equal(s_cand(f, "b")->c.waiting, 1);
    assert_int_equal(s_cand(f, "a")->c.running, 3);
    assert_true(s_cand(f, "a")->c.eligible && s_cand(f, "b")->c.eligible);
    assert_non_null(strstr(f->d.detail, "b has 320 of 400 prompt tokens cached"));
    assert_non_null(strstr(f->d.detail, "next best c 400.0 ms"));
    // The request-size average learned the 80 uncached tokens: 100 + 0.1 × (80 − 100).
    assert_float_equal(decider_router_mean_request_tokens(f->router), 98.0, 1e-9);
}

// The router remembers the policy workers' ids per policy and replica: a new policy (workers
// in another order) and a new replica (the same names under other ids) are each looked up
// anew, so the cache always goes to the worker that holds it.
static void test_ids_follow_policy_and_replica(void **state)
{
    s_fix_t *f = *state;
    assert_int_equal(s_route(f, &s_req), IPL_ROUTE_OK);
    assert_string_equal(f->d.worker->name, "b");
    ipl_worker_t reordered[] = {s_workers[2], s_workers[1], s_workers[0]}; // c, b, a
    ipl_policy_t p2 = s_policy;
    p2.version = 2;
    p2.workers = reordered;
    assert_int_equal(
        decider_router_route_at(f->router, &p2, f->state, 0, &s_req, &f->d, WALL, MONO),
        IPL_ROUTE_OK);
    assert_string_equal(f->d.worker->name, "b");
    assert_int_equal(s_cand(f, "b")->c.cached_tokens, 400); // 320 + the ledger's assumption
    assert_int_equal(s_cand(f, "c")->c.cached_tokens, 0);
    assert_int_equal(s_cand(f, "a")->c.running, 3);
    // A replica that met the workers in another order (c is id 0 there) and where c holds the
    // prefix: c's cache, not a's or b's.
    decider_state_t *st2 = decider_state_new();
    s_load(st2, "c", 0, 0, IPL_HEALTH_UP, IPL_KV_EXACT, WALL - 10);
    s_load(st2, "a", 3, 0, IPL_HEALTH_UP, IPL_KV_EXACT, WALL - 10);
    s_load(st2, "b", 0, 1, IPL_HEALTH_UP, IPL_KV_EXACT, WALL - 10);
    s_store(st2, "c", 90);
    assert_int_equal(decider_router_route_at(f->router, &p2, st2, 0, &s_req, &f->d, WALL, MONO),
                     IPL_ROUTE_OK);
    assert_string_equal(f->d.worker->name, "c");
    assert_int_equal(s_cand(f, "c")->c.cached_tokens, 360);
    assert_int_equal(s_cand(f, "a")->c.running, 3);
    assert_int_equal(s_cand(f, "b")->c.waiting, 1);
    decider_state_destroy(&st2);
}

// The router lists a pool's workers once per pool and policy: decisions alternating between
// two pools, then a policy version that moves a worker to the other pool, each see exactly
// their pool's workers, in policy order.
static void test_pool_workers_follow_pool_and_policy(void **state)
{
    s_fix_t *f = *state;
    ipl_pool_t pools[] = {{.name = "chat", .model = "m", .strategy = ""},
                          {.name = "code", .model = "m2", .strategy = ""}};
    ipl_worker_t workers[] = {s_workers[0], s_workers[1], s_workers[2]};
    workers[2].pool = "code";
    ipl_policy_t p = s_policy;
    p.version = 7;
    p.pools = pools;
    p.pools_len = 2;
    p.workers = workers;
    decider_request_t code = s_req;
    code.model = "m2";
    for (int k = 0; k < 2; k++) {
        assert_int_equal(
            decider_router_route_at(f->router, &p, f->state, 0, &s_req, &f->d, WALL, MONO),
            IPL_ROUTE_OK);
        assert_int_equal(f->d.ncands, 2);
        assert_string_equal(f->d.cands[0].c.worker, "a");
        assert_string_equal(f->d.cands[1].c.worker, "b");
        assert_int_equal(
            decider_router_route_at(f->router, &p, f->state, 0, &code, &f->d, WALL, MONO),
            IPL_ROUTE_OK);
        assert_int_equal(f->d.ncands, 1);
        assert_string_equal(f->d.worker->name, "c");
    }
    workers[0].pool = "code";
    p.version = 8;
    assert_int_equal(decider_router_route_at(f->router, &p, f->state, 0, &code, &f->d, WALL, MONO),
                     IPL_ROUTE_OK);
    assert_int_equal(f->d.ncands, 2);
    assert_string_equal(f->d.cands[0].c.worker, "a");
    assert_string_equal(f->d.cands[1].c.worker, "c");
    assert_int_equal(decider_router_route_at(f->router, &p, f->state, 0, &s_req, &f->d, WALL, MONO),
                     IPL_ROUTE_OK);
    assert_int_equal(f->d.ncands, 1);
    assert_string_equal(f->d.worker->name, "b");
}

static void test_load_gate(void **state)
{
    s_fix_t *f = *state;
    // b with 3 waiting: 3 × 0.1 + 0.08 = 0.38 s would still be best, but 3 > 0 + 2.
    s_load(f->state, "b", 0, 3, IPL_HEALTH_UP, IPL_KV_EXACT, WALL - 10);
    assert_int_equal(s_route(f, &s_req), IPL_ROUTE_OK);
    assert_string_equal(f->d.worker->name, "c");
    assert_string_equal(f->d.reason, "load_gate");
    assert_false(s_cand(f, "b")->c.eligible);
    assert_string_equal(s_cand(f, "b")->c.note,
                        "380.0 ms = 0.0 base + 300.0 wait + 80.0 prefill (80 tok); cost 460.0 "
                        "ms (+80.0 ms it imposes on the requests behind it); load gate: queue 3 > "
                        "least loaded 0 + 2, and load 3 > 1.5 x the least 0");
    assert_float_equal(s_cand(f, "b")->c.predicted_ttft_s, 0.38, 1e-9);
    assert_non_null(strstr(f->d.detail, "b holds 320 cached tokens but its queue 3"));
}

// The gate moves a request off its prefix only to relieve a worker clearly more loaded than
// the least loaded one (running + queue above 1.5 x): b's queue of 3 exceeds a's and c's 0 by
// more than 2, but with a running 3 and c running 2 nobody is idle — b's load 3 is not above
// 1.5 x 2 — so computing the prefix again elsewhere would only move the queue: b stays
// eligible and wins on cost (0.38 s + 0.08 s against c's 0.42 s + 0.40 s). With c running 1,
// b is 3 > 1.5 x its load: gated, and a or c computes the prefix.
static void test_load_gate_needs_a_less_loaded_worker(void **state)
{
    s_fix_t *f = *state;
    s_load(f->state, "b", 0, 3, IPL_HEALTH_UP, IPL_KV_EXACT, WALL - 10);
    s_load(f->state, "c", 2, 0, IPL_HEALTH_UP, IPL_KV_EXACT, WALL - 10);
    assert_int_equal(s_route(f, &s_req), IPL_ROUTE_OK);
    assert_true(s_cand(f, "b")->c.eligible);
    assert_string_equal(f->d.worker->name, "b");
    assert_string_equal(f->d.reason, "cache_hit");
    assert_float_equal(s_cand(f, "c")->c.predicted_ttft_s, 0.42, 1e-9);
    s_load(f->state, "c", 1, 0, IPL_HEALTH_UP, IPL_KV_EXACT, WALL - 5);
    assert_int_equal(decider_router_route_at(f->router, &s_policy, f->state, 0, &s_req, &f->d,
                                             WALL + 11000, MONO + 4000),
                     IPL_ROUTE_OK);
    assert_false(s_cand(f, "b")->c.eligible);
    assert_string_equal(f->d.reason, "load_gate");
    assert_string_not_equal(f->d.worker->name, "b"); // a (0.83 s) and c (0.81 s) tie
}

static void test_gated_worker_that_loses_anyway_is_not_the_reason(void **state)
{
    s_fix_t *f = *state;
    // b with 8 waiting: 0.88 s + its 0.08 s of prefill = cost 0.96 s, worse than c's
    // 0.40 + 0.40 = 0.80 s without any gate.
    s_load(f->state, "b", 0, 8, IPL_HEALTH_UP, IPL_KV_EXACT, WALL - 10);
    assert_int_equal(s_route(f, &s_req), IPL_ROUTE_OK);
    assert_string_equal(f->d.worker->name, "c");
    assert_string_equal(f->d.reason, "least_loaded");
}

static void test_degraded_down_and_unsampled(void **state)
{
    s_fix_t *f = *state;
    s_load(f->state, "b", 0, 1, IPL_HEALTH_UP, IPL_KV_DEGRADED, WALL - 10);
    assert_int_equal(s_route(f, &s_req), IPL_ROUTE_OK);
    assert_int_equal(s_cand(f, "b")->c.cached_tokens, 0);
    assert_string_equal(s_cand(f, "b")->c.note,
                        "kv degraded: load only; 500.0 ms = 0.0 base + 100.0 wait + 400.0 "
                        "prefill (400 tok); cost 900.0 ms (+400.0 ms it imposes on the requests "
                        "behind it)");
    assert_float_equal(s_cand(f, "b")->c.predicted_ttft_s, 0.5, 1e-9);
    assert_string_equal(f->d.worker->name, "c");
    assert_string_equal(f->d.reason, "least_loaded");

    s_load(f->state, "b", 0, 1, IPL_HEALTH_DOWN, IPL_KV_EXACT, WALL - 10);
    s_load(f->state, "a", 0, 0, IPL_HEALTH_UNKNOWN, IPL_KV_EXACT, WALL - 10);
    ipl_worker_t workers[4];
    memcpy(workers, s_workers, sizeof s_workers);
    workers[3] = (ipl_worker_t){
        .name = "d", .pool = "chat", .model = "m", .url = "http://d", .block_size = 4};
    ipl_policy_t p = s_policy;
    p.workers = workers;
    p.workers_len = 4;
    assert_int_equal(decider_router_route_at(f->router, &p, f->state, 0, &s_req, &f->d, WALL, MONO),
                     IPL_ROUTE_OK);
    assert_false(s_cand(f, "b")->c.eligible);
    assert_string_equal(s_cand(f, "b")->c.note, "down");
    assert_false(s_cand(f, "d")->c.eligible);
    assert_string_equal(s_cand(f, "d")->c.note, "no load sample yet");
    assert_non_null(strstr(s_cand(f, "a")->c.note, "health unknown: load only; "));
    assert_true(s_cand(f, "a")->c.eligible);

    // Only a worker whose cache cannot be trusted is left: load_only.
    s_load(f->state, "c", 0, 0, IPL_HEALTH_DOWN, IPL_KV_EXACT, WALL - 10);
    assert_int_equal(s_route(f, &s_req), IPL_ROUTE_OK);
    assert_string_equal(f->d.worker->name, "a");
    assert_string_equal(f->d.reason, "load_only");

    // Nobody: no_worker, naming each one's state.
    s_load(f->state, "a", 0, 0, IPL_HEALTH_DOWN, IPL_KV_EXACT, WALL - 10);
    assert_int_equal(s_route(f, &s_req), IPL_ROUTE_NO_WORKER);
    assert_string_equal(f->d.reason, "no_worker");
    assert_int_equal(f->d.winner, -1);
    assert_null(f->d.worker);
    assert_string_equal(f->d.detail, "no worker of pool \"chat\" can take requests: a down, b "
                                     "down, c down");
}

static void test_stale_state_and_block_size_mismatch(void **state)
{
    s_fix_t *f = *state;
    assert_int_equal(
        decider_router_route_at(f->router, &s_policy, f->state, 6000, &s_req, &f->d, WALL, MONO),
        IPL_ROUTE_OK);
    assert_int_equal(s_cand(f, "b")->c.cached_tokens, 0);
    assert_non_null(strstr(s_cand(f, "b")->c.note, "state stale (6000 ms): load only; "));
    assert_string_equal(f->d.reason, "load_only");

    decider_request_t req = s_req;
    req.block_size = 8;
    assert_int_equal(s_route(f, &req), IPL_ROUTE_OK);
    assert_int_equal(s_cand(f, "b")->c.cached_tokens, 0);
    assert_non_null(strstr(s_cand(f, "b")->c.note, "block size 4 != request's 8: load only; "));
}

static void test_inflight_and_optimistic_blocks(void **state)
{
    s_fix_t *f = *state;
    uint64_t other[NB];
    for (int i = 0; i < NB; i++)
        other[i] = 0xdef000 + (uint64_t)i;
    decider_request_t req = {
        .model = "m", .prompt_tokens = 400, .block_size = 4, .hashes = other, .nhashes = NB};
    // Nobody holds it: c (0.40) beats a (0.43) and b (0.50).
    assert_int_equal(s_route(f, &req), IPL_ROUTE_OK);
    assert_string_equal(f->d.worker->name, "c");
    assert_string_equal(f->d.reason, "least_loaded");
    // The same prompt again: c is assumed to hold it now (optimistic), with one in flight.
    assert_int_equal(s_route(f, &req), IPL_ROUTE_OK);
    assert_string_equal(f->d.worker->name, "c");
    assert_string_equal(f->d.reason, "cache_hit");
    assert_int_equal(s_cand(f, "c")->c.inflight, 1);
    assert_int_equal(s_cand(f, "c")->c.cached_tokens, 400);
    assert_int_equal(decider_router_optimistic_blocks(f->router), NB);
    // A new load sample of c (taken after those routings) absorbs the in-flight count.
    s_load(f->state, "c", 2, 0, IPL_HEALTH_UP, IPL_KV_EXACT, WALL + 1);
    assert_int_equal(
        decider_router_route_at(f->router, &s_policy, f->state, 0, &req, &f->d, WALL + 2, MONO),
        IPL_ROUTE_OK);
    assert_int_equal(s_cand(f, "c")->c.inflight, 0);
    // Past the TTL (2 s; at most 1.5 × TTL) the assumption is gone: KV events did not confirm.
    assert_int_equal(decider_router_route_at(f->router, &s_policy, f->state, 0, &req, &f->d,
                                             WALL + 3, MONO + 3001),
                     IPL_ROUTE_OK);
    assert_int_equal(s_cand(f, "c")->c.cached_tokens, 0);
}

static void test_distinct_prompts_spread(void **state)
{
    s_fix_t *f = *state;
    s_load(f->state, "a", 0, 0, IPL_HEALTH_UP, IPL_KV_EXACT, WALL - 10);
    s_load(f->state, "b", 0, 0, IPL_HEALTH_UP, IPL_KV_EXACT, WALL - 10);
    int seen[3] = {0};
    for (int k = 0; k < 3; k++) {
        uint64_t h[4] = {0x51000 + (uint64_t)k * 16, 2, 3, 4};
        decider_request_t req = {.model = "m", .prompt_tokens = 16, .hashes = h, .nhashes = 4};
        assert_int_equal(s_route(f, &req), IPL_ROUTE_OK);
        seen[f->d.worker->name[0] - 'a']++;
    }
    assert_int_equal(seen[0], 1);
    assert_int_equal(seen[1], 1);
    assert_int_equal(seen[2], 1);
}

static void test_baselines(void **state)
{
    s_fix_t *f = *state;
    decider_request_t req = s_req;
    req.strategy = "least-loaded";
    assert_int_equal(s_route(f, &req), IPL_ROUTE_OK);
    assert_string_equal(f->d.worker->name, "c"); // queue 0, running 0
    assert_string_equal(f->d.reason, "least_loaded");
    assert_string_equal(f->d.strategy, "least-loaded");

    s_load(f->state, "b", 0, 1, IPL_HEALTH_DOWN, IPL_KV_EXACT, WALL - 10);
    req.strategy = "random";
    int seen[3] = {0};
    for (int i = 0; i < 200; i++) {
        assert_int_equal(s_route(f, &req), IPL_ROUTE_OK);
        assert_string_equal(f->d.reason, "random");
        seen[f->d.worker->name[0] - 'a']++;
    }
    assert_int_equal(seen[1], 0); // never the DOWN worker
    assert_true(seen[0] > 50 && seen[2] > 50);

    // The pool's strategy applies when the request names none.
    s_pools[0].strategy = "least-loaded";
    assert_int_equal(s_route(f, &s_req), IPL_ROUTE_OK);
    assert_string_equal(f->d.strategy, "least-loaded");
    s_pools[0].strategy = "";
}

static void test_failures(void **state)
{
    s_fix_t *f = *state;
    assert_int_equal(
        decider_router_route_at(f->router, NULL, f->state, 0, &s_req, &f->d, WALL, MONO),
        IPL_ROUTE_NOT_READY);
    assert_string_equal(f->d.reason, "not_ready");
    assert_non_null(strstr(f->d.detail, "no policy"));
    assert_int_equal(
        decider_router_route_at(f->router, &s_policy, NULL, 0, &s_req, &f->d, WALL, MONO),
        IPL_ROUTE_NOT_READY);
    assert_non_null(strstr(f->d.detail, "no state snapshot"));
    decider_request_t req = s_req;
    req.model = "gpt-x";
    assert_int_equal(s_route(f, &req), IPL_ROUTE_NO_POOL);
    assert_string_equal(f->d.reason, "no_pool");
    assert_string_equal(f->d.detail, "no pool serves model \"gpt-x\" (known: m)");
    req.model = "m";
    req.strategy = "fastest";
    assert_int_equal(s_route(f, &req), IPL_ROUTE_BAD_REQUEST);
    assert_string_equal(f->d.reason, "bad_request");
    assert_non_null(strstr(f->d.detail, "unknown strategy \"fastest\""));
    assert_true(decider_router_strategy_known("ttft"));
    assert_false(decider_router_strategy_known("fastest"));
}

static void test_max_queue_and_overloaded(void **state)
{
    s_fix_t *f = *state;
    decider_router_t *r = s_router(5, 1, 0, NULL, NULL);
    // a: queue 0, b: 1, c: 2 → c is above the max queue (1): not eligible; b still wins.
    s_load(f->state, "c", 0, 2, IPL_HEALTH_UP, IPL_KV_EXACT, WALL - 10);
    assert_int_equal(decider_router_route_at(r, &s_policy, f->state, 0, &s_req, &f->d, WALL, MONO),
                     IPL_ROUTE_OK);
    assert_string_equal(f->d.worker->name, "b");
    assert_false(s_cand(f, "c")->c.eligible);
    assert_non_null(strstr(s_cand(f, "c")->c.note, "queue 2 above the max queue 1"));
    // Every queue above 1: OVERLOADED (the gateway answers 429), naming the least loaded.
    s_load(f->state, "a", 0, 3, IPL_HEALTH_UP, IPL_KV_EXACT, WALL - 10);
    s_load(f->state, "b", 0, 4, IPL_HEALTH_UP, IPL_KV_EXACT, WALL - 10);
    assert_int_equal(decider_router_route_at(r, &s_policy, f->state, 0, &s_req, &f->d, WALL, MONO),
                     IPL_ROUTE_OVERLOADED);
    assert_string_equal(f->d.reason, "overloaded");
    assert_null(f->d.worker);
    assert_non_null(strstr(f->d.detail, "every worker of pool \"chat\" has more than 1 requests "
                                        "queued (least: c with 2"));
    uint64_t counts[DECIDER_FALLBACK_NREASONS];
    decider_router_fallbacks(r, counts);
    assert_int_equal(counts[DECIDER_FALLBACK_OVERLOADED], 1);
    assert_int_equal(counts[DECIDER_FALLBACK_NO_WORKER], 0);
    assert_string_equal(decider_fallback_name(DECIDER_FALLBACK_OVERLOADED), "overloaded");
    assert_null(decider_fallback_name(DECIDER_FALLBACK_NREASONS));
    decider_router_destroy(&r);
}

// Temperature 0.3 s over the costs (prediction + the prefill it imposes; no worker has work
// queued — a runs 3, nobody waits —, so the requests arriving behind it count for nothing): b
// 0.08 + 0.08 = 0.16 s, c 0.40 + 0.40 = 0.80 s, a 0.43 + 0.40 = 0.83 s: p ∝ exp(−cost/T): b 1,
// c e^−2.13 = 0.118, a e^−2.23 = 0.107 → b 81.6 %, c 9.7 %, a 8.7 %.
static void test_temperature_samples(void **state)
{
    s_fix_t *f = *state;
    decider_router_t *r = s_router(5, 0, 0.3, NULL, NULL);
    s_load(f->state, "b", 0, 0, IPL_HEALTH_UP, IPL_KV_EXACT, WALL - 10);
    int seen[3] = {0}, explored = 0;
    uint64_t wall = WALL, mono = MONO;
    for (int i = 0; i < 2000; i++) {
        // Independent decisions: previous routings out of the in-flight horizon and the
        // optimistic TTL, the same load samples (their ts is older than every routing).
        wall += 11000;
        mono += 4000;
        s_load(f->state, "a", 3, 0, IPL_HEALTH_UP, IPL_KV_EXACT, wall - 10);
        s_load(f->state, "b", 0, 0, IPL_HEALTH_UP, IPL_KV_EXACT, wall - 10);
        s_load(f->state, "c", 0, 0, IPL_HEALTH_UP, IPL_KV_EXACT, wall - 10);
        assert_int_equal(
            decider_router_route_at(r, &s_policy, f->state, 0, &s_req, &f->d, wall, mono),
            IPL_ROUTE_OK);
        seen[f->d.worker->name[0] - 'a']++;
        if (!strcmp(f->d.reason, "explore")) {
            explored++;
            assert_non_null(strstr(f->d.detail, "instead of the best, b (80.0 ms)"));
        }
    }
    assert_true(seen[1] > 1530 && seen[1] < 1730);
    assert_true(seen[0] > 115 && seen[0] < 240);
    assert_true(seen[2] > 130 && seen[2] < 260);
    assert_int_equal(explored, seen[0] + seen[2]);
    decider_router_destroy(&r);
}

// The offline oracle hook: c truly holds the whole prompt, b (per the index) 320 tokens only.
static uint64_t s_truth(void *arg, const char *worker, const decider_request_t *req)
{
    (*(int *)arg)++;
    assert_ptr_equal(req->hashes, s_req.hashes); // the request decided
    assert_int_equal(req->nhashes, s_req.nhashes);
    return !strcmp(worker, "c") ? 1000 : 0; // more than the prompt: clamped to it
}

static void test_oracle(void **state)
{
    s_fix_t *f = *state;
    int calls = 0;
    decider_router_t *r = s_router(5, 0, 0, s_truth, &calls);
    decider_request_t req = s_req;
    req.strategy = "oracle";
    assert_int_equal(decider_router_route_at(r, &s_policy, f->state, 0, &req, &f->d, WALL, MONO),
                     IPL_ROUTE_OK);
    assert_int_equal(calls, 3);
    assert_string_equal(f->d.strategy, "oracle");
    assert_string_equal(f->d.worker->name, "c");
    assert_int_equal(f->d.cached_tokens, 400);
    assert_int_equal(s_cand(f, "b")->c.cached_tokens, 0); // the truth, not the index
    assert_float_equal(f->d.predicted_ttft_s, 0.0, 1e-12);
    // Without a hook (the live decider) oracle is ttft with the index: b.
    assert_int_equal(s_route(f, &req), IPL_ROUTE_OK);
    assert_string_equal(f->d.strategy, "oracle");
    assert_string_equal(f->d.worker->name, "b");
    decider_router_destroy(&r);
}

// Loads a, b, c with (waiting, health, kv_state) each at ts `wall` − 10.
static void s_loads(s_fix_t *f, uint64_t wall, const uint64_t waiting[3], const uint64_t health[3],
                    const uint64_t kv[3])
{
    const char *names[] = {"a", "b", "c"};
    for (int i = 0; i < 3; i++)
        s_load(f->state, names[i], 0, waiting[i], health[i], kv[i], wall - 10);
}

static void test_fallbacks_are_counted(void **state)
{
    s_fix_t *f = *state;
    const uint64_t up[3] = {IPL_HEALTH_UP, IPL_HEALTH_UP, IPL_HEALTH_UP};
    const uint64_t exact[3] = {IPL_KV_EXACT, IPL_KV_EXACT, IPL_KV_EXACT};
    uint64_t c[DECIDER_FALLBACK_NREASONS];
    // Each decision 11 s (wall) and 4 s (monotonic) after the previous one: independent.
    uint64_t wall = WALL, mono = MONO;
#define S_AT(age)                                                                                  \
    decider_router_route_at(f->router, &s_policy, f->state, age, &s_req, &f->d, wall += 11000,     \
                            mono += 4000)
    // b: 3 × 0.1 + 0.08 = 0.38 s would win (before the request-size average grows), but 3 > 0 + 2.
    s_loads(f, wall + 11000, (uint64_t[]){0, 3, 0}, up, exact);
    assert_int_equal(S_AT(0), IPL_ROUTE_OK);
    assert_string_equal(f->d.reason, "load_gate");
    s_loads(f, wall + 11000, (uint64_t[]){0, 1, 0}, up, exact);
    assert_int_equal(S_AT(6000), IPL_ROUTE_OK); // stale
    s_loads(f, wall + 11000, (uint64_t[]){0, 1, 0},
            (uint64_t[]){IPL_HEALTH_UP, IPL_HEALTH_UP, IPL_HEALTH_UNKNOWN},
            (uint64_t[]){IPL_KV_DEGRADED, IPL_KV_EXACT, IPL_KV_DEGRADED});
    assert_int_equal(S_AT(0), IPL_ROUTE_OK); // degraded (a, c: degraded is checked first)
    decider_router_fallbacks(f->router, c);
    assert_int_equal(c[DECIDER_FALLBACK_STALE], 1);
    assert_int_equal(c[DECIDER_FALLBACK_DEGRADED], 1);
    assert_int_equal(c[DECIDER_FALLBACK_HEALTH], 0);
    // b: 5 × 0.1 + 0.08 = 0.58 s loses anyway: not a load-gate fallback.
    s_loads(f, wall + 11000, (uint64_t[]){0, 5, 0}, up, exact);
    assert_int_equal(S_AT(0), IPL_ROUTE_OK);
    assert_string_equal(f->d.reason, "least_loaded");
    s_loads(f, wall + 11000, (uint64_t[]){0, 0, 0},
            (uint64_t[]){IPL_HEALTH_DOWN, IPL_HEALTH_DOWN, IPL_HEALTH_DOWN}, exact);
    assert_int_equal(S_AT(0), IPL_ROUTE_NO_WORKER);
#undef S_AT
    decider_router_fallbacks(f->router, c);
    assert_int_equal(c[DECIDER_FALLBACK_LOAD_GATE], 1);
    assert_int_equal(c[DECIDER_FALLBACK_NO_WORKER], 1);
    assert_int_equal(c[DECIDER_FALLBACK_BLOCK_SIZE], 0);
    assert_int_equal(c[DECIDER_FALLBACK_STALE], 1);
}

// The router's model (what GET /debug/model serves) and its counters as metric families.
static void test_model_json_and_metrics(void **state)
{
    s_fix_t *f = *state;
    ipl_metrics_t *metrics = ipl_metrics_new();
    assert_non_null(metrics);
    decider_router_register_metrics(f->router, metrics);
    decider_router_register_metrics(f->router, NULL); // nothing
    const uint64_t down[3] = {IPL_HEALTH_DOWN, IPL_HEALTH_DOWN, IPL_HEALTH_DOWN};
    const uint64_t exact[3] = {IPL_KV_EXACT, IPL_KV_EXACT, IPL_KV_EXACT};
    s_loads(f, WALL, (uint64_t[]){0, 0, 0}, down, exact);
    assert_int_equal(s_route(f, &s_req), IPL_ROUTE_NO_WORKER);

    cJSON *root = decider_router_model_json(f->router);
    assert_non_null(root);
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(root, "router");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(r, "default_strategy")->valuestring,
                        "ttft");
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(r, "load_gate")->valuedouble, 2);
    const cJSON *fb = cJSON_GetObjectItemCaseSensitive(root, "fallbacks");
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(fb, "no_worker")->valuedouble, 1);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(fb, "stale")->valuedouble, 0);
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, "observations");
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(o, "window_ms")->valuedouble, 60000);
    assert_non_null(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, "results"),
                                                     "learned"));
    assert_true(cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(root, "predictor")));
    cJSON_Delete(root);

    size_t len;
    char *text = ipl_metrics_render(metrics, &len);
    assert_non_null(text);
    assert_non_null(strstr(text, "inferplane_decider_fallbacks_total{reason=\"no_worker\"} 1\n"));
    assert_non_null(strstr(text, "inferplane_decider_fallbacks_total{reason=\"stale\"} 0\n"));
    assert_non_null(strstr(text, "inferplane_decider_observations_total{result=\"unknown\"} 0\n"));
    free(text);
    ipl_metrics_destroy(&metrics);
}

// The winner's features and worker set come with the decision, for the observation that
// calibrates the predictor once its TTFT is known.
static void test_observations_calibrate(void **state)
{
    s_fix_t *f = *state;
    assert_int_equal(s_route(f, &s_req), IPL_ROUTE_OK);
    assert_string_equal(f->d.set, "m-up");
    assert_float_equal(f->d.features.queued, 1, 0);
    assert_float_equal(f->d.features.queued_tokens, 100, 1e-9);
    assert_float_equal(f->d.features.running, 0, 0);
    assert_float_equal(f->d.features.uncached_tokens, 80, 0);
    assert_int_equal(f->d.prompt_tokens, 400);
    const decider_terms_t *t = &s_cand(f, "b")->terms;
    assert_float_equal(t->wait_s, 0.1, 1e-12);
    assert_float_equal(t->prefill_s, 0.08, 1e-12);
    // The worker set turns out 3× slower than the prior: the prediction follows.
    decider_features_t x = f->d.features;
    for (int i = 0; i < 30; i++)
        assert_int_equal(decider_router_observe(f->router, f->d.set, &x, 0.54), 0);
    assert_int_equal(decider_router_route_at(f->router, &s_policy, f->state, 0, &s_req, &f->d,
                                             WALL + 20000, MONO + 4000),
                     IPL_ROUTE_OK);
    assert_float_equal(s_cand(f, "b")->c.predicted_ttft_s, 0.54, 0.02);
    decider_predictor_stats_t st;
    assert_int_equal(
        decider_predictor_stats(decider_router_predictor(f->router), "m-up", &st, NULL), 0);
    assert_int_equal(st.samples, 30);
}

// A live request's OBSERVED comes back on the connection that asked: matched with the decision
// remembered under (connection, req_id), it teaches the predictor when it is a TTFT of the
// decided worker, and is counted by what became of it either way.
static void test_observed_feed_the_predictor(void **state)
{
    s_fix_t *f = *state;
    assert_int_equal(s_route(f, &s_req), IPL_ROUTE_OK);
    assert_string_equal(f->d.worker->name, "b");
    const uint64_t conn = 7;
#define S_REMEMBER(id)                                                                             \
    assert_int_equal(decider_router_remember(f->router, conn, id, &f->d, MONO), IPL_OK)
#define S_FEEDBACK(c, at, want)                                                                    \
    assert_int_equal(decider_router_feedback(f->router, c, &obs, at), DECIDER_OBSERVED_##want)
    ipl_observed_t obs = {.req_id = 1, .worker = "b", .status = 200, .stream = true, .ttft_s = 0.2};
    S_REMEMBER(1);
    S_FEEDBACK(conn, MONO + 100, LEARNED);
    S_FEEDBACK(conn, MONO + 100, UNKNOWN); // once only
    S_REMEMBER(2);
    obs.req_id = 2;
    S_FEEDBACK(conn + 1, MONO, UNKNOWN); // another gateway's req_id 2 is another request
    S_FEEDBACK(conn, MONO, LEARNED);
    S_REMEMBER(3);
    obs = (ipl_observed_t){.req_id = 3, .worker = "a", .status = 200, .stream = true, .ttft_s = 1};
    S_FEEDBACK(conn, MONO, MISMATCH);
    obs.worker = "b";
    S_REMEMBER(4);
    obs.req_id = 4;
    obs.status = 502;
    S_FEEDBACK(conn, MONO, FAILED);
    S_REMEMBER(5);
    obs = (ipl_observed_t){.req_id = 5, .worker = "b", .status = 200, .stream = true};
    S_FEEDBACK(conn, MONO, FAILED); // no token came
    // A whole JSON body: the time to its first byte includes every generated token.
    S_REMEMBER(6);
    obs = (ipl_observed_t){
        .req_id = 6, .worker = "b", .status = 200, .ttft_s = 2.0, .completion_tokens = 50};
    S_FEEDBACK(conn, MONO, UNSTREAMED);
    S_REMEMBER(7);
    obs = (ipl_observed_t){
        .req_id = 7, .worker = "b", .status = 200, .ttft_s = 0.2, .completion_tokens = 1};
    S_FEEDBACK(conn, MONO, LEARNED);
    S_REMEMBER(8);
    obs.req_id = 8;
    S_FEEDBACK(conn, MONO + 60001, EXPIRED); // the default window: 60 s
    S_REMEMBER(9);
    obs.req_id = 9;
    obs.ttft_s = 1e6; // beyond any TTFT: malformed
    S_FEEDBACK(conn, MONO, INVALID);
#undef S_REMEMBER
#undef S_FEEDBACK
    uint64_t n[DECIDER_OBSERVED_NRESULTS];
    decider_router_observed(f->router, n);
    assert_int_equal(n[DECIDER_OBSERVED_LEARNED], 3);
    assert_int_equal(n[DECIDER_OBSERVED_UNKNOWN], 2);
    assert_int_equal(n[DECIDER_OBSERVED_MISMATCH], 1);
    assert_int_equal(n[DECIDER_OBSERVED_FAILED], 2);
    assert_int_equal(n[DECIDER_OBSERVED_UNSTREAMED], 1);
    assert_int_equal(n[DECIDER_OBSERVED_EXPIRED], 1);
    assert_int_equal(n[DECIDER_OBSERVED_INVALID], 1);
    assert_int_equal(n[DECIDER_OBSERVED_OUTLIER], 0);
    assert_string_equal(decider_observed_name(DECIDER_OBSERVED_UNSTREAMED), "unstreamed");
    assert_null(decider_observed_name(DECIDER_OBSERVED_NRESULTS));
    decider_predictor_stats_t st;
    assert_int_equal(
        decider_predictor_stats(decider_router_predictor(f->router), "m-up", &st, NULL), 0);
    assert_int_equal(st.samples, 3);
    assert_int_equal(st.invalid, 1);
    // Only routed decisions are remembered.
    decider_request_t nope = s_req;
    nope.model = "nope";
    assert_int_equal(s_route(f, &nope), IPL_ROUTE_NO_POOL);
    assert_int_equal(decider_router_remember(f->router, conn, 10, &f->d, MONO), IPL_E_INVAL);
}

// The predictor's key is the worker's InferenceWorkerSet when the policy names it; with
// observations off nothing is remembered.
static void test_worker_set_key_and_observations_off(void **state)
{
    s_fix_t *f = *state;
    ipl_worker_t workers[3];
    memcpy(workers, s_workers, sizeof workers);
    for (int i = 0; i < 3; i++)
        workers[i].worker_set = "sims";
    ipl_policy_t policy = s_policy;
    policy.workers = workers;
    assert_int_equal(
        decider_router_route_at(f->router, &policy, f->state, 0, &s_req, &f->d, WALL, MONO),
        IPL_ROUTE_OK);
    assert_string_equal(f->d.set, "sims");
    workers[1].worker_set = ""; // an empty name is no name: the served model
    assert_int_equal(
        decider_router_route_at(f->router, &policy, f->state, 0, &s_req, &f->d, WALL, MONO + 1),
        IPL_ROUTE_OK);
    assert_string_equal(f->d.worker->name, "b");
    assert_string_equal(f->d.set, "m-up");

    decider_router_config_t cfg;
    decider_router_config_defaults(&cfg);
    assert_int_equal(cfg.observe_window_ms, 60000);
    cfg.observe_window_ms = 0;
    decider_router_t *off = decider_router_new(&cfg);
    assert_int_equal(
        decider_router_route_at(off, &s_policy, f->state, 0, &s_req, &f->d, WALL, MONO),
        IPL_ROUTE_OK);
    assert_int_equal(decider_router_remember(off, 1, 1, &f->d, MONO), IPL_E_INVAL);
    ipl_observed_t obs = {.req_id = 1, .worker = "b", .status = 200, .stream = true, .ttft_s = 1};
    assert_int_equal(decider_router_feedback(off, 1, &obs, MONO), DECIDER_OBSERVED_UNKNOWN);
    decider_router_destroy(&off);
}

// A router lent a ledger records its routings there (the server shares it with its peers).
static void test_lent_ledger(void **state)
{
    s_fix_t *f = *state;
    decider_ledger_t *ledger = decider_ledger_new(2000);
    decider_router_config_t cfg;
    decider_router_config_defaults(&cfg);
    cfg.ledger = ledger;
    decider_router_t *r = decider_router_new(&cfg);
    assert_int_equal(decider_router_route_at(r, &s_policy, f->state, 0, &s_req, &f->d, WALL, MONO),
                     IPL_ROUTE_OK);
    int w = decider_ledger_worker(ledger, f->d.worker->name);
    assert_int_equal(decider_ledger_inflight(ledger, w, WALL - 1, WALL), 1);
    // A peer's routing posted to that ledger counts in the router's next decision.
    decider_ledger_peer_t peer = {.worker = "c", .wall_ms = WALL};
    assert_int_equal(decider_ledger_post(ledger, &peer, WALL, MONO), IPL_OK);
    assert_int_equal(decider_router_route_at(r, &s_policy, f->state, 0, &s_req, &f->d, WALL, MONO),
                     IPL_ROUTE_OK);
    assert_int_equal(s_cand(f, "c")->c.inflight, 1);
    decider_router_destroy(&r);
    decider_ledger_destroy(&ledger); // the router did not own it: still alive until here
}

int main(void)
{
    ipl_log_set_level(IPL_LOG_OFF);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_ttft_prefers_the_cached_worker, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_ids_follow_policy_and_replica, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_pool_workers_follow_pool_and_policy, s_setup,
                                        s_teardown),
        cmocka_unit_test_setup_teardown(test_load_gate, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_load_gate_needs_a_less_loaded_worker, s_setup,
                                        s_teardown),
        cmocka_unit_test_setup_teardown(test_gated_worker_that_loses_anyway_is_not_the_reason,
                                        s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_degraded_down_and_unsampled, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_stale_state_and_block_size_mismatch, s_setup,
                                        s_teardown),
        cmocka_unit_test_setup_teardown(test_inflight_and_optimistic_blocks, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_distinct_prompts_spread, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_baselines, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_failures, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_max_queue_and_overloaded, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_temperature_samples, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_observed_feed_the_predictor, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_worker_set_key_and_observations_off, s_setup,
                                        s_teardown),
        cmocka_unit_test_setup_teardown(test_lent_ledger, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_oracle, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_fallbacks_are_counted, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_model_json_and_metrics, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_observations_calibrate, s_setup, s_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
