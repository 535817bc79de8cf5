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
 * Metrics (in the registry passed at creation):
 *   inferplane_gateway_route_seconds                  histogram of answered questions
 *   inferplane_gateway_route_timeouts_total           questions not answered in time
 *   inferplane_gateway_route_replies_dropped_total{reason}   stale | malformed | unexpected_type
 *   inferplane_gateway_observations_total{result}     OBSERVED sent | dropped
 */
#ifndef GATEWAY_ROUTE_H
#define GATEWAY_ROUTE_H

#include <stdint.h>

#include "ipl_metrics.h"
#include "ipl_proto.h"

typedef struct gateway_route gateway_route_t;

/* `endpoint` is the decider's ROUTER ("tcp://127.0.0.1:7021"), copied; sockets connect
 * lazily. `metrics` is borrowed and must outlive the object. NULL on failure. */
gateway_route_t *gateway_route_new(const char *endpoint, int timeout_ms, ipl_metrics_t *metrics);
/* Closes every socket. No question may be in flight (call gateway_route_stop and let the
 * handlers return first). */
void gateway_route_destroy(gateway_route_t **self_p);

/* Asks the decider. `req` is borrowed; its req_id is overwritten with a fresh one. On success
 * returns 0 and *rep holds the decoded ROUTE_REP (the caller must ipl_msg_clear it); else
 * IPL_E_TIMEOUT (no answer within the timeout), IPL_E_IO (socket trouble) or IPL_E_AGAIN
 * (stopping). Thread-safe; blocks at most timeout_ms (+ one poll slice when stopping). */
int gateway_route_ask(gateway_route_t *self, ipl_route_req_t *req, ipl_msg_t *rep);

/* gateway_route_ask that also gives the id of the connection the question went on (on
 * success), for gateway_route_observe. */
int gateway_route_ask_conn(gateway_route_t *self, ipl_route_req_t *req, ipl_msg_t *rep,
                           uint64_t *conn);

/* Sends `obs` (borrowed; encoded at once) as an OBSERVED on connection `conn`, now or, when
 * another thread holds that socket, as soon as it is given back. Never blocks. Returns 0
 * (sent or queued), IPL_E_NOTFOUND (the connection is gone), IPL_E_AGAIN (queue full, send
 * HWM, or stopping), or a codec error; every failure is counted as dropped. Thread-safe. */
int gateway_route_observe(gateway_route_t *self, uint64_t conn, const ipl_observed_t *obs);

/* Makes questions in flight and later ones return IPL_E_AGAIN within 50 ms. */
void gateway_route_stop(gateway_route_t *self);

/* Sleeps `ms` (a DEFERRED request waiting to ask again): 0 after the whole time, IPL_E_AGAIN
 * within 50 ms once gateway_route_stop was called. Thread-safe. */
int gateway_route_pause(gateway_route_t *self, int ms);

const char *gateway_route_endpoint(const gateway_route_t *self);
int gateway_route_timeout_ms(const gateway_route_t *self);

#endif
