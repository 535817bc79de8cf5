/*
 * ipl_error — the project's error codes.
 *
 * Functions that can fail return 0 (IPL_OK) or a negative IPL_E_* code, libuv style; a
 * function returning a pointer returns NULL on failure. ipl_strerror() names a code for logs
 * and for the `reason` label of dropped-input counters (stable, lower-case, no spaces).
 */
#ifndef IPL_ERROR_H
#define IPL_ERROR_H

#include <stddef.h>

enum {
    IPL_OK = 0,
    IPL_E_TRUNCATED = -1, /* input ended in the middle of a value */
    IPL_E_TYPE = -2,      /* a value had the wrong type */
    IPL_E_RANGE = -3,     /* a value or a length is out of its allowed range (oversized) */
    IPL_E_VERSION = -4,   /* unknown envelope version */
    IPL_E_UNKNOWN = -5,   /* unknown message type / event tag */
    IPL_E_NOMEM = -6,
    IPL_E_INVAL = -7,     /* invalid argument or malformed input not covered above */
    IPL_E_IO = -8,        /* a system call or socket failed; errno is kept */
    IPL_E_TRAILING = -9,  /* bytes left after a complete value */
    IPL_E_NOTFOUND = -10,
    IPL_E_AGAIN = -11,    /* nothing available now; try later (non-blocking paths) */
    IPL_E_TIMEOUT = -12,
};

/* A static string naming `code` ("truncated", "wrong_type", ...). Never NULL. */
const char *ipl_strerror(int code);

/* Writes a printf-style message into err[errlen] (nothing when err is NULL or errlen 0): the
 * "char *err, size_t errlen" out-parameter every constructor that can fail takes. */
void ipl_errf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
