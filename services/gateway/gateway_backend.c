/*
 * gateway_backend — backend secrets, slots and URLs. See gateway_backend.h.
 *
 * The registry is a list of entries, one per backend name ever used; an entry lives as long
 * as the registry (a slot points at it), so the list grows only with the distinct backend
 * names policies have named.
 *
 *   registry ─► entry{name, inflight, warned, cache{path, dev, ino, size, mtime, value}} ─► …
 */
#include "gateway_backend.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ipl_error.h"
#include "ipl_log.h"

#define S_DEFAULT_SECRETS_DIR "/var/run/secrets/inferplane"
#define S_CREDENTIALS         "backend_credentials"

struct gateway_backend_slot {
    char *name;
    int inflight;
    bool warned;
    /* the cached file secret (file and secretRef sources) */
    char *path;
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
    char *value;
    struct gateway_backend_slot *next;
};

struct gateway_backend {
    char *secrets_dir;
    ipl_metrics_t *metrics;
    pthread_mutex_t lock;
    gateway_backend_slot_t *entries;
};

/* ---- life cycle ---------------------------------------------------------------------------- */

gateway_backend_t *gateway_backend_new(const char *secrets_dir, ipl_metrics_t *metrics)
{
    gateway_backend_t *self = calloc(1, sizeof(*self));
    if (!self) return NULL;
    self->secrets_dir = strdup(secrets_dir && secrets_dir[0] ? secrets_dir : S_DEFAULT_SECRETS_DIR);
    if (!self->secrets_dir) {
        free(self);
        return NULL;
    }
    size_t n = strlen(self->secrets_dir);
    while (n > 1 && self->secrets_dir[n - 1] == '/')
        self->secrets_dir[--n] = '\0';
    self->metrics = metrics;
    pthread_mutex_init(&self->lock, NULL);
    return self;
}

void gateway_backend_secret_free(char **secret_p)
{
    assert(secret_p);
    if (*secret_p) {
        explicit_bzero(*secret_p, strlen(*secret_p));
        free(*secret_p);
    }
    *secret_p = NULL;
}

void gateway_backend_destroy(gateway_backend_t **self_p)
{
    assert(self_p);
    gateway_backend_t *self = *self_p;
    if (!self) return;
    while (self->entries) {
        gateway_backend_slot_t *e = self->entries;
        self->entries = e->next;
        gateway_backend_secret_free(&e->value);
        free(e->path);
        free(e->name);
        free(e);
    }
    pthread_mutex_destroy(&self->lock);
    free(self->secrets_dir);
    free(self);
    *self_p = NULL;
}

/* The entry of backend `name`, made when new (lock held). NULL on allocation failure. */
static gateway_backend_slot_t *s_entry(gateway_backend_t *self, const char *name)
{
    for (gateway_backend_slot_t *e = self->entries; e; e = e->next)
        if (!strcmp(e->name, name)) return e;
    gateway_backend_slot_t *e = calloc(1, sizeof(*e));
    if (!e || !(e->name = strdup(name))) {
        free(e);
        return NULL;
    }
    e->next = self->entries;
    self->entries = e;
    return e;
}

static void s_refused(gateway_backend_t *self, const char *backend, const char *reason)
{
    if (!self->metrics) return;
    char escaped[256], labels[384];
    snprintf(labels, sizeof(labels), "backend=\"%s\",reason=\"%s\"",
             ipl_metrics_escape(escaped, sizeof(escaped), backend), reason);
    ipl_metric_inc(ipl_metrics_counter(self->metrics, "inferplane_gateway_backend_refused_total",
                                       "Requests not sent to a GatewayBackend, by reason.",
                                       labels));
}

/* ---- secrets ------------------------------------------------------------------------------- */

static const char *s_str(const char *s)
{
    return s ? s : "";
}

/* Where the secret comes from, for messages: "environment variable `X`", "file `/p`", ... */
static void s_source(const gateway_backend_t *self, const ipl_backend_t *b, char *out, size_t size)
{
    const char *src = s_str(b->secret_source);
    if (!strcmp(src, "env"))
        snprintf(out, size, "environment variable `%s` (spec.auth.env)", s_str(b->secret_name));
    else if (!strcmp(src, "file"))
        snprintf(out, size, "file `%s` (spec.auth.file)", s_str(b->secret_name));
    else if (!strcmp(src, "secretRef"))
        snprintf(out, size, "Secret `%s` key `%s` (spec.auth.secretRef, mounted at `%s/%s/%s`)",
                 s_str(b->secret_name), s_str(b->secret_key), self->secrets_dir,
                 s_str(b->secret_name), s_str(b->secret_key));
    else
        snprintf(out, size, "secret source `%s`", src);
}

/* A value usable in a header: no control character (CR/LF would split the request). */
static bool s_header_safe(const char *v)
{
    for (const unsigned char *p = (const unsigned char *)v; *p; p++)
        if ((*p < 0x20 && *p != '\t') || *p == 0x7f) return false;
    return true;
}

/* Reads a whole small file into a new string (trailing whitespace dropped); *st receives
 * its status. 0, IPL_E_IO (errno set), IPL_E_RANGE (too big) or IPL_E_NOMEM. */
static int s_read_file(const char *path, char **out, struct stat *st)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return IPL_E_IO;
    int fs = fstat(fd, st);
    if (fs != 0 || !S_ISREG(st->st_mode)) {
        int e = fs != 0 ? errno : EISDIR;
        close(fd);
        errno = e;
        return IPL_E_IO;
    }
    if (st->st_size > GATEWAY_BACKEND_SECRET_MAX) {
        close(fd);
        return IPL_E_RANGE;
    }
    char *buf = malloc((size_t)st->st_size + 1);
    if (!buf) {
        close(fd);
        return IPL_E_NOMEM;
    }
    size_t len = 0;
    for (;;) {
        ssize_t n = read(fd, buf + len, (size_t)st->st_size - len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        len += (size_t)n;
        if (len == (size_t)st->st_size) break;
    }
    close(fd);
    while (len && (buf[len - 1] == '\n' || buf[len - 1] == '\r' || buf[len - 1] == ' ' ||
                   buf[len - 1] == '\t'))
        len--;
    buf[len] = '\0';
    *out = buf;
    return 0;
}

static bool s_same_file(const gateway_backend_slot_t *e, const char *path, const struct stat *st)
{
    return e->value && e->path && !strcmp(e->path, path) && e->dev == st->st_dev &&
           e->ino == st->st_ino && e->size == st->st_size &&
           e->mtime.tv_sec == st->st_mtim.tv_sec && e->mtime.tv_nsec == st->st_mtim.tv_nsec;
}

/* The file secret at `path` through the entry's cache (lock held): a copy in *out. */
static int s_file_secret(gateway_backend_slot_t *e, const char *path, char **out, int *err_no)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        *err_no = errno;
        return IPL_E_IO;
    }
    if (!s_same_file(e, path, &st)) {
        char *value = NULL;
        int rc = s_read_file(path, &value, &st);
        if (rc != 0) {
            *err_no = errno;
            return rc;
        }
        char *p = strdup(path);
        if (!p) {
            gateway_backend_secret_free(&value);
            return IPL_E_NOMEM;
        }
        gateway_backend_secret_free(&e->value);
        free(e->path);
        e->value = value;
        e->path = p;
        e->dev = st.st_dev;
        e->ino = st.st_ino;
        e->size = st.st_size;
        e->mtime = st.st_mtim;
    }
    *out = strdup(e->value);
    return *out ? 0 : IPL_E_NOMEM;
}

int gateway_backend_secret(gateway_backend_t *self, const ipl_backend_t *b, char **secret_p,
                           gateway_api_error_t *err)
{
    assert(self && b && secret_p && err);
    *secret_p = NULL;
    const char *auth = s_str(b->auth), *src = s_str(b->secret_source);
    const char *name = s_str(b->name);
    if (!auth[0] || !strcmp(auth, "none")) return 0;
    char where[1024];
    s_source(self, b, where, sizeof(where));
    char path[4096] = "";
    if (!strcmp(src, "file"))
        snprintf(path, sizeof(path), "%s", s_str(b->secret_name));
    else if (!strcmp(src, "secretRef"))
        snprintf(path, sizeof(path), "%s/%s/%s", self->secrets_dir, s_str(b->secret_name),
                 s_str(b->secret_key));
    else if (strcmp(src, "env") != 0) {
        s_refused(self, name, "credentials");
        gateway_api_error_set(err, 502, "server_error", NULL, S_CREDENTIALS,
                              "backend `%s`: unknown secret source `%s` (use secretRef, file or "
                              "env in spec.auth)",
                              name, src);
        return IPL_E_INVAL;
    }
    char *value = NULL;
    int rc = 0, err_no = 0;
    if (path[0]) {
        pthread_mutex_lock(&self->lock);
        gateway_backend_slot_t *e = s_entry(self, name);
        rc = e ? s_file_secret(e, path, &value, &err_no) : IPL_E_NOMEM;
        pthread_mutex_unlock(&self->lock);
    } else {
        const char *v = b->secret_name && b->secret_name[0] ? getenv(b->secret_name) : NULL;
        if (v && !(value = strdup(v))) rc = IPL_E_NOMEM;
    }
    const char *problem = NULL;
    char why[256] = "";
    if (rc == IPL_E_IO)
        problem = strerror_r(err_no, why, sizeof(why)); /* GNU: returns the text */
    else if (rc == IPL_E_RANGE)
        problem = "is larger than 16 KiB";
    else if (rc == IPL_E_NOMEM)
        problem = "cannot be read: out of memory";
    else if (!value || !value[0])
        problem = path[0] ? "is empty" : "is not set or empty";
    else if (!s_header_safe(value))
        problem = "holds a control character (a line break?), which cannot go in a header";
    if (problem) {
        gateway_backend_secret_free(&value);
        s_refused(self, name, "credentials");
        IPL_LOG_EVERY(5, IPL_LOG_WARN, "backend_credentials",
                      "backend=%s source=\"%s\" error=\"%s\"", name, where, problem);
        gateway_api_error_set(err, 502, "server_error", NULL, S_CREDENTIALS,
                              "backend `%s`: its secret from %s %s%s", name, where,
                              rc == IPL_E_IO ? "cannot be read: " : "", problem);
        return rc ? rc : IPL_E_NOTFOUND;
    }
    *secret_p = value;
    return 0;
}

int gateway_backend_auth_line(const ipl_backend_t *b, const char *secret, char **line_p,
                              gateway_api_error_t *err)
{
    assert(b && line_p && err);
    *line_p = NULL;
    const char *auth = s_str(b->auth), *name = s_str(b->name);
    if (!auth[0] || !strcmp(auth, "none")) return 0;
    const char *header = NULL, *prefix = "";
    if (!strcmp(auth, "bearer")) {
        header = "Authorization";
        prefix = "Bearer ";
    } else if (!strcmp(auth, "header")) {
        header = s_str(b->auth_header);
        bool ok = header[0] != '\0';
        for (const char *p = header; ok && *p; p++)
            ok = (unsigned char)*p > 0x20 && (unsigned char)*p < 0x7f &&
                 !strchr(":()<>@,;\\\"/[]?={}", *p);
        if (!ok) {
            gateway_api_error_set(err, 502, "server_error", NULL, S_CREDENTIALS,
                                  "backend `%s`: spec.auth.header `%s` is not an HTTP header name",
                                  name, header);
            return IPL_E_INVAL;
        }
    } else {
        gateway_api_error_set(err, 502, "server_error", NULL, S_CREDENTIALS,
                              "backend `%s`: unknown auth type `%s` (bearer or header)", name,
                              auth);
        return IPL_E_INVAL;
    }
    size_t n = strlen(header) + 2 + strlen(prefix) + strlen(s_str(secret)) + 1;
    char *line = malloc(n);
    if (!line) return IPL_E_NOMEM;
    snprintf(line, n, "%s: %s%s", header, prefix, s_str(secret));
    *line_p = line;
    return 0;
}

const char *gateway_backend_ca_file(const gateway_backend_t *self, const ipl_backend_t *b,
                                    char *out, size_t size)
{
    if (b->ca_bundle && b->ca_bundle[0])
        snprintf(out, size, "%s", b->ca_bundle);
    else if (b->ca_secret_name && b->ca_secret_name[0])
        snprintf(out, size, "%s/%s/%s", self->secrets_dir, b->ca_secret_name,
                 s_str(b->ca_secret_key));
    else if (size)
        out[0] = '\0';
    return out;
}

void gateway_backend_warn_insecure(gateway_backend_t *self, const ipl_backend_t *b)
{
    const char *name = s_str(b->name);
    pthread_mutex_lock(&self->lock);
    gateway_backend_slot_t *e = s_entry(self, name);
    bool first = e && !e->warned;
    if (e) e->warned = true;
    pthread_mutex_unlock(&self->lock);
    if (first) {
        char shown[512];
        IPL_WARN("backend_insecure",
                 "backend=%s url=%s tls.insecureSkipVerify=true: its certificate is not verified "
                 "(for tests only)",
                 name, gateway_backend_shown_url(s_str(b->url), shown, sizeof(shown)));
    }
}

/* ---- slots --------------------------------------------------------------------------------- */

gateway_backend_slot_t *gateway_backend_acquire(gateway_backend_t *self, const ipl_backend_t *b)
{
    const char *name = s_str(b->name);
    pthread_mutex_lock(&self->lock);
    gateway_backend_slot_t *e = s_entry(self, name);
    bool full = e && b->max_connections > 0 && (uint64_t)e->inflight >= b->max_connections;
    if (e && !full) e->inflight++;
    pthread_mutex_unlock(&self->lock);
    if (full) s_refused(self, name, "busy");
    return full ? NULL : e;
}

void gateway_backend_release(gateway_backend_t *self, gateway_backend_slot_t **slot_p)
{
    assert(slot_p);
    if (!*slot_p) return;
    pthread_mutex_lock(&self->lock);
    (*slot_p)->inflight--;
    pthread_mutex_unlock(&self->lock);
    *slot_p = NULL;
}

int gateway_backend_inflight(gateway_backend_t *self, const char *name)
{
    int n = 0;
    pthread_mutex_lock(&self->lock);
    for (gateway_backend_slot_t *e = self->entries; e; e = e->next)
        if (!strcmp(e->name, name)) n = e->inflight;
    pthread_mutex_unlock(&self->lock);
    return n;
}

/* ---- URLs ---------------------------------------------------------------------------------- */

int gateway_backend_url(const char *base, const char *client_path, char *out, size_t size)
{
    size_t blen = strlen(base);
    while (blen && base[blen - 1] == '/')
        blen--;
    const char *rest = client_path ? client_path : "";
    if (!strncmp(rest, "/v1", 3) && (rest[3] == '/' || rest[3] == '\0')) rest += 3;
    while (rest[0] == '/' && rest[1] == '/')
        rest++;
    int n = snprintf(out, size, "%.*s%s%s", (int)blen, base, rest[0] && rest[0] != '/' ? "/" : "",
                     rest);
    return n < 0 || (size_t)n >= size ? IPL_E_INVAL : 0;
}

const char *gateway_backend_shown_url(const char *url, char *out, size_t size)
{
    const char *scheme = strstr(url, "://");
    const char *host = scheme ? scheme + 3 : url;
    size_t hostlen = strcspn(host, "/?#");
    const char *at = memchr(host, '@', hostlen);
    if (at)
        snprintf(out, size, "%.*s%s", (int)(host - url), url, at + 1);
    else
        snprintf(out, size, "%s", url);
    return out;
}

const ipl_backend_t *gateway_backend_find(const ipl_policy_t *policy, const char *name)
{
    for (uint32_t i = 0; policy && name && i < policy->backends_len; i++)
        if (policy->backends[i].name && !strcmp(policy->backends[i].name, name))
            return &policy->backends[i];
    return NULL;
}
