/*
 * Unit tests of decider_pool_metrics: the policy's workers are summed per pool from the
 * replica's LOADs (running, waiting, mean KV usage, by kv_state and health, unknown without a
 * LOAD, the oldest state's age); a pool without workers reads 0; a pool gone from the policy
 * keeps its series at 0; past the cap pools add up under "__overflow__"; label values are
 * escaped.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "decider_pool_metrics.h"

// The value of the series `name{labels}` in the registry's exposition, or -1 when absent.
static double s_value(ipl_metrics_t *m, const char *name, const char *labels)
{
    size_t len;
    char *text = ipl_metrics_render(m, &len);
    assert_non_null(text);
    char want[512];
    snprintf(want, sizeof want, "\n%s{%s} ", name, labels);
    const char *at = strstr(text, want);
    double v = at ? strtod(at + strlen(want), NULL) : -1;
    free(text);
    return v;
}

static void s_load(decider_state_t *st, const char *worker, uint64_t running, uint64_t waiting,
                   double kv, uint64_t health, uint64_t kv_state, uint64_t now_ms)
{
    ipl_msg_t m = {.type = IPL_MSG_LOAD};
    m.u.load = (ipl_load_t){.worker = (char *)worker,
                            .ts_ms = 1,
                            .running = running,
                            .waiting = waiting,
                            .kv_usage = kv,
                            .block_size = 16,
                            .num_blocks = 100,
                            .health = health,
                            .kv_state = kv_state};
    assert_int_equal(decider_state_apply(st, &m, now_ms), 0);
}

static ipl_pool_t s_pools[] = {{.name = "chat", .model = "m", .strategy = "ttft"},
                               {.name = "batch", .model = "b", .strategy = "ttft"},
                               {.name = "cloud-only", .model = "c", .strategy = "ttft"}};
static ipl_worker_t s_workers[] = {
    {.name = "w0", .pool = "chat"},
    {.name = "w1", .pool = "chat"},
    {.name = "w2", .pool = "chat"}, // no LOAD: unknown
    {.name = "b0", .pool = "batch"},
};

static void test_pools_from_policy_and_state(void **state)
{
    (void)state;
    ipl_metrics_t *m = ipl_metrics_new();
    decider_pool_metrics_t *pm = decider_pool_metrics_new(m);
    assert_non_null(pm);
    decider_state_t *st = decider_state_new();
    s_load(st, "w0", 2, 3, 0.25, IPL_HEALTH_UP, IPL_KV_EXACT, 1000);
    s_load(st, "w1", 1, 5, 0.75, IPL_HEALTH_UP, IPL_KV_DEGRADED, 4000);
    s_load(st, "b0", 0, 0, 0.5, IPL_HEALTH_DOWN, IPL_KV_SYNCING, 4500);
    s_load(st, "other", 9, 9, 1.0, IPL_HEALTH_UP, IPL_KV_EXACT, 4500); // in no pool
    ipl_policy_t policy = {
        .version = 3, .pools = s_pools, .pools_len = 3, .workers = s_workers, .workers_len = 4};
    decider_pool_metrics_update(pm, &policy, st, 5000);
    assert_int_equal(decider_pool_metrics_pools(pm), 3);

    assert_int_equal(s_value(m, "inferplane_decider_pool_workers", "pool=\"chat\""), 3);
    assert_int_equal(s_value(m, "inferplane_decider_pool_requests_running", "pool=\"chat\""), 3);
    assert_int_equal(s_value(m, "inferplane_decider_pool_requests_waiting", "pool=\"chat\""), 8);
    assert_float_equal(s_value(m, "inferplane_decider_pool_kv_cache_usage_ratio", "pool=\"chat\""),
                       0.5, 1e-9);
    assert_float_equal(s_value(m, "inferplane_decider_pool_state_age_seconds", "pool=\"chat\""),
                       4.0, 1e-9); // w0's LOAD, 4 s before
    const char *byk = "inferplane_decider_pool_workers_by_kv_state";
    assert_int_equal(s_value(m, byk, "pool=\"chat\",kv_state=\"exact\""), 1);
    assert_int_equal(s_value(m, byk, "pool=\"chat\",kv_state=\"degraded\""), 1);
    assert_int_equal(s_value(m, byk, "pool=\"chat\",kv_state=\"syncing\""), 0);
    assert_int_equal(s_value(m, byk, "pool=\"chat\",kv_state=\"unknown\""), 1);
    assert_int_equal(s_value(m, byk, "pool=\"batch\",kv_state=\"syncing\""), 1);
    const char *byh = "inferplane_decider_pool_workers_by_health";
    assert_int_equal(s_value(m, byh, "pool=\"chat\",health=\"up\""), 2);
    assert_int_equal(s_value(m, byh, "pool=\"chat\",health=\"unknown\""), 1);
    assert_int_equal(s_value(m, byh, "pool=\"batch\",health=\"down\""), 1);
    // a pool without workers is there, at 0
    assert_int_equal(s_value(m, "inferplane_decider_pool_workers", "pool=\"cloud-only\""), 0);
    assert_int_equal(
        s_value(m, "inferplane_decider_pool_kv_cache_usage_ratio", "pool=\"cloud-only\""), 0);

    // batch leaves the policy: its series stay, at 0; chat's follow the new LOAD
    s_load(st, "w0", 7, 0, 0.25, IPL_HEALTH_UP, IPL_KV_EXACT, 5000);
    policy.pools_len = 1;
    policy.workers_len = 3;
    decider_pool_metrics_update(pm, &policy, st, 5000);
    assert_int_equal(s_value(m, "inferplane_decider_pool_workers", "pool=\"batch\""), 0);
    assert_int_equal(s_value(m, byh, "pool=\"batch\",health=\"down\""), 0);
    assert_int_equal(s_value(m, "inferplane_decider_pool_requests_running", "pool=\"chat\""), 8);
    assert_float_equal(s_value(m, "inferplane_decider_pool_state_age_seconds", "pool=\"chat\""),
                       1.0, 1e-9); // w1's now the oldest

    // no policy, no state: every pool at 0
    decider_pool_metrics_update(pm, NULL, NULL, 6000);
    assert_int_equal(s_value(m, "inferplane_decider_pool_workers", "pool=\"chat\""), 0);
    assert_int_equal(s_value(m, "inferplane_decider_pool_requests_running", "pool=\"chat\""), 0);

    decider_state_destroy(&st);
    decider_pool_metrics_destroy(&pm);
    assert_null(pm);
    decider_pool_metrics_destroy(&pm); // NULL is fine
    ipl_metrics_destroy(&m);
}

static void test_overflow_and_escaping(void **state)
{
    (void)state;
    enum { N = DECIDER_POOL_METRICS_MAX + 3 };
    ipl_pool_t *pools = calloc(N, sizeof *pools);
    ipl_worker_t *workers = calloc(N, sizeof *workers);
    char(*names)[32] = calloc(N, sizeof *names);
    assert_true(pools && workers && names);
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], i == 0 ? "q\"uote" : "p%03d", i);
        pools[i].name = names[i];
        workers[i].name = names[i]; // a worker per pool, named after it
        workers[i].pool = names[i];
    }
    ipl_policy_t policy = {.pools = pools, .pools_len = N, .workers = workers, .workers_len = N};
    ipl_metrics_t *m = ipl_metrics_new();
    decider_pool_metrics_t *pm = decider_pool_metrics_new(m);
    decider_pool_metrics_update(pm, &policy, NULL, 0);
    assert_int_equal(decider_pool_metrics_pools(pm), DECIDER_POOL_METRICS_MAX + 1);
    assert_int_equal(s_value(m, "inferplane_decider_pool_workers", "pool=\"q\\\"uote\""), 1);
    assert_int_equal(s_value(m, "inferplane_decider_pool_workers", "pool=\"__overflow__\""), 3);
    assert_int_equal(s_value(m, "inferplane_decider_pool_workers_by_kv_state",
                             "pool=\"__overflow__\",kv_state=\"unknown\""),
                     3);
    assert_int_equal(s_value(m, "inferplane_decider_pool_workers", "pool=\"p258\""), -1);
    decider_pool_metrics_destroy(&pm);
    ipl_metrics_destroy(&m);
    free(pools);
    free(workers);
    free(names);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pools_from_policy_and_state),
        cmocka_unit_test(test_overflow_and_escaping),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
