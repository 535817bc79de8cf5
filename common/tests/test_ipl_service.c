/*
 * Unit tests of ipl_service: the common options (--log-level, --admin-listen, --config,
 * --help, --version), errors printed as "inferplane-<name>: ...", logging level, the metrics
 * registry with process series, the admin server bound by start and served by serve (with
 * routes added in between), admin off, and a busy admin port.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <unistd.h>

#include "ipl_log.h"
#include "ipl_service.h"
#include "ipl_signal.h"
#include "ipl_test_http.h"

/* ---------------------------------------------------------------------------------------- */
/* Capturing stdout / stderr / the log                                                       */

typedef struct {
    int fd;    /* the descriptor captured (1 or 2) */
    int saved; /* its original target */
    FILE *tmp;
} s_capture_t;

static void s_capture_begin(s_capture_t *c, int fd)
{
    fflush(fd == 1 ? stdout : stderr);
    c->fd = fd;
    c->tmp = tmpfile();
    assert_non_null(c->tmp);
    c->saved = dup(fd);
    assert_true(c->saved >= 0);
    assert_true(dup2(fileno(c->tmp), fd) >= 0);
}

/* Restores the descriptor and returns what was written (malloc'd). */
static char *s_capture_end(s_capture_t *c)
{
    fflush(c->fd == 1 ? stdout : stderr);
    assert_true(dup2(c->saved, c->fd) >= 0);
    close(c->saved);
    long size = ftell(c->tmp) > 0 ? ftell(c->tmp) : lseek(fileno(c->tmp), 0, SEEK_END);
    char *text = calloc(1, (size_t)(size > 0 ? size : 0) + 1);
    assert_non_null(text);
    if (size > 0) {
        assert_int_equal(pread(fileno(c->tmp), text, (size_t)size, 0), size);
    }
    fclose(c->tmp);
    return text;
}

static FILE *s_log;

/* The log written since the last call (malloc'd). */
static char *s_log_text(void)
{
    fflush(s_log);
    long size = ftell(s_log);
    char *text = calloc(1, (size_t)size + 1);
    assert_non_null(text);
    rewind(s_log);
    assert_int_equal(fread(text, 1, (size_t)size, s_log), (size_t)size);
    rewind(s_log);
    assert_int_equal(ftruncate(fileno(s_log), 0), 0);
    return text;
}

static void s_log_clear(void)
{
    free(s_log_text());
}

/* Starts a service "svc" with the given arguments (argv[0] added); returns start's result. */
static int s_start(ipl_service_t *svc, const char *const *args)
{
    char *argv[32] = {"inferplane-svc"};
    int argc = 1;
    for (; args && args[argc - 1]; argc++) {
        assert_true(argc < 31);
        argv[argc] = (char *)args[argc - 1];
    }
    return ipl_service_start(svc, argc, argv);
}

static int s_setup(void **state)
{
    (void)state;
    ipl_signal_reset();
    return 0;
}

static int s_teardown(void **state)
{
    (void)state;
    ipl_log_set_level(IPL_LOG_OFF);
    ipl_signal_reset();
    return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* Tests                                                                                     */

static void h_debug(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp)
{
    (void)req;
    ipl_http_resp_set(resp, 200, "text/plain", arg, strlen(arg));
}

static void test_start_serve_destroy(void **state)
{
    (void)state;
    ipl_service_t *svc = ipl_service_new("svc", "a test service", "127.0.0.1:1");
    assert_non_null(svc);
    assert_string_equal(ipl_service_name(svc), "svc");
    int64_t extra = 0;
    ipl_config_add(ipl_service_config(svc), "extra", IPL_OPT_INT, &extra, "5", "an option");
    const char *args[] = {"--admin-listen", "127.0.0.1:0", "--log-level",
                          "debug",          "--extra=7",   NULL};
    assert_int_equal(s_start(svc, args), 0);
    assert_int_equal(extra, 7);
    assert_int_equal(ipl_log_get_level(), IPL_LOG_DEBUG);
    assert_int_equal(ipl_signal_fd() >= 0, 1); /* signals installed */
    assert_non_null(ipl_service_metrics(svc));
    ipl_admin_t *admin = ipl_service_admin(svc);
    assert_non_null(admin);
    int port = ipl_admin_port(admin);
    assert_true(port > 0);

    /* Bound but not serving yet: routes can still be added. */
    ipl_httpd_route(ipl_admin_httpd(admin), "GET", "/debug/x", h_debug, "debug-x");
    s_log_clear();
    assert_int_equal(ipl_service_serve(svc), 0);
    char *log = s_log_text();
    char want[64];
    snprintf(want, sizeof want, "admin_port=%d", port);
    assert_non_null(strstr(log, "svc=svc"));
    assert_non_null(strstr(log, "msg=started"));
    assert_non_null(strstr(log, want));
    free(log);

    s_reply_t r = {0};
    assert_int_equal(s_http(port, "GET", "/healthz", NULL, &r), CURLE_OK);
    assert_int_equal(r.status, 200);
    s_reply_free(&r);
    s_reply_t d = {0};
    assert_int_equal(s_http(port, "GET", "/debug/x", NULL, &d), CURLE_OK);
    assert_string_equal(d.body, "debug-x");
    s_reply_free(&d);
    s_reply_t v = {0};
    assert_int_equal(s_http(port, "GET", "/version", NULL, &v), CURLE_OK);
    assert_non_null(strstr(v.body, "\"service\":\"svc\""));
    s_reply_free(&v);
    s_reply_t m = {0}; /* the registry has the process series */
    assert_int_equal(s_http(port, "GET", "/metrics", NULL, &m), CURLE_OK);
    assert_int_equal(m.status, 200);
    assert_non_null(strstr(m.body, "process_start_time_seconds"));
    assert_non_null(strstr(m.body, "inferplane_build_info{"));
    assert_non_null(strstr(m.body, "service=\"svc\""));
    s_reply_free(&m);

    ipl_service_destroy(&svc);
    assert_null(svc);
    ipl_service_destroy(&svc);
    s_reply_t gone = {0};
    assert_int_not_equal(s_http(port, "GET", "/healthz", NULL, &gone), CURLE_OK);
    s_reply_free(&gone);
}

/* stop ends the admin server but keeps metrics and config for an orderly shutdown. */
static void test_stop_then_destroy(void **state)
{
    (void)state;
    ipl_service_t *svc = ipl_service_new("svc", "s", "127.0.0.1:0");
    char *color = NULL;
    ipl_config_add(ipl_service_config(svc), "color", IPL_OPT_STR, &color, "blue", "a string");
    assert_int_equal(s_start(svc, NULL), 0);
    assert_int_equal(ipl_service_serve(svc), 0);
    int port = ipl_admin_port(ipl_service_admin(svc));
    s_log_clear();
    ipl_service_stop(svc);
    ipl_service_stop(svc); /* idempotent */
    char *log = s_log_text();
    char *first = strstr(log, "msg=stopped");
    assert_non_null(first);
    assert_null(strstr(first + 1, "msg=stopped")); /* logged once */
    free(log);
    assert_null(ipl_service_admin(svc));
    s_reply_t r = {0};
    assert_int_not_equal(s_http(port, "GET", "/healthz", NULL, &r), CURLE_OK);
    s_reply_free(&r);
    /* Still valid: the registry (a worker thread may still count) and config strings. */
    ipl_metric_inc(ipl_metrics_counter(ipl_service_metrics(svc), "late_total", "Late.", NULL));
    size_t len = 0;
    char *text = ipl_metrics_render(ipl_service_metrics(svc), &len);
    assert_non_null(strstr(text, "late_total 1"));
    free(text);
    assert_string_equal(color, "blue");
    ipl_service_destroy(&svc);
    log = s_log_text();
    assert_null(strstr(log, "msg=stopped"));
    free(log);
}

static void test_admin_off(void **state)
{
    (void)state;
    const char *offs[][3] = {{"--admin-listen", "off", NULL}, {"--admin-listen=", NULL, NULL}};
    for (size_t i = 0; i < 2; i++) {
        ipl_service_t *svc = ipl_service_new("svc", "s", "127.0.0.1:0");
        assert_int_equal(s_start(svc, offs[i]), 0);
        assert_null(ipl_service_admin(svc));
        assert_non_null(ipl_service_metrics(svc));
        /* The calls a main.c makes still work. */
        ipl_httpd_route(ipl_admin_httpd(ipl_service_admin(svc)), "GET", "/d", h_debug, "d");
        ipl_admin_set_ready(ipl_service_admin(svc), NULL, NULL);
        s_log_clear();
        assert_int_equal(ipl_service_serve(svc), 0);
        char *log = s_log_text();
        assert_non_null(strstr(log, "admin=off"));
        free(log);
        ipl_service_destroy(&svc);
    }
    /* No default admin address and none given: off too. */
    ipl_service_t *svc = ipl_service_new("svc", "s", NULL);
    assert_int_equal(s_start(svc, NULL), 0);
    assert_null(ipl_service_admin(svc));
    ipl_service_destroy(&svc);
}

static void test_default_admin_listen(void **state)
{
    (void)state;
    ipl_service_t *svc = ipl_service_new("svc", "s", "127.0.0.1:0");
    assert_int_equal(s_start(svc, NULL), 0);
    assert_int_equal(ipl_log_get_level(), IPL_LOG_INFO); /* the default level */
    assert_non_null(ipl_service_admin(svc));
    assert_true(ipl_admin_port(ipl_service_admin(svc)) > 0);
    ipl_service_destroy(&svc);
}

static void test_help_and_version(void **state)
{
    (void)state;
    const char *help[] = {"--help", NULL};
    ipl_service_t *svc = ipl_service_new("svc", "a test service", "127.0.0.1:0");
    s_capture_t c;
    s_capture_begin(&c, 1);
    int rc = s_start(svc, help);
    char *out = s_capture_end(&c);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(out, "--admin-listen"));
    assert_non_null(strstr(out, "--log-level"));
    assert_non_null(strstr(out, "--config"));
    assert_null(ipl_service_admin(svc)); /* nothing was bound */
    free(out);
    ipl_service_destroy(&svc);

    const char *version[] = {"--version", NULL};
    svc = ipl_service_new("svc", "a test service", "127.0.0.1:0");
    s_capture_begin(&c, 1);
    rc = s_start(svc, version);
    out = s_capture_end(&c);
    assert_int_equal(rc, 1);
    assert_true(strlen(out) > 0);
    free(out);
    ipl_service_destroy(&svc);
}

/* Runs start with `args`, expecting -1 and a stderr line starting "inferplane-svc: " that
 * contains `needle`. */
static void s_expect_error(const char *const *args, const char *needle)
{
    ipl_service_t *svc = ipl_service_new("svc", "s", "127.0.0.1:0");
    s_capture_t c;
    s_capture_begin(&c, 2);
    int rc = s_start(svc, args);
    char *err = s_capture_end(&c);
    if (rc != -1 || strncmp(err, "inferplane-svc: ", 16) != 0 || !strstr(err, needle))
        fail_msg("rc=%d stderr=\"%s\" (wanted \"%s\")", rc, err, needle);
    free(err);
    assert_null(ipl_service_admin(svc));
    ipl_service_destroy(&svc);
}

static void test_errors(void **state)
{
    (void)state;
    const char *unknown[] = {"--admin-listne", "127.0.0.1:0", NULL};
    s_expect_error(unknown, "admin-listen"); /* did you mean ... */
    const char *level[] = {"--log-level", "verbose", NULL};
    s_expect_error(level, "verbose");
    const char *addr[] = {"--admin-listen", "nonsense", NULL};
    s_expect_error(addr, "\"nonsense\" (from flag) is not an address");

    /* A busy admin port. */
    ipl_service_t *first = ipl_service_new("svc", "s", "127.0.0.1:0");
    assert_int_equal(s_start(first, NULL), 0);
    char busy[64];
    snprintf(busy, sizeof busy, "127.0.0.1:%d", ipl_admin_port(ipl_service_admin(first)));
    const char *taken[] = {"--admin-listen", busy, NULL};
    s_expect_error(taken, "in use");
    ipl_service_destroy(&first);
}

static void test_config_file(void **state)
{
    (void)state;
    char path[] = "/tmp/test_ipl_service_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char yaml[] = "log-level: warn\nadmin-listen: 127.0.0.1:0\n";
    assert_int_equal(write(fd, yaml, sizeof yaml - 1), (ssize_t)(sizeof yaml - 1));
    close(fd);
    ipl_service_t *svc = ipl_service_new("svc", "s", "off");
    const char *args[] = {"--config", path, NULL};
    assert_int_equal(s_start(svc, args), 0);
    assert_int_equal(ipl_log_get_level(), IPL_LOG_WARN);
    assert_non_null(ipl_service_admin(svc));
    assert_string_equal(ipl_config_source(ipl_service_config(svc), "admin-listen"), "file");
    ipl_service_destroy(&svc);
    unlink(path);
}

/* --admin-token-file: protected routes need the token; a bad file stops start. */
static void test_admin_token_file(void **state)
{
    (void)state;
    char path[] = "/tmp/test_ipl_service_token_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char token[] = "svc-admin-token-0123456789abcdef\n";
    assert_int_equal(write(fd, token, sizeof token - 1), (ssize_t)(sizeof token - 1));
    close(fd);
    ipl_service_t *svc = ipl_service_new("svc", "s", "127.0.0.1:0");
    const char *args[] = {"--admin-token-file", path, NULL};
    s_log_clear();
    assert_int_equal(s_start(svc, args), 0);
    char *log = s_log_text();
    assert_non_null(strstr(log, "msg=admin_access mode=token"));
    assert_null(strstr(log, "0123456789abcdef")); /* never logged */
    free(log);
    ipl_admin_t *admin = ipl_service_admin(svc);
    assert_true(ipl_admin_has_token(admin));
    ipl_httpd_route(ipl_admin_httpd(admin), "GET", "/debug/x", h_debug, "debug-x");
    assert_int_equal(ipl_service_serve(svc), 0);
    int port = ipl_admin_port(admin);
    s_reply_t r = {0};
    assert_int_equal(s_http(port, "GET", "/debug/x", NULL, &r), CURLE_OK);
    assert_int_equal(r.status, 401);
    s_reply_free(&r);
    const char *auth[] = {"Authorization: Bearer svc-admin-token-0123456789abcdef", NULL};
    s_reply_t ok = {0}, ready = {0};
    assert_int_equal(s_http_ex(port, "GET", "/debug/x", NULL, 0, auth, false, &ok), CURLE_OK);
    assert_int_equal(ok.status, 200);
    assert_string_equal(ok.body, "debug-x");
    s_reply_free(&ok);
    assert_int_equal(s_http(port, "GET", "/readyz", NULL, &ready), CURLE_OK);
    assert_int_equal(ready.status, 200);
    s_reply_free(&ready);
    ipl_service_destroy(&svc);

    /* Without one the start line says loopback only. */
    svc = ipl_service_new("svc", "s", "127.0.0.1:0");
    s_log_clear();
    assert_int_equal(s_start(svc, NULL), 0);
    log = s_log_text();
    assert_non_null(strstr(log, "msg=admin_access mode=loopback"));
    free(log);
    assert_false(ipl_admin_has_token(ipl_service_admin(svc)));
    ipl_service_destroy(&svc);

    const char *missing[] = {"--admin-token-file", "/nonexistent/token", NULL};
    s_expect_error(missing, "\"/nonexistent/token\": cannot read it");
    fd = open(path, O_WRONLY | O_TRUNC);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "short\n", 6), 6);
    close(fd);
    const char *shortone[] = {"--admin-token-file", path, NULL};
    s_expect_error(shortone, "a token must be 16..512");
    unlink(path);
}

int main(void)
{
    s_log = tmpfile();
    ipl_log_set_stream(s_log);
    curl_global_init(CURL_GLOBAL_DEFAULT);
#define T(name) cmocka_unit_test_setup_teardown(name, s_setup, s_teardown)
    const struct CMUnitTest tests[] = {
        T(test_start_serve_destroy),  T(test_stop_then_destroy), T(test_admin_off),
        T(test_default_admin_listen), T(test_help_and_version),  T(test_errors),
        T(test_config_file),          T(test_admin_token_file),
    };
#undef T
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    ipl_log_set_stream(NULL);
    fclose(s_log);
    return rc;
}
