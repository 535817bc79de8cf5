/*
 * ipl_normalizer — tokenizer.json normalizers (see ipl_normalizer.h).
 */
#include "ipl_normalizer.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipl_unicode.h"

#define S_MAX_STEPS 8

typedef struct {
    bool nfc;                /* else Replace */
    char *pattern, *content; /* malloc'd, Replace only */
    size_t plen, clen;
} s_step_t;

struct ipl_normalizer {
    s_step_t step[S_MAX_STEPS];
    size_t n;
};

bool ipl_normalizer_replace(const char *s, size_t len, const char *pattern, size_t plen,
                            const char *content, size_t clen, char **out, size_t *outlen)
{
    *out = NULL;
    *outlen = len;
    size_t count = 0;
    for (const char *at = s; (at = memmem(at, len - (size_t)(at - s), pattern, plen)) != NULL;
         at += plen)
        count++;
    if (count == 0) return true;
    size_t n = len - count * plen + count * clen;
    char *o = malloc(n + 1);
    if (!o) return false;
    size_t w = 0;
    for (const char *at = s, *m; at < s + len; at = m + plen) {
        m = memmem(at, len - (size_t)(at - s), pattern, plen);
        size_t keep = (size_t)((m ? m : s + len) - at);
        memcpy(o + w, at, keep);
        w += keep;
        if (!m) break;
        memcpy(o + w, content, clen);
        w += clen;
    }
    o[w] = '\0';
    *out = o;
    *outlen = w;
    return true;
}

bool ipl_normalizer_apply(const ipl_normalizer_t *self, const char *s, size_t len, char **out,
                          size_t *outlen)
{
    char *cur = NULL;
    size_t n = len;
    for (size_t k = 0; k < self->n; k++) {
        const s_step_t *st = &self->step[k];
        const char *src = cur ? cur : s;
        char *next = NULL;
        size_t m = n;
        bool ok = true;
        if (st->nfc) {
            if (!ipl_unicode_nfc_quick(src, n)) ok = (next = ipl_unicode_nfc(src, n, &m)) != NULL;
        } else {
            ok = ipl_normalizer_replace(src, n, st->pattern, st->plen, st->content, st->clen, &next,
                                        &m);
        }
        if (!ok) {
            free(cur);
            return false;
        }
        if (next) {
            free(cur);
            cur = next;
            n = m;
        }
    }
    *out = cur;
    *outlen = n;
    return true;
}

bool ipl_normalizer_is_identity(const ipl_normalizer_t *self)
{
    return self->n == 0;
}

static bool s_fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || !errlen) return false;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return false;
}

static bool s_load(ipl_normalizer_t *self, const cJSON *j, const char *where, char *err,
                   size_t errlen)
{
    if (!j || cJSON_IsNull(j)) return true;
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "type");
    const char *type = cJSON_IsString(t) ? t->valuestring : "";
    if (!strcmp(type, "Sequence")) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(j, "normalizers");
        if (!cJSON_IsArray(list))
            return s_fail(err, errlen, "%s.normalizers: missing or not an array", where);
        size_t i = 0;
        for (const cJSON *it = list->child; it; it = it->next, i++) {
            char at[256];
            snprintf(at, sizeof at, "%s.normalizers[%zu]", where, i);
            if (!s_load(self, it, at, err, errlen)) return false;
        }
        return true;
    }
    if (self->n == S_MAX_STEPS)
        return s_fail(err, errlen, "%s: more than %d steps", where, S_MAX_STEPS);
    s_step_t *st = &self->step[self->n];
    if (!strcmp(type, "NFC")) {
        st->nfc = true;
        self->n++;
        return true;
    }
    if (!strcmp(type, "Replace")) {
        const cJSON *pattern = cJSON_GetObjectItemCaseSensitive(j, "pattern");
        const cJSON *str = cJSON_GetObjectItemCaseSensitive(pattern, "String");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(j, "content");
        if (!cJSON_IsString(str) || !*str->valuestring)
            return s_fail(err, errlen,
                          "%s.pattern: only a non-empty {\"String\": ...} is "
                          "supported",
                          where);
        if (!cJSON_IsString(content))
            return s_fail(err, errlen, "%s.content: missing or not a string", where);
        self->n++; /* counted first, so that destroy frees a partial step */
        st->plen = strlen(str->valuestring);
        st->clen = strlen(content->valuestring);
        if (!(st->pattern = strdup(str->valuestring)) ||
            !(st->content = strdup(content->valuestring)))
            return s_fail(err, errlen, "out of memory");
        return true;
    }
    return s_fail(err, errlen,
                  "%s: type \"%s\" is not supported (null, NFC, Replace with a String pattern, "
                  "or a Sequence of them)",
                  where, type);
}

ipl_normalizer_t *ipl_normalizer_new_from_json(const cJSON *json, char *err, size_t errlen)
{
    if (err && errlen) err[0] = '\0';
    ipl_normalizer_t *self = calloc(1, sizeof *self);
    if (!self) {
        s_fail(err, errlen, "out of memory");
        return NULL;
    }
    if (!s_load(self, json, "normalizer", err, errlen)) ipl_normalizer_destroy(&self);
    return self;
}

void ipl_normalizer_destroy(ipl_normalizer_t **self_p)
{
    if (!self_p || !*self_p) return;
    ipl_normalizer_t *self = *self_p;
    for (size_t i = 0; i < self->n; i++) {
        free(self->step[i].pattern);
        free(self->step[i].content);
    }
    free(self);
    *self_p = NULL;
}
