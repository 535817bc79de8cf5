/*
 * ipl_chat — ChatML rendering of an OpenAI `messages` array (see ipl_chat.h).
 *
 * One walk of the messages, run twice: first to validate and measure, then to write into an
 * allocation of exactly that size, so there is no growing buffer and a malformed message is
 * reported before anything is allocated.
 */
#include "ipl_chat.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#define S_IM_START "<|im_start|>"
#define S_IM_END   "<|im_end|>"

/* Appends n bytes at out + *len when out is not NULL (the writing pass); always counts. */
static void s_put(char *out, size_t *len, const char *text, size_t n)
{
    if (out) memcpy(out + *len, text, n);
    *len += n;
}

static void s_puts(char *out, size_t *len, const char *text)
{
    s_put(out, len, text, strlen(text));
}

static void s_error(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void s_error(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* Writes (or measures) one message's content; -1 with err set when it is malformed. */
static int s_content(const cJSON *content, size_t index, char *out, size_t *len, char *err,
                     size_t errlen)
{
    if (!content || cJSON_IsNull(content))
        return 0; /* an assistant message with only tool_calls: empty, as vLLM renders it */
    if (cJSON_IsString(content) && content->valuestring) {
        s_puts(out, len, content->valuestring);
        return 0;
    }
    if (!cJSON_IsArray(content)) {
        s_error(err, errlen, "messages[%zu].content must be a string or an array of content parts",
                index);
        return -1;
    }
    /* Text parts are joined with "\n" as vLLM does for string-content templates; other part
     * types (image_url, input_audio, ...) carry no text and are skipped. */
    size_t k = 0, ntext = 0;
    const cJSON *part;
    cJSON_ArrayForEach(part, content)
    {
        if (!cJSON_IsObject(part)) {
            s_error(err, errlen, "messages[%zu].content[%zu] is not an object", index, k);
            return -1;
        }
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(part, "type");
        if (cJSON_IsString(type) && type->valuestring && strcmp(type->valuestring, "text") == 0) {
            const cJSON *text = cJSON_GetObjectItemCaseSensitive(part, "text");
            if (!cJSON_IsString(text) || !text->valuestring) {
                s_error(err, errlen,
                        "messages[%zu].content[%zu]: a \"text\" part needs a string \"text\"",
                        index, k);
                return -1;
            }
            if (ntext++ > 0) s_put(out, len, "\n", 1);
            s_puts(out, len, text->valuestring);
        }
        k++;
    }
    return 0;
}

/* The whole walk; returns the length of the rendering, or -1 with err set. */
static long long s_render(const cJSON *messages, bool add_generation_prompt, char *out, char *err,
                          size_t errlen)
{
    size_t len = 0, index = 0;
    const cJSON *msg;
    cJSON_ArrayForEach(msg, messages)
    {
        if (!cJSON_IsObject(msg)) {
            s_error(err, errlen, "messages[%zu] is not an object", index);
            return -1;
        }
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(msg, "role");
        if (!cJSON_IsString(role) || !role->valuestring) {
            s_error(err, errlen, "messages[%zu].role is missing or not a string", index);
            return -1;
        }
        s_puts(out, &len, S_IM_START);
        s_puts(out, &len, role->valuestring);
        s_put(out, &len, "\n", 1);
        if (s_content(cJSON_GetObjectItemCaseSensitive(msg, "content"), index, out, &len, err,
                      errlen) != 0)
            return -1;
        s_puts(out, &len, S_IM_END "\n");
        index++;
    }
    if (add_generation_prompt) s_puts(out, &len, S_IM_START "assistant\n");
    return (long long)len;
}

char *ipl_chat_render(const struct cJSON *messages, bool add_generation_prompt, char *err,
                      size_t errlen)
{
    if (!cJSON_IsArray(messages)) {
        s_error(err, errlen, "messages must be an array of message objects");
        return NULL;
    }
    long long len = s_render(messages, add_generation_prompt, NULL, err, errlen);
    if (len < 0) return NULL;
    char *text = malloc((size_t)len + 1);
    if (!text) {
        s_error(err, errlen, "out of memory rendering %lld bytes of messages", len);
        return NULL;
    }
    s_render(messages, add_generation_prompt, text, err, errlen);
    text[len] = '\0';
    return text;
}
