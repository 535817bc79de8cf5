/*
 * decider_server — the decider process's sockets, loop and admin endpoints.
 *
 *   aggregator i PUB ──SUB (--state-sub[i])────────┐
 *   aggregator i ROUTER ◄─DEALER (--state-snapshot[i])┤ decider_follow ──► replica (rwlock)
 *   policy service ──ipl_policy_view (own thread)────┤                        │
 *   gateways ──DEALER──► ROUTER (--listen) ──ROUTE_REQ──► decider_router ◄─┘──► ROUTE_REP
 *            (same connection) ──OBSERVED──► decider_router_feedback ──► predictor
 *   HTTP POST /v1/route (admin server threads) ──────────► decider_router ──► JSON
 *   every routed decision ──ROUTED──► PUB (--peer-pub) ──► the other deciders
 *   the other deciders' PUBs ──► SUB (--peers) ──ROUTED──► decider_peers ──► ledger
 *
 * The server owns the one decider_ledger and lends it to the router (its own decisions) and
 * to decider_peers (the other replicas'). A ROUTE_REQ's decision is remembered under the
 * asking connection and req_id (decider_router_remember; the ROUTE_REP says observe = 1), so
 * that the gateway's OBSERVED on that connection calibrates the predictor with the features
 * the decision saw; HTTP decisions are not remembered (nobody reports on them).
 * A ROUTE_REQ is decided tersely (decider_request_t.terse: candidates' notes and the detail
 * empty, figures as ever) unless it says explain = 1 (inferplanectl); HTTP decisions always
 * explain.
 *
 * --state-sub and --state-snapshot list one endpoint per aggregator, paired by position: the
 * decider follows one and moves to the next when it goes silent (--state-silence-ms),
 * disconnects, or does not answer a snapshot request (decider_follow, decider_sync).
 * Its series are decider_metrics'.
 *
 * One loop thread owns every ZeroMQ socket but the policy view's and the peer PUB (shared by
 * the deciding threads under a mutex); HTTP decisions run on the admin server's threads and
 * share the router (its mutex) and the replica (read lock).
 * Admin: /readyz (ready with a policy and a state snapshot; detail gives seq, lag and the
 * aggregator followed), /metrics, /debug/state, /debug/model, /debug/policy (the version and
 * hash of the policy in use), POST /v1/route.
 */
#ifndef DECIDER_SERVER_H
#define DECIDER_SERVER_H

#include <stdbool.h>
#include <stddef.h>

#include "decider_router.h"
#include "ipl_httpd.h"
#include "ipl_metrics.h"

#define DECIDER_SERVER_MAX_AGGREGATORS 8
#define DECIDER_SERVER_MAX_PEERS       64
#define DECIDER_SERVER_MAX_LISTEN      4 /* --listen endpoints */

typedef struct {
    const char *listen; /* comma-separated: one ROUTER bound to each (tcp://, ipc://) */
    const char *policy_sub, *policy_req;
    const char *state_sub, *state_snapshot; /* comma-separated, one per aggregator, paired */
    decider_router_config_t router; /* its ledger is ignored: the server makes the one ledger */
    uint64_t snapshot_timeout_ms; /* a snapshot with no progress this long is re-requested
                                     (from the next aggregator when there are several) */
    uint64_t silence_ms;          /* aggregator silent this long: follow the next (0: never) */
    size_t max_buffered;          /* deltas kept while a snapshot is built */
    const char *id;               /* this decider's id in ROUTED; NULL or "": hostname-pid */
    const char *peer_pub;         /* endpoint to bind the ROUTED PUB on; NULL or "": none */
    const char *peers;            /* comma-separated other deciders' --peer-pub; NULL: none */
    const char *tokenizer;        /* for /v1/route prompts: "builtin", tokenizer.json or dir */
    uint64_t busy_poll_us; /* the loop polls without sleeping this long after any work (0) */
} decider_server_config_t;

typedef struct decider_server decider_server_t;

/* Binds/connects everything; `metrics` is borrowed. NULL with a message in `err` on failure. */
decider_server_t *decider_server_new(const decider_server_config_t *config, ipl_metrics_t *metrics,
                                     char *err, size_t errlen);
void decider_server_destroy(decider_server_t **self_p);

/* Registers /v1/route, /debug/state, /debug/model, /debug/policy and the readiness callback on
 * `httpd`/the admin. */
void decider_server_register(decider_server_t *self, ipl_httpd_t *httpd);
bool decider_server_ready(void *arg, char *detail, size_t size);

/* Serves until ipl_signal_stopping(). */
void decider_server_run(decider_server_t *self);

#endif
