/*
 * exporter_server — the exporter's socket and receive loop around an exporter_series.
 *
 *   gateways, deciders ──PUSH──► PULL (bind --pull) ──► exporter_series ──► admin /metrics
 *
 * A RECORD is one frame: a multipart message is dropped whole and counted as
 * inferplane_frames_dropped_total{reason="multipart"} (a frame that does not decode, or is not
 * a RECORD, is counted by exporter_series), with a rate-limited log line; never fatal.
 *
 * Threading: one thread calls exporter_server_run; the admin server's threads render the
 * metrics the series updates (exporter_series.h).
 */
#ifndef EXPORTER_SERVER_H
#define EXPORTER_SERVER_H

#include <stddef.h>

#include "exporter_series.h"
#include "ipl_metrics.h"

typedef struct exporter_server exporter_server_t;

typedef struct {
    const char *pull;        /* ZeroMQ endpoint to bind; "tcp://127.0.0.1:*" picks a port */
    const char *pull_source; /* where --pull came from ("flag", "env", ...), for the bind error */
    exporter_series_config_t series; /* the caps (0: the defaults) */
} exporter_server_config_t;

/* Binds the PULL socket and makes the series. `metrics` is borrowed and must outlive the
 * server (stop whoever renders it before destroying the server). On failure returns NULL
 * with a human error naming the endpoint in `err`. */
exporter_server_t *exporter_server_new(const exporter_server_config_t *config,
                                       ipl_metrics_t *metrics, char *err, size_t errlen);
void exporter_server_destroy(exporter_server_t **self_p);

/* Receives and applies RECORDs until ipl_signal_stopping() (or until polling fails, which is
 * logged). */
void exporter_server_run(exporter_server_t *self);

/* The endpoint actually bound ("tcp://127.0.0.1:40123"). */
const char *exporter_server_endpoint(const exporter_server_t *self);

/* The series the records land in (borrowed: its counters may be read from any thread). */
exporter_series_t *exporter_server_series(exporter_server_t *self);

#endif
