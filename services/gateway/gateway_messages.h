/*
 * gateway_messages — the Anthropic Messages API on the gateway (POST /v1/messages and
 * /v1/messages/count_tokens; docs/api-anthropic.md): one request's translation to the
 * worker's OpenAI chat API and its answer's translation back (libs/api does both), and the
 * Anthropic error shape for everything the gateway itself refuses.
 *
 *   handler                                    the transfer's callbacks (same thread)
 *   gateway_messages_parse  → the chat body    (routed and forwarded as a chat completion to
 *                                               the worker's /v1/chat/completions)
 *   gateway_messages_begin  upstream status ─► gateway_messages_write (each chunk: a stream's
 *                                               events translated as they come; a whole body
 *                                               held, bounded, until the end)
 *                                              gateway_messages_finish (on_done: the held
 *                                               body translated, or the stream ended, or its
 *                                               error event when it broke off)
 *
 * Statuses the client sees (Anthropic's SDKs retry 429, 5xx and 529): as the gateway's
 * OpenAI side, except that "every worker is busy" (the decider's OVERLOADED, a backend at
 * maxConnections) is 529 overloaded_error. An upstream error (non-2xx) becomes Anthropic's
 * error body with the same status; a provider's 401/403 message is not repeated (providers
 * echo keys).
 *
 * Not thread-safe: one request, handed from the handler to the transfer's callbacks.
 */
#ifndef GATEWAY_MESSAGES_H
#define GATEWAY_MESSAGES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gateway_api.h"

#define GATEWAY_MESSAGES_MAX_BODY (8u << 20) /* bytes of a whole answer held for translation */

typedef struct gateway_messages gateway_messages_t;

/* Parses a /v1/messages body (count: /v1/messages/count_tokens). Returns 0 with *out and
 * *chat_json (the OpenAI chat body, malloc'd; the caller frees it), or -1 with err filled
 * (400, the field named). */
int gateway_messages_parse(const char *body, size_t len, bool count, gateway_messages_t **out,
                           char **chat_json, gateway_api_error_t *err);
void gateway_messages_destroy(gateway_messages_t **self_p);

/* The status the client gets for a gateway error `err` on this API (529 for overload). */
int gateway_messages_status(const gateway_api_error_t *err);
/* Anthropic's error body for (status, message), malloc'd; *len its length. NULL: no memory. */
char *gateway_messages_error_body(int status, const char *message, size_t *len);

/* {"input_tokens": n}, malloc'd. */
char *gateway_messages_count_body(uint64_t input_tokens, size_t *len);

/* The upstream answered `status` with type `ctype`: returns the content type to answer the
 * client with. `prompt_tokens` is the gateway's count (the stream's first input_tokens);
 * `provider` says whether the answer comes from a provider (its 401/403 text is dropped). */
const char *gateway_messages_begin(gateway_messages_t *self, int status, const char *ctype,
                                   uint64_t prompt_tokens, bool provider);
/* One upstream chunk: writes what it translates to fd. 0, or -1 when the client is gone. */
int gateway_messages_write(gateway_messages_t *self, int fd, const char *data, size_t len);
/* The transfer ended (`ok`: completely; else `error` says why): writes the rest to fd. */
void gateway_messages_finish(gateway_messages_t *self, int fd, bool ok, const char *error);

#endif
