/*
 * gateway_auth — who is asking: the tenant of a client request (docs/tenants.md).
 *
 *   with --keys-file:  the API key (Authorization: Bearer KEY, or x-api-key: KEY) names the
 *                      tenant (libs/tenants: digests only, reloaded without a restart);
 *                      missing or unknown → 401, a disabled tenant → 403
 *   without:           anonymous (tenant "")
 *   --trusted-tenant-header NAME (either mode): an authenticating proxy in front says who the
 *                      tenant is; when the header is present its value is the tenant and no
 *                      key is asked for. Never trusted unless configured: a client cannot
 *                      choose its tenant by sending a header.
 *
 * Errors are gateway_api_error_t (the OpenAI shape; the Anthropic endpoints map the status to
 * theirs). No key is ever logged or echoed.
 *
 * Metrics: inferplane_gateway_auth_total{result} — ok | missing | unknown | disabled |
 * trusted_header | anonymous. Thread-safe.
 */
#ifndef GATEWAY_AUTH_H
#define GATEWAY_AUTH_H

#include <stddef.h>

#include "gateway_api.h"
#include "ipl_httpd.h"
#include "ipl_metrics.h"

#define GATEWAY_AUTH_MAX_TENANT 63

typedef struct gateway_auth gateway_auth_t;

typedef struct {
    const char *keys_file;      /* NULL or "": no keys (anonymous unless the header says) */
    const char *tenant_header;  /* NULL or "": none trusted */
    unsigned check_ms;          /* how often the keys file is looked at (0: 1000) */
} gateway_auth_config_t;

/* NULL with err when the keys file does not load (file:line:col...). `metrics` is borrowed
 * and must outlive the object. */
gateway_auth_t *gateway_auth_new(const gateway_auth_config_t *cfg, ipl_metrics_t *metrics,
                                 char *err, size_t errlen);
void gateway_auth_destroy(gateway_auth_t **self_p);

/* The tenant of `req` into tenant[size] ("" anonymous): 0, or -1 with err filled (401, 403). */
int gateway_auth_check(gateway_auth_t *self, const ipl_http_req_t *req, char *tenant, size_t size,
                       gateway_api_error_t *err);

/* The same from the request's header values (NULL: absent): the trusted tenant header's (when
 * one is configured), Authorization and x-api-key. */
int gateway_auth_check_headers(gateway_auth_t *self, const char *tenant_header,
                               const char *authorization, const char *x_api_key, char *tenant,
                               size_t size, gateway_api_error_t *err);

/* Registers GET /debug/tenants on `admin`: the keys file's version, tenants, keys, failed
 * reloads and the last error (names and counts only). */
void gateway_auth_register_admin(gateway_auth_t *self, ipl_httpd_t *admin);

#endif
