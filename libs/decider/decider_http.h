/*
 * decider_http — the JSON face of a decision, for HTTP POST /v1/route and inferplanectl.
 *
 * Request (a JSON object):
 *   {"model": str, "tenant"?: str, "strategy"?: str,
 *    "labels"?: [str, ...]                semantic labels, for InferencePolicy rules (≤ 32)
 *    "headers"?: {name: value, ...}       request headers rules match on (≤ 32)
 *    and exactly one of
 *      "prompt": str                      encoded and hashed here (ipl_prompt, the --tokenizer)
 *      "messages": [chat messages]        rendered by ipl_prompt (the model's chat template, or
 *                                         ChatML), with "tools"?: [..] and
 *                                         "add_generation_prompt"?: bool (default true)
 *      "block_hashes": [u64, ...]         as JSON numbers (exact up to 2^53) or decimal /
 *                                         0x-hex strings; with "prompt_tokens"?: int and
 *                                         "block_size"?: int (default: the pool's)
 *    "cache_salt"?: str                   vLLM's: prompts hash in the salt's own space (an
 *                                         isolated tenant's: its own, policy_isolation)}
 *
 * Response: decider_http_render() — {"target_kind" ("worker", "provider" or ""), "endpoint",
 * "worker" (a provider's name for a provider), "backend" (providers), "pool", "model", "rule"
 * (when one decided),
 * "predicted_ttft_ms", "cached_tokens", "prompt_tokens", "strategy", "reason", "detail",
 * "candidates": [{worker, url, predicted_ttft_ms, cached_tokens, running, waiting, inflight,
 * kv_usage, eligible, note}], "state_seq"}; a failed decision adds an OpenAI-shaped "error".
 *
 * Admin: decider_http_register_model() — GET /debug/model, decider_router_model_json().
 */
#ifndef DECIDER_HTTP_H
#define DECIDER_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "decider_router.h"
#include "ipl_httpd.h"
#include "ipl_prompt.h"

#define DECIDER_HTTP_MAX_HASHES 65536u
#define DECIDER_HTTP_MAX_LABELS 32u /* labels, and headers, per request */

/* A parsed request; owns its strings and hashes. */
typedef struct {
    decider_request_t req; /* points into the fields below */
    char *model, *tenant, *strategy;
    char *text; /* prompt or rendered messages (NULL for block_hashes) */
    bool chat;  /* text is a rendered chat (encoded without special tokens) */
    char *cache_salt;
    uint64_t *hashes;
    size_t nhashes;
    uint64_t block_size; /* given with block_hashes; 0 = the pool's */
    uint64_t prompt_tokens;
    char **labels; /* nlabels */
    size_t nlabels;
    char **headers; /* nheaders "name=value", the name lower-case */
    size_t nheaders;
} decider_http_request_t;

/* Parses a JSON body; "messages" are rendered by `prompt` (borrowed). Returns 0, or
 * IPL_E_INVAL with a message for a 400 in `err`. On success the caller frees with
 * decider_http_request_clear. */
int decider_http_parse(const char *body, size_t len, const ipl_prompt_t *prompt,
                       decider_http_request_t *out, char *err, size_t errlen);

/* For prompt/messages: encodes `text` and hashes its full blocks of `block_size` tokens with
 * `prompt` (ipl_prompt_blocks, the gateway's chain), filling req.hashes and
 * req.prompt_tokens. No-op for block_hashes. 0 or IPL_E_NOMEM. */
int decider_http_hash(decider_http_request_t *r, const ipl_prompt_t *prompt, uint64_t block_size);

/* decider_http_hash in the hash space the request's model names in `policy` (NULL: the base
 * model's): a LoRA adapter's (decider_targets_resolve_lora, as the gateway and the router
 * resolve it), and the request's cache_salt — for a tenant the policy isolates, the tenant's
 * salt with it (policy_isolation, as the gateway hashes that tenant's requests), so the
 * decision shown is the one the gateway would get and no other tenant's blocks match.
 * 0 or IPL_E_NOMEM. */
int decider_http_hash_for(decider_http_request_t *r, const ipl_prompt_t *prompt,
                          const ipl_policy_t *policy, uint64_t block_size);

void decider_http_request_clear(decider_http_request_t *r);

/* The block size the pool serving `model` uses (16 when no pool serves it). */
uint64_t decider_http_block_size(const ipl_policy_t *policy, const char *model);

/* The HTTP status for a decision status: 200, 400, 404, 429 or 503. */
int decider_http_status(int route_status);

/* Renders the decision as JSON (malloc'd, the caller frees). NULL on allocation failure. */
char *decider_http_render(const decider_decision_t *d, uint64_t prompt_tokens);

/* Registers GET /debug/model on `httpd`: the router's model (decider_router_model_json: the
 * predictor's parameters and errors per worker set, the router's settings, the fallback and
 * OBSERVED counters, the decisions awaiting observation), 500 when out of memory. The router
 * must outlive the server. */
void decider_http_register_model(ipl_httpd_t *httpd, decider_router_t *router);

#endif
