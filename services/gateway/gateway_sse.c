/*
 * gateway_sse — incremental SSE / usage parser. See gateway_sse.h.
 *
 * STREAM mode follows the SSE rules that matter for OpenAI streams: lines end in \n, \r\n
 * or \r; `data:` lines of one event are joined with \n; a blank line dispatches the event;
 * other fields (event:, id:, retry:) and comments (:) are ignored.
 *
 *   feed ──► line buffer ──(line complete)──► data buffer ──(blank line)──► s_dispatch
 */
#include "gateway_sse.h"

#include <assert.h>
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define S_DEFAULT_MAX (1u << 20)

struct gateway_sse {
    gateway_sse_mode_t mode;
    size_t max;
    gateway_sse_stats_t stats;
    char *line; /* current line (STREAM) or the body copy (JSON) */
    size_t line_len;
    bool line_over; /* current line / body exceeded max: skip it */
    bool after_cr;  /* last byte was \r: a following \n belongs to the same line end */
    char *data;     /* data of the current event (STREAM) */
    size_t data_len;
    bool data_over;
    bool has_data;
};

gateway_sse_t *gateway_sse_new(gateway_sse_mode_t mode, size_t max_buffer)
{
    gateway_sse_t *self = calloc(1, sizeof(*self));
    if (!self) return NULL;
    self->mode = mode;
    self->max = max_buffer ? max_buffer : S_DEFAULT_MAX;
    return self;
}

void gateway_sse_destroy(gateway_sse_t **self_p)
{
    assert(self_p);
    gateway_sse_t *self = *self_p;
    if (!self) return;
    free(self->line);
    free(self->data);
    free(self);
    *self_p = NULL;
}

/* Appends to a bounded growable buffer; returns false (and leaves it) when it would exceed
 * `max` or memory runs out. */
static bool s_append(char **buf, size_t *len, size_t max, const char *src, size_t n)
{
    if (n > max - *len) return false;
    char *grown = realloc(*buf, *len + n + 1);
    if (!grown) return false;
    memcpy(grown + *len, src, n);
    *len += n;
    grown[*len] = '\0';
    *buf = grown;
    return true;
}

static bool s_nonempty_string(const cJSON *item)
{
    return cJSON_IsString(item) && item->valuestring && item->valuestring[0];
}

static uint64_t s_count(const cJSON *item)
{
    if (!cJSON_IsNumber(item) || !(item->valuedouble >= 0) || item->valuedouble > 1e15) return 0;
    return (uint64_t)item->valuedouble;
}

/* Takes usage from `root` when it carries a non-null usage object. */
static void s_take_usage(gateway_sse_t *self, const cJSON *root)
{
    const cJSON *usage = cJSON_GetObjectItemCaseSensitive(root, "usage");
    if (!cJSON_IsObject(usage)) return;
    self->stats.usage = true;
    self->stats.prompt_tokens = s_count(cJSON_GetObjectItemCaseSensitive(usage, "prompt_tokens"));
    self->stats.completion_tokens =
        s_count(cJSON_GetObjectItemCaseSensitive(usage, "completion_tokens"));
    const cJSON *details = cJSON_GetObjectItemCaseSensitive(usage, "prompt_tokens_details");
    self->stats.cached_tokens =
        cJSON_IsObject(details)
            ? s_count(cJSON_GetObjectItemCaseSensitive(details, "cached_tokens"))
            : 0;
}

/* Whether any choice of a streamed chunk carries generated output. */
static bool s_has_content(const cJSON *root)
{
    const cJSON *choices = cJSON_GetObjectItemCaseSensitive(root, "choices");
    const cJSON *choice;
    cJSON_ArrayForEach(choice, choices)
    {
        if (s_nonempty_string(cJSON_GetObjectItemCaseSensitive(choice, "text"))) return true;
        const cJSON *delta = cJSON_GetObjectItemCaseSensitive(choice, "delta");
        if (!cJSON_IsObject(delta)) continue;
        if (s_nonempty_string(cJSON_GetObjectItemCaseSensitive(delta, "content")) ||
            s_nonempty_string(cJSON_GetObjectItemCaseSensitive(delta, "reasoning_content")) ||
            s_nonempty_string(cJSON_GetObjectItemCaseSensitive(delta, "reasoning")))
            return true;
        const cJSON *tools = cJSON_GetObjectItemCaseSensitive(delta, "tool_calls");
        if (cJSON_IsArray(tools) && cJSON_GetArraySize(tools) > 0) return true;
    }
    return false;
}

static void s_dispatch(gateway_sse_t *self, uint64_t now_ns)
{
    if (!self->has_data) return;
    bool over = self->data_over;
    self->has_data = false;
    self->data_over = false;
    size_t len = self->data_len;
    self->data_len = 0;
    if (over) {
        self->stats.overlong++;
        return;
    }
    self->stats.events++;
    const char *text = self->data ? self->data : "";
    if (len == 6 && memcmp(text, "[DONE]", 6) == 0) {
        self->stats.done = true;
        return;
    }
    cJSON *root = cJSON_ParseWithLength(text, len);
    if (!cJSON_IsObject(root)) {
        self->stats.malformed++;
        cJSON_Delete(root);
        return;
    }
    if (cJSON_GetObjectItemCaseSensitive(root, "error")) self->stats.error = true;
    if (s_has_content(root)) {
        if (!self->stats.content_events) self->stats.first_content_ns = now_ns;
        self->stats.last_content_ns = now_ns;
        self->stats.content_events++;
    }
    s_take_usage(self, root);
    cJSON_Delete(root);
}

/* One complete line (without its terminator). */
static void s_line(gateway_sse_t *self, const char *line, size_t len, bool over, uint64_t now_ns)
{
    if (over) { /* too long to judge: if it was data, the event is spoiled */
        if (len < 5 || memcmp(line, "data:", 5) == 0) { /* too short a prefix to tell */
            self->has_data = true;
            self->data_over = true;
        }
        return;
    }
    if (len == 0) {
        s_dispatch(self, now_ns);
        return;
    }
    if (len < 5 || memcmp(line, "data:", 5) != 0) return; /* comment or another field */
    const char *value = line + 5;
    size_t vlen = len - 5;
    if (vlen && *value == ' ') {
        value++;
        vlen--;
    }
    if (self->has_data && !self->data_over &&
        !s_append(&self->data, &self->data_len, self->max, "\n", 1))
        self->data_over = true;
    self->has_data = true;
    if (!self->data_over && !s_append(&self->data, &self->data_len, self->max, value, vlen))
        self->data_over = true;
}

static void s_feed_stream(gateway_sse_t *self, const char *p, size_t len, uint64_t now_ns)
{
    const char *end = p + len;
    while (p < end) {
        if (self->after_cr && *p == '\n') { /* the \n of a \r\n already ended the line */
            self->after_cr = false;
            p++;
            continue;
        }
        self->after_cr = false;
        const char *eol = p;
        while (eol < end && *eol != '\n' && *eol != '\r')
            eol++;
        size_t n = (size_t)(eol - p);
        if (!self->line_over && !s_append(&self->line, &self->line_len, self->max, p, n)) {
            /* keep what fits: the field name at the start of an over-long line decides what
             * it spoils (a data line its event, a comment nothing), wherever TCP cut it */
            size_t room = self->max - self->line_len;
            if (room < n) s_append(&self->line, &self->line_len, self->max, p, room);
            self->line_over = true;
        }
        if (eol == end) return; /* the line continues in the next chunk */
        self->after_cr = *eol == '\r';
        s_line(self, self->line ? self->line : "", self->line_len, self->line_over, now_ns);
        self->line_len = 0;
        self->line_over = false;
        p = eol + 1;
    }
}

void gateway_sse_feed(gateway_sse_t *self, const char *data, size_t len, uint64_t now_ns)
{
    assert(self);
    if (!len) return;
    if (!self->stats.bytes) self->stats.first_byte_ns = now_ns;
    self->stats.bytes += len;
    if (self->mode == GATEWAY_SSE_STREAM) {
        s_feed_stream(self, data, len, now_ns);
    } else if (!self->line_over && !s_append(&self->line, &self->line_len, self->max, data, len)) {
        self->line_over = true;
        free(self->line); /* no use keeping half a body */
        self->line = NULL;
        self->line_len = 0;
    }
}

void gateway_sse_finish(gateway_sse_t *self, uint64_t now_ns)
{
    assert(self);
    if (self->mode == GATEWAY_SSE_STREAM) {
        if (self->line_len || self->line_over)
            s_line(self, self->line ? self->line : "", self->line_len, self->line_over, now_ns);
        self->line_len = 0;
        self->line_over = false;
        s_dispatch(self, now_ns);
        return;
    }
    if (self->line_over) {
        self->stats.overlong++;
        self->line_over = false;
        return;
    }
    if (!self->line_len) return;
    cJSON *root = cJSON_ParseWithLength(self->line, self->line_len);
    if (cJSON_IsObject(root)) {
        if (cJSON_GetObjectItemCaseSensitive(root, "error")) self->stats.error = true;
        s_take_usage(self, root);
    } else {
        self->stats.malformed++;
    }
    cJSON_Delete(root);
    self->line_len = 0;
}

const gateway_sse_stats_t *gateway_sse_stats(const gateway_sse_t *self)
{
    return &self->stats;
}

gateway_sse_mode_t gateway_sse_mode(const gateway_sse_t *self)
{
    return self->mode;
}

double gateway_sse_itl_s(const gateway_sse_t *self)
{
    const gateway_sse_stats_t *st = &self->stats;
    if (st->content_events < 2 || st->last_content_ns <= st->first_content_ns) return 0;
    return (double)(st->last_content_ns - st->first_content_ns) / 1e9 /
           (double)(st->content_events - 1);
}

gateway_sse_mode_t gateway_sse_mode_for(const char *content_type)
{
    if (!content_type) return GATEWAY_SSE_JSON;
    while (*content_type == ' ')
        content_type++;
    static const char es[] = "text/event-stream";
    if (strncasecmp(content_type, es, sizeof(es) - 1) == 0) {
        char next = content_type[sizeof(es) - 1];
        if (next == '\0' || next == ';' || next == ' ') return GATEWAY_SSE_STREAM;
    }
    return GATEWAY_SSE_JSON;
}
