/*
 * policy_isolation — per-tenant prefix-cache isolation, the way vLLM offers it: a request's
 * `cache_salt` goes into the hash of its first KV block, so prompts with different salts never
 * share cached blocks — and a tenant cannot learn another's prompts from cache hits (faster
 * first tokens, cached-token counts, the router's choices). docs/security.md.
 *
 * Which tenants: the policy's spec.cacheIsolation.tenants (POLICY.cache_isolated_tenants),
 * "*" for every tenant, the anonymous one ("") included. The others share one cache, as
 * without isolation.
 *
 * The salt of an isolated tenant is derived here, the same in every process (the gateway that
 * forwards it to the worker and hashes the prompt's blocks with it, the decider's
 * POST /v1/route that explains such a request, the collector that sees it in the worker's KV
 * events):
 *
 *   salt(tenant, client) = "inferplane-tenant:" + hex(SHA-256("inferplane cache salt v1" NUL
 *                          tenant NUL (client's own cache_salt, or nothing)))
 *
 * so the client's own salt still separates its requests within the tenant. It is not a
 * secret: what keeps one tenant out of another's space is that clients never choose it — a
 * client's cache_salt that starts with the prefix is refused (policy_isolation_reserved),
 * for every tenant, isolated or not, and an isolated tenant's client salt is folded into the
 * hash, never sent as is.
 *
 * Pure functions: any thread.
 */
#ifndef POLICY_ISOLATION_H
#define POLICY_ISOLATION_H

#include <stdbool.h>
#include <stddef.h>

#include "ipl_proto.h"

#define POLICY_SALT_PREFIX "inferplane-tenant:"
/* The prefix, 64 hex digits and the NUL. */
#define POLICY_SALT_SIZE (sizeof POLICY_SALT_PREFIX + 64)

/* Whether `policy` (NULL: none) isolates `tenant`'s cache (NULL is the anonymous ""). */
bool policy_isolation_isolated(const ipl_policy_t *policy, const char *tenant);

/* The isolated tenant's salt for a request with the client's own `client_salt` (NULL: none)
 * into out[POLICY_SALT_SIZE]. Returns out. */
const char *policy_isolation_salt(const char *tenant, const char *client_salt,
                                  char out[POLICY_SALT_SIZE]);

/* Whether a client's cache_salt is one only the gateway may set (it starts with the prefix). */
bool policy_isolation_reserved(const char *client_salt);

/* The cache_salt a request is to carry (forwarded to the worker and hashed with), given its
 * tenant and the client's own `client_salt` (NULL: none), into out[POLICY_SALT_SIZE] when
 * derived: returns out for an isolated tenant, client_salt (perhaps NULL) otherwise. The
 * caller refuses reserved client salts first. */
const char *policy_isolation_effective(const ipl_policy_t *policy, const char *tenant,
                                       const char *client_salt, char out[POLICY_SALT_SIZE]);

#endif
