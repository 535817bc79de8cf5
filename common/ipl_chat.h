/*
 * ipl_chat — turns an OpenAI chat `messages` array into the prompt text a worker tokenizes.
 *
 * The built-in template is ChatML (the Qwen family's):
 *     <|im_start|>{role}\n{content}<|im_end|>\n   for each message, then
 *     <|im_start|>assistant\n                      when add_generation_prompt
 * `content` may be a string, an array of content parts (the "text" parts joined with "\n", as
 * vLLM does; other part types are skipped), or null/absent (an assistant message carrying only
 * tool_calls), which renders empty. Other message fields (name, tool_calls, ...) are ignored.
 * Shared by the gateway and the simulator so both produce the same tokens.
 */
#ifndef IPL_CHAT_H
#define IPL_CHAT_H

#include <stdbool.h>
#include <stddef.h>

struct cJSON;

/* Renders `messages` (a cJSON array, borrowed). Returns malloc'd text (the caller frees), or
 * NULL with a human message in `err` (may be NULL) naming the place, e.g.
 * "messages[2].content[0] is not an object", when `messages` is not an array or a message is
 * malformed (not an object, no string role, content neither string, null nor array of part
 * objects, a "text" part without a string "text"). */
char *ipl_chat_render(const struct cJSON *messages, bool add_generation_prompt, char *err,
                      size_t errlen);

#endif
