/*
 * api_anthropic_response — a whole OpenAI chat completion (the worker's JSON answer) → the
 * Anthropic message the client asked for:
 *
 *   {"id":"msg_<upstream id>","type":"message","role":"assistant","model":"<asked for>",
 *    "content":[{"type":"text","text":...}, {"type":"tool_use","id","name","input":{...}}],
 *    "stop_reason":"end_turn","stop_sequence":null,
 *    "usage":{"input_tokens":I,"cache_creation_input_tokens":0,"cache_read_input_tokens":C,
 *             "output_tokens":O}}
 *
 * Content: message.content (when not empty) is one text block; each of message.tool_calls a
 * tool_use block whose input is its arguments parsed (they must be a JSON object; "" is {}).
 * The model is always the name the client asked for, never the worker's.
 *
 * Stop reasons (vLLM's map, vllm/entrypoints/anthropic/serving.py, plus what vLLM's choice
 * says about the stop): finish_reason "stop" → "end_turn", or "stop_sequence" when vLLM's
 * `stop_reason` names one of the request's stop_sequences (which becomes stop_sequence);
 * "length" → "max_tokens"; "tool_calls" (and "function_call") → "tool_use", as is a "stop"
 * that came with tool calls (vLLM answers a named tool_choice with "stop"); "content_filter"
 * → "refusal"; anything else → "end_turn".
 *
 * Usage, in Anthropic's meaning (input_tokens are the prompt tokens *not* read from the
 * cache; https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching): input_tokens
 * = prompt_tokens − cached, cache_read_input_tokens = prompt_tokens_details.cached_tokens
 * (0 when the worker does not say), cache_creation_input_tokens = 0 (vLLM's prefix cache has
 * no paid writes), output_tokens = completion_tokens.
 *
 * The helpers below are shared with api_anthropic_stream, which builds the same objects.
 */
#ifndef API_ANTHROPIC_RESPONSE_H
#define API_ANTHROPIC_RESPONSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api_anthropic_error.h"
#include "api_anthropic_request.h"

struct cJSON;

/* An OpenAI usage object's numbers (OpenAI's meaning: prompt_tokens include cached ones). */
typedef struct {
    uint64_t prompt_tokens;
    uint64_t completion_tokens;
    uint64_t cached_tokens; /* prompt_tokens_details.cached_tokens; 0 when absent */
    bool known;             /* a usage object was seen */
} api_anthropic_usage_t;

/* Translates body[0..len). Returns 0 with *out (malloc'd JSON; the caller frees it) and
 * *usage (may be NULL) filled. A body that is not a chat completion, or whose tool call
 * arguments are not a JSON object, gives IPL_E_INVAL with err (status 502, the worker's
 * fault); a body that is an OpenAI/vLLM error gives IPL_E_INVAL with its message and status
 * (api_anthropic_error_from_openai; 502 when it names none). */
int api_anthropic_response_translate(const api_anthropic_request_t *req, const char *body,
                                     size_t len, char **out, api_anthropic_usage_t *usage,
                                     api_anthropic_error_t *err);

/* The stop reason for an OpenAI finish_reason (NULL: none given) as above. `matched` is
 * vLLM's choice.stop_reason when it is a string (NULL otherwise); when it equals one of
 * stops[0..nstop) the answer is "stop_sequence" and *stop_sequence points to it (else NULL). */
const char *api_anthropic_response_stop_reason(const char *finish_reason, const char *matched,
                                               bool tool_use, const char *const *stops,
                                               size_t nstop, const char **stop_sequence);

/* Reads an OpenAI usage object (anything else is ignored) into *usage. */
void api_anthropic_response_read_usage(const struct cJSON *usage_obj, api_anthropic_usage_t *usage);
/* The Anthropic usage object for *usage (key order as Anthropic sends it). NULL: no memory. */
struct cJSON *api_anthropic_response_usage(const api_anthropic_usage_t *usage);
/* {"id","type":"message","role":"assistant","model","content":[],"stop_reason":null,
 *  "stop_sequence":null}: the head of a message, for the answer and for message_start. */
struct cJSON *api_anthropic_response_message(const char *id, const char *model);

/* Writes "<prefix><upstream id>" into buf, or "<prefix><24 hex digits>" made up here when
 * upstream_id is NULL or empty; cut to fit `size`. Returns buf. */
char *api_anthropic_response_id(char *buf, size_t size, const char *prefix,
                                const char *upstream_id);

#endif
