/*
 * Unit tests of bench_report: the JSON has GuideLLM's shape (metrics × statuses ×
 * distribution fields, percentiles), NaN becomes null, labels parse and reach the figure
 * lines, the CSV has a header and a row per benchmark.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "bench_report.h"

static bench_metrics_t m;
static bench_run_result_t run;
static bench_req_t reqs[2];

static bench_entry_t s_entry(void)
{
    reqs[0] = (bench_req_t){.start = 10,
                            .first_token = 10.1,
                            .first_output = 10.1,
                            .last_token = 10.4,
                            .end = 10.5,
                            .iterations = 4,
                            .prompt_tokens = 9,
                            .output_tokens = 4,
                            .cached_tokens = -1,
                            .http_status = 200};
    reqs[1] = (bench_req_t){.start = 10.2,
                            .end = 10.3,
                            .output_tokens = -1,
                            .prompt_tokens = -1,
                            .cached_tokens = -1,
                            .status = BENCH_ERRORED,
                            .error = BENCH_ERR_HTTP,
                            .http_status = 503};
    run = (bench_run_result_t){
        .reqs = reqs, .n = 2, .start = 10, .end = 10.6, .wall_s = 0.6, .cpu_s = 0.01};
    assert_int_equal(bench_metrics_compute(reqs, 2, 10, 10.5, 200, &m), 0);
    bench_entry_t e = {"concurrent", {.kind = BENCH_STRAT_CONCURRENT, .streams = 2}, 5, 0, &m,
                       &run};
    return e;
}

static void test_json_shape(void **state)
{
    (void)state;
    bench_entry_t e = s_entry();
    bench_labels_t labels = {0};
    char spec[] = "strategy=ttft,workload=multi-turn";
    char err[128];
    assert_int_equal(bench_labels_parse(spec, &labels, err, sizeof err), 0);
    cJSON *b = bench_report_benchmark(&e, &labels, 10);
    assert_non_null(b);
    assert_string_equal(cJSON_GetObjectItem(b, "type_")->valuestring, "generative_benchmark");
    cJSON *metrics = cJSON_GetObjectItem(b, "metrics");
    cJSON *tot = cJSON_GetObjectItem(metrics, "request_totals");
    assert_int_equal(cJSON_GetObjectItem(tot, "errored")->valueint, 1);
    assert_int_equal(cJSON_GetObjectItem(tot, "total")->valueint, 2);
    for (int k = 0; k < BENCH_M__COUNT; k++) {
        cJSON *sd = cJSON_GetObjectItem(metrics, bench_metric_name(k));
        assert_non_null(sd);
        for (int s = 0; s < BENCH_NSTATUS; s++) {
            cJSON *d = cJSON_GetObjectItem(sd, bench_status_name(s));
            assert_non_null(cJSON_GetObjectItem(d, "median"));
            assert_non_null(cJSON_GetObjectItem(cJSON_GetObjectItem(d, "percentiles"), "p999"));
        }
    }
    cJSON *ttft =
        cJSON_GetObjectItem(cJSON_GetObjectItem(metrics, "time_to_first_token_ms"), "successful");
    assert_float_equal(cJSON_GetObjectItem(ttft, "median")->valuedouble, 100, 1e-6);
    cJSON *ours = cJSON_GetObjectItem(b, "inferplane");
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetObjectItem(ours, "cache"), "hit_ratio")));
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(ours, "errors"), "http")->valueint, 1);
    assert_string_equal(
        cJSON_GetObjectItem(cJSON_GetObjectItem(ours, "labels"), "workload")->valuestring,
        "multi-turn");
    cJSON *errored = cJSON_GetObjectItem(cJSON_GetObjectItem(b, "requests"), "errored");
    assert_int_equal(cJSON_GetArraySize(errored), 1);
    assert_true(cJSON_IsNull(
        cJSON_GetObjectItem(cJSON_GetArrayItem(errored, 0), "time_to_first_token_ms")));
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(errored, 0), "http_status")->valueint,
                     503);
    cJSON_Delete(b);
}

static void test_figures_and_csv(void **state)
{
    (void)state;
    bench_entry_t e = s_entry();
    bench_labels_t labels = {0};
    char spec[] = "strategy=random,workload=no-prefix,rep=2";
    char err[128];
    assert_int_equal(bench_labels_parse(spec, &labels, err, sizeof err), 0);
    assert_string_equal(bench_labels_get(&labels, "rep"), "2");
    assert_null(bench_labels_get(&labels, "nope"));
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    bench_report_figures(f, &e, 1, &labels);
    fclose(f);
    int lines = 0, goodput = 0;
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *o = cJSON_Parse(line);
        assert_non_null(o);
        assert_string_equal(cJSON_GetObjectItem(o, "strategy")->valuestring, "random");
        assert_string_equal(cJSON_GetObjectItem(o, "rep")->valuestring, "2");
        assert_string_equal(cJSON_GetObjectItem(o, "benchmark")->valuestring, "concurrent@2");
        if (!strcmp(cJSON_GetObjectItem(o, "name")->valuestring, "goodput_per_min")) {
            // one success within 200 ms over a 0.5 s window
            assert_float_equal(cJSON_GetObjectItem(o, "value")->valuedouble, 120, 1e-6);
            goodput++;
        }
        lines++;
        cJSON_Delete(o);
    }
    assert_int_equal(goodput, 1);
    assert_true(lines >= 10);
    free(buf);
    buf = NULL;
    f = open_memstream(&buf, &len);
    bench_report_csv(f, &e, 1, &labels);
    bench_report_table(f, &e, 1);
    fclose(f);
    assert_non_null(strstr(buf, "benchmark,profile,strategy,workload,rep,duration_s,"));
    assert_non_null(strstr(buf, "\nconcurrent@2,concurrent,random,no-prefix,2,0.500,"));
    assert_non_null(strstr(buf, "not successful: http 1"));
    free(buf);

    char bad[] = "novalue";
    assert_true(bench_labels_parse(bad, &labels, err, sizeof err) < 0);
    assert_non_null(strstr(err, "novalue"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_shape),
        cmocka_unit_test(test_figures_and_csv),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
