/*
 * aggregator_server — the aggregator's sockets and receive loop around an aggregator_state.
 *
 *   collectors ──PUSH──► PULL  (bind --pull)      KV_EVENT / LOAD, seq 0
 *                          │ decode → aggregator_state_apply (seq stamped) → publish
 *                          ▼
 *   deciders   ◄──SUB──  PUB   (bind --pub)       the same messages with their state seq,
 *                                                 plus a LOAD per worker every heartbeat
 *   deciders   ──DEALER─► ROUTER (bind --snapshot) SNAPSHOT_REQ → KV_EVENT.../LOAD... then
 *                                                 SNAPSHOT_END{seq, workers, blocks}
 *
 * A frame that does not decode, has the wrong type, or cannot be applied is dropped and
 * counted in inferplane_frames_dropped_total{reason} (reason = ipl_strerror(code), or
 * "multipart"), with a rate-limited log line; it is never fatal.
 *
 * Threading: one thread calls aggregator_server_poll / _run; the admin HTTP threads call the
 * /debug/state handler and the metrics collector, which take the server's lock, as does the
 * loop while it changes the state.
 */
#ifndef AGGREGATOR_SERVER_H
#define AGGREGATOR_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "aggregator_state.h"
#include "ipl_httpd.h"
#include "ipl_metrics.h"

typedef struct aggregator_server aggregator_server_t;

typedef struct {
    const char *pull; /* ZeroMQ endpoints to bind; "tcp://127.0.0.1:*" picks a port */
    const char *pub;
    const char *snapshot;
    uint64_t heartbeat_ms; /* LOAD re-publication period (0: 1000) */
    uint64_t stale_ms;     /* no message from a worker's collector for this long: the worker
                              is published as health UNKNOWN, kv_state DEGRADED (0: 5000) */
} aggregator_config_t;

/* Binds the three sockets. `metrics` is borrowed and must outlive the server; the server
 * registers a collect callback on it, so whoever renders `metrics` (the admin server) must be
 * stopped before the server is destroyed. On failure
 * returns NULL with a human error naming the endpoint in `err`. */
aggregator_server_t *aggregator_server_new(const aggregator_config_t *config,
                                           ipl_metrics_t *metrics, char *err, size_t errlen);
void aggregator_server_destroy(aggregator_server_t **self_p);

/* Registers GET /debug/state on `httpd` (before it starts). The JSON has the incarnation
 * (wall-clock ms of this process's start: it changes when the aggregator restarts), the state
 * seq, index totals, the number of workers per kv_state, and lists every worker with its
 * block count, load, kv_state, health and the age of its last update; `?hashes=N` adds up to
 * N of each worker's block hashes (hex strings). */
void aggregator_server_routes(aggregator_server_t *self, ipl_httpd_t *httpd);

/* Waits up to `timeout_ms` for input (and for `stop_fd` when >= 0), handles everything
 * waiting, and publishes the heartbeat when due. Returns 0, or IPL_E_IO when polling fails. */
int aggregator_server_poll(aggregator_server_t *self, int timeout_ms, int stop_fd);

/* Loops on aggregator_server_poll until ipl_signal_stopping(). */
int aggregator_server_run(aggregator_server_t *self);

/* The endpoint actually bound ("tcp://127.0.0.1:40123"); 0 pull, 1 pub, 2 snapshot. */
const char *aggregator_server_endpoint(const aggregator_server_t *self, int which);

/* The state, for tests (no locking: only when the loop is not running). */
aggregator_state_t *aggregator_server_state(aggregator_server_t *self);

#endif
