/*
 * gateway_route — the gateway's client of the decider: ROUTE_REQ out, ROUTE_REP back.
 *
 * A pool of DEALER sockets connected to the decider's ROUTER. An HTTP handler thread takes a
 * socket for the duration of one question, so each socket is used by one thread at a time:
 *
 *   handler ─take─► [dealer dealer dealer …] ─► ROUTE_REQ{req_id} ─► decider
 *   handler ◄─────────────── ROUTE_REP{req_id} ◄──────────────────────┘ ─give back─►
 *
 * At most 256 sockets exist (each is a TCP connection to the decider); when all are busy a
 * question waits for one, within its timeout.
 *
 * Every question gets a fresh req_id; a reply whose req_id is not the one awaited (the late
 * answer to a question that timed out on this socket earlier) is dropped and counted, as is
 * a frame that does not decode to a ROUTE_REP.
 *
 * Observations: when the decider asks for one (ROUTE_REP.observe), the request's OBSERVED
 * (its measured TTFT) must go back on the very connection that asked — behind one endpoint
 * may stand several deciders, and only the one that decided knows the decision's features.
 * Each socket has a connection id (gateway_route_ask_conn returns it); gateway_route_observe
 * sends on that socket when it is idle, or queues the frame on it when another thread holds
 * it, and the holder sends the queue before giving the socket back:
 *
 *   transfer ─observe(conn)─► socket idle? ─yes─► take it, send, give back
 *                                         └─no──► its queue (≤ 64) ─► sent by the holder
 *
 * An OBSERVED is dropped (counted) when its socket was closed meanwhile (I/O error) or its
 * queue is full, or the decider is too far behind (send HWM).
 *
 * Several deciders, and none (issue 20: a decider outage must not fail requests). `endpoint`
 * may list several decider replicas, comma-separated; each has its own pool of sockets. A
 * question goes to the next one that is up (round robin); one that does not answer in its
 * share of the timeout (timeout / deciders still to try), that cannot be reached (no
 * connection within 250 ms: sockets queue only to completed connections, ZMQ_IMMEDIATE), or
 * that answers NOT_READY (a restarted decider before its snapshot) is marked down and the
 * question goes on to the next one. Until some decider has decided once, NOT_READY is the
 * cluster starting, not an outage: the decider is not marked down, and when every answer is
 * NOT_READY that is the answer (503 router_not_ready), not the backup's guess. A decider down is
 * skipped; after a back-off (250 ms, doubling to 2 s) one question at a time probes it again, with
 * a short timeout, and an answer marks it up. When no decider answers — every one down, or the
 * timeout spent — and a backup is set (gateway_route_backup: decider_backup over the gateway's own
 * policy), the backup decides: load only, with the policy's rules; its decisions' OBSERVED bring
 * its in-flight counts down (connection GATEWAY_ROUTE_BACKUP_CONN). So requests keep being served,
 * degraded, and say so:
 *
 *   question ─► decider A (up) ──answer──► done
 *                  │ timeout / unreachable / NOT_READY: A down (back-off, probe)
 *                  ▼
 *               decider B (up) ──answer──► done        (inferplane_gateway_route_failovers_total)
 *                  │
 *                  ▼
 *               backup: the gateway's policy, load only  (inferplane_gateway_route_backup_total,
 *                                                          reason "fallback")
 *
 * Visible in /readyz (gateway_route_describe: which deciders are down, since when, why, and
 * "degraded" while none answers; still ready while the backup can decide), in
 * inferplane_gateway_decider_up{endpoint}, and in one log line per change (decider_down,
 * decider_up, route_degraded, route_recovered).
 *
 * Metrics (in the registry passed at creation):
 *   inferplane_gateway_route_seconds                  histogram of answered questions
 *   inferplane_gateway_route_timeouts_total           questions not answered in time (each
 *                                                     decider that did not is one)
 *   inferplane_gateway_decider_up{endpoint}           1 while a decider answers, 0 while down
 *   inferplane_gateway_route_failovers_total          answered by another decider than the
 *                                                     first one asked
 *   inferplane_gateway_route_backup_total             decided by the backup (no decider)
 *   inferplane_gateway_route_replies_dropped_total{reason}   stale | malformed | unexpected_type
 *   inferplane_gateway_observations_total{result}     OBSERVED sent | dropped
 */
#ifndef GATEWAY_ROUTE_H
#define GATEWAY_ROUTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ipl_metrics.h"
#include "ipl_policy_view.h"
#include "ipl_proto.h"

#define GATEWAY_ROUTE_MAX_DECIDERS 8
#define GATEWAY_ROUTE_BACKUP_CONN  UINT64_MAX /* the connection id of the backup's decisions */

typedef struct gateway_route gateway_route_t;

/* `endpoint` is the decider's ROUTER ("tcp://127.0.0.1:7021"), or several replicas' comma-
 * separated (at most GATEWAY_ROUTE_MAX_DECIDERS), copied; sockets connect lazily. `metrics`
 * is borrowed and must outlive the object. NULL on failure (no endpoint, too many). */
gateway_route_t *gateway_route_new(const char *endpoint, int timeout_ms, ipl_metrics_t *metrics);

/* Sets the backup that decides when no decider answers (see above): a decider_backup over
 * `policy` (borrowed; it must outlive the object: destroy this first). Call before the first
 * question. 0 or IPL_E_NOMEM. */
int gateway_route_backup(gateway_route_t *self, ipl_policy_view_t *policy);

/* Appends the deciders' state to the NUL-terminated text in buf[size] when something is
 * amiss ("; decider tcp://a down 2.1 s (timeout), 1 of 2 answering", or "; degraded: no
 * decider answers (...), routing load-only from the gateway's policy"); nothing while every
 * decider is up. Returns false only when no question can be answered at all: every decider
 * down and no backup. Thread-safe. */
bool gateway_route_describe(gateway_route_t *self, char *buf, size_t size);

/* Deciders listed, and those up now. */
size_t gateway_route_deciders(gateway_route_t *self, size_t *up);
/* Closes every socket. No question may be in flight (call gateway_route_stop and let the
 * handlers return first). */
void gateway_route_destroy(gateway_route_t **self_p);

/* Asks a decider (or, with none answering, the backup). `req` is borrowed; its req_id is
 * overwritten with a fresh one per decider asked (the last is the answer's). On success
 * returns 0 and *rep holds the decoded ROUTE_REP (the caller must ipl_msg_clear it); else
 * IPL_E_TIMEOUT (no answer within the timeout), IPL_E_IO (socket trouble) or IPL_E_AGAIN
 * (stopping). Thread-safe; blocks at most timeout_ms (+ one poll slice when stopping). */
int gateway_route_ask(gateway_route_t *self, ipl_route_req_t *req, ipl_msg_t *rep);

/* gateway_route_ask that also gives the id of the connection the question went on (on
 * success), for gateway_route_observe: GATEWAY_ROUTE_BACKUP_CONN for the backup's. */
int gateway_route_ask_conn(gateway_route_t *self, ipl_route_req_t *req, ipl_msg_t *rep,
                           uint64_t *conn);

/* Sends `obs` (borrowed; encoded at once) as an OBSERVED on connection `conn`, now or, when
 * another thread holds that socket, as soon as it is given back. Never blocks. Returns 0
 * (sent or queued), IPL_E_NOTFOUND (the connection is gone), IPL_E_AGAIN (queue full, send
 * HWM, or stopping), or a codec error; every failure is counted as dropped. For the backup's
 * connection it brings the worker's in-flight count down instead (0). Thread-safe. */
int gateway_route_observe(gateway_route_t *self, uint64_t conn, const ipl_observed_t *obs);

/* Makes questions in flight and later ones return IPL_E_AGAIN within 50 ms. */
void gateway_route_stop(gateway_route_t *self);

/* Sleeps `ms` (a DEFERRED request waiting to ask again): 0 after the whole time, IPL_E_AGAIN
 * within 50 ms once gateway_route_stop was called. Thread-safe. */
int gateway_route_pause(gateway_route_t *self, int ms);

const char *gateway_route_endpoint(const gateway_route_t *self);
int gateway_route_timeout_ms(const gateway_route_t *self);

#endif
