/*
 * gateway_failover: what is retried (connect, 5xx, 429, a first-byte timeout; not 2xx, 4xx,
 * the gateway's own errors), --max-attempts and the budget bound retries (counted by reason,
 * refusals by why), the avoid list keeps a request's failed targets before the breakers'
 * (deduplicated, bounded; relaxed: the breakers' first, then all), reports drive the breakers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gateway_failover.h"
#include "ipl_error.h"
#include "ipl_metrics.h"

static double s_value(ipl_metrics_t *m, const char *needle)
{
    size_t len = 0;
    char *text = ipl_metrics_render(m, &len);
    const char *at = strstr(text, needle);
    double v = at ? atof(at + strlen(needle)) : -1;
    free(text);
    return v;
}

static void test_classify(void **state)
{
    (void)state;
    assert_int_equal(gateway_failover_classify(IPL_E_IO, 0), GATEWAY_RETRY_CONNECT);
    assert_int_equal(gateway_failover_classify(IPL_E_TIMEOUT, 200),
                     GATEWAY_RETRY_FIRST_BYTE_TIMEOUT);
    assert_int_equal(gateway_failover_classify(0, 500), GATEWAY_RETRY_STATUS_5XX);
    assert_int_equal(gateway_failover_classify(0, 503), GATEWAY_RETRY_STATUS_5XX);
    assert_int_equal(gateway_failover_classify(0, 429), GATEWAY_RETRY_STATUS_429);
    assert_int_equal(gateway_failover_classify(0, 200), GATEWAY_RETRY_NONE);
    assert_int_equal(gateway_failover_classify(0, 400), GATEWAY_RETRY_NONE);
    assert_int_equal(gateway_failover_classify(0, 404), GATEWAY_RETRY_NONE);
    assert_int_equal(gateway_failover_classify(IPL_E_INVAL, 0), GATEWAY_RETRY_NONE);
    assert_int_equal(gateway_failover_classify(IPL_E_AGAIN, 0), GATEWAY_RETRY_NONE);
    assert_string_equal(gateway_failover_reason_name(GATEWAY_RETRY_STATUS_429), "status_429");
    assert_string_equal(gateway_failover_reason_name(GATEWAY_RETRY_NREASONS), "none");
}

static void test_attempts_and_budget(void **state)
{
    (void)state;
    ipl_metrics_t *m = ipl_metrics_new();
    gateway_failover_config_t cfg = {.max_attempts = 3, .budget = {.percent = 0, .min_retries = 3}};
    gateway_failover_t *f = gateway_failover_new(&cfg, m);
    assert_non_null(f);
    uint64_t t = 1000;
    gateway_failover_request(f, t);
    assert_false(gateway_failover_retry(f, 1, GATEWAY_RETRY_NONE, t));
    assert_true(gateway_failover_could_retry(f, 1, t));
    assert_true(gateway_failover_retry(f, 1, GATEWAY_RETRY_CONNECT, t));
    assert_true(gateway_failover_retry(f, 2, GATEWAY_RETRY_STATUS_5XX, t));
    assert_false(gateway_failover_could_retry(f, 3, t));
    assert_false(gateway_failover_retry(f, 3, GATEWAY_RETRY_STATUS_5XX, t)); /* 3 attempts */
    assert_true(gateway_failover_retry(f, 1, GATEWAY_RETRY_STATUS_429, t));
    assert_false(gateway_failover_could_retry(f, 1, t)); /* the floor of 3 is spent */
    assert_false(gateway_failover_retry(f, 1, GATEWAY_RETRY_FIRST_BYTE_TIMEOUT, t));
    assert_true(s_value(m, "inferplane_gateway_retries_total{reason=\"connect\"} ") == 1);
    assert_true(s_value(m, "inferplane_gateway_retries_total{reason=\"status_5xx\"} ") == 1);
    assert_true(s_value(m, "inferplane_gateway_retries_total{reason=\"status_429\"} ") == 1);
    assert_true(s_value(m, "retries_total{reason=\"first_byte_timeout\"} ") == 0);
    assert_true(s_value(m, "retries_denied_total{why=\"attempts\"} ") == 1);
    assert_true(s_value(m, "retries_denied_total{why=\"budget\"} ") == 1);
    gateway_failover_destroy(&f);
    assert_null(f);
    ipl_metrics_destroy(&m);
}

static void test_avoid_list(void **state)
{
    (void)state;
    ipl_metrics_t *m = ipl_metrics_new();
    gateway_failover_config_t cfg = {.breaker = {.failures = 1, .cooldown_ms = 1000}};
    gateway_failover_t *f = gateway_failover_new(&cfg, m);
    gateway_failover_report(f, "sick", GATEWAY_RETRY_CONNECT, 0); /* opens it */
    gateway_failover_report(f, "w1", GATEWAY_RETRY_NONE, 0);
    gateway_avoid_t a;
    gateway_failover_avoid_init(f, &a, 10);
    assert_int_equal(a.n, 1);
    assert_int_equal(a.nfailed, 0);
    assert_string_equal(a.list[0], "sick");
    gateway_avoid_add(&a, "w0");
    gateway_avoid_add(&a, "w0"); /* once */
    assert_int_equal(a.n, 2);
    assert_int_equal(a.nfailed, 1);
    assert_string_equal(a.list[0], "w0");
    assert_string_equal(a.list[1], "sick");
    gateway_avoid_add(&a, "sick"); /* it failed this request too: among the failed */
    assert_int_equal(a.nfailed, 2);
    assert_true(gateway_avoid_relax(&a)); /* no breakers' names: every name goes */
    assert_int_equal(a.n, 0);
    assert_false(gateway_avoid_relax(&a));
    gateway_failover_avoid_init(f, &a, 20);
    gateway_avoid_add(&a, "w2");
    assert_true(gateway_avoid_relax(&a)); /* the breakers' first */
    assert_int_equal(a.n, 1);
    assert_string_equal(a.list[0], "w2");
    assert_true(gateway_avoid_relax(&a));
    assert_int_equal(a.n, 0);
    /* bounded: a full list of failed names takes no more */
    gateway_failover_avoid_init(f, &a, 30);
    for (int i = 0; i < GATEWAY_AVOID_MAX + 5; i++) {
        char name[16];
        snprintf(name, sizeof name, "w%d", i);
        gateway_avoid_add(&a, name);
    }
    assert_int_equal(a.n, GATEWAY_AVOID_MAX);
    assert_int_equal(a.nfailed, GATEWAY_AVOID_MAX);
    assert_string_equal(a.list[GATEWAY_AVOID_MAX - 1], "w31");
    /* the breaker closes on a success after its cooldown */
    gateway_failover_landed(f, "sick", 1500);
    gateway_failover_report(f, "sick", GATEWAY_RETRY_NONE, 1600);
    gateway_failover_avoid_init(f, &a, 1700);
    assert_int_equal(a.n, 0);
    assert_int_equal(gateway_breaker_state(gateway_failover_breaker(f), "sick", 1700),
                     GATEWAY_BREAKER_CLOSED);
    gateway_failover_destroy(&f);
    ipl_metrics_destroy(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_classify),
        cmocka_unit_test(test_attempts_and_budget),
        cmocka_unit_test(test_avoid_list),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
