/*
 * decider_sync — the Clone pattern's subscriber side (see the header's diagram).
 *
 * `lock` (a rwlock) guards `live` against readers; the writer is always this class on the
 * loop thread. `stats_lock` guards the counters that other threads read.
 */
#include "decider_sync.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ipl_error.h"
#include "ipl_log.h"

struct decider_sync {
    pthread_rwlock_t lock;
    decider_state_t *live;    // readers under lock
    decider_state_t *staging; // loop thread only
    bool syncing, requested;
    uint64_t last_progress_ms;
    uint64_t timeout_ms;
    uint64_t incarnation;  // of the live replica's aggregator
    uint64_t last_recv_ms; // last delta or snapshot message: liveness of the source
    size_t nsources, source;
    uint64_t silence_ms;
    ipl_msg_t *buffer; // deltas waiting for the snapshot, in arrival order
    size_t nbuffer, cap_buffer, max_buffered;
    decider_resync_reason_t last_reason;

    pthread_mutex_t stats_lock;
    decider_sync_stats_t stats;
};

static void s_clear_buffer(decider_sync_t *self)
{
    for (size_t i = 0; i < self->nbuffer; i++)
        ipl_msg_clear(&self->buffer[i]);
    self->nbuffer = 0;
}

static void s_take(ipl_msg_t *msg)
{
    ipl_msg_clear(msg);
    memset(msg, 0, sizeof *msg);
}

static uint64_t s_seq(const ipl_msg_t *msg)
{
    return msg->type == IPL_MSG_KV_EVENT ? msg->u.kv_event.seq
           : msg->type == IPL_MSG_LOAD   ? msg->u.load.seq
                                         : 0;
}

static uint64_t s_incarnation(const ipl_msg_t *msg)
{
    return msg->type == IPL_MSG_KV_EVENT ? msg->u.kv_event.incarnation
           : msg->type == IPL_MSG_LOAD   ? msg->u.load.incarnation
                                         : 0;
}

// Enters SYNCING for `reason`; the caller returns DECIDER_SYNC_RESYNC.
static int s_resync(decider_sync_t *self, decider_resync_reason_t reason)
{
    self->syncing = true;
    self->requested = false;
    self->last_reason = reason;
    decider_state_destroy(&self->staging);
    pthread_mutex_lock(&self->stats_lock);
    if (self->stats.synced) // before the first snapshot, nothing is re-synchronised
        self->stats.resyncs[reason]++;
    self->stats.syncing = true;
    pthread_mutex_unlock(&self->stats_lock);
    return DECIDER_SYNC_RESYNC;
}

static void s_apply(decider_sync_t *self, decider_state_t *state, const ipl_msg_t *msg,
                    uint64_t now_ms)
{
    int rc = decider_state_apply(state, msg, now_ms);
    if (rc != IPL_OK) {
        pthread_mutex_lock(&self->stats_lock);
        self->stats.apply_errors++;
        pthread_mutex_unlock(&self->stats_lock);
        IPL_LOG_EVERY(10, IPL_LOG_WARN, "state_apply_failed", "type=%s reason=%s",
                      ipl_msg_type_name(msg->type), ipl_strerror(rc));
    }
}

decider_sync_t *decider_sync_new(size_t max_buffered, uint64_t timeout_ms)
{
    decider_sync_t *self = calloc(1, sizeof *self);
    if (!self) return NULL;
    pthread_rwlock_init(&self->lock, NULL);
    pthread_mutex_init(&self->stats_lock, NULL);
    self->max_buffered = max_buffered ? max_buffered : 1;
    self->timeout_ms = timeout_ms;
    self->syncing = true; // nothing yet: the first tick asks for a snapshot
    self->last_reason = DECIDER_RESYNC_START;
    self->nsources = 1;
    return self;
}

void decider_sync_destroy(decider_sync_t **self_p)
{
    if (!self_p || !*self_p) return;
    decider_sync_t *self = *self_p;
    s_clear_buffer(self);
    free(self->buffer);
    decider_state_destroy(&self->live);
    decider_state_destroy(&self->staging);
    pthread_rwlock_destroy(&self->lock);
    pthread_mutex_destroy(&self->stats_lock);
    free(self);
    *self_p = NULL;
}

void decider_sync_requested(decider_sync_t *self, uint64_t now_ms)
{
    decider_state_destroy(&self->staging);
    self->staging = decider_state_new();
    self->syncing = true;
    self->requested = true;
    self->last_progress_ms = now_ms;
    pthread_mutex_lock(&self->stats_lock);
    self->stats.syncing = true;
    pthread_mutex_unlock(&self->stats_lock);
}

int decider_sync_delta(decider_sync_t *self, ipl_msg_t *msg, uint64_t now_ms)
{
    uint64_t seq = s_seq(msg);
    int rc = DECIDER_SYNC_OK;
    self->last_recv_ms = now_ms;
    pthread_mutex_lock(&self->stats_lock);
    self->stats.last_delta_ms = now_ms;
    pthread_mutex_unlock(&self->stats_lock);
    if (!self->syncing && s_incarnation(msg) != self->incarnation) {
        // A restarted aggregator: its seq says nothing about ours. Keep the delta: it may
        // continue the snapshot we ask the new incarnation for.
        IPL_WARN("state_resync", "reason=incarnation have=%016llx got=%016llx seq=%llu",
                 (unsigned long long)self->incarnation, (unsigned long long)s_incarnation(msg),
                 (unsigned long long)seq);
        rc = s_resync(self, DECIDER_RESYNC_INCARNATION);
    } else if (!self->syncing) {
        uint64_t have = decider_state_seq(self->live);
        if (seq == have + 1) {
            pthread_rwlock_wrlock(&self->lock);
            s_apply(self, self->live, msg, now_ms);
            decider_state_set_seq(self->live, seq);
            pthread_rwlock_unlock(&self->lock);
            pthread_mutex_lock(&self->stats_lock);
            self->stats.seq = seq;
            self->stats.deltas++;
            self->stats.last_applied_ms = now_ms;
            pthread_mutex_unlock(&self->stats_lock);
            s_take(msg);
            return DECIDER_SYNC_OK;
        }
        // PUB/SUB from one publisher never reorders or repeats: a lower seq is a new
        // aggregator, a higher one means we lost messages (HWM, reconnect).
        IPL_WARN("state_resync", "reason=%s have_seq=%llu got_seq=%llu",
                 seq > have ? "gap" : "seq_regressed", (unsigned long long)have,
                 (unsigned long long)seq);
        rc = s_resync(self, seq > have ? DECIDER_RESYNC_GAP : DECIDER_RESYNC_REGRESSED);
    }
    if (self->nbuffer >= self->max_buffered) {
        s_clear_buffer(self);
        s_take(msg);
        IPL_WARN("state_resync", "reason=overflow buffered=%zu", self->max_buffered);
        return s_resync(self, DECIDER_RESYNC_OVERFLOW);
    }
    if (self->nbuffer == self->cap_buffer) {
        size_t cap = self->cap_buffer ? self->cap_buffer * 2 : 256;
        ipl_msg_t *b = realloc(self->buffer, cap * sizeof *b);
        if (!b) {
            s_take(msg);
            s_clear_buffer(self);
            return s_resync(self, DECIDER_RESYNC_OVERFLOW);
        }
        self->buffer = b;
        self->cap_buffer = cap;
    }
    self->buffer[self->nbuffer++] = *msg; // moved: the arena now belongs to the buffer
    memset(msg, 0, sizeof *msg);
    pthread_mutex_lock(&self->stats_lock);
    self->stats.buffered = self->nbuffer;
    pthread_mutex_unlock(&self->stats_lock);
    return rc;
}

// SNAPSHOT_END: staging + buffered deltas with seq > end become the live replica. Buffered
// deltas of another incarnation before the snapshot's own are from the aggregator's previous
// life (dropped); after them, from its next life (start over).
static int s_finish(decider_sync_t *self, const ipl_snapshot_end_t *end, uint64_t now_ms)
{
    decider_state_t *next = self->staging;
    self->staging = NULL;
    decider_state_set_seq(next, end->seq);
    uint64_t expect = end->seq + 1;
    size_t applied = 0;
    bool gap = false, same_seen = false;
    decider_resync_reason_t why = DECIDER_RESYNC_GAP;
    for (size_t i = 0; i < self->nbuffer && !gap; i++) {
        uint64_t seq = s_seq(&self->buffer[i]);
        if (s_incarnation(&self->buffer[i]) != end->incarnation) {
            if (!same_seen) continue; // the previous life
            gap = true;
            why = DECIDER_RESYNC_INCARNATION;
            break;
        }
        same_seen = true;
        if (seq < expect && applied == 0) continue; // already in the snapshot
        if (seq != expect) {
            gap = true;
            break;
        }
        s_apply(self, next, &self->buffer[i], now_ms);
        decider_state_set_seq(next, seq);
        expect++;
        applied++;
    }
    s_clear_buffer(self);
    if (gap) {
        // The deltas we hold do not continue this snapshot (we lost some while it was being
        // built): start over. The buffer restarts empty with the next delta.
        decider_state_destroy(&next);
        IPL_WARN("state_resync", "reason=%s snapshot_seq=%llu", decider_sync_reason_name(why),
                 (unsigned long long)end->seq);
        return s_resync(self, why);
    }
    pthread_rwlock_wrlock(&self->lock);
    decider_state_t *old = self->live;
    self->live = next;
    pthread_rwlock_unlock(&self->lock);
    decider_state_destroy(&old);
    self->syncing = false;
    self->requested = false;
    self->incarnation = end->incarnation;
    self->last_recv_ms = now_ms;
    uint64_t seq = decider_state_seq(next);
    pthread_mutex_lock(&self->stats_lock);
    self->stats.synced = true;
    self->stats.syncing = false;
    self->stats.snapshots++;
    self->stats.deltas += applied;
    self->stats.seq = seq;
    self->stats.buffered = 0;
    self->stats.incarnation = end->incarnation;
    self->stats.last_delta_ms = now_ms;
    self->stats.last_applied_ms = now_ms;
    pthread_mutex_unlock(&self->stats_lock);
    IPL_INFO("state_synced",
             "source=%zu incarnation=%016llx snapshot_seq=%llu seq=%llu buffered_applied=%zu "
             "workers=%d",
             self->source, (unsigned long long)end->incarnation, (unsigned long long)end->seq,
             (unsigned long long)seq, applied, ipl_index_nworkers(decider_state_index(next)));
    return DECIDER_SYNC_OK;
}

int decider_sync_snapshot(decider_sync_t *self, ipl_msg_t *msg, uint64_t now_ms)
{
    int rc = DECIDER_SYNC_OK;
    if (!self->syncing || !self->requested || !self->staging) {
        pthread_mutex_lock(&self->stats_lock);
        self->stats.stray++;
        pthread_mutex_unlock(&self->stats_lock);
    } else if (msg->type == IPL_MSG_SNAPSHOT_END) {
        rc = s_finish(self, &msg->u.snapshot_end, now_ms);
    } else {
        self->last_progress_ms = now_ms;
        s_apply(self, self->staging, msg, now_ms);
    }
    s_take(msg);
    return rc;
}

int decider_sync_reset(decider_sync_t *self, decider_resync_reason_t reason)
{
    s_clear_buffer(self);
    pthread_mutex_lock(&self->stats_lock);
    self->stats.buffered = 0;
    pthread_mutex_unlock(&self->stats_lock);
    return s_resync(self, reason);
}

// Moves to the next source and resyncs from it.
static int s_switch(decider_sync_t *self, decider_resync_reason_t reason)
{
    s_clear_buffer(self);
    size_t from = self->source;
    self->source = (self->source + 1) % self->nsources;
    IPL_WARN("state_source_failed", "reason=%s source=%zu next=%zu",
             decider_sync_reason_name(reason), from, self->source);
    pthread_mutex_lock(&self->stats_lock);
    self->stats.buffered = 0;
    self->stats.source = self->source;
    if (self->source != from) self->stats.switches++;
    pthread_mutex_unlock(&self->stats_lock);
    s_resync(self, reason);
    return DECIDER_SYNC_SWITCH;
}

int decider_sync_tick(decider_sync_t *self, uint64_t now_ms)
{
    if (!self->syncing) {
        // Silence counts only when heartbeats are due: an aggregator publishes one per
        // worker, so with no worker known a quiet stream proves nothing.
        if (self->silence_ms && now_ms > self->last_recv_ms &&
            now_ms - self->last_recv_ms >= self->silence_ms &&
            ipl_index_nworkers(decider_state_index(self->live)) > 0)
            return s_switch(self, DECIDER_RESYNC_SILENT);
        return DECIDER_SYNC_OK;
    }
    if (!self->requested) // the first snapshot, or a resync whose request could not be sent
        return DECIDER_SYNC_RESYNC;
    if (now_ms - self->last_progress_ms >= self->timeout_ms) {
        IPL_LOG_EVERY(10, IPL_LOG_WARN, "state_resync", "reason=timeout waited_ms=%llu",
                      (unsigned long long)(now_ms - self->last_progress_ms));
        if (self->nsources > 1) return s_switch(self, DECIDER_RESYNC_TIMEOUT);
        return s_resync(self, DECIDER_RESYNC_TIMEOUT);
    }
    return DECIDER_SYNC_OK;
}

void decider_sync_set_sources(decider_sync_t *self, size_t nsources, uint64_t silence_ms)
{
    self->nsources = nsources ? nsources : 1;
    self->source = 0;
    self->silence_ms = silence_ms;
    pthread_mutex_lock(&self->stats_lock);
    self->stats.source = 0;
    pthread_mutex_unlock(&self->stats_lock);
}

size_t decider_sync_source(const decider_sync_t *self)
{
    return self->source;
}

int decider_sync_fail(decider_sync_t *self, decider_resync_reason_t reason)
{
    return s_switch(self, reason);
}

const char *decider_sync_reason_name(decider_resync_reason_t reason)
{
    static const char *names[DECIDER_RESYNC_NREASONS] = {"start",       "gap",     "seq_regressed",
                                                         "overflow",    "timeout", "reconnect",
                                                         "incarnation", "silent",  "disconnected"};
    return reason < DECIDER_RESYNC_NREASONS ? names[reason] : "unknown";
}

decider_resync_reason_t decider_sync_last_reason(const decider_sync_t *self)
{
    return self->last_reason;
}

void decider_sync_rdlock(decider_sync_t *self)
{
    pthread_rwlock_rdlock(&self->lock);
}

const decider_state_t *decider_sync_state(const decider_sync_t *self)
{
    return self->live;
}

void decider_sync_unlock(decider_sync_t *self)
{
    pthread_rwlock_unlock(&self->lock);
}

void decider_sync_stats(decider_sync_t *self, decider_sync_stats_t *out)
{
    pthread_mutex_lock(&self->stats_lock);
    *out = self->stats;
    pthread_mutex_unlock(&self->stats_lock);
}
