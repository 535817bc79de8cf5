/*
 * gateway_isolation — what a client may learn, through the gateway, of other tenants' requests
 * (issue 20, defect 6: a tenant could read another's prompts off the cache), two defences:
 *
 *   routing headers   x-inferplane-worker, -endpoint, -reason, -predicted-ttft-ms and
 *                     -cached-tokens say where a request went and what the decider believed
 *                     cached for it ("cache_hit", 240 cached tokens for a correct guess of
 *                     someone's prompt, 32 for a wrong one), and expose the workers' URLs.
 *                     They are sent only with --expose-routing-headers (off by default): for
 *                     debugging and for clients the operator trusts. The records, metrics and
 *                     logs carry the same facts for operators either way.
 *   cache isolation   a tenant the policy isolates (spec.cacheIsolation, policy_isolation)
 *                     gets its own vLLM cache_salt on every request: set on the body forwarded
 *                     to the worker (vLLM keys the first block's hash with it) and used to hash
 *                     the prompt's blocks for routing (ipl_prompt_hashes), so its prefixes
 *                     route exactly within the tenant and never match another tenant's. A
 *                     client's own cache_salt is folded in; one that starts with the reserved
 *                     prefix is refused (400) for every tenant, so nobody can name another
 *                     tenant's space.
 *
 * The flag is process-wide (one gateway, one setting), read on every request without a lock.
 */
#ifndef GATEWAY_ISOLATION_H
#define GATEWAY_ISOLATION_H

#include <stdbool.h>

#include "gateway_api.h"
#include "ipl_config.h"
#include "ipl_policy_view.h"

/* Declares --expose-routing-headers on the gateway's configuration (main, before parsing). */
void gateway_isolation_options(ipl_config_t *cfg);

/* Whether the routing headers go to clients (--expose-routing-headers). */
bool gateway_isolation_routing_headers(void);
void gateway_isolation_set_routing_headers(bool on); /* tests */

/* Applies the newest policy's cache isolation to a parsed request of `tenant` ("" anonymous):
 * refuses a client cache_salt with the reserved prefix (IPL_E_INVAL, *err a 400 naming
 * cache_salt), and gives an isolated tenant's request its salt (gateway_api_set_cache_salt).
 * 0, IPL_E_INVAL, or IPL_E_NOMEM (*err a 500). Thread-safe. */
int gateway_isolation_apply(ipl_policy_view_t *policy, const char *tenant, gateway_api_req_t *api,
                            gateway_api_error_t *err);

#endif
