/*
 * bench_metrics — one request's outcome (bench_req_t) and the metrics of one benchmark,
 * computed as GuideLLM computes them (guidellm/schemas/request_stats.py and
 * benchmark/schemas/generative/metrics.py), plus what GuideLLM has not: goodput against a
 * TTFT SLO, the prefix-cache hit ratio from usage, and errors by cause.
 *
 * Per request (seconds on the wall clock, as GuideLLM's time.time()):
 *   request_latency          = end − start
 *   time_to_first_token_ms   = 1000 (first_token − start)       (first streamed content)
 *   time_per_output_token_ms = 1000 (last_token − start) / output_tokens  (first included)
 *   inter_token_latency_ms   = 1000 (last_token − first_token) / (output_tokens − 1)
 *   output_tokens            = usage.completion_tokens, else the iterations seen
 * A value that does not exist (no token yet, one output token) counts as 0 in the
 * distributions, as in GuideLLM; TPOT is weighted by output tokens, ITL by output tokens − 1.
 *
 * Per benchmark: requests_per_second and request_concurrency from the request end times and
 * intervals over the measured window [measure_start, measure_end]; token rates from token
 * timings (the first token at first_token, the rest spread evenly up to last_token);
 * everything split by status (successful, incomplete, errored) and in total.
 *
 * Goodput = successful requests with TTFT <= slo_ttft_ms per minute of the window (vLLM's
 * benchmark_serving --goodput idea; GuideLLM has none). Cache-hit ratio = Σ cached_tokens /
 * Σ prompt_tokens over the successful requests whose usage reported cached tokens.
 *
 * Pure; not thread-safe only in that `out` is written.
 */
#ifndef BENCH_METRICS_H
#define BENCH_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "bench_stats.h"

typedef enum { BENCH_SUCCESSFUL = 0, BENCH_INCOMPLETE, BENCH_ERRORED, BENCH_TOTAL } bench_status_t;
#define BENCH_NSTATUS 4
/* "successful" "incomplete" "errored" "total" */
const char *bench_status_name(int status);

/* Why a request did not succeed. */
typedef enum {
    BENCH_ERR_NONE = 0,
    BENCH_ERR_HTTP,      /* an HTTP status >= 400 */
    BENCH_ERR_CONNECT,   /* no connection (refused, reset before the answer) */
    BENCH_ERR_TIMEOUT,   /* --request-timeout passed */
    BENCH_ERR_TRANSFER,  /* the transfer broke after the answer began */
    BENCH_ERR_TRUNCATED, /* the answer ended cleanly but without its end ([DONE], message_stop) */
    BENCH_ERR_STREAM,    /* an error event or error body */
    BENCH_ERR_MALFORMED, /* events or a body that were not the JSON expected */
    BENCH_ERR_CANCELLED, /* still running when the benchmark ended (status incomplete) */
    BENCH_ERR__COUNT
} bench_err_t;
/* "none" "http" "connect" "timeout" "transfer" "truncated" "stream_error" "malformed" "cancelled"
 */
const char *bench_err_name(int err);

typedef struct {
    double start, end;     /* request_start, request_end */
    double first_token;    /* first streamed content (0: none) */
    double first_output;   /* first non-reasoning content (0: none) */
    double last_token;     /* last streamed content (0: none) */
    double scheduled;      /* when the profile wanted it sent */
    uint32_t iterations;   /* streamed events that carried content */
    int64_t prompt_tokens; /* usage.prompt_tokens, else our own count; -1 unknown */
    int64_t output_tokens; /* usage.completion_tokens; -1 unknown (iterations are used) */
    int64_t cached_tokens; /* usage.prompt_tokens_details.cached_tokens; -1 not reported */
    uint32_t conversation; /* which conversation, and its turn (0-based) */
    uint32_t turn;
    uint16_t http_status; /* 0: no answer */
    uint8_t status;       /* bench_status_t (not TOTAL) */
    uint8_t error;        /* bench_err_t */
} bench_req_t;

/* The per-request values; NAN when GuideLLM's would be None. */
double bench_req_output_tokens(const bench_req_t *r); /* NAN: unknown */
double bench_req_ttft_ms(const bench_req_t *r);
double bench_req_ttfot_ms(const bench_req_t *r);
double bench_req_tpot_ms(const bench_req_t *r);
double bench_req_itl_ms(const bench_req_t *r);
double bench_req_latency_s(const bench_req_t *r);

typedef enum {
    BENCH_M_REQUESTS_PER_SECOND = 0,
    BENCH_M_REQUEST_CONCURRENCY,
    BENCH_M_REQUEST_LATENCY,
    BENCH_M_STREAMING_ITERATIONS,
    BENCH_M_PROMPT_TOKEN_COUNT,
    BENCH_M_OUTPUT_TOKEN_COUNT,
    BENCH_M_TOTAL_TOKEN_COUNT,
    BENCH_M_TTFT_MS,
    BENCH_M_TTFOT_MS,
    BENCH_M_TPOT_MS,
    BENCH_M_ITL_MS,
    BENCH_M_PROMPT_TOKENS_PER_SECOND,
    BENCH_M_OUTPUT_TOKENS_PER_SECOND,
    BENCH_M_TOKENS_PER_SECOND,
    BENCH_M_OUTPUT_TOKENS_PER_ITERATION,
    BENCH_M_ITER_TOKENS_PER_ITERATION,
    BENCH_M__COUNT
} bench_metric_t;
/* GuideLLM's key: "requests_per_second", "time_to_first_token_ms", ... */
const char *bench_metric_name(int metric);

typedef struct {
    uint64_t totals[BENCH_NSTATUS];                /* request_totals */
    bench_dist_t m[BENCH_M__COUNT][BENCH_NSTATUS]; /* metric × status */
    double measure_start, measure_end;
    /* ours */
    double slo_ttft_ms;      /* <= 0: no SLO (goodput counts every success) */
    uint64_t slo_met;        /* successful requests within the SLO */
    double goodput_per_min;  /* slo_met per minute of the window */
    uint64_t cache_requests; /* successful requests that reported cached tokens */
    uint64_t cache_prompt_tokens, cache_cached_tokens;
    double cache_hit_ratio; /* NAN when no request reported cached tokens */
    uint64_t errors[BENCH_ERR__COUNT];
} bench_metrics_t;

/* Computes the metrics of n requests over [measure_start, measure_end]. 0 or IPL_E_NOMEM. */
int bench_metrics_compute(const bench_req_t *reqs, size_t n, double measure_start,
                          double measure_end, double slo_ttft_ms, bench_metrics_t *out);

#endif
