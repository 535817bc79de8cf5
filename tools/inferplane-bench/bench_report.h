/*
 * bench_report — a run's benchmarks written out: a JSON report shaped like GuideLLM's
 * (GenerativeBenchmarksReport: {"metadata", "args", "benchmarks": [{"type_":
 * "generative_benchmark", "config", "scheduler_metrics", "metrics": {"request_totals",
 * "requests_per_second": {"successful", "incomplete", "errored", "total"}, ...}, "requests"}]},
 * each distribution {mean, median, mode, variance, std_dev, min, max, count, total_sum,
 * percentiles: {p001 ... p999}}), with our additions under each benchmark's "inferplane"
 * key (goodput, cache hits, errors by cause, labels, the bench's own CPU); a CSV with one
 * row per benchmark; a console table; and one JSON line per figure
 * {"name", "value", "unit", "strategy", "workload", ...labels, "benchmark"}.
 *
 * Single-threaded; writes to the FILEs given.
 */
#ifndef BENCH_REPORT_H
#define BENCH_REPORT_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdio.h>

#include "bench_metrics.h"
#include "bench_runner.h"

#define BENCH_MAX_LABELS 16

typedef struct {
    const char *key[BENCH_MAX_LABELS], *value[BENCH_MAX_LABELS];
    size_t n;
} bench_labels_t;

/* "k=v,k2=v2" into labels (the string is cut in place, borrowed). 0 or IPL_E_INVAL. */
int bench_labels_parse(char *spec, bench_labels_t *labels, char *err, size_t errlen);
/* The value of key, or NULL. */
const char *bench_labels_get(const bench_labels_t *labels, const char *key);

typedef struct {
    const char *profile; /* the profile it belongs to ("sweep", "constant", ...) */
    bench_strategy_t strategy;
    double max_duration_s;
    uint64_t max_requests;
    const bench_metrics_t *m;
    const bench_run_result_t *run;
} bench_entry_t;

/* One benchmark as GuideLLM's generative_benchmark object; `sample` requests of each status
 * listed. NULL on allocation failure. */
cJSON *bench_report_benchmark(const bench_entry_t *e, const bench_labels_t *labels, size_t sample);
/* A distribution {mean, median, ..., percentiles}. */
cJSON *bench_report_dist(const bench_dist_t *d);

void bench_report_csv(FILE *f, const bench_entry_t *e, size_t n, const bench_labels_t *labels);
void bench_report_table(FILE *f, const bench_entry_t *e, size_t n);
void bench_report_figures(FILE *f, const bench_entry_t *e, size_t n, const bench_labels_t *labels);

#endif
