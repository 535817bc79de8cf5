/*
 * policy_compiler — YAML resources → checked, compiled ipl_policy_t.
 *
 * Two passes:
 *   1. per document (s_document): libyaml's document API gives a node tree with marks; each
 *      resource is checked field by field against its schema (s_fields rejects unknown and
 *      duplicate keys) and recorded as an s_wset_t or s_pool_t with the place of every name.
 *   2. policy_compiler_finish: checks across resources (duplicate names, worker names unique
 *      cluster-wide, references, one pool per model and per worker set, consistent block
 *      sizes) and builds the sorted ipl_policy_t.
 *
 * Every string the result points to lives in the compiler's arena (s_arena_*), freed at once
 * by policy_compiler_destroy.
 */
#include "policy_compiler.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <yaml.h>

#include "ipl_strategy.h" // the one list of strategies
#include "policy_digest.h"
#include "ipl_suggest.h"

#define S_MAX_NAME       63
#define S_MAX_MODEL      256
#define S_MAX_URL        1024
#define S_MAX_BLOCK_SIZE 1024
#define S_KNOWN_SHOWN    10 // names listed in "(known: ...)"

#define S_STRATEGY(name, measurement) name,
static const char *const s_strategies[] = {IPL_STRATEGIES(S_STRATEGY) NULL}; // for the hints
static const char *const s_kinds[] = {"InferencePool", "InferenceWorkerSet", NULL};

// ---- arena ------------------------------------------------------------------------------------

typedef struct s_chunk {
    struct s_chunk *next;
    size_t used, size;
    _Alignas(16) char data[];
} s_chunk_t;

typedef struct {
    const char *file; // arena
    size_t line, col; // 1-based
} s_loc_t;

typedef struct {
    const char *name, *url, *kv, *replay, *metrics;
    size_t index; // in its set's spec.workers
    s_loc_t loc;  // of the name
} s_worker_t;

typedef struct {
    const char *name, *model;
    uint64_t block_size;
    s_worker_t *workers;
    size_t nworkers;
    s_loc_t loc;               // of metadata.name
    const struct s_pool *pool; // the pool that targets it (finish)
    s_loc_t pool_loc;
} s_wset_t;

typedef struct {
    const char *set;
    s_loc_t loc;
} s_target_t;

typedef struct s_pool {
    const char *name, *model, *strategy;
    s_target_t *targets;
    size_t ntargets;
    s_loc_t loc, model_loc;
} s_pool_t;

struct policy_compiler {
    s_chunk_t *arena;
    char **errors, **warnings, **files;
    size_t nerrors, nwarnings, nfiles, cap_errors, cap_warnings, cap_files;
    size_t errors_dropped;
    s_wset_t *sets;
    size_t nsets, cap_sets;
    s_pool_t *pools;
    size_t npools, cap_pools;
    bool finished;
    ipl_policy_t policy;
    bool has_policy;
};

static void *s_alloc(policy_compiler_t *self, size_t size)
{
    size = (size + 15) & ~(size_t)15;
    s_chunk_t *c = self->arena;
    if (!c || c->size - c->used < size) {
        size_t want = size > 16384 ? size : 16384;
        c = malloc(sizeof *c + want);
        if (!c) abort(); // a policy is small; running out here is not recoverable
        c->next = self->arena;
        c->used = 0;
        c->size = want;
        self->arena = c;
    }
    void *p = c->data + c->used;
    c->used += size;
    memset(p, 0, size);
    return p;
}

static char *s_strndup(policy_compiler_t *self, const char *s, size_t n)
{
    char *p = s_alloc(self, n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

static char *s_strdup(policy_compiler_t *self, const char *s)
{
    return s_strndup(self, s, strlen(s));
}

// Grows a malloc'd array to hold at least n + 1 elements of `size` bytes.
static void s_reserve(void **array, size_t *cap, size_t n, size_t size)
{
    if (n < *cap) return;
    size_t want = *cap ? *cap * 2 : 8;
    void *p = realloc(*array, want * size);
    if (!p) abort();
    *array = p;
    *cap = want;
}

// ---- messages ---------------------------------------------------------------------------------

static void s_push_line(char ***lines, size_t *n, size_t *cap, char *line)
{
    s_reserve((void **)lines, cap, *n, sizeof **lines);
    (*lines)[(*n)++] = line;
}

static char *s_vformat(const char *fmt, va_list ap)
{
    char *out = NULL;
    if (vasprintf(&out, fmt, ap) < 0) abort();
    return out;
}

// "file:line:col: Kind "name": message" — kind and name may be NULL.
static void s_report(policy_compiler_t *self, bool warning, const s_loc_t *loc, const char *kind,
                     const char *name, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static void s_report(policy_compiler_t *self, bool warning, const s_loc_t *loc, const char *kind,
                     const char *name, const char *fmt, ...)
{
    if (!warning && self->nerrors >= POLICY_COMPILER_MAX_ERRORS) {
        self->errors_dropped++;
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    char *msg = s_vformat(fmt, ap);
    va_end(ap);
    char *line = NULL;
    int rc;
    if (kind && name)
        rc = asprintf(&line, "%s:%zu:%zu: %s \"%s\": %s", loc->file, loc->line, loc->col, kind,
                      name, msg);
    else if (kind)
        rc = asprintf(&line, "%s:%zu:%zu: %s (unnamed): %s", loc->file, loc->line, loc->col, kind,
                      msg);
    else
        rc = asprintf(&line, "%s:%zu:%zu: %s", loc->file, loc->line, loc->col, msg);
    free(msg);
    if (rc < 0) abort();
    if (warning)
        s_push_line(&self->warnings, &self->nwarnings, &self->cap_warnings, line);
    else
        s_push_line(&self->errors, &self->nerrors, &self->cap_errors, line);
}

static size_t s_count(const char *const *list)
{
    size_t n = 0;
    while (list[n])
        n++;
    return n;
}

// Writes "; did you mean "x"? (known: a, b, c)" for an unknown `word` into buf.
static const char *s_hint(char *buf, size_t size, const char *word, const char *const *cands,
                          size_t n)
{
    ipl_suggest_t suggest;
    ipl_suggest_init(&suggest, word);
    for (size_t i = 0; i < n; i++)
        ipl_suggest_add(&suggest, cands[i]);
    const char *close = ipl_suggest_best(&suggest);
    int off =
        close ? snprintf(buf, size, "; did you mean \"%s\"? ", close) : snprintf(buf, size, " ");
    if (off >= 0 && (size_t)off < size)
        ipl_suggest_known(buf + off, size - (size_t)off, cands, n, S_KNOWN_SHOWN);
    return buf;
}

// ---- one document -----------------------------------------------------------------------------

typedef struct {
    policy_compiler_t *self;
    const char *file;
    yaml_document_t *doc;
    const char *kind; // for messages, once known
    const char *name;
} s_doc_t;

static s_loc_t s_loc(const s_doc_t *d, const yaml_node_t *node)
{
    s_loc_t loc = {d->file, 1, 1};
    if (node) {
        loc.line = node->start_mark.line + 1;
        loc.col = node->start_mark.column + 1;
    }
    return loc;
}

static void s_err(s_doc_t *d, const yaml_node_t *node, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void s_err(s_doc_t *d, const yaml_node_t *node, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *msg = s_vformat(fmt, ap);
    va_end(ap);
    s_loc_t loc = s_loc(d, node);
    s_report(d->self, false, &loc, d->kind, d->name, "%s", msg);
    free(msg);
}

static yaml_node_t *s_node(s_doc_t *d, int id)
{
    return yaml_document_get_node(d->doc, id);
}

static const char *s_what(const yaml_node_t *node)
{
    switch (node->type) {
    case YAML_MAPPING_NODE:
        return "a mapping";
    case YAML_SEQUENCE_NODE:
        return "a list";
    default:
        return "a scalar";
    }
}

// A scalar that YAML would read as null (or an empty value).
static bool s_is_null(const yaml_node_t *node)
{
    if (node->type != YAML_SCALAR_NODE || node->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return false;
    const char *v = (const char *)node->data.scalar.value;
    return !*v || !strcmp(v, "~") || !strcmp(v, "null") || !strcmp(v, "Null") || !strcmp(v, "NULL");
}

static void s_path(char *buf, size_t size, const char *prefix, const char *key)
{
    snprintf(buf, size, "%s%s%s", prefix, *prefix ? "." : "", key);
}

/* Looks up `key` in a mapping without reporting anything. */
static yaml_node_t *s_lookup(s_doc_t *d, yaml_node_t *map, const char *key)
{
    if (!map || map->type != YAML_MAPPING_NODE) return NULL;
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = s_node(d, p->key);
        if (k && k->type == YAML_SCALAR_NODE && !strcmp((const char *)k->data.scalar.value, key))
            return s_node(d, p->value);
    }
    return NULL;
}

/* Checks that `map` is a mapping whose keys are all in `known` (NULL-terminated), each at most
 * once, and stores each key's value node in out[i] (NULL when absent). `path` names the
 * mapping ("spec", "" for the top level). Returns false when `map` is not a mapping. */
static bool s_fields(s_doc_t *d, yaml_node_t *map, const char *path, const char *const *known,
                     yaml_node_t **out)
{
    size_t n = s_count(known);
    for (size_t i = 0; i < n; i++)
        out[i] = NULL;
    if (map->type != YAML_MAPPING_NODE) {
        s_err(d, map, "%s must be a mapping (key: value lines), got %s",
              *path ? path : "the resource", s_what(map));
        return false;
    }
    yaml_node_t *keys[32] = {0};
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = s_node(d, p->key), *v = s_node(d, p->value);
        if (!k || !v) continue;
        if (k->type != YAML_SCALAR_NODE) {
            s_err(d, k, "%s: keys must be plain names, got %s", *path ? path : "resource",
                  s_what(k));
            continue;
        }
        const char *key = (const char *)k->data.scalar.value;
        char field[256], hint[512];
        s_path(field, sizeof field, path, key);
        size_t i = 0;
        while (i < n && strcmp(known[i], key))
            i++;
        if (i == n) {
            s_err(d, k, "%s is not a known field%s", field,
                  s_hint(hint, sizeof hint, key, known, n));
            continue;
        }
        if (out[i]) {
            s_err(d, k, "%s is given twice (first at line %zu); remove one", field,
                  keys[i]->start_mark.line + 1);
            continue;
        }
        out[i] = v;
        keys[i] = k;
    }
    return true;
}

/* A string field. Absent, null or empty → NULL (an error when `required`). */
static const char *s_str(s_doc_t *d, yaml_node_t *node, yaml_node_t *parent, const char *path,
                         bool required)
{
    if (!node || s_is_null(node)) {
        if (required) s_err(d, node ? node : parent, "%s is required", path);
        return NULL;
    }
    if (node->type != YAML_SCALAR_NODE) {
        s_err(d, node, "%s must be a string, got %s", path, s_what(node));
        return NULL;
    }
    const char *v = (const char *)node->data.scalar.value;
    size_t len = node->data.scalar.length;
    for (size_t i = 0; i < len; i++) {
        if (v[i] == '\0' || (unsigned char)v[i] < 0x20 || v[i] == 0x7f) {
            s_err(d, node, "%s contains a control character; use plain text", path);
            return NULL;
        }
    }
    if (len == 0) {
        if (required) s_err(d, node, "%s is required (it is empty)", path);
        return NULL;
    }
    return s_strndup(d->self, v, len);
}

// A lower-case DNS-style name, as Kubernetes requires of metadata.name.
static bool s_valid_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > S_MAX_NAME || !isalnum((unsigned char)s[0]) ||
        !isalnum((unsigned char)s[n - 1]))
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!(islower(c) || isdigit(c) || c == '-' || c == '.')) return false;
    }
    return true;
}

static const char *s_name(s_doc_t *d, yaml_node_t *node, yaml_node_t *parent, const char *path)
{
    const char *name = s_str(d, node, parent, path, true);
    if (name && !s_valid_name(name)) {
        s_err(d, node,
              "%s \"%s\" is not a valid name: use lower-case letters, digits, '-' and '.', "
              "starting and ending with a letter or digit, at most %d characters",
              path, name, S_MAX_NAME);
        return NULL;
    }
    return name;
}

static bool s_has_space(const char *s)
{
    for (; *s; s++)
        if (isspace((unsigned char)*s)) return true;
    return false;
}

// http(s)://host[:port][/path], without a trailing '/' (we append API paths to it).
static const char *s_url(s_doc_t *d, yaml_node_t *node, yaml_node_t *parent, const char *path,
                         bool required)
{
    char *url = (char *)s_str(d, node, parent, path, required);
    if (!url) return NULL;
    const char *host = !strncmp(url, "http://", 7)    ? url + 7
                       : !strncmp(url, "https://", 8) ? url + 8
                                                      : NULL;
    if (!host || !*host || *host == '/' || s_has_space(url) || strlen(url) > S_MAX_URL) {
        s_err(d, node, "%s \"%s\" is not an HTTP URL; write it like http://10.0.0.5:8000", path,
              url);
        return NULL;
    }
    size_t n = strlen(url);
    while (n > 0 && url[n - 1] == '/' && url + n - 1 > host)
        url[--n] = '\0';
    return url;
}

// A ZeroMQ endpoint we can connect to: tcp://host:port or ipc://path.
static const char *s_endpoint(s_doc_t *d, yaml_node_t *node, yaml_node_t *parent, const char *path)
{
    const char *ep = s_str(d, node, parent, path, false);
    if (!ep) return NULL;
    bool ok = !s_has_space(ep) && strlen(ep) <= S_MAX_URL;
    if (ok && !strncmp(ep, "tcp://", 6)) {
        const char *colon = strrchr(ep + 6, ':');
        ok = colon && colon > ep + 6 && colon[1] &&
             strspn(colon + 1, "0123456789") == strlen(colon + 1);
    } else if (ok) {
        ok = !strncmp(ep, "ipc://", 6) && ep[6];
    }
    if (!ok) {
        s_err(d, node, "%s \"%s\" is not a ZeroMQ endpoint; write it like tcp://10.0.0.5:5557",
              path, ep);
        return NULL;
    }
    return ep;
}

static bool s_uint(s_doc_t *d, yaml_node_t *node, const char *path, uint64_t min, uint64_t max,
                   uint64_t *out)
{
    if (!node || s_is_null(node)) return true; // keep the default
    const char *v = node->type == YAML_SCALAR_NODE ? (const char *)node->data.scalar.value : "";
    bool digits = node->type == YAML_SCALAR_NODE &&
                  node->data.scalar.style == YAML_PLAIN_SCALAR_STYLE && *v &&
                  strspn(v, "0123456789") == strlen(v) && strlen(v) < 19;
    uint64_t value = digits ? strtoull(v, NULL, 10) : 0;
    if (!digits || value < min || value > max) {
        if (node->type == YAML_SCALAR_NODE)
            s_err(d, node, "%s must be a whole number from %llu to %llu, got \"%s\"", path,
                  (unsigned long long)min, (unsigned long long)max, v);
        else
            s_err(d, node, "%s must be a whole number from %llu to %llu, got %s", path,
                  (unsigned long long)min, (unsigned long long)max, s_what(node));
        return false;
    }
    *out = value;
    return true;
}

// A non-empty list; NULL (with an error) otherwise.
static yaml_node_t *s_list(s_doc_t *d, yaml_node_t *node, yaml_node_t *parent, const char *path,
                           const char *what)
{
    if (!node || s_is_null(node)) {
        s_err(d, node ? node : parent, "%s is required: a list of %s", path, what);
        return NULL;
    }
    if (node->type != YAML_SEQUENCE_NODE) {
        s_err(d, node, "%s must be a list of %s (lines starting with '- '), got %s", path, what,
              s_what(node));
        return NULL;
    }
    if (node->data.sequence.items.top == node->data.sequence.items.start) {
        s_err(d, node, "%s is empty; list at least one of %s", path, what);
        return NULL;
    }
    return node;
}

static const char *s_model(s_doc_t *d, yaml_node_t *node, yaml_node_t *parent, const char *path)
{
    const char *model = s_str(d, node, parent, path, true);
    if (model && (s_has_space(model) || strlen(model) > S_MAX_MODEL)) {
        s_err(d, node, "%s \"%s\" is not a model name (no spaces, at most %d characters)", path,
              model, S_MAX_MODEL);
        return NULL;
    }
    return model;
}

static void s_workerset(s_doc_t *d, yaml_node_t *spec, yaml_node_t *name_node)
{
    static const char *const fields[] = {"model", "blockSize", "workers", NULL};
    static const char *const wfields[] = {"name", "url", "kvEvents", "replay", "metrics", NULL};
    yaml_node_t *f[3];
    if (!s_fields(d, spec, "spec", fields, f)) return;
    policy_compiler_t *self = d->self;
    s_wset_t set = {.name = d->name, .loc = s_loc(d, name_node)};
    set.model = s_model(d, f[0], spec, "spec.model");
    set.block_size = POLICY_DEFAULT_BLOCK_SIZE;
    s_uint(d, f[1], "spec.blockSize", 1, S_MAX_BLOCK_SIZE, &set.block_size);
    yaml_node_t *list = s_list(d, f[2], spec, "spec.workers", "workers ({name, url, kvEvents})");
    if (list) {
        size_t n = list->data.sequence.items.top - list->data.sequence.items.start;
        set.workers = s_alloc(self, n * sizeof *set.workers);
        for (size_t i = 0; i < n; i++) {
            yaml_node_t *item = s_node(d, list->data.sequence.items.start[i]), *w[5];
            char base[64], path[128];
            snprintf(base, sizeof base, "spec.workers[%zu]", i);
            if (!item || !s_fields(d, item, base, wfields, w)) continue;
            s_worker_t wk = {.index = i, .loc = s_loc(d, w[0] ? w[0] : item)};
            snprintf(path, sizeof path, "%s.name", base);
            wk.name = s_name(d, w[0], item, path);
            snprintf(path, sizeof path, "%s.url", base);
            wk.url = s_url(d, w[1], item, path, true);
            snprintf(path, sizeof path, "%s.kvEvents", base);
            wk.kv = s_endpoint(d, w[2], item, path);
            snprintf(path, sizeof path, "%s.replay", base);
            wk.replay = s_endpoint(d, w[3], item, path);
            if (wk.replay && !wk.kv)
                s_err(d, w[3], "%s is set but %s.kvEvents is not; replay needs the KV-event stream",
                      path, base);
            snprintf(path, sizeof path, "%s.metrics", base);
            wk.metrics = s_url(d, w[4], item, path, false);
            if (!wk.metrics && wk.url && !w[4]) {
                char *m = s_alloc(self, strlen(wk.url) + sizeof "/metrics");
                sprintf(m, "%s/metrics", wk.url);
                wk.metrics = m;
            }
            if (wk.name && wk.url) set.workers[set.nworkers++] = wk;
        }
    }
    s_reserve((void **)&self->sets, &self->cap_sets, self->nsets, sizeof *self->sets);
    self->sets[self->nsets++] = set;
}

static void s_pool(s_doc_t *d, yaml_node_t *spec, yaml_node_t *name_node)
{
    static const char *const fields[] = {"model", "strategy", "targets", NULL};
    static const char *const tfields[] = {"workerSet", NULL};
    yaml_node_t *f[3];
    if (!s_fields(d, spec, "spec", fields, f)) return;
    policy_compiler_t *self = d->self;
    s_pool_t pool = {.name = d->name, .loc = s_loc(d, name_node), .model_loc = s_loc(d, f[0])};
    pool.model = s_model(d, f[0], spec, "spec.model");
    pool.strategy = s_str(d, f[1], spec, "spec.strategy", false);
    if (pool.strategy && !ipl_strategy_known(pool.strategy)) {
        char hint[512];
        s_err(d, f[1], "spec.strategy \"%s\" is not a known strategy%s", pool.strategy,
              s_hint(hint, sizeof hint, pool.strategy, s_strategies, s_count(s_strategies)));
        pool.strategy = NULL;
    }
    yaml_node_t *list = s_list(d, f[2], spec, "spec.targets", "targets ({workerSet: name})");
    if (list) {
        size_t n = list->data.sequence.items.top - list->data.sequence.items.start;
        if (n > POLICY_COMPILER_MAX_TARGETS) {
            s_err(d, list,
                  "spec.targets lists %zu worker sets, above the limit of %d; merge "
                  "worker sets",
                  n, POLICY_COMPILER_MAX_TARGETS);
            n = POLICY_COMPILER_MAX_TARGETS;
        }
        pool.targets = s_alloc(self, n * sizeof *pool.targets);
        for (size_t i = 0; i < n; i++) {
            yaml_node_t *item = s_node(d, list->data.sequence.items.start[i]), *t[1];
            char base[64], path[128];
            snprintf(base, sizeof base, "spec.targets[%zu]", i);
            if (!item || !s_fields(d, item, base, tfields, t)) continue;
            snprintf(path, sizeof path, "%s.workerSet", base);
            const char *set = s_str(d, t[0], item, path, true);
            if (set) pool.targets[pool.ntargets++] = (s_target_t){set, s_loc(d, t[0])};
        }
    }
    s_reserve((void **)&self->pools, &self->cap_pools, self->npools, sizeof *self->pools);
    self->pools[self->npools++] = pool;
}

static void s_document(s_doc_t *d, yaml_node_t *root)
{
    static const char *const top[] = {"apiVersion", "kind", "metadata", "spec", "status", NULL};
    // Kubernetes ObjectMeta fields we tolerate (kubectl output carries them); only name is used.
    static const char *const meta[] = {"name",
                                       "namespace",
                                       "labels",
                                       "annotations",
                                       "uid",
                                       "resourceVersion",
                                       "generation",
                                       "creationTimestamp",
                                       "managedFields",
                                       "finalizers",
                                       "ownerReferences",
                                       "generateName",
                                       NULL};
    if (root->type != YAML_MAPPING_NODE) {
        s_err(d, root,
              "a resource must be a mapping with apiVersion, kind, metadata and spec; "
              "got %s",
              s_what(root));
        return;
    }
    // Name the resource in every message, even those about fields that come before its kind.
    yaml_node_t *kind_node = s_lookup(d, root, "kind");
    yaml_node_t *name_node = s_lookup(d, s_lookup(d, root, "metadata"), "name");
    size_t nkinds = s_count(s_kinds);
    for (size_t i = 0; i < nkinds && kind_node; i++)
        if (kind_node->type == YAML_SCALAR_NODE &&
            !strcmp((const char *)kind_node->data.scalar.value, s_kinds[i]))
            d->kind = s_kinds[i];
    if (name_node && name_node->type == YAML_SCALAR_NODE && !s_is_null(name_node))
        d->name = s_strdup(d->self, (const char *)name_node->data.scalar.value);

    yaml_node_t *f[5], *m[12];
    s_fields(d, root, "", top, f);
    const char *kind = s_str(d, f[1], root, "kind", true);
    if (kind && !d->kind) {
        char hint[512];
        s_err(d, f[1], "kind \"%s\" is not known%s", kind,
              s_hint(hint, sizeof hint, kind, s_kinds, nkinds));
    }
    const char *api = s_str(d, f[0], root, "apiVersion", true);
    if (api && strcmp(api, POLICY_API_VERSION))
        s_err(d, f[0], "apiVersion \"%s\" is not supported; use %s", api, POLICY_API_VERSION);
    const char *name = NULL;
    if (!f[2])
        s_err(d, root, "metadata is required (with a name)");
    else if (s_fields(d, f[2], "metadata", meta, m))
        name = s_name(d, m[0], f[2], "metadata.name");
    if (!f[3] || s_is_null(f[3])) {
        s_err(d, f[3] ? f[3] : root, "spec is required");
        return;
    }
    if (!d->kind || !name || !api || strcmp(api, POLICY_API_VERSION))
        return; // reported above; the spec cannot be checked against an unknown schema
    d->name = name;
    if (d->kind == s_kinds[1])
        s_workerset(d, f[3], m[0]);
    else
        s_pool(d, f[3], m[0]);
}

// ---- public: input ----------------------------------------------------------------------------

policy_compiler_t *policy_compiler_new(void)
{
    return calloc(1, sizeof(policy_compiler_t));
}

void policy_compiler_destroy(policy_compiler_t **self_p)
{
    if (!self_p || !*self_p) return;
    policy_compiler_t *self = *self_p;
    for (size_t i = 0; i < self->nerrors; i++)
        free(self->errors[i]);
    for (size_t i = 0; i < self->nwarnings; i++)
        free(self->warnings[i]);
    free(self->errors);
    free(self->warnings);
    free(self->files); // strings are in the arena
    free(self->sets);
    free(self->pools);
    while (self->arena) {
        s_chunk_t *next = self->arena->next;
        free(self->arena);
        self->arena = next;
    }
    free(self);
    *self_p = NULL;
}

int policy_compiler_add_string(policy_compiler_t *self, const char *name, const char *yaml,
                               size_t len)
{
    size_t before = self->nerrors + self->errors_dropped;
    const char *file = s_strdup(self, name ? name : "<string>");
    s_push_line(&self->files, &self->nfiles, &self->cap_files, (char *)file);

    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser)) abort();
    yaml_parser_set_input_string(&parser, (const unsigned char *)yaml, len);
    while (true) {
        yaml_document_t doc;
        if (!yaml_parser_load(&parser, &doc)) {
            s_loc_t loc = {file, parser.problem_mark.line + 1, parser.problem_mark.column + 1};
            if (parser.context)
                s_report(self, false, &loc, NULL, NULL,
                         "YAML syntax error: %s %s (line %zu, column %zu); fix the indentation "
                         "or quoting there",
                         parser.problem ? parser.problem : "invalid YAML", parser.context,
                         parser.context_mark.line + 1, parser.context_mark.column + 1);
            else
                s_report(self, false, &loc, NULL, NULL, "YAML syntax error: %s",
                         parser.problem ? parser.problem : "invalid YAML");
            break; // the parser cannot resynchronise after an error
        }
        yaml_node_t *root = yaml_document_get_root_node(&doc);
        if (!root) { // end of the stream
            yaml_document_delete(&doc);
            break;
        }
        if (!s_is_null(root)) { // an empty document (a stray ---) holds nothing
            s_doc_t d = {.self = self, .file = file, .doc = &doc};
            s_document(&d, root);
        }
        yaml_document_delete(&doc);
    }
    yaml_parser_delete(&parser);
    return (int)(self->nerrors + self->errors_dropped - before);
}

int policy_compiler_add_file(policy_compiler_t *self, const char *path, const char *name)
{
    if (!name) name = path;
    s_loc_t loc = {s_strdup(self, name), 1, 1};
    FILE *f = fopen(path, "rb");
    struct stat st;
    if (!f || fstat(fileno(f), &st) != 0) {
        s_report(self, false, &loc, NULL, NULL, "cannot read the file: %s", strerror(errno));
        if (f) fclose(f);
        return 1;
    }
    if ((size_t)st.st_size > POLICY_COMPILER_MAX_FILE_BYTES) {
        s_report(self, false, &loc, NULL, NULL,
                 "the file is %lld bytes, above the %u-byte limit; "
                 "split it into several files",
                 (long long)st.st_size, POLICY_COMPILER_MAX_FILE_BYTES);
        fclose(f);
        return 1;
    }
    char *buf = malloc((size_t)st.st_size + 1);
    size_t got = buf ? fread(buf, 1, (size_t)st.st_size, f) : 0;
    fclose(f);
    if (!buf) abort();
    int n = policy_compiler_add_string(self, name, buf, got);
    free(buf);
    return n;
}

bool policy_compiler_is_policy_file(const char *name)
{
    size_t n = strlen(name);
    if (name[0] == '.') return false;
    return (n > 5 && !strcmp(name + n - 5, ".yaml")) || (n > 4 && !strcmp(name + n - 4, ".yml"));
}

static int s_strcmp_p(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int policy_compiler_add_dir(policy_compiler_t *self, const char *dir)
{
    s_loc_t loc = {s_strdup(self, dir), 1, 1};
    DIR *dp = opendir(dir);
    if (!dp) {
        s_report(self, false, &loc, NULL, NULL, "cannot open the policy directory: %s",
                 strerror(errno));
        return 1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(dp)))
        if (policy_compiler_is_policy_file(e->d_name)) {
            s_reserve((void **)&names, &cap, n, sizeof *names);
            names[n++] = strdup(e->d_name);
        }
    closedir(dp);
    if (n == 0) {
        s_report(self, false, &loc, NULL, NULL,
                 "no *.yaml files in the policy directory; add InferenceWorkerSet and "
                 "InferencePool resources (see examples/policy/)");
        free(names);
        return 1;
    }
    qsort(names, n, sizeof *names, s_strcmp_p);
    int errors = 0;
    for (size_t i = 0; i < n; i++) {
        char *path = NULL;
        if (asprintf(&path, "%s/%s", dir, names[i]) < 0) abort();
        errors += policy_compiler_add_file(self, path, names[i]);
        free(path);
        free(names[i]);
    }
    free(names);
    return errors;
}

// ---- public: cross-resource checks and compilation --------------------------------------------

static s_wset_t *s_find_set(policy_compiler_t *self, const char *name)
{
    for (size_t i = 0; i < self->nsets; i++)
        if (!strcmp(self->sets[i].name, name)) return &self->sets[i];
    return NULL;
}

static int s_set_cmp(const void *a, const void *b)
{
    return strcmp(((const s_wset_t *)a)->name, ((const s_wset_t *)b)->name);
}

static int s_pool_cmp(const void *a, const void *b)
{
    return strcmp(((const s_pool_t *)a)->name, ((const s_pool_t *)b)->name);
}

static void s_check_names(policy_compiler_t *self)
{
    static const char *kset = "InferenceWorkerSet", *kpool = "InferencePool";
    for (size_t i = 0; i < self->nsets; i++)
        for (size_t j = 0; j < i; j++)
            if (!strcmp(self->sets[i].name, self->sets[j].name))
                s_report(self, false, &self->sets[i].loc, kset, self->sets[i].name,
                         "metadata.name is already used by the InferenceWorkerSet at %s:%zu:%zu; "
                         "rename one of them",
                         self->sets[j].loc.file, self->sets[j].loc.line, self->sets[j].loc.col);
    for (size_t i = 0; i < self->npools; i++)
        for (size_t j = 0; j < i; j++) {
            s_pool_t *a = &self->pools[i], *b = &self->pools[j];
            if (!strcmp(a->name, b->name))
                s_report(self, false, &a->loc, kpool, a->name,
                         "metadata.name is already used by the InferencePool at %s:%zu:%zu; "
                         "rename one of them",
                         b->loc.file, b->loc.line, b->loc.col);
            else if (a->model && b->model && !strcmp(a->model, b->model))
                s_report(self, false, &a->model_loc, kpool, a->name,
                         "spec.model \"%s\" is already served by InferencePool \"%s\" at "
                         "%s:%zu:%zu; one pool per model: merge their targets",
                         a->model, b->name, b->model_loc.file, b->model_loc.line, b->model_loc.col);
        }
    // Worker names and URLs are unique in the whole cluster (the index keys on names).
    size_t total = 0;
    for (size_t i = 0; i < self->nsets; i++) {
        s_wset_t *si = &self->sets[i];
        for (size_t a = 0; a < si->nworkers; a++, total++) {
            s_worker_t *wa = &si->workers[a];
            for (size_t j = 0; j <= i; j++) {
                s_wset_t *sj = &self->sets[j];
                for (size_t b = 0; b < (j == i ? a : sj->nworkers); b++) {
                    s_worker_t *wb = &sj->workers[b];
                    if (!strcmp(wa->name, wb->name))
                        s_report(self, false, &wa->loc, kset, si->name,
                                 "spec.workers[%zu].name \"%s\" is already used by "
                                 "InferenceWorkerSet \"%s\" (spec.workers[%zu]) at %s:%zu:%zu; "
                                 "worker names must be unique in the cluster",
                                 wa->index, wa->name, sj->name, wb->index, wb->loc.file,
                                 wb->loc.line, wb->loc.col);
                    else if (!strcmp(wa->url, wb->url))
                        s_report(self, false, &wa->loc, kset, si->name,
                                 "spec.workers[%zu] (\"%s\") has the url %s of worker \"%s\" "
                                 "(InferenceWorkerSet \"%s\" at %s:%zu:%zu); each worker needs "
                                 "its own url",
                                 wa->index, wa->name, wa->url, wb->name, sj->name, wb->loc.file,
                                 wb->loc.line, wb->loc.col);
                }
            }
        }
    }
    if (total > POLICY_COMPILER_MAX_WORKERS && self->nsets > 0)
        s_report(self, false, &self->sets[self->nsets - 1].loc, NULL, NULL,
                 "%zu workers in total, above the limit of %d; split the cluster", total,
                 POLICY_COMPILER_MAX_WORKERS);
}

static void s_check_pools(policy_compiler_t *self)
{
    const char **known = malloc((self->nsets + 1) * sizeof *known);
    if (!known) abort();
    for (size_t i = 0; i < self->nsets; i++)
        known[i] = self->sets[i].name;
    for (size_t p = 0; p < self->npools; p++) {
        s_pool_t *pool = &self->pools[p];
        s_wset_t *first = NULL;
        for (size_t t = 0; t < pool->ntargets; t++) {
            s_target_t *tg = &pool->targets[t];
            s_wset_t *set = s_find_set(self, tg->set);
            if (!set) {
                char hint[768];
                s_report(self, false, &tg->loc, "InferencePool", pool->name,
                         "spec.targets[%zu].workerSet \"%s\" does not exist%s", t, tg->set,
                         s_hint(hint, sizeof hint, tg->set, known, self->nsets));
                continue;
            }
            if (set->pool == pool) {
                s_report(self, false, &tg->loc, "InferencePool", pool->name,
                         "spec.targets[%zu].workerSet \"%s\" is listed twice; remove one", t,
                         tg->set);
                continue;
            }
            if (set->pool) {
                s_report(self, false, &tg->loc, "InferencePool", pool->name,
                         "spec.targets[%zu].workerSet \"%s\" already belongs to InferencePool "
                         "\"%s\" (%s:%zu:%zu); a worker set serves one pool",
                         t, tg->set, set->pool->name, set->pool_loc.file, set->pool_loc.line,
                         set->pool_loc.col);
                continue;
            }
            set->pool = pool;
            set->pool_loc = tg->loc;
            if (!first) {
                first = set;
            } else if (first->block_size != set->block_size) {
                s_report(self, false, &tg->loc, "InferencePool", pool->name,
                         "spec.targets[%zu].workerSet \"%s\" has blockSize %llu but \"%s\" has "
                         "%llu; the workers of one pool must share a block size",
                         t, tg->set, (unsigned long long)set->block_size, first->name,
                         (unsigned long long)first->block_size);
            }
        }
    }
    free(known);
    // Only for a policy that compiles: next to an error (a mistyped target) it would mislead.
    for (size_t i = 0; i < self->nsets && self->nerrors == 0; i++)
        if (!self->sets[i].pool)
            s_report(self, true, &self->sets[i].loc, "InferenceWorkerSet", self->sets[i].name,
                     "no InferencePool targets it; its workers are watched but get no requests");
}

static const char *s_or_empty(const char *s)
{
    return s ? s : "";
}

int policy_compiler_finish(policy_compiler_t *self, const char *source)
{
    if (self->finished) // a second call reports the first call's outcome
        return (int)self->nerrors;
    self->finished = true;
    if (self->nsets) qsort(self->sets, self->nsets, sizeof *self->sets, s_set_cmp);
    if (self->npools) qsort(self->pools, self->npools, sizeof *self->pools, s_pool_cmp);
    s_check_names(self);
    s_check_pools(self);
    if (self->npools == 0 && self->nerrors == 0) {
        s_loc_t loc = {self->nfiles ? self->files[0] : "<none>", 1, 1};
        s_report(self, false, &loc, NULL, NULL,
                 "no InferencePool is defined; add one whose targets name your worker sets");
    }
    if (self->errors_dropped) {
        char *line = NULL;
        if (asprintf(&line, "... and %zu more errors", self->errors_dropped) < 0) abort();
        s_push_line(&self->errors, &self->nerrors, &self->cap_errors, line);
    }
    if (self->nerrors) return (int)self->nerrors;

    ipl_policy_t *p = &self->policy;
    p->source = s_strdup(self, s_or_empty(source));
    p->pools = s_alloc(self, (self->npools + 1) * sizeof *p->pools);
    for (size_t i = 0; i < self->npools; i++)
        p->pools[p->pools_len++] = (ipl_pool_t){
            .name = (char *)self->pools[i].name,
            .model = (char *)self->pools[i].model,
            .strategy = (char *)s_or_empty(self->pools[i].strategy),
        };
    size_t total = 0;
    for (size_t i = 0; i < self->nsets; i++)
        total += self->sets[i].nworkers;
    p->workers = s_alloc(self, (total + 1) * sizeof *p->workers);
    for (size_t i = 0; i < self->nsets; i++) {
        s_wset_t *set = &self->sets[i];
        for (size_t w = 0; w < set->nworkers; w++) {
            s_worker_t *wk = &set->workers[w];
            p->workers[p->workers_len++] = (ipl_worker_t){
                .name = (char *)wk->name,
                .pool = (char *)(set->pool ? set->pool->name : ""),
                .model = (char *)set->model,
                .url = (char *)wk->url,
                .kv_endpoint = (char *)s_or_empty(wk->kv),
                .replay_endpoint = (char *)s_or_empty(wk->replay),
                .metrics_url = (char *)s_or_empty(wk->metrics),
                .block_size = set->block_size,
                .worker_set = (char *)set->name,
            };
        }
    }
    p->hash = policy_digest_hash(p);
    self->has_policy = true;
    return 0;
}

const ipl_policy_t *policy_compiler_policy(const policy_compiler_t *self)
{
    return self->has_policy ? &self->policy : NULL;
}

size_t policy_compiler_nerrors(const policy_compiler_t *self)
{
    return self->nerrors;
}

const char *policy_compiler_error(const policy_compiler_t *self, size_t i)
{
    return i < self->nerrors ? self->errors[i] : NULL;
}

size_t policy_compiler_nwarnings(const policy_compiler_t *self)
{
    return self->nwarnings;
}

const char *policy_compiler_warning(const policy_compiler_t *self, size_t i)
{
    return i < self->nwarnings ? self->warnings[i] : NULL;
}

size_t policy_compiler_nfiles(const policy_compiler_t *self)
{
    return self->nfiles;
}

const char *policy_compiler_file(const policy_compiler_t *self, size_t i)
{
    return i < self->nfiles ? self->files[i] : NULL;
}

size_t policy_compiler_nworker_sets(const policy_compiler_t *self)
{
    return self->nsets;
}
