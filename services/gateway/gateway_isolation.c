/*
 * gateway_isolation — see the header.
 */
#include "gateway_isolation.h"

#include <stdatomic.h>

#include "ipl_error.h"
#include "policy_isolation.h"

static bool s_expose;            /* the option's target, set while main parses */
static atomic_bool s_expose_now; /* what requests read */
static atomic_bool s_overridden; /* set by a test: the option does not count */

void gateway_isolation_options(ipl_config_t *cfg)
{
    ipl_config_add(cfg, "expose-routing-headers", IPL_OPT_BOOL, &s_expose, "false",
                   "send clients the x-inferplane-worker, -endpoint, -reason, "
                   "-predicted-ttft-ms and -cached-tokens response headers: which worker served "
                   "a request and what the decider believed cached for it. With several "
                   "tenants one can learn another's prompts from them (docs/security.md): for "
                   "debugging and trusted clients only");
}

bool gateway_isolation_routing_headers(void)
{
    return atomic_load(&s_overridden) ? atomic_load(&s_expose_now) : s_expose;
}

void gateway_isolation_set_routing_headers(bool on)
{
    atomic_store(&s_expose_now, on);
    atomic_store(&s_overridden, true);
}

int gateway_isolation_apply(ipl_policy_view_t *policy, const char *tenant, gateway_api_req_t *api,
                            gateway_api_error_t *err)
{
    if (policy_isolation_reserved(api->cache_salt)) {
        gateway_api_error_set(err, 400, "invalid_request_error", "cache_salt", NULL,
                              "\"cache_salt\" values starting with \"%s\" are the gateway's "
                              "(per-tenant cache isolation); choose another salt",
                              POLICY_SALT_PREFIX);
        return IPL_E_INVAL;
    }
    ipl_policy_snap_t *snap = policy ? ipl_policy_view_get(policy) : NULL;
    char buf[POLICY_SALT_SIZE];
    const char *salt =
        policy_isolation_effective(snap ? snap->policy : NULL, tenant, api->cache_salt, buf);
    if (snap) ipl_policy_view_release(policy, &snap);
    if (salt == api->cache_salt) return 0; /* shared: as the client sent it */
    if (gateway_api_set_cache_salt(api, salt) != 0) {
        gateway_api_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
        return IPL_E_NOMEM;
    }
    return 0;
}
