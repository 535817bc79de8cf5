/*
 * bench_metrics — GuideLLM's per-benchmark metrics. See bench_metrics.h.
 */
#include "bench_metrics.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ipl_error.h"

const char *bench_status_name(int status)
{
    static const char *const names[] = {"successful", "incomplete", "errored", "total"};
    return status >= 0 && status < BENCH_NSTATUS ? names[status] : "?";
}

const char *bench_err_name(int err)
{
    static const char *const names[] = {"none",         "http",      "connect",
                                        "timeout",      "transfer",  "truncated",
                                        "stream_error", "malformed", "cancelled"};
    return err >= 0 && err < BENCH_ERR__COUNT ? names[err] : "?";
}

const char *bench_metric_name(int metric)
{
    static const char *const names[] = {"requests_per_second",
                                        "request_concurrency",
                                        "request_latency",
                                        "request_streaming_iterations_count",
                                        "prompt_token_count",
                                        "output_token_count",
                                        "total_token_count",
                                        "time_to_first_token_ms",
                                        "time_to_first_output_token_ms",
                                        "time_per_output_token_ms",
                                        "inter_token_latency_ms",
                                        "prompt_tokens_per_second",
                                        "output_tokens_per_second",
                                        "tokens_per_second",
                                        "output_tokens_per_iteration",
                                        "iter_tokens_per_iteration"};
    return metric >= 0 && metric < BENCH_M__COUNT ? names[metric] : "?";
}

double bench_req_output_tokens(const bench_req_t *r)
{
    if (r->output_tokens >= 0) return (double)r->output_tokens;
    return r->iterations ? (double)r->iterations : NAN;
}

double bench_req_ttft_ms(const bench_req_t *r)
{
    return r->first_token > 0 ? 1000 * (r->first_token - r->start) : NAN;
}

double bench_req_ttfot_ms(const bench_req_t *r)
{
    return r->first_output > 0 ? 1000 * (r->first_output - r->start) : NAN;
}

double bench_req_tpot_ms(const bench_req_t *r)
{
    double out = bench_req_output_tokens(r);
    double last = r->last_token > 0 ? r->last_token : r->end;
    if (isnan(out) || out == 0) return NAN;
    return 1000 * (last - r->start) / out;
}

double bench_req_itl_ms(const bench_req_t *r)
{
    double out = bench_req_output_tokens(r);
    if (r->first_token <= 0 || r->last_token <= 0 || isnan(out) || out <= 1) return NAN;
    return 1000 * (r->last_token - r->first_token) / (out - 1);
}

double bench_req_latency_s(const bench_req_t *r)
{
    return r->end - r->start;
}

static double s_or0(double v)
{
    return isnan(v) ? 0 : v;
}

/* Tokens per iteration after the first (GuideLLM's iter_tokens_per_iteration); NAN if none. */
static double s_iter_tokens(const bench_req_t *r)
{
    double out = bench_req_output_tokens(r);
    if (isnan(out) || out <= 1 || r->iterations <= 1) return NAN;
    return (out - 1) / (r->iterations - 1.0);
}

/* Calls fn(arg, time, tokens) for each output-token timing of r (GuideLLM's
 * output_tokens_timings): one point at the end with every token when there is no iteration
 * data, else the first token at first_token and the rest evenly to last_token. */
typedef void(s_timing_fn)(void *arg, double t, double tokens, bool iter);
static void s_output_timings(const bench_req_t *r, s_timing_fn *fn, void *arg)
{
    double out = bench_req_output_tokens(r);
    if (r->first_token <= 0 || r->last_token <= 0 || r->iterations <= 1) {
        fn(arg, r->last_token > 0 ? r->last_token : r->end, s_or0(out), false);
        return;
    }
    fn(arg, r->first_token, out > 0 ? 1.0 : 0.0, false);
    double per = s_iter_tokens(r);
    if (isnan(per)) return;
    double step = (r->last_token - r->first_token) / (r->iterations - 1.0);
    for (uint32_t i = 1; i < r->iterations; i++)
        fn(arg, i == r->iterations - 1 ? r->last_token : r->first_token + step * i, per, true);
}

/* A growable array of weighted values per status (the total is built from all three). */
typedef struct {
    bench_wv_t *v[3];
    size_t n[3], cap[3];
    bool failed;
} s_lists_t;

static void s_push(s_lists_t *l, int status, double value, double weight)
{
    if (l->n[status] == l->cap[status]) {
        size_t cap = l->cap[status] ? l->cap[status] * 2 : 64;
        bench_wv_t *g = realloc(l->v[status], cap * sizeof *g);
        if (!g) {
            l->failed = true;
            return;
        }
        l->v[status] = g;
        l->cap[status] = cap;
    }
    l->v[status][l->n[status]++] = (bench_wv_t){value, weight};
}

static void s_lists_free(s_lists_t *l)
{
    for (int s = 0; s < 3; s++)
        free(l->v[s]);
    memset(l, 0, sizeof *l);
}

/* Fills the four distributions of one metric from the lists; rate: events, not values. */
static int s_summarise(s_lists_t *l, bool rate, double start, double end,
                       bench_dist_t out[BENCH_NSTATUS])
{
    if (l->failed) return IPL_E_NOMEM;
    size_t all = l->n[0] + l->n[1] + l->n[2];
    bench_wv_t *tot = malloc((all ? all : 1) * sizeof *tot);
    if (!tot) return IPL_E_NOMEM;
    size_t k = 0;
    for (int s = 0; s < 3; s++) {
        if (l->n[s]) memcpy(tot + k, l->v[s], l->n[s] * sizeof *tot);
        k += l->n[s];
    }
    int rc = 0;
    for (int s = 0; s < 3 && rc == 0; s++)
        rc = rate ? bench_dist_rate(l->v[s], l->n[s], start, end, &out[s])
                  : bench_dist_values(l->v[s], l->n[s], -1, &out[s]);
    if (rc == 0)
        rc = rate ? bench_dist_rate(tot, all, start, end, &out[BENCH_TOTAL])
                  : bench_dist_values(tot, all, -1, &out[BENCH_TOTAL]);
    free(tot);
    return rc;
}

typedef struct {
    s_lists_t *l;
    int status;
    bool values; /* push token counts as values (per iteration), else (time, tokens) events */
    bool iter_only;
} s_tctx_t;

static void s_on_timing(void *arg, double t, double tokens, bool iter)
{
    s_tctx_t *c = arg;
    if (c->iter_only && !iter) return;
    if (c->values)
        s_push(c->l, c->status, tokens, 1);
    else
        s_push(c->l, c->status, t, tokens);
}

static int s_concurrency(const bench_req_t *reqs, size_t n, double start, double end,
                         bench_dist_t out[BENCH_NSTATUS])
{
    bench_iv_t *iv = malloc((n ? n : 1) * sizeof *iv);
    if (!iv) return IPL_E_NOMEM;
    int rc = 0;
    for (int s = 0; s <= 3 && rc == 0; s++) {
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
            if (s == BENCH_TOTAL || reqs[i].status == s)
                iv[k++] = (bench_iv_t){reqs[i].start, reqs[i].end, 1};
        rc = bench_dist_concurrency(iv, k, start, end, &out[s]);
    }
    free(iv);
    return rc;
}

int bench_metrics_compute(const bench_req_t *reqs, size_t n, double measure_start,
                          double measure_end, double slo_ttft_ms, bench_metrics_t *out)
{
    memset(out, 0, sizeof *out);
    out->measure_start = measure_start;
    out->measure_end = measure_end;
    out->slo_ttft_ms = slo_ttft_ms;
    out->cache_hit_ratio = NAN;
    for (size_t i = 0; i < n; i++) {
        const bench_req_t *r = &reqs[i];
        out->totals[r->status]++;
        out->totals[BENCH_TOTAL]++;
        out->errors[r->error < BENCH_ERR__COUNT ? r->error : 0]++;
        if (r->status != BENCH_SUCCESSFUL) continue;
        double ttft = bench_req_ttft_ms(r);
        if (slo_ttft_ms <= 0 || (!isnan(ttft) && ttft <= slo_ttft_ms)) out->slo_met++;
        if (r->cached_tokens >= 0 && r->prompt_tokens > 0) {
            out->cache_requests++;
            out->cache_prompt_tokens += (uint64_t)r->prompt_tokens;
            out->cache_cached_tokens += (uint64_t)r->cached_tokens;
        }
    }
    double window = measure_end - measure_start;
    out->goodput_per_min = window > 0 ? out->slo_met / window * 60 : 0;
    if (out->cache_prompt_tokens)
        out->cache_hit_ratio = (double)out->cache_cached_tokens / out->cache_prompt_tokens;

    int rc = 0;
    for (int m = 0; m < BENCH_M__COUNT && rc == 0; m++) {
        if (m == BENCH_M_REQUEST_CONCURRENCY) {
            rc = s_concurrency(reqs, n, measure_start, measure_end, out->m[m]);
            continue;
        }
        s_lists_t l = {0};
        bool rate = m == BENCH_M_REQUESTS_PER_SECOND || m == BENCH_M_PROMPT_TOKENS_PER_SECOND ||
                    m == BENCH_M_OUTPUT_TOKENS_PER_SECOND || m == BENCH_M_TOKENS_PER_SECOND;
        bool window_rate = m == BENCH_M_REQUESTS_PER_SECOND;
        for (size_t i = 0; i < n; i++) {
            const bench_req_t *r = &reqs[i];
            int s = r->status;
            double out_tok = bench_req_output_tokens(r);
            double prompt = r->prompt_tokens > 0 ? (double)r->prompt_tokens : 0;
            double prompt_at = r->first_token > 0 ? r->first_token : r->end;
            s_tctx_t c = {&l, s, false, false};
            switch (m) {
            case BENCH_M_REQUESTS_PER_SECOND:
                s_push(&l, s, r->end, 1);
                break;
            case BENCH_M_REQUEST_LATENCY:
                s_push(&l, s, bench_req_latency_s(r), 1);
                break;
            case BENCH_M_STREAMING_ITERATIONS:
                s_push(&l, s, r->iterations, 1);
                break;
            case BENCH_M_PROMPT_TOKEN_COUNT:
                s_push(&l, s, prompt, 1);
                break;
            case BENCH_M_OUTPUT_TOKEN_COUNT:
                s_push(&l, s, s_or0(out_tok), 1);
                break;
            case BENCH_M_TOTAL_TOKEN_COUNT:
                s_push(&l, s, prompt + s_or0(out_tok), 1);
                break;
            case BENCH_M_TTFT_MS:
                s_push(&l, s, s_or0(bench_req_ttft_ms(r)), 1);
                break;
            case BENCH_M_TTFOT_MS:
                s_push(&l, s, s_or0(bench_req_ttfot_ms(r)), 1);
                break;
            case BENCH_M_TPOT_MS:
                s_push(&l, s, s_or0(bench_req_tpot_ms(r)), s_or0(out_tok));
                break;
            case BENCH_M_ITL_MS:
                s_push(&l, s, s_or0(bench_req_itl_ms(r)), (isnan(out_tok) ? 1 : out_tok) - 1);
                break;
            case BENCH_M_PROMPT_TOKENS_PER_SECOND:
                s_push(&l, s, prompt_at, prompt);
                break;
            case BENCH_M_TOKENS_PER_SECOND:
                s_push(&l, s, prompt_at, prompt);
                s_output_timings(r, s_on_timing, &c);
                break;
            case BENCH_M_OUTPUT_TOKENS_PER_SECOND:
                s_output_timings(r, s_on_timing, &c);
                break;
            case BENCH_M_OUTPUT_TOKENS_PER_ITERATION:
                c.values = true;
                s_output_timings(r, s_on_timing, &c);
                break;
            case BENCH_M_ITER_TOKENS_PER_ITERATION:
                c.values = c.iter_only = true;
                s_output_timings(r, s_on_timing, &c);
                break;
            default:
                break;
            }
        }
        rc = s_summarise(&l, rate, window_rate ? measure_start : NAN,
                         window_rate ? measure_end : NAN, out->m[m]);
        s_lists_free(&l);
    }
    return rc;
}
