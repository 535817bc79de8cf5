/*
 * ipl_admin — /healthz, /readyz, /metrics and /version on an ipl_httpd server, and the guard
 * (ipl_httpd_guard) that keeps every other route behind a token or on loopback.
 *
 * Handlers run on MHD connection threads; the readiness callback is read under a mutex so
 * that a service may (re)set it at any time. The token digests are read and reloaded under
 * another (tokens_lock): the guard runs on every admin request, a reload at most once a
 * second.
 */
#include "ipl_admin.h"

#include <arpa/inet.h>
#include <assert.h>
#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "ipl_clock.h"
#include "ipl_error.h"
#include "ipl_log.h"
#include "ipl_sha256.h"
#include "ipl_signal.h"

#ifndef IPL_VERSION
#define IPL_VERSION "0.0.0-unknown"
#endif

#define S_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"
#define S_MIN_TOKEN            16
#define S_MAX_TOKEN            512
#define S_MAX_TOKEN_FILE       (64 * 1024)
#define S_RELOAD_CHECK_MS      1000
#define S_MAX_OPEN             16 /* paths ipl_admin_open may add */

/* Refusal reasons, the label values of inferplane_admin_refused_total. */
enum { S_MISSING, S_INVALID, S_NOT_LOOPBACK, S_NREASONS };
static const char *const s_reason_names[S_NREASONS] = {"missing_token", "invalid_token",
                                                       "not_loopback"};

/* What identifies a version of the token file (any change: read it again). */
typedef struct {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
} s_file_id_t;

struct ipl_admin {
    ipl_httpd_t *httpd;
    char *service;
    ipl_metrics_t *metrics; /* borrowed */
    pthread_mutex_t lock;   /* guards ready_fn / ready_arg */
    ipl_admin_ready_fn *ready_fn;
    void *ready_arg;
    /* access */
    char *open[S_MAX_OPEN]; /* ipl_admin_open's paths (the built-in four are always open) */
    size_t nopen;
    pthread_mutex_t tokens_lock; /* guards the rest */
    char *token_file;            /* NULL: no token, loopback clients only */
    uint8_t digests[IPL_ADMIN_MAX_TOKENS][IPL_SHA256_LEN];
    size_t ndigests;
    s_file_id_t file_id;
    uint64_t checked_ms; /* monotonic: the file was last looked at */
    ipl_metric_t *refused[S_NREASONS];
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

/* ---- access ---------------------------------------------------------------------------- */

bool ipl_admin_loopback_peer(const void *sockaddr)
{
    const struct sockaddr *sa = sockaddr;
    if (!sa) return false;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = sockaddr;
        return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
    }
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = sockaddr;
        const uint8_t *a = in6->sin6_addr.s6_addr;
        if (IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr)) return true;
        return IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr) && a[12] == 127;
    }
    return false;
}

static s_file_id_t s_file_id(const struct stat *st)
{
    return (s_file_id_t){
        .dev = st->st_dev, .ino = st->st_ino, .size = st->st_size, .mtime = st->st_mtim};
}

static bool s_same_file(const s_file_id_t *a, const s_file_id_t *b)
{
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec;
}

/* Reads the token file into digests[]; 0, or IPL_E_IO / IPL_E_INVAL with err (never a token).
 * *id gets the version read. */
static int s_read_tokens(const char *path, uint8_t digests[][IPL_SHA256_LEN], size_t *n,
                         s_file_id_t *id, char *err, size_t errlen)
{
    *n = 0;
    FILE *f = fopen(path, "rb");
    struct stat st;
    if (!f || fstat(fileno(f), &st) != 0) {
        snprintf(err, errlen,
                 "--admin-token-file \"%s\": cannot read it: %s; point it at a file holding "
                 "the admin token (e.g. a mounted Secret)",
                 path, strerror(errno));
        if (f) fclose(f);
        return IPL_E_IO;
    }
    *id = s_file_id(&st);
    char *text = malloc(S_MAX_TOKEN_FILE + 1);
    size_t len = text ? fread(text, 1, S_MAX_TOKEN_FILE + 1, f) : 0;
    fclose(f);
    int rc = 0;
    if (!text) {
        snprintf(err, errlen, "out of memory");
        return IPL_E_NOMEM;
    }
    if (len > S_MAX_TOKEN_FILE) {
        snprintf(err, errlen,
                 "--admin-token-file \"%s\": larger than %d bytes; put one token "
                 "per line in it",
                 path, S_MAX_TOKEN_FILE);
        free(text);
        return IPL_E_INVAL;
    }
    text[len] = '\0';
    int line = 0;
    for (char *p = text; rc == 0 && p < text + len;) {
        char *end = memchr(p, '\n', (size_t)(text + len - p));
        if (!end) end = text + len;
        line++;
        char *a = p, *b = end;
        p = end + 1;
        while (a < b && isspace((unsigned char)*a))
            a++;
        while (b > a && isspace((unsigned char)b[-1]))
            b--;
        if (a == b || *a == '#') continue;
        size_t tlen = (size_t)(b - a);
        bool blank = false;
        for (const char *c = a; c < b; c++)
            blank |= isspace((unsigned char)*c) || !isprint((unsigned char)*c);
        if (tlen < S_MIN_TOKEN || tlen > S_MAX_TOKEN || blank) {
            snprintf(err, errlen,
                     "--admin-token-file \"%s\":%d: a token must be %d..%d printable bytes "
                     "without blanks (this one is %zu%s); make one with `openssl rand -hex 32`",
                     path, line, S_MIN_TOKEN, S_MAX_TOKEN, tlen, blank ? ", with blanks" : "");
            rc = IPL_E_INVAL;
        } else if (*n == IPL_ADMIN_MAX_TOKENS) {
            snprintf(err, errlen, "--admin-token-file \"%s\":%d: more than %d tokens", path, line,
                     IPL_ADMIN_MAX_TOKENS);
            rc = IPL_E_INVAL;
        } else {
            ipl_sha256(a, tlen, digests[(*n)++]);
        }
    }
    if (rc == 0 && *n == 0) {
        snprintf(err, errlen,
                 "--admin-token-file \"%s\": holds no token; write one (e.g. "
                 "`openssl rand -hex 32 > %s`)",
                 path, path);
        rc = IPL_E_INVAL;
    }
    memset(text, 0, len); /* the tokens in clear do not linger in freed memory */
    free(text);
    return rc;
}

int ipl_admin_set_token_file(ipl_admin_t *self, const char *path, char *err, size_t errlen)
{
    if (!self) return 0;
    assert(path);
    uint8_t digests[IPL_ADMIN_MAX_TOKENS][IPL_SHA256_LEN];
    size_t n;
    s_file_id_t id;
    char why[512] = "";
    int rc = s_read_tokens(path, digests, &n, &id, why, sizeof why);
    if (rc != 0) {
        if (errlen) snprintf(err, errlen, "%s", why);
        return rc;
    }
    char *copy = strdup(path);
    if (!copy) {
        if (errlen) snprintf(err, errlen, "out of memory");
        return IPL_E_NOMEM;
    }
    pthread_mutex_lock(&self->tokens_lock);
    free(self->token_file);
    self->token_file = copy;
    memcpy(self->digests, digests, n * sizeof digests[0]);
    self->ndigests = n;
    self->file_id = id;
    self->checked_ms = ipl_mono_ms();
    pthread_mutex_unlock(&self->tokens_lock);
    memset(digests, 0, sizeof digests);
    return 0;
}

bool ipl_admin_has_token(const ipl_admin_t *self)
{
    if (!self) return false;
    ipl_admin_t *s = (ipl_admin_t *)self;
    pthread_mutex_lock(&s->tokens_lock);
    bool has = s->token_file != NULL;
    pthread_mutex_unlock(&s->tokens_lock);
    return has;
}

void ipl_admin_open(ipl_admin_t *self, const char *path)
{
    if (!self) return;
    assert(path && self->nopen < S_MAX_OPEN && "at most S_MAX_OPEN open paths");
    self->open[self->nopen] = strdup(path);
    assert(self->open[self->nopen]);
    self->nopen++;
}

static bool s_is_open(const ipl_admin_t *self, const char *path)
{
    static const char *const builtin[] = {"/healthz", "/readyz", "/metrics", "/version"};
    for (size_t i = 0; i < sizeof builtin / sizeof *builtin; i++)
        if (!strcmp(path, builtin[i])) return true;
    for (size_t i = 0; i < self->nopen; i++)
        if (!strcmp(path, self->open[i])) return true;
    return false;
}

/* Looks at the token file again when its last look is a second old; called with tokens_lock
 * held. A version that does not parse keeps the tokens there are. */
static void s_maybe_reload(ipl_admin_t *self)
{
    uint64_t now = ipl_mono_ms();
    if (now - self->checked_ms < S_RELOAD_CHECK_MS) return;
    self->checked_ms = now;
    struct stat st;
    if (stat(self->token_file, &st) != 0) {
        IPL_LOG_EVERY(60, IPL_LOG_ERROR, "admin_token_reload_rejected",
                      "file=%s error=\"%s\" (the tokens read before stay)", self->token_file,
                      strerror(errno));
        return;
    }
    s_file_id_t id = s_file_id(&st);
    if (s_same_file(&id, &self->file_id)) return;
    uint8_t digests[IPL_ADMIN_MAX_TOKENS][IPL_SHA256_LEN];
    size_t n;
    char why[512] = "";
    if (s_read_tokens(self->token_file, digests, &n, &id, why, sizeof why) != 0) {
        char quoted[600];
        IPL_LOG_EVERY(60, IPL_LOG_ERROR, "admin_token_reload_rejected",
                      "error=%s (the tokens read before stay)",
                      ipl_log_quote(quoted, sizeof quoted, why));
        return;
    }
    memcpy(self->digests, digests, n * sizeof digests[0]);
    self->ndigests = n;
    self->file_id = id;
    memset(digests, 0, sizeof digests);
    IPL_INFO("admin_token_reloaded", "tokens=%zu", n);
}

/* The bearer token of a request, or NULL; *len its length. */
static const char *s_bearer(const ipl_http_req_t *req, size_t *len)
{
    const char *h = ipl_http_req_header(req, "Authorization");
    *len = 0;
    if (!h) return NULL;
    while (*h == ' ' || *h == '\t')
        h++;
    if (strncasecmp(h, "Bearer", 6) != 0 || (h[6] != ' ' && h[6] != '\t')) return NULL;
    h += 6;
    while (*h == ' ' || *h == '\t')
        h++;
    size_t n = strlen(h);
    while (n && (h[n - 1] == ' ' || h[n - 1] == '\t'))
        n--;
    *len = n;
    return n ? h : NULL;
}

/* Whether `token` is one of the digests: all are compared, whatever matches (constant time in
 * the stored tokens; the presented one is hashed first, so its length says nothing either). */
static bool s_token_ok(const ipl_admin_t *self, const char *token, size_t len)
{
    uint8_t d[IPL_SHA256_LEN];
    ipl_sha256(token, len, d);
    unsigned ok = 0;
    for (size_t i = 0; i < self->ndigests; i++) {
        unsigned diff = 0;
        for (size_t k = 0; k < IPL_SHA256_LEN; k++)
            diff |= (unsigned)(d[k] ^ self->digests[i][k]);
        ok |= (unsigned)(diff == 0);
    }
    return ok != 0;
}

/* The peer of a request in words, for logs ("127.0.0.1", "[::1]", "?"). */
static const char *s_peer(int fd, struct sockaddr_storage *ss, bool *loopback, char *buf,
                          size_t size)
{
    socklen_t sl = sizeof *ss;
    *loopback = false;
    snprintf(buf, size, "?");
    if (fd < 0 || getpeername(fd, (struct sockaddr *)ss, &sl) != 0) return buf;
    *loopback = ipl_admin_loopback_peer(ss);
    if (ss->ss_family == AF_INET)
        inet_ntop(AF_INET, &((struct sockaddr_in *)ss)->sin_addr, buf, (socklen_t)size);
    else if (ss->ss_family == AF_INET6)
        inet_ntop(AF_INET6, &((struct sockaddr_in6 *)ss)->sin6_addr, buf, (socklen_t)size);
    return buf;
}

static bool s_refuse(ipl_admin_t *self, const ipl_http_req_t *req, ipl_http_resp_t *resp,
                     int reason, const char *peer)
{
    if (self->refused[reason]) ipl_metric_inc(self->refused[reason]);
    char path[160];
    IPL_LOG_EVERY(10, IPL_LOG_WARN, "admin_refused", "reason=%s method=%s path=%s peer=%s",
                  s_reason_names[reason], ipl_http_req_method(req),
                  ipl_log_quote(path, sizeof path, ipl_http_req_path(req)), peer);
    if (reason == S_NOT_LOOPBACK) {
        ipl_http_resp_error(resp, 403, "permission_error",
                            "this admin endpoint answers loopback clients only, as no admin "
                            "token is configured: start the service with --admin-token-file "
                            "FILE and send \"Authorization: Bearer <token>\" "
                            "(docs/security.md)");
        return false;
    }
    ipl_http_resp_header(resp, "WWW-Authenticate", "Bearer realm=\"inferplane-admin\"");
    ipl_http_resp_error(resp, 401, "authentication_error",
                        reason == S_MISSING
                            ? "this admin endpoint needs the admin token: send "
                              "\"Authorization: Bearer <token>\" with a token of the "
                              "service's --admin-token-file (docs/security.md)"
                            : "the admin token is not one of the service's --admin-token-file");
    return false;
}

/* ipl_http_guard_fn: open routes pass, protected ones need a token (or loopback without). */
static bool s_guard(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp)
{
    ipl_admin_t *self = arg;
    if (s_is_open(self, ipl_http_req_path(req))) return true;
    struct sockaddr_storage ss;
    bool loopback;
    char peer[INET6_ADDRSTRLEN + 8];
    s_peer(ipl_http_req_socket(req), &ss, &loopback, peer, sizeof peer);
    pthread_mutex_lock(&self->tokens_lock);
    if (!self->token_file) {
        pthread_mutex_unlock(&self->tokens_lock);
        return loopback ? true : s_refuse(self, req, resp, S_NOT_LOOPBACK, peer);
    }
    s_maybe_reload(self);
    size_t len;
    const char *token = s_bearer(req, &len);
    int reason = !token ? S_MISSING : s_token_ok(self, token, len) ? -1 : S_INVALID;
    pthread_mutex_unlock(&self->tokens_lock);
    return reason < 0 ? true : s_refuse(self, req, resp, reason, peer);
}

/* ---- life cycle -------------------------------------------------------------------------- */

ipl_admin_t *ipl_admin_new(const char *listen, const char *service, ipl_metrics_t *metrics)
{
    ipl_admin_t *self = calloc(1, sizeof *self);
    if (!self) return NULL;
    pthread_mutex_init(&self->lock, NULL);
    pthread_mutex_init(&self->tokens_lock, NULL);
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
    ipl_httpd_guard(self->httpd, s_guard, self);
    for (int i = 0; metrics && i < S_NREASONS; i++) {
        char labels[64];
        snprintf(labels, sizeof labels, "reason=\"%s\"", s_reason_names[i]);
        self->refused[i] = ipl_metrics_counter(
            metrics, "inferplane_admin_refused_total",
            "Admin requests refused: no or a wrong admin token, or (no token configured) not "
            "from loopback.",
            labels);
    }
    return self;
}

void ipl_admin_destroy(ipl_admin_t **self_p)
{
    assert(self_p);
    ipl_admin_t *self = *self_p;
    if (!self) return;
    ipl_httpd_destroy(&self->httpd); /* joins the handlers before the state goes */
    pthread_mutex_destroy(&self->lock);
    pthread_mutex_destroy(&self->tokens_lock);
    for (size_t i = 0; i < self->nopen; i++)
        free(self->open[i]);
    free(self->token_file);
    memset(self->digests, 0, sizeof self->digests);
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
