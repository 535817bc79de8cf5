/*
 * ipl_admin — /healthz, /readyz, /metrics and /version on an ipl_httpd server.
 *
 * Handlers run on MHD connection threads; the readiness callback is read under a mutex so
 * that a service may (re)set it at any time.
 */
#include "ipl_admin.h"

#include <assert.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipl_error.h"
#include "ipl_signal.h"

#ifndef IPL_VERSION
#define IPL_VERSION "0.0.0-unknown"
#endif

#define S_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

struct ipl_admin {
    ipl_httpd_t *httpd;
    char *service;
    ipl_metrics_t *metrics; /* borrowed */
    pthread_mutex_t lock;   /* guards ready_fn / ready_arg */
    ipl_admin_ready_fn *ready_fn;
    void *ready_arg;
};

/* Sends a cJSON document (deleted here) as application/json. */
static void s_send_json(ipl_http_resp_t *resp, int status, cJSON *root)
{
    ipl_http_resp_json(resp, status, &root);
}

static void s_healthz(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp)
{
    (void)arg;
    (void)req;
    ipl_http_resp_set(resp, 200, "text/plain; charset=utf-8", "ok\n", 3);
}

static void s_readyz(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp)
{
    (void)req;
    ipl_admin_t *self = arg;
    char detail[256] = "";
    bool ready;
    pthread_mutex_lock(&self->lock);
    ipl_admin_ready_fn *fn = self->ready_fn;
    void *fn_arg = self->ready_arg;
    pthread_mutex_unlock(&self->lock);
    if (ipl_signal_stopping()) { /* draining: take the process out of load balancing */
        ready = false;
        snprintf(detail, sizeof detail, "stopping");
    } else if (fn) {
        ready = fn(fn_arg, detail, sizeof detail);
        detail[sizeof detail - 1] = '\0';
    } else {
        ready = true;
        snprintf(detail, sizeof detail, "started");
    }
    cJSON *root = cJSON_CreateObject();
    cJSON_AddBoolToObject(root, "ready", ready);
    cJSON_AddStringToObject(root, "detail", detail);
    s_send_json(resp, ready ? 200 : 503, root);
}

static void s_metrics(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp)
{
    (void)req;
    ipl_admin_t *self = arg;
    if (!self->metrics) {
        ipl_http_resp_set(resp, 200, S_METRICS_CONTENT_TYPE, "", 0);
        return;
    }
    size_t len = 0;
    char *text = ipl_metrics_render(self->metrics, &len);
    if (!text) {
        ipl_http_resp_error(resp, 500, "server_error", "cannot render metrics");
        return;
    }
    ipl_http_resp_take(resp, 200, S_METRICS_CONTENT_TYPE, &text, len);
}

static void s_version(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp)
{
    (void)req;
    ipl_admin_t *self = arg;
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "service", self->service);
    cJSON_AddStringToObject(root, "version", IPL_VERSION);
    s_send_json(resp, 200, root);
}

ipl_admin_t *ipl_admin_new(const char *listen, const char *service, ipl_metrics_t *metrics)
{
    ipl_admin_t *self = calloc(1, sizeof *self);
    if (!self) return NULL;
    pthread_mutex_init(&self->lock, NULL);
    self->metrics = metrics;
    self->service = strdup(service ? service : "");
    self->httpd = ipl_httpd_new(listen, 0);
    if (!self->service || !self->httpd) {
        int err = errno; /* why the bind failed, for the caller's message */
        ipl_admin_destroy(&self);
        errno = err;
        return NULL;
    }
    ipl_httpd_route(self->httpd, "GET", "/healthz", s_healthz, self);
    ipl_httpd_route(self->httpd, "GET", "/readyz", s_readyz, self);
    ipl_httpd_route(self->httpd, "GET", "/metrics", s_metrics, self);
    ipl_httpd_route(self->httpd, "GET", "/version", s_version, self);
    return self;
}

void ipl_admin_destroy(ipl_admin_t **self_p)
{
    assert(self_p);
    ipl_admin_t *self = *self_p;
    if (!self) return;
    ipl_httpd_destroy(&self->httpd); /* joins the handlers before the state goes */
    pthread_mutex_destroy(&self->lock);
    free(self->service);
    free(self);
    *self_p = NULL;
}

void ipl_admin_set_ready(ipl_admin_t *self, ipl_admin_ready_fn *fn, void *arg)
{
    if (!self) return;
    pthread_mutex_lock(&self->lock);
    self->ready_fn = fn;
    self->ready_arg = arg;
    pthread_mutex_unlock(&self->lock);
}

ipl_httpd_t *ipl_admin_httpd(ipl_admin_t *self)
{
    return self ? self->httpd : NULL;
}

int ipl_admin_start(ipl_admin_t *self)
{
    return self ? ipl_httpd_start(self->httpd) : 0;
}

int ipl_admin_port(const ipl_admin_t *self)
{
    return self ? ipl_httpd_port(self->httpd) : 0;
}
