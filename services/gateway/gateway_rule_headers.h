/*
 * gateway_rule_headers — which request headers the policy's rules look at, and their values
 * on one request (ROUTE_REQ.headers).
 *
 * InferencePolicy rules match on named headers (`rules[].headers`, each "name" or
 * "name=value", split at the first '='). The gateway sends the decider only those headers,
 * as "name=value" with the name in lower case: never the others (they may carry credentials),
 * and nothing when no rule names a header.
 *
 *   policy version N ──gateway_rule_headers_new──► {"x-inferplane-class", "x-team"}   (once)
 *   request  ──collect(lookup)──► ["x-inferplane-class=batch"]                      (each)
 *
 * The set is built once per policy version (the gateway's ipl_policy_view attach hook) and
 * is immutable afterwards: thread-safe to read. At most GATEWAY_RULE_HEADERS_MAX names are
 * kept (more are dropped and logged); names that are not HTTP tokens are skipped.
 */
#ifndef GATEWAY_RULE_HEADERS_H
#define GATEWAY_RULE_HEADERS_H

#include <stdint.h>

#include "ipl_proto.h"

#define GATEWAY_RULE_HEADERS_MAX 256

typedef struct gateway_rule_headers gateway_rule_headers_t;

/* The names `policy`'s rules list (borrowed; copied), each once, lower-cased, in first-use
 * order. NULL on allocation failure. */
gateway_rule_headers_t *gateway_rule_headers_new(const ipl_policy_t *policy);
void gateway_rule_headers_destroy(gateway_rule_headers_t **self_p);

uint32_t gateway_rule_headers_count(const gateway_rule_headers_t *self);
/* The i-th name (borrowed), or NULL past the last. */
const char *gateway_rule_headers_name(const gateway_rule_headers_t *self, uint32_t i);

/* A request header's value by (lower-case) name, or NULL when absent. */
typedef const char *(gateway_header_lookup_fn)(void *arg, const char *name);

/* "name=value" for each name of the set that `lookup` finds, in the set's order. Returns 0
 * with *out one allocation (the array and its strings: free(*out)) and *len elements, or
 * *out NULL and *len 0 when there are none; IPL_E_NOMEM. `self` may be NULL (no names). */
int gateway_rule_headers_collect(const gateway_rule_headers_t *self,
                                 gateway_header_lookup_fn *lookup, void *arg, char ***out,
                                 uint32_t *len);

#endif
