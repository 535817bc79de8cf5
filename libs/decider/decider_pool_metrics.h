/*
 * decider_pool_metrics — per-pool gauges from the process that knows both halves: the
 * policy (which worker belongs to which pool) and the replica of the cluster state (each
 * worker's last LOAD). Set at render time, on the registry given:
 *
 *   inferplane_decider_pool_workers{pool}                       the policy's workers of the pool
 *   inferplane_decider_pool_workers_by_kv_state{pool,kv_state}  exact, syncing, degraded, unknown
 *   inferplane_decider_pool_workers_by_health{pool,health}      up, down, unknown
 *   inferplane_decider_pool_requests_running{pool}              sum of vllm:num_requests_running
 *   inferplane_decider_pool_requests_waiting{pool}              sum of vllm:num_requests_waiting
 *   inferplane_decider_pool_kv_cache_usage_ratio{pool}          mean vllm:kv_cache_usage_perc of
 *                                                               the workers with a LOAD (0..1)
 *   inferplane_decider_pool_state_age_seconds{pool}             the oldest of its workers' last
 *                                                               state message (0: none known)
 *
 * "unknown" is a worker of the policy the replica has no LOAD of (yet). Every decider replica
 * holds the same state, so across replicas take `max by (pool)`, never `sum`.
 *
 * A pool that leaves the policy keeps its series, at 0 (a registry cannot forget a series);
 * past DECIDER_POOL_METRICS_MAX pools the rest add up under pool="__overflow__" (pool names
 * are the operator's, so that takes a very large policy).
 *
 * Ownership: `metrics` is borrowed and must outlive the object. Not thread-safe: one caller
 * at a time (decider_metrics calls it from its collect callback, on the rendering thread).
 */
#ifndef DECIDER_POOL_METRICS_H
#define DECIDER_POOL_METRICS_H

#include <stdint.h>

#include "decider_state.h"
#include "ipl_metrics.h"
#include "ipl_proto.h"

#define DECIDER_POOL_METRICS_MAX 256

typedef struct decider_pool_metrics decider_pool_metrics_t;

/* NULL when out of memory. Registers nothing until the first update. */
decider_pool_metrics_t *decider_pool_metrics_new(ipl_metrics_t *metrics);
void decider_pool_metrics_destroy(decider_pool_metrics_t **self_p);

/* Sets every pool's gauges from `policy` (NULL: no pools) and `state` (NULL: no worker known)
 * at monotonic `now_ms` (the clock of decider_state_apply's now_ms). The caller holds the
 * state's read lock (decider_sync_rdlock) and a reference to the policy. */
void decider_pool_metrics_update(decider_pool_metrics_t *self, const ipl_policy_t *policy,
                                 const decider_state_t *state, uint64_t now_ms);

/* Pools with series (the overflow entry included). */
int decider_pool_metrics_pools(const decider_pool_metrics_t *self);

#endif
