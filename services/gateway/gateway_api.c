/*
 * gateway_api — request parsing and validation. See gateway_api.h.
 */
#include "gateway_api.h"

#include <assert.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_json.h"
#include "ipl_error.h"
#include "ipl_prompt.h"

#define S_INVALID          "invalid_request_error"
#define S_MAX_TOKENS_LIMIT 1e9 /* far above any model length; rejects absurd values */

gateway_api_error_t *gateway_api_error_set(gateway_api_error_t *err, int status, const char *type,
                                           const char *param, const char *code, const char *fmt,
                                           ...)
{
    err->status = status;
    err->type = type;
    err->param = param;
    err->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof(err->message), fmt, ap);
    va_end(ap);
    return err;
}

const char *gateway_api_kind_name(gateway_api_kind_t kind)
{
    return kind == GATEWAY_API_CHAT       ? "chat"
           : kind == GATEWAY_API_MESSAGES ? "messages"
                                          : "completions";
}

/* Optional positive integer field: absent or null → 0. */
static int s_positive_int(const cJSON *root, const char *name, int64_t *out,
                          gateway_api_error_t *err)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(root, name);
    if (!item || cJSON_IsNull(item)) return 0;
    double v = cJSON_IsNumber(item) ? item->valuedouble : NAN;
    if (!cJSON_IsNumber(item) || !isfinite(v) || v != floor(v) || v < 1 || v > S_MAX_TOKENS_LIMIT) {
        gateway_api_error_set(
            err, 400, S_INVALID, name, NULL, "\"%s\" must be a positive integer, got %s", name,
            cJSON_IsNumber(item) ? "a number out of range or with a fraction" : api_json_type(item));
        return IPL_E_INVAL;
    }
    *out = (int64_t)v;
    return 0;
}

/* An optional field of one JSON type: absent or null → NULL; 0, or fills *err. */
static int s_optional(const cJSON *root, const char *name, cJSON_bool (*is)(const cJSON *),
                      const char *want, const cJSON **out, gateway_api_error_t *err)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(root, name);
    *out = NULL;
    if (!item || cJSON_IsNull(item)) return 0;
    if (!is(item)) {
        gateway_api_error_set(err, 400, S_INVALID, name, NULL, "\"%s\" must be %s, got %s", name,
                              want, api_json_type(item));
        return IPL_E_INVAL;
    }
    *out = item;
    return 0;
}

static int s_parse_chat(gateway_api_req_t *req, cJSON *root, const ipl_prompt_t *prompt,
                        gateway_api_error_t *err)
{
    const cJSON *messages = cJSON_GetObjectItemCaseSensitive(root, "messages");
    if (!cJSON_IsArray(messages)) {
        gateway_api_error_set(err, 400, S_INVALID, "messages", NULL,
                              "\"messages\" is required and must be an array of messages, got %s",
                              api_json_type(messages));
        return IPL_E_INVAL;
    }
    if (cJSON_GetArraySize(messages) == 0) {
        gateway_api_error_set(err, 400, S_INVALID, "messages", NULL,
                              "\"messages\" must contain at least one message");
        return IPL_E_INVAL;
    }
    /* vLLM's extensions: add_generation_prompt (default true), continue_final_message,
     * chat_template_kwargs; and the tools the template may render */
    const cJSON *agp, *cont, *kwargs, *tools;
    if (s_optional(root, "add_generation_prompt", cJSON_IsBool, "a boolean", &agp, err) ||
        s_optional(root, "continue_final_message", cJSON_IsBool, "a boolean", &cont, err) ||
        s_optional(root, "chat_template_kwargs", cJSON_IsObject, "an object", &kwargs, err) ||
        s_optional(root, "tools", cJSON_IsArray, "an array", &tools, err))
        return IPL_E_INVAL;
    char why[256] = "";
    int rc = 0;
    req->worker_tokenize = ipl_prompt_unrenderable(prompt) != NULL; /* gateway_tokenize */
    if (req->worker_tokenize)
        rc = (req->prompt = strdup("")) ? 0 : IPL_E_NOMEM;
    else
        rc = ipl_prompt_render(prompt, messages, tools, !cJSON_IsFalse(agp), cJSON_IsTrue(cont),
                               kwargs, &req->prompt, NULL, why, sizeof(why));
    if (rc == IPL_E_NOMEM) {
        gateway_api_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
        return rc;
    }
    if (rc != 0) {
        gateway_api_error_set(err, 400, S_INVALID, "messages", NULL, "invalid \"messages\": %s",
                              why[0] ? why : "cannot render the conversation");
        return IPL_E_INVAL;
    }
    req->chat = true;
    req->prompt_len = strlen(req->prompt);
    req->prompts = 1;
    if (s_positive_int(root, "max_tokens", &req->max_tokens, err) != 0) return IPL_E_INVAL;
    int64_t mct = 0;
    if (s_positive_int(root, "max_completion_tokens", &mct, err) != 0) return IPL_E_INVAL;
    if (!req->max_tokens) req->max_tokens = mct;
    return 0;
}

static int s_parse_completions(gateway_api_req_t *req, cJSON *root, gateway_api_error_t *err)
{
    const cJSON *prompt = cJSON_GetObjectItemCaseSensitive(root, "prompt");
    const char *first = NULL;
    if (cJSON_IsString(prompt)) {
        first = prompt->valuestring;
        req->prompts = 1;
    } else if (cJSON_IsArray(prompt)) {
        int n = cJSON_GetArraySize(prompt);
        if (n == 0) {
            gateway_api_error_set(err, 400, S_INVALID, "prompt", NULL,
                                  "\"prompt\" must not be an empty array");
            return IPL_E_INVAL;
        }
        int i = 0;
        const cJSON *item;
        cJSON_ArrayForEach(item, prompt)
        {
            if (!cJSON_IsString(item)) {
                gateway_api_error_set(err, 400, S_INVALID, "prompt", NULL,
                                      "\"prompt\"[%d] must be a string, got %s", i,
                                      api_json_type(item));
                return IPL_E_INVAL;
            }
            if (!first) first = item->valuestring;
            i++;
        }
        req->prompts = (size_t)n;
    } else {
        gateway_api_error_set(err, 400, S_INVALID, "prompt", NULL,
                              "\"prompt\" is required and must be a string or an array of "
                              "strings, got %s",
                              api_json_type(prompt));
        return IPL_E_INVAL;
    }
    /* The batch's first prompt is the one routed on; the others usually share its prefix. */
    req->prompt = strdup(first);
    if (!req->prompt) {
        gateway_api_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
        return IPL_E_NOMEM;
    }
    req->prompt_len = strlen(req->prompt);
    return s_positive_int(root, "max_tokens", &req->max_tokens, err);
}

int gateway_api_parse(gateway_api_kind_t kind, const char *body, size_t len,
                      const ipl_prompt_t *prompt, gateway_api_req_t **out, gateway_api_error_t *err)
{
    assert(prompt && out && err);
    *out = NULL;
    if (!body || len == 0) {
        gateway_api_error_set(err, 400, S_INVALID, NULL, NULL,
                              "the request body is empty; send a JSON object");
        return IPL_E_INVAL;
    }
    const char *parse_end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(body, len, &parse_end, false);
    /* cJSON stops after the first value: anything but whitespace after it is an error. */
    if (root && parse_end) {
        const char *p = parse_end, *end = body + len;
        while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
            p++;
        if (p < end) {
            cJSON_Delete(root);
            root = NULL;
            parse_end = p;
        }
    }
    if (!root) {
        size_t at = parse_end && parse_end >= body ? (size_t)(parse_end - body) : 0;
        gateway_api_error_set(err, 400, S_INVALID, NULL, NULL,
                              "the request body is not valid JSON (error near byte %zu)", at);
        return IPL_E_INVAL;
    }
    gateway_api_req_t *req = calloc(1, sizeof(*req));
    if (!req) {
        cJSON_Delete(root);
        gateway_api_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
        return IPL_E_NOMEM;
    }
    req->kind = kind;
    req->root = root;
    req->body = body;
    req->body_len = len;
    int rc = IPL_E_INVAL;
    if (!cJSON_IsObject(root)) {
        gateway_api_error_set(err, 400, S_INVALID, NULL, NULL,
                              "the request body must be a JSON object, got %s", api_json_type(root));
        goto fail;
    }
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (!cJSON_IsString(model) || !model->valuestring[0]) {
        gateway_api_error_set(err, 400, S_INVALID, "model", NULL,
                              "\"model\" is required and must be a non-empty string, got %s",
                              cJSON_IsString(model) ? "an empty string" : api_json_type(model));
        goto fail;
    }
    req->model = model->valuestring;
    const cJSON *stream = cJSON_GetObjectItemCaseSensitive(root, "stream");
    if (stream && !cJSON_IsBool(stream) && !cJSON_IsNull(stream)) {
        gateway_api_error_set(err, 400, S_INVALID, "stream", NULL,
                              "\"stream\" must be a boolean, got %s", api_json_type(stream));
        goto fail;
    }
    req->stream = cJSON_IsTrue(stream);
    const cJSON *opts = cJSON_GetObjectItemCaseSensitive(root, "stream_options");
    if (opts && !cJSON_IsObject(opts) && !cJSON_IsNull(opts)) {
        gateway_api_error_set(err, 400, S_INVALID, "stream_options", NULL,
                              "\"stream_options\" must be an object, got %s", api_json_type(opts));
        goto fail;
    }
    const cJSON *salt;
    rc = s_optional(root, "cache_salt", cJSON_IsString, "a string", &salt, err);
    if (rc != 0) goto fail;
    req->cache_salt = salt ? salt->valuestring : NULL;
    rc = kind == GATEWAY_API_CHAT ? s_parse_chat(req, root, prompt, err)
                                  : s_parse_completions(req, root, err);
    if (rc != 0) goto fail;
    *out = req;
    return 0;
fail:
    gateway_api_req_destroy(&req);
    return rc;
}

char *gateway_api_tokenize_body(const gateway_api_req_t *req, size_t *len)
{
    assert(req && len);
    *len = 0;
    if (req->kind != GATEWAY_API_CHAT) return NULL;
    static const char *const copied[] = {"model", "messages", "tools", "add_generation_prompt",
                                         "continue_final_message", "chat_template_kwargs"};
    cJSON *body = cJSON_CreateObject();
    bool ok = body != NULL;
    for (size_t i = 0; ok && i < sizeof copied / sizeof *copied; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(req->root, copied[i]);
        if (!v || cJSON_IsNull(v)) continue;
        cJSON *dup = cJSON_Duplicate(v, true);
        ok = dup && cJSON_AddItemToObject(body, copied[i], dup);
        if (!ok) cJSON_Delete(dup);
    }
    ok = ok && cJSON_AddFalseToObject(body, "add_special_tokens");
    char *text = ok ? cJSON_PrintUnformatted(body) : NULL;
    cJSON_Delete(body);
    if (text) *len = strlen(text);
    return text;
}

void gateway_api_req_destroy(gateway_api_req_t **self_p)
{
    assert(self_p);
    gateway_api_req_t *self = *self_p;
    if (!self) return;
    cJSON_Delete((cJSON *)self->root);
    free(self->prompt);
    free(self);
    *self_p = NULL;
}

int gateway_api_set_cache_salt(gateway_api_req_t *req, const char *salt)
{
    assert(req && salt);
    cJSON *root = req->root, *value = cJSON_CreateString(salt);
    if (!value) return IPL_E_NOMEM;
    bool ok = cJSON_GetObjectItemCaseSensitive(root, "cache_salt")
                  ? cJSON_ReplaceItemInObjectCaseSensitive(root, "cache_salt", value)
                  : cJSON_AddItemToObject(root, "cache_salt", value);
    if (!ok) {
        cJSON_Delete(value);
        return IPL_E_NOMEM;
    }
    req->cache_salt = value->valuestring;
    req->edited = true;
    return 0;
}

char *gateway_api_upstream_body(const gateway_api_req_t *req, const char *model, size_t *len)
{
    assert(req && len);
    if (!model) model = req->model;
    if (!req->edited && strcmp(model, req->model) == 0) {
        char *copy = malloc(req->body_len + 1);
        if (!copy) return NULL;
        memcpy(copy, req->body, req->body_len);
        copy[req->body_len] = '\0';
        *len = req->body_len;
        return copy;
    }
    /* Re-serialise a duplicate so the request's own tree (and req->model) stay intact. */
    cJSON *dup = cJSON_Duplicate((const cJSON *)req->root, true);
    if (!dup) return NULL;
    cJSON *name = cJSON_CreateString(model);
    if (!name || !cJSON_ReplaceItemInObjectCaseSensitive(dup, "model", name)) {
        cJSON_Delete(name);
        cJSON_Delete(dup);
        return NULL;
    }
    char *text = cJSON_PrintUnformatted(dup);
    cJSON_Delete(dup);
    if (text) *len = strlen(text);
    return text;
}

char *gateway_api_error_body(const char *type, const char *message, const char *param,
                             const char *code, size_t *len)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *error = cJSON_AddObjectToObject(root, "error");
    if (!error) {
        cJSON_Delete(root);
        return NULL;
    }
    cJSON_AddStringToObject(error, "message", message ? message : "");
    cJSON_AddStringToObject(error, "type", type ? type : "server_error");
    if (param)
        cJSON_AddStringToObject(error, "param", param);
    else
        cJSON_AddNullToObject(error, "param");
    if (code)
        cJSON_AddStringToObject(error, "code", code);
    else
        cJSON_AddNullToObject(error, "code");
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (text && len) *len = strlen(text);
    return text;
}
