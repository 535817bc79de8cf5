/*
 * bench_stats — GuideLLM's distribution summaries. See bench_stats.h.
 */
#include "bench_stats.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ipl_error.h"

#define S_MERGE_S 1e-4 /* GuideLLM's threshold: event times this close are one event */
#define S_EPS     1e-6

const char *const bench_pct_names[BENCH_NPCT] = {"p001", "p01", "p05", "p10", "p25", "p50",
                                                 "p75",  "p90", "p95", "p99", "p999"};
const double bench_pct_probs[BENCH_NPCT] = {0.001, 0.01, 0.05, 0.1,  0.25, 0.5,
                                            0.75,  0.9,  0.95, 0.99, 0.999};

static int s_cmp_value(const void *a, const void *b)
{
    double x = ((const bench_wv_t *)a)->value, y = ((const bench_wv_t *)b)->value;
    return x < y ? -1 : x > y ? 1 : 0;
}

/* Sums the weights of equal values into the first of them (v sorted); returns the new n. */
static size_t s_merge_equal(bench_wv_t *v, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (k && v[k - 1].value == v[i].value)
            v[k - 1].weight += v[i].weight;
        else
            v[k++] = v[i];
    }
    return k;
}

int bench_dist_values(bench_wv_t *v, size_t n, int64_t count, bench_dist_t *out)
{
    memset(out, 0, sizeof *out);
    if (n == 0) return 0;
    double wsum = 0;
    for (size_t i = 0; i < n; i++)
        wsum += v[i].weight;
    out->count = count >= 0 ? (uint64_t)count : (uint64_t)llround(wsum > 0 ? wsum : 0);
    qsort(v, n, sizeof *v, s_cmp_value);
    n = s_merge_equal(v, n);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (v[i].weight > 0) v[k++] = v[i];
    bool uniform = false;
    double total = 0;
    for (size_t i = 0; i < k; i++)
        total += v[i].weight;
    if (total <= S_EPS) {
        uniform = true;
        total = (double)k;
    }
    if (k == 0) return 0; /* nothing with a weight: an empty distribution of `count` */
    double cdf = 0, mean = 0, best = -1;
    size_t next = 0;
    for (size_t i = 0; i < k; i++) {
        double p = (uniform ? 1.0 : v[i].weight) / total;
        cdf += p;
        mean += v[i].value * p;
        if (p > best) {
            best = p;
            out->mode = v[i].value;
        }
        while (next < BENCH_NPCT && cdf >= bench_pct_probs[next])
            out->pct[next++] = v[i].value;
    }
    while (next < BENCH_NPCT) /* rounding left the cumulative sum short of p: the last value */
        out->pct[next++] = v[k - 1].value;
    double var = 0;
    for (size_t i = 0; i < k; i++) {
        double d = v[i].value - mean;
        var += d * d * (uniform ? 1.0 : v[i].weight) / total;
    }
    out->mean = mean;
    out->median = out->pct[BENCH_P50];
    out->variance = var;
    out->std_dev = sqrt(var);
    out->min = v[0].value;
    out->max = v[k - 1].value;
    out->total_sum = mean * (double)out->count;
    return 0;
}

/* Events sorted by time: equal times summed, then every event within S_MERGE_S of a group's
 * first time folded into it. Returns the new n. */
static size_t s_merge_times(bench_wv_t *v, size_t n)
{
    n = s_merge_equal(v, n);
    size_t k = 0, i = 0;
    while (i < n) {
        bench_wv_t g = v[i];
        size_t j = i + 1;
        while (j < n && v[j].value <= g.value + S_MERGE_S)
            g.weight += v[j++].weight;
        v[k++] = g;
        i = j;
    }
    return k;
}

int bench_dist_rate(bench_wv_t *events, size_t n, double start, double end, bench_dist_t *out)
{
    memset(out, 0, sizeof *out);
    bench_wv_t *t = malloc((n + 2) * sizeof *t);
    if (!t) return IPL_E_NOMEM;
    size_t k = 0;
    if (!isnan(start)) t[k++] = (bench_wv_t){start, 0};
    for (size_t i = 0; i < n; i++)
        if ((isnan(start) || events[i].value >= start) && (isnan(end) || events[i].value <= end))
            t[k++] = events[i];
    if (!isnan(end)) t[k++] = (bench_wv_t){end, 0};
    qsort(t, k, sizeof *t, s_cmp_value);
    k = s_merge_times(t, k);
    if (k <= 1) {
        free(t);
        return 0;
    }
    bench_wv_t *rd = malloc(k * sizeof *rd);
    if (!rd) {
        free(t);
        return IPL_E_NOMEM;
    }
    double occ = 0;
    for (size_t i = 0; i < k; i++) {
        double lo = i == 0 ? t[0].value : (t[i - 1].value + t[i].value) / 2;
        double hi = i == k - 1 ? t[k - 1].value : (t[i].value + t[i + 1].value) / 2;
        double span = hi - lo;
        if (i == k - 1 && span < S_EPS) span = S_EPS;
        rd[i] = (bench_wv_t){t[i].weight / span, span};
        occ += t[i].weight;
    }
    int rc = bench_dist_values(rd, k, llround(occ), out);
    free(rd);
    free(t);
    return rc;
}

int bench_dist_concurrency(const bench_iv_t *iv, size_t n, double start, double end,
                           bench_dist_t *out)
{
    memset(out, 0, sizeof *out);
    bench_wv_t *t = malloc((2 * n + 2) * sizeof *t);
    if (!t) return IPL_E_NOMEM;
    size_t k = 0, count = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isnan(start) && iv[i].end < start) continue;
        if (!isnan(end) && iv[i].start > end) continue;
        t[k++] = (bench_wv_t){iv[i].start, iv[i].weight};
        t[k++] = (bench_wv_t){iv[i].end, -iv[i].weight};
        count++;
    }
    qsort(t, k, sizeof *t, s_cmp_value);
    k = s_merge_times(t, k);
    if (!isnan(start) && k > 0) {
        size_t first = 0; /* the first event at or after the window's start */
        double prior = 0;
        while (first < k && t[first].value < start)
            prior += t[first++].weight;
        /* the window's start, carrying the level reached before it, replaces those events */
        size_t m = k - first;
        memmove(t + 1, t + first, m * sizeof *t);
        t[0] = (bench_wv_t){start, prior};
        k = m + 1;
    }
    if (!isnan(end) && k > 0) {
        size_t last = 0;
        while (last < k && t[last].value <= end)
            last++;
        t[last] = (bench_wv_t){end, 0};
        k = last + 1;
    }
    if (k == 0) {
        free(t);
        return 0;
    }
    bench_wv_t *lv = malloc(k * sizeof *lv);
    if (!lv) {
        free(t);
        return IPL_E_NOMEM;
    }
    double level = 0;
    bool any = false;
    for (size_t i = 0; i + 1 < k; i++) {
        level += t[i].weight;
        double d = t[i + 1].value - t[i].value;
        lv[i] = (bench_wv_t){level > 0 ? level : 0, d > 0 ? d : 0};
        if (d > 0) any = true;
    }
    int rc = 0;
    if (k == 1) { /* one point in time: its level, if there was an interval at all */
        lv[0] = (bench_wv_t){t[0].weight > 0 ? t[0].weight : 0, 1};
        if (count) rc = bench_dist_values(lv, 1, -1, out);
    } else if (any) {
        rc = bench_dist_values(lv, k - 1, (int64_t)count, out);
    }
    free(lv);
    free(t);
    return rc;
}
