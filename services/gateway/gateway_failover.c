/*
 * gateway_failover — see the header.
 */
#include "gateway_failover.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipl_error.h"

struct gateway_failover {
    int max_attempts;
    gateway_budget_t *budget;
    gateway_breaker_t *breaker;
    ipl_metric_t *retries[GATEWAY_RETRY_NREASONS];
    ipl_metric_t *denied_attempts, *denied_budget;
};

static const char *const s_reasons[GATEWAY_RETRY_NREASONS] = {
    "none", "connect", "status_5xx", "status_429", "first_byte_timeout",
};

const char *gateway_failover_reason_name(gateway_retry_reason_t reason)
{
    return reason >= 0 && reason < GATEWAY_RETRY_NREASONS ? s_reasons[reason] : "none";
}

gateway_failover_t *gateway_failover_new(const gateway_failover_config_t *config,
                                         ipl_metrics_t *metrics)
{
    assert(config && metrics);
    gateway_failover_t *self = calloc(1, sizeof *self);
    if (!self) return NULL;
    self->max_attempts = config->max_attempts > 0 ? config->max_attempts : 3;
    self->budget = gateway_budget_new(&config->budget);
    self->breaker = gateway_breaker_new(&config->breaker, metrics);
    if (!self->budget || !self->breaker) {
        gateway_failover_destroy(&self);
        return NULL;
    }
    const char *help = "Attempts retried on another target, by why the previous one failed.";
    for (int r = 1; r < GATEWAY_RETRY_NREASONS; r++) {
        char labels[64];
        snprintf(labels, sizeof labels, "reason=\"%s\"", s_reasons[r]);
        self->retries[r] =
            ipl_metrics_counter(metrics, "inferplane_gateway_retries_total", help, labels);
    }
    help = "Failed attempts not retried: no attempts left (--max-attempts), or the retry "
           "budget spent (--retry-budget-percent, --retry-budget-min).";
    self->denied_attempts = ipl_metrics_counter(metrics, "inferplane_gateway_retries_denied_total",
                                                help, "why=\"attempts\"");
    self->denied_budget = ipl_metrics_counter(metrics, "inferplane_gateway_retries_denied_total",
                                              help, "why=\"budget\"");
    return self;
}

void gateway_failover_destroy(gateway_failover_t **self_p)
{
    assert(self_p);
    gateway_failover_t *self = *self_p;
    if (!self) return;
    gateway_budget_destroy(&self->budget);
    gateway_breaker_destroy(&self->breaker);
    free(self);
    *self_p = NULL;
}

gateway_retry_reason_t gateway_failover_classify(int rc, int status)
{
    if (rc == IPL_E_IO) return GATEWAY_RETRY_CONNECT;
    if (rc == IPL_E_TIMEOUT) return GATEWAY_RETRY_FIRST_BYTE_TIMEOUT;
    if (rc != 0) return GATEWAY_RETRY_NONE;
    if (status == 429) return GATEWAY_RETRY_STATUS_429;
    if (status >= 500 && status <= 599) return GATEWAY_RETRY_STATUS_5XX;
    return GATEWAY_RETRY_NONE;
}

void gateway_failover_request(gateway_failover_t *self, uint64_t now_ms)
{
    gateway_budget_request(self->budget, now_ms);
}

static void s_relist(gateway_avoid_t *a)
{
    for (size_t i = 0; i < a->n; i++)
        a->list[i] = a->names[i];
}

bool gateway_failover_avoiding(gateway_failover_t *self)
{
    return gateway_breaker_unclosed(self->breaker) > 0;
}

void gateway_failover_avoid_init(gateway_failover_t *self, gateway_avoid_t *avoid, uint64_t now_ms)
{
    avoid->nfailed = 0;
    avoid->n = gateway_breaker_avoid(self->breaker, now_ms, avoid->names, GATEWAY_AVOID_MAX);
    s_relist(avoid);
}

void gateway_avoid_add(gateway_avoid_t *a, const char *name)
{
    if (!name || !name[0] || strlen(name) >= GATEWAY_BREAKER_NAME_MAX) return;
    for (size_t i = 0; i < a->n; i++)
        if (!strcmp(a->names[i], name)) {
            if (i >= a->nfailed) { /* a breaker's name: move it among the failed ones */
                char tmp[GATEWAY_BREAKER_NAME_MAX];
                memcpy(tmp, a->names[a->nfailed], sizeof tmp);
                memcpy(a->names[a->nfailed], a->names[i], sizeof tmp);
                memcpy(a->names[i], tmp, sizeof tmp);
                a->nfailed++;
            }
            return;
        }
    if (a->n == GATEWAY_AVOID_MAX) { /* full: a breaker's name gives way, else drop it */
        if (a->nfailed == GATEWAY_AVOID_MAX) return;
        a->n--;
    }
    memmove(a->names[a->nfailed + 1], a->names[a->nfailed],
            (a->n - a->nfailed) * sizeof a->names[0]);
    snprintf(a->names[a->nfailed], sizeof a->names[0], "%s", name);
    a->nfailed++;
    a->n++;
    s_relist(a);
}

bool gateway_avoid_relax(gateway_avoid_t *a)
{
    if (a->n == 0) return false;
    a->n = a->n > a->nfailed ? a->nfailed : 0;
    a->nfailed = a->n;
    return true;
}

bool gateway_failover_could_retry(gateway_failover_t *self, int attempt, uint64_t now_ms)
{
    return attempt < self->max_attempts && gateway_budget_would(self->budget, now_ms);
}

bool gateway_failover_retry(gateway_failover_t *self, int attempt, gateway_retry_reason_t reason,
                            uint64_t now_ms)
{
    if (reason <= GATEWAY_RETRY_NONE || reason >= GATEWAY_RETRY_NREASONS) return false;
    if (attempt >= self->max_attempts) {
        ipl_metric_inc(self->denied_attempts);
        return false;
    }
    if (!gateway_budget_try(self->budget, now_ms)) {
        ipl_metric_inc(self->denied_budget);
        return false;
    }
    ipl_metric_inc(self->retries[reason]);
    return true;
}

void gateway_failover_landed(gateway_failover_t *self, const char *target, uint64_t now_ms)
{
    gateway_breaker_landed(self->breaker, target, now_ms);
}

void gateway_failover_report(gateway_failover_t *self, const char *target,
                             gateway_retry_reason_t reason, uint64_t now_ms)
{
    if (reason == GATEWAY_RETRY_NONE)
        gateway_breaker_success(self->breaker, target, now_ms);
    else
        gateway_breaker_failure(self->breaker, target, now_ms);
}

gateway_breaker_t *gateway_failover_breaker(gateway_failover_t *self)
{
    return self->breaker;
}
