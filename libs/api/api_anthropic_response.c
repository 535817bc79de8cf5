/*
 * api_anthropic_response — OpenAI chat completion → Anthropic message. See the header.
 */
#include "api_anthropic_response.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "api_json.h"
#include "ipl_clock.h"
#include "ipl_error.h"
#include "ipl_hash.h"

#define S_ID_MAX 320 /* "msg_" + an upstream id: ids longer than this are cut */

char *api_anthropic_response_id(char *buf, size_t size, const char *prefix, const char *upstream_id)
{
    if (upstream_id && upstream_id[0]) {
        snprintf(buf, size, "%s%s", prefix, upstream_id);
        return buf;
    }
    /* Unique enough to tell messages apart in logs: time and a process-wide counter, mixed. */
    static atomic_uint_fast64_t s_counter;
    uint64_t n = atomic_fetch_add(&s_counter, 1);
    uint64_t a = ipl_mix64(ipl_mono_ns() ^ (n << 1)), b = ipl_mix64(ipl_wall_ms() + n);
    snprintf(buf, size, "%s%016llx%08llx", prefix, (unsigned long long)a,
             (unsigned long long)(b & 0xffffffffULL));
    return buf;
}

const char *api_anthropic_response_stop_reason(const char *finish_reason, const char *matched,
                                               bool tool_use, const char *const *stops,
                                               size_t nstop, const char **stop_sequence)
{
    *stop_sequence = NULL;
    if (!finish_reason) return tool_use ? "tool_use" : "end_turn";
    if (strcmp(finish_reason, "length") == 0) return "max_tokens";
    if (strcmp(finish_reason, "tool_calls") == 0 || strcmp(finish_reason, "function_call") == 0)
        return "tool_use";
    if (strcmp(finish_reason, "content_filter") == 0) return "refusal";
    if (strcmp(finish_reason, "stop") != 0) return tool_use ? "tool_use" : "end_turn";
    if (tool_use) return "tool_use";
    for (size_t i = 0; matched && i < nstop; i++) {
        if (strcmp(matched, stops[i]) == 0) {
            *stop_sequence = stops[i];
            return "stop_sequence";
        }
    }
    return "end_turn";
}

/* A non-negative whole count, or 0. */
static uint64_t s_count(const cJSON *obj, const char *key)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!cJSON_IsNumber(item) || !isfinite(item->valuedouble) || item->valuedouble < 0 ||
        item->valuedouble > 1e15)
        return 0;
    return (uint64_t)item->valuedouble;
}

void api_anthropic_response_read_usage(const cJSON *usage_obj, api_anthropic_usage_t *usage)
{
    if (!cJSON_IsObject(usage_obj)) return;
    usage->known = true;
    usage->prompt_tokens = s_count(usage_obj, "prompt_tokens");
    usage->completion_tokens = s_count(usage_obj, "completion_tokens");
    usage->cached_tokens = s_count(
        cJSON_GetObjectItemCaseSensitive(usage_obj, "prompt_tokens_details"), "cached_tokens");
    if (usage->cached_tokens > usage->prompt_tokens) usage->cached_tokens = usage->prompt_tokens;
}

cJSON *api_anthropic_response_usage(const api_anthropic_usage_t *usage)
{
    cJSON *u = cJSON_CreateObject();
    if (!u) return NULL;
    if (!cJSON_AddNumberToObject(u, "input_tokens",
                                 (double)(usage->prompt_tokens - usage->cached_tokens)) ||
        !cJSON_AddNumberToObject(u, "cache_creation_input_tokens", 0) ||
        !cJSON_AddNumberToObject(u, "cache_read_input_tokens", (double)usage->cached_tokens) ||
        !cJSON_AddNumberToObject(u, "output_tokens", (double)usage->completion_tokens)) {
        cJSON_Delete(u);
        return NULL;
    }
    return u;
}

cJSON *api_anthropic_response_message(const char *id, const char *model)
{
    cJSON *m = cJSON_CreateObject();
    if (!m) return NULL;
    if (!cJSON_AddStringToObject(m, "id", id) || !cJSON_AddStringToObject(m, "type", "message") ||
        !cJSON_AddStringToObject(m, "role", "assistant") ||
        !cJSON_AddStringToObject(m, "model", model) || !cJSON_AddArrayToObject(m, "content") ||
        !cJSON_AddNullToObject(m, "stop_reason") || !cJSON_AddNullToObject(m, "stop_sequence")) {
        cJSON_Delete(m);
        return NULL;
    }
    return m;
}

static int s_bad(api_anthropic_error_t *err, const char *what)
{
    api_anthropic_error_set(err, 502, "the worker's answer is not a chat completion: %s", what);
    return IPL_E_INVAL;
}

/* One OpenAI tool call → a tool_use block appended to content. */
static int s_tool_use(const cJSON *call, size_t k, cJSON *content, api_anthropic_error_t *err)
{
    const cJSON *function = cJSON_GetObjectItemCaseSensitive(call, "function");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(function, "name");
    const cJSON *arguments = cJSON_GetObjectItemCaseSensitive(function, "arguments");
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(call, "id");
    if (!cJSON_IsString(name) || !name->valuestring[0]) {
        api_anthropic_error_set(err, 502, "the worker's tool call %zu has no function name", k);
        return IPL_E_INVAL;
    }
    cJSON *input = NULL;
    if (api_json_absent(arguments)) {
        input = cJSON_CreateObject();
    } else if (cJSON_IsString(arguments)) {
        const char *a = arguments->valuestring;
        while (*a == ' ' || *a == '\t' || *a == '\n' || *a == '\r')
            a++;
        input = *a ? api_json_parse(a, strlen(a), NULL) : cJSON_CreateObject();
    } else if (cJSON_IsObject(arguments)) { /* some providers send the object itself */
        input = cJSON_Duplicate(arguments, 1);
    }
    if (!cJSON_IsObject(input)) {
        cJSON_Delete(input);
        api_anthropic_error_set(err, 502,
                                "the worker's tool call %zu (\"%s\") has arguments that are not "
                                "a JSON object",
                                k, name->valuestring);
        return IPL_E_INVAL;
    }
    /* The worker's id is kept as it is: the client sends it back as tool_result.tool_use_id,
     * which becomes the tool message's tool_call_id. */
    char idbuf[S_ID_MAX];
    if (cJSON_IsString(id) && id->valuestring[0])
        snprintf(idbuf, sizeof(idbuf), "%s", id->valuestring);
    else
        api_anthropic_response_id(idbuf, sizeof(idbuf), "toolu_", NULL);
    cJSON *block = cJSON_CreateObject();
    if (!block || !cJSON_AddStringToObject(block, "type", "tool_use") ||
        !cJSON_AddStringToObject(block, "id", idbuf) ||
        !cJSON_AddStringToObject(block, "name", name->valuestring) ||
        !cJSON_AddItemToObject(block, "input", input)) {
        cJSON_Delete(block);
        cJSON_Delete(input);
        api_anthropic_error_set(err, 500, "out of memory translating the answer");
        return IPL_E_NOMEM;
    }
    cJSON_AddItemToArray(content, block);
    return 0;
}

/* The content blocks of choices[0].message; *tool_use set when there are tool calls. */
static int s_content(const cJSON *message, cJSON *content, bool *tool_use,
                     api_anthropic_error_t *err)
{
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(message, "content");
    if (!api_json_absent(text) && !cJSON_IsString(text))
        return s_bad(err, "choices.0.message.content is neither a string nor null");
    if (cJSON_IsString(text) && text->valuestring[0]) {
        cJSON *block = cJSON_CreateObject();
        if (!block || !cJSON_AddStringToObject(block, "type", "text") ||
            !cJSON_AddStringToObject(block, "text", text->valuestring)) {
            cJSON_Delete(block);
            api_anthropic_error_set(err, 500, "out of memory translating the answer");
            return IPL_E_NOMEM;
        }
        cJSON_AddItemToArray(content, block);
    }
    const cJSON *calls = cJSON_GetObjectItemCaseSensitive(message, "tool_calls");
    if (api_json_absent(calls)) return 0;
    if (!cJSON_IsArray(calls)) return s_bad(err, "choices.0.message.tool_calls is not an array");
    size_t k = 0;
    const cJSON *call;
    cJSON_ArrayForEach(call, calls)
    {
        int rc = s_tool_use(call, k++, content, err);
        if (rc) return rc;
        *tool_use = true;
    }
    return 0;
}

int api_anthropic_response_translate(const api_anthropic_request_t *req, const char *body,
                                     size_t len, char **out, api_anthropic_usage_t *usage,
                                     api_anthropic_error_t *err)
{
    *out = NULL;
    api_anthropic_usage_t u = {0};
    cJSON *root = api_json_parse(body, len, NULL), *msg = NULL;
    int rc = 0;
    if (!cJSON_IsObject(root)) {
        rc = s_bad(err, "not a JSON object");
        goto done;
    }
    if (api_anthropic_error_from_openai(root, 502, err)) {
        rc = IPL_E_INVAL;
        goto done;
    }
    const cJSON *choices = cJSON_GetObjectItemCaseSensitive(root, "choices");
    const cJSON *choice = cJSON_IsArray(choices) ? cJSON_GetArrayItem(choices, 0) : NULL;
    const cJSON *message = cJSON_GetObjectItemCaseSensitive(choice, "message");
    if (!cJSON_IsObject(choice) || !cJSON_IsObject(message)) {
        rc = s_bad(err, "it has no choices.0.message");
        goto done;
    }
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(root, "id");
    char idbuf[S_ID_MAX];
    api_anthropic_response_id(idbuf, sizeof(idbuf), "msg_",
                              cJSON_IsString(id) ? id->valuestring : NULL);
    msg = api_anthropic_response_message(idbuf, api_anthropic_request_model(req));
    if (!msg) goto nomem;
    bool tool_use = false;
    rc = s_content(message, cJSON_GetObjectItemCaseSensitive(msg, "content"), &tool_use, err);
    if (rc) goto done;

    const cJSON *finish = cJSON_GetObjectItemCaseSensitive(choice, "finish_reason");
    const cJSON *matched = cJSON_GetObjectItemCaseSensitive(choice, "stop_reason");
    size_t nstop;
    const char *const *stops = api_anthropic_request_stops(req, &nstop);
    const char *stop_sequence;
    const char *reason =
        api_anthropic_response_stop_reason(cJSON_IsString(finish) ? finish->valuestring : NULL,
                                           cJSON_IsString(matched) ? matched->valuestring : NULL,
                                           tool_use, stops, nstop, &stop_sequence);
    cJSON *r = cJSON_CreateString(reason);
    cJSON *s = stop_sequence ? cJSON_CreateString(stop_sequence) : cJSON_CreateNull();
    if (!r || !cJSON_ReplaceItemInObjectCaseSensitive(msg, "stop_reason", r)) {
        cJSON_Delete(r);
        cJSON_Delete(s);
        goto nomem;
    }
    if (!s || !cJSON_ReplaceItemInObjectCaseSensitive(msg, "stop_sequence", s)) {
        cJSON_Delete(s);
        goto nomem;
    }
    api_anthropic_response_read_usage(cJSON_GetObjectItemCaseSensitive(root, "usage"), &u);
    cJSON *usage_json = api_anthropic_response_usage(&u);
    if (!usage_json || !cJSON_AddItemToObject(msg, "usage", usage_json)) {
        cJSON_Delete(usage_json);
        goto nomem;
    }
    *out = cJSON_PrintUnformatted(msg);
    if (!*out) goto nomem;
    if (usage) *usage = u;
    goto done;
nomem:
    api_anthropic_error_set(err, 500, "out of memory translating the answer");
    rc = IPL_E_NOMEM;
done:
    cJSON_Delete(root);
    cJSON_Delete(msg);
    return rc;
}
