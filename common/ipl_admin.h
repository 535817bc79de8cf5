/*
 * ipl_admin — the admin endpoints every service serves on its admin port:
 *
 *   GET /healthz  200 "ok" while the process runs (liveness)
 *   GET /readyz   200 when the readiness callback says ready, else 503; JSON body
 *                 {"ready":bool,"detail":"..."} (the detail says why not, or e.g. the
 *                 state sequence and lag of a decider)
 *   GET /metrics  the service's metrics registry in Prometheus text format
 *   GET /version  {"service":"gateway","version":"..."}
 *
 * Services add their own routes (/debug/..., the decider's POST /v1/route) to the same
 * server through ipl_admin_httpd() before ipl_admin_start().
 */
#ifndef IPL_ADMIN_H
#define IPL_ADMIN_H

#include <stdbool.h>
#include <stddef.h>

#include "ipl_httpd.h"
#include "ipl_metrics.h"

typedef struct ipl_admin ipl_admin_t;

/* Readiness: return true when ready; write a short human detail into `detail` either way. */
typedef bool(ipl_admin_ready_fn)(void *arg, char *detail, size_t size);

/* `metrics` is borrowed and must outlive the admin server (NULL: /metrics is empty).
 * NULL on bind failure, errno as for ipl_httpd_new.
 * A NULL `self` (the admin server is switched off) is accepted by every function below:
 * ipl_admin_httpd returns NULL, ipl_httpd_route(NULL, ...) ignores the route, start returns 0,
 * port returns 0; so a main.c needs no special case for --admin-listen off. */
ipl_admin_t *ipl_admin_new(const char *listen, const char *service, ipl_metrics_t *metrics);
void ipl_admin_destroy(ipl_admin_t **self_p);
/* Without a callback the service is ready as soon as the admin server is started. */
void ipl_admin_set_ready(ipl_admin_t *self, ipl_admin_ready_fn *fn, void *arg);
ipl_httpd_t *ipl_admin_httpd(ipl_admin_t *self);
int ipl_admin_start(ipl_admin_t *self);
int ipl_admin_port(const ipl_admin_t *self);

#endif
