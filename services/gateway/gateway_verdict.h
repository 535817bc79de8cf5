/*
 * gateway_verdict — what the client is told when the decider does not route its request
 * (ROUTE_REP.status other than OK), in the OpenAI error shape.
 *
 *   status          HTTP   type                      code
 *   NO_POOL         404    invalid_request_error     model_not_found
 *   NO_WORKER       503    server_error              no_worker_available
 *   NOT_READY       503    server_error              router_not_ready
 *   OVERLOADED      429    rate_limit_error          overloaded
 *   BAD_REQUEST     400    invalid_request_error     bad_request
 *   REJECTED        http_status (0 → 503)            policy_rejected
 *                   403 permission_error, 413 and other 4xx invalid_request_error,
 *                   429 rate_limit_error, 5xx server_error; the message is the rule's reason
 *                   (ROUTE_REP.detail) and names the rule (ROUTE_REP.rule)
 *   DEFERRED        the gateway holds the request and asks again after retry_after_ms
 *                   (clamped to 10..5000 ms) until --batch-max-wait-ms; then
 *                   429 rate_limit_error batch_deferred, with Retry-After (seconds)
 *   anything else   502    server_error              bad_decision
 *
 * Pure functions: thread-safe.
 */
#ifndef GATEWAY_VERDICT_H
#define GATEWAY_VERDICT_H

#include <stdbool.h>
#include <stdint.h>

#include "gateway_api.h"
#include "ipl_proto.h"

#define GATEWAY_VERDICT_DEFER_MIN_MS 10
#define GATEWAY_VERDICT_DEFER_MAX_MS 5000

/* Fills *err for `rep` (status not OK; DEFERRED as if the wait ran out after 0 ms) for a
 * request that asked for `model`. */
void gateway_verdict_error(const ipl_route_rep_t *rep, const char *model, gateway_api_error_t *err);

/* What became of a request, as RECORD.outcome names it (docs/metrics.md, "Outcomes"):
 * `status` is what the client got, `code` the error code it got (gateway_api_error_t.code;
 * NULL for an answer), `attempts` the upstream attempts made, `provider` whether the last
 * target was a provider and `decision_reason` the decider's reason for it ("spill",
 * "overflow", ...; NULL when never routed). A static string. */
const char *gateway_verdict_outcome(int status, const char *code, int attempts, bool provider,
                                    const char *decision_reason);

/* The OpenAI error type of a refusal with HTTP `status` (see the table). */
const char *gateway_verdict_type(int status);

/* How long to hold a DEFERRED request before asking again, ms. */
int gateway_verdict_defer_ms(uint64_t retry_after_ms);

/* The 429 for a request still deferred after `waited_ms`; *retry_after_s receives the
 * Retry-After value: the decider's retry_after_ms in seconds, rounded up, at least 1. */
void gateway_verdict_deferred(const ipl_route_rep_t *rep, const char *model, uint64_t waited_ms,
                              gateway_api_error_t *err, int *retry_after_s);

#endif
