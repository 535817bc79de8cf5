/*
 * Unit tests of ipl_drops: the one series family and label schema, zeros from
 * ipl_drops_register, the escaped reason, and the frame_dropped line written once per window
 * for every caller of the process. The tests run in order: the first drop opens the window.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "ipl_drops.h"
#include "ipl_log.h"

static FILE *s_out;
static char *s_buf;
static size_t s_len;
static ipl_metrics_t *s_metrics;

static void s_capture(void)
{
    s_out = open_memstream(&s_buf, &s_len);
    assert_non_null(s_out);
    ipl_log_set_stream(s_out);
}

// The log lines written since the last call (caller frees); starts a new capture.
static char *s_lines(void)
{
    ipl_log_set_stream(NULL);
    fclose(s_out);
    char *text = s_buf;
    s_capture();
    return text;
}

static int s_setup(void **state)
{
    (void)state;
    ipl_log_init("testsvc", IPL_LOG_INFO);
    s_capture();
    s_metrics = ipl_metrics_new();
    return 0;
}

static int s_teardown(void **state)
{
    (void)state;
    ipl_metrics_destroy(&s_metrics);
    free(s_lines());
    ipl_log_set_stream(NULL);
    fclose(s_out);
    free(s_buf);
    return 0;
}

static double s_value(const char *reason)
{
    char labels[96];
    snprintf(labels, sizeof labels, "reason=\"%s\"", reason);
    return ipl_metric_value(ipl_metrics_counter(s_metrics, IPL_DROPS_METRIC, "", labels));
}

static void test_register_creates_zeros(void **state)
{
    (void)state;
    ipl_drops_register(s_metrics, (const char *[]){"truncated", "multipart"}, 2);
    char *text = ipl_metrics_render(s_metrics, NULL);
    assert_non_null(strstr(text, "# HELP inferplane_frames_dropped_total Frames received and "
                                 "dropped, by reason.\n"
                                 "# TYPE inferplane_frames_dropped_total counter\n"));
    assert_non_null(strstr(text, "inferplane_frames_dropped_total{reason=\"truncated\"} 0\n"));
    assert_non_null(strstr(text, "inferplane_frames_dropped_total{reason=\"multipart\"} 0\n"));
    free(text);
    char *log = s_lines();
    assert_string_equal(log, ""); // registering is silent
    free(log);
}

static void test_count_and_log_once_per_window(void **state)
{
    (void)state;
    ipl_drops_count(s_metrics, "truncated", "socket=pull bytes=%zu", (size_t)3);
    char *log = s_lines();
    const char *line = " level=warn svc=testsvc msg=frame_dropped reason=truncated socket=pull "
                       "bytes=3\n";
    assert_int_equal(strncmp(log, "ts=", 3), 0);
    assert_non_null(strstr(log, line));
    assert_string_equal(strstr(log, line), line); // one line, nothing after it
    free(log);
    // Within the window: counted, not logged, whichever caller and reason.
    ipl_drops_count(s_metrics, "truncated", NULL);
    ipl_drops_count(s_metrics, "unknown_type", "worker=%s", "w0");
    log = s_lines();
    assert_string_equal(log, "");
    free(log);
    assert_int_equal(s_value("truncated"), 2);
    assert_int_equal(s_value("unknown_type"), 1);
    assert_int_equal(s_value("multipart"), 0);
}

// A wrapper of the kind a service class writes (its own counter beside the family).
static int s_wrapped;
static void s_drop(const char *reason, const char *kv_fmt, ...)
{
    va_list args;
    va_start(args, kv_fmt);
    ipl_drops_vcount(s_metrics, reason, kv_fmt, args);
    va_end(args);
    s_wrapped++;
}

static void test_reason_is_escaped_and_wrappers_forward(void **state)
{
    (void)state;
    ipl_drops_count(s_metrics, "odd\"reason", NULL);
    s_drop("multipart", "parts=%d", 3);
    s_drop("multipart", NULL);
    char *text = ipl_metrics_render(s_metrics, NULL);
    assert_non_null(strstr(text, "inferplane_frames_dropped_total{reason=\"odd\\\"reason\"} 1\n"));
    assert_non_null(strstr(text, "inferplane_frames_dropped_total{reason=\"multipart\"} 2\n"));
    assert_int_equal(s_wrapped, 2);
    free(text);
    free(s_lines());
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_register_creates_zeros),
        cmocka_unit_test(test_count_and_log_once_per_window),
        cmocka_unit_test(test_reason_is_escaped_and_wrappers_forward),
    };
    return cmocka_run_group_tests(tests, s_setup, s_teardown);
}
