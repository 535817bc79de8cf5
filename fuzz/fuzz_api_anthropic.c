/* libFuzzer target: the Anthropic Messages translators of libs/api (libipl-api).
 *
 * The first byte picks what the rest of the input is:
 *   0 (mod 3)  a /v1/messages or (bit 7 set) /v1/messages/count_tokens request body for
 *              api_anthropic_request_parse;
 *   1 (mod 3)  a worker's OpenAI event stream for api_anthropic_stream;
 *   2 (mod 3)  a worker's whole chat completion for api_anthropic_response_translate.
 *
 * Beyond "no crash" (ASan/UBSan), it checks the contracts on every input:
 *   - request: a refusal is a 400 (or 500 for memory) with a message; an accepted request's
 *     OpenAI body serialises to JSON that parses again, holds the model and at least one
 *     message, a positive max_tokens on /v1/messages, and always renders to a prompt;
 *   - stream: the output is the same whether the input comes whole or in pieces (sizes drawn
 *     from the input itself), every output event is `event: <name>\ndata: <JSON whose type is
 *     name>\n\n`, the first is message_start or error, and the stream ends with message_stop
 *     or error, once;
 *   - response: an answer is a JSON object of type "message"; a refusal has a 4xx/5xx status.
 *
 * Built with the library's sources (the Makefile's FUZZ_EXTRA_fuzz_api_anthropic).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "api_anthropic_count.h"
#include "api_anthropic_error.h"
#include "api_anthropic_request.h"
#include "api_anthropic_response.h"
#include "api_anthropic_stream.h"
#include "api_buf.h"

static void s_fuzz_request(const uint8_t *data, size_t size, api_anthropic_kind_t kind)
{
    api_anthropic_request_t *req = NULL;
    api_anthropic_error_t err;
    memset(&err, 0, sizeof(err));
    int rc = api_anthropic_request_parse(kind, (const char *)data, size, &req, &err);
    if (rc != 0) {
        if (req) abort();
        if (err.status != 400 && err.status != 500) abort();
        if (!err.message[0] || strnlen(err.message, sizeof(err.message)) == sizeof(err.message))
            abort();
        return;
    }
    cJSON *body = api_anthropic_request_openai(req);
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(body, "model");
    const cJSON *messages = cJSON_GetObjectItemCaseSensitive(body, "messages");
    if (!cJSON_IsString(model) || strcmp(model->valuestring, api_anthropic_request_model(req)) != 0)
        abort();
    if (!cJSON_IsArray(messages) || cJSON_GetArraySize(messages) < 1) abort();
    if (kind == API_ANTHROPIC_MESSAGES && api_anthropic_request_max_tokens(req) < 1) abort();
    char *json = api_anthropic_request_openai_json(req);
    if (json) {
        cJSON *again = cJSON_Parse(json);
        if (!again || !cJSON_Compare(again, body, 1)) abort();
        cJSON_Delete(again);
        free(json);
    }
    static ipl_prompt_t *chatml; /* the built-in model, opened once (never freed: a fuzzer) */
    if (!chatml && !(chatml = ipl_prompt_open("builtin", NULL, 0))) abort();
    char *prompt = api_anthropic_count_prompt(req, chatml, NULL, 0);
    if (!prompt) abort();
    free(prompt);
    api_anthropic_request_destroy(&req);
}

static api_anthropic_request_t *s_stream_request(void)
{
    static const char body[] = "{\"model\":\"claude-x\",\"max_tokens\":64,\"stream\":true,"
                               "\"stop_sequences\":[\"END\",\"\\n\\n\"],\"messages\":[{\"role\":"
                               "\"user\",\"content\":\"hi\"}]}";
    api_anthropic_request_t *req = NULL;
    api_anthropic_error_t err;
    if (api_anthropic_request_parse(API_ANTHROPIC_MESSAGES, body, sizeof(body) - 1, &req, &err))
        abort();
    return req;
}

/* Feeds data in pieces whose sizes come from `seed` (0: whole); returns the output. */
static char *s_stream_run(const api_anthropic_request_t *req, const uint8_t *data, size_t size,
                          uint32_t seed, int *state)
{
    api_anthropic_stream_t *st = api_anthropic_stream_new(req);
    if (!st) abort();
    api_buf_t out = {0};
    size_t at = 0;
    while (at < size) {
        size_t n = size - at;
        if (seed) {
            seed = seed * 1103515245u + 12345u;
            size_t piece = 1 + (seed >> 16) % 17;
            if (piece < n) n = piece;
        }
        api_anthropic_stream_feed(st, (const char *)data + at, n, &out);
        at += n;
    }
    api_anthropic_stream_finish(st, &out);
    *state = (int)api_anthropic_stream_state(st);
    api_anthropic_stream_destroy(&st);
    char *text = api_buf_take(&out);
    if (!text) abort();
    return text;
}

/* The output's shape: events only, JSON data whose type is the name, a proper end. */
static void s_stream_check(const char *text, int state)
{
    const char *p = text;
    int n = 0;
    const char *last = NULL;
    size_t last_len = 0;
    while (*p) {
        if (strncmp(p, "event: ", 7) != 0) abort();
        const char *nl = strchr(p, '\n');
        if (!nl || strncmp(nl + 1, "data: ", 6) != 0) abort();
        const char *name = p + 7, *data = nl + 7, *end = strstr(data, "\n\n");
        size_t name_len = (size_t)(nl - name);
        if (!end) abort();
        cJSON *j = cJSON_ParseWithLength(data, (size_t)(end - data));
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(j, "type");
        if (!cJSON_IsString(type) || strlen(type->valuestring) != name_len ||
            memcmp(type->valuestring, name, name_len) != 0)
            abort();
        cJSON_Delete(j);
        if (last &&
            (strncmp(last, "message_stop", last_len) == 0 || strncmp(last, "error", last_len) == 0))
            abort(); /* nothing after the end */
        if (n == 0 && strncmp(name, "message_start", name_len) != 0 &&
            strncmp(name, "error", name_len) != 0)
            abort();
        last = name;
        last_len = name_len;
        n++;
        p = end + 2;
    }
    if (!last) abort(); /* finish always ends the stream one way or the other */
    int stopped = last_len == 12 && strncmp(last, "message_stop", 12) == 0;
    int errored = last_len == 5 && strncmp(last, "error", 5) == 0;
    if (state == API_ANTHROPIC_STREAM_DONE ? !stopped : !errored) abort();
}

/* Ids made up when the worker gives none ("msg_" or "toolu_" and 24 hex digits) differ from
 * run to run: blanks their digits so that two runs compare. */
static void s_mask_ids(char *text)
{
    static const char *const prefixes[] = {"\"msg_", "\"toolu_"};
    for (size_t k = 0; k < 2; k++) {
        size_t plen = strlen(prefixes[k]);
        for (char *p = strstr(text, prefixes[k]); p; p = strstr(p + 1, prefixes[k])) {
            char *h = p + plen;
            size_t n = 0;
            while (n < 24 && h[n] && strchr("0123456789abcdef", h[n]))
                n++;
            if (n == 24 && h[24] == '"') memset(h, 'x', 24);
        }
    }
}

static void s_fuzz_stream(const uint8_t *data, size_t size)
{
    api_anthropic_request_t *req = s_stream_request();
    int state_whole = 0, state_split = 0;
    char *whole = s_stream_run(req, data, size, 0, &state_whole);
    uint32_t seed = 1;
    for (size_t i = 0; i < size && i < 8; i++)
        seed = seed * 31u + data[i];
    char *split = s_stream_run(req, data, size, seed | 1u, &state_split);
    s_mask_ids(whole);
    s_mask_ids(split);
    if (strcmp(whole, split) != 0 || state_whole != state_split) abort();
    s_stream_check(whole, state_whole);
    free(whole);
    free(split);
    api_anthropic_request_destroy(&req);
}

static void s_fuzz_response(const uint8_t *data, size_t size)
{
    api_anthropic_request_t *req = s_stream_request();
    char *out = NULL;
    api_anthropic_usage_t usage;
    api_anthropic_error_t err;
    int rc = api_anthropic_response_translate(req, (const char *)data, size, &out, &usage, &err);
    if (rc == 0) {
        cJSON *j = cJSON_Parse(out);
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(j, "type");
        if (!cJSON_IsString(type) || strcmp(type->valuestring, "message") != 0) abort();
        if (!cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(j, "content"))) abort();
        if (usage.cached_tokens > usage.prompt_tokens) abort();
        cJSON_Delete(j);
        free(out);
    } else {
        if (out || err.status < 400 || err.status > 599) abort();
    }
    api_anthropic_request_destroy(&req);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    const uint8_t *rest = data + 1;
    size_t n = size - 1;
    switch (data[0] % 3) {
    case 0:
        s_fuzz_request(rest, n,
                       data[0] & 0x80 ? API_ANTHROPIC_COUNT_TOKENS : API_ANTHROPIC_MESSAGES);
        break;
    case 1:
        s_fuzz_stream(rest, n);
        break;
    default:
        s_fuzz_response(rest, n);
        break;
    }
    return 0;
}
