/*
 * bench_stream — answer decoding and timing. See bench_stream.h.
 */
#include "bench_stream.h"

#include <assert.h>
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "ipl_error.h"
#include "ipl_sse.h"

#define S_DEFAULT_MAX (8u << 20)
#define S_TEXT_MAX    (4u << 20)

struct bench_stream {
    bench_api_t api;
    bool streamed, keep_text;
    size_t max;
    ipl_sse_t *sse;
    uint64_t now_ns;
    bench_stream_stats_t st;
    char *body; /* a non-streamed body */
    size_t body_len, body_cap;
    bool body_over;
    char *text;
    size_t text_len, text_cap;
};

int bench_api_parse(const char *name, bench_api_t *out)
{
    if (!strcmp(name, "chat") || !strcmp(name, "openai-chat"))
        *out = BENCH_API_CHAT;
    else if (!strcmp(name, "completions") || !strcmp(name, "openai-completions"))
        *out = BENCH_API_COMPLETIONS;
    else if (!strcmp(name, "messages") || !strcmp(name, "anthropic"))
        *out = BENCH_API_MESSAGES;
    else
        return IPL_E_INVAL;
    return 0;
}

const char *bench_api_name(bench_api_t api)
{
    return api == BENCH_API_CHAT          ? "chat"
           : api == BENCH_API_COMPLETIONS ? "completions"
                                          : "messages";
}

static bool s_grow(char **buf, size_t *len, size_t *cap, size_t max, const char *src, size_t n)
{
    if (n > max - *len) return false;
    if (*len + n + 1 > *cap) {
        size_t want = *cap ? *cap : 1024;
        while (want < *len + n + 1)
            want *= 2;
        char *g = realloc(*buf, want);
        if (!g) return false;
        *buf = g;
        *cap = want;
    }
    memcpy(*buf + *len, src, n);
    *len += n;
    (*buf)[*len] = '\0';
    return true;
}

static void s_text(bench_stream_t *self, const char *s)
{
    if (self->keep_text && s)
        (void)s_grow(&self->text, &self->text_len, &self->text_cap, S_TEXT_MAX, s, strlen(s));
}

static const char *s_str(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) && v->valuestring && v->valuestring[0] ? v->valuestring : NULL;
}

static int64_t s_count(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0) || v->valuedouble > 1e15) return -1;
    return (int64_t)v->valuedouble;
}

/* One content iteration at now; output: not reasoning. */
static void s_iteration(bench_stream_t *self, bool output)
{
    bench_stream_stats_t *st = &self->st;
    if (!st->first_ns) st->first_ns = self->now_ns;
    if (output && !st->first_output_ns) st->first_output_ns = self->now_ns;
    st->last_ns = self->now_ns;
    st->iterations++;
}

static void s_openai_usage(bench_stream_t *self, const cJSON *root)
{
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(root, "usage");
    if (!cJSON_IsObject(u)) return;
    self->st.usage = true;
    self->st.prompt_tokens = s_count(u, "prompt_tokens");
    self->st.completion_tokens = s_count(u, "completion_tokens");
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(u, "prompt_tokens_details");
    self->st.cached_tokens = cJSON_IsObject(d) ? s_count(d, "cached_tokens") : -1;
}

/* A chat chunk or completion (streamed: `delta`; a body: `message`). */
static void s_openai(bench_stream_t *self, const cJSON *root, bool streamed)
{
    const cJSON *choices = cJSON_GetObjectItemCaseSensitive(root, "choices");
    const cJSON *c;
    bool output = false, reasoning = false;
    cJSON_ArrayForEach(c, choices)
    {
        if (s_str(c, "finish_reason")) self->st.finished = true;
        const char *t = s_str(c, "text");
        if (t) {
            output = true;
            s_text(self, t);
        }
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(c, streamed ? "delta" : "message");
        if (!cJSON_IsObject(d)) continue;
        const char *content = s_str(d, "content");
        if (content) {
            output = true;
            s_text(self, content);
        }
        if (s_str(d, "reasoning_content") || s_str(d, "reasoning")) reasoning = true;
        const cJSON *tools = cJSON_GetObjectItemCaseSensitive(d, "tool_calls");
        if (cJSON_IsArray(tools) && cJSON_GetArraySize(tools) > 0) output = true;
    }
    if (streamed && (output || reasoning)) s_iteration(self, output);
    s_openai_usage(self, root);
}

static void s_anthropic_usage(bench_stream_t *self, const cJSON *u)
{
    if (!cJSON_IsObject(u)) return;
    self->st.usage = true;
    int64_t in = s_count(u, "input_tokens"), read = s_count(u, "cache_read_input_tokens"),
            created = s_count(u, "cache_creation_input_tokens"), out = s_count(u, "output_tokens");
    if (in >= 0) self->st.prompt_tokens = in + (read > 0 ? read : 0) + (created > 0 ? created : 0);
    if (read >= 0) self->st.cached_tokens = read;
    if (out >= 0) self->st.completion_tokens = out;
}

/* A Messages body, or one named event of a Messages stream. */
static void s_anthropic(bench_stream_t *self, const char *event, const cJSON *root)
{
    const char *type = s_str(root, "type");
    if (!type) type = event;
    if (!strcmp(type, "error") || !strcmp(event, "error")) {
        self->st.error = true;
    } else if (!strcmp(type, "message")) { /* a whole body */
        const cJSON *b;
        cJSON_ArrayForEach(b, cJSON_GetObjectItemCaseSensitive(root, "content"))
            s_text(self, s_str(b, "text"));
        if (s_str(root, "stop_reason")) self->st.finished = true;
        s_anthropic_usage(self, cJSON_GetObjectItemCaseSensitive(root, "usage"));
    } else if (!strcmp(type, "message_start")) {
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(root, "message");
        s_anthropic_usage(self, cJSON_GetObjectItemCaseSensitive(m, "usage"));
    } else if (!strcmp(type, "content_block_delta")) {
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(root, "delta");
        const char *dt = s_str(d, "type");
        if (dt && !strcmp(dt, "text_delta") && s_str(d, "text")) {
            s_text(self, s_str(d, "text"));
            s_iteration(self, true);
        } else if (dt && !strcmp(dt, "thinking_delta") && s_str(d, "thinking")) {
            s_iteration(self, false);
        } else if (dt && !strcmp(dt, "input_json_delta")) {
            s_iteration(self, true);
        }
    } else if (!strcmp(type, "message_delta")) {
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(root, "delta");
        if (s_str(d, "stop_reason")) self->st.finished = true;
        s_anthropic_usage(self, cJSON_GetObjectItemCaseSensitive(root, "usage"));
    } else if (!strcmp(type, "message_stop")) {
        self->st.done = true;
    }
}

static void s_on_event(void *arg, const char *event, size_t elen, const char *data, size_t dlen)
{
    (void)elen;
    bench_stream_t *self = arg;
    self->st.events++;
    if (self->api != BENCH_API_MESSAGES && dlen == 6 && memcmp(data, "[DONE]", 6) == 0) {
        self->st.done = true;
        return;
    }
    cJSON *root = cJSON_ParseWithLength(data, dlen);
    if (!cJSON_IsObject(root)) {
        self->st.malformed++;
        cJSON_Delete(root);
        return;
    }
    if (self->api == BENCH_API_MESSAGES) {
        s_anthropic(self, event, root);
    } else {
        if (cJSON_GetObjectItemCaseSensitive(root, "error")) self->st.error = true;
        s_openai(self, root, true);
    }
    cJSON_Delete(root);
}

bench_stream_t *bench_stream_new(size_t max_event)
{
    bench_stream_t *self = calloc(1, sizeof *self);
    if (!self) return NULL;
    self->max = max_event ? max_event : S_DEFAULT_MAX;
    self->sse = ipl_sse_new(self->max, s_on_event, self);
    if (!self->sse) bench_stream_destroy(&self);
    return self;
}

void bench_stream_destroy(bench_stream_t **self_p)
{
    assert(self_p);
    bench_stream_t *self = *self_p;
    if (!self) return;
    ipl_sse_destroy(&self->sse);
    free(self->body);
    free(self->text);
    free(self);
    *self_p = NULL;
}

void bench_stream_start(bench_stream_t *self, bench_api_t api, bool streamed, bool keep_text)
{
    self->api = api;
    self->streamed = streamed;
    self->keep_text = keep_text;
    memset(&self->st, 0, sizeof self->st);
    self->st.prompt_tokens = self->st.completion_tokens = self->st.cached_tokens = -1;
    self->body_len = self->text_len = 0;
    self->body_over = false;
    if (self->text) self->text[0] = '\0';
    ipl_sse_reset(self->sse);
}

void bench_stream_as_body(bench_stream_t *self)
{
    self->streamed = false;
}

void bench_stream_feed(bench_stream_t *self, const char *data, size_t len, uint64_t now_ns)
{
    self->now_ns = now_ns;
    if (self->streamed) {
        ipl_sse_feed(self->sse, data, len);
    } else if (!self->body_over &&
               !s_grow(&self->body, &self->body_len, &self->body_cap, self->max, data, len)) {
        self->body_over = true;
    }
}

void bench_stream_finish(bench_stream_t *self, uint64_t now_ns)
{
    self->now_ns = now_ns;
    if (self->streamed) {
        ipl_sse_finish(self->sse);
        self->st.overlong = ipl_sse_overlong(self->sse);
        return;
    }
    if (self->body_over) {
        self->st.overlong++;
        return;
    }
    cJSON *root = self->body_len ? cJSON_ParseWithLength(self->body, self->body_len) : NULL;
    if (!cJSON_IsObject(root)) {
        if (self->body_len) self->st.malformed++;
        cJSON_Delete(root);
        return;
    }
    if (cJSON_GetObjectItemCaseSensitive(root, "error") ||
        (s_str(root, "type") && !strcmp(s_str(root, "type"), "error")) ||
        (s_str(root, "object") && !strcmp(s_str(root, "object"), "error"))) {
        self->st.error = true;
    } else if (self->api == BENCH_API_MESSAGES) {
        s_anthropic(self, "", root);
        self->st.done = true;
    } else {
        s_openai(self, root, false);
        self->st.done = cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(root, "choices"));
    }
    if (self->st.done) self->st.first_ns = self->st.first_output_ns = self->st.last_ns = now_ns;
    cJSON_Delete(root);
}

const bench_stream_stats_t *bench_stream_stats(const bench_stream_t *self)
{
    return &self->st;
}

const char *bench_stream_text(const bench_stream_t *self, size_t *len)
{
    if (len) *len = self->text_len;
    return self->text && self->text_len ? self->text : "";
}
