/*
 * ipl_curve: off changes nothing; keygen; setup errors; on, a client with the cluster key gets
 * through, and a plaintext client, a client with a key not in the directory and a client that
 * expects another server key are refused and counted; a key added to the directory is let in.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <czmq.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ipl_curve.h"
#include "ipl_error.h"
#include "ipl_log.h"
#include "ipl_metrics.h"

static char s_dir[64];

static int s_setup(void **state)
{
    (void)state;
    snprintf(s_dir, sizeof s_dir, "/tmp/ipl-curve-XXXXXX");
    assert_non_null(mkdtemp(s_dir));
    char err[512];
    assert_int_equal(ipl_curve_keygen(s_dir, false, err, sizeof err), 0);
    return 0;
}

static int s_teardown(void **state)
{
    (void)state;
    ipl_curve_shutdown();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", s_dir);
    return system(cmd) == 0 ? 0 : -1;
}

static double s_refused(ipl_metrics_t *m, const char *reason)
{
    char labels[64];
    snprintf(labels, sizeof labels, "reason=\"%s\"", reason);
    return ipl_metric_value(ipl_metrics_counter(m, IPL_CURVE_REFUSED_METRIC, "", labels));
}

/* A PULL bound on an ephemeral port; its endpoint in ep. */
static zsock_t *s_pull(char *ep, size_t size, bool curve)
{
    zsock_t *pull = zsock_new(ZMQ_PULL);
    assert_non_null(pull);
    zsock_set_linger(pull, 0);
    if (curve) ipl_curve_server(pull);
    assert_true(zsock_bind(pull, "tcp://127.0.0.1:*") > 0);
    snprintf(ep, size, "%s", zsock_endpoint(pull));
    return pull;
}

/* Sends "hello" from push and reports whether pull got it within ms. */
static bool s_delivered(zsock_t *push, zsock_t *pull, int ms)
{
    zsock_set_sndtimeo(push, 0);
    zstr_send(push, "hello"); /* queued until a connection completes its handshake */
    zsock_set_rcvtimeo(pull, ms);
    char *got = zstr_recv(pull);
    bool ok = got && !strcmp(got, "hello");
    free(got);
    return ok;
}

static bool s_wait_refused(ipl_metrics_t *m, const char *reason, double at_least, int ms)
{
    for (int i = 0; i < ms / 20; i++) {
        if (s_refused(m, reason) >= at_least) return true;
        zclock_sleep(20);
    }
    return false;
}

static void test_off_changes_nothing(void **state)
{
    (void)state;
    assert_false(ipl_curve_enabled());
    assert_null(ipl_curve_public_key());
    zsock_t *s = zsock_new(ZMQ_PULL);
    ipl_curve_server(s);
    ipl_curve_client(s);
    assert_int_equal(zsock_curve_server(s), 0);
    assert_int_equal(zsock_mechanism(s), ZMQ_NULL);
    zsock_destroy(&s);
    /* and plaintext peers talk as before */
    char ep[128];
    zsock_t *pull = s_pull(ep, sizeof ep, true);
    zsock_t *push = zsock_new_push(ep);
    assert_true(s_delivered(push, pull, 2000));
    zsock_destroy(&push);
    zsock_destroy(&pull);
}

static void test_keygen(void **state)
{
    (void)state;
    char err[512], path[128];
    snprintf(path, sizeof path, "%s/%s_secret", s_dir, IPL_CURVE_CERT);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    zcert_t *before = zcert_load(path);
    assert_non_null(before);
    /* no overwrite without --force */
    assert_int_equal(ipl_curve_keygen(s_dir, false, err, sizeof err), IPL_E_INVAL);
    assert_non_null(strstr(err, "--force"));
    assert_int_equal(ipl_curve_keygen(s_dir, true, err, sizeof err), 0);
    zcert_t *after = zcert_load(path);
    assert_non_null(after);
    assert_string_not_equal(zcert_public_txt(before), zcert_public_txt(after));
    zcert_destroy(&before);
    zcert_destroy(&after);
}

static void test_setup_errors(void **state)
{
    (void)state;
    char err[1024];
    assert_int_equal(ipl_curve_setup("/nonexistent/ipl", "--curve-dir", NULL, err, sizeof err),
                     IPL_E_IO);
    assert_non_null(strstr(err, "inferplanectl curve-keygen /nonexistent/ipl"));
    assert_false(ipl_curve_enabled());
    /* a secret file whose public key is another's */
    char bad[128], path[192];
    snprintf(bad, sizeof bad, "%s/bad", s_dir);
    assert_int_equal(ipl_curve_keygen(bad, false, err, sizeof err), 0);
    zcert_t *other = zcert_new();
    snprintf(path, sizeof path, "%s/%s_secret", bad, IPL_CURVE_CERT);
    zcert_t *mine = zcert_load(path);
    zcert_t *mixed = zcert_new_from(zcert_public_key(other), zcert_secret_key(mine));
    assert_int_equal(zcert_save_secret(mixed, path), 0);
    assert_int_equal(ipl_curve_setup(bad, "--curve-dir", NULL, err, sizeof err), IPL_E_IO);
    assert_non_null(strstr(err, "matches its secret-key"));
    zcert_destroy(&other);
    zcert_destroy(&mine);
    zcert_destroy(&mixed);
    assert_false(ipl_curve_enabled());
}

static void test_on_admits_the_cluster_and_refuses_others(void **state)
{
    (void)state;
    char err[1024], ep[128];
    ipl_metrics_t *m = ipl_metrics_new();
    assert_int_equal(ipl_curve_setup(s_dir, "--curve-dir", m, err, sizeof err), 0);
    assert_true(ipl_curve_enabled());
    assert_int_equal(strlen(ipl_curve_public_key()), 40);
    assert_int_equal(ipl_curve_setup(s_dir, "--curve-dir", m, err, sizeof err), IPL_E_INVAL);
    zsock_t *pull = s_pull(ep, sizeof ep, true);
    assert_int_equal(zsock_curve_server(pull), 1);

    /* a member of the cluster */
    zsock_t *push = zsock_new(ZMQ_PUSH);
    ipl_curve_client(push);
    assert_int_equal(zsock_connect(push, "%s", ep), 0);
    assert_true(s_delivered(push, pull, 3000));
    zsock_destroy(&push);

    /* plaintext: never delivered, counted */
    push = zsock_new_push(ep);
    assert_false(s_delivered(push, pull, 500));
    assert_true(s_wait_refused(m, "plaintext", 1, 2000));
    zsock_destroy(&push);

    /* knows the server key, but its own key is not in the directory */
    zcert_t *stranger = zcert_new();
    push = zsock_new(ZMQ_PUSH);
    zcert_apply(stranger, push);
    zsock_set_curve_serverkey(push, ipl_curve_public_key());
    zsock_connect(push, "%s", ep);
    assert_false(s_delivered(push, pull, 500));
    assert_true(s_wait_refused(m, "unknown_key", 1, 2000));
    zsock_destroy(&push);

    /* expects another server key: the handshake fails */
    zcert_t *wrong = zcert_new();
    push = zsock_new(ZMQ_PUSH);
    zcert_apply(stranger, push);
    zsock_set_curve_serverkey(push, zcert_public_txt(wrong));
    zsock_connect(push, "%s", ep);
    assert_false(s_delivered(push, pull, 500));
    assert_true(s_wait_refused(m, "handshake", 1, 2000));
    zsock_destroy(&push);
    assert_true(ipl_curve_refused() >= 3);

    /* the operator adds the stranger's public certificate: let in after the reload */
    char path[128];
    snprintf(path, sizeof path, "%s/tool.key", s_dir);
    assert_int_equal(zcert_save_public(stranger, path), 0);
    zclock_sleep(1100);
    push = zsock_new(ZMQ_PUSH);
    zcert_apply(stranger, push);
    zsock_set_curve_serverkey(push, ipl_curve_public_key());
    zsock_connect(push, "%s", ep);
    assert_true(s_delivered(push, pull, 3000));
    zsock_destroy(&push);
    unlink(path);

    zcert_destroy(&stranger);
    zcert_destroy(&wrong);
    zsock_destroy(&pull);
    ipl_curve_shutdown();
    assert_false(ipl_curve_enabled());
    /* and again, as a test process or a restart in place would */
    assert_int_equal(ipl_curve_setup(s_dir, NULL, m, err, sizeof err), 0);
    ipl_curve_shutdown();
    ipl_metrics_destroy(&m);
}

int main(void)
{
    ipl_log_set_level(IPL_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_off_changes_nothing),
        cmocka_unit_test(test_keygen),
        cmocka_unit_test(test_setup_errors),
        cmocka_unit_test(test_on_admits_the_cluster_and_refuses_others),
    };
    return cmocka_run_group_tests(tests, s_setup, s_teardown);
}
