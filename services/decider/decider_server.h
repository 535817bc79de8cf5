/*
 * decider_server — the decider process's sockets, loop and admin endpoints.
 *
 *   aggregator PUB ──SUB (--state-sub)──────┐
 *   aggregator ROUTER ◄─DEALER (--state-snapshot)─┤ decider_sync ──► replica (rwlock)
 *   policy service ──ipl_policy_view (own thread)─┤                        │
 *   gateways ──DEALER──► ROUTER (--listen) ──ROUTE_REQ──► decider_router ◄─┘──► ROUTE_REP
 *   HTTP POST /v1/route (admin server threads) ──────────► decider_router ──► JSON
 *
 * One loop thread owns every ZeroMQ socket but the policy view's; HTTP decisions run on the
 * admin server's threads and share the router (its mutex) and the replica (read lock).
 * Admin: /readyz (ready with a policy and a state snapshot; detail gives seq and lag),
 * /metrics, /debug/state, POST /v1/route.
 */
#ifndef DECIDER_SERVER_H
#define DECIDER_SERVER_H

#include <stdbool.h>
#include <stddef.h>

#include "decider_router.h"
#include "ipl_httpd.h"
#include "ipl_metrics.h"

typedef struct {
    const char *listen, *state_sub, *state_snapshot, *policy_sub, *policy_req;
    decider_router_config_t router;
    uint64_t snapshot_timeout_ms; /* a snapshot with no progress this long is re-requested */
    size_t max_buffered;          /* deltas kept while a snapshot is built */
} decider_server_config_t;

typedef struct decider_server decider_server_t;

/* Binds/connects everything; `metrics` is borrowed. NULL with a message in `err` on failure. */
decider_server_t *decider_server_new(const decider_server_config_t *config, ipl_metrics_t *metrics,
                                     char *err, size_t errlen);
void decider_server_destroy(decider_server_t **self_p);

/* Registers /v1/route and /debug/state and the readiness callback on `httpd`/the admin. */
void decider_server_register(decider_server_t *self, ipl_httpd_t *httpd);
bool decider_server_ready(void *arg, char *detail, size_t size);

/* Serves until ipl_signal_stopping(). */
void decider_server_run(decider_server_t *self);

#endif
