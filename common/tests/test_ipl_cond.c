/* Unit tests of ipl_cond: monotonic deadlines, time-outs and signals. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdbool.h>

#include "ipl_clock.h"
#include "ipl_cond.h"

typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool flag;
} s_fx_t;

static void *s_signaller(void *arg)
{
    s_fx_t *f = arg;
    pthread_mutex_lock(&f->lock);
    f->flag = true;
    pthread_cond_signal(&f->cond);
    pthread_mutex_unlock(&f->lock);
    return NULL;
}

static void test_timeout_and_signal(void **state)
{
    (void)state;
    s_fx_t f = {.lock = PTHREAD_MUTEX_INITIALIZER};
    ipl_cond_init_mono(&f.cond);
    pthread_mutex_lock(&f.lock);
    /* a deadline already past, and a zero wait: a time-out at once */
    assert_false(ipl_cond_wait_until(&f.cond, &f.lock, ipl_mono_ns() - 1));
    assert_false(ipl_cond_wait_ms(&f.cond, &f.lock, 0));
    assert_false(ipl_cond_wait_ms(&f.cond, &f.lock, -5));
    /* a short wait ends no earlier than asked (the monotonic clock is the one waited on) */
    uint64_t t0 = ipl_mono_ns();
    assert_false(ipl_cond_wait_ms(&f.cond, &f.lock, 20));
    assert_true(ipl_mono_ns() - t0 >= 20 * 1000000ULL);
    /* a signal ends the wait before a long deadline */
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, s_signaller, &f), 0);
    uint64_t deadline = ipl_mono_ns() + 30ULL * 1000000000ULL;
    while (!f.flag)
        assert_true(ipl_cond_wait_until(&f.cond, &f.lock, deadline));
    pthread_mutex_unlock(&f.lock);
    pthread_join(th, NULL);
    pthread_cond_destroy(&f.cond);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_timeout_and_signal)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
