/*
 * api_anthropic_request — an Anthropic Messages request (POST /v1/messages or
 * /v1/messages/count_tokens; untrusted bytes) translated into the OpenAI chat-completions
 * request the worker is sent, plus what the answer's translation needs.
 *
 * The translation (docs/api-anthropic.md has the whole table and every rejection) follows
 * vLLM's own (vllm/entrypoints/anthropic/serving.py, _convert_anthropic_to_openai_request),
 * so that a /v1/messages request reaches a worker as the same messages, and therefore the
 * same prompt tokens, as the equivalent /v1/chat/completions request:
 *
 *   model, max_tokens           → model, max_tokens (max_tokens required on /v1/messages)
 *   system (string | text blocks) → a first {"role":"system"} message (blocks joined as
 *                                 they are, Claude Code's "x-anthropic-billing-header"
 *                                 block left out as vLLM does: it would defeat caching)
 *   messages[].content string   → the same message
 *   text blocks                 → content (one block: a string; several: text parts)
 *   tool_use (assistant)        → tool_calls [{id, type:function, function:{name, arguments}}]
 *   tool_result (user)          → {"role":"tool","tool_call_id","content"} messages, placed
 *                                 before the user message's remaining text (as vLLM does)
 *   consecutive same-role turns → kept as separate messages (vLLM does not merge them)
 *   stop_sequences → stop; temperature, top_p → the same; top_k → top_k (vLLM's extension);
 *   metadata.user_id → user; tools → function tools; tool_choice auto|any|tool|none →
 *   "auto" | "required" | {"type":"function","function":{"name"}} | "none", and
 *   disable_parallel_tool_use → parallel_tool_calls:false; stream → stream plus
 *   stream_options.include_usage (the usage chunk fills the final message_delta).
 *
 * Anything it cannot carry to a text model (image, document and thinking blocks, server
 * tools, extended thinking, MCP servers, ...) and anything malformed is refused with HTTP 400
 * and a message naming the field path, e.g.
 *   messages.2.content.0.type: "image" is not supported by this text model
 * never dropped silently. Sizes are bounded (API_ANTHROPIC_MAX_ITEMS); the body's size is
 * the caller's to bound. Fields this API does not know are ignored, as vLLM's models do.
 *
 * Thread-safe for distinct requests; a request is immutable after parse except through the
 * OpenAI body the caller chooses to edit.
 */
#ifndef API_ANTHROPIC_REQUEST_H
#define API_ANTHROPIC_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api_anthropic_error.h"

struct cJSON;

#define API_ANTHROPIC_MAX_ITEMS     10000 /* messages; blocks of one message; tools; parts */
#define API_ANTHROPIC_MAX_STOP      256   /* stop_sequences */
#define API_ANTHROPIC_MAX_TOKENS    1e9   /* far above any model's length; refuses absurd values */
#define API_ANTHROPIC_MAX_TOOL_NAME 128   /* bytes of a tool's name (Anthropic's limit) */

typedef enum {
    API_ANTHROPIC_MESSAGES = 0, /* POST /v1/messages: max_tokens required, stream honoured */
    API_ANTHROPIC_COUNT_TOKENS, /* POST /v1/messages/count_tokens: no max_tokens, no stream */
} api_anthropic_kind_t;

typedef struct api_anthropic_request api_anthropic_request_t;

/* Parses body[0..len). On success returns 0 and *out (the caller destroys it). On failure
 * returns IPL_E_INVAL (or IPL_E_NOMEM) with *out NULL and err filled: status 400 (500 when
 * memory ran out) and the message. */
int api_anthropic_request_parse(api_anthropic_kind_t kind, const char *body, size_t len,
                                api_anthropic_request_t **out, api_anthropic_error_t *err);
void api_anthropic_request_destroy(api_anthropic_request_t **self_p);

/* The OpenAI chat-completions body, borrowed: the request owns it. The caller may edit it
 * before sending (e.g. set "model" to a provider's remote name); the accessors below keep
 * their own copies and do not change. */
struct cJSON *api_anthropic_request_openai(const api_anthropic_request_t *self);
/* The same serialised (compact JSON), malloc'd; NULL when memory ran out. */
char *api_anthropic_request_openai_json(const api_anthropic_request_t *self);

api_anthropic_kind_t api_anthropic_request_kind(const api_anthropic_request_t *self);
/* The model the client asked for (the name every answer carries back). */
const char *api_anthropic_request_model(const api_anthropic_request_t *self);
bool api_anthropic_request_stream(const api_anthropic_request_t *self);
/* max_tokens (0 for count_tokens). */
int64_t api_anthropic_request_max_tokens(const api_anthropic_request_t *self);
/* The stop_sequences, in the client's order (*n of them; the array is borrowed). */
const char *const *api_anthropic_request_stops(const api_anthropic_request_t *self, size_t *n);
/* True when the request carried at least one tool. */
bool api_anthropic_request_has_tools(const api_anthropic_request_t *self);

#endif
