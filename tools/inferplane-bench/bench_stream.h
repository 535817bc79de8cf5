/*
 * bench_stream — reads one answer as it arrives and times it: OpenAI chat completions and
 * completions (streamed SSE or one JSON body) and Anthropic messages (named SSE events, or
 * one body).
 *
 * What counts, as GuideLLM counts it (backends/openai/request_handlers.py):
 *   - an *iteration* is one streamed event carrying generated output: chat delta.content,
 *     delta.reasoning_content / reasoning, delta.tool_calls; completions choices[].text;
 *     Anthropic content_block_delta (text_delta, thinking_delta, input_json_delta). The first
 *     one's time is the first token, the last one's the last token; the first that is not
 *     reasoning is the first output token;
 *   - usage: chat/completions `usage` (the last non-null one: prompt_tokens,
 *     completion_tokens, prompt_tokens_details.cached_tokens); Anthropic message_start and
 *     message_delta usage (prompt = input_tokens + cache_read_input_tokens +
 *     cache_creation_input_tokens, cached = cache_read_input_tokens, completion =
 *     output_tokens);
 *   - the end: `data: [DONE]`, Anthropic message_stop, or a finish_reason / stop_reason
 *     followed by a clean close; an {"error":...} event or body (Anthropic: `event: error`)
 *     marks it failed.
 * A non-streamed body is parsed when it ends: its whole answer arrives at once, so the first
 * and last token are the time the body ended (TTFT = latency) and there are no iterations.
 *
 * Input is remote and never trusted: events that are not JSON objects are counted
 * (malformed), overlong ones skipped and counted (ipl_sse), bodies beyond the bound counted;
 * nothing is asserted. The answer's text can be kept (multi-turn: the next turn sends it
 * back), bounded too.
 *
 * Timestamps are the caller's (monotonic ns). Not thread-safe: one transfer feeds one.
 */
#ifndef BENCH_STREAM_H
#define BENCH_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { BENCH_API_CHAT = 0, BENCH_API_COMPLETIONS, BENCH_API_MESSAGES } bench_api_t;

typedef struct {
    uint64_t first_ns, first_output_ns, last_ns; /* 0: none */
    uint32_t iterations;
    bool usage;                                              /* a usage object was seen */
    int64_t prompt_tokens, completion_tokens, cached_tokens; /* -1: not reported */
    bool done;     /* the answer's end marker ([DONE], message_stop, a whole body) */
    bool finished; /* a finish_reason / stop_reason was seen */
    bool error;    /* an error event or body */
    uint64_t events, malformed, overlong;
} bench_stream_stats_t;

typedef struct bench_stream bench_stream_t;

/* `max_event`: the largest event or body parsed, bytes (0: 8 MiB). NULL on allocation failure. */
bench_stream_t *bench_stream_new(size_t max_event);
void bench_stream_destroy(bench_stream_t **self_p);

/* Starts a new answer (the buffers are kept). keep_text: accumulate the generated text. */
void bench_stream_start(bench_stream_t *self, bench_api_t api, bool streamed, bool keep_text);
/* Before the first feed: the answer is one body after all (a streamed request answered with
 * an error body, Content-Type application/json). */
void bench_stream_as_body(bench_stream_t *self);
void bench_stream_feed(bench_stream_t *self, const char *data, size_t len, uint64_t now_ns);
/* The answer ended (cleanly or not): dispatches a last event, parses a body. */
void bench_stream_finish(bench_stream_t *self, uint64_t now_ns);

const bench_stream_stats_t *bench_stream_stats(const bench_stream_t *self);
/* The text kept (NUL-terminated, borrowed until the next start); "" when none. */
const char *bench_stream_text(const bench_stream_t *self, size_t *len);

/* "chat" | "completions" | "messages" (also "openai-chat", "anthropic"). 0 or IPL_E_INVAL. */
int bench_api_parse(const char *name, bench_api_t *out);
const char *bench_api_name(bench_api_t api);

#endif
