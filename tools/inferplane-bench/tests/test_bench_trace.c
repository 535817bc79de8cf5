/*
 * Unit tests of bench_trace: both formats, per line; malformed lines refused with the field
 * named and nothing added; a file's errors name the file and the line.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_trace.h"

static int s_add(bench_trace_t *t, const char *line, char *err)
{
    return bench_trace_add_line(t, line, strlen(line), err, 160);
}

static void test_formats(void **state)
{
    (void)state;
    bench_trace_t *t = bench_trace_new();
    char err[160];
    assert_int_equal(s_add(t,
                           "{\"arrival_s\": 0.25, \"prompt_tokens\": 2300, \"output_tokens\": 0,"
                           " \"prefix_group\": 3, \"tenant\": \"a\"}",
                           err),
                     0);
    assert_int_equal(s_add(t,
                           "{\"timestamp\": 27482, \"input_length\": 1100, \"output_length\": 52,"
                           " \"hash_ids\": [46, 47, 48]}\n",
                           err),
                     0);
    assert_int_equal(s_add(t, "  # a comment", err), 1);
    assert_int_equal(s_add(t, "   \r\n", err), 1);
    assert_int_equal(s_add(t,
                           "{\"arrival_s\": 1, \"prompt_tokens\": 10, \"output_tokens\": 5,"
                           " \"prefix_group\": \"sys\", \"prefix_tokens\": 40}",
                           err),
                     0);
    assert_int_equal(s_add(t,
                           "{\"arrival_s\": 2, \"prompt_tokens\": 10, \"output_tokens\": 5,"
                           " \"prefix_group\": null}",
                           err),
                     0);
    assert_int_equal(bench_trace_count(t), 4);
    const bench_trace_rec_t *r = bench_trace_rec(t, 0);
    assert_float_equal(r->arrival_s, 0.25, 1e-12);
    assert_int_equal(r->output_tokens, 1); // 0 is sent as 1
    assert_int_equal(r->group, 3);
    assert_int_equal(r->prefix_tokens, -1);
    r = bench_trace_rec(t, 1);
    assert_true(r->mooncake);
    assert_float_equal(r->arrival_s, 27.482, 1e-12);
    assert_int_equal(r->nhash, 3);
    assert_int_equal(bench_trace_hash_ids(t, r)[2], 48);
    r = bench_trace_rec(t, 2);
    assert_true(r->group >= (1ll << 40));   // a string group
    assert_int_equal(r->prefix_tokens, 10); // cut to the prompt
    assert_int_equal(bench_trace_rec(t, 3)->group, -1);
    assert_null(bench_trace_rec(t, 4));
    bench_trace_destroy(&t);
    assert_null(t);
}

static void test_malformed_lines(void **state)
{
    (void)state;
    bench_trace_t *t = bench_trace_new();
    char err[160];
    struct {
        const char *line, *field;
    } bad[] = {
        {"not json", "JSON object"},
        {"[1,2]", "JSON object"},
        {"{\"arrival_s\": 0.1", "JSON object"},
        {"{\"arrival_s\": -1, \"prompt_tokens\": 5, \"output_tokens\": 5}", "arrival_s"},
        {"{\"arrival_s\": 1, \"prompt_tokens\": 0, \"output_tokens\": 5}", "prompt_tokens"},
        {"{\"arrival_s\": 1, \"prompt_tokens\": 2.5, \"output_tokens\": 5}", "prompt_tokens"},
        {"{\"arrival_s\": 1, \"prompt_tokens\": 5}", "output_tokens"},
        {"{\"arrival_s\": 1, \"prompt_tokens\": 5, \"output_tokens\": 5, \"prefix_group\": []}",
         "prefix_group"},
        {"{\"arrival_s\": 1, \"prompt_tokens\": 5, \"output_tokens\": 5, \"prefix_tokens\": \"x\"}",
         "prefix_tokens"},
        {"{\"timestamp\": \"now\", \"input_length\": 5, \"output_length\": 1}", "timestamp"},
        {"{\"timestamp\": 1, \"input_length\": 1e9, \"output_length\": 1}", "input_length"},
        {"{\"timestamp\": 1, \"input_length\": 5, \"output_length\": 1, \"hash_ids\": 4}",
         "hash_ids"},
        {"{\"timestamp\": 1, \"input_length\": 5, \"output_length\": 1, \"hash_ids\": [1, -2]}",
         "hash_ids"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        assert_int_equal(s_add(t, bad[i].line, err), -7 /* IPL_E_INVAL */);
        assert_non_null(strstr(err, bad[i].field));
    }
    assert_int_equal(bench_trace_count(t), 0);
    // After the failures, a good line still parses, with its own hash ids only.
    assert_int_equal(s_add(t,
                           "{\"timestamp\": 1, \"input_length\": 5, \"output_length\": 1, "
                           "\"hash_ids\": [9]}",
                           err),
                     0);
    const bench_trace_rec_t *r = bench_trace_rec(t, 0);
    assert_int_equal(r->nhash, 1);
    assert_int_equal(bench_trace_hash_ids(t, r)[0], 9);
    bench_trace_destroy(&t);
}

static void test_load_file(void **state)
{
    (void)state;
    char path[] = "/tmp/test_bench_trace_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *text = "# ours\n{\"arrival_s\": 0, \"prompt_tokens\": 4, \"output_tokens\": 2}\n\n"
                       "{\"arrival_s\": 0.5, \"prompt_tokens\": -4, \"output_tokens\": 2}\n";
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    bench_trace_t *t = NULL;
    char err[256];
    assert_true(bench_trace_load(path, &t, err, sizeof err) < 0);
    assert_null(t);
    char want[300];
    snprintf(want, sizeof want, "%s:4: \"prompt_tokens\"", path);
    assert_non_null(strstr(err, want));
    unlink(path);
    assert_true(bench_trace_load(path, &t, err, sizeof err) < 0);
    assert_non_null(strstr(err, "cannot open"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_formats),
        cmocka_unit_test(test_malformed_lines),
        cmocka_unit_test(test_load_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
