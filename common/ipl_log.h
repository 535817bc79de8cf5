/*
 * ipl_log — structured logging: one key=value line per event on stderr.
 *
 *   ts=2026-11-30T16:50:00.123Z level=info svc=gateway msg=listening addr=127.0.0.1:8080
 *
 * `msg` is a short snake_case event name; the rest is a printf-style key=value list written
 * by the caller. Values containing spaces must be quoted by the caller (use %s with
 * ipl_log_quote() or plain %d/%g/%llu values). Thread-safe: every line is written with one
 * fputs under a lock, so lines never interleave.
 */
#ifndef IPL_LOG_H
#define IPL_LOG_H

#include <stdio.h>

typedef enum { IPL_LOG_DEBUG = 0, IPL_LOG_INFO, IPL_LOG_WARN, IPL_LOG_ERROR, IPL_LOG_OFF } ipl_log_level_t;

/* Sets the service name printed as `svc=` and the minimum level. `service` is copied. */
void ipl_log_init(const char *service, ipl_log_level_t level);
void ipl_log_set_level(ipl_log_level_t level);
ipl_log_level_t ipl_log_get_level(void);
/* Redirects output (tests). NULL restores stderr. The stream is borrowed. */
void ipl_log_set_stream(FILE *stream);
/* "debug" | "info" | "warn" | "error" | "off" → level. Returns 0, or IPL_E_INVAL. */
int ipl_log_level_parse(const char *text, ipl_log_level_t *level);

/* Writes one line if `level` is enabled. `kv_fmt` may be NULL for no extra fields (a literal ""
 * works too at run time but trips gcc's -Wformat-zero-length under -Werror: pass NULL).
 * errno is preserved. */
void ipl_log(ipl_log_level_t level, const char *msg, const char *kv_fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Quotes `text` for a log value: wraps it in double quotes and escapes '"', '\\' and control
 * characters, truncating to fit `size` (the result always fits and is NUL-terminated).
 * Returns buf. */
char *ipl_log_quote(char *buf, unsigned long size, const char *text);

#define IPL_DEBUG(msg, ...) ipl_log(IPL_LOG_DEBUG, msg, __VA_ARGS__)
#define IPL_INFO(msg, ...) ipl_log(IPL_LOG_INFO, msg, __VA_ARGS__)
#define IPL_WARN(msg, ...) ipl_log(IPL_LOG_WARN, msg, __VA_ARGS__)
#define IPL_ERROR(msg, ...) ipl_log(IPL_LOG_ERROR, msg, __VA_ARGS__)

/* ipl_log() that appends suppressed=N to the line when `suppressed` > 0 (IPL_LOG_EVERY). */
void ipl_log_suppressed(ipl_log_level_t level, unsigned long suppressed, const char *msg,
                        const char *kv_fmt, ...) __attribute__((format(printf, 4, 5)));

/* Logs at most once per `seconds` from this call site (per process); the line carries
 * suppressed=N for the lines dropped since the last one. For remote-input errors that could
 * otherwise flood the log. */
#define IPL_LOG_EVERY(seconds, level, msg, ...)                                                    \
    do {                                                                                           \
        static ipl_log_limiter_t s_lim_;                                                           \
        unsigned long s_sup_;                                                                      \
        if (ipl_log_limiter_pass(&s_lim_, (seconds), &s_sup_))                                     \
            ipl_log_suppressed((level), s_sup_, (msg), __VA_ARGS__);                               \
    } while (0)

typedef struct {
    unsigned long long next_ns;
    unsigned long suppressed;
} ipl_log_limiter_t;
/* Returns 1 when a line may be written now (and resets the window), 0 when it is suppressed.
 * *suppressed (may be NULL) gets the number of calls suppressed since the last pass.
 * Thread-safe (relaxed atomics, no lock): one caller wins each window. */
int ipl_log_limiter_pass(ipl_log_limiter_t *limiter, double seconds, unsigned long *suppressed);

#endif
