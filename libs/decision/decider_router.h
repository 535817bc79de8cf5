/*
 * decider_router — the choice: for one request, every candidate worker of the model's pool
 * with its figures and predicted TTFT, and the winner under the pool's strategy.
 *
 * Inputs: the compiled policy (which pool serves the model, its workers, its strategy), the
 * state replica (prefix index, last load samples), the router's own ledger of what it routed
 * (in-flight requests, optimistic blocks; decider_ledger) and the TTFT predictor
 * (decider_predictor, calibrated per worker set). A routing is recorded in the ledger as in
 * flight always, and as optimistic blocks only when the winner's KV events do not already show
 * the whole prompt.
 *
 * Per candidate W, whatever the strategy (so explanations compare like with like):
 *
 *   cached(W)   = min(prompt_tokens, block_size × max(index prefix, optimistic prefix))
 *                 — 0 when W's cache state cannot be trusted (kv_state DEGRADED, health not
 *                 UP, state stale, block size differs from the request's): load only
 *   queue(W)    = waiting + inflight        (inflight: routed here after W's last sample)
 *   features    queued = queue(W); queued_tokens = the prefill backlog this router routed to W
 *               (uncached tokens draining at the worker set's calibrated prefill speed,
 *               decider_memory.h), at least the uncached tokens routed since W's last sample —
 *               and when that backlog is empty, plus waiting × mean uncached tokens per request
 *               (EWMA); running; uncached = prompt − cached(W)
 *   ttft(W)     = decider_predictor's model of W's worker set (decider_predictor.h)
 *
 * The worker set of W (the predictor's key) is W's InferenceWorkerSet (ipl_worker_t.worker_set);
 * with a policy from a policy service that predates that field, W's served model.
 *
 * Calibration from live requests: the server remembers each decision a gateway will report on
 * (decider_router_remember, keyed by the gateway's connection and req_id, bounded and
 * time-limited: decider_feedback.h) and hands the gateway's OBSERVED back
 * (decider_router_feedback), which feeds the predictor the decision's features and the
 * observed TTFT. Every OBSERVED is counted by result (decider_observed_name).
 *
 * Strategies (decider_strategies.h has the list and the sources): "ttft" (the default) keeps
 * the candidates whose queue is within load_gate of the least loaded one — unless no worker is
 * clearly less loaded (running + queue under 1 / 1.5 of theirs) —, keeps a long prompt off a
 * worker whose KV cannot hold it while another can (the KV gate), and picks the minimum cost —
 * predicted TTFT plus the delay its prefill imposes on the requests that will queue behind it
 * (decider_strategies.c) — or, with temperature_s > 0, samples with probability
 * ∝ exp(−cost/T) — and says why; the baselines follow their published descriptions.
 *
 * Admission, before any strategy: no healthy candidate → NO_WORKER (503); with max_queue > 0,
 * a candidate whose queue exceeds it is not eligible, and when that leaves none → OVERLOADED
 * (429). Fallbacks (load-only cache terms, the load gate, rejections) are counted by reason
 * (decider_router_fallbacks).
 *
 * Not eligible ever: workers with no load sample yet, and health DOWN.
 *
 * Reasons (decision.reason, static): decider_router_reasons() lists them all.
 *
 * The request, candidate and decision types are decider_decision.h's. The router knows no
 * transport: the process publishes its model and counters (decider_router_model_json,
 * decider_router_register_metrics; decider_http serves GET /debug/model).
 *
 * Thread-safe: decisions are serialised by an internal mutex (the ledger, the EWMA and the
 * strategies' memory are shared); the caller holds the state's read lock around a decision.
 */
#ifndef DECIDER_ROUTER_H
#define DECIDER_ROUTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "decider_decision.h"
#include "decider_ledger.h"
#include "decider_predictor.h"
#include "decider_state.h"
#include "ipl_metrics.h"
#include "ipl_proto.h"

/* Oracle hook: the tokens of `req`'s prompt that worker `worker` truly holds in its cache
 * right now. Called under the router's mutex, once per healthy candidate of a decision with
 * strategy "oracle". */
typedef uint64_t(decider_oracle_fn)(void *arg, const char *worker, const decider_request_t *req);

/* For offline evaluation only (tools/clustersim): hooks that measure the router against what
 * a live decider cannot know, and shortcuts for simulations of many decisions. The live
 * decider leaves it zeroed; zero keeps the behaviour noted. */
typedef struct {
    decider_oracle_fn *oracle; /* strategy "oracle": true cached tokens (NULL: use the index) */
    void *oracle_arg;          /* passed to `oracle` */
    bool terse; /* decide every request without explanations, as decider_request_t.terse does
                   for one (false: per request) */
} decider_router_offline_t;

typedef struct {
    /* Strategy and choice. */
    const char *default_strategy; /* when neither the request nor the pool names one */
    double temperature_s;         /* ttft: softmax sampling over −cost/T; 0: argmin */
    uint64_t seed;                /* tie-breaks, sampling and "random" (0: from the clock) */
    /* Prediction: the predictor's priors and their calibration from live requests. */
    double base_s;                 /* prior: fixed part of a TTFT (0: none) */
    double prefill_tokens_per_s;   /* prior: prefill speed of a worker */
    double running_cost_s;         /* prior: added wait per running request */
    double forgetting;             /* the predictor's λ (0: its default, 0.995) */
    double initial_request_tokens; /* mean uncached tokens per request before any was seen */
    uint64_t observe_window_ms;    /* decider_router_remember keeps decisions this long (0: off) */
    size_t observe_capacity;       /* ... at most this many at once (0: 65536) */
    /* Load gate and queue limit. */
    uint64_t load_gate; /* queue excess over the least-loaded that disqualifies */
    uint64_t max_queue; /* a queue above this is not eligible; all above → 429 (0: off) */
    /* InferencePolicy: a deferred batch request is told to ask again after this long. */
    uint64_t batch_retry_ms;
    /* Cache terms and in-flight work: how long the state and the ledger are believed. */
    uint64_t stale_ms;          /* state silent longer than this: cache terms ignored */
    uint64_t optimistic_ttl_ms; /* optimistic blocks last this long (0: off) */
    decider_ledger_t *ledger;   /* borrowed, outlives the router: the ledger to record routings
                                   in and to read in-flight work and optimistic blocks from
                                   (the server's, shared with decider_peers; made with
                                   decider_ledger_new(optimistic_ttl_ms)). NULL: the router
                                   keeps a private one */
    /* Offline evaluation hooks (zeroed in the live decider). */
    decider_router_offline_t offline;
} decider_router_config_t;

/* Fills the defaults: ttft, temperature 0, seed 0 (from the clock), base 0.04 s, 3000
 * tokens/s, 5 ms, the predictor's forgetting, 256 tokens, decisions remembered for
 * observations 60 s, at most 65536, gate 4, max queue 0 (off), stale 5000, TTL 2000, a private
 * ledger, no offline hooks. */
void decider_router_config_defaults(decider_router_config_t *config);

/* True when `name` is a strategy this router implements (decider_strategy_known). */
bool decider_router_strategy_known(const char *name);
/* Comma-separated strategy names ("ttft, oracle, random, ..."), static. */
const char *decider_router_strategies(void);
/* Every reason a decision can carry, NULL-terminated (for metrics labels). */
const char *const *decider_router_reasons(void);

typedef struct decider_router decider_router_t;

/* The config is copied (strings must be literals or outlive the router; so must the ledger
 * lent). */
decider_router_t *decider_router_new(const decider_router_config_t *config);
void decider_router_destroy(decider_router_t **self_p);

/* Decides. `policy` and `state` may be NULL (→ not_ready); `state_age_ms` is the time since
 * the state last heard from the aggregator. Fills `out` (any previous content replaced) and
 * returns out->status. A routed decision is recorded in the ledger. */
int decider_router_route(decider_router_t *self, const ipl_policy_t *policy,
                         const decider_state_t *state, uint64_t state_age_ms,
                         const decider_request_t *req, decider_decision_t *out);
/* The same at given clocks (tests, clustersim): `wall_ms` compares with load samples' ts_ms,
 * `mono_ms` drives the optimistic TTL and the baselines' history eviction. */
int decider_router_route_at(decider_router_t *self, const ipl_policy_t *policy,
                            const decider_state_t *state, uint64_t state_age_ms,
                            const decider_request_t *req, decider_decision_t *out, uint64_t wall_ms,
                            uint64_t mono_ms);

/* Feeds one observed TTFT back to the predictor: `set` and `features` as in the decision
 * (decision.set, decision.features), `ttft_s` as measured. Returns decider_predictor_observe's
 * code. Thread-safe. */
int decider_router_observe(decider_router_t *self, const char *set,
                           const decider_features_t *features, double ttft_s);
/* ---- calibration from live requests (OBSERVED) ---------------------------------------------- */

/* What became of an OBSERVED (decider_router_feedback's result; counted). */
typedef enum {
    DECIDER_OBSERVED_LEARNED,    /* the predictor learned from it */
    DECIDER_OBSERVED_OUTLIER,    /* the predictor's outlier guard rejected it */
    DECIDER_OBSERVED_INVALID,    /* the predictor rejected it as malformed (not finite...) */
    DECIDER_OBSERVED_FAILED,     /* no TTFT: status not 2xx, or no token arrived */
    DECIDER_OBSERVED_UNSTREAMED, /* a whole non-streamed body of several tokens: not a TTFT */
    DECIDER_OBSERVED_MISMATCH,   /* names another worker than the decision: not learned */
    DECIDER_OBSERVED_UNKNOWN,    /* no decision remembered under (conn, req_id) */
    DECIDER_OBSERVED_EXPIRED,    /* remembered longer ago than observe_window_ms */
    DECIDER_OBSERVED_NRESULTS
} decider_observed_result_t;

const char *decider_observed_name(int result); /* "learned", ...; NULL out of range */

/* Remembers routed decision `d` (its worker, worker set and features) under (conn, req_id)
 * for observe_window_ms: `conn` names the connection that asked (a hash of the ROUTER
 * identity), `mono_ms` is the monotonic clock. Returns 0 (remembered: the gateway may send an
 * OBSERVED), IPL_E_INVAL (not a routed decision, or observations off), IPL_E_RANGE (too many
 * distinct names) or IPL_E_NOMEM. Thread-safe. */
int decider_router_remember(decider_router_t *self, uint64_t conn, uint64_t req_id,
                            const decider_decision_t *d, uint64_t mono_ms);

/* One OBSERVED from connection `conn` (remote input: anything is counted, nothing asserted):
 * takes the decision remembered under (conn, obs->req_id) and, when the observation is a TTFT
 * (2xx, ttft_s > 0, streamed or a single completion token) of the decided worker, feeds it to
 * the predictor. Returns the decider_observed_result_t (also counted). Thread-safe. */
int decider_router_feedback(decider_router_t *self, uint64_t conn, const ipl_observed_t *obs,
                            uint64_t mono_ms);

/* Copies the OBSERVED counters (since the router was created). Thread-safe. */
void decider_router_observed(decider_router_t *self, uint64_t counts[DECIDER_OBSERVED_NRESULTS]);

/* The predictor (borrowed, thread-safe), e.g. to set a worker set's network latency. */
decider_predictor_t *decider_router_predictor(decider_router_t *self);

/* The mean uncached tokens per request the predictor uses now. */
double decider_router_mean_request_tokens(decider_router_t *self);
size_t decider_router_optimistic_blocks(decider_router_t *self);

/* Fallbacks, counted once per decision and reason. */
typedef enum {
    DECIDER_FALLBACK_STALE,      /* state stale: every cache term ignored (load only) */
    DECIDER_FALLBACK_DEGRADED,   /* a candidate's KV state DEGRADED: its cache ignored */
    DECIDER_FALLBACK_HEALTH,     /* a candidate's health unknown: its cache ignored */
    DECIDER_FALLBACK_BLOCK_SIZE, /* request hashed with another block size: load only */
    DECIDER_FALLBACK_LOAD_GATE,  /* the load gate overruled the best prediction */
    DECIDER_FALLBACK_NO_WORKER,  /* rejected: no healthy candidate (503) */
    DECIDER_FALLBACK_OVERLOADED, /* rejected: every candidate above max_queue (429) */
    DECIDER_FALLBACK_NREASONS
} decider_fallback_t;

const char *decider_fallback_name(int reason); /* "stale", ...; NULL out of range */
/* Copies the counters (since the router was created). Thread-safe. */
void decider_router_fallbacks(decider_router_t *self, uint64_t counts[DECIDER_FALLBACK_NREASONS]);

/* ---- introspection (the process publishes these: decider_http registers GET /debug/model) --- */

struct cJSON;

/* The router's model as a new JSON object (the caller owns it; cJSON_Delete): "router" (its
 * settings), "observations" (the decisions awaiting observation and the OBSERVED counters),
 * "fallbacks" (the fallback counters) and "predictor" (decider_predictor_json: parameters and
 * errors per worker set). NULL on allocation failure. Thread-safe. */
struct cJSON *decider_router_model_json(decider_router_t *self);

/* Registers the counter families inferplane_decider_fallbacks_total{reason} and
 * inferplane_decider_observations_total{result} on `metrics`, raised from the router's counters
 * at each render (NULL: nothing). The router must outlive `metrics`. Call once. */
void decider_router_register_metrics(decider_router_t *self, ipl_metrics_t *metrics);

#endif
