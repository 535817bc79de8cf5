/*
 * decider_pool_metrics — see the header's table.
 *
 * One entry per pool ever seen (up to DECIDER_POOL_METRICS_MAX, then "__overflow__"), holding
 * its series and this update's sums: every update zeroes the sums, adds each policy worker's
 * figures to its pool's entry, then sets every entry's gauges, so a pool gone from the policy
 * reads 0.
 */
#include "decider_pool_metrics.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_OVERFLOW "__overflow__"

enum { S_KV_EXACT, S_KV_SYNCING, S_KV_DEGRADED, S_KV_UNKNOWN, S_NKV };
enum { S_H_UP, S_H_DOWN, S_H_UNKNOWN, S_NH };
static const char *const s_kv_names[S_NKV] = {"exact", "syncing", "degraded", "unknown"};
static const char *const s_h_names[S_NH] = {"up", "down", "unknown"};

typedef struct {
    char *name;
    ipl_metric_t *workers, *by_kv[S_NKV], *by_health[S_NH], *running, *waiting, *kv_usage, *age;
    /* this update's sums */
    double n, kv[S_NKV], health[S_NH], run, wait, usage_sum, usage_n, age_max;
} s_pool_t;

struct decider_pool_metrics {
    ipl_metrics_t *metrics;
    s_pool_t *pools; /* npools in use, room for DECIDER_POOL_METRICS_MAX + 1 (overflow) */
    int npools;
};

decider_pool_metrics_t *decider_pool_metrics_new(ipl_metrics_t *metrics)
{
    decider_pool_metrics_t *self = calloc(1, sizeof *self);
    if (!self) return NULL;
    self->metrics = metrics;
    self->pools = calloc(DECIDER_POOL_METRICS_MAX + 1, sizeof *self->pools);
    if (!self->pools) decider_pool_metrics_destroy(&self);
    return self;
}

void decider_pool_metrics_destroy(decider_pool_metrics_t **self_p)
{
    if (!self_p || !*self_p) return;
    decider_pool_metrics_t *self = *self_p;
    for (int i = 0; self->pools && i < self->npools; i++)
        free(self->pools[i].name);
    free(self->pools);
    free(self);
    *self_p = NULL;
}

int decider_pool_metrics_pools(const decider_pool_metrics_t *self)
{
    return self->npools;
}

// A gauge of pool `p` with `extra` labels after pool ("" for none).
static ipl_metric_t *s_gauge(decider_pool_metrics_t *self, const char *name, const char *help,
                             const char *pool, const char *extra_key, const char *extra_value)
{
    char esc[512], labels[640];
    ipl_metrics_escape(esc, sizeof esc, pool);
    if (extra_key)
        snprintf(labels, sizeof labels, "pool=\"%s\",%s=\"%s\"", esc, extra_key, extra_value);
    else
        snprintf(labels, sizeof labels, "pool=\"%s\"", esc);
    return ipl_metrics_gauge(self->metrics, name, help, labels);
}

// Registers the series of a new entry. False when out of memory.
static bool s_register(decider_pool_metrics_t *self, s_pool_t *p, const char *name)
{
    if (!(p->name = strdup(name))) return false;
    p->workers = s_gauge(self, "inferplane_decider_pool_workers",
                         "Workers of the pool in the policy in use.", name, NULL, NULL);
    for (int k = 0; k < S_NKV; k++)
        p->by_kv[k] = s_gauge(self, "inferplane_decider_pool_workers_by_kv_state",
                              "Workers of the pool by the exactness of their KV state in the "
                              "replica (degraded: load-only routing; unknown: no LOAD yet).",
                              name, "kv_state", s_kv_names[k]);
    for (int h = 0; h < S_NH; h++)
        p->by_health[h] = s_gauge(self, "inferplane_decider_pool_workers_by_health",
                                  "Workers of the pool by health (down: its /metrics scrape "
                                  "fails; unknown: no LOAD yet).",
                                  name, "health", s_h_names[h]);
    p->running = s_gauge(self, "inferplane_decider_pool_requests_running",
                         "Requests running on the pool's workers (sum of their "
                         "vllm:num_requests_running).",
                         name, NULL, NULL);
    p->waiting = s_gauge(self, "inferplane_decider_pool_requests_waiting",
                         "Requests queued on the pool's workers (sum of their "
                         "vllm:num_requests_waiting).",
                         name, NULL, NULL);
    p->kv_usage =
        s_gauge(self, "inferplane_decider_pool_kv_cache_usage_ratio",
                "Mean KV-cache usage of the pool's workers with a LOAD (0..1).", name, NULL, NULL);
    p->age = s_gauge(self, "inferplane_decider_pool_state_age_seconds",
                     "Age of the oldest of the pool's workers' last state message in the "
                     "replica (0: none known).",
                     name, NULL, NULL);
    self->npools++;
    return true;
}

// The entry of pool `name`, created on first sight; NULL only when out of memory.
static s_pool_t *s_pool(decider_pool_metrics_t *self, const char *name)
{
    for (int i = 0; i < self->npools; i++)
        if (!strcmp(self->pools[i].name, name)) return &self->pools[i];
    if (self->npools >= DECIDER_POOL_METRICS_MAX && strcmp(name, S_OVERFLOW))
        return s_pool(self, S_OVERFLOW);
    s_pool_t *p = &self->pools[self->npools];
    return s_register(self, p, name) ? p : NULL;
}

static void s_add_worker(s_pool_t *p, const decider_worker_t *w, uint64_t now_ms)
{
    p->n++;
    if (!w || !w->has_load) {
        p->kv[S_KV_UNKNOWN]++;
        p->health[S_H_UNKNOWN]++;
    } else {
        p->kv[w->kv_state == IPL_KV_EXACT     ? S_KV_EXACT
              : w->kv_state == IPL_KV_SYNCING ? S_KV_SYNCING
                                              : S_KV_DEGRADED]++;
        p->health[w->health == IPL_HEALTH_UP     ? S_H_UP
                  : w->health == IPL_HEALTH_DOWN ? S_H_DOWN
                                                 : S_H_UNKNOWN]++;
        p->run += (double)w->running;
        p->wait += (double)w->waiting;
        p->usage_sum += w->kv_usage;
        p->usage_n++;
    }
    if (w && w->updated_ms && now_ms > w->updated_ms) {
        double age = (double)(now_ms - w->updated_ms) / 1000.0;
        if (age > p->age_max) p->age_max = age;
    }
}

void decider_pool_metrics_update(decider_pool_metrics_t *self, const ipl_policy_t *policy,
                                 const decider_state_t *state, uint64_t now_ms)
{
    for (int i = 0; i < self->npools; i++) {
        s_pool_t *p = &self->pools[i];
        p->n = p->run = p->wait = p->usage_sum = p->usage_n = p->age_max = 0;
        memset(p->kv, 0, sizeof p->kv);
        memset(p->health, 0, sizeof p->health);
    }
    for (uint32_t i = 0; policy && i < policy->pools_len; i++)
        (void)s_pool(self, policy->pools[i].name); // pools without workers read 0, not absent
    s_pool_t *last = NULL; // a policy lists a pool's workers together: mostly one lookup
    for (uint32_t i = 0; policy && i < policy->workers_len; i++) {
        const ipl_worker_t *w = &policy->workers[i];
        if (!w->pool) continue;
        if (!last || strcmp(last->name, w->pool)) last = s_pool(self, w->pool);
        if (!last) continue; // out of memory: this worker is not counted
        int id = state ? decider_state_find(state, w->name) : -1;
        s_add_worker(last, id >= 0 ? decider_state_worker(state, id) : NULL, now_ms);
    }
    for (int i = 0; i < self->npools; i++) {
        s_pool_t *p = &self->pools[i];
        ipl_metric_set(p->workers, p->n);
        for (int k = 0; k < S_NKV; k++)
            ipl_metric_set(p->by_kv[k], p->kv[k]);
        for (int h = 0; h < S_NH; h++)
            ipl_metric_set(p->by_health[h], p->health[h]);
        ipl_metric_set(p->running, p->run);
        ipl_metric_set(p->waiting, p->wait);
        ipl_metric_set(p->kv_usage, p->usage_n ? p->usage_sum / p->usage_n : 0);
        ipl_metric_set(p->age, p->age_max);
    }
}
