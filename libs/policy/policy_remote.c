/*
 * policy_remote — GatewayBackend and InferenceProvider: schema checks and references.
 */
#include "policy_remote.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_MAX_PATH   1024 // file paths of secrets and CA bundles
#define S_MAX_HEADER 128

struct policy_remote {
    policy_yaml_t *yaml;
    policy_backend_t *backends;
    size_t nbackends, cap_backends;
    policy_provider_t *providers;
    size_t nproviders, cap_providers;
    policy_loc_t *backend_locs; // of each provider's spec.backend, parallel to providers
    size_t cap_backend_locs;
};

policy_remote_t *policy_remote_new(policy_yaml_t *yaml)
{
    policy_remote_t *self = calloc(1, sizeof *self);
    if (!self) abort();
    self->yaml = yaml;
    return self;
}

void policy_remote_destroy(policy_remote_t **self_p)
{
    if (!self_p || !*self_p) return;
    policy_remote_t *self = *self_p;
    free(self->backends);
    free(self->providers);
    free(self->backend_locs);
    free(self);
    *self_p = NULL;
}

// An HTTP header name (RFC 9110 token).
static bool s_token(const char *s)
{
    if (!*s || strlen(s) > S_MAX_HEADER) return false;
    return strspn(
               s,
               "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$%&'*+-.^_`|~") ==
           strlen(s);
}

// An environment variable's name.
static bool s_env_name(const char *s)
{
    if (!*s || (*s >= '0' && *s <= '9') || strlen(s) > 256) return false;
    return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") ==
           strlen(s);
}

// {name, key}: a key of a Kubernetes Secret.
static bool s_secret_ref(policy_doc_t *d, yaml_node_t *node, const char *path, policy_secret_t *out)
{
    static const char *const fields[] = {"name", "key", NULL};
    yaml_node_t *f[2];
    if (!policy_yaml_fields(d, node, path, fields, f)) return false;
    char at[128];
    snprintf(at, sizeof at, "%s.name", path);
    const char *name = policy_yaml_name(d, f[0], node, at);
    snprintf(at, sizeof at, "%s.key", path);
    const char *key = policy_yaml_str(d, f[1], node, at, true);
    if (key && (strlen(key) > 253 || strspn(key, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRST"
                                                 "UVWXYZ0123456789-._") != strlen(key))) {
        // Not echoed: a secret pasted here by mistake must not reach a log.
        policy_yaml_err(d, f[1],
                        "%s is not a Secret key: use letters, digits, '-', '_' and '.' (it names "
                        "the key, it does not hold the secret)",
                        at);
        key = NULL;
    }
    if (!name || !key) return false;
    *out = (policy_secret_t){POLICY_SECRET_KUBERNETES, name, key};
    return true;
}

static const char *s_path(policy_doc_t *d, yaml_node_t *node, yaml_node_t *parent, const char *path)
{
    const char *p = policy_yaml_str(d, node, parent, path, false);
    if (p && strlen(p) > S_MAX_PATH) {
        policy_yaml_err(d, node, "%s is longer than %d characters", path, S_MAX_PATH);
        return NULL;
    }
    return p;
}

static void s_auth(policy_doc_t *d, yaml_node_t *auth, policy_backend_t *b)
{
    static const char *const fields[] = {"type", "header", "secretRef", "file", "env", NULL};
    static const char *const types[] = {"bearer", "header", NULL};
    yaml_node_t *f[5];
    if (!policy_yaml_fields(d, auth, "spec.auth", fields, f)) return;
    int type = policy_yaml_enum(d, f[0], auth, "spec.auth.type", types, true);
    if (type >= 0) b->auth = type == 0 ? POLICY_AUTH_BEARER : POLICY_AUTH_HEADER;
    const char *header = policy_yaml_str(d, f[1], auth, "spec.auth.header", false);
    if (header && !s_token(header)) {
        policy_yaml_err(d, f[1],
                        "spec.auth.header \"%s\" is not an HTTP header name (letters, digits and "
                        "-, at most %d characters)",
                        header, S_MAX_HEADER);
        header = NULL;
    }
    if (b->auth == POLICY_AUTH_HEADER && !f[1])
        policy_yaml_err(d, f[0],
                        "spec.auth.header is required with type header: name the header "
                        "that carries the secret (e.g. x-api-key)");
    if (b->auth == POLICY_AUTH_BEARER && f[1])
        policy_yaml_err(d, f[1],
                        "spec.auth.header is only for type header; bearer uses "
                        "Authorization: remove it or set type: header");
    b->auth_header = header;
    // The secret's source: exactly one of secretRef, file, env. Values never appear here.
    size_t given = !!f[2] + !!f[3] + !!f[4];
    if (given != 1) {
        policy_yaml_err(d, given ? (f[3] ? f[3] : f[4]) : auth,
                        "spec.auth needs exactly one of secretRef, file, env (where the secret "
                        "comes from); %zu given",
                        given);
        return;
    }
    if (f[2]) {
        s_secret_ref(d, f[2], "spec.auth.secretRef", &b->secret);
    } else if (f[3]) {
        const char *path = s_path(d, f[3], auth, "spec.auth.file");
        if (path) b->secret = (policy_secret_t){POLICY_SECRET_FILE, path, NULL};
    } else {
        const char *env = policy_yaml_str(d, f[4], auth, "spec.auth.env", true);
        if (env && !s_env_name(env))
            policy_yaml_err(d, f[4], // not echoed, as above
                            "spec.auth.env is not an environment variable name (letters, digits "
                            "and _, not starting with a digit); it names the variable that holds "
                            "the secret, not the secret");
        else if (env)
            b->secret = (policy_secret_t){POLICY_SECRET_ENV, env, NULL};
    }
}

static void s_tls(policy_doc_t *d, yaml_node_t *tls, policy_backend_t *b)
{
    static const char *const fields[] = {"caBundle", "caSecretRef", "insecureSkipVerify", NULL};
    yaml_node_t *f[3];
    if (!policy_yaml_fields(d, tls, "spec.tls", fields, f)) return;
    if (f[0] && f[1])
        policy_yaml_err(d, f[1], "spec.tls: give at most one of caBundle and caSecretRef");
    b->ca_bundle = s_path(d, f[0], tls, "spec.tls.caBundle");
    if (f[1]) s_secret_ref(d, f[1], "spec.tls.caSecretRef", &b->ca_secret);
    policy_yaml_bool(d, f[2], "spec.tls.insecureSkipVerify", &b->insecure_skip_verify);
    if (b->insecure_skip_verify)
        policy_yaml_warn(d, f[2],
                         "spec.tls.insecureSkipVerify is true: the backend's certificate "
                         "is not verified (for tests only)");
}

void policy_remote_add_backend(policy_remote_t *self, policy_doc_t *d, yaml_node_t *spec,
                               yaml_node_t *name_node)
{
    static const char *const fields[] = {"url",      "protocol",       "auth", "tls",
                                         "timeouts", "maxConnections", NULL};
    static const char *const protocols[] = {"openai", "anthropic", NULL};
    static const char *const tfields[] = {"connectMs", "responseMs", NULL};
    yaml_node_t *f[6];
    if (!policy_yaml_fields(d, spec, "spec", fields, f)) return;
    policy_backend_t b = {.name = d->name,
                          .loc = policy_yaml_loc(d, name_node),
                          .connect_ms = POLICY_DEFAULT_CONNECT_MS,
                          .response_ms = POLICY_DEFAULT_RESPONSE_MS,
                          .max_connections = POLICY_DEFAULT_MAX_CONNECTIONS};
    b.url = policy_yaml_url(d, f[0], spec, "spec.url", true);
    int protocol = policy_yaml_enum(d, f[1], spec, "spec.protocol", protocols, false);
    b.protocol = protocol == 1 ? POLICY_PROTOCOL_ANTHROPIC : POLICY_PROTOCOL_OPENAI;
    if (f[2]) s_auth(d, f[2], &b);
    if (f[3]) s_tls(d, f[3], &b);
    yaml_node_t *t[2];
    if (f[4] && policy_yaml_fields(d, f[4], "spec.timeouts", tfields, t)) {
        policy_yaml_uint(d, t[0], "spec.timeouts.connectMs", 1, 600000, &b.connect_ms);
        policy_yaml_uint(d, t[1], "spec.timeouts.responseMs", 1, 3600000, &b.response_ms);
    }
    policy_yaml_uint(d, f[5], "spec.maxConnections", 1, 65535, &b.max_connections);
    if (!b.url) return;
    policy_yaml_reserve((void **)&self->backends, &self->cap_backends, self->nbackends,
                        sizeof *self->backends);
    self->backends[self->nbackends++] = b;
}

static void s_models(policy_doc_t *d, yaml_node_t *spec, yaml_node_t *node, policy_provider_t *p)
{
    static const char *const mfields[] = {"name", "remoteName", NULL};
    yaml_node_t *list =
        policy_yaml_list(d, node, spec, "spec.models", "models ({name, remoteName})", true,
                         POLICY_MAX_PROVIDER_MODELS);
    policy_provider_model_t *models =
        list ? policy_yaml_alloc(d->yaml, policy_yaml_len(list) * sizeof *models) : NULL;
    for (size_t i = 0; list && i < policy_yaml_len(list); i++) {
        yaml_node_t *m[2];
        char base[64], at[96];
        yaml_node_t *item =
            policy_yaml_entry(d, list, i, "spec.models", mfields, m, base, sizeof base);
        if (!item) continue;
        snprintf(at, sizeof at, "%s.name", base);
        const char *name = policy_yaml_model(d, m[0], item, at);
        snprintf(at, sizeof at, "%s.remoteName", base);
        const char *remote =
            policy_yaml_word(d, m[1], item, at, false, POLICY_YAML_MAX_MODEL, "a model name");
        if (!name) continue;
        const policy_provider_model_t *dup =
            policy_yaml_find(models, p->nmodels, sizeof *models, 0, name);
        if (dup) {
            policy_yaml_err(d, m[0], "%s.name \"%s\" is listed twice; remove one", base, name);
            continue;
        }
        models[p->nmodels++] = (policy_provider_model_t){name, remote ? remote : name};
    }
    p->models = models;
}

void policy_remote_add_provider(policy_remote_t *self, policy_doc_t *d, yaml_node_t *spec,
                                yaml_node_t *name_node)
{
    static const char *const fields[] = {"backend", "models",   "latencyHintMs",
                                         "cost",    "capacity", NULL};
    static const char *const cfields[] = {"inputMicrosPerMillionTokens",
                                          "outputMicrosPerMillionTokens", NULL};
    static const char *const kfields[] = {"concurrentRequests", "tokensPerMinute", NULL};
    yaml_node_t *f[5], *c[2];
    if (!policy_yaml_fields(d, spec, "spec", fields, f)) return;
    policy_provider_t p = {.name = d->name, .loc = policy_yaml_loc(d, name_node)};
    if (!f[0])
        policy_yaml_err(d, spec,
                        "spec.backend is required: name the GatewayBackend that "
                        "reaches this provider");
    else
        p.backend_name = policy_yaml_name(d, f[0], spec, "spec.backend");
    s_models(d, spec, f[1], &p);
    policy_yaml_uint(d, f[2], "spec.latencyHintMs", 0, 600000, &p.latency_hint_ms);
    if (f[3] && policy_yaml_fields(d, f[3], "spec.cost", cfields, c)) {
        policy_yaml_uint(d, c[0], "spec.cost.inputMicrosPerMillionTokens", 0, 1000000000000ull,
                         &p.input_micros_per_mtok);
        policy_yaml_uint(d, c[1], "spec.cost.outputMicrosPerMillionTokens", 0, 1000000000000ull,
                         &p.output_micros_per_mtok);
    }
    if (f[4] && policy_yaml_fields(d, f[4], "spec.capacity", kfields, c)) {
        policy_yaml_uint(d, c[0], "spec.capacity.concurrentRequests", 0, 1000000,
                         &p.concurrent_requests);
        policy_yaml_uint(d, c[1], "spec.capacity.tokensPerMinute", 0, 1000000000000ull,
                         &p.tokens_per_minute);
    }
    policy_yaml_reserve((void **)&self->providers, &self->cap_providers, self->nproviders,
                        sizeof *self->providers);
    policy_yaml_reserve((void **)&self->backend_locs, &self->cap_backend_locs, self->nproviders,
                        sizeof *self->backend_locs);
    self->backend_locs[self->nproviders] = policy_yaml_loc(d, f[0] ? f[0] : spec);
    self->providers[self->nproviders++] = p;
}

static int s_backend_cmp(const void *a, const void *b)
{
    return strcmp(((const policy_backend_t *)a)->name, ((const policy_backend_t *)b)->name);
}

void policy_remote_finish(policy_remote_t *self)
{
    if (self->nbackends)
        qsort(self->backends, self->nbackends, sizeof *self->backends, s_backend_cmp);
    policy_yaml_unique(self->yaml, "GatewayBackend", self->backends, self->nbackends,
                       sizeof *self->backends, offsetof(policy_backend_t, name),
                       offsetof(policy_backend_t, loc));
    policy_yaml_unique(self->yaml, "InferenceProvider", self->providers, self->nproviders,
                       sizeof *self->providers, offsetof(policy_provider_t, name),
                       offsetof(policy_provider_t, loc));
    const char **known =
        policy_yaml_names(self->yaml, self->backends, self->nbackends, sizeof *self->backends,
                          offsetof(policy_backend_t, name));
    for (size_t i = 0; i < self->nproviders; i++) {
        policy_provider_t *p = &self->providers[i];
        if (!p->backend_name) continue;
        p->backend = policy_yaml_find(self->backends, self->nbackends, sizeof *self->backends,
                                      offsetof(policy_backend_t, name), p->backend_name);
        if (!p->backend) {
            char hint[768];
            policy_yaml_report(
                self->yaml, false, &self->backend_locs[i], "InferenceProvider", p->name,
                "spec.backend \"%s\" does not exist%s; add a GatewayBackend of "
                "that name or fix the reference",
                p->backend_name,
                policy_yaml_hint(hint, sizeof hint, p->backend_name, known, self->nbackends));
        }
    }
    // Sorted only now: backend_locs is parallel to the providers in file order.
    for (size_t i = 1; i < self->nproviders; i++)
        for (size_t j = i;
             j > 0 && strcmp(self->providers[j - 1].name, self->providers[j].name) > 0; j--) {
            policy_provider_t t = self->providers[j];
            self->providers[j] = self->providers[j - 1];
            self->providers[j - 1] = t;
        }
}

size_t policy_remote_nbackends(const policy_remote_t *self)
{
    return self->nbackends;
}

const policy_backend_t *policy_remote_backend(const policy_remote_t *self, size_t i)
{
    return i < self->nbackends ? &self->backends[i] : NULL;
}

size_t policy_remote_nproviders(const policy_remote_t *self)
{
    return self->nproviders;
}

const policy_provider_t *policy_remote_provider(const policy_remote_t *self, size_t i)
{
    return i < self->nproviders ? &self->providers[i] : NULL;
}

const policy_provider_t *policy_remote_find_provider(const policy_remote_t *self, const char *name)
{
    return policy_yaml_find(self->providers, self->nproviders, sizeof *self->providers,
                            offsetof(policy_provider_t, name), name);
}

const policy_provider_model_t *policy_remote_provider_model(const policy_provider_t *provider,
                                                            const char *model)
{
    return policy_yaml_find(provider->models, provider->nmodels, sizeof *provider->models,
                            offsetof(policy_provider_model_t, name), model);
}
