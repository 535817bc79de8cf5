/*
 * gateway_trailer — how a response that broke off after it started ends for the client.
 *
 * Once the client has its status line (200, text/event-stream) a failure can no longer change
 * the status; an event stream then ends with an error event in the API's shape, so that the
 * client does not mistake the cut for a normal end:
 *
 *   OpenAI     data: {"error": {"message": ..., "type": "server_error", "param": null,
 *                               "code": "<reason>"}}
 *              data: [DONE]
 *   Anthropic  event: error
 *              data: {"type": "error", "error": {"type": ..., "message": ...}}
 *
 * Why it broke off decides the reason (the record's, the log's, the event's code) and the
 * message, which names who is to blame:
 *
 *   upstream_failed       502  the worker's / provider's transfer failed (reset, bad chunking)
 *   stream_idle_timeout   504  no byte from it for --stream-idle-timeout-ms (a hung worker)
 *   shutting_down         503  the gateway stopped (the drain timeout passed) and cut it
 *
 * Pure functions: thread-safe.
 */
#ifndef GATEWAY_TRAILER_H
#define GATEWAY_TRAILER_H

#include <stdbool.h>

#include "gateway_proxy.h"

typedef struct {
    int status;         /* for the record: 502, 503 or 504 */
    const char *reason; /* static: the table above */
    char message[384];  /* what the client reads */
} gateway_cut_t;

/* Why `res` (not ok, its client still there) broke off. `what` is "worker" or "provider",
 * `name` its name. */
void gateway_trailer_classify(const gateway_xfer_result_t *res, const char *what, const char *name,
                              gateway_cut_t *cut);

/* Writes the error event that ends an event stream that broke off to fd (the client's
 * stream), in Anthropic's shape when `anthropic`, else OpenAI's. 0, or IPL_E_IO (the client
 * is gone) / IPL_E_NOMEM. */
int gateway_trailer_write(int fd, bool anthropic, const gateway_cut_t *cut);

#endif
