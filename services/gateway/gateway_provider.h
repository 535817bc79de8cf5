/*
 * gateway_provider — one request's trip to an InferenceProvider (a ROUTE_REP with
 * target_kind "provider"): the transfer's URL, credentials and TLS settings from its
 * GatewayBackend, and the response on its way back.
 *
 *   handler                                             the transfer's callbacks (same thread)
 *   gateway_provider_new      backend from the gateway's policy snapshot (by ROUTE_REP.backend),
 *                             its secret (gateway_backend), a request slot, the URL
 *   gateway_provider_xfer_opts  headers (+ credentials), CA bundle, timeouts → gateway_proxy
 *   gateway_provider_begin    upstream status + type known ──► gateway_provider_write (each chunk)
 *                                                              gateway_provider_finish (on_done)
 *   gateway_provider_destroy  (whoever frees the request: releases the slot, zeroes the secret)
 *
 * The response the client sees:
 *   2xx        the upstream body, streamed as it comes, with every "model" rewritten to the
 *              name the client asked for (gateway_rewrite: a JSON body or each SSE event);
 *   4xx / 5xx  the gateway's own OpenAI error (same HTTP status) built from the upstream one:
 *              its message with the backend's secret blanked out and the remote model name
 *              replaced; for 401 and 403 (the backend refused the gateway's credentials) the
 *              upstream message is not repeated at all (providers echo part of the key), the
 *              code is "provider_auth_failed".
 * The URL is the backend's, from the gateway's own policy (the credentials go only where that
 * policy sends them), and the credentials are never logged, shown or recorded.
 *
 * Not thread-safe: used by one thread at a time, handed over with the transfer.
 */
#ifndef GATEWAY_PROVIDER_H
#define GATEWAY_PROVIDER_H

#include <stddef.h>

#include "gateway_api.h"
#include "gateway_backend.h"
#include "gateway_proxy.h"
#include "ipl_proto.h"

#define GATEWAY_PROVIDER_ERROR_MAX 65536 /* bytes of an upstream error body read */

typedef struct gateway_provider gateway_provider_t;

/* What the decision says (strings borrowed for the call). */
typedef struct {
    const char *provider;     /* ROUTE_REP.worker: the InferenceProvider's name */
    const char *backend;      /* ROUTE_REP.backend: the GatewayBackend's name */
    const char *client_model; /* the model the client asked for */
    const char *remote_model; /* ROUTE_REP.model (NULL or "": from the policy's provider
                                 models, else the client's) */
    const char *client_path;  /* the client's path, "/v1/chat/completions" */
} gateway_provider_route_t;

/* Prepares the trip. `backends` is borrowed and must outlive the object; `policy` is read
 * during the call only. NULL with *err filled when the backend is unknown (502
 * backend_unknown), speaks another protocol (502 backend_protocol), has no usable secret
 * (502 backend_credentials) or is at spec.maxConnections (503 backend_busy). */
gateway_provider_t *gateway_provider_new(gateway_backend_t *backends, const ipl_policy_t *policy,
                                         const gateway_provider_route_t *route,
                                         gateway_api_error_t *err);
void gateway_provider_destroy(gateway_provider_t **self_p);

const char *gateway_provider_url(const gateway_provider_t *self);       /* where to POST */
const char *gateway_provider_shown_url(const gateway_provider_t *self); /* base, no userinfo */
const char *gateway_provider_remote_model(const gateway_provider_t *self);
const char *gateway_provider_backend(const gateway_provider_t *self);
/* The backend's response timeout (spec.timeouts.responseMs), or `fallback` when it has none. */
int gateway_provider_response_timeout_ms(const gateway_provider_t *self, int fallback);

/* Fills *opts for gateway_proxy_start_with: the lines of `extra` (NULL-terminated, at most 6;
 * borrowed: keep them alive until the transfer started), then the credentials. *opts points
 * into self. */
void gateway_provider_xfer_opts(gateway_provider_t *self, const char *const *extra,
                                gateway_xfer_opts_t *opts);

/* The upstream answered `status` with `content_type`: chooses how its body is passed on.
 * Returns the content type to answer the client with. */
const char *gateway_provider_begin(gateway_provider_t *self, int status, const char *content_type);
/* gateway_xfer_cb_t.on_write: passes a chunk on to the client's fd (rewritten or held). */
int gateway_provider_write(gateway_provider_t *self, int fd, const char *data, size_t len);
/* Writes what is still held (the rest of a line, the error body) when the upstream ended. */
int gateway_provider_finish(gateway_provider_t *self, int fd);

/* The client's error body for an upstream error (`body`, `len`: as received, maybe not JSON):
 * see the header comment. `secret` and `remote_model` may be NULL. Returns a malloc'd body
 * (*out_len its length), NULL on allocation failure. */
char *gateway_provider_error_body(const char *provider, const char *backend, int status,
                                  const char *body, size_t len, const char *secret,
                                  const char *remote_model, const char *client_model,
                                  size_t *out_len);

#endif
