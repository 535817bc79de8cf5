/*
 * ipl_clock — time sources.
 *
 * Monotonic time is for durations and deadlines; wall time is for timestamps that leave the
 * process (records, logs, KV-event batch `ts`). All functions are thread-safe.
 */
#ifndef IPL_CLOCK_H
#define IPL_CLOCK_H

#include <stdint.h>

uint64_t ipl_mono_ns(void); /* CLOCK_MONOTONIC in nanoseconds */
uint64_t ipl_mono_us(void);
uint64_t ipl_mono_ms(void);
double ipl_wall_s(void);    /* CLOCK_REALTIME as seconds since the epoch (fractional) */
uint64_t ipl_wall_ms(void); /* CLOCK_REALTIME in milliseconds */
/* Sleeps `ms` milliseconds, resuming after signals until the time has passed. */
void ipl_sleep_ms(uint64_t ms);
/* Writes an RFC 3339 UTC timestamp with milliseconds ("2026-11-30T16:50:00.123Z") into buf
 * (at least 25 bytes). Returns buf. */
char *ipl_wall_iso8601(char *buf, unsigned long size);

#endif
