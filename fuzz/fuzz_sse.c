/* libFuzzer target: the gateway's reader of worker responses (services/gateway/gateway_sse),
 * which sees every byte a worker or provider sends back, streamed (text/event-stream) or
 * whole (JSON).
 *
 * The first byte picks the mode (bit 0: stream or JSON body) and the line bound (bits 1-2:
 * 64 B, 1 KiB, 64 KiB or the default), the second byte seeds the chunking. Beyond "no crash"
 * (ASan/UBSan) it checks, on every input:
 *   - the statistics are the same whether the body arrives whole, byte by byte, or in pieces
 *     of sizes drawn from the input (a reader that depends on where TCP cut the stream would
 *     mismeasure TTFT and usage);
 *   - content events ≤ events ≤ lines; `bytes` is what was fed; the first content time lies
 *     between the first byte and the last content time;
 *   - a JSON body is parsed only at the end: its stats show no events.
 * The SSE format: https://html.spec.whatwg.org/multipage/server-sent-events.html */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../services/gateway/gateway_sse.h"

static const size_t s_bounds[] = {64, 1024, 65536, 0};

/* Feeds `d` in pieces chosen by `seed` (0: whole; 1: byte by byte), the n-th piece at time
 * 1000 + n, and returns the final stats. */
static gateway_sse_stats_t s_run(gateway_sse_mode_t mode, size_t bound, const uint8_t *d, size_t n,
                                 unsigned seed, double *itl)
{
    gateway_sse_stats_t st;
    memset(&st, 0, sizeof st);
    gateway_sse_t *sse = gateway_sse_new(mode, bound);
    if (!sse) abort();
    uint64_t t = 1000;
    size_t at = 0;
    unsigned x = seed * 2654435761u + 1;
    while (at < n) {
        size_t piece = n - at;
        if (seed == 1) {
            piece = 1;
        } else if (seed > 1) {
            x = x * 1103515245u + 12345u;
            piece = 1 + (x >> 16) % 97;
            if (piece > n - at) piece = n - at;
        }
        gateway_sse_feed(sse, (const char *)d + at, piece, t);
        at += piece;
    }
    gateway_sse_finish(sse, t);
    st = *gateway_sse_stats(sse);
    if (gateway_sse_mode(sse) != mode) abort();
    *itl = gateway_sse_itl_s(sse);
    gateway_sse_destroy(&sse);
    if (sse) abort();
    return st;
}

static bool s_same(const gateway_sse_stats_t *a, const gateway_sse_stats_t *b)
{
    return a->bytes == b->bytes && a->events == b->events &&
           a->content_events == b->content_events && a->usage == b->usage &&
           a->prompt_tokens == b->prompt_tokens && a->completion_tokens == b->completion_tokens &&
           a->cached_tokens == b->cached_tokens && a->done == b->done && a->error == b->error &&
           a->malformed == b->malformed && a->overlong == b->overlong;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) return 0;
    gateway_sse_mode_t mode = (data[0] & 1) ? GATEWAY_SSE_JSON : GATEWAY_SSE_STREAM;
    size_t bound = s_bounds[(data[0] >> 1) & 3];
    unsigned seed = 2 + data[1];
    const uint8_t *d = data + 2;
    size_t n = size - 2;

    double itl_whole, itl;
    gateway_sse_stats_t whole = s_run(mode, bound, d, n, 0, &itl_whole);
    if (whole.bytes != n) abort();
    size_t lines = 1;
    for (size_t i = 0; i < n; i++)
        lines += d[i] == '\n' || d[i] == '\r';
    if (whole.content_events > whole.events || whole.events > lines) abort();
    if (mode == GATEWAY_SSE_JSON && (whole.events || whole.content_events || whole.done)) abort();
    if (whole.content_events &&
        (whole.first_content_ns < whole.first_byte_ns ||
         whole.last_content_ns < whole.first_content_ns))
        abort();
    if (!(itl_whole >= 0)) abort();

    gateway_sse_stats_t bytes = s_run(mode, bound, d, n, 1, &itl);
    if (!s_same(&whole, &bytes)) abort();
    gateway_sse_stats_t pieces = s_run(mode, bound, d, n, seed, &itl);
    if (!s_same(&whole, &pieces)) abort();
    return 0;
}
