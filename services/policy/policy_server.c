/*
 * policy_server — versioning and the two sockets of the policy service; policy_watch says
 * when to look at the directory.
 *
 * The installed policy lives as two pre-encoded POLICY frames: `body` (version 0, to tell
 * whether a recompilation changed anything) and `frame` (the real version, sent as is on
 * PUB and to every POLICY_REQ). /debug/policy and /readyz read a JSON rendering and a
 * detail line prepared at each compilation, under `lock`; /debug/policy's policy is decoded
 * back from `frame`, so it shows exactly what is served.
 */
#include "policy_server.h"

#include <cjson/cJSON.h>
#include <czmq.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipl_clock.h"
#include "ipl_curve.h"
#include "ipl_drops.h"
#include "ipl_error.h"
#include "ipl_log.h"
#include "ipl_loop.h"
#include "ipl_proto.h"
#include "ipl_zmq.h"
#include "policy_compiler.h"
#include "policy_digest.h"
#include "policy_info.h"
#include "policy_kube.h"
#include "policy_watch.h"

#define S_MAX_REQ_FRAME 4096 // a POLICY_REQ is a few bytes

struct policy_server {
    char *dir;
    uint64_t republish_ms;
    zsock_t *pub, *rep;
    policy_watch_t *watch;       // files mode; NULL in Kubernetes mode
    policy_kube_t *kube;         // Kubernetes mode (borrowed); NULL in files mode
    policy_kube_set_t *kube_set; // the object set compiled last
    uint64_t signature;          // of the directory listing at the last compile attempt
    bool attempted;
    uint64_t version;         // installed; 0 = none
    uint64_t hash;            // of the installed policy
    msgpack_sbuffer body;     // installed policy encoded with version 0
    msgpack_sbuffer frame;    // installed policy as sent
    uint64_t last_publish_ms; // monotonic
    uint64_t reloads[3];      // compilations: changed, unchanged, error (as the metric)

    pthread_mutex_t lock; // guards the fields below (read by admin HTTP threads)
    char *debug_json;     // /debug/policy body
    char detail[256];     // /readyz detail
    bool ready;

    ipl_metrics_t *metrics;
    policy_info_t *info; // inferplane_policy_info{hash}
    ipl_metric_t *m_version, *m_pools, *m_workers, *m_errors, *m_valid, *m_published, *m_requests,
        *m_reload_ok, *m_reload_unchanged, *m_reload_error, *m_inotify;
};

// ---- rendering --------------------------------------------------------------------------------

// The policy in service (`shown`, NULL: none) and what the last compilation `last` found.
static char *s_debug_json(const policy_server_t *self, const ipl_policy_t *shown,
                          const policy_compiler_t *last, bool last_ok)
{
    cJSON *root = policy_digest_json(shown);
    if (!root) return NULL;
    cJSON_AddStringToObject(root, "mode", self->kube ? "kubernetes" : "files");
    if (self->dir) cJSON_AddStringToObject(root, "dir", self->dir);
    char iso[32];
    cJSON_AddStringToObject(root, "reloaded_at", ipl_wall_iso8601(iso, sizeof iso));
    cJSON_AddBoolToObject(root, "valid", last_ok);
    policy_digest_add_report(root, last);
    cJSON *reloads = cJSON_AddObjectToObject(root, "reloads");
    cJSON_AddNumberToObject(reloads, "changed", (double)self->reloads[0]);
    cJSON_AddNumberToObject(reloads, "unchanged", (double)self->reloads[1]);
    cJSON_AddNumberToObject(reloads, "error", (double)self->reloads[2]);
    if (!self->watch) {
        char *json = cJSON_PrintUnformatted(root);
        cJSON_Delete(root);
        return json;
    }
    const policy_watch_config_t *wc = policy_watch_config(self->watch);
    cJSON *watch = cJSON_AddObjectToObject(root, "watch");
    cJSON_AddStringToObject(watch, "mode", policy_watch_mode(self->watch));
    cJSON_AddStringToObject(watch, "reason", policy_watch_reason(self->watch));
    cJSON_AddNumberToObject(watch, "debounce_ms", (double)wc->debounce_ms);
    cJSON_AddNumberToObject(watch, "max_delay_ms", (double)wc->max_delay_ms);
    cJSON_AddNumberToObject(watch, "poll_ms", (double)wc->poll_ms);
    cJSON_AddNumberToObject(watch, "events", (double)policy_watch_events(self->watch));
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
    self->body = body; // the switch: the next message sent is the new frame, whole
    self->frame = frame;
    self->version = versioned.version;
    self->hash = p->hash;
    return 1;
}

int policy_server_reload(policy_server_t *self, bool force)
{
    const char *source = self->kube ? "kubernetes" : self->dir;
    if (self->kube) { // a new object set, or the last one again when forced
        policy_kube_set_t *set = policy_kube_take(self->kube);
        if (set) {
            policy_kube_set_destroy(&self->kube_set);
            self->kube_set = set;
        } else if (!force || !self->kube_set) {
            return 0;
        }
    } else {
        uint64_t sig = policy_watch_signature(self->dir);
        if (!force && self->attempted && sig == self->signature) return 0;
        self->signature = sig;
    }
    self->attempted = true;

    policy_compiler_t *c = policy_compiler_new();
    if (!c) return IPL_E_NOMEM;
    if (self->kube)
        policy_kube_set_add_to(self->kube_set, c);
    else
        policy_compiler_add_dir(c, self->dir);
    size_t nerrors = (size_t)policy_compiler_finish(c, source);
    const ipl_policy_t *p = policy_compiler_policy(c);
    int rc = p ? s_install(self, p) : IPL_E_INVAL;
    char detail[256], hex[POLICY_DIGEST_HEX_LEN], quoted[512];
    policy_digest_hex(self->hash, hex);
    s_log_errors(c); // the errors of a failed compilation, the warnings of any
    if (rc < 0) {
        self->reloads[2]++;
        ipl_metric_inc(self->m_reload_error);
        ipl_metric_set(self->m_errors, (double)(nerrors ? nerrors : 1));
        ipl_metric_set(self->m_valid, 0);
        const char *first = nerrors ? policy_compiler_error(c, 0) : ipl_strerror(rc);
        if (self->version)
            snprintf(detail, sizeof detail,
                     "version=%llu hash=%s (last good); reload failed with %zu error(s): %s",
                     (unsigned long long)self->version, hex, nerrors, first);
        else
            snprintf(detail, sizeof detail, "no valid policy: %zu error(s): %s", nerrors, first);
        IPL_ERROR("policy_invalid", "source=%s errors=%zu kept_version=%llu kept_hash=%s",
                  ipl_log_quote(quoted, sizeof quoted, source), nerrors,
                  (unsigned long long)self->version, self->version ? hex : "-");
    } else {
        self->reloads[rc == 1 ? 0 : 1]++;
        ipl_metric_inc(rc == 1 ? self->m_reload_ok : self->m_reload_unchanged);
        ipl_metric_set(self->m_errors, 0);
        ipl_metric_set(self->m_valid, 1);
        ipl_metric_set(self->m_version, (double)self->version);
        if (self->info) policy_info_set(self->info, self->hash);
        ipl_metric_set(self->m_pools, p->pools_len);
        ipl_metric_set(self->m_workers, p->workers_len);
        snprintf(detail, sizeof detail, "version=%llu hash=%s pools=%u workers=%u",
                 (unsigned long long)self->version, hex, p->pools_len, p->workers_len);
        if (rc == 1)
            IPL_INFO("policy_loaded", "version=%llu hash=%s pools=%u workers=%u files=%zu",
                     (unsigned long long)self->version, hex, p->pools_len, p->workers_len,
                     policy_compiler_nfiles(c));
    }
    // /debug/policy shows the policy in service, decoded back from the frame that is sent,
    // together with what this compilation found.
    ipl_msg_t current = {0};
    bool decoded =
        self->version && ipl_msg_decode(self->frame.data, self->frame.size, &current) == IPL_OK;
    char *json = s_debug_json(self, decoded ? &current.u.policy : NULL, c, rc >= 0);
    if (decoded) ipl_msg_clear(&current);
    s_set_status(self, json, self->version != 0, detail);
    if (self->kube) policy_kube_report(self->kube, self->kube_set, c); // status write-back
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
    ipl_curve_server(sock); /* CURVE with --curve-dir (ipl_curve.h) */
    if (ipl_zmq_bind(zsock_resolve(sock), endpoint, flag, NULL, "use a free tcp://host:port", err,
                     errlen) != 0)
        zsock_destroy(&sock);
    return sock;
}

policy_server_t *policy_server_new(const policy_server_config_t *config, ipl_metrics_t *metrics,
                                   char *err, size_t errlen)
{
    policy_server_t *self = calloc(1, sizeof *self);
    if (!self) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&self->lock, NULL);
    msgpack_sbuffer_init(&self->body);
    msgpack_sbuffer_init(&self->frame);
    self->dir = config->kube ? NULL : strdup(config->dir ? config->dir : "");
    self->kube = config->kube;
    self->republish_ms = config->republish_ms ? config->republish_ms : 2000;
    self->metrics = metrics;
    snprintf(self->detail, sizeof self->detail, "no policy loaded yet");
    self->pub = s_bind(ZMQ_PUB, config->pub, "--pub", err, errlen);
    self->rep = self->pub ? s_bind(ZMQ_ROUTER, config->rep, "--rep", err, errlen) : NULL;
    policy_watch_config_t wc = {.poll = config->poll};
    self->watch = self->dir && self->rep ? policy_watch_new(self->dir, &wc) : NULL;
    if (!self->rep || (!self->watch && !self->kube)) {
        if (self->rep) snprintf(err, errlen, "out of memory"); // else s_bind said why
        policy_server_destroy(&self);
        return NULL;
    }
    self->m_version = ipl_metrics_gauge(metrics, "inferplane_policy_version",
                                        "Version of the policy in service (0: none).", NULL);
    self->info = policy_info_new(metrics, "inferplane_policy_info",
                                 "1 for the content hash of the policy in service (hash \"\": "
                                 "none yet; the hashes served before read 0).");
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
    self->m_inotify = ipl_metrics_gauge(metrics, "inferplane_policy_watch_inotify",
                                        "1 when inotify watches the policy directory, 0 when it "
                                        "is polled every second (see /debug/policy watch.reason).",
                                        NULL);
    ipl_metric_set(self->m_inotify, !strcmp(policy_server_watch_mode(self), "inotify"));
    return self;
}

void policy_server_destroy(policy_server_t **self_p)
{
    if (!self_p || !*self_p) return;
    policy_server_t *self = *self_p;
    zsock_destroy(&self->pub);
    zsock_destroy(&self->rep);
    policy_watch_destroy(&self->watch);
    policy_info_destroy(&self->info);
    policy_kube_set_destroy(&self->kube_set);
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

// ipl_loop: the directory changed (inotify); the look comes when the burst is over.
static void s_on_watch(void *arg)
{
    policy_server_t *self = arg;
    policy_watch_drain(self->watch, ipl_mono_ms());
}

// ipl_loop: the Kubernetes watcher handed over a new object set.
static void s_on_kube(void *arg)
{
    policy_server_reload(arg, false);
}

// ipl_loop: reloads and republishes when due; waits until the next of the two.
static long s_tick(void *arg)
{
    policy_server_t *self = arg;
    uint64_t now = ipl_mono_ms();
    policy_watch_due_t due = self->watch ? policy_watch_due(self->watch, now) : POLICY_WATCH_IDLE;
    if (due != POLICY_WATCH_IDLE) {
        policy_server_reload(self, due == POLICY_WATCH_COMPILE);
        ipl_metric_set(self->m_inotify, !strcmp(policy_watch_mode(self->watch), "inotify"));
    }
    if (self->version && now >= self->last_publish_ms + self->republish_ms) s_publish(self);
    now = ipl_mono_ms();
    long wait = self->watch ? policy_watch_wait_ms(self->watch, now) : -1;
    if (self->version) {
        uint64_t next_pub = self->last_publish_ms + self->republish_ms;
        long pub_wait = next_pub > now ? (long)(next_pub - now) : 0;
        if (wait < 0 || pub_wait < wait) wait = pub_wait;
    }
    return wait;
}

void policy_server_run(policy_server_t *self)
{
    int fd = self->kube ? policy_kube_fd(self->kube) : policy_watch_fd(self->watch);
    const ipl_loop_item_t items[] = {{zsock_resolve(self->rep), -1, s_on_rep, self},
                                     {NULL, fd, self->kube ? s_on_kube : s_on_watch, self}};
    // a failed poll is logged and ends it
    (void)ipl_loop_run(items, fd >= 0 ? 2 : 1, -1, s_tick, self);
}

uint64_t policy_server_version(policy_server_t *self)
{
    return self->version;
}

uint64_t policy_server_hash(policy_server_t *self)
{
    return self->hash;
}

const char *policy_server_watch_mode(policy_server_t *self)
{
    return self->watch ? policy_watch_mode(self->watch) : "kubernetes";
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
    if (self->kube) { // the watcher's side is live, not as of the last compilation
        cJSON *root = cJSON_Parse(json ? json : "{\"valid\": false}");
        if (root) cJSON_AddItemToObject(root, "kube", policy_kube_debug(self->kube));
        free(json);
        json = root ? cJSON_PrintUnformatted(root) : NULL;
        cJSON_Delete(root);
    }
    if (!json) {
        ipl_http_resp_error(resp, 503, "server_error", "no policy has been read yet");
        return;
    }
    ipl_http_resp_take(resp, 200, "application/json", &json, strlen(json));
}
