/*
 * api_buf — a growable byte buffer that the API translators append their output to.
 *
 * The struct is the caller's (zero-initialise it: `api_buf_t out = {0};`); the translators
 * only append. `data` is malloc'd, NUL-terminated whenever it is not NULL (`len` does not
 * count the NUL), and may move on every append. Errors are sticky: the first failed append
 * (out of memory, or growth past API_BUF_MAX) sets `error` to its IPL_E_* code and every later
 * append is a no-op returning that code, so a caller can compose many appends and check once.
 * api_buf_clear() empties it for reuse (memory kept, error reset); api_buf_free() releases it.
 * Not thread-safe: one owner.
 */
#ifndef API_BUF_H
#define API_BUF_H

#include <stddef.h>

#define API_BUF_MAX ((size_t)1 << 30) /* 1 GiB: far above any response; a runaway guard */

typedef struct {
    char *data;
    size_t len;
    size_t cap;
    int error; /* 0, or the IPL_E_* code of the first failed append */
} api_buf_t;

/* Appends len bytes. Returns 0 or the (sticky) error. */
int api_buf_append(api_buf_t *self, const void *data, size_t len);
int api_buf_puts(api_buf_t *self, const char *text);
int api_buf_printf(api_buf_t *self, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends text[0..len) as a JSON string: quoted, with '"', '\\' and control characters
 * escaped (RFC 8259 §7). Other bytes, UTF-8 or not, pass as they are (as cJSON does). */
int api_buf_json_string(api_buf_t *self, const char *text, size_t len);

/* Empties the buffer (len 0, error 0), keeping its memory. */
void api_buf_clear(api_buf_t *self);
/* Frees the memory and zeroes the struct. */
void api_buf_free(api_buf_t *self);
/* Hands the text over: returns data (the caller frees it; an empty buffer gives "" freshly
 * allocated) and zeroes the struct. NULL when the buffer holds an error or memory ran out. */
char *api_buf_take(api_buf_t *self);

#endif
