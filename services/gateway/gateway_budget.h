/*
 * gateway_budget — a retry budget: over a sliding window, retries may be at most `percent` of
 * the requests plus a small floor, so that when much of the cluster fails the gateway does
 * not multiply its load by --max-attempts (a retry storm) while isolated failures are still
 * retried. The same idea as Finagle's RetryBudget (a percentage of requests, a minimum per
 * second, deposits that expire after a TTL: twitter/finagle,
 * finagle-core/src/main/scala/com/twitter/finagle/service/RetryBudget.scala) and Envoy's
 * retry budgets (budget_percent of active requests, min_retry_concurrency:
 * envoy/config/cluster/v3/circuit_breaker.proto, RetryBudget).
 *
 *   window: S_BUCKETS buckets of window_ms / S_BUCKETS each, the oldest dropped as time moves
 *   allowed retries in the window = floor(min_retries + percent / 100 × requests in the window)
 *
 * A retry that fits is counted (gateway_budget_try); one that does not is refused, and the
 * caller answers with what the failed attempt gave. Clocks are the caller's (monotonic ms).
 * Thread-safe (one mutex).
 */
#ifndef GATEWAY_BUDGET_H
#define GATEWAY_BUDGET_H

#include <stdbool.h>
#include <stdint.h>

typedef struct {
    double percent;       /* retries per 100 requests in the window (0 allowed; <0: 20) */
    uint32_t min_retries; /* retries allowed in any window whatever the requests */
    uint64_t window_ms;   /* the window's length (0: 10000) */
} gateway_budget_config_t;

typedef struct gateway_budget gateway_budget_t;

gateway_budget_t *gateway_budget_new(const gateway_budget_config_t *config);
void gateway_budget_destroy(gateway_budget_t **self_p);

/* A client request arrived (a deposit). */
void gateway_budget_request(gateway_budget_t *self, uint64_t now_ms);
/* Whether one more retry fits; true counts it. */
bool gateway_budget_try(gateway_budget_t *self, uint64_t now_ms);
/* Whether one more retry would fit now (nothing counted). */
bool gateway_budget_would(gateway_budget_t *self, uint64_t now_ms);
/* Requests and retries in the window now (for /metrics and tests). */
void gateway_budget_counts(gateway_budget_t *self, uint64_t now_ms, uint64_t *requests,
                           uint64_t *retries);

#endif
