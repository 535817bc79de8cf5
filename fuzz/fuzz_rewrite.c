/* libFuzzer target: the gateway's rewriting of a provider's response (services/gateway/
 * gateway_rewrite), which edits the "model" of every byte a provider streams back.
 *
 * The first byte picks the mode (bit 0: event stream or JSON body) and the bound (bits 1-2:
 * 32 B, 256 B, 4 KiB or the default); the second seeds the chunking. On every input:
 *   - the output is the same whether the body arrives whole, byte by byte, or in pieces drawn
 *     from the input (a rewriter that depends on where TCP cut the stream would lose, repeat
 *     or mangle events);
 *   - an input that holds no "model" key passes byte for byte;
 *   - in stream mode the output has as many line ends as the input (lines are rewritten,
 *     never dropped or merged).
 * Built with the gateway's class (FUZZ_EXTRA_fuzz_rewrite). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../services/gateway/gateway_rewrite.h"

typedef struct {
    char *data;
    size_t len, cap;
} s_out_t;

static int s_sink(void *arg, const char *data, size_t len)
{
    s_out_t *o = arg;
    if (o->len + len > o->cap) {
        size_t cap = (o->len + len) * 2 + 64;
        char *grown = realloc(o->data, cap);
        if (!grown) abort();
        o->data = grown;
        o->cap = cap;
    }
    memcpy(o->data + o->len, data, len);
    o->len += len;
    return 0;
}

static const size_t s_bounds[] = {32, 256, 4096, 0};

static s_out_t s_run(gateway_sse_mode_t mode, size_t bound, const uint8_t *d, size_t n,
                     unsigned seed)
{
    s_out_t out = {0};
    gateway_rewrite_t *rw = gateway_rewrite_new(mode, "client-\"model\"", bound);
    if (!rw) abort();
    size_t at = 0;
    unsigned x = seed * 2654435761u + 7;
    while (at < n) {
        size_t piece = n - at;
        if (seed == 1) {
            piece = 1;
        } else if (seed > 1) {
            x = x * 1103515245u + 12345u;
            piece = 1 + (x >> 16) % 61;
            if (piece > n - at) piece = n - at;
        }
        if (gateway_rewrite_feed(rw, (const char *)d + at, piece, s_sink, &out) != 0) abort();
        at += piece;
    }
    if (gateway_rewrite_finish(rw, s_sink, &out) != 0) abort();
    gateway_rewrite_destroy(&rw);
    if (rw) abort();
    return out;
}

static size_t s_line_ends(const char *d, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += d[i] == '\n' || d[i] == '\r';
    return k;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) return 0;
    gateway_sse_mode_t mode = (data[0] & 1) ? GATEWAY_SSE_JSON : GATEWAY_SSE_STREAM;
    size_t bound = s_bounds[(data[0] >> 1) & 3];
    unsigned seed = 2 + data[1];
    const uint8_t *d = data + 2;
    size_t n = size - 2;

    s_out_t whole = s_run(mode, bound, d, n, 0);
    s_out_t bytes = s_run(mode, bound, d, n, 1);
    s_out_t pieces = s_run(mode, bound, d, n, seed);
    if (bytes.len != whole.len || (whole.len && memcmp(bytes.data, whole.data, whole.len)))
        abort();
    if (pieces.len != whole.len || (whole.len && memcmp(pieces.data, whole.data, whole.len)))
        abort();
    if (!memmem(d, n, "model", 5) && (whole.len != n || (n && memcmp(whole.data, d, n))))
        abort();
    if (mode == GATEWAY_SSE_STREAM && s_line_ends(whole.data, whole.len) != s_line_ends((const char *)d, n))
        abort();
    free(whole.data);
    free(bytes.data);
    free(pieces.data);
    return 0;
}
