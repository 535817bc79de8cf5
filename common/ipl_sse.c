/*
 * ipl_sse — Server-Sent Events framer. See ipl_sse.h.
 *
 * State: `line` holds the current, unfinished line (bounded by max); `data` the data of the
 * current event; `event` its type. A complete line found inside one feed is handled in place,
 * without a copy, when nothing of it was buffered before.
 */
#include "ipl_sse.h"

#include <assert.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define S_DEFAULT_MAX (1u << 20)
#define S_EVENT_MAX   256 /* event type names longer than this are cut (they are ours to match) */

struct ipl_sse {
    size_t max;
    ipl_sse_event_fn *fn;
    void *arg;
    char *line; /* the unfinished line */
    size_t line_len, line_cap;
    bool line_over; /* the unfinished line exceeded max: its rest is skipped */
    bool after_cr;  /* the last byte ended a line with \r: a \n right after belongs to it */
    char *data;     /* the current event's data */
    size_t data_len, data_cap;
    bool has_data;
    bool data_over; /* the current event exceeded max: it is skipped at dispatch */
    char event[S_EVENT_MAX + 1];
    size_t event_len;
    uint64_t events, overlong;
};

ipl_sse_t *ipl_sse_new(size_t max_event, ipl_sse_event_fn *fn, void *arg)
{
    assert(fn);
    ipl_sse_t *self = calloc(1, sizeof *self);
    if (!self) return NULL;
    self->max = max_event ? max_event : S_DEFAULT_MAX;
    self->fn = fn;
    self->arg = arg;
    return self;
}

void ipl_sse_destroy(ipl_sse_t **self_p)
{
    assert(self_p);
    ipl_sse_t *self = *self_p;
    if (!self) return;
    free(self->line);
    free(self->data);
    free(self);
    *self_p = NULL;
}

void ipl_sse_reset(ipl_sse_t *self)
{
    self->line_len = self->data_len = self->event_len = 0;
    self->line_over = self->after_cr = self->has_data = self->data_over = false;
    self->events = self->overlong = 0;
}

uint64_t ipl_sse_events(const ipl_sse_t *self)
{
    return self->events;
}

uint64_t ipl_sse_overlong(const ipl_sse_t *self)
{
    return self->overlong;
}

/* Appends n bytes to a buffer bounded by max (+1 for the NUL); false when it would not fit or
 * memory ran out (the buffer is left as it was). */
static bool s_append(char **buf, size_t *len, size_t *cap, size_t max, const char *src, size_t n)
{
    if (n > max - *len) return false;
    if (*len + n + 1 > *cap) {
        size_t want = *cap ? *cap : 256;
        while (want < *len + n + 1)
            want *= 2;
        char *grown = realloc(*buf, want);
        if (!grown) return false;
        *buf = grown;
        *cap = want;
    }
    memcpy(*buf + *len, src, n);
    *len += n;
    (*buf)[*len] = '\0';
    return true;
}

static void s_dispatch(ipl_sse_t *self)
{
    bool had = self->has_data, over = self->data_over;
    self->has_data = self->data_over = false;
    size_t len = self->data_len;
    self->data_len = 0;
    size_t elen = self->event_len;
    self->event_len = 0;
    if (!had) return;
    if (over) {
        self->overlong++;
        return;
    }
    self->events++;
    self->event[elen] = '\0';
    if (!self->data) { /* an empty data field: hand over "" */
        static const char empty[1] = "";
        self->fn(self->arg, self->event, elen, empty, 0);
        return;
    }
    self->data[len] = '\0';
    self->fn(self->arg, self->event, elen, self->data, len);
}

/* One complete line without its terminator; `over`: it was too long to keep. */
static void s_line(ipl_sse_t *self, const char *p, size_t len, bool over)
{
    if (over) {
        /* Its field name is lost with it unless the kept part shows it: an overlong line is
         * taken to be data (the only field that can be long), spoiling its event. */
        if (len < 5 || memcmp(p, "data:", 5) == 0) self->has_data = self->data_over = true;
        return;
    }
    if (len == 0) {
        s_dispatch(self);
        return;
    }
    if (p[0] == ':') return; /* a comment */
    const char *colon = memchr(p, ':', len);
    size_t nlen = colon ? (size_t)(colon - p) : len;
    const char *value = colon ? colon + 1 : p + len;
    size_t vlen = colon ? len - nlen - 1 : 0;
    if (vlen && *value == ' ') {
        value++;
        vlen--;
    }
    if (nlen == 4 && memcmp(p, "data", 4) == 0) {
        if (!self->data_over) {
            if (self->has_data &&
                !s_append(&self->data, &self->data_len, &self->data_cap, self->max, "\n", 1))
                self->data_over = true;
            else if (!s_append(&self->data, &self->data_len, &self->data_cap, self->max, value,
                               vlen))
                self->data_over = true;
        }
        self->has_data = true;
    } else if (nlen == 5 && memcmp(p, "event", 5) == 0) {
        size_t n = vlen < S_EVENT_MAX ? vlen : S_EVENT_MAX;
        memcpy(self->event, value, n);
        self->event_len = n;
    }
    /* id, retry and unknown fields: ignored */
}

void ipl_sse_feed(ipl_sse_t *self, const char *data, size_t len)
{
    const char *p = data, *end = data + len;
    while (p < end) {
        if (self->after_cr) {
            self->after_cr = false;
            if (*p == '\n') { /* the \n of a \r\n whose \r ended the line already */
                p++;
                continue;
            }
        }
        const char *eol = p;
        while (eol < end && *eol != '\n' && *eol != '\r')
            eol++;
        size_t n = (size_t)(eol - p);
        if (eol == end) { /* the line goes on in the next feed: keep what fits */
            if (!self->line_over &&
                !s_append(&self->line, &self->line_len, &self->line_cap, self->max, p, n))
                self->line_over = true;
            return;
        }
        self->after_cr = *eol == '\r';
        if (self->line_len == 0 && !self->line_over) {
            s_line(self, p, n, n > self->max); /* in place: nothing buffered */
        } else {
            if (!self->line_over &&
                !s_append(&self->line, &self->line_len, &self->line_cap, self->max, p, n))
                self->line_over = true;
            s_line(self, self->line ? self->line : "", self->line_len, self->line_over);
            self->line_len = 0;
            self->line_over = false;
        }
        p = eol + 1;
    }
}

void ipl_sse_finish(ipl_sse_t *self)
{
    if (self->line_len || self->line_over) {
        s_line(self, self->line ? self->line : "", self->line_len, self->line_over);
        self->line_len = 0;
        self->line_over = false;
    }
    self->after_cr = false;
    s_dispatch(self);
}
