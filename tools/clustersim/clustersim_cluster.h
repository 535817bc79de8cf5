/*
 * clustersim_cluster — one simulated cluster running one workload under one strategy, in
 * virtual time, on one thread, deterministically from the seed.
 *
 * What is real and what is modelled:
 *
 *   router     the decider's own decider_router (strategy, load gate, ledger of in-flight
 *              requests and optimistic prefixes), fed a decider_state replica exactly as
 *              decider_sync would feed it: KV_EVENT and LOAD messages
 *   workers    the simulator's engine model (sim_engine in manual-clock mode: continuous
 *              batching, chunked prefill, prefix cache with LRU eviction and preemption) with
 *              a cost profile (sim_profile, e.g. l40s-27b-fp8)
 *   collector  modelled: each engine step's KV events are re-hashed into our block hashes
 *              (clustersim_kvmap) and reach the replica `event delay` later (uniform in
 *              [min, max], in order per worker); every busy worker is sampled every
 *              sample_period (phase-shifted per worker) and the sample reaches the replica
 *              after the same kind of delay
 *   gateway    modelled: the prompt's block hashes (ipl_hash, as the gateway computes them)
 *              go to the router when the request arrives; deciding takes no virtual time
 *
 * Time runs as a discrete-event simulation (clustersim_queue): request arrivals, engine step
 * boundaries, samples and deliveries. An engine is only touched when something happens to it:
 * a step boundary (it executes its next step at once and schedules the following boundary),
 * or a request reaching it while idle (its clock jumps forward). A request reaching a busy
 * engine waits for the next step boundary, as it would wait for the scheduler; it reaches
 * the engine `request_s` (the profile's API/tokenisation latency) after the decision.
 *
 * Strategy "oracle" (measurement only): the router's offline oracle hook
 * (decider_router_offline_t) reads a second index of every worker's true cache, updated the
 * moment an engine commits or evicts a block; load still comes from the delayed samples.
 *
 * Calibration (cfg.calibrate): when a request's first token comes out, its TTFT is fed back
 * to the router's predictor (decider_router_observe) with the features it was routed on, as a
 * gateway seeing the first byte would.
 *
 * Not thread-safe; clusters are independent of each other.
 */
#ifndef CLUSTERSIM_CLUSTER_H
#define CLUSTERSIM_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "clustersim_report.h"
#include "clustersim_workload.h"
#include "decider_router.h"

typedef struct {
    uint32_t pools;            /* worker sets */
    uint32_t workers_per_pool; /* workers in each */
    bool split;          /* true: one InferencePool per worker set, serving the workload's models
                            round robin; false: one pool over every worker (every model) */
    const char *profile; /* sim_profile name; NULL: the default */
    uint32_t num_gpu_blocks; /* 0: the profile's */
    /* Heterogeneous worker sets (npool_profiles / npool_blocks 0: every set as above): set p
     * runs profile pool_profiles[p % npool_profiles] with pool_blocks[p % npool_blocks] KV
     * blocks (0: that profile's, or num_gpu_blocks). Each set is then its own
     * InferenceWorkerSet ("set-P"), so the router calibrates one predictor per set. Borrowed. */
    const char *const *pool_profiles;
    uint32_t npool_profiles;
    const uint32_t *pool_blocks;
    uint32_t npool_blocks;
    uint32_t block_size;             /* 16 */
    uint32_t max_num_seqs;           /* 256 */
    uint32_t max_num_batched_tokens; /* 8192 */
    double delay_min_s, delay_max_s; /* KV events and load samples reach the replica after this */
    double sample_period_s;          /* 0.1 */
    uint64_t seed;                   /* engines, delays, router tie-breaks */
    bool calibrate;                  /* feed observed TTFTs to the predictor */
    decider_router_config_t router;  /* default_strategy, seed and offline are set per run */
} clustersim_config_t;

/* Defaults: 2 pools × 3 workers in one InferencePool, l40s-27b-fp8, 16-token blocks, 256
 * sequences, 8192 batched tokens, delay 5–50 ms, samples every 100 ms, seed 1, calibration on,
 * the router's defaults with prefill_tokens_per_s taken from the profile. */
void clustersim_config_defaults(clustersim_config_t *cfg);

typedef struct {
    uint64_t events;       /* events processed */
    uint64_t steps;        /* engine steps executed */
    uint64_t decisions;    /* routed requests */
    uint64_t rejected;     /* router said no, or the prompt can never fit a worker */
    uint64_t kv_batches;   /* step event batches delivered to the replica */
    uint64_t kv_blocks;    /* block memberships stored + removed */
    uint64_t kv_unknown;   /* stored blocks with an unknown parent / removes of unknown blocks */
    uint64_t load_samples; /* LOAD messages delivered */
    uint64_t preemptions;  /* engine preemptions, summed */
    uint64_t stalls;       /* steps that scheduled nothing while work remained */
    uint64_t reason_cache_hit, reason_load_gate, reason_other; /* decision reasons */
    size_t max_queue;                                          /* pending events, high-water mark */
    double virtual_s;                                          /* virtual time at the end */
} clustersim_stats_t;

typedef struct clustersim_cluster clustersim_cluster_t;

/* Builds the cluster (engines, replica, router) for `workload` (borrowed; must outlive the
 * cluster) under `strategy` (a name decider_router_strategy_known accepts; borrowed). NULL
 * with a human message in `err` on failure. */
clustersim_cluster_t *clustersim_cluster_new(const clustersim_config_t *cfg,
                                             const clustersim_workload_t *workload,
                                             const char *strategy, char *err, size_t errlen);
void clustersim_cluster_destroy(clustersim_cluster_t **self_p);

/* Runs the whole workload to completion. 0, or IPL_E_NOMEM / IPL_E_INVAL with `err` set. */
int clustersim_cluster_run(clustersim_cluster_t *self, char *err, size_t errlen);

/* One record per workload request (index = request index), valid after run. Borrowed. */
const clustersim_record_t *clustersim_cluster_records(const clustersim_cluster_t *self, size_t *n);
void clustersim_cluster_stats(const clustersim_cluster_t *self, clustersim_stats_t *out);

/* The cluster's router (borrowed), e.g. for its predictor's model after a run. */
decider_router_t *clustersim_cluster_router(clustersim_cluster_t *self);

/* Writes one CSV line per request after run (with a header when `header`): strategy, request,
 * arrival, worker, the router's predicted and the observed TTFT, predicted and true cached
 * tokens, and the features the prediction was made of — to see where the predictor errs. */
void clustersim_cluster_write_csv(const clustersim_cluster_t *self, FILE *out, bool header);

#endif
