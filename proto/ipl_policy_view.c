/*
 * ipl_policy_view — the compiled policy, kept current by a background actor.
 *
 *     policy service PUB ──► SUB ─┐
 *                                 ├─► actor thread ──decode──► new snap ──(mutex)──► self->current
 *     policy service ROUTER ◄─► DEALER (POLICY_REQ at start, and after SILENCE_MS of silence)
 *
 *     readers: ipl_policy_view_get() ──(mutex, refs++)──► snap … ipl_policy_view_release()
 *
 * A snapshot is immutable once published; the mutex guards only `current` and the reference
 * counts, so a reader holds it for a few instructions, never during a decode.
 *
 * A policy replaces the current one only when its version is higher: the service's versions
 * increase on every change (and survive its restarts, see services/policy), so an old
 * publication that arrives late, or a duplicate from the periodic republish, is ignored.
 */
#include "ipl_policy_view.h"
#include "ipl_zmq.h"

#include <czmq.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "ipl_clock.h"
#include "ipl_curve.h"
#include "ipl_error.h"
#include "ipl_log.h"

#define S_ASK_FIRST_MS 250  // ask this often until a first policy arrives
#define S_SILENCE_MS   5000 // then ask again when nothing was heard for this long

struct ipl_policy_view {
    zactor_t *actor;
    char *sub_endpoint; // NULL: none
    char *req_endpoint; // NULL: none
    pthread_mutex_t lock;
    ipl_policy_snap_t *current; // guarded by lock; holds one reference
    _Atomic uint64_t version;
    _Atomic uint64_t dropped;
    ipl_policy_view_attach_fn *attach; // NULL: none
    ipl_policy_view_detach_fn *detach;
    void *hook_arg;
};

static void s_snap_unref(ipl_policy_view_t *self, ipl_policy_snap_t *snap)
{
    pthread_mutex_lock(&self->lock);
    int refs = --snap->refs;
    pthread_mutex_unlock(&self->lock);
    if (refs == 0) {
        if (snap->attached && self->detach) self->detach(self->hook_arg, snap->attached);
        ipl_msg_clear(&snap->msg);
        free(snap);
    }
}

// Installs `snap` (which comes with one reference, now owned by the view) when it is newer.
static void s_offer(ipl_policy_view_t *self, ipl_policy_snap_t *snap)
{
    ipl_policy_snap_t *old = NULL;
    bool taken = false;
    // Only this thread installs snapshots, so a version older than the current one stays
    // older while the hook runs (outside the lock: readers are not held up by it).
    if (self->attach && snap->policy->version > atomic_load(&self->version))
        snap->attached = self->attach(self->hook_arg, snap->policy);
    pthread_mutex_lock(&self->lock);
    uint64_t have = self->current ? self->current->policy->version : 0;
    if (snap->policy->version > have) {
        old = self->current;
        self->current = snap;
        atomic_store(&self->version, snap->policy->version);
        taken = true;
    }
    pthread_mutex_unlock(&self->lock);
    if (taken) {
        IPL_INFO("policy_received", "version=%llu hash=%016llx pools=%u workers=%u",
                 (unsigned long long)snap->policy->version,
                 (unsigned long long)snap->policy->hash, snap->policy->pools_len,
                 snap->policy->workers_len);
        if (old) s_snap_unref(self, old);
    } else {
        s_snap_unref(self, snap);
    }
}

// Receives one message (all its frames) from `sock` and offers it if it is a POLICY.
// Returns true when a well-formed message arrived (anything that proves the service is alive).
static bool s_receive(ipl_policy_view_t *self, zsock_t *sock, const char *from)
{
    void *raw = zsock_resolve(sock);
    zmq_msg_t frame;
    int kept;
    size_t parts = ipl_zmq_recv_parts(raw, &frame, 1, &kept);
    if (parts == 0) {
        ipl_zmq_close_parts(&frame, kept);
        return false;
    }
    int rc = parts > 1 ? IPL_E_TRAILING : IPL_OK; // we never send multi-frame messages
    ipl_policy_snap_t *snap = NULL;
    if (rc == IPL_OK) {
        snap = calloc(1, sizeof *snap);
        if (!snap)
            rc = IPL_E_NOMEM;
        else
            rc = ipl_msg_decode(zmq_msg_data(&frame), zmq_msg_size(&frame), &snap->msg);
        if (rc == IPL_OK && snap->msg.type != IPL_MSG_POLICY) {
            ipl_msg_clear(&snap->msg);
            rc = IPL_E_UNKNOWN;
        }
    }
    ipl_zmq_close_parts(&frame, kept);
    if (rc != IPL_OK) {
        free(snap);
        atomic_fetch_add(&self->dropped, 1);
        IPL_LOG_EVERY(10, IPL_LOG_WARN, "policy_frame_dropped", "from=%s reason=%s", from,
                      ipl_strerror(rc));
        return false;
    }
    snap->policy = &snap->msg.u.policy;
    snap->refs = 1;
    s_offer(self, snap);
    return true;
}

static void s_ask(ipl_policy_view_t *self, zsock_t *dealer)
{
    ipl_policy_req_t req = {.have_version = atomic_load(&self->version)};
    int rc = ipl_msg_send(zsock_resolve(dealer), IPL_MSG_POLICY_REQ, &req, ZMQ_DONTWAIT);
    if (rc != IPL_OK && rc != IPL_E_AGAIN)
        IPL_LOG_EVERY(10, IPL_LOG_WARN, "policy_req_failed", "reason=%s", ipl_strerror(rc));
}

static void s_actor(zsock_t *pipe, void *arg)
{
    ipl_policy_view_t *self = arg;
    zsock_t *sub = NULL, *dealer = NULL;
    if (self->sub_endpoint) {
        sub = zsock_new(ZMQ_SUB);
        if (sub) {
            zsock_set_linger(sub, 0);
            zsock_set_subscribe(sub, "");
            ipl_curve_client(sub); // CURVE with --curve-dir (ipl_curve.h)
            if (zsock_connect(sub, "%s", self->sub_endpoint) != 0) {
                IPL_ERROR("policy_sub_connect_failed", "endpoint=%s", self->sub_endpoint);
                zsock_destroy(&sub);
            }
        }
    }
    if (self->req_endpoint) {
        dealer = zsock_new(ZMQ_DEALER);
        if (dealer) {
            zsock_set_linger(dealer, 0);
            zsock_set_sndhwm(dealer, 4); // a few outstanding asks are plenty
            ipl_curve_client(dealer); // CURVE with --curve-dir (ipl_curve.h)
            if (zsock_connect(dealer, "%s", self->req_endpoint) != 0) {
                IPL_ERROR("policy_req_connect_failed", "endpoint=%s", self->req_endpoint);
                zsock_destroy(&dealer);
            }
        }
    }
    zpoller_t *poller = zpoller_new(pipe, NULL);
    if (sub) zpoller_add(poller, sub);
    if (dealer) zpoller_add(poller, dealer);
    zsock_signal(pipe, 0);

    uint64_t last_heard = ipl_mono_ms(), last_ask = 0;
    while (true) {
        if (dealer) {
            uint64_t now = ipl_mono_ms();
            bool have = atomic_load(&self->version) != 0;
            if ((!have && now - last_ask >= S_ASK_FIRST_MS) ||
                (have && now - last_heard >= S_SILENCE_MS && now - last_ask >= S_SILENCE_MS)) {
                s_ask(self, dealer);
                last_ask = now;
            }
        }
        zsock_t *which = zpoller_wait(poller, S_ASK_FIRST_MS);
        if (which == pipe) {
            zmsg_t *cmd = zmsg_recv(pipe);
            char *verb = cmd ? zmsg_popstr(cmd) : NULL;
            bool term = !verb || streq(verb, "$TERM");
            free(verb);
            zmsg_destroy(&cmd);
            if (term) break;
        } else if (which) {
            // Drain what is queued so a burst costs one wake-up.
            for (int i = 0; i < 64 && (zsock_events(which) & ZMQ_POLLIN); i++)
                if (s_receive(self, which, which == sub ? "sub" : "dealer"))
                    last_heard = ipl_mono_ms();
        }
    }
    zpoller_destroy(&poller);
    zsock_destroy(&sub);
    zsock_destroy(&dealer);
}

static char *s_endpoint_dup(const char *endpoint)
{
    return endpoint && *endpoint ? strdup(endpoint) : NULL;
}

ipl_policy_view_t *ipl_policy_view_new(const char *sub_endpoint, const char *req_endpoint)
{
    return ipl_policy_view_new_attached(sub_endpoint, req_endpoint, NULL, NULL, NULL);
}

ipl_policy_view_t *ipl_policy_view_new_attached(const char *sub_endpoint, const char *req_endpoint,
                                                ipl_policy_view_attach_fn *attach,
                                                ipl_policy_view_detach_fn *detach, void *arg)
{
    if (!attach != !detach) return NULL;
    ipl_policy_view_t *self = calloc(1, sizeof *self);
    if (!self) return NULL;
    self->attach = attach;
    self->detach = detach;
    self->hook_arg = arg;
    pthread_mutex_init(&self->lock, NULL);
    self->sub_endpoint = s_endpoint_dup(sub_endpoint);
    self->req_endpoint = s_endpoint_dup(req_endpoint);
    self->actor = zactor_new(s_actor, self);
    if (!self->actor) {
        ipl_policy_view_destroy(&self);
        return NULL;
    }
    return self;
}

void ipl_policy_view_destroy(ipl_policy_view_t **self_p)
{
    if (!self_p || !*self_p) return;
    ipl_policy_view_t *self = *self_p;
    zactor_destroy(&self->actor); // joins the thread: nothing offers snapshots after this
    if (self->current) s_snap_unref(self, self->current);
    self->current = NULL;
    pthread_mutex_destroy(&self->lock);
    free(self->sub_endpoint);
    free(self->req_endpoint);
    free(self);
    *self_p = NULL;
}

ipl_policy_snap_t *ipl_policy_view_get(ipl_policy_view_t *self)
{
    pthread_mutex_lock(&self->lock);
    ipl_policy_snap_t *snap = self->current;
    if (snap) snap->refs++;
    pthread_mutex_unlock(&self->lock);
    return snap;
}

void ipl_policy_view_release(ipl_policy_view_t *self, ipl_policy_snap_t **snap_p)
{
    if (!snap_p || !*snap_p) return;
    s_snap_unref(self, *snap_p);
    *snap_p = NULL;
}

uint64_t ipl_policy_view_version(ipl_policy_view_t *self)
{
    return atomic_load(&self->version);
}

uint64_t ipl_policy_view_dropped(ipl_policy_view_t *self)
{
    return atomic_load(&self->dropped);
}
