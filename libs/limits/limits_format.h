/*
 * limits_format — the values of the rate-limit response headers.
 *
 * x-ratelimit-reset-* in OpenAI's form (a Go-style duration: "0s", "250ms", "1s", "6m0s",
 * "1h2m3s"; below a second in whole milliseconds, from a second on in whole seconds rounded
 * up), and Retry-After in whole seconds rounded up (RFC 9110, at least 1 for any wait).
 */
#ifndef LIMITS_FORMAT_H
#define LIMITS_FORMAT_H

#include <stddef.h>
#include <stdint.h>

/* Writes the duration ms (< 0 is 0) into buf (at least 24 bytes). Returns buf. */
char *limits_format_reset(char *buf, size_t size, int64_t ms);
/* Retry-After seconds for a wait of ms: 0 for none, else ceil(ms / 1000) (at least 1). */
int64_t limits_format_retry_after_s(int64_t ms);

#endif
