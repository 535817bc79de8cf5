/*
 * api_anthropic_error — errors in the shape of Anthropic's Messages API:
 *
 *     {"type":"error","error":{"type":"invalid_request_error","message":"..."}}
 *
 * with the HTTP status choosing the type, as https://docs.anthropic.com/en/api/errors lists
 * them (the official SDKs raise their usual exceptions from the status; they retry 408, 409,
 * 429 and every 5xx, 529 included):
 *
 *   400 invalid_request_error   401 authentication_error   402 billing_error
 *   403 permission_error        404 not_found_error        413 request_too_large
 *   429 rate_limit_error        500 api_error              503, 529 overloaded_error
 *   any other 4xx: invalid_request_error; any other 5xx (502, 504, ...): api_error
 *
 * The same body is the data of a streamed `event: error` (a failure after the stream began).
 * The error value type (api_anthropic_error_t) is what every translator in this library
 * fills when it refuses something: a status and a message a person reads, naming the field
 * path Anthropic-style ("messages.2.content.0.type: ...").
 */
#ifndef API_ANTHROPIC_ERROR_H
#define API_ANTHROPIC_ERROR_H

#include <stddef.h>

#include "api_buf.h"

struct cJSON;

#define API_ANTHROPIC_ERROR_MAX 512 /* bytes of message kept (longer ones are cut) */

typedef struct {
    int status;                            /* HTTP status, e.g. 400 */
    char message[API_ANTHROPIC_ERROR_MAX]; /* NUL-terminated */
} api_anthropic_error_t;

/* Fills err (status and printf-style message); returns err. */
api_anthropic_error_t *api_anthropic_error_set(api_anthropic_error_t *err, int status,
                                               const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The Anthropic error type for an HTTP status (table above). Never NULL. */
const char *api_anthropic_error_type(int status);

/* Appends the error body for (status, message) to out. Returns 0 or out's error. */
int api_anthropic_error_write(api_buf_t *out, int status, const char *message);
/* The same as a malloc'd string (the caller frees it); NULL when memory ran out. */
char *api_anthropic_error_body(int status, const char *message);
/* Appends the streamed form, "event: error\ndata: <body>\n\n". */
int api_anthropic_error_event(api_buf_t *out, int status, const char *message);

/* Reads an OpenAI-style error from a worker or provider into err: the message of
 * {"error": {"message": ...}} (OpenAI, and vLLM's streamed error chunk), of
 * {"object": "error", "message": ...} (vLLM's ErrorResponse), or of {"error": "text"}; the
 * status from its numeric "code" when that is a valid HTTP error status (400..599), else
 * `status`. Returns 1 when `root` holds such an error, 0 when it does not (err untouched). */
int api_anthropic_error_from_openai(const struct cJSON *root, int status,
                                    api_anthropic_error_t *err);
/* The Anthropic body for an upstream error answer (status, body[0..len)): its message when
 * the body is an OpenAI/vLLM error, else "the upstream answered HTTP <status>". malloc'd. */
char *api_anthropic_error_translate(int status, const char *body, size_t len);

#endif
