/*
 * exporter_server — see the header's diagram.
 */
#include "exporter_server.h"

#include <czmq.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "ipl_log.h"
#include "ipl_signal.h"
#include "ipl_zmq.h"

#define S_MAX_FRAME (1 << 20) /* a RECORD is a few hundred bytes */

struct exporter_server {
    zsock_t *pull;
    char *endpoint; /* zsock_last_endpoint's (ours) */
    exporter_series_t *series;
};

exporter_server_t *exporter_server_new(const exporter_server_config_t *config,
                                       ipl_metrics_t *metrics, char *err, size_t errlen)
{
    exporter_server_t *self = calloc(1, sizeof *self);
    if (!self || !(self->pull = zsock_new(ZMQ_PULL))) {
        snprintf(err, errlen, "cannot create a ZeroMQ socket");
        exporter_server_destroy(&self);
        return NULL;
    }
    zsock_set_linger(self->pull, 0);
    zsock_set_maxmsgsize(self->pull, S_MAX_FRAME);
    zsock_set_rcvhwm(self->pull, 100000);
    if (zsock_bind(self->pull, "%s", config->pull) < 0) {
        snprintf(err, errlen,
                 "cannot bind --pull \"%s\" (from %s): %s; use a free "
                 "tcp://host:port",
                 config->pull, config->pull_source ? config->pull_source : "config",
                 zmq_strerror(zmq_errno()));
        exporter_server_destroy(&self);
        return NULL;
    }
    self->endpoint = zsock_last_endpoint(self->pull);
    self->series = exporter_series_new(metrics, config->max_label_sets);
    if (!self->series || !self->endpoint) {
        snprintf(err, errlen, "cannot start");
        exporter_server_destroy(&self);
        return NULL;
    }
    return self;
}

void exporter_server_destroy(exporter_server_t **self_p)
{
    if (!self_p || !*self_p) return;
    exporter_server_t *self = *self_p;
    zsock_destroy(&self->pull);
    exporter_series_destroy(&self->series);
    free(self->endpoint);
    free(self);
    *self_p = NULL;
}

/* Receives every frame waiting on `pull` (a raw libzmq socket) and applies it. */
static void s_drain(void *pull, exporter_series_t *series)
{
    for (int budget = 1000; budget > 0; budget--) {
        zmq_msg_t frame;
        int kept;
        size_t parts = ipl_zmq_recv_parts(pull, &frame, 1, &kept);
        if (parts > 1) {
            /* A RECORD is one frame; drop every part of a multipart message. */
            exporter_series_drop(series, "multipart");
            IPL_LOG_EVERY(10, IPL_LOG_WARN, "frame_dropped", "reason=multipart parts=%zu", parts);
        } else if (parts == 1) {
            exporter_series_frame(series, zmq_msg_data(&frame), zmq_msg_size(&frame));
        }
        ipl_zmq_close_parts(&frame, kept);
        if (parts == 0) return; /* EAGAIN, or EINTR: the poll loop comes back */
    }
}

void exporter_server_run(exporter_server_t *self)
{
    zmq_pollitem_t items[] = {
        {zsock_resolve(self->pull), 0, ZMQ_POLLIN, 0},
        {NULL, ipl_signal_fd(), ZMQ_POLLIN, 0},
    };
    while (!ipl_signal_stopping()) {
        int n = zmq_poll(items, 2, 1000);
        if (n < 0 && zmq_errno() != EINTR) {
            IPL_ERROR("poll_failed", "error=%d", zmq_errno());
            break;
        }
        if (n > 0 && (items[0].revents & ZMQ_POLLIN))
            s_drain(zsock_resolve(self->pull), self->series);
    }
}

const char *exporter_server_endpoint(const exporter_server_t *self)
{
    return self->endpoint;
}

exporter_series_t *exporter_server_series(exporter_server_t *self)
{
    return self->series;
}
