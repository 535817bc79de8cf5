/*
 * decider_targets — where a request may go, read off one compiled policy: which pool serves
 * a model or an alias (aliases resolved, weighted), which targets a pool has (worker sets and
 * providers, with roles), and what a provider needs to be sent a request (its backend, the
 * remote name of a model). docs/crds.md describes the resources.
 *
 *   requested name ──decider_targets_resolve──► pool (+ the alias it came through, for failover)
 *   pool, role     ──decider_targets_provider──► provider ─► backend, remote model name
 *
 * Pure lookups over an ipl_policy_t (linear scans: policies hold tens of pools, aliases and
 * providers; the router's hot path calls none of these unless the policy has aliases or a
 * decision needs a provider). Returned pointers are borrowed from the policy. Thread-safe
 * (read-only), no allocation.
 */
#ifndef DECIDER_TARGETS_H
#define DECIDER_TARGETS_H

#include <stdbool.h>
#include <stdint.h>

#include "ipl_proto.h"

#define DECIDER_TARGETS_MAX_DEPTH 8 /* aliases followed through aliases at most */

/* The pool whose spec.model is `model`, or NULL. */
const ipl_pool_t *decider_targets_pool_by_model(const ipl_policy_t *policy, const char *model);
/* The pool named `name` (metadata.name), or NULL. */
const ipl_pool_t *decider_targets_pool_by_name(const ipl_policy_t *policy, const char *name);
/* The alias named `name`, or NULL. */
const ipl_alias_t *decider_targets_alias(const ipl_policy_t *policy, const char *name);

/*
 * The pool that serves requested name `model`: a pool's model, or an alias followed to one —
 * at each alias one of its targets is drawn with probability weight / Σ weights (`draw` in
 * [0, 1), the caller's random number, reused scaled at every level), a "pool" target is that
 * pool, a "model" target is looked up again (a model or another alias), at most
 * DECIDER_TARGETS_MAX_DEPTH aliases deep. *alias_out (when not NULL) gets the first alias
 * followed (its failover list is the caller's), NULL when `model` is no alias. NULL when
 * nothing serves it (no such model or alias, a target naming nothing, too deep).
 */
const ipl_pool_t *decider_targets_resolve(const ipl_policy_t *policy, const char *model,
                                          double draw, const ipl_alias_t **alias_out);

/* Whether the policy has any alias (the router skips resolution when not). */
bool decider_targets_any_alias(const ipl_policy_t *policy);

/* The pool target of `pool` named `name` (a worker set or a provider), or NULL. */
const ipl_pool_target_t *decider_targets_target(const ipl_policy_t *policy,
                                                const ipl_pool_t *pool, const char *name);

/* The first provider target of `pool` with role `role` ("overflow", ...; NULL: any role), or
 * NULL. */
const ipl_pool_target_t *decider_targets_provider_target(const ipl_policy_t *policy,
                                                         const ipl_pool_t *pool, const char *role);

/* The provider named `name`, or NULL. */
const ipl_provider_t *decider_targets_provider(const ipl_policy_t *policy, const char *name);
/* The backend named `name`, or NULL. */
const ipl_backend_t *decider_targets_backend(const ipl_policy_t *policy, const char *name);
/* The name provider `provider` knows local model `model` by (spec.models[].remoteName), or
 * NULL when it does not offer it. */
const char *decider_targets_remote_model(const ipl_policy_t *policy, const char *provider,
                                         const char *model);

#endif
