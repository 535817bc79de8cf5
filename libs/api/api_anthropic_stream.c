/*
 * api_anthropic_stream — OpenAI chat stream → Anthropic Messages stream. See the header.
 *
 * Two layers: the SSE reader (lines ended by "\n", "\r\n" or "\r", split anywhere across
 * feeds; `data:` lines joined into an event; a blank line dispatches it), and the chunk
 * translator (one state machine over the blocks of the answer):
 *
 *     (start) --first chunk--> message_start --+--> [text block] --+--> message_delta
 *                                              +--> [tool block] --+    message_stop
 *                                              (blocks one after another, each opened with
 *                                               content_block_start, closed with _stop)
 *
 * Every path out of OPEN is s_end (message_delta, message_stop) or s_fail (one error event).
 */
#include "api_anthropic_stream.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "api_anthropic_error.h"
#include "api_json.h"
#include "ipl_error.h"

#define S_ID_MAX 320

typedef enum { S_NONE = 0, S_TEXT, S_TOOL } s_block_t;

struct api_anthropic_stream {
    char *model;
    char **stops;
    size_t nstop;
    uint64_t preset_input;

    /* SSE reader */
    api_buf_t line; /* the current line, without its end */
    api_buf_t data; /* the current event's data lines, joined with "\n" */
    bool have_data;
    bool skip_lf; /* the last byte was '\r': a '\n' right after it ends the same line */

    /* translator */
    api_anthropic_stream_state_t state;
    bool started; /* message_start written */
    bool pinged;
    s_block_t block;     /* the open block */
    uint64_t index;      /* Anthropic index of the open block, or of the next one */
    int64_t tool_index;  /* OpenAI index of the open tool call */
    char *tool_id;       /* and its id */
    int64_t max_tool;    /* highest OpenAI tool call index started (-1: none) */
    bool tool_use;       /* a tool_use block was written */
    char *finish_reason; /* the worker's, once seen */
    char *matched_stop;  /* vLLM's choice.stop_reason, when a string */
    api_anthropic_stream_stats_t stats;
};

/* ------------------------------------------------------------------------------------- */
/* output                                                                                  */

static void s_fail(api_anthropic_stream_t *self, int status, int code, const char *message,
                   api_buf_t *out)
{
    if (self->state != API_ANTHROPIC_STREAM_OPEN) return;
    api_anthropic_error_event(out, status, message);
    self->stats.events_out++;
    self->stats.error = code;
    self->state = API_ANTHROPIC_STREAM_FAILED;
}

/* Writes "event: <name>\ndata: <json of obj>\n\n" and frees obj. */
static void s_event(api_anthropic_stream_t *self, const char *name, cJSON *obj, api_buf_t *out)
{
    char *json = obj ? cJSON_PrintUnformatted(obj) : NULL;
    cJSON_Delete(obj);
    if (!json) {
        self->stats.error = IPL_E_NOMEM;
        self->state = API_ANTHROPIC_STREAM_FAILED;
        return;
    }
    api_buf_printf(out, "event: %s\ndata: %s\n\n", name, json);
    free(json);
    self->stats.events_out++;
}

/* {"type": <type>} with room for more. */
static cJSON *s_typed(const char *type)
{
    cJSON *obj = cJSON_CreateObject();
    if (obj && !cJSON_AddStringToObject(obj, "type", type)) {
        cJSON_Delete(obj);
        return NULL;
    }
    return obj;
}

static void s_message_start(api_anthropic_stream_t *self, const cJSON *chunk, api_buf_t *out)
{
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(chunk, "id");
    char idbuf[S_ID_MAX];
    api_anthropic_response_id(idbuf, sizeof(idbuf), "msg_",
                              cJSON_IsString(id) ? id->valuestring : NULL);
    api_anthropic_usage_t u = {.prompt_tokens = self->preset_input};
    api_anthropic_response_read_usage(cJSON_GetObjectItemCaseSensitive(chunk, "usage"), &u);
    u.completion_tokens = 0;
    cJSON *event = s_typed("message_start");
    cJSON *message = api_anthropic_response_message(idbuf, self->model);
    cJSON *usage = api_anthropic_response_usage(&u);
    if (event && message && usage && cJSON_AddItemToObject(message, "usage", usage)) {
        usage = NULL;
        if (cJSON_AddItemToObject(event, "message", message)) message = NULL;
    }
    if (!event || message || usage) { /* a part is missing or not attached: out of memory */
        cJSON_Delete(event);
        cJSON_Delete(message);
        cJSON_Delete(usage);
        event = NULL;
    }
    s_event(self, "message_start", event, out);
    self->started = true;
}

static void s_close_block(api_anthropic_stream_t *self, api_buf_t *out)
{
    if (self->block == S_NONE) return;
    api_buf_printf(out,
                   "event: content_block_stop\ndata: "
                   "{\"type\":\"content_block_stop\",\"index\":%llu}\n\n",
                   (unsigned long long)self->index);
    self->stats.events_out++;
    self->block = S_NONE;
    self->index++;
    free(self->tool_id);
    self->tool_id = NULL;
}

/* content_block_start for `block` (the JSON of the content_block, borrowed), then the ping
 * after the first one. */
static void s_open_block(api_anthropic_stream_t *self, s_block_t kind, const char *block,
                         api_buf_t *out)
{
    s_close_block(self, out);
    api_buf_printf(out,
                   "event: content_block_start\ndata: "
                   "{\"type\":\"content_block_start\",\"index\":%llu,\"content_block\":%s}\n\n",
                   (unsigned long long)self->index, block);
    self->stats.events_out++;
    self->stats.blocks++;
    self->block = kind;
    if (!self->pinged) {
        api_buf_puts(out, "event: ping\ndata: {\"type\":\"ping\"}\n\n");
        self->stats.events_out++;
        self->pinged = true;
    }
}

/* content_block_delta of the open block: {"type": <type>, <key>: text}. */
static void s_delta(api_anthropic_stream_t *self, const char *type, const char *key,
                    const char *text, api_buf_t *out)
{
    api_buf_printf(out,
                   "event: content_block_delta\ndata: "
                   "{\"type\":\"content_block_delta\",\"index\":%llu,\"delta\":{\"type\":\"%s\","
                   "\"%s\":",
                   (unsigned long long)self->index, type, key);
    api_buf_json_string(out, text, strlen(text));
    api_buf_puts(out, "}}\n\n");
    self->stats.events_out++;
    self->stats.content_deltas++;
}

static void s_text(api_anthropic_stream_t *self, const char *text, api_buf_t *out)
{
    if (self->block != S_TEXT) s_open_block(self, S_TEXT, "{\"type\":\"text\",\"text\":\"\"}", out);
    s_delta(self, "text_delta", "text", text, out);
}

/* One element of delta.tool_calls. */
static void s_tool_delta(api_anthropic_stream_t *self, const cJSON *call, api_buf_t *out)
{
    if (!cJSON_IsObject(call)) {
        s_fail(self, 502, IPL_E_TYPE, "the worker sent a tool call delta that is not an object",
               out);
        return;
    }
    const cJSON *jindex = cJSON_GetObjectItemCaseSensitive(call, "index");
    const cJSON *jid = cJSON_GetObjectItemCaseSensitive(call, "id");
    const cJSON *function = cJSON_GetObjectItemCaseSensitive(call, "function");
    const cJSON *jname = cJSON_GetObjectItemCaseSensitive(function, "name");
    const cJSON *jargs = cJSON_GetObjectItemCaseSensitive(function, "arguments");
    const char *id = cJSON_IsString(jid) && jid->valuestring[0] ? jid->valuestring : NULL;
    const char *name = cJSON_IsString(jname) && jname->valuestring[0] ? jname->valuestring : NULL;
    int64_t index;
    if (cJSON_IsNumber(jindex) && isfinite(jindex->valuedouble) && jindex->valuedouble >= 0 &&
        jindex->valuedouble <= 1e9 && jindex->valuedouble == floor(jindex->valuedouble))
        index = (int64_t)jindex->valuedouble;
    else if (api_json_absent(jindex)) /* not OpenAI's, but unambiguous */
        index = self->block == S_TOOL ? self->tool_index : self->max_tool + 1;
    else {
        s_fail(self, 502, IPL_E_TYPE, "the worker sent a tool call delta with a bad index", out);
        return;
    }
    bool same = self->block == S_TOOL && index == self->tool_index &&
                !(id && name && self->tool_id && strcmp(id, self->tool_id) != 0);
    if (!same) {
        bool fresh = index > self->max_tool || (self->block == S_TOOL && index == self->tool_index);
        if (!fresh) {
            s_fail(self, 502, IPL_E_INVAL,
                   "the worker continued a tool call after its content block was closed", out);
            return;
        }
        if (!name) {
            s_fail(self, 502, IPL_E_INVAL, "the worker started a tool call without a function name",
                   out);
            return;
        }
        char idbuf[S_ID_MAX];
        if (id)
            snprintf(idbuf, sizeof(idbuf), "%s", id);
        else
            api_anthropic_response_id(idbuf, sizeof(idbuf), "toolu_", NULL);
        api_buf_t block = {0};
        api_buf_puts(&block, "{\"type\":\"tool_use\",\"id\":");
        api_buf_json_string(&block, idbuf, strlen(idbuf));
        api_buf_puts(&block, ",\"name\":");
        api_buf_json_string(&block, name, strlen(name));
        api_buf_puts(&block, ",\"input\":{}}");
        char *tool_id = strdup(idbuf);
        if (block.error || !tool_id) {
            api_buf_free(&block);
            free(tool_id);
            self->stats.error = IPL_E_NOMEM;
            self->state = API_ANTHROPIC_STREAM_FAILED;
            return;
        }
        s_open_block(self, S_TOOL, block.data, out);
        api_buf_free(&block);
        self->tool_id = tool_id;
        self->tool_index = index;
        if (index > self->max_tool) self->max_tool = index;
        self->tool_use = true;
    }
    if (cJSON_IsString(jargs) && jargs->valuestring[0])
        s_delta(self, "input_json_delta", "partial_json", jargs->valuestring, out);
}

/* Keeps the first non-empty string value seen for a field. */
static void s_keep(char **slot, const cJSON *item, api_anthropic_stream_t *self)
{
    if (*slot || !cJSON_IsString(item) || !item->valuestring[0]) return;
    if (!(*slot = strdup(item->valuestring))) {
        self->stats.error = IPL_E_NOMEM;
        self->state = API_ANTHROPIC_STREAM_FAILED;
    }
}

static void s_choice(api_anthropic_stream_t *self, const cJSON *choice, api_buf_t *out)
{
    const cJSON *index = cJSON_GetObjectItemCaseSensitive(choice, "index");
    if (cJSON_IsNumber(index) && index->valuedouble != 0) return; /* n is never asked for */
    const cJSON *delta = cJSON_GetObjectItemCaseSensitive(choice, "delta");
    if (cJSON_IsObject(delta)) {
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(delta, "content");
        if (cJSON_IsString(content) && content->valuestring[0])
            s_text(self, content->valuestring, out);
        const cJSON *r1 = cJSON_GetObjectItemCaseSensitive(delta, "reasoning_content");
        const cJSON *r2 = cJSON_GetObjectItemCaseSensitive(delta, "reasoning");
        if ((cJSON_IsString(r1) && r1->valuestring[0]) ||
            (cJSON_IsString(r2) && r2->valuestring[0]))
            self->stats.reasoning_deltas++;
        const cJSON *calls = cJSON_GetObjectItemCaseSensitive(delta, "tool_calls");
        const cJSON *call;
        if (cJSON_IsArray(calls)) {
            cJSON_ArrayForEach(call, calls)
            {
                if (self->state != API_ANTHROPIC_STREAM_OPEN) return;
                s_tool_delta(self, call, out);
            }
        }
    }
    s_keep(&self->finish_reason, cJSON_GetObjectItemCaseSensitive(choice, "finish_reason"), self);
    s_keep(&self->matched_stop, cJSON_GetObjectItemCaseSensitive(choice, "stop_reason"), self);
}

/* The normal end: the open block closed, message_delta, message_stop. */
static void s_end(api_anthropic_stream_t *self, api_buf_t *out)
{
    if (self->state != API_ANTHROPIC_STREAM_OPEN) return;
    if (!self->started) {
        s_fail(self, 502, IPL_E_TRUNCATED, "the worker's stream ended before any answer", out);
        return;
    }
    s_close_block(self, out);
    const char *stop_sequence;
    const char *reason = api_anthropic_response_stop_reason(
        self->finish_reason, self->matched_stop, self->tool_use, (const char *const *)self->stops,
        self->nstop, &stop_sequence);
    api_anthropic_usage_t u = self->stats.usage;
    if (!u.known) u.prompt_tokens = self->preset_input;
    cJSON *event = s_typed("message_delta"), *delta = cJSON_CreateObject();
    cJSON *usage = api_anthropic_response_usage(&u);
    bool ok = event && delta && usage && cJSON_AddStringToObject(delta, "stop_reason", reason) &&
              (stop_sequence ? cJSON_AddStringToObject(delta, "stop_sequence", stop_sequence)
                             : cJSON_AddNullToObject(delta, "stop_sequence"));
    if (ok && cJSON_AddItemToObject(event, "delta", delta)) {
        delta = NULL;
        if (cJSON_AddItemToObject(event, "usage", usage)) usage = NULL;
    }
    if (!ok || delta || usage) { /* out of memory */
        cJSON_Delete(event);
        cJSON_Delete(delta);
        cJSON_Delete(usage);
        event = NULL;
    }
    s_event(self, "message_delta", event, out);
    if (self->state != API_ANTHROPIC_STREAM_OPEN) return;
    api_buf_puts(out, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
    self->stats.events_out++;
    self->state = API_ANTHROPIC_STREAM_DONE;
}

/* ------------------------------------------------------------------------------------- */
/* input                                                                                   */

/* One upstream event (its data lines joined). */
static void s_dispatch(api_anthropic_stream_t *self, api_buf_t *out)
{
    self->stats.events_in++;
    const char *d = self->data.data ? self->data.data : "";
    size_t n = self->data.len;
    if (n == 6 && memcmp(d, "[DONE]", 6) == 0) {
        s_end(self, out);
        return;
    }
    cJSON *chunk = api_json_parse(d, n, NULL);
    api_anthropic_error_t e;
    if (!cJSON_IsObject(chunk)) {
        s_fail(self, 502, IPL_E_TYPE, "the worker sent an event that is not a JSON object", out);
    } else if (api_anthropic_error_from_openai(chunk, 500, &e)) {
        s_fail(self, e.status, IPL_E_IO, e.message, out);
    } else {
        if (!self->started) s_message_start(self, chunk, out);
        api_anthropic_response_read_usage(cJSON_GetObjectItemCaseSensitive(chunk, "usage"),
                                          &self->stats.usage);
        const cJSON *choices = cJSON_GetObjectItemCaseSensitive(chunk, "choices");
        const cJSON *choice;
        if (cJSON_IsArray(choices)) {
            cJSON_ArrayForEach(choice, choices)
            {
                if (self->state != API_ANTHROPIC_STREAM_OPEN) break;
                s_choice(self, choice, out);
            }
        }
    }
    cJSON_Delete(chunk);
}

/* One complete line of the event stream (the SSE field rules; only `data` matters here). */
static void s_line(api_anthropic_stream_t *self, api_buf_t *out)
{
    const char *l = self->line.data ? self->line.data : "";
    size_t n = self->line.len;
    if (n == 0) {
        if (self->have_data) s_dispatch(self, out);
        api_buf_clear(&self->data);
        self->have_data = false;
    } else if (n >= 4 && memcmp(l, "data", 4) == 0 && (n == 4 || l[4] == ':')) {
        size_t skip = n > 4 ? 5 : 4;
        if (skip < n && l[skip] == ' ') skip++;
        if (self->have_data) api_buf_append(&self->data, "\n", 1);
        api_buf_append(&self->data, l + skip, n - skip);
        self->have_data = true;
        if (self->data.error) {
            self->stats.error = self->data.error;
            self->state = API_ANTHROPIC_STREAM_FAILED;
        }
    } /* else a comment (":..."), or event:/id:/retry:, which OpenAI streams do not use */
    api_buf_clear(&self->line);
}

static int s_result(api_anthropic_stream_t *self, api_buf_t *out)
{
    if (out->error && !self->stats.error) {
        self->stats.error = out->error;
        self->state = API_ANTHROPIC_STREAM_FAILED;
    }
    return self->state == API_ANTHROPIC_STREAM_FAILED ? self->stats.error : 0;
}

int api_anthropic_stream_feed(api_anthropic_stream_t *self, const char *data, size_t len,
                              api_buf_t *out)
{
    if (!data || len == 0) return s_result(self, out);
    const char *p = data, *end = data + len;
    while (p < end && self->state == API_ANTHROPIC_STREAM_OPEN) {
        if (self->skip_lf) {
            self->skip_lf = false;
            if (*p == '\n') {
                p++;
                continue;
            }
        }
        const char *q = p;
        while (q < end && *q != '\n' && *q != '\r')
            q++;
        if (self->line.len + (size_t)(q - p) + self->data.len > API_ANTHROPIC_STREAM_MAX_EVENT) {
            s_fail(self, 502, IPL_E_RANGE, "the worker sent an event over 1 MiB", out);
            break;
        }
        api_buf_append(&self->line, p, (size_t)(q - p));
        if (self->line.error) {
            self->stats.error = self->line.error;
            self->state = API_ANTHROPIC_STREAM_FAILED;
            break;
        }
        p = q;
        if (q == end) break;
        self->skip_lf = *q == '\r';
        p++;
        s_line(self, out);
    }
    self->stats.bytes_after_end += (uint64_t)(end - p);
    return s_result(self, out);
}

int api_anthropic_stream_finish(api_anthropic_stream_t *self, api_buf_t *out)
{
    if (self->state == API_ANTHROPIC_STREAM_OPEN && self->line.len) s_line(self, out);
    if (self->state == API_ANTHROPIC_STREAM_OPEN && self->have_data) {
        s_dispatch(self, out);
        api_buf_clear(&self->data);
        self->have_data = false;
    }
    if (self->state == API_ANTHROPIC_STREAM_OPEN) {
        if (self->started && self->finish_reason)
            s_end(self, out); /* the worker closed after its last chunk, without [DONE] */
        else
            s_fail(self, 502, IPL_E_TRUNCATED,
                   "the worker's stream ended before the answer was complete", out);
    }
    return s_result(self, out);
}

int api_anthropic_stream_abort(api_anthropic_stream_t *self, int status, const char *message,
                               api_buf_t *out)
{
    s_fail(self, status, IPL_E_IO, message ? message : "the worker's stream broke off", out);
    return s_result(self, out);
}

/* ------------------------------------------------------------------------------------- */
/* lifetime                                                                                */

api_anthropic_stream_t *api_anthropic_stream_new(const api_anthropic_request_t *req)
{
    api_anthropic_stream_t *self = calloc(1, sizeof(*self));
    if (!self) return NULL;
    self->max_tool = -1;
    size_t n;
    const char *const *stops = api_anthropic_request_stops(req, &n);
    self->model = strdup(api_anthropic_request_model(req));
    self->stops = n ? calloc(n, sizeof(char *)) : NULL;
    bool ok = self->model && (n == 0 || self->stops);
    for (size_t i = 0; ok && i < n; i++) {
        if (!(self->stops[i] = strdup(stops[i]))) ok = false;
        self->nstop = i + 1;
    }
    if (!ok) api_anthropic_stream_destroy(&self);
    return self;
}

void api_anthropic_stream_destroy(api_anthropic_stream_t **self_p)
{
    if (!self_p || !*self_p) return;
    api_anthropic_stream_t *self = *self_p;
    free(self->model);
    for (size_t i = 0; i < self->nstop; i++)
        free(self->stops[i]);
    free(self->stops);
    api_buf_free(&self->line);
    api_buf_free(&self->data);
    free(self->tool_id);
    free(self->finish_reason);
    free(self->matched_stop);
    free(self);
    *self_p = NULL;
}

void api_anthropic_stream_set_input_tokens(api_anthropic_stream_t *self, uint64_t n)
{
    self->preset_input = n;
}

api_anthropic_stream_state_t api_anthropic_stream_state(const api_anthropic_stream_t *self)
{
    return self->state;
}

const api_anthropic_stream_stats_t *api_anthropic_stream_stats(const api_anthropic_stream_t *self)
{
    return &self->stats;
}
