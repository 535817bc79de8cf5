/*
 * api_anthropic_count — the prompt text of a translated request and the count_tokens
 * answer. See api_anthropic_count.h.
 */
#include "api_anthropic_count.h"

#include <stdio.h>
#include <stdlib.h>

#include <cjson/cJSON.h>

#include "api_buf.h"
#include "ipl_chat.h"

char *api_anthropic_count_prompt(const api_anthropic_request_t *req, char *err, size_t errlen)
{
    const cJSON *messages =
        cJSON_GetObjectItemCaseSensitive(api_anthropic_request_openai(req), "messages");
    /* add_generation_prompt: the OpenAI path's default, which the translation never changes. */
    return ipl_chat_render(messages, true, err, errlen);
}

char *api_anthropic_count_body(uint64_t input_tokens)
{
    api_buf_t out = {0};
    api_buf_printf(&out, "{\"input_tokens\":%llu}", (unsigned long long)input_tokens);
    return api_buf_take(&out);
}
