/*
 * gateway_sse — watches an upstream response go by, chunk by chunk, and measures it.
 *
 * Two modes, chosen from the upstream Content-Type:
 *
 *   GATEWAY_SSE_STREAM  text/event-stream (OpenAI/vLLM streaming). Lines are reassembled
 *                       across arbitrary chunk boundaries; every `data:` event is parsed as
 *                       JSON. An event whose choices carry text (delta.content, text,
 *                       delta.reasoning_content / reasoning, delta.tool_calls) is a *content
 *                       event*: the first one's time is the TTFT, the spacing of the rest the
 *                       ITL. `usage` (prompt_tokens, completion_tokens,
 *                       prompt_tokens_details.cached_tokens) is taken from the last event
 *                       that carries a non-null one; `data: [DONE]` ends the stream;
 *                       `data: {"error":...}` is noted.
 *   GATEWAY_SSE_JSON    any other body (a non-streaming completion): a bounded copy is kept
 *                       and parsed at the end for `usage` only; bodies beyond the bound are
 *                       passed through but not parsed (usage then stays unknown).
 *
 * Input is remote and never trusted: lines longer than the bound are skipped (counted),
 * malformed JSON is counted, nothing is asserted. The parser never buffers more than
 * `max_buffer` bytes whatever the upstream sends.
 *
 * Timestamps are the caller's (monotonic ns), so tests can replay a stream with any timing.
 * Not thread-safe: one producer feeds it.
 */
#ifndef GATEWAY_SSE_H
#define GATEWAY_SSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { GATEWAY_SSE_STREAM = 0, GATEWAY_SSE_JSON = 1 } gateway_sse_mode_t;

typedef struct {
    uint64_t bytes;            /* bytes fed */
    uint64_t first_byte_ns;    /* time of the first non-empty feed, 0 if none */
    uint64_t events;           /* SSE data events (STREAM) */
    uint64_t content_events;   /* events carrying generated text (STREAM) */
    uint64_t first_content_ns; /* 0 if none */
    uint64_t last_content_ns;  /* 0 if none */
    bool usage;                /* a usage object was seen */
    uint64_t prompt_tokens, completion_tokens, cached_tokens;
    bool done;          /* data: [DONE] (STREAM) */
    bool error;         /* an {"error":...} event or body was seen */
    uint64_t malformed; /* data events / bodies that were not the JSON expected */
    uint64_t overlong;  /* lines or bodies beyond max_buffer, skipped */
} gateway_sse_stats_t;

typedef struct gateway_sse gateway_sse_t;

/* `max_buffer`: longest SSE line (STREAM) or body copy (JSON) kept, in bytes (0: 1 MiB). */
gateway_sse_t *gateway_sse_new(gateway_sse_mode_t mode, size_t max_buffer);
void gateway_sse_destroy(gateway_sse_t **self_p);

/* Feeds the next `len` bytes received at `now_ns`. */
void gateway_sse_feed(gateway_sse_t *self, const char *data, size_t len, uint64_t now_ns);
/* Ends the input: dispatches a last unterminated event (STREAM) or parses the body (JSON). */
void gateway_sse_finish(gateway_sse_t *self, uint64_t now_ns);

const gateway_sse_stats_t *gateway_sse_stats(const gateway_sse_t *self);
gateway_sse_mode_t gateway_sse_mode(const gateway_sse_t *self);
/* Mean gap between consecutive content events, seconds; 0 with fewer than two. */
double gateway_sse_itl_s(const gateway_sse_t *self);

/* GATEWAY_SSE_STREAM when `content_type` is text/event-stream (parameters ignored). */
gateway_sse_mode_t gateway_sse_mode_for(const char *content_type);

#endif
