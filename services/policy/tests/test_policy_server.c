/*
 * Unit tests of policy_server's reload logic: versions increase only on a real change, the
 * hash follows the content, a broken directory keeps the last good policy (and says why in
 * /readyz detail, the metrics and /debug/policy), readiness and its detail follow. (The
 * sockets, the watch loop and the admin endpoints through a real process:
 * integration/test_policy.py.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>
#include <czmq.h>

#include "ipl_error.h"
#include "ipl_log.h"
#include "policy_digest.h"
#include "policy_server.h"
#include "tests/policy_test.h"

static const char *s_valid = "apiVersion: inferplane.io/v1alpha1\n"
                             "kind: InferenceWorkerSet\n"
                             "metadata: {name: s}\n"
                             "spec: {model: m, workers: [{name: w0, url: 'http://h:1'}]}\n"
                             "---\n"
                             "apiVersion: inferplane.io/v1alpha1\n"
                             "kind: InferencePool\n"
                             "metadata: {name: p}\n"
                             "spec: {model: m, targets: [{workerSet: s}]}\n";

// Replaces p.yaml (a new inode: the change is always visible).
static void s_write(const char *dir, const char *text)
{
    s_policy_replace(dir, "p.yaml", text);
}

// Whether the rendered metrics hold `line`.
static bool s_metrics_have(ipl_metrics_t *metrics, const char *line)
{
    size_t len = 0;
    char *text = ipl_metrics_render(metrics, &len);
    bool found = text && strstr(text, line);
    free(text);
    return found;
}

static void test_versions_and_last_good_policy(void **state)
{
    (void)state;
    char dir[] = "/tmp/test_policy_server_XXXXXX";
    assert_non_null(mkdtemp(dir));
    ipl_metrics_t *metrics = ipl_metrics_new();
    char err[256], detail[256];
    policy_server_config_t cfg = {.dir = dir,
                                  .pub = "inproc://test-ps-pub",
                                  .rep = "inproc://test-ps-rep",
                                  .republish_ms = 100};
    policy_server_t *s = policy_server_new(&cfg, metrics, err, sizeof err);
    assert_non_null(s);
    assert_string_equal(policy_server_watch_mode(s), "inotify"); // /tmp is local
    // An empty directory: not ready, and the detail says why.
    assert_int_equal(policy_server_reload(s, false), IPL_E_INVAL);
    assert_false(policy_server_ready(s, detail, sizeof detail));
    assert_non_null(strstr(detail, "no valid policy: 1 error(s):"));
    assert_non_null(strstr(detail, "no *.yaml files"));
    assert_int_equal(policy_server_version(s), 0);
    assert_int_equal(policy_server_reload(s, false), 0); // nothing changed: not even re-read

    s_write(dir, s_valid);
    assert_int_equal(policy_server_reload(s, false), 1);
    uint64_t v1 = policy_server_version(s), h1 = policy_server_hash(s);
    assert_true(v1 > 0);
    assert_true(h1 != 0);
    char hex[POLICY_DIGEST_HEX_LEN], want[64];
    snprintf(want, sizeof want, "hash=%s", policy_digest_hex(h1, hex));
    assert_true(policy_server_ready(s, detail, sizeof detail));
    assert_non_null(strstr(detail, "pools=1 workers=1"));
    assert_non_null(strstr(detail, want));
    assert_int_equal(policy_server_reload(s, false), 0);
    assert_int_equal(policy_server_reload(s, true), 0); // re-read, same content: same version
    assert_int_equal(policy_server_version(s), v1);
    assert_true(policy_server_hash(s) == h1);

    s_write(dir, "kind: [\n");
    assert_int_equal(policy_server_reload(s, false), IPL_E_INVAL);
    assert_int_equal(policy_server_version(s), v1);
    assert_true(policy_server_hash(s) == h1);
    assert_true(policy_server_ready(s, detail, sizeof detail)); // still serving v1
    assert_non_null(strstr(detail, "(last good); reload failed with 1 error(s): p.yaml:"));
    assert_non_null(strstr(detail, want));
    assert_true(s_metrics_have(metrics, "inferplane_policy_errors 1\n"));
    assert_true(s_metrics_have(metrics, "inferplane_policy_files_valid 0\n"));
    assert_true(s_metrics_have(metrics, "inferplane_policy_watch_inotify 1\n"));

    char changed[1024];
    snprintf(changed, sizeof changed, "%s", s_valid);
    memcpy(strstr(changed, "http://h:1"), "http://h:2", 10);
    s_write(dir, changed);
    assert_int_equal(policy_server_reload(s, false), 1);
    assert_true(policy_server_version(s) > v1);
    assert_true(policy_server_hash(s) != h1);
    s_write(dir, s_valid); // back to the first content: its hash again, a new version
    assert_int_equal(policy_server_reload(s, false), 1);
    assert_true(policy_server_hash(s) == h1);

    assert_true(s_metrics_have(metrics, "inferplane_policy_reloads_total{result=\"changed\"} 3\n"));
    assert_true(s_metrics_have(metrics, "inferplane_policy_reloads_total{result=\"error\"} 2\n"));
    assert_true(s_metrics_have(metrics, "inferplane_policy_files_valid 1\n"));

    policy_server_destroy(&s);
    assert_null(s);
    // A second server on a taken endpoint fails with a message naming the flag.
    policy_server_config_t ca = {
        .dir = dir, .pub = "inproc://test-ps-pub2", .rep = "inproc://test-ps-rep2"};
    policy_server_config_t cb = {
        .dir = dir, .pub = "inproc://test-ps-pub2", .rep = "inproc://test-ps-rep3"};
    policy_server_t *a = policy_server_new(&ca, metrics, err, sizeof err);
    policy_server_t *b = policy_server_new(&cb, metrics, err, sizeof err);
    assert_null(b);
    assert_non_null(strstr(err, "cannot bind --pub \"inproc://test-ps-pub2\""));
    policy_server_destroy(&a);
    ipl_metrics_destroy(&metrics);
    char path[256];
    snprintf(path, sizeof path, "%s/p.yaml", dir);
    unlink(path);
    rmdir(dir);
}

// GET /debug/policy over HTTP: the policy in service with its version and hash, and why the
// last reload failed.
static cJSON *s_debug(int port)
{
    return s_policy_get_json(port, "/debug/policy");
}

static double s_num(cJSON *o, const char *a, const char *b)
{
    cJSON *x = cJSON_GetObjectItem(o, a);
    if (b) x = cJSON_GetObjectItem(x, b);
    assert_true(cJSON_IsNumber(x));
    return x->valuedouble;
}

static const char *s_text(cJSON *o, const char *a, const char *b)
{
    cJSON *x = cJSON_GetObjectItem(o, a);
    if (b) x = cJSON_GetObjectItem(x, b);
    assert_true(cJSON_IsString(x));
    return x->valuestring;
}

static void test_debug_policy(void **state)
{
    (void)state;
    char dir[] = "/tmp/test_policy_server_XXXXXX";
    assert_non_null(mkdtemp(dir));
    s_write(dir, s_valid);
    ipl_metrics_t *metrics = ipl_metrics_new();
    char err[256];
    policy_server_config_t cfg = {
        .dir = dir, .pub = "inproc://test-pd-pub", .rep = "inproc://test-pd-rep"};
    policy_server_t *s = policy_server_new(&cfg, metrics, err, sizeof err);
    assert_non_null(s);
    ipl_httpd_t *httpd = ipl_httpd_new("127.0.0.1:0", 0);
    assert_non_null(httpd);
    ipl_httpd_route(httpd, "GET", "/debug/policy", policy_server_debug, s);
    assert_int_equal(ipl_httpd_start(httpd), 0);
    int port = ipl_httpd_port(httpd);

    assert_int_equal(policy_server_reload(s, true), 1);
    char hex[POLICY_DIGEST_HEX_LEN];
    policy_digest_hex(policy_server_hash(s), hex);
    cJSON *o = s_debug(port);
    assert_true(s_num(o, "version", NULL) == (double)policy_server_version(s));
    assert_string_equal(s_text(o, "hash", NULL), hex);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(o, "valid")));
    assert_string_equal(s_text(o, "dir", NULL), dir);
    assert_string_equal(s_text(o, "source", NULL), dir);
    assert_string_equal(s_text(o, "watch", "mode"), "inotify");
    assert_string_equal(s_text(o, "watch", "reason"), "");
    assert_int_equal(s_num(o, "watch", "debounce_ms"), 100);
    assert_int_equal(s_num(o, "reloads", "changed"), 1);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(o, "pools")), 1);
    cJSON_Delete(o);

    s_write(dir, "kind: [\n"); // broken: the last good policy stays, the error is shown
    assert_int_equal(policy_server_reload(s, false), IPL_E_INVAL);
    o = s_debug(port);
    assert_true(s_num(o, "version", NULL) == (double)policy_server_version(s));
    assert_string_equal(s_text(o, "hash", NULL), hex);
    assert_false(cJSON_IsTrue(cJSON_GetObjectItem(o, "valid")));
    cJSON *errors = cJSON_GetObjectItem(o, "errors");
    assert_int_equal(cJSON_GetArraySize(errors), 1);
    const char *e = cJSON_GetArrayItem(errors, 0)->valuestring;
    assert_true(!strncmp(e, "p.yaml:", 7) && strstr(e, "YAML syntax error"));
    assert_int_equal(s_num(o, "reloads", "error"), 1);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(o, "workers")), 1); // still served
    cJSON_Delete(o);
    ipl_httpd_destroy(&httpd);
    policy_server_destroy(&s);

    // --watch poll: said so. (New endpoints: an inproc endpoint is released by the I/O
    // thread after the socket closes, so binding the same one again at once can fail.)
    cfg.poll = true;
    cfg.pub = "inproc://test-pd-pub-poll";
    cfg.rep = "inproc://test-pd-rep-poll";
    s = policy_server_new(&cfg, metrics, err, sizeof err);
    assert_non_null(s);
    assert_string_equal(policy_server_watch_mode(s), "poll");
    httpd = ipl_httpd_new("127.0.0.1:0", 0);
    ipl_httpd_route(httpd, "GET", "/debug/policy", policy_server_debug, s);
    assert_int_equal(ipl_httpd_start(httpd), 0);
    assert_int_equal(policy_server_reload(s, true), IPL_E_INVAL);
    o = s_debug(ipl_httpd_port(httpd));
    assert_string_equal(s_text(o, "watch", "mode"), "poll");
    assert_non_null(strstr(s_text(o, "watch", "reason"), "--watch poll"));
    assert_int_equal(s_num(o, "version", NULL), 0);
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(o, "hash")));
    cJSON_Delete(o);
    assert_true(s_metrics_have(metrics, "inferplane_policy_watch_inotify 0\n"));
    ipl_httpd_destroy(&httpd);
    policy_server_destroy(&s);
    ipl_metrics_destroy(&metrics);
    char path[256];
    snprintf(path, sizeof path, "%s/p.yaml", dir);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    zsys_handler_set(NULL);
    ipl_log_set_level(IPL_LOG_OFF);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_versions_and_last_good_policy),
        cmocka_unit_test(test_debug_policy),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
