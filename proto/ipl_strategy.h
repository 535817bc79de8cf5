/*
 * ipl_strategy — the routing strategies the wire carries: the one list.
 *
 * A pool names its strategy (InferencePool spec.strategy, compiled into POLICY pool.strategy),
 * a request may override it (ROUTE_REQ.strategy), the decider has a default (--strategy) and
 * names the one it used (ROUTE_REP.strategy). Every list of strategies is derived from
 * IPL_STRATEGIES: the decider's (libs/decision/decider_strategies.h says what each does and
 * the published source it follows), the policy compiler's validation, inferplanectl's help,
 * inferplane-clustersim's default comparison, docs/protocol.md (`make proto-doc`) and the
 * InferencePool CRD's enum (crds/inferencepool.yaml, checked against this list by
 * integration/test_proto_doc.py).
 *
 * S(name, measurement): the default first; `measurement` is true for a strategy that exists
 * to measure the others (oracle: the true cache state, which only a simulator knows), listed
 * last where strategies are compared.
 */
#ifndef IPL_STRATEGY_H
#define IPL_STRATEGY_H

#include <stdbool.h>
#include <stddef.h>

#define IPL_STRATEGIES(S)                                                                          \
    S("ttft", false)                                                                               \
    S("oracle", true)                                                                              \
    S("random", false)                                                                             \
    S("round-robin", false)                                                                        \
    S("least-loaded", false)                                                                       \
    S("gie-default", false)                                                                        \
    S("dynamo-cost", false)                                                                        \
    S("sglang-cache-aware", false)                                                                 \
    S("prefix-hash", false)

/* How many strategies IPL_STRATEGIES lists. */
size_t ipl_strategy_count(void);
/* The i-th strategy's name (static), or NULL when i >= ipl_strategy_count(). */
const char *ipl_strategy_name(size_t i);
/* True when the i-th strategy is for measurement only (false past the end). */
bool ipl_strategy_measurement(size_t i);
/* True when `name` is one of IPL_STRATEGIES (NULL: false). */
bool ipl_strategy_known(const char *name);
/* Every name in the list's order, joined by ", ": "ttft, oracle, random, ..." (static). */
const char *ipl_strategy_list(void);

#endif
