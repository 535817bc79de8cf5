/*
 * decider_strategies — the one list of routing strategies, and where each comes from.
 *
 * A pool names its strategy (InferencePool spec.strategy), a request may override it
 * (ROUTE_REQ.strategy), the decider has a default (--strategy). The policy compiler validates
 * pool strategies against this same list: it includes this header and expands
 * DECIDER_STRATEGY_NAMES, so the list exists once and needs no code from the decider.
 *
 *   name                 what it does (source, per the comment above its pick function)
 *   ttft                 ours: minimum predicted TTFT (decider_predictor), load gate,
 *                        optional softmax temperature
 *   oracle               measurement only: ttft with the true cached tokens from the router's
 *                        oracle hook (clustersim); without a hook it is ttft with the index
 *   random               uniform among healthy workers (a plain Kubernetes Service)
 *   round-robin          each healthy worker in turn, per pool
 *   least-loaded         shortest queue (waiting + in flight), then fewest running
 *   gie-default          Gateway API Inference Extension default profile: queue 2 + KV-cache
 *                        utilisation 2 + prefix 3 scorers, max-score picker
 *   dynamo-cost          NVIDIA Dynamo KV router: overlap weight × prefill blocks + decode
 *                        blocks, temperature 0 (argmin)
 *   sglang-cache-aware   SGLang router cache_aware: approximate radix tree of routing history,
 *                        cache_threshold 0.3, balance_abs 64, balance_rel 1.5
 *   prefix-hash          vLLM production-stack prefixaware: longest-prefix trie of routing
 *                        history over fixed chunks, random among the longest matches
 *
 * This header is plain data and declarations: it pulls in nothing of the decider.
 */
#ifndef DECIDER_STRATEGIES_H
#define DECIDER_STRATEGIES_H

#include <stdbool.h>

/* X(name): every strategy, the default first. */
#define DECIDER_STRATEGY_NAMES(X)                                                                  \
    X("ttft")                                                                                      \
    X("oracle")                                                                                    \
    X("random")                                                                                    \
    X("round-robin")                                                                               \
    X("least-loaded")                                                                              \
    X("gie-default")                                                                               \
    X("dynamo-cost")                                                                               \
    X("sglang-cache-aware")                                                                        \
    X("prefix-hash")

/* True when `name` is one of DECIDER_STRATEGY_NAMES (NULL: false). */
bool decider_strategy_known(const char *name);
/* "ttft, oracle, random, ..." (static). */
const char *decider_strategy_list(void);
/* One line: what the strategy does and the published source it follows (static), or NULL. */
const char *decider_strategy_source(const char *name);

#endif
