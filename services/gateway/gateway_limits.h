/*
 * gateway_limits — the gateway's per-tenant limits (InferencePolicy spec.limits,
 * docs/limits.md): the adapter between a request and libs/limits.
 *
 *   policy view ──(each new version)──► limits_table ◄──LIMITS_USAGE SUB── the other gateways
 *                                            │      └───LIMITS_USAGE PUB──► (every interval)
 *   request: auth, parse, prompt tokens ──admit──► ok: x-ratelimit-* headers, go on to route
 *                                            └──► refused: 429 + Retry-After + the headers
 *   the call's end (s_finish) ──settle──► completion tokens, cost from the provider's hints
 *
 * The gossip runs on one thread of its own: every interval it publishes this replica's
 * cumulative usage (PUB bound at --limits-listen) and applies whatever the peers published
 * (SUB connected to every --limits-peers endpoint). Nothing on the request path waits for
 * the network. Without --limits-listen and --limits-peers the limits hold per replica.
 *
 * Metrics: inferplane_gateway_ratelimited_total{tenant,limit} (refusals), and, computed when
 * /metrics is read: inferplane_gateway_limits_admitted_total{tenant},
 * inferplane_gateway_limits_remaining{tenant,limit} (the bucket's level: requests or tokens,
 * negative in debt), inferplane_gateway_limits_inflight{tenant} (cluster-wide: own + peers),
 * inferplane_gateway_limits_cost_usd_today{tenant}, inferplane_gateway_limits_replicas (live,
 * this one included), inferplane_gateway_limits_gossip_sent_total,
 * inferplane_gateway_limits_gossip_received_total and
 * inferplane_gateway_limits_gossip_malformed_total. Tenants are those of the policy's limits
 * and the API keys (at most 4096, then "(other)"): the cardinality is bounded.
 *
 * Threads: admit and settle from any thread; new and destroy from one.
 */
#ifndef GATEWAY_LIMITS_H
#define GATEWAY_LIMITS_H

#include <stddef.h>
#include <stdint.h>

#include "gateway_api.h"
#include "ipl_httpd.h"
#include "ipl_metrics.h"
#include "ipl_policy_view.h"
#include "limits_table.h"

typedef struct {
    const char *listen;  /* --limits-listen: PUB endpoint to bind (NULL or "": publish nothing) */
    const char *peers;   /* --limits-peers: the other replicas' PUB endpoints, comma-separated */
    const char *id;      /* --limits-id: unique per replica; NULL or "": hostname, pid, listen */
    int interval_ms;     /* --limits-interval-ms: gossip and lease interval (0: 50) */
    int peer_timeout_ms; /* --limits-peer-timeout-ms: a silent peer is gone (0: 20 intervals) */
} gateway_limits_config_t;

typedef struct gateway_limits gateway_limits_t;

/* Binds, connects and starts the gossip thread. `metrics` is borrowed and must outlive it.
 * NULL with a human message in err. */
gateway_limits_t *gateway_limits_new(const gateway_limits_config_t *config, ipl_metrics_t *metrics,
                                     char *err, size_t errlen);
/* Stops the gossip thread and frees everything (handles still held settle to nothing). */
void gateway_limits_destroy(gateway_limits_t **self_p);

/* The limits of a new policy version (POLICY.limits), from the policy view's attach hook, so
 * that peers' reports are charged to the right buckets before this replica admits anything.
 * Any thread; an older version than the one held is ignored. */
void gateway_limits_policy(gateway_limits_t *self, const ipl_policy_t *policy);

/* The admission of one request, after auth and parsing, before it is routed: the limits of
 * the policy version `policy` holds (picked up here when it changed). Sets the x-ratelimit-*
 * headers on resp when the tenant has a requests or token limit. Returns 0 (admitted: settle
 * *h when the call ends), or IPL_E_AGAIN with err filled (429, rate_limit_exceeded, naming
 * the limit) and *retry_after_s set (seconds, rounded up). */
int gateway_limits_admit(gateway_limits_t *self, ipl_policy_view_t *policy, const char *tenant,
                         uint64_t prompt_tokens, int64_t max_tokens, limits_handle_t *h,
                         ipl_http_resp_t *resp, gateway_api_error_t *err, int *retry_after_s);

/* gateway_limits_admit with the headers given to set(arg, name, value) instead of a
 * response (for tests, and other transports). */
typedef void(gateway_limits_header_fn)(void *arg, const char *name, const char *value);
int gateway_limits_decide(gateway_limits_t *self, ipl_policy_view_t *policy, const char *tenant,
                          uint64_t prompt_tokens, int64_t max_tokens, limits_handle_t *h,
                          gateway_limits_header_fn *set, void *arg, gateway_api_error_t *err,
                          int *retry_after_s);

/* What a call to `provider` (an InferenceProvider's name; NULL or "": a local worker, which
 * costs nothing) cost, in micro-USD, from the provider's cost hints (spec.cost, per million
 * input / output tokens, each part rounded up) in the policy `policy` holds. Needs no
 * gateway_limits object: records carry it whether limits are on or not. */
uint64_t gateway_limits_cost_micros(ipl_policy_view_t *policy, const char *provider,
                                    uint64_t prompt_tokens, uint64_t completion_tokens);

/* The end of an admitted call: its completion tokens and its cost (micro-USD,
 * gateway_limits_cost_micros). A cleared handle is a no-op. */
void gateway_limits_settle(gateway_limits_t *self, limits_handle_t *h, uint64_t completion_tokens,
                           uint64_t cost_micros);

/* The replica id in use (for logs and tests). */
const char *gateway_limits_id(const gateway_limits_t *self);

#endif
