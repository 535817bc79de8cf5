/*
 * gateway_rule_headers — the header names rules match on. See gateway_rule_headers.h.
 */
#include "gateway_rule_headers.h"

#include <assert.h>
#include <ctype.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ipl_error.h"
#include "ipl_log.h"

struct gateway_rule_headers {
    char **names;
    uint32_t len;
};

/* An HTTP token character (RFC 9110 tchar). */
static bool s_tchar(char c)
{
    return isalnum((unsigned char)c) || (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* Adds the name part of `spec` ("name" or "name=value"), lower-cased, unless known. */
static int s_add(gateway_rule_headers_t *self, const char *spec, uint32_t *dropped)
{
    size_t n = strcspn(spec, "=");
    bool ok = n > 0;
    for (size_t i = 0; ok && i < n; i++)
        ok = s_tchar(spec[i]);
    if (!ok) return 0;
    for (uint32_t i = 0; i < self->len; i++)
        if (strlen(self->names[i]) == n && !strncasecmp(self->names[i], spec, n)) return 0;
    if (self->len == GATEWAY_RULE_HEADERS_MAX) {
        (*dropped)++;
        return 0;
    }
    char *name = malloc(n + 1);
    if (!name) return IPL_E_NOMEM;
    for (size_t i = 0; i < n; i++)
        name[i] = (char)tolower((unsigned char)spec[i]);
    name[n] = '\0';
    self->names[self->len++] = name;
    return 0;
}

gateway_rule_headers_t *gateway_rule_headers_new(const ipl_policy_t *policy)
{
    gateway_rule_headers_t *self = calloc(1, sizeof(*self));
    if (!self) return NULL;
    self->names = calloc(GATEWAY_RULE_HEADERS_MAX, sizeof(char *));
    if (!self->names) {
        free(self);
        return NULL;
    }
    uint32_t dropped = 0;
    for (uint32_t r = 0; policy && r < policy->rules_len; r++) {
        const ipl_rule_t *rule = &policy->rules[r];
        for (uint32_t h = 0; h < rule->headers_len; h++) {
            if (!rule->headers[h]) continue;
            if (s_add(self, rule->headers[h], &dropped) != 0) {
                gateway_rule_headers_destroy(&self);
                return NULL;
            }
        }
    }
    if (dropped)
        IPL_WARN("rule_headers_dropped",
                 "policy_version=%" PRIu64 " kept=%u dropped=%u: rules name more than %d "
                 "headers; the rest are never sent to the decider",
                 policy->version, self->len, dropped, GATEWAY_RULE_HEADERS_MAX);
    return self;
}

void gateway_rule_headers_destroy(gateway_rule_headers_t **self_p)
{
    assert(self_p);
    gateway_rule_headers_t *self = *self_p;
    if (!self) return;
    for (uint32_t i = 0; i < self->len; i++)
        free(self->names[i]);
    free(self->names);
    free(self);
    *self_p = NULL;
}

uint32_t gateway_rule_headers_count(const gateway_rule_headers_t *self)
{
    return self ? self->len : 0;
}

const char *gateway_rule_headers_name(const gateway_rule_headers_t *self, uint32_t i)
{
    return self && i < self->len ? self->names[i] : NULL;
}

int gateway_rule_headers_collect(const gateway_rule_headers_t *self,
                                 gateway_header_lookup_fn *lookup, void *arg, char ***out,
                                 uint32_t *len)
{
    *out = NULL;
    *len = 0;
    uint32_t n = gateway_rule_headers_count(self);
    if (n == 0) return 0;
    const char **values = calloc(n, sizeof(*values));
    if (!values) return IPL_E_NOMEM;
    size_t bytes = 0;
    uint32_t found = 0;
    for (uint32_t i = 0; i < n; i++) {
        values[i] = lookup(arg, self->names[i]);
        if (!values[i]) continue;
        bytes += strlen(self->names[i]) + 1 + strlen(values[i]) + 1;
        found++;
    }
    if (found == 0) {
        free(values);
        return 0;
    }
    char **list = malloc(found * sizeof(char *) + bytes);
    if (!list) {
        free(values);
        return IPL_E_NOMEM;
    }
    char *p = (char *)(list + found);
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (!values[i]) continue;
        size_t nl = strlen(self->names[i]), vl = strlen(values[i]);
        list[k++] = p;
        memcpy(p, self->names[i], nl);
        p[nl] = '=';
        memcpy(p + nl + 1, values[i], vl + 1);
        p += nl + 1 + vl + 1;
    }
    free(values);
    *out = list;
    *len = found;
    return 0;
}
