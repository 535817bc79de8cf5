/*
 * bench_stats — distributions summarised exactly as GuideLLM summarises them
 * (guidellm/schemas/statistics.py, DistributionSummary), so our reports read like its reports
 * and two runs of either tool compare figure for figure.
 *
 * A distribution is built from weighted values (value, weight):
 *   - values are sorted, equal values merged (weights summed), zero weights dropped; the
 *     weights normalised to probabilities (all zero: uniform);
 *   - percentile p = the first value whose cumulative probability is >= p (numpy's
 *     searchsorted "left"): the median of {1,2,3,4} is 2, not 2.5;
 *   - mean, variance, std_dev are probability-weighted; mode the most probable value (the
 *     smallest of ties); total_sum = mean × count, count = the rounded sum of the weights
 *     unless given.
 *
 * Rates from event times (requests per second, tokens per second): events (time, weight);
 * with a window, events outside it are dropped and the window's ends added with weight 0;
 * times within 0.1 ms are merged (greedily from the earliest, weights summed); each event i
 * then stands for the span between the midpoints to its neighbours and has the rate
 * weight_i / span_i, weighted by span_i — so the mean is Σweights / (last − first).
 *
 * Concurrency from intervals (start, end, weight): +weight at each start, −weight at each
 * end, merged as above, clipped at 0, each level weighted by how long it held; with a window,
 * intervals outside it are dropped, the level at the window's start carried in and the
 * window's end closes the last level.
 *
 * Pure functions; the arrays passed are scratch (sorted in place) unless const.
 */
#ifndef BENCH_STATS_H
#define BENCH_STATS_H

#include <stddef.h>
#include <stdint.h>

#define BENCH_NPCT 11

/* "p001" "p01" "p05" "p10" "p25" "p50" "p75" "p90" "p95" "p99" "p999" and their probabilities. */
extern const char *const bench_pct_names[BENCH_NPCT];
extern const double bench_pct_probs[BENCH_NPCT];
enum { BENCH_P50 = 5, BENCH_P90 = 7, BENCH_P95 = 8, BENCH_P99 = 9 };

typedef struct {
    double mean, median, mode, variance, std_dev, min, max, total_sum;
    uint64_t count;
    double pct[BENCH_NPCT];
} bench_dist_t;

typedef struct {
    double value, weight;
} bench_wv_t;

typedef struct {
    double start, end, weight;
} bench_iv_t;

/* From n weighted values (sorted in place). count < 0: the rounded sum of the weights.
 * n == 0 gives all zeros. 0 or IPL_E_NOMEM. */
int bench_dist_values(bench_wv_t *v, size_t n, int64_t count, bench_dist_t *out);

/* A rate distribution from n events (value = time in seconds, weight = occurrences; sorted
 * in place). start/end: the window, or NAN for none. 0 or IPL_E_NOMEM. */
int bench_dist_rate(bench_wv_t *events, size_t n, double start, double end, bench_dist_t *out);

/* A concurrency distribution from n intervals. start/end: the window, or NAN for none. */
int bench_dist_concurrency(const bench_iv_t *iv, size_t n, double start, double end,
                           bench_dist_t *out);

#endif
