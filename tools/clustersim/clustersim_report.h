/*
 * clustersim_report — the figures of one (strategy, workload) run and their two outputs.
 *
 * From one record per request (what the engines' truth says happened to it) it computes
 *
 *   ttft_p50/p90/p99_s   time to first token: first token − arrival at the router
 *   e2e_p50/p90/p99_s    end to end: last token − arrival
 *   goodput_rpm          requests whose TTFT met the SLO, per minute of the run
 *   throughput_rpm       completed requests per minute of the run
 *   cache_hit_ratio      Σ cached prompt tokens / Σ prompt tokens (the engines' prefix hits)
 *
 * where "the run" lasts from the first arrival to the last finished request. Percentiles are
 * nearest-rank over completed requests (a rejected request has no TTFT; it is counted apart).
 * Everything here is deterministic: no wall-clock figure is printed by these functions.
 */
#ifndef CLUSTERSIM_REPORT_H
#define CLUSTERSIM_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* What happened to one request. */
typedef struct {
    double arrival_s;
    double first_token_s; /* < 0: never (rejected) */
    double finish_s;      /* < 0: never */
    uint32_t prompt_tokens;
    uint32_t cached_tokens;    /* the engine's prefix hit */
    int32_t worker;            /* routed to (index into the cluster's workers); -1: rejected */
    uint32_t predicted_cached; /* the router's cached tokens for the winner */
    double predicted_ttft_s;   /* the router's prediction for the winner */
} clustersim_record_t;

typedef struct {
    const char *strategy; /* borrowed */
    const char *workload; /* borrowed */
    uint32_t requests, completed, rejected;
    double ttft_p50_s, ttft_p90_s, ttft_p99_s;
    double e2e_p50_s, e2e_p90_s, e2e_p99_s;
    double goodput_rpm, throughput_rpm;
    double cache_hit_ratio;
    double duration_s;
    double slo_ttft_s;
} clustersim_figures_t;

/* The nearest-rank p-quantile (0 < p <= 1) of `v` (n values), which it sorts in place. 0 when
 * n is 0. */
double clustersim_percentile(double *v, size_t n, double p);

/* Computes the figures of `n` records. 0 or IPL_E_NOMEM. */
int clustersim_figures_compute(const clustersim_record_t *recs, size_t n, double slo_ttft_s,
                               clustersim_figures_t *out);

/* A human table, one row per figure set, with a header. */
void clustersim_report_table(FILE *out, const clustersim_figures_t *rows, size_t n);
/* One JSON object per figure and line:
 *   {"name": "ttft_p50_s", "strategy": "ttft", "workload": "shared-prefix", "value": 0.31} */
void clustersim_report_json(FILE *out, const clustersim_figures_t *f);

#endif
