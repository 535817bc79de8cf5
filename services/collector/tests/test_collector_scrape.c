/*
 * Unit tests for collector_scrape: parsing vLLM /metrics pages, restart evidence between two
 * samples, and real non-blocking scrapes against an ipl_httpd server on an ephemeral loopback
 * port (ok, HTTP error, refused).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "collector_scrape.h"
#include "ipl_clock.h"
#include "ipl_error.h"
#include "ipl_httpd.h"
#include "ipl_log.h"

static const char s_page[] =
    "# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
    "# TYPE vllm:num_requests_running gauge\n"
    "vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 3.0\n"
    "vllm:num_requests_running{engine=\"1\",model_name=\"m\"} 2.0\n"
    "vllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} 4.0\n"
    "vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"m\"} 0.25\n"
    "vllm:kv_cache_usage_perc{engine=\"1\",model_name=\"m\"} 0.5\n"
    "vllm:prefix_cache_queries_total{engine=\"0\",model_name=\"m\"} 51200.0\n"
    "vllm:cache_config_info{block_size=\"32\",cache_dtype=\"auto\",engine=\"0\","
    "num_gpu_blocks=\"27033\",prefix_caching_hash_algo=\"sha256\"} 1.0\n";

static void test_parse(void **state)
{
    (void)state;
    collector_sample_t s;
    assert_int_equal(collector_scrape_parse(s_page, strlen(s_page), &s), 0);
    assert_true(s.running == 5.0); /* summed over engines */
    assert_true(s.waiting == 4.0);
    assert_true(s.kv_usage == 0.5); /* the fullest engine */
    assert_int_equal(s.block_size, 32);
    assert_int_equal(s.num_blocks, 27033);
    assert_true(s.has_running);
    /* the pre-0.12 gauge is used when the new one is missing */
    const char *old = "vllm:gpu_cache_usage_perc 0.75\nvllm:num_requests_running 1\n";
    assert_int_equal(collector_scrape_parse(old, strlen(old), &s), 0);
    assert_true(s.kv_usage == 0.75);
    assert_int_equal(s.block_size, 0);
    /* not a vLLM page */
    const char *other = "up 1\nhttp_requests_total{code=\"200\"} 5\n";
    assert_int_equal(collector_scrape_parse(other, strlen(other), &s), IPL_E_NOTFOUND);
    assert_int_equal(collector_scrape_parse(NULL, 0, &s), IPL_E_NOTFOUND);
    const char *junk = "vllm:num_requests_running{{{ nope\n\x01\x02\n";
    collector_scrape_parse(junk, strlen(junk), &s); /* must not crash */
}

static void test_restart_evidence(void **state)
{
    (void)state;
    collector_sample_t a, b;
    const char *p1 = "vllm:num_requests_running 0\nprocess_start_time_seconds 1700000000.5\n"
                     "vllm:prompt_tokens_total{engine=\"0\"} 100\n"
                     "vllm:prompt_tokens_total{engine=\"1\"} 50\n"
                     "vllm:generation_tokens_total 70\n";
    assert_int_equal(collector_scrape_parse(p1, strlen(p1), &a), 0);
    assert_true(a.start_time == 1700000000.5);
    assert_true(a.counters[0] == 150.0); /* summed over engines */
    assert_true(a.counters[1] == 70.0);
    assert_true(a.counters[2] < 0); /* absent */
    assert_false(collector_sample_restarted(&a, &a));
    /* counters grew: same process */
    const char *p2 = "vllm:num_requests_running 0\nprocess_start_time_seconds 1700000000.5\n"
                     "vllm:prompt_tokens_total 400\nvllm:generation_tokens_total 90\n"
                     "vllm:prefix_cache_queries_total 3\n";
    assert_int_equal(collector_scrape_parse(p2, strlen(p2), &b), 0);
    assert_false(collector_sample_restarted(&a, &b));
    /* a counter went down */
    const char *p3 = "vllm:num_requests_running 0\nvllm:prompt_tokens_total 400\n"
                     "vllm:generation_tokens_total 10\n";
    assert_int_equal(collector_scrape_parse(p3, strlen(p3), &a), 0);
    assert_true(collector_sample_restarted(&b, &a));
    /* a new start time, counters not comparable */
    const char *p4 = "vllm:num_requests_running 0\nprocess_start_time_seconds 1700000100\n";
    assert_int_equal(collector_scrape_parse(p4, strlen(p4), &a), 0);
    assert_true(collector_sample_restarted(&b, &a));
    /* no evidence at all either way */
    const char *p5 = "vllm:num_requests_running 0\n";
    assert_int_equal(collector_scrape_parse(p5, strlen(p5), &a), 0);
    assert_false(collector_sample_restarted(&b, &a));
    assert_false(collector_sample_restarted(&a, &b));
}

static void s_metrics_page(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp)
{
    (void)arg;
    (void)req;
    ipl_http_resp_set(resp, 200, "text/plain; version=0.0.4", s_page, strlen(s_page));
}

typedef struct {
    int done;
    size_t target;
    bool ok;
    collector_sample_t sample;
    char error[256];
} s_result_t;

static void s_on_result(void *arg, size_t target, const collector_sample_t *sample,
                        const char *error)
{
    s_result_t *r = arg;
    r->done++;
    r->target = target;
    r->ok = sample != NULL;
    if (sample) r->sample = *sample;
    snprintf(r->error, sizeof r->error, "%s", error ? error : "");
}

/* Runs the poll loop until a result arrives or 5 s pass. */
static void s_run(collector_scrape_t *sc, s_result_t *r)
{
    uint64_t until = ipl_mono_ms() + 5000;
    while (!r->done && ipl_mono_ms() < until) {
        zmq_pollitem_t items[16];
        size_t n = collector_scrape_pollitems(sc, items, 16);
        long t = collector_scrape_timeout(sc);
        if (t < 0 || t > 50) t = 50;
        zmq_poll(items, (int)n, t);
        collector_scrape_dispatch(sc, items, n);
    }
}

static void test_scrape_real_server(void **state)
{
    (void)state;
    ipl_log_init("test", IPL_LOG_OFF);
    ipl_httpd_t *httpd = ipl_httpd_new("127.0.0.1:0", 0);
    assert_non_null(httpd);
    ipl_httpd_route(httpd, "GET", "/metrics", s_metrics_page, NULL);
    assert_int_equal(ipl_httpd_start(httpd), 0);
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/metrics", ipl_httpd_port(httpd));

    s_result_t r = {0};
    collector_scrape_t *sc = collector_scrape_new(s_on_result, &r, 2000);
    assert_non_null(sc);
    assert_int_equal(collector_scrape_start(sc, 7, url), 0);
    assert_true(collector_scrape_busy(sc, 7));
    assert_int_equal(collector_scrape_start(sc, 7, url), IPL_E_AGAIN);
    s_run(sc, &r);
    assert_int_equal(r.done, 1);
    assert_int_equal(r.target, 7);
    assert_true(r.ok);
    assert_int_equal(r.sample.num_blocks, 27033);
    assert_false(collector_scrape_busy(sc, 7));

    /* a 404 is a failed scrape */
    r = (s_result_t){0};
    snprintf(url, sizeof url, "http://127.0.0.1:%d/nope", ipl_httpd_port(httpd));
    assert_int_equal(collector_scrape_start(sc, 8, url), 0);
    s_run(sc, &r);
    assert_int_equal(r.done, 1);
    assert_false(r.ok);
    assert_non_null(strstr(r.error, "404"));

    /* a cancelled transfer never calls back */
    r = (s_result_t){0};
    assert_int_equal(collector_scrape_start(sc, 9, url), 0);
    collector_scrape_cancel(sc, 9);
    assert_false(collector_scrape_busy(sc, 9));

    ipl_httpd_destroy(&httpd);

    /* nobody listening any more: refused */
    r = (s_result_t){0};
    assert_int_equal(collector_scrape_start(sc, 10, url), 0);
    s_run(sc, &r);
    assert_int_equal(r.done, 1);
    assert_false(r.ok);
    assert_true(strlen(r.error) > 0);

    /* destroying with a transfer in flight is clean */
    assert_int_equal(collector_scrape_start(sc, 11, url), 0);
    collector_scrape_destroy(&sc);
    assert_null(sc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_restart_evidence),
        cmocka_unit_test(test_scrape_real_server),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
