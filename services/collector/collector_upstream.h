/*
 * collector_upstream — the collector's PUSH sockets to its aggregators (active-active: each
 * gets every message) and the rule that lets a restarted aggregator converge.
 *
 * An aggregator keeps no state on disk: after a restart it knows nothing, and messages queued
 * to an aggregator that died are lost. The collector holds, per worker, exactly the blocks the
 * aggregator should hold (collector_stream's map), so the rule is:
 *
 *   every (re)connection of a PUSH socket ──► that aggregator gets the FULL state again:
 *   (handshake seen by a ZeroMQ socket monitor)  per worker KV_EVENT CLEARED, KV_EVENT STORED
 *   every send it refused (queue full)           chunks of all its blocks, then its LOAD
 *
 * A restarted aggregator always comes back on a new TCP connection, so it is always resent the
 * state — no incarnation id or extra message is needed. The resend travels on the same pipe
 * as the deltas, after the ones queued before it, so it supersedes them; deltas after it apply
 * on top. A reconnection that was only a network blip costs one redundant resend, which is
 * idempotent. A resend that cannot be queued entirely stays pending and is retried whole.
 *
 *   node ── send(type, body) ──► every PUSH ──► aggregator i (dropped: resend pending for i)
 *   loop ── pollitems/dispatch ── monitor PAIRs: handshake → resend pending; disconnect → log
 *   loop ── resend(fn) ── fn(arg, i) for each aggregator with a resend pending
 *
 * Not thread-safe: the collector's loop uses it under the node's lock (admin readers too).
 */
#ifndef COLLECTOR_UPSTREAM_H
#define COLLECTOR_UPSTREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <zmq.h>

#include "ipl_metrics.h"

#define COLLECTOR_UPSTREAM_MAX 8 /* aggregators */

typedef struct collector_upstream collector_upstream_t;

/* Connects a PUSH socket (with its connection monitor) to each of the `n` endpoints (1 ..
 * COLLECTOR_UPSTREAM_MAX; copied). `metrics` is borrowed. NULL with a human error in `err` on
 * failure. */
collector_upstream_t *collector_upstream_new(const char *const *endpoints, size_t n,
                                             ipl_metrics_t *metrics, char *err, size_t errlen);
void collector_upstream_destroy(collector_upstream_t **self_p);

size_t collector_upstream_count(const collector_upstream_t *self);

/* Queues one message (ipl_proto body) to every aggregator without blocking. An aggregator
 * whose queue refuses it is counted (inferplane_collector_push_dropped_total) and marked for
 * a resend. */
void collector_upstream_send(collector_upstream_t *self, int type, const void *body);
/* Queues one message to aggregator `i` only. 0 or IPL_E_AGAIN / IPL_E_IO (nothing marked). */
int collector_upstream_send_to(collector_upstream_t *self, size_t i, int type, const void *body);

/* The monitors' poll items (socket, ZMQ_POLLIN) into items (capacity max); returns how many. */
size_t collector_upstream_pollitems(collector_upstream_t *self, zmq_pollitem_t *items, size_t max);
/* After zmq_poll: reads the monitor events of the `n` items from pollitems. */
void collector_upstream_dispatch(collector_upstream_t *self, const zmq_pollitem_t *items, size_t n);

/* Calls fn(arg, i) for every aggregator with a resend pending. fn queues the full state with
 * collector_upstream_send_to and returns 0 when all of it was queued (the resend is done),
 * non-zero to try again at the next call. */
typedef int(collector_upstream_resend_fn)(void *arg, size_t i);
void collector_upstream_resend(collector_upstream_t *self, collector_upstream_resend_fn *fn,
                               void *arg);

typedef struct {
    const char *endpoint; /* borrowed */
    bool connected;       /* a handshake was seen and no disconnect since */
    bool resend_pending;
    uint64_t connects; /* handshakes seen */
    uint64_t disconnects;
    uint64_t resends; /* full-state resends queued */
    uint64_t dropped; /* messages its queue refused */
} collector_upstream_info_t;
/* Fills *out for aggregator i (< count). */
void collector_upstream_info(const collector_upstream_t *self, size_t i,
                             collector_upstream_info_t *out);

#endif
