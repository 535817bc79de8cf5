/*
 * ipl_sse — a Server-Sent Events framer: bytes in, one callback per event out.
 *
 * It follows the parts of the SSE rules (WHATWG HTML, "event stream interpretation") that
 * OpenAI, vLLM and Anthropic streams use:
 *
 *   bytes ──► lines (ended by \n, \r\n or \r; split anywhere across feeds)
 *         ──► fields: "data:" (joined with \n), "event:" (the last one wins); a single space
 *             after the colon is dropped; "id:", "retry:", unknown fields and comments
 *             (":...") are ignored
 *         ──► a blank line dispatches the event, if it had a data field
 *
 * Input is remote and never trusted: an event whose data (or a line of it) would exceed
 * `max_event` bytes is skipped whole and counted (ipl_sse_overlong); nothing is asserted and
 * the framer never holds more than about 2 × max_event bytes whatever it is fed. Bytes are
 * opaque (NUL included); the data handed to the callback is NUL-terminated for convenience.
 *
 * The callback sees borrowed pointers valid only during the call; it may not feed or destroy
 * the framer it is called from. Not thread-safe: one producer.
 */
#ifndef IPL_SSE_H
#define IPL_SSE_H

#include <stddef.h>
#include <stdint.h>

typedef struct ipl_sse ipl_sse_t;

/* One event: `event` is the event type ("" when the event had no event: field, as the
 * default "message" type), `data` its data lines joined with \n. */
typedef void(ipl_sse_event_fn)(void *arg, const char *event, size_t event_len, const char *data,
                               size_t data_len);

/* `max_event`: the largest event data kept, in bytes (0: 1 MiB). NULL on allocation failure. */
ipl_sse_t *ipl_sse_new(size_t max_event, ipl_sse_event_fn *fn, void *arg);
void ipl_sse_destroy(ipl_sse_t **self_p);

/* Feeds the next `len` bytes; calls back once per complete event. */
void ipl_sse_feed(ipl_sse_t *self, const char *data, size_t len);
/* The input ended: a last line without its terminator is taken, and an event without its
 * blank line is dispatched (a server closing right after its last data line). */
void ipl_sse_finish(ipl_sse_t *self);
/* Forgets any partial line or event and the counters (keeps the buffers): a new stream. */
void ipl_sse_reset(ipl_sse_t *self);

/* Events dispatched, and events skipped for exceeding max_event, since new/reset. */
uint64_t ipl_sse_events(const ipl_sse_t *self);
uint64_t ipl_sse_overlong(const ipl_sse_t *self);

#endif
