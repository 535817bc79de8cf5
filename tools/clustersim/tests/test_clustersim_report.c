/*
 * Unit tests of clustersim_report: nearest-rank percentiles, the figures of a hand-computed
 * set of records (goodput under the SLO, cache-hit ratio, rejected requests left out), and
 * the JSON lines' exact shape.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "clustersim_report.h"

static void test_percentile_nearest_rank(void **state)
{
    (void)state;
    double v[] = {5, 1, 4, 2, 3, 10, 9, 8, 7, 6};
    assert_true(clustersim_percentile(v, 10, 0.5) == 5);   // ceil(5) = 5th
    assert_true(clustersim_percentile(v, 10, 0.9) == 9);   // 9th
    assert_true(clustersim_percentile(v, 10, 0.99) == 10); // ceil(9.9) = 10th
    assert_true(clustersim_percentile(v, 10, 0.01) == 1);
    double one[] = {3.5};
    assert_true(clustersim_percentile(one, 1, 0.5) == 3.5);
    assert_true(clustersim_percentile(NULL, 0, 0.5) == 0);
}

static void test_figures(void **state)
{
    (void)state;
    // Four requests over 120 s: TTFTs 0.5, 1.5, 0.2, and one rejected.
    clustersim_record_t r[] = {
        {.arrival_s = 0,
         .first_token_s = 0.5,
         .finish_s = 10,
         .prompt_tokens = 100,
         .cached_tokens = 80},
        {.arrival_s = 10,
         .first_token_s = 11.5,
         .finish_s = 120,
         .prompt_tokens = 200,
         .cached_tokens = 0},
        {.arrival_s = 20,
         .first_token_s = 20.2,
         .finish_s = 30,
         .prompt_tokens = 100,
         .cached_tokens = 100},
        {.arrival_s = 30, .first_token_s = -1, .finish_s = -1, .prompt_tokens = 50},
    };
    clustersim_figures_t f = {.strategy = "s", .workload = "w"};
    assert_int_equal(clustersim_figures_compute(r, 4, 1.0, &f), 0);
    assert_string_equal(f.strategy, "s");
    assert_int_equal(f.requests, 4);
    assert_int_equal(f.completed, 3);
    assert_int_equal(f.rejected, 1);
    assert_true(f.duration_s == 120);
    assert_true(f.ttft_p50_s == 0.5);
    assert_true(fabs(f.ttft_p99_s - 1.5) < 1e-12);
    assert_true(f.e2e_p50_s == 10);
    assert_true(f.e2e_p99_s == 110);
    assert_true(fabs(f.goodput_rpm - 1.0) < 1e-12);    // 2 within 1 s over 2 minutes
    assert_true(fabs(f.throughput_rpm - 1.5) < 1e-12); // 3 over 2 minutes
    assert_true(fabs(f.cache_hit_ratio - 180.0 / 400.0) < 1e-12);
}

static void test_json_lines(void **state)
{
    (void)state;
    clustersim_figures_t f = {.strategy = "ttft",
                              .workload = "shared-prefix",
                              .ttft_p50_s = 0.25,
                              .goodput_rpm = 103,
                              .cache_hit_ratio = 0.5};
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    clustersim_report_json(out, &f);
    fclose(out);
    assert_non_null(strstr(buf, "{\"name\": \"ttft_p50_s\", \"strategy\": \"ttft\", "
                                "\"workload\": \"shared-prefix\", \"value\": 0.25}\n"));
    assert_non_null(strstr(buf, "\"name\": \"goodput_rpm\", \"strategy\": \"ttft\", "
                                "\"workload\": \"shared-prefix\", \"value\": 103}\n"));
    assert_non_null(strstr(buf, "\"name\": \"cache_hit_ratio\""));
    assert_non_null(strstr(buf, "\"name\": \"ttft_p99_s\""));
    assert_non_null(strstr(buf, "\"name\": \"e2e_p50_s\""));
    int lines = 0;
    for (char *p = buf; *p; p++)
        lines += *p == '\n';
    assert_int_equal(lines, 10);
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_percentile_nearest_rank),
        cmocka_unit_test(test_figures),
        cmocka_unit_test(test_json_lines),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
