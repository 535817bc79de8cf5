/*
 * gateway_breaker: closed → open after `failures` consecutive failures (a success in between
 * resets the count), open targets avoided, half-open after the cooldown (not avoided: the next
 * landing is the probe, then avoided while it is out), the probe's success closes and its
 * failure opens again, a lost probe is given up after the longest cooldown; the cooldown
 * backs off (the base first, doubled by each failed probe in a row, capped, back to the base
 * after a success; a failure while open restarts the cooldown without doubling it); the
 * metrics follow; the number of targets tracked is bounded. Time is the test's.
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

/* Fails the half-open probe of `target` at `t` (asserting it is half-open then, and was still
 * open 1 ms before): the cooldown that ended at `t` was the one expected. */
static void s_probe_fails(gateway_breaker_t *b, const char *target, uint64_t t)
{
    assert_int_equal(gateway_breaker_state(b, target, t - 1), GATEWAY_BREAKER_OPEN);
    assert_int_equal(gateway_breaker_state(b, target, t), GATEWAY_BREAKER_HALF_OPEN);
    gateway_breaker_landed(b, target, t);
    gateway_breaker_failure(b, target, t);
    assert_int_equal(gateway_breaker_state(b, target, t), GATEWAY_BREAKER_OPEN);
}

static const char *const s_cool = "inferplane_gateway_breaker_cooldown_seconds{target=\"w\"} ";

static void test_the_cooldown_backs_off(void **state)
{
    (void)state;
    ipl_metrics_t *m = ipl_metrics_new();
    gateway_breaker_config_t cfg = {.failures = 2, .base_cooldown_ms = 100, .cooldown_ms = 1000};
    gateway_breaker_t *b = gateway_breaker_new(&cfg, m);
    gateway_breaker_failure(b, "w", 0);
    gateway_breaker_failure(b, "w", 0); /* open for the base cooldown: 100 */
    assert_true(s_value(m, s_cool) == 0.1);
    s_probe_fails(b, "w", 100); /* open for 200 */
    assert_true(s_value(m, s_cool) == 0.2);
    s_probe_fails(b, "w", 300); /* 400 */
    s_probe_fails(b, "w", 700); /* 800 */
    assert_true(s_value(m, s_cool) == 0.8);
    s_probe_fails(b, "w", 1500); /* 1,600 capped: 1,000 */
    assert_true(s_value(m, s_cool) == 1);
    s_probe_fails(b, "w", 2500); /* stays at the cap */
    assert_true(s_value(m, s_cool) == 1);
    /* the probe succeeds: closed, and the next opening starts from the base again */
    gateway_breaker_landed(b, "w", 3500);
    gateway_breaker_success(b, "w", 3500);
    assert_int_equal(gateway_breaker_state(b, "w", 3500), GATEWAY_BREAKER_CLOSED);
    assert_true(s_value(m, s_cool) == 0);
    gateway_breaker_failure(b, "w", 4000);
    assert_int_equal(gateway_breaker_state(b, "w", 4000), GATEWAY_BREAKER_CLOSED); /* 1 of 2 */
    gateway_breaker_failure(b, "w", 4000);
    assert_true(s_value(m, s_cool) == 0.1);
    s_probe_fails(b, "w", 4100); /* 200 again, not 2,000 */
    s_probe_fails(b, "w", 4300);
    /* a success that raced the opening (an attempt sent before it) also resets the backoff */
    gateway_breaker_success(b, "w", 4400);
    gateway_breaker_failure(b, "w", 4500);
    gateway_breaker_failure(b, "w", 4500);
    s_probe_fails(b, "w", 4600);
    assert_true(s_value(m, "transitions_total{target=\"w\",to=\"open\"} ") == 11);
    assert_true(s_value(m, "transitions_total{target=\"w\",to=\"closed\"} ") == 2);
    gateway_breaker_destroy(&b);
    ipl_metrics_destroy(&m);
}

static void test_a_failure_while_open_restarts_the_cooldown(void **state)
{
    (void)state;
    gateway_breaker_config_t cfg = {.failures = 1, .base_cooldown_ms = 100, .cooldown_ms = 1000};
    gateway_breaker_t *b = gateway_breaker_new(&cfg, NULL);
    gateway_breaker_failure(b, "w", 0);
    gateway_breaker_failure(b, "w", 50);  /* sent before it opened, failed since */
    s_probe_fails(b, "w", 150);           /* 100 from the last failure, not doubled */
    gateway_breaker_failure(b, "w", 250); /* during the 200 of the second opening */
    s_probe_fails(b, "w", 450);           /* 200 from then: the backoff kept, not doubled */
    s_probe_fails(b, "w", 850);           /* the probe doubles it: 400 */
    gateway_breaker_destroy(&b);
}

static void test_an_abandoned_probe_waits_the_longest_cooldown(void **state)
{
    (void)state;
    ipl_metrics_t *m = ipl_metrics_new();
    gateway_breaker_config_t cfg = {.failures = 1, .base_cooldown_ms = 100, .cooldown_ms = 1000};
    gateway_breaker_t *b = gateway_breaker_new(&cfg, m);
    gateway_breaker_failure(b, "w", 0);
    gateway_breaker_landed(b, "w", 100); /* the probe; its client goes away: never reported */
    /* still out after the current cooldown (a probe reports within its first-byte timeout,
     * which may be longer): avoided, so no second request stalls on the target */
    s_avoid(b, 200, "w");
    s_avoid(b, 1099, "w");
    assert_int_equal(s_avoid(b, 1100, NULL), 0); /* given up: the next request probes */
    assert_int_equal(gateway_breaker_state(b, "w", 1100), GATEWAY_BREAKER_HALF_OPEN);
    assert_true(s_value(m, s_cool) == 0.1); /* said nothing about the target */
    gateway_breaker_landed(b, "w", 1200);
    s_avoid(b, 1201, "w");
    gateway_breaker_failure(b, "w", 1300); /* that probe failed: twice the base */
    assert_true(s_value(m, s_cool) == 0.2);
    s_probe_fails(b, "w", 1500);
    gateway_breaker_destroy(&b);
    ipl_metrics_destroy(&m);
}

static void test_cooldown_defaults_and_bounds(void **state)
{
    (void)state;
    gateway_breaker_t *b = gateway_breaker_new(NULL, NULL); /* 5 failures, 1 s, up to 10 s */
    for (int i = 0; i < 5; i++)
        gateway_breaker_failure(b, "w", 0);
    s_probe_fails(b, "w", 1000);
    s_probe_fails(b, "w", 3000);
    s_probe_fails(b, "w", 7000);
    s_probe_fails(b, "w", 15000);
    s_probe_fails(b, "w", 25000); /* 16 s capped at 10 s */
    s_probe_fails(b, "w", 35000);
    gateway_breaker_destroy(&b);
    /* a base above the cap is the cap */
    gateway_breaker_config_t cfg = {.failures = 1, .base_cooldown_ms = 5000, .cooldown_ms = 300};
    b = gateway_breaker_new(&cfg, NULL);
    gateway_breaker_failure(b, "w", 0);
    s_probe_fails(b, "w", 300);
    s_probe_fails(b, "w", 600);
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
        cmocka_unit_test(test_the_cooldown_backs_off),
        cmocka_unit_test(test_a_failure_while_open_restarts_the_cooldown),
        cmocka_unit_test(test_an_abandoned_probe_waits_the_longest_cooldown),
        cmocka_unit_test(test_cooldown_defaults_and_bounds),
        cmocka_unit_test(test_targets_are_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
