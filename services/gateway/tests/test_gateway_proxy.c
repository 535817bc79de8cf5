/* Unit tests of gateway_proxy's stream idle timeout: an upstream that goes quiet after its
 * first bytes is cut after stream_idle_timeout_ms (result.idle_timeout, counted as
 * kind="stream_idle"), one that pauses for less goes on, and without the timeout a long pause
 * is waited out. The upstream is an ipl_httpd whose producer thread writes two events, pauses,
 * and writes the last; the gateway side is another ipl_httpd whose handler proxies to it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway_proxy.h"
#include "ipl_clock.h"
#include "ipl_httpd.h"
#include "ipl_log.h"
#include "ipl_metrics.h"
#include "tests/ipl_test_http.h"

/* ---- the upstream: two events, a pause of ?pause= ms, the last event ------------------------- */

typedef struct {
    int fd, pause_ms;
} s_producer_t;

static void *s_produce(void *arg)
{
    s_producer_t *p = arg;
    if (ipl_http_write_all(p->fd, "data: one\n\ndata: two\n\n", 22) == 0) {
        ipl_sleep_ms((uint64_t)p->pause_ms);
        (void)ipl_http_write_all(p->fd, "data: three\n\ndata: [DONE]\n\n", 28);
    }
    close(p->fd);
    free(p);
    return NULL;
}

static void h_upstream(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp)
{
    int *pause_ms = arg;
    (void)req;
    s_producer_t *p = calloc(1, sizeof *p);
    assert_non_null(p);
    p->pause_ms = *pause_ms;
    p->fd = ipl_http_resp_stream(resp, 200, "text/event-stream");
    assert_true(p->fd >= 0);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, s_produce, p), 0);
    pthread_detach(t);
}

/* ---- the gateway side --------------------------------------------------------------------------
 */

typedef struct {
    gateway_proxy_t *proxy;
    char url[128];
    gateway_xfer_result_t result;
    atomic_int done;
} s_fixture_t;

static void s_on_done(void *arg, const gateway_xfer_result_t *res, int fd)
{
    (void)fd;
    s_fixture_t *f = arg;
    f->result = *res;
    atomic_store(&f->done, 1);
}

static void h_proxy(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp)
{
    (void)req;
    s_fixture_t *f = arg;
    char *body = strdup("{}");
    gateway_xfer_cb_t cb = {.on_done = s_on_done, .arg = f};
    gateway_xfer_t *x = NULL;
    assert_int_equal(gateway_proxy_start(f->proxy, f->url, &body, 2, NULL, &cb, &x), 0);
    int status = 0;
    char ctype[128];
    assert_int_equal(gateway_xfer_wait_headers(x, 5000, &status, ctype, sizeof ctype, NULL, 0), 0);
    assert_int_equal(gateway_xfer_wait_body(x, 5000, NULL, 0), 0);
    int fd = ipl_http_resp_stream(resp, status, ctype);
    assert_true(fd >= 0);
    gateway_xfer_attach_to(&x, resp, fd);
}

/* One proxied stream: the upstream pauses pause_ms, the proxy cuts after idle_ms (0: never).
 * Returns the body the client got; f->result says how the transfer ended. */
static char *s_run(int idle_ms, int pause_ms, s_fixture_t *f, ipl_metrics_t *m)
{
    static int pause;
    pause = pause_ms;
    ipl_httpd_t *up = ipl_httpd_new("127.0.0.1:0", 0);
    ipl_httpd_route(up, "POST", "/up", h_upstream, &pause);
    assert_int_equal(ipl_httpd_start(up), 0);
    memset(f, 0, sizeof *f);
    snprintf(f->url, sizeof f->url, "http://127.0.0.1:%d/up", ipl_httpd_port(up));
    gateway_proxy_config_t pc = {.stream_idle_timeout_ms = idle_ms};
    f->proxy = gateway_proxy_new(&pc, m);
    assert_non_null(f->proxy);
    ipl_httpd_t *gw = ipl_httpd_new("127.0.0.1:0", 0);
    ipl_httpd_route(gw, "GET", "/s", h_proxy, f);
    assert_int_equal(ipl_httpd_start(gw), 0);
    s_reply_t r = {0};
    (void)s_http(ipl_httpd_port(gw), "GET", "/s", NULL, &r);
    uint64_t deadline = ipl_mono_ms() + 5000;
    while (!atomic_load(&f->done) && ipl_mono_ms() < deadline)
        ipl_sleep_ms(5);
    assert_true(atomic_load(&f->done));
    ipl_httpd_destroy(&gw);
    gateway_proxy_stop(f->proxy);
    gateway_proxy_destroy(&f->proxy);
    ipl_httpd_destroy(&up);
    return r.body ? r.body : strdup("");
}

static void test_quiet_upstream_is_cut(void **state)
{
    (void)state;
    ipl_metrics_t *m = ipl_metrics_new();
    s_fixture_t f;
    uint64_t t0 = ipl_mono_ms();
    char *body = s_run(300, 1500, &f, m);
    uint64_t took = ipl_mono_ms() - t0;
    assert_true(took < 1400); /* cut, not waited out */
    assert_false(f.result.ok);
    assert_true(f.result.idle_timeout);
    assert_false(f.result.aborted);
    assert_false(f.result.client_gone);
    assert_non_null(strstr(f.result.error, "300 ms"));
    assert_non_null(strstr(body, "data: two"));
    assert_null(strstr(body, "three"));
    char *text = ipl_metrics_render(m, NULL);
    assert_non_null(
        strstr(text, "inferplane_gateway_upstream_errors_total{kind=\"stream_idle\"} 1"));
    free(text);
    free(body);
    ipl_metrics_destroy(&m);
}

static void test_shorter_pauses_pass(void **state)
{
    (void)state;
    ipl_metrics_t *m = ipl_metrics_new();
    s_fixture_t f;
    char *body = s_run(800, 300, &f, m);
    assert_true(f.result.ok);
    assert_false(f.result.idle_timeout);
    assert_non_null(strstr(body, "data: three"));
    free(body);
    ipl_metrics_destroy(&m);
}

static void test_no_timeout_waits(void **state)
{
    (void)state;
    ipl_metrics_t *m = ipl_metrics_new();
    s_fixture_t f;
    char *body = s_run(0, 1200, &f, m);
    assert_true(f.result.ok);
    assert_non_null(strstr(body, "data: [DONE]"));
    free(body);
    ipl_metrics_destroy(&m);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    ipl_log_set_level(IPL_LOG_OFF);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quiet_upstream_is_cut),
        cmocka_unit_test(test_shorter_pauses_pass),
        cmocka_unit_test(test_no_timeout_waits),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
