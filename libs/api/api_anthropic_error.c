/*
 * api_anthropic_error — Anthropic-shaped errors. See api_anthropic_error.h.
 */
#include "api_anthropic_error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "api_json.h"

api_anthropic_error_t *api_anthropic_error_set(api_anthropic_error_t *err, int status,
                                               const char *fmt, ...)
{
    err->status = status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof(err->message), fmt, ap);
    va_end(ap);
    return err;
}

const char *api_anthropic_error_type(int status)
{
    switch (status) {
    case 400:
        return "invalid_request_error";
    case 401:
        return "authentication_error";
    case 402:
        return "billing_error";
    case 403:
        return "permission_error";
    case 404:
        return "not_found_error";
    case 413:
        return "request_too_large";
    case 429:
        return "rate_limit_error";
    case 503:
    case 529:
        return "overloaded_error";
    default:
        break;
    }
    return status >= 400 && status < 500 ? "invalid_request_error" : "api_error";
}

int api_anthropic_error_write(api_buf_t *out, int status, const char *message)
{
    if (!message) message = "";
    api_buf_printf(out, "{\"type\":\"error\",\"error\":{\"type\":\"%s\",\"message\":",
                   api_anthropic_error_type(status));
    api_buf_json_string(out, message, strlen(message));
    return api_buf_puts(out, "}}");
}

char *api_anthropic_error_body(int status, const char *message)
{
    api_buf_t out = {0};
    api_anthropic_error_write(&out, status, message);
    return api_buf_take(&out);
}

int api_anthropic_error_event(api_buf_t *out, int status, const char *message)
{
    api_buf_puts(out, "event: error\ndata: ");
    api_anthropic_error_write(out, status, message);
    return api_buf_puts(out, "\n\n");
}

int api_anthropic_error_from_openai(const cJSON *root, int status, api_anthropic_error_t *err)
{
    if (!cJSON_IsObject(root)) return 0;
    const cJSON *holder = NULL; /* the object carrying "message" and "code" */
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(root, "error");
    if (cJSON_IsObject(e)) {
        holder = e;
    } else if (cJSON_IsString(e)) {
        api_anthropic_error_set(err, status, "%s", e->valuestring);
        return 1;
    } else {
        const cJSON *object = cJSON_GetObjectItemCaseSensitive(root, "object");
        if (!cJSON_IsString(object) || strcmp(object->valuestring, "error") != 0) return 0;
        holder = root;
    }
    const cJSON *code = cJSON_GetObjectItemCaseSensitive(holder, "code");
    if (cJSON_IsNumber(code) && code->valuedouble >= 400 && code->valuedouble < 600)
        status = (int)code->valuedouble;
    const cJSON *message = cJSON_GetObjectItemCaseSensitive(holder, "message");
    if (cJSON_IsString(message) && message->valuestring[0])
        api_anthropic_error_set(err, status, "%s", message->valuestring);
    else
        api_anthropic_error_set(err, status, "the upstream reported an error without a message");
    return 1;
}

char *api_anthropic_error_translate(int status, const char *body, size_t len)
{
    api_anthropic_error_t err;
    cJSON *root = api_json_parse(body, len, NULL);
    if (!api_anthropic_error_from_openai(root, status, &err))
        api_anthropic_error_set(&err, status, "the upstream answered HTTP %d", status);
    cJSON_Delete(root);
    /* The answer keeps the upstream's status: a code inside the body only names the type. */
    return api_anthropic_error_body(status, err.message);
}
