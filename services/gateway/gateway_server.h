/*
 * gateway_server — the gateway's HTTP API, wiring the classes together per request:
 *
 *   POST /v1/chat/completions, /v1/completions
 *     gateway_api (parse, validate, ipl_prompt renders) → ipl_prompt (tokens, full blocks)
 *     → gateway_route (ROUTE_REQ to the decider) → gateway_proxy (stream from the worker;
 *     a connection failure, a 5xx, a 429 or no first byte in time is retried elsewhere by a
 *     new decision avoiding the failed targets and open breakers, bounded by --max-attempts
 *     and a retry budget: gateway_failover) → gateway_sse
 *     (TTFT, ITL, usage as the bytes pass) → one RECORD to the exporter (PUSH), and, when
 *     the decider asked for it, one OBSERVED (the measured TTFT) back to the decider on the
 *     connection that carried the decision (gateway_route_observe).
 *     A decision for a provider (target_kind "provider") goes to its GatewayBackend instead
 *     (gateway_provider: credentials, URL, TLS; the response's model rewritten back); a
 *     REJECTED one is answered with the rule's status and reason (gateway_verdict); a
 *     DEFERRED one is held and asked again (retry_after_ms) until --batch-max-wait-ms.
 *     ROUTE_REQ carries the request's labels (gateway_labels: only from
 *     --trusted-label-header) and the headers the policy's rules name (gateway_rule_headers,
 *     built once per policy version).
 *   GET /v1/models   the models of the policy's pools (ipl_policy_view)
 *
 * A client's x-request-id (up to 64 of [A-Za-z0-9._:-]) is kept, else one is made up; an
 * x-inferplane-tenant header of the same form names the tenant in the ROUTE_REQ and the
 * record (until tenants come from API keys).
 * Responses carry x-request-id and, once routed, x-inferplane-pool, -target-kind (worker |
 * provider) and, with --expose-routing-headers only (gateway_isolation: they reveal what is
 * cached), x-inferplane-worker, -endpoint, -reason, -predicted-ttft-ms and -cached-tokens (the
 * decider's prediction); for a provider also x-inferplane-backend; x-inferplane-rule whenever
 * the decision named an InferencePolicy rule (refusals too); x-inferplane-queue-wait-ms when it
 * waited in the fair queue (gateway_queue: a saturated pool, docs/queueing.md).
 *
 * Hardening: client connections are bounded (ipl_conns: --max-connections, per client
 * address, idle and read timeouts; inferplane_gateway_connections*), request bodies must be
 * UTF-8 (400 invalid_utf8, never forwarded), a stream whose upstream goes quiet is cut after
 * --stream-idle-timeout-ms with an error event (gateway_trailer), and SIGTERM drains
 * (gateway_server_drain): requests arriving meanwhile get 503 shutting_down.
 *
 * Metrics (registry passed at creation): inferplane_gateway_requests_total{api,status_code},
 * inferplane_gateway_records_dropped_total,
 * inferplane_gateway_deferrals_total (DEFERRED answers waited out), plus those of
 * gateway_route, gateway_proxy, gateway_backend, gateway_queue (the fair queue: depth, wait,
 * drops) and gateway_failover (retries by reason, circuit breakers). Responses also carry
 * x-inferplane-attempts (attempts made, once routed).
 */
#ifndef GATEWAY_SERVER_H
#define GATEWAY_SERVER_H

#include <stdbool.h>
#include <stddef.h>

#include "ipl_httpd.h"
#include "ipl_metrics.h"

typedef struct {
    const char *listen;      /* API address, "127.0.0.1:8080" */
    const char *decider;     /* decider ROUTER endpoint */
    const char *exporter;    /* exporter PULL endpoint ("" or NULL: no records) */
    const char *policy_sub;  /* policy PUB endpoint */
    const char *policy_req;  /* policy ROUTER endpoint */
    const char *tokenizer;   /* --tokenizer: "builtin", a tokenizer.json or its directory */
    int block_size;          /* tokens per hashed block */
    size_t max_body;         /* request bodies above get 413 */
    int route_timeout_ms;    /* decider answer → else 503 */
    int upstream_timeout_ms; /* worker response headers → else 504 */
    int connect_timeout_ms;  /* worker TCP connect */
    const char *trusted_label_header; /* the header whose values are the request's labels
                                         (NULL or "": labels are never read from headers) */
    const char *secrets_dir;          /* where Kubernetes Secrets are mounted (GatewayBackend
                                         secretRef); NULL: /var/run/secrets/inferplane */
    int batch_max_wait_ms;            /* how long a DEFERRED request is held at most, then 429 */
    const char *keys_file;            /* tenants and API keys (libs/tenants); NULL: anonymous */
    const char *trusted_tenant_header; /* a proxy's header naming the tenant; NULL: none */
    struct gateway_limits *limits;     /* per-tenant limits (gateway_limits.h; borrowed, must
                                          outlive the server); NULL: none enforced */
    /* Fair queuing while a pool is saturated (gateway_queue, docs/queueing.md). */
    int queue_max_wait_ms;            /* longest wait in the queue (0: none: 429 at once) */
    size_t queue_max_requests;        /* requests waiting at most, all models (0: 10000) */
    uint64_t queue_max_tokens;        /* their tokens at most (0: no bound) */
    size_t queue_max_tenant_requests; /* per tenant (0: queue_max_requests) */
    /* Failover (gateway_failover, docs/failover.md); zero: the defaults noted. */
    int max_attempts;          /* attempts per request, the first included (0: 3) */
    int first_byte_timeout_ms; /* no first body byte within this → another attempt, while one
                                  is allowed (0: never; the upstream timeout still bounds it) */
    double retry_budget_percent;   /* retries per 100 requests over 10 s (<0: 20) */
    int retry_budget_min;          /* retries allowed per 10 s whatever the requests */
    int breaker_failures;          /* consecutive failures that open a target's breaker (0: 5) */
    int breaker_base_cooldown_ms;  /* a breaker's first opening lasts this long, then one
                                      probe; doubled by each failed probe (0: 1000) */
    int breaker_cooldown_ms;       /* ... up to this long (0: 10000) */
    size_t max_header_bytes;       /* request headers above get 431 (0: ipl_httpd's default) */
    size_t max_url_bytes;          /* request targets above get 414 (0: ipl_httpd's default) */
    /* Hardening (docs/failover.md, "Timeouts and limits"). */
    const ipl_conns_config_t *conns; /* client connection limits and timeouts (copied; NULL:
                                        IPL_CONNS_DEFAULTS) */
    int stream_idle_timeout_ms;      /* after the first byte, no byte from upstream this long
                                        cuts the stream with an error event (0: never) */
} gateway_server_config_t;

typedef struct gateway_server gateway_server_t;

/* Binds the API address and connects the sockets (strings copied). `metrics` is borrowed
 * and must outlive the server. NULL with a human message in `err` on failure. */
gateway_server_t *gateway_server_new(const gateway_server_config_t *config, ipl_metrics_t *metrics,
                                     char *err, size_t errlen);
/* Stops accepting, aborts transfers in flight, joins every thread, frees everything. */
void gateway_server_destroy(gateway_server_t **self_p);

/* The graceful stop before destroy (gateway_drain): stops accepting, lets the requests in
 * flight finish for at most timeout_ms (a second stop signal ends the wait at once) and
 * returns how many are still in flight (0: all done; destroy cuts the rest). Main thread. */
size_t gateway_server_drain(gateway_server_t *self, int timeout_ms);

int gateway_server_start(gateway_server_t *self); /* 0 or IPL_E_IO */
int gateway_server_port(const gateway_server_t *self);

/* An ipl_admin_ready_fn: ready once a policy is known. */
bool gateway_server_ready(void *self, char *detail, size_t size);

/* Registers the gateway's admin routes on `admin` (the admin server's httpd; NULL: none):
 * GET /debug/policy, the version, hash and pools of the policy its view holds
 * (policy_digest_http). The server must outlive `admin`'s serving. */
void gateway_server_register_admin(gateway_server_t *self, ipl_httpd_t *admin);

#endif
