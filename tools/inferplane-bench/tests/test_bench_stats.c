/*
 * Unit tests of bench_stats against hand-computed values: GuideLLM's percentile rule (the
 * first value whose cumulative probability reaches p), weighted moments, merged duplicates,
 * rates over a window, the 0.1 ms merge, concurrency levels weighted by time.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>

#include "bench_stats.h"

#define EPS 1e-9

static void test_values_equal_weights(void **state)
{
    (void)state;
    bench_wv_t v[] = {{4, 1}, {2, 1}, {1, 1}, {3, 1}};
    bench_dist_t d;
    assert_int_equal(bench_dist_values(v, 4, -1, &d), 0);
    assert_float_equal(d.mean, 2.5, EPS);
    assert_float_equal(d.median, 2, EPS); // not 2.5: cdf(2) = 0.5 reaches p50
    assert_float_equal(d.pct[4], 1, EPS); // p25
    assert_float_equal(d.pct[6], 3, EPS); // p75
    assert_float_equal(d.pct[BENCH_P90], 4, EPS);
    assert_float_equal(d.pct[0], 1, EPS);
    assert_float_equal(d.pct[10], 4, EPS);
    assert_float_equal(d.mode, 1, EPS);
    assert_float_equal(d.variance, 1.25, EPS);
    assert_float_equal(d.std_dev, sqrt(1.25), EPS);
    assert_float_equal(d.min, 1, EPS);
    assert_float_equal(d.max, 4, EPS);
    assert_int_equal(d.count, 4);
    assert_float_equal(d.total_sum, 10, EPS);
}

static void test_values_weighted_and_merged(void **state)
{
    (void)state;
    bench_wv_t v[] = {{20, 1}, {10, 3}};
    bench_dist_t d;
    assert_int_equal(bench_dist_values(v, 2, -1, &d), 0);
    assert_float_equal(d.mean, 12.5, EPS);
    assert_float_equal(d.median, 10, EPS);
    assert_float_equal(d.pct[BENCH_P90], 20, EPS);
    assert_float_equal(d.variance, 18.75, EPS);
    assert_int_equal(d.count, 4);

    bench_wv_t dup[] = {{5, 1}, {1, 1}, {5, 1}, {7, 0}};
    assert_int_equal(bench_dist_values(dup, 4, 9, &d), 0);
    assert_float_equal(d.mode, 5, EPS);
    assert_float_equal(d.median, 5, EPS);
    assert_float_equal(d.max, 5, EPS); // the zero weight is dropped
    assert_int_equal(d.count, 9);      // as given
    assert_float_equal(d.total_sum, 9 * 11.0 / 3, EPS);

    assert_int_equal(bench_dist_values(v, 0, -1, &d), 0);
    assert_int_equal(d.count, 0);
    assert_float_equal(d.mean, 0, EPS);
}

static void test_rate_over_window(void **state)
{
    (void)state;
    // One event per second over [0, 4]: spans 0.5, 1, 1, 1, 0.5; rates 2, 1, 1, 1, 2.
    bench_wv_t e[] = {{3, 1}, {0, 1}, {1, 1}, {2, 1}, {4, 1}};
    bench_dist_t d;
    assert_int_equal(bench_dist_rate(e, 5, 0, 4, &d), 0);
    assert_float_equal(d.mean, 1.25, EPS); // 5 events / 4 s
    assert_float_equal(d.median, 1, EPS);
    assert_float_equal(d.max, 2, EPS);
    assert_int_equal(d.count, 5);

    // Without a window, events outside nothing; two events 0.05 ms apart are one.
    bench_wv_t m[] = {{0, 1}, {0.00005, 1}, {1, 1}};
    assert_int_equal(bench_dist_rate(m, 3, NAN, NAN, &d), 0);
    // times 0 (w2), 1 (w1): spans 0.5, 0.5: rates 4, 2 -> mean 3
    assert_float_equal(d.mean, 3, EPS);
    assert_int_equal(d.count, 3);

    // A window drops the events outside it.
    bench_wv_t w[] = {{-1, 5}, {1, 2}, {9, 5}};
    assert_int_equal(bench_dist_rate(w, 3, 0, 2, &d), 0);
    assert_float_equal(d.mean, 1, EPS); // 2 events over 2 s
    assert_int_equal(d.count, 2);

    bench_wv_t one[] = {{1, 1}};
    assert_int_equal(bench_dist_rate(one, 1, NAN, NAN, &d), 0);
    assert_int_equal(d.count, 0);
}

static void test_concurrency(void **state)
{
    (void)state;
    // [0,2] and [1,3]: level 1 for 1 s, 2 for 1 s, 1 for 1 s.
    bench_iv_t iv[] = {{1, 3, 1}, {0, 2, 1}};
    bench_dist_t d;
    assert_int_equal(bench_dist_concurrency(iv, 2, 0, 3, &d), 0);
    assert_float_equal(d.mean, 4.0 / 3, EPS);
    assert_float_equal(d.median, 1, EPS);
    assert_float_equal(d.max, 2, EPS);
    assert_int_equal(d.count, 2);
    // A window from 1.5 carries the level 2 in; [1.5, 2]: 2, [2, 3]: 1.
    assert_int_equal(bench_dist_concurrency(iv, 2, 1.5, 3, &d), 0);
    assert_float_equal(d.mean, (2 * 0.5 + 1 * 1) / 1.5, EPS);
    // Without a window.
    assert_int_equal(bench_dist_concurrency(iv, 2, NAN, NAN, &d), 0);
    assert_float_equal(d.mean, 4.0 / 3, EPS);
    assert_int_equal(bench_dist_concurrency(iv, 0, 0, 3, &d), 0);
    assert_int_equal(d.count, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_values_equal_weights),
        cmocka_unit_test(test_values_weighted_and_merged),
        cmocka_unit_test(test_rate_over_window),
        cmocka_unit_test(test_concurrency),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
