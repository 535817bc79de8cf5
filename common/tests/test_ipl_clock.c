/*
 * Unit tests of ipl_clock: unit conversions agree, monotonic time never goes back, sleeps last
 * at least as long as asked even when a signal interrupts them, and the RFC 3339 text is
 * well-formed and matches the wall clock.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <signal.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>

#include "ipl_clock.h"

static void test_monotonic_units_agree(void **state)
{
    (void)state;
    uint64_t ns = ipl_mono_ns();
    uint64_t us = ipl_mono_us();
    uint64_t ms = ipl_mono_ms();
    uint64_t ns2 = ipl_mono_ns();
    assert_true(ns > 0);
    assert_true(ns2 >= ns);
    assert_true(us >= ns / 1000 && us <= ns2 / 1000);
    assert_true(ms >= ns / 1000000 && ms <= ns2 / 1000000);
    uint64_t last = ipl_mono_ns();
    for (int i = 0; i < 10000; i++) {
        uint64_t now = ipl_mono_ns();
        assert_true(now >= last);
        last = now;
    }
}

static void test_wall_clock(void **state)
{
    (void)state;
    /* time(2) reads a coarse clock that may lag CLOCK_REALTIME by a tick: compare with
     * CLOCK_REALTIME itself */
    struct timespec t0, t1;
    clock_gettime(CLOCK_REALTIME, &t0);
    uint64_t ms = ipl_wall_ms();
    double s = ipl_wall_s();
    clock_gettime(CLOCK_REALTIME, &t1);
    time_t before = t0.tv_sec, after = t1.tv_sec;
    assert_true(ms / 1000 >= (uint64_t)before && ms / 1000 <= (uint64_t)after);
    assert_true(s >= (double)before && s < (double)after + 1.0);
    assert_true(s - (double)ms / 1000.0 < 1.0 && s - (double)ms / 1000.0 > -0.001);
}

static void test_sleep(void **state)
{
    (void)state;
    uint64_t start = ipl_mono_ns();
    ipl_sleep_ms(30);
    uint64_t elapsed = ipl_mono_ns() - start;
    assert_true(elapsed >= 30000000ull);
    assert_true(elapsed < 1000000000ull);
    start = ipl_mono_ns();
    ipl_sleep_ms(0);
    assert_true(ipl_mono_ns() - start < 100000000ull);
}

static volatile sig_atomic_t s_alarms;
static void s_on_alarm(int signum)
{
    (void)signum;
    s_alarms++;
}

static void test_sleep_resumes_after_signal(void **state)
{
    (void)state;
    struct sigaction action = {0}, old;
    action.sa_handler = s_on_alarm;
    sigemptyset(&action.sa_mask); // no SA_RESTART: the sleep sees EINTR
    sigaction(SIGALRM, &action, &old);
    struct itimerval timer = {.it_interval = {0, 5000}, .it_value = {0, 5000}};
    setitimer(ITIMER_REAL, &timer, NULL);

    uint64_t start = ipl_mono_ns();
    ipl_sleep_ms(60);
    uint64_t elapsed = ipl_mono_ns() - start;

    struct itimerval off = {0};
    setitimer(ITIMER_REAL, &off, NULL);
    sigaction(SIGALRM, &old, NULL);
    assert_true(s_alarms > 0);
    assert_true(elapsed >= 60000000ull);
    assert_true(elapsed < 2000000000ull);
}

static void test_iso8601(void **state)
{
    (void)state;
    char buf[32];
    memset(buf, 'x', sizeof buf);
    uint64_t before = ipl_wall_ms();
    assert_ptr_equal(ipl_wall_iso8601(buf, sizeof buf), buf);
    uint64_t after = ipl_wall_ms();
    // 2026-11-30T16:50:00.123Z
    assert_int_equal(strlen(buf), 24);
    const char *pattern = "dddd-dd-ddTdd:dd:dd.dddZ";
    for (int i = 0; i < 24; i++) {
        if (pattern[i] == 'd')
            assert_true(buf[i] >= '0' && buf[i] <= '9');
        else
            assert_int_equal(buf[i], pattern[i]);
    }
    struct tm tm = {0};
    assert_non_null(strptime(buf, "%Y-%m-%dT%H:%M:%S", &tm));
    uint64_t parsed = (uint64_t)timegm(&tm) * 1000 + (uint64_t)atoi(buf + 20);
    assert_true(parsed >= before && parsed <= after);

    // Exactly 25 bytes is enough; less truncates but stays NUL-terminated.
    char exact[25];
    ipl_wall_iso8601(exact, sizeof exact);
    assert_int_equal(strlen(exact), 24);
    char small[8];
    ipl_wall_iso8601(small, sizeof small);
    assert_int_equal(strlen(small), 7);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_monotonic_units_agree),
        cmocka_unit_test(test_wall_clock),
        cmocka_unit_test(test_sleep),
        cmocka_unit_test(test_sleep_resumes_after_signal),
        cmocka_unit_test(test_iso8601),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
