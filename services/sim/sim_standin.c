/*
 * sim_standin — the provider stand-in's key check, latency draw and counters (see
 * sim_standin.h).
 */
#include "sim_standin.h"

#include <assert.h>
#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ipl_hash.h"
#include "ipl_sha256.h"

#define S_MAX_BUCKETS 64 /* distinct paths / models counted apart */
#define S_OTHER       "(other)"

/* Headers a test may want to see arrive or not (names only, never values). */
static const char *const s_builtin_headers[] = {
    "authorization",
    "x-api-key",
    "content-type",
    "accept",
    "user-agent",
    "openai-organization",
    "openai-project",
    "openai-beta",
    "anthropic-version",
    "x-request-id",
    "x-stainless-lang",
    "x-stainless-package-version",
    "x-stainless-retry-count",
    "traceparent",
    "cookie",
    "x-inferplane-tenant",
    "x-inferplane-pool",
    "x-inferplane-worker",
    "x-inferplane-labels",
    "x-inferplane-endpoint",
};
#define S_NBUILTIN (sizeof s_builtin_headers / sizeof s_builtin_headers[0])

typedef struct {
    char name[128];
    uint64_t received, served, rejected, prompt_tokens, completion_tokens;
} s_bucket_t;

typedef struct {
    s_bucket_t *items; /* S_MAX_BUCKETS + 1: the last one is "(other)" */
    uint32_t n;
} s_buckets_t;

typedef struct {
    uint64_t seq;
    sim_standin_note_t note;
} s_entry_t;

struct sim_standin {
    sim_standin_config_t cfg;
    uint8_t (*digests)[IPL_SHA256_LEN]; /* of the keys */
    char *names[SIM_STANDIN_MAX_HEADERS];
    int nnames;
    pthread_mutex_t lock; /* everything below */
    uint64_t jitter_state;
    s_bucket_t total; /* every request */
    uint64_t unauthorized;
    uint64_t by_status[6]; /* 1xx..5xx; [0] anything else */
    s_buckets_t paths, models;
    s_entry_t *ring; /* cfg.history entries */
    uint64_t seq;    /* requests recorded; the ring holds the last min(seq, history) */
};

const char *sim_auth_name(sim_auth_t a)
{
    switch (a) {
    case SIM_AUTH_OK:
        return "ok";
    case SIM_AUTH_MISSING:
        return "missing";
    case SIM_AUTH_WRONG:
        return "wrong";
    default:
        return "not_required";
    }
}

static int s_add_name(sim_standin_t *self, const char *name, size_t len)
{
    while (len && (*name == ' ' || *name == '\t'))
        name++, len--;
    while (len && (name[len - 1] == ' ' || name[len - 1] == '\t'))
        len--;
    if (!len) return 0;
    for (int i = 0; i < self->nnames; i++)
        if (strlen(self->names[i]) == len && strncasecmp(self->names[i], name, len) == 0) return 0;
    if (self->nnames == SIM_STANDIN_MAX_HEADERS) return 0; /* documented cap */
    char *copy = strndup(name, len);
    if (!copy) return -1;
    for (char *c = copy; *c; c++)
        if (*c >= 'A' && *c <= 'Z') *c = (char)(*c - 'A' + 'a');
    self->names[self->nnames++] = copy;
    return 0;
}

sim_standin_t *sim_standin_new(const sim_standin_config_t *cfg)
{
    assert(cfg);
    sim_standin_t *self = calloc(1, sizeof *self);
    if (!self) return NULL;
    self->cfg = *cfg;
    self->cfg.api_keys = NULL; /* never kept */
    self->cfg.extra_headers = NULL;
    if (!self->cfg.history) self->cfg.history = 100;
    self->digests = cfg->napi_keys ? calloc(cfg->napi_keys, sizeof *self->digests) : NULL;
    self->paths.items = calloc(S_MAX_BUCKETS + 1, sizeof(s_bucket_t));
    self->models.items = calloc(S_MAX_BUCKETS + 1, sizeof(s_bucket_t));
    self->ring = calloc(self->cfg.history, sizeof *self->ring);
    bool ok =
        (self->digests || !cfg->napi_keys) && self->paths.items && self->models.items && self->ring;
    for (uint32_t i = 0; ok && i < cfg->napi_keys; i++)
        ipl_sha256(cfg->api_keys[i], strlen(cfg->api_keys[i]), self->digests[i]);
    for (size_t i = 0; ok && i < S_NBUILTIN; i++)
        ok = s_add_name(self, s_builtin_headers[i], strlen(s_builtin_headers[i])) == 0;
    for (const char *p = cfg->extra_headers; ok && p && *p;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        ok = s_add_name(self, p, len) == 0;
        p = comma ? comma + 1 : NULL;
    }
    if (!ok) {
        sim_standin_destroy(&self);
        return NULL;
    }
    self->jitter_state = cfg->seed ^ 0x6e6574776f726bULL; /* "network" */
    pthread_mutex_init(&self->lock, NULL);
    return self;
}

void sim_standin_destroy(sim_standin_t **self_p)
{
    assert(self_p);
    sim_standin_t *self = *self_p;
    if (!self) return;
    if (self->digests) memset(self->digests, 0, self->cfg.napi_keys * sizeof *self->digests);
    free(self->digests);
    for (int i = 0; i < self->nnames; i++)
        free(self->names[i]);
    free(self->paths.items);
    free(self->models.items);
    free(self->ring);
    pthread_mutex_destroy(&self->lock);
    free(self);
    *self_p = NULL;
}

bool sim_standin_requires_key(const sim_standin_t *self)
{
    return self->cfg.napi_keys > 0;
}

/* Whether `token` is one of the keys: every digest is compared, in constant time. */
static bool s_key_matches(const sim_standin_t *self, const char *token)
{
    uint8_t d[IPL_SHA256_LEN];
    ipl_sha256(token, strlen(token), d);
    bool match = false;
    for (uint32_t k = 0; k < self->cfg.napi_keys; k++) {
        uint8_t diff = 0;
        for (int i = 0; i < IPL_SHA256_LEN; i++)
            diff |= (uint8_t)(d[i] ^ self->digests[k][i]);
        match |= diff == 0;
    }
    return match;
}

sim_auth_t sim_standin_check(const sim_standin_t *self, const char *authorization,
                             const char *x_api_key)
{
    if (!self->cfg.napi_keys) return SIM_AUTH_NOT_REQUIRED;
    bool presented = false;
    if (authorization && *authorization) {
        /* vLLM: scheme, _, param = value.partition(" "); scheme.lower() == "bearer" */
        const char *sp = strchr(authorization, ' ');
        size_t slen = sp ? (size_t)(sp - authorization) : strlen(authorization);
        if (slen == 6 && strncasecmp(authorization, "bearer", 6) == 0) {
            presented = true;
            if (s_key_matches(self, sp ? sp + 1 : "")) return SIM_AUTH_OK;
        }
    }
    if (self->cfg.accept_x_api_key && x_api_key && *x_api_key) {
        presented = true;
        if (s_key_matches(self, x_api_key)) return SIM_AUTH_OK;
    }
    return presented ? SIM_AUTH_WRONG : SIM_AUTH_MISSING;
}

uint32_t sim_standin_draw_latency_ms(sim_standin_t *self)
{
    if (!self->cfg.jitter_ms) return self->cfg.latency_ms;
    pthread_mutex_lock(&self->lock);
    uint64_t z = self->jitter_state; /* splitmix64, as sim_api's --fail-rate draws */
    self->jitter_state += 0x9e3779b97f4a7c15ULL;
    pthread_mutex_unlock(&self->lock);
    z = ipl_mix64(z);
    return self->cfg.latency_ms + (uint32_t)(z % ((uint64_t)self->cfg.jitter_ms + 1));
}

const char *sim_standin_header_name(const sim_standin_t *self, int i)
{
    return i >= 0 && i < self->nnames ? self->names[i] : NULL;
}

void sim_standin_note_init(sim_standin_note_t *note, const char *method, const char *path)
{
    memset(note, 0, sizeof *note);
    snprintf(note->method, sizeof note->method, "%s", method ? method : "");
    snprintf(note->path, sizeof note->path, "%s", path ? path : "");
}

/* The bucket named `name`, created while there is room, else "(other)". Under the lock. */
static s_bucket_t *s_bucket(s_buckets_t *b, const char *name)
{
    for (uint32_t i = 0; i < b->n; i++)
        if (strcmp(b->items[i].name, name) == 0) return &b->items[i];
    bool room = b->n < S_MAX_BUCKETS;
    s_bucket_t *it = room ? &b->items[b->n++] : &b->items[S_MAX_BUCKETS];
    snprintf(it->name, sizeof it->name, "%s", room ? name : S_OTHER);
    return it;
}

static void s_count(s_bucket_t *b, const sim_standin_note_t *n, bool served)
{
    b->received++;
    if (served) {
        b->served++;
        b->prompt_tokens += n->prompt_tokens;
        b->completion_tokens += n->completion_tokens;
    } else {
        b->rejected++;
    }
}

void sim_standin_record(sim_standin_t *self, const sim_standin_note_t *note)
{
    bool served = note->status >= 200 && note->status < 300;
    pthread_mutex_lock(&self->lock);
    s_count(&self->total, note, served);
    if (note->status == 401) self->unauthorized++;
    self->by_status[note->status >= 100 && note->status < 600 ? note->status / 100 : 0]++;
    s_count(s_bucket(&self->paths, note->path), note, served);
    s_count(s_bucket(&self->models, note->model), note, served);
    s_entry_t *e = &self->ring[self->seq % self->cfg.history];
    e->seq = ++self->seq;
    e->note = *note;
    pthread_mutex_unlock(&self->lock);
}

static void s_add_u64(cJSON *obj, const char *key, uint64_t v)
{
    cJSON_AddNumberToObject(obj, key, (double)v);
}

static cJSON *s_buckets_json(const s_buckets_t *b, bool tokens)
{
    cJSON *obj = cJSON_CreateObject();
    for (uint32_t i = 0; obj && i <= S_MAX_BUCKETS; i++) {
        const s_bucket_t *it = &b->items[i];
        if (!it->received) continue;
        cJSON *o = cJSON_AddObjectToObject(obj, it->name);
        if (!o) continue; /* the same name twice cannot happen; out of memory can */
        s_add_u64(o, "received", it->received);
        s_add_u64(o, "served", it->served);
        s_add_u64(o, "rejected", it->rejected);
        if (tokens) {
            s_add_u64(o, "prompt_tokens", it->prompt_tokens);
            s_add_u64(o, "completion_tokens", it->completion_tokens);
        }
    }
    return obj;
}

static cJSON *s_entry_json(const sim_standin_t *self, const s_entry_t *e)
{
    const sim_standin_note_t *n = &e->note;
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    bool served = n->status >= 200 && n->status < 300;
    s_add_u64(o, "seq", e->seq);
    cJSON_AddStringToObject(o, "method", n->method);
    cJSON_AddStringToObject(o, "path", n->path);
    cJSON_AddNumberToObject(o, "status", n->status);
    cJSON_AddStringToObject(o, "outcome",
                            served             ? "served"
                            : n->status == 401 ? "unauthorized"
                                               : "rejected");
    if (n->model[0])
        cJSON_AddStringToObject(o, "model", n->model);
    else
        cJSON_AddNullToObject(o, "model");
    cJSON_AddBoolToObject(o, "stream", n->stream);
    cJSON_AddStringToObject(o, "auth", sim_auth_name(n->auth));
    cJSON *h = cJSON_AddArrayToObject(o, "headers");
    for (int i = 0; h && i < self->nnames; i++)
        if (n->headers & (1ULL << i)) cJSON_AddItemToArray(h, cJSON_CreateString(self->names[i]));
    cJSON_AddNumberToObject(o, "prompt_tokens", n->prompt_tokens);
    cJSON_AddNumberToObject(o, "completion_tokens", n->completion_tokens);
    return o;
}

cJSON *sim_standin_report(sim_standin_t *self)
{
    cJSON *root = cJSON_CreateObject();
    if (!root) return NULL;
    cJSON_AddBoolToObject(root, "api_key_required", self->cfg.napi_keys > 0);
    cJSON_AddBoolToObject(root, "accept_x_api_key", self->cfg.accept_x_api_key);
    cJSON_AddNumberToObject(root, "network_latency_ms", self->cfg.latency_ms);
    cJSON_AddNumberToObject(root, "network_jitter_ms", self->cfg.jitter_ms);
    pthread_mutex_lock(&self->lock);
    s_add_u64(root, "received", self->total.received);
    s_add_u64(root, "served", self->total.served);
    s_add_u64(root, "rejected", self->total.rejected);
    s_add_u64(root, "unauthorized", self->unauthorized);
    cJSON *st = cJSON_AddObjectToObject(root, "by_status");
    for (int i = 1; st && i < 6; i++)
        if (self->by_status[i]) {
            char key[8];
            snprintf(key, sizeof key, "%dxx", i);
            s_add_u64(st, key, self->by_status[i]);
        }
    if (st && self->by_status[0]) s_add_u64(st, "other", self->by_status[0]);
    cJSON_AddItemToObject(root, "by_path", s_buckets_json(&self->paths, false));
    cJSON_AddItemToObject(root, "by_model", s_buckets_json(&self->models, true));
    cJSON *t = cJSON_AddObjectToObject(root, "tokens");
    if (t) {
        s_add_u64(t, "prompt", self->total.prompt_tokens);
        s_add_u64(t, "completion", self->total.completion_tokens);
    }
    cJSON_AddNumberToObject(root, "history", self->cfg.history);
    cJSON *last = cJSON_AddArrayToObject(root, "last");
    uint64_t first = self->seq > self->cfg.history ? self->seq - self->cfg.history : 0;
    for (uint64_t s = first; last && s < self->seq; s++)
        cJSON_AddItemToArray(last, s_entry_json(self, &self->ring[s % self->cfg.history]));
    pthread_mutex_unlock(&self->lock);
    return root;
}

void sim_standin_reset(sim_standin_t *self)
{
    pthread_mutex_lock(&self->lock);
    memset(&self->total, 0, sizeof self->total);
    self->unauthorized = 0;
    memset(self->by_status, 0, sizeof self->by_status);
    memset(self->paths.items, 0, (S_MAX_BUCKETS + 1) * sizeof(s_bucket_t));
    memset(self->models.items, 0, (S_MAX_BUCKETS + 1) * sizeof(s_bucket_t));
    self->paths.n = self->models.n = 0;
    memset(self->ring, 0, self->cfg.history * sizeof *self->ring);
    self->seq = 0;
    pthread_mutex_unlock(&self->lock);
}
