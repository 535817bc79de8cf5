/*
 * Unit tests of gateway_auth: keys decide the tenant (401 missing/unknown, 403 disabled, the
 * OpenAI error fields), a trusted header only when configured, anonymous without keys, and
 * the counters.
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

#include "gateway_auth.h"
#include "ipl_log.h"

#define KA "ipk-unit-team-a-0123456789"
#define KC "ipk-unit-team-c-0123456789"

static char s_path[64];

static int s_setup(void **state)
{
    (void)state;
    snprintf(s_path, sizeof s_path, "/tmp/ipl-auth-XXXXXX");
    int fd = mkstemp(s_path);
    assert_true(fd >= 0);
    const char *text = "tenants:\n  - {name: team-a, keys: [" KA "]}\n"
                       "  - {name: team-c, disabled: true, keys: [" KC "]}\n";
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return 0;
}

static int s_teardown(void **state)
{
    (void)state;
    unlink(s_path);
    return 0;
}

static double s_count(ipl_metrics_t *m, const char *result)
{
    char labels[64];
    snprintf(labels, sizeof labels, "result=\"%s\"", result);
    return ipl_metric_value(ipl_metrics_counter(m, "inferplane_gateway_auth_total", "", labels));
}

static void test_keys(void **state)
{
    (void)state;
    ipl_metrics_t *m = ipl_metrics_new();
    char err[256], tenant[64];
    gateway_auth_config_t cfg = {.keys_file = s_path};
    gateway_auth_t *a = gateway_auth_new(&cfg, m, err, sizeof err);
    assert_non_null(a);
    gateway_api_error_t e = {0};
    assert_int_equal(gateway_auth_check_headers(a, NULL, "Bearer " KA, NULL, tenant, 64, &e), 0);
    assert_string_equal(tenant, "team-a");
    assert_int_equal(gateway_auth_check_headers(a, NULL, NULL, KA, tenant, 64, &e), 0);
    assert_string_equal(tenant, "team-a");
    // a client's tenant header is ignored: nothing is trusted
    assert_int_equal(gateway_auth_check_headers(a, "team-z", NULL, NULL, tenant, 64, &e), -1);
    assert_int_equal(e.status, 401);
    assert_string_equal(e.code, "missing_api_key");
    assert_string_equal(tenant, "");
    assert_int_equal(gateway_auth_check_headers(a, NULL, "Bearer ipk-wrong-000000000", NULL,
                                                tenant, 64, &e),
                     -1);
    assert_int_equal(e.status, 401);
    assert_string_equal(e.code, "invalid_api_key");
    assert_null(strstr(e.message, "ipk-"));
    assert_int_equal(gateway_auth_check_headers(a, NULL, "Bearer " KC, NULL, tenant, 64, &e), -1);
    assert_int_equal(e.status, 403);
    assert_string_equal(e.type, "permission_error");
    assert_non_null(strstr(e.message, "team-c"));
    assert_string_equal(tenant, "");
    assert_true(s_count(m, "ok") == 2);
    assert_true(s_count(m, "missing") == 1);
    assert_true(s_count(m, "unknown") == 1);
    assert_true(s_count(m, "disabled") == 1);
    gateway_auth_destroy(&a);
    assert_null(a);
    // a keys file that does not load is a start-up error naming the flag
    cfg.keys_file = "/nonexistent/keys.yaml";
    assert_null(gateway_auth_new(&cfg, m, err, sizeof err));
    assert_non_null(strstr(err, "--keys-file: /nonexistent/keys.yaml"));
    ipl_metrics_destroy(&m);
}

static void test_trusted_header_and_anonymous(void **state)
{
    (void)state;
    ipl_metrics_t *m = ipl_metrics_new();
    char err[256], tenant[64];
    gateway_auth_config_t cfg = {.keys_file = s_path, .tenant_header = "x-forwarded-tenant"};
    gateway_auth_t *a = gateway_auth_new(&cfg, m, err, sizeof err);
    assert_non_null(a);
    gateway_api_error_t e = {0};
    assert_int_equal(gateway_auth_check_headers(a, "proxy-t", NULL, NULL, tenant, 64, &e), 0);
    assert_string_equal(tenant, "proxy-t");
    assert_int_equal(gateway_auth_check_headers(a, "bad tenant", NULL, NULL, tenant, 64, &e), -1);
    assert_int_equal(e.status, 400);
    assert_int_equal(gateway_auth_check_headers(a, NULL, "Bearer " KA, NULL, tenant, 64, &e), 0);
    assert_string_equal(tenant, "team-a"); // no header: the key decides
    gateway_auth_destroy(&a);
    gateway_auth_config_t none = {0};
    a = gateway_auth_new(&none, m, err, sizeof err);
    assert_non_null(a);
    assert_int_equal(gateway_auth_check_headers(a, "x", "Bearer whatever", NULL, tenant, 64, &e),
                     0);
    assert_string_equal(tenant, ""); // anonymous: neither the header nor the key names one
    assert_true(s_count(m, "anonymous") == 1);
    assert_true(s_count(m, "trusted_header") == 1);
    gateway_auth_destroy(&a);
    ipl_metrics_destroy(&m);
}

int main(void)
{
    ipl_log_set_level(IPL_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_keys, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_trusted_header_and_anonymous, s_setup, s_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
