/*
 * api_anthropic_count — the prompt text of a translated request and the count_tokens
 * answer. See api_anthropic_count.h.
 */
#include "api_anthropic_count.h"

#include <stdio.h>
#include <stdlib.h>

#include <cjson/cJSON.h>

#include "api_buf.h"

char *api_anthropic_count_prompt(const api_anthropic_request_t *req, const ipl_prompt_t *prompt,
                                 char *err, size_t errlen)
{
    const cJSON *body = api_anthropic_request_openai(req);
    const cJSON *messages = cJSON_GetObjectItemCaseSensitive(body, "messages");
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(body, "tools");
    /* add_generation_prompt: the OpenAI path's default, which the translation never changes. */
    char *text = NULL;
    ipl_prompt_render(prompt, messages, cJSON_IsArray(tools) ? tools : NULL, true, false, NULL,
                      &text, NULL, err, errlen);
    return text;
}

char *api_anthropic_count_body(uint64_t input_tokens)
{
    api_buf_t out = {0};
    api_buf_printf(&out, "{\"input_tokens\":%llu}", (unsigned long long)input_tokens);
    return api_buf_take(&out);
}
