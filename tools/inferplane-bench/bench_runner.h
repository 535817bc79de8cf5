/*
 * bench_runner — runs one benchmark: one scheduling strategy over a workload until its
 * constraints stop it, and records every request it sent.
 *
 * Strategies (GuideLLM's scheduler strategies; a profile such as sweep is a list of them):
 *   synchronous       one request at a time
 *   concurrent N      N streams, closed loop: a stream sends its next request when its last
 *                     one ended (and, within a conversation, after the think time)
 *   throughput        max_concurrency streams: as many in flight as allowed
 *   constant R        a new conversation every 1/R s (GuideLLM's "async"/"constant")
 *   poisson R         conversations at exponential gaps of mean 1/R, seeded
 *   replay            conversations at the workload's own arrival times (traces)
 * Open-loop strategies still hold at most max_concurrency requests in flight; a conversation
 * whose turn is due beyond that waits (its request_start is when it is sent, its `scheduled`
 * time when it was due). A follow-up turn is always due think_s after the previous answer.
 *
 * Constraints: max_duration_s (requests still running then are cancelled and recorded as
 * incomplete), max_requests (no new request after that many; those running finish),
 * max_conversations (no new conversation after that many; every turn of those started is
 * sent, so a multi-turn run ends with whole conversations), the end of a finite workload. Each turn resends the conversation's history: earlier texts and the
 * answers received; a conversation whose request failed ends there (its later turns are not
 * sent: they would resend a broken history).
 *
 * Every request ends as exactly one record: successful, incomplete or errored with its cause
 * (bench_metrics.h); nothing is dropped.
 *
 * Runs on the caller's thread; the client must be idle (no transfer) when called.
 */
#ifndef BENCH_RUNNER_H
#define BENCH_RUNNER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "bench_client.h"
#include "bench_data.h"
#include "bench_metrics.h"

typedef enum {
    BENCH_STRAT_SYNCHRONOUS = 0,
    BENCH_STRAT_CONCURRENT,
    BENCH_STRAT_THROUGHPUT,
    BENCH_STRAT_CONSTANT,
    BENCH_STRAT_POISSON,
    BENCH_STRAT_REPLAY,
} bench_strat_kind_t;

typedef struct {
    bench_strat_kind_t kind;
    double rate;              /* constant, poisson: conversations per second */
    uint32_t streams;         /* concurrent */
    uint32_t max_concurrency; /* throughput's streams; the open-loop cap (0: 512) */
} bench_strategy_t;

/* "synchronous", "concurrent", "throughput", "constant", "poisson", "replay". */
const char *bench_strat_name(bench_strat_kind_t kind);
/* A short label: "synchronous", "concurrent@64", "constant@12.50", ... (static buffer). */
const char *bench_strategy_label(const bench_strategy_t *s);

typedef struct {
    bench_strategy_t strategy;
    double max_duration_s;       /* 0: none */
    uint64_t max_requests;       /* 0: none */
    uint64_t max_conversations;  /* 0: none */
    uint64_t seed;               /* poisson arrivals */
    uint64_t first_conversation; /* data index to start from */
    const char *model;
    bench_api_t api;
    bool stream;
    bool ignore_eos;
    FILE *progress; /* NULL: no progress line */
    const char *progress_label;
} bench_run_config_t;

typedef struct {
    bench_req_t *reqs; /* malloc'd */
    size_t n;
    double start, end;          /* wall seconds: the first request sent, the run's end */
    uint64_t next_conversation; /* the first data index not used */
    double wall_s, cpu_s;       /* the run's duration and this process's CPU over it */
    bool cancelled;             /* max_duration_s ended it with requests running */
} bench_run_result_t;

/* Runs one benchmark. 0, or IPL_E_NOMEM / IPL_E_INVAL (a strategy without its parameter;
 * replay of synthetic data) with a message in err. *out is the caller's to free
 * (bench_run_result_free) either way. */
int bench_run(bench_client_t *client, const bench_data_t *data, const bench_run_config_t *cfg,
              bench_run_result_t *out, char *err, size_t errlen);
void bench_run_result_free(bench_run_result_t *r);

#endif
