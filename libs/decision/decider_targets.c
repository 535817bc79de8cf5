/*
 * decider_targets — lookups over a compiled policy (see the header).
 */
#include "decider_targets.h"

#include <stddef.h>
#include <string.h>

static bool s_eq(const char *a, const char *b)
{
    return a && b && (a == b || !strcmp(a, b));
}

const ipl_pool_t *decider_targets_pool_by_model(const ipl_policy_t *policy, const char *model)
{
    for (uint32_t i = 0; model && i < policy->pools_len; i++)
        if (s_eq(policy->pools[i].model, model)) return &policy->pools[i];
    return NULL;
}

const ipl_pool_t *decider_targets_pool_by_name(const ipl_policy_t *policy, const char *name)
{
    for (uint32_t i = 0; name && i < policy->pools_len; i++)
        if (s_eq(policy->pools[i].name, name)) return &policy->pools[i];
    return NULL;
}

const ipl_alias_t *decider_targets_alias(const ipl_policy_t *policy, const char *name)
{
    for (uint32_t i = 0; name && i < policy->aliases_len; i++)
        if (s_eq(policy->aliases[i].name, name)) return &policy->aliases[i];
    return NULL;
}

bool decider_targets_any_alias(const ipl_policy_t *policy)
{
    return policy->aliases_len > 0;
}

// One target of `alias` drawn by weight: `*draw` in [0, 1) picks it and is rescaled to [0, 1)
// within the chosen target's share, so that the next level draws independently enough.
static const ipl_alias_target_t *s_draw(const ipl_policy_t *policy, const ipl_alias_t *alias,
                                        double *draw)
{
    uint64_t total = 0;
    const ipl_alias_target_t *last = NULL;
    for (uint32_t i = 0; i < policy->alias_targets_len; i++) {
        const ipl_alias_target_t *t = &policy->alias_targets[i];
        if (!s_eq(t->alias, alias->name)) continue;
        total += t->weight ? t->weight : 1;
        last = t;
    }
    if (!last) return NULL;
    double at = *draw * (double)total, acc = 0;
    for (uint32_t i = 0; i < policy->alias_targets_len; i++) {
        const ipl_alias_target_t *t = &policy->alias_targets[i];
        if (!s_eq(t->alias, alias->name)) continue;
        double w = (double)(t->weight ? t->weight : 1);
        if (at < acc + w) {
            *draw = (at - acc) / w;
            return t;
        }
        acc += w;
    }
    *draw = 0;
    return last; // draw rounding up to 1
}

bool decider_targets_worker_serves(const ipl_worker_t *worker, const char *lora)
{
    if (!lora) return true;
    for (uint32_t i = 0; worker->lora_adapters && i < worker->lora_adapters_len; i++)
        if (s_eq(worker->lora_adapters[i], lora)) return true;
    return false;
}

// The pool whose model is `name`; else, when a worker set targeted by a pool lists `name` as
// a LoRA adapter, that pool, with *lora the adapter's name (borrowed from the policy).
static const ipl_pool_t *s_pool_or_lora(const ipl_policy_t *policy, const char *name,
                                        const char **lora)
{
    const ipl_pool_t *pool = decider_targets_pool_by_model(policy, name);
    for (uint32_t w = 0; !pool && name && w < policy->workers_len; w++) {
        const ipl_worker_t *wk = &policy->workers[w];
        for (uint32_t i = 0; wk->lora_adapters && i < wk->lora_adapters_len; i++) {
            if (!s_eq(wk->lora_adapters[i], name)) continue;
            pool = decider_targets_pool_by_name(policy, wk->pool);
            if (pool && lora) *lora = wk->lora_adapters[i];
            break;
        }
    }
    return pool;
}

const ipl_pool_t *decider_targets_resolve(const ipl_policy_t *policy, const char *model,
                                          double draw, const ipl_alias_t **alias_out)
{
    return decider_targets_resolve_lora(policy, model, draw, alias_out, NULL);
}

const ipl_pool_t *decider_targets_resolve_lora(const ipl_policy_t *policy, const char *model,
                                               double draw, const ipl_alias_t **alias_out,
                                               const char **lora_out)
{
    if (alias_out) *alias_out = NULL;
    if (lora_out) *lora_out = NULL;
    if (!(draw >= 0 && draw < 1)) draw = 0;
    const char *name = model;
    for (int depth = 0; name && depth <= DECIDER_TARGETS_MAX_DEPTH; depth++) {
        const ipl_alias_t *alias = decider_targets_alias(policy, name);
        if (!alias) return s_pool_or_lora(policy, name, lora_out);
        if (alias_out && !*alias_out) *alias_out = alias;
        const ipl_alias_target_t *t = s_draw(policy, alias, &draw);
        if (!t) return NULL;
        if (s_eq(t->kind, "pool")) return decider_targets_pool_by_name(policy, t->name);
        name = t->name;
    }
    return NULL;
}

const ipl_pool_target_t *decider_targets_target(const ipl_policy_t *policy,
                                                const ipl_pool_t *pool, const char *name)
{
    for (uint32_t i = 0; pool && i < policy->pool_targets_len; i++) {
        const ipl_pool_target_t *t = &policy->pool_targets[i];
        if (s_eq(t->pool, pool->name) && s_eq(t->name, name)) return t;
    }
    return NULL;
}

const ipl_pool_target_t *decider_targets_provider_target(const ipl_policy_t *policy,
                                                         const ipl_pool_t *pool, const char *role)
{
    for (uint32_t i = 0; pool && i < policy->pool_targets_len; i++) {
        const ipl_pool_target_t *t = &policy->pool_targets[i];
        if (s_eq(t->pool, pool->name) && s_eq(t->kind, "provider") && (!role || s_eq(t->role, role)))
            return t;
    }
    return NULL;
}

const ipl_provider_t *decider_targets_provider(const ipl_policy_t *policy, const char *name)
{
    for (uint32_t i = 0; name && i < policy->providers_len; i++)
        if (s_eq(policy->providers[i].name, name)) return &policy->providers[i];
    return NULL;
}

const ipl_backend_t *decider_targets_backend(const ipl_policy_t *policy, const char *name)
{
    for (uint32_t i = 0; name && i < policy->backends_len; i++)
        if (s_eq(policy->backends[i].name, name)) return &policy->backends[i];
    return NULL;
}

const char *decider_targets_remote_model(const ipl_policy_t *policy, const char *provider,
                                         const char *model)
{
    for (uint32_t i = 0; i < policy->provider_models_len; i++) {
        const ipl_provider_model_t *m = &policy->provider_models[i];
        if (s_eq(m->provider, provider) && s_eq(m->name, model))
            return m->remote_name && *m->remote_name ? m->remote_name : m->name;
    }
    return NULL;
}
