/*
 * gateway_auth — see the header.
 */
#include "gateway_auth.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipl_log.h"
#include "tenants_store.h"

struct gateway_auth {
    tenants_store_t *store; /* NULL: no keys */
    char *tenant_header;    /* NULL: none */
    ipl_metric_t *m_ok, *m_missing, *m_unknown, *m_disabled, *m_trusted, *m_anonymous;
};

static ipl_metric_t *s_counter(ipl_metrics_t *m, const char *result)
{
    char labels[64];
    snprintf(labels, sizeof labels, "result=\"%s\"", result);
    return ipl_metrics_counter(m, "inferplane_gateway_auth_total",
                               "Client requests by authentication result.", labels);
}

// Logs each load of the keys file (counts only) and each rejected change (its message).
static void s_reloaded(void *arg, int result, const char *error)
{
    gateway_auth_t *self = arg;
    tenants_store_stats_t st;
    tenants_store_stats(self->store, &st);
    if (result > 0)
        IPL_INFO("tenants_loaded", "version=%llu tenants=%zu keys=%zu",
                 (unsigned long long)st.version, st.tenants, st.keys);
    else
        IPL_ERROR("tenants_reload_rejected", "version=%llu error=\"%s\" (the last good keys stay)",
                  (unsigned long long)st.version, error ? error : "");
}

gateway_auth_t *gateway_auth_new(const gateway_auth_config_t *cfg, ipl_metrics_t *metrics,
                                 char *err, size_t errlen)
{
    gateway_auth_t *self = calloc(1, sizeof *self);
    if (!self) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (cfg->keys_file && *cfg->keys_file) {
        char why[512];
        self->store = tenants_store_new(cfg->keys_file, cfg->check_ms, why, sizeof why);
        if (!self->store) {
            snprintf(err, errlen, "--keys-file: %s", why);
            free(self);
            return NULL;
        }
        tenants_store_set_observer(self->store, s_reloaded, self);
        s_reloaded(self, 1, NULL);
    }
    if (cfg->tenant_header && *cfg->tenant_header) self->tenant_header = strdup(cfg->tenant_header);
    self->m_ok = s_counter(metrics, "ok");
    self->m_missing = s_counter(metrics, "missing");
    self->m_unknown = s_counter(metrics, "unknown");
    self->m_disabled = s_counter(metrics, "disabled");
    self->m_trusted = s_counter(metrics, "trusted_header");
    self->m_anonymous = s_counter(metrics, "anonymous");
    return self;
}

void gateway_auth_destroy(gateway_auth_t **self_p)
{
    if (!self_p || !*self_p) return;
    gateway_auth_t *self = *self_p;
    tenants_store_destroy(&self->store);
    free(self->tenant_header);
    free(self);
    *self_p = NULL;
}

// A tenant name from a trusted header: 1..63 of [A-Za-z0-9._-], else false.
static bool s_tenant_ok(const char *v)
{
    size_t n = strlen(v);
    if (!n || n > GATEWAY_AUTH_MAX_TENANT) return false;
    for (size_t i = 0; i < n; i++) {
        char c = v[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return false;
    }
    return true;
}

int gateway_auth_check(gateway_auth_t *self, const ipl_http_req_t *req, char *tenant, size_t size,
                       gateway_api_error_t *err)
{
    return gateway_auth_check_headers(
        self, self->tenant_header ? ipl_http_req_header(req, self->tenant_header) : NULL,
        ipl_http_req_header(req, "authorization"), ipl_http_req_header(req, "x-api-key"), tenant,
        size, err);
}

int gateway_auth_check_headers(gateway_auth_t *self, const char *tenant_header,
                               const char *authorization, const char *x_api_key, char *tenant,
                               size_t size, gateway_api_error_t *err)
{
    tenant[0] = '\0';
    if (self->tenant_header) {
        const char *v = tenant_header;
        if (v) {
            if (!s_tenant_ok(v)) {
                gateway_api_error_set(err, 400, "invalid_request_error", NULL, "invalid_tenant",
                                      "the %s header must be 1..%d of A-Z a-z 0-9 . _ -",
                                      self->tenant_header, GATEWAY_AUTH_MAX_TENANT);
                return -1;
            }
            snprintf(tenant, size, "%s", v);
            ipl_metric_inc(self->m_trusted);
            return 0;
        }
    }
    if (!self->store) {
        ipl_metric_inc(self->m_anonymous);
        return 0;
    }
    size_t len = 0;
    const char *key = tenants_keys_from_headers(authorization, x_api_key, &len);
    switch (tenants_store_lookup(self->store, key, len, tenant, size)) {
    case TENANTS_OK:
        ipl_metric_inc(self->m_ok);
        return 0;
    case TENANTS_MISSING:
        ipl_metric_inc(self->m_missing);
        gateway_api_error_set(err, 401, "invalid_request_error", NULL, "missing_api_key",
                              "no API key: send it as \"Authorization: Bearer KEY\" or "
                              "\"x-api-key: KEY\"");
        return -1;
    case TENANTS_DISABLED:
        ipl_metric_inc(self->m_disabled);
        gateway_api_error_set(err, 403, "permission_error", NULL, "tenant_disabled",
                              "tenant \"%s\" is disabled; ask the platform team", tenant);
        tenant[0] = '\0';
        return -1;
    case TENANTS_UNKNOWN:
    default:
        ipl_metric_inc(self->m_unknown);
        gateway_api_error_set(err, 401, "invalid_request_error", NULL, "invalid_api_key",
                              "the API key is not valid");
        return -1;
    }
}

static void s_debug_tenants(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp)
{
    (void)req;
    gateway_auth_t *self = arg;
    if (self->store) (void)tenants_store_check(self->store, NULL, 0); // what the file says now
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "mode", self->store ? "keys" : "anonymous");
    cJSON_AddStringToObject(root, "trusted_tenant_header",
                            self->tenant_header ? self->tenant_header : "");
    if (self->store) {
        tenants_store_stats_t st;
        tenants_store_stats(self->store, &st);
        cJSON_AddNumberToObject(root, "version", (double)st.version);
        cJSON_AddNumberToObject(root, "tenants", (double)st.tenants);
        cJSON_AddNumberToObject(root, "keys", (double)st.keys);
        cJSON_AddNumberToObject(root, "failed_reloads", (double)st.failures);
        cJSON_AddStringToObject(root, "last_error", st.last_error);
    }
    ipl_http_resp_json(resp, 200, &root);
}

void gateway_auth_register_admin(gateway_auth_t *self, ipl_httpd_t *admin)
{
    ipl_httpd_route(admin, "GET", "/debug/tenants", s_debug_tenants, self);
}
