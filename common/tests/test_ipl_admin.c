/*
 * Unit tests of ipl_admin: /healthz, /readyz (with and without a readiness callback, and
 * while stopping), /metrics (content type, series, collect callbacks), /version, extra routes
 * on the same server, 404/405, bind failures and the NULL (admin off) forms; access: open and
 * protected routes with a token file (401s, several tokens, reload, bad files), paths left
 * open, and which peers count as loopback.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ipl_admin.h"
#include "ipl_error.h"
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

/* ---- access ---------------------------------------------------------------------------- */

#define S_TOKEN_A "tok-a-0123456789abcdef0123456789"
#define S_TOKEN_B "tok-b-fedcba9876543210fedcba9876"

/* Writes `text` to a new temporary file; its path in path[size]. */
static void s_write_file(char *path, size_t size, const char *text)
{
    snprintf(path, size, "/tmp/test_ipl_admin_XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

/* Replaces the file at `path` with `text` (rename over it, as kubelet swaps a Secret). */
static void s_replace_file(const char *path, const char *text)
{
    char tmp[256];
    s_write_file(tmp, sizeof tmp, text);
    assert_int_equal(rename(tmp, path), 0);
}

/* `method path` with an optional Authorization header; the status. *r is freed unless kept. */
static long s_call(const char *method, const char *path, const char *auth, s_reply_t *keep)
{
    s_reply_t r = {0};
    char header[600];
    const char *headers[] = {header, NULL};
    if (auth) snprintf(header, sizeof header, "Authorization: %s", auth);
    assert_int_equal(s_http_ex(s_fx.port, method, path, method[0] == 'P' ? "{}" : NULL,
                               method[0] == 'P' ? 2 : 0, auth ? headers : NULL, false, &r),
                     CURLE_OK);
    long status = r.status;
    if (keep)
        *keep = r;
    else
        s_reply_free(&r);
    return status;
}

static void test_token_protects_added_routes(void **state)
{
    (void)state;
    char path[256], err[512] = "";
    s_write_file(path, sizeof path, "# admin tokens\n\n  " S_TOKEN_A "  \n" S_TOKEN_B "\n");
    assert_false(ipl_admin_has_token(s_fx.admin));
    assert_int_equal(ipl_admin_set_token_file(s_fx.admin, path, err, sizeof err), 0);
    assert_true(ipl_admin_has_token(s_fx.admin));
    ipl_httpd_t *h = ipl_admin_httpd(s_fx.admin);
    ipl_httpd_route(h, "POST", "/v1/route", h_route, NULL);
    ipl_httpd_route(h, "GET", "/debug/*", h_route, NULL);
    assert_int_equal(ipl_admin_start(s_fx.admin), 0);

    /* Health stays open, also to HEAD. */
    const char *open[] = {"/healthz", "/readyz", "/metrics", "/version"};
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(s_call("GET", open[i], NULL, NULL), 200);
        assert_int_equal(s_call("HEAD", open[i], NULL, NULL), 200);
        assert_int_equal(s_call("GET", open[i], "Bearer wrong-token-0000000000", NULL), 200);
    }
    /* Added routes need a token of the file, from loopback too. */
    s_reply_t r;
    assert_int_equal(s_call("POST", "/v1/route", NULL, &r), 401);
    s_assert_json_error(&r, 401, "authentication_error");
    char value[128];
    assert_string_equal(s_reply_header(&r, "WWW-Authenticate", value, sizeof value),
                        "Bearer realm=\"inferplane-admin\"");
    assert_null(strstr(r.body, S_TOKEN_A)); /* never echoed */
    s_reply_free(&r);
    assert_int_equal(s_call("GET", "/debug/state", NULL, NULL), 401);
    assert_int_equal(s_call("GET", "/debug/state", "Bearer " S_TOKEN_A "x", NULL), 401);
    assert_int_equal(s_call("GET", "/debug/state", "Basic " S_TOKEN_A, NULL), 401);
    assert_int_equal(s_call("GET", "/debug/state", "Bearer", NULL), 401);
    assert_int_equal(s_call("GET", "/debug/state", "Bearer " S_TOKEN_A, NULL), 200);
    assert_int_equal(s_call("GET", "/debug/state", "bearer   " S_TOKEN_B " ", NULL), 200);
    assert_int_equal(s_call("POST", "/v1/route", "Bearer " S_TOKEN_B, &r), 200);
    assert_string_equal(r.body, "{}"); /* the handler ran */
    s_reply_free(&r);
    /* A wrong method or an unknown path is still told apart once authorised. */
    assert_int_equal(s_call("GET", "/v1/route", "Bearer " S_TOKEN_A, NULL), 405);

    /* Counted by reason. */
    assert_int_equal(s_call("GET", "/metrics", NULL, &r), 200);
    assert_non_null(strstr(r.body, "inferplane_admin_refused_total{reason=\"missing_token\"} 4\n"));
    assert_non_null(strstr(r.body, "inferplane_admin_refused_total{reason=\"invalid_token\"} 1\n"));
    assert_non_null(strstr(r.body, "inferplane_admin_refused_total{reason=\"not_loopback\"} 0\n"));
    s_reply_free(&r);
    unlink(path);
}

static void test_token_file_reloads(void **state)
{
    (void)state;
    char path[256], err[512] = "";
    s_write_file(path, sizeof path, S_TOKEN_A "\n");
    assert_int_equal(ipl_admin_set_token_file(s_fx.admin, path, err, sizeof err), 0);
    ipl_httpd_route(ipl_admin_httpd(s_fx.admin), "GET", "/debug/x", h_route, NULL);
    assert_int_equal(ipl_admin_start(s_fx.admin), 0);
    assert_int_equal(s_call("GET", "/debug/x", "Bearer " S_TOKEN_A, NULL), 200);

    /* Rotated: B replaces A, seen within about a second. */
    s_replace_file(path, S_TOKEN_B "\n");
    uint64_t deadline = ipl_mono_ms() + 5000;
    while (s_call("GET", "/debug/x", "Bearer " S_TOKEN_B, NULL) != 200) {
        assert_true(ipl_mono_ms() < deadline);
        usleep(50 * 1000);
    }
    assert_int_equal(s_call("GET", "/debug/x", "Bearer " S_TOKEN_A, NULL), 401);

    /* A broken version keeps B. */
    s_replace_file(path, "short\n");
    usleep(1200 * 1000);
    assert_int_equal(s_call("GET", "/debug/x", "Bearer " S_TOKEN_B, NULL), 200);
    assert_int_equal(s_call("GET", "/debug/x", "Bearer short", NULL), 401);
    unlink(path);
}

static void test_token_file_errors(void **state)
{
    (void)state;
    char err[512] = "", path[256];
    assert_int_equal(ipl_admin_set_token_file(s_fx.admin, "/nonexistent/tokens", err, sizeof err),
                     IPL_E_IO);
    assert_non_null(strstr(err, "\"/nonexistent/tokens\": cannot read it"));
    struct {
        const char *text, *needle;
    } bad[] = {
        {"", "holds no token"},
        {"# only a comment\n\n", "holds no token"},
        {S_TOKEN_A "\nshort-token\n", ":2: a token must be 16..512 printable bytes"},
        {"tok with blanks inside 0123456789\n", ":1: a token must be"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        s_write_file(path, sizeof path, bad[i].text);
        err[0] = '\0';
        assert_int_equal(ipl_admin_set_token_file(s_fx.admin, path, err, sizeof err), IPL_E_INVAL);
        if (!strstr(err, bad[i].needle))
            fail_msg("%zu: \"%s\" lacks \"%s\"", i, err, bad[i].needle);
        assert_null(strstr(err, S_TOKEN_A)); /* a token is never in a message */
        unlink(path);
    }
    char many[IPL_ADMIN_MAX_TOKENS * 40 + 64] = "";
    for (int i = 0; i <= IPL_ADMIN_MAX_TOKENS; i++) {
        char line[40];
        snprintf(line, sizeof line, "token-number-%04d-abcdef\n", i);
        strcat(many, line);
    }
    s_write_file(path, sizeof path, many);
    assert_int_equal(ipl_admin_set_token_file(s_fx.admin, path, err, sizeof err), IPL_E_INVAL);
    assert_non_null(strstr(err, "more than 16 tokens"));
    unlink(path);
    assert_false(ipl_admin_has_token(s_fx.admin)); /* nothing was set */
    assert_int_equal(ipl_admin_set_token_file(NULL, "/x", err, sizeof err), 0);
    assert_false(ipl_admin_has_token(NULL));
}

static void test_open_paths(void **state)
{
    (void)state;
    char path[256], err[512] = "";
    s_write_file(path, sizeof path, S_TOKEN_A "\n");
    assert_int_equal(ipl_admin_set_token_file(s_fx.admin, path, err, sizeof err), 0);
    ipl_httpd_route(ipl_admin_httpd(s_fx.admin), "POST", "/validate", h_route, NULL);
    ipl_httpd_route(ipl_admin_httpd(s_fx.admin), "POST", "/validate/more", h_route, NULL);
    ipl_admin_open(s_fx.admin, "/validate");
    ipl_admin_open(NULL, "/ignored");
    assert_int_equal(ipl_admin_start(s_fx.admin), 0);
    assert_int_equal(s_call("POST", "/validate", NULL, NULL), 200);
    assert_int_equal(s_call("POST", "/validate/more", NULL, NULL), 401); /* exact paths only */
    assert_int_equal(s_call("GET", "/healthz/x", NULL, NULL), 404); /* no route: before the guard */
    unlink(path);
}

static void test_no_token_serves_loopback(void **state)
{
    (void)state;
    ipl_httpd_route(ipl_admin_httpd(s_fx.admin), "GET", "/debug/x", h_route, NULL);
    assert_int_equal(ipl_admin_start(s_fx.admin), 0);
    assert_int_equal(s_call("GET", "/debug/x", NULL, NULL), 200); /* the test is on loopback */
    assert_int_equal(s_call("GET", "/debug/x", "Bearer anything-at-all-000000", NULL), 200);
}

static void test_loopback_peers(void **state)
{
    (void)state;
    struct {
        int family;
        const char *addr;
        bool loopback;
    } cases[] = {
        {AF_INET, "127.0.0.1", true},         {AF_INET, "127.255.3.4", true},
        {AF_INET, "10.0.0.1", false},         {AF_INET, "0.0.0.0", false},
        {AF_INET, "128.0.0.1", false},        {AF_INET6, "::1", true},
        {AF_INET6, "::ffff:127.0.0.9", true}, {AF_INET6, "::ffff:10.1.2.3", false},
        {AF_INET6, "2001:db8::1", false},     {AF_INET6, "::", false},
        {AF_INET6, "fe80::1", false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        struct sockaddr_storage ss;
        memset(&ss, 0, sizeof ss);
        ss.ss_family = (sa_family_t)cases[i].family;
        void *dst = cases[i].family == AF_INET ? (void *)&((struct sockaddr_in *)&ss)->sin_addr
                                               : (void *)&((struct sockaddr_in6 *)&ss)->sin6_addr;
        assert_int_equal(inet_pton(cases[i].family, cases[i].addr, dst), 1);
        if (ipl_admin_loopback_peer(&ss) != cases[i].loopback) fail_msg("%s", cases[i].addr);
    }
    struct sockaddr_storage unix_peer = {.ss_family = AF_UNIX};
    assert_false(ipl_admin_loopback_peer(&unix_peer));
    assert_false(ipl_admin_loopback_peer(NULL));
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
        T(test_token_protects_added_routes),
        T(test_token_file_reloads),
        T(test_token_file_errors),
        T(test_open_paths),
        T(test_no_token_serves_loopback),
        T(test_loopback_peers),
    };
#undef T
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
