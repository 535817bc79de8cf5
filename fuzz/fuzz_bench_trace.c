/* libFuzzer target: inferplane-bench's decoders of untrusted bytes — trace lines
 * (bench_trace_add_line: ours and Mooncake) and answers (bench_stream over ipl_sse: OpenAI
 * chat and completions streams, Anthropic event streams, and non-streamed bodies of each).
 *
 * The first input byte picks the split points of the stream feeds, so events are cut
 * everywhere. Beyond "no crash" (ASan/UBSan), it checks on every input:
 *   - a trace line is all or nothing: added (0, one more record with prompt and output >= 1
 *     and its own hash ids only), skipped (1) or refused with a message (nothing added);
 *   - a stream's counters stay consistent: first <= first output, first <= last token times
 *     within the feed clock, iterations <= events, token counts -1 or non-negative, the kept
 *     text NUL-terminated at its length.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../tools/inferplane-bench/bench_stream.h"
#include "../tools/inferplane-bench/bench_trace.h"

static void s_check_trace(const uint8_t *data, size_t size)
{
    bench_trace_t *t = bench_trace_new();
    if (!t) return;
    char err[256] = "";
    size_t before = bench_trace_count(t);
    int rc = bench_trace_add_line(t, (const char *)data, size, err, sizeof err);
    size_t after = bench_trace_count(t);
    if (rc == 0) {
        if (after != before + 1) abort();
        const bench_trace_rec_t *r = bench_trace_rec(t, 0);
        if (r->prompt_tokens < 1 || r->output_tokens < 1 || !(r->arrival_s >= 0)) abort();
        if (r->hash_off != 0) abort();
        if (!r->mooncake && r->prefix_tokens > (int64_t)r->prompt_tokens) abort();
    } else if (rc == 1) {
        if (after != before) abort();
    } else {
        if (after != before || (rc != -6 /* nomem */ && !err[0])) abort();
    }
    bench_trace_destroy(&t);
}

static void s_check_stream(bench_stream_t *s, bench_api_t api, bool streamed, const uint8_t *data,
                           size_t size, uint8_t step_seed)
{
    bench_stream_start(s, api, streamed, true);
    uint64_t now = 1000;
    size_t step = (step_seed % 17) + 1, off = 0;
    while (off < size) {
        size_t n = size - off < step ? size - off : step;
        bench_stream_feed(s, (const char *)data + off, n, now++);
        off += n;
        step = ((step * 7 + step_seed) % 31) + 1;
    }
    bench_stream_finish(s, now);
    const bench_stream_stats_t *st = bench_stream_stats(s);
    if (st->iterations) {
        if (!st->first_ns || st->first_ns > st->last_ns || st->last_ns > now) abort();
        if (st->first_output_ns && st->first_output_ns < st->first_ns) abort();
    }
    if (streamed && st->iterations > st->events) abort();
    if (st->prompt_tokens < -1 || st->completion_tokens < -1 || st->cached_tokens < -1) abort();
    size_t len;
    const char *text = bench_stream_text(s, &len);
    if (text[len] != '\0') abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) return 0;
    uint8_t seed = data[0];
    data++, size--;
    s_check_trace(data, size);
    bench_stream_t *s = bench_stream_new(4096);
    if (!s) return 0;
    for (int api = BENCH_API_CHAT; api <= BENCH_API_MESSAGES; api++) {
        s_check_stream(s, (bench_api_t)api, true, data, size, seed);
        s_check_stream(s, (bench_api_t)api, false, data, size, seed);
    }
    bench_stream_destroy(&s);
    return 0;
}
