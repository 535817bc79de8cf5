/*
 * Unit tests of ipl_cpu: a core outside the process's allowed set is refused with a message
 * naming the allowed ones, pinning the calling thread restricts it to that core (and a thread
 * it creates inherits it), and the allowed list reads back as ranges.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

#include "ipl_cpu.h"
#include "ipl_error.h"

/* The first core this thread may run on. */
static int s_first_allowed(void)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    assert_int_equal(pthread_getaffinity_np(pthread_self(), sizeof set, &set), 0);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set)) return c;
    fail();
    return -1;
}

static void test_check_refuses_cores_outside_the_set(void **state)
{
    (void)state;
    char err[256] = "", allowed[128];
    assert_int_equal(ipl_cpu_check(s_first_allowed(), err, sizeof err), IPL_OK);
    assert_int_equal(ipl_cpu_check(-1, err, sizeof err), IPL_E_INVAL);
    assert_int_equal(ipl_cpu_check(CPU_SETSIZE, err, sizeof err), IPL_E_INVAL);
    assert_int_equal(ipl_cpu_check(CPU_SETSIZE - 1, err, sizeof err), IPL_E_INVAL);
    ipl_cpu_allowed(allowed, sizeof allowed);
    char want[256];
    snprintf(want, sizeof want, "--cpu %d: this process may run on cores %s", CPU_SETSIZE - 1,
             allowed);
    assert_string_equal(err, want);
}

static void *s_child(void *arg)
{
    ipl_cpu_allowed(arg, 64);
    return NULL;
}

static void test_pin_thread_restricts_it_and_its_children(void **state)
{
    (void)state;
    pthread_t t;
    char before[128], after[128], child[64], want[16];
    int cpu = s_first_allowed();
    ipl_cpu_allowed(before, sizeof before);
    /* On a thread of its own, so the test process keeps its affinity. */
    assert_int_equal(ipl_cpu_pin_thread(CPU_SETSIZE), IPL_E_INVAL);
    assert_int_equal(ipl_cpu_pin_thread(cpu), IPL_OK);
    ipl_cpu_allowed(after, sizeof after);
    snprintf(want, sizeof want, "%d", cpu);
    assert_string_equal(after, want);
    assert_int_equal(pthread_create(&t, NULL, s_child, child), 0);
    pthread_join(t, NULL);
    assert_string_equal(child, want);
    /* Back to what it was, for the tests that follow. */
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int c = 0; c < CPU_SETSIZE; c++)
        CPU_SET(c, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    ipl_cpu_allowed(after, sizeof after);
    assert_string_equal(after, before);
}

static void test_allowed_lists_ranges(void **state)
{
    (void)state;
    char buf[128];
    cpu_set_t keep, set;
    CPU_ZERO(&keep);
    assert_int_equal(pthread_getaffinity_np(pthread_self(), sizeof keep, &keep), 0);
    ipl_cpu_allowed(buf, sizeof buf);
    /* Every core listed is allowed, by parsing the ranges back. */
    CPU_ZERO(&set);
    for (char *p = buf; *p;) {
        int a = (int)strtol(p, &p, 10), b = a;
        if (*p == '-') b = (int)strtol(p + 1, &p, 10);
        for (int c = a; c <= b; c++)
            CPU_SET(c, &set);
        if (*p == ',') p++;
    }
    assert_true(CPU_EQUAL(&set, &keep));
    ipl_cpu_allowed(buf, 1); /* too small: terminated, empty */
    assert_string_equal(buf, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_check_refuses_cores_outside_the_set),
        cmocka_unit_test(test_pin_thread_restricts_it_and_its_children),
        cmocka_unit_test(test_allowed_lists_ranges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
