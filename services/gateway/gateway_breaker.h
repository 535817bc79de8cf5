/*
 * gateway_breaker — a circuit breaker per upstream target (a worker, or a provider's
 * GatewayBackend), so that a target that keeps failing is left alone for a while instead of
 * costing every request an attempt:
 *
 *            `failures` consecutive failures            its cooldown passed
 *   CLOSED ─────────────────────────────────► OPEN ─────────────────────► HALF_OPEN
 *     ▲                                        ▲                             │ one probe lands
 *     │ the probe succeeds                     │ the probe fails: the        │ on the target
 *     │ (the cooldown back to the base)        │ cooldown doubles            │
 *     └────────────────────────────────────────┴─────────────────────────────┘
 *
 * The cooldown backs off: the first opening lasts `base_cooldown_ms`, each re-opening in a
 * row (the half-open probe failed) twice the one before, up to `cooldown_ms`; a success closes
 * the target and the next opening starts from the base again. So a target back after a short
 * stall is let back within about the base cooldown, and one that stays down costs a probe
 * ever more seldom (at the base of 1 s and the cap of 10 s: probes after 1, 2, 4, 8, then every
 * 10 s). Envoy's outlier detection does the same with a linear growth (ejection time =
 * base_ejection_time × the consecutive ejections, capped by max_ejection_time:
 * envoy/config/cluster/v3/outlier_detection.proto).
 *
 * Open targets (and half-open ones while their probe is out) are the ones
 * gateway_breaker_avoid lists: the gateway puts them in its ROUTE_REQ.avoid, so the decider
 * chooses elsewhere. A half-open target is not listed: the next decision that lands on it is
 * its probe (gateway_breaker_landed). A probe reports within its attempt's first-byte bound,
 * so one that has not reported after `cooldown_ms` (the longest cooldown, not the current
 * one: a short one would let a second request stall on a target whose first probe is still
 * waiting) was abandoned — its client went away — and the next request may go. A success
 * closes a target and resets its count; outcomes that say nothing about the target (the
 * client went away) are not reported at all.
 *
 * What counts as a failure is the caller's (gateway_failover: connection failure, 5xx, 429,
 * no first byte in time). Clocks are the caller's (monotonic ms), so tests drive time.
 *
 * Cardinality: at most `max_targets` targets are tracked (names come from the policy; a target
 * beyond the bound is never opened). Metrics, per tracked target:
 * inferplane_gateway_breaker_state{target} (0 closed, 1 open, 2 half-open),
 * inferplane_gateway_breaker_cooldown_seconds{target} (the current opening's cooldown; 0
 * closed) and inferplane_gateway_breaker_transitions_total{target,to} (to = open | half_open |
 * closed).
 *
 * Thread-safe (one mutex; a decision's worth of work under it).
 */
#ifndef GATEWAY_BREAKER_H
#define GATEWAY_BREAKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ipl_metrics.h"

typedef enum {
    GATEWAY_BREAKER_CLOSED = 0,
    GATEWAY_BREAKER_OPEN = 1,
    GATEWAY_BREAKER_HALF_OPEN = 2,
} gateway_breaker_state_t;

typedef struct {
    uint32_t failures;         /* consecutive failures that open a target (0: 5) */
    uint64_t base_cooldown_ms; /* the first opening lasts this long, then half-open; each
                                  re-opening in a row twice the last (0: 1000; at most
                                  cooldown_ms) */
    uint64_t cooldown_ms;      /* the longest cooldown; also how long a probe may stay out
                                  before it is given up (0: 10000) */
    uint32_t max_targets;      /* targets tracked at most (0: 1024) */
} gateway_breaker_config_t;

typedef struct gateway_breaker gateway_breaker_t;

/* `metrics` is borrowed (may be NULL: no metrics) and must outlive the breaker. */
gateway_breaker_t *gateway_breaker_new(const gateway_breaker_config_t *config,
                                       ipl_metrics_t *metrics);
void gateway_breaker_destroy(gateway_breaker_t **self_p);

/* A request is about to go to `target`: a half-open target's probe is now out. */
void gateway_breaker_landed(gateway_breaker_t *self, const char *target, uint64_t now_ms);
/* The attempt on `target` succeeded (closes it, the cooldown back to the base) or failed
 * (counts; opens it at the threshold for the base cooldown, or again at once for twice the
 * last cooldown when it was the probe; on an open target, its cooldown counts from now). */
void gateway_breaker_success(gateway_breaker_t *self, const char *target, uint64_t now_ms);
void gateway_breaker_failure(gateway_breaker_t *self, const char *target, uint64_t now_ms);

/* The targets to avoid now (open; half-open with a probe out), at most `max`, their names
 * copied into names[0..) (the caller's). Moves open targets whose cooldown has passed to
 * half-open. Returns how many. */
#define GATEWAY_BREAKER_NAME_MAX 256
size_t gateway_breaker_avoid(gateway_breaker_t *self, uint64_t now_ms,
                             char (*names)[GATEWAY_BREAKER_NAME_MAX], size_t max);

/* How many targets are not closed (open or half-open): 0 means nothing to avoid, without
 * building the list. */
size_t gateway_breaker_unclosed(gateway_breaker_t *self);

/* `target`'s state (CLOSED when unknown), as of now_ms. */
gateway_breaker_state_t gateway_breaker_state(gateway_breaker_t *self, const char *target,
                                              uint64_t now_ms);

#endif
