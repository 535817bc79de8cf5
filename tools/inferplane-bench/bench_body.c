/*
 * bench_body — request bodies. See bench_body.h.
 */
#include "bench_body.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *bench_buf_extend(bench_buf_t *b, size_t n)
{
    if (b->failed) return NULL;
    if (b->len + n + 1 > b->cap) {
        size_t want = b->cap ? b->cap : 4096;
        while (want < b->len + n + 1)
            want *= 2;
        char *g = realloc(b->p, want);
        if (!g) {
            b->failed = true;
            return NULL;
        }
        b->p = g;
        b->cap = want;
    }
    char *at = b->p + b->len;
    b->len += n;
    b->p[b->len] = '\0';
    return at;
}

void bench_buf_add(bench_buf_t *b, const void *data, size_t len)
{
    char *at = bench_buf_extend(b, len);
    if (at && len) memcpy(at, data, len);
}

void bench_buf_adds(bench_buf_t *b, const char *s)
{
    bench_buf_add(b, s, strlen(s));
}

void bench_buf_add_json(bench_buf_t *b, const char *text, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    bench_buf_add(b, "\"", 1);
    size_t run = 0; /* bytes that need no escape, copied in one go */
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c >= 0x20 && c != '"' && c != '\\') {
            run++;
            continue;
        }
        bench_buf_add(b, text + i - run, run);
        run = 0;
        char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
        if (c == '"' || c == '\\') {
            esc[1] = (char)c;
            bench_buf_add(b, esc, 2);
        } else if (c == '\n') {
            bench_buf_add(b, "\\n", 2);
        } else {
            bench_buf_add(b, esc, 6);
        }
    }
    bench_buf_add(b, text + len - run, run);
    bench_buf_add(b, "\"", 1);
}

void bench_buf_free(bench_buf_t *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

const char *bench_body_path(bench_api_t api)
{
    return api == BENCH_API_CHAT          ? "/v1/chat/completions"
           : api == BENCH_API_COMPLETIONS ? "/v1/completions"
                                          : "/v1/messages";
}

void bench_body_build(bench_buf_t *b, const bench_body_opts_t *o, const bench_msg_t *msgs, size_t n,
                      uint32_t max_tokens)
{
    b->len = 0;
    b->failed = false;
    bench_buf_adds(b, "{\"model\":");
    bench_buf_add_json(b, o->model, strlen(o->model));
    if (o->api == BENCH_API_COMPLETIONS) {
        bench_buf_adds(b, ",\"prompt\":\"");
        /* the history joined by spaces, escaped piece by piece inside one string */
        for (size_t i = 0; i < n; i++) {
            if (i) bench_buf_add(b, " ", 1);
            size_t at = b->len;
            bench_buf_add_json(b, msgs[i].text, msgs[i].len);
            if (b->failed) return;
            /* drop the quotes bench_buf_add_json wrote around this piece */
            memmove(b->p + at, b->p + at + 1, b->len - at - 2);
            b->len -= 2;
            b->p[b->len] = '\0';
        }
        bench_buf_adds(b, "\"");
    } else {
        bench_buf_adds(b, ",\"messages\":[");
        for (size_t i = 0; i < n; i++) {
            bench_buf_adds(b, i ? ",{\"role\":" : "{\"role\":");
            bench_buf_adds(b, msgs[i].assistant ? "\"assistant\"" : "\"user\"");
            bench_buf_adds(b, ",\"content\":");
            bench_buf_add_json(b, msgs[i].text, msgs[i].len);
            bench_buf_adds(b, "}");
        }
        bench_buf_adds(b, "]");
    }
    char num[96];
    snprintf(num, sizeof num, ",\"max_tokens\":%u", max_tokens);
    bench_buf_adds(b, num);
    if (o->stream) {
        bench_buf_adds(b, ",\"stream\":true");
        if (o->api != BENCH_API_MESSAGES)
            bench_buf_adds(b, ",\"stream_options\":{\"include_usage\":true}");
    }
    if (o->ignore_eos && o->api != BENCH_API_MESSAGES) bench_buf_adds(b, ",\"ignore_eos\":true");
    bench_buf_adds(b, "}");
}
