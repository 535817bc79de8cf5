/*
 * Unit tests of bench_rng: the same seed gives the same numbers, length specs parse or are
 * refused with a message, samples stay within bounds and have the asked-for mean.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "bench_rng.h"

static void test_deterministic(void **state)
{
    (void)state;
    bench_rng_t a, b, c;
    bench_rng_seed(&a, 42);
    bench_rng_seed(&b, 42);
    bench_rng_seed(&c, 43);
    int differ = 0;
    for (int i = 0; i < 100; i++) {
        uint64_t x = bench_rng_next(&a);
        assert_int_equal(x, bench_rng_next(&b));
        differ += x != bench_rng_next(&c);
        double u = bench_rng_uniform(&a);
        bench_rng_uniform(&b);
        assert_true(u >= 0 && u < 1);
    }
    assert_true(differ > 95);
}

static void s_moments(const char *spec, double *mean, double *min, double *max)
{
    bench_len_t len;
    char err[128];
    assert_int_equal(bench_len_parse(spec, &len, err, sizeof err), 0);
    bench_rng_t rng;
    bench_rng_seed(&rng, 7);
    double sum = 0;
    *min = INFINITY;
    *max = -INFINITY;
    for (int i = 0; i < 20000; i++) {
        double x = bench_len_sample(&len, &rng);
        sum += x;
        *min = x < *min ? x : *min;
        *max = x > *max ? x : *max;
    }
    *mean = sum / 20000;
}

static void test_distributions(void **state)
{
    (void)state;
    double mean, min, max;
    s_moments("128", &mean, &min, &max);
    assert_float_equal(mean, 128, 1e-9);
    s_moments("fixed:7", &mean, &min, &max);
    assert_float_equal(max, 7, 1e-9);
    s_moments("uniform:100,200", &mean, &min, &max);
    assert_float_equal(mean, 150, 2);
    assert_true(min >= 100 && max <= 200);
    s_moments("normal:500,50", &mean, &min, &max);
    assert_float_equal(mean, 500, 3);
    assert_true(min >= 1 && max <= 750);
    s_moments("normal:100,80,90,110", &mean, &min, &max);
    assert_true(min >= 90 && max <= 110);
    s_moments("lognormal:1000,500", &mean, &min, &max);
    assert_float_equal(mean, 1000, 30); // the clamp at mean + 5 sd barely matters
    assert_true(min >= 1 && max <= 3500);
    s_moments("exponential:5000", &mean, &min, &max);
    assert_float_equal(mean, 5000, 150); // sd of the mean: 5000 / sqrt(20000) = 35
    assert_true(min >= 0 && min < 5 && max > 5000 * 7); // unbounded: e^-7 * 20000 ~ 18 above
    s_moments("exponential:100,50,150", &mean, &min, &max);
    assert_true(min >= 50 && max <= 150);
}

/* An exponential's quantiles: the median is mean * ln 2, a quarter lie above mean * ln 4. */
static void test_exponential_shape(void **state)
{
    (void)state;
    bench_len_t len;
    char err[128];
    assert_int_equal(bench_len_parse("exponential:1000", &len, err, sizeof err), 0);
    assert_float_equal(bench_len_mean(&len), 1000, 1e-9);
    bench_rng_t rng;
    bench_rng_seed(&rng, 11);
    int below_median = 0, above_q3 = 0;
    for (int i = 0; i < 20000; i++) {
        double x = bench_len_sample(&len, &rng);
        below_median += x < 1000 * log(2);
        above_q3 += x > 1000 * log(4);
    }
    assert_in_range(below_median, 9700, 10300);
    assert_in_range(above_q3, 4800, 5200);
}

static void test_bad_specs(void **state)
{
    (void)state;
    bench_len_t len;
    char err[160];
    const char *bad[] = {"",   "abc", "uniform:5",        "normal:1,2,3", "gamma:1,2",
                         "-5", "12x", "normal:10,1,20,5", "uniform:1,2,3", "exponential:",
                         "exponential:5,1", "exponential:5,9,2", "exponential:1,2,3,4"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        assert_true(bench_len_parse(bad[i], &len, err, sizeof err) < 0);
        assert_non_null(strstr(err, bad[i]));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_distributions),
        cmocka_unit_test(test_exponential_shape),
        cmocka_unit_test(test_bad_specs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
