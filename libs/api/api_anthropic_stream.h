/*
 * api_anthropic_stream — translates a worker's OpenAI chat-completions event stream (SSE,
 * `data: <chunk>\n\n` ... `data: [DONE]\n\n`, fed in chunks of any size) into the Anthropic
 * Messages event stream (`event: <name>\ndata: <json>\n\n`), in the order Anthropic sends it
 * (../shared/brief/VLLM-INTEROP.md §5; https://docs.anthropic.com/en/api/messages-streaming):
 *
 *   message_start        at the worker's first chunk: id "msg_<chunk id>", the model the
 *                        client asked for, usage with input_tokens when known (the chunk's
 *                        usage, else the count given to set_input_tokens, else 0; the
 *                        message_delta corrects it) and output_tokens 0
 *   content_block_start  index 0, 1, ...: a text block at the first non-empty delta.content,
 *                        a tool_use block {id, name, input:{}} at each new tool call (each
 *                        OpenAI tool call index its own block; a new id with a name opens a
 *                        new block too, as vLLM's converter does)
 *   ping                 once, after the first content_block_start (where Anthropic sends it)
 *   content_block_delta  text_delta for delta.content; input_json_delta for the tool call's
 *                        function.arguments, passed as they come
 *   content_block_stop   when the next block starts, and at the end
 *   message_delta        at [DONE] (or when the worker closes after a finish_reason): the
 *                        stop reason (api_anthropic_response_stop_reason) and the usage of
 *                        the worker's last usage chunk (stream_options.include_usage)
 *   message_stop
 *
 * An error chunk from the worker (`data: {"error": {...}}`, vLLM's mid-stream error), input
 * that is not an event stream of chat chunks, an event over API_ANTHROPIC_STREAM_MAX_EVENT
 * bytes, a stream that ends before a finish_reason, or a failed transfer (abort) end the
 * stream with one `event: error` in Anthropic's shape (api_anthropic_error) instead of
 * message_stop; nothing is written after it. Reasoning deltas (delta.reasoning_content,
 * delta.reasoning) are not forwarded: thinking blocks are not part of this text path; they
 * are counted in the stats.
 *
 * Output is appended to the caller's api_buf_t; the translator keeps at most one partial
 * upstream event. Input is remote: nothing is asserted. Not thread-safe: one producer.
 */
#ifndef API_ANTHROPIC_STREAM_H
#define API_ANTHROPIC_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "api_anthropic_request.h"
#include "api_anthropic_response.h"
#include "api_buf.h"

#define API_ANTHROPIC_STREAM_MAX_EVENT ((size_t)1 << 20) /* bytes of one upstream event */

typedef struct api_anthropic_stream api_anthropic_stream_t;

typedef enum {
    API_ANTHROPIC_STREAM_OPEN = 0, /* translating */
    API_ANTHROPIC_STREAM_DONE,     /* message_stop written; later input is ignored */
    API_ANTHROPIC_STREAM_FAILED,   /* an error event written; later input is ignored */
} api_anthropic_stream_state_t;

typedef struct {
    api_anthropic_usage_t usage; /* the worker's usage (OpenAI's meaning), when it sent one */
    uint64_t events_in;          /* upstream events read */
    uint64_t events_out;         /* Anthropic events written */
    uint64_t blocks;             /* content blocks started */
    uint64_t content_deltas;     /* text_delta + input_json_delta events written: the caller
                                    notes the time of the first (its TTFT) */
    uint64_t reasoning_deltas;   /* reasoning deltas not forwarded */
    uint64_t bytes_after_end;    /* upstream bytes ignored after the stream ended */
    int error;                   /* 0, or why it failed (IPL_E_*) */
} api_anthropic_stream_stats_t;

/* A translator for the answer to `req` (borrowed for the call only: the model and the stop
 * sequences are copied). NULL when memory ran out. */
api_anthropic_stream_t *api_anthropic_stream_new(const api_anthropic_request_t *req);
void api_anthropic_stream_destroy(api_anthropic_stream_t **self_p);

/* The prompt tokens the caller counted (its tokenizer): message_start's input_tokens when the
 * worker's first chunk carries no usage. Call before the first feed. */
void api_anthropic_stream_set_input_tokens(api_anthropic_stream_t *self, uint64_t n);

/* Feeds the next upstream bytes; appends whatever Anthropic events they complete to out.
 * Returns 0 while the stream is open or done, or the (negative IPL_E_*) error once it failed
 * (the error event is then in out, written now or by an earlier call; the caller sends out
 * and ends the response). Bytes after the end are counted and ignored. */
int api_anthropic_stream_feed(api_anthropic_stream_t *self, const char *data, size_t len,
                              api_buf_t *out);

/* The worker's response ended (the transfer completed). A last event without its blank
 * line is still read; then, unless the stream is already over: message_delta and
 * message_stop when a finish_reason was seen, else an error event (the stream was cut).
 * Returns 0 when the stream ended well, else the error. */
int api_anthropic_stream_finish(api_anthropic_stream_t *self, api_buf_t *out);

/* The transfer failed after streaming began (or the caller gives up): unless the stream is
 * already over, writes the error event for (status, message): e.g. 529 overloaded_error or
 * 500 api_error (message NULL: "the worker's stream broke off"). Returns the error
 * (IPL_E_IO), or what the stream already ended with. */
int api_anthropic_stream_abort(api_anthropic_stream_t *self, int status, const char *message,
                               api_buf_t *out);

api_anthropic_stream_state_t api_anthropic_stream_state(const api_anthropic_stream_t *self);
const api_anthropic_stream_stats_t *api_anthropic_stream_stats(const api_anthropic_stream_t *self);

#endif
