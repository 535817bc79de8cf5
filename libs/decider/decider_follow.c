/*
 * decider_follow — the cluster state's following (see the header's diagram).
 */
#include "decider_follow.h"

#include <czmq.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipl_clock.h"
#include "ipl_curve.h"
#include "ipl_error.h"
#include "ipl_log.h"
#include "ipl_zmq.h"

#define S_SETTLE_MS       100 // after the SUB connects, for its subscription to arrive
#define S_MAX_STATE_FRAME IPL_PROTO_MAX_FRAME

struct decider_follow {
    const char *const *subs, *const *snaps; // borrowed (decider_follow_config_t)
    size_t nsources;
    uint64_t snapshot_timeout_ms;
    decider_follow_drop_fn *on_drop;
    void *drop_arg;
    decider_sync_t *sync;
    zsock_t *sub, *dealer;
    zsock_t *sub_monitor;    // PAIR receiving the SUB's connect events
    bool sub_connected;      // the SUB is connected now
    bool sub_ever_connected; // a connect after this one is a reconnect
    uint64_t follow_ms;      // monotonic time the SUB was created
    uint64_t connected_ms;   // monotonic time it last connected
    // quiet[k]: socket k was left by a receive that found nothing (decider_follow_socket).
    // Cleared whenever a socket is replaced.
    bool quiet[DECIDER_FOLLOW_NSOCKETS];
};

static void s_drop(decider_follow_t *self, const char *socket, const char *reason)
{
    if (self->on_drop) self->on_drop(self->drop_arg, socket, reason);
}

// Receives one state message (a single frame) from `sock`; decodes it into `msg`.
// Returns 1 with a message, 0 when nothing is waiting, -1 for a dropped frame.
static int s_recv_state(decider_follow_t *self, zsock_t *sock, const char *name, ipl_msg_t *msg)
{
    zmq_msg_t frame;
    int kept;
    size_t n = ipl_zmq_recv_parts(zsock_resolve(sock), &frame, 1, &kept);
    self->quiet[sock == self->sub ? DECIDER_FOLLOW_SUB : DECIDER_FOLLOW_DEALER] =
        n == 0 && zmq_errno() == EAGAIN;
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

static void s_request_snapshot(decider_follow_t *self)
{
    const char *endpoint = self->snaps[decider_sync_source(self->sync)];
    zsock_destroy(&self->dealer);
    self->quiet[DECIDER_FOLLOW_DEALER] = false;
    self->dealer = zsock_new(ZMQ_DEALER);
    if (!self->dealer) return;
    zsock_set_linger(self->dealer, 0);
    zsock_set_maxmsgsize(self->dealer, S_MAX_STATE_FRAME);
    zsock_set_rcvhwm(self->dealer, 0); // a snapshot is as long as the state: never drop a part
    ipl_curve_client(self->dealer); // CURVE with --curve-dir (ipl_curve.h)
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

static void s_on_sync(decider_follow_t *self, int rc);

/* (Re)creates the state SUB, connected to the aggregator decider_sync follows. 0 or -1. */
static int s_follow(decider_follow_t *self)
{
    size_t source = decider_sync_source(self->sync);
    if (self->sub && self->sub_monitor) zmq_socket_monitor(zsock_resolve(self->sub), NULL, 0);
    zsock_destroy(&self->sub_monitor);
    zsock_destroy(&self->sub);
    zsock_destroy(&self->dealer);
    self->sub_connected = self->sub_ever_connected = false;
    self->quiet[DECIDER_FOLLOW_SUB] = self->quiet[DECIDER_FOLLOW_MONITOR] =
        self->quiet[DECIDER_FOLLOW_DEALER] = false;
    self->follow_ms = ipl_mono_ms();
    self->sub = zsock_new(ZMQ_SUB);
    if (!self->sub) return -1;
    zsock_set_linger(self->sub, 0);
    zsock_set_maxmsgsize(self->sub, S_MAX_STATE_FRAME);
    zsock_set_rcvhwm(self->sub, 1000000); // a gap costs a full resync: buffer generously
    ipl_curve_client(self->sub); // CURVE with --curve-dir (ipl_curve.h)
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
static void s_want_snapshot(decider_follow_t *self)
{
    uint64_t now = ipl_mono_ms();
    if (!self->sub) { // could not be created: try again
        if (s_follow(self) != 0) return;
    }
    if (!self->sub_connected) {
        zsock_destroy(&self->dealer); // whatever it still receives belongs to no request
        if (now - self->follow_ms < self->snapshot_timeout_ms) return;
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
static void s_on_sync(decider_follow_t *self, int rc)
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
static void s_drain_monitor(decider_follow_t *self)
{
    void *raw = zsock_resolve(self->sub_monitor);
    for (int budget = 100; budget > 0 && self->sub_monitor; budget--) {
        zmq_msg_t event, addr;
        zmq_msg_init(&event);
        if (zmq_msg_recv(&event, raw, ZMQ_DONTWAIT) < 0) {
            self->quiet[DECIDER_FOLLOW_MONITOR] = zmq_errno() == EAGAIN;
            zmq_msg_close(&event);
            return;
        }
        self->quiet[DECIDER_FOLLOW_MONITOR] = false;
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

static void s_drain_state(decider_follow_t *self, zsock_t *sock, const char *name, bool snapshot)
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

decider_follow_t *decider_follow_new(const decider_follow_config_t *config)
{
    decider_follow_t *self = calloc(1, sizeof *self);
    if (!self) return NULL;
    self->subs = config->subs;
    self->snaps = config->snaps;
    self->nsources = config->nsources;
    self->snapshot_timeout_ms = config->snapshot_timeout_ms;
    self->on_drop = config->on_drop;
    self->drop_arg = config->drop_arg;
    self->sync = decider_sync_new(config->max_buffered, config->snapshot_timeout_ms);
    if (!self->sync) {
        decider_follow_destroy(&self);
        return NULL;
    }
    decider_sync_set_sources(self->sync, self->nsources, config->silence_ms);
    return self;
}

void decider_follow_destroy(decider_follow_t **self_p)
{
    if (!self_p || !*self_p) return;
    decider_follow_t *self = *self_p;
    if (self->sub && self->sub_monitor) zmq_socket_monitor(zsock_resolve(self->sub), NULL, 0);
    zsock_destroy(&self->sub_monitor);
    zsock_destroy(&self->sub);
    zsock_destroy(&self->dealer);
    decider_sync_destroy(&self->sync);
    free(self);
    *self_p = NULL;
}

int decider_follow_start(decider_follow_t *self)
{
    return s_follow(self);
}

decider_sync_t *decider_follow_sync(decider_follow_t *self)
{
    return self->sync;
}

void decider_follow_tick(decider_follow_t *self)
{
    s_on_sync(self, decider_sync_tick(self->sync, ipl_mono_ms()));
}

void *decider_follow_socket(const decider_follow_t *self, int which, bool *quiet)
{
    zsock_t *sock = which == DECIDER_FOLLOW_SUB       ? self->sub
                    : which == DECIDER_FOLLOW_MONITOR ? self->sub_monitor
                    : which == DECIDER_FOLLOW_DEALER  ? self->dealer
                                                      : NULL;
    *quiet = sock && self->quiet[which];
    return sock ? zsock_resolve(sock) : NULL;
}

void decider_follow_serve(decider_follow_t *self, const bool ready[DECIDER_FOLLOW_NSOCKETS])
{
    // The state sockets may be replaced by any of these steps: look them up again.
    if (ready[DECIDER_FOLLOW_MONITOR] && self->sub_monitor) s_drain_monitor(self);
    if (ready[DECIDER_FOLLOW_SUB] && self->sub) s_drain_state(self, self->sub, "state_sub", false);
    // A quiet DEALER is the one polled (replacing it clears `quiet`); a new one is asked.
    if (self->dealer &&
        (self->quiet[DECIDER_FOLLOW_DEALER] ? ready[DECIDER_FOLLOW_DEALER]
                                            : (zsock_events(self->dealer) & ZMQ_POLLIN)))
        s_drain_state(self, self->dealer, "state_snapshot", true);
}

bool decider_follow_connected(const decider_follow_t *self)
{
    return self->sub_connected;
}

// Age of the newest state the replica applied: its lag behind the aggregator.
uint64_t decider_follow_lag_ms(const decider_sync_stats_t *st)
{
    uint64_t now = ipl_mono_ms();
    return st->last_applied_ms && now > st->last_applied_ms ? now - st->last_applied_ms : 0;
}
