/* ipl_cond — see ipl_cond.h. */
#include "ipl_cond.h"

#include <errno.h>
#include <time.h>

#include "ipl_clock.h"

void ipl_cond_init_mono(pthread_cond_t *cond)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(cond, &attr);
    pthread_condattr_destroy(&attr);
}

bool ipl_cond_wait_until(pthread_cond_t *cond, pthread_mutex_t *lock, uint64_t deadline_ns)
{
    struct timespec ts = {.tv_sec = (time_t)(deadline_ns / 1000000000ULL),
                          .tv_nsec = (long)(deadline_ns % 1000000000ULL)};
    return pthread_cond_timedwait(cond, lock, &ts) != ETIMEDOUT;
}

bool ipl_cond_wait_ms(pthread_cond_t *cond, pthread_mutex_t *lock, int ms)
{
    return ipl_cond_wait_until(cond, lock, ipl_mono_ns() + (uint64_t)(ms > 0 ? ms : 0) * 1000000ULL);
}
