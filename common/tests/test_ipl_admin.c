/*
 * Unit tests of ipl_admin: /healthz, /readyz (with and without a readiness callback, and
 * while stopping), /metrics (content type, series, collect callbacks), /version, extra routes
 * on the same server, 404/405, bind failures and the NULL (admin off) forms.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "ipl_admin.h"
#include "ipl_log.h"
#include "ipl_metrics.h"
#include "ipl_signal.h"
#include "ipl_test_http.h"

#define S_PROM_TYPE "text/plain; version=0.0.4; charset=utf-8"

typedef struct {
    ipl_metrics_t *metrics;
    ipl_admin_t *admin;
    int port;
    ipl_metric_t *gauge;
    atomic_int collects;
} s_fixture_t;

static s_fixture_t s_fx;

static void s_collect(void *arg, ipl_metrics_t *metrics)
{
    (void)metrics;
    s_fixture_t *fx = arg;
    int n = atomic_fetch_add(&fx->collects, 1) + 1;
    ipl_metric_set(fx->gauge, n);
}

static int s_setup(void **state)
{
    (void)state;
    memset(&s_fx, 0, sizeof s_fx);
    s_fx.metrics = ipl_metrics_new();
    ipl_metric_t *c = ipl_metrics_counter(s_fx.metrics, "test_requests_total",
                                          "Requests seen by the test.", "route=\"a\"");
    ipl_metric_add(c, 3);
    s_fx.gauge = ipl_metrics_gauge(s_fx.metrics, "test_collects", "Renders so far.", NULL);
    ipl_metrics_on_collect(s_fx.metrics, s_collect, &s_fx);
    s_fx.admin = ipl_admin_new("127.0.0.1:0", "gateway", s_fx.metrics);
    if (!s_fx.admin) return -1;
    s_fx.port = ipl_admin_port(s_fx.admin);
    return s_fx.port > 0 ? 0 : -1;
}

static int s_teardown(void **state)
{
    (void)state;
    ipl_admin_destroy(&s_fx.admin);
    ipl_metrics_destroy(&s_fx.metrics);
    ipl_signal_reset();
    return 0;
}

/* GET `path`, expecting `status` and a JSON body; returns the parsed document. */
static cJSON *s_get_json(const char *path, long status)
{
    s_reply_t r = {0};
    char ct[128];
    assert_int_equal(s_http(s_fx.port, "GET", path, NULL, &r), CURLE_OK);
    assert_int_equal(r.status, status);
    assert_string_equal(s_reply_header(&r, "Content-Type", ct, sizeof ct), "application/json");
    cJSON *doc = cJSON_Parse(r.body);
    assert_non_null(doc);
    s_reply_free(&r);
    return doc;
}

static void s_assert_ready(long status, bool ready, const char *detail)
{
    cJSON *doc = s_get_json("/readyz", status);
    assert_true(cJSON_IsBool(cJSON_GetObjectItem(doc, "ready")));
    assert_int_equal(cJSON_IsTrue(cJSON_GetObjectItem(doc, "ready")), ready);
    assert_true(cJSON_IsString(cJSON_GetObjectItem(doc, "detail")));
    assert_string_equal(cJSON_GetObjectItem(doc, "detail")->valuestring, detail);
    cJSON_Delete(doc);
}

static void test_healthz(void **state)
{
    (void)state;
    assert_int_equal(ipl_admin_start(s_fx.admin), 0);
    s_reply_t r = {0};
    assert_int_equal(s_http(s_fx.port, "GET", "/healthz", NULL, &r), CURLE_OK);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "ok\n");
    s_reply_free(&r);
}

static void test_readyz_without_callback(void **state)
{
    (void)state;
    assert_int_equal(ipl_admin_start(s_fx.admin), 0);
    s_assert_ready(200, true, "started");
}

typedef struct {
    atomic_bool ready;
    const char *detail;
    atomic_int calls;
} s_readiness_t;

static bool s_ready_fn(void *arg, char *detail, size_t size)
{
    s_readiness_t *rd = arg;
    atomic_fetch_add(&rd->calls, 1);
    assert_true(size >= 64);
    snprintf(detail, size, "%s", rd->detail);
    return atomic_load(&rd->ready);
}

static void test_readyz_callback(void **state)
{
    (void)state;
    s_readiness_t rd = {.detail = "waiting for \"state\" snapshot\n(seq 0)"};
    ipl_admin_set_ready(s_fx.admin, s_ready_fn, &rd);
    assert_int_equal(ipl_admin_start(s_fx.admin), 0);
    s_assert_ready(503, false, rd.detail); /* quotes and newline come back JSON-escaped */
    atomic_store(&rd.ready, true);
    rd.detail = "seq 42 lag_ms 3";
    s_assert_ready(200, true, "seq 42 lag_ms 3");
    assert_int_equal(atomic_load(&rd.calls), 2);

    /* A long detail is truncated, never overflows. */
    static char long_detail[4096];
    memset(long_detail, 'd', sizeof long_detail - 1);
    rd.detail = long_detail;
    cJSON *doc = s_get_json("/readyz", 200);
    size_t len = strlen(cJSON_GetObjectItem(doc, "detail")->valuestring);
    assert_true(len > 0 && len < sizeof long_detail - 1);
    cJSON_Delete(doc);

    /* Cleared again: ready as soon as started. */
    ipl_admin_set_ready(s_fx.admin, NULL, NULL);
    s_assert_ready(200, true, "started");
}

static void test_readyz_while_stopping(void **state)
{
    (void)state;
    s_readiness_t rd = {.ready = true, .detail = "fine"};
    ipl_admin_set_ready(s_fx.admin, s_ready_fn, &rd);
    assert_int_equal(ipl_admin_start(s_fx.admin), 0);
    s_assert_ready(200, true, "fine");
    ipl_signal_request_stop();
    s_assert_ready(503, false, "stopping");
    ipl_signal_reset();
    s_assert_ready(200, true, "fine");
}

static void test_metrics(void **state)
{
    (void)state;
    assert_int_equal(ipl_admin_start(s_fx.admin), 0);
    for (int i = 1; i <= 2; i++) {
        s_reply_t r = {0};
        char ct[128], want[64];
        assert_int_equal(s_http(s_fx.port, "GET", "/metrics", NULL, &r), CURLE_OK);
        assert_int_equal(r.status, 200);
        assert_string_equal(s_reply_header(&r, "Content-Type", ct, sizeof ct), S_PROM_TYPE);
        assert_non_null(strstr(r.body, "# HELP test_requests_total Requests seen by the test.\n"));
        assert_non_null(strstr(r.body, "# TYPE test_requests_total counter\n"));
        assert_non_null(strstr(r.body, "test_requests_total{route=\"a\"} 3\n"));
        snprintf(want, sizeof want, "\ntest_collects %d\n", i); /* collected per scrape */
        assert_non_null(strstr(r.body, want));
        s_reply_free(&r);
    }
}

static void test_metrics_without_registry(void **state)
{
    (void)state;
    ipl_admin_t *a = ipl_admin_new("127.0.0.1:0", "x", NULL);
    assert_non_null(a);
    assert_int_equal(ipl_admin_start(a), 0);
    s_reply_t r = {0};
    assert_int_equal(s_http(ipl_admin_port(a), "GET", "/metrics", NULL, &r), CURLE_OK);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.len, 0);
    s_reply_free(&r);
    ipl_admin_destroy(&a);
    assert_null(a);
}

static void test_version(void **state)
{
    (void)state;
    assert_int_equal(ipl_admin_start(s_fx.admin), 0);
    cJSON *doc = s_get_json("/version", 200);
    assert_string_equal(cJSON_GetObjectItem(doc, "service")->valuestring, "gateway");
    /* The Makefile's IPL_VERSION (git describe); not compared with this file's own
     * IPL_VERSION, which differs when ipl_admin.o was built at another commit. */
    const char *version = cJSON_GetObjectItem(doc, "version")->valuestring;
    assert_true(strlen(version) > 0);
    assert_string_not_equal(version, "0.0.0-unknown");
    cJSON_Delete(doc);
}

static void h_route(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp)
{
    (void)arg;
    size_t len;
    const char *body = ipl_http_req_body(req, &len);
    ipl_http_resp_set(resp, 200, "application/json", body, len);
}

static void test_extra_routes_and_errors(void **state)
{
    (void)state;
    ipl_httpd_t *h = ipl_admin_httpd(s_fx.admin);
    assert_non_null(h);
    assert_int_equal(ipl_httpd_port(h), s_fx.port);
    ipl_httpd_route(h, "POST", "/v1/route", h_route, NULL);
    assert_int_equal(ipl_admin_start(s_fx.admin), 0);

    s_reply_t r = {0};
    assert_int_equal(s_http(s_fx.port, "POST", "/v1/route", "{\"model\":\"m\"}", &r), CURLE_OK);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "{\"model\":\"m\"}");
    s_reply_free(&r);

    s_reply_t nf = {0};
    assert_int_equal(s_http(s_fx.port, "GET", "/debug/nothing", NULL, &nf), CURLE_OK);
    s_assert_json_error(&nf, 404, "not_found_error");
    s_reply_free(&nf);

    s_reply_t na = {0};
    assert_int_equal(s_http(s_fx.port, "POST", "/healthz", "x", &na), CURLE_OK);
    s_assert_json_error(&na, 405, "invalid_request_error");
    s_reply_free(&na);
}

static void test_bind_failures_and_null(void **state)
{
    (void)state;
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", s_fx.port);
    assert_null(ipl_admin_new(addr, "x", s_fx.metrics)); /* busy */
    assert_null(ipl_admin_new("not an address", "x", s_fx.metrics));

    /* A NULL admin (the admin server is off) is accepted everywhere. */
    ipl_admin_t *none = NULL;
    ipl_admin_set_ready(none, s_ready_fn, NULL);
    assert_null(ipl_admin_httpd(none));
    ipl_httpd_route(ipl_admin_httpd(none), "GET", "/x", h_route, NULL);
    assert_int_equal(ipl_admin_start(none), 0);
    assert_int_equal(ipl_admin_port(none), 0);
    ipl_admin_destroy(&none);
}

int main(void)
{
    ipl_log_set_level(IPL_LOG_OFF);
    curl_global_init(CURL_GLOBAL_DEFAULT);
#define T(name) cmocka_unit_test_setup_teardown(name, s_setup, s_teardown)
    const struct CMUnitTest tests[] = {
        T(test_healthz),
        T(test_readyz_without_callback),
        T(test_readyz_callback),
        T(test_readyz_while_stopping),
        T(test_metrics),
        T(test_metrics_without_registry),
        T(test_version),
        T(test_extra_routes_and_errors),
        T(test_bind_failures_and_null),
    };
#undef T
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
