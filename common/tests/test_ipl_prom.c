/*
 * Unit tests of ipl_prom: a vLLM-like /metrics page, label escapes, special values,
 * timestamps, CRLF, malformed lines counted and skipped, label extraction and its errors.
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

#include "ipl_error.h"
#include "ipl_prom.h"

enum { MAXS = 16 };
typedef struct {
    int n;
    char name[MAXS][64];
    char labels[MAXS][256];
    double value[MAXS];
} s_rec_t;

static void s_record(void *arg, const char *name, const char *labels, double value)
{
    s_rec_t *rec = arg;
    assert_true(rec->n < MAXS);
    snprintf(rec->name[rec->n], sizeof rec->name[0], "%s", name);
    snprintf(rec->labels[rec->n], sizeof rec->labels[0], "%s", labels);
    rec->value[rec->n] = value;
    rec->n++;
}

static int s_parse(const char *text, s_rec_t *rec)
{
    memset(rec, 0, sizeof *rec);
    return ipl_prom_parse(text, strlen(text), s_record, rec);
}

static void test_vllm_page(void **state)
{
    (void)state;
    static const char page[] =
        "# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
        "# TYPE vllm:num_requests_running gauge\n"
        "vllm:num_requests_running{engine=\"0\",model_name=\"sim-model\"} 3.0\n"
        "vllm:num_requests_waiting{engine=\"0\",model_name=\"sim-model\"} 0.0\n"
        "vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"sim-model\"} 0.125\n"
        "vllm:cache_config_info{block_size=\"16\",cache_dtype=\"auto\",enable_prefix_caching="
        "\"True\",num_gpu_blocks=\"2048\"} 1.0\n"
        "\n"
        "   # indented comment\n"
        "vllm:time_to_first_token_seconds_bucket{le=\"+Inf\",model_name=\"sim-model\"} 17\n"
        "process_start_time_seconds 1.7e+09\n";
    s_rec_t rec;
    assert_int_equal(s_parse(page, &rec), 0);
    assert_int_equal(rec.n, 6);
    assert_string_equal(rec.name[0], "vllm:num_requests_running");
    assert_string_equal(rec.labels[0], "engine=\"0\",model_name=\"sim-model\"");
    assert_true(rec.value[0] == 3.0);
    assert_true(rec.value[2] == 0.125);
    assert_string_equal(rec.name[3], "vllm:cache_config_info");
    char buf[32];
    assert_int_equal(ipl_prom_label(rec.labels[3], "num_gpu_blocks", buf, sizeof buf), 0);
    assert_string_equal(buf, "2048");
    assert_int_equal(ipl_prom_label(rec.labels[3], "block_size", buf, sizeof buf), 0);
    assert_string_equal(buf, "16");
    assert_int_equal(ipl_prom_label(rec.labels[4], "le", buf, sizeof buf), 0);
    assert_string_equal(buf, "+Inf");
    assert_true(rec.value[4] == 17);
    assert_string_equal(rec.name[5], "process_start_time_seconds");
    assert_string_equal(rec.labels[5], "");
    assert_true(rec.value[5] == 1.7e9);
}

static void test_values_and_timestamps(void **state)
{
    (void)state;
    s_rec_t rec;
    assert_int_equal(s_parse("a NaN\nb +Inf\nc -Inf\nd -1.5e-3 1700000000000\n"
                             "e 2 -5\nf\t7\t\ng{} 8\nh {x=\"1\"} 9\ni{x=\"1\",} 10\r\n"
                             "j 11",
                             &rec),
                     0);
    assert_int_equal(rec.n, 10);
    assert_true(isnan(rec.value[0]));
    assert_true(isinf(rec.value[1]) && rec.value[1] > 0);
    assert_true(isinf(rec.value[2]) && rec.value[2] < 0);
    assert_true(rec.value[3] == -1.5e-3);
    assert_true(rec.value[4] == 2);
    assert_string_equal(rec.name[5], "f");
    assert_true(rec.value[5] == 7);
    assert_string_equal(rec.name[6], "g");
    assert_string_equal(rec.labels[6], "");
    assert_string_equal(rec.name[7], "h");
    assert_string_equal(rec.labels[7], "x=\"1\"");
    assert_string_equal(rec.labels[8], "x=\"1\",");
    assert_true(rec.value[8] == 10);
    assert_string_equal(rec.name[9], "j");
    assert_true(rec.value[9] == 11);
}

static void test_escapes(void **state)
{
    (void)state;
    s_rec_t rec;
    assert_int_equal(
        s_parse("m{path=\"C:\\\\dir\",q=\"say \\\"hi\\\"\",nl=\"a\\nb\",br=\"}{\",odd=\"\\t\"} 1\n",
                &rec),
        0);
    assert_int_equal(rec.n, 1);
    char buf[32];
    assert_int_equal(ipl_prom_label(rec.labels[0], "path", buf, sizeof buf), 0);
    assert_string_equal(buf, "C:\\dir");
    assert_int_equal(ipl_prom_label(rec.labels[0], "q", buf, sizeof buf), 0);
    assert_string_equal(buf, "say \"hi\"");
    assert_int_equal(ipl_prom_label(rec.labels[0], "nl", buf, sizeof buf), 0);
    assert_string_equal(buf, "a\nb");
    assert_int_equal(ipl_prom_label(rec.labels[0], "br", buf, sizeof buf), 0);
    assert_string_equal(buf, "}{");
    assert_int_equal(ipl_prom_label(rec.labels[0], "odd", buf, sizeof buf), 0);
    assert_string_equal(buf, "\\t");
}

static void test_malformed_lines(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "9bad 1",        "foo-bar 1",        "foo",           "foo ",
        "foo 1x",        "foo 1 2 3",        "foo 1 ts",      "foo 1 -",
        "foo{a=\"1\" 1", "foo{a=1} 1",       "foo{=\"1\"} 1", "foo{a=\"1\"b=\"2\"} 1",
        "foo{a=\"1} 1",  "foo{a:b=\"1\"} 1", "{a=\"1\"} 1",   "foo{a=\"1\"}",
        "foo{,} 1",      "foo 0x",
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        s_rec_t rec;
        char text[128];
        snprintf(text, sizeof text, "ok_before 1\n%s\nok_after 2\n", bad[k]);
        int rc = s_parse(text, &rec);
        if (rc != 1) fail_msg("\"%s\": %d malformed lines, want 1", bad[k], rc);
        assert_int_equal(rec.n, 2);
        assert_string_equal(rec.name[1], "ok_after");
    }
    /* a NUL inside a line makes it malformed, not a shorter valid line */
    static const char nul[] = "a 1\nb 2\0junk\nc 3\n";
    s_rec_t rec;
    memset(&rec, 0, sizeof rec);
    assert_int_equal(ipl_prom_parse(nul, sizeof nul - 1, s_record, &rec), 1);
    assert_int_equal(rec.n, 2);
    assert_string_equal(rec.name[1], "c");
}

static void test_not_nul_terminated(void **state)
{
    (void)state;
    char *text = malloc(7); /* exactly "x 1\ny 2", no NUL: ASan catches an over-read */
    memcpy(text, "x 1\ny 2", 7);
    s_rec_t rec;
    memset(&rec, 0, sizeof rec);
    assert_int_equal(ipl_prom_parse(text, 7, s_record, &rec), 0);
    assert_int_equal(rec.n, 2);
    assert_true(rec.value[1] == 2);
    assert_int_equal(ipl_prom_parse(text, 5, s_record, &rec), 1); /* "x 1\ny" */
    assert_int_equal(ipl_prom_parse(text, 0, NULL, NULL), 0);
    free(text);
}

static void test_label_errors(void **state)
{
    (void)state;
    char buf[4];
    assert_int_equal(ipl_prom_label("a=\"1\",b=\"2\"", "c", buf, sizeof buf), IPL_E_NOTFOUND);
    assert_int_equal(ipl_prom_label("", "c", buf, sizeof buf), IPL_E_NOTFOUND);
    assert_int_equal(ipl_prom_label("a=\"123\"", "a", buf, sizeof buf), 0);
    assert_string_equal(buf, "123");
    assert_int_equal(ipl_prom_label("a=\"1234\"", "a", buf, sizeof buf), IPL_E_RANGE);
    assert_string_equal(buf, "");
    assert_int_equal(ipl_prom_label("a=\"\"", "a", buf, sizeof buf), 0);
    assert_string_equal(buf, "");
    assert_int_equal(ipl_prom_label("a=\"\"", "a", buf, 0), IPL_E_RANGE);
    assert_int_equal(ipl_prom_label("a=\"1\",a=\"2\"", "a", buf, sizeof buf), 0);
    assert_string_equal(buf, "1");
    assert_int_equal(ipl_prom_label("ab=\"1\",a=\"2\"", "a", buf, sizeof buf), 0);
    assert_string_equal(buf, "2");
    assert_int_equal(ipl_prom_label("x=1,a=\"2\"", "a", buf, sizeof buf), IPL_E_INVAL);
    assert_int_equal(ipl_prom_label("x=\"unterminated", "a", buf, sizeof buf), IPL_E_INVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vllm_page),
        cmocka_unit_test(test_values_and_timestamps),
        cmocka_unit_test(test_escapes),
        cmocka_unit_test(test_malformed_lines),
        cmocka_unit_test(test_not_nul_terminated),
        cmocka_unit_test(test_label_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
