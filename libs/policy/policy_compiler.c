/*
 * policy_compiler — YAML resources → checked, compiled ipl_policy_t.
 *
 * Two passes:
 *   1. per document (s_document, called by policy_yaml_load): each resource is checked field
 *      by field against its schema (policy_yaml_fields rejects unknown and duplicate keys).
 *      Worker sets and pools are recorded here as s_wset_t / s_pool_t with the place of every
 *      name; GatewayBackend and InferenceProvider go to policy_remote, InferencePolicy to
 *      policy_rules.
 *   2. policy_compiler_finish: checks across resources (duplicate names, worker names unique
 *      cluster-wide, references, one pool per model and per worker set, consistent block
 *      sizes, providers offering the pool's model), then policy_rules_finish (rule order,
 *      references, shadowed rules, alias cycles), and builds the sorted ipl_policy_t and the
 *      public views (policy_types.h).
 *
 * Every string the result points to lives in the policy_yaml_t's arena, freed at once by
 * policy_compiler_destroy.
 */
#include "policy_compiler.h"

#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ipl_strategy.h" // the one list of strategies
#include "policy_digest.h"
#include "policy_remote.h"
#include "policy_rules.h"
#include "policy_yaml.h"

#define S_MAX_BLOCK_SIZE 1024
#define S_MAX_LORA       64
#define S_MAX_SELECTOR   32 // matchLabels; matchExpressions: 16

#define S_STRATEGY(name, measurement) name,
static const char *const s_strategies[] = {IPL_STRATEGIES(S_STRATEGY) NULL}; // for the hints
static const char *const s_kinds[] = {"GatewayBackend",    "InferencePolicy",    "InferencePool",
                                      "InferenceProvider", "InferenceWorkerSet", NULL};
enum { S_BACKEND, S_POLICY, S_POOL, S_PROVIDER, S_WORKERSET };

typedef struct {
    const char *name, *url, *kv, *replay, *metrics;
    size_t index;     // in its set's spec.workers
    policy_loc_t loc; // of the name
} s_worker_t;

typedef struct {
    const char *name, *model;
    uint64_t block_size;
    s_worker_t *workers;
    size_t nworkers;
    policy_loc_t loc;          // of metadata.name
    const struct s_pool *pool; // the pool that targets it (finish)
    policy_loc_t pool_loc;
    policy_workerset_t pub; // selector, ports, LoRA adapters, profile (filled while reading)
} s_wset_t;

typedef struct {
    const char *set; // the worker set, or NULL for a provider target
    policy_loc_t loc;
    policy_target_t pub;
} s_target_t;

// A worker's Kubernetes node (policy_compiler_set_node), in the arena.
typedef struct {
    const char *worker, *node;
} s_node_t;

typedef struct s_pool {
    const char *name, *model, *strategy;
    s_target_t *targets;
    size_t ntargets;
    policy_loc_t loc, model_loc;
    uint64_t slo_ttft_ms;
} s_pool_t;

struct policy_compiler {
    policy_yaml_t *yaml; // arena and messages
    policy_remote_t *remote;
    policy_rules_t *rules;
    char **files;
    size_t nfiles, cap_files;
    s_wset_t *sets;
    size_t nsets, cap_sets;
    s_pool_t *pools;
    size_t npools, cap_pools;
    s_node_t *nodes; // sorted by worker in finish
    size_t nnodes, cap_nodes;
    policy_workerset_t *pub_sets; // finish
    policy_pool_t *pub_pools;
    bool finished;
    ipl_policy_t policy;
    bool has_policy;
};

// spec.ports.<name>: a container port number or name.
static void s_port(policy_doc_t *d, yaml_node_t *node, const char *path, policy_port_t *out)
{
    if (!node || policy_yaml_is_null(node)) return;
    const char *v = node->type == YAML_SCALAR_NODE ? (const char *)node->data.scalar.value : "";
    if (node->type == YAML_SCALAR_NODE && node->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
        *v && strspn(v, "0123456789") == strlen(v)) {
        uint64_t n = 0;
        if (policy_yaml_uint(d, node, path, 1, 65535, &n))
            *out = (policy_port_t){(uint32_t)n, NULL};
        return;
    }
    const char *name = policy_yaml_str(d, node, NULL, path, true);
    if (!name) return;
    // An IANA_SVC_NAME, as Kubernetes requires of a container port's name.
    if (strlen(name) > 15 || !policy_yaml_valid_name(name) || strchr(name, '.')) {
        policy_yaml_err(d, node,
                        "%s \"%s\" is neither a port number (1..65535) nor a container port "
                        "name (lower-case letters, digits and '-', at most 15 characters)",
                        path, name);
        return;
    }
    *out = (policy_port_t){0, name};
}

static void s_selector(policy_compiler_t *self, policy_doc_t *d, yaml_node_t *node,
                       policy_workerset_t *pub)
{
    static const char *const fields[] = {"matchLabels", "matchExpressions", NULL};
    static const char *const efields[] = {"key", "operator", "values", NULL};
    static const char *const ops[] = {"In", "NotIn", "Exists", "DoesNotExist", NULL};
    yaml_node_t *f[2];
    if (!policy_yaml_fields(d, node, "spec.selector", fields, f)) return;
    pub->has_selector = true;
    if (!f[0] && !f[1])
        policy_yaml_err(d, node,
                        "spec.selector needs matchLabels or matchExpressions (an empty "
                        "selector would select every pod)");
    if (f[0] && f[0]->type != YAML_MAPPING_NODE) {
        policy_yaml_err(d, f[0],
                        "spec.selector.matchLabels must be a mapping (label: value), "
                        "got %s",
                        policy_yaml_what(f[0]));
    } else if (f[0]) {
        size_t n = (size_t)(f[0]->data.mapping.pairs.top - f[0]->data.mapping.pairs.start);
        if (n > S_MAX_SELECTOR)
            policy_yaml_err(d, f[0],
                            "spec.selector.matchLabels has %zu labels, above the limit "
                            "of %d",
                            n, S_MAX_SELECTOR);
        policy_label_t *labels = policy_yaml_alloc(self->yaml, n * sizeof *labels);
        for (size_t i = 0; i < n && n <= S_MAX_SELECTOR; i++) {
            yaml_node_pair_t *p = &f[0]->data.mapping.pairs.start[i];
            yaml_node_t *k = policy_yaml_node(d, p->key), *v = policy_yaml_node(d, p->value);
            const char *key = policy_yaml_str(d, k, f[0], "spec.selector.matchLabels key", true);
            char at[320];
            snprintf(at, sizeof at, "spec.selector.matchLabels.%s", key ? key : "?");
            const char *value = policy_yaml_str(d, v, f[0], at, false);
            if (key) labels[pub->nmatch_labels++] = (policy_label_t){key, value ? value : ""};
        }
        pub->match_labels = labels;
    }
    yaml_node_t *list = policy_yaml_list(d, f[1], node, "spec.selector.matchExpressions",
                                         "expressions ({key, operator, values})", false, 16);
    if (!list) return;
    size_t n = policy_yaml_len(list);
    policy_select_expr_t *exprs = policy_yaml_alloc(self->yaml, n * sizeof *exprs);
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *e[3];
        char base[64], at[96];
        yaml_node_t *item = policy_yaml_entry(d, list, i, "spec.selector.matchExpressions", efields,
                                              e, base, sizeof base);
        if (!item) continue;
        snprintf(at, sizeof at, "%s.key", base);
        const char *key = policy_yaml_str(d, e[0], item, at, true);
        snprintf(at, sizeof at, "%s.operator", base);
        int op = policy_yaml_enum(d, e[1], item, at, ops, true);
        snprintf(at, sizeof at, "%s.values", base);
        policy_select_expr_t x = {.key = key, .op = (policy_select_op_t)op};
        x.values =
            policy_yaml_words(d, e[2], item, at, 64, POLICY_YAML_MAX_NAME, false, &x.nvalues);
        bool needs = op == POLICY_SELECT_IN || op == POLICY_SELECT_NOT_IN;
        if (op >= 0 && needs != (x.nvalues > 0)) {
            policy_yaml_err(d, e[2] ? e[2] : item, "%s: operator %s %s", at, ops[op],
                            needs ? "needs a non-empty list of values" : "takes no values");
            continue;
        }
        if (key && op >= 0) exprs[pub->nmatch_exprs++] = x;
    }
    pub->match_exprs = exprs;
}

// The InferenceWorkerSet fields beyond model, blockSize and workers.
static void s_workerset_more(policy_compiler_t *self, policy_doc_t *d, yaml_node_t *spec,
                             yaml_node_t **f, s_wset_t *set)
{
    static const char *const pfields[] = {"api", "kvEvents", "replay", "metrics", NULL};
    policy_workerset_t *pub = &set->pub;
    if (f[3]) s_selector(self, d, f[3], pub);
    yaml_node_t *p[4];
    if (f[4] && policy_yaml_fields(d, f[4], "spec.ports", pfields, p)) {
        if (!f[3])
            policy_yaml_warn(d, f[4],
                             "spec.ports is only used with spec.selector; remove it or "
                             "add a selector");
        if (!p[0]) policy_yaml_err(d, f[4], "spec.ports.api is required: the pods' API port");
        s_port(d, p[0], "spec.ports.api", &pub->api_port);
        s_port(d, p[1], "spec.ports.kvEvents", &pub->kv_events_port);
        s_port(d, p[2], "spec.ports.replay", &pub->replay_port);
        s_port(d, p[3], "spec.ports.metrics", &pub->metrics_port);
        if (p[2] && !p[1])
            policy_yaml_err(d, p[2],
                            "spec.ports.replay is set but spec.ports.kvEvents is not; "
                            "replay needs the KV-event stream");
    }
    if (f[3] && !f[4])
        policy_yaml_err(d, f[3],
                        "spec.selector needs spec.ports (at least api: the port of "
                        "vLLM's API on the selected pods)");
    if (!f[2] && !f[3])
        policy_yaml_err(d, spec,
                        "spec.workers is required: a list of workers ({name, url, "
                        "kvEvents}), or give a spec.selector (with spec.ports) that "
                        "finds them");
    else if (!f[2])
        policy_yaml_warn(d, f[3],
                         "spec.selector finds pods only in Kubernetes mode; read from "
                         "files this worker set has no workers");
    pub->lora_adapters = policy_yaml_words(d, f[5], spec, "spec.loraAdapters", S_MAX_LORA,
                                           POLICY_YAML_MAX_MODEL, false, &pub->nlora_adapters);
    pub->profile = policy_yaml_opt_name(d, f[6], spec, "spec.profile");
    // spec.apis: the APIs the workers serve; "openai" always (vLLM's), "anthropic" when they
    // also serve /v1/messages themselves (the gateway then passes those requests through)
    size_t napis = 0;
    const char **apis = policy_yaml_words(d, f[7], spec, "spec.apis", 2, 16, false, &napis);
    bool openai = napis == 0;
    for (size_t i = 0; apis && i < napis; i++) {
        if (!strcmp(apis[i], "openai"))
            openai = true;
        else if (!strcmp(apis[i], "anthropic"))
            pub->messages_api = true;
        else
            policy_yaml_err(d, f[7],
                            "spec.apis[%zu] \"%s\" is not an API; use openai and, "
                            "when the workers serve /v1/messages, anthropic",
                            i, apis[i]);
    }
    if (!openai)
        policy_yaml_err(d, f[7], "spec.apis must list openai (every vLLM worker serves it)");
}

static void s_workerset(policy_compiler_t *self, policy_doc_t *d, yaml_node_t *spec,
                        yaml_node_t *name_node)
{
    static const char *const fields[] = {"model",    "blockSize", "workers",
                                         "selector", "ports",     "loraAdapters",
                                         "profile",  "apis",      NULL};
    static const char *const wfields[] = {"name", "url", "kvEvents", "replay", "metrics", NULL};
    yaml_node_t *f[8];
    if (!policy_yaml_fields(d, spec, "spec", fields, f)) return;
    s_wset_t set = {.name = d->name, .loc = policy_yaml_loc(d, name_node)};
    set.model = policy_yaml_model(d, f[0], spec, "spec.model");
    set.block_size = POLICY_DEFAULT_BLOCK_SIZE;
    policy_yaml_uint(d, f[1], "spec.blockSize", 1, S_MAX_BLOCK_SIZE, &set.block_size);
    s_workerset_more(self, d, spec, f, &set);
    yaml_node_t *list = policy_yaml_list(d, f[2], spec, "spec.workers",
                                         "workers ({name, url, kvEvents})", f[2] != NULL, SIZE_MAX);
    if (list) {
        size_t n = policy_yaml_len(list);
        set.workers = policy_yaml_alloc(self->yaml, n * sizeof *set.workers);
        for (size_t i = 0; i < n; i++) {
            yaml_node_t *item = policy_yaml_item(d, list, i), *w[5];
            char base[64], path[128];
            snprintf(base, sizeof base, "spec.workers[%zu]", i);
            if (!item || !policy_yaml_fields(d, item, base, wfields, w)) continue;
            s_worker_t wk = {.index = i, .loc = policy_yaml_loc(d, w[0] ? w[0] : item)};
            snprintf(path, sizeof path, "%s.name", base);
            wk.name = policy_yaml_name(d, w[0], item, path);
            snprintf(path, sizeof path, "%s.url", base);
            wk.url = policy_yaml_url(d, w[1], item, path, true);
            snprintf(path, sizeof path, "%s.kvEvents", base);
            wk.kv = policy_yaml_endpoint(d, w[2], item, path);
            snprintf(path, sizeof path, "%s.replay", base);
            wk.replay = policy_yaml_endpoint(d, w[3], item, path);
            if (wk.replay && !wk.kv)
                policy_yaml_err(
                    d, w[3], "%s is set but %s.kvEvents is not; replay needs the KV-event stream",
                    path, base);
            snprintf(path, sizeof path, "%s.metrics", base);
            wk.metrics = policy_yaml_url(d, w[4], item, path, false);
            if (!wk.metrics && wk.url && !w[4]) {
                char *m = policy_yaml_alloc(self->yaml, strlen(wk.url) + sizeof "/metrics");
                sprintf(m, "%s/metrics", wk.url);
                wk.metrics = m;
            }
            if (wk.name && wk.url) set.workers[set.nworkers++] = wk;
        }
    }
    policy_yaml_reserve((void **)&self->sets, &self->cap_sets, self->nsets, sizeof *self->sets);
    self->sets[self->nsets++] = set;
}

static void s_target(policy_doc_t *d, yaml_node_t *item, size_t i, s_pool_t *pool)
{
    static const char *const tfields[] = {"workerSet", "provider", "role", "weight", NULL};
    static const char *const roles[] = {"primary", "overflow", "batch", NULL};
    yaml_node_t *t[4];
    char base[64], path[128];
    snprintf(base, sizeof base, "spec.targets[%zu]", i);
    if (!item || !policy_yaml_fields(d, item, base, tfields, t)) return;
    if (t[0] && t[1]) {
        policy_yaml_err(d, t[1],
                        "%s names both a workerSet and a provider; give exactly one "
                        "(two targets for both)",
                        base);
        return;
    }
    if (!t[0] && !t[1]) {
        policy_yaml_err(d, item, "%s names neither a workerSet nor a provider; give exactly one",
                        base);
        return;
    }
    snprintf(path, sizeof path, "%s.%s", base, t[1] ? "provider" : "workerSet");
    const char *name =
        t[1] ? policy_yaml_name(d, t[1], item, path) : policy_yaml_str(d, t[0], item, path, true);
    snprintf(path, sizeof path, "%s.role", base);
    int role = policy_yaml_enum(d, t[2], item, path, roles, false);
    uint64_t weight = 1;
    snprintf(path, sizeof path, "%s.weight", base);
    policy_yaml_uint(d, t[3], path, 1, 1000, &weight);
    if (!name) return;
    policy_loc_t loc = policy_yaml_loc(d, t[1] ? t[1] : t[0]);
    pool->targets[pool->ntargets++] = (s_target_t){
        .set = t[0] ? name : NULL,
        .loc = loc,
        .pub = {t[1] ? POLICY_TARGET_PROVIDER : POLICY_TARGET_WORKER_SET, name,
                role < 0 ? POLICY_ROLE_PRIMARY : (policy_role_t)role, (uint32_t)weight, loc},
    };
}

static void s_pool(policy_compiler_t *self, policy_doc_t *d, yaml_node_t *spec,
                   yaml_node_t *name_node)
{
    static const char *const fields[] = {"model", "strategy", "targets", "slo", NULL};
    static const char *const sfields[] = {"ttftMs", NULL};
    yaml_node_t *f[4];
    if (!policy_yaml_fields(d, spec, "spec", fields, f)) return;
    s_pool_t pool = {.name = d->name,
                     .loc = policy_yaml_loc(d, name_node),
                     .model_loc = policy_yaml_loc(d, f[0])};
    pool.model = policy_yaml_model(d, f[0], spec, "spec.model");
    pool.strategy = policy_yaml_str(d, f[1], spec, "spec.strategy", false);
    if (pool.strategy && !ipl_strategy_known(pool.strategy)) {
        char hint[512];
        policy_yaml_err(d, f[1], "spec.strategy \"%s\" is not a known strategy%s", pool.strategy,
                        policy_yaml_hint(hint, sizeof hint, pool.strategy, s_strategies,
                                         policy_yaml_count(s_strategies)));
        pool.strategy = NULL;
    }
    yaml_node_t *s[1];
    if (f[3] && policy_yaml_fields(d, f[3], "spec.slo", sfields, s))
        policy_yaml_uint(d, s[0], "spec.slo.ttftMs", 1, 600000, &pool.slo_ttft_ms);
    yaml_node_t *list =
        policy_yaml_list(d, f[2], spec, "spec.targets",
                         "targets ({workerSet | provider, role, weight})", true, SIZE_MAX);
    if (list) {
        size_t n = policy_yaml_len(list);
        if (n > POLICY_COMPILER_MAX_TARGETS) {
            policy_yaml_err(d, list,
                            "spec.targets lists %zu targets, above the limit of %d; merge "
                            "worker sets",
                            n, POLICY_COMPILER_MAX_TARGETS);
            n = POLICY_COMPILER_MAX_TARGETS;
        }
        pool.targets = policy_yaml_alloc(self->yaml, n * sizeof *pool.targets);
        for (size_t i = 0; i < n; i++)
            s_target(d, policy_yaml_item(d, list, i), i, &pool);
    }
    policy_yaml_reserve((void **)&self->pools, &self->cap_pools, self->npools, sizeof *self->pools);
    self->pools[self->npools++] = pool;
}

static void s_document(void *arg, policy_doc_t *d, yaml_node_t *root)
{
    policy_compiler_t *self = arg;
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
        policy_yaml_err(d, root,
                        "a resource must be a mapping with apiVersion, kind, metadata and spec; "
                        "got %s",
                        policy_yaml_what(root));
        return;
    }
    // Name the resource in every message, even those about fields that come before its kind.
    yaml_node_t *kind_node = policy_yaml_lookup(d, root, "kind");
    yaml_node_t *name_node = policy_yaml_lookup(d, policy_yaml_lookup(d, root, "metadata"), "name");
    size_t nkinds = policy_yaml_count(s_kinds);
    for (size_t i = 0; i < nkinds && kind_node; i++)
        if (kind_node->type == YAML_SCALAR_NODE &&
            !strcmp((const char *)kind_node->data.scalar.value, s_kinds[i]))
            d->kind = s_kinds[i];
    if (name_node && name_node->type == YAML_SCALAR_NODE && !policy_yaml_is_null(name_node))
        d->name = policy_yaml_strdup(d->yaml, (const char *)name_node->data.scalar.value);

    yaml_node_t *f[5], *m[12];
    policy_yaml_fields(d, root, "", top, f);
    const char *kind = policy_yaml_str(d, f[1], root, "kind", true);
    if (kind && !d->kind) {
        char hint[512];
        policy_yaml_err(d, f[1], "kind \"%s\" is not known%s", kind,
                        policy_yaml_hint(hint, sizeof hint, kind, s_kinds, nkinds));
    }
    const char *api = policy_yaml_str(d, f[0], root, "apiVersion", true);
    if (api && strcmp(api, POLICY_API_VERSION))
        policy_yaml_err(d, f[0], "apiVersion \"%s\" is not supported; use %s", api,
                        POLICY_API_VERSION);
    const char *name = NULL;
    if (!f[2])
        policy_yaml_err(d, root, "metadata is required (with a name)");
    else if (policy_yaml_fields(d, f[2], "metadata", meta, m))
        name = policy_yaml_name(d, m[0], f[2], "metadata.name");
    if (!f[3] || policy_yaml_is_null(f[3])) {
        policy_yaml_err(d, f[3] ? f[3] : root, "spec is required");
        return;
    }
    if (!d->kind || !name || !api || strcmp(api, POLICY_API_VERSION))
        return; // reported above; the spec cannot be checked against an unknown schema
    d->name = name;
    if (d->kind == s_kinds[S_WORKERSET])
        s_workerset(self, d, f[3], m[0]);
    else if (d->kind == s_kinds[S_POOL])
        s_pool(self, d, f[3], m[0]);
    else if (d->kind == s_kinds[S_BACKEND])
        policy_remote_add_backend(self->remote, d, f[3], m[0]);
    else if (d->kind == s_kinds[S_PROVIDER])
        policy_remote_add_provider(self->remote, d, f[3], m[0]);
    else
        policy_rules_add(self->rules, d, f[3], m[0]);
}

// ---- public: input ----------------------------------------------------------------------------

policy_compiler_t *policy_compiler_new(void)
{
    policy_compiler_t *self = calloc(1, sizeof *self);
    if (!self) abort();
    self->yaml = policy_yaml_new(POLICY_COMPILER_MAX_ERRORS);
    self->remote = policy_remote_new(self->yaml);
    self->rules = policy_rules_new(self->yaml);
    return self;
}

void policy_compiler_destroy(policy_compiler_t **self_p)
{
    if (!self_p || !*self_p) return;
    policy_compiler_t *self = *self_p;
    policy_rules_destroy(&self->rules);
    policy_remote_destroy(&self->remote);
    free(self->files); // strings are in the arena
    free(self->sets);
    free(self->pools);
    free(self->nodes);
    free(self->pub_sets);
    free(self->pub_pools);
    policy_yaml_destroy(&self->yaml); // last: every string lives in its arena
    free(self);
    *self_p = NULL;
}

void policy_compiler_set_node(policy_compiler_t *self, const char *worker, const char *node)
{
    if (!worker || !*worker || !node || !*node || self->finished) return;
    policy_yaml_reserve((void **)&self->nodes, &self->cap_nodes, self->nnodes, sizeof *self->nodes);
    self->nodes[self->nnodes++] =
        (s_node_t){policy_yaml_strdup(self->yaml, worker), policy_yaml_strdup(self->yaml, node)};
}

static int s_node_cmp(const void *a, const void *b)
{
    return strcmp(((const s_node_t *)a)->worker, ((const s_node_t *)b)->worker);
}

// The node recorded for `worker` (NULL: none, a static worker).
static const char *s_node_of(const policy_compiler_t *self, const char *worker)
{
    s_node_t key = {.worker = worker};
    const s_node_t *n =
        self->nnodes ? bsearch(&key, self->nodes, self->nnodes, sizeof key, s_node_cmp) : NULL;
    return n ? n->node : NULL;
}

int policy_compiler_add_string(policy_compiler_t *self, const char *name, const char *yaml,
                               size_t len)
{
    size_t before = policy_yaml_error_count(self->yaml);
    const char *file = policy_yaml_strdup(self->yaml, name ? name : "<string>");
    policy_yaml_reserve((void **)&self->files, &self->cap_files, self->nfiles, sizeof *self->files);
    self->files[self->nfiles++] = (char *)file;
    policy_yaml_load(self->yaml, file, yaml, len, s_document, self);
    return (int)(policy_yaml_error_count(self->yaml) - before);
}

int policy_compiler_add_file(policy_compiler_t *self, const char *path, const char *name)
{
    if (!name) name = path;
    policy_loc_t loc = {policy_yaml_strdup(self->yaml, name), 1, 1};
    FILE *f = fopen(path, "rb");
    struct stat st;
    if (!f || fstat(fileno(f), &st) != 0) {
        policy_yaml_report(self->yaml, false, &loc, NULL, NULL, "cannot read the file: %s",
                           strerror(errno));
        if (f) fclose(f);
        return 1;
    }
    if ((size_t)st.st_size > POLICY_COMPILER_MAX_FILE_BYTES) {
        policy_yaml_report(self->yaml, false, &loc, NULL, NULL,
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
    policy_loc_t loc = {policy_yaml_strdup(self->yaml, dir), 1, 1};
    DIR *dp = opendir(dir);
    if (!dp) {
        policy_yaml_report(self->yaml, false, &loc, NULL, NULL,
                           "cannot open the policy directory: %s", strerror(errno));
        return 1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(dp)))
        if (policy_compiler_is_policy_file(e->d_name)) {
            policy_yaml_reserve((void **)&names, &cap, n, sizeof *names);
            names[n++] = strdup(e->d_name);
        }
    closedir(dp);
    if (n == 0) {
        policy_yaml_report(self->yaml, false, &loc, NULL, NULL,
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
    return (s_wset_t *)policy_yaml_find(self->sets, self->nsets, sizeof *self->sets,
                                        offsetof(s_wset_t, name), name);
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
    policy_yaml_unique(self->yaml, kset, self->sets, self->nsets, sizeof *self->sets,
                       offsetof(s_wset_t, name), offsetof(s_wset_t, loc));
    policy_yaml_unique(self->yaml, kpool, self->pools, self->npools, sizeof *self->pools,
                       offsetof(s_pool_t, name), offsetof(s_pool_t, loc));
    for (size_t i = 0; i < self->npools; i++)
        for (size_t j = 0; j < i; j++) {
            s_pool_t *a = &self->pools[i], *b = &self->pools[j];
            if (strcmp(a->name, b->name) && a->model && b->model && !strcmp(a->model, b->model))
                policy_yaml_report(self->yaml, false, &a->model_loc, kpool, a->name,
                                   "spec.model \"%s\" is already served by InferencePool \"%s\" "
                                   "at %s:%zu:%zu; one pool per model: merge their targets",
                                   a->model, b->name, b->model_loc.file, b->model_loc.line,
                                   b->model_loc.col);
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
                        policy_yaml_report(self->yaml, false, &wa->loc, kset, si->name,
                                           "spec.workers[%zu].name \"%s\" is already used by "
                                           "InferenceWorkerSet \"%s\" (spec.workers[%zu]) at "
                                           "%s:%zu:%zu; worker names must be unique in the "
                                           "cluster",
                                           wa->index, wa->name, sj->name, wb->index, wb->loc.file,
                                           wb->loc.line, wb->loc.col);
                    else if (!strcmp(wa->url, wb->url))
                        policy_yaml_report(self->yaml, false, &wa->loc, kset, si->name,
                                           "spec.workers[%zu] (\"%s\") has the url %s of worker "
                                           "\"%s\" (InferenceWorkerSet \"%s\" at %s:%zu:%zu); "
                                           "each worker needs its own url",
                                           wa->index, wa->name, wa->url, wb->name, sj->name,
                                           wb->loc.file, wb->loc.line, wb->loc.col);
                }
            }
        }
    }
    if (total > POLICY_COMPILER_MAX_WORKERS && self->nsets > 0)
        policy_yaml_report(self->yaml, false, &self->sets[self->nsets - 1].loc, NULL, NULL,
                           "%zu workers in total, above the limit of %d; split the cluster", total,
                           POLICY_COMPILER_MAX_WORKERS);
}

// A provider target: it exists, offers the pool's model, and is listed once in the pool.
static void s_check_provider_target(policy_compiler_t *self, s_pool_t *pool, size_t t)
{
    s_target_t *tg = &pool->targets[t];
    const char *name = tg->pub.name;
    const policy_provider_t *provider = policy_remote_find_provider(self->remote, name);
    if (!provider) {
        size_t n = policy_remote_nproviders(self->remote);
        const char **known = policy_yaml_alloc(self->yaml, (n + 1) * sizeof *known);
        for (size_t i = 0; i < n; i++)
            known[i] = policy_remote_provider(self->remote, i)->name;
        char hint[768];
        policy_yaml_report(self->yaml, false, &tg->loc, "InferencePool", pool->name,
                           "spec.targets[%zu].provider \"%s\" does not exist%s", t, name,
                           policy_yaml_hint(hint, sizeof hint, name, known, n));
        return;
    }
    for (size_t u = 0; u < t; u++)
        if (pool->targets[u].pub.kind == POLICY_TARGET_PROVIDER &&
            !strcmp(pool->targets[u].pub.name, name)) {
            policy_yaml_report(self->yaml, false, &tg->loc, "InferencePool", pool->name,
                               "spec.targets[%zu].provider \"%s\" is listed twice; remove one", t,
                               name);
            return;
        }
    if (pool->model && !policy_remote_provider_model(provider, pool->model)) {
        const char **offered =
            policy_yaml_names(self->yaml, provider->models, provider->nmodels,
                              sizeof *provider->models, offsetof(policy_provider_model_t, name));
        char known[512];
        policy_yaml_report(self->yaml, false, &tg->loc, "InferencePool", pool->name,
                           "spec.targets[%zu].provider \"%s\" does not offer the pool's model "
                           "\"%s\" %s; add it to the provider's spec.models",
                           t, name, pool->model,
                           policy_yaml_hint(known, sizeof known, "", offered, provider->nmodels) +
                               1);
    }
}

static void s_check_pools(policy_compiler_t *self)
{
    const char **known = policy_yaml_names(self->yaml, self->sets, self->nsets, sizeof *self->sets,
                                           offsetof(s_wset_t, name));
    for (size_t p = 0; p < self->npools; p++) {
        s_pool_t *pool = &self->pools[p];
        s_wset_t *first = NULL;
        for (size_t t = 0; t < pool->ntargets; t++) {
            s_target_t *tg = &pool->targets[t];
            if (!tg->set) {
                s_check_provider_target(self, pool, t);
                continue;
            }
            s_wset_t *set = s_find_set(self, tg->set);
            if (!set) {
                char hint[768];
                policy_yaml_report(
                    self->yaml, false, &tg->loc, "InferencePool", pool->name,
                    "spec.targets[%zu].workerSet \"%s\" does not exist%s", t, tg->set,
                    policy_yaml_hint(hint, sizeof hint, tg->set, known, self->nsets));
                continue;
            }
            if (set->pool == pool) {
                policy_yaml_report(self->yaml, false, &tg->loc, "InferencePool", pool->name,
                                   "spec.targets[%zu].workerSet \"%s\" is listed twice; remove "
                                   "one",
                                   t, tg->set);
                continue;
            }
            if (set->pool) {
                policy_yaml_report(self->yaml, false, &tg->loc, "InferencePool", pool->name,
                                   "spec.targets[%zu].workerSet \"%s\" already belongs to "
                                   "InferencePool \"%s\" (%s:%zu:%zu); a worker set serves one "
                                   "pool",
                                   t, tg->set, set->pool->name, set->pool_loc.file,
                                   set->pool_loc.line, set->pool_loc.col);
                continue;
            }
            set->pool = pool;
            set->pool_loc = tg->loc;
            if (!first) {
                first = set;
            } else if (first->block_size != set->block_size) {
                policy_yaml_report(self->yaml, false, &tg->loc, "InferencePool", pool->name,
                                   "spec.targets[%zu].workerSet \"%s\" has blockSize %llu but "
                                   "\"%s\" has %llu; the workers of one pool must share a block "
                                   "size",
                                   t, tg->set, (unsigned long long)set->block_size, first->name,
                                   (unsigned long long)first->block_size);
            }
        }
    }
    // Only for a policy that compiles: next to an error (a mistyped target) it would mislead.
    for (size_t i = 0; i < self->nsets && policy_yaml_error_count(self->yaml) == 0; i++)
        if (!self->sets[i].pool)
            policy_yaml_report(self->yaml, true, &self->sets[i].loc, "InferenceWorkerSet",
                               self->sets[i].name,
                               "no InferencePool targets it; its workers are watched but get no "
                               "requests");
}

// The public views of worker sets and pools (policy_types.h).
static void s_publish(policy_compiler_t *self)
{
    self->pub_sets = calloc(self->nsets + 1, sizeof *self->pub_sets);
    self->pub_pools = calloc(self->npools + 1, sizeof *self->pub_pools);
    if (!self->pub_sets || !self->pub_pools) abort();
    for (size_t i = 0; i < self->nsets; i++) {
        s_wset_t *set = &self->sets[i];
        policy_workerset_t *pub = &self->pub_sets[i];
        *pub = set->pub;
        pub->name = set->name;
        pub->model = set->model;
        pub->block_size = set->block_size;
        pub->nworkers = set->nworkers;
        pub->pool = set->pool ? set->pool->name : NULL;
        pub->loc = set->loc;
    }
    for (size_t i = 0; i < self->npools; i++) {
        s_pool_t *pool = &self->pools[i];
        policy_target_t *targets =
            policy_yaml_alloc(self->yaml, (pool->ntargets + 1) * sizeof *targets);
        for (size_t t = 0; t < pool->ntargets; t++)
            targets[t] = pool->targets[t].pub;
        self->pub_pools[i] =
            (policy_pool_t){pool->name, pool->model,    pool->strategy, pool->slo_ttft_ms,
                            targets,    pool->ntargets, pool->loc,      pool->model_loc};
    }
}

static const char *s_or_empty(const char *s)
{
    return s ? s : "";
}

// ---- the POLICY elements beyond pools and workers (ipl_proto.h) ------------------------------
// Every element is flat, in the compiler's deterministic order, its strings borrowed from the
// arena ("" for what is unset). A secret appears as its source only: the compiler never reads
// a value.

static char *s_wire(const char *s)
{
    return (char *)s_or_empty(s);
}

// A const string list as the wire's char ** (the codec only reads it).
static char **s_wire_list(const char *const *v, size_t n, uint32_t *len)
{
    *len = (uint32_t)n;
    return (char **)v;
}

static const char *s_secret_source(policy_secret_source_t s)
{
    static const char *const names[] = {"", "secretRef", "file", "env"};
    return (size_t)s < sizeof names / sizeof names[0] ? names[s] : "";
}

static void s_wire_backends(policy_compiler_t *self, ipl_policy_t *p)
{
    static const char *const protocols[] = {"openai", "anthropic"};
    static const char *const auths[] = {"none", "bearer", "header"};
    size_t n = policy_remote_nbackends(self->remote);
    p->backends = policy_yaml_alloc(self->yaml, (n + 1) * sizeof *p->backends);
    for (size_t i = 0; i < n; i++) {
        const policy_backend_t *b = policy_remote_backend(self->remote, i);
        bool ca = b->ca_secret.source != POLICY_SECRET_NONE;
        p->backends[p->backends_len++] = (ipl_backend_t){
            .name = s_wire(b->name),
            .url = s_wire(b->url),
            .protocol = (char *)protocols[b->protocol == POLICY_PROTOCOL_ANTHROPIC],
            .auth = (char *)auths[b->auth <= POLICY_AUTH_HEADER ? b->auth : 0],
            .auth_header = s_wire(b->auth == POLICY_AUTH_HEADER ? b->auth_header : NULL),
            .secret_source = (char *)s_secret_source(b->secret.source),
            .secret_name = s_wire(b->secret.source ? b->secret.name : NULL),
            .secret_key =
                s_wire(b->secret.source == POLICY_SECRET_KUBERNETES ? b->secret.key : NULL),
            .ca_bundle = s_wire(b->ca_bundle),
            .ca_secret_name = s_wire(ca ? b->ca_secret.name : NULL),
            .ca_secret_key = s_wire(ca ? b->ca_secret.key : NULL),
            .insecure_skip_verify = b->insecure_skip_verify,
            .connect_ms = b->connect_ms,
            .response_ms = b->response_ms,
            .max_connections = b->max_connections,
        };
    }
}

static void s_wire_providers(policy_compiler_t *self, ipl_policy_t *p)
{
    size_t n = policy_remote_nproviders(self->remote), nmodels = 0;
    for (size_t i = 0; i < n; i++)
        nmodels += policy_remote_provider(self->remote, i)->nmodels;
    p->providers = policy_yaml_alloc(self->yaml, (n + 1) * sizeof *p->providers);
    p->provider_models = policy_yaml_alloc(self->yaml, (nmodels + 1) * sizeof *p->provider_models);
    for (size_t i = 0; i < n; i++) {
        const policy_provider_t *v = policy_remote_provider(self->remote, i);
        p->providers[p->providers_len++] = (ipl_provider_t){
            .name = s_wire(v->name),
            .backend = s_wire(v->backend_name),
            .latency_hint_ms = v->latency_hint_ms,
            .input_micros_per_mtok = v->input_micros_per_mtok,
            .output_micros_per_mtok = v->output_micros_per_mtok,
            .concurrent_requests = v->concurrent_requests,
            .tokens_per_minute = v->tokens_per_minute,
        };
        for (size_t m = 0; m < v->nmodels; m++)
            p->provider_models[p->provider_models_len++] = (ipl_provider_model_t){
                .provider = s_wire(v->name),
                .name = s_wire(v->models[m].name),
                .remote_name =
                    s_wire(v->models[m].remote_name ? v->models[m].remote_name : v->models[m].name),
            };
    }
}

static void s_wire_targets(policy_compiler_t *self, ipl_policy_t *p)
{
    static const char *const roles[] = {"primary", "overflow", "batch"};
    size_t n = 0;
    for (size_t i = 0; i < self->npools; i++)
        n += self->pub_pools[i].ntargets;
    p->pool_targets = policy_yaml_alloc(self->yaml, (n + 1) * sizeof *p->pool_targets);
    for (size_t i = 0; i < self->npools; i++) {
        const policy_pool_t *pool = &self->pub_pools[i];
        for (size_t t = 0; t < pool->ntargets; t++) {
            const policy_target_t *tg = &pool->targets[t];
            p->pool_targets[p->pool_targets_len++] = (ipl_pool_target_t){
                .pool = s_wire(pool->name),
                .kind = tg->kind == POLICY_TARGET_PROVIDER ? "provider" : "workerSet",
                .name = s_wire(tg->name),
                .role = (char *)roles[tg->role <= POLICY_ROLE_BATCH ? tg->role : 0],
                .weight = tg->weight,
            };
        }
    }
}

// "name" or "name=value" (a header name holds no '='), in the arena.
static char **s_wire_headers(policy_compiler_t *self, const policy_match_t *m, uint32_t *len)
{
    char **v = policy_yaml_alloc(self->yaml, (m->nheaders + 1) * sizeof *v);
    for (size_t i = 0; i < m->nheaders; i++) {
        const policy_header_match_t *h = &m->headers[i];
        size_t size = strlen(h->name) + (h->value ? strlen(h->value) + 1 : 0) + 1;
        v[i] = policy_yaml_alloc(self->yaml, size);
        snprintf(v[i], size, h->value ? "%s=%s" : "%s", h->name, h->value);
    }
    *len = (uint32_t)m->nheaders;
    return v;
}

static void s_wire_rules(policy_compiler_t *self, ipl_policy_t *p)
{
    static const char *const actions[] = {"route",     "prefer", "spill",
                                          "keepLocal", "reject", "admitBatch"};
    size_t n = policy_rules_nrules(self->rules);
    p->rules = policy_yaml_alloc(self->yaml, (n + 1) * sizeof *p->rules);
    for (size_t i = 0; i < n; i++) {
        const policy_rule_t *r = policy_rules_rule(self->rules, i);
        const policy_match_t *m = &r->match;
        ipl_rule_t *w = &p->rules[p->rules_len++];
        *w = (ipl_rule_t){
            .policy = s_wire(r->policy),
            .name = s_wire(r->name),
            .index = r->index,
            .prompt_min = m->prompt_min,
            .prompt_max = m->prompt_max,
            .has_queue_depth = m->has_queue_depth,
            .queue_depth_above = m->queue_depth_above,
            .has_kv_utilization = m->has_kv_utilization,
            .kv_utilization_above_percent = m->kv_utilization_above_percent,
            .predicted_ttft_above_slo = (uint64_t)m->predicted_ttft_above_slo,
            .has_time = m->has_time,
            .days = m->days,
            .from_minute = m->from_minute,
            .to_minute = m->to_minute,
            .action = (char *)actions[r->action <= POLICY_ACTION_ADMIT_BATCH ? r->action : 0],
            .pool = s_wire(r->pool),
            .target = s_wire(r->target),
            .unless_holder = s_wire(r->unless_holder),
            .provider = s_wire(r->provider),
            .while_above_slo = r->while_above_slo,
            .enter_percent = r->enter_percent,
            .exit_percent = r->exit_percent,
            .min_hold_ms = r->min_hold_ms,
            .reason = s_wire(r->reason),
            .status = r->status,
            .max_utilization_percent = r->max_utilization_percent,
        };
        w->tenants = s_wire_list(m->tenants, m->ntenants, &w->tenants_len);
        w->models = s_wire_list(m->models, m->nmodels, &w->models_len);
        w->labels = s_wire_list(m->labels, m->nlabels, &w->labels_len);
        w->headers = s_wire_headers(self, m, &w->headers_len);
        w->targets = s_wire_list(r->targets, r->ntargets, &w->targets_len);
    }
}

static void s_wire_aliases_limits(policy_compiler_t *self, ipl_policy_t *p)
{
    size_t n = policy_rules_naliases(self->rules), ntargets = 0;
    for (size_t i = 0; i < n; i++)
        ntargets += policy_rules_alias(self->rules, i)->ntargets;
    p->aliases = policy_yaml_alloc(self->yaml, (n + 1) * sizeof *p->aliases);
    p->alias_targets = policy_yaml_alloc(self->yaml, (ntargets + 1) * sizeof *p->alias_targets);
    for (size_t i = 0; i < n; i++) {
        const policy_alias_t *a = policy_rules_alias(self->rules, i);
        ipl_alias_t *w = &p->aliases[p->aliases_len++];
        *w = (ipl_alias_t){.policy = s_wire(a->policy), .name = s_wire(a->name)};
        w->failover = s_wire_list(a->failover, a->nfailover, &w->failover_len);
        for (size_t t = 0; t < a->ntargets; t++)
            p->alias_targets[p->alias_targets_len++] = (ipl_alias_target_t){
                .alias = s_wire(a->name),
                .kind = a->targets[t].kind == POLICY_ALIAS_POOL ? "pool" : "model",
                .name = s_wire(a->targets[t].name),
                .weight = a->targets[t].weight,
            };
    }
    n = policy_rules_nisolated(self->rules);
    p->cache_isolated_tenants =
        policy_yaml_alloc(self->yaml, (n + 1) * sizeof *p->cache_isolated_tenants);
    for (size_t i = 0; i < n; i++)
        p->cache_isolated_tenants[p->cache_isolated_tenants_len++] =
            s_wire(policy_rules_isolated(self->rules, i));
    n = policy_rules_nlimits(self->rules);
    p->limits = policy_yaml_alloc(self->yaml, (n + 1) * sizeof *p->limits);
    for (size_t i = 0; i < n; i++) {
        const policy_limit_t *l = policy_rules_limit(self->rules, i);
        p->limits[p->limits_len++] = (ipl_limit_t){
            .policy = s_wire(l->policy),
            .tenant = s_wire(l->tenant),
            .requests_per_minute = l->requests_per_minute,
            .input_tokens_per_minute = l->input_tokens_per_minute,
            .output_tokens_per_minute = l->output_tokens_per_minute,
            .concurrent_requests = l->concurrent_requests,
            .weight = l->weight,
            .priority = s_wire(l->priority),
            .cost_per_day_micros = l->cost_per_day_micros,
        };
    }
}

// spec.labels of every policy: detectors, threshold, rules and classes (policy_labels).
static void s_wire_labels(policy_compiler_t *self, ipl_policy_t *p)
{
    const policy_labels_t *l = policy_rules_labels(self->rules);
    p->label_detectors = (char *)policy_labels_detectors(l); // NULL: every detector
    p->label_threshold_percent = policy_labels_threshold_percent(l);
    size_t n = policy_labels_nrules(l);
    p->label_rules = policy_yaml_alloc(self->yaml, (n + 1) * sizeof *p->label_rules);
    for (size_t i = 0; i < n; i++) {
        const char *policy = NULL;
        const labels_rule_config_t *r = policy_labels_rule(l, i, &policy);
        ipl_label_rule_t *w = &p->label_rules[p->label_rules_len++];
        *w = (ipl_label_rule_t){.policy = s_wire(policy),
                                .label = s_wire(r->label),
                                .substring = r->substring,
                                .regex = s_wire(r->regex),
                                .icase = r->icase};
        w->keywords = s_wire_list(r->keywords, r->nkeywords, &w->keywords_len);
    }
    n = policy_labels_nclasses(l);
    p->label_classes = policy_yaml_alloc(self->yaml, (n + 1) * sizeof *p->label_classes);
    for (size_t i = 0; i < n; i++) {
        const char *policy = NULL;
        const labels_class_config_t *c = policy_labels_class(l, i, &policy);
        ipl_label_class_t *w = &p->label_classes[p->label_classes_len++];
        *w = (ipl_label_class_t){.policy = s_wire(policy), .label = s_wire(c->label)};
        w->examples = s_wire_list(c->examples, c->nexamples, &w->examples_len);
    }
}

int policy_compiler_finish(policy_compiler_t *self, const char *source)
{
    if (self->finished) // a second call reports the first call's outcome
        return (int)policy_yaml_nerrors(self->yaml);
    self->finished = true;
    if (self->nsets) qsort(self->sets, self->nsets, sizeof *self->sets, s_set_cmp);
    if (self->npools) qsort(self->pools, self->npools, sizeof *self->pools, s_pool_cmp);
    if (self->nnodes) qsort(self->nodes, self->nnodes, sizeof *self->nodes, s_node_cmp);
    s_check_names(self);
    policy_remote_finish(self->remote);
    s_check_pools(self);
    s_publish(self);
    policy_rules_finish(self->rules, self->pub_pools, self->npools, self->remote);
    if (self->npools == 0 && policy_yaml_error_count(self->yaml) == 0) {
        policy_loc_t loc = {self->nfiles ? self->files[0] : "<none>", 1, 1};
        policy_yaml_report(self->yaml, false, &loc, NULL, NULL,
                           "no InferencePool is defined; add one whose targets name your worker "
                           "sets");
    }
    policy_yaml_close(self->yaml);
    if (policy_yaml_nerrors(self->yaml)) return (int)policy_yaml_nerrors(self->yaml);

    ipl_policy_t *p = &self->policy;
    p->source = policy_yaml_strdup(self->yaml, s_or_empty(source));
    p->pools = policy_yaml_alloc(self->yaml, (self->npools + 1) * sizeof *p->pools);
    for (size_t i = 0; i < self->npools; i++)
        p->pools[p->pools_len++] = (ipl_pool_t){
            .name = (char *)self->pools[i].name,
            .model = (char *)self->pools[i].model,
            .strategy = (char *)s_or_empty(self->pools[i].strategy),
            .ttft_slo_ms = self->pools[i].slo_ttft_ms,
        };
    size_t total = 0;
    for (size_t i = 0; i < self->nsets; i++)
        total += self->sets[i].nworkers;
    p->workers = policy_yaml_alloc(self->yaml, (total + 1) * sizeof *p->workers);
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
                .messages_api = set->pub.messages_api,
                .lora_adapters = (char **)set->pub.lora_adapters,
                .lora_adapters_len = (uint32_t)set->pub.nlora_adapters,
                .node = (char *)s_node_of(self, wk->name),
            };
        }
    }
    s_wire_backends(self, p);
    s_wire_providers(self, p);
    s_wire_targets(self, p);
    s_wire_rules(self, p);
    s_wire_aliases_limits(self, p);
    s_wire_labels(self, p);
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
    return policy_yaml_nerrors(self->yaml);
}

const char *policy_compiler_error(const policy_compiler_t *self, size_t i)
{
    return policy_yaml_error(self->yaml, i);
}

size_t policy_compiler_nwarnings(const policy_compiler_t *self)
{
    return policy_yaml_nwarnings(self->yaml);
}

const char *policy_compiler_warning(const policy_compiler_t *self, size_t i)
{
    return policy_yaml_warning(self->yaml, i);
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

// ---- public: the compiled resources -----------------------------------------------------------

#define S_ACCESSORS(kind, type, count, item)                                                       \
    size_t policy_compiler_n##kind(const policy_compiler_t *self)                                  \
    {                                                                                              \
        return self->has_policy ? (count) : 0;                                                     \
    }                                                                                              \
    const type *policy_compiler_##kind##_at(const policy_compiler_t *self, size_t i)               \
    {                                                                                              \
        return i < policy_compiler_n##kind(self) ? (item) : NULL;                                  \
    }

S_ACCESSORS(backends, policy_backend_t, policy_remote_nbackends(self->remote),
            policy_remote_backend(self->remote, i))
S_ACCESSORS(providers, policy_provider_t, policy_remote_nproviders(self->remote),
            policy_remote_provider(self->remote, i))
S_ACCESSORS(pools, policy_pool_t, self->npools, &self->pub_pools[i])
S_ACCESSORS(rules, policy_rule_t, policy_rules_nrules(self->rules),
            policy_rules_rule(self->rules, i))
S_ACCESSORS(aliases, policy_alias_t, policy_rules_naliases(self->rules),
            policy_rules_alias(self->rules, i))
S_ACCESSORS(limits, policy_limit_t, policy_rules_nlimits(self->rules),
            policy_rules_limit(self->rules, i))

const policy_workerset_t *policy_compiler_worker_sets_at(const policy_compiler_t *self, size_t i)
{
    return self->has_policy && i < self->nsets ? &self->pub_sets[i] : NULL;
}
