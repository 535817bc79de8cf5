/*
 * bench_report — JSON, CSV, table and figure lines. See bench_report.h.
 */
#include "bench_report.h"

#include <math.h>
#include <string.h>

#include "ipl_error.h"

int bench_labels_parse(char *spec, bench_labels_t *labels, char *err, size_t errlen)
{
    char *save = NULL;
    for (char *item = strtok_r(spec, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(item, '=');
        if (!eq || eq == item || labels->n == BENCH_MAX_LABELS) {
            ipl_errf(err, errlen, "--label \"%s\": expected KEY=VALUE[,KEY=VALUE...] (at most %d)",
                     item, BENCH_MAX_LABELS);
            return IPL_E_INVAL;
        }
        *eq = '\0';
        labels->key[labels->n] = item;
        labels->value[labels->n++] = eq + 1;
    }
    return 0;
}

const char *bench_labels_get(const bench_labels_t *labels, const char *key)
{
    for (size_t i = 0; i < labels->n; i++)
        if (!strcmp(labels->key[i], key)) return labels->value[i];
    return NULL;
}

/* cJSON refuses nothing, but JSON has no NaN: those become null. */
static void s_num(cJSON *o, const char *k, double v)
{
    if (isfinite(v))
        cJSON_AddNumberToObject(o, k, v);
    else
        cJSON_AddNullToObject(o, k);
}

cJSON *bench_report_dist(const bench_dist_t *d)
{
    cJSON *o = cJSON_CreateObject();
    s_num(o, "mean", d->mean);
    s_num(o, "median", d->median);
    s_num(o, "mode", d->mode);
    s_num(o, "variance", d->variance);
    s_num(o, "std_dev", d->std_dev);
    s_num(o, "min", d->min);
    s_num(o, "max", d->max);
    s_num(o, "count", (double)d->count);
    s_num(o, "total_sum", d->total_sum);
    cJSON *p = cJSON_AddObjectToObject(o, "percentiles");
    for (int i = 0; i < BENCH_NPCT; i++)
        s_num(p, bench_pct_names[i], d->pct[i]);
    return o;
}

static cJSON *s_totals(const uint64_t t[BENCH_NSTATUS])
{
    cJSON *o = cJSON_CreateObject();
    for (int s = 0; s < BENCH_NSTATUS; s++)
        s_num(o, bench_status_name(s), (double)t[s]);
    return o;
}

static cJSON *s_request(const bench_req_t *r, size_t id)
{
    cJSON *o = cJSON_CreateObject();
    char rid[32];
    snprintf(rid, sizeof rid, "%zu", id);
    cJSON_AddStringToObject(o, "request_id", rid);
    s_num(o, "conversation", r->conversation);
    s_num(o, "turn", r->turn);
    s_num(o, "request_start_time", r->start);
    s_num(o, "request_end_time", r->end);
    s_num(o, "scheduled_time", r->scheduled);
    s_num(o, "request_latency", bench_req_latency_s(r));
    s_num(o, "time_to_first_token_ms", bench_req_ttft_ms(r));
    s_num(o, "time_per_output_token_ms", bench_req_tpot_ms(r));
    s_num(o, "inter_token_latency_ms", bench_req_itl_ms(r));
    s_num(o, "prompt_tokens", r->prompt_tokens >= 0 ? (double)r->prompt_tokens : NAN);
    s_num(o, "output_tokens", bench_req_output_tokens(r));
    s_num(o, "cached_tokens", r->cached_tokens >= 0 ? (double)r->cached_tokens : NAN);
    s_num(o, "token_iterations", r->iterations);
    s_num(o, "http_status", r->http_status);
    cJSON_AddStringToObject(o, "error", bench_err_name(r->error));
    return o;
}

cJSON *bench_report_benchmark(const bench_entry_t *e, const bench_labels_t *labels, size_t sample)
{
    const bench_metrics_t *m = e->m;
    cJSON *b = cJSON_CreateObject();
    if (!b) return NULL;
    cJSON_AddStringToObject(b, "type_", "generative_benchmark");
    cJSON *cfg = cJSON_AddObjectToObject(b, "config");
    cJSON_AddStringToObject(cfg, "profile", e->profile);
    cJSON *st = cJSON_AddObjectToObject(cfg, "strategy");
    cJSON_AddStringToObject(st, "type_", bench_strat_name(e->strategy.kind));
    if (e->strategy.kind == BENCH_STRAT_CONSTANT || e->strategy.kind == BENCH_STRAT_POISSON)
        s_num(st, "rate", e->strategy.rate);
    if (e->strategy.kind == BENCH_STRAT_CONCURRENT) s_num(st, "streams", e->strategy.streams);
    s_num(st, "max_concurrency", e->strategy.max_concurrency ? e->strategy.max_concurrency : 512);
    cJSON *cons = cJSON_AddObjectToObject(cfg, "constraints");
    if (e->max_duration_s > 0) s_num(cons, "max_duration", e->max_duration_s);
    if (e->max_requests) s_num(cons, "max_requests", (double)e->max_requests);
    s_num(b, "start_time", m->measure_start);
    s_num(b, "end_time", m->measure_end);
    s_num(b, "duration", m->measure_end - m->measure_start);
    cJSON *sm = cJSON_AddObjectToObject(b, "scheduler_metrics");
    s_num(sm, "start_time", e->run->start);
    s_num(sm, "request_start_time", m->measure_start);
    s_num(sm, "measure_start_time", m->measure_start);
    s_num(sm, "measure_end_time", m->measure_end);
    s_num(sm, "request_end_time", m->measure_end);
    s_num(sm, "end_time", e->run->end);
    cJSON_AddItemToObject(sm, "requests_made", s_totals(m->totals));

    cJSON *mj = cJSON_AddObjectToObject(b, "metrics");
    cJSON_AddItemToObject(mj, "request_totals", s_totals(m->totals));
    for (int k = 0; k < BENCH_M__COUNT; k++) {
        cJSON *sd = cJSON_AddObjectToObject(mj, bench_metric_name(k));
        for (int s = 0; s < BENCH_NSTATUS; s++)
            cJSON_AddItemToObject(sd, bench_status_name(s), bench_report_dist(&m->m[k][s]));
    }

    cJSON *ours = cJSON_AddObjectToObject(b, "inferplane");
    cJSON *g = cJSON_AddObjectToObject(ours, "goodput");
    if (m->slo_ttft_ms > 0)
        s_num(g, "slo_ttft_ms", m->slo_ttft_ms);
    else
        cJSON_AddNullToObject(g, "slo_ttft_ms");
    s_num(g, "requests_meeting_slo", (double)m->slo_met);
    s_num(g, "requests_per_minute", m->goodput_per_min);
    cJSON *c = cJSON_AddObjectToObject(ours, "cache");
    s_num(c, "requests_reporting", (double)m->cache_requests);
    s_num(c, "prompt_tokens", (double)m->cache_prompt_tokens);
    s_num(c, "cached_tokens", (double)m->cache_cached_tokens);
    s_num(c, "hit_ratio", m->cache_hit_ratio);
    cJSON *er = cJSON_AddObjectToObject(ours, "errors");
    for (int k = 1; k < BENCH_ERR__COUNT; k++)
        s_num(er, bench_err_name(k), (double)m->errors[k]);
    cJSON *lj = cJSON_AddObjectToObject(ours, "labels");
    for (size_t i = 0; i < labels->n; i++)
        cJSON_AddStringToObject(lj, labels->key[i], labels->value[i]);
    s_num(ours, "bench_wall_seconds", e->run->wall_s);
    s_num(ours, "bench_cpu_seconds", e->run->cpu_s);

    cJSON *rq = cJSON_AddObjectToObject(b, "requests");
    for (int s = 0; s < 3; s++) {
        cJSON *arr = cJSON_AddArrayToObject(rq, bench_status_name(s));
        size_t k = 0;
        for (size_t i = 0; i < e->run->n && k < sample; i++)
            if (e->run->reqs[i].status == s) {
                cJSON_AddItemToArray(arr, s_request(&e->run->reqs[i], i));
                k++;
            }
    }
    return b;
}

/* The figures every output names: (column, unit, value). */
typedef struct {
    const char *name, *unit;
    double value;
} s_fig_t;

static size_t s_figs(const bench_entry_t *e, s_fig_t *f)
{
    const bench_metrics_t *m = e->m;
    const bench_dist_t *ttft = &m->m[BENCH_M_TTFT_MS][BENCH_SUCCESSFUL],
                       *lat = &m->m[BENCH_M_REQUEST_LATENCY][BENCH_SUCCESSFUL],
                       *itl = &m->m[BENCH_M_ITL_MS][BENCH_SUCCESSFUL],
                       *tpot = &m->m[BENCH_M_TPOT_MS][BENCH_SUCCESSFUL];
    size_t n = 0;
    f[n++] = (s_fig_t){"requests_per_s", "req/s",
                       m->m[BENCH_M_REQUESTS_PER_SECOND][BENCH_SUCCESSFUL].mean};
    f[n++] = (s_fig_t){"concurrency_mean", "requests",
                       m->m[BENCH_M_REQUEST_CONCURRENCY][BENCH_TOTAL].mean};
    f[n++] = (s_fig_t){"ttft_mean_ms", "ms", ttft->mean};
    f[n++] = (s_fig_t){"ttft_p50_ms", "ms", ttft->median};
    f[n++] = (s_fig_t){"ttft_p90_ms", "ms", ttft->pct[BENCH_P90]};
    f[n++] = (s_fig_t){"ttft_p99_ms", "ms", ttft->pct[BENCH_P99]};
    f[n++] = (s_fig_t){"itl_p50_ms", "ms", itl->median};
    f[n++] = (s_fig_t){"tpot_p50_ms", "ms", tpot->median};
    f[n++] = (s_fig_t){"e2e_p50_s", "s", lat->median};
    f[n++] = (s_fig_t){"e2e_p99_s", "s", lat->pct[BENCH_P99]};
    f[n++] = (s_fig_t){"output_tokens_per_s", "tok/s",
                       m->m[BENCH_M_OUTPUT_TOKENS_PER_SECOND][BENCH_SUCCESSFUL].mean};
    f[n++] = (s_fig_t){"goodput_per_min", "req/min", m->goodput_per_min};
    f[n++] = (s_fig_t){"cache_hit_ratio", "ratio", m->cache_hit_ratio};
    f[n++] = (s_fig_t){"successful", "requests", (double)m->totals[BENCH_SUCCESSFUL]};
    f[n++] = (s_fig_t){"incomplete", "requests", (double)m->totals[BENCH_INCOMPLETE]};
    f[n++] = (s_fig_t){"errored", "requests", (double)m->totals[BENCH_ERRORED]};
    return n;
}

void bench_report_figures(FILE *f, const bench_entry_t *e, size_t n, const bench_labels_t *labels)
{
    for (size_t i = 0; i < n; i++) {
        s_fig_t figs[32];
        size_t k = s_figs(&e[i], figs);
        char bench[96];
        snprintf(bench, sizeof bench, "%s", bench_strategy_label(&e[i].strategy));
        for (size_t j = 0; j < k; j++) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "name", figs[j].name);
            s_num(o, "value", figs[j].value);
            cJSON_AddStringToObject(o, "unit", figs[j].unit);
            const char *strategy = bench_labels_get(labels, "strategy");
            const char *workload = bench_labels_get(labels, "workload");
            cJSON_AddStringToObject(o, "strategy", strategy ? strategy : "");
            cJSON_AddStringToObject(o, "workload", workload ? workload : "");
            for (size_t l = 0; l < labels->n; l++)
                if (strcmp(labels->key[l], "strategy") && strcmp(labels->key[l], "workload"))
                    cJSON_AddStringToObject(o, labels->key[l], labels->value[l]);
            cJSON_AddStringToObject(o, "benchmark", bench);
            char *line = cJSON_PrintUnformatted(o);
            if (line) fprintf(f, "%s\n", line);
            cJSON_free(line);
            cJSON_Delete(o);
        }
    }
    fflush(f);
}

void bench_report_csv(FILE *f, const bench_entry_t *e, size_t n, const bench_labels_t *labels)
{
    s_fig_t figs[32];
    size_t k = n ? s_figs(&e[0], figs) : 0;
    fputs("benchmark,profile", f);
    for (size_t l = 0; l < labels->n; l++)
        fprintf(f, ",%s", labels->key[l]);
    fputs(",duration_s", f);
    for (size_t j = 0; j < k; j++)
        fprintf(f, ",%s", figs[j].name);
    fputc('\n', f);
    for (size_t i = 0; i < n; i++) {
        k = s_figs(&e[i], figs);
        fprintf(f, "%s,%s", bench_strategy_label(&e[i].strategy), e[i].profile);
        for (size_t l = 0; l < labels->n; l++)
            fprintf(f, ",%s", labels->value[l]);
        fprintf(f, ",%.3f", e[i].m->measure_end - e[i].m->measure_start);
        for (size_t j = 0; j < k; j++)
            if (isfinite(figs[j].value))
                fprintf(f, ",%.6g", figs[j].value);
            else
                fputs(",", f);
        fputc('\n', f);
    }
    fflush(f);
}

void bench_report_table(FILE *f, const bench_entry_t *e, size_t n)
{
    fprintf(f, "%-20s %8s %6s %6s %6s %9s %9s %9s %9s %8s %8s %9s %9s %9s %6s\n", "benchmark",
            "dur s", "ok", "incompl", "err", "req/s", "conc", "ttft p50", "ttft p99", "itl p50",
            "tpot p50", "e2e p50", "out tok/s", "goodput/m", "cache");
    fprintf(f, "%-20s %8s %6s %6s %6s %9s %9s %9s %9s %8s %8s %9s %9s %9s %6s\n", "", "", "", "",
            "", "", "mean", "ms", "ms", "ms", "ms", "s", "", "", "hit");
    for (size_t i = 0; i < n; i++) {
        const bench_metrics_t *m = e[i].m;
        const bench_dist_t *ttft = &m->m[BENCH_M_TTFT_MS][BENCH_SUCCESSFUL];
        fprintf(f,
                "%-20s %8.2f %6llu %6llu %6llu %9.2f %9.2f %9.1f %9.1f %8.2f %8.2f %9.3f %9.1f "
                "%9.1f %6.3f\n",
                bench_strategy_label(&e[i].strategy), m->measure_end - m->measure_start,
                (unsigned long long)m->totals[BENCH_SUCCESSFUL],
                (unsigned long long)m->totals[BENCH_INCOMPLETE],
                (unsigned long long)m->totals[BENCH_ERRORED],
                m->m[BENCH_M_REQUESTS_PER_SECOND][BENCH_SUCCESSFUL].mean,
                m->m[BENCH_M_REQUEST_CONCURRENCY][BENCH_TOTAL].mean, ttft->median,
                ttft->pct[BENCH_P99], m->m[BENCH_M_ITL_MS][BENCH_SUCCESSFUL].median,
                m->m[BENCH_M_TPOT_MS][BENCH_SUCCESSFUL].median,
                m->m[BENCH_M_REQUEST_LATENCY][BENCH_SUCCESSFUL].median,
                m->m[BENCH_M_OUTPUT_TOKENS_PER_SECOND][BENCH_SUCCESSFUL].mean, m->goodput_per_min,
                isnan(m->cache_hit_ratio) ? 0.0 : m->cache_hit_ratio);
        int any = 0;
        for (int k = 1; k < BENCH_ERR__COUNT; k++)
            if (m->errors[k]) {
                fprintf(f, "%s%s %llu", any++ ? ", " : "  not successful: ", bench_err_name(k),
                        (unsigned long long)m->errors[k]);
            }
        if (any) fputc('\n', f);
    }
    fflush(f);
}
