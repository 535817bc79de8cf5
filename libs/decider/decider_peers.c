/*
 * decider_peers — ROUTED out on a PUB, in from a SUB, into the ledger (see the header).
 *
 * `pub_lock` serialises the PUB socket between the threads that decide (libzmq sockets are
 * not thread-safe; a mutex gives the full barrier a socket needs to move between threads).
 * `stats_lock` guards the counters.
 */
#include "decider_peers.h"

#include <czmq.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decider_ledger.h"
#include "ipl_clock.h"
#include "ipl_curve.h"
#include "ipl_error.h"
#include "ipl_log.h"
#include "ipl_zmq.h"

#define S_MAX_FRAME (1u << 20) // a ROUTED is at most ~8 KB of hashes plus names

typedef struct {
    char *id;
    uint64_t last_seq;
} s_peer_seq_t;

struct decider_peers {
    char *id;
    zsock_t *pub, *sub;
    pthread_mutex_t pub_lock;
    uint64_t seq; // of the last ROUTED sent, under pub_lock
    s_peer_seq_t seen[DECIDER_PEERS_MAX];
    size_t nseen;
    decider_peers_drop_fn *on_drop;
    void *drop_arg;
    decider_ledger_t *ledger; // borrowed

    pthread_mutex_t stats_lock;
    decider_peers_stats_t stats;
};

static void s_count(decider_peers_t *self, uint64_t *counter, uint64_t n)
{
    pthread_mutex_lock(&self->stats_lock);
    *counter += n;
    pthread_mutex_unlock(&self->stats_lock);
}

static void s_drop(decider_peers_t *self, const char *reason)
{
    if (self->on_drop) self->on_drop(self->drop_arg, reason);
}

decider_peers_t *decider_peers_new(const decider_peers_config_t *config, char *err, size_t errlen)
{
    if (config->npeers && !config->ledger) {
        snprintf(err, errlen, "--peers given but no ledger to apply their routings to");
        return NULL;
    }
    decider_peers_t *self = calloc(1, sizeof *self);
    if (!self || !(self->id = strdup(config->id ? config->id : ""))) {
        free(self);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&self->pub_lock, NULL);
    pthread_mutex_init(&self->stats_lock, NULL);
    self->on_drop = config->on_drop;
    self->drop_arg = config->drop_arg;
    self->ledger = config->ledger;
    if (config->pub && *config->pub) {
        self->pub = zsock_new(ZMQ_PUB);
        if (!self->pub) {
            snprintf(err, errlen, "out of memory");
            decider_peers_destroy(&self);
            return NULL;
        }
        zsock_set_linger(self->pub, 0);
        zsock_set_sndhwm(self->pub, 100000);
        ipl_curve_server(self->pub); /* CURVE with --curve-dir (ipl_curve.h) */
        if (ipl_zmq_bind(zsock_resolve(self->pub), config->pub, "--peer-pub", NULL,
                         "use a free tcp://host:port", err, errlen) != 0) {
            decider_peers_destroy(&self);
            return NULL;
        }
    }
    if (config->npeers) {
        self->sub = zsock_new(ZMQ_SUB);
        if (!self->sub) {
            snprintf(err, errlen, "out of memory");
            decider_peers_destroy(&self);
            return NULL;
        }
        zsock_set_linger(self->sub, 0);
        zsock_set_maxmsgsize(self->sub, S_MAX_FRAME);
        zsock_set_rcvhwm(self->sub, 100000);
        zsock_set_subscribe(self->sub, "");
        ipl_curve_client(self->sub); /* CURVE with --curve-dir (ipl_curve.h) */
        for (size_t i = 0; i < config->npeers; i++)
            if (zsock_connect(self->sub, "%s", config->peers[i]) != 0) {
                snprintf(err, errlen,
                         "cannot connect --peers endpoint \"%s\"; use tcp://host:port of another "
                         "decider's --peer-pub",
                         config->peers[i]);
                decider_peers_destroy(&self);
                return NULL;
            }
    }
    return self;
}

void decider_peers_destroy(decider_peers_t **self_p)
{
    if (!self_p || !*self_p) return;
    decider_peers_t *self = *self_p;
    zsock_destroy(&self->pub);
    zsock_destroy(&self->sub);
    for (size_t i = 0; i < self->nseen; i++)
        free(self->seen[i].id);
    pthread_mutex_destroy(&self->pub_lock);
    pthread_mutex_destroy(&self->stats_lock);
    free(self->id);
    free(self);
    *self_p = NULL;
}

void *decider_peers_socket(decider_peers_t *self)
{
    return self->sub ? zsock_resolve(self->sub) : NULL;
}

const char *decider_peers_id(const decider_peers_t *self)
{
    return self->id;
}

int decider_peers_publish(decider_peers_t *self, const char *worker, const uint64_t *hashes,
                          size_t nhashes, uint64_t block_size, uint64_t prompt_tokens,
                          uint64_t uncached_tokens, uint64_t wall_ms)
{
    if (!self->pub) return IPL_OK;
    if (!worker || !*worker) return IPL_E_INVAL;
    size_t sent_hashes = hashes ? nhashes : 0;
    if (sent_hashes > DECIDER_PEERS_MAX_HASHES) sent_hashes = DECIDER_PEERS_MAX_HASHES;
    ipl_routed_t r = {
        .decider = self->id,
        .worker = (char *)worker,
        .ts_ms = wall_ms,
        .block_size = block_size,
        .blocks = nhashes,
        .hashes = (uint64_t *)hashes,
        .hashes_len = (uint32_t)sent_hashes,
        .prompt_tokens = prompt_tokens,
        .uncached_tokens = uncached_tokens,
    };
    pthread_mutex_lock(&self->pub_lock);
    r.seq = ++self->seq;
    int rc = ipl_msg_send(zsock_resolve(self->pub), IPL_MSG_ROUTED, &r, ZMQ_DONTWAIT);
    pthread_mutex_unlock(&self->pub_lock);
    s_count(self, rc == IPL_OK ? &self->stats.sent : &self->stats.send_failed, 1);
    if (rc != IPL_OK)
        IPL_LOG_EVERY(10, IPL_LOG_WARN, "peer_publish_failed", "reason=%s", ipl_strerror(rc));
    return rc;
}

// Counts a jump in `id`'s sequence as lost messages. A sequence that goes back is a restarted
// peer: start over from it.
static void s_track(decider_peers_t *self, const char *id, uint64_t seq)
{
    for (size_t i = 0; i < self->nseen; i++) {
        if (strcmp(self->seen[i].id, id)) continue;
        if (seq > self->seen[i].last_seq + 1)
            s_count(self, &self->stats.lost, seq - self->seen[i].last_seq - 1);
        self->seen[i].last_seq = seq;
        return;
    }
    if (self->nseen == DECIDER_PEERS_MAX) return; // beyond: not tracked, still applied
    char *copy = strdup(id);
    if (!copy) return;
    self->seen[self->nseen++] = (s_peer_seq_t){copy, seq};
    s_count(self, &self->stats.peers_seen, 1);
    IPL_INFO("peer_heard", "id=%s", id);
}

int decider_peers_receive(decider_peers_t *self, const ipl_routed_t *routed, uint64_t wall_ms,
                          uint64_t mono_ms)
{
    if (!routed->worker || !*routed->worker || !routed->decider || !*routed->decider)
        return IPL_E_INVAL;
    if (!strcmp(routed->decider, self->id)) {
        s_count(self, &self->stats.own, 1);
        return 1;
    }
    s_track(self, routed->decider, routed->seq);
    decider_ledger_peer_t p = {
        .worker = routed->worker,
        .hashes = routed->hashes,
        .nhashes = routed->hashes_len,
        .uncached_tokens = routed->uncached_tokens,
        .wall_ms = routed->ts_ms,
    };
    int rc = self->ledger ? decider_ledger_post(self->ledger, &p, wall_ms, mono_ms) : IPL_OK;
    if (rc != IPL_OK) return rc;
    s_count(self, &self->stats.received, 1);
    return IPL_OK;
}

// Receives one frame; 1 with a decoded ROUTED in *msg, 0 when nothing waits, -1 dropped.
static int s_recv(decider_peers_t *self, ipl_msg_t *msg)
{
    zmq_msg_t frame;
    int kept;
    size_t n = ipl_zmq_recv_parts(zsock_resolve(self->sub), &frame, 1, &kept);
    if (n != 1) {
        ipl_zmq_close_parts(&frame, kept);
        if (n == 0) return 0;
        s_drop(self, "frames");
        return -1;
    }
    int rc = ipl_msg_decode(zmq_msg_data(&frame), zmq_msg_size(&frame), msg);
    ipl_zmq_close_parts(&frame, kept);
    if (rc != IPL_OK) {
        s_drop(self, ipl_strerror(rc));
        return -1;
    }
    if (msg->type != IPL_MSG_ROUTED) {
        ipl_msg_clear(msg);
        s_drop(self, "unexpected_type");
        return -1;
    }
    return 1;
}

void decider_peers_drain(decider_peers_t *self, int budget)
{
    if (!self->sub) return;
    for (; budget > 0; budget--) {
        ipl_msg_t msg;
        int got = s_recv(self, &msg);
        if (got == 0) return;
        if (got < 0) continue;
        int rc = decider_peers_receive(self, &msg.u.routed, ipl_wall_ms(), ipl_mono_ms());
        if (rc < 0) s_drop(self, rc == IPL_E_INVAL ? "invalid" : ipl_strerror(rc));
        ipl_msg_clear(&msg);
    }
}

void decider_peers_stats(decider_peers_t *self, decider_peers_stats_t *out)
{
    pthread_mutex_lock(&self->stats_lock);
    *out = self->stats;
    pthread_mutex_unlock(&self->stats_lock);
}
