/*
 * gateway_breaker: closed → open after `failures` consecutive failures (a success in between
 * resets the count), open targets avoided, half-open after the cooldown (not avoided: the next
 * landing is the probe, then avoided while it is out), the probe's success closes and its
 * failure opens again, a lost probe is given up after another cooldown; the metrics follow;
 * the number of targets tracked is bounded. Time is the test's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gateway_breaker.h"
#include "ipl_metrics.h"

static size_t s_avoid(gateway_breaker_t *b, uint64_t now, const char *expect)
{
    char names[8][GATEWAY_BREAKER_NAME_MAX];
    size_t n = gateway_breaker_avoid(b, now, names, 8);
    if (expect) {
        assert_int_equal(n, 1);
        assert_string_equal(names[0], expect);
    }
    return n;
}

static double s_value(ipl_metrics_t *m, const char *needle)
{
    size_t len = 0;
    char *text = ipl_metrics_render(m, &len);
    assert_non_null(text);
    const char *at = strstr(text, needle);
    double v = at ? atof(at + strlen(needle)) : -1;
    free(text);
    return v;
}

static void test_opens_probes_and_closes(void **state)
{
    (void)state;
    ipl_metrics_t *m = ipl_metrics_new();
    gateway_breaker_config_t cfg = {.failures = 3, .cooldown_ms = 1000};
    gateway_breaker_t *b = gateway_breaker_new(&cfg, m);
    assert_non_null(b);
    uint64_t t = 5000;
    assert_int_equal(gateway_breaker_state(b, "w0", t), GATEWAY_BREAKER_CLOSED);
    gateway_breaker_failure(b, "w0", t);
    gateway_breaker_failure(b, "w0", t);
    gateway_breaker_success(b, "w0", t); /* resets the count */
    gateway_breaker_failure(b, "w0", t);
    gateway_breaker_failure(b, "w0", t);
    assert_int_equal(gateway_breaker_state(b, "w0", t), GATEWAY_BREAKER_CLOSED);
    assert_int_equal(s_avoid(b, t, NULL), 0);
    assert_int_equal(gateway_breaker_unclosed(b), 0);
    gateway_breaker_failure(b, "w0", t); /* the third in a row */
    assert_int_equal(gateway_breaker_state(b, "w0", t), GATEWAY_BREAKER_OPEN);
    assert_int_equal(gateway_breaker_unclosed(b), 1);
    s_avoid(b, t + 999, "w0");
    assert_true(s_value(m, "inferplane_gateway_breaker_state{target=\"w0\"} ") == 1);
    /* the cooldown passed: half-open, not avoided, until a request lands there */
    assert_int_equal(s_avoid(b, t + 1000, NULL), 0);
    assert_int_equal(gateway_breaker_state(b, "w0", t + 1000), GATEWAY_BREAKER_HALF_OPEN);
    gateway_breaker_landed(b, "w0", t + 1001);
    s_avoid(b, t + 1002, "w0");                 /* its probe is out */
    gateway_breaker_failure(b, "w0", t + 1100); /* the probe failed: open again */
    assert_int_equal(gateway_breaker_state(b, "w0", t + 1100), GATEWAY_BREAKER_OPEN);
    s_avoid(b, t + 2000, "w0");
    gateway_breaker_landed(b, "w0", t + 2100); /* half-open again, and its probe */
    gateway_breaker_success(b, "w0", t + 2200);
    assert_int_equal(gateway_breaker_state(b, "w0", t + 2200), GATEWAY_BREAKER_CLOSED);
    assert_int_equal(gateway_breaker_unclosed(b), 0);
    assert_int_equal(s_avoid(b, t + 2200, NULL), 0);
    assert_true(s_value(m, "inferplane_gateway_breaker_state{target=\"w0\"} ") == 0);
    assert_true(s_value(m, "transitions_total{target=\"w0\",to=\"open\"} ") == 2);
    assert_true(s_value(m, "transitions_total{target=\"w0\",to=\"half_open\"} ") == 2);
    assert_true(s_value(m, "transitions_total{target=\"w0\",to=\"closed\"} ") == 1);
    gateway_breaker_destroy(&b);
    assert_null(b);
    ipl_metrics_destroy(&m);
}

static void test_a_lost_probe_is_given_up(void **state)
{
    (void)state;
    gateway_breaker_config_t cfg = {.failures = 1, .cooldown_ms = 100};
    gateway_breaker_t *b = gateway_breaker_new(&cfg, NULL);
    gateway_breaker_failure(b, "p", 0);
    gateway_breaker_landed(b, "p", 150); /* the probe, never reported */
    s_avoid(b, 200, "p");
    assert_int_equal(s_avoid(b, 250, NULL), 0); /* another cooldown: the next one may go */
    gateway_breaker_landed(b, "p", 260);
    s_avoid(b, 270, "p");
    /* other targets are independent */
    assert_int_equal(gateway_breaker_state(b, "q", 270), GATEWAY_BREAKER_CLOSED);
    gateway_breaker_destroy(&b);
}

static void test_targets_are_bounded(void **state)
{
    (void)state;
    gateway_breaker_config_t cfg = {.failures = 1, .cooldown_ms = 100, .max_targets = 2};
    gateway_breaker_t *b = gateway_breaker_new(&cfg, NULL);
    gateway_breaker_failure(b, "a", 0);
    gateway_breaker_failure(b, "b", 0);
    gateway_breaker_failure(b, "c", 0); /* no room: never opened */
    assert_int_equal(gateway_breaker_state(b, "c", 0), GATEWAY_BREAKER_CLOSED);
    assert_int_equal(s_avoid(b, 0, NULL), 2);
    char big[GATEWAY_BREAKER_NAME_MAX + 8];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    gateway_breaker_failure(b, big, 0); /* too long a name: ignored */
    gateway_breaker_failure(b, NULL, 0);
    gateway_breaker_success(b, "nobody", 0);
    gateway_breaker_destroy(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_opens_probes_and_closes),
        cmocka_unit_test(test_a_lost_probe_is_given_up),
        cmocka_unit_test(test_targets_are_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
