/*
 * ipl_metrics — a registry of Prometheus series rendered as text exposition format 0.0.4.
 *
 * A *series* is one (name, labels) pair: a counter, a gauge or a histogram. Look a series up
 * once (ipl_metrics_counter etc. return the same pointer for the same name and labels) and
 * update it on the hot path with lock-free atomics. Lookups take a mutex; rendering takes it
 * too. Series live as long as the registry.
 *
 * `labels` is the inside of the braces, already formatted: `model="m",endpoint="e"`, or NULL.
 * Use ipl_metrics_escape() for label values that come from outside.
 *
 *   ipl_metric_t *dropped = ipl_metrics_counter(m, "inferplane_frames_dropped_total",
 *                                               "Frames dropped by reason.", "reason=\"truncated\"");
 *   ipl_metric_inc(dropped);
 */
#ifndef IPL_METRICS_H
#define IPL_METRICS_H

#include <stddef.h>
#include <stdint.h>

typedef struct ipl_metrics ipl_metrics_t;
typedef struct ipl_metric ipl_metric_t;

ipl_metrics_t *ipl_metrics_new(void);
void ipl_metrics_destroy(ipl_metrics_t **self_p);

/* Get-or-create. A name registered with another type or other buckets aborts (programmer
 * error). `help` is copied on first registration of the name. */
ipl_metric_t *ipl_metrics_counter(ipl_metrics_t *self, const char *name, const char *help,
                                  const char *labels);
ipl_metric_t *ipl_metrics_gauge(ipl_metrics_t *self, const char *name, const char *help,
                                const char *labels);
/* `bounds`: strictly increasing upper bounds without +Inf (copied). */
ipl_metric_t *ipl_metrics_histogram(ipl_metrics_t *self, const char *name, const char *help,
                                    const char *labels, const double *bounds, size_t nbounds);

void ipl_metric_inc(ipl_metric_t *metric);                 /* counter or gauge += 1 */
void ipl_metric_add(ipl_metric_t *metric, double delta);   /* counter: delta >= 0 */
void ipl_metric_set(ipl_metric_t *metric, double value);   /* gauge */
void ipl_metric_observe(ipl_metric_t *metric, double value); /* histogram */
double ipl_metric_value(const ipl_metric_t *metric);       /* counter/gauge value; histogram count */
double ipl_metric_sum(const ipl_metric_t *metric);         /* histogram sum (0 otherwise) */

/* Called at the start of every render, before any series is read, to refresh gauges that
 * mirror state (queue lengths, index size). Runs on the rendering (admin HTTP) thread. */
typedef void (ipl_metrics_collect_fn)(void *arg, ipl_metrics_t *metrics);
void ipl_metrics_on_collect(ipl_metrics_t *self, ipl_metrics_collect_fn *fn, void *arg);

/* Adds process_* series refreshed at render time: process_resident_memory_bytes,
 * process_cpu_seconds_total, process_open_fds, process_start_time_seconds, process_threads,
 * and inferplane_build_info{service,version} = 1. */
void ipl_metrics_add_process(ipl_metrics_t *self, const char *service);

/* Renders every series, grouped by name with # HELP / # TYPE lines. Returns a malloc'd
 * NUL-terminated buffer (the caller frees) and its length in *len. */
char *ipl_metrics_render(ipl_metrics_t *self, size_t *len);

/* vLLM's histogram buckets (vllm-project/vllm: vllm/v1/metrics/loggers.py), shared by the
 * simulator (which must expose exactly vLLM's) and the exporter (so our series line up with
 * the workers'). */
extern const double ipl_metrics_vllm_ttft_buckets[]; /* time_to_first_token_seconds */
extern const size_t ipl_metrics_vllm_ttft_nbuckets;
extern const double ipl_metrics_vllm_itl_buckets[];  /* inter_token_latency_seconds */
extern const size_t ipl_metrics_vllm_itl_nbuckets;
extern const double ipl_metrics_vllm_e2e_buckets[];  /* e2e_request_latency_seconds and the */
extern const size_t ipl_metrics_vllm_e2e_nbuckets;   /* request phase histograms */

/* Escapes a label value (\\, \", \n) into buf (always NUL-terminated, truncated to fit,
 * never inside an escape or a character). Bytes that are not valid UTF-8 (the exposition
 * format's encoding) become U+FFFD, so one client's bad bytes cannot break a scrape.
 * Returns buf. */
char *ipl_metrics_escape(char *buf, size_t size, const char *value);

#endif
