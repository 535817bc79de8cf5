/*
 * api_anthropic_count — POST /v1/messages/count_tokens, and the prompt a /v1/messages
 * request is routed on.
 *
 * The prompt is the translated request's OpenAI messages (and tools) rendered by the
 * gateway's model (ipl_prompt_render, with the generation prompt), exactly as the gateway
 * renders a /v1/chat/completions request's messages: so a /v1/messages request and the
 * equivalent chat request give the same prompt text, hence the same tokens, the same block
 * hashes and the same cache hits.
 */
#ifndef API_ANTHROPIC_COUNT_H
#define API_ANTHROPIC_COUNT_H

#include <stddef.h>
#include <stdint.h>

#include "api_anthropic_request.h"
#include "ipl_prompt.h"

/* The prompt text rendered by `prompt` (borrowed; malloc'd text, the caller frees it), or
 * NULL with a message in err (may be NULL) when the messages cannot be rendered or memory
 * ran out. */
char *api_anthropic_count_prompt(const api_anthropic_request_t *req, const ipl_prompt_t *prompt,
                                 char *err, size_t errlen);

/* The count_tokens answer, {"input_tokens":N}, malloc'd (NULL: out of memory). */
char *api_anthropic_count_body(uint64_t input_tokens);

#endif
