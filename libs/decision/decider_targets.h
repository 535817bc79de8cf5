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
/* (decider_targets_resolve_lora with lora_out NULL: a LoRA adapter resolves to its pool.) */

/*
 * decider_targets_resolve, and the LoRA adapter the request is for. A requested name (or the
 * model an alias leads to) that is no pool's model but a LoRA adapter some worker set lists
 * (spec.loraAdapters, carried on each worker: ipl_worker_t.lora_adapters) resolves to the pool
 * of the first such worker set, and *lora_out (when not NULL) gets the adapter's name
 * (borrowed from the policy), else NULL: the request goes only to the workers that list it
 * (decider_targets_worker_serves) and its prompt is hashed in the adapter's space
 * (ipl_prompt_hashes' lora_name), as vLLM keys an adapter's blocks with its name. A pool's
 * model or an alias of the same name wins over an adapter. The gateway, the decider's
 * POST /v1/route, the router and inferplanectl all resolve through this one function.
 */
const ipl_pool_t *decider_targets_resolve_lora(const ipl_policy_t *policy, const char *model,
                                               double draw, const ipl_alias_t **alias_out,
                                               const char **lora_out);

/* Whether `worker` may serve a request for LoRA adapter `lora` (NULL: a base-model request,
 * always true): its worker set lists it. */
bool decider_targets_worker_serves(const ipl_worker_t *worker, const char *lora);

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
