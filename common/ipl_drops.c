/* ipl_drops — see ipl_drops.h. */
#include "ipl_drops.h"

#include <stdarg.h>
#include <stdio.h>

#include "ipl_log.h"

// One window for the process: a peer sending garbage to several sockets of a service still
// costs one line per window.
static ipl_log_limiter_t s_limiter;

static ipl_metric_t *s_series(ipl_metrics_t *metrics, const char *reason)
{
    char quoted[64], labels[96];
    ipl_metrics_escape(quoted, sizeof quoted, reason);
    snprintf(labels, sizeof labels, "reason=\"%s\"", quoted);
    return ipl_metrics_counter(metrics, IPL_DROPS_METRIC, IPL_DROPS_HELP, labels);
}

void ipl_drops_register(ipl_metrics_t *metrics, const char *const *reasons, size_t n)
{
    for (size_t i = 0; i < n; i++)
        s_series(metrics, reasons[i]);
}

void ipl_drops_vcount(ipl_metrics_t *metrics, const char *reason, const char *kv_fmt, va_list args)
{
    ipl_metric_inc(s_series(metrics, reason));
    unsigned long suppressed;
    if (!ipl_log_limiter_pass(&s_limiter, IPL_DROPS_LOG_SECONDS, &suppressed)) return;
    char context[256] = "";
    if (kv_fmt) vsnprintf(context, sizeof context, kv_fmt, args);
    ipl_log_suppressed(IPL_LOG_WARN, suppressed, "frame_dropped", "reason=%s%s%s", reason,
                       context[0] ? " " : "", context);
}

void ipl_drops_count(ipl_metrics_t *metrics, const char *reason, const char *kv_fmt, ...)
{
    va_list args;
    va_start(args, kv_fmt);
    ipl_drops_vcount(metrics, reason, kv_fmt, args);
    va_end(args);
}
