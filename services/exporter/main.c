/*
 * inferplane-exporter — turns request RECORDs into Prometheus series.
 *
 *   gateways, deciders ──PUSH──► PULL bind (--pull) ──► exporter_series ──► admin /metrics
 *
 * One thread receives and applies records; the admin server renders the registry.
 */
#include <czmq.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "exporter_series.h"
#include "ipl_log.h"
#include "ipl_service.h"
#include "ipl_signal.h"
#include "ipl_zmq.h"

#define S_MAX_FRAME (1 << 20) /* a RECORD is a few hundred bytes */

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
            IPL_LOG_EVERY(10, IPL_LOG_WARN, "frame_dropped", "reason=multipart parts=%zu",
                          parts);
        } else if (parts == 1) {
            exporter_series_frame(series, zmq_msg_data(&frame), zmq_msg_size(&frame));
        }
        ipl_zmq_close_parts(&frame, kept);
        if (parts == 0) return; /* EAGAIN, or EINTR: the poll loop comes back */
    }
}

int main(int argc, char **argv)
{
    char *pull_endpoint = NULL;
    int64_t max_label_sets = EXPORTER_SERIES_DEFAULT_MAX_LABEL_SETS;
    ipl_service_t *svc = ipl_service_new("exporter",
                                         "Prometheus exporter of request records (PULL of "
                                         "RECORD messages from gateways and deciders)",
                                         "127.0.0.1:9105");
    if (!svc) return 2;
    ipl_config_t *cfg = ipl_service_config(svc);
    ipl_config_add(cfg, "pull", IPL_OPT_STR, &pull_endpoint, "tcp://127.0.0.1:7031",
                   "ZeroMQ endpoint to bind the PULL socket that receives RECORDs on");
    ipl_config_add(cfg, "max-label-sets", IPL_OPT_INT, &max_label_sets, "10000",
                   "distinct (model, tenant, pool, endpoint) label sets kept; records beyond "
                   "are counted under \"__overflow__\"");
    ipl_config_range(cfg, "max-label-sets", 1, 1e9);
    int rc = ipl_service_start(svc, argc, argv);
    if (rc != 0) {
        ipl_service_destroy(&svc);
        return rc > 0 ? 0 : 2;
    }

    zsock_t *pull = zsock_new(ZMQ_PULL);
    if (!pull) {
        fprintf(stderr, "inferplane-exporter: cannot create a ZeroMQ socket\n");
        ipl_service_destroy(&svc);
        return 2;
    }
    zsock_set_linger(pull, 0);
    zsock_set_maxmsgsize(pull, S_MAX_FRAME);
    zsock_set_rcvhwm(pull, 100000);
    if (zsock_bind(pull, "%s", pull_endpoint) < 0) {
        fprintf(stderr,
                "inferplane-exporter: cannot bind --pull \"%s\" (from %s): %s; use a free "
                "tcp://host:port\n",
                pull_endpoint, ipl_config_source(cfg, "pull"), zmq_strerror(zmq_errno()));
        zsock_destroy(&pull);
        ipl_service_destroy(&svc);
        return 2;
    }
    exporter_series_t *series =
        exporter_series_new(ipl_service_metrics(svc), (size_t)max_label_sets);
    if (!series || ipl_service_serve(svc) != 0) {
        fprintf(stderr, "inferplane-exporter: cannot start\n");
        exporter_series_destroy(&series);
        zsock_destroy(&pull);
        ipl_service_destroy(&svc);
        return 2;
    }
    char quoted[256];
    IPL_INFO("listening", "pull=%s", ipl_log_quote(quoted, sizeof quoted, pull_endpoint));

    zmq_pollitem_t items[] = {
        {zsock_resolve(pull), 0, ZMQ_POLLIN, 0},
        {NULL, ipl_signal_fd(), ZMQ_POLLIN, 0},
    };
    while (!ipl_signal_stopping()) {
        int n = zmq_poll(items, 2, 1000);
        if (n < 0 && zmq_errno() != EINTR) {
            IPL_ERROR("poll_failed", "error=%d", zmq_errno());
            break;
        }
        if (n > 0 && (items[0].revents & ZMQ_POLLIN)) s_drain(zsock_resolve(pull), series);
    }

    IPL_INFO("stopping", "records=%llu dropped=%llu",
             (unsigned long long)exporter_series_records(series),
             (unsigned long long)exporter_series_dropped(series));
    zsock_destroy(&pull);
    ipl_service_stop(svc); /* admin stopped before the state it reads goes away */
    exporter_series_destroy(&series);
    ipl_service_destroy(&svc);
    return 0;
}
