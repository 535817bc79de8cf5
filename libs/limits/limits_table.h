/*
 * limits_table — per-tenant limits of the policy (InferencePolicy spec.limits), enforced at
 * admission, settled at the end, and shared with the other gateway replicas.
 *
 *   policy ──limits_table_set──►  tenant ─┬─ requests/min      bucket  (cost 1)
 *                                 state   ├─ input tokens/min  bucket  (prompt tokens, exact)
 *                                         ├─ output tokens/min bucket  (reserved, settled)
 *                                         ├─ concurrent requests       (own + peers' gauges)
 *                                         └─ cost per day, USD         (resets 00:00 UTC)
 *
 *   limits_table_admit(tenant, prompt, max_tokens) ─► ok + handle │ refused {limit, retry}
 *   limits_table_settle(handle, output tokens, cost)  refund reserved − actual, or charge more
 *
 * Cluster-wide (docs/limits.md, "Across replicas"): every replica keeps a bucket per (tenant,
 * limit) that stands for the *cluster's* bucket. It charges its own admissions at once, and
 * every peer's as they arrive (limits_table_apply, from LIMITS_USAGE: cumulative counters per
 * replica incarnation, so a lost message loses nothing and a restart is not counted twice),
 * so every replica's buckets converge. Between two reports a replica could spend what the
 * others spend too, so within one interval it may take only its *lease*: the bucket's level
 * at the interval's start divided by the live replicas (the first request of an interval may
 * exceed the lease if the level holds it). Every replica reports at the start of each
 * interval of the wall clock (LIMITS_USAGE.epoch); a new lease waits for those reports up to
 * a fifth of the interval (the last lease goes on meanwhile), and one computed without a
 * peer's report assumes that peer spent its whole last lease unseen. So the cluster admits
 * in an interval what one bucket holds, plus at most one request per replica; a replica
 * killed mid-interval costs at most its unreported lease. A lone replica has no lease. Concurrency
 * is own + the peers' last gauges (a peer unseen for peer_timeout_ms no longer counts, nor in the
 * number of live replicas), with the same lease on the net increase per interval.
 *
 * Output tokens: reserved at admission from max_tokens when the client gives it, else from
 * an estimate: the tenant's running mean of completion tokens (EWMA, weight 1/8), starting at
 * output_estimate, capped at the bucket's capacity. Settling refunds what was reserved but
 * not generated (a separate monotonic counter on the wire) or charges the excess.
 *
 * Tenants: one state per tenant name, created on first sight (admission or a peer's report)
 * and kept for the table's life (their counters must stay monotonic); a tenant's limits are
 * its own spec.limits entry, else the "*" entry, else none (admitted, counted, never
 * refused). Past max_tenants, tenants without an own entry share one state, "(other)".
 *
 * Times: now_ms is wall-clock milliseconds since the epoch (the cost budget resets at 00:00
 * UTC); buckets tolerate steps back. Threads: every function may be called from any thread
 * (one mutex; no call blocks on anything else).
 */
#ifndef LIMITS_TABLE_H
#define LIMITS_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ipl_proto.h"

typedef enum {
    LIMITS_REQUESTS = 0,      /* requestsPerMinute */
    LIMITS_INPUT_TOKENS = 1,  /* inputTokensPerMinute */
    LIMITS_OUTPUT_TOKENS = 2, /* outputTokensPerMinute */
    LIMITS_CONCURRENT = 3,    /* concurrentRequests */
    LIMITS_COST = 4,          /* costPerDayUsd */
    LIMITS_NDIMS = 5,
    LIMITS_NONE = -1,
} limits_dim_t;

#define LIMITS_MAX_PEERS    32
#define LIMITS_OTHER_TENANT "(other)"

/* "requests_per_minute", "input_tokens_per_minute", "output_tokens_per_minute",
 * "concurrent_requests", "cost_per_day" (metric label values); "none" otherwise. */
const char *limits_dim_name(limits_dim_t dim);
/* The policy field: "requestsPerMinute", ... "costPerDayUsd". */
const char *limits_dim_field(limits_dim_t dim);

typedef struct {
    int64_t interval_ms;     /* the lease (and gossip) interval; 0: 50 */
    int64_t peer_timeout_ms; /* a peer unheard of this long is gone; 0: 20 intervals */
    double output_estimate;  /* output tokens reserved without max_tokens, before any
                                completion was seen; 0: 256 */
    size_t max_tenants;      /* 0: 4096 */
} limits_options_t;

/* What admission decided, with the values of the x-ratelimit-* headers. */
typedef struct {
    bool ok;
    limits_dim_t refused;   /* the limit that refused (the longest wait); LIMITS_NONE if ok */
    uint64_t refused_limit; /* its configured value (cost: micro-USD) */
    int64_t retry_after_ms; /* when refused: until the request fits */
    bool has_requests;      /* the tenant has a requests/min limit: */
    uint64_t limit_requests, remaining_requests;
    int64_t reset_requests_ms;
    bool has_tokens; /* it has a token limit: input tokens/min, else output tokens/min */
    uint64_t limit_tokens, remaining_tokens;
    int64_t reset_tokens_ms;
} limits_verdict_t;

/* An admitted request, to settle once (the caller's storage; zero it before admitting). */
typedef struct {
    void *tenant; /* NULL: nothing to settle */
    uint64_t reserved_output;
} limits_handle_t;

/* One tenant's figures, for metrics. */
typedef struct {
    const char *tenant; /* borrowed, valid for the table's life */
    bool limited;
    uint64_t admitted, refused[LIMITS_NDIMS];
    uint64_t inflight, peers_inflight;
    double level[3]; /* requests, input, output buckets (0 when unlimited) */
    uint64_t spent_micros_today;
    double output_estimate;
} limits_tenant_stats_t;

typedef struct limits_table limits_table_t;

/* NULL options: the defaults. */
limits_table_t *limits_table_new(const limits_options_t *options);
void limits_table_destroy(limits_table_t **self_p);

/* The limits of a policy version (POLICY.limits). Levels are kept across versions (clamped
 * to a lowered limit); a newly limited bucket starts full. */
void limits_table_set(limits_table_t *self, const ipl_limit_t *limits, size_t n, int64_t now_ms);

/* Admission of one request of `tenant` ("" for anonymous) with prompt_tokens, and
 * max_tokens (0: absent). Returns v->ok; when ok, *h holds what limits_table_settle needs.
 * A refused request is charged nothing. */
bool limits_table_admit(limits_table_t *self, const char *tenant, uint64_t prompt_tokens,
                        uint64_t max_tokens, int64_t now_ms, limits_handle_t *h,
                        limits_verdict_t *v);

/* The end of an admitted request: the completion tokens it produced and its cost
 * (micro-USD). Releases its concurrency slot. Clears *h; a cleared handle is a no-op. */
void limits_table_settle(limits_table_t *self, limits_handle_t *h, uint64_t output_tokens,
                         uint64_t cost_micros, int64_t now_ms);

/* A peer's LIMITS_USAGE. Returns the tenants applied, or -1 when no peer slot is free. The
 * caller drops its own messages (same replica id). */
int limits_table_apply(limits_table_t *self, const ipl_limits_usage_t *msg, int64_t now_ms);

/* This replica's usage, for its LIMITS_USAGE: every tenant with anything to report, in a
 * malloc'd array the caller frees (tenant strings are borrowed, valid for the table's life). */
ipl_tenant_usage_t *limits_table_usage(limits_table_t *self, uint32_t *n);

/* Until until_ms, count at least `replicas` live (this one included): a replica that starts
 * has heard from no peer yet, and must not lease itself the whole bucket. The gateway calls
 * it at start with 1 + its configured peers, until one peer timeout has passed. */
void limits_table_expect(limits_table_t *self, size_t replicas, int64_t until_ms);

/* Replicas counted live now, this one included (≥ 1). */
size_t limits_table_replicas(limits_table_t *self, int64_t now_ms);

/* Fills up to max tenants' figures; returns how many tenants there are. */
size_t limits_table_stats(limits_table_t *self, int64_t now_ms, limits_tenant_stats_t *out,
                          size_t max);

#endif
