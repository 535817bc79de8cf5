/*
 * decider_metrics — the decider's series (see the header's table).
 */
#include "decider_metrics.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decider_follow.h"
#include "decider_pool_metrics.h"
#include "ipl_clock.h"
#include "ipl_drops.h"
#include "ipl_error.h"
#include "ipl_log.h"
#include "policy_info.h"

struct decider_metrics {
    ipl_metrics_t *metrics;
    decider_sync_t *sync; // the sources, borrowed (decider_metrics_sources_t)
    decider_peers_t *peers;
    ipl_policy_view_t *policy;
    decider_router_t *router;
    const char *const *reasons; // decider_router_reasons()
    size_t nreasons;
    ipl_metric_t **m_decisions; // one per reason, + "other" (never expected)
    ipl_metric_t *m_latency;
    ipl_metric_t *m_resyncs[DECIDER_RESYNC_NREASONS];
    pthread_mutex_t collect_lock;  // counters mirrored from stats at render time
    decider_pool_metrics_t *pools; // per-pool gauges (under collect_lock)
    policy_info_t *policy_info;    // inferplane_decider_policy_info
};

void decider_metrics_drop(decider_metrics_t *self, const char *socket, const char *reason)
{
    ipl_drops_count(self->metrics, reason, "socket=%s", socket);
}

void decider_metrics_decision(decider_metrics_t *self, const char *reason, double seconds)
{
    size_t i = 0;
    while (i < self->nreasons && (!reason || strcmp(self->reasons[i], reason)))
        i++;
    if (self->m_decisions) ipl_metric_inc(self->m_decisions[i]);
    if (seconds >= 0) ipl_metric_observe(self->m_latency, seconds);
}

// A counter that mirrors a monotonic count kept elsewhere (decider_sync's resyncs, the
// peers' messages), raised to it at render time.
static void s_mirror(decider_metrics_t *self, ipl_metric_t *counter, uint64_t value)
{
    pthread_mutex_lock(&self->collect_lock);
    double have = ipl_metric_value(counter);
    if ((double)value > have) ipl_metric_add(counter, (double)value - have);
    pthread_mutex_unlock(&self->collect_lock);
}

static void s_collect(void *arg, ipl_metrics_t *m)
{
    decider_metrics_t *self = arg;
    decider_sync_stats_t st;
    decider_sync_stats(self->sync, &st);
    ipl_metric_set(ipl_metrics_gauge(m, "inferplane_decider_state_seq",
                                     "State sequence number of the replica.", NULL),
                   (double)st.seq);
    ipl_metric_set(ipl_metrics_gauge(m, "inferplane_decider_state_lag_seconds",
                                     "Age of the newest state the replica applied (a delta, a "
                                     "heartbeat or a snapshot).",
                                     NULL),
                   st.synced ? (double)decider_follow_lag_ms(&st) / 1000.0 : 0);
    for (int r = 1; r < DECIDER_RESYNC_NREASONS; r++)
        s_mirror(self, self->m_resyncs[r], st.resyncs[r]);
    ipl_metric_set(ipl_metrics_gauge(m, "inferplane_decider_state_source",
                                     "Position in --state-sub of the aggregator followed.", NULL),
                   (double)st.source);
    decider_peers_stats_t ps;
    decider_peers_stats(self->peers, &ps);
    static const char *const dirs[] = {"sent", "send_failed", "received", "own", "lost"};
    const uint64_t counts[] = {ps.sent, ps.send_failed, ps.received, ps.own, ps.lost};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        char labels[48];
        snprintf(labels, sizeof labels, "event=\"%s\"", dirs[i]);
        s_mirror(self,
                 ipl_metrics_counter(m, "inferplane_decider_peer_routed_total",
                                     "ROUTED messages between decider replicas: sent, not sent "
                                     "(send_failed), received from peers, own (ignored), lost "
                                     "(gaps in a peer's sequence).",
                                     labels),
                 counts[i]);
    }
    ipl_metric_set(ipl_metrics_gauge(m, "inferplane_decider_state_synced",
                                     "1 once a state snapshot was applied.", NULL),
                   st.synced);
    ipl_metric_set(ipl_metrics_gauge(m, "inferplane_decider_state_buffered",
                                     "Deltas buffered while a snapshot is received.", NULL),
                   (double)st.buffered);
    ipl_metric_set(ipl_metrics_gauge(m, "inferplane_decider_snapshots",
                                     "State snapshots applied since start.", NULL),
                   (double)st.snapshots);
    ipl_metric_set(ipl_metrics_gauge(m, "inferplane_decider_state_apply_errors",
                                     "State messages the replica rejected since start.", NULL),
                   (double)st.apply_errors);
    ipl_metric_set(ipl_metrics_gauge(m, "inferplane_decider_policy_version",
                                     "Version of the policy in use (0: none).", NULL),
                   (double)ipl_policy_view_version(self->policy));
    ipl_metric_set(ipl_metrics_gauge(m, "inferplane_decider_optimistic_blocks",
                                     "Block memberships assumed after routing, not yet "
                                     "expired.",
                                     NULL),
                   (double)decider_router_optimistic_blocks(self->router));
    ipl_metric_set(ipl_metrics_gauge(m, "inferplane_decider_mean_request_tokens",
                                     "Mean uncached prompt tokens per routed request (EWMA), "
                                     "used for queue wait.",
                                     NULL),
                   decider_router_mean_request_tokens(self->router));
    double workers = 0, blocks = 0, memberships = 0;
    ipl_policy_snap_t *snap = ipl_policy_view_get(self->policy);
    policy_info_set(self->policy_info, snap ? snap->policy->hash : 0);
    decider_sync_rdlock(self->sync);
    const decider_state_t *state = decider_sync_state(self->sync);
    if (state) {
        const ipl_index_t *index = decider_state_index(state);
        workers = ipl_index_nworkers(index);
        blocks = (double)ipl_index_blocks(index);
        memberships = (double)ipl_index_memberships(index);
    }
    pthread_mutex_lock(&self->collect_lock);
    decider_pool_metrics_update(self->pools, snap ? snap->policy : NULL, state, ipl_mono_ms());
    pthread_mutex_unlock(&self->collect_lock);
    decider_sync_unlock(self->sync);
    if (snap) ipl_policy_view_release(self->policy, &snap);
    ipl_metric_set(ipl_metrics_gauge(m, "inferplane_decider_state_workers",
                                     "Workers the replica knows.", NULL),
                   workers);
    ipl_metric_set(ipl_metrics_gauge(m, "inferplane_decider_index_blocks",
                                     "Distinct blocks in the replica's prefix index.", NULL),
                   blocks);
    ipl_metric_set(ipl_metrics_gauge(m, "inferplane_decider_index_memberships",
                                     "(block, worker) pairs in the replica's prefix index.", NULL),
                   memberships);
}

// Every reason the router can give has its series (decider_router_reasons), so that a
// strategy's reasons never hide under "other". 0, or IPL_E_NOMEM.
static int s_metrics_init(decider_metrics_t *self)
{
    ipl_metrics_t *m = self->metrics;
    char labels[64];
    self->reasons = decider_router_reasons();
    for (self->nreasons = 0; self->reasons[self->nreasons];)
        self->nreasons++;
    self->m_decisions = calloc(self->nreasons + 1, sizeof *self->m_decisions);
    if (!self->m_decisions) return IPL_E_NOMEM;
    for (size_t i = 0; i <= self->nreasons; i++) {
        snprintf(labels, sizeof labels, "reason=\"%s\"",
                 i < self->nreasons ? self->reasons[i] : "other");
        self->m_decisions[i] = ipl_metrics_counter(m, "inferplane_decider_decisions_total",
                                                   "Routing decisions by reason.", labels);
    }
    static const double bounds[] = {5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4,
                                    5e-4, 1e-3, 5e-3,   1e-2, 0.1};
    self->m_latency = ipl_metrics_histogram(m, "inferplane_decider_decision_seconds",
                                            "Time to decide one route request (ZeroMQ and HTTP).",
                                            NULL, bounds, sizeof bounds / sizeof bounds[0]);
    for (int r = 1; r < DECIDER_RESYNC_NREASONS; r++) {
        snprintf(labels, sizeof labels, "reason=\"%s\"", decider_sync_reason_name(r));
        self->m_resyncs[r] = ipl_metrics_counter(m, "inferplane_decider_resyncs_total",
                                                 "State resynchronisations from a snapshot, by "
                                                 "reason.",
                                                 labels);
    }
    ipl_metrics_on_collect(m, s_collect, self);
    return IPL_OK;
}

decider_metrics_t *decider_metrics_new(ipl_metrics_t *metrics,
                                       const decider_metrics_sources_t *sources)
{
    decider_metrics_t *self = calloc(1, sizeof *self);
    if (!self) return NULL;
    self->metrics = metrics;
    self->sync = sources->sync;
    self->peers = sources->peers;
    self->policy = sources->policy;
    self->router = sources->router;
    pthread_mutex_init(&self->collect_lock, NULL);
    self->pools = decider_pool_metrics_new(metrics);
    self->policy_info = policy_info_new(metrics, "inferplane_decider_policy_info",
                                        "1 for the content hash of the policy in use (hash \"\": "
                                        "none yet; the hashes used before read 0).");
    if (!self->pools || !self->policy_info || s_metrics_init(self) != IPL_OK) {
        decider_metrics_destroy(&self);
        return NULL;
    }
    return self;
}

void decider_metrics_destroy(decider_metrics_t **self_p)
{
    if (!self_p || !*self_p) return;
    decider_metrics_t *self = *self_p;
    pthread_mutex_destroy(&self->collect_lock);
    decider_pool_metrics_destroy(&self->pools);
    policy_info_destroy(&self->policy_info);
    free(self->m_decisions);
    free(self);
    *self_p = NULL;
}
