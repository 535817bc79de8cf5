/*
 * decider_server — see the header's diagram. The loop thread owns listen/sub/dealer; the
 * snapshot DEALER is recreated for every snapshot request, so replies to an abandoned
 * request can never mix into the next snapshot, and the state SUB is recreated whenever
 * another aggregator (or the same one, after silence) is followed, so nothing queued from
 * the old one mixes into the new stream.
 *
 * Snapshot requests wait until the SUB is connected (plus S_SETTLE_MS for its subscription
 * to reach the aggregator): subscribe first, then request (decider_sync.h).
 */
#include "decider_server.h"

#include <cjson/cJSON.h>
#include <czmq.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "decider_http.h"
#include "decider_ledger.h"
#include "decider_peers.h"
#include "decider_sync.h"
#include "decider_wire.h"
#include "ipl_clock.h"
#include "ipl_error.h"
#include "ipl_hash.h"
#include "ipl_log.h"
#include "ipl_policy_view.h"
#include "ipl_signal.h"
#include "ipl_tokenizer.h"
#include "ipl_zmq.h"

#define S_TICK_MS         100
#define S_SETTLE_MS       100 // after the SUB connects, for its subscription to arrive
#define S_MAX_ROUTE_FRAME (16u << 20)
#define S_MAX_STATE_FRAME IPL_PROTO_MAX_FRAME

// What the loop polls (decider_server_run).
enum { S_LISTEN, S_SIGNAL, S_SUB, S_MONITOR, S_DEALER, S_PEERS, S_NITEMS };

struct decider_server {
    decider_server_config_t config; // strings borrowed from main
    char *subs[DECIDER_SERVER_MAX_AGGREGATORS], *snaps[DECIDER_SERVER_MAX_AGGREGATORS];
    size_t nsources;
    char *peer_eps[DECIDER_SERVER_MAX_PEERS];
    size_t npeers;
    char id[128];
    zsock_t *listen, *sub, *dealer;
    zsock_t *sub_monitor;    // PAIR receiving the SUB's connect events
    bool sub_connected;      // the SUB is connected now
    bool sub_ever_connected; // a connect after this one is a reconnect
    uint64_t follow_ms;      // monotonic time the SUB was created
    uint64_t connected_ms;   // monotonic time it last connected
    ipl_policy_view_t *policy;
    decider_sync_t *sync;
    decider_ledger_t *ledger; // lent to the router and the peers; destroyed after both
    decider_router_t *router;
    decider_peers_t *peers;
    ipl_tokenizer_t *tok;
    decider_decision_t decision; // the loop thread's, reused
    decider_wire_t wire;         // ROUTE_REP candidates, reused
    msgpack_sbuffer reply;       // the ROUTE_REP frame, reused (loop thread; zeroed = empty)
    // quiet[k]: socket k was left by a receive that found nothing (EAGAIN) and not used since,
    // so its ZMQ_FD becomes readable when anything arrives: the loop polls that fd instead of
    // having zmq_poll ask the socket for ZMQ_EVENTS before and after every wait (a poll() and
    // a getpid() per socket and pass, most of a decision's system calls). Cleared whenever a
    // socket is replaced; the peers' socket is never quiet (decider_peers drains it).
    bool quiet[S_NITEMS];

    ipl_metrics_t *metrics;
    const char *const *reasons; // decider_router_reasons()
    size_t nreasons;
    ipl_metric_t **m_decisions; // one per reason, + "other" (never expected)
    ipl_metric_t *m_latency;
    ipl_metric_t *m_resyncs[DECIDER_RESYNC_NREASONS];
    pthread_mutex_t collect_lock; // counters mirrored from stats at render time
};

// ---- metrics ----------------------------------------------------------------------------------

static void s_drop(decider_server_t *self, const char *socket, const char *reason)
{
    char labels[128];
    snprintf(labels, sizeof labels, "socket=\"%s\",reason=\"%s\"", socket, reason);
    ipl_metric_inc(ipl_metrics_counter(self->metrics, "inferplane_frames_dropped_total",
                                       "Malformed or unexpected frames dropped, by socket and "
                                       "reason.",
                                       labels));
    IPL_LOG_EVERY(10, IPL_LOG_WARN, "frame_dropped", "socket=%s reason=%s", socket, reason);
}

static void s_count_decision(decider_server_t *self, const char *reason, double seconds)
{
    size_t i = 0;
    while (i < self->nreasons && (!reason || strcmp(self->reasons[i], reason)))
        i++;
    if (self->m_decisions) ipl_metric_inc(self->m_decisions[i]);
    if (seconds >= 0) ipl_metric_observe(self->m_latency, seconds);
}

// Age of the newest state the replica applied: its lag behind the aggregator.
static uint64_t s_age_ms(const decider_sync_stats_t *st)
{
    uint64_t now = ipl_mono_ms();
    return st->last_applied_ms && now > st->last_applied_ms ? now - st->last_applied_ms : 0;
}

// A counter that mirrors a monotonic count kept elsewhere (decider_sync's resyncs, the
// peers' messages), raised to it at render time.
static void s_mirror(decider_server_t *self, ipl_metric_t *counter, uint64_t value)
{
    pthread_mutex_lock(&self->collect_lock);
    double have = ipl_metric_value(counter);
    if ((double)value > have) ipl_metric_add(counter, (double)value - have);
    pthread_mutex_unlock(&self->collect_lock);
}

static void s_collect(void *arg, ipl_metrics_t *m)
{
    decider_server_t *self = arg;
    decider_sync_stats_t st;
    decider_sync_stats(self->sync, &st);
    ipl_metric_set(ipl_metrics_gauge(m, "inferplane_decider_state_seq",
                                     "State sequence number of the replica.", NULL),
                   (double)st.seq);
    ipl_metric_set(ipl_metrics_gauge(m, "inferplane_decider_state_lag_seconds",
                                     "Age of the newest state the replica applied (a delta, a "
                                     "heartbeat or a snapshot).",
                                     NULL),
                   st.synced ? (double)s_age_ms(&st) / 1000.0 : 0);
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
    decider_sync_rdlock(self->sync);
    const decider_state_t *state = decider_sync_state(self->sync);
    if (state) {
        const ipl_index_t *index = decider_state_index(state);
        workers = ipl_index_nworkers(index);
        blocks = (double)ipl_index_blocks(index);
        memberships = (double)ipl_index_memberships(index);
    }
    decider_sync_unlock(self->sync);
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
static int s_metrics_init(decider_server_t *self)
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

// ---- deciding ---------------------------------------------------------------------------------

/* Tells the other replicas (ROUTED) what was just routed, as the router recorded it: the
 * hashes only when they were computed with the worker's block size. */
static void s_publish_routed(decider_server_t *self, const decider_request_t *req,
                             const decider_decision_t *d)
{
    uint64_t bs = d->worker->block_size;
    bool sizes_match = !req->block_size || req->block_size == bs;
    uint64_t prompt = req->prompt_tokens ? req->prompt_tokens : (uint64_t)req->nhashes * bs;
    uint64_t uncached = prompt > d->cached_tokens ? prompt - d->cached_tokens : 0;
    decider_peers_publish(self->peers, d->worker->name, sizes_match ? req->hashes : NULL,
                          sizes_match ? req->nhashes : 0, bs, prompt, uncached, ipl_wall_ms());
}

/* Decides with the newest policy and the replica; the caller keeps *snap_p referenced while it
 * uses the decision and releases it. Thread-safe. */
static int s_decide(decider_server_t *self, ipl_policy_snap_t *snap, const decider_request_t *req,
                    decider_decision_t *d)
{
    uint64_t t0 = ipl_mono_ns();
    decider_sync_stats_t st;
    decider_sync_stats(self->sync, &st);
    decider_sync_rdlock(self->sync);
    int rc = decider_router_route(self->router, snap ? snap->policy : NULL,
                                  decider_sync_state(self->sync), s_age_ms(&st), req, d);
    decider_sync_unlock(self->sync);
    s_count_decision(self, d->reason, (double)(ipl_mono_ns() - t0) / 1e9);
    if (rc == IPL_ROUTE_OK && d->worker) s_publish_routed(self, req, d);
    return rc;
}

static void s_reply(decider_server_t *self, void *raw, zmq_msg_t *identity, uint64_t req_id,
                    const decider_decision_t *d, bool observe, bool brief)
{
    msgpack_sbuffer_clear(&self->reply);
    int rc = decider_wire_reply(&self->wire, req_id, d, observe, brief, &self->reply);
    // Encoded before the identity frame goes out, so that a failure leaves no half message.
    if (rc == IPL_OK) {
        if (zmq_send(raw, zmq_msg_data(identity), zmq_msg_size(identity),
                     ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0)
            return;
        if (zmq_send(raw, self->reply.data, self->reply.size, ZMQ_DONTWAIT) < 0)
            rc = zmq_errno() == EAGAIN ? IPL_E_AGAIN : IPL_E_IO;
    }
    if (rc != IPL_OK)
        IPL_LOG_EVERY(10, IPL_LOG_WARN, "route_reply_failed", "reason=%s", ipl_strerror(rc));
    if (self->reply.alloc > (1u << 20)) { // one huge reply
        msgpack_sbuffer_destroy(&self->reply);
        msgpack_sbuffer_init(&self->reply);
    }
}

// The connection a ROUTER message came on, for decider_router_remember/_feedback: req_ids are
// only unique per gateway, and a gateway reports on the connection it asked on.
static uint64_t s_conn(zmq_msg_t *identity)
{
    return ipl_hash_bytes(zmq_msg_data(identity), zmq_msg_size(identity));
}

// A ROUTE_REQ: decide, remember the decision for its OBSERVED, answer.
static void s_route_req(decider_server_t *self, void *raw, zmq_msg_t *identity,
                        const ipl_route_req_t *rq)
{
    decider_request_t req = decider_wire_request(rq);
    ipl_policy_snap_t *snap = ipl_policy_view_get(self->policy);
    decider_decision_t *d = &self->decision;
    bool observe = s_decide(self, snap, &req, d) == IPL_ROUTE_OK &&
                   decider_router_remember(self->router, s_conn(identity), rq->req_id, d,
                                           ipl_mono_ms()) == IPL_OK;
    s_reply(self, raw, identity, rq->req_id, d, observe, rq->brief && !rq->explain);
    ipl_policy_view_release(self->policy, &snap);
}

// One message from the ROUTER: [identity, ROUTE_REQ] (answered) or [identity, OBSERVED].
// False when none was waiting.
static bool s_serve_route(decider_server_t *self)
{
    void *raw = zsock_resolve(self->listen);
    zmq_msg_t parts[2];
    int kept;
    size_t n = ipl_zmq_recv_parts(raw, parts, 2, &kept);
    self->quiet[S_LISTEN] = n == 0 && zmq_errno() == EAGAIN;
    if (n == 2) {
        ipl_msg_t msg = {0};
        int rc = ipl_msg_decode(zmq_msg_data(&parts[1]), zmq_msg_size(&parts[1]), &msg);
        if (rc != IPL_OK) {
            s_drop(self, "listen", ipl_strerror(rc));
        } else if (msg.type == IPL_MSG_ROUTE_REQ) {
            s_route_req(self, raw, &parts[0], &msg.u.route_req);
        } else if (msg.type == IPL_MSG_OBSERVED) {
            decider_router_feedback(self->router, s_conn(&parts[0]), &msg.u.observed,
                                    ipl_mono_ms());
        } else {
            s_drop(self, "listen", "unexpected_type");
        }
        if (rc == IPL_OK) ipl_msg_clear(&msg);
    } else if (n != 0) {
        s_drop(self, "listen", "frames");
    }
    ipl_zmq_close_parts(parts, kept);
    return n != 0;
}

// ---- state ------------------------------------------------------------------------------------

// Receives one state message (a single frame) from `sock`; decodes it into `msg`.
// Returns 1 with a message, 0 when nothing is waiting, -1 for a dropped frame.
static int s_recv_state(decider_server_t *self, zsock_t *sock, const char *name, ipl_msg_t *msg)
{
    zmq_msg_t frame;
    int kept;
    size_t n = ipl_zmq_recv_parts(zsock_resolve(sock), &frame, 1, &kept);
    self->quiet[sock == self->sub ? S_SUB : S_DEALER] = n == 0 && zmq_errno() == EAGAIN;
    if (n != 1) {
        ipl_zmq_close_parts(&frame, kept);
        if (n == 0) return 0;
        s_drop(self, name, "frames");
        return -1;
    }
    memset(msg, 0, sizeof *msg);
    int rc = ipl_msg_decode(zmq_msg_data(&frame), zmq_msg_size(&frame), msg);
    ipl_zmq_close_parts(&frame, kept);
    if (rc != IPL_OK) {
        s_drop(self, name, ipl_strerror(rc));
        return -1;
    }
    bool ok = msg->type == IPL_MSG_KV_EVENT || msg->type == IPL_MSG_LOAD ||
              (sock == self->dealer && msg->type == IPL_MSG_SNAPSHOT_END);
    if (!ok) {
        ipl_msg_clear(msg);
        s_drop(self, name, "unexpected_type");
        return -1;
    }
    return 1;
}

static void s_request_snapshot(decider_server_t *self)
{
    const char *endpoint = self->snaps[decider_sync_source(self->sync)];
    zsock_destroy(&self->dealer);
    self->quiet[S_DEALER] = false;
    self->dealer = zsock_new(ZMQ_DEALER);
    if (!self->dealer) return;
    zsock_set_linger(self->dealer, 0);
    zsock_set_maxmsgsize(self->dealer, S_MAX_STATE_FRAME);
    zsock_set_rcvhwm(self->dealer, 0); // a snapshot is as long as the state: never drop a part
    if (zsock_connect(self->dealer, "%s", endpoint) != 0) {
        IPL_LOG_EVERY(10, IPL_LOG_ERROR, "snapshot_connect_failed", "endpoint=%s", endpoint);
        return;
    }
    ipl_snapshot_req_t req = {.flags = 0};
    int rc = ipl_msg_send(zsock_resolve(self->dealer), IPL_MSG_SNAPSHOT_REQ, &req, ZMQ_DONTWAIT);
    if (rc != IPL_OK) {
        IPL_LOG_EVERY(10, IPL_LOG_WARN, "snapshot_request_failed", "reason=%s", ipl_strerror(rc));
        return;
    }
    decider_sync_requested(self->sync, ipl_mono_ms());
    IPL_DEBUG("snapshot_requested", "endpoint=%s reason=%s", endpoint,
              decider_sync_reason_name(decider_sync_last_reason(self->sync)));
}

static void s_on_sync(decider_server_t *self, int rc);

/* (Re)creates the state SUB, connected to the aggregator decider_sync follows. 0 or -1. */
static int s_follow(decider_server_t *self)
{
    size_t source = decider_sync_source(self->sync);
    if (self->sub && self->sub_monitor) zmq_socket_monitor(zsock_resolve(self->sub), NULL, 0);
    zsock_destroy(&self->sub_monitor);
    zsock_destroy(&self->sub);
    zsock_destroy(&self->dealer);
    self->sub_connected = self->sub_ever_connected = false;
    self->quiet[S_SUB] = self->quiet[S_MONITOR] = self->quiet[S_DEALER] = false;
    self->follow_ms = ipl_mono_ms();
    self->sub = zsock_new(ZMQ_SUB);
    if (!self->sub) return -1;
    zsock_set_linger(self->sub, 0);
    zsock_set_maxmsgsize(self->sub, S_MAX_STATE_FRAME);
    zsock_set_rcvhwm(self->sub, 1000000); // a gap costs a full resync: buffer generously
    zsock_set_subscribe(self->sub, "");
    char monitor[96];
    /* Unique in the process: a closed monitor releases its inproc:// name asynchronously,
     * and a later server may be allocated at the same address (two in one process). */
    static atomic_uint generation;
    snprintf(monitor, sizeof monitor, "inproc://decider-sub-monitor-%u",
             atomic_fetch_add(&generation, 1) + 1);
    if (zmq_socket_monitor(zsock_resolve(self->sub), monitor,
                           ZMQ_EVENT_CONNECTED | ZMQ_EVENT_DISCONNECTED) != 0 ||
        !(self->sub_monitor = zsock_new_pair(monitor))) {
        zsock_destroy(&self->sub);
        return -1;
    }
    if (zsock_connect(self->sub, "%s", self->subs[source]) != 0) {
        zmq_socket_monitor(zsock_resolve(self->sub), NULL, 0);
        zsock_destroy(&self->sub_monitor);
        zsock_destroy(&self->sub);
        return -1;
    }
    IPL_INFO("state_following", "source=%zu state_sub=%s state_snapshot=%s", source,
             self->subs[source], self->snaps[source]);
    return 0;
}

/* A snapshot is wanted: requests it once the SUB is connected and settled; an aggregator the
 * SUB cannot reach within the snapshot timeout has failed. */
static void s_want_snapshot(decider_server_t *self)
{
    uint64_t now = ipl_mono_ms();
    if (!self->sub) { // could not be created: try again
        if (s_follow(self) != 0) return;
    }
    if (!self->sub_connected) {
        zsock_destroy(&self->dealer); // whatever it still receives belongs to no request
        if (now - self->follow_ms < self->config.snapshot_timeout_ms) return;
        if (self->nsources > 1) {
            IPL_WARN("state_source_unreachable", "endpoint=%s waited_ms=%llu",
                     self->subs[decider_sync_source(self->sync)],
                     (unsigned long long)(now - self->follow_ms));
            s_on_sync(self, decider_sync_fail(self->sync, DECIDER_RESYNC_TIMEOUT));
            return;
        }
        // The only aggregator: ask anyway (the request times out and is repeated).
    } else if (now - self->connected_ms < S_SETTLE_MS) {
        zsock_destroy(&self->dealer);
        return;
    }
    s_request_snapshot(self);
}

// Acts on what decider_sync asked for.
static void s_on_sync(decider_server_t *self, int rc)
{
    if (rc == DECIDER_SYNC_RESYNC) {
        s_want_snapshot(self);
    } else if (rc == DECIDER_SYNC_SWITCH) {
        if (s_follow(self) != 0)
            IPL_LOG_EVERY(10, IPL_LOG_ERROR, "state_follow_failed", "endpoint=%s",
                          self->subs[decider_sync_source(self->sync)]);
    }
}

/* The SUB's connection events. A first connect lets the snapshot request go; a reconnect
 * means whatever was published meanwhile is lost, and the publisher may be a new aggregator
 * whose seq happens to continue ours: resync. A disconnect, with several aggregators, moves
 * to the next one; with one, libzmq reconnects by itself. */
static void s_drain_monitor(decider_server_t *self)
{
    void *raw = zsock_resolve(self->sub_monitor);
    for (int budget = 100; budget > 0 && self->sub_monitor; budget--) {
        zmq_msg_t event, addr;
        zmq_msg_init(&event);
        if (zmq_msg_recv(&event, raw, ZMQ_DONTWAIT) < 0) {
            self->quiet[S_MONITOR] = zmq_errno() == EAGAIN;
            zmq_msg_close(&event);
            return;
        }
        self->quiet[S_MONITOR] = false;
        uint16_t id = 0;
        if (zmq_msg_size(&event) >= 2) memcpy(&id, zmq_msg_data(&event), sizeof id);
        bool more = zmq_msg_more(&event);
        zmq_msg_close(&event);
        if (more) { // the endpoint frame
            zmq_msg_init(&addr);
            zmq_msg_recv(&addr, raw, 0);
            zmq_msg_close(&addr);
        }
        const char *endpoint = self->subs[decider_sync_source(self->sync)];
        if (id == ZMQ_EVENT_CONNECTED) {
            IPL_INFO("state_sub_connected", "endpoint=%s", endpoint);
            bool again = self->sub_ever_connected;
            self->sub_connected = self->sub_ever_connected = true;
            self->connected_ms = ipl_mono_ms();
            if (again) s_on_sync(self, decider_sync_reset(self->sync, DECIDER_RESYNC_RECONNECT));
        } else if (id == ZMQ_EVENT_DISCONNECTED) {
            IPL_WARN("state_sub_disconnected", "endpoint=%s", endpoint);
            self->sub_connected = false;
            if (self->nsources > 1) {
                s_on_sync(self, decider_sync_fail(self->sync, DECIDER_RESYNC_DISCONNECTED));
                return; // that monitor is gone
            }
        }
    }
}

static void s_drain_state(decider_server_t *self, zsock_t *sock, const char *name, bool snapshot)
{
    for (int budget = 10000; budget > 0; budget--) {
        ipl_msg_t msg;
        int got = s_recv_state(self, sock, name, &msg);
        if (got == 0) return;
        if (got < 0) continue;
        uint64_t now = ipl_mono_ms();
        int rc = snapshot ? decider_sync_snapshot(self->sync, &msg, now)
                          : decider_sync_delta(self->sync, &msg, now);
        s_on_sync(self, rc);
        // A new snapshot request replaced that DEALER; a switch replaced both sockets.
        if ((snapshot && rc != DECIDER_SYNC_OK) || rc == DECIDER_SYNC_SWITCH) return;
    }
}

// Splits a comma-separated list into trimmed copies (at most `max`). Returns the count, or -1
// (too many, out of memory); entries already stored stay the caller's to free.
static int s_split(const char *list, char **out, size_t max)
{
    size_t n = 0;
    for (const char *p = list ? list : ""; *p;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        const char *q = p;
        while (len && (*q == ' ' || *q == '\t')) {
            q++;
            len--;
        }
        while (len && (q[len - 1] == ' ' || q[len - 1] == '\t'))
            len--;
        if (len) {
            if (n == max || !(out[n] = strndup(q, len))) return -1;
            n++;
        }
        p = comma ? comma + 1 : p + strlen(p);
    }
    return (int)n;
}

static void s_drop_peer(void *arg, const char *reason)
{
    s_drop(arg, "peers", reason);
}

// ---- life cycle and loop ----------------------------------------------------------------------

// Binds the ROUTER to every endpoint of `list` (e.g. tcp:// for gateways elsewhere and ipc://
// for one on the same host; a reply goes back on the connection its request came on). 0, or
// -1 with `err` set.
static int s_bind_listen(decider_server_t *self, const char *list, char *err, size_t errlen)
{
    char *eps[DECIDER_SERVER_MAX_LISTEN] = {0};
    int n = s_split(list, eps, DECIDER_SERVER_MAX_LISTEN), rc = 0;
    if (n <= 0) {
        snprintf(err, errlen, "--listen takes 1 to %d comma-separated endpoints",
                 DECIDER_SERVER_MAX_LISTEN);
        rc = -1;
    }
    for (int i = 0; i < n && rc == 0; i++)
        if (zsock_bind(self->listen, "%s", eps[i]) < 0) {
            snprintf(err, errlen,
                     "cannot bind --listen \"%s\": %s; use a free tcp://host:port or an ipc:// "
                     "path",
                     eps[i], zmq_strerror(zmq_errno()));
            rc = -1;
        }
    for (int i = 0; i < DECIDER_SERVER_MAX_LISTEN; i++)
        free(eps[i]);
    return rc;
}

// Endpoint lists and the id. 0, or -1 with `err` set.
static int s_parse_config(decider_server_t *self, const decider_server_config_t *config, char *err,
                          size_t errlen)
{
    int nsub = s_split(config->state_sub, self->subs, DECIDER_SERVER_MAX_AGGREGATORS);
    int nsnap = s_split(config->state_snapshot, self->snaps, DECIDER_SERVER_MAX_AGGREGATORS);
    int npeers = s_split(config->peers, self->peer_eps, DECIDER_SERVER_MAX_PEERS);
    if (nsub < 0 || nsnap < 0) {
        snprintf(err, errlen, "--state-sub and --state-snapshot take at most %d endpoints",
                 DECIDER_SERVER_MAX_AGGREGATORS);
        return -1;
    }
    if (npeers < 0) {
        snprintf(err, errlen, "--peers takes at most %d endpoints", DECIDER_SERVER_MAX_PEERS);
        return -1;
    }
    if (nsub == 0 || nsub != nsnap) {
        snprintf(err, errlen,
                 "--state-sub lists %d endpoint(s) and --state-snapshot %d: give one of each per "
                 "aggregator, in the same order (e.g. --state-sub tcp://a:7002,tcp://b:7002 "
                 "--state-snapshot tcp://a:7003,tcp://b:7003)",
                 nsub, nsnap);
        return -1;
    }
    self->nsources = (size_t)nsub;
    self->npeers = (size_t)npeers;
    if (config->id && *config->id) {
        snprintf(self->id, sizeof self->id, "%s", config->id);
    } else {
        char host[64] = "decider";
        gethostname(host, sizeof host - 1);
        snprintf(self->id, sizeof self->id, "%s-%ld", host, (long)getpid());
    }
    return 0;
}

decider_server_t *decider_server_new(const decider_server_config_t *config, ipl_metrics_t *metrics,
                                     char *err, size_t errlen)
{
    decider_server_t *self = calloc(1, sizeof *self);
    if (!self) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    self->config = *config;
    self->metrics = metrics;
    pthread_mutex_init(&self->collect_lock, NULL);
    decider_decision_init(&self->decision);
    if (s_parse_config(self, config, err, errlen) != 0) {
        decider_server_destroy(&self);
        return NULL;
    }
    self->listen = zsock_new(ZMQ_ROUTER);
    self->sync = decider_sync_new(config->max_buffered, config->snapshot_timeout_ms);
    // One ledger, lent to the router (its decisions) and the peers (the other replicas').
    self->ledger = decider_ledger_new(config->router.optimistic_ttl_ms);
    decider_router_config_t rc = config->router;
    rc.ledger = self->ledger;
    self->router = self->ledger ? decider_router_new(&rc) : NULL;
    char tok_err[512] = "";
    self->tok = ipl_tokenizer_open(config->tokenizer, tok_err, sizeof tok_err);
    if (!self->tok) {
        snprintf(err, errlen, "--tokenizer: %s", tok_err);
        decider_server_destroy(&self);
        return NULL;
    }
    if (!self->listen || !self->sync || !self->router) {
        snprintf(err, errlen, "out of memory");
        decider_server_destroy(&self);
        return NULL;
    }
    decider_sync_set_sources(self->sync, self->nsources, config->silence_ms);
    zsock_set_linger(self->listen, 0);
    zsock_set_maxmsgsize(self->listen, S_MAX_ROUTE_FRAME);
    zsock_set_sndhwm(self->listen, 100000);
    zsock_set_rcvhwm(self->listen, 100000);
    if (s_bind_listen(self, config->listen, err, errlen) != 0) {
        decider_server_destroy(&self);
        return NULL;
    }
    if (s_follow(self) != 0) {
        snprintf(err, errlen, "cannot connect --state-sub \"%s\"; use tcp://host:port",
                 self->subs[0]);
        decider_server_destroy(&self);
        return NULL;
    }
    decider_peers_config_t pc = {.id = self->id,
                                 .pub = config->peer_pub,
                                 .peers = (const char *const *)self->peer_eps,
                                 .npeers = self->npeers,
                                 .on_drop = s_drop_peer,
                                 .drop_arg = self,
                                 .ledger = self->ledger};
    self->peers = decider_peers_new(&pc, err, errlen);
    if (!self->peers) {
        decider_server_destroy(&self);
        return NULL;
    }
    self->policy = ipl_policy_view_new(config->policy_sub, config->policy_req);
    if (!self->policy) {
        snprintf(err, errlen,
                 "cannot start the policy view (--policy-sub \"%s\", --policy-req "
                 "\"%s\")",
                 config->policy_sub, config->policy_req);
        decider_server_destroy(&self);
        return NULL;
    }
    if (s_metrics_init(self) != IPL_OK) {
        snprintf(err, errlen, "out of memory");
        decider_server_destroy(&self);
        return NULL;
    }
    return self;
}

void decider_server_destroy(decider_server_t **self_p)
{
    if (!self_p || !*self_p) return;
    decider_server_t *self = *self_p;
    ipl_policy_view_destroy(&self->policy);
    if (self->sub && self->sub_monitor) zmq_socket_monitor(zsock_resolve(self->sub), NULL, 0);
    zsock_destroy(&self->sub_monitor);
    zsock_destroy(&self->listen);
    zsock_destroy(&self->sub);
    zsock_destroy(&self->dealer);
    decider_peers_destroy(&self->peers);
    decider_sync_destroy(&self->sync);
    decider_router_destroy(&self->router);
    decider_ledger_destroy(&self->ledger); // after the two that borrow it
    ipl_tokenizer_destroy(&self->tok);
    decider_decision_clear(&self->decision);
    for (size_t i = 0; i < DECIDER_SERVER_MAX_AGGREGATORS; i++) {
        free(self->subs[i]);
        free(self->snaps[i]);
    }
    for (size_t i = 0; i < DECIDER_SERVER_MAX_PEERS; i++)
        free(self->peer_eps[i]);
    pthread_mutex_destroy(&self->collect_lock);
    free(self->m_decisions);
    decider_wire_clear(&self->wire);
    msgpack_sbuffer_destroy(&self->reply);
    free(self);
    *self_p = NULL;
}

// zmq_poll for items that are all plain fds, in one poll(2) (zmq_poll makes a non-blocking
// pass first, a second system call per wait).
static int s_poll_fds(zmq_pollitem_t *items, int n, long timeout_ms)
{
    struct pollfd fds[S_NITEMS];
    for (int i = 0; i < n; i++)
        fds[i] = (struct pollfd){.fd = items[i].fd, .events = POLLIN};
    int rc = poll(fds, (nfds_t)n, (int)timeout_ms);
    if (rc < 0) return -1; // errno, which zmq_errno() reads
    for (int i = 0; i < n; i++)
        items[i].revents = fds[i].revents & POLLIN ? ZMQ_POLLIN : 0;
    return rc;
}

// Waits for any item (at most S_TICK_MS). With busy_poll_us, first polls without sleeping for
// that long: a message arriving meanwhile is served without the scheduler waking this thread
// (5-15 us a wake-up on a shared VM, two of them per round trip on the decider's side).
static int s_wait(decider_server_t *self, zmq_pollitem_t *items, int nitems, bool only_fds)
{
    if (self->config.busy_poll_us) {
        uint64_t end = ipl_mono_ns() + self->config.busy_poll_us * 1000;
        do {
            int n = only_fds ? s_poll_fds(items, nitems, 0) : zmq_poll(items, nitems, 0);
            if (n != 0) return n;
        } while (ipl_mono_ns() < end && !ipl_signal_stopping());
    }
    return only_fds ? s_poll_fds(items, nitems, S_TICK_MS) : zmq_poll(items, nitems, S_TICK_MS);
}

void decider_server_run(decider_server_t *self)
{
    while (!ipl_signal_stopping()) {
        s_on_sync(self, decider_sync_tick(self->sync, ipl_mono_ms()));
        // Every socket that exists now; `at[k]` is item k's slot in `items`, or -1. A quiet
        // socket is polled by its ZMQ_FD (see `quiet`), any other one as a ZeroMQ socket.
        void *socks[S_NITEMS] = {
            zsock_resolve(self->listen),
            NULL,
            self->sub ? zsock_resolve(self->sub) : NULL,
            self->sub_monitor ? zsock_resolve(self->sub_monitor) : NULL,
            self->dealer ? zsock_resolve(self->dealer) : NULL,
            decider_peers_socket(self->peers),
        };
        zmq_pollitem_t items[S_NITEMS];
        int at[S_NITEMS], nitems = 0;
        bool only_fds = true;
        for (int k = 0; k < S_NITEMS; k++) {
            at[k] = -1;
            int fd = k == S_SIGNAL ? ipl_signal_fd() : -1;
            if (k == S_SIGNAL ? fd < 0 : !socks[k]) continue;
            size_t len = sizeof fd;
            if (k != S_SIGNAL && self->quiet[k] &&
                zmq_getsockopt(socks[k], ZMQ_FD, &fd, &len) == 0) {
                items[nitems] = (zmq_pollitem_t){NULL, fd, ZMQ_POLLIN, 0};
            } else {
                items[nitems] = (zmq_pollitem_t){socks[k], fd, ZMQ_POLLIN, 0};
                only_fds &= !socks[k];
            }
            at[k] = nitems++;
        }
        int n = s_wait(self, items, nitems, only_fds);
        if (n < 0 && zmq_errno() != EINTR) {
            IPL_ERROR("poll_failed", "error=%s", zmq_strerror(zmq_errno()));
            break;
        }
        if (n <= 0) continue;
        // A quiet socket's fd may be readable without a message (a command): draining finds
        // nothing and leaves it quiet again.
#define S_READY(k) (at[k] >= 0 && (items[at[k]].revents & ZMQ_POLLIN))
        // The state sockets may be replaced by any of these steps: look them up again.
        if (S_READY(S_MONITOR) && self->sub_monitor) s_drain_monitor(self);
        if (S_READY(S_SUB) && self->sub) s_drain_state(self, self->sub, "state_sub", false);
        // A quiet DEALER is the one polled (replacing it clears `quiet`); a new one is asked.
        if (self->dealer &&
            (self->quiet[S_DEALER] ? S_READY(S_DEALER) : (zsock_events(self->dealer) & ZMQ_POLLIN)))
            s_drain_state(self, self->dealer, "state_snapshot", true);
        if (S_READY(S_PEERS)) decider_peers_drain(self->peers, 10000);
        // Until nothing waits, at most 1000 before the state gets its turn (then the socket
        // is not quiet: the next poll asks it).
        if (S_READY(S_LISTEN))
            for (int i = 0; i < 1000 && s_serve_route(self); i++) {
            }
#undef S_READY
    }
}

// ---- admin ------------------------------------------------------------------------------------

bool decider_server_ready(void *arg, char *detail, size_t size)
{
    decider_server_t *self = arg;
    decider_sync_stats_t st;
    decider_sync_stats(self->sync, &st);
    uint64_t version = ipl_policy_view_version(self->policy);
    if (version && st.synced) {
        snprintf(detail, size, "state_seq=%llu lag_ms=%llu policy_version=%llu state_sub=%s%s",
                 (unsigned long long)st.seq, (unsigned long long)s_age_ms(&st),
                 (unsigned long long)version, self->subs[st.source],
                 st.syncing ? " resyncing" : "");
        return true;
    }
    snprintf(detail, size, "waiting for%s%s", version ? "" : " a policy from the policy service",
             st.synced ? ""
             : version ? " a state snapshot from the aggregator"
                       : " and a state snapshot from the aggregator");
    return false;
}

static void s_http_route(void *arg, const ipl_http_req_t *hreq, ipl_http_resp_t *resp)
{
    decider_server_t *self = arg;
    size_t len = 0;
    const char *body = ipl_http_req_body(hreq, &len);
    decider_http_request_t r;
    char err[384];
    if (decider_http_parse(body ? body : "", len, &r, err, sizeof err) != IPL_OK) {
        s_count_decision(self, "bad_request", -1);
        ipl_http_resp_error(resp, 400, "invalid_request_error", err);
        return;
    }
    ipl_policy_snap_t *snap = ipl_policy_view_get(self->policy);
    uint64_t bs = decider_http_block_size(snap ? snap->policy : NULL, r.model);
    if (decider_http_hash(&r, self->tok, bs) != IPL_OK) {
        ipl_policy_view_release(self->policy, &snap);
        decider_http_request_clear(&r);
        ipl_http_resp_error(resp, 500, "server_error", "out of memory");
        return;
    }
    decider_decision_t d;
    decider_decision_init(&d);
    s_decide(self, snap, &r.req, &d);
    uint64_t prompt_tokens =
        r.req.prompt_tokens ? r.req.prompt_tokens : (uint64_t)r.req.nhashes * bs;
    char *json = decider_http_render(&d, prompt_tokens);
    int status = decider_http_status(d.status);
    decider_decision_clear(&d);
    ipl_policy_view_release(self->policy, &snap);
    decider_http_request_clear(&r);
    if (!json) {
        ipl_http_resp_error(resp, 500, "server_error", "out of memory");
        return;
    }
    ipl_http_resp_take(resp, status, "application/json", &json, strlen(json));
}

static const char *s_health(uint64_t h)
{
    return h == IPL_HEALTH_UP ? "up" : h == IPL_HEALTH_DOWN ? "down" : "unknown";
}

static const char *s_kv_state(uint64_t k)
{
    return k == IPL_KV_EXACT ? "exact" : k == IPL_KV_SYNCING ? "syncing" : "degraded";
}

static void s_debug_state(void *arg, const ipl_http_req_t *hreq, ipl_http_resp_t *resp)
{
    (void)hreq;
    decider_server_t *self = arg;
    decider_sync_stats_t st;
    decider_sync_stats(self->sync, &st);
    cJSON *root = cJSON_CreateObject();
    cJSON_AddBoolToObject(root, "synced", st.synced);
    cJSON_AddBoolToObject(root, "resyncing", st.synced && st.syncing);
    cJSON_AddNumberToObject(root, "state_seq", (double)st.seq);
    cJSON_AddNumberToObject(root, "lag_ms", (double)s_age_ms(&st));
    char hex[24];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)st.incarnation);
    cJSON_AddStringToObject(root, "incarnation", hex);
    cJSON *src = cJSON_AddObjectToObject(root, "source");
    cJSON_AddNumberToObject(src, "index", (double)st.source);
    cJSON_AddStringToObject(src, "state_sub", self->subs[st.source]);
    cJSON_AddStringToObject(src, "state_snapshot", self->snaps[st.source]);
    cJSON_AddBoolToObject(src, "connected", self->sub_connected);
    cJSON_AddNumberToObject(src, "switches", (double)st.switches);
    cJSON_AddNumberToObject(root, "snapshots", (double)st.snapshots);
    cJSON_AddNumberToObject(root, "deltas", (double)st.deltas);
    cJSON_AddNumberToObject(root, "buffered", (double)st.buffered);
    cJSON_AddNumberToObject(root, "apply_errors", (double)st.apply_errors);
    cJSON *rs = cJSON_AddObjectToObject(root, "resyncs");
    for (int r = 1; r < DECIDER_RESYNC_NREASONS; r++)
        cJSON_AddNumberToObject(rs, decider_sync_reason_name(r), (double)st.resyncs[r]);
    cJSON_AddNumberToObject(root, "policy_version", (double)ipl_policy_view_version(self->policy));
    decider_peers_stats_t ps;
    decider_peers_stats(self->peers, &ps);
    cJSON *peers = cJSON_AddObjectToObject(root, "peers");
    cJSON_AddStringToObject(peers, "id", self->id);
    cJSON_AddStringToObject(peers, "peer_pub", self->config.peer_pub ? self->config.peer_pub : "");
    cJSON *eps = cJSON_AddArrayToObject(peers, "peers");
    for (size_t i = 0; i < self->npeers; i++)
        cJSON_AddItemToArray(eps, cJSON_CreateString(self->peer_eps[i]));
    cJSON_AddNumberToObject(peers, "sent", (double)ps.sent);
    cJSON_AddNumberToObject(peers, "send_failed", (double)ps.send_failed);
    cJSON_AddNumberToObject(peers, "received", (double)ps.received);
    cJSON_AddNumberToObject(peers, "own", (double)ps.own);
    cJSON_AddNumberToObject(peers, "lost", (double)ps.lost);
    cJSON_AddNumberToObject(peers, "peers_heard", (double)ps.peers_seen);
    cJSON_AddNumberToObject(root, "optimistic_blocks",
                            (double)decider_router_optimistic_blocks(self->router));
    cJSON_AddNumberToObject(root, "mean_request_tokens",
                            decider_router_mean_request_tokens(self->router));
    cJSON *workers = cJSON_AddArrayToObject(root, "workers");
    uint64_t now = ipl_mono_ms();
    decider_sync_rdlock(self->sync);
    const decider_state_t *state = decider_sync_state(self->sync);
    if (state) {
        const ipl_index_t *index = decider_state_index(state);
        cJSON *ix = cJSON_AddObjectToObject(root, "index");
        cJSON_AddNumberToObject(ix, "blocks", (double)ipl_index_blocks(index));
        cJSON_AddNumberToObject(ix, "memberships", (double)ipl_index_memberships(index));
        cJSON_AddNumberToObject(ix, "memory_bytes", (double)ipl_index_memory_bytes(index));
        for (int id = 0; id < ipl_index_nworkers(index); id++) {
            const decider_worker_t *w = decider_state_worker(state, id);
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "name", ipl_index_worker_name(index, id));
            cJSON_AddBoolToObject(o, "has_load", w->has_load);
            cJSON_AddStringToObject(o, "health", s_health(w->health));
            cJSON_AddStringToObject(o, "kv_state", s_kv_state(w->kv_state));
            cJSON_AddNumberToObject(o, "running", (double)w->running);
            cJSON_AddNumberToObject(o, "waiting", (double)w->waiting);
            cJSON_AddNumberToObject(o, "kv_usage", w->kv_usage);
            cJSON_AddNumberToObject(o, "blocks", (double)ipl_index_worker_blocks(index, id));
            cJSON_AddNumberToObject(o, "kv_events", (double)w->kv_events);
            cJSON_AddNumberToObject(o, "sample_ts_ms", (double)w->ts_ms);
            cJSON_AddNumberToObject(o, "age_ms",
                                    (double)(now > w->updated_ms ? now - w->updated_ms : 0));
            cJSON_AddItemToArray(workers, o);
        }
    }
    decider_sync_unlock(self->sync);
    char *json = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!json) {
        ipl_http_resp_error(resp, 500, "server_error", "out of memory");
        return;
    }
    ipl_http_resp_take(resp, 200, "application/json", &json, strlen(json));
}

void decider_server_register(decider_server_t *self, ipl_httpd_t *httpd)
{
    ipl_httpd_route(httpd, "POST", "/v1/route", s_http_route, self);
    ipl_httpd_route(httpd, "GET", "/debug/state", s_debug_state, self);
    decider_router_register_admin(self->router, httpd, self->metrics); // GET /debug/model
}
