/*
 * gateway_failover — when a request's attempt at a worker or provider is retried elsewhere,
 * and what the next decision must avoid. The gateway's attempt loop (gateway_server) asks it
 * after every attempt that did not reach the client:
 *
 *   attempt outcome (gateway_failover_classify)      retried?
 *   ─────────────────────────────────────────────    ──────────────────────────────────────
 *   cannot connect / reset before any response       connect             ┐ while attempts <
 *   5xx status line                                  status_5xx          │ --max-attempts and
 *   429 status line                                  status_429          │ the retry budget
 *   no first body byte in --first-byte-timeout-ms    first_byte_timeout  ┘ (gateway_budget) allow
 *   anything else (2xx, 4xx, a byte sent to the client, the client gone)   never
 *
 * Nothing is retried once a byte went to the client: the proxy holds the upstream response
 * until its first body byte (gateway_proxy), and an attempt is judged before that. Each retry
 * is a new decision (ROUTE_REQ.avoid names every target that failed this request, and every
 * open circuit breaker), with translation and credentials done again for wherever it lands.
 *
 * Circuit breakers (gateway_breaker), one per worker and per provider backend: every failure
 * above counts against the target; a success (a response that is not 5xx or 429, its first
 * byte in time) closes it.
 *
 * Metrics: inferplane_gateway_retries_total{reason} (connect | status_5xx | status_429 |
 * first_byte_timeout), inferplane_gateway_retries_denied_total{why} (attempts | budget), and
 * the breakers'.
 *
 * Thread-safe.
 */
#ifndef GATEWAY_FAILOVER_H
#define GATEWAY_FAILOVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gateway_breaker.h"
#include "gateway_budget.h"
#include "ipl_metrics.h"

typedef enum {
    GATEWAY_RETRY_NONE = 0, /* not a failure worth another attempt */
    GATEWAY_RETRY_CONNECT,
    GATEWAY_RETRY_STATUS_5XX,
    GATEWAY_RETRY_STATUS_429,
    GATEWAY_RETRY_FIRST_BYTE_TIMEOUT,
    GATEWAY_RETRY_NREASONS
} gateway_retry_reason_t;

typedef struct {
    int max_attempts; /* attempts per request, the first included (0: 3; 1: no retries) */
    gateway_budget_config_t budget;
    gateway_breaker_config_t breaker;
} gateway_failover_config_t;

#define GATEWAY_AVOID_MAX 32 /* names in one ROUTE_REQ.avoid */

/* One request's avoid list: names[0..nfailed) the targets that failed it, then the open
 * breakers' up to n; list[] points into names (the ROUTE_REQ's avoid). */
typedef struct {
    char names[GATEWAY_AVOID_MAX][GATEWAY_BREAKER_NAME_MAX];
    char *list[GATEWAY_AVOID_MAX];
    size_t n, nfailed;
} gateway_avoid_t;

typedef struct gateway_failover gateway_failover_t;

/* `metrics` is borrowed and must outlive the object. */
gateway_failover_t *gateway_failover_new(const gateway_failover_config_t *config,
                                         ipl_metrics_t *metrics);
void gateway_failover_destroy(gateway_failover_t **self_p);

/* The reason an attempt failed: `rc` 0 with the upstream's `status`, IPL_E_IO (no response),
 * IPL_E_TIMEOUT (no headers or first byte in time); other codes are the gateway's own. */
gateway_retry_reason_t gateway_failover_classify(int rc, int status);
/* "connect", "status_5xx", ... ("none"). */
const char *gateway_failover_reason_name(gateway_retry_reason_t reason);

/* A client request arrived (the budget's deposit). */
void gateway_failover_request(gateway_failover_t *self, uint64_t now_ms);

/* Whether any breaker is open or half-open (else a request needs no avoid list until it
 * fails). */
bool gateway_failover_avoiding(gateway_failover_t *self);
/* The avoid list a request starts with: the open breakers. */
void gateway_failover_avoid_init(gateway_failover_t *self, gateway_avoid_t *avoid, uint64_t now_ms);
/* Adds a target that failed this request (kept before the breakers' names; ignored when full
 * or already listed). */
void gateway_avoid_add(gateway_avoid_t *avoid, const char *name);
/* A decision that found nothing the list allows: drops the breakers' names (Envoy's panic
 * mode: rather than refusing every request while every target is open), or when there are
 * none, every name (the only target may be retried: a provider's 500, then its 200). false
 * when the list was empty already. */
bool gateway_avoid_relax(gateway_avoid_t *avoid);

/* Whether another attempt may follow attempt number `attempt` (1 = the first) that failed
 * with `reason`: under --max-attempts and within the budget (the retry is counted then, by
 * reason; a refusal by why). No reason: false, nothing counted. */
bool gateway_failover_retry(gateway_failover_t *self, int attempt, gateway_retry_reason_t reason,
                            uint64_t now_ms);
/* Whether an attempt after `attempt` could be allowed now (attempts left and budget left),
 * without counting anything: whether it is worth giving up on a slow first byte. */
bool gateway_failover_could_retry(gateway_failover_t *self, int attempt, uint64_t now_ms);

/* A request goes to `target` (its breaker's probe when half-open). */
void gateway_failover_landed(gateway_failover_t *self, const char *target, uint64_t now_ms);
/* The attempt on `target` ended with `reason` (NONE: a success for its breaker). */
void gateway_failover_report(gateway_failover_t *self, const char *target,
                             gateway_retry_reason_t reason, uint64_t now_ms);

gateway_breaker_t *gateway_failover_breaker(gateway_failover_t *self); /* borrowed */

#endif
