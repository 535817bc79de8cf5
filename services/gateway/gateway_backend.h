/*
 * gateway_backend — the gateway's runtime side of the GatewayBackends: where a provider
 * request goes and with which credentials.
 *
 * The policy names each backend's secret (ROUTE_REP → policy->backends: secret_source,
 * secret_name, secret_key), never its value. This class reads the value when a request needs
 * it:
 *
 *   secret_source   read from                                   cached
 *   ─────────────   ─────────────────────────────────────────   ─────────────────────────────
 *   "env"           getenv(secret_name), as is                  no (the environment is fixed)
 *   "file"          the file secret_name, trailing whitespace   yes, re-read when the file's
 *                   and newlines dropped                        inode, size or mtime changes
 *   "secretRef"     <secrets_dir>/<secret_name>/<secret_key>    the same (a Kubernetes Secret
 *                   (how Kubernetes mounts a Secret volume)     volume swaps files atomically)
 *
 * A missing, empty, oversized (> 16 KiB) secret, or one holding a control character (a
 * header would break), is an error (502, "server_error", code "backend_credentials") that
 * names the backend and the source (the variable, the file, the Secret and key) and never
 * the value. Secret values are never logged, and zeroed before their memory is freed.
 *
 * Per backend name the registry also keeps: the requests in flight to it (spec.maxConnections
 * bounds them: HTTP/1.1 carries one request per connection) and whether the warning about
 * tls.insecureSkipVerify was logged (once per backend).
 *
 * Metrics (when a registry is given): inferplane_gateway_backend_refused_total{backend,reason}
 * (credentials | busy), requests not sent to a backend.
 *
 * Thread-safe: one mutex guards the registry (a file secret is read under it: a few hundred
 * bytes from a local or tmpfs file).
 */
#ifndef GATEWAY_BACKEND_H
#define GATEWAY_BACKEND_H

#include <stdbool.h>
#include <stddef.h>

#include "gateway_api.h"
#include "ipl_metrics.h"
#include "ipl_proto.h"

#define GATEWAY_BACKEND_SECRET_MAX 16384 /* bytes of a secret, at most */

typedef struct gateway_backend gateway_backend_t;
typedef struct gateway_backend_slot gateway_backend_slot_t;

/* `secrets_dir` (copied; NULL or "": "/var/run/secrets/inferplane") is where Kubernetes
 * Secrets are mounted, one directory per Secret. `metrics` is borrowed (NULL: none). NULL on
 * allocation failure. */
gateway_backend_t *gateway_backend_new(const char *secrets_dir, ipl_metrics_t *metrics);
/* No slot may be held any more. */
void gateway_backend_destroy(gateway_backend_t **self_p);

/* The secret of backend `b` (borrowed), read or taken from the cache now. Returns 0 with a
 * new string in *secret_p (free it with gateway_backend_secret_free), or NULL when b->auth is
 * "none" or ""; else IPL_E_NOTFOUND / IPL_E_INVAL with *err filled (502 backend_credentials). */
int gateway_backend_secret(gateway_backend_t *self, const ipl_backend_t *b, char **secret_p,
                           gateway_api_error_t *err);
/* Zeroes and frees a secret; NULLs *secret_p. */
void gateway_backend_secret_free(char **secret_p);

/* The request header line carrying `secret` for backend `b`: "Authorization: Bearer <secret>"
 * (auth "bearer") or "<auth_header>: <secret>" (auth "header"). Returns 0 with a new line
 * in *line_p (free it with gateway_backend_secret_free: it holds the secret), or NULL for auth
 * "none"; IPL_E_INVAL with *err filled for an unknown auth or a malformed header name;
 * IPL_E_NOMEM. */
int gateway_backend_auth_line(const ipl_backend_t *b, const char *secret, char **line_p,
                              gateway_api_error_t *err);

/* The CA bundle file to verify the backend with: tls.caBundle, else the mounted
 * tls.caSecretRef (<secrets_dir>/<name>/<key>), else "" (the system's CAs). Into out. */
const char *gateway_backend_ca_file(const gateway_backend_t *self, const ipl_backend_t *b,
                                    char *out, size_t size);

/* Logs, once per backend name, that `b` is reached without certificate verification. */
void gateway_backend_warn_insecure(gateway_backend_t *self, const ipl_backend_t *b);

/* Takes one of the backend's request slots: NULL (and counted as busy) when
 * b->max_connections requests are in flight already (0: no limit), else a slot to give
 * back with gateway_backend_release (exactly once, from any thread). */
gateway_backend_slot_t *gateway_backend_acquire(gateway_backend_t *self, const ipl_backend_t *b);
void gateway_backend_release(gateway_backend_t *self, gateway_backend_slot_t **slot_p);
/* Requests in flight to the backend named `name` (tests). */
int gateway_backend_inflight(gateway_backend_t *self, const char *name);

/* The URL for a client request on `client_path` sent to a backend with base URL `base` (an
 * OpenAI SDK base_url: it usually includes the /v1): the client path's leading "/v1" is
 * replaced by the base, without doubled slashes:
 *   "http://h:p/v1" + "/v1/chat/completions"  → "http://h:p/v1/chat/completions"
 *   "http://h:p/api/" + "/v1/completions"     → "http://h:p/api/completions"
 * Returns 0, or IPL_E_INVAL when it does not fit in `size`. */
int gateway_backend_url(const char *base, const char *client_path, char *out, size_t size);

/* `url` without its user information ("https://user:pw@h/v1" → "https://h/v1"), for logs,
 * headers and records. Into out (cut to fit). */
const char *gateway_backend_shown_url(const char *url, char *out, size_t size);

/* The backend named `name` in `policy` (borrowed from it), or NULL. */
const ipl_backend_t *gateway_backend_find(const ipl_policy_t *policy, const char *name);

#endif
