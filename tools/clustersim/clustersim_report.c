/*
 * clustersim_report — percentiles, goodput and output formats (see the header).
 */
#include "clustersim_report.h"

#include <math.h>
#include <stdlib.h>

#include "ipl_error.h"

static int s_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double clustersim_percentile(double *v, size_t n, double p)
{
    if (n == 0) return 0;
    qsort(v, n, sizeof *v, s_cmp_double);
    double rank = ceil(p * (double)n);
    size_t k = rank < 1 ? 0 : (size_t)rank - 1;
    return v[k < n ? k : n - 1];
}

int clustersim_figures_compute(const clustersim_record_t *recs, size_t n, double slo_ttft_s,
                               clustersim_figures_t *out)
{
    *out = (clustersim_figures_t){.strategy = out->strategy,
                                  .workload = out->workload,
                                  .requests = (uint32_t)n,
                                  .slo_ttft_s = slo_ttft_s};
    double *ttft = malloc((n ? n : 1) * sizeof *ttft);
    double *e2e = malloc((n ? n : 1) * sizeof *e2e);
    if (!ttft || !e2e) {
        free(ttft);
        free(e2e);
        return IPL_E_NOMEM;
    }
    double first = INFINITY, last = -INFINITY;
    uint64_t prompt = 0, cached = 0, good = 0;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        const clustersim_record_t *r = &recs[i];
        if (r->arrival_s < first) first = r->arrival_s;
        if (r->first_token_s < 0 || r->finish_s < 0) {
            out->rejected++;
            continue;
        }
        ttft[m] = r->first_token_s - r->arrival_s;
        e2e[m] = r->finish_s - r->arrival_s;
        good += ttft[m] <= slo_ttft_s;
        m++;
        if (r->finish_s > last) last = r->finish_s;
        prompt += r->prompt_tokens;
        cached += r->cached_tokens;
    }
    out->completed = (uint32_t)m;
    if (m) {
        out->duration_s = last - first;
        double minutes = out->duration_s > 0 ? out->duration_s / 60.0 : 1.0 / 60.0;
        out->goodput_rpm = (double)good / minutes;
        out->throughput_rpm = (double)m / minutes;
        out->cache_hit_ratio = prompt ? (double)cached / (double)prompt : 0;
        // Each percentile call sorts; the array is already sorted after the first.
        out->ttft_p50_s = clustersim_percentile(ttft, m, 0.50);
        out->ttft_p90_s = clustersim_percentile(ttft, m, 0.90);
        out->ttft_p99_s = clustersim_percentile(ttft, m, 0.99);
        out->e2e_p50_s = clustersim_percentile(e2e, m, 0.50);
        out->e2e_p90_s = clustersim_percentile(e2e, m, 0.90);
        out->e2e_p99_s = clustersim_percentile(e2e, m, 0.99);
    }
    free(ttft);
    free(e2e);
    return 0;
}

void clustersim_report_table(FILE *out, const clustersim_figures_t *rows, size_t n)
{
    fprintf(out, "%-15s %-20s %8s %8s %8s %8s %8s %9s %9s %7s %6s\n", "workload", "strategy",
            "ttft p50", "ttft p90", "ttft p99", "e2e p50", "e2e p99", "goodput", "thruput", "cache",
            "done");
    fprintf(out, "%-15s %-20s %8s %8s %8s %8s %8s %9s %9s %7s %6s\n", "", "", "s", "s", "s", "s",
            "s", "req/min", "req/min", "hit", "");
    for (size_t i = 0; i < n; i++) {
        const clustersim_figures_t *f = &rows[i];
        fprintf(out, "%-15s %-20s %8.3f %8.3f %8.3f %8.3f %8.3f %9.1f %9.1f %6.1f%% %6u\n",
                f->workload, f->strategy, f->ttft_p50_s, f->ttft_p90_s, f->ttft_p99_s, f->e2e_p50_s,
                f->e2e_p99_s, f->goodput_rpm, f->throughput_rpm, 100.0 * f->cache_hit_ratio,
                f->completed);
    }
}

static void s_json(FILE *out, const clustersim_figures_t *f, const char *name, double v)
{
    // Names are ours and strategy/workload names are [A-Za-z0-9._-] (checked by the caller),
    // so no escaping is needed.
    fprintf(out,
            "{\"name\": \"%s\", \"strategy\": \"%s\", \"workload\": \"%s\", \"value\": %.9g}\n",
            name, f->strategy, f->workload, v);
}

void clustersim_report_json(FILE *out, const clustersim_figures_t *f)
{
    s_json(out, f, "ttft_p50_s", f->ttft_p50_s);
    s_json(out, f, "ttft_p90_s", f->ttft_p90_s);
    s_json(out, f, "ttft_p99_s", f->ttft_p99_s);
    s_json(out, f, "e2e_p50_s", f->e2e_p50_s);
    s_json(out, f, "e2e_p99_s", f->e2e_p99_s);
    s_json(out, f, "goodput_rpm", f->goodput_rpm);
    s_json(out, f, "throughput_rpm", f->throughput_rpm);
    s_json(out, f, "cache_hit_ratio", f->cache_hit_ratio);
    s_json(out, f, "completed", f->completed);
    s_json(out, f, "rejected", f->rejected);
}
