/*
 * bench_body — request bodies for the three APIs, and the growable buffer they are built in.
 *
 * One turn of a conversation is sent as GuideLLM sends it (backends/openai/request_handlers.py):
 *   chat         {"model", "messages": [user, assistant, ..., user], "max_tokens": N,
 *                 "stream": true, "stream_options": {"include_usage": true}, "ignore_eos": true}
 *   completions  the same with "prompt": every earlier text and answer joined by spaces
 *   messages     Anthropic's {"model", "max_tokens", "messages", "stream"} (no ignore_eos:
 *                not part of that API)
 * ignore_eos (a vLLM extension) makes the worker generate exactly max_tokens tokens, as
 * GuideLLM asks; --no-ignore-eos leaves it out.
 *
 * Strings are JSON-escaped (control characters as \u00XX, bytes >= 0x80 passed through).
 */
#ifndef BENCH_BODY_H
#define BENCH_BODY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bench_stream.h"

typedef struct {
    char *p; /* NUL-terminated while !failed */
    size_t len, cap;
    bool failed; /* an allocation failed: the content is incomplete */
} bench_buf_t;

void bench_buf_add(bench_buf_t *b, const void *data, size_t len);
void bench_buf_adds(bench_buf_t *b, const char *s);
/* Reserves n bytes at the end and returns them (NULL on failure); len grows by n. */
char *bench_buf_extend(bench_buf_t *b, size_t n);
/* Appends "text" JSON-escaped, with the quotes. */
void bench_buf_add_json(bench_buf_t *b, const char *text, size_t len);
void bench_buf_free(bench_buf_t *b);

typedef struct {
    bool assistant;
    const char *text;
    size_t len;
} bench_msg_t;

typedef struct {
    bench_api_t api;
    const char *model;
    bool stream;
    bool ignore_eos;
} bench_body_opts_t;

/* Writes the body of one request (the history then the new user text) into b (reset first). */
void bench_body_build(bench_buf_t *b, const bench_body_opts_t *opts, const bench_msg_t *msgs,
                      size_t n, uint32_t max_tokens);

/* The request path of an API: "/v1/chat/completions", "/v1/completions", "/v1/messages". */
const char *bench_body_path(bench_api_t api);

#endif
