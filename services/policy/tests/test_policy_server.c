/*
 * Unit tests of policy_server's reload logic: versions increase only on a real change, a
 * broken directory keeps the last good policy, readiness and its detail follow. (The sockets
 * and the admin endpoints are covered by integration/test_policy.py.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <czmq.h>

#include "policy_server.h"
#include "ipl_error.h"
#include "ipl_log.h"

static const char *s_valid = "apiVersion: inferplane.io/v1alpha1\n"
                             "kind: InferenceWorkerSet\n"
                             "metadata: {name: s}\n"
                             "spec: {model: m, workers: [{name: w0, url: 'http://h:1'}]}\n"
                             "---\n"
                             "apiVersion: inferplane.io/v1alpha1\n"
                             "kind: InferencePool\n"
                             "metadata: {name: p}\n"
                             "spec: {model: m, targets: [{workerSet: s}]}\n";

static void s_write(const char *dir, const char *text)
{
    char path[256], tmp[256];
    snprintf(path, sizeof path, "%s/p.yaml", dir);
    snprintf(tmp, sizeof tmp, "%s/.p.yaml.tmp", dir);
    FILE *f = fopen(tmp, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    assert_int_equal(rename(tmp, path), 0); // a new inode: the change is always visible
}

static void test_versions_and_last_good_policy(void **state)
{
    (void)state;
    char dir[] = "/tmp/test_policy_server_XXXXXX";
    assert_non_null(mkdtemp(dir));
    ipl_metrics_t *metrics = ipl_metrics_new();
    char err[256], detail[256];
    policy_server_t *s = policy_server_new(dir, "inproc://test-ps-pub", "inproc://test-ps-rep", 100,
                                           metrics, err, sizeof err);
    assert_non_null(s);
    // An empty directory: not ready, and the detail says why.
    assert_int_equal(policy_server_reload(s, false), IPL_E_INVAL);
    assert_false(policy_server_ready(s, detail, sizeof detail));
    assert_non_null(strstr(detail, "no valid policy: 1 error(s):"));
    assert_non_null(strstr(detail, "no *.yaml files"));
    assert_int_equal(policy_server_version(s), 0);
    assert_int_equal(policy_server_reload(s, false), 0); // nothing changed: not even re-read

    s_write(dir, s_valid);
    assert_int_equal(policy_server_reload(s, false), 1);
    uint64_t v1 = policy_server_version(s);
    assert_true(v1 > 0);
    assert_true(policy_server_ready(s, detail, sizeof detail));
    assert_non_null(strstr(detail, "pools=1 workers=1"));
    assert_int_equal(policy_server_reload(s, false), 0);
    assert_int_equal(policy_server_reload(s, true), 0); // re-read, same content: same version
    assert_int_equal(policy_server_version(s), v1);

    s_write(dir, "kind: [\n");
    assert_int_equal(policy_server_reload(s, false), IPL_E_INVAL);
    assert_int_equal(policy_server_version(s), v1);
    assert_true(policy_server_ready(s, detail, sizeof detail)); // still serving v1
    assert_non_null(strstr(detail, "(last good); reload failed with 1 error(s): p.yaml:"));

    char changed[1024];
    snprintf(changed, sizeof changed, "%s", s_valid);
    memcpy(strstr(changed, "http://h:1"), "http://h:2", 10);
    s_write(dir, changed);
    assert_int_equal(policy_server_reload(s, false), 1);
    assert_true(policy_server_version(s) > v1);

    size_t len = 0;
    char *text = ipl_metrics_render(metrics, &len);
    assert_non_null(strstr(text, "inferplane_policy_reloads_total{result=\"changed\"} 2"));
    assert_non_null(strstr(text, "inferplane_policy_reloads_total{result=\"error\"} 2"));
    assert_non_null(strstr(text, "inferplane_policy_files_valid 1"));
    free(text);

    policy_server_destroy(&s);
    assert_null(s);
    // A second server on a taken endpoint fails with a message naming the flag.
    policy_server_t *a = policy_server_new(dir, "inproc://test-ps-pub2", "inproc://test-ps-rep2",
                                           100, metrics, err, sizeof err);
    policy_server_t *b = policy_server_new(dir, "inproc://test-ps-pub2", "inproc://test-ps-rep3",
                                           100, metrics, err, sizeof err);
    assert_null(b);
    assert_non_null(strstr(err, "cannot bind --pub \"inproc://test-ps-pub2\""));
    policy_server_destroy(&a);
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
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_versions_and_last_good_policy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
