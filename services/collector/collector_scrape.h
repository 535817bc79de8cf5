/*
 * collector_scrape — non-blocking scrapes of the workers' /metrics with libcurl multi, driven
 * from the collector's own zmq_poll loop (no extra thread).
 *
 *   loop:  n = collector_scrape_pollitems(s, items + k, max - k)   curl's sockets
 *          t = min(..., collector_scrape_timeout(s))                curl's timer
 *          zmq_poll(items, k + n, t)
 *          collector_scrape_dispatch(s, items + k, n)               → on_result() per finished
 *
 * Each target (an index the caller chooses, e.g. its worker slot) has at most one transfer in
 * flight; a transfer that fails, times out, answers non-2xx or exceeds the body limit is a
 * failed scrape. Bodies are parsed with ipl_prom (collector_scrape_parse).
 *
 * Not thread-safe: one loop owns it.
 */
#ifndef COLLECTOR_SCRAPE_H
#define COLLECTOR_SCRAPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <zmq.h>

#define COLLECTOR_SAMPLE_COUNTERS 3

/* What the collector reads from a vLLM /metrics page. With several engines (data parallel)
 * running and waiting are summed and kv_usage is the largest. */
typedef struct {
    double running;      /* vllm:num_requests_running */
    double waiting;      /* vllm:num_requests_waiting */
    double kv_usage;     /* vllm:kv_cache_usage_perc, 0..1 */
    uint64_t block_size; /* vllm:cache_config_info{block_size} (0 when absent) */
    uint64_t num_blocks; /* vllm:cache_config_info{num_gpu_blocks} (0 when absent) */
    bool has_running;    /* the page had vllm:num_requests_running */
    int malformed_lines; /* lines ipl_prom skipped */
    /* Restart evidence (collector_sample_restarted): the process start time and counters
     * that only grow while a process lives (summed over engines; < 0 when absent). */
    double start_time; /* process_start_time_seconds, 0 when absent */
    double counters[COLLECTOR_SAMPLE_COUNTERS];
} collector_sample_t;

/* True when `now` comes from another worker process than `before`: its start time changed
 * (by a second or more),
 * or a counter that only grows (vllm:prompt_tokens_total, vllm:generation_tokens_total,
 * vllm:prefix_cache_queries_total) went down. */
bool collector_sample_restarted(const collector_sample_t *before, const collector_sample_t *now);

/* Parses a /metrics body. Returns 0, or IPL_E_NOTFOUND when none of the load gauges is there
 * (not a vLLM page). */
int collector_scrape_parse(const char *text, size_t len, collector_sample_t *out);

/* One finished scrape. `sample` is NULL when it failed; `error` then says why (borrowed). */
typedef void(collector_scrape_fn)(void *arg, size_t target, const collector_sample_t *sample,
                                  const char *error);

typedef struct collector_scrape collector_scrape_t;

/* `timeout_ms` bounds each transfer. NULL on failure (curl could not be initialised). */
collector_scrape_t *collector_scrape_new(collector_scrape_fn *fn, void *arg, long timeout_ms);
void collector_scrape_destroy(collector_scrape_t **self_p); /* aborts transfers in flight */

/* Starts GET `url` for `target`. Returns 0, IPL_E_AGAIN when that target's previous scrape is
 * still in flight (nothing started), or IPL_E_NOMEM. */
int collector_scrape_start(collector_scrape_t *self, size_t target, const char *url);
/* Aborts the target's transfer, if any, without a callback. */
void collector_scrape_cancel(collector_scrape_t *self, size_t target);
bool collector_scrape_busy(const collector_scrape_t *self, size_t target);

/* Writes curl's sockets as poll items (socket NULL, fd, events) into items (capacity max);
 * returns how many. */
size_t collector_scrape_pollitems(collector_scrape_t *self, zmq_pollitem_t *items, size_t max);
/* Milliseconds until curl's next timeout (-1: none pending). */
long collector_scrape_timeout(collector_scrape_t *self);
/* After zmq_poll: hands curl the readiness of the `n` items from pollitems (and its timer
 * when due); delivers finished scrapes through the callback. */
void collector_scrape_dispatch(collector_scrape_t *self, const zmq_pollitem_t *items, size_t n);

#endif
