/*
 * gateway_verdict — ROUTE_REP statuses as client errors. See gateway_verdict.h.
 */
#include "gateway_verdict.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static const char *s_or(const char *s, const char *fallback)
{
    return s && s[0] ? s : fallback;
}

/* The gateway's own refusal codes, by outcome (gateway_limits, gateway_queue, this file). */
static bool s_is(const char *code, const char *const *list)
{
    for (; code && *list; list++)
        if (!strcmp(code, *list)) return true;
    return false;
}

const char *gateway_verdict_outcome(int status, const char *code, int attempts, bool provider,
                                    const char *decision_reason)
{
    static const char *const limited[] = {"rate_limit_exceeded", NULL};
    static const char *const queued[] = {"queue_timeout", "queue_full", "batch_deferred", NULL};
    /* the decider's refusals and routing's own (load shedding, a rule, keepLocal) */
    static const char *const refused[] = {"policy_rejected", "overloaded", "model_not_found",
                                          NULL};
    if (status >= 200 && status <= 299) {
        if (attempts > 1) return "failed_over";
        if (provider && decision_reason &&
            (!strcmp(decision_reason, "spill") || !strcmp(decision_reason, "overflow")))
            return "spilled";
        return "ok";
    }
    if (status == 499 || (code && !strcmp(code, "client_gone"))) return "cancelled";
    if (s_is(code, limited)) return "rate_limited";
    if (s_is(code, queued)) return "queue_timeout";
    if (s_is(code, refused)) return "rejected";
    /* an upstream's own answer passed on (code NULL) or the gateway's: the request's fault
     * (4xx, the client's hang-up 499 included) or an error (5xx, upstream_* codes) */
    if (code && !strncmp(code, "upstream_", 9)) return "error";
    if (status >= 400 && status <= 499) return "rejected";
    return "error";
}

const char *gateway_verdict_type(int status)
{
    if (status == 403) return "permission_error";
    if (status == 429) return "rate_limit_error";
    if (status >= 500) return "server_error";
    return "invalid_request_error";
}

int gateway_verdict_defer_ms(uint64_t retry_after_ms)
{
    if (retry_after_ms < GATEWAY_VERDICT_DEFER_MIN_MS) return GATEWAY_VERDICT_DEFER_MIN_MS;
    if (retry_after_ms > GATEWAY_VERDICT_DEFER_MAX_MS) return GATEWAY_VERDICT_DEFER_MAX_MS;
    return (int)retry_after_ms;
}

void gateway_verdict_deferred(const ipl_route_rep_t *rep, const char *model, uint64_t waited_ms,
                              gateway_api_error_t *err, int *retry_after_s)
{
    uint64_t ms = rep->retry_after_ms ? rep->retry_after_ms : 1000;
    uint64_t s = (ms + 999) / 1000;
    *retry_after_s = s > 3600 ? 3600 : (int)s;
    const char *rule = s_or(rep->rule, "");
    gateway_api_error_set(err, 429, "rate_limit_error", NULL, "batch_deferred",
                          "batch work for model `%s` is deferred while its pool is busy%s%s%s "
                          "(held %" PRIu64 " ms, --batch-max-wait-ms); retry after %d s",
                          model, rule[0] ? " (InferencePolicy rule `" : "", rule,
                          rule[0] ? "`)" : "", waited_ms, *retry_after_s);
}

/* REJECTED: the rule's status and reason. */
static void s_rejected(const ipl_route_rep_t *rep, gateway_api_error_t *err)
{
    int status = rep->http_status >= 400 && rep->http_status <= 599 ? (int)rep->http_status : 503;
    const char *rule = s_or(rep->rule, "");
    gateway_api_error_set(err, status, gateway_verdict_type(status), NULL, "policy_rejected",
                          "%s (InferencePolicy rule `%s`)",
                          s_or(rep->detail, "refused by the routing policy"),
                          s_or(rule, "unnamed"));
}

void gateway_verdict_error(const ipl_route_rep_t *rep, const char *model, gateway_api_error_t *err)
{
    const char *detail = s_or(rep->detail, "");
    const char *reason = s_or(rep->reason, "unknown");
    const char *sep = detail[0] ? ": " : "";
    int retry_after_s = 0;
    switch (rep->status) {
    case IPL_ROUTE_NO_POOL:
        gateway_api_error_set(err, 404, "invalid_request_error", "model", "model_not_found",
                              "The model `%s` does not exist: no pool serves it%s%s", model,
                              detail[0] ? " — " : "", detail);
        break;
    case IPL_ROUTE_NO_WORKER:
        gateway_api_error_set(err, 503, "server_error", NULL, "no_worker_available",
                              "no worker of model `%s` is available (%s)%s%s", model, reason, sep,
                              detail);
        break;
    case IPL_ROUTE_NOT_READY:
        gateway_api_error_set(err, 503, "server_error", NULL, "router_not_ready",
                              "the router is not ready yet (%s)%s%s; retry shortly", reason, sep,
                              detail);
        break;
    case IPL_ROUTE_OVERLOADED:
        gateway_api_error_set(err, 429, "rate_limit_error", NULL, "overloaded",
                              "every worker of model `%s` is above its load limit (%s)%s%s; "
                              "retry later",
                              model, reason, sep, detail);
        break;
    case IPL_ROUTE_BAD_REQUEST:
        gateway_api_error_set(err, 400, "invalid_request_error", NULL, "bad_request",
                              "the router rejected the request (%s)%s%s", reason, sep, detail);
        break;
    case IPL_ROUTE_REJECTED:
        s_rejected(rep, err);
        break;
    case IPL_ROUTE_DEFERRED:
        gateway_verdict_deferred(rep, model, 0, err, &retry_after_s);
        break;
    default:
        gateway_api_error_set(err, 502, "server_error", NULL, "bad_decision",
                              "the router answered with unknown status %" PRIu64 " (%s)",
                              rep->status, reason);
        break;
    }
}
