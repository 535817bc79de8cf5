/*
 * ipl_prompt — the one prompt path: a model opened as vLLM opens it, and the chain
 * "chat → prompt text → token ids → block hashes" every component routes with.
 *
 *     ipl_prompt_t *p = ipl_prompt_open("/models/llama-3.1", err, sizeof err);
 *     char *text; size_t len;
 *     ipl_prompt_render(p, messages, tools, true, false, NULL, &text, &len, err, sizeof err);
 *     uint32_t *ids = ipl_prompt_encode(p, text, len, true, &n);   // a chat: no specials
 *     size_t nb = ipl_prompt_hashes(p, ids, n, 16, lora, salt, hashes, max);
 *
 * The gateway, the decider's /v1/route, inferplanectl and the simulator all go through this
 * class, so the gateway's hashes are the ones the collector recomputes from the simulator's
 * (or vLLM's) BlockStored token ids. Nothing else renders or hashes a prompt.
 *
 * What a spec (the --tokenizer flag) opens:
 *   - NULL, "" or "builtin": the built-in tokenizer; chats rendered as ChatML (ipl_chat);
 *   - a tokenizer.json file: that tokenizer; chats rendered as ChatML;
 *   - a model folder: <dir>/tokenizer.json, and the chat template (ipl_template: the folder's
 *     chat_template.jinja or tokenizer_config.json's chat_template) when it has one; a folder
 *     without a template renders ChatML. A template that does not parse fails the open.
 *
 * Thread-safety: immutable after open; every call may run concurrently.
 */
#ifndef IPL_PROMPT_H
#define IPL_PROMPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ipl_tokenizer.h"

struct cJSON;

typedef struct ipl_prompt ipl_prompt_t;

/* Opens a spec (see above). NULL with a message in err (names the file and the problem). */
ipl_prompt_t *ipl_prompt_open(const char *spec, char *err, size_t errlen);

/* How ipl_prompt_open_opts opens. Zero-initialise. */
typedef struct {
    /* A model folder whose chat template cannot be loaded (a construct ipl_template does not
     * support, or a syntax error) opens anyway, without chats: ipl_prompt_unrenderable says
     * why, and ipl_prompt_render refuses (IPL_E_INVAL) rather than render a wrong prompt.
     * The gateway opens so and has a worker tokenize such chats (gateway_tokenize). Plain
     * prompts encode as usual. A tokenizer that cannot be loaded still fails the open. */
    bool template_fallback;
} ipl_prompt_opts_t;

/* ipl_prompt_open with options (NULL: none, = ipl_prompt_open). */
ipl_prompt_t *ipl_prompt_open_opts(const char *spec, const ipl_prompt_opts_t *opts, char *err,
                                   size_t errlen);

/* NULL when this model renders chats itself (its template, or ChatML); else why it cannot
 * (the template's load error, with file, line and column; opened with template_fallback).
 * Borrowed, valid while self lives. */
const char *ipl_prompt_unrenderable(const ipl_prompt_t *self);

void ipl_prompt_destroy(ipl_prompt_t **self_p);

/* The tokenizer (borrowed, valid while self lives), for decoding and generation. */
const ipl_tokenizer_t *ipl_prompt_tokenizer(const ipl_prompt_t *self);

/* The tokenizer's section cache (the prefix cache: ipl_bpe.h; on by default with
 * IPL_BPE_CACHE_ENTRIES / IPL_BPE_CACHE_BYTES): other bounds, or off (either 0), e.g. for a
 * cold benchmark. Not while another thread uses self. 0 or IPL_E_NOMEM. */
int ipl_prompt_set_cache(ipl_prompt_t *self, size_t max_entries, size_t max_bytes);

/* True when chats render with the model's own template, false for ChatML. */
bool ipl_prompt_has_template(const ipl_prompt_t *self);

/* Renders an OpenAI `messages` array (borrowed) as the prompt text vLLM would tokenize.
 * tools: an array or NULL; kwargs: vLLM's chat_template_kwargs object or NULL (both ignored
 * by ChatML). Before a template sees them, messages get vLLM's preprocessing: content given
 * as parts becomes the "text" parts joined with "\n"; a tool call's "arguments" JSON string
 * becomes the object it encodes. 0 with *out malloc'd (NUL-terminated, the caller frees) and
 * *len (may be NULL) its length; IPL_E_INVAL with a message in err for malformed messages or
 * a template error; IPL_E_NOMEM. */
int ipl_prompt_render(const ipl_prompt_t *self, const struct cJSON *messages,
                      const struct cJSON *tools, bool add_generation_prompt,
                      bool continue_final_message, const struct cJSON *kwargs, char **out,
                      size_t *len, char *err, size_t errlen);

/* Encodes text. chat: a rendered chat, encoded without special tokens (the template wrote
 * any BOS itself). Otherwise a plain prompt (/v1/completions): a model folder adds what its
 * tokenizer's post-processor adds (vLLM's add_special_tokens=True; Llama-3.1's BOS) unless
 * tokenizer_config.json says add_bos_token: false — except that a tokenizer_class of
 * transformers' Llama or Gemma tokenizers (LlamaTokenizerFast, GemmaTokenizerFast, ...) gets
 * what those classes put in place of the file's post-processor: bos_token when add_bos_token
 * (default true), eos_token when add_eos_token (DeepSeek-V3: its BOS, which its file's
 * ByteLevel post-processor does not add); "builtin" and a bare tokenizer.json add nothing.
 * Returns malloc'd ids (the caller frees) and *n; NULL on allocation failure. */
uint32_t *ipl_prompt_encode(const ipl_prompt_t *self, const char *text, size_t len, bool chat,
                            size_t *n);

/* Decodes ids (malloc'd text, the caller frees; see ipl_tokenizer_decode). */
char *ipl_prompt_decode(const ipl_prompt_t *self, const uint32_t *ids, size_t n);

/* The chained hashes of the full blocks of `ids` (at most `max`, returns how many), in the
 * hash space the collector indexes: the base model's (lora_name and cache_salt NULL), or the
 * chain started at ipl_hash_key(lora_name, cache_salt), as collector_stream starts a LoRA
 * adapter's blocks. A salted request hashes to a space of its own: the collector cannot
 * reproduce vLLM's salted chain, so such a prompt never matches another one's blocks. */
size_t ipl_prompt_hashes(const ipl_prompt_t *self, const uint32_t *ids, size_t n, size_t block_size,
                         const char *lora_name, const char *cache_salt, uint64_t *out, size_t max);

/* The whole chain for routing: encode (see ipl_prompt_encode) then hash at most `max` blocks.
 * 0 with *hashes malloc'd (never NULL; the caller frees), *nhashes and *ntokens;
 * IPL_E_NOMEM. */
int ipl_prompt_blocks(const ipl_prompt_t *self, const char *text, size_t len, bool chat,
                      size_t block_size, const char *lora_name, const char *cache_salt, size_t max,
                      uint64_t **hashes, size_t *nhashes, size_t *ntokens);

#endif
