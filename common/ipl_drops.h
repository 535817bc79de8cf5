/*
 * ipl_drops — counting and logging a frame dropped because it was malformed or unexpected.
 *
 * Remote input is never asserted (docs/architecture.md): a service that receives a frame it
 * cannot use counts it, logs it and keeps running. Every service does it the same way, so one
 * dashboard panel and one log query cover them all:
 *
 *   metric  inferplane_frames_dropped_total{reason="<reason>"}   (docs/protocol.md)
 *   log     level=warn msg=frame_dropped reason=<reason> <the caller's key=value context>
 *           at most once per IPL_DROPS_LOG_SECONDS per process (all callers share the
 *           window), with suppressed=N for the drops not logged since the last line
 *
 * `reason` is ipl_strerror(code) for a decoder's error, or a short snake_case word the caller
 * picks ("multipart", "unexpected_type"); it is escaped for the label. The socket, peer or
 * worker goes into the log context, not into a label, so the series stay few.
 *
 *   ipl_drops_register(metrics, (const char *[]){"truncated", "multipart"}, 2); // zeros
 *   ...
 *   ipl_drops_count(metrics, ipl_strerror(rc), "socket=pull bytes=%zu", len);
 *
 * Thread-safe (ipl_metrics takes its lock; the log window is a lock-free ipl_log_limiter_t).
 * `metrics` is borrowed.
 */
#ifndef IPL_DROPS_H
#define IPL_DROPS_H

#include <stdarg.h>
#include <stddef.h>

#include "ipl_metrics.h"

#define IPL_DROPS_METRIC      "inferplane_frames_dropped_total"
#define IPL_DROPS_HELP        "Frames received and dropped, by reason."
#define IPL_DROPS_LOG_SECONDS 10

/* Creates the series of `reasons` at 0, so dashboards see the family before the first drop.
 * Optional: ipl_drops_count creates a series it has not seen. */
void ipl_drops_register(ipl_metrics_t *metrics, const char *const *reasons, size_t n);

/* Counts one dropped frame under `reason` and logs it (rate-limited, above). `kv_fmt` is the
 * log context, printf-style key=value pairs (values with spaces quoted by the caller, see
 * ipl_log.h), or NULL; it is formatted only when the line is written. */
void ipl_drops_count(ipl_metrics_t *metrics, const char *reason, const char *kv_fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* ipl_drops_count for a wrapper that takes the context itself (a va_list, used up). */
void ipl_drops_vcount(ipl_metrics_t *metrics, const char *reason, const char *kv_fmt, va_list args)
    __attribute__((format(printf, 3, 0)));

#endif
