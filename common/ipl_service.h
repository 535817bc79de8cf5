/*
 * ipl_service — what every inferplane process does the same way, in one place:
 * configuration (ipl_config, with the common options below), logging, signal handling,
 * the metrics registry with process metrics, and the admin HTTP server.
 *
 * Common options every service takes:
 *   --config FILE          YAML file with option: value pairs
 *   --log-level LEVEL      debug|info|warn|error (default info)
 *   --admin-listen ADDR    admin HTTP server address (default per service, see main.c)
 *   --admin-token-file F   the admin token(s) that protected admin routes ask for (ipl_admin:
 *                          everything but /healthz, /readyz, /metrics, /version); unset: those
 *                          routes answer loopback clients only (docs/security.md)
 *   --curve-dir DIR        CURVE on every control-plane ZeroMQ socket, with the cluster
 *                          certificate in DIR (ipl_curve; INFERPLANE_CURVE_DIR); unset: clear
 *
 *   int main(int argc, char **argv) {
 *       ipl_service_t *svc = ipl_service_new("exporter", "Prometheus exporter of request
 *                                            records", "127.0.0.1:9105");
 *       ipl_config_add(ipl_service_config(svc), "pull", IPL_OPT_STR, &pull, "tcp://...", "...");
 *       int rc = ipl_service_start(svc, argc, argv);  // config, logs, signals, admin bound
 *       if (rc != 0) { ipl_service_destroy(&svc); return rc > 0 ? 0 : 2; }
 *       ipl_httpd_route(ipl_admin_httpd(ipl_service_admin(svc)), "GET", "/debug/x", fn, st);
 *       ipl_service_serve(svc);                       // admin HTTP starts answering
 *       while (!ipl_signal_stopping()) { ... poll, including ipl_signal_fd() ... }
 *       ipl_service_stop(svc);                        // admin handlers done
 *       ... destroy what the handlers read and what updates metrics ...
 *       ipl_service_destroy(&svc);
 *   }
 */
#ifndef IPL_SERVICE_H
#define IPL_SERVICE_H

#include <stdbool.h>

#include "ipl_admin.h"
#include "ipl_config.h"
#include "ipl_metrics.h"

typedef struct ipl_service ipl_service_t;

/* `name` is the service name ("gateway"); the binary is inferplane-<name>. Strings copied. */
ipl_service_t *ipl_service_new(const char *name, const char *summary,
                               const char *default_admin_listen);
/* Stops the admin server (ipl_service_stop) and frees everything the service owns,
 * including the metrics registry and the config's strings. */
void ipl_service_destroy(ipl_service_t **self_p);

/* Stops the admin server and waits for its handlers; the metrics registry and the config
 * stay valid until destroy. For an orderly shutdown of a service whose state is read by
 * admin handlers (readiness, /debug) and updates metrics:
 *     ipl_service_stop(svc); my_state_destroy(&st); ipl_service_destroy(&svc);
 * Idempotent. Logs "stopped". */
void ipl_service_stop(ipl_service_t *self);

ipl_config_t *ipl_service_config(ipl_service_t *self);

/* Parses configuration (printing errors to stderr), initialises logging, installs signal
 * handlers, creates the metrics registry and binds the admin server.
 * Returns 0 to proceed, 1 when --help/--version was printed, -1 on error (already printed). */
int ipl_service_start(ipl_service_t *self, int argc, char **argv);

/* After ipl_service_start: register extra routes on ipl_admin_httpd(ipl_service_admin(svc)),
 * set readiness, then call this to start serving admin HTTP. Logs "started". 0 or IPL_E_IO. */
int ipl_service_serve(ipl_service_t *self);

ipl_admin_t *ipl_service_admin(ipl_service_t *self);
ipl_metrics_t *ipl_service_metrics(ipl_service_t *self);
const char *ipl_service_name(const ipl_service_t *self);

#endif
