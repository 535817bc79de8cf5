/* libFuzzer target: the tenants keys file parser (tenants_keys_parse, over libyaml) and the
 * key lookup.
 *
 * Beyond "no crash" (ASan/UBSan), it checks on every input:
 *   - all or nothing: a failed parse returns NULL with a message, a successful one a table
 *     with as many keys as it reports, never more than TENANTS_MAX_KEYS;
 *   - a message never holds a key given in clear (the "ipk-fuzz-" prefix the seeds use),
 *     except inside a tenant's name (`tenant "..."`: names are validated and may be anything);
 *   - every lookup answers one of the four results, and only OK/DISABLED name a tenant.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tenants_keys.h"

// Whether an "ipk-fuzz-" occurs in err outside a quoted tenant name.
static int s_leaks(const char *err)
{
    for (const char *at = strstr(err, "ipk-fuzz-"); at; at = strstr(at + 1, "ipk-fuzz-")) {
        const char *start = at;
        while (start > err && (start[-1] == '-' || start[-1] == '.' || start[-1] == '_' ||
                               (start[-1] >= '0' && start[-1] <= '9') ||
                               (start[-1] >= 'a' && start[-1] <= 'z') ||
                               (start[-1] >= 'A' && start[-1] <= 'Z')))
            start--;
        if (start - err < 8 || strncmp(start - 8, "tenant \"", 8)) return 1;
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[512] = "";
    tenants_keys_t *k = tenants_keys_parse("fuzz.yaml", (const char *)data, size, err, sizeof err);
    if (!k) {
        if (!err[0] || s_leaks(err)) abort();
        return 0;
    }
    if (tenants_keys_count(k) > TENANTS_MAX_KEYS) abort();
    // look up every line of the input as a key: some are the keys themselves
    const char *p = (const char *)data, *end = p + size;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        const char *who = NULL;
        tenants_result_t r = tenants_keys_lookup(k, p, n, &who);
        if (r > TENANTS_DISABLED) abort();
        if ((r == TENANTS_OK || r == TENANTS_DISABLED) != (who != NULL)) abort();
        p += n + 1;
    }
    tenants_keys_destroy(&k);
    return 0;
}
