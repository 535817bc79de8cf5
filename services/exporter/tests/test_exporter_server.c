/*
 * Unit tests of exporter_server: a RECORD pushed to the PULL socket (bound on an ephemeral
 * 127.0.0.1 port) lands in the series while the loop runs; a multipart message and a frame
 * that is not a RECORD are dropped and counted, and the loop keeps going; a bind error names
 * the endpoint and where it came from.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <pthread.h>
#include <unistd.h>
#include <zmq.h>

#include "exporter_server.h"
#include "ipl_proto.h"
#include "ipl_signal.h"

static void *s_run(void *arg)
{
    exporter_server_run(arg);
    return NULL;
}

/* Waits (5 s at most) until the series counted `records` records and `dropped` drops. */
static bool s_wait(exporter_series_t *series, uint64_t records, uint64_t dropped)
{
    for (int i = 0; i < 500; i++) {
        if (exporter_series_records(series) >= records &&
            exporter_series_dropped(series) >= dropped)
            return true;
        usleep(10000);
    }
    return false;
}

static double s_counter(ipl_metrics_t *m, const char *name, const char *labels)
{
    return ipl_metric_value(ipl_metrics_counter(m, name, "", labels));
}

static void test_pushed_records_reach_the_series(void **state)
{
    (void)state;
    ipl_metrics_t *metrics = ipl_metrics_new();
    exporter_server_config_t c = {.pull = "tcp://127.0.0.1:*", .pull_source = "flag"};
    char err[256] = "";
    exporter_server_t *server = exporter_server_new(&c, metrics, err, sizeof err);
    assert_non_null(server);
    const char *ep = exporter_server_endpoint(server);
    assert_non_null(ep);
    assert_non_null(strstr(ep, "tcp://127.0.0.1:"));
    assert_null(strstr(ep, ":*"));
    exporter_series_t *series = exporter_server_series(server);
    ipl_signal_reset();
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, s_run, server), 0);

    void *ctx = zmq_ctx_new();
    void *push = zmq_socket(ctx, ZMQ_PUSH);
    int linger = 1000;
    zmq_setsockopt(push, ZMQ_LINGER, &linger, sizeof linger);
    assert_int_equal(zmq_connect(push, ep), 0);
    ipl_record_t r = {.request_id = "req-1",
                      .model = "m",
                      .tenant = "t",
                      .pool = "p",
                      .worker = "w0",
                      .endpoint = "http://w0",
                      .api = "chat",
                      .status_code = 200,
                      .reason = "cache_hit",
                      .ttft_s = 0.3,
                      .e2e_s = 1.0,
                      .prompt_tokens = 32,
                      .cached_tokens = 16,
                      .completion_tokens = 4};
    assert_int_equal(ipl_msg_send(push, IPL_MSG_RECORD, &r, 0), 0);
    assert_true(s_wait(series, 1, 0));
    /* A multipart message (even of RECORDs) and a frame that is no message are dropped. */
    assert_int_equal(zmq_send(push, "a", 1, ZMQ_SNDMORE), 1);
    assert_int_equal(zmq_send(push, "b", 1, 0), 1);
    assert_int_equal(zmq_send(push, "\xc1", 1, 0), 1);
    /* The loop keeps going: a second record still counts. */
    assert_int_equal(ipl_msg_send(push, IPL_MSG_RECORD, &r, 0), 0);
    assert_true(s_wait(series, 2, 2));
    assert_int_equal(exporter_series_records(series), 2);
    assert_int_equal(exporter_series_dropped(series), 2);
    assert_true(s_counter(metrics, "inferplane_requests_total",
                          "model=\"m\",tenant=\"t\",pool=\"p\",endpoint=\"http://w0\","
                          "status_code=\"200\"") == 2);
    assert_true(s_counter(metrics, "inferplane_frames_dropped_total", "reason=\"multipart\"") == 1);

    ipl_signal_request_stop();
    pthread_join(t, NULL);
    ipl_signal_reset();
    zmq_close(push);
    zmq_ctx_term(ctx);
    exporter_server_destroy(&server);
    assert_null(server);
    exporter_server_destroy(&server); /* NULL: nothing */
    ipl_metrics_destroy(&metrics);
}

static void test_bind_errors_name_the_endpoint(void **state)
{
    (void)state;
    ipl_metrics_t *metrics = ipl_metrics_new();
    exporter_server_config_t c = {.pull = "bogus://nowhere", .pull_source = "env"};
    char err[256] = "";
    assert_null(exporter_server_new(&c, metrics, err, sizeof err));
    assert_non_null(strstr(err, "cannot bind --pull \"bogus://nowhere\" (from env): "));
    assert_non_null(strstr(err, "; use a free tcp://host:port"));
    ipl_metrics_destroy(&metrics);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pushed_records_reach_the_series),
        cmocka_unit_test(test_bind_errors_name_the_endpoint),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
