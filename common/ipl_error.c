/*
 * ipl_error — names for the project's error codes.
 */
#include "ipl_error.h"

#include <stdarg.h>
#include <stdio.h>

const char *ipl_strerror(int code)
{
    switch (code) {
    case IPL_OK:
        return "ok";
    case IPL_E_TRUNCATED:
        return "truncated";
    case IPL_E_TYPE:
        return "wrong_type";
    case IPL_E_RANGE:
        return "out_of_range";
    case IPL_E_VERSION:
        return "bad_version";
    case IPL_E_UNKNOWN:
        return "unknown_type";
    case IPL_E_NOMEM:
        return "no_memory";
    case IPL_E_INVAL:
        return "invalid";
    case IPL_E_IO:
        return "io_error";
    case IPL_E_TRAILING:
        return "trailing_bytes";
    case IPL_E_NOTFOUND:
        return "not_found";
    case IPL_E_AGAIN:
        return "again";
    case IPL_E_TIMEOUT:
        return "timeout";
    default:
        return "unknown_error";
    }
}

void ipl_errf(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || !errlen) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}
