/*
 * api_buf — a growable output buffer. See api_buf.h.
 */
#include "api_buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipl_error.h"

/* Makes room for `extra` more bytes plus the NUL; sets the sticky error on failure. */
static int s_reserve(api_buf_t *self, size_t extra)
{
    if (self->error) return self->error;
    if (extra > API_BUF_MAX - self->len - 1) {
        self->error = IPL_E_RANGE;
        return self->error;
    }
    size_t need = self->len + extra + 1;
    if (need <= self->cap) return 0;
    size_t cap = self->cap ? self->cap : 256;
    while (cap < need)
        cap *= 2;
    char *data = realloc(self->data, cap);
    if (!data) {
        self->error = IPL_E_NOMEM;
        return self->error;
    }
    self->data = data;
    self->cap = cap;
    return 0;
}

int api_buf_append(api_buf_t *self, const void *data, size_t len)
{
    int rc = s_reserve(self, len);
    if (rc) return rc;
    if (len) memcpy(self->data + self->len, data, len);
    self->len += len;
    self->data[self->len] = '\0';
    return 0;
}

int api_buf_puts(api_buf_t *self, const char *text)
{
    return api_buf_append(self, text, strlen(text));
}

int api_buf_printf(api_buf_t *self, const char *fmt, ...)
{
    if (self->error) return self->error;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        self->error = IPL_E_INVAL;
        return self->error;
    }
    int rc = s_reserve(self, (size_t)n);
    if (rc) return rc;
    va_start(ap, fmt);
    vsnprintf(self->data + self->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    self->len += (size_t)n;
    return 0;
}

int api_buf_json_string(api_buf_t *self, const char *text, size_t len)
{
    /* Worst case every byte becomes \u00XX (6 bytes), plus the quotes. */
    if (len > (API_BUF_MAX - 2) / 6) {
        if (!self->error) self->error = IPL_E_RANGE;
        return self->error;
    }
    int rc = s_reserve(self, len * 6 + 2);
    if (rc) return rc;
    static const char hex[] = "0123456789abcdef";
    char *o = self->data + self->len;
    *o++ = '"';
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        switch (c) {
        case '"':
            *o++ = '\\';
            *o++ = '"';
            break;
        case '\\':
            *o++ = '\\';
            *o++ = '\\';
            break;
        case '\n':
            *o++ = '\\';
            *o++ = 'n';
            break;
        case '\r':
            *o++ = '\\';
            *o++ = 'r';
            break;
        case '\t':
            *o++ = '\\';
            *o++ = 't';
            break;
        case '\b':
            *o++ = '\\';
            *o++ = 'b';
            break;
        case '\f':
            *o++ = '\\';
            *o++ = 'f';
            break;
        default:
            if (c < 0x20) {
                memcpy(o, "\\u00", 4);
                o[4] = hex[c >> 4];
                o[5] = hex[c & 15];
                o += 6;
            } else {
                *o++ = (char)c;
            }
        }
    }
    *o++ = '"';
    *o = '\0';
    self->len = (size_t)(o - self->data);
    return 0;
}

void api_buf_clear(api_buf_t *self)
{
    self->len = 0;
    self->error = 0;
    if (self->data) self->data[0] = '\0';
}

void api_buf_free(api_buf_t *self)
{
    free(self->data);
    memset(self, 0, sizeof(*self));
}

char *api_buf_take(api_buf_t *self)
{
    if (self->error || s_reserve(self, 0) != 0) {
        api_buf_free(self);
        return NULL;
    }
    char *data = self->data;
    data[self->len] = '\0';
    memset(self, 0, sizeof(*self));
    return data;
}
