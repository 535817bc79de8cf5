/*
 * policy_kube — list/watch of our custom resources on the kube thread (libcurl multi, one
 * transfer per kind at a time), status writes (blocking easy handle, same thread), and the
 * hand-over of object sets to the policy server's thread through `pending` and an eventfd.
 *
 * Per kind:
 *
 *   IDLE ──(next_ms due; need_list)──► LIST ──200──► objects of the kind replaced, RV ─┐
 *    ▲  ◄──(not need_list)─────────► WATCH ◄───────────────────────────────────────────┘
 *    │                                 │ events: objects, RV; ERROR 410 → need_list
 *    └── stream ended: at once; 410: relist at once; error: backoff ───┘
 */
#include "policy_kube.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "ipl_clock.h"
#include "ipl_log.h"

#define S_MAX_LIST_BYTES   (64u << 20)
#define S_MAX_ERROR_BYTES  4096
#define S_MAX_LINE_DEFAULT (16u << 20)
#define S_MAX_WRITES_PER_S 20
#define S_QUIET_MS         20  // a burst of events is over after this much quiet
#define S_MAX_DELAY_MS     200 // and is handed over this long after its first event at most
#define S_WRITE_TIMEOUT_MS 2000
#define S_MAX_MESSAGE      1024

// The kinds we follow: adding one is a line (its CRD in crds/, the compiler knowing it).
// Pods are not compiled: they become the workers of the worker sets whose selector they match.
typedef struct {
    const char *kind, *plural, *group_version; // group_version "v1": the core API (/api/v1)
    bool compiled;
} s_kind_def_t;

#define S_OURS POLICY_KUBE_GROUP_VERSION
static const s_kind_def_t s_kinds[] = {
    {"InferenceWorkerSet", "inferenceworkersets", S_OURS, true},
    {"InferencePool", "inferencepools", S_OURS, true},
    {"GatewayBackend", "gatewaybackends", S_OURS, true},
    {"InferenceProvider", "inferenceproviders", S_OURS, true},
    {"InferencePolicy", "inferencepolicies", S_OURS, true},
    {"Pod", "pods", "v1", false},
};
enum { S_KIND_WORKERSET = 0 }; // the kind whose selector picks pods
#define S_NKINDS (sizeof s_kinds / sizeof s_kinds[0])

// Reasons of inferplane_policy_kube_errors_total.
enum { S_ERR_CONNECT, S_ERR_HTTP, S_ERR_DECODE, S_ERR_WATCH, S_ERR_WRITE, S_NERR };
static const char *const s_err_names[S_NERR] = {"connect", "http", "decode", "watch_error",
                                                "status_write"};

typedef struct {
    char *data;
    size_t len, cap;
} s_buf_t;

typedef enum { K_IDLE, K_LIST, K_WATCH } s_state_t;
static const char *const s_state_names[] = {"idle", "listing", "watching"};

typedef struct s_kind s_kind_t;
typedef struct policy_kube policy_kube_t;

struct s_kind {
    const s_kind_def_t *def;
    policy_kube_t *owner;
    s_state_t state;
    uint64_t next_ms; // IDLE: start at (monotonic)
    uint64_t started_ms;
    bool need_list, listed;
    bool missing; // the last list was 404 (no CRD): listing again is no relist
    char rv[64];
    uint64_t backoff_ms;
    CURL *easy;
    struct curl_slist *headers;
    s_buf_t body; // list body, or an error answer's
    policy_kube_stream_t stream;
    bool gone; // an ERROR 410 came on this watch
    uint64_t events;
    uint64_t lists, relists, errors; // under owner->lock
};

typedef struct {
    char *doc, *ns, *name;
    size_t kind;
    int64_t generation;
    char *text;    // the compiled part, as JSON
    cJSON *status; // as last seen; NULL: none
} s_obj_t;

typedef struct {
    char *doc;
    policy_kube_want_t want; // strings owned
} s_write_t;

struct policy_kube_set {
    size_t n;
    char **docs, **texts;
    int64_t *generations;
    char **node_workers, **nodes; // the node of each selected pod's worker (nnodes, cap)
    size_t nnodes, cap_nodes;
};

struct policy_kube {
    char *api, *ns, *token_file, *ca_file;
    uint64_t backoff_min_ms, backoff_max_ms;
    int watch_timeout_s;
    int efd;
    pthread_t thread;
    bool started;
    CURLM *multi;
    CURL *writer;
    s_kind_t kinds[S_NKINDS];

    // kube thread only
    s_obj_t *objs;
    size_t nobjs, cap_objs;
    bool dirty;
    uint64_t dirty_first_ms, last_event_ms;
    uint64_t write_window_ms;
    unsigned writes_in_window;

    pthread_mutex_t lock; // guards what follows (and kinds[].rv/state/counters for readers)
    bool stop;
    policy_kube_set_t *pending;
    s_write_t *writes;
    size_t nwrites, next_write;
    uint64_t relists, errors_total, status_writes;
    char last_error[512], last_error_at[32];

    ipl_metric_t *m_errors[S_NERR], *m_relists, *m_writes, *m_objects;
};

// ---- small helpers ----------------------------------------------------------------------------

static char *s_strdup(const char *s)
{
    char *d = strdup(s ? s : "");
    if (!d) abort(); // as the compiler: these are small
    return d;
}

static bool s_buf_add(s_buf_t *b, const char *data, size_t len, size_t max)
{
    if (b->len + len > max) return false;
    if (b->len + len + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + len + 1)
            cap *= 2;
        char *d = realloc(b->data, cap);
        if (!d) return false;
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, data, len);
    b->len += len;
    b->data[b->len] = '\0';
    return true;
}

static void s_rfc3339(char *buf, size_t size)
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static int64_t s_int(const cJSON *o, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return cJSON_IsNumber(v) ? (int64_t)v->valuedouble : 0;
}

static const char *s_str(const cJSON *o, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

// The collection path of a kind: /apis/<group>/<version>/[namespaces/NS/]<plural>.
static void s_collection(char *buf, size_t size, const char *api, const s_kind_def_t *def,
                         const char *ns)
{
    bool core = !strchr(def->group_version, '/');
    snprintf(buf, size, "%s/%s/%s/%s%s%s%s", api, core ? "api" : "apis", def->group_version,
             ns && *ns ? "namespaces/" : "", ns && *ns ? ns : "", ns && *ns ? "/" : "",
             def->plural);
}

// ---- the watch stream -------------------------------------------------------------------------

void policy_kube_stream_init(policy_kube_stream_t *s, policy_kube_event_fn *fn, void *arg)
{
    memset(s, 0, sizeof *s);
    s->fn = fn;
    s->arg = arg;
}

void policy_kube_stream_reset(policy_kube_stream_t *s)
{
    s->len = 0;
    s->skipping = false;
}

void policy_kube_stream_free(policy_kube_stream_t *s)
{
    free(s->buf);
    s->buf = NULL;
    s->len = s->cap = 0;
}

static bool s_line(policy_kube_stream_t *s, const char *line, size_t len)
{
    while (len && (line[len - 1] == '\r' || line[len - 1] == ' '))
        len--;
    if (len == 0) return false; // blank lines between events are harmless
    static const char *const types[] = {"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"};
    cJSON *root = cJSON_ParseWithLength(line, len);
    const char *type = s_str(root, "type");
    cJSON *object = cJSON_GetObjectItemCaseSensitive(root, "object");
    int t = -1;
    for (int i = 0; type && i < 5; i++)
        if (!strcmp(type, types[i])) t = i;
    if (t < 0 || !cJSON_IsObject(object)) {
        s->garbage++;
        cJSON_Delete(root);
        return false;
    }
    s->events++;
    if (s->fn)
        s->fn(s->arg, (policy_kube_event_type_t)t, object,
              t == POLICY_KUBE_ERROR ? (int)s_int(object, "code") : 0);
    cJSON_Delete(root);
    return true;
}

size_t policy_kube_stream_feed(policy_kube_stream_t *s, const char *data, size_t len)
{
    size_t max = s->max_line ? s->max_line : S_MAX_LINE_DEFAULT, events = 0;
    while (len) {
        const char *nl = memchr(data, '\n', len);
        size_t part = nl ? (size_t)(nl - data) : len;
        if (!s->skipping) {
            if (s->len + part > max) {
                s->skipping = true; // the rest of this line is dropped, and the line counted
                s->len = 0;
            } else {
                s_buf_t b = {s->buf, s->len, s->cap};
                if (!s_buf_add(&b, data, part, max)) {
                    s->skipping = true;
                    s->len = 0;
                } else {
                    s->buf = b.data;
                    s->len = b.len;
                    s->cap = b.cap;
                }
            }
        }
        if (!nl) break;
        if (s->skipping)
            s->garbage++;
        else
            events += s_line(s, s->buf ? s->buf : "", s->len);
        s->len = 0;
        s->skipping = false;
        data += part + 1;
        len -= part + 1;
    }
    return events;
}

// ---- conditions -------------------------------------------------------------------------------

void policy_kube_want(const policy_compiler_t *c, const char *doc, int64_t generation,
                      policy_kube_want_t *want)
{
    *want = (policy_kube_want_t){.accepted = true,
                                 .resolved = true,
                                 .accepted_reason = "Accepted",
                                 .accepted_message = "",
                                 .resolved_reason = "ResolvedRefs",
                                 .resolved_message = "",
                                 .generation = generation};
    size_t dl = strlen(doc);
    for (size_t i = 0; i < policy_compiler_nerrors(c); i++) {
        const char *e = policy_compiler_error(c, i);
        if (strncmp(e, doc, dl) || e[dl] != ':') continue;
        if (want->accepted) {
            want->accepted = false;
            want->accepted_reason = "Invalid";
            want->accepted_message = e;
        }
        if (strstr(e, "does not exist") && want->resolved) {
            want->resolved = false;
            want->resolved_reason = "RefNotFound";
            want->resolved_message = e;
        }
    }
}

static const cJSON *s_condition(const cJSON *status, const char *type)
{
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(status, "conditions"), *c;
    cJSON_ArrayForEach(c, list)
    {
        const char *t = s_str(c, "type");
        if (t && !strcmp(t, type)) return c;
    }
    return NULL;
}

static bool s_same(const cJSON *have, bool ok, const char *reason, const char *message, int64_t gen)
{
    const char *st = s_str(have, "status"), *r = s_str(have, "reason"), *m = s_str(have, "message");
    return have && st && r && m && !strcmp(st, ok ? "True" : "False") && !strcmp(r, reason) &&
           !strncmp(m, message, S_MAX_MESSAGE) && strlen(m) == strnlen(message, S_MAX_MESSAGE) &&
           s_int(have, "observedGeneration") == gen;
}

static void s_add_condition(cJSON *list, const cJSON *have, const char *type, bool ok,
                            const char *reason, const char *message, int64_t gen, const char *now)
{
    cJSON *c = cJSON_CreateObject();
    cJSON_AddStringToObject(c, "type", type);
    cJSON_AddStringToObject(c, "status", ok ? "True" : "False");
    cJSON_AddStringToObject(c, "reason", reason);
    char msg[S_MAX_MESSAGE + 1];
    snprintf(msg, sizeof msg, "%s", message);
    cJSON_AddStringToObject(c, "message", msg);
    cJSON_AddNumberToObject(c, "observedGeneration", (double)gen);
    const char *st = s_str(have, "status"), *since = s_str(have, "lastTransitionTime");
    bool kept = st && since && !strcmp(st, ok ? "True" : "False");
    cJSON_AddStringToObject(c, "lastTransitionTime", kept ? since : now);
    cJSON_AddItemToArray(list, c);
}

char *policy_kube_status_patch(const cJSON *status, const policy_kube_want_t *w, const char *now)
{
    const cJSON *a = s_condition(status, "Accepted"), *r = s_condition(status, "ResolvedRefs");
    if (s_int(status, "observedGeneration") == w->generation &&
        s_same(a, w->accepted, w->accepted_reason, w->accepted_message, w->generation) &&
        s_same(r, w->resolved, w->resolved_reason, w->resolved_message, w->generation))
        return NULL;
    cJSON *root = cJSON_CreateObject();
    cJSON *st = cJSON_AddObjectToObject(root, "status");
    cJSON_AddNumberToObject(st, "observedGeneration", (double)w->generation);
    cJSON *list = cJSON_AddArrayToObject(st, "conditions");
    s_add_condition(list, a, "Accepted", w->accepted, w->accepted_reason, w->accepted_message,
                    w->generation, now);
    s_add_condition(list, r, "ResolvedRefs", w->resolved, w->resolved_reason, w->resolved_message,
                    w->generation, now);
    char *json = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return json;
}

// ---- object sets ------------------------------------------------------------------------------

void policy_kube_set_destroy(policy_kube_set_t **set_p)
{
    if (!set_p || !*set_p) return;
    policy_kube_set_t *set = *set_p;
    for (size_t i = 0; i < set->n; i++) {
        free(set->docs[i]);
        free(set->texts[i]);
    }
    for (size_t i = 0; i < set->nnodes; i++) {
        free(set->node_workers[i]);
        free(set->nodes[i]);
    }
    free(set->docs);
    free(set->texts);
    free(set->generations);
    free(set->node_workers);
    free(set->nodes);
    free(set);
    *set_p = NULL;
}

size_t policy_kube_set_size(const policy_kube_set_t *set)
{
    return set ? set->n : 0;
}

int policy_kube_set_add_to(const policy_kube_set_t *set, policy_compiler_t *c)
{
    int errors = 0;
    for (size_t i = 0; i < set->n; i++)
        errors += policy_compiler_add_string(c, set->docs[i], set->texts[i], strlen(set->texts[i]));
    for (size_t i = 0; i < set->nnodes; i++)
        policy_compiler_set_node(c, set->node_workers[i], set->nodes[i]);
    return errors;
}

static char *s_expand(const s_obj_t *set, const s_obj_t *objs, size_t n, policy_kube_set_t *out);

static int s_obj_cmp(const void *a, const void *b)
{
    return strcmp(((const s_obj_t *)a)->doc, ((const s_obj_t *)b)->doc);
}

// kube thread: the current objects as a set (sorted by document name).
static policy_kube_set_t *s_snapshot(policy_kube_t *self)
{
    if (self->nobjs) qsort(self->objs, self->nobjs, sizeof *self->objs, s_obj_cmp);
    policy_kube_set_t *set = calloc(1, sizeof *set);
    size_t n = self->nobjs ? self->nobjs : 1;
    if (!set || !(set->docs = calloc(n, sizeof *set->docs)) ||
        !(set->texts = calloc(n, sizeof *set->texts)) ||
        !(set->generations = calloc(n, sizeof *set->generations)))
        abort();
    size_t k = 0;
    for (size_t i = 0; i < self->nobjs; i++) {
        const s_obj_t *o = &self->objs[i];
        if (!s_kinds[o->kind].compiled) continue;
        char *expanded =
            o->kind == S_KIND_WORKERSET ? s_expand(o, self->objs, self->nobjs, set) : NULL;
        set->docs[k] = s_strdup(o->doc);
        set->texts[k] = expanded ? expanded : s_strdup(o->text);
        set->generations[k] = o->generation;
        k++;
    }
    set->n = k;
    return set;
}

// ---- errors -----------------------------------------------------------------------------------

static void s_error(policy_kube_t *self, s_kind_t *k, int reason, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void s_error(policy_kube_t *self, s_kind_t *k, int reason, const char *fmt, ...)
{
    char msg[512], quoted[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ipl_metric_inc(self->m_errors[reason]);
    pthread_mutex_lock(&self->lock);
    self->errors_total++;
    if (k) k->errors++;
    snprintf(self->last_error, sizeof self->last_error, "%s", msg);
    ipl_wall_iso8601(self->last_error_at, sizeof self->last_error_at);
    pthread_mutex_unlock(&self->lock);
    IPL_LOG_EVERY(5.0, IPL_LOG_WARN, "kube_error", "reason=%s kind=%s error=%s",
                  s_err_names[reason], k ? k->def->kind : "-",
                  ipl_log_quote(quoted, sizeof quoted, msg));
}

// The next attempt of `k` after a failure: backoff_ms with ±25 % jitter, then doubled.
static void s_backoff(policy_kube_t *self, s_kind_t *k)
{
    if (!k->backoff_ms) k->backoff_ms = self->backoff_min_ms;
    double jitter = 0.75 + 0.5 * ((double)rand() / RAND_MAX);
    k->next_ms = ipl_mono_ms() + (uint64_t)((double)k->backoff_ms * jitter);
    k->backoff_ms *= 2;
    if (k->backoff_ms > self->backoff_max_ms) k->backoff_ms = self->backoff_max_ms;
}

// ---- the object set (kube thread) -------------------------------------------------------------

static void s_obj_free(s_obj_t *o)
{
    free(o->doc);
    free(o->ns);
    free(o->name);
    free(o->text);
    cJSON_Delete(o->status);
}

static s_obj_t *s_find(policy_kube_t *self, const char *doc)
{
    for (size_t i = 0; i < self->nobjs; i++)
        if (!strcmp(self->objs[i].doc, doc)) return &self->objs[i];
    return NULL;
}

static void s_mark_dirty(policy_kube_t *self)
{
    uint64_t now = ipl_mono_ms();
    if (!self->dirty) self->dirty_first_ms = now;
    self->dirty = true;
    self->last_event_ms = now;
}

static void s_doc_name(char *buf, size_t size, const char *kind, const char *ns, const char *name)
{
    snprintf(buf, size, "%s/%s/%s", kind, ns && *ns ? ns : "-", name);
}

// ---- pods and selectors ----------------------------------------------------------------------

// What of a pod matters to the policy: {labels, ip (only when it serves), ports {name: number},
// node (spec.nodeName, once scheduled)}.
static cJSON *s_pod_summary(const cJSON *pod)
{
    cJSON *sum = cJSON_CreateObject();
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(pod, "metadata");
    const cJSON *labels = cJSON_GetObjectItemCaseSensitive(meta, "labels");
    cJSON_AddItemToObject(sum, "labels",
                          labels ? cJSON_Duplicate(labels, true) : cJSON_CreateObject());
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(pod, "status");
    const char *phase = s_str(st, "phase"), *ip = s_str(st, "podIP");
    const cJSON *ready = NULL, *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(st, "conditions"))
    {
        const char *t = s_str(c, "type");
        if (t && !strcmp(t, "Ready")) ready = c;
    }
    const char *rs = s_str(ready, "status");
    bool serving =
        phase && !strcmp(phase, "Running") && ip && *ip && (!ready || (rs && !strcmp(rs, "True")));
    if (serving) cJSON_AddStringToObject(sum, "ip", ip);
    const char *node = s_str(cJSON_GetObjectItemCaseSensitive(pod, "spec"), "nodeName");
    if (node && *node) cJSON_AddStringToObject(sum, "node", node);
    cJSON *ports = cJSON_AddObjectToObject(sum, "ports");
    const cJSON *ct, *pt;
    cJSON_ArrayForEach(ct, cJSON_GetObjectItemCaseSensitive(
                               cJSON_GetObjectItemCaseSensitive(pod, "spec"), "containers"))
    {
        cJSON_ArrayForEach(pt, cJSON_GetObjectItemCaseSensitive(ct, "ports"))
        {
            const char *n = s_str(pt, "name");
            int64_t num = s_int(pt, "containerPort");
            if (n && num > 0 && !cJSON_GetObjectItemCaseSensitive(ports, n))
                cJSON_AddNumberToObject(ports, n, (double)num);
        }
    }
    return sum;
}

bool policy_kube_selects(const cJSON *selector, const cJSON *labels)
{
    const cJSON *ml = cJSON_GetObjectItemCaseSensitive(selector, "matchLabels");
    const cJSON *me = cJSON_GetObjectItemCaseSensitive(selector, "matchExpressions"), *it;
    if (!cJSON_GetArraySize(ml) && !cJSON_GetArraySize(me)) return false; // selects nothing
    cJSON_ArrayForEach(it, ml)
    {
        const char *have = s_str(labels, it->string);
        if (!cJSON_IsString(it) || !have || strcmp(have, it->valuestring)) return false;
    }
    cJSON_ArrayForEach(it, me)
    {
        const char *key = s_str(it, "key"), *op = s_str(it, "operator");
        if (!key || !op) return false;
        const char *have = s_str(labels, key);
        bool in = false;
        const cJSON *v;
        cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(it, "values"))
        {
            in = in || (have && cJSON_IsString(v) && !strcmp(v->valuestring, have));
        }
        bool ok = !strcmp(op, "In")             ? in
                  : !strcmp(op, "NotIn")        ? !in
                  : !strcmp(op, "Exists")       ? have != NULL
                  : !strcmp(op, "DoesNotExist") ? have == NULL
                                                : false;
        if (!ok) return false;
    }
    return true;
}

// spec.ports.<which> of a worker set on a pod: a number, or a container port's name. 0: none.
static int64_t s_pod_port(const cJSON *ports, const char *which, const cJSON *pod_ports)
{
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(ports, which);
    if (cJSON_IsNumber(p)) return (int64_t)p->valuedouble;
    if (cJSON_IsString(p)) return s_int(pod_ports, p->valuestring);
    return 0;
}

// Records in `out` that the worker of pod `name` runs on `node` (policy_compiler_set_node).
static void s_add_node(policy_kube_set_t *out, const char *name, const char *node)
{
    if (out->nnodes == out->cap_nodes) {
        size_t cap = out->cap_nodes ? 2 * out->cap_nodes : 16;
        char **w = realloc(out->node_workers, cap * sizeof *w);
        if (!w) abort();
        out->node_workers = w;
        char **nd = realloc(out->nodes, cap * sizeof *nd);
        if (!nd) abort();
        out->nodes = nd;
        out->cap_nodes = cap;
    }
    out->node_workers[out->nnodes] = s_strdup(name);
    out->nodes[out->nnodes++] = s_strdup(node);
}

// A worker set's document with the pods its selector picks appended to spec.workers (in pod
// name order), or NULL when it has no selector. Pods are {doc, summary} of its namespace.
// The node of each pod picked (when it has one) goes to `out`: YAML has no field for it.
static char *s_expand(const s_obj_t *set, const s_obj_t *objs, size_t n, policy_kube_set_t *out)
{
    cJSON *root = cJSON_Parse(set->text);
    cJSON *spec = cJSON_GetObjectItemCaseSensitive(root, "spec");
    const cJSON *sel = cJSON_GetObjectItemCaseSensitive(spec, "selector");
    const cJSON *ports = cJSON_GetObjectItemCaseSensitive(spec, "ports");
    if (!cJSON_IsObject(sel)) {
        cJSON_Delete(root);
        return NULL;
    }
    cJSON *workers = cJSON_GetObjectItemCaseSensitive(spec, "workers");
    if (!cJSON_IsArray(workers)) {
        cJSON_DeleteItemFromObjectCaseSensitive(spec, "workers");
        workers = cJSON_AddArrayToObject(spec, "workers");
    }
    for (size_t i = 0; i < n; i++) {
        const s_obj_t *o = &objs[i];
        if (s_kinds[o->kind].compiled || strcmp(o->ns, set->ns)) continue;
        cJSON *sum = cJSON_Parse(o->text);
        const char *ip = s_str(sum, "ip");
        const cJSON *pp = cJSON_GetObjectItemCaseSensitive(sum, "ports");
        int64_t api = s_pod_port(ports, "api", pp), kv = s_pod_port(ports, "kvEvents", pp);
        int64_t replay = s_pod_port(ports, "replay", pp),
                metrics = s_pod_port(ports, "metrics", pp);
        if (ip && api > 0 &&
            policy_kube_selects(sel, cJSON_GetObjectItemCaseSensitive(sum, "labels"))) {
            char buf[300];
            bool v6 = strchr(ip, ':') != NULL;
            const char *l = v6 ? "[" : "", *r = v6 ? "]" : "";
            cJSON *w = cJSON_CreateObject();
            cJSON_AddStringToObject(w, "name", o->name);
            snprintf(buf, sizeof buf, "http://%s%s%s:%lld", l, ip, r, (long long)api);
            cJSON_AddStringToObject(w, "url", buf);
            if (kv > 0) {
                snprintf(buf, sizeof buf, "tcp://%s%s%s:%lld", l, ip, r, (long long)kv);
                cJSON_AddStringToObject(w, "kvEvents", buf);
            }
            if (kv > 0 && replay > 0) {
                snprintf(buf, sizeof buf, "tcp://%s%s%s:%lld", l, ip, r, (long long)replay);
                cJSON_AddStringToObject(w, "replay", buf);
            }
            if (metrics > 0) {
                snprintf(buf, sizeof buf, "http://%s%s%s:%lld/metrics", l, ip, r,
                         (long long)metrics);
                cJSON_AddStringToObject(w, "metrics", buf);
            }
            cJSON_AddItemToArray(workers, w);
            const char *node = s_str(sum, "node");
            if (node) s_add_node(out, o->name, node);
        }
        cJSON_Delete(sum);
    }
    if (!cJSON_GetArraySize(workers)) cJSON_DeleteItemFromObjectCaseSensitive(spec, "workers");
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    return text;
}

// ADDED/MODIFIED, or an item of a list: the object is kept with its compiled part.
static void s_upsert(policy_kube_t *self, size_t kind, const cJSON *object)
{
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(object, "metadata");
    const char *name = s_str(meta, "name"), *ns = s_str(meta, "namespace");
    if (!name) {
        s_error(self, &self->kinds[kind], S_ERR_DECODE, "%s without metadata.name",
                s_kinds[kind].kind);
        return;
    }
    char doc[512];
    s_doc_name(doc, sizeof doc, s_kinds[kind].kind, ns, name);
    cJSON *part = s_kinds[kind].compiled ? cJSON_CreateObject() : s_pod_summary(object);
    const char *api = s_str(object, "apiVersion");
    if (s_kinds[kind].compiled) {
        cJSON_AddStringToObject(part, "apiVersion", api ? api : POLICY_KUBE_GROUP_VERSION);
        cJSON_AddStringToObject(part, "kind", s_kinds[kind].kind);
        cJSON *m = cJSON_AddObjectToObject(part, "metadata");
        cJSON_AddStringToObject(m, "name", name);
        if (ns) cJSON_AddStringToObject(m, "namespace", ns);
        const cJSON *spec = cJSON_GetObjectItemCaseSensitive(object, "spec");
        if (spec) cJSON_AddItemToObject(part, "spec", cJSON_Duplicate(spec, true));
    }
    char *text = cJSON_Print(part); // several lines: errors get useful line numbers
    cJSON_Delete(part);
    if (!text) abort();
    const cJSON *status =
        s_kinds[kind].compiled ? cJSON_GetObjectItemCaseSensitive(object, "status") : NULL;
    s_obj_t *o = s_find(self, doc);
    if (!o) {
        if (self->nobjs == self->cap_objs) {
            size_t cap = self->cap_objs ? self->cap_objs * 2 : 16;
            s_obj_t *objs = realloc(self->objs, cap * sizeof *objs);
            if (!objs) abort();
            self->objs = objs;
            self->cap_objs = cap;
        }
        o = &self->objs[self->nobjs++];
        *o = (s_obj_t){
            .doc = s_strdup(doc), .ns = s_strdup(ns), .name = s_strdup(name), .kind = kind};
        s_mark_dirty(self);
    } else if (strcmp(o->text, text)) {
        free(o->text);
        o->text = NULL;
        s_mark_dirty(self);
    }
    if (!o->text)
        o->text = text;
    else
        free(text);
    o->generation = s_int(meta, "generation");
    cJSON_Delete(o->status);
    o->status = status ? cJSON_Duplicate(status, true) : NULL;
}

static void s_remove(policy_kube_t *self, size_t i)
{
    s_obj_free(&self->objs[i]);
    self->objs[i] = self->objs[--self->nobjs];
    s_mark_dirty(self);
}

static void s_delete(policy_kube_t *self, size_t kind, const cJSON *object)
{
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(object, "metadata");
    const char *name = s_str(meta, "name");
    char doc[512];
    if (!name) return;
    s_doc_name(doc, sizeof doc, s_kinds[kind].kind, s_str(meta, "namespace"), name);
    s_obj_t *o = s_find(self, doc);
    if (o) s_remove(self, (size_t)(o - self->objs));
}

static void s_set_rv(s_kind_t *k, const cJSON *object)
{
    const char *rv = s_str(cJSON_GetObjectItemCaseSensitive(object, "metadata"), "resourceVersion");
    if (!rv || strlen(rv) >= sizeof k->rv) return;
    pthread_mutex_lock(&k->owner->lock);
    snprintf(k->rv, sizeof k->rv, "%s", rv);
    pthread_mutex_unlock(&k->owner->lock);
}

// policy_kube_event_fn of each kind's watch stream.
static void s_on_event(void *arg, policy_kube_event_type_t type, cJSON *object, int code)
{
    s_kind_t *k = arg;
    policy_kube_t *self = k->owner;
    size_t kind = (size_t)(k->def - s_kinds);
    k->events++;
    switch (type) {
    case POLICY_KUBE_ADDED:
    case POLICY_KUBE_MODIFIED:
        s_upsert(self, kind, object);
        s_set_rv(k, object);
        break;
    case POLICY_KUBE_DELETED:
        s_delete(self, kind, object);
        s_set_rv(k, object);
        break;
    case POLICY_KUBE_BOOKMARK:
        s_set_rv(k, object);
        break;
    case POLICY_KUBE_ERROR:
        if (code == 410) {
            k->gone = true;
            k->need_list = true;
        } else {
            const char *msg = s_str(object, "message");
            s_error(self, k, S_ERR_WATCH, "watch %s: ERROR event %d: %s", k->def->plural, code,
                    msg ? msg : "(no message)");
        }
        break;
    }
}

// ---- requests ---------------------------------------------------------------------------------

// The headers of every request: Accept, and the bearer token when there is one.
static struct curl_slist *s_headers(policy_kube_t *self, const char *content_type)
{
    struct curl_slist *h = curl_slist_append(NULL, "Accept: application/json");
    if (content_type) {
        char ct[128];
        snprintf(ct, sizeof ct, "Content-Type: %s", content_type);
        h = curl_slist_append(h, ct);
    }
    if (self->token_file) {
        FILE *f = fopen(self->token_file, "r");
        char token[8192], line[8300];
        size_t n = f ? fread(token, 1, sizeof token - 1, f) : 0;
        if (f) fclose(f);
        while (n && (token[n - 1] == '\n' || token[n - 1] == '\r' || token[n - 1] == ' '))
            n--;
        token[n] = '\0';
        if (n) {
            snprintf(line, sizeof line, "Authorization: Bearer %s", token);
            h = curl_slist_append(h, line);
        }
    }
    return h;
}

static void s_common_opts(policy_kube_t *self, CURL *e)
{
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 2000L);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L); // a vanished peer ends a quiet watch
    curl_easy_setopt(e, CURLOPT_TCP_KEEPIDLE, 30L);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPINTVL, 10L);
    curl_easy_setopt(e, CURLOPT_USERAGENT, "inferplane-policy/" IPL_VERSION);
    if (self->ca_file) curl_easy_setopt(e, CURLOPT_CAINFO, self->ca_file);
}

static size_t s_write_cb(char *data, size_t size, size_t nmemb, void *arg)
{
    s_kind_t *k = arg;
    size_t len = size * nmemb;
    long code = 0;
    curl_easy_getinfo(k->easy, CURLINFO_RESPONSE_CODE, &code);
    if (k->state == K_WATCH && code == 200) {
        policy_kube_stream_feed(&k->stream, data, len);
        return len;
    }
    size_t max = k->state == K_LIST && code == 200 ? S_MAX_LIST_BYTES : S_MAX_ERROR_BYTES;
    if (!s_buf_add(&k->body, data, len, max) && code == 200) return 0; // a list too big: abort
    return len;
}

static void s_start(policy_kube_t *self, s_kind_t *k)
{
    char url[2048], base[1800];
    s_collection(base, sizeof base, self->api, k->def, self->ns);
    bool list = k->need_list || !k->rv[0];
    if (list)
        snprintf(url, sizeof url, "%s", base);
    else
        snprintf(url, sizeof url,
                 "%s?watch=true&resourceVersion=%s&allowWatchBookmarks=true&timeoutSeconds=%d",
                 base, k->rv, self->watch_timeout_s);
    k->easy = curl_easy_init();
    if (!k->easy) abort();
    k->body.len = 0;
    policy_kube_stream_reset(&k->stream);
    k->gone = false;
    k->events = 0;
    k->headers = s_headers(self, NULL);
    s_common_opts(self, k->easy);
    curl_easy_setopt(k->easy, CURLOPT_URL, url);
    curl_easy_setopt(k->easy, CURLOPT_HTTPHEADER, k->headers);
    curl_easy_setopt(k->easy, CURLOPT_WRITEFUNCTION, s_write_cb);
    curl_easy_setopt(k->easy, CURLOPT_WRITEDATA, k);
    curl_easy_setopt(k->easy, CURLOPT_PRIVATE, k);
    // a list is bounded; a watch lasts timeoutSeconds, and a dead peer is seen by the speed
    // limit (bookmarks and the server's keepalive are not guaranteed, so it is generous)
    curl_easy_setopt(k->easy, CURLOPT_TIMEOUT_MS,
                     list ? 30000L : (long)(self->watch_timeout_s + 30) * 1000L);
    pthread_mutex_lock(&self->lock);
    k->state = list ? K_LIST : K_WATCH;
    if (list) {
        if (k->lists++ && !k->missing) {
            k->relists++;
            self->relists++;
            ipl_metric_inc(self->m_relists);
        }
    }
    pthread_mutex_unlock(&self->lock);
    k->started_ms = ipl_mono_ms();
    if (curl_multi_add_handle(self->multi, k->easy) != CURLM_OK) abort();
}

static void s_finish_easy(policy_kube_t *self, s_kind_t *k)
{
    curl_multi_remove_handle(self->multi, k->easy);
    curl_easy_cleanup(k->easy);
    k->easy = NULL;
    curl_slist_free_all(k->headers);
    k->headers = NULL;
    pthread_mutex_lock(&self->lock);
    k->state = K_IDLE;
    pthread_mutex_unlock(&self->lock);
}

// A list answered 200: the kind's objects are replaced by its items.
static void s_listed(policy_kube_t *self, s_kind_t *k)
{
    size_t kind = (size_t)(k->def - s_kinds);
    cJSON *root = cJSON_ParseWithLength(k->body.data ? k->body.data : "", k->body.len);
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(root, "items"), *it;
    if (!cJSON_IsArray(items)) {
        s_error(self, k, S_ERR_DECODE, "list %s: the answer is not a list", k->def->plural);
        cJSON_Delete(root);
        s_backoff(self, k);
        return;
    }
    // objects of this kind no longer listed go (deleted while we were not watching)
    for (size_t i = self->nobjs; i-- > 0;) {
        if (self->objs[i].kind != kind) continue;
        bool found = false;
        cJSON_ArrayForEach(it, items)
        {
            const cJSON *m = cJSON_GetObjectItemCaseSensitive(it, "metadata");
            const char *name = s_str(m, "name"), *ns = s_str(m, "namespace");
            found = found || (name && !strcmp(name, self->objs[i].name) &&
                              !strcmp(ns ? ns : "", self->objs[i].ns));
        }
        if (!found) s_remove(self, i);
    }
    cJSON_ArrayForEach(it, items) s_upsert(self, kind, it);
    s_set_rv(k, root);
    if (!k->listed) s_mark_dirty(self); // the first set goes out even when empty
    k->listed = true;
    k->missing = false;
    k->need_list = false;
    k->backoff_ms = 0;
    k->next_ms = 0;
    cJSON_Delete(root);
}

// A transfer of `k` ended with `result`.
static void s_done(policy_kube_t *self, s_kind_t *k, CURLcode result)
{
    long code = 0;
    curl_easy_getinfo(k->easy, CURLINFO_RESPONSE_CODE, &code);
    bool list = k->state == K_LIST;
    uint64_t lasted = ipl_mono_ms() - k->started_ms;
    char errbuf[CURL_ERROR_SIZE];
    snprintf(errbuf, sizeof errbuf, "%s", curl_easy_strerror(result));
    if (k->stream.garbage) {
        s_error(self, k, S_ERR_DECODE, "watch %s: %llu line(s) that are not watch events skipped",
                k->def->plural, (unsigned long long)k->stream.garbage);
        k->stream.garbage = 0;
    }
    s_finish_easy(self, k);
    bool timed_out_watch = !list && result == CURLE_OPERATION_TIMEDOUT && code == 200;
    if (result != CURLE_OK && !timed_out_watch) { // refused, reset, a list too big, ...
        s_error(self, k, S_ERR_CONNECT, "%s %s at %s: %s", list ? "list" : "watch", k->def->plural,
                self->api, errbuf);
        s_backoff(self, k);
    } else if (list && code == 200 && result == CURLE_OK) {
        s_listed(self, k);
    } else if (list && code == 404) {
        // the CRD is not installed: no objects of this kind, look again later
        if (!k->listed) s_mark_dirty(self);
        k->listed = true;
        k->missing = true;
        for (size_t i = self->nobjs; i-- > 0;)
            if (self->objs[i].kind == (size_t)(k->def - s_kinds)) s_remove(self, i);
        k->need_list = true;
        k->next_ms = ipl_mono_ms() + self->backoff_max_ms;
        IPL_LOG_EVERY(60.0, IPL_LOG_INFO, "kube_kind_missing", "kind=%s plural=%s note=%s",
                      k->def->kind, k->def->plural,
                      "\"404: its CRD is not installed; treated as empty\"");
    } else if (code == 410 || k->gone) {
        k->need_list = true; // our resourceVersion is too old (compaction, a restart)
        k->next_ms = 0;
    } else if (!list && code == 200) {
        // the watch ended (timeoutSeconds, the server closed it): watch again from RV; at once
        // when it was a real watch, after a backoff when it ends as soon as it starts
        if (lasted >= 1000 || k->events) {
            k->backoff_ms = 0;
            k->next_ms = 0;
        } else {
            s_backoff(self, k);
        }
    } else {
        char snippet[200] = "";
        if (k->body.data) snprintf(snippet, sizeof snippet, "%s", k->body.data);
        s_error(self, k, S_ERR_HTTP, "%s %s at %s: HTTP %ld %s", list ? "list" : "watch",
                k->def->plural, self->api, code, snippet);
        if (code == 504 || code == 400) k->need_list = true; // "Too large resource version"
        s_backoff(self, k);
    }
}

// ---- status writes ----------------------------------------------------------------------------

static size_t s_collect(char *data, size_t size, size_t nmemb, void *arg)
{
    size_t len = size * nmemb;
    return s_buf_add(arg, data, len, S_MAX_LIST_BYTES) ? len : 0;
}

static void s_write_free(s_write_t *w)
{
    free(w->doc);
    free((char *)w->want.accepted_message);
    free((char *)w->want.resolved_message);
}

// One status write (blocking). Returns false when it failed and should be retried later.
static bool s_write_one(policy_kube_t *self, const s_write_t *w)
{
    s_obj_t *o = s_find(self, w->doc);
    if (!o) return true; // gone meanwhile
    char now[32];
    s_rfc3339(now, sizeof now);
    char *patch = policy_kube_status_patch(o->status, &w->want, now);
    if (!patch) return true;
    char url[2048], base[1800];
    s_collection(base, sizeof base, self->api, &s_kinds[o->kind], o->ns);
    snprintf(url, sizeof url, "%s/%s/status", base, o->name);
    CURL *e = self->writer;
    curl_easy_reset(e);
    s_common_opts(self, e);
    struct curl_slist *h = s_headers(self, "application/merge-patch+json");
    s_buf_t body = {0};
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, "PATCH");
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, patch);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, s_collect);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &body);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)S_WRITE_TIMEOUT_MS);
    CURLcode rc = curl_easy_perform(e);
    long code = 0;
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &code);
    curl_slist_free_all(h);
    bool ok = rc == CURLE_OK && code == 200;
    if (ok) {
        cJSON *obj = cJSON_ParseWithLength(body.data ? body.data : "", body.len);
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(obj, "status");
        if (st) {
            cJSON_Delete(o->status);
            o->status = cJSON_Duplicate(st, true);
        }
        cJSON_Delete(obj);
        ipl_metric_inc(self->m_writes);
        pthread_mutex_lock(&self->lock);
        self->status_writes++;
        pthread_mutex_unlock(&self->lock);
        IPL_DEBUG("kube_status_written", "object=%s accepted=%d", w->doc, w->want.accepted);
    } else {
        char snippet[200] = "";
        if (body.data) snprintf(snippet, sizeof snippet, "%s", body.data);
        s_error(self, NULL, S_ERR_WRITE, "PATCH %s: %s", url,
                rc != CURLE_OK ? curl_easy_strerror(rc) : snippet);
    }
    free(body.data);
    free(patch);
    return ok || code == 404 || code == 422; // gone, or refused: a retry would not help
}

// Sends the queued writes, at most S_MAX_WRITES_PER_S a second. Returns when to come back
// (ms from now; -1: nothing queued).
static long s_writes(policy_kube_t *self)
{
    uint64_t now = ipl_mono_ms();
    if (now >= self->write_window_ms + 1000) {
        self->write_window_ms = now;
        self->writes_in_window = 0;
    }
    while (self->writes_in_window < S_MAX_WRITES_PER_S) {
        pthread_mutex_lock(&self->lock);
        s_write_t w = {0};
        bool have = self->next_write < self->nwrites;
        if (have) { // copied, since a new report may replace the queue while we write
            const s_write_t *q = &self->writes[self->next_write];
            w = *q;
            w.doc = s_strdup(q->doc);
            w.want.accepted_message = s_strdup(q->want.accepted_message);
            w.want.resolved_message = s_strdup(q->want.resolved_message);
        }
        pthread_mutex_unlock(&self->lock);
        if (!have) return -1;
        bool done = s_write_one(self, &w);
        self->writes_in_window++;
        if (done) {
            pthread_mutex_lock(&self->lock);
            if (self->next_write < self->nwrites &&
                !strcmp(self->writes[self->next_write].doc, w.doc))
                self->next_write++;
            pthread_mutex_unlock(&self->lock);
        }
        s_write_free(&w);
        if (!done) return 1000; // the server is unwell: try again in a second
    }
    return (long)(self->write_window_ms + 1000 - now);
}

// ---- the thread -------------------------------------------------------------------------------

static bool s_all_listed(const policy_kube_t *self)
{
    for (size_t i = 0; i < S_NKINDS; i++)
        if (!self->kinds[i].listed) return false;
    return true;
}

static void s_hand_over(policy_kube_t *self)
{
    policy_kube_set_t *set = s_snapshot(self);
    ipl_metric_set(self->m_objects, (double)set->n);
    pthread_mutex_lock(&self->lock);
    policy_kube_set_destroy(&self->pending);
    self->pending = set;
    pthread_mutex_unlock(&self->lock);
    uint64_t one = 1;
    if (write(self->efd, &one, sizeof one) < 0 && errno != EAGAIN)
        IPL_LOG_EVERY(60.0, IPL_LOG_ERROR, "kube_eventfd", "errno=%d", errno);
    self->dirty = false;
}

static void *s_thread(void *arg)
{
    policy_kube_t *self = arg;
    for (;;) {
        pthread_mutex_lock(&self->lock);
        bool stop = self->stop;
        pthread_mutex_unlock(&self->lock);
        if (stop) break;
        uint64_t now = ipl_mono_ms();
        long wait = 500;
        for (size_t i = 0; i < S_NKINDS; i++) {
            s_kind_t *k = &self->kinds[i];
            if (k->state != K_IDLE) continue;
            if (now >= k->next_ms)
                s_start(self, k);
            else if ((long)(k->next_ms - now) < wait)
                wait = (long)(k->next_ms - now);
        }
        if (self->dirty && s_all_listed(self)) {
            if (now >= self->last_event_ms + S_QUIET_MS ||
                now >= self->dirty_first_ms + S_MAX_DELAY_MS)
                s_hand_over(self);
            else
                wait = wait < S_QUIET_MS ? wait : S_QUIET_MS;
        }
        long wwait = s_writes(self);
        if (wwait >= 0 && wwait < wait) wait = wwait;
        int running = 0;
        curl_multi_poll(self->multi, NULL, 0, (int)(wait > 0 ? wait : 0), NULL);
        curl_multi_perform(self->multi, &running);
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(self->multi, &left))) {
            if (msg->msg != CURLMSG_DONE) continue;
            s_kind_t *k = NULL;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&k);
            if (k) s_done(self, k, msg->data.result);
        }
    }
    return NULL;
}

// ---- life cycle and the policy server's side --------------------------------------------------

policy_kube_t *policy_kube_new(const policy_kube_config_t *config, ipl_metrics_t *metrics,
                               char *err, size_t errlen)
{
    const char *api = config->api;
    char incluster[300];
    const char *token_file = config->token_file && *config->token_file ? config->token_file : NULL;
    const char *ca_file = config->ca_file && *config->ca_file ? config->ca_file : NULL;
    if (!api || !*api) {
        snprintf(err, errlen, "--kube-api is empty; give the API server's URL or in-cluster");
        return NULL;
    }
    if (!strcmp(api, "in-cluster")) {
        const char *host = getenv("KUBERNETES_SERVICE_HOST"),
                   *port = getenv("KUBERNETES_SERVICE_PORT");
        if (!host || !*host || !port || !*port) {
            snprintf(err, errlen,
                     "--kube-api in-cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT "
                     "are not set (not running in a pod?); give the API server's URL instead");
            return NULL;
        }
        snprintf(incluster, sizeof incluster,
                 strchr(host, ':') ? "https://[%s]:%s" : "https://%s:%s", host, port);
        api = incluster;
        if (!token_file) token_file = POLICY_KUBE_SA_DIR "/token";
        if (!ca_file) ca_file = POLICY_KUBE_SA_DIR "/ca.crt";
    } else if (strncmp(api, "http://", 7) && strncmp(api, "https://", 8)) {
        snprintf(err, errlen,
                 "--kube-api \"%s\" is not an http:// or https:// URL; give e.g. "
                 "http://127.0.0.1:6443 or in-cluster",
                 api);
        return NULL;
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        snprintf(err, errlen, "cannot initialise libcurl");
        return NULL;
    }
    policy_kube_t *self = calloc(1, sizeof *self);
    if (!self) abort();
    pthread_mutex_init(&self->lock, NULL);
    self->api = s_strdup(api);
    size_t n = strlen(self->api);
    while (n && self->api[n - 1] == '/')
        self->api[--n] = '\0';
    self->ns = s_strdup(config->namespace);
    self->token_file = token_file ? s_strdup(token_file) : NULL;
    self->ca_file = ca_file ? s_strdup(ca_file) : NULL;
    self->backoff_min_ms = config->backoff_min_ms ? config->backoff_min_ms : 100;
    self->backoff_max_ms = config->backoff_max_ms ? config->backoff_max_ms : 5000;
    self->watch_timeout_s = config->watch_timeout_s ? config->watch_timeout_s : 300;
    self->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    self->multi = curl_multi_init();
    self->writer = curl_easy_init();
    for (size_t i = 0; i < S_NKINDS; i++) {
        s_kind_t *k = &self->kinds[i];
        k->def = &s_kinds[i];
        k->owner = self;
        k->need_list = true;
        policy_kube_stream_init(&k->stream, s_on_event, k);
    }
    static const char *help = "Errors talking to the Kubernetes API server, by reason.";
    for (int i = 0; i < S_NERR; i++) {
        char labels[64];
        snprintf(labels, sizeof labels, "reason=\"%s\"", s_err_names[i]);
        self->m_errors[i] =
            ipl_metrics_counter(metrics, "inferplane_policy_kube_errors_total", help, labels);
    }
    self->m_relists = ipl_metrics_counter(
        metrics, "inferplane_policy_kube_relists_total",
        "Lists of a kind after its first (a watch's resourceVersion expired: 410 Gone).", NULL);
    self->m_writes = ipl_metrics_counter(metrics, "inferplane_policy_kube_status_writes_total",
                                         "Status subresource writes (conditions changed).", NULL);
    self->m_objects = ipl_metrics_gauge(metrics, "inferplane_policy_kube_objects",
                                        "Objects in the last set handed to the compiler.", NULL);
    if (self->efd < 0 || !self->multi || !self->writer ||
        pthread_create(&self->thread, NULL, s_thread, self) != 0) {
        snprintf(err, errlen, "cannot start the Kubernetes watcher: %s", strerror(errno));
        policy_kube_destroy(&self);
        return NULL;
    }
    self->started = true;
    return self;
}

void policy_kube_destroy(policy_kube_t **self_p)
{
    if (!self_p || !*self_p) return;
    policy_kube_t *self = *self_p;
    if (self->started) {
        pthread_mutex_lock(&self->lock);
        self->stop = true;
        pthread_mutex_unlock(&self->lock);
        curl_multi_wakeup(self->multi);
        pthread_join(self->thread, NULL);
    }
    for (size_t i = 0; i < S_NKINDS; i++) {
        s_kind_t *k = &self->kinds[i];
        if (k->easy) s_finish_easy(self, k);
        free(k->body.data);
        policy_kube_stream_free(&k->stream);
    }
    for (size_t i = 0; i < self->nobjs; i++)
        s_obj_free(&self->objs[i]);
    free(self->objs);
    for (size_t i = 0; i < self->nwrites; i++)
        s_write_free(&self->writes[i]);
    free(self->writes);
    policy_kube_set_destroy(&self->pending);
    if (self->writer) curl_easy_cleanup(self->writer);
    if (self->multi) curl_multi_cleanup(self->multi);
    if (self->efd >= 0) close(self->efd);
    pthread_mutex_destroy(&self->lock);
    free(self->api);
    free(self->ns);
    free(self->token_file);
    free(self->ca_file);
    free(self);
    curl_global_cleanup();
    *self_p = NULL;
}

int policy_kube_fd(const policy_kube_t *self)
{
    return self->efd;
}

policy_kube_set_t *policy_kube_take(policy_kube_t *self)
{
    uint64_t count;
    while (read(self->efd, &count, sizeof count) > 0) {
    }
    pthread_mutex_lock(&self->lock);
    policy_kube_set_t *set = self->pending;
    self->pending = NULL;
    pthread_mutex_unlock(&self->lock);
    return set;
}

void policy_kube_report(policy_kube_t *self, const policy_kube_set_t *set,
                        const policy_compiler_t *c)
{
    s_write_t *writes = calloc(set->n ? set->n : 1, sizeof *writes);
    if (!writes) abort();
    for (size_t i = 0; i < set->n; i++) {
        policy_kube_want_t w;
        policy_kube_want(c, set->docs[i], set->generations[i], &w);
        writes[i].doc = s_strdup(set->docs[i]);
        writes[i].want = w;
        writes[i].want.accepted_message = s_strdup(w.accepted_message);
        writes[i].want.resolved_message = s_strdup(w.resolved_message);
    }
    pthread_mutex_lock(&self->lock);
    for (size_t i = 0; i < self->nwrites; i++)
        s_write_free(&self->writes[i]);
    free(self->writes);
    self->writes = writes; // replaces what was not written yet: it described an older set
    self->nwrites = set->n;
    self->next_write = 0;
    pthread_mutex_unlock(&self->lock);
    curl_multi_wakeup(self->multi);
}

cJSON *policy_kube_debug(policy_kube_t *self)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "mode", "kubernetes");
    pthread_mutex_lock(&self->lock);
    cJSON_AddStringToObject(root, "api", self->api);
    cJSON_AddStringToObject(root, "namespace", *self->ns ? self->ns : "(all)");
    cJSON *kinds = cJSON_AddArrayToObject(root, "kinds");
    for (size_t i = 0; i < S_NKINDS; i++) {
        const s_kind_t *k = &self->kinds[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "kind", k->def->kind);
        cJSON_AddStringToObject(o, "plural", k->def->plural);
        cJSON_AddStringToObject(o, "resourceVersion", k->rv);
        cJSON_AddStringToObject(o, "state", s_state_names[k->state]);
        cJSON_AddNumberToObject(o, "lists", (double)k->lists);
        cJSON_AddNumberToObject(o, "relists", (double)k->relists);
        cJSON_AddNumberToObject(o, "errors", (double)k->errors);
        cJSON_AddItemToArray(kinds, o);
    }
    cJSON_AddNumberToObject(root, "relists", (double)self->relists);
    cJSON_AddNumberToObject(root, "errors", (double)self->errors_total);
    cJSON_AddNumberToObject(root, "status_writes", (double)self->status_writes);
    cJSON_AddStringToObject(root, "last_error", self->last_error);
    cJSON_AddStringToObject(root, "last_error_at", self->last_error_at);
    pthread_mutex_unlock(&self->lock);
    return root;
}
