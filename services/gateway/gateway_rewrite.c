/*
 * gateway_rewrite — the streaming "model" rewriter. See gateway_rewrite.h.
 *
 * State: `held` is the current line (STREAM) or the body so far (JSON) while the model may
 * still be in it; `passing` means "send as it comes" (JSON: the model is done, or the start
 * was too long; STREAM: the rest of an overlong line). Each feed assembles its output in
 * `out` and hands it to the sink once.
 */
#include "gateway_rewrite.h"

#include <assert.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipl_error.h"

#define S_DEFAULT_MAX (1u << 20)

struct gateway_rewrite {
    gateway_sse_mode_t mode;
    char *quoted; /* the model as a JSON string, quotes included */
    size_t qlen;
    size_t max;
    char *held;
    size_t hlen, hcap;
    bool passing;
    char *out;
    size_t olen, ocap;
    bool oom;
    int error; /* the sink's, once it failed */
    gateway_rewrite_stats_t stats;
};

/* ---- the scan ------------------------------------------------------------------------------ */

typedef struct {
    const char *s;
    size_t len, i;
} s_scan_t;

static void s_ws(s_scan_t *c)
{
    while (c->i < c->len &&
           (c->s[c->i] == ' ' || c->s[c->i] == '\t' || c->s[c->i] == '\r' || c->s[c->i] == '\n'))
        c->i++;
}

/* Skips the string at c->i (a '"'): 1, or -1 when the text ends inside it. */
static int s_string(s_scan_t *c)
{
    c->i++;
    while (c->i < c->len) {
        char ch = c->s[c->i++];
        if (ch == '\\') {
            if (c->i >= c->len) return -1;
            c->i++;
        } else if (ch == '"') {
            return 1;
        }
    }
    return -1;
}

/* Skips one value: 1, 0 when malformed, -1 when the text ends inside it. */
static int s_value(s_scan_t *c)
{
    if (c->i >= c->len) return -1;
    char ch = c->s[c->i];
    if (ch == '"') return s_string(c);
    if (ch == '{' || ch == '[') {
        int depth = 0;
        while (c->i < c->len) {
            ch = c->s[c->i];
            if (ch == '"') {
                if (s_string(c) < 0) return -1;
                continue;
            }
            c->i++;
            if (ch == '{' || ch == '[')
                depth++;
            else if ((ch == '}' || ch == ']') && --depth == 0)
                return 1;
        }
        return -1;
    }
    size_t start = c->i; /* a number, true, false or null */
    while (c->i < c->len && !strchr(",}] \t\r\n", c->s[c->i]))
        c->i++;
    if (c->i >= c->len) return -1;
    return c->i > start ? 1 : 0;
}

int gateway_rewrite_model_span(const char *s, size_t len, size_t *start, size_t *end)
{
    s_scan_t c = {s, len, 0};
    s_ws(&c);
    if (c.i >= len) return -1;
    if (s[c.i] != '{') return 0;
    c.i++;
    for (;;) {
        s_ws(&c);
        if (c.i >= len) return -1;
        if (s[c.i] != '"') return 0; /* '}' (no model) or malformed */
        size_t key = c.i;
        if (s_string(&c) < 0) return -1;
        bool model = c.i - key == 7 && !memcmp(s + key, "\"model\"", 7);
        s_ws(&c);
        if (c.i >= len) return -1;
        if (s[c.i] != ':') return 0;
        c.i++;
        s_ws(&c);
        if (c.i >= len) return -1;
        if (model && s[c.i] == '"') {
            size_t v = c.i;
            if (s_string(&c) < 0) return -1;
            *start = v;
            *end = c.i;
            return 1;
        }
        int r = s_value(&c);
        if (r <= 0) return r;
        if (model) return 0; /* not a string: nothing to rewrite */
        s_ws(&c);
        if (c.i >= len) return -1;
        if (s[c.i] != ',') return 0;
        c.i++;
    }
}

/* ---- buffers ------------------------------------------------------------------------------- */

static bool s_reserve(char **buf, size_t *cap, size_t need)
{
    if (need <= *cap) return true;
    size_t n = *cap ? *cap : 256;
    while (n < need)
        n *= 2;
    char *p = realloc(*buf, n);
    if (!p) return false;
    *buf = p;
    *cap = n;
    return true;
}

static void s_out(gateway_rewrite_t *self, const char *data, size_t len)
{
    if (!len) return;
    if (!s_reserve(&self->out, &self->ocap, self->olen + len)) {
        self->oom = true;
        return;
    }
    memcpy(self->out + self->olen, data, len);
    self->olen += len;
}

/* Appends s[0..len) with the model span [start, end) replaced. */
static void s_out_replaced(gateway_rewrite_t *self, const char *s, size_t len, size_t start,
                           size_t end)
{
    s_out(self, s, start);
    s_out(self, self->quoted, self->qlen);
    s_out(self, s + end, len - end);
    self->stats.rewritten++;
}

/* Hands `out` to the sink; remembers its failure. */
static int s_flush(gateway_rewrite_t *self, gateway_rewrite_sink_fn *sink, void *arg)
{
    if (self->oom && !self->error) self->error = IPL_E_NOMEM;
    if (!self->error && self->olen) self->error = sink(arg, self->out, self->olen);
    self->olen = 0;
    return self->error;
}

/* A JSON string of `s`: quotes, backslashes and control characters escaped. */
static char *s_quote(const char *s, size_t *len)
{
    size_t n = strlen(s);
    char *q = malloc(n * 6 + 3);
    if (!q) return NULL;
    size_t k = 0;
    q[k++] = '"';
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') {
            q[k++] = '\\';
            q[k++] = (char)*p;
        } else if (*p < 0x20) {
            k += (size_t)snprintf(q + k, 7, "\\u%04x", *p);
        } else {
            q[k++] = (char)*p;
        }
    }
    q[k++] = '"';
    q[k] = '\0';
    *len = k;
    return q;
}

/* ---- life cycle ---------------------------------------------------------------------------- */

gateway_rewrite_t *gateway_rewrite_new(gateway_sse_mode_t mode, const char *model,
                                       size_t max_buffer)
{
    gateway_rewrite_t *self = calloc(1, sizeof(*self));
    if (!self) return NULL;
    self->mode = mode;
    self->max = max_buffer ? max_buffer : S_DEFAULT_MAX;
    self->quoted = s_quote(model ? model : "", &self->qlen);
    if (!self->quoted) {
        free(self);
        return NULL;
    }
    return self;
}

void gateway_rewrite_destroy(gateway_rewrite_t **self_p)
{
    assert(self_p);
    gateway_rewrite_t *self = *self_p;
    if (!self) return;
    free(self->quoted);
    free(self->held);
    free(self->out);
    free(self);
    *self_p = NULL;
}

const gateway_rewrite_stats_t *gateway_rewrite_stats(const gateway_rewrite_t *self)
{
    return &self->stats;
}

/* Holds more bytes; false (nothing held) when that would pass the bound. */
static bool s_hold(gateway_rewrite_t *self, const char *data, size_t len)
{
    if (!len) return true;
    if (self->hlen + len > self->max || !s_reserve(&self->held, &self->hcap, self->hlen + len)) {
        self->stats.overlong++;
        return false;
    }
    memcpy(self->held + self->hlen, data, len);
    self->hlen += len;
    return true;
}

/* ---- JSON bodies --------------------------------------------------------------------------- */

/* Sends the held start of the body, rewritten when its model is known (or `final`). */
static void s_json_try(gateway_rewrite_t *self, bool final)
{
    size_t start = 0, end = 0;
    int r = gateway_rewrite_model_span(self->held, self->hlen, &start, &end);
    if (r < 0 && !final) return;
    if (r > 0)
        s_out_replaced(self, self->held, self->hlen, start, end);
    else
        s_out(self, self->held, self->hlen);
    self->hlen = 0;
    self->passing = true;
}

static void s_json_feed(gateway_rewrite_t *self, const char *data, size_t len)
{
    if (self->passing) {
        s_out(self, data, len);
        return;
    }
    if (self->hlen + len > self->max || !s_hold(self, data, len)) {
        /* the bound: judged on its first max bytes however the body was cut (s_json_try
         * rewrites a model that lies wholly inside them), the rest passes */
        size_t fill = self->max > self->hlen ? self->max - self->hlen : 0;
        if (fill > len) fill = len;
        if (!s_reserve(&self->held, &self->hcap, self->hlen + fill)) fill = 0;
        memcpy(self->held + self->hlen, data, fill);
        self->hlen += fill;
        self->stats.overlong++;
        s_json_try(self, true);
        s_out(self, data + fill, len - fill);
        return;
    }
    s_json_try(self, false);
}

/* ---- event streams ------------------------------------------------------------------------- */

/* Sends one complete line (without its terminator), its data payload's model rewritten. */
static void s_line(gateway_rewrite_t *self, const char *line, size_t len)
{
    if (len > 5 && !memcmp(line, "data:", 5)) {
        size_t p = line[5] == ' ' ? 6 : 5;
        size_t start = 0, end = 0;
        if (gateway_rewrite_model_span(line + p, len - p, &start, &end) > 0) {
            s_out_replaced(self, line, len, p + start, p + end);
            return;
        }
    }
    s_out(self, line, len);
}

/* The first `n` (= max) bytes of a line longer than the bound: its model is rewritten when it
 * lies wholly inside them. A line held up to the bound and one that came whole are judged on
 * the same bytes, so where TCP cut a line changes nothing (fuzz/fuzz_rewrite). */
static void s_head(gateway_rewrite_t *self, const char *head, size_t n)
{
    self->stats.overlong++;
    if (n > 5 && !memcmp(head, "data:", 5)) {
        size_t p = head[5] == ' ' ? 6 : 5;
        size_t start = 0, end = 0;
        if (n > p && gateway_rewrite_model_span(head + p, n - p, &start, &end) > 0) {
            s_out_replaced(self, head, n, p + start, p + end);
            return;
        }
    }
    s_out(self, head, n);
}

/* A complete line that came in one piece. */
static void s_line_bounded(gateway_rewrite_t *self, const char *line, size_t len)
{
    if (len <= self->max) {
        s_line(self, line, len);
        return;
    }
    s_head(self, line, self->max);
    s_out(self, line + self->max, len - self->max);
}

/* The held start of a line plus `n` more of its bytes pass the bound: the held part is filled
 * up to it and judged (s_head), the rest goes as it came; nothing stays held. */
static void s_overflow(gateway_rewrite_t *self, const char *data, size_t n)
{
    size_t fill = self->max > self->hlen ? self->max - self->hlen : 0;
    if (fill > n) fill = n;
    if (s_reserve(&self->held, &self->hcap, self->hlen + fill)) {
        memcpy(self->held + self->hlen, data, fill);
        self->hlen += fill;
        s_head(self, self->held, self->hlen);
    } else { /* out of memory: what is held passes unchanged */
        self->stats.overlong++;
        s_out(self, self->held, self->hlen);
        fill = 0;
    }
    s_out(self, data + fill, n - fill);
    self->hlen = 0;
}

static void s_stream_feed(gateway_rewrite_t *self, const char *data, size_t len)
{
    size_t pos = 0;
    while (pos < len) {
        size_t t = pos;
        while (t < len && data[t] != '\n' && data[t] != '\r')
            t++;
        if (self->passing) { /* the rest of an overlong line */
            s_out(self, data + pos, t < len ? t + 1 - pos : len - pos);
            if (t < len) self->passing = false;
            pos = t < len ? t + 1 : len;
            continue;
        }
        if (t == len) { /* an unfinished line: hold it */
            if (self->hlen + (len - pos) <= self->max) {
                if (s_hold(self, data + pos, len - pos)) return;
            }
            s_overflow(self, data + pos, len - pos);
            self->passing = true;
            return;
        }
        if (self->hlen) {
            if (self->hlen + (t - pos) <= self->max && s_hold(self, data + pos, t - pos)) {
                s_line(self, self->held, self->hlen);
                self->hlen = 0;
            } else {
                s_overflow(self, data + pos, t - pos);
            }
        } else {
            s_line_bounded(self, data + pos, t - pos);
        }
        s_out(self, data + t, 1); /* the terminator, as it came */
        pos = t + 1;
    }
}

/* ---- feeding ------------------------------------------------------------------------------- */

int gateway_rewrite_feed(gateway_rewrite_t *self, const char *data, size_t len,
                         gateway_rewrite_sink_fn *sink, void *arg)
{
    if (self->error) return self->error;
    if (self->mode == GATEWAY_SSE_STREAM)
        s_stream_feed(self, data, len);
    else
        s_json_feed(self, data, len);
    return s_flush(self, sink, arg);
}

int gateway_rewrite_finish(gateway_rewrite_t *self, gateway_rewrite_sink_fn *sink, void *arg)
{
    if (self->error) return self->error;
    if (self->mode == GATEWAY_SSE_STREAM) {
        if (self->hlen) s_line(self, self->held, self->hlen);
        self->hlen = 0;
    } else if (!self->passing) {
        s_json_try(self, true);
    }
    return s_flush(self, sink, arg);
}
