/*
 * policy_isolation — see the header.
 */
#include "policy_isolation.h"

#include <stdint.h>
#include <string.h>

#include "ipl_sha256.h"

bool policy_isolation_isolated(const ipl_policy_t *policy, const char *tenant)
{
    if (!policy) return false;
    const char *t = tenant ? tenant : "";
    for (uint32_t i = 0; i < policy->cache_isolated_tenants_len; i++) {
        const char *name = policy->cache_isolated_tenants[i];
        if (name && (!strcmp(name, "*") || !strcmp(name, t))) return true;
    }
    return false;
}

const char *policy_isolation_salt(const char *tenant, const char *client_salt,
                                  char out[POLICY_SALT_SIZE])
{
    static const char domain[] = "inferplane cache salt v1";
    const char *t = tenant ? tenant : "";
    ipl_sha256_t h;
    ipl_sha256_init(&h);
    ipl_sha256_update(&h, domain, sizeof domain); /* the NUL separates */
    ipl_sha256_update(&h, t, strlen(t) + 1);
    if (client_salt) ipl_sha256_update(&h, client_salt, strlen(client_salt));
    uint8_t d[IPL_SHA256_LEN];
    ipl_sha256_final(&h, d);
    static const char hex[] = "0123456789abcdef";
    size_t n = sizeof POLICY_SALT_PREFIX - 1;
    memcpy(out, POLICY_SALT_PREFIX, n);
    for (size_t i = 0; i < IPL_SHA256_LEN; i++) {
        out[n++] = hex[d[i] >> 4];
        out[n++] = hex[d[i] & 15];
    }
    out[n] = '\0';
    return out;
}

bool policy_isolation_reserved(const char *client_salt)
{
    return client_salt && !strncmp(client_salt, POLICY_SALT_PREFIX, sizeof POLICY_SALT_PREFIX - 1);
}

const char *policy_isolation_effective(const ipl_policy_t *policy, const char *tenant,
                                       const char *client_salt, char out[POLICY_SALT_SIZE])
{
    if (!policy_isolation_isolated(policy, tenant)) return client_salt;
    return policy_isolation_salt(tenant, client_salt, out);
}
