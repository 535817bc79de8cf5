/*
 * ipl_clock — monotonic and wall time sources.
 */
#include "ipl_clock.h"

#include <errno.h>
#include <stdio.h>
#include <time.h>

static uint64_t s_now_ns(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t ipl_mono_ns(void)
{
    return s_now_ns(CLOCK_MONOTONIC);
}

uint64_t ipl_mono_us(void)
{
    return s_now_ns(CLOCK_MONOTONIC) / 1000ull;
}

uint64_t ipl_mono_ms(void)
{
    return s_now_ns(CLOCK_MONOTONIC) / 1000000ull;
}

double ipl_wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

uint64_t ipl_wall_ms(void)
{
    return s_now_ns(CLOCK_REALTIME) / 1000000ull;
}

void ipl_sleep_ms(uint64_t ms)
{
    // An absolute monotonic deadline makes resuming after EINTR exact.
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += (time_t)(ms / 1000);
    deadline.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec += 1;
        deadline.tv_nsec -= 1000000000L;
    }
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, NULL) == EINTR) {
    }
}

char *ipl_wall_iso8601(char *buf, unsigned long size)
{
    if (!buf || size == 0) return buf;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    snprintf(buf, size, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000L);
    return buf;
}
