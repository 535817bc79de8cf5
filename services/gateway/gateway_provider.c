/*
 * gateway_provider — a request's trip to a provider. See gateway_provider.h.
 */
#include "gateway_provider.h"

#include <assert.h>
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway_rewrite.h"
#include "gateway_sse.h"
#include "gateway_verdict.h"
#include "ipl_error.h"
#include "ipl_httpd.h"
#include "ipl_log.h"

#define S_EXTRA_MAX   6
#define S_URL_MAX     2048
#define S_REWRITE_MAX (1u << 20) /* a line / a body's start held to rewrite its model */
#define S_REDACTED    "[redacted]"
#define S_FIELD_MAX   128 /* an upstream error's type, code or param kept when shorter */

struct gateway_provider {
    gateway_backend_t *backends;
    gateway_backend_slot_t *slot;
    char *provider, *backend, *client_model, *remote_model;
    char *secret;    /* for redaction; zeroed when freed */
    char *auth_line; /* the credentials header, or NULL */
    char url[S_URL_MAX], shown[S_URL_MAX], ca[4096];
    bool insecure;
    int connect_ms, response_ms;
    const char *headers[S_EXTRA_MAX + 2];
    /* the response */
    int status;
    gateway_rewrite_t *rewrite; /* 2xx */
    char *error;                /* 4xx/5xx: the body so far (bounded) */
    size_t error_len;
};

static const char *s_str(const char *s)
{
    return s ? s : "";
}

/* The provider's remote name for `model` in `policy`, or NULL. */
static const char *s_remote_name(const ipl_policy_t *policy, const char *provider,
                                 const char *model)
{
    for (uint32_t i = 0; policy && i < policy->provider_models_len; i++) {
        const ipl_provider_model_t *m = &policy->provider_models[i];
        if (m->provider && m->name && !strcmp(m->provider, provider) && !strcmp(m->name, model))
            return m->remote_name && m->remote_name[0] ? m->remote_name : NULL;
    }
    return NULL;
}

/* Everything but the secret and the slot, from the backend. */
static int s_setup(gateway_provider_t *self, const ipl_backend_t *b, const char *client_path,
                   gateway_api_error_t *err)
{
    const char *proto = s_str(b->protocol);
    if (proto[0] && strcmp(proto, "openai") != 0) {
        gateway_api_error_set(err, 502, "server_error", NULL, "backend_protocol",
                              "backend `%s` speaks `%s`; the gateway forwards only the OpenAI "
                              "protocol (spec.protocol: openai)",
                              self->backend, proto);
        return IPL_E_INVAL;
    }
    gateway_backend_shown_url(s_str(b->url), self->shown, sizeof(self->shown));
    if (!b->url || !b->url[0] ||
        gateway_backend_url(b->url, client_path, self->url, sizeof(self->url)) != 0) {
        gateway_api_error_set(err, 502, "server_error", NULL, "bad_decision",
                              "backend `%s`: cannot build the URL from `%s` and `%s`",
                              self->backend, self->shown, s_str(client_path));
        return IPL_E_INVAL;
    }
    gateway_backend_ca_file(self->backends, b, self->ca, sizeof(self->ca));
    self->insecure = b->insecure_skip_verify;
    if (self->insecure) gateway_backend_warn_insecure(self->backends, b);
    self->connect_ms = b->connect_ms > 0 && b->connect_ms < 600000 ? (int)b->connect_ms : 0;
    self->response_ms = b->response_ms > 0 && b->response_ms < 86400000 ? (int)b->response_ms : 0;
    return 0;
}

gateway_provider_t *gateway_provider_new(gateway_backend_t *backends, const ipl_policy_t *policy,
                                         const gateway_provider_route_t *route,
                                         gateway_api_error_t *err)
{
    assert(backends && route && err);
    gateway_provider_t *self = calloc(1, sizeof(*self));
    if (!self) goto nomem;
    self->backends = backends;
    const char *remote =
        route->remote_model && route->remote_model[0]
            ? route->remote_model
            : s_remote_name(policy, s_str(route->provider), s_str(route->client_model));
    self->provider = strdup(s_str(route->provider));
    self->backend = strdup(s_str(route->backend));
    self->client_model = strdup(s_str(route->client_model));
    self->remote_model = strdup(remote ? remote : s_str(route->client_model));
    if (!self->provider || !self->backend || !self->client_model || !self->remote_model) goto nomem;
    const ipl_backend_t *b = gateway_backend_find(policy, self->backend);
    if (!b) {
        gateway_api_error_set(err, 502, "server_error", NULL, "backend_unknown",
                              "provider `%s`: backend `%s` is not in the gateway's policy (yet); "
                              "retry shortly",
                              self->provider, self->backend);
        goto fail;
    }
    if (s_setup(self, b, route->client_path, err) != 0) goto fail;
    if (gateway_backend_secret(backends, b, &self->secret, err) != 0) goto fail;
    int rc = gateway_backend_auth_line(b, self->secret, &self->auth_line, err);
    if (rc == IPL_E_NOMEM) goto nomem;
    if (rc != 0) goto fail;
    self->slot = gateway_backend_acquire(backends, b);
    if (!self->slot) {
        gateway_api_error_set(err, 503, "server_error", NULL, "backend_busy",
                              "backend `%s` has %" PRIu64 " requests in flight from this gateway, "
                              "its spec.maxConnections; retry shortly",
                              self->backend, b->max_connections);
        goto fail;
    }
    return self;
nomem:
    gateway_api_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
fail:
    gateway_provider_destroy(&self);
    return NULL;
}

void gateway_provider_destroy(gateway_provider_t **self_p)
{
    assert(self_p);
    gateway_provider_t *self = *self_p;
    if (!self) return;
    gateway_backend_release(self->backends, &self->slot);
    gateway_backend_secret_free(&self->secret);
    gateway_backend_secret_free(&self->auth_line);
    gateway_rewrite_destroy(&self->rewrite);
    if (self->error) explicit_bzero(self->error, self->error_len); /* it may echo the key */
    free(self->error);
    free(self->provider);
    free(self->backend);
    free(self->client_model);
    free(self->remote_model);
    free(self);
    *self_p = NULL;
}

const char *gateway_provider_url(const gateway_provider_t *self)
{
    return self->url;
}

const char *gateway_provider_shown_url(const gateway_provider_t *self)
{
    return self->shown;
}

const char *gateway_provider_remote_model(const gateway_provider_t *self)
{
    return self->remote_model;
}

const char *gateway_provider_backend(const gateway_provider_t *self)
{
    return self->backend;
}

int gateway_provider_response_timeout_ms(const gateway_provider_t *self, int fallback)
{
    return self->response_ms > 0 ? self->response_ms : fallback;
}

void gateway_provider_xfer_opts(gateway_provider_t *self, const char *const *extra,
                                gateway_xfer_opts_t *opts)
{
    size_t n = 0;
    for (; extra && extra[n] && n < S_EXTRA_MAX; n++)
        self->headers[n] = extra[n];
    if (self->auth_line) self->headers[n++] = self->auth_line;
    self->headers[n] = NULL;
    *opts = (gateway_xfer_opts_t){.headers = self->headers,
                                  .connect_timeout_ms = self->connect_ms,
                                  .ca_bundle = self->ca,
                                  .insecure = self->insecure,
                                  .shown_url = self->shown};
}

/* ---- the response -------------------------------------------------------------------------- */

const char *gateway_provider_begin(gateway_provider_t *self, int status, const char *content_type)
{
    self->status = status;
    if (status >= 400) return "application/json"; /* the gateway's own error body */
    self->rewrite =
        gateway_rewrite_new(gateway_sse_mode_for(content_type), self->client_model, S_REWRITE_MAX);
    return content_type && content_type[0] ? content_type : "application/json";
}

static int s_fd_sink(void *arg, const char *data, size_t len)
{
    return ipl_http_write_all(*(int *)arg, data, len);
}

int gateway_provider_write(gateway_provider_t *self, int fd, const char *data, size_t len)
{
    if (self->status >= 400) {
        size_t room = GATEWAY_PROVIDER_ERROR_MAX - self->error_len;
        size_t take = len < room ? len : room;
        if (!take) return 0; /* beyond the bound: dropped */
        char *p = realloc(self->error, self->error_len + take + 1);
        if (!p) return IPL_E_NOMEM;
        memcpy(p + self->error_len, data, take);
        self->error = p;
        self->error_len += take;
        self->error[self->error_len] = '\0';
        return 0;
    }
    if (!self->rewrite) return IPL_E_NOMEM; /* begin could not make it: end the transfer */
    return gateway_rewrite_feed(self->rewrite, data, len, s_fd_sink, &fd);
}

int gateway_provider_finish(gateway_provider_t *self, int fd)
{
    if (self->status < 400) {
        if (!self->rewrite) return 0;
        int rc = gateway_rewrite_finish(self->rewrite, s_fd_sink, &fd);
        const gateway_rewrite_stats_t *st = gateway_rewrite_stats(self->rewrite);
        if (st->overlong)
            IPL_LOG_EVERY(10, IPL_LOG_WARN, "provider_line_overlong",
                          "provider=%s backend=%s lines=%" PRIu64 " bound=%u: passed on without "
                          "rewriting their model",
                          self->provider, self->backend, st->overlong, S_REWRITE_MAX);
        return rc;
    }
    size_t len = 0;
    char *body = gateway_provider_error_body(self->provider, self->backend, self->status,
                                             self->error, self->error_len, self->secret,
                                             self->remote_model, self->client_model, &len);
    int rc = body ? ipl_http_write_all(fd, body, len) : IPL_E_NOMEM;
    free(body);
    return rc;
}

/* ---- error bodies -------------------------------------------------------------------------- */

/* A malloc'd copy of `s` with every `needle` replaced by `with` (none when needle is ""). */
static char *s_replace_all(const char *s, const char *needle, const char *with)
{
    size_t nl = needle ? strlen(needle) : 0, wl = strlen(with), count = 0;
    for (const char *p = s; nl && (p = strstr(p, needle)); p += nl)
        count++;
    char *out = malloc(strlen(s) + count * wl + 1);
    if (!out) return NULL;
    char *o = out;
    for (const char *p = s;;) {
        const char *hit = nl ? strstr(p, needle) : NULL;
        size_t n = hit ? (size_t)(hit - p) : strlen(p);
        memcpy(o, p, n);
        o += n;
        if (!hit) break;
        memcpy(o, with, wl);
        o += wl;
        p = hit + nl;
    }
    *o = '\0';
    return out;
}

/* `text` with the secret blanked out and the remote model named as the client's. */
static char *s_clean(const char *text, const char *secret, const char *remote, const char *local)
{
    char *a = s_replace_all(text, secret, S_REDACTED);
    bool swap = remote && remote[0] && local && strcmp(remote, local) != 0;
    char *b = a && swap ? s_replace_all(a, remote, local) : NULL;
    if (!swap) return a;
    free(a);
    return b;
}

/* A short string field of the upstream error, cleaned, or NULL. */
static char *s_field(const cJSON *err, const char *name, const char *secret, const char *remote,
                     const char *local)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(err, name);
    if (!cJSON_IsString(v) || !v->valuestring[0] || strlen(v->valuestring) >= S_FIELD_MAX)
        return NULL;
    return s_clean(v->valuestring, secret, remote, local);
}

char *gateway_provider_error_body(const char *provider, const char *backend, int status,
                                  const char *body, size_t len, const char *secret,
                                  const char *remote_model, const char *client_model,
                                  size_t *out_len)
{
    cJSON *root = body && len ? cJSON_ParseWithLength(body, len) : NULL;
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(root, "error");
    const cJSON *msg = cJSON_IsObject(err)   ? cJSON_GetObjectItemCaseSensitive(err, "message")
                       : cJSON_IsString(err) ? err
                                             : cJSON_GetObjectItemCaseSensitive(root, "message");
    bool auth = status == 401 || status == 403;
    char *upstream = !auth && cJSON_IsString(msg)
                         ? s_clean(msg->valuestring, secret, remote_model, client_model)
                         : NULL;
    const cJSON *obj = cJSON_IsObject(err) ? err : NULL;
    char *type = s_field(obj, "type", secret, remote_model, client_model);
    char *code = auth ? NULL : s_field(obj, "code", secret, remote_model, client_model);
    char *param = s_field(obj, "param", secret, remote_model, client_model);
    char message[1024];
    if (auth)
        snprintf(message, sizeof(message),
                 "provider `%s` refused the credentials of backend `%s` (HTTP %d); the "
                 "operator must fix the backend's secret",
                 s_str(provider), s_str(backend), status);
    else if (upstream && upstream[0])
        snprintf(message, sizeof(message), "provider `%s` answered HTTP %d: %.800s",
                 s_str(provider), status, upstream);
    else
        snprintf(message, sizeof(message), "provider `%s` answered HTTP %d%s", s_str(provider),
                 status, root ? "" : " (not an OpenAI error body)");
    char *out = gateway_api_error_body(type ? type : gateway_verdict_type(status), message, param,
                                       auth   ? "provider_auth_failed"
                                       : code ? code
                                              : "provider_error",
                                       out_len);
    free(upstream);
    free(type);
    free(code);
    free(param);
    cJSON_Delete(root);
    return out;
}
