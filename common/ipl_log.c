/*
 * ipl_log — one key=value line per event, written with a single fputs under a mutex.
 *
 * The line is formatted into a stack buffer first (so the lock is held only for the write);
 * lines longer than the buffer are truncated but always end in '\n'.
 */
#include "ipl_log.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <string.h>

#include "ipl_clock.h"
#include "ipl_error.h"

#define S_LINE_MAX 4096

static pthread_mutex_t s_lock = PTHREAD_MUTEX_INITIALIZER;
static char s_service[64];                 // guarded by s_lock; "" until ipl_log_init
static FILE *s_stream;                     // guarded by s_lock; NULL means stderr
static _Atomic int s_level = IPL_LOG_INFO; // read lock-free on every call

static const char *s_level_names[] = {"debug", "info", "warn", "error", "off"};

void ipl_log_init(const char *service, ipl_log_level_t level)
{
    pthread_mutex_lock(&s_lock);
    snprintf(s_service, sizeof s_service, "%s", service ? service : "");
    pthread_mutex_unlock(&s_lock);
    ipl_log_set_level(level);
}

void ipl_log_set_level(ipl_log_level_t level)
{
    if ((int)level < IPL_LOG_DEBUG || level > IPL_LOG_OFF) level = IPL_LOG_INFO;
    atomic_store_explicit(&s_level, (int)level, memory_order_relaxed);
}

ipl_log_level_t ipl_log_get_level(void)
{
    return (ipl_log_level_t)atomic_load_explicit(&s_level, memory_order_relaxed);
}

void ipl_log_set_stream(FILE *stream)
{
    pthread_mutex_lock(&s_lock);
    s_stream = stream;
    pthread_mutex_unlock(&s_lock);
}

int ipl_log_level_parse(const char *text, ipl_log_level_t *level)
{
    if (!text || !level) return IPL_E_INVAL;
    for (int i = IPL_LOG_DEBUG; i <= IPL_LOG_OFF; i++) {
        if (strcmp(text, s_level_names[i]) == 0) {
            *level = (ipl_log_level_t)i;
            return IPL_OK;
        }
    }
    return IPL_E_INVAL;
}

// Appends printf output at `*used`, clamping *used to the buffer (snprintf reports the
// untruncated length).
static void s_appendv(char *line, size_t *used, const char *fmt, va_list args)
{
    if (*used >= S_LINE_MAX - 1) return;
    int n = vsnprintf(line + *used, S_LINE_MAX - 1 - *used, fmt, args);
    if (n > 0) *used += (size_t)n;
    if (*used > S_LINE_MAX - 2) *used = S_LINE_MAX - 2;
}

static void s_append(char *line, size_t *used, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void s_append(char *line, size_t *used, const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    s_appendv(line, used, fmt, args);
    va_end(args);
}

static void s_logv(ipl_log_level_t level, unsigned long suppressed, const char *msg,
                   const char *kv_fmt, va_list args)
{
    if ((int)level < atomic_load_explicit(&s_level, memory_order_relaxed) || level >= IPL_LOG_OFF ||
        (int)level < IPL_LOG_DEBUG)
        return;
    int saved_errno = errno; // callers often log right before reading errno
    char line[S_LINE_MAX];
    size_t used = 0;
    char ts[32];
    ipl_wall_iso8601(ts, sizeof ts);

    pthread_mutex_lock(&s_lock);
    s_append(line, &used, "ts=%s level=%s svc=%s msg=%s", ts, s_level_names[level],
             s_service[0] ? s_service : program_invocation_short_name, msg ? msg : "-");
    if (kv_fmt && kv_fmt[0]) {
        line[used++] = ' ';
        s_appendv(line, &used, kv_fmt, args);
    }
    if (suppressed > 0) s_append(line, &used, " suppressed=%lu", suppressed);
    line[used++] = '\n';
    line[used] = '\0';
    FILE *out = s_stream ? s_stream : stderr;
    fputs(line, out);
    fflush(out);
    pthread_mutex_unlock(&s_lock);
    errno = saved_errno;
}

void ipl_log(ipl_log_level_t level, const char *msg, const char *kv_fmt, ...)
{
    va_list args;
    va_start(args, kv_fmt);
    s_logv(level, 0, msg, kv_fmt, args);
    va_end(args);
}

void ipl_log_suppressed(ipl_log_level_t level, unsigned long suppressed, const char *msg,
                        const char *kv_fmt, ...)
{
    va_list args;
    va_start(args, kv_fmt);
    s_logv(level, suppressed, msg, kv_fmt, args);
    va_end(args);
}

char *ipl_log_quote(char *buf, unsigned long size, const char *text)
{
    if (!buf || size == 0) return buf;
    if (size < 3) {
        buf[0] = '\0';
        return buf;
    }
    if (!text) text = "";
    size_t out = 0;
    buf[out++] = '"';
    // Room for the closing quote and the NUL is kept back; an escape is written whole or not
    // at all, so truncation never leaves half an escape sequence.
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        char esc[5];
        size_t n;
        if (*p == '"' || *p == '\\') {
            esc[0] = '\\';
            esc[1] = (char)*p;
            n = 2;
        } else if (*p == '\n') {
            memcpy(esc, "\\n", 2);
            n = 2;
        } else if (*p == '\r') {
            memcpy(esc, "\\r", 2);
            n = 2;
        } else if (*p == '\t') {
            memcpy(esc, "\\t", 2);
            n = 2;
        } else if (*p < 0x20 || *p == 0x7f) {
            static const char hex[] = "0123456789abcdef";
            esc[0] = '\\';
            esc[1] = 'x';
            esc[2] = hex[*p >> 4];
            esc[3] = hex[*p & 0xf];
            n = 4;
        } else {
            esc[0] = (char)*p;
            n = 1;
        }
        if (out + n + 2 > size) break;
        memcpy(buf + out, esc, n);
        out += n;
    }
    buf[out++] = '"';
    buf[out] = '\0';
    return buf;
}

int ipl_log_limiter_pass(ipl_log_limiter_t *limiter, double seconds, unsigned long *suppressed)
{
    // Relaxed atomics: the limiter is shared by every thread passing the call site. Only the
    // thread whose compare-exchange wins the new window writes a line.
    unsigned long long now = ipl_mono_ns();
    unsigned long long next = __atomic_load_n(&limiter->next_ns, __ATOMIC_RELAXED);
    unsigned long long window = seconds > 0 ? (unsigned long long)(seconds * 1e9) : 0;
    if (now >= next && __atomic_compare_exchange_n(&limiter->next_ns, &next, now + window, 0,
                                                   __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
        unsigned long dropped = __atomic_exchange_n(&limiter->suppressed, 0UL, __ATOMIC_RELAXED);
        if (suppressed) *suppressed = dropped;
        return 1;
    }
    __atomic_fetch_add(&limiter->suppressed, 1UL, __ATOMIC_RELAXED);
    if (suppressed) *suppressed = 0;
    return 0;
}
