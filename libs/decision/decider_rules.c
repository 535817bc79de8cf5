/*
 * decider_rules — compiled InferencePolicy rules and their first-match evaluation (see the
 * header for the semantics and the contracts).
 */
#include "decider_rules.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ipl_error.h"
#include "ipl_hash.h"

/* ---- interning: name → dense id -------------------------------------------------------- */

typedef struct {
    uint64_t h;
    const char *s; /* borrowed from the policy; NULL: empty slot */
    int id;
} s_slot_t;

typedef struct {
    s_slot_t *slot;
    const char **name; /* by id */
    size_t mask;       /* capacity - 1, a power of two */
    int n;
} s_intern_t;

static int s_intern_init(s_intern_t *t, size_t expected)
{
    size_t cap = 16;
    while (cap < expected * 2 + 2)
        cap <<= 1;
    t->slot = calloc(cap, sizeof *t->slot);
    t->name = calloc(cap, sizeof *t->name);
    t->mask = cap - 1;
    t->n = 0;
    return t->slot && t->name ? 0 : IPL_E_NOMEM;
}

/* The id of `s` (hash h), or -1. s_intern_add interns a name (the table is sized for every
 * add at init, so it never fills). */
static int s_intern_find(const s_intern_t *t, const char *s, uint64_t h)
{
    for (size_t i = h & t->mask;; i = (i + 1) & t->mask) {
        const s_slot_t *e = &t->slot[i];
        if (!e->s) return -1;
        if (e->h == h && strcmp(e->s, s) == 0) return e->id;
    }
}

static int s_intern_add(s_intern_t *t, const char *s)
{
    uint64_t h = ipl_hash_bytes(s, strlen(s));
    size_t i = h & t->mask;
    for (;; i = (i + 1) & t->mask) {
        s_slot_t *e = &t->slot[i];
        if (!e->s) break;
        if (e->h == h && strcmp(e->s, s) == 0) return e->id;
    }
    t->slot[i] = (s_slot_t){h, s, t->n};
    t->name[t->n] = s;
    return t->n++;
}

static int s_intern_get(const s_intern_t *t, const char *s)
{
    if (!s || !*s) return -1;
    return s_intern_find(t, s, ipl_hash_bytes(s, strlen(s)));
}

/* ---- compiled rules --------------------------------------------------------------------- */

typedef struct {
    char *name;        /* owned: the part before '=' */
    const char *value; /* borrowed, after '='; NULL: any value */
} s_header_t;

typedef struct {
    const ipl_rule_t *src;
    decider_rules_action_t action;
    int *labels; /* interned label ids, owned */
    uint32_t nlabels;
    s_header_t *headers; /* owned */
    uint32_t nheaders;
    uint64_t prompt_min, prompt_max;
    bool has_queue, has_kv, has_time;
    uint64_t queue_above, kv_above;
    uint8_t slo; /* 0 unset, 1 within, 2 above */
    uint8_t days;
    uint16_t from, to;
} s_rule_t;

struct decider_rules {
    const ipl_policy_t *policy;
    s_rule_t *rule;
    size_t nrules;
    size_t words; /* 64-bit words per rule bitset */
    s_intern_t tenants, models, labels;
    uint64_t *tenant_bits; /* tenants.n × words */
    uint64_t *tenant_any;  /* rules without a tenant condition */
    uint64_t *model_bits;  /* models.n × words: after alias resolution */
    uint64_t *model_any;
};

static const char *s_action_names[] = {"none",      "route",  "prefer",    "spill",
                                       "keepLocal", "reject", "admitBatch"};

const char *decider_rules_action_name(decider_rules_action_t a)
{
    return (unsigned)a < sizeof s_action_names / sizeof *s_action_names ? s_action_names[a] : "?";
}

static int s_fail(char *err, size_t errlen, const ipl_rule_t *r, size_t i, const char *fmt, ...)
{
    if (err && errlen) {
        int n = snprintf(err, errlen, "InferencePolicy \"%s\": rule \"%s\" (rules[%zu]): ",
                         r->policy ? r->policy : "", r->name ? r->name : "", i);
        if (n >= 0 && (size_t)n < errlen) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
            va_end(ap);
        }
    }
    return IPL_E_INVAL;
}

static void s_set(uint64_t *bits, size_t i)
{
    bits[i / 64] |= 1ull << (i % 64);
}

/* Compiles rule i's conditions other than tenants and models. */
static int s_compile_rule(decider_rules_t *self, size_t i, char *err, size_t errlen)
{
    const ipl_rule_t *r = &self->policy->rules[i];
    s_rule_t *c = &self->rule[i];
    c->src = r;
    c->action = DECIDER_RULES_NONE;
    for (int a = DECIDER_RULES_ROUTE; a <= DECIDER_RULES_ADMIT_BATCH; a++)
        if (r->action && strcmp(r->action, s_action_names[a]) == 0)
            c->action = (decider_rules_action_t)a;
    if (c->action == DECIDER_RULES_NONE)
        return s_fail(err, errlen, r, i, "unknown action \"%s\"", r->action ? r->action : "");
    if (r->labels_len) {
        c->labels = calloc(r->labels_len, sizeof *c->labels);
        if (!c->labels) return IPL_E_NOMEM;
        for (uint32_t k = 0; k < r->labels_len; k++)
            c->labels[k] = s_intern_add(&self->labels, r->labels[k]);
        c->nlabels = r->labels_len;
    }
    if (r->headers_len) {
        c->headers = calloc(r->headers_len, sizeof *c->headers);
        if (!c->headers) return IPL_E_NOMEM;
        c->nheaders = r->headers_len;
        for (uint32_t k = 0; k < r->headers_len; k++) {
            const char *h = r->headers[k], *eq = strchr(h, '=');
            size_t n = eq ? (size_t)(eq - h) : strlen(h);
            if (n == 0) return s_fail(err, errlen, r, i, "headers[%u] has an empty name", k);
            c->headers[k].name = strndup(h, n);
            if (!c->headers[k].name) return IPL_E_NOMEM;
            c->headers[k].value = eq ? eq + 1 : NULL;
        }
    }
    c->prompt_min = r->prompt_min;
    c->prompt_max = r->prompt_max;
    if (c->prompt_min > c->prompt_max)
        return s_fail(err, errlen, r, i, "promptTokens min %llu > max %llu",
                      (unsigned long long)r->prompt_min, (unsigned long long)r->prompt_max);
    c->has_queue = r->has_queue_depth;
    c->queue_above = r->queue_depth_above;
    c->has_kv = r->has_kv_utilization;
    c->kv_above = r->kv_utilization_above_percent;
    if (r->predicted_ttft_above_slo > 2)
        return s_fail(err, errlen, r, i, "predicted_ttft_above_slo %llu is not 0, 1 or 2",
                      (unsigned long long)r->predicted_ttft_above_slo);
    c->slo = (uint8_t)r->predicted_ttft_above_slo;
    c->has_time = r->has_time;
    if (c->has_time) {
        if (r->from_minute >= 1440 || r->to_minute >= 1440 || r->from_minute == r->to_minute)
            return s_fail(err, errlen, r, i,
                          "time window %llu..%llu: minutes must be 0..1439 and differ",
                          (unsigned long long)r->from_minute, (unsigned long long)r->to_minute);
        c->days = (uint8_t)((r->days & 0x7f) ? (r->days & 0x7f) : 0x7f);
        c->from = (uint16_t)r->from_minute;
        c->to = (uint16_t)r->to_minute;
    }
    if (c->action == DECIDER_RULES_SPILL && r->while_above_slo &&
        r->exit_percent >= r->enter_percent)
        return s_fail(err, errlen, r, i, "spill exit percent %llu is not below enter percent %llu",
                      (unsigned long long)r->exit_percent, (unsigned long long)r->enter_percent);
    return 0;
}

/* Model id → the pool model of pool `name`, or NULL. */
static const char *s_pool_model(const ipl_policy_t *p, const char *name)
{
    for (uint32_t i = 0; i < p->pools_len; i++)
        if (p->pools[i].name && strcmp(p->pools[i].name, name) == 0) return p->pools[i].model;
    return NULL;
}

/* model_bits[m] |= the rules listing any name m resolves to (m itself, and through aliases,
 * transitively). `direct` is the rules listing each model by name; scratch arrays sized for
 * every model. */
static void s_resolve_model(decider_rules_t *self, int m, const uint64_t *direct, int *stack,
                            bool *seen)
{
    const ipl_policy_t *p = self->policy;
    uint64_t *out = self->model_bits + (size_t)m * self->words;
    int n = self->models.n, top = 0;
    memset(seen, 0, (size_t)n * sizeof *seen);
    stack[top++] = m;
    seen[m] = true;
    while (top > 0) {
        int x = stack[--top];
        for (size_t w = 0; w < self->words; w++)
            out[w] |= direct[(size_t)x * self->words + w];
        const char *xs = self->models.name[x];
        for (uint32_t t = 0; xs && t < p->alias_targets_len; t++) {
            const ipl_alias_target_t *at = &p->alias_targets[t];
            if (!at->alias || strcmp(at->alias, xs) != 0 || !at->name) continue;
            const char *to =
                at->kind && strcmp(at->kind, "pool") == 0 ? s_pool_model(p, at->name) : at->name;
            int y = to ? s_intern_get(&self->models, to) : -1;
            if (y >= 0 && !seen[y]) {
                seen[y] = true;
                stack[top++] = y;
            }
        }
    }
}

static int s_build_models(decider_rules_t *self)
{
    size_t n = (size_t)self->models.n, W = self->words;
    uint64_t *direct = calloc(n * W + 1, sizeof *direct);
    int *stack = calloc(n + 1, sizeof *stack);
    bool *seen = calloc(n + 1, sizeof *seen);
    self->model_bits = calloc(n * W + 1, sizeof *self->model_bits);
    int rc = direct && stack && seen && self->model_bits ? 0 : IPL_E_NOMEM;
    for (size_t i = 0; rc == 0 && i < self->nrules; i++) {
        const ipl_rule_t *r = &self->policy->rules[i];
        for (uint32_t k = 0; k < r->models_len; k++)
            s_set(direct + (size_t)s_intern_get(&self->models, r->models[k]) * W, i);
    }
    for (int m = 0; rc == 0 && m < self->models.n; m++) {
        s_resolve_model(self, m, direct, stack, seen);
        for (size_t w = 0; w < W; w++)
            self->model_bits[(size_t)m * W + w] |= self->model_any[w];
    }
    free(direct);
    free(stack);
    free(seen);
    return rc;
}

int decider_rules_new(const ipl_policy_t *policy, decider_rules_t **out, char *err, size_t errlen)
{
    if (err && errlen) err[0] = '\0';
    decider_rules_t *self = calloc(1, sizeof *self);
    if (!self) return IPL_E_NOMEM;
    self->policy = policy;
    self->nrules = policy->rules_len;
    self->words = (self->nrules + 63) / 64;
    size_t nt = 0, nm = policy->pools_len + policy->aliases_len + policy->alias_targets_len, nl = 0;
    for (size_t i = 0; i < self->nrules; i++) {
        nt += policy->rules[i].tenants_len;
        nm += policy->rules[i].models_len;
        nl += policy->rules[i].labels_len;
    }
    int rc = 0;
    self->rule = calloc(self->nrules + 1, sizeof *self->rule);
    self->tenant_any = calloc(self->words + 1, sizeof(uint64_t));
    self->model_any = calloc(self->words + 1, sizeof(uint64_t));
    if (!self->rule || !self->tenant_any || !self->model_any || s_intern_init(&self->tenants, nt) ||
        s_intern_init(&self->models, nm) || s_intern_init(&self->labels, nl))
        rc = IPL_E_NOMEM;
    for (size_t i = 0; rc == 0 && i < self->nrules; i++) {
        const ipl_rule_t *r = &policy->rules[i];
        for (uint32_t k = 0; k < r->tenants_len; k++)
            s_intern_add(&self->tenants, r->tenants[k]);
        for (uint32_t k = 0; k < r->models_len; k++)
            s_intern_add(&self->models, r->models[k]);
        if (!r->tenants_len) s_set(self->tenant_any, i);
        if (!r->models_len) s_set(self->model_any, i);
        rc = s_compile_rule(self, i, err, errlen);
    }
    /* Every name an alias resolves through, so the walk can follow it. */
    for (uint32_t i = 0; rc == 0 && i < policy->aliases_len; i++)
        if (policy->aliases[i].name) s_intern_add(&self->models, policy->aliases[i].name);
    for (uint32_t i = 0; rc == 0 && i < policy->alias_targets_len; i++) {
        const ipl_alias_target_t *at = &policy->alias_targets[i];
        const char *to = at->kind && at->name && strcmp(at->kind, "pool") == 0
                             ? s_pool_model(policy, at->name)
                             : at->name;
        if (to) s_intern_add(&self->models, to);
    }
    if (rc == 0) {
        size_t W = self->words;
        self->tenant_bits = calloc((size_t)self->tenants.n * W + 1, sizeof(uint64_t));
        if (!self->tenant_bits) rc = IPL_E_NOMEM;
        for (int t = 0; rc == 0 && t < self->tenants.n; t++)
            memcpy(self->tenant_bits + (size_t)t * W, self->tenant_any, W * sizeof(uint64_t));
        for (size_t i = 0; rc == 0 && i < self->nrules; i++) {
            const ipl_rule_t *r = &policy->rules[i];
            for (uint32_t k = 0; k < r->tenants_len; k++)
                s_set(self->tenant_bits + (size_t)s_intern_get(&self->tenants, r->tenants[k]) * W,
                      i);
        }
    }
    if (rc == 0) rc = s_build_models(self);
    if (rc != 0) {
        if (rc == IPL_E_NOMEM && err && errlen) snprintf(err, errlen, "out of memory");
        decider_rules_destroy(&self);
        return rc;
    }
    *out = self;
    return 0;
}

void decider_rules_destroy(decider_rules_t **self_p)
{
    decider_rules_t *self = *self_p;
    if (!self) return;
    for (size_t i = 0; self->rule && i < self->nrules; i++) {
        free(self->rule[i].labels);
        for (uint32_t k = 0; self->rule[i].headers && k < self->rule[i].nheaders; k++)
            free(self->rule[i].headers[k].name);
        free(self->rule[i].headers);
    }
    free(self->rule);
    s_intern_t *tables[] = {&self->tenants, &self->models, &self->labels};
    for (size_t k = 0; k < 3; k++) {
        free(tables[k]->slot);
        free(tables[k]->name);
    }
    free(self->tenant_bits);
    free(self->tenant_any);
    free(self->model_bits);
    free(self->model_any);
    free(self);
    *self_p = NULL;
}

size_t decider_rules_count(const decider_rules_t *self)
{
    return self->nrules;
}

/* ---- evaluation ------------------------------------------------------------------------- */

static const char *s_header(const decider_rules_input_t *in, const char *name)
{
    if (in->header_fn) return in->header_fn(in->header_arg, name);
    for (size_t i = 0; i < in->nheaders; i++)
        if (in->headers[i].name && strcasecmp(in->headers[i].name, name) == 0)
            return in->headers[i].value ? in->headers[i].value : "";
    return NULL;
}

static bool s_time_holds(const s_rule_t *c, uint32_t mow)
{
    uint32_t day = (mow / 1440) % 7, minute = mow % 1440;
    if (c->from < c->to) return (c->days >> day & 1) && minute >= c->from && minute < c->to;
    /* wraps: the evening of an open day, or the morning after one */
    return (minute >= c->from && (c->days >> day & 1)) ||
           (minute < c->to && (c->days >> ((day + 6) % 7) & 1));
}

/* One predicate per condition, shared by eval and explain so that the two cannot disagree. */
static bool s_prompt_holds(const s_rule_t *c, const decider_rules_input_t *in)
{
    return in->prompt_tokens >= c->prompt_min && in->prompt_tokens <= c->prompt_max;
}

static bool s_queue_holds(const s_rule_t *c, const decider_rules_input_t *in)
{
    return !c->has_queue || in->queue_depth > c->queue_above;
}

static bool s_kv_holds(const s_rule_t *c, const decider_rules_input_t *in)
{
    return !c->has_kv || in->kv_utilization_percent > c->kv_above;
}

static bool s_slo_holds(const s_rule_t *c, const decider_rules_input_t *in)
{
    if (!c->slo) return true;
    if (in->ttft_slo_ms == 0) return false;
    bool above = in->predicted_ttft_ms > (double)in->ttft_slo_ms;
    return above == (c->slo == 2);
}

/* The first of the rule's labels the request lacks, or c->nlabels. */
static uint32_t s_missing_label(const s_rule_t *c, const int *lab, size_t nlab)
{
    for (uint32_t k = 0; k < c->nlabels; k++) {
        size_t j = 0;
        while (j < nlab && lab[j] != c->labels[k])
            j++;
        if (j == nlab) return k;
    }
    return c->nlabels;
}

/* The first of the rule's headers the request does not satisfy, or c->nheaders. */
static uint32_t s_failed_header(const s_rule_t *c, const decider_rules_input_t *in)
{
    for (uint32_t k = 0; k < c->nheaders; k++) {
        const char *v = s_header(in, c->headers[k].name);
        if (!v || (c->headers[k].value && strcmp(v, c->headers[k].value) != 0)) return k;
    }
    return c->nheaders;
}

/* Every condition but tenant and model, cheapest first. */
static bool s_rest_holds(const s_rule_t *c, const decider_rules_input_t *in, const int *lab,
                         size_t nlab)
{
    return s_prompt_holds(c, in) && s_queue_holds(c, in) && s_kv_holds(c, in) &&
           s_slo_holds(c, in) && (!c->has_time || s_time_holds(c, in->minute_of_week)) &&
           s_missing_label(c, lab, nlab) == c->nlabels && s_failed_header(c, in) == c->nheaders;
}

static void s_fill(const s_rule_t *c, size_t i, const decider_rules_input_t *in,
                   decider_rules_result_t *out)
{
    const ipl_rule_t *r = c->src;
    out->action = c->action;
    out->rule = (int)i;
    out->name = r->name;
    out->policy = r->policy;
    switch (c->action) {
    case DECIDER_RULES_ROUTE:
        out->pool = r->pool;
        out->targets = r->targets;
        out->ntargets = r->targets_len;
        break;
    case DECIDER_RULES_PREFER:
        out->pool = r->pool;
        out->target = r->target;
        out->unless_holder = r->unless_holder && *r->unless_holder ? r->unless_holder : NULL;
        break;
    case DECIDER_RULES_SPILL:
        out->provider = r->provider;
        out->spill = (decider_rules_spill_params_t){r->enter_percent, r->exit_percent,
                                                    r->min_hold_ms, r->while_above_slo};
        break;
    case DECIDER_RULES_KEEP_LOCAL:
        out->reason = r->reason;
        break;
    case DECIDER_RULES_REJECT:
        out->reason = r->reason;
        out->status = r->status ? (unsigned)r->status : DECIDER_RULES_REJECT_STATUS;
        break;
    case DECIDER_RULES_ADMIT_BATCH:
        out->max_utilization_percent = r->max_utilization_percent;
        out->admit = in->kv_utilization_percent < r->max_utilization_percent;
        break;
    case DECIDER_RULES_NONE:
        break;
    }
}

/* What eval and explain compute before looking at rules: the bitsets of the rules the tenant and
 * the model let through, and the request's interned labels (lab: DECIDER_RULES_MAX_LABELS). */
typedef struct {
    const uint64_t *tb, *mb;
    int lab[DECIDER_RULES_MAX_LABELS];
    size_t nlab;
} s_request_t;

static void s_request(const decider_rules_t *self, const decider_rules_input_t *in,
                      decider_rules_result_t *out, s_request_t *rq)
{
    memset(out, 0, sizeof *out);
    out->rule = -1;
    size_t W = self->words;
    int t = s_intern_get(&self->tenants, in->tenant);
    int m = s_intern_get(&self->models, in->model);
    rq->tb = t >= 0 ? self->tenant_bits + (size_t)t * W : self->tenant_any;
    rq->mb = m >= 0 ? self->model_bits + (size_t)m * W : self->model_any;
    rq->nlab = 0;
    for (size_t k = 0; k < in->nlabels && k < DECIDER_RULES_MAX_LABELS && self->labels.n; k++) {
        int id = s_intern_get(&self->labels, in->labels[k]);
        if (id >= 0) rq->lab[rq->nlab++] = id;
    }
}

decider_rules_action_t decider_rules_eval(const decider_rules_t *self,
                                          const decider_rules_input_t *in,
                                          decider_rules_result_t *out)
{
    s_request_t rq;
    s_request(self, in, out, &rq);
    for (size_t w = 0; w < self->words; w++) {
        for (uint64_t bits = rq.tb[w] & rq.mb[w]; bits; bits &= bits - 1) {
            size_t i = w * 64 + (size_t)__builtin_ctzll(bits);
            if (s_rest_holds(&self->rule[i], in, rq.lab, rq.nlab)) {
                s_fill(&self->rule[i], i, in, out);
                return out->action;
            }
        }
    }
    return DECIDER_RULES_NONE;
}

/* ---- explanation ------------------------------------------------------------------------ */

/* A bounded text: appends never overrun; a text cut short ends in "...". */
typedef struct {
    char *p;
    size_t len, cap;
} s_text_t;

static s_text_t s_text(char *buf, size_t cap)
{
    if (cap) buf[0] = '\0';
    return (s_text_t){buf, 0, cap};
}

__attribute__((format(printf, 2, 3))) static void s_put(s_text_t *t, const char *fmt, ...)
{
    if (t->cap < 4 || t->len + 1 >= t->cap) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->p + t->len, t->cap - t->len, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < t->cap - t->len) {
        t->len += (size_t)n;
        return;
    }
    t->len = t->cap - 1;
    memcpy(t->p + t->len - 3, "...", 4);
}

static void s_put_list(s_text_t *t, char *const *items, size_t n)
{
    s_put(t, "[");
    for (size_t i = 0; i < n; i++)
        s_put(t, "%s%s", i ? ", " : "", items[i]);
    s_put(t, "]");
}

static const char s_day_names[7][4] = {"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"};

/* "every day", "Mon-Fri", "Mon,Wed,Sat-Sun": runs of three or more days as ranges. */
static void s_put_days(s_text_t *t, unsigned days)
{
    if ((days & 0x7f) == 0x7f) {
        s_put(t, "every day");
        return;
    }
    const char *sep = "";
    for (int d = 0; d < 7; d++) {
        if (!(days >> d & 1)) continue;
        int e = d;
        while (e + 1 < 7 && (days >> (e + 1) & 1))
            e++;
        if (e - d >= 2) {
            s_put(t, "%s%s-%s", sep, s_day_names[d], s_day_names[e]);
            d = e;
        } else {
            s_put(t, "%s%s", sep, s_day_names[d]);
        }
        sep = ",";
    }
}

const char *decider_rules_format_minute(uint32_t mow, char *buf, size_t len)
{
    mow %= DECIDER_RULES_MINUTES_WEEK;
    snprintf(buf, len, "%s %02u:%02u", s_day_names[mow / 1440], mow % 1440 / 60, mow % 60);
    return buf;
}

int decider_rules_parse_minute(const char *text, uint32_t *mow)
{
    const char *p = text ? text : "";
    while (*p == ' ')
        p++;
    int day = -1;
    for (int d = 0; d < 7; d++)
        if (strncasecmp(p, s_day_names[d], 3) == 0) day = d;
    if (day < 0 || p[3] != ' ') return IPL_E_INVAL;
    p += 3;
    while (*p == ' ')
        p++;
    unsigned h = 0, m = 0, digits = 0;
    for (; *p >= '0' && *p <= '9' && digits < 2; p++, digits++)
        h = h * 10 + (unsigned)(*p - '0');
    if (!digits || *p++ != ':' || !(p[0] >= '0' && p[0] <= '9') || !(p[1] >= '0' && p[1] <= '9'))
        return IPL_E_INVAL;
    m = (unsigned)(p[0] - '0') * 10 + (unsigned)(p[1] - '0');
    for (p += 2; *p == ' '; p++) {
    }
    if (*p || h > 23 || m > 59) return IPL_E_INVAL;
    *mow = (uint32_t)day * 1440 + h * 60 + m;
    return 0;
}

/* Whether bit i of a rule bitset is set. */
static bool s_bit(const uint64_t *bits, size_t i)
{
    return bits[i / 64] >> (i % 64) & 1;
}

static bool s_is_alias(const ipl_policy_t *p, const char *name)
{
    for (uint32_t i = 0; name && i < p->aliases_len; i++)
        if (p->aliases[i].name && strcmp(p->aliases[i].name, name) == 0) return true;
    return false;
}

/* Whether rule i holds for the request; when not, the first failing condition in words. */
static bool s_why_not(const decider_rules_t *self, size_t i, const decider_rules_input_t *in,
                      const s_request_t *rq, s_text_t *t)
{
    const s_rule_t *c = &self->rule[i];
    const ipl_rule_t *r = c->src;
    if (!s_bit(rq->tb, i)) {
        if (in->tenant && *in->tenant)
            s_put(t, "tenant \"%s\" is not one of ", in->tenant);
        else
            s_put(t, "anonymous request (no tenant) is not one of ");
        s_put_list(t, r->tenants, r->tenants_len);
        return false;
    }
    if (!s_bit(rq->mb, i)) {
        s_put(t, "model \"%s\" is not one of ", in->model ? in->model : "");
        s_put_list(t, r->models, r->models_len);
        if (s_is_alias(self->policy, in->model))
            s_put(t, ", nor is any name the alias resolves to");
        return false;
    }
    uint32_t k = s_missing_label(c, rq->lab, rq->nlab);
    if (k < c->nlabels) {
        s_put(t, "label \"%s\" missing", r->labels[k]);
        return false;
    }
    k = s_failed_header(c, in);
    if (k < c->nheaders) {
        const s_header_t *h = &c->headers[k];
        const char *v = s_header(in, h->name);
        if (!h->value)
            s_put(t, "header %s absent", h->name);
        else if (!v)
            s_put(t, "header %s=%s absent (no %s header)", h->name, h->value, h->name);
        else
            s_put(t, "header %s=%s absent (%s=%s)", h->name, h->value, h->name, v);
        return false;
    }
    if (!s_prompt_holds(c, in)) {
        bool above = in->prompt_tokens > c->prompt_max;
        s_put(t, "prompt %llu tokens %s %llu", (unsigned long long)in->prompt_tokens,
              above ? "above max" : "below min",
              (unsigned long long)(above ? c->prompt_max : c->prompt_min));
        return false;
    }
    if (!s_queue_holds(c, in)) {
        s_put(t, "pool queue depth %llu not above %llu", (unsigned long long)in->queue_depth,
              (unsigned long long)c->queue_above);
        return false;
    }
    if (!s_kv_holds(c, in)) {
        s_put(t, "pool KV utilization %llu%% not above %llu%%",
              (unsigned long long)in->kv_utilization_percent, (unsigned long long)c->kv_above);
        return false;
    }
    if (!s_slo_holds(c, in)) {
        if (in->ttft_slo_ms == 0)
            s_put(t, "the pool has no TTFT SLO (predictedTtftAboveSlo: %s needs one)",
                  c->slo == 2 ? "true" : "false");
        else
            s_put(t, "pool predicted TTFT %.1f ms %s the SLO %llu ms", in->predicted_ttft_ms,
                  c->slo == 2 ? "within" : "above", (unsigned long long)in->ttft_slo_ms);
        return false;
    }
    if (c->has_time && !s_time_holds(c, in->minute_of_week)) {
        char now[16];
        s_put(t, "time %s UTC outside ",
              decider_rules_format_minute(in->minute_of_week, now, sizeof now));
        s_put_days(t, c->days);
        s_put(t, " %02u:%02u-%02u:%02u", c->from / 60u, c->from % 60u, c->to / 60u, c->to % 60u);
        return false;
    }
    return true;
}

decider_rules_action_t decider_rules_explain(const decider_rules_t *self,
                                             const decider_rules_input_t *in,
                                             decider_rules_trace_fn *fn, void *arg,
                                             decider_rules_result_t *out)
{
    s_request_t rq;
    s_request(self, in, out, &rq);
    char why[DECIDER_RULES_WHY_MAX];
    for (size_t i = 0; i < self->nrules; i++) {
        s_text_t t = s_text(why, sizeof why);
        if (s_why_not(self, i, in, &rq, &t)) {
            s_fill(&self->rule[i], i, in, out);
            if (fn) fn(arg, i, true, decider_rules_describe(out, why, sizeof why));
            return out->action;
        }
        if (fn) fn(arg, i, false, why);
    }
    return DECIDER_RULES_NONE;
}

const char *decider_rules_describe(const decider_rules_result_t *r, char *buf, size_t len)
{
    s_text_t t = s_text(buf, len);
    s_put(&t, "%s: ", decider_rules_action_name(r->action));
    switch (r->action) {
    case DECIDER_RULES_ROUTE:
        s_put(&t, "pool %s, ", r->pool ? r->pool : "");
        if (r->ntargets) {
            s_put(&t, "targets ");
            s_put_list(&t, r->targets, r->ntargets);
        } else {
            s_put(&t, "every target");
        }
        break;
    case DECIDER_RULES_PREFER:
        s_put(&t, "target %s of pool %s", r->target ? r->target : "", r->pool ? r->pool : "");
        if (r->unless_holder)
            s_put(&t, ", unless %s holds the prefix and predicts a lower TTFT", r->unless_holder);
        break;
    case DECIDER_RULES_SPILL:
        s_put(&t, "to provider %s", r->provider ? r->provider : "");
        if (r->spill.while_above_slo)
            s_put(&t,
                  " while the predicted TTFT is above the SLO (enter above %llu%%, exit below "
                  "%llu%%, hold %llu ms)",
                  (unsigned long long)r->spill.enter_percent,
                  (unsigned long long)r->spill.exit_percent,
                  (unsigned long long)r->spill.min_hold_ms);
        else
            s_put(&t, " while this rule matches");
        break;
    case DECIDER_RULES_KEEP_LOCAL:
        s_put(&t, "%s", r->reason && *r->reason ? r->reason : "never to a provider");
        break;
    case DECIDER_RULES_REJECT:
        s_put(&t, "%u, %s", r->status, r->reason && *r->reason ? r->reason : "no reason given");
        break;
    case DECIDER_RULES_ADMIT_BATCH:
        s_put(&t, "%s (KV utilization %sunder %llu%%)", r->admit ? "admit" : "hold",
              r->admit ? "" : "not ", (unsigned long long)r->max_utilization_percent);
        break;
    case DECIDER_RULES_NONE:
        s_put(&t, "no rule matched (the pool's strategy routes)");
        break;
    }
    return buf;
}

/* ---- helpers ---------------------------------------------------------------------------- */

uint32_t decider_rules_minute_of_week(uint64_t epoch_ms)
{
    uint64_t minutes = epoch_ms / 60000, days = minutes / 1440;
    /* 1970-01-01 was a Thursday: Monday-based weekday 3 */
    return (uint32_t)(((days + 3) % 7) * 1440 + minutes % 1440);
}

uint64_t decider_rules_slo_percent(double predicted_ttft_ms, uint64_t slo_ms)
{
    if (slo_ms == 0 || !(predicted_ttft_ms > 0)) return 0;
    double p = predicted_ttft_ms * 100.0 / (double)slo_ms;
    return p >= 1e18 ? (uint64_t)1e18 : (uint64_t)p;
}

bool decider_rules_spill_step(decider_rules_spill_state_t *state, uint64_t percent, uint64_t now_ms,
                              const decider_rules_spill_params_t *params)
{
    if (!params->while_above_slo) return true;
    bool held = !state->switched ||
                (now_ms >= state->since_ms && now_ms - state->since_ms >= params->min_hold_ms);
    if (held &&
        (state->spilling ? percent < params->exit_percent : percent > params->enter_percent)) {
        state->spilling = !state->spilling;
        state->switched = true;
        state->since_ms = now_ms;
    }
    return state->spilling;
}
