/*
 * ipl_prom — Prometheus text exposition parser (see ipl_prom.h).
 *
 * The text is copied once so that names and label texts can be NUL-terminated in place for the
 * callback. One line is one sample:
 *
 *     name [blanks] [ "{" label="value", ... [","] "}" ] blanks value [ blanks timestamp ] [blanks]
 *
 * name: [a-zA-Z_:][a-zA-Z0-9_:]*; label name: [a-zA-Z_][a-zA-Z0-9_]*; label values escape \\,
 * \" and \n; value: anything strtod reads in full (so NaN, +Inf, -Inf, 1e-3 ...; the process
 * must keep the "C" numeric locale, which is the default); timestamp: an optional integer.
 * Blank lines and '#' lines (HELP, TYPE, comments) are skipped; a line that fails any of the
 * above, or holds a NUL byte, is counted as malformed.
 */
#include "ipl_prom.h"
#include "ipl_error.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *name;
    size_t name_len;
    const char *value; /* raw, still escaped */
    size_t value_len;
} s_label_t;

static const char *s_blank(const char *p)
{
    while (*p == ' ' || *p == '\t')
        p++;
    return p;
}

static bool s_alpha(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool s_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* The next label at *pp (NUL-terminated text). Returns 1 with *l filled and *pp past it (and
 * past its comma), 0 at the end of the list ('}' or NUL; *pp points there), -1 when malformed. */
static int s_label_next(const char **pp, s_label_t *l)
{
    const char *p = s_blank(*pp);
    if (*p == '}' || *p == '\0') {
        *pp = p;
        return 0;
    }
    if (!s_alpha(*p)) return -1;
    l->name = p;
    while (s_alpha(*p) || s_digit(*p))
        p++;
    l->name_len = (size_t)(p - l->name);
    p = s_blank(p);
    if (*p != '=') return -1;
    p = s_blank(p + 1);
    if (*p != '"') return -1;
    l->value = ++p;
    while (*p != '"') {
        if (*p == '\0') return -1;
        if (*p == '\\' && *++p == '\0') return -1;
        p++;
    }
    l->value_len = (size_t)(p - l->value);
    p = s_blank(p + 1);
    if (*p == ',')
        p++;
    else if (*p != '}' && *p != '\0')
        return -1;
    *pp = p;
    return 1;
}

/* Parses one NUL-terminated line in place; 0 with the sample, -1 when malformed. */
static int s_sample(char *p, const char **name, const char **labels, double *value)
{
    static char s_none[] = "";
    if (!(s_alpha(*p) || *p == ':')) return -1;
    *name = p;
    while (s_alpha(*p) || s_digit(*p) || *p == ':')
        p++;
    char *name_end = p;
    if (*p != '\0' && *p != ' ' && *p != '\t' && *p != '{') return -1; /* e.g. "foo-bar 1" */
    p = (char *)s_blank(p);
    *labels = s_none;
    if (*p == '{') {
        const char *q = p + 1;
        s_label_t l;
        int rc;
        while ((rc = s_label_next(&q, &l)) == 1)
            ;
        if (rc < 0 || *q != '}') return -1;
        *labels = p + 1;
        p = (char *)q;
        *p++ = '\0'; /* ends the labels */
    }
    *name_end = '\0'; /* a blank, the '{' or already the end */

    p = (char *)s_blank(p);
    char *tok = p;
    while (*p && *p != ' ' && *p != '\t')
        p++;
    if (p == tok) return -1;
    char *rest = *p ? p + 1 : p;
    *p = '\0';
    char *end;
    *value = strtod(tok, &end);
    if (end != p) return -1;

    p = (char *)s_blank(rest);
    if (*p) { /* a timestamp: an integer, milliseconds */
        if (*p == '-') p++;
        if (!s_digit(*p)) return -1;
        while (s_digit(*p))
            p++;
        p = (char *)s_blank(p);
    }
    return *p == '\0' ? 0 : -1;
}

int ipl_prom_parse(const char *text, size_t len, ipl_prom_sample_fn *fn, void *arg)
{
    char *copy = malloc(len + 1);
    if (!copy) return IPL_E_NOMEM;
    if (len) memcpy(copy, text, len);
    copy[len] = '\0';
    int bad = 0;
    size_t at = 0;
    while (at < len) {
        char *line = copy + at;
        char *nl = memchr(line, '\n', len - at);
        size_t n = nl ? (size_t)(nl - line) : len - at;
        at += n + 1;
        bool has_nul = memchr(line, '\0', n) != NULL;
        line[n] = '\0';
        if (n > 0 && line[n - 1] == '\r') line[n - 1] = '\0';
        char *p = (char *)s_blank(line);
        if (*p == '#' || (*p == '\0' && !has_nul)) continue;
        const char *name, *labels;
        double value;
        if (has_nul || s_sample(p, &name, &labels, &value) != 0)
            bad++;
        else if (fn)
            fn(arg, name, labels, value);
    }
    free(copy);
    return bad;
}

/* Appends c to buf (keeping room for the NUL); false when it does not fit. */
static bool s_putc(char *buf, size_t size, size_t *out, char c)
{
    if (*out + 1 >= size) return false;
    buf[(*out)++] = c;
    return true;
}

int ipl_prom_label(const char *labels, const char *key, char *buf, size_t size)
{
    size_t klen = strlen(key);
    const char *p = labels;
    s_label_t l;
    int rc;
    while ((rc = s_label_next(&p, &l)) == 1) {
        if (l.name_len != klen || memcmp(l.name, key, klen) != 0) continue;
        size_t out = 0;
        bool ok = size > 0;
        for (size_t i = 0; ok && i < l.value_len; i++) {
            char c = l.value[i];
            if (c == '\\' && i + 1 < l.value_len) {
                char e = l.value[++i];
                if (e == 'n') {
                    c = '\n';
                } else if (e == '\\' || e == '"') {
                    c = e;
                } else { /* not a defined escape: kept as written */
                    ok = s_putc(buf, size, &out, '\\');
                    c = e;
                }
            }
            ok = ok && s_putc(buf, size, &out, c);
        }
        if (!ok) {
            if (size > 0) buf[0] = '\0';
            return IPL_E_RANGE;
        }
        buf[out] = '\0';
        return 0;
    }
    return rc < 0 ? IPL_E_INVAL : IPL_E_NOTFOUND;
}
