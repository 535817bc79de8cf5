/*
 * policy_server — directory watch, versioning and the two sockets of the policy service.
 *
 * The installed policy lives as two pre-encoded POLICY frames: `body` (version 0, to tell
 * whether a recompilation changed anything) and `frame` (the real version, sent as is on
 * PUB and to every POLICY_REQ). /debug/policy and /readyz read a JSON rendering and a
 * detail line prepared at each reload, under `lock`.
 */
#include "policy_server.h"

#include <cjson/cJSON.h>
#include <czmq.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ipl_clock.h"
#include "ipl_drops.h"
#include "ipl_error.h"
#include "ipl_hash.h"
#include "ipl_log.h"
#include "ipl_loop.h"
#include "ipl_proto.h"
#include "ipl_zmq.h"
#include "policy_compiler.h"

#define S_WATCH_MS      1000 // how often the directory's mtimes are compared
#define S_MAX_REQ_FRAME 4096 // a POLICY_REQ is a few bytes

struct policy_server {
    char *dir;
    uint64_t republish_ms;
    zsock_t *pub, *rep;
    uint64_t signature; // of the directory listing at the last compile attempt
    bool attempted;
    uint64_t version;         // installed; 0 = none
    msgpack_sbuffer body;     // installed policy encoded with version 0
    msgpack_sbuffer frame;    // installed policy as sent
    uint64_t last_publish_ms; // monotonic
    uint64_t next_watch_ms;   // monotonic: the next directory check (policy_server_run)

    pthread_mutex_t lock; // guards the fields below (read by admin HTTP threads)
    char *debug_json;     // /debug/policy body
    char detail[256];     // /readyz detail
    bool ready;

    ipl_metrics_t *metrics;
    ipl_metric_t *m_version, *m_pools, *m_workers, *m_errors, *m_valid, *m_published, *m_requests,
        *m_reload_ok, *m_reload_unchanged, *m_reload_error;
};

// ---- directory watch --------------------------------------------------------------------------

// A hash of the names, sizes, inodes and modification times of the *.yaml/*.yml files, so
// that any edit, rename, addition or removal changes it. 1 when the directory cannot be read.
static uint64_t s_signature(const char *dir)
{
    DIR *dp = opendir(dir);
    if (!dp) return 1;
    uint64_t sig = ipl_hash_bytes(dir, strlen(dir));
    struct dirent *e;
    while ((e = readdir(dp))) {
        size_t n = strlen(e->d_name);
        bool yaml = e->d_name[0] != '.' && ((n > 5 && !strcmp(e->d_name + n - 5, ".yaml")) ||
                                            (n > 4 && !strcmp(e->d_name + n - 4, ".yml")));
        if (!yaml) continue;
        struct stat st;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        uint64_t item[5] = {ipl_hash_bytes(e->d_name, n), 0, 0, 0, 0};
        if (stat(path, &st) == 0) {
            item[1] = (uint64_t)st.st_size;
            item[2] = (uint64_t)st.st_ino;
            item[3] = (uint64_t)st.st_mtim.tv_sec;
            item[4] = (uint64_t)st.st_mtim.tv_nsec;
        }
        sig ^= ipl_hash_bytes(item, sizeof item); // order-independent: readdir order varies
    }
    closedir(dp);
    return sig | 2; // never 0 or 1
}

// ---- rendering --------------------------------------------------------------------------------

static char *s_debug_json(const ipl_policy_t *p, uint64_t version, const policy_compiler_t *last,
                          bool last_ok, const char *dir)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddNumberToObject(root, "version", (double)version);
    cJSON_AddStringToObject(root, "dir", dir);
    char iso[32];
    cJSON_AddStringToObject(root, "reloaded_at", ipl_wall_iso8601(iso, sizeof iso));
    cJSON_AddBoolToObject(root, "valid", last_ok);
    cJSON *errors = cJSON_AddArrayToObject(root, "errors");
    cJSON *warnings = cJSON_AddArrayToObject(root, "warnings");
    cJSON *files = cJSON_AddArrayToObject(root, "files");
    for (size_t i = 0; last && i < policy_compiler_nerrors(last); i++)
        cJSON_AddItemToArray(errors, cJSON_CreateString(policy_compiler_error(last, i)));
    for (size_t i = 0; last && i < policy_compiler_nwarnings(last); i++)
        cJSON_AddItemToArray(warnings, cJSON_CreateString(policy_compiler_warning(last, i)));
    for (size_t i = 0; last && i < policy_compiler_nfiles(last); i++)
        cJSON_AddItemToArray(files, cJSON_CreateString(policy_compiler_file(last, i)));
    cJSON *pools = cJSON_AddArrayToObject(root, "pools");
    cJSON *workers = cJSON_AddArrayToObject(root, "workers");
    for (uint32_t i = 0; p && i < p->pools_len; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", p->pools[i].name);
        cJSON_AddStringToObject(o, "model", p->pools[i].model);
        cJSON_AddStringToObject(o, "strategy", p->pools[i].strategy);
        cJSON *names = cJSON_AddArrayToObject(o, "workers");
        for (uint32_t w = 0; w < p->workers_len; w++)
            if (!strcmp(p->workers[w].pool, p->pools[i].name))
                cJSON_AddItemToArray(names, cJSON_CreateString(p->workers[w].name));
        cJSON_AddItemToArray(pools, o);
    }
    for (uint32_t i = 0; p && i < p->workers_len; i++) {
        const ipl_worker_t *w = &p->workers[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", w->name);
        cJSON_AddStringToObject(o, "pool", w->pool);
        cJSON_AddStringToObject(o, "model", w->model);
        cJSON_AddStringToObject(o, "url", w->url);
        cJSON_AddStringToObject(o, "kv_endpoint", w->kv_endpoint);
        cJSON_AddStringToObject(o, "replay_endpoint", w->replay_endpoint);
        cJSON_AddStringToObject(o, "metrics_url", w->metrics_url);
        cJSON_AddNumberToObject(o, "block_size", (double)w->block_size);
        cJSON_AddStringToObject(o, "worker_set", w->worker_set ? w->worker_set : "");
        cJSON_AddItemToArray(workers, o);
    }
    char *json = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return json;
}

// ---- publishing -------------------------------------------------------------------------------

static void s_publish(policy_server_t *self)
{
    if (!self->version) return;
    if (zmq_send(zsock_resolve(self->pub), self->frame.data, self->frame.size, ZMQ_DONTWAIT) >= 0)
        ipl_metric_inc(self->m_published);
    self->last_publish_ms = ipl_mono_ms();
}

static void s_drop(policy_server_t *self, const char *reason)
{
    ipl_drops_count(self->metrics, reason, "socket=rep");
}

// Reads one message (every frame) from the ROUTER and answers it when it is a POLICY_REQ.
static void s_serve_one(policy_server_t *self)
{
    void *raw = zsock_resolve(self->rep);
    zmq_msg_t parts[2]; // [identity, POLICY_REQ]
    int kept;
    size_t n = ipl_zmq_recv_parts(raw, parts, 2, &kept);
    if (n == 0) return;
    if (n != 2) {
        s_drop(self, "frames");
    } else {
        ipl_msg_t msg = {0};
        int rc = zmq_msg_size(&parts[1]) > S_MAX_REQ_FRAME
                     ? IPL_E_RANGE
                     : ipl_msg_decode(zmq_msg_data(&parts[1]), zmq_msg_size(&parts[1]), &msg);
        if (rc != IPL_OK) {
            s_drop(self, ipl_strerror(rc));
        } else if (msg.type != IPL_MSG_POLICY_REQ) {
            s_drop(self, "unexpected_type");
        } else {
            ipl_metric_inc(self->m_requests);
            if (self->version) { // no answer before a first policy: the asker retries
                zmq_send(raw, zmq_msg_data(&parts[0]), zmq_msg_size(&parts[0]),
                         ZMQ_SNDMORE | ZMQ_DONTWAIT);
                zmq_send(raw, self->frame.data, self->frame.size, ZMQ_DONTWAIT);
            }
        }
        if (rc == IPL_OK) ipl_msg_clear(&msg);
    }
    ipl_zmq_close_parts(parts, kept);
}

// ---- reload -----------------------------------------------------------------------------------

static void s_set_status(policy_server_t *self, char *json, bool ready, const char *detail)
{
    pthread_mutex_lock(&self->lock);
    free(self->debug_json);
    self->debug_json = json;
    self->ready = ready;
    snprintf(self->detail, sizeof self->detail, "%s", detail);
    pthread_mutex_unlock(&self->lock);
}

static void s_log_errors(const policy_compiler_t *c)
{
    char quoted[1024];
    for (size_t i = 0; i < policy_compiler_nerrors(c); i++)
        IPL_ERROR("policy_error", "error=%s",
                  ipl_log_quote(quoted, sizeof quoted, policy_compiler_error(c, i)));
    for (size_t i = 0; i < policy_compiler_nwarnings(c); i++)
        IPL_WARN("policy_warning", "warning=%s",
                 ipl_log_quote(quoted, sizeof quoted, policy_compiler_warning(c, i)));
}

// Installs `p` (compiled, version 0) when it differs from the installed one. Returns 1 when
// a new version was installed, 0 when it is the same, IPL_E_* on an encoding failure.
static int s_install(policy_server_t *self, const ipl_policy_t *p)
{
    msgpack_sbuffer body;
    msgpack_sbuffer_init(&body);
    int rc = ipl_msg_encode(IPL_MSG_POLICY, p, &body);
    if (rc != IPL_OK) {
        msgpack_sbuffer_destroy(&body);
        return rc;
    }
    if (self->version && body.size == self->body.size &&
        !memcmp(body.data, self->body.data, body.size)) {
        msgpack_sbuffer_destroy(&body);
        return 0;
    }
    ipl_policy_t versioned = *p;
    uint64_t now = ipl_wall_ms();
    versioned.version = now > self->version ? now : self->version + 1;
    msgpack_sbuffer frame;
    msgpack_sbuffer_init(&frame);
    rc = ipl_msg_encode(IPL_MSG_POLICY, &versioned, &frame);
    if (rc != IPL_OK) {
        msgpack_sbuffer_destroy(&body);
        msgpack_sbuffer_destroy(&frame);
        return rc;
    }
    msgpack_sbuffer_destroy(&self->body);
    msgpack_sbuffer_destroy(&self->frame);
    self->body = body;
    self->frame = frame;
    self->version = versioned.version;
    return 1;
}

int policy_server_reload(policy_server_t *self, bool force)
{
    uint64_t sig = s_signature(self->dir);
    if (!force && self->attempted && sig == self->signature) return 0;
    self->attempted = true;
    self->signature = sig;

    policy_compiler_t *c = policy_compiler_new();
    if (!c) return IPL_E_NOMEM;
    policy_compiler_add_dir(c, self->dir);
    size_t nerrors = (size_t)policy_compiler_finish(c, self->dir);
    const ipl_policy_t *p = policy_compiler_policy(c);
    int rc = p ? s_install(self, p) : IPL_E_INVAL;
    char detail[256];
    if (rc < 0) {
        s_log_errors(c);
        ipl_metric_inc(self->m_reload_error);
        ipl_metric_set(self->m_errors, (double)(nerrors ? nerrors : 1));
        ipl_metric_set(self->m_valid, 0);
        const char *first = nerrors ? policy_compiler_error(c, 0) : ipl_strerror(rc);
        if (self->version)
            snprintf(detail, sizeof detail,
                     "version=%llu (last good); reload failed with %zu "
                     "error(s): %s",
                     (unsigned long long)self->version, nerrors, first);
        else
            snprintf(detail, sizeof detail, "no valid policy: %zu error(s): %s", nerrors, first);
        IPL_ERROR("policy_invalid", "dir=%s errors=%zu kept_version=%llu", self->dir, nerrors,
                  (unsigned long long)self->version);
    } else {
        s_log_errors(c); // warnings
        ipl_metric_inc(rc == 1 ? self->m_reload_ok : self->m_reload_unchanged);
        ipl_metric_set(self->m_errors, 0);
        ipl_metric_set(self->m_valid, 1);
        ipl_metric_set(self->m_version, (double)self->version);
        ipl_metric_set(self->m_pools, p->pools_len);
        ipl_metric_set(self->m_workers, p->workers_len);
        snprintf(detail, sizeof detail, "version=%llu pools=%u workers=%u",
                 (unsigned long long)self->version, p->pools_len, p->workers_len);
        if (rc == 1)
            IPL_INFO("policy_loaded", "version=%llu pools=%u workers=%u files=%zu",
                     (unsigned long long)self->version, p->pools_len, p->workers_len,
                     policy_compiler_nfiles(c));
    }
    // /debug/policy shows the policy in service (decoded back from its frame when this
    // compilation failed) together with what this compilation found.
    ipl_msg_t current = {0};
    const ipl_policy_t *shown = p;
    if (!p && self->version &&
        ipl_msg_decode(self->frame.data, self->frame.size, &current) == IPL_OK)
        shown = &current.u.policy;
    char *json = s_debug_json(shown, self->version, c, rc >= 0, self->dir);
    if (current.arena) ipl_msg_clear(&current);
    s_set_status(self, json, self->version != 0, detail);
    policy_compiler_destroy(&c);
    if (rc == 1) s_publish(self);
    return rc < 0 ? IPL_E_INVAL : rc;
}

// ---- life cycle -------------------------------------------------------------------------------

static zsock_t *s_bind(int type, const char *endpoint, const char *flag, char *err, size_t errlen)
{
    zsock_t *sock = zsock_new(type);
    if (!sock) {
        snprintf(err, errlen, "cannot create a ZeroMQ socket");
        return NULL;
    }
    zsock_set_linger(sock, 0);
    if (type == ZMQ_ROUTER) zsock_set_maxmsgsize(sock, S_MAX_REQ_FRAME);
    if (ipl_zmq_bind(zsock_resolve(sock), endpoint, flag, NULL, "use a free tcp://host:port", err,
                     errlen) != 0)
        zsock_destroy(&sock);
    return sock;
}

policy_server_t *policy_server_new(const char *dir, const char *pub, const char *rep,
                                   uint64_t republish_ms, ipl_metrics_t *metrics, char *err,
                                   size_t errlen)
{
    policy_server_t *self = calloc(1, sizeof *self);
    if (!self) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&self->lock, NULL);
    msgpack_sbuffer_init(&self->body);
    msgpack_sbuffer_init(&self->frame);
    self->dir = strdup(dir);
    self->republish_ms = republish_ms ? republish_ms : 2000;
    self->metrics = metrics;
    snprintf(self->detail, sizeof self->detail, "no policy loaded yet");
    self->pub = s_bind(ZMQ_PUB, pub, "--pub", err, errlen);
    self->rep = self->pub ? s_bind(ZMQ_ROUTER, rep, "--rep", err, errlen) : NULL;
    if (!self->dir || !self->rep) {
        policy_server_destroy(&self);
        return NULL;
    }
    self->m_version = ipl_metrics_gauge(metrics, "inferplane_policy_version",
                                        "Version of the policy in service (0: none).", NULL);
    self->m_pools = ipl_metrics_gauge(metrics, "inferplane_policy_pools",
                                      "Pools in the policy in service.", NULL);
    self->m_workers = ipl_metrics_gauge(metrics, "inferplane_policy_workers",
                                        "Workers in the policy in service.", NULL);
    self->m_errors = ipl_metrics_gauge(metrics, "inferplane_policy_errors",
                                       "Errors found in the policy files at the last reload "
                                       "(0: they are valid and in service).",
                                       NULL);
    self->m_valid = ipl_metrics_gauge(metrics, "inferplane_policy_files_valid",
                                      "1 when the policy files on disk compile, else 0.", NULL);
    self->m_published = ipl_metrics_counter(metrics, "inferplane_policy_published_total",
                                            "POLICY messages published.", NULL);
    self->m_requests = ipl_metrics_counter(metrics, "inferplane_policy_requests_total",
                                           "POLICY_REQ messages answered or received.", NULL);
    static const char *help = "Reloads of the policy directory by result.";
    self->m_reload_ok =
        ipl_metrics_counter(metrics, "inferplane_policy_reloads_total", help, "result=\"changed\"");
    self->m_reload_unchanged = ipl_metrics_counter(metrics, "inferplane_policy_reloads_total", help,
                                                   "result=\"unchanged\"");
    self->m_reload_error =
        ipl_metrics_counter(metrics, "inferplane_policy_reloads_total", help, "result=\"error\"");
    return self;
}

void policy_server_destroy(policy_server_t **self_p)
{
    if (!self_p || !*self_p) return;
    policy_server_t *self = *self_p;
    zsock_destroy(&self->pub);
    zsock_destroy(&self->rep);
    msgpack_sbuffer_destroy(&self->body);
    msgpack_sbuffer_destroy(&self->frame);
    pthread_mutex_destroy(&self->lock);
    free(self->debug_json);
    free(self->dir);
    free(self);
    *self_p = NULL;
}

// ipl_loop: every POLICY_REQ waiting, at most 1000 before the timers get their turn.
static void s_on_rep(void *arg)
{
    policy_server_t *self = arg;
    for (int i = 0; i < 1000 && (zsock_events(self->rep) & ZMQ_POLLIN); i++)
        s_serve_one(self);
}

// ipl_loop: reloads and republishes when due; waits until the next of the two.
static long s_tick(void *arg)
{
    policy_server_t *self = arg;
    uint64_t now = ipl_mono_ms();
    if (now >= self->next_watch_ms) {
        policy_server_reload(self, false);
        self->next_watch_ms = now + S_WATCH_MS;
    }
    if (self->version && now >= self->last_publish_ms + self->republish_ms) s_publish(self);
    now = ipl_mono_ms();
    uint64_t next_pub = self->last_publish_ms + self->republish_ms;
    uint64_t next =
        self->next_watch_ms < next_pub || !self->version ? self->next_watch_ms : next_pub;
    return next > now ? (long)(next - now) : 0;
}

void policy_server_run(policy_server_t *self)
{
    self->next_watch_ms = ipl_mono_ms() + S_WATCH_MS;
    const ipl_loop_item_t items[] = {{zsock_resolve(self->rep), -1, s_on_rep, self}};
    (void)ipl_loop_run(items, 1, -1, s_tick, self); // a failed poll is logged and ends it
}

uint64_t policy_server_version(policy_server_t *self)
{
    return self->version;
}

bool policy_server_ready(void *arg, char *detail, size_t size)
{
    policy_server_t *self = arg;
    pthread_mutex_lock(&self->lock);
    bool ready = self->ready;
    snprintf(detail, size, "%s", self->detail);
    pthread_mutex_unlock(&self->lock);
    return ready;
}

void policy_server_debug(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp)
{
    (void)req;
    policy_server_t *self = arg;
    pthread_mutex_lock(&self->lock);
    char *json = self->debug_json ? strdup(self->debug_json) : NULL;
    pthread_mutex_unlock(&self->lock);
    if (!json) {
        ipl_http_resp_error(resp, 503, "server_error", "no policy has been read yet");
        return;
    }
    ipl_http_resp_take(resp, 200, "application/json", &json, strlen(json));
}
