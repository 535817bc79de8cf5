/*
 * decider_metrics — the decider's Prometheus series, on the process's registry.
 *
 * Counted as they happen:
 *   inferplane_decider_decisions_total{reason}   every reason of decider_router_reasons(),
 *                                                + "other"
 *   inferplane_decider_decision_seconds          histogram, ZeroMQ and HTTP decisions
 *   inferplane_frames_dropped_total{reason}      ipl_drops: one schema in every service, the
 *                                                socket in the rate-limited log line
 * Read from the parts at each render:
 *   inferplane_decider_state_seq, _state_lag_seconds, _state_source, _state_synced,
 *   _state_buffered, _snapshots, _state_apply_errors, _state_workers, _index_blocks,
 *   _index_memberships                           the replica
 *   inferplane_decider_resyncs_total{reason}     mirrors decider_sync's counters
 *   inferplane_decider_peer_routed_total{event}  mirrors decider_peers' counters
 *   inferplane_decider_policy_version
 *   inferplane_decider_policy_info{hash}         1 for the policy in use (policy_digest's
 *                                                hash), the ones used before at 0
 *   inferplane_decider_pool_*{pool,...}          decider_pool_metrics: the policy's pools
 *                                                from the replica's LOADs
 *   inferplane_decider_optimistic_blocks, _mean_request_tokens   the router
 *
 * Ownership: `metrics` and the sources are borrowed and must outlive the
 * object, which registers a collect callback on `metrics` that cannot be
 * removed: whoever renders `metrics` (the admin server) must be stopped before
 * the object is destroyed. Threads: decider_metrics_decision and
 * decider_metrics_drop from any thread; the collect callback on the rendering
 * thread (it takes the sources' own locks).
 */
#ifndef DECIDER_METRICS_H
#define DECIDER_METRICS_H

#include "decider_peers.h"
#include "decider_router.h"
#include "decider_sync.h"
#include "ipl_metrics.h"
#include "ipl_policy_view.h"

typedef struct {
    decider_sync_t *sync;      /* the replica */
    decider_peers_t *peers;    /* ROUTED between replicas */
    ipl_policy_view_t *policy; /* the policy in use */
    decider_router_t *router;  /* optimistic blocks, mean request tokens */
} decider_metrics_sources_t;

typedef struct decider_metrics decider_metrics_t;

/* Registers every series (a decision reason never hides under "other") and the
 * collect callback. NULL when out of memory (then no callback is registered).
 */
decider_metrics_t *decider_metrics_new(ipl_metrics_t *metrics,
                                       const decider_metrics_sources_t *sources);
void decider_metrics_destroy(decider_metrics_t **self_p);

/* One decision for `reason` (decider_decision_t.reason; NULL or unknown:
 * "other") that took `seconds` (< 0: not timed, e.g. a request that could not
 * be parsed). */
void decider_metrics_decision(decider_metrics_t *self, const char *reason, double seconds);

/* A frame dropped on `socket` ("listen", "state_sub", "peers", ...) for `reason` (a stable
 * snake_case word or ipl_strerror's): counted and logged, see ipl_drops.h. */
void decider_metrics_drop(decider_metrics_t *self, const char *socket, const char *reason);

#endif
