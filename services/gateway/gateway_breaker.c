/*
 * gateway_breaker — see the header. Targets live in one array, found by name (a policy has
 * tens of targets; avoid() walks them all anyway).
 */
#include "gateway_breaker.h"

#include <assert.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char name[GATEWAY_BREAKER_NAME_MAX];
    gateway_breaker_state_t state;
    uint32_t failures;   /* consecutive */
    uint64_t opened_ms;  /* OPEN: since (or the last failure since) */
    uint64_t cool_ms;    /* OPEN, HALF_OPEN: this opening's cooldown (0 closed) */
    bool probing;        /* HALF_OPEN: a probe is out */
    uint64_t probe_ms;   /* ... since */
    ipl_metric_t *gauge; /* inferplane_gateway_breaker_state{target} */
    ipl_metric_t *cool;  /* inferplane_gateway_breaker_cooldown_seconds{target} */
    ipl_metric_t *to[3]; /* transitions, by the state entered */
} s_target_t;

struct gateway_breaker {
    gateway_breaker_config_t cfg;
    ipl_metrics_t *metrics;
    pthread_mutex_t lock;
    s_target_t *targets;
    size_t n;
    size_t unclosed; /* targets open or half-open */
};

static const char *const s_state_names[3] = {"closed", "open", "half_open"};

gateway_breaker_t *gateway_breaker_new(const gateway_breaker_config_t *config,
                                       ipl_metrics_t *metrics)
{
    gateway_breaker_t *self = calloc(1, sizeof *self);
    if (!self) return NULL;
    if (config) self->cfg = *config;
    if (!self->cfg.failures) self->cfg.failures = 5;
    if (!self->cfg.cooldown_ms) self->cfg.cooldown_ms = 10000;
    if (!self->cfg.base_cooldown_ms) self->cfg.base_cooldown_ms = 1000;
    if (self->cfg.base_cooldown_ms > self->cfg.cooldown_ms)
        self->cfg.base_cooldown_ms = self->cfg.cooldown_ms;
    if (!self->cfg.max_targets) self->cfg.max_targets = 1024;
    self->targets = calloc(self->cfg.max_targets, sizeof *self->targets);
    if (!self->targets) {
        free(self);
        return NULL;
    }
    self->metrics = metrics;
    pthread_mutex_init(&self->lock, NULL);
    return self;
}

void gateway_breaker_destroy(gateway_breaker_t **self_p)
{
    assert(self_p);
    gateway_breaker_t *self = *self_p;
    if (!self) return;
    pthread_mutex_destroy(&self->lock);
    free(self->targets);
    free(self);
    *self_p = NULL;
}

/* The target named `name`, tracked from now on when `add` (NULL: unknown, or no room). */
static s_target_t *s_find(gateway_breaker_t *self, const char *name, bool add)
{
    if (!name || !name[0]) return NULL;
    for (size_t i = 0; i < self->n; i++)
        if (!strcmp(self->targets[i].name, name)) return &self->targets[i];
    if (!add || self->n >= self->cfg.max_targets || strlen(name) >= GATEWAY_BREAKER_NAME_MAX)
        return NULL;
    s_target_t *t = &self->targets[self->n++];
    snprintf(t->name, sizeof t->name, "%s", name);
    if (self->metrics) {
        char esc[GATEWAY_BREAKER_NAME_MAX * 2], labels[GATEWAY_BREAKER_NAME_MAX * 2 + 64];
        ipl_metrics_escape(esc, sizeof esc, name);
        snprintf(labels, sizeof labels, "target=\"%s\"", esc);
        t->gauge = ipl_metrics_gauge(self->metrics, "inferplane_gateway_breaker_state",
                                     "Circuit breaker of each upstream target (worker or "
                                     "provider backend): 0 closed, 1 open, 2 half-open.",
                                     labels);
        t->cool = ipl_metrics_gauge(self->metrics, "inferplane_gateway_breaker_cooldown_seconds",
                                    "Cooldown of each upstream target's open circuit breaker: "
                                    "the base cooldown, doubled by each failed probe in a row "
                                    "up to --breaker-cooldown-ms; 0 closed.",
                                    labels);
        for (int s = 0; s < 3; s++) {
            snprintf(labels, sizeof labels, "target=\"%s\",to=\"%s\"", esc, s_state_names[s]);
            t->to[s] =
                ipl_metrics_counter(self->metrics, "inferplane_gateway_breaker_transitions_total",
                                    "Circuit breaker transitions, by target and the "
                                    "state entered.",
                                    labels);
        }
    }
    return t;
}

/* Enters `state`. Opening from closed starts at the base cooldown; from half-open (the probe
 * failed) at twice the last one, up to the cap; closing forgets it. */
static void s_enter(gateway_breaker_t *self, s_target_t *t, gateway_breaker_state_t state,
                    uint64_t now_ms)
{
    if (t->state == state) return;
    if (t->state == GATEWAY_BREAKER_CLOSED) self->unclosed++;
    if (state == GATEWAY_BREAKER_CLOSED) self->unclosed--;
    if (state == GATEWAY_BREAKER_OPEN) {
        t->opened_ms = now_ms;
        uint64_t max = self->cfg.cooldown_ms;
        t->cool_ms = t->state == GATEWAY_BREAKER_CLOSED ? self->cfg.base_cooldown_ms
                     : t->cool_ms > max / 2             ? max
                                                        : t->cool_ms * 2;
    } else if (state == GATEWAY_BREAKER_CLOSED) {
        t->failures = 0;
        t->cool_ms = 0;
    }
    t->state = state;
    t->probing = false;
    if (t->gauge) ipl_metric_set(t->gauge, (double)state);
    if (t->cool) ipl_metric_set(t->cool, (double)t->cool_ms / 1000.0);
    if (t->to[state]) ipl_metric_inc(t->to[state]);
}

/* Time moves an open target to half-open after its cooldown, and gives up on a probe that
 * has not reported within the longest cooldown (see the header). */
static void s_tick(gateway_breaker_t *self, s_target_t *t, uint64_t now_ms)
{
    if (t->state == GATEWAY_BREAKER_OPEN && now_ms >= t->opened_ms + t->cool_ms)
        s_enter(self, t, GATEWAY_BREAKER_HALF_OPEN, now_ms);
    else if (t->state == GATEWAY_BREAKER_HALF_OPEN && t->probing &&
             now_ms >= t->probe_ms + self->cfg.cooldown_ms)
        t->probing = false;
}

void gateway_breaker_landed(gateway_breaker_t *self, const char *target, uint64_t now_ms)
{
    pthread_mutex_lock(&self->lock);
    s_target_t *t = s_find(self, target, false);
    if (t) {
        s_tick(self, t, now_ms);
        if (t->state == GATEWAY_BREAKER_HALF_OPEN && !t->probing) {
            t->probing = true;
            t->probe_ms = now_ms;
        }
    }
    pthread_mutex_unlock(&self->lock);
}

void gateway_breaker_success(gateway_breaker_t *self, const char *target, uint64_t now_ms)
{
    pthread_mutex_lock(&self->lock);
    s_target_t *t = s_find(self, target, false);
    if (t) {
        t->failures = 0;
        s_enter(self, t, GATEWAY_BREAKER_CLOSED, now_ms);
    }
    pthread_mutex_unlock(&self->lock);
}

void gateway_breaker_failure(gateway_breaker_t *self, const char *target, uint64_t now_ms)
{
    pthread_mutex_lock(&self->lock);
    s_target_t *t = s_find(self, target, true);
    if (t) {
        s_tick(self, t, now_ms);
        if (t->state == GATEWAY_BREAKER_HALF_OPEN) {
            s_enter(self, t, GATEWAY_BREAKER_OPEN, now_ms); /* the probe failed */
        } else if (t->state == GATEWAY_BREAKER_CLOSED) {
            if (++t->failures >= self->cfg.failures) s_enter(self, t, GATEWAY_BREAKER_OPEN, now_ms);
        } else {
            t->opened_ms = now_ms; /* an attempt that raced the opening: keep it open longer */
        }
    }
    pthread_mutex_unlock(&self->lock);
}

size_t gateway_breaker_avoid(gateway_breaker_t *self, uint64_t now_ms,
                             char (*names)[GATEWAY_BREAKER_NAME_MAX], size_t max)
{
    size_t n = 0;
    pthread_mutex_lock(&self->lock);
    for (size_t i = 0; i < self->n && n < max; i++) {
        s_target_t *t = &self->targets[i];
        s_tick(self, t, now_ms);
        if (t->state == GATEWAY_BREAKER_OPEN ||
            (t->state == GATEWAY_BREAKER_HALF_OPEN && t->probing))
            memcpy(names[n++], t->name, sizeof t->name);
    }
    pthread_mutex_unlock(&self->lock);
    return n;
}

size_t gateway_breaker_unclosed(gateway_breaker_t *self)
{
    pthread_mutex_lock(&self->lock);
    size_t n = self->unclosed;
    pthread_mutex_unlock(&self->lock);
    return n;
}

gateway_breaker_state_t gateway_breaker_state(gateway_breaker_t *self, const char *target,
                                              uint64_t now_ms)
{
    pthread_mutex_lock(&self->lock);
    s_target_t *t = s_find(self, target, false);
    gateway_breaker_state_t st = GATEWAY_BREAKER_CLOSED;
    if (t) {
        s_tick(self, t, now_ms);
        st = t->state;
    }
    pthread_mutex_unlock(&self->lock);
    return st;
}
