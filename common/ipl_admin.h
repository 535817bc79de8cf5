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
 *
 * Access (docs/security.md). The four routes above are open: probes and Prometheus need no
 * credentials and they show nothing a request put there. Every other route on the server is
 * *protected* — what services add changes routing state (POST /v1/route) or shows
 * request-derived data (cache contents, tenants, policies) — unless ipl_admin_open names it:
 *
 *   a token file set (ipl_admin_set_token_file, the services' --admin-token-file):
 *       the request needs "Authorization: Bearer <token>" with one of the file's tokens,
 *       from every address, loopback included; else 401 (missing_admin_token,
 *       invalid_admin_token) with WWW-Authenticate: Bearer
 *   no token file: only loopback clients (127.0.0.0/8, ::1, ::ffff:127.0.0.0/104) are
 *       served, so `make run` and a `kubectl port-forward` work and nothing on the network
 *       does; others get 403 (admin_token_not_configured) saying how to set a token
 *
 * Tokens are compared as SHA-256 digests in constant time (every stored digest is compared,
 * no early exit); no token or digest is logged. A refusal is counted in
 * inferplane_admin_refused_total{reason} and logged (rate-limited) with the path and peer.
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

/* Protects the server's non-open routes with the tokens of `path` (copied): one per line,
 * 16..512 bytes each without blanks inside (`openssl rand -hex 32` makes one), blank lines and
 * lines starting with '#' ignored, at most IPL_ADMIN_MAX_TOKENS — two tokens let a rotation
 * overlap. The file is read now and read again, at most once a second on a protected request,
 * when its device, inode, size or modification time changed (an edit, a `mv` over it, kubelet
 * swapping a mounted Secret); a change that does not parse keeps the previous tokens and is
 * logged (admin_token_reload_rejected). Call before ipl_admin_start. 0, or IPL_E_IO (cannot
 * read it) / IPL_E_INVAL (no token, a token too short or too long) with one line naming the
 * file and the fix in err. NULL self: 0. */
#define IPL_ADMIN_MAX_TOKENS 16
int ipl_admin_set_token_file(ipl_admin_t *self, const char *path, char *err, size_t errlen);
/* Whether a token file is set. */
bool ipl_admin_has_token(const ipl_admin_t *self);

/* Leaves `path` (exact, copied; every method) open like /healthz: for routes that change
 * nothing and show no request data, e.g. the policy service's POST /validate (a pure check of
 * the YAML it is sent, called by admission webhooks that cannot send a token). Call before
 * ipl_admin_start. NULL self: ignored. */
void ipl_admin_open(ipl_admin_t *self, const char *path);

/* Whether a peer address (struct sockaddr; void * keeps <sys/socket.h> out of this header)
 * is a loopback address: 127.0.0.0/8, ::1 or an IPv4-mapped 127.x. NULL: false. */
bool ipl_admin_loopback_peer(const void *sockaddr);

#endif
