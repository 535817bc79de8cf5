/*
 * policy_rules — InferencePolicy: ordered rules, model aliases, per-tenant limits and the
 * tenants whose prompts are cached apart (spec.cacheIsolation, policy_isolation).
 *
 * One object per compilation: add each InferencePolicy's spec as its document is read, then
 * finish with the pools and providers the rules refer to. finish orders the rules for
 * evaluation — policies by spec.priority (highest first), then by name; within a policy, in
 * list order; the first rule whose match holds decides — and reports:
 *   - duplicate policy names, rule names within a policy, alias names and limit tenants
 *     across policies;
 *   - references: a rule's model, pool, target or provider that does not exist, an alias
 *     target or failover naming nothing, an alias named like a pool's model;
 *   - alias cycles (a → b → a), naming the cycle;
 *   - shadowed rules: a rule an earlier one always pre-empts (policy_rules_covers).
 *
 * Every string and array is in the policy_yaml_t's arena; the rule, alias and limit
 * accessors return pointers into this object, valid until destroy.
 */
#ifndef POLICY_RULES_H
#define POLICY_RULES_H

#include "policy_labels.h"
#include "policy_remote.h"
#include "policy_types.h"
#include "policy_yaml.h"

#define POLICY_MAX_RULES    200  /* per policy */
#define POLICY_MAX_ALIASES  256  /* per policy */
#define POLICY_MAX_LIMITS   1024 /* per policy */
#define POLICY_MAX_ISOLATED 1024 /* spec.cacheIsolation.tenants, per policy */

typedef struct policy_rules policy_rules_t;

policy_rules_t *policy_rules_new(policy_yaml_t *yaml);
void policy_rules_destroy(policy_rules_t **self_p);

/* The spec of an InferencePolicy named d->name (metadata.name at name_node). */
void policy_rules_add(policy_rules_t *self, policy_doc_t *d, yaml_node_t *spec,
                      yaml_node_t *name_node);

/* Orders the rules and checks everything above against the compiled pools (npools of them,
 * borrowed for the call) and providers. Call once, after every document. */
void policy_rules_finish(policy_rules_t *self, const policy_pool_t *pools, size_t npools,
                         const policy_remote_t *remote);

/* True when every request `later` matches is also matched by `earlier` — decided
 * conservatively, condition by condition (docs/crds.md, "Shadowed rules"). */
bool policy_rules_covers(const policy_match_t *earlier, const policy_match_t *later);

size_t policy_rules_nrules(const policy_rules_t *self);
const policy_rule_t *policy_rules_rule(const policy_rules_t *self, size_t i); /* eval order */
size_t policy_rules_naliases(const policy_rules_t *self);
const policy_alias_t *policy_rules_alias(const policy_rules_t *self, size_t i); /* by name */
/* spec.labels of every policy (policy_labels; finished with the rules). */
policy_labels_t *policy_rules_labels(const policy_rules_t *self);
/* spec.cacheIsolation.tenants of every policy, sorted, each once (policy_isolation). */
size_t policy_rules_nisolated(const policy_rules_t *self);
const char *policy_rules_isolated(const policy_rules_t *self, size_t i);
size_t policy_rules_nlimits(const policy_rules_t *self);
const policy_limit_t *policy_rules_limit(const policy_rules_t *self, size_t i); /* by tenant */

#endif
