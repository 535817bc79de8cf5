/*
 * exporter_server — see the header's diagram.
 */
#include "exporter_server.h"

#include <czmq.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "ipl_curve.h"
#include "ipl_log.h"
#include "ipl_loop.h"
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
    ipl_curve_server(self->pull); /* CURVE with --curve-dir (ipl_curve.h) */
    if (ipl_zmq_bind(zsock_resolve(self->pull), config->pull, "--pull",
                     config->pull_source ? config->pull_source : "config",
                     "use a free tcp://host:port", err, errlen) != 0) {
        exporter_server_destroy(&self);
        return NULL;
    }
    self->endpoint = zsock_last_endpoint(self->pull);
    self->series = exporter_series_new(metrics, &config->series);
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
            exporter_series_drop(series, "multipart", "parts=%zu", parts);
        } else if (parts == 1) {
            exporter_series_frame(series, zmq_msg_data(&frame), zmq_msg_size(&frame));
        }
        ipl_zmq_close_parts(&frame, kept);
        if (parts == 0) return; /* EAGAIN, or EINTR: the poll loop comes back */
    }
}

static void s_on_pull(void *arg)
{
    exporter_server_t *self = arg;
    s_drain(zsock_resolve(self->pull), self->series);
}

void exporter_server_run(exporter_server_t *self)
{
    const ipl_loop_item_t items[] = {{zsock_resolve(self->pull), -1, s_on_pull, self}};
    (void)ipl_loop_run(items, 1, 1000, NULL, NULL);
}

const char *exporter_server_endpoint(const exporter_server_t *self)
{
    return self->endpoint;
}

exporter_series_t *exporter_server_series(exporter_server_t *self)
{
    return self->series;
}
