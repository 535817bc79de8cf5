/*
 * gateway_messages — see the header.
 */
#include "gateway_messages.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_anthropic_count.h"
#include "api_anthropic_error.h"
#include "api_anthropic_request.h"
#include "api_anthropic_response.h"
#include "api_anthropic_stream.h"
#include "api_buf.h"
#include "ipl_error.h"
#include "ipl_httpd.h"

struct gateway_messages {
    api_anthropic_request_t *req;
    api_anthropic_stream_t *stream; /* a 2xx event stream's translator */
    int status;                     /* the upstream's */
    bool provider;
    api_buf_t held; /* a whole body (2xx JSON, or an error), until the end */
    api_buf_t out;  /* what one write translates to */
    bool failed;    /* the client is gone */
};

int gateway_messages_parse(const char *body, size_t len, bool count, gateway_messages_t **out,
                           char **chat_json, gateway_api_error_t *err)
{
    *out = NULL;
    *chat_json = NULL;
    gateway_messages_t *self = calloc(1, sizeof *self);
    if (!self) {
        gateway_api_error_set(err, 500, "api_error", NULL, NULL, "out of memory");
        return -1;
    }
    api_anthropic_error_t aerr = {0};
    if (api_anthropic_request_parse(count ? API_ANTHROPIC_COUNT_TOKENS : API_ANTHROPIC_MESSAGES,
                                    body, len, &self->req, &aerr) != 0) {
        gateway_api_error_set(err, aerr.status ? aerr.status : 400, "invalid_request_error", NULL,
                              NULL, "%s", aerr.message);
        free(self);
        return -1;
    }
    *chat_json = api_anthropic_request_openai_json(self->req);
    if (!*chat_json) {
        gateway_api_error_set(err, 500, "api_error", NULL, NULL, "out of memory");
        gateway_messages_destroy(&self);
        return -1;
    }
    *out = self;
    return 0;
}

void gateway_messages_destroy(gateway_messages_t **self_p)
{
    if (!self_p || !*self_p) return;
    gateway_messages_t *self = *self_p;
    api_anthropic_request_destroy(&self->req);
    api_anthropic_stream_destroy(&self->stream);
    api_buf_free(&self->held);
    api_buf_free(&self->out);
    free(self);
    *self_p = NULL;
}

int gateway_messages_status(const gateway_api_error_t *err)
{
    if (err->code && (!strcmp(err->code, "overloaded") || !strcmp(err->code, "backend_busy")))
        return 529;
    return err->status;
}

char *gateway_messages_error_body(int status, const char *message, size_t *len)
{
    char *body = api_anthropic_error_body(status, message);
    *len = body ? strlen(body) : 0;
    return body;
}

char *gateway_messages_count_body(uint64_t input_tokens, size_t *len)
{
    char *body = api_anthropic_count_body(input_tokens);
    *len = body ? strlen(body) : 0;
    return body;
}

const char *gateway_messages_begin(gateway_messages_t *self, int status, const char *ctype,
                                   uint64_t prompt_tokens, bool provider)
{
    self->status = status;
    self->provider = provider;
    bool ok = status >= 200 && status < 300;
    if (ok && ctype && strstr(ctype, "text/event-stream")) {
        self->stream = api_anthropic_stream_new(self->req);
        if (self->stream) api_anthropic_stream_set_input_tokens(self->stream, prompt_tokens);
        return "text/event-stream";
    }
    return "application/json";
}

// Writes `buf` to fd and empties it; false when the client is gone.
static bool s_flush(gateway_messages_t *self, int fd, api_buf_t *buf)
{
    if (!self->failed && buf->len && ipl_http_write_all(fd, buf->data, buf->len) != 0)
        self->failed = true;
    api_buf_clear(buf);
    return !self->failed;
}

int gateway_messages_write(gateway_messages_t *self, int fd, const char *data, size_t len)
{
    if (self->failed) return -1;
    if (self->stream) {
        (void)api_anthropic_stream_feed(self->stream, data, len, &self->out);
        return s_flush(self, fd, &self->out) ? 0 : -1;
    }
    if (self->held.len + len <= GATEWAY_MESSAGES_MAX_BODY) // beyond: translated as cut off
        (void)api_buf_append(&self->held, data, len);
    return 0;
}

void gateway_messages_finish(gateway_messages_t *self, int fd, bool ok, const char *error)
{
    if (self->failed) return;
    if (self->stream) {
        if (ok)
            (void)api_anthropic_stream_finish(self->stream, &self->out);
        else
            (void)api_anthropic_stream_abort(self->stream, 529, error, &self->out);
        (void)s_flush(self, fd, &self->out);
        return;
    }
    char *body = NULL;
    if (self->status >= 200 && self->status < 300 && ok) {
        api_anthropic_error_t err = {0};
        if (api_anthropic_response_translate(self->req, self->held.data, self->held.len, &body,
                                             NULL, &err) != 0)
            body = api_anthropic_error_body(err.status ? err.status : 502, err.message);
    } else if (!ok) {
        body = api_anthropic_error_body(502, error ? error : "the worker's answer broke off");
    } else if (self->provider && (self->status == 401 || self->status == 403)) {
        body = api_anthropic_error_body(self->status,
                                        "the provider refused the gateway's credentials for its "
                                        "backend; the platform team must check them");
    } else {
        body = api_anthropic_error_translate(self->status, self->held.data, self->held.len);
    }
    if (body) {
        api_buf_t b = {.data = body, .len = strlen(body), .cap = strlen(body) + 1};
        (void)s_flush(self, fd, &b);
        free(body);
    }
}
