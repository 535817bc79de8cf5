/*
 * Unit tests of bench_metrics: GuideLLM's per-request values on a hand-made request, the
 * status split, zeros for missing values, goodput against an SLO, the cache-hit ratio and
 * the error causes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "bench_metrics.h"

#define EPS 1e-6

static bench_req_t s_ok(void)
{
    bench_req_t r = {.start = 100.0,
                     .first_token = 100.1,
                     .first_output = 100.1,
                     .last_token = 100.5,
                     .end = 100.6,
                     .iterations = 5,
                     .prompt_tokens = 10,
                     .output_tokens = 5,
                     .cached_tokens = 4,
                     .status = BENCH_SUCCESSFUL,
                     .http_status = 200};
    return r;
}

static void test_request_values(void **state)
{
    (void)state;
    bench_req_t r = s_ok();
    assert_float_equal(bench_req_ttft_ms(&r), 100, EPS);
    assert_float_equal(bench_req_itl_ms(&r), 100, EPS);  // 400 ms over 4 gaps
    assert_float_equal(bench_req_tpot_ms(&r), 100, EPS); // 500 ms over 5 tokens
    assert_float_equal(bench_req_latency_s(&r), 0.6, EPS);
    // Without usage, the iterations are the output tokens.
    r.output_tokens = -1;
    r.iterations = 3;
    assert_float_equal(bench_req_output_tokens(&r), 3, EPS);
    assert_float_equal(bench_req_itl_ms(&r), 200, EPS);
    // One token: no ITL; no token at all: no TTFT.
    r.output_tokens = 1;
    assert_true(isnan(bench_req_itl_ms(&r)));
    bench_req_t e = {.start = 1, .end = 2, .output_tokens = -1};
    assert_true(isnan(bench_req_ttft_ms(&e)));
    assert_true(isnan(bench_req_output_tokens(&e)));
    assert_true(isnan(bench_req_tpot_ms(&e)));
}

static void test_benchmark_metrics(void **state)
{
    (void)state;
    bench_req_t reqs[3] = {s_ok(), {0}, s_ok()};
    reqs[1] = (bench_req_t){.start = 100.2,
                            .end = 100.3,
                            .output_tokens = -1,
                            .prompt_tokens = 10,
                            .cached_tokens = -1,
                            .status = BENCH_ERRORED,
                            .error = BENCH_ERR_HTTP,
                            .http_status = 500};
    // The third is slow: TTFT 300 ms, beyond a 150 ms SLO.
    reqs[2].first_token = reqs[2].first_output = 100.3;
    reqs[2].cached_tokens = -1;
    bench_metrics_t m;
    assert_int_equal(bench_metrics_compute(reqs, 3, 100.0, 100.6, 150, &m), 0);
    assert_int_equal(m.totals[BENCH_SUCCESSFUL], 2);
    assert_int_equal(m.totals[BENCH_ERRORED], 1);
    assert_int_equal(m.totals[BENCH_INCOMPLETE], 0);
    assert_int_equal(m.totals[BENCH_TOTAL], 3);
    assert_int_equal(m.errors[BENCH_ERR_HTTP], 1);
    assert_int_equal(m.errors[BENCH_ERR_NONE], 2);

    const bench_dist_t *ttft = m.m[BENCH_M_TTFT_MS];
    assert_float_equal(ttft[BENCH_SUCCESSFUL].mean, 200, EPS);
    assert_float_equal(ttft[BENCH_SUCCESSFUL].median, 100, EPS);
    assert_float_equal(ttft[BENCH_SUCCESSFUL].max, 300, EPS);
    assert_float_equal(ttft[BENCH_ERRORED].mean, 0, EPS); // no token: 0, as GuideLLM
    assert_int_equal(ttft[BENCH_TOTAL].count, 3);
    assert_float_equal(ttft[BENCH_TOTAL].median, 100, EPS); // {0, 100, 300}

    // Three requests end over a 0.6 s window.
    assert_float_equal(m.m[BENCH_M_REQUESTS_PER_SECOND][BENCH_TOTAL].mean, 3 / 0.6, EPS);
    assert_float_equal(m.m[BENCH_M_REQUESTS_PER_SECOND][BENCH_SUCCESSFUL].mean, 2 / 0.6, EPS);
    // Concurrency: two requests over [100, 100.6], one more over [100.2, 100.3].
    assert_float_equal(m.m[BENCH_M_REQUEST_CONCURRENCY][BENCH_TOTAL].mean, 1.3 / 0.6, EPS);
    assert_float_equal(m.m[BENCH_M_REQUEST_LATENCY][BENCH_SUCCESSFUL].mean, 0.6, EPS);
    assert_float_equal(m.m[BENCH_M_OUTPUT_TOKEN_COUNT][BENCH_SUCCESSFUL].mean, 5, EPS);
    assert_float_equal(m.m[BENCH_M_TOTAL_TOKEN_COUNT][BENCH_SUCCESSFUL].mean, 15, EPS);
    // ITL weighted by output tokens - 1: (100 * 4 + 50 * 4) / 8 (the second: 200 ms / 4).
    assert_float_equal(m.m[BENCH_M_ITL_MS][BENCH_SUCCESSFUL].mean, 75, EPS);
    // Per iteration: the first token, then (5 - 1) / (5 - 1) = 1 token each.
    assert_float_equal(m.m[BENCH_M_OUTPUT_TOKENS_PER_ITERATION][BENCH_SUCCESSFUL].mean, 1, EPS);
    assert_int_equal(m.m[BENCH_M_ITER_TOKENS_PER_ITERATION][BENCH_SUCCESSFUL].count, 8);

    // Goodput: one success within 150 ms, over 0.6 s = 100 per minute.
    assert_int_equal(m.slo_met, 1);
    assert_float_equal(m.goodput_per_min, 100, EPS);
    // Cache: only the first success reported cached tokens: 4 of 10.
    assert_int_equal(m.cache_requests, 1);
    assert_float_equal(m.cache_hit_ratio, 0.4, EPS);

    // No SLO: every success counts.
    assert_int_equal(bench_metrics_compute(reqs, 3, 100.0, 100.6, 0, &m), 0);
    assert_int_equal(m.slo_met, 2);
    assert_true(isnan((bench_metrics_compute(reqs, 0, 0, 1, 0, &m), m.cache_hit_ratio)));
}

static void test_names(void **state)
{
    (void)state;
    assert_string_equal(bench_metric_name(BENCH_M_TTFT_MS), "time_to_first_token_ms");
    assert_string_equal(bench_metric_name(BENCH_M_ITER_TOKENS_PER_ITERATION),
                        "iter_tokens_per_iteration");
    assert_string_equal(bench_status_name(BENCH_TOTAL), "total");
    assert_string_equal(bench_err_name(BENCH_ERR_CANCELLED), "cancelled");
    assert_string_equal(bench_err_name(99), "?");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_values),
        cmocka_unit_test(test_benchmark_metrics),
        cmocka_unit_test(test_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
