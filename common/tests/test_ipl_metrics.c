/*
 * Unit tests of ipl_metrics: the exact exposition text of a small registry, get-or-create
 * identity, number formatting, lock-free updates from two threads summing exactly, collect
 * callbacks, the process_* series, label escaping and the programmer-error aborts.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <regex.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ipl_metrics.h"

static void s_expect_render(ipl_metrics_t *m, const char *expected)
{
    size_t len = 0;
    char *text = ipl_metrics_render(m, &len);
    assert_non_null(text);
    assert_string_equal(text, expected);
    assert_int_equal(len, strlen(expected));
    free(text);
}

static void test_render_small_registry(void **state)
{
    (void)state;
    ipl_metrics_t *m = ipl_metrics_new();
    ipl_metric_t *frames =
        ipl_metrics_counter(m, "inferplane_frames_total", "Frames received.", NULL);
    ipl_metric_t *trunc = ipl_metrics_counter(m, "inferplane_frames_dropped_total",
                                              "Frames dropped by reason.", "reason=\"truncated\"");
    ipl_metric_t *type = ipl_metrics_counter(m, "inferplane_frames_dropped_total", "ignored",
                                             "reason=\"wrong_type\"");
    ipl_metric_t *queue = ipl_metrics_gauge(
        m, "inferplane_queue_depth", "Queued requests.\nPer worker \\ model.", "worker=\"w0\"");
    static const double bounds[] = {0.25, 1, 2.5};
    ipl_metric_t *lat = ipl_metrics_histogram(m, "inferplane_latency_seconds", "Latency.",
                                              "model=\"m\",route=\"r\"", bounds, 3);
    ipl_metric_t *bare =
        ipl_metrics_histogram(m, "inferplane_size_bytes", "Sizes.", NULL, bounds, 1);
    for (int i = 0; i < 3; i++)
        ipl_metric_inc(frames);
    ipl_metric_add(trunc, 2);
    ipl_metric_inc(type);
    ipl_metric_set(queue, -1.5);
    ipl_metric_observe(lat, 0.25); // le is inclusive: lands in 0.25
    ipl_metric_observe(lat, 0.125);
    ipl_metric_observe(lat, 2);
    ipl_metric_observe(lat, 5); // only +Inf
    ipl_metric_observe(bare, 1);

    s_expect_render(m, "# HELP inferplane_frames_total Frames received.\n"
                       "# TYPE inferplane_frames_total counter\n"
                       "inferplane_frames_total 3\n"
                       "# HELP inferplane_frames_dropped_total Frames dropped by reason.\n"
                       "# TYPE inferplane_frames_dropped_total counter\n"
                       "inferplane_frames_dropped_total{reason=\"truncated\"} 2\n"
                       "inferplane_frames_dropped_total{reason=\"wrong_type\"} 1\n"
                       "# HELP inferplane_queue_depth Queued requests.\\nPer worker \\\\ model.\n"
                       "# TYPE inferplane_queue_depth gauge\n"
                       "inferplane_queue_depth{worker=\"w0\"} -1.5\n"
                       "# HELP inferplane_latency_seconds Latency.\n"
                       "# TYPE inferplane_latency_seconds histogram\n"
                       "inferplane_latency_seconds_bucket{model=\"m\",route=\"r\",le=\"0.25\"} 2\n"
                       "inferplane_latency_seconds_bucket{model=\"m\",route=\"r\",le=\"1\"} 2\n"
                       "inferplane_latency_seconds_bucket{model=\"m\",route=\"r\",le=\"2.5\"} 3\n"
                       "inferplane_latency_seconds_bucket{model=\"m\",route=\"r\",le=\"+Inf\"} 4\n"
                       "inferplane_latency_seconds_sum{model=\"m\",route=\"r\"} 7.375\n"
                       "inferplane_latency_seconds_count{model=\"m\",route=\"r\"} 4\n"
                       "# HELP inferplane_size_bytes Sizes.\n"
                       "# TYPE inferplane_size_bytes histogram\n"
                       "inferplane_size_bytes_bucket{le=\"0.25\"} 0\n"
                       "inferplane_size_bytes_bucket{le=\"+Inf\"} 1\n"
                       "inferplane_size_bytes_sum 1\n"
                       "inferplane_size_bytes_count 1\n");
    assert_true(ipl_metric_value(lat) == 4);
    assert_true(ipl_metric_sum(lat) == 7.375);
    assert_true(ipl_metric_sum(frames) == 0);
    ipl_metrics_destroy(&m);
    assert_null(m);
}

static void test_empty_registry(void **state)
{
    (void)state;
    ipl_metrics_t *m = ipl_metrics_new();
    s_expect_render(m, "");
    ipl_metrics_destroy(&m);
    ipl_metrics_destroy(&m); // NULL-safe
}

static void test_get_or_create(void **state)
{
    (void)state;
    ipl_metrics_t *m = ipl_metrics_new();
    ipl_metric_t *a = ipl_metrics_counter(m, "x_total", "X.", "k=\"1\"");
    assert_ptr_equal(ipl_metrics_counter(m, "x_total", "X.", "k=\"1\""), a);
    assert_ptr_not_equal(ipl_metrics_counter(m, "x_total", "X.", "k=\"2\""), a);
    ipl_metric_t *none = ipl_metrics_counter(m, "x_total", "X.", NULL);
    assert_ptr_equal(ipl_metrics_counter(m, "x_total", "X.", ""), none);
    static const double bounds[] = {1, 2};
    ipl_metric_t *h = ipl_metrics_histogram(m, "h_seconds", "H.", NULL, bounds, 2);
    double copy[] = {1, 2};
    assert_ptr_equal(ipl_metrics_histogram(m, "h_seconds", "H.", NULL, copy, 2), h);
    ipl_metrics_destroy(&m);
}

static void test_values_and_formatting(void **state)
{
    (void)state;
    ipl_metrics_t *m = ipl_metrics_new();
    ipl_metric_t *c = ipl_metrics_counter(m, "c_total", "C.", NULL);
    ipl_metric_add(c, 0.1);
    ipl_metric_add(c, -5);  // ignored: counters never go down
    ipl_metric_add(c, NAN); // ignored
    assert_true(ipl_metric_value(c) == 0.1);
    ipl_metric_t *g = ipl_metrics_gauge(m, "g", "G.", "v=\"a\"");
    ipl_metric_t *g2 = ipl_metrics_gauge(m, "g", "G.", "v=\"b\"");
    ipl_metric_t *g3 = ipl_metrics_gauge(m, "g", "G.", "v=\"c\"");
    ipl_metric_t *g4 = ipl_metrics_gauge(m, "g", "G.", "v=\"d\"");
    ipl_metric_t *g5 = ipl_metrics_gauge(m, "g", "G.", "v=\"e\"");
    ipl_metric_set(g, 1e21);
    ipl_metric_set(g2, INFINITY);
    ipl_metric_set(g3, -INFINITY);
    ipl_metric_set(g4, NAN);
    ipl_metric_set(g5, 10);
    ipl_metric_add(g5, -12.5); // gauges may go down
    ipl_metric_inc(g5);
    assert_true(ipl_metric_value(g5) == -1.5);
    s_expect_render(m, "# HELP c_total C.\n"
                       "# TYPE c_total counter\n"
                       "c_total 0.1\n"
                       "# HELP g G.\n"
                       "# TYPE g gauge\n"
                       "g{v=\"a\"} 1e+21\n"
                       "g{v=\"b\"} +Inf\n"
                       "g{v=\"c\"} -Inf\n"
                       "g{v=\"d\"} NaN\n"
                       "g{v=\"e\"} -1.5\n");
    // 0.1 + 0.2 is not 0.3 in binary: the text must read back as exactly the stored double.
    ipl_metric_set(g5, 0.1 + 0.2);
    size_t len;
    char *text = ipl_metrics_render(m, &len);
    const char *line = strstr(text, "g{v=\"e\"} ");
    assert_non_null(line);
    assert_true(strtod(line + strlen("g{v=\"e\"} "), NULL) == 0.1 + 0.2);
    free(text);
    ipl_metrics_destroy(&m);
}

#define S_ITERATIONS 200000

typedef struct {
    ipl_metric_t *counter, *gauge, *histogram;
} s_targets_t;

static void *s_hammer(void *arg)
{
    s_targets_t *t = arg;
    for (int i = 0; i < S_ITERATIONS; i++) {
        ipl_metric_inc(t->counter);
        ipl_metric_add(t->gauge, 0.5);
        ipl_metric_observe(t->histogram, (double)(i % 4));
    }
    return NULL;
}

static void test_concurrent_updates_sum_exactly(void **state)
{
    (void)state;
    ipl_metrics_t *m = ipl_metrics_new();
    static const double bounds[] = {0.5, 1.5, 2.5};
    s_targets_t t = {
        .counter = ipl_metrics_counter(m, "n_total", "N.", NULL),
        .gauge = ipl_metrics_gauge(m, "half", "Half.", NULL),
        .histogram = ipl_metrics_histogram(m, "obs", "Obs.", NULL, bounds, 3),
    };
    pthread_t threads[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&threads[i], NULL, s_hammer, &t), 0);
    // Render while the writers run: it must not block them or crash.
    for (int i = 0; i < 5; i++)
        free(ipl_metrics_render(m, NULL));
    for (int i = 0; i < 2; i++)
        pthread_join(threads[i], NULL);
    assert_true(ipl_metric_value(t.counter) == 2.0 * S_ITERATIONS);
    assert_true(ipl_metric_value(t.gauge) == 0.5 * 2 * S_ITERATIONS);
    assert_true(ipl_metric_value(t.histogram) == 2.0 * S_ITERATIONS);
    // Each thread observes 0,1,2,3 equally: sum = 2 * (S/4) * 6.
    assert_true(ipl_metric_sum(t.histogram) == 2.0 * (S_ITERATIONS / 4) * 6);
    char *text = ipl_metrics_render(m, NULL);
    char expected[256];
    snprintf(expected, sizeof expected,
             "obs_bucket{le=\"0.5\"} %d\nobs_bucket{le=\"1.5\"} %d\nobs_bucket{le=\"2.5\"} %d\n"
             "obs_bucket{le=\"+Inf\"} %d\n",
             S_ITERATIONS / 2, S_ITERATIONS, 3 * S_ITERATIONS / 2, 2 * S_ITERATIONS);
    assert_non_null(strstr(text, expected));
    snprintf(expected, sizeof expected, "n_total %d\n", 2 * S_ITERATIONS);
    assert_non_null(strstr(text, expected));
    free(text);
    ipl_metrics_destroy(&m);
}

typedef struct {
    int calls;
    ipl_metric_t *depth;
} s_collect_state_t;

static void s_collect(void *arg, ipl_metrics_t *metrics)
{
    s_collect_state_t *st = arg;
    st->calls++;
    // Registering from inside a collector must not deadlock.
    ipl_metric_set(ipl_metrics_gauge(metrics, "depth", "Depth.", NULL), st->calls * 10);
}

static void test_collect_callback(void **state)
{
    (void)state;
    ipl_metrics_t *m = ipl_metrics_new();
    s_collect_state_t st = {0};
    ipl_metrics_on_collect(m, s_collect, &st);
    s_expect_render(m, "# HELP depth Depth.\n# TYPE depth gauge\ndepth 10\n");
    s_expect_render(m, "# HELP depth Depth.\n# TYPE depth gauge\ndepth 20\n");
    assert_int_equal(st.calls, 2);
    ipl_metrics_destroy(&m);
}

static double s_sample(const char *text, const char *name)
{
    char key[128];
    snprintf(key, sizeof key, "\n%s ", name);
    const char *at = strstr(text, key);
    assert_non_null(at);
    return strtod(at + strlen(key), NULL);
}

static void test_process_metrics(void **state)
{
    (void)state;
    ipl_metrics_t *m = ipl_metrics_new();
    ipl_metrics_add_process(m, "gate\"way");
    // Burn a little CPU so the counter is visibly positive.
    volatile double x = 0;
    for (long i = 0; i < 30000000 && clock() < CLOCKS_PER_SEC / 20; i++)
        x += (double)i;
    char *text = ipl_metrics_render(m, NULL);
    assert_true(s_sample(text, "process_resident_memory_bytes") > 1024 * 1024);
    assert_true(s_sample(text, "process_open_fds") >= 3);
    assert_true(s_sample(text, "process_threads") >= 1);
    double start = s_sample(text, "process_start_time_seconds");
    double now = (double)time(NULL);
    assert_true(start <= now + 1 && start > now - 3600);
    double cpu = s_sample(text, "process_cpu_seconds_total");
    assert_true(cpu >= 0 && cpu < 3600);
    assert_non_null(strstr(text, "# TYPE process_cpu_seconds_total counter\n"));
    assert_non_null(strstr(text, "# TYPE process_open_fds gauge\n"));
    regex_t re;
    assert_int_equal(regcomp(&re,
                             "\ninferplane_build_info\\{service=\"gate\\\\\"way\","
                             "version=\"[^\"]+\"\\} 1\n",
                             REG_EXTENDED | REG_NOSUB),
                     0);
    assert_int_equal(regexec(&re, text, 0, NULL, 0), 0);
    regfree(&re);
    free(text);
    ipl_metrics_destroy(&m);
}

static void test_escape(void **state)
{
    (void)state;
    char buf[64];
    assert_string_equal(ipl_metrics_escape(buf, sizeof buf, "plain"), "plain");
    assert_string_equal(ipl_metrics_escape(buf, sizeof buf, "a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    assert_string_equal(ipl_metrics_escape(buf, sizeof buf, ""), "");
    assert_string_equal(ipl_metrics_escape(buf, sizeof buf, NULL), "");
    char small[4];
    assert_string_equal(ipl_metrics_escape(small, sizeof small, "abcdef"), "abc");
    assert_string_equal(ipl_metrics_escape(small, sizeof small, "ab\"c"), "ab"); // no half escape
    char one[1] = {'x'};
    assert_string_equal(ipl_metrics_escape(one, sizeof one, "abc"), "");
    /* not UTF-8: each bad byte becomes U+FFFD; valid characters pass, and are never cut */
    assert_string_equal(ipl_metrics_escape(buf, sizeof buf, "a\xff\xc3(b"),
                        "a\xEF\xBF\xBD\xEF\xBF\xBD(b");
    assert_string_equal(ipl_metrics_escape(buf, sizeof buf, "\xed\xa0\x80"), /* a surrogate */
                        "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
    assert_string_equal(ipl_metrics_escape(buf, sizeof buf, "caf\xc3\xa9 \xf0\x9f\x98\x80"),
                        "caf\xc3\xa9 \xf0\x9f\x98\x80");
    char four[4];
    assert_string_equal(ipl_metrics_escape(four, sizeof four, "ab\xc3\xa9"), "ab"); /* no half é */
}

// Runs `fn` in a child process and checks that it aborts.
static void s_expect_abort(void (*fn)(void))
{
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        fclose(stderr); // the abort message is expected
        fn();
        _exit(0);
    }
    int status;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
}

static void s_type_clash(void)
{
    ipl_metrics_t *m = ipl_metrics_new();
    ipl_metrics_counter(m, "clash", "C.", NULL);
    ipl_metrics_gauge(m, "clash", "C.", "x=\"1\"");
}

static void s_bucket_clash(void)
{
    ipl_metrics_t *m = ipl_metrics_new();
    static const double a[] = {1, 2}, b[] = {1, 3};
    ipl_metrics_histogram(m, "h", "H.", NULL, a, 2);
    ipl_metrics_histogram(m, "h", "H.", "x=\"1\"", b, 2);
}

static void s_unsorted_buckets(void)
{
    ipl_metrics_t *m = ipl_metrics_new();
    static const double a[] = {2, 1};
    ipl_metrics_histogram(m, "h", "H.", NULL, a, 2);
}

static void s_bad_name(void)
{
    ipl_metrics_t *m = ipl_metrics_new();
    ipl_metrics_counter(m, "bad-name", "B.", NULL);
}

static void test_programmer_errors_abort(void **state)
{
    (void)state;
    s_expect_abort(s_type_clash);
    s_expect_abort(s_bucket_clash);
    s_expect_abort(s_unsorted_buckets);
    s_expect_abort(s_bad_name);
}

static void test_vllm_buckets(void **state)
{
    /* the counts and ends of vLLM's lists (vllm-project/vllm: vllm/v1/metrics/loggers.py),
     * strictly increasing */
    (void)state;
    assert_int_equal(ipl_metrics_vllm_ttft_nbuckets, 22);
    assert_true(ipl_metrics_vllm_ttft_buckets[0] == 0.001 &&
                ipl_metrics_vllm_ttft_buckets[21] == 2560.0);
    assert_int_equal(ipl_metrics_vllm_itl_nbuckets, 19);
    assert_true(ipl_metrics_vllm_itl_buckets[0] == 0.01 && ipl_metrics_vllm_itl_buckets[18] == 80.0);
    assert_int_equal(ipl_metrics_vllm_e2e_nbuckets, 21);
    assert_true(ipl_metrics_vllm_e2e_buckets[0] == 0.3 &&
                ipl_metrics_vllm_e2e_buckets[20] == 7680.0);
    const double *lists[] = {ipl_metrics_vllm_ttft_buckets, ipl_metrics_vllm_itl_buckets,
                             ipl_metrics_vllm_e2e_buckets};
    size_t ns[] = {ipl_metrics_vllm_ttft_nbuckets, ipl_metrics_vllm_itl_nbuckets,
                   ipl_metrics_vllm_e2e_nbuckets};
    for (size_t l = 0; l < 3; l++)
        for (size_t i = 1; i < ns[l]; i++) assert_true(lists[l][i - 1] < lists[l][i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vllm_buckets),
        cmocka_unit_test(test_render_small_registry),
        cmocka_unit_test(test_empty_registry),
        cmocka_unit_test(test_get_or_create),
        cmocka_unit_test(test_values_and_formatting),
        cmocka_unit_test(test_concurrent_updates_sum_exactly),
        cmocka_unit_test(test_collect_callback),
        cmocka_unit_test(test_process_metrics),
        cmocka_unit_test(test_escape),
        cmocka_unit_test(test_programmer_errors_abort),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
