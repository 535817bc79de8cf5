/*
 * Unit tests of bench_client against a local thread server (bench_test_server.h): a stream
 * decoded and timed, the body and headers sent, HTTP errors and refused connections
 * reported, cancel_all ending transfers with a callback each.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <curl/curl.h>

#include "bench_client.h"
#include "bench_test_server.h"
#include "ipl_clock.h"

static s_server_t srv;

typedef struct {
    int calls;
    bench_xfer_info_t last;
    bench_stream_stats_t stats;
} s_seen_t;

static void s_done(void *arg, const bench_xfer_info_t *info)
{
    s_seen_t *s = arg;
    s->calls++;
    s->last = *info;
    s->stats = *bench_stream_stats(info->stream);
}

static bench_client_t *s_client(int port, s_seen_t *seen, double timeout)
{
    char url[64], err[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/", port); // a trailing slash is dropped
    bench_client_config_t cc = {url, BENCH_API_CHAT, "sk-test", timeout, 8};
    bench_client_t *c = bench_client_new(&cc, s_done, seen, err, sizeof err);
    assert_non_null(c);
    return c;
}

static void s_send(bench_client_t *c, const char *body, int user)
{
    char *b = strdup(body);
    assert_int_equal(bench_client_start(c, &b, strlen(body), true, true, (void *)(intptr_t)user),
                     0);
    assert_null(b); // ownership moved
}

static void s_wait(bench_client_t *c)
{
    uint64_t until = ipl_mono_ms() + 5000;
    while (bench_client_run(c, 20) > 0 && ipl_mono_ms() < until) {
    }
}

static void test_stream(void **state)
{
    (void)state;
    s_seen_t seen = {0};
    bench_client_t *c = s_client(srv.port, &seen, 5);
    atomic_store(&srv.mode, S_OK);
    s_send(c, "{\"hello\":1}", 7);
    assert_int_equal(bench_client_inflight(c), 1);
    s_wait(c);
    assert_int_equal(seen.calls, 1);
    assert_int_equal((intptr_t)seen.last.user, 7);
    assert_int_equal(seen.last.http_status, 200);
    assert_int_equal(seen.last.curl_code, 0);
    assert_true(seen.last.got_data);
    assert_false(seen.last.cancelled);
    assert_int_equal(seen.stats.iterations, 3);
    assert_true(seen.stats.done);
    assert_true(seen.last.start_ns < seen.stats.first_ns && seen.stats.last_ns <= seen.last.end_ns);
    pthread_mutex_lock(&srv.lock);
    assert_string_equal(srv.last_body, "{\"hello\":1}");
    pthread_mutex_unlock(&srv.lock);
    // The handle is reused for the next request.
    atomic_store(&srv.mode, S_HTTP_500);
    s_send(c, "{}", 8);
    s_wait(c);
    assert_int_equal(seen.calls, 2);
    assert_int_equal(seen.last.http_status, 500);
    assert_true(seen.stats.error);
    bench_client_destroy(&c);
    assert_null(c);
}

static void test_refused_and_cancelled(void **state)
{
    (void)state;
    s_seen_t seen = {0};
    // A port nobody listens on: a closed listener's.
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    bind(fd, (struct sockaddr *)&a, sizeof a);
    getsockname(fd, (struct sockaddr *)&a, &alen);
    close(fd);
    bench_client_t *c = s_client(ntohs(a.sin_port), &seen, 5);
    s_send(c, "{}", 1);
    s_wait(c);
    assert_int_equal(seen.calls, 1);
    assert_int_not_equal(seen.last.curl_code, 0);
    assert_false(seen.last.got_data);
    assert_int_equal(seen.last.http_status, 0);
    assert_true(strlen(seen.last.curl_error) > 0);
    bench_client_destroy(&c);

    seen = (s_seen_t){0};
    c = s_client(srv.port, &seen, 5);
    atomic_store(&srv.delay_ms, 200);
    atomic_store(&srv.mode, S_SLOW);
    s_send(c, "{}", 2);
    s_send(c, "{}", 3);
    bench_client_run(c, 20);
    bench_client_cancel_all(c);
    assert_int_equal(seen.calls, 2);
    assert_true(seen.last.cancelled);
    assert_int_equal(bench_client_inflight(c), 0);
    bench_client_destroy(&c);
    atomic_store(&srv.mode, S_OK);
    usleep(450000);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (s_server_start(&srv) != 0) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stream),
        cmocka_unit_test(test_refused_and_cancelled),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    s_server_stop(&srv);
    return rc;
}
