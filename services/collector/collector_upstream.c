/*
 * collector_upstream — PUSH sockets to the aggregators, their connection monitors, resends.
 *
 * Each PUSH socket gets a libzmq socket monitor (zmq_socket_monitor) publishing on an inproc
 * PAIR that we poll: HANDSHAKE_SUCCEEDED means a (new) aggregator process is talking to us.
 * The monitor is attached before the PUSH connects, so the first handshake is seen too (it
 * triggers one harmless resend at start-up).
 */
#include "collector_upstream.h"

#include <assert.h>
#include <czmq.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipl_curve.h"
#include "ipl_error.h"
#include "ipl_log.h"
#include "ipl_proto.h"

typedef struct {
    char *endpoint;
    zsock_t *push;
    zsock_t *monitor; /* PAIR receiving the push socket's events; NULL if unavailable */
    bool connected;
    bool resend;
    uint64_t connects, disconnects, resends, dropped;
    ipl_metric_t *m_resends, *m_connected;
} s_agg_t;

struct collector_upstream {
    s_agg_t aggs[COLLECTOR_UPSTREAM_MAX];
    size_t n;
    ipl_metric_t *m_dropped;
};

static void s_metrics(s_agg_t *a, ipl_metrics_t *metrics)
{
    char esc[256], labels[300];
    ipl_metrics_escape(esc, sizeof esc, a->endpoint);
    snprintf(labels, sizeof labels, "aggregator=\"%s\"", esc);
    a->m_resends = ipl_metrics_counter(metrics, "inferplane_collector_aggregator_resends_total",
                                       "Full-state resends queued to an aggregator (after it "
                                       "(re)connected or refused a message).",
                                       labels);
    a->m_connected = ipl_metrics_gauge(metrics, "inferplane_collector_aggregator_connected",
                                       "1 while the connection to the aggregator is up.", labels);
}

/* One aggregator: monitor first, then connect. */
static int s_open(collector_upstream_t *self, s_agg_t *a, char *err, size_t errlen)
{
    a->push = zsock_new(ZMQ_PUSH);
    if (!a->push) {
        snprintf(err, errlen, "cannot create a ZeroMQ socket for --aggregator");
        return IPL_E_IO;
    }
    zsock_set_linger(a->push, 0);
    zsock_set_sndhwm(a->push, 100000);
    ipl_curve_client(a->push); /* CURVE with --curve-dir (ipl_curve.h); workers stay plain */
    char addr[96];
    snprintf(addr, sizeof addr, "inproc://ipl-collector-upstream-%p-%zu", (void *)self,
             (size_t)(a - self->aggs));
    if (zmq_socket_monitor(zsock_resolve(a->push), addr,
                           ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_DISCONNECTED) == 0) {
        a->monitor = zsock_new(ZMQ_PAIR);
        if (a->monitor && zsock_connect(a->monitor, "%s", addr) < 0) zsock_destroy(&a->monitor);
    }
    if (!a->monitor)
        IPL_WARN("aggregator_monitor_unavailable",
                 "aggregator=\"%s\" effect=\"a restarted aggregator is resent the state only "
                 "after a refused message\"",
                 a->endpoint);
    if (zsock_connect(a->push, "%s", a->endpoint) < 0) {
        snprintf(err, errlen,
                 "--aggregator: cannot connect to \"%s\": %s; expected tcp://host:port",
                 a->endpoint, zmq_strerror(zmq_errno()));
        return IPL_E_INVAL;
    }
    return 0;
}

collector_upstream_t *collector_upstream_new(const char *const *endpoints, size_t n,
                                             ipl_metrics_t *metrics, char *err, size_t errlen)
{
    assert((endpoints || n == 0) && metrics && err);
    if (n == 0 || n > COLLECTOR_UPSTREAM_MAX) {
        snprintf(err, errlen,
                 n ? "--aggregator: at most %d endpoints"
                   : "--aggregator: no endpoint given (e.g. tcp://127.0.0.1:7001)",
                 COLLECTOR_UPSTREAM_MAX);
        return NULL;
    }
    collector_upstream_t *self = calloc(1, sizeof *self);
    if (!self) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    self->m_dropped = ipl_metrics_counter(
        metrics, "inferplane_collector_push_dropped_total",
        "Messages not queued to an aggregator (its queue is full or the socket failed).", NULL);
    for (size_t i = 0; i < n; i++) {
        s_agg_t *a = &self->aggs[self->n++];
        a->endpoint = strdup(endpoints[i]);
        if (!a->endpoint) {
            snprintf(err, errlen, "out of memory");
            collector_upstream_destroy(&self);
            return NULL;
        }
        if (s_open(self, a, err, errlen) != 0) {
            collector_upstream_destroy(&self);
            return NULL;
        }
        s_metrics(a, metrics);
    }
    return self;
}

void collector_upstream_destroy(collector_upstream_t **self_p)
{
    if (!self_p || !*self_p) return;
    collector_upstream_t *self = *self_p;
    for (size_t i = 0; i < self->n; i++) {
        s_agg_t *a = &self->aggs[i];
        if (a->push && a->monitor) zmq_socket_monitor(zsock_resolve(a->push), NULL, 0);
        zsock_destroy(&a->monitor);
        zsock_destroy(&a->push);
        free(a->endpoint);
    }
    free(self);
    *self_p = NULL;
}

size_t collector_upstream_count(const collector_upstream_t *self)
{
    assert(self);
    return self->n;
}

int collector_upstream_send_to(collector_upstream_t *self, size_t i, int type, const void *body)
{
    assert(self && i < self->n);
    return ipl_msg_send(zsock_resolve(self->aggs[i].push), type, body, ZMQ_DONTWAIT);
}

void collector_upstream_send(collector_upstream_t *self, int type, const void *body)
{
    assert(self);
    for (size_t i = 0; i < self->n; i++) {
        int rc = collector_upstream_send_to(self, i, type, body);
        if (rc == 0) continue;
        s_agg_t *a = &self->aggs[i];
        a->dropped++;
        ipl_metric_inc(self->m_dropped);
        if (!a->resend)
            IPL_LOG_EVERY(5, IPL_LOG_WARN, "push_dropped",
                          "aggregator=\"%s\" error=%s effect=\"full state resent later\"",
                          a->endpoint, ipl_strerror(rc));
        a->resend = true; /* it misses a message: give it everything once it drains */
    }
}

size_t collector_upstream_pollitems(collector_upstream_t *self, zmq_pollitem_t *items, size_t max)
{
    assert(self);
    size_t n = 0;
    for (size_t i = 0; i < self->n && n < max; i++) {
        s_agg_t *a = &self->aggs[i];
        /* a slot per aggregator, so that dispatch maps items back by position */
        items[n++] = a->monitor ? (zmq_pollitem_t){zsock_resolve(a->monitor), 0, ZMQ_POLLIN, 0}
                                : (zmq_pollitem_t){zsock_resolve(a->push), 0, 0, 0};
    }
    return n;
}

/* Reads one monitor event: [u16 event, u32 value] then the endpoint. -1 when none. */
static int s_event(void *sock)
{
    zmq_msg_t msg;
    zmq_msg_init(&msg);
    if (zmq_msg_recv(&msg, sock, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&msg);
        return -1;
    }
    int event = 0;
    if (zmq_msg_size(&msg) >= 2) {
        uint16_t e;
        memcpy(&e, zmq_msg_data(&msg), sizeof e);
        event = e;
    }
    while (zmq_msg_more(&msg)) { /* the endpoint frame */
        zmq_msg_close(&msg);
        zmq_msg_init(&msg);
        if (zmq_msg_recv(&msg, sock, 0) < 0) break;
    }
    zmq_msg_close(&msg);
    return event;
}

void collector_upstream_dispatch(collector_upstream_t *self, const zmq_pollitem_t *items, size_t n)
{
    assert(self);
    for (size_t i = 0; i < n && i < self->n; i++) {
        s_agg_t *a = &self->aggs[i];
        if (!a->monitor || !(items[i].revents & ZMQ_POLLIN)) continue;
        for (int budget = 64, ev; budget > 0 && (ev = s_event(zsock_resolve(a->monitor))) >= 0;
             budget--) {
            if (ev == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
                a->connected = true;
                a->connects++;
                a->resend = true;
                ipl_metric_set(a->m_connected, 1);
                IPL_INFO("aggregator_connected", "aggregator=\"%s\" connects=%llu effect=\"%s\"",
                         a->endpoint, (unsigned long long)a->connects, "full state resent");
            } else if (ev == ZMQ_EVENT_DISCONNECTED) {
                a->connected = false;
                a->disconnects++;
                ipl_metric_set(a->m_connected, 0);
                IPL_WARN("aggregator_disconnected", "aggregator=\"%s\"", a->endpoint);
            }
        }
    }
}

void collector_upstream_resend(collector_upstream_t *self, collector_upstream_resend_fn *fn,
                               void *arg)
{
    assert(self && fn);
    for (size_t i = 0; i < self->n; i++) {
        s_agg_t *a = &self->aggs[i];
        if (!a->resend || fn(arg, i) != 0) continue;
        a->resend = false;
        a->resends++;
        ipl_metric_inc(a->m_resends);
        IPL_DEBUG("aggregator_resent", "aggregator=\"%s\" resends=%llu", a->endpoint,
                  (unsigned long long)a->resends);
    }
}

void collector_upstream_info(const collector_upstream_t *self, size_t i,
                             collector_upstream_info_t *out)
{
    assert(self && out && i < self->n);
    const s_agg_t *a = &self->aggs[i];
    *out = (collector_upstream_info_t){.endpoint = a->endpoint,
                                       .connected = a->connected,
                                       .resend_pending = a->resend,
                                       .connects = a->connects,
                                       .disconnects = a->disconnects,
                                       .resends = a->resends,
                                       .dropped = a->dropped};
}
