/*
 * gateway_budget — see the header. A ring of S_BUCKETS buckets; bucket b holds the counts of
 * the slice [b × slice, (b + 1) × slice) of time, and `epoch[b]` says which slice it is, so
 * that a bucket from a slice that has left the window reads as empty.
 */
#include "gateway_budget.h"

#include <assert.h>
#include <pthread.h>
#include <stdlib.h>

#define S_BUCKETS 10

struct gateway_budget {
    double percent;
    uint32_t min_retries;
    uint64_t slice_ms;
    pthread_mutex_t lock;
    uint64_t epoch[S_BUCKETS]; /* slice number + 1 (0: never used) */
    uint64_t requests[S_BUCKETS], retries[S_BUCKETS];
};

gateway_budget_t *gateway_budget_new(const gateway_budget_config_t *config)
{
    gateway_budget_t *self = calloc(1, sizeof *self);
    if (!self) return NULL;
    self->percent = config && config->percent >= 0 ? config->percent : 20;
    self->min_retries = config ? config->min_retries : 0;
    uint64_t window = config && config->window_ms ? config->window_ms : 10000;
    self->slice_ms = window / S_BUCKETS ? window / S_BUCKETS : 1;
    pthread_mutex_init(&self->lock, NULL);
    return self;
}

void gateway_budget_destroy(gateway_budget_t **self_p)
{
    assert(self_p);
    gateway_budget_t *self = *self_p;
    if (!self) return;
    pthread_mutex_destroy(&self->lock);
    free(self);
    *self_p = NULL;
}

/* The bucket of now_ms, emptied when it held an older slice (lock held). */
static unsigned s_bucket(gateway_budget_t *self, uint64_t now_ms)
{
    uint64_t slice = now_ms / self->slice_ms;
    unsigned b = (unsigned)(slice % S_BUCKETS);
    if (self->epoch[b] != slice + 1) {
        self->epoch[b] = slice + 1;
        self->requests[b] = self->retries[b] = 0;
    }
    return b;
}

/* Sums of the buckets within the window ending now (lock held). */
static void s_sums(const gateway_budget_t *self, uint64_t now_ms, uint64_t *requests,
                   uint64_t *retries)
{
    uint64_t slice = now_ms / self->slice_ms;
    *requests = *retries = 0;
    for (unsigned b = 0; b < S_BUCKETS; b++) {
        uint64_t e = self->epoch[b];
        if (!e || e - 1 > slice || slice - (e - 1) >= S_BUCKETS) continue;
        *requests += self->requests[b];
        *retries += self->retries[b];
    }
}

void gateway_budget_request(gateway_budget_t *self, uint64_t now_ms)
{
    pthread_mutex_lock(&self->lock);
    self->requests[s_bucket(self, now_ms)]++;
    pthread_mutex_unlock(&self->lock);
}

/* Whether one more retry fits, and when `take`, counts it. */
static bool s_fits(gateway_budget_t *self, uint64_t now_ms, bool take)
{
    pthread_mutex_lock(&self->lock);
    unsigned b = s_bucket(self, now_ms);
    uint64_t requests, retries;
    s_sums(self, now_ms, &requests, &retries);
    double allowed = (double)self->min_retries + self->percent / 100.0 * (double)requests;
    bool ok = (double)(retries + 1) <= allowed;
    if (ok && take) self->retries[b]++;
    pthread_mutex_unlock(&self->lock);
    return ok;
}

bool gateway_budget_try(gateway_budget_t *self, uint64_t now_ms)
{
    return s_fits(self, now_ms, true);
}

bool gateway_budget_would(gateway_budget_t *self, uint64_t now_ms)
{
    return s_fits(self, now_ms, false);
}

void gateway_budget_counts(gateway_budget_t *self, uint64_t now_ms, uint64_t *requests,
                           uint64_t *retries)
{
    pthread_mutex_lock(&self->lock);
    s_sums(self, now_ms, requests, retries);
    pthread_mutex_unlock(&self->lock);
}
