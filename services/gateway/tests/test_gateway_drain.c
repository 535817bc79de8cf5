/* Unit tests of gateway_drain: it waits for the requests in flight and returns as soon as they
 * are done, returns what is left at its timeout, stops waiting at another stop signal, and
 * answers requests that arrive while draining with 503 shutting_down (Anthropic's shape on
 * /v1/messages). A real ipl_httpd on an ephemeral loopback port, a slow handler in flight. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gateway_drain.h"
#include "ipl_clock.h"
#include "ipl_log.h"
#include "ipl_signal.h"

static void h_slow(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp)
{
    (void)arg;
    ipl_sleep_ms((uint64_t)atoi(ipl_http_req_query(req, "ms")));
    ipl_http_resp_set(resp, 200, "text/plain", "done", 4);
}

typedef struct {
    int port, ms, status;
    pthread_t thread;
} s_client_t;

static void *s_client(void *arg)
{
    s_client_t *c = arg;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)c->port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval tv = {.tv_sec = 10};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char req[128], resp[1024] = "";
    int n = snprintf(req, sizeof req, "GET /slow?ms=%d HTTP/1.1\r\nHost: x\r\n\r\n", c->ms);
    c->status = -1;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
        ipl_http_write_all(fd, req, (size_t)n) == 0 && recv(fd, resp, sizeof resp - 1, 0) > 12)
        c->status = atoi(resp + 9);
    close(fd);
    return NULL;
}

static ipl_httpd_t *s_server(void)
{
    ipl_httpd_t *srv = ipl_httpd_new("127.0.0.1:0", 0);
    assert_non_null(srv);
    ipl_httpd_route(srv, "GET", "/slow", h_slow, NULL);
    ipl_httpd_drain_handler(srv, gateway_drain_answer, NULL);
    assert_int_equal(ipl_httpd_start(srv), 0);
    return srv;
}

/* Starts a request of `ms` and waits until it is in flight. */
static void s_start(ipl_httpd_t *srv, s_client_t *c, int ms)
{
    c->port = ipl_httpd_port(srv);
    c->ms = ms;
    size_t before = ipl_httpd_inflight(srv);
    assert_int_equal(pthread_create(&c->thread, NULL, s_client, c), 0);
    uint64_t deadline = ipl_mono_ms() + 2000;
    while (ipl_httpd_inflight(srv) <= before && ipl_mono_ms() < deadline)
        ipl_sleep_ms(2);
    assert_true(ipl_httpd_inflight(srv) > before);
}

static void test_waits_for_what_is_in_flight(void **state)
{
    (void)state;
    ipl_httpd_t *srv = s_server();
    s_client_t c;
    s_start(srv, &c, 300);
    uint64_t t0 = ipl_mono_ms();
    assert_int_equal(gateway_drain(srv, 5000), 0);
    uint64_t took = ipl_mono_ms() - t0;
    assert_true(took >= 200 && took < 2000); /* as long as the request, not the timeout */
    pthread_join(c.thread, NULL);
    assert_int_equal(c.status, 200);
    ipl_httpd_destroy(&srv);
}

static void test_returns_what_is_left_at_the_timeout(void **state)
{
    (void)state;
    ipl_httpd_t *srv = s_server();
    s_client_t c;
    s_start(srv, &c, 1500);
    uint64_t t0 = ipl_mono_ms();
    assert_int_equal(gateway_drain(srv, 200), 1);
    uint64_t took = ipl_mono_ms() - t0;
    assert_true(took >= 190 && took < 1000);
    pthread_join(c.thread, NULL);
    ipl_httpd_destroy(&srv);
}

static void *s_second_signal(void *arg)
{
    (void)arg;
    ipl_sleep_ms(200);
    ipl_signal_request_stop();
    return NULL;
}

static void test_a_second_signal_stops_the_wait(void **state)
{
    (void)state;
    ipl_signal_reset();
    ipl_signal_request_stop(); /* the first: what began the drain */
    ipl_httpd_t *srv = s_server();
    s_client_t c;
    s_start(srv, &c, 1500);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, s_second_signal, NULL), 0);
    uint64_t t0 = ipl_mono_ms();
    assert_int_equal(gateway_drain(srv, 10000), 1);
    uint64_t took = ipl_mono_ms() - t0;
    assert_true(took >= 150 && took < 1000);
    pthread_join(t, NULL);
    pthread_join(c.thread, NULL);
    ipl_httpd_destroy(&srv);
    ipl_signal_reset();
}

static void test_nothing_in_flight_returns_at_once(void **state)
{
    (void)state;
    ipl_httpd_t *srv = s_server();
    uint64_t t0 = ipl_mono_ms();
    assert_int_equal(gateway_drain(srv, 10000), 0);
    assert_true(ipl_mono_ms() - t0 < 200);
    ipl_httpd_destroy(&srv);
}

static void test_drain_answer_shapes(void **state)
{
    (void)state;
    /* through a server that drains: a request whose head arrives after the drain began */
    const char *paths[] = {"/v1/chat/completions", "/v1/messages"};
    for (int i = 0; i < 2; i++) {
        ipl_httpd_t *srv = ipl_httpd_new("127.0.0.1:0", 0);
        ipl_httpd_route(srv, "POST", paths[i], h_slow, NULL);
        ipl_httpd_drain_handler(srv, gateway_drain_answer, NULL);
        assert_int_equal(ipl_httpd_start(srv), 0);
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET,
                                 .sin_port = htons((uint16_t)ipl_httpd_port(srv))};
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        struct timeval tv = {.tv_sec = 5};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
        char line[128];
        int n = snprintf(line, sizeof line, "POST %s HTTP/1.1\r\n", paths[i]);
        assert_int_equal(ipl_http_write_all(fd, line, (size_t)n), 0);
        uint64_t deadline = ipl_mono_ms() + 2000;
        while (ipl_httpd_inflight(srv) == 0 && ipl_mono_ms() < deadline)
            ipl_sleep_ms(2);
        ipl_httpd_drain(srv);
        const char *rest = "Host: x\r\nContent-Length: 2\r\n\r\n{}";
        assert_int_equal(ipl_http_write_all(fd, rest, strlen(rest)), 0);
        char resp[2048] = "";
        size_t len = 0;
        ssize_t got;
        while ((got = recv(fd, resp + len, sizeof resp - 1 - len, 0)) > 0)
            len += (size_t)got;
        resp[len] = '\0';
        close(fd);
        assert_int_equal(atoi(resp + 9), 503);
        const char *body = strstr(resp, "\r\n\r\n");
        assert_non_null(body);
        cJSON *root = cJSON_Parse(body + 4);
        assert_non_null(root);
        if (i == 0) {
            cJSON *err = cJSON_GetObjectItem(root, "error");
            assert_string_equal(cJSON_GetObjectItem(err, "code")->valuestring, "shutting_down");
            assert_string_equal(cJSON_GetObjectItem(err, "type")->valuestring, "server_error");
        } else {
            assert_string_equal(cJSON_GetObjectItem(root, "type")->valuestring, "error");
            cJSON *err = cJSON_GetObjectItem(root, "error");
            assert_non_null(
                strstr(cJSON_GetObjectItem(err, "message")->valuestring, "shutting down"));
        }
        cJSON_Delete(root);
        ipl_httpd_destroy(&srv);
    }
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    ipl_log_set_level(IPL_LOG_OFF);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_waits_for_what_is_in_flight),
        cmocka_unit_test(test_returns_what_is_left_at_the_timeout),
        cmocka_unit_test(test_a_second_signal_stops_the_wait),
        cmocka_unit_test(test_nothing_in_flight_returns_at_once),
        cmocka_unit_test(test_drain_answer_shapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
