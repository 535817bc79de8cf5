/*
 * ipl_metrics — Prometheus series with lock-free updates and text exposition 0.0.4.
 *
 *   ipl_metrics_t ──► family "a_total" (counter) ──► series {} ──► series {x="1"} ──► ...
 *                 ──► family "b_seconds" (histogram, bounds) ──► series ...
 *
 * Families and series are kept in registration order and rendered in that order; they are
 * only ever appended (under `lock`) and freed with the registry, so the pointers handed out
 * stay valid and updates need no lock. Values are doubles stored as the bits of an
 * _Atomic uint64_t; additions are compare-and-swap loops. A histogram keeps one
 * non-cumulative count per bucket (the last one is +Inf); the render makes them cumulative
 * and derives _count from them, so +Inf and _count always agree within one scrape.
 */
#include "ipl_metrics.h"
#include "ipl_unicode.h"

#include <assert.h>
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef IPL_VERSION
#define IPL_VERSION "0.0.0-unknown"
#endif

typedef enum { S_COUNTER, S_GAUGE, S_HISTOGRAM } s_type_t;

typedef struct s_family s_family_t;

struct ipl_metric {
    s_family_t *family;
    char *labels;              // inside of the braces, "" for none
    _Atomic uint64_t value;    // counter/gauge value, histogram sum (double bits)
    _Atomic uint64_t *buckets; // histogram: nbounds + 1 non-cumulative counts
    ipl_metric_t *next;
};

struct s_family {
    char *name;
    char *help;
    s_type_t type;
    double *bounds; // histogram only
    size_t nbounds;
    ipl_metric_t *head, *tail;
    s_family_t *next;
};

typedef struct {
    ipl_metrics_collect_fn *fn;
    void *arg;
} s_collector_t;

// The process_* series, refreshed before each render when ipl_metrics_add_process was called.
typedef struct {
    ipl_metric_t *rss, *cpu, *fds, *start, *threads;
    double boot_time; // btime from /proc/stat (0 if unknown)
} s_process_t;

struct ipl_metrics {
    pthread_mutex_t lock;        // families and series lists
    pthread_mutex_t render_lock; // one render (collectors included) at a time
    s_family_t *head, *tail;
    s_collector_t *collectors;
    size_t ncollectors;
    s_process_t process;
    bool has_process;
};

// --- doubles in atomics ---------------------------------------------------------------------

static uint64_t s_bits(double value)
{
    uint64_t bits;
    memcpy(&bits, &value, sizeof bits);
    return bits;
}

static double s_double(uint64_t bits)
{
    double value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

static void s_atomic_add(_Atomic uint64_t *cell, double delta)
{
    uint64_t old = atomic_load_explicit(cell, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(cell, &old, s_bits(s_double(old) + delta),
                                                  memory_order_relaxed, memory_order_relaxed)) {
    }
}

// --- registry -------------------------------------------------------------------------------

static void s_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void s_die(const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    fputs("ipl_metrics: ", stderr);
    vfprintf(stderr, fmt, args);
    fputc('\n', stderr);
    va_end(args);
    abort();
}

static void *s_alloc(size_t size)
{
    void *p = calloc(1, size);
    if (!p) s_die("out of memory");
    return p;
}

static char *s_strdup(const char *text)
{
    char *copy = strdup(text);
    if (!copy) s_die("out of memory");
    return copy;
}

static bool s_valid_name(const char *name)
{
    if (!name || !*name || (*name >= '0' && *name <= '9')) return false;
    for (const char *p = name; *p; p++) {
        char c = *p;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == ':'))
            return false;
    }
    return true;
}

ipl_metrics_t *ipl_metrics_new(void)
{
    ipl_metrics_t *self = calloc(1, sizeof *self);
    if (!self) return NULL;
    pthread_mutex_init(&self->lock, NULL);
    pthread_mutex_init(&self->render_lock, NULL);
    return self;
}

void ipl_metrics_destroy(ipl_metrics_t **self_p)
{
    if (!self_p || !*self_p) return;
    ipl_metrics_t *self = *self_p;
    for (s_family_t *family = self->head, *next_family; family; family = next_family) {
        next_family = family->next;
        for (ipl_metric_t *metric = family->head, *next; metric; metric = next) {
            next = metric->next;
            free(metric->labels);
            free(metric->buckets);
            free(metric);
        }
        free(family->name);
        free(family->help);
        free(family->bounds);
        free(family);
    }
    free(self->collectors);
    pthread_mutex_destroy(&self->lock);
    pthread_mutex_destroy(&self->render_lock);
    free(self);
    *self_p = NULL;
}

// Get-or-create under self->lock. Aborts on a type or bucket mismatch.
static ipl_metric_t *s_lookup(ipl_metrics_t *self, s_type_t type, const char *name,
                              const char *help, const char *labels, const double *bounds,
                              size_t nbounds)
{
    if (!s_valid_name(name)) s_die("invalid metric name \"%s\"", name ? name : "(null)");
    if (!labels) labels = "";
    pthread_mutex_lock(&self->lock);
    s_family_t *family = self->head;
    while (family && strcmp(family->name, name) != 0)
        family = family->next;
    if (family) {
        if (family->type != type) s_die("%s registered twice with different types", name);
        if (type == S_HISTOGRAM && (family->nbounds != nbounds ||
                                    memcmp(family->bounds, bounds, nbounds * sizeof *bounds) != 0))
            s_die("%s registered twice with different buckets", name);
    } else {
        family = s_alloc(sizeof *family);
        family->name = s_strdup(name);
        family->help = s_strdup(help ? help : "");
        family->type = type;
        if (type == S_HISTOGRAM) {
            family->bounds = s_alloc((nbounds ? nbounds : 1) * sizeof *bounds);
            if (nbounds) memcpy(family->bounds, bounds, nbounds * sizeof *bounds);
            family->nbounds = nbounds;
        }
        if (self->tail)
            self->tail->next = family;
        else
            self->head = family;
        self->tail = family;
    }
    ipl_metric_t *metric = family->head;
    while (metric && strcmp(metric->labels, labels) != 0)
        metric = metric->next;
    if (!metric) {
        metric = s_alloc(sizeof *metric);
        metric->family = family;
        metric->labels = s_strdup(labels);
        atomic_init(&metric->value, s_bits(0.0));
        if (type == S_HISTOGRAM) {
            metric->buckets = s_alloc((nbounds + 1) * sizeof *metric->buckets);
            for (size_t i = 0; i <= nbounds; i++)
                atomic_init(&metric->buckets[i], 0);
        }
        if (family->tail)
            family->tail->next = metric;
        else
            family->head = metric;
        family->tail = metric;
    }
    pthread_mutex_unlock(&self->lock);
    return metric;
}

ipl_metric_t *ipl_metrics_counter(ipl_metrics_t *self, const char *name, const char *help,
                                  const char *labels)
{
    return s_lookup(self, S_COUNTER, name, help, labels, NULL, 0);
}

ipl_metric_t *ipl_metrics_gauge(ipl_metrics_t *self, const char *name, const char *help,
                                const char *labels)
{
    return s_lookup(self, S_GAUGE, name, help, labels, NULL, 0);
}

ipl_metric_t *ipl_metrics_histogram(ipl_metrics_t *self, const char *name, const char *help,
                                    const char *labels, const double *bounds, size_t nbounds)
{
    if (nbounds && !bounds) s_die("%s: NULL bounds", name);
    for (size_t i = 0; i < nbounds; i++)
        if (!isfinite(bounds[i]) || (i > 0 && !(bounds[i] > bounds[i - 1])))
            s_die("%s: bucket bounds must be finite and strictly increasing", name);
    return s_lookup(self, S_HISTOGRAM, name, help, labels, bounds, nbounds);
}

// --- updates (lock-free) --------------------------------------------------------------------

void ipl_metric_inc(ipl_metric_t *metric)
{
    ipl_metric_add(metric, 1.0);
}

void ipl_metric_add(ipl_metric_t *metric, double delta)
{
    assert(metric->family->type != S_HISTOGRAM);
    // A counter only goes up; a negative or NaN delta would break rate() for everyone.
    if (metric->family->type == S_COUNTER && !(delta >= 0)) return;
    s_atomic_add(&metric->value, delta);
}

void ipl_metric_set(ipl_metric_t *metric, double value)
{
    assert(metric->family->type == S_GAUGE);
    atomic_store_explicit(&metric->value, s_bits(value), memory_order_relaxed);
}

void ipl_metric_observe(ipl_metric_t *metric, double value)
{
    const s_family_t *family = metric->family;
    assert(family->type == S_HISTOGRAM);
    // First bucket whose upper bound is >= value (le is inclusive); NaN lands in +Inf.
    size_t lo = 0, hi = family->nbounds;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (value <= family->bounds[mid])
            hi = mid;
        else
            lo = mid + 1;
    }
    atomic_fetch_add_explicit(&metric->buckets[lo], 1, memory_order_relaxed);
    s_atomic_add(&metric->value, value);
}

static uint64_t s_histogram_count(const ipl_metric_t *metric)
{
    uint64_t count = 0;
    for (size_t i = 0; i <= metric->family->nbounds; i++)
        count += atomic_load_explicit(&metric->buckets[i], memory_order_relaxed);
    return count;
}

double ipl_metric_value(const ipl_metric_t *metric)
{
    if (metric->family->type == S_HISTOGRAM) return (double)s_histogram_count(metric);
    return s_double(atomic_load_explicit(&metric->value, memory_order_relaxed));
}

double ipl_metric_sum(const ipl_metric_t *metric)
{
    if (metric->family->type != S_HISTOGRAM) return 0.0;
    return s_double(atomic_load_explicit(&metric->value, memory_order_relaxed));
}

void ipl_metrics_on_collect(ipl_metrics_t *self, ipl_metrics_collect_fn *fn, void *arg)
{
    pthread_mutex_lock(&self->lock);
    s_collector_t *collectors =
        realloc(self->collectors, (self->ncollectors + 1) * sizeof *collectors);
    if (!collectors) s_die("out of memory");
    collectors[self->ncollectors++] = (s_collector_t){fn, arg};
    self->collectors = collectors;
    pthread_mutex_unlock(&self->lock);
}

// --- process metrics ------------------------------------------------------------------------

// Reads a small /proc file into buf (NUL-terminated). Returns the length or -1.
static long s_read_proc(const char *path, char *buf, size_t size)
{
    FILE *file = fopen(path, "re");
    if (!file) return -1;
    size_t n = fread(buf, 1, size - 1, file);
    fclose(file);
    buf[n] = '\0';
    return (long)n;
}

static void s_refresh_process(ipl_metrics_t *self)
{
    const s_process_t *p = &self->process;
    double ticks = (double)sysconf(_SC_CLK_TCK);
    double page = (double)sysconf(_SC_PAGESIZE);
    char buf[1024];

    // /proc/self/stat: "pid (comm) state f4 ... f14 utime f15 stime ... f20 threads ...
    // f22 starttime ... f24 rss"; comm may hold spaces and parentheses, so parse after the
    // last ')'.
    char *paren = s_read_proc("/proc/self/stat", buf, sizeof buf) > 0 ? strrchr(buf, ')') : NULL;
    unsigned long long utime, stime, starttime;
    long threads, rss;
    if (paren && sscanf(paren + 1,
                        " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d "
                        "%ld %*d %llu %*u %ld",
                        &utime, &stime, &threads, &starttime, &rss) == 5) {
        atomic_store_explicit(&p->cpu->value, s_bits((double)(utime + stime) / ticks),
                              memory_order_relaxed);
        ipl_metric_set(p->threads, (double)threads);
        ipl_metric_set(p->rss, (double)rss * page);
        // starttime counts clock ticks since boot.
        if (p->boot_time > 0) ipl_metric_set(p->start, p->boot_time + (double)starttime / ticks);
    }

    DIR *dir = opendir("/proc/self/fd");
    if (dir) {
        long fds = 0;
        for (struct dirent *entry; (entry = readdir(dir));)
            if (entry->d_name[0] != '.') fds++;
        closedir(dir);
        ipl_metric_set(p->fds, (double)(fds - 1)); // not the one opendir holds
    }
}

// The boot time ("btime" in /proc/stat, whose "intr" line can be many kilobytes long).
static double s_boot_time(void)
{
    FILE *file = fopen("/proc/stat", "re");
    if (!file) return 0;
    char *line = NULL;
    size_t cap = 0;
    unsigned long long boot = 0;
    while (getline(&line, &cap, file) > 0)
        if (sscanf(line, "btime %llu", &boot) == 1) break;
    free(line);
    fclose(file);
    return (double)boot;
}

void ipl_metrics_add_process(ipl_metrics_t *self, const char *service)
{
    s_process_t *p = &self->process;
    p->boot_time = s_boot_time();
    p->rss = ipl_metrics_gauge(self, "process_resident_memory_bytes",
                               "Resident memory size in bytes.", NULL);
    p->cpu = ipl_metrics_counter(self, "process_cpu_seconds_total",
                                 "Total user and system CPU time spent in seconds.", NULL);
    p->fds = ipl_metrics_gauge(self, "process_open_fds", "Number of open file descriptors.", NULL);
    p->start = ipl_metrics_gauge(self, "process_start_time_seconds",
                                 "Start time of the process since unix epoch in seconds.", NULL);
    p->threads =
        ipl_metrics_gauge(self, "process_threads", "Number of OS threads in the process.", NULL);
    char svc[128], version[128], labels[300];
    snprintf(labels, sizeof labels, "service=\"%s\",version=\"%s\"",
             ipl_metrics_escape(svc, sizeof svc, service ? service : ""),
             ipl_metrics_escape(version, sizeof version, IPL_VERSION));
    ipl_metric_set(ipl_metrics_gauge(self, "inferplane_build_info",
                                     "Build information; the value is always 1.", labels),
                   1.0);
    pthread_mutex_lock(&self->lock);
    self->has_process = true;
    pthread_mutex_unlock(&self->lock);
}

// --- rendering ------------------------------------------------------------------------------

typedef struct {
    char *data;
    size_t len, cap;
} s_buf_t;

static void s_put(s_buf_t *buf, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void s_put(s_buf_t *buf, const char *fmt, ...)
{
    for (;;) {
        va_list args;
        va_start(args, fmt);
        int n = vsnprintf(buf->data + buf->len, buf->cap - buf->len, fmt, args);
        va_end(args);
        if (n < 0) return;
        if ((size_t)n < buf->cap - buf->len) {
            buf->len += (size_t)n;
            return;
        }
        size_t cap =
            buf->cap * 2 > buf->len + (size_t)n + 1 ? buf->cap * 2 : buf->len + (size_t)n + 1;
        char *data = realloc(buf->data, cap);
        if (!data) s_die("out of memory");
        buf->data = data;
        buf->cap = cap;
    }
}

// Formats a sample value the way Prometheus clients do: shortest text that reads back as
// the same double, and +Inf / -Inf / NaN.
static const char *s_num(char *out, size_t size, double value)
{
    if (isnan(value))
        snprintf(out, size, "NaN");
    else if (isinf(value))
        snprintf(out, size, value > 0 ? "+Inf" : "-Inf");
    else {
        for (int precision = 15; precision <= 17; precision++) {
            snprintf(out, size, "%.*g", precision, value);
            if (strtod(out, NULL) == value) break;
        }
    }
    return out;
}

// HELP text escapes only backslash and newline.
static void s_put_help(s_buf_t *buf, const s_family_t *family)
{
    s_put(buf, "# HELP %s ", family->name);
    for (const char *p = family->help; *p; p++) {
        if (*p == '\\')
            s_put(buf, "\\\\");
        else if (*p == '\n')
            s_put(buf, "\\n");
        else
            s_put(buf, "%c", *p);
    }
    s_put(buf, "\n");
}

static void s_put_histogram(s_buf_t *buf, const s_family_t *family, const ipl_metric_t *metric)
{
    const char *sep = metric->labels[0] ? "," : "";
    char num[40];
    uint64_t cumulative = 0;
    for (size_t i = 0; i <= family->nbounds; i++) {
        cumulative += atomic_load_explicit(&metric->buckets[i], memory_order_relaxed);
        s_put(buf, "%s_bucket{%s%sle=\"%s\"} %llu\n", family->name, metric->labels, sep,
              i < family->nbounds ? s_num(num, sizeof num, family->bounds[i]) : "+Inf",
              (unsigned long long)cumulative);
    }
    const char *open = metric->labels[0] ? "{" : "", *close = metric->labels[0] ? "}" : "";
    s_put(buf, "%s_sum%s%s%s %s\n", family->name, open, metric->labels, close,
          s_num(num, sizeof num, ipl_metric_sum(metric)));
    s_put(buf, "%s_count%s%s%s %llu\n", family->name, open, metric->labels, close,
          (unsigned long long)cumulative);
}

char *ipl_metrics_render(ipl_metrics_t *self, size_t *len)
{
    static const char *type_names[] = {"counter", "gauge", "histogram"};
    pthread_mutex_lock(&self->render_lock);

    // Collectors register and set series themselves, so they run without self->lock.
    pthread_mutex_lock(&self->lock);
    size_t ncollectors = self->ncollectors;
    s_collector_t *collectors = NULL;
    if (ncollectors) {
        collectors = s_alloc(ncollectors * sizeof *collectors);
        memcpy(collectors, self->collectors, ncollectors * sizeof *collectors);
    }
    bool has_process = self->has_process;
    pthread_mutex_unlock(&self->lock);
    for (size_t i = 0; i < ncollectors; i++)
        collectors[i].fn(collectors[i].arg, self);
    free(collectors);
    if (has_process) s_refresh_process(self);

    s_buf_t buf = {.data = s_alloc(4096), .cap = 4096};
    pthread_mutex_lock(&self->lock);
    for (const s_family_t *family = self->head; family; family = family->next) {
        s_put_help(&buf, family);
        s_put(&buf, "# TYPE %s %s\n", family->name, type_names[family->type]);
        for (const ipl_metric_t *metric = family->head; metric; metric = metric->next) {
            if (family->type == S_HISTOGRAM) {
                s_put_histogram(&buf, family, metric);
                continue;
            }
            char num[40];
            const char *open = metric->labels[0] ? "{" : "", *close = metric->labels[0] ? "}" : "";
            s_put(&buf, "%s%s%s%s %s\n", family->name, open, metric->labels, close,
                  s_num(num, sizeof num, ipl_metric_value(metric)));
        }
    }
    pthread_mutex_unlock(&self->lock);
    pthread_mutex_unlock(&self->render_lock);
    if (len) *len = buf.len;
    return buf.data;
}

char *ipl_metrics_escape(char *buf, size_t size, const char *value)
{
    if (!buf || size == 0) return buf;
    static const char replacement[] = "\xEF\xBF\xBD"; /* U+FFFD */
    const unsigned char *p = (const unsigned char *)(value ? value : "");
    size_t left = strlen((const char *)p), out = 0;
    while (left > 0) {
        uint32_t cp;
        size_t len = ipl_utf8_next(p, left, &cp);
        const char *put = (const char *)p;
        size_t n = len;
        if (cp == '\\' || cp == '"' || cp == '\n') {
            put = cp == '\\' ? "\\\\" : cp == '"' ? "\\\"" : "\\n";
            n = 2;
        } else if (cp == IPL_UNICODE_INVALID) {
            put = replacement; /* the exposition format is UTF-8: a stray byte would break it */
            n = 3;
        }
        if (out + n + 1 > size) break; // never split an escape or a character
        memcpy(buf + out, put, n);
        out += n;
        p += len;
        left -= len;
    }
    buf[out] = '\0';
    return buf;
}

const double ipl_metrics_vllm_ttft_buckets[] = {
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08,  0.1,   0.25,  0.5,    0.75,
    1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0,  80.0,  160.0, 640.0,  2560.0};
const size_t ipl_metrics_vllm_ttft_nbuckets =
    sizeof ipl_metrics_vllm_ttft_buckets / sizeof ipl_metrics_vllm_ttft_buckets[0];
const double ipl_metrics_vllm_itl_buckets[] = {0.01, 0.025, 0.05, 0.075, 0.1,  0.15, 0.2,
                                               0.3,  0.4,   0.5,  0.75,  1.0,  2.5,  5.0,
                                               7.5,  10.0,  20.0, 40.0,  80.0};
const size_t ipl_metrics_vllm_itl_nbuckets =
    sizeof ipl_metrics_vllm_itl_buckets / sizeof ipl_metrics_vllm_itl_buckets[0];
const double ipl_metrics_vllm_e2e_buckets[] = {0.3,   0.5,   0.8,   1.0,   1.5,    2.0,   2.5,
                                               5.0,   10.0,  15.0,  20.0,  30.0,   40.0,  50.0,
                                               60.0,  120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
const size_t ipl_metrics_vllm_e2e_nbuckets =
    sizeof ipl_metrics_vllm_e2e_buckets / sizeof ipl_metrics_vllm_e2e_buckets[0];
