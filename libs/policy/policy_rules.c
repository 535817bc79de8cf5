/*
 * policy_rules — InferencePolicy: schema checks while reading, ordering, references,
 * alias cycles and shadowed rules at finish.
 */
#include "policy_rules.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define S_KIND              "InferencePolicy"
#define S_MAX_MATCH         256 // tenants or models in one match
#define S_MAX_LABELS        32
#define S_MAX_HEADERS       16
#define S_MAX_TENANT        128
#define S_MAX_REASON        256
#define S_MAX_VALUE         1024
#define S_MAX_ALIAS_TARGETS 16

static const char *const s_actions[] = {"route",  "prefer",     "spill", "keepLocal",
                                        "reject", "admitBatch", NULL};

typedef struct {
    const char *name;
    int64_t priority;
    policy_loc_t loc;
} s_policy_t;

typedef struct {
    policy_rule_t rule;
    const char *policy_file; // for messages about it
    policy_loc_t pool_loc, target_loc, unless_loc, provider_loc;
    policy_loc_t *target_locs; // route.targets
    policy_loc_t *model_locs;  // match.models
} s_rule_t;

typedef struct {
    policy_alias_t alias;
    size_t index;
    policy_loc_t *target_locs, *failover_locs;
    int color; // cycle search: 0 new, 1 on the path, 2 done
} s_alias_t;

typedef struct {
    policy_limit_t limit;
    size_t index;
} s_limit_t;

struct policy_rules {
    policy_yaml_t *yaml;
    s_policy_t *policies;
    size_t npolicies, cap_policies;
    s_rule_t *rules;
    size_t nrules, cap_rules;
    s_alias_t *aliases;
    size_t naliases, cap_aliases;
    s_limit_t *limits;
    size_t nlimits, cap_limits;
    // spec.cacheIsolation.tenants of every policy (sorted, each once, after finish)
    const char **isolated;
    size_t nisolated, cap_isolated;
    policy_labels_t *labels; // spec.labels of every policy
};

policy_rules_t *policy_rules_new(policy_yaml_t *yaml)
{
    policy_rules_t *self = calloc(1, sizeof *self);
    if (!self) abort();
    self->yaml = yaml;
    self->labels = policy_labels_new(yaml);
    return self;
}

policy_labels_t *policy_rules_labels(const policy_rules_t *self)
{
    return self->labels;
}

void policy_rules_destroy(policy_rules_t **self_p)
{
    if (!self_p || !*self_p) return;
    policy_rules_t *self = *self_p;
    free(self->policies);
    free(self->rules);
    free(self->aliases);
    free(self->limits);
    free(self->isolated);
    policy_labels_destroy(&self->labels);
    free(self);
    *self_p = NULL;
}

// ---- reading: match ---------------------------------------------------------------------------

static bool s_token(const char *s)
{
    return *s && strlen(s) <= 128 &&
           strspn(
               s,
               "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$%&'*+-.^_`|~") ==
               strlen(s);
}

static void s_headers(policy_doc_t *d, yaml_node_t *node, yaml_node_t *parent, const char *base,
                      policy_match_t *m)
{
    static const char *const fields[] = {"name", "value", NULL};
    char path[160], at[200];
    snprintf(path, sizeof path, "%s.headers", base);
    yaml_node_t *list =
        policy_yaml_list(d, node, parent, path, "headers ({name, value})", false, S_MAX_HEADERS);
    if (!list) return;
    size_t n = policy_yaml_len(list);
    policy_header_match_t *h = policy_yaml_alloc(d->yaml, n * sizeof *h);
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *item = policy_yaml_item(d, list, i), *f[2];
        snprintf(at, sizeof at, "%s[%zu]", path, i);
        if (!item || !policy_yaml_fields(d, item, at, fields, f)) continue;
        char p2[240];
        snprintf(p2, sizeof p2, "%s.name", at);
        const char *name = policy_yaml_str(d, f[0], item, p2, true);
        if (name && !s_token(name)) {
            policy_yaml_err(d, f[0], "%s \"%s\" is not an HTTP header name", p2, name);
            continue;
        }
        snprintf(p2, sizeof p2, "%s.value", at);
        const char *value = policy_yaml_str(d, f[1], item, p2, false);
        if (value && strlen(value) > S_MAX_VALUE) {
            policy_yaml_err(d, f[1], "%s is longer than %d characters", p2, S_MAX_VALUE);
            continue;
        }
        if (name) h[m->nheaders++] = (policy_header_match_t){name, value};
    }
    m->headers = h;
}

// "HH:MM" → minutes after midnight, or -1.
static int s_hhmm(const char *s)
{
    if (!s || strlen(s) != 5 || s[2] != ':' || strspn(s, "0123456789:") != 5) return -1;
    int h = (s[0] - '0') * 10 + (s[1] - '0'), m = (s[3] - '0') * 10 + (s[4] - '0');
    return h < 24 && m < 60 && s[0] != ':' && s[1] != ':' ? h * 60 + m : -1;
}

static void s_time(policy_doc_t *d, yaml_node_t *node, const char *base, policy_match_t *m)
{
    static const char *const fields[] = {"days", "from", "to", NULL};
    static const char *const days[] = {"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun", NULL};
    char path[160], at[200];
    snprintf(path, sizeof path, "%s.time", base);
    yaml_node_t *f[3];
    if (!policy_yaml_fields(d, node, path, fields, f)) return;
    m->days = 0x7f;
    snprintf(at, sizeof at, "%s.days", path);
    yaml_node_t *list = policy_yaml_list(d, f[0], node, at, "days (Mon..Sun)", false, 7);
    if (list) {
        m->days = 0;
        for (size_t i = 0; i < policy_yaml_len(list); i++) {
            char p2[240];
            snprintf(p2, sizeof p2, "%s[%zu]", at, i);
            int day = policy_yaml_enum(d, policy_yaml_item(d, list, i), list, p2, days, true);
            if (day < 0) continue;
            if (m->days & (1u << day))
                policy_yaml_err(d, policy_yaml_item(d, list, i), "%s \"%s\" is listed twice", p2,
                                days[day]);
            m->days |= (uint8_t)(1u << day);
        }
    }
    int minutes[2] = {-1, -1};
    for (int i = 0; i < 2; i++) {
        snprintf(at, sizeof at, "%s.%s", path, fields[i + 1]);
        const char *v = policy_yaml_str(d, f[i + 1], node, at, true);
        minutes[i] = s_hhmm(v);
        if (v && minutes[i] < 0)
            policy_yaml_err(d, f[i + 1],
                            "%s \"%s\" is not a time of day; write HH:MM (UTC), "
                            "e.g. 22:00",
                            at, v);
    }
    if (minutes[0] >= 0 && minutes[0] == minutes[1])
        policy_yaml_err(d, f[2],
                        "%s.from and .to are both %02d:%02d: the window is empty; widen "
                        "it (from > to wraps past midnight)",
                        path, minutes[0] / 60, minutes[0] % 60);
    if (minutes[0] < 0 || minutes[1] < 0 || minutes[0] == minutes[1]) return;
    m->has_time = true;
    m->from_minute = (uint16_t)minutes[0];
    m->to_minute = (uint16_t)minutes[1];
}

static void s_pool_state(policy_doc_t *d, yaml_node_t *node, const char *base, policy_match_t *m)
{
    static const char *const fields[] = {"queueDepthAbove", "kvUtilizationAbovePercent",
                                         "predictedTtftAboveSlo", NULL};
    char path[160], at[200];
    snprintf(path, sizeof path, "%s.pool", base);
    yaml_node_t *f[3];
    if (!policy_yaml_fields(d, node, path, fields, f)) return;
    snprintf(at, sizeof at, "%s.queueDepthAbove", path);
    m->has_queue_depth = f[0] && policy_yaml_uint(d, f[0], at, 0, 1000000, &m->queue_depth_above);
    snprintf(at, sizeof at, "%s.kvUtilizationAbovePercent", path);
    m->has_kv_utilization =
        f[1] && policy_yaml_uint(d, f[1], at, 0, 100, &m->kv_utilization_above_percent);
    snprintf(at, sizeof at, "%s.predictedTtftAboveSlo", path);
    bool above = false;
    if (f[2] && policy_yaml_bool(d, f[2], at, &above))
        m->predicted_ttft_above_slo = above ? POLICY_TRI_TRUE : POLICY_TRI_FALSE;
}

static void s_match(policy_doc_t *d, yaml_node_t *node, const char *base, s_rule_t *r)
{
    static const char *const fields[] = {"tenants",      "models", "labels", "headers",
                                         "promptTokens", "pool",   "time",   NULL};
    static const char *const pfields[] = {"min", "max", NULL};
    policy_match_t *m = &r->rule.match;
    m->prompt_max = UINT64_MAX;
    m->days = 0x7f;
    if (!node || policy_yaml_is_null(node)) return; // matches every request
    char path[128], at[200];
    snprintf(path, sizeof path, "%s.match", base);
    yaml_node_t *f[7];
    if (!policy_yaml_fields(d, node, path, fields, f)) return;
    snprintf(at, sizeof at, "%s.tenants", path);
    m->tenants =
        policy_yaml_words(d, f[0], node, at, S_MAX_MATCH, S_MAX_TENANT, false, &m->ntenants);
    snprintf(at, sizeof at, "%s.models", path);
    m->models = policy_yaml_words(d, f[1], node, at, S_MAX_MATCH, POLICY_YAML_MAX_MODEL, false,
                                  &m->nmodels);
    if (m->nmodels) { // the places, for reference errors at finish
        r->model_locs = policy_yaml_alloc(d->yaml, m->nmodels * sizeof *r->model_locs);
        for (size_t i = 0, j = 0; i < policy_yaml_len(f[1]) && j < m->nmodels; i++) {
            yaml_node_t *item = policy_yaml_item(d, f[1], i);
            if (item->type == YAML_SCALAR_NODE &&
                !strcmp((const char *)item->data.scalar.value, m->models[j]))
                r->model_locs[j++] = policy_yaml_loc(d, item);
        }
    }
    snprintf(at, sizeof at, "%s.labels", path);
    m->labels =
        policy_yaml_words(d, f[2], node, at, S_MAX_LABELS, POLICY_YAML_MAX_NAME, true, &m->nlabels);
    s_headers(d, f[3], node, path, m);
    yaml_node_t *p[2];
    snprintf(at, sizeof at, "%s.promptTokens", path);
    if (f[4] && policy_yaml_fields(d, f[4], at, pfields, p)) {
        char p2[240];
        snprintf(p2, sizeof p2, "%s.min", at);
        policy_yaml_uint(d, p[0], p2, 0, 10000000, &m->prompt_min);
        snprintf(p2, sizeof p2, "%s.max", at);
        policy_yaml_uint(d, p[1], p2, 0, 10000000, &m->prompt_max);
        if (m->prompt_min > m->prompt_max)
            policy_yaml_err(d, p[1], "%s.min (%llu) is above .max (%llu); no prompt matches", at,
                            (unsigned long long)m->prompt_min, (unsigned long long)m->prompt_max);
    }
    if (f[5]) s_pool_state(d, f[5], path, m);
    if (f[6]) s_time(d, f[6], path, m);
}

// ---- reading: actions -------------------------------------------------------------------------

static const char *s_ref(policy_doc_t *d, yaml_node_t *node, yaml_node_t *parent, const char *base,
                         const char *field, bool required, policy_loc_t *loc)
{
    char at[200];
    snprintf(at, sizeof at, "%s.%s", base, field);
    *loc = policy_yaml_loc(d, node ? node : parent);
    return required ? policy_yaml_name(d, node, parent, at)
                    : policy_yaml_opt_name(d, node, parent, at);
}

static const char *s_reason(policy_doc_t *d, yaml_node_t *node, yaml_node_t *parent,
                            const char *path)
{
    const char *reason = policy_yaml_str(d, node, parent, path, true);
    if (reason && strlen(reason) > S_MAX_REASON) {
        policy_yaml_err(d, node, "%s is longer than %d characters; shorten it", path, S_MAX_REASON);
        return NULL;
    }
    return reason;
}

static void s_route(policy_doc_t *d, yaml_node_t *node, const char *path, s_rule_t *r)
{
    static const char *const fields[] = {"pool", "targets", NULL};
    yaml_node_t *f[2];
    if (!policy_yaml_fields(d, node, path, fields, f)) return;
    r->rule.pool = s_ref(d, f[0], node, path, "pool", true, &r->pool_loc);
    char at[200];
    snprintf(at, sizeof at, "%s.targets", path);
    r->rule.targets =
        policy_yaml_words(d, f[1], node, at, 64, POLICY_YAML_MAX_NAME, true, &r->rule.ntargets);
    if (!r->rule.ntargets) return;
    r->target_locs = policy_yaml_alloc(d->yaml, r->rule.ntargets * sizeof *r->target_locs);
    for (size_t i = 0, j = 0; i < policy_yaml_len(f[1]) && j < r->rule.ntargets; i++) {
        yaml_node_t *item = policy_yaml_item(d, f[1], i);
        if (item->type == YAML_SCALAR_NODE &&
            !strcmp((const char *)item->data.scalar.value, r->rule.targets[j]))
            r->target_locs[j++] = policy_yaml_loc(d, item);
    }
}

static void s_prefer(policy_doc_t *d, yaml_node_t *node, const char *path, s_rule_t *r)
{
    static const char *const fields[] = {"pool", "target", "unlessHolderPredictsLowerTtft", NULL};
    yaml_node_t *f[3];
    if (!policy_yaml_fields(d, node, path, fields, f)) return;
    r->rule.pool = s_ref(d, f[0], node, path, "pool", true, &r->pool_loc);
    r->rule.target = s_ref(d, f[1], node, path, "target", true, &r->target_loc);
    r->rule.unless_holder =
        s_ref(d, f[2], node, path, "unlessHolderPredictsLowerTtft", false, &r->unless_loc);
    if (r->rule.target && r->rule.unless_holder && !strcmp(r->rule.target, r->rule.unless_holder))
        policy_yaml_err(d, f[2],
                        "%s.unlessHolderPredictsLowerTtft names the preferred target "
                        "\"%s\" itself; name another target of the pool",
                        path, r->rule.target);
}

static void s_spill(policy_doc_t *d, yaml_node_t *node, const char *path, s_rule_t *r)
{
    static const char *const fields[] = {"provider", "whilePredictedTtftAboveSlo", "hysteresis",
                                         NULL};
    static const char *const hfields[] = {"enterAbovePercent", "exitBelowPercent", "minHoldMs",
                                          NULL};
    yaml_node_t *f[3], *h[3];
    if (!policy_yaml_fields(d, node, path, fields, f)) return;
    r->rule.provider = s_ref(d, f[0], node, path, "provider", true, &r->provider_loc);
    char at[200], p2[240];
    r->rule.while_above_slo = true;
    snprintf(at, sizeof at, "%s.whilePredictedTtftAboveSlo", path);
    policy_yaml_bool(d, f[1], at, &r->rule.while_above_slo);
    r->rule.enter_percent = 100;
    r->rule.exit_percent = 80;
    r->rule.min_hold_ms = 5000;
    snprintf(at, sizeof at, "%s.hysteresis", path);
    if (!f[2] || !policy_yaml_fields(d, f[2], at, hfields, h)) return;
    snprintf(p2, sizeof p2, "%s.enterAbovePercent", at);
    policy_yaml_uint(d, h[0], p2, 1, 1000, &r->rule.enter_percent);
    snprintf(p2, sizeof p2, "%s.exitBelowPercent", at);
    policy_yaml_uint(d, h[1], p2, 1, 1000, &r->rule.exit_percent);
    snprintf(p2, sizeof p2, "%s.minHoldMs", at);
    policy_yaml_uint(d, h[2], p2, 0, 3600000, &r->rule.min_hold_ms);
    if (r->rule.exit_percent >= r->rule.enter_percent)
        policy_yaml_err(d, h[1] ? h[1] : f[2],
                        "%s.exitBelowPercent (%llu) must be below enterAbovePercent (%llu), or "
                        "spilling flaps",
                        at, (unsigned long long)r->rule.exit_percent,
                        (unsigned long long)r->rule.enter_percent);
}

static void s_simple_action(policy_doc_t *d, yaml_node_t *node, const char *path, s_rule_t *r)
{
    static const char *const kfields[] = {"reason", NULL};
    static const char *const rfields[] = {"status", "reason", NULL};
    static const char *const afields[] = {"maxUtilizationPercent", NULL};
    yaml_node_t *f[2];
    char at[200];
    switch (r->rule.action) {
    case POLICY_ACTION_KEEP_LOCAL:
        if (!policy_yaml_fields(d, node, path, kfields, f)) return;
        snprintf(at, sizeof at, "%s.reason", path);
        r->rule.reason = s_reason(d, f[0], node, at);
        break;
    case POLICY_ACTION_REJECT:
        if (!policy_yaml_fields(d, node, path, rfields, f)) return;
        r->rule.status = 503;
        snprintf(at, sizeof at, "%s.status", path);
        policy_yaml_uint(d, f[0], at, 400, 599, &r->rule.status);
        snprintf(at, sizeof at, "%s.reason", path);
        r->rule.reason = s_reason(d, f[1], node, at);
        break;
    default: // admitBatch
        if (!policy_yaml_fields(d, node, path, afields, f)) return;
        snprintf(at, sizeof at, "%s.maxUtilizationPercent", path);
        if (!f[0])
            policy_yaml_err(d, node, "%s is required (1..100)", at);
        else
            policy_yaml_uint(d, f[0], at, 1, 100, &r->rule.max_utilization_percent);
        break;
    }
}

static void s_rule(policy_doc_t *d, yaml_node_t *item, size_t index, const s_policy_t *pol,
                   s_rule_t *r)
{
    static const char *const fields[] = {"name",      "match",  "route",      "prefer", "spill",
                                         "keepLocal", "reject", "admitBatch", NULL};
    yaml_node_t *f[8];
    char base[64], at[96];
    snprintf(base, sizeof base, "spec.rules[%zu]", index);
    *r = (s_rule_t){.rule = {.policy = pol->name, .priority = pol->priority, .index = index},
                    .policy_file = d->file};
    if (!policy_yaml_fields(d, item, base, fields, f)) return;
    snprintf(at, sizeof at, "%s.name", base);
    r->rule.name = policy_yaml_name(d, f[0], item, at);
    r->rule.loc = policy_yaml_loc(d, f[0] ? f[0] : item);
    s_match(d, f[1], base, r);
    size_t given = 0, first = 0;
    char names[128] = "";
    for (size_t a = 0; s_actions[a]; a++)
        if (f[2 + a]) {
            if (!given++) first = a;
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s",
                     given > 1 ? ", " : "", s_actions[a]);
        }
    if (given != 1) {
        if (given == 0)
            policy_yaml_err(d, item,
                            "%s has no action; give exactly one of route, prefer, "
                            "spill, keepLocal, reject, admitBatch",
                            base);
        else
            policy_yaml_err(d, f[2 + first],
                            "%s has %zu actions (%s); a rule has exactly one: "
                            "split it into several rules",
                            base, given, names);
        r->rule.name = NULL; // not compiled
        return;
    }
    r->rule.action = (policy_action_t)first;
    snprintf(at, sizeof at, "%s.%s", base, s_actions[first]);
    yaml_node_t *node = f[2 + first];
    switch (r->rule.action) {
    case POLICY_ACTION_ROUTE:
        s_route(d, node, at, r);
        break;
    case POLICY_ACTION_PREFER:
        s_prefer(d, node, at, r);
        break;
    case POLICY_ACTION_SPILL:
        s_spill(d, node, at, r);
        break;
    default:
        s_simple_action(d, node, at, r);
        break;
    }
}

// ---- reading: aliases and limits --------------------------------------------------------------

static void s_alias(policy_doc_t *d, yaml_node_t *item, size_t index, const s_policy_t *pol,
                    s_alias_t *a)
{
    static const char *const fields[] = {"name", "targets", "failover", NULL};
    static const char *const tfields[] = {"model", "pool", "weight", NULL};
    yaml_node_t *f[3];
    char base[64], at[96], p2[160];
    snprintf(base, sizeof base, "spec.aliases[%zu]", index);
    *a = (s_alias_t){.alias = {.policy = pol->name}, .index = index};
    if (!policy_yaml_fields(d, item, base, fields, f)) return;
    snprintf(at, sizeof at, "%s.name", base);
    a->alias.name = policy_yaml_model(d, f[0], item, at);
    a->alias.loc = policy_yaml_loc(d, f[0] ? f[0] : item);
    snprintf(at, sizeof at, "%s.targets", base);
    yaml_node_t *list = policy_yaml_list(d, f[1], item, at, "targets ({model | pool, weight})",
                                         true, S_MAX_ALIAS_TARGETS);
    if (list) {
        size_t n = policy_yaml_len(list);
        policy_alias_target_t *t = policy_yaml_alloc(d->yaml, n * sizeof *t);
        a->target_locs = policy_yaml_alloc(d->yaml, n * sizeof *a->target_locs);
        for (size_t i = 0; i < n; i++) {
            yaml_node_t *ti = policy_yaml_item(d, list, i), *tf[3];
            snprintf(p2, sizeof p2, "%s[%zu]", at, i);
            if (!policy_yaml_fields(d, ti, p2, tfields, tf)) continue;
            if (!!tf[0] == !!tf[1]) {
                policy_yaml_err(d, ti, "%s names %s; give exactly one of model and pool", p2,
                                tf[0] ? "both model and pool" : "neither model nor pool");
                continue;
            }
            char p3[200];
            snprintf(p3, sizeof p3, "%s.%s", p2, tf[0] ? "model" : "pool");
            const char *name =
                tf[0] ? policy_yaml_model(d, tf[0], ti, p3) : policy_yaml_name(d, tf[1], ti, p3);
            uint64_t weight = 1;
            snprintf(p3, sizeof p3, "%s.weight", p2);
            policy_yaml_uint(d, tf[2], p3, 1, 1000, &weight);
            if (!name) continue;
            a->target_locs[a->alias.ntargets] = policy_yaml_loc(d, tf[0] ? tf[0] : tf[1]);
            t[a->alias.ntargets++] = (policy_alias_target_t){
                tf[0] ? POLICY_ALIAS_MODEL : POLICY_ALIAS_POOL, name, (uint32_t)weight};
        }
        a->alias.targets = t;
    }
    snprintf(at, sizeof at, "%s.failover", base);
    a->alias.failover = policy_yaml_words(d, f[2], item, at, S_MAX_ALIAS_TARGETS,
                                          POLICY_YAML_MAX_MODEL, false, &a->alias.nfailover);
    if (a->alias.nfailover) {
        a->failover_locs = policy_yaml_alloc(d->yaml, a->alias.nfailover * sizeof(policy_loc_t));
        for (size_t i = 0, j = 0; i < policy_yaml_len(f[2]) && j < a->alias.nfailover; i++) {
            yaml_node_t *fi = policy_yaml_item(d, f[2], i);
            if (fi->type == YAML_SCALAR_NODE &&
                !strcmp((const char *)fi->data.scalar.value, a->alias.failover[j]))
                a->failover_locs[j++] = policy_yaml_loc(d, fi);
        }
    }
}

// spec.limits[].costPerDayUsd: a decimal number of US dollars > 0 (at most 10^9), as micros.
static bool s_usd(policy_doc_t *d, yaml_node_t *node, const char *path, uint64_t *micros)
{
    if (!node || policy_yaml_is_null(node)) return true;
    const char *v = node->type == YAML_SCALAR_NODE ? (const char *)node->data.scalar.value : "";
    char *end = NULL;
    double usd = *v ? strtod(v, &end) : 0;
    if (!*v || *end || !(usd >= 0.000001 && usd <= 1e9)) {
        policy_yaml_err(d, node,
                        "%s must be a number of US dollars from 0.000001 to 1000000000 "
                        "(e.g. 25 or 12.5), got \"%s\"",
                        path, node->type == YAML_SCALAR_NODE ? v : policy_yaml_what(node));
        return false;
    }
    *micros = (uint64_t)(usd * 1e6 + 0.5);
    return true;
}

static void s_limit(policy_doc_t *d, yaml_node_t *item, size_t index, const s_policy_t *pol,
                    s_limit_t *l)
{
    static const char *const fields[] = {"tenant",
                                         "requestsPerMinute",
                                         "inputTokensPerMinute",
                                         "outputTokensPerMinute",
                                         "concurrentRequests",
                                         "weight",
                                         "priority",
                                         "costPerDayUsd",
                                         NULL};
    static const char *const priorities[] = {"interactive", "standard", "batch", NULL};
    static const uint64_t max[] = {0, 1000000000ull, 1000000000000ull, 1000000000000ull,
                                   1000000ull};
    yaml_node_t *f[8];
    char base[64], at[128];
    snprintf(base, sizeof base, "spec.limits[%zu]", index);
    *l = (s_limit_t){.limit = {.policy = pol->name, .weight = 1, .priority = "standard"},
                     .index = index};
    if (!policy_yaml_fields(d, item, base, fields, f)) return;
    snprintf(at, sizeof at, "%s.tenant", base);
    const char *tenant =
        policy_yaml_word(d, f[0], item, at, true, S_MAX_TENANT, "a tenant (or \"*\")");
    uint64_t *values[] = {NULL, &l->limit.requests_per_minute, &l->limit.input_tokens_per_minute,
                          &l->limit.output_tokens_per_minute, &l->limit.concurrent_requests};
    bool any = false, ok = true;
    for (size_t i = 1; i < 5; i++) {
        snprintf(at, sizeof at, "%s.%s", base, fields[i]);
        ok &= policy_yaml_uint(d, f[i], at, 1, max[i], values[i]);
        any |= f[i] != NULL;
    }
    snprintf(at, sizeof at, "%s.weight", base);
    ok &= policy_yaml_uint(d, f[5], at, 1, 1000, &l->limit.weight);
    snprintf(at, sizeof at, "%s.priority", base);
    int prio = policy_yaml_enum(d, f[6], item, at, priorities, false);
    if (prio >= 0) l->limit.priority = priorities[prio];
    ok &= prio >= 0 || !f[6];
    snprintf(at, sizeof at, "%s.costPerDayUsd", base);
    ok &= s_usd(d, f[7], at, &l->limit.cost_per_day_micros);
    for (size_t i = 5; i < 8; i++) any |= f[i] != NULL;
    if (!any && tenant)
        policy_yaml_err(d, item,
                        "%s (tenant \"%s\") sets no limit; give at least one of "
                        "requestsPerMinute, inputTokensPerMinute, "
                        "outputTokensPerMinute, concurrentRequests, costPerDayUsd, weight, "
                        "priority",
                        base, tenant);
    if (!any || !ok) return;
    l->limit.tenant = tenant;
    l->limit.loc = policy_yaml_loc(d, f[0] ? f[0] : item);
}

// Reads each item of an optional list (at most max) with `read`, keeping the named ones.
#define S_READ_LIST(d, node, spec, path, what, maxn, pol, arr, n, cap, read, named)                \
    do {                                                                                           \
        yaml_node_t *list_ = policy_yaml_list(d, node, spec, path, what, false, maxn);             \
        for (size_t i_ = 0; list_ && i_ < policy_yaml_len(list_); i_++) {                          \
            policy_yaml_reserve((void **)&(arr), &(cap), n, sizeof *(arr));                        \
            read(d, policy_yaml_item(d, list_, i_), i_, pol, &(arr)[n]);                           \
            if ((arr)[n].named) (n)++;                                                             \
        }                                                                                          \
    } while (0)

// spec.cacheIsolation: {tenants: [tenant or "*", ...]}, added to the policies' list.
static void s_isolation(policy_rules_t *self, policy_doc_t *d, yaml_node_t *node)
{
    static const char *const fields[] = {"tenants", NULL};
    yaml_node_t *f[1];
    if (!policy_yaml_fields(d, node, "spec.cacheIsolation", fields, f)) return;
    size_t n = 0;
    const char **tenants = policy_yaml_words(d, f[0], node, "spec.cacheIsolation.tenants",
                                             POLICY_MAX_ISOLATED, S_MAX_TENANT, false, &n);
    if (!f[0])
        policy_yaml_err(d, node,
                        "spec.cacheIsolation needs tenants: the tenants whose prompts "
                        "are cached apart, or [\"*\"] for every tenant");
    for (size_t i = 0; tenants && i < n; i++) {
        policy_yaml_reserve((void **)&self->isolated, &self->cap_isolated, self->nisolated,
                            sizeof *self->isolated);
        self->isolated[self->nisolated++] = tenants[i];
    }
}

void policy_rules_add(policy_rules_t *self, policy_doc_t *d, yaml_node_t *spec,
                      yaml_node_t *name_node)
{
    static const char *const fields[] = {"priority", "rules",          "aliases", "limits",
                                         "labels",   "cacheIsolation", NULL};
    yaml_node_t *f[6];
    if (!policy_yaml_fields(d, spec, "spec", fields, f)) return;
    s_policy_t pol = {.name = d->name, .loc = policy_yaml_loc(d, name_node)};
    policy_yaml_int(d, f[0], "spec.priority", -1000000, 1000000, &pol.priority);
    size_t first_rule = self->nrules;
    S_READ_LIST(d, f[1], spec, "spec.rules", "rules ({name, match, <action>})", POLICY_MAX_RULES,
                &pol, self->rules, self->nrules, self->cap_rules, s_rule, rule.name);
    S_READ_LIST(d, f[2], spec, "spec.aliases", "aliases ({name, targets, failover})",
                POLICY_MAX_ALIASES, &pol, self->aliases, self->naliases, self->cap_aliases, s_alias,
                alias.name);
    S_READ_LIST(d, f[3], spec, "spec.limits", "limits ({tenant, requestsPerMinute, ...})",
                POLICY_MAX_LIMITS, &pol, self->limits, self->nlimits, self->cap_limits, s_limit,
                limit.tenant);
    // Rule names are unique within a policy.
    for (size_t i = first_rule; i < self->nrules; i++)
        for (size_t j = first_rule; j < i; j++)
            if (!strcmp(self->rules[i].rule.name, self->rules[j].rule.name)) {
                policy_yaml_report(self->yaml, false, &self->rules[i].rule.loc, S_KIND, d->name,
                                   "spec.rules[%zu].name \"%s\" is already used by "
                                   "spec.rules[%zu] (line %zu); rule names are unique in a "
                                   "policy",
                                   self->rules[i].rule.index, self->rules[i].rule.name,
                                   self->rules[j].rule.index, self->rules[j].rule.loc.line);
                break;
            }
    if (f[4]) policy_labels_add(self->labels, d, f[4]);
    if (f[5]) s_isolation(self, d, f[5]);
    if (!f[1] && !f[2] && !f[3] && !f[4] && !f[5])
        policy_yaml_warn(d, spec,
                         "spec has no rules, aliases, limits, labels or "
                         "cacheIsolation; it changes nothing");
    policy_yaml_reserve((void **)&self->policies, &self->cap_policies, self->npolicies,
                        sizeof *self->policies);
    self->policies[self->npolicies++] = pol;
}

// ---- finish: order ----------------------------------------------------------------------------

static int s_rule_cmp(const void *pa, const void *pb)
{
    const policy_rule_t *a = &((const s_rule_t *)pa)->rule, *b = &((const s_rule_t *)pb)->rule;
    if (a->priority != b->priority) return a->priority > b->priority ? -1 : 1;
    int c = strcmp(a->policy, b->policy);
    if (c) return c;
    return a->index < b->index ? -1 : a->index > b->index;
}

static int s_alias_cmp(const void *pa, const void *pb)
{
    const s_alias_t *a = pa, *b = pb;
    int c = strcmp(a->alias.name, b->alias.name);
    if (c) return c;
    c = strcmp(a->alias.policy, b->alias.policy);
    return c ? c : (a->index < b->index ? -1 : a->index > b->index);
}

static int s_str_cmp(const void *pa, const void *pb)
{
    return strcmp(*(const char *const *)pa, *(const char *const *)pb);
}

static int s_limit_cmp(const void *pa, const void *pb)
{
    const s_limit_t *a = pa, *b = pb;
    int c = strcmp(a->limit.tenant, b->limit.tenant);
    if (c) return c;
    c = strcmp(a->limit.policy, b->limit.policy);
    return c ? c : (a->index < b->index ? -1 : a->index > b->index);
}

// ---- finish: references -----------------------------------------------------------------------

typedef struct {
    policy_rules_t *self;
    const policy_pool_t *pools;
    size_t npools;
    const policy_remote_t *remote;
    const char **pool_names, **models; // for hints
    const char **providers;
} s_world_t;

static const policy_pool_t *s_pool(const s_world_t *w, const char *name)
{
    return policy_yaml_find(w->pools, w->npools, sizeof *w->pools, offsetof(policy_pool_t, name),
                            name);
}

static const policy_pool_t *s_pool_of_model(const s_world_t *w, const char *model)
{
    return policy_yaml_find(w->pools, w->npools, sizeof *w->pools, offsetof(policy_pool_t, model),
                            model);
}

static const s_alias_t *s_alias_named(const s_world_t *w, const char *name)
{
    return policy_yaml_find(w->self->aliases, w->self->naliases, sizeof *w->self->aliases,
                            offsetof(s_alias_t, alias.name), name);
}

static const policy_target_t *s_target(const policy_pool_t *pool, const char *name)
{
    return policy_yaml_find(pool->targets, pool->ntargets, sizeof *pool->targets,
                            offsetof(policy_target_t, name), name);
}

static void s_rule_err(s_world_t *w, const s_rule_t *r, const policy_loc_t *loc, const char *fmt,
                       ...) __attribute__((format(printf, 4, 5)));
static void s_rule_err(s_world_t *w, const s_rule_t *r, const policy_loc_t *loc, const char *fmt,
                       ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *msg = NULL;
    if (vasprintf(&msg, fmt, ap) < 0) abort();
    va_end(ap);
    policy_yaml_report(w->self->yaml, false, loc, S_KIND, r->rule.policy, "spec.rules[%zu].%s",
                       r->rule.index, msg);
    free(msg);
}

// A pool named by a rule: it must exist.
static const policy_pool_t *s_rule_pool(s_world_t *w, const s_rule_t *r, const char *action)
{
    const policy_pool_t *pool = s_pool(w, r->rule.pool);
    if (!pool) {
        char hint[768];
        s_rule_err(w, r, &r->pool_loc, "%s.pool \"%s\" does not exist%s", action, r->rule.pool,
                   policy_yaml_hint(hint, sizeof hint, r->rule.pool, w->pool_names, w->npools));
    }
    return pool;
}

static void s_rule_target(s_world_t *w, const s_rule_t *r, const policy_pool_t *pool,
                          const char *path, const char *name, const policy_loc_t *loc)
{
    if (s_target(pool, name)) return;
    const char **known = policy_yaml_names(w->self->yaml, pool->targets, pool->ntargets,
                                           sizeof *pool->targets, offsetof(policy_target_t, name));
    char hint[768];
    s_rule_err(w, r, loc, "%s \"%s\" is not a target of InferencePool \"%s\"%s", path, name,
               pool->name, policy_yaml_hint(hint, sizeof hint, name, known, pool->ntargets));
}

static void s_check_rule(s_world_t *w, const s_rule_t *r)
{
    const policy_rule_t *rule = &r->rule;
    for (size_t i = 0; i < rule->match.nmodels; i++) {
        const char *m = rule->match.models[i];
        if (s_pool_of_model(w, m) || s_alias_named(w, m)) continue;
        char hint[768];
        s_rule_err(w, r, &r->model_locs[i],
                   "match.models[%zu] \"%s\" is neither a pool's model nor an alias%s", i, m,
                   policy_yaml_hint(hint, sizeof hint, m, w->models, w->npools));
    }
    const policy_pool_t *pool = NULL;
    char path[64];
    switch (rule->action) {
    case POLICY_ACTION_ROUTE:
        if (!rule->pool || !(pool = s_rule_pool(w, r, "route"))) break;
        for (size_t i = 0; i < rule->ntargets; i++) {
            snprintf(path, sizeof path, "route.targets[%zu]", i);
            s_rule_target(w, r, pool, path, rule->targets[i], &r->target_locs[i]);
        }
        break;
    case POLICY_ACTION_PREFER:
        if (!rule->pool || !(pool = s_rule_pool(w, r, "prefer"))) break;
        if (rule->target) s_rule_target(w, r, pool, "prefer.target", rule->target, &r->target_loc);
        if (rule->unless_holder)
            s_rule_target(w, r, pool, "prefer.unlessHolderPredictsLowerTtft", rule->unless_holder,
                          &r->unless_loc);
        break;
    case POLICY_ACTION_SPILL:
        if (rule->provider && !policy_remote_find_provider(w->remote, rule->provider)) {
            char hint[768];
            s_rule_err(w, r, &r->provider_loc, "spill.provider \"%s\" does not exist%s",
                       rule->provider,
                       policy_yaml_hint(hint, sizeof hint, rule->provider, w->providers,
                                        policy_remote_nproviders(w->remote)));
        }
        // Matching only above the SLO, the rule never sees the predicted TTFT fall below the
        // exit threshold: requests below the SLO skip it, so spilling stops at 100%, not at
        // exitBelowPercent, and flaps around the SLO.
        if (rule->while_above_slo && rule->match.predicted_ttft_above_slo == POLICY_TRI_TRUE)
            policy_yaml_report(w->self->yaml, true, &rule->loc, S_KIND, rule->policy,
                               "spec.rules[%zu] spills with hysteresis but matches only while "
                               "pool.predictedTtftAboveSlo: below the SLO it does not match, so "
                               "the exit threshold is never used; remove "
                               "match.pool.predictedTtftAboveSlo",
                               rule->index);
        break;
    default:
        break;
    }
}

// ---- finish: shadowed rules -------------------------------------------------------------------

static bool s_in(const char *const *list, size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(list[i], s)) return true;
    return false;
}

// Every entry of `sub` is in `super`.
static bool s_subset(const char *const *sub, size_t nsub, const char *const *super, size_t nsuper)
{
    for (size_t i = 0; i < nsub; i++)
        if (!s_in(super, nsuper, sub[i])) return false;
    return true;
}

// An "any of" list: absent in `a`, or a superset of `b`'s non-empty list.
static bool s_any_covers(const char *const *a, size_t na, const char *const *b, size_t nb)
{
    return na == 0 || (nb > 0 && s_subset(b, nb, a, na));
}

static bool s_header_required(const policy_match_t *m, const policy_header_match_t *h)
{
    for (size_t i = 0; i < m->nheaders; i++)
        if (!strcasecmp(m->headers[i].name, h->name) &&
            (!h->value || (m->headers[i].value && !strcmp(m->headers[i].value, h->value))))
            return true;
    return false;
}

bool policy_rules_covers(const policy_match_t *a, const policy_match_t *b)
{
    if (!s_any_covers(a->tenants, a->ntenants, b->tenants, b->ntenants)) return false;
    if (!s_any_covers(a->models, a->nmodels, b->models, b->nmodels)) return false;
    if (!s_subset(a->labels, a->nlabels, b->labels, b->nlabels)) return false; // all of
    for (size_t i = 0; i < a->nheaders; i++)
        if (!s_header_required(b, &a->headers[i])) return false;
    if (a->prompt_min > b->prompt_min || a->prompt_max < b->prompt_max) return false;
    // "queue > x" covers "queue > y" when x <= y; the same for KV utilization.
    if (a->has_queue_depth && (!b->has_queue_depth || a->queue_depth_above > b->queue_depth_above))
        return false;
    if (a->has_kv_utilization && (!b->has_kv_utilization || a->kv_utilization_above_percent >
                                                                b->kv_utilization_above_percent))
        return false;
    if (a->predicted_ttft_above_slo != POLICY_TRI_UNSET &&
        a->predicted_ttft_above_slo != b->predicted_ttft_above_slo)
        return false;
    if (a->has_time && (!b->has_time || a->days != b->days || a->from_minute != b->from_minute ||
                        a->to_minute != b->to_minute))
        return false;
    return true;
}

static void s_check_shadowed(s_world_t *w)
{
    policy_rules_t *self = w->self;
    for (size_t i = 0; i < self->nrules; i++)
        for (size_t j = 0; j < i; j++) {
            const s_rule_t *later = &self->rules[i], *earlier = &self->rules[j];
            if (!policy_rules_covers(&earlier->rule.match, &later->rule.match)) continue;
            char of[160] = "";
            if (strcmp(earlier->rule.policy, later->rule.policy))
                snprintf(of, sizeof of, " of InferencePolicy \"%s\"", earlier->rule.policy);
            policy_yaml_report(self->yaml, false, &later->rule.loc, S_KIND, later->rule.policy,
                               "spec.rules[%zu]: rule \"%s\" can never match: rule \"%s\"%s "
                               "(%s:%zu) matches everything it does; remove it, narrow \"%s\", "
                               "or move it before \"%s\"",
                               later->rule.index, later->rule.name, earlier->rule.name, of,
                               earlier->rule.loc.file, earlier->rule.loc.line, earlier->rule.name,
                               earlier->rule.name);
            break;
        }
}

// ---- finish: aliases --------------------------------------------------------------------------

enum { S_MODELS = 1, S_ALIASES = 2, S_POOLS = 4 }; // what a name may be

static void s_alias_err(s_world_t *w, const s_alias_t *a, const policy_loc_t *loc, const char *path,
                        const char *name, const char *what, int may_be)
{
    char hint[768];
    size_t n = w->npools * 2 + w->self->naliases, k = 0;
    const char **known = policy_yaml_alloc(w->self->yaml, (n + 1) * sizeof *known);
    for (size_t i = 0; i < w->npools && (may_be & S_MODELS); i++)
        known[k++] = w->pools[i].model;
    for (size_t i = 0; i < w->self->naliases && (may_be & S_ALIASES); i++)
        known[k++] = w->self->aliases[i].alias.name;
    for (size_t i = 0; i < w->npools && (may_be & S_POOLS); i++)
        known[k++] = w->pools[i].name;
    policy_yaml_report(w->self->yaml, false, loc, S_KIND, a->alias.policy,
                       "spec.aliases[%zu].%s \"%s\" %s%s", a->index, path, name, what,
                       policy_yaml_hint(hint, sizeof hint, name, known, k));
}

static void s_check_alias(s_world_t *w, const s_alias_t *a)
{
    const policy_pool_t *clash = s_pool_of_model(w, a->alias.name);
    if (clash)
        policy_yaml_report(w->self->yaml, false, &a->alias.loc, S_KIND, a->alias.policy,
                           "spec.aliases[%zu].name \"%s\" is the model of InferencePool \"%s\" "
                           "(%s:%zu); an alias needs a name of its own",
                           a->index, a->alias.name, clash->name, clash->model_loc.file,
                           clash->model_loc.line);
    for (size_t i = 0; i < a->alias.ntargets; i++) {
        const policy_alias_target_t *t = &a->alias.targets[i];
        char path[64];
        snprintf(path, sizeof path, "targets[%zu].%s", i,
                 t->kind == POLICY_ALIAS_MODEL ? "model" : "pool");
        bool ok = t->kind == POLICY_ALIAS_POOL
                      ? s_pool(w, t->name) != NULL
                      : s_pool_of_model(w, t->name) || s_alias_named(w, t->name);
        if (!ok)
            s_alias_err(w, a, &a->target_locs[i], path, t->name,
                        t->kind == POLICY_ALIAS_POOL ? "is not an InferencePool"
                                                     : "is neither a pool's model nor an alias",
                        t->kind == POLICY_ALIAS_POOL ? S_POOLS : S_MODELS | S_ALIASES);
    }
    for (size_t i = 0; i < a->alias.nfailover; i++) {
        const char *name = a->alias.failover[i];
        if (s_pool_of_model(w, name) || s_alias_named(w, name) || s_pool(w, name)) continue;
        char path[64];
        snprintf(path, sizeof path, "failover[%zu]", i);
        s_alias_err(w, a, &a->failover_locs[i], path, name,
                    "is not a pool's model, an alias or a pool", S_MODELS | S_ALIASES | S_POOLS);
    }
}

// Depth-first search along alias → alias edges (model targets and failover names); reports
// each cycle once, where it closes: "a → b → a".
static bool s_cycle(s_world_t *w, s_alias_t *a, s_alias_t **path, size_t depth)
{
    if (a->color == 2) return false;
    if (a->color == 1) {
        size_t start = 0;
        while (path[start] != a)
            start++;
        char text[1024] = "";
        for (size_t i = start; i < depth; i++)
            snprintf(text + strlen(text), sizeof text - strlen(text), "%s → ", path[i]->alias.name);
        snprintf(text + strlen(text), sizeof text - strlen(text), "%s", a->alias.name);
        const s_alias_t *last = path[depth - 1];
        policy_yaml_report(w->self->yaml, false, &last->alias.loc, S_KIND, last->alias.policy,
                           "spec.aliases[%zu] (\"%s\") is part of an alias cycle: %s; an alias "
                           "must resolve to pools, break the cycle",
                           last->index, last->alias.name, text);
        return true;
    }
    a->color = 1;
    path[depth] = a;
    bool found = false;
    size_t n = a->alias.ntargets + a->alias.nfailover;
    for (size_t i = 0; i < n && !found; i++) {
        const char *next =
            i < a->alias.ntargets
                ? (a->alias.targets[i].kind == POLICY_ALIAS_MODEL ? a->alias.targets[i].name : NULL)
                : a->alias.failover[i - a->alias.ntargets];
        s_alias_t *b = next ? (s_alias_t *)s_alias_named(w, next) : NULL;
        if (b) found = s_cycle(w, b, path, depth + 1);
    }
    a->color = 2;
    return found;
}

// ---- finish -----------------------------------------------------------------------------------

void policy_rules_finish(policy_rules_t *self, const policy_pool_t *pools, size_t npools,
                         const policy_remote_t *remote)
{
    s_world_t w = {.self = self, .pools = pools, .npools = npools, .remote = remote};
    w.pool_names =
        policy_yaml_names(self->yaml, pools, npools, sizeof *pools, offsetof(policy_pool_t, name));
    w.models =
        policy_yaml_names(self->yaml, pools, npools, sizeof *pools, offsetof(policy_pool_t, model));
    size_t nprov = policy_remote_nproviders(remote);
    w.providers = policy_yaml_alloc(self->yaml, (nprov + 1) * sizeof *w.providers);
    for (size_t i = 0; i < nprov; i++)
        w.providers[i] = policy_remote_provider(remote, i)->name;

    policy_yaml_unique(self->yaml, S_KIND, self->policies, self->npolicies, sizeof *self->policies,
                       offsetof(s_policy_t, name), offsetof(s_policy_t, loc));
    if (self->nrules) qsort(self->rules, self->nrules, sizeof *self->rules, s_rule_cmp);
    if (self->naliases) qsort(self->aliases, self->naliases, sizeof *self->aliases, s_alias_cmp);
    if (self->nlimits) qsort(self->limits, self->nlimits, sizeof *self->limits, s_limit_cmp);

    for (size_t i = 0; i < self->nrules; i++)
        s_check_rule(&w, &self->rules[i]);
    s_check_shadowed(&w);

    for (size_t i = 1; i < self->naliases; i++) { // sorted by name: duplicates are adjacent
        const s_alias_t *a = &self->aliases[i], *b = &self->aliases[i - 1];
        if (!strcmp(a->alias.name, b->alias.name))
            policy_yaml_report(self->yaml, false, &a->alias.loc, S_KIND, a->alias.policy,
                               "spec.aliases[%zu].name \"%s\" is already an alias of "
                               "InferencePolicy \"%s\" (%s:%zu); alias names are unique",
                               a->index, a->alias.name, b->alias.policy, b->alias.loc.file,
                               b->alias.loc.line);
    }
    for (size_t i = 0; i < self->naliases; i++)
        s_check_alias(&w, &self->aliases[i]);
    if (self->naliases) {
        s_alias_t **path = calloc(self->naliases + 1, sizeof *path);
        if (!path) abort();
        for (size_t i = 0; i < self->naliases; i++)
            s_cycle(&w, &self->aliases[i], path, 0);
        free(path);
    }
    for (size_t i = 1; i < self->nlimits; i++) {
        const s_limit_t *a = &self->limits[i], *b = &self->limits[i - 1];
        if (!strcmp(a->limit.tenant, b->limit.tenant))
            policy_yaml_report(self->yaml, false, &a->limit.loc, S_KIND, a->limit.policy,
                               "spec.limits[%zu].tenant \"%s\" already has limits in "
                               "InferencePolicy \"%s\" (%s:%zu); give each tenant one entry",
                               a->index, a->limit.tenant, b->limit.policy, b->limit.loc.file,
                               b->limit.loc.line);
    }
    if (self->nisolated) { // several policies may list a tenant: once each, in order
        qsort(self->isolated, self->nisolated, sizeof *self->isolated, s_str_cmp);
        size_t k = 0;
        for (size_t i = 0; i < self->nisolated; i++)
            if (!k || strcmp(self->isolated[i], self->isolated[k - 1]))
                self->isolated[k++] = self->isolated[i];
        self->nisolated = k;
    }
    policy_labels_finish(self->labels);
}

size_t policy_rules_nrules(const policy_rules_t *self)
{
    return self->nrules;
}

const policy_rule_t *policy_rules_rule(const policy_rules_t *self, size_t i)
{
    return i < self->nrules ? &self->rules[i].rule : NULL;
}

size_t policy_rules_naliases(const policy_rules_t *self)
{
    return self->naliases;
}

const policy_alias_t *policy_rules_alias(const policy_rules_t *self, size_t i)
{
    return i < self->naliases ? &self->aliases[i].alias : NULL;
}

size_t policy_rules_nisolated(const policy_rules_t *self)
{
    return self->nisolated;
}

const char *policy_rules_isolated(const policy_rules_t *self, size_t i)
{
    return i < self->nisolated ? self->isolated[i] : NULL;
}

size_t policy_rules_nlimits(const policy_rules_t *self)
{
    return self->nlimits;
}

const policy_limit_t *policy_rules_limit(const policy_rules_t *self, size_t i)
{
    return i < self->nlimits ? &self->limits[i].limit : NULL;
}
