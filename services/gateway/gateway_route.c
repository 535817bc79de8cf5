/*
 * gateway_route — decider client with a pool of DEALER sockets per decider, and the backup
 * for when none answers. See gateway_route.h.
 *
 * A socket moves between threads only through the pool mutex, which gives libzmq the full
 * memory barrier it requires for that. The mutex also guards every socket's `busy` flag and
 * OBSERVED queue: a socket with a queue is always busy (its holder sends the queue in s_give
 * before the socket goes back to the free list), so an idle socket's queue is empty. It also
 * guards each decider's health (up/down, back-off, the one probe in progress).
 */
#include "gateway_route.h"

#include <assert.h>
#include <czmq.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "decider_backup.h"
#include "ipl_clock.h"
#include "ipl_cond.h"
#include "ipl_curve.h"
#include "ipl_error.h"
#include "ipl_log.h"
#include "ipl_metrics.h"
#include "ipl_split.h"
#include "ipl_zmq.h"

#define S_POLL_SLICE_MS   50
#define S_MAX_SOCKETS     256  /* questions in flight at once per decider; more wait */
#define S_MAX_QUEUED      64   /* OBSERVED frames waiting for a busy socket */
#define S_CONNECT_WAIT_MS 250  /* a decider with no connection this long is unreachable */
#define S_BACKOFF_MIN_MS  250  /* a decider down is probed again after this, */
#define S_BACKOFF_MAX_MS  2000 /* doubling up to this */
#define S_PROBE_MS        250  /* a probe waits at most this (or its share of the timeout) */

/* From 25 µs: an embedded decider answers in ~25-35 µs, one across TCP in ~50-150 µs. */
static const double s_route_buckets[] = {0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001,
                                         0.0025,   0.005,   0.01,   0.025,   0.05,   0.1,
                                         0.25,     0.5,     1.0,    2.5,     5.0};

/* One encoded OBSERVED waiting for its socket. */
typedef struct s_out {
    struct s_out *next;
    size_t len;
    char data[];
} s_out_t;

struct s_decider;

typedef struct s_sock {
    zsock_t *sock;
    struct s_decider *decider; /* whose socket it is */
    struct s_sock *next;       /* in its decider's free list */
    struct s_sock *all_next;   /* in the list of every socket */
    uint64_t id;               /* connection id, never reused */
    bool busy;                 /* held by a thread (not in the free list) */
    s_out_t *queue, *queue_tail;
    size_t queued;
} s_sock_t;

/* One decider replica: its sockets and its health (under the route's lock). */
typedef struct s_decider {
    char *endpoint;
    s_sock_t *free_list; /* its idle sockets */
    int sockets;         /* its sockets in existence or being created */
    atomic_bool down;    /* written under the lock, read on the hot path without it */
    bool probing;        /* a question is trying it while it is down */
    const char *why;     /* down: "timeout", "unreachable", "not_ready", "io" */
    uint64_t down_ms;    /* monotonic: since when */
    uint64_t retry_ms;   /* monotonic: down, it may be probed from then on */
    uint64_t backoff_ms; /* the next back-off */
    ipl_metric_t *up;    /* inferplane_gateway_decider_up{endpoint} */
} s_decider_t;

struct gateway_route {
    char *endpoint; /* as given (the list) */
    s_decider_t deciders[GATEWAY_ROUTE_MAX_DECIDERS];
    size_t ndeciders;
    int timeout_ms;
    pthread_mutex_t lock;
    pthread_cond_t freed; /* a socket went back to a pool */
    s_sock_t *all;        /* every socket (idle or in use) */
    uint64_t last_conn;   /* the last connection id given */
    atomic_bool degraded; /* the last question went to the backup (log once per change) */
    atomic_int ndown;     /* deciders down: 0 lets questions skip the lock */
    atomic_bool answered; /* a decider has decided (OK) once: the cluster was up */
    atomic_uint_fast64_t next_id;
    atomic_uint_fast64_t turn; /* round robin over the deciders */
    atomic_bool stopping;
    decider_backup_t *backup; /* NULL: none */
    ipl_metric_t *latency, *timeouts, *stale, *malformed, *unexpected;
    ipl_metric_t *observed_sent, *observed_dropped, *failovers, *backups;
};

gateway_route_t *gateway_route_new(const char *endpoint, int timeout_ms, ipl_metrics_t *metrics)
{
    assert(endpoint && metrics);
    gateway_route_t *self = calloc(1, sizeof(*self));
    if (!self) return NULL;
    self->endpoint = strdup(endpoint);
    char *eps[GATEWAY_ROUTE_MAX_DECIDERS] = {0};
    int n = self->endpoint ? ipl_split_dup(endpoint, eps, GATEWAY_ROUTE_MAX_DECIDERS) : -1;
    if (n <= 0 || n > GATEWAY_ROUTE_MAX_DECIDERS) {
        for (int i = 0; i < GATEWAY_ROUTE_MAX_DECIDERS; i++)
            free(eps[i]);
        free(self->endpoint);
        free(self);
        return NULL;
    }
    self->ndeciders = (size_t)n;
    for (size_t i = 0; i < self->ndeciders; i++) {
        s_decider_t *d = &self->deciders[i];
        d->endpoint = eps[i];
        d->backoff_ms = S_BACKOFF_MIN_MS;
        char labels[600];
        char value[512];
        ipl_metrics_escape(value, sizeof value, d->endpoint);
        snprintf(labels, sizeof labels, "endpoint=\"%s\"", value);
        d->up = ipl_metrics_gauge(metrics, "inferplane_gateway_decider_up",
                                  "1 while the decider answers, 0 while it is down (no answer "
                                  "in time, unreachable, not ready): questions go to the next "
                                  "one, or to the gateway's backup.",
                                  labels);
        ipl_metric_set(d->up, 1);
    }
    self->timeout_ms = timeout_ms > 0 ? timeout_ms : 1000;
    pthread_mutex_init(&self->lock, NULL);
    ipl_cond_init_mono(&self->freed);
    /* Start ids at a random point so a restarted gateway is unlikely to accept a stale
     * answer meant for its previous incarnation. */
    atomic_store(&self->next_id, ((uint64_t)ipl_wall_ms() << 20) | 1);
    self->latency = ipl_metrics_histogram(
        metrics, "inferplane_gateway_route_seconds", "Time to get an answer from the decider.",
        NULL, s_route_buckets, sizeof(s_route_buckets) / sizeof(s_route_buckets[0]));
    self->timeouts =
        ipl_metrics_counter(metrics, "inferplane_gateway_route_timeouts_total",
                            "Route questions the decider did not answer in time.", NULL);
    const char *help = "Decider replies dropped, by reason.";
    const char *name = "inferplane_gateway_route_replies_dropped_total";
    self->stale = ipl_metrics_counter(metrics, name, help, "reason=\"stale\"");
    self->malformed = ipl_metrics_counter(metrics, name, help, "reason=\"malformed\"");
    self->unexpected = ipl_metrics_counter(metrics, name, help, "reason=\"unexpected_type\"");
    help = "OBSERVED messages (measured TTFTs) for the decider: sent, or dropped (connection "
           "closed, queue full, decider too far behind).";
    name = "inferplane_gateway_observations_total";
    self->observed_sent = ipl_metrics_counter(metrics, name, help, "result=\"sent\"");
    self->observed_dropped = ipl_metrics_counter(metrics, name, help, "result=\"dropped\"");
    self->failovers = ipl_metrics_counter(
        metrics, "inferplane_gateway_route_failovers_total",
        "Questions answered by another decider than the first one asked (it did not answer).",
        NULL);
    self->backups = ipl_metrics_counter(
        metrics, "inferplane_gateway_route_backup_total",
        "Questions no decider answered, decided by the gateway itself: load only, from its "
        "policy (reason \"fallback\").",
        NULL);
    return self;
}

int gateway_route_backup(gateway_route_t *self, ipl_policy_view_t *policy)
{
    assert(self && policy && !self->backup);
    self->backup = decider_backup_new(policy);
    return self->backup ? 0 : IPL_E_NOMEM;
}

static void s_free_queue(s_out_t *q)
{
    while (q) {
        s_out_t *next = q->next;
        free(q);
        q = next;
    }
}

void gateway_route_destroy(gateway_route_t **self_p)
{
    assert(self_p);
    gateway_route_t *self = *self_p;
    if (!self) return;
    while (self->all) {
        s_sock_t *s = self->all;
        self->all = s->all_next;
        s_free_queue(s->queue);
        zsock_destroy(&s->sock);
        free(s);
    }
    decider_backup_destroy(&self->backup);
    for (size_t i = 0; i < self->ndeciders; i++)
        free(self->deciders[i].endpoint);
    pthread_cond_destroy(&self->freed);
    pthread_mutex_destroy(&self->lock);
    free(self->endpoint);
    free(self);
    *self_p = NULL;
}

void gateway_route_stop(gateway_route_t *self)
{
    atomic_store(&self->stopping, true);
}

int gateway_route_pause(gateway_route_t *self, int ms)
{
    uint64_t end = ipl_mono_ms() + (uint64_t)(ms > 0 ? ms : 0);
    for (;;) {
        if (atomic_load(&self->stopping)) return IPL_E_AGAIN;
        uint64_t now = ipl_mono_ms();
        if (now >= end) return 0;
        ipl_sleep_ms(end - now < S_POLL_SLICE_MS ? end - now : S_POLL_SLICE_MS);
    }
}

const char *gateway_route_endpoint(const gateway_route_t *self)
{
    return self->endpoint;
}

int gateway_route_timeout_ms(const gateway_route_t *self)
{
    return self->timeout_ms;
}

/* An idle socket of decider `d`, a new one, or NULL when all S_MAX_SOCKETS stay busy until
 * `deadline_ns` (or on failure). */
static s_sock_t *s_take(gateway_route_t *self, s_decider_t *d, uint64_t deadline_ns)
{
    pthread_mutex_lock(&self->lock);
    while (!d->free_list && d->sockets >= S_MAX_SOCKETS && !atomic_load(&self->stopping) &&
           ipl_mono_ns() < deadline_ns) {
        (void)ipl_cond_wait_ms(&self->freed, &self->lock, S_POLL_SLICE_MS);
    }
    s_sock_t *s = d->free_list;
    if (s) {
        d->free_list = s->next;
        s->busy = true;
    } else if (d->sockets < S_MAX_SOCKETS)
        d->sockets++; /* reserve the one created below */
    else {
        pthread_mutex_unlock(&self->lock);
        return NULL;
    }
    pthread_mutex_unlock(&self->lock);
    if (s) return s;
    s = calloc(1, sizeof(*s));
    if (s) s->sock = zsock_new(ZMQ_DEALER);
    if (s && s->sock) {
        s->decider = d;
        zsock_set_linger(s->sock, 0);
        zsock_set_sndhwm(s->sock, 1000);
        zsock_set_maxmsgsize(s->sock, IPL_PROTO_MAX_FRAME);
        /* queue only to a completed connection: a dead decider is seen at once, not after a
         * whole timeout with the question stuck in a queue to nobody */
        zsock_set_immediate(s->sock, 1);
        ipl_curve_client(s->sock); /* CURVE with --curve-dir (ipl_curve.h) */
        if (zsock_connect(s->sock, "%s", d->endpoint) == 0) {
            pthread_mutex_lock(&self->lock);
            s->id = ++self->last_conn;
            s->busy = true;
            s->all_next = self->all;
            self->all = s;
            pthread_mutex_unlock(&self->lock);
            return s;
        }
        IPL_LOG_EVERY(10, IPL_LOG_ERROR, "decider_connect_failed", "endpoint=%s error=%d",
                      d->endpoint, zmq_errno());
    }
    if (s) zsock_destroy(&s->sock);
    free(s);
    pthread_mutex_lock(&self->lock);
    d->sockets--;
    pthread_cond_signal(&self->freed);
    pthread_mutex_unlock(&self->lock);
    return NULL;
}

/* Destroys a socket in an unknown state (it is not reused); its queued OBSERVEDs are
 * dropped. */
static void s_discard(gateway_route_t *self, s_sock_t *s)
{
    pthread_mutex_lock(&self->lock);
    for (s_sock_t **pp = &self->all; *pp; pp = &(*pp)->all_next)
        if (*pp == s) {
            *pp = s->all_next;
            break;
        }
    s->decider->sockets--;
    s_out_t *queue = s->queue;
    size_t queued = s->queued;
    pthread_cond_signal(&self->freed);
    pthread_mutex_unlock(&self->lock);
    if (queued) ipl_metric_add(self->observed_dropped, (double)queued);
    s_free_queue(queue);
    zsock_destroy(&s->sock);
    free(s);
}

/* Sends one encoded OBSERVED on a socket this thread holds; counts it. */
static int s_send_observed(gateway_route_t *self, s_sock_t *s, const void *data, size_t len)
{
    if (zmq_send(zsock_resolve(s->sock), data, len, ZMQ_DONTWAIT) < 0) {
        ipl_metric_inc(self->observed_dropped);
        IPL_LOG_EVERY(10, IPL_LOG_WARN, "observed_dropped", "endpoint=%s error=%s",
                      s->decider->endpoint, zmq_strerror(zmq_errno()));
        return zmq_errno() == EAGAIN ? IPL_E_AGAIN : IPL_E_IO;
    }
    ipl_metric_inc(self->observed_sent);
    return 0;
}

/* Gives a socket back, after sending what other threads queued on it meanwhile. */
static void s_give(gateway_route_t *self, s_sock_t *s)
{
    pthread_mutex_lock(&self->lock);
    while (s->queue) {
        s_out_t *queue = s->queue;
        s->queue = s->queue_tail = NULL;
        s->queued = 0;
        pthread_mutex_unlock(&self->lock);
        for (s_out_t *o = queue; o; o = o->next)
            s_send_observed(self, s, o->data, o->len);
        s_free_queue(queue);
        pthread_mutex_lock(&self->lock);
    }
    s->busy = false;
    s->next = s->decider->free_list;
    s->decider->free_list = s;
    pthread_cond_signal(&self->freed);
    pthread_mutex_unlock(&self->lock);
}

/* Receives one message (all its frames) and decodes its last frame into *rep.
 * Returns 0 for an awaited ROUTE_REP, IPL_E_AGAIN for a dropped frame (counted), IPL_E_IO. */
static int s_recv(gateway_route_t *self, void *raw, uint64_t req_id, ipl_msg_t *rep)
{
    /* A ROUTER answers [message]; tolerate a leading empty delimiter (REQ-style peers). */
    zmq_msg_t part[2];
    int kept;
    size_t parts = ipl_zmq_recv_parts(raw, part, 2, &kept);
    if (parts == 0) {
        ipl_zmq_close_parts(part, kept);
        return zmq_errno() == EAGAIN || zmq_errno() == EINTR ? IPL_E_AGAIN : IPL_E_IO;
    }
    ipl_msg_t msg = {0};
    int rc = IPL_E_TRAILING; /* more frames than [delimiter,] message */
    size_t size = 0;
    if (parts == 1 || (parts == 2 && zmq_msg_size(&part[0]) == 0)) {
        zmq_msg_t *frame = &part[parts - 1];
        size = zmq_msg_size(frame);
        rc = ipl_msg_decode(zmq_msg_data(frame), size, &msg);
    }
    ipl_zmq_close_parts(part, kept);
    if (rc != 0) {
        ipl_metric_inc(self->malformed);
        IPL_LOG_EVERY(10, IPL_LOG_WARN, "route_reply_dropped", "reason=%s bytes=%zu",
                      ipl_strerror(rc), size);
        return IPL_E_AGAIN;
    }
    if (msg.type != IPL_MSG_ROUTE_REP) {
        ipl_metric_inc(self->unexpected);
        IPL_LOG_EVERY(10, IPL_LOG_WARN, "route_reply_dropped", "reason=unexpected_type type=%s",
                      ipl_msg_type_name(msg.type));
        ipl_msg_clear(&msg);
        return IPL_E_AGAIN;
    }
    if (msg.u.route_rep.req_id != req_id) {
        ipl_metric_inc(self->stale);
        IPL_DEBUG("route_reply_dropped", "reason=stale req_id=%llu awaited=%llu",
                  (unsigned long long)msg.u.route_rep.req_id, (unsigned long long)req_id);
        ipl_msg_clear(&msg);
        return IPL_E_AGAIN;
    }
    *rep = msg;
    return 0;
}

int gateway_route_ask(gateway_route_t *self, ipl_route_req_t *req, ipl_msg_t *rep)
{
    return gateway_route_ask_conn(self, req, rep, NULL);
}

/* Sends a frame on a socket that queues only to a completed connection: at once, or once the
 * connection is made, within S_CONNECT_WAIT_MS (and `deadline_ns`). 0, IPL_E_AGAIN (no
 * connection: the decider is unreachable, or far behind), IPL_E_IO. */
static int s_send(void *raw, ipl_route_req_t *req, uint64_t deadline_ns)
{
    int rc = ipl_msg_send(raw, IPL_MSG_ROUTE_REQ, req, ZMQ_DONTWAIT);
    if (rc != IPL_E_AGAIN) return rc;
    uint64_t now = ipl_mono_ns();
    uint64_t until = now + (uint64_t)S_CONNECT_WAIT_MS * 1000000ull;
    if (until > deadline_ns) until = deadline_ns;
    while (now < until) {
        zmq_pollitem_t item = {raw, 0, ZMQ_POLLOUT, 0};
        long wait_ms = (long)((until - now + 999999) / 1000000);
        int n = zmq_poll(&item, 1, wait_ms < S_POLL_SLICE_MS ? wait_ms : S_POLL_SLICE_MS);
        if (n < 0 && zmq_errno() != EINTR) return IPL_E_IO;
        if (n > 0) return ipl_msg_send(raw, IPL_MSG_ROUTE_REQ, req, ZMQ_DONTWAIT);
        now = ipl_mono_ns();
    }
    return IPL_E_AGAIN;
}

/* One question to decider `d`, answered by `deadline_ns`. 0 with *rep, IPL_E_TIMEOUT (no
 * answer), IPL_E_NOTFOUND (no connection), IPL_E_IO, IPL_E_AGAIN (stopping). */
static int s_ask_one(gateway_route_t *self, s_decider_t *d, ipl_route_req_t *req, ipl_msg_t *rep,
                     uint64_t deadline, uint64_t *conn)
{
    s_sock_t *s = s_take(self, d, deadline);
    if (!s) {
        if (atomic_load(&self->stopping)) return IPL_E_AGAIN;
        return ipl_mono_ns() >= deadline ? IPL_E_TIMEOUT : IPL_E_IO;
    }
    void *raw = zsock_resolve(s->sock);
    req->req_id = atomic_fetch_add(&self->next_id, 1);
    int rc = s_send(raw, req, deadline);
    if (rc != 0) {
        IPL_LOG_EVERY(10, IPL_LOG_WARN, "route_send_failed", "endpoint=%s error=%s", d->endpoint,
                      rc == IPL_E_AGAIN ? "no connection" : ipl_strerror(rc));
        s_give(self, s);
        return rc == IPL_E_AGAIN ? IPL_E_NOTFOUND : IPL_E_IO;
    }
    rc = IPL_E_TIMEOUT;
    while (!atomic_load(&self->stopping)) {
        uint64_t now = ipl_mono_ns();
        if (now >= deadline) break;
        long wait_ms = (long)((deadline - now + 999999) / 1000000);
        if (wait_ms > S_POLL_SLICE_MS) wait_ms = S_POLL_SLICE_MS;
        zmq_pollitem_t item = {raw, 0, ZMQ_POLLIN, 0};
        int n = zmq_poll(&item, 1, wait_ms);
        if (n < 0 && zmq_errno() != EINTR) {
            rc = IPL_E_IO;
            break;
        }
        if (n <= 0) continue;
        int got;
        while ((got = s_recv(self, raw, req->req_id, rep)) == IPL_E_AGAIN) {
            zmq_pollitem_t again = {raw, 0, ZMQ_POLLIN, 0};
            if (zmq_poll(&again, 1, 0) <= 0) break;
        }
        if (got == 0 || got == IPL_E_IO) {
            rc = got;
            break;
        }
    }
    if (rc == IPL_E_TIMEOUT && atomic_load(&self->stopping)) rc = IPL_E_AGAIN;
    if (rc == 0 && conn) *conn = s->id;
    if (rc == IPL_E_IO) { /* do not reuse a socket in an unknown state */
        s_discard(self, s);
    } else {
        s_give(self, s);
    }
    return rc;
}

/* Marks a decider up after an answer; logs the change. */
static void s_mark_up(gateway_route_t *self, s_decider_t *d)
{
    if (!atomic_load(&d->down) && !atomic_load(&self->degraded)) return; /* the usual case */
    pthread_mutex_lock(&self->lock);
    bool was = atomic_load(&d->down);
    uint64_t since = d->down_ms;
    if (was) atomic_fetch_sub(&self->ndown, 1);
    atomic_store(&d->down, false);
    d->probing = false;
    d->backoff_ms = S_BACKOFF_MIN_MS;
    bool recovered = atomic_load(&self->degraded);
    atomic_store(&self->degraded, false);
    pthread_mutex_unlock(&self->lock);
    if (was) {
        ipl_metric_set(d->up, 1);
        IPL_INFO("decider_up", "endpoint=%s down_ms=%llu", d->endpoint,
                 (unsigned long long)(ipl_mono_ms() - since));
    }
    if (recovered)
        IPL_INFO("route_recovered", "endpoint=%s (a decider answers again)", d->endpoint);
}

/* Marks a decider down (it did not answer: `why`); the next probe after its back-off. */
static void s_mark_down(gateway_route_t *self, s_decider_t *d, const char *why)
{
    uint64_t now = ipl_mono_ms();
    pthread_mutex_lock(&self->lock);
    bool was = atomic_load(&d->down);
    if (!was) {
        d->down_ms = now;
        atomic_fetch_add(&self->ndown, 1);
    }
    atomic_store(&d->down, true);
    d->probing = false;
    d->why = why;
    d->retry_ms = now + d->backoff_ms;
    d->backoff_ms = d->backoff_ms * 2 < S_BACKOFF_MAX_MS ? d->backoff_ms * 2 : S_BACKOFF_MAX_MS;
    pthread_mutex_unlock(&self->lock);
    if (!was) {
        ipl_metric_set(d->up, 0);
        IPL_WARN("decider_down", "endpoint=%s reason=%s (questions go to %s)", d->endpoint, why,
                 self->ndeciders > 1 ? "the other deciders"
                 : self->backup      ? "the backup"
                                     : "nobody");
    }
}

/* The deciders to ask, in order, into order[] (returns how many): first a decider down whose
 * back-off is over — one probe at a time each (*probe marks it), a real question with a short
 * timeout, as a half-open circuit breaker lets one through — then those up, round robin. The
 * others (down, or probed by another question) are left for when neither they nor the backup
 * could answer (s_rest). */
static size_t s_plan(gateway_route_t *self, s_decider_t **order, bool *probe)
{
    size_t n = self->ndeciders, k = 0;
    size_t first = n > 1 ? (size_t)(atomic_fetch_add(&self->turn, 1) % n) : 0;
    if (atomic_load(&self->ndown) == 0) { /* every one up: no lock */
        for (size_t i = 0; i < n; i++)
            probe[i] = false, order[i] = &self->deciders[(first + i) % n];
        return n;
    }
    uint64_t now = ipl_mono_ms();
    pthread_mutex_lock(&self->lock);
    for (size_t i = 0; i < n && k == 0; i++) { /* one probe per question at most */
        s_decider_t *d = &self->deciders[(first + i) % n];
        if (d->down && !d->probing && now >= d->retry_ms) {
            d->probing = true;
            probe[k] = true, order[k++] = d;
        }
    }
    for (size_t i = 0; i < n; i++) {
        s_decider_t *d = &self->deciders[(first + i) % n];
        if (!d->down) probe[k] = false, order[k++] = d;
    }
    pthread_mutex_unlock(&self->lock);
    return k;
}

/* The deciders s_plan left out of asked[0..nasked), into order[]: a question is never refused
 * with a decider left untried. */
static size_t s_rest(gateway_route_t *self, s_decider_t *const *asked, size_t nasked,
                     s_decider_t **order, bool *probe)
{
    size_t k = 0;
    for (size_t i = 0; i < self->ndeciders; i++) {
        bool was = false;
        for (size_t j = 0; j < nasked && !was; j++)
            was = asked[j] == &self->deciders[i];
        if (!was) probe[k] = false, order[k++] = &self->deciders[i];
    }
    return k;
}

/* The backup's decision for a question no decider answered. */
static int s_backup(gateway_route_t *self, ipl_route_req_t *req, ipl_msg_t *rep, uint64_t *conn)
{
    int rc = decider_backup_route(self->backup, req, rep);
    if (rc != 0) return rc;
    ipl_metric_inc(self->backups);
    if (conn) *conn = GATEWAY_ROUTE_BACKUP_CONN;
    pthread_mutex_lock(&self->lock);
    bool entered = !atomic_load(&self->degraded);
    atomic_store(&self->degraded, true);
    pthread_mutex_unlock(&self->lock);
    if (entered)
        IPL_WARN("route_degraded",
                 "deciders=%s reason=\"no decider answers\" (the gateway "
                 "decides itself: load only, from its policy, until one does)",
                 self->endpoint);
    return 0;
}

/* What one question has found so far, over the deciders it asked. */
typedef struct {
    uint64_t t0, deadline;
    int last;       /* why the last one did not answer: IPL_E_TIMEOUT or IPL_E_IO */
    ipl_msg_t held; /* a NOT_READY answer, kept in case nothing better comes */
    bool have_held;
    size_t asked; /* deciders asked, for the failover count */
} s_question_t;

/* Asks order[0..n) in turn within the question's deadline, each its share of the time left.
 * 0 with *rep (an answer but NOT_READY, which is held), IPL_E_AGAIN (stopping), or IPL_E_TIMEOUT
 * when none answered. */
static int s_ask_each(gateway_route_t *self, s_decider_t **order, const bool *probe, size_t n,
                      s_question_t *q, ipl_route_req_t *req, ipl_msg_t *rep, uint64_t *conn)
{
    for (size_t k = 0; k < n; k++) {
        uint64_t now = ipl_mono_ns();
        if (now >= q->deadline) { /* no time left for this one: not its fault */
            if (probe[k]) {
                pthread_mutex_lock(&self->lock);
                order[k]->probing = false;
                pthread_mutex_unlock(&self->lock);
            }
            continue;
        }
        /* its share of what is left, the rest for the deciders after it */
        uint64_t slice = (q->deadline - now) / (uint64_t)(n - k);
        if (probe[k] && slice > (uint64_t)S_PROBE_MS * 1000000ull)
            slice = (uint64_t)S_PROBE_MS * 1000000ull;
        int rc = s_ask_one(self, order[k], req, rep, now + slice, conn);
        if (rc == IPL_E_AGAIN) return rc; /* stopping */
        q->asked++;
        if (rc == 0 && rep->u.route_rep.status == IPL_ROUTE_NOT_READY) {
            /* alive but without state (restarted, catching up): ask another. Before any
             * decider has decided, it is the cluster starting: not down, and its answer
             * stands (see gateway_route_ask_conn) */
            if (q->have_held) ipl_msg_clear(&q->held);
            q->held = *rep;
            q->have_held = true;
            memset(rep, 0, sizeof *rep);
            if (atomic_load(&self->answered)) s_mark_down(self, order[k], "not_ready");
            continue;
        }
        if (rc == 0) {
            s_mark_up(self, order[k]);
            if (self->backup) /* the backup keeps the decider's prefix affinity (~1 µs) */
                decider_backup_learn(self->backup, req, &rep->u.route_rep);
            if (rep->u.route_rep.status == IPL_ROUTE_OK && !atomic_load(&self->answered))
                atomic_store(&self->answered, true);
            if (q->asked > 1) ipl_metric_inc(self->failovers);
            ipl_metric_observe(self->latency, (double)(ipl_mono_ns() - q->t0) / 1e9);
            return 0;
        }
        s_mark_down(self, order[k],
                    rc == IPL_E_TIMEOUT    ? "timeout"
                    : rc == IPL_E_NOTFOUND ? "unreachable"
                                           : "io");
        q->last = rc == IPL_E_IO ? IPL_E_IO : IPL_E_TIMEOUT;
    }
    return IPL_E_TIMEOUT;
}

int gateway_route_ask_conn(gateway_route_t *self, ipl_route_req_t *req, ipl_msg_t *rep,
                           uint64_t *conn)
{
    assert(self && req && rep);
    if (atomic_load(&self->stopping)) return IPL_E_AGAIN;
    s_question_t q = {.t0 = ipl_mono_ns(), .last = IPL_E_TIMEOUT};
    q.deadline = q.t0 + (uint64_t)self->timeout_ms * 1000000ull;
    s_decider_t *order[GATEWAY_ROUTE_MAX_DECIDERS], *rest[GATEWAY_ROUTE_MAX_DECIDERS];
    bool probe[GATEWAY_ROUTE_MAX_DECIDERS], no_probe[GATEWAY_ROUTE_MAX_DECIDERS];
    size_t n = s_plan(self, order, probe);
    int rc = s_ask_each(self, order, probe, n, &q, req, rep, conn);
    /* no decider answered: the backup decides — unless the only answers were NOT_READY
     * before any decider has ever decided (a cold start: the state of the workers is
     * nobody's yet, the backup would guess); without it (or without a policy yet), the
     * deciders skipped as down are asked after all, then a NOT_READY answer is the answer */
    bool by_backup = false;
    bool backup_ok = self->backup && (!q.have_held || atomic_load(&self->answered));
    if (rc == IPL_E_TIMEOUT && !atomic_load(&self->stopping) && backup_ok &&
        s_backup(self, req, rep, conn) == 0)
        rc = 0, by_backup = true;
    else if (rc == IPL_E_TIMEOUT && !atomic_load(&self->stopping)) {
        size_t m = s_rest(self, order, n, rest, no_probe);
        rc = s_ask_each(self, rest, no_probe, m, &q, req, rep, conn);
    }
    if (rc == IPL_E_TIMEOUT && q.have_held) {
        *rep = q.held;
        q.have_held = false;
        rc = 0;
    }
    if (q.have_held) ipl_msg_clear(&q.held);
    if (rc == IPL_E_TIMEOUT && atomic_load(&self->stopping)) rc = IPL_E_AGAIN;
    if (rc == IPL_E_TIMEOUT || by_backup) ipl_metric_inc(self->timeouts); /* no decider did */
    return rc == IPL_E_TIMEOUT ? q.last : rc;
}

size_t gateway_route_deciders(gateway_route_t *self, size_t *up)
{
    pthread_mutex_lock(&self->lock);
    size_t k = 0;
    for (size_t i = 0; i < self->ndeciders; i++)
        k += !self->deciders[i].down;
    pthread_mutex_unlock(&self->lock);
    if (up) *up = k;
    return self->ndeciders;
}

bool gateway_route_describe(gateway_route_t *self, char *buf, size_t size)
{
    size_t len = strnlen(buf, size);
    uint64_t now = ipl_mono_ms();
    pthread_mutex_lock(&self->lock);
    size_t up = 0;
    for (size_t i = 0; i < self->ndeciders; i++)
        up += !self->deciders[i].down;
    bool degraded = up == 0 || atomic_load(&self->degraded);
    if (up < self->ndeciders || degraded) {
        int w = snprintf(buf + len, size - len, "; %s",
                         degraded ? "degraded: no decider answers (" : "");
        len += w > 0 && (size_t)w < size - len ? (size_t)w : 0;
        bool sep = false;
        for (size_t i = 0; i < self->ndeciders && len < size; i++) {
            const s_decider_t *d = &self->deciders[i];
            if (!d->down) continue;
            w = snprintf(buf + len, size - len, "%sdecider %s down %.1f s (%s)", sep ? ", " : "",
                         d->endpoint, (double)(now - d->down_ms) / 1000.0, d->why ? d->why : "");
            len += w > 0 && (size_t)w < size - len ? (size_t)w : size - len - 1;
            sep = true;
        }
        if (len < size) {
            if (degraded)
                snprintf(buf + len, size - len, "%s), %s", sep ? "" : "not asked yet",
                         self->backup ? "routing load-only from the gateway's policy (backup)"
                                      : "no backup: requests fail");
            else
                snprintf(buf + len, size - len, ", %zu of %zu answering", up, self->ndeciders);
        }
    }
    bool can = up > 0 || self->backup != NULL;
    pthread_mutex_unlock(&self->lock);
    return can;
}

int gateway_route_observe(gateway_route_t *self, uint64_t conn, const ipl_observed_t *obs)
{
    msgpack_sbuffer buf;
    msgpack_sbuffer_init(&buf);
    int rc = ipl_msg_encode(IPL_MSG_OBSERVED, obs, &buf);
    s_out_t *out = rc == 0 ? malloc(sizeof *out + buf.size) : NULL;
    if (out) {
        out->next = NULL;
        out->len = buf.size;
        memcpy(out->data, buf.data, buf.size);
    }
    msgpack_sbuffer_destroy(&buf);
    if (self->backup) decider_backup_done(self->backup, obs->worker); /* its in-flight count */
    if (conn == GATEWAY_ROUTE_BACKUP_CONN && self->backup) {
        free(out);
        return 0;
    }
    if (!out || atomic_load(&self->stopping)) {
        free(out);
        ipl_metric_inc(self->observed_dropped);
        return rc ? rc : out ? IPL_E_AGAIN : IPL_E_NOMEM;
    }
    pthread_mutex_lock(&self->lock);
    s_sock_t *s = self->all;
    while (s && s->id != conn)
        s = s->all_next;
    if (s && s->busy) { /* its holder sends it when it gives the socket back */
        rc = s->queued < S_MAX_QUEUED ? 0 : IPL_E_AGAIN;
        if (rc == 0) {
            if (s->queue_tail)
                s->queue_tail->next = out;
            else
                s->queue = out;
            s->queue_tail = out;
            s->queued++;
            out = NULL;
        }
    } else if (s) { /* idle: take it out of the free list and send from here */
        for (s_sock_t **pp = &s->decider->free_list; *pp; pp = &(*pp)->next)
            if (*pp == s) {
                *pp = s->next;
                break;
            }
        s->busy = true;
    } else {
        rc = IPL_E_NOTFOUND;
    }
    pthread_mutex_unlock(&self->lock);
    if (s && out && rc == 0) {
        rc = s_send_observed(self, s, out->data, out->len);
        free(out);
        s_give(self, s);
        return rc;
    }
    if (out) { /* not queued, not sent */
        ipl_metric_inc(self->observed_dropped);
        IPL_LOG_EVERY(10, IPL_LOG_WARN, "observed_dropped", "endpoint=%s reason=%s", self->endpoint,
                      rc == IPL_E_NOTFOUND ? "connection_closed" : "queue_full");
        free(out);
    }
    return rc;
}
