/*
 * decider_strategies — what each routing strategy does, and where each comes from: the table
 * of strategies and their pick functions (contract: decider_pick.h). Stateless itself: what a
 * strategy remembers is in the pick context's decider_memory.
 *
 * The names are the wire's (proto/ipl_strategy.h, IPL_STRATEGIES: the one list); this table
 * gives each its pick function, in the same order.
 *
 *   name                 what it does (source, per the comment above its pick function)
 *   ttft                 ours: minimum predicted TTFT (decider_predictor), load gate,
 *                        optional softmax temperature
 *   oracle               measurement only: ttft with the true cached tokens from the router's
 *                        offline oracle hook (clustersim); without a hook it is ttft with the
 *                        index
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
 */
#ifndef DECIDER_STRATEGIES_H
#define DECIDER_STRATEGIES_H

#include <stdbool.h>

#include "decider_pick.h"
#include "ipl_strategy.h"

/* The pick function of strategy `name` (contract: decider_pick.h) and its canonical (static)
 * name, or NULL when `name` is NULL or not a strategy. */
decider_pick_fn *decider_strategy_pick(const char *name, const char **canonical);

/* One line: what the strategy does and the published source it follows (static), or NULL. */
const char *decider_strategy_source(const char *name);

#endif
