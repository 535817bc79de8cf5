/*
 * gateway_rewrite — rewrites the "model" of a response as it streams by, so that a client
 * routed to a provider sees the model name it asked for, never the provider's remote name.
 *
 * It edits the value of the top-level "model" key of a JSON object and nothing else (every
 * other byte passes as it came: numbers, spacing and key order are kept):
 *
 *   GATEWAY_SSE_JSON    a whole body ({"id":..,"model":"vendor/x",..}): bytes are held until
 *                       the model's value has gone by (OpenAI puts it near the start), then
 *                       the held part is sent rewritten and the rest passes straight through.
 *                       A body whose object ends without a "model", or that is not a JSON
 *                       object, passes unchanged.
 *   GATEWAY_SSE_STREAM  an event stream: each line is held until its end ('\n' or '\r', so
 *                       an event split across chunks anywhere is reassembled), and every
 *                       `data:` line whose payload is a JSON object with a "model" is sent
 *                       rewritten. Other lines ([DONE], event:, id:, comments, blank lines)
 *                       pass unchanged. Chunk by chunk: a complete line is never held back.
 *
 * Bounded: at most `max_buffer` bytes are held. A line (or the start of a body) longer than
 * that passes unchanged from there on (counted in `overlong`); the model it may hold is then
 * not rewritten. Input is remote: nothing is asserted, nothing is parsed beyond the scan.
 *
 * Output goes through a sink (e.g. a write to the client's fd); a sink error stops the
 * rewriter (every later call returns it again). Not thread-safe: one transfer feeds it.
 */
#ifndef GATEWAY_REWRITE_H
#define GATEWAY_REWRITE_H

#include <stddef.h>
#include <stdint.h>

#include "gateway_sse.h"

/* Writes `len` bytes on; 0, or nonzero to stop (the rewriter returns it). */
typedef int(gateway_rewrite_sink_fn)(void *arg, const char *data, size_t len);

typedef struct gateway_rewrite gateway_rewrite_t;

typedef struct {
    uint64_t rewritten; /* model values replaced */
    uint64_t overlong;  /* lines / body starts beyond max_buffer, passed unchanged */
} gateway_rewrite_stats_t;

/* `model` is the name to put in (copied; JSON-escaped here). `max_buffer` 0: 1 MiB. NULL on
 * allocation failure. */
gateway_rewrite_t *gateway_rewrite_new(gateway_sse_mode_t mode, const char *model,
                                       size_t max_buffer);
void gateway_rewrite_destroy(gateway_rewrite_t **self_p);

/* Feeds the next bytes; what can be sent now goes to `sink` (in one call when possible).
 * Returns 0 or the sink's error. */
int gateway_rewrite_feed(gateway_rewrite_t *self, const char *data, size_t len,
                         gateway_rewrite_sink_fn *sink, void *arg);
/* Ends the input: sends whatever is held (a last unterminated line is rewritten too). */
int gateway_rewrite_finish(gateway_rewrite_t *self, gateway_rewrite_sink_fn *sink, void *arg);

const gateway_rewrite_stats_t *gateway_rewrite_stats(const gateway_rewrite_t *self);

/* Finds the top-level "model" key of the JSON object at the start of s[0..len) (leading
 * white space allowed). Returns 1 with [*start, *end) the span of its string value (quotes
 * included); 0 when there is none (the object ended without it, its value is not a string,
 * or the text is not a JSON object); -1 when the text ends before that is known. */
int gateway_rewrite_model_span(const char *s, size_t len, size_t *start, size_t *end);

#endif
