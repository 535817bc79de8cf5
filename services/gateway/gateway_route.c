/*
 * gateway_route — decider client with a pool of DEALER sockets. See gateway_route.h.
 *
 * A socket moves between threads only through the pool mutex, which gives libzmq the full
 * memory barrier it requires for that. The mutex also guards every socket's `busy` flag and
 * OBSERVED queue: a socket with a queue is always busy (its holder sends the queue in s_give
 * before the socket goes back to the free list), so an idle socket's queue is empty.
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

#include "ipl_clock.h"
#include "ipl_cond.h"
#include "ipl_error.h"
#include "ipl_log.h"
#include "ipl_zmq.h"

#define S_POLL_SLICE_MS 50
#define S_MAX_SOCKETS   256 /* questions in flight at once; more wait for a free socket */
#define S_MAX_QUEUED    64  /* OBSERVED frames waiting for a busy socket */

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

typedef struct s_sock {
    zsock_t *sock;
    struct s_sock *next;     /* in the free list */
    struct s_sock *all_next; /* in the list of every socket */
    uint64_t id;             /* connection id, never reused */
    bool busy;               /* held by a thread (not in the free list) */
    s_out_t *queue, *queue_tail;
    size_t queued;
} s_sock_t;

struct gateway_route {
    char *endpoint;
    int timeout_ms;
    pthread_mutex_t lock;
    pthread_cond_t freed; /* a socket went back to the pool */
    s_sock_t *free_list;  /* idle sockets */
    s_sock_t *all;        /* every socket (idle or in use) */
    int sockets;          /* sockets in existence or being created */
    uint64_t last_conn;   /* the last connection id given */
    atomic_uint_fast64_t next_id;
    atomic_bool stopping;
    ipl_metric_t *latency, *timeouts, *stale, *malformed, *unexpected;
    ipl_metric_t *observed_sent, *observed_dropped;
};

gateway_route_t *gateway_route_new(const char *endpoint, int timeout_ms, ipl_metrics_t *metrics)
{
    assert(endpoint && metrics);
    gateway_route_t *self = calloc(1, sizeof(*self));
    if (!self) return NULL;
    self->endpoint = strdup(endpoint);
    if (!self->endpoint) {
        free(self);
        return NULL;
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
    return self;
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

/* An idle socket, a new one, or NULL when all S_MAX_SOCKETS stay busy until `deadline_ns`
 * (or on failure). */
static s_sock_t *s_take(gateway_route_t *self, uint64_t deadline_ns)
{
    pthread_mutex_lock(&self->lock);
    while (!self->free_list && self->sockets >= S_MAX_SOCKETS && !atomic_load(&self->stopping) &&
           ipl_mono_ns() < deadline_ns) {
        (void)ipl_cond_wait_ms(&self->freed, &self->lock, S_POLL_SLICE_MS);
    }
    s_sock_t *s = self->free_list;
    if (s) {
        self->free_list = s->next;
        s->busy = true;
    } else if (self->sockets < S_MAX_SOCKETS)
        self->sockets++; /* reserve the one created below */
    else {
        pthread_mutex_unlock(&self->lock);
        return NULL;
    }
    pthread_mutex_unlock(&self->lock);
    if (s) return s;
    s = calloc(1, sizeof(*s));
    if (s) s->sock = zsock_new(ZMQ_DEALER);
    if (s && s->sock) {
        zsock_set_linger(s->sock, 0);
        zsock_set_sndhwm(s->sock, 1000);
        zsock_set_maxmsgsize(s->sock, IPL_PROTO_MAX_FRAME);
        if (zsock_connect(s->sock, "%s", self->endpoint) == 0) {
            pthread_mutex_lock(&self->lock);
            s->id = ++self->last_conn;
            s->busy = true;
            s->all_next = self->all;
            self->all = s;
            pthread_mutex_unlock(&self->lock);
            return s;
        }
        IPL_LOG_EVERY(10, IPL_LOG_ERROR, "decider_connect_failed", "endpoint=%s error=%d",
                      self->endpoint, zmq_errno());
    }
    if (s) zsock_destroy(&s->sock);
    free(s);
    pthread_mutex_lock(&self->lock);
    self->sockets--;
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
    self->sockets--;
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
        IPL_LOG_EVERY(10, IPL_LOG_WARN, "observed_dropped", "endpoint=%s error=%s", self->endpoint,
                      zmq_strerror(zmq_errno()));
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
    s->next = self->free_list;
    self->free_list = s;
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

int gateway_route_ask_conn(gateway_route_t *self, ipl_route_req_t *req, ipl_msg_t *rep,
                           uint64_t *conn)
{
    assert(self && req && rep);
    if (atomic_load(&self->stopping)) return IPL_E_AGAIN;
    uint64_t t0 = ipl_mono_ns();
    uint64_t deadline = t0 + (uint64_t)self->timeout_ms * 1000000ull;
    s_sock_t *s = s_take(self, deadline);
    if (!s) {
        if (atomic_load(&self->stopping)) return IPL_E_AGAIN;
        ipl_metric_inc(self->timeouts);
        return ipl_mono_ns() >= deadline ? IPL_E_TIMEOUT : IPL_E_IO;
    }
    void *raw = zsock_resolve(s->sock);
    req->req_id = atomic_fetch_add(&self->next_id, 1);
    int rc = ipl_msg_send(raw, IPL_MSG_ROUTE_REQ, req, ZMQ_DONTWAIT);
    if (rc != 0) {
        /* IPL_E_AGAIN: the queue to the decider is full (it is gone or far behind). */
        IPL_LOG_EVERY(10, IPL_LOG_WARN, "route_send_failed", "endpoint=%s error=%s", self->endpoint,
                      ipl_strerror(rc));
        s_give(self, s);
        return rc == IPL_E_AGAIN ? IPL_E_TIMEOUT : IPL_E_IO;
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
    if (rc == 0)
        ipl_metric_observe(self->latency, (double)(ipl_mono_ns() - t0) / 1e9);
    else if (rc == IPL_E_TIMEOUT)
        ipl_metric_inc(self->timeouts);
    if (rc == IPL_E_IO) { /* do not reuse a socket in an unknown state */
        s_discard(self, s);
    } else {
        s_give(self, s);
    }
    return rc;
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
        for (s_sock_t **pp = &self->free_list; *pp; pp = &(*pp)->next)
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
