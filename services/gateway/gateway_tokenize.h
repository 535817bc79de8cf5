/*
 * gateway_tokenize — token ids of a chat the gateway cannot render itself (its model folder's
 * chat template uses a construct ipl_template does not support: ipl_prompt_unrenderable),
 * asked of one of the model's workers through vLLM's POST /tokenize in its messages form
 * (TokenizeChatRequest: model, messages, tools, add_generation_prompt,
 * continue_final_message, chat_template_kwargs; add_special_tokens false, as for a chat),
 * whose answer's "tokens" are the ids the worker will prefill.
 *
 *   chat request ──gateway_api_tokenize_body──► /tokenize body ──┬─ cache hit ─► ids
 *                                                                 └─ a worker ──► ids (cached)
 *
 * The answers are cached: an LRU keyed by XXH3-128 of the /tokenize body (which names the
 * model), bounded both in entries and in bytes of ids held (the defaults below); a body's
 * second request costs a hash and a copy. A worker that does not answer within the timeout,
 * answers an error or something that is not a list of ids is no error for the request: the
 * caller routes it without a prefix (load only), and the failure is counted and noted.
 *
 * Metrics: inferplane_gateway_worker_tokenize_total{result="worker"|"cached"|"failed"},
 * inferplane_gateway_worker_tokenize_cache_entries and _bytes (gauges).
 *
 * Thread-safety: every call may run concurrently (the cache takes a mutex; an HTTP call holds
 * no lock). Blocks the calling thread for up to the timeout (the gateway's connection thread,
 * which waits for the decider the same way).
 */
#ifndef GATEWAY_TOKENIZE_H
#define GATEWAY_TOKENIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ipl_metrics.h"
#include "ipl_proto.h"

#define GATEWAY_TOKENIZE_TIMEOUT_MS  300         /* per /tokenize call */
#define GATEWAY_TOKENIZE_MAX_ENTRIES 4096u       /* cached answers */
#define GATEWAY_TOKENIZE_MAX_BYTES   (64u << 20) /* ids held by the cache, bytes */
#define GATEWAY_TOKENIZE_MAX_REPLY   (32u << 20) /* a /tokenize answer, bytes */

typedef struct gateway_tokenize gateway_tokenize_t;

/* Zero fields take the defaults above. */
typedef struct {
    int timeout_ms;
    size_t max_entries;
    size_t max_bytes;
} gateway_tokenize_config_t;

typedef enum {
    GATEWAY_TOKENIZE_FAILED = -1, /* no ids: route without a prefix */
    GATEWAY_TOKENIZE_WORKER = 0,  /* a worker answered (now cached) */
    GATEWAY_TOKENIZE_CACHED = 1,  /* the cache answered */
} gateway_tokenize_result_t;

/* cfg may be NULL (defaults); metrics borrowed (may be NULL). NULL on allocation failure. */
gateway_tokenize_t *gateway_tokenize_new(const gateway_tokenize_config_t *cfg,
                                         ipl_metrics_t *metrics);
void gateway_tokenize_destroy(gateway_tokenize_t **self_p);

/* The ids of /tokenize body `body` (len bytes, borrowed): from the cache, else from `url`
 * (a worker's base URL; NULL: the cache only). *ids malloc'd (the caller frees; NULL when
 * FAILED), *n their count; `note` (may be NULL) gets a short reason on failure, e.g.
 * "w0: timed out after 300 ms". */
gateway_tokenize_result_t gateway_tokenize_ids(gateway_tokenize_t *self, const char *url,
                                               const char *body, size_t len, uint32_t **ids,
                                               size_t *n, char *note, size_t notelen);

/* One worker of the policy to ask for model `model`'s ids (`lora`: a LoRA adapter, only its
 * workers; NULL: any of the pool's), rotating between calls; NULL when none. Borrowed from
 * the policy. */
const ipl_worker_t *gateway_tokenize_pick(gateway_tokenize_t *self, const ipl_policy_t *policy,
                                          const char *model, const char *lora);

struct gateway_api_req;
struct ipl_policy_view;
struct ipl_prompt;

/* The whole fallback for chat request `api` (api->worker_tokenize): its /tokenize body
 * (gateway_api_tokenize_body), the ids (gateway_tokenize_ids, asking a worker
 * gateway_tokenize_pick finds in the view's policy), hashed into at most `max` blocks of
 * `block_size` in the space of (`lora`, api->cache_salt) with `prompt` (ipl_prompt_hashes,
 * as ipl_prompt_blocks hashes a rendered chat). *hashes malloc'd (the caller frees), *nhashes,
 * *ntokens; on FAILED NULL and zeros, and `note` says why (`worker`, when not NULL, gets the
 * name of the worker asked, "" for none). */
gateway_tokenize_result_t
gateway_tokenize_blocks(gateway_tokenize_t *self, struct ipl_policy_view *view,
                        const struct ipl_prompt *prompt, const struct gateway_api_req *api,
                        const char *lora, size_t block_size, size_t max, uint64_t **hashes,
                        size_t *nhashes, size_t *ntokens, char *note, size_t notelen);

/* What the cache holds now. */
void gateway_tokenize_stats(gateway_tokenize_t *self, size_t *entries, size_t *bytes);

#endif
