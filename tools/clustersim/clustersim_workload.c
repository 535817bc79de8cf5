/*
 * clustersim_workload — generators, trace readers and token synthesis (see the header).
 *
 * Token ids come from counter-based streams: token(stream, pos) = a hash of (stream, pos)
 * mapped into [S_VOCAB_BASE, S_VOCAB_BASE + S_VOCAB), so any token of any request is computed
 * directly, in any order, with no state. Streams are keyed by what the tokens belong to:
 *
 *     S_KIND_GROUP   prefix group g (shared prefix, system prompt)
 *     S_KIND_OWN     request i's own tokens (suffix, user message)
 *     S_KIND_OUTPUT  request i's output
 *     S_KIND_BLOCK   Mooncake hash id h
 *     S_KIND_SUB     many-models document d (after the model's system prompt)
 */
#include "clustersim_workload.h"

#include <cJSON.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipl_error.h"

#define S_VOCAB_BASE 1000u
#define S_VOCAB      100000u

enum { S_KIND_GROUP = 1, S_KIND_OWN, S_KIND_OUTPUT, S_KIND_BLOCK, S_KIND_SUB };

typedef struct {
    char **v;
    uint32_t n, cap;
} s_names_t;

struct clustersim_workload {
    char *name;
    uint64_t seed;
    uint32_t mooncake_block;
    clustersim_req_t *reqs;
    uint32_t n, cap;
    uint32_t *roots;
    uint32_t nroots;
    uint32_t *hash_ids; // Mooncake hash ids of every request, concatenated
    uint32_t nhash, hash_cap;
    s_names_t models, tenants, groups; // groups: names of string prefix groups (traces)
    uint32_t max_tokens;
    // Generated workloads: every group's prefix, synthesised once (groups × group_len).
    uint32_t *group_tokens;
    uint32_t ngroups, group_len;
};

/* --- random numbers and token streams ------------------------------------------------------- */

static inline uint64_t s_mix(uint64_t x)
{
    // splitmix64's finaliser
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

static uint64_t s_stream(uint64_t seed, uint32_t kind, uint64_t id)
{
    return s_mix(s_mix(seed ^ ((uint64_t)kind << 56)) + id * 0x9e3779b97f4a7c15ULL);
}

// Tokens [from, from + n) of a stream: one multiply and two shifts per token (this runs for
// every prompt token of every request, twice), mapped into the vocabulary without a division.
static void s_fill(uint64_t stream, uint32_t from, uint32_t n, uint32_t *out)
{
    uint64_t x = stream + (uint64_t)from * 0x9e3779b97f4a7c15ULL;
    for (uint32_t i = 0; i < n; i++, x += 0x9e3779b97f4a7c15ULL) {
        uint64_t h = x ^ (x >> 29);
        h *= 0xbf58476d1ce4e5b9ULL;
        h ^= h >> 32;
        out[i] = S_VOCAB_BASE + (uint32_t)(((h & 0xffffffffULL) * S_VOCAB) >> 32);
    }
}

typedef struct {
    uint64_t s;
} s_rng_t;

static uint64_t s_next(s_rng_t *r)
{
    r->s += 0x9e3779b97f4a7c15ULL;
    return s_mix(r->s);
}

// Uniform in (0, 1].
static double s_unit(s_rng_t *r)
{
    return ((double)(s_next(r) >> 11) + 1.0) / 9007199254740992.0;
}

static double s_exp(s_rng_t *r, double mean)
{
    return -log(s_unit(r)) * mean;
}

/* --- building ------------------------------------------------------------------------------- */

static int s_name(s_names_t *t, const char *name, uint32_t *out)
{
    for (uint32_t i = 0; i < t->n; i++)
        if (!strcmp(t->v[i], name)) {
            *out = i;
            return 0;
        }
    if (t->n == t->cap) {
        uint32_t cap = t->cap ? t->cap * 2 : 8;
        char **v = realloc(t->v, cap * sizeof *v);
        if (!v) return IPL_E_NOMEM;
        t->v = v;
        t->cap = cap;
    }
    if (!(t->v[t->n] = strdup(name))) return IPL_E_NOMEM;
    *out = t->n++;
    return 0;
}

static void s_names_free(s_names_t *t)
{
    for (uint32_t i = 0; i < t->n; i++)
        free(t->v[i]);
    free(t->v);
}

static clustersim_workload_t *s_new(const char *name, uint64_t seed)
{
    clustersim_workload_t *self = calloc(1, sizeof *self);
    if (!self) return NULL;
    self->seed = seed;
    self->mooncake_block = 512;
    if (!(self->name = strdup(name))) {
        free(self);
        return NULL;
    }
    // Reports print the name unquoted (JSON, table): keep it to [A-Za-z0-9._-].
    for (char *p = self->name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '.' || *p == '_' || *p == '-'))
            *p = '_';
    return self;
}

static clustersim_req_t *s_add(clustersim_workload_t *self)
{
    if (self->n == self->cap) {
        uint32_t cap = self->cap ? self->cap * 2 : 1024;
        clustersim_req_t *r = realloc(self->reqs, cap * sizeof *r);
        if (!r) return NULL;
        self->reqs = r;
        self->cap = cap;
    }
    clustersim_req_t *r = &self->reqs[self->n++];
    *r = (clustersim_req_t){.group = -1, .sub = -1, .prev = -1, .next = -1};
    return r;
}

static const clustersim_workload_t *s_sort_ctx;

static int s_cmp_roots(const void *a, const void *b)
{
    uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
    double ti = s_sort_ctx->reqs[i].arrival_s, tj = s_sort_ctx->reqs[j].arrival_s;
    if (ti != tj) return ti < tj ? -1 : 1;
    return (i > j) - (i < j);
}

// Lists the open-loop requests by arrival; records the longest request.
static int s_finish(clustersim_workload_t *self)
{
    self->roots = malloc((self->n ? self->n : 1) * sizeof *self->roots);
    if (!self->roots) return IPL_E_NOMEM;
    self->nroots = 0;
    for (uint32_t i = 0; i < self->n; i++) {
        const clustersim_req_t *r = &self->reqs[i];
        if (r->prev < 0) self->roots[self->nroots++] = i;
        uint32_t total = r->prompt_tokens + r->output_tokens;
        if (total > self->max_tokens) self->max_tokens = total;
    }
    s_sort_ctx = self; // qsort has no context argument; building is single-threaded
    qsort(self->roots, self->nroots, sizeof *self->roots, s_cmp_roots);
    s_sort_ctx = NULL;
    return 0;
}

static int s_default_names(clustersim_workload_t *self, uint32_t models, uint32_t tenants)
{
    char buf[32];
    uint32_t id;
    for (uint32_t m = 0; m < models; m++) {
        if (models == 1)
            snprintf(buf, sizeof buf, "sim-model");
        else
            snprintf(buf, sizeof buf, "model-%u", m);
        if (s_name(&self->models, buf, &id) != 0) return IPL_E_NOMEM;
    }
    for (uint32_t t = 0; t < tenants; t++) {
        if (tenants == 1)
            snprintf(buf, sizeof buf, "default");
        else
            snprintf(buf, sizeof buf, "tenant-%u", t);
        if (s_name(&self->tenants, buf, &id) != 0) return IPL_E_NOMEM;
    }
    return 0;
}

/* --- generators ----------------------------------------------------------------------------- */

// Group popularity: P(g) ∝ 1 / (g + 1)^skew (Zipf; skew 0 is uniform), as a cumulative table.
static double *s_zipf_cdf(uint32_t n, double skew)
{
    double *cdf = malloc(n * sizeof *cdf), sum = 0;
    if (!cdf) return NULL;
    for (uint32_t g = 0; g < n; g++)
        cdf[g] = (sum += pow((double)g + 1.0, -skew));
    for (uint32_t g = 0; g < n; g++)
        cdf[g] /= sum;
    return cdf;
}

static int32_t s_draw_group(const double *cdf, uint32_t n, double u)
{
    uint32_t lo = 0, hi = n - 1; // the first g with cdf[g] >= u
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (cdf[mid] >= u)
            hi = mid;
        else
            lo = mid + 1;
    }
    return (int32_t)lo;
}

static const char *const s_kind_names[CLUSTERSIM_GEN_NKINDS] = {
    "shared-prefix", "multi-turn", "no-prefix",   "production",
    "zipf-prefix",   "bursty",     "kv-pressure", "many-models"};

int clustersim_gen_kind_parse(const char *name, clustersim_gen_kind_t *out)
{
    for (int k = 0; k < CLUSTERSIM_GEN_NKINDS; k++)
        if (name && !strcmp(name, s_kind_names[k])) {
            *out = (clustersim_gen_kind_t)k;
            return 0;
        }
    return IPL_E_INVAL;
}

const char *clustersim_gen_kind_name(clustersim_gen_kind_t kind)
{
    return (unsigned)kind < CLUSTERSIM_GEN_NKINDS ? s_kind_names[kind] : "unknown";
}

void clustersim_gen_config_defaults(clustersim_gen_kind_t kind, clustersim_gen_config_t *cfg)
{
    // Shaped like the published benchmark (Buoyant's Kinference, docs/architecture.md): long
    // prompts whose prefix is shared by a few groups, short answers, Poisson arrivals near the
    // random-routing capacity of six L40S workers. docs/clustersim.md explains each figure.
    *cfg = (clustersim_gen_config_t){
        .seed = 1,
        .requests = 600,
        .rate = 2.0,
        .prefix_groups = 20,
        .prefix_tokens = 8192,
        .suffix_tokens = 512,
        .output_tokens = 128,
        .turns = 1,
        .think_s = 0,
        .models = 1,
        .tenants = 1,
        .tenant_skew = 1.0,
    };
    switch (kind) {
    case CLUSTERSIM_GEN_MULTI_TURN:
        cfg->prefix_tokens = 2000; // system prompts
        cfg->suffix_tokens = 400;  // per user message
        cfg->output_tokens = 200;
        cfg->turns = 5;
        cfg->think_s = 5.0;
        break;
    case CLUSTERSIM_GEN_NO_PREFIX:
        // The shared-prefix prompts' length, all unique, at a rate six workers can sustain.
        cfg->prefix_groups = 0;
        cfg->prefix_tokens = 0;
        cfg->suffix_tokens = 8704;
        cfg->rate = 1.5;
        break;
    case CLUSTERSIM_GEN_PRODUCTION:
        // A production trace's shape (issue 16; Mooncake's FAST'25 traces are alike): prompt
        // lengths log-normal, median 7,000, p90 27,000 (so p99 ~ 80,000), cut at 100,000;
        // 45% of each prompt from one of 200 Zipf-popular documents / system prompts, so that
        // about a third of all prompt blocks repeat an earlier one (ideal reuse ~0.33).
        cfg->requests = 2000;
        cfg->rate = 8.0;
        cfg->prefix_groups = 200;
        cfg->group_skew = 1.0;
        cfg->prefix_tokens = 0;
        cfg->suffix_tokens = 0;
        cfg->output_tokens = 256;
        cfg->prompt_median = 7000;
        cfg->prompt_p90 = 27000;
        cfg->prompt_max = 100000;
        cfg->shared_fraction = 0.45;
        break;
    case CLUSTERSIM_GEN_ZIPF_PREFIX:
        // 60 prefixes of 4,096 tokens, popularity ∝ 1/(g+1)^1.2: the top one draws a quarter
        // of the traffic, more than its holder alone can prefill behind.
        cfg->requests = 1200;
        cfg->rate = 4.0;
        cfg->prefix_groups = 60;
        cfg->group_skew = 1.2;
        cfg->prefix_tokens = 4096;
        break;
    case CLUSTERSIM_GEN_BURSTY:
        // The shared-prefix prompts, arriving in bursts: on 15 s, off 30 s (means, exponential),
        // three times the mean rate while on.
        cfg->requests = 900;
        cfg->burst_on_s = 15.0;
        cfg->burst_off_s = 30.0;
        break;
    case CLUSTERSIM_GEN_KV_PRESSURE:
        // 240 prefixes of 8,192 tokens, uniform: 2M tokens of prefixes, ~4x what eight L40S
        // workers hold (64k tokens each): most prefixes are evicted before they are reused.
        cfg->requests = 1200;
        cfg->prefix_groups = 240;
        break;
    case CLUSTERSIM_GEN_MANY_MODELS:
        // 8 models x 16 tenants, both Zipf-popular (skew 1): a 2,048-token system prompt per
        // model, then a 4,096-token document per (model, tenant), then 256 tokens of its own.
        cfg->requests = 1200;
        cfg->rate = 3.0;
        cfg->models = 8;
        cfg->tenants = 16;
        cfg->group_skew = 1.0;
        cfg->prefix_groups = 8;
        cfg->prefix_tokens = 2048;
        cfg->sub_tokens = 4096;
        cfg->suffix_tokens = 256;
        break;
    default:
        break;
    }
}

// A standard normal deviate (Box-Muller; two draws).
static double s_normal(s_rng_t *r)
{
    double u = s_unit(r), v = s_unit(r);
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

// On/off arrivals (bursty): the state of the current "on" period.
typedef struct {
    double end; // the current on period ends here
    bool started;
} s_burst_t;

// The next open-loop arrival after t at `rate` per second: Poisson, or Poisson at
// rate × (on + off) / on inside exponential on periods separated by exponential off periods.
static double s_next_arrival(s_rng_t *rng, const clustersim_gen_config_t *cfg, double rate,
                             s_burst_t *b, double t)
{
    if (!(cfg->burst_on_s > 0) || !(cfg->burst_off_s > 0)) return t + s_exp(rng, 1.0 / rate);
    double on_rate = rate * (cfg->burst_on_s + cfg->burst_off_s) / cfg->burst_on_s;
    if (!b->started) {
        b->started = true;
        b->end = t + s_exp(rng, cfg->burst_on_s);
    }
    for (;;) {
        double next = t + s_exp(rng, 1.0 / on_rate);
        if (next <= b->end) return next;
        t = b->end + s_exp(rng, cfg->burst_off_s); // memoryless: restart the next period
        b->end = t + s_exp(rng, cfg->burst_on_s);
    }
}

// The workload's content: how its prompts are built from groups.
typedef enum { S_CONTENT_NONE, S_CONTENT_FIXED, S_CONTENT_LOGNORMAL, S_CONTENT_NESTED } s_content_t;

static s_content_t s_content(clustersim_gen_kind_t kind, const clustersim_gen_config_t *cfg)
{
    if (kind == CLUSTERSIM_GEN_NO_PREFIX) return S_CONTENT_NONE;
    if (kind == CLUSTERSIM_GEN_PRODUCTION) return S_CONTENT_LOGNORMAL;
    if (kind == CLUSTERSIM_GEN_MANY_MODELS) return S_CONTENT_NESTED;
    return cfg->prefix_groups > 0 && cfg->prefix_tokens > 0 ? S_CONTENT_FIXED : S_CONTENT_NONE;
}

static bool s_config_ok(clustersim_gen_kind_t kind, const clustersim_gen_config_t *cfg)
{
    if (!(cfg->rate > 0) || cfg->requests == 0 || cfg->output_tokens == 0 || cfg->models == 0 ||
        cfg->tenants == 0 || cfg->think_s < 0 || !(cfg->group_skew >= 0) ||
        !(cfg->tenant_skew >= 0) || cfg->burst_on_s < 0 || cfg->burst_off_s < 0 ||
        (unsigned)kind >= CLUSTERSIM_GEN_NKINDS)
        return false;
    if (kind == CLUSTERSIM_GEN_PRODUCTION)
        return cfg->prompt_median >= 1 && cfg->prompt_p90 >= cfg->prompt_median &&
               cfg->prompt_max >= cfg->prompt_median && cfg->shared_fraction >= 0 &&
               cfg->shared_fraction < 1;
    if (kind == CLUSTERSIM_GEN_MANY_MODELS)
        return cfg->prefix_tokens + cfg->sub_tokens + cfg->suffix_tokens > 0;
    return true;
}

clustersim_workload_t *clustersim_workload_generate(clustersim_gen_kind_t kind,
                                                    const clustersim_gen_config_t *cfg)
{
    if (!s_config_ok(kind, cfg)) return NULL;
    bool multi = kind == CLUSTERSIM_GEN_MULTI_TURN;
    uint32_t turns = multi ? cfg->turns : 1;
    s_content_t content = s_content(kind, cfg);
    // Nested: groups are models (popularity group_skew), subgroups (model, tenant) documents.
    uint32_t ngroups = content == S_CONTENT_NESTED ? cfg->models : cfg->prefix_groups;
    bool grouped = content != S_CONTENT_NONE && ngroups > 0;
    uint32_t prefix =
        content == S_CONTENT_FIXED || content == S_CONTENT_NESTED ? cfg->prefix_tokens : 0;
    if (turns == 0 ||
        (content != S_CONTENT_LOGNORMAL && prefix + cfg->sub_tokens + cfg->suffix_tokens == 0))
        return NULL;

    clustersim_workload_t *self = s_new(clustersim_gen_kind_name(kind), cfg->seed);
    double *cdf = grouped ? s_zipf_cdf(ngroups, cfg->group_skew) : NULL;
    double *tcdf = content == S_CONTENT_NESTED ? s_zipf_cdf(cfg->tenants, cfg->tenant_skew) : NULL;
    if (!self || (grouped && !cdf) || (content == S_CONTENT_NESTED && !tcdf) ||
        s_default_names(self, cfg->models, cfg->tenants) != 0)
        goto fail;
    s_rng_t rng = {s_stream(cfg->seed, 0, kind)};
    uint32_t units = (cfg->requests + turns - 1) / turns; // requests, or conversations
    double unit_rate = cfg->rate / turns;
    // Log-normal lengths: ln L ~ N(ln median, sigma), sigma from the 90th percentile (z 1.2816).
    double mu = cfg->prompt_median ? log((double)cfg->prompt_median) : 0;
    double sigma =
        cfg->prompt_median ? log((double)cfg->prompt_p90 / cfg->prompt_median) / 1.2816 : 0;
    s_burst_t burst = {0};
    double t = 0;
    for (uint32_t u = 0; u < units; u++) {
        t = s_next_arrival(&rng, cfg, unit_rate, &burst, t);
        int32_t group = grouped ? s_draw_group(cdf, ngroups, s_unit(&rng)) : -1;
        uint32_t model = (uint32_t)((group >= 0 ? (uint32_t)group : u) % cfg->models);
        uint32_t tenant = u % cfg->tenants;
        uint32_t length = prefix + cfg->suffix_tokens, base = prefix, sub_tokens = 0;
        int32_t sub = -1;
        if (content == S_CONTENT_LOGNORMAL) {
            double l = exp(mu + sigma * s_normal(&rng));
            length = l < 16 ? 16 : l > cfg->prompt_max ? cfg->prompt_max : (uint32_t)l;
            base = group >= 0 ? (uint32_t)(cfg->shared_fraction * length) : 0;
        } else if (content == S_CONTENT_NESTED) {
            tenant = (uint32_t)s_draw_group(tcdf, cfg->tenants, s_unit(&rng));
            sub = (int32_t)(model * cfg->tenants + tenant);
            sub_tokens = cfg->sub_tokens;
            base = prefix + sub_tokens;
            length = base + cfg->suffix_tokens;
        }
        int32_t prev = -1;
        for (uint32_t k = 0; k < turns; k++) {
            clustersim_req_t *r = s_add(self);
            if (!r) goto fail;
            uint32_t idx = self->n - 1;
            r->group = group;
            r->sub = sub;
            r->sub_tokens = sub_tokens;
            r->model = model;
            r->tenant = tenant;
            r->output_tokens = cfg->output_tokens;
            r->prev = prev;
            if (prev < 0) {
                r->arrival_s = t;
                r->base_tokens = base;
                r->prompt_tokens = length;
            } else {
                const clustersim_req_t *p = &self->reqs[prev];
                r->arrival_s = cfg->think_s > 0 ? s_exp(&rng, cfg->think_s) : 0;
                r->base_tokens = p->prompt_tokens + p->output_tokens;
                r->prompt_tokens = r->base_tokens + cfg->suffix_tokens;
                self->reqs[prev].next = (int32_t)idx;
            }
            prev = (int32_t)idx;
        }
    }
    if (content == S_CONTENT_FIXED || content == S_CONTENT_NESTED) {
        // Every group's prefix synthesised once (production's vary in length: streamed).
        self->group_tokens = malloc((size_t)ngroups * (prefix ? prefix : 1) * sizeof(uint32_t));
        if (!self->group_tokens) goto fail;
        self->ngroups = ngroups;
        self->group_len = prefix;
        for (uint32_t g = 0; g < self->ngroups; g++)
            s_fill(s_stream(cfg->seed, S_KIND_GROUP, g), 0, prefix,
                   self->group_tokens + (size_t)g * prefix);
    }
    if (s_finish(self) != 0) goto fail;
    free(cdf);
    free(tcdf);
    return self;
fail:
    free(cdf);
    free(tcdf);
    clustersim_workload_destroy(&self);
    return NULL;
}

/* --- traces --------------------------------------------------------------------------------- */

void clustersim_trace_config_defaults(clustersim_trace_config_t *cfg)
{
    *cfg = (clustersim_trace_config_t){
        .seed = 1, .max_requests = 0, .speed = 1.0, .suffix_tokens = 256, .mooncake_block = 512};
}

static bool s_uint(const cJSON *item, double max, double *out)
{
    if (!cJSON_IsNumber(item)) return false;
    double v = item->valuedouble;
    if (!(v >= 0) || v > max || v != floor(v)) return false;
    *out = v;
    return true;
}

static int s_err(char *err, size_t errlen, const char *path, size_t line, const char *what)
{
    snprintf(err, errlen, "%s:%zu: %s", path, line, what);
    return IPL_E_INVAL;
}

static int s_push_hash(clustersim_workload_t *self, uint32_t id)
{
    if (self->nhash == self->hash_cap) {
        uint32_t cap = self->hash_cap ? self->hash_cap * 2 : 4096;
        uint32_t *h = realloc(self->hash_ids, cap * sizeof *h);
        if (!h) return IPL_E_NOMEM;
        self->hash_ids = h;
        self->hash_cap = cap;
    }
    self->hash_ids[self->nhash++] = id;
    return 0;
}

#define S_MAX_TOKENS    1048576.0   /* a prompt or output longer than this is a broken line */
#define S_STRING_GROUPS 1073741824u /* 2^30: ids of string prefix groups start here */

static int s_mooncake_line(clustersim_workload_t *self, const cJSON *o, const char *path,
                           size_t line, double speed, char *err, size_t errlen)
{
    double ts, in, out;
    const cJSON *ids = cJSON_GetObjectItemCaseSensitive(o, "hash_ids");
    if (!s_uint(cJSON_GetObjectItemCaseSensitive(o, "timestamp"), 1e15, &ts))
        return s_err(err, errlen, path, line, "\"timestamp\" must be a non-negative integer (ms)");
    if (!s_uint(cJSON_GetObjectItemCaseSensitive(o, "input_length"), S_MAX_TOKENS, &in) || in < 1)
        return s_err(err, errlen, path, line, "\"input_length\" must be an integer 1..1048576");
    if (!s_uint(cJSON_GetObjectItemCaseSensitive(o, "output_length"), S_MAX_TOKENS, &out))
        return s_err(err, errlen, path, line, "\"output_length\" must be an integer 0..1048576");
    if (ids && !cJSON_IsArray(ids))
        return s_err(err, errlen, path, line, "\"hash_ids\" must be an array of integers");
    clustersim_req_t *r = s_add(self);
    if (!r) return IPL_E_NOMEM;
    r->arrival_s = ts / 1000.0 / speed;
    r->prompt_tokens = (uint32_t)in;
    r->output_tokens = out < 1 ? 1 : (uint32_t)out;
    r->hash_off = self->nhash;
    const cJSON *id;
    cJSON_ArrayForEach(id, ids)
    {
        double v;
        if (!s_uint(id, 4294967295.0, &v))
            return s_err(err, errlen, path, line, "\"hash_ids\" must hold integers 0..2^32-1");
        if ((uint64_t)r->nhash * self->mooncake_block >= r->prompt_tokens) continue;
        if (s_push_hash(self, (uint32_t)v) != 0) return IPL_E_NOMEM;
        r = &self->reqs[self->n - 1];
        r->nhash++;
    }
    r->base_tokens = r->nhash * self->mooncake_block < r->prompt_tokens
                         ? r->nhash * self->mooncake_block
                         : r->prompt_tokens;
    return 0;
}

static int s_str_field(clustersim_workload_t *self, s_names_t *t, const cJSON *o, const char *key,
                       const char *dflt, uint32_t *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    const char *name = cJSON_IsString(v) && v->valuestring[0] ? v->valuestring : dflt;
    (void)self;
    return s_name(t, name, out);
}

static int s_our_line(clustersim_workload_t *self, const cJSON *o, const char *path, size_t line,
                      const clustersim_trace_config_t *cfg, char *err, size_t errlen)
{
    double at, prompt, out, prefix = -1;
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "arrival_s");
    if (!cJSON_IsNumber(a) || !(a->valuedouble >= 0) || a->valuedouble > 1e9)
        return s_err(err, errlen, path, line, "\"arrival_s\" must be a number of seconds >= 0");
    at = a->valuedouble;
    if (!s_uint(cJSON_GetObjectItemCaseSensitive(o, "prompt_tokens"), S_MAX_TOKENS, &prompt) ||
        prompt < 1)
        return s_err(err, errlen, path, line, "\"prompt_tokens\" must be an integer 1..1048576");
    if (!s_uint(cJSON_GetObjectItemCaseSensitive(o, "output_tokens"), S_MAX_TOKENS, &out))
        return s_err(err, errlen, path, line, "\"output_tokens\" must be an integer 0..1048576");
    const cJSON *pt = cJSON_GetObjectItemCaseSensitive(o, "prefix_tokens");
    if (pt && !s_uint(pt, S_MAX_TOKENS, &prefix))
        return s_err(err, errlen, path, line, "\"prefix_tokens\" must be an integer 0..1048576");
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(o, "prefix_group");
    int32_t group = -1;
    if (cJSON_IsString(g)) {
        // String groups get ids above every numeric one: the two spaces never meet.
        uint32_t id;
        if (s_name(&self->groups, g->valuestring, &id) != 0) return IPL_E_NOMEM;
        group = (int32_t)(S_STRING_GROUPS + id);
    } else if (cJSON_IsNumber(g)) {
        double v;
        if (!s_uint(g, S_STRING_GROUPS - 1, &v))
            return s_err(err, errlen, path, line,
                         "\"prefix_group\" must be an integer 0..2^30-1, a string or null");
        group = (int32_t)v;
    } else if (g && !cJSON_IsNull(g)) {
        return s_err(err, errlen, path, line,
                     "\"prefix_group\" must be an integer, a string or null");
    }
    uint32_t tenant, model;
    if (s_str_field(self, &self->tenants, o, "tenant", "default", &tenant) != 0 ||
        s_str_field(self, &self->models, o, "model", "sim-model", &model) != 0)
        return IPL_E_NOMEM;
    clustersim_req_t *r = s_add(self);
    if (!r) return IPL_E_NOMEM;
    r->arrival_s = at / cfg->speed;
    r->prompt_tokens = (uint32_t)prompt;
    r->output_tokens = out < 1 ? 1 : (uint32_t)out;
    r->tenant = tenant;
    r->model = model;
    r->group = group;
    if (group >= 0) {
        uint32_t own =
            cfg->suffix_tokens < r->prompt_tokens ? cfg->suffix_tokens : r->prompt_tokens;
        uint32_t base = prefix >= 0 ? (uint32_t)prefix : r->prompt_tokens - own;
        r->base_tokens = base < r->prompt_tokens ? base : r->prompt_tokens;
    }
    return 0;
}

static const char *s_basename(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

int clustersim_workload_read(const char *path, const clustersim_trace_config_t *cfg,
                             clustersim_workload_t **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!(cfg->speed > 0) || cfg->mooncake_block == 0) {
        snprintf(err, errlen, "trace speed must be > 0 and the Mooncake block size >= 1");
        return IPL_E_INVAL;
    }
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open the trace: %m", path);
        return IPL_E_IO;
    }
    clustersim_workload_t *self = s_new(s_basename(path), cfg->seed);
    int rc = self ? 0 : IPL_E_NOMEM;
    if (self) self->mooncake_block = cfg->mooncake_block;
    char *buf = NULL;
    size_t bufcap = 0, line = 0;
    ssize_t len;
    while (rc == 0 && (len = getline(&buf, &bufcap, f)) >= 0) {
        line++;
        if (cfg->max_requests && self->n >= cfg->max_requests) break;
        char *p = buf;
        while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
            p++;
        if (!*p || *p == '#') continue;
        cJSON *o = cJSON_ParseWithLength(p, (size_t)len - (size_t)(p - buf));
        if (!cJSON_IsObject(o)) {
            rc = s_err(err, errlen, path, line, "not a JSON object");
        } else if (cJSON_GetObjectItemCaseSensitive(o, "input_length") ||
                   cJSON_GetObjectItemCaseSensitive(o, "hash_ids")) {
            rc = s_mooncake_line(self, o, path, line, cfg->speed, err, errlen);
        } else {
            rc = s_our_line(self, o, path, line, cfg, err, errlen);
        }
        cJSON_Delete(o);
    }
    free(buf);
    fclose(f);
    if (rc == 0 && self->n == 0) {
        snprintf(err, errlen, "%s: the trace holds no request", path);
        rc = IPL_E_INVAL;
    }
    if (rc == 0 && (self->models.n == 0 || self->tenants.n == 0)) {
        uint32_t id;
        if ((self->models.n == 0 && s_name(&self->models, "sim-model", &id) != 0) ||
            (self->tenants.n == 0 && s_name(&self->tenants, "default", &id) != 0))
            rc = IPL_E_NOMEM;
    }
    if (rc == 0) rc = s_finish(self);
    if (rc == IPL_E_NOMEM) snprintf(err, errlen, "%s: out of memory", path);
    if (rc != 0) {
        clustersim_workload_destroy(&self);
        return rc;
    }
    *out = self;
    return 0;
}

/* --- reading -------------------------------------------------------------------------------- */

void clustersim_workload_destroy(clustersim_workload_t **self_p)
{
    if (!self_p || !*self_p) return;
    clustersim_workload_t *self = *self_p;
    s_names_free(&self->models);
    s_names_free(&self->tenants);
    s_names_free(&self->groups);
    free(self->reqs);
    free(self->roots);
    free(self->hash_ids);
    free(self->group_tokens);
    free(self->name);
    free(self);
    *self_p = NULL;
}

const char *clustersim_workload_name(const clustersim_workload_t *self)
{
    return self->name;
}

uint32_t clustersim_workload_count(const clustersim_workload_t *self)
{
    return self->n;
}

const clustersim_req_t *clustersim_workload_req(const clustersim_workload_t *self, uint32_t i)
{
    return &self->reqs[i];
}

const uint32_t *clustersim_workload_roots(const clustersim_workload_t *self, uint32_t *n)
{
    *n = self->nroots;
    return self->roots;
}

// The longest earlier prefix per key (a group or a subgroup), in a small open-addressed map.
typedef struct {
    int64_t *key;
    uint32_t *len;
    size_t cap;
} s_seen_t;

static uint32_t *s_seen_slot(s_seen_t *m, int64_t key)
{
    size_t i = (size_t)s_mix((uint64_t)key) & (m->cap - 1);
    while (m->key[i] != -1 && m->key[i] != key)
        i = (i + 1) & (m->cap - 1);
    m->key[i] = key;
    return &m->len[i];
}

int clustersim_workload_ideal_reuse(const clustersim_workload_t *self, uint32_t block_size,
                                    uint32_t *reused, uint64_t *working_set)
{
    uint64_t held = 0;
    s_seen_t m = {0};
    m.cap = 64;
    while (m.cap < 4 * ((size_t)self->n + self->nhash + 1))
        m.cap *= 2;
    m.key = malloc(m.cap * sizeof *m.key);
    m.len = calloc(m.cap, sizeof *m.len);
    if (!m.key || !m.len || !block_size) {
        free(m.key);
        free(m.len);
        return IPL_E_NOMEM;
    }
    memset(m.key, 0xff, m.cap * sizeof *m.key); // -1: empty
    // Keys: groups 0.., subgroups 2^40 + s, Mooncake hash ids 2^41 + id (present or not).
    const int64_t sub_base = (int64_t)1 << 40, hash_base = (int64_t)1 << 41;
    for (uint32_t i = 0; i < self->n; i++)
        reused[i] = 0;
    for (uint32_t k = 0; k < self->nroots; k++) {
        // A root, then its follow-up turns (each reuses its whole history).
        for (int32_t i = (int32_t)self->roots[k]; i >= 0; i = self->reqs[i].next) {
            const clustersim_req_t *r = &self->reqs[i];
            uint64_t hit = 0;
            if (r->prev >= 0) {
                hit = r->base_tokens;
            } else if (r->nhash) {
                bool run = true;
                for (uint32_t b = 0; b < r->nhash; b++) {
                    uint32_t *seen = s_seen_slot(&m, hash_base + self->hash_ids[r->hash_off + b]);
                    uint32_t n = (b + 1) * self->mooncake_block <= r->base_tokens
                                     ? self->mooncake_block
                                     : r->base_tokens - b * self->mooncake_block;
                    if (run && *seen)
                        hit += n;
                    else
                        run = false;
                    if (!*seen) held += n;
                    *seen = 1;
                }
            } else if (r->group >= 0) {
                uint32_t own = r->base_tokens - r->sub_tokens;
                uint32_t *g = s_seen_slot(&m, r->group);
                hit = own < *g ? own : *g;
                if (own > *g) {
                    held += own - *g;
                    *g = own;
                }
                if (r->sub >= 0) {
                    uint32_t *s = s_seen_slot(&m, sub_base + r->sub);
                    if (hit == own) hit += r->sub_tokens < *s ? r->sub_tokens : *s;
                    if (r->sub_tokens > *s) {
                        held += r->sub_tokens - *s;
                        *s = r->sub_tokens;
                    }
                }
            }
            // Whole blocks, never the whole prompt (the engine computes at least one token).
            uint64_t most = r->prompt_tokens ? (r->prompt_tokens - 1) / block_size : 0;
            uint64_t blocks = hit / block_size < most ? hit / block_size : most;
            reused[i] = (uint32_t)(blocks * block_size);
        }
    }
    free(m.key);
    free(m.len);
    if (working_set) *working_set = held;
    return 0;
}

uint32_t clustersim_workload_max_tokens(const clustersim_workload_t *self)
{
    return self->max_tokens;
}

uint32_t clustersim_workload_nmodels(const clustersim_workload_t *self)
{
    return self->models.n;
}

const char *clustersim_workload_model(const clustersim_workload_t *self, uint32_t i)
{
    return i < self->models.n ? self->models.v[i] : NULL;
}

uint32_t clustersim_workload_ntenants(const clustersim_workload_t *self)
{
    return self->tenants.n;
}

const char *clustersim_workload_tenant(const clustersim_workload_t *self, uint32_t i)
{
    return i < self->tenants.n ? self->tenants.v[i] : NULL;
}

void clustersim_workload_output(const clustersim_workload_t *self, uint32_t i, uint32_t *buf)
{
    s_fill(s_stream(self->seed, S_KIND_OUTPUT, i), 0, self->reqs[i].output_tokens, buf);
}

void clustersim_workload_prompt(const clustersim_workload_t *self, uint32_t i, uint32_t *buf)
{
    const clustersim_req_t *r = &self->reqs[i];
    uint32_t base = r->base_tokens;
    if (r->prev >= 0) {
        // History: the previous turn's prompt and answer, then this turn's message.
        const clustersim_req_t *p = &self->reqs[r->prev];
        clustersim_workload_prompt(self, (uint32_t)r->prev, buf);
        clustersim_workload_output(self, (uint32_t)r->prev, buf + p->prompt_tokens);
    } else if (r->nhash) {
        uint32_t bs = self->mooncake_block;
        for (uint32_t b = 0; b < r->nhash; b++) {
            uint32_t from = b * bs, n = base - from < bs ? base - from : bs;
            s_fill(s_stream(self->seed, S_KIND_BLOCK, self->hash_ids[r->hash_off + b]), 0, n,
                   buf + from);
        }
    } else {
        uint32_t own_base = base - r->sub_tokens; // the group's part
        if (r->group >= 0 && (uint32_t)r->group < self->ngroups && own_base <= self->group_len)
            memcpy(buf, self->group_tokens + (size_t)r->group * self->group_len,
                   own_base * sizeof *buf);
        else if (r->group >= 0)
            s_fill(s_stream(self->seed, S_KIND_GROUP, (uint64_t)r->group), 0, own_base, buf);
        if (r->sub >= 0)
            s_fill(s_stream(self->seed, S_KIND_SUB, (uint64_t)r->sub), 0, r->sub_tokens,
                   buf + own_base);
    }
    s_fill(s_stream(self->seed, S_KIND_OWN, i), 0, r->prompt_tokens - base, buf + base);
}
