/*
 * ipl_cond — condition variables that wait on CLOCK_MONOTONIC (ipl_mono_ns), so a deadline
 * does not move when the wall clock is set. pthread's default clock is CLOCK_REALTIME; every
 * condition variable a deadline is waited on must be made with ipl_cond_init_mono.
 */
#ifndef IPL_COND_H
#define IPL_COND_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

/* pthread_cond_init with CLOCK_MONOTONIC (destroy it with pthread_cond_destroy). */
void ipl_cond_init_mono(pthread_cond_t *cond);

/* Waits on `cond` (made by ipl_cond_init_mono; `lock` held) until it is signalled or
 * `deadline_ns` (ipl_mono_ns) passes: false on the time-out. A spurious wake-up returns
 * true, as pthread_cond_wait's do: callers re-check their condition. */
bool ipl_cond_wait_until(pthread_cond_t *cond, pthread_mutex_t *lock, uint64_t deadline_ns);

/* ipl_cond_wait_until `ms` milliseconds from now (ms ≤ 0: a time-out at once). */
bool ipl_cond_wait_ms(pthread_cond_t *cond, pthread_mutex_t *lock, int ms);

#endif
