/* libFuzzer target: the Prometheus text on both sides of a scrape — the parser of workers'
 * /metrics (common/ipl_prom, remote bytes) and the label escaping of every series we expose
 * (ipl_metrics_escape, label values that come from clients: model names, tenants).
 *
 * The first byte picks the mode:
 *   even: the rest is a /metrics body. Parsing must not crash and, on every input:
 *         - each sample's name matches [a-zA-Z_:][a-zA-Z0-9_:]* and its label text parses
 *           again label by label (ipl_prom_label finds the first label's key);
 *         - the malformed count is at most the number of lines, and samples + malformed
 *           never exceed the lines;
 *         - the same body with "\r\n" line ends gives the same samples.
 *   odd:  the rest is a label value (up to its first NUL), escaped into buffers of several
 *         sizes. The output must be NUL-terminated within the buffer, valid UTF-8, free of raw
 *         newlines, with every backslash starting \\, \" or \n; and, read back through the
 *         parser as `k="<escaped>"`, it must be the value with each invalid byte replaced by
 *         U+FFFD — exactly when it fit, a prefix of it that ends on a character when cut.
 * The exposition format: https://prometheus.io/docs/instrumenting/exposition_formats/ */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ipl_metrics.h"
#include "ipl_prom.h"
#include "ipl_unicode.h"

typedef struct {
    size_t samples;
    uint64_t digest; /* order-sensitive over names, labels and values */
} s_seen_t;

static bool s_name_ok(const char *n)
{
    if (!*n) return false;
    for (const char *p = n; *p; p++) {
        char c = *p;
        bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
        if (!alpha && !(p > n && c >= '0' && c <= '9')) return false;
    }
    return true;
}

static uint64_t s_mix(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static void s_sample(void *arg, const char *name, const char *labels, double value)
{
    s_seen_t *seen = arg;
    if (!s_name_ok(name)) abort();
    seen->samples++;
    seen->digest = s_mix(seen->digest, name, strlen(name) + 1);
    seen->digest = s_mix(seen->digest, labels, strlen(labels) + 1);
    if (value == value) seen->digest = s_mix(seen->digest, &value, sizeof value); /* not NaN */
    if (*labels) {
        /* the first label's key, as parsed again from the label text */
        char key[64];
        size_t k = 0;
        const char *p = labels;
        while (*p == ' ' || *p == '\t')
            p++;
        while (k + 1 < sizeof key && p[k] && p[k] != '=' && p[k] != ' ' && p[k] != '\t') {
            key[k] = p[k];
            k++;
        }
        key[k] = '\0';
        /* the parser accepted the line, so its labels are well formed and the first key
         * is found; its value, unescaped, is never longer than the label text. Label text
         * of blanks only ("z{ } 1") has no first key. */
        if (k > 0 && k + 1 < sizeof key) {
            size_t cap = strlen(labels) + 1;
            char *buf = malloc(cap);
            if (buf && ipl_prom_label(labels, key, buf, cap) != 0) abort();
            free(buf);
        }
    }
}

static size_t s_lines(const uint8_t *d, size_t n)
{
    size_t lines = 0;
    for (size_t i = 0; i < n; i++)
        lines += d[i] == '\n';
    return lines + (n > 0 && d[n - 1] != '\n');
}

static void s_fuzz_parse(const uint8_t *d, size_t n)
{
    s_seen_t a = {.digest = 14695981039346656037ull};
    int bad = ipl_prom_parse((const char *)d, n, s_sample, &a);
    if (bad < 0) return; /* out of memory */
    size_t lines = s_lines(d, n);
    if ((size_t)bad > lines || a.samples + (size_t)bad > lines) abort();

    /* CRLF line ends read the same (a bare '\r' already before a '\n' is left alone) */
    bool has_cr = memchr(d, '\r', n) != NULL;
    if (has_cr || n > 16384) return;
    uint8_t *crlf = malloc(2 * n + 1);
    if (!crlf) return;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (d[i] == '\n') crlf[m++] = '\r';
        crlf[m++] = d[i];
    }
    s_seen_t b = {.digest = 14695981039346656037ull};
    int bad2 = ipl_prom_parse((const char *)crlf, m, s_sample, &b);
    free(crlf);
    if (bad2 >= 0 && (bad2 != bad || b.samples != a.samples || b.digest != a.digest)) abort();
}

/* `value` with each byte that does not start valid UTF-8 replaced by U+FFFD (the contract of
 * ipl_metrics_escape), into a malloc'd string. */
static char *s_sanitized(const char *value)
{
    size_t n = strlen(value);
    char *out = malloc(3 * n + 1);
    if (!out) return NULL;
    size_t o = 0;
    const unsigned char *p = (const unsigned char *)value;
    while (n > 0) {
        uint32_t cp;
        size_t len = ipl_utf8_next(p, n, &cp);
        if (cp == IPL_UNICODE_INVALID) {
            memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3;
        } else {
            memcpy(out + o, p, len);
            o += len;
        }
        p += len;
        n -= len;
    }
    out[o] = '\0';
    return out;
}

static void s_check_escaped(const char *esc, size_t size, const char *want)
{
    size_t len = strnlen(esc, size);
    if (len >= size) abort(); /* not terminated inside the buffer */
    const unsigned char *p = (const unsigned char *)esc;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t n = ipl_utf8_next(p + i, len - i, &cp);
        if (cp == IPL_UNICODE_INVALID || cp == '\n') abort();
        if (cp == '\\') {
            if (i + 1 >= len) abort(); /* cut inside an escape */
            char e = esc[i + 1];
            if (e != '\\' && e != '"' && e != 'n') abort();
            n = 2;
        } else if (cp == '"') {
            abort(); /* an unescaped quote would end the label value */
        }
        i += n;
    }
    /* read back through the parser */
    size_t tlen = len + 8;
    char *text = malloc(tlen);
    char *back = malloc(strlen(want) + 2);
    if (!text || !back) {
        free(text);
        free(back);
        return;
    }
    memcpy(text, "k=\"", 3);
    memcpy(text + 3, esc, len);
    memcpy(text + 3 + len, "\"", 2);
    int rc = ipl_prom_label(text, "k", back, strlen(want) + 2);
    if (rc != 0) abort();
    size_t blen = strlen(back), wlen = strlen(want);
    if (blen > wlen || memcmp(back, want, blen) != 0) abort(); /* not a prefix */
    if (blen < wlen) {
        /* cut: only because the next piece did not fit, and never inside a character */
        if (((unsigned char)want[blen] & 0xC0) == 0x80) abort();
        if (len + 1 + 1 < size && want[blen] != '\\' && want[blen] != '"' && want[blen] != '\n') {
            uint32_t cp;
            size_t n = ipl_utf8_next((const unsigned char *)want + blen, wlen - blen, &cp);
            if (len + n + 1 <= size) abort(); /* it would have fit */
        }
    }
    free(text);
    free(back);
}

static void s_fuzz_escape(const uint8_t *d, size_t n)
{
    char *value = malloc(n + 1);
    if (!value) return;
    memcpy(value, d, n);
    value[n] = '\0';
    char *want = s_sanitized(value);
    if (!want) {
        free(value);
        return;
    }
    static const size_t sizes[] = {1, 2, 3, 4, 5, 7, 16, 64, 256};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        char buf[256];
        memset(buf, 'x', sizeof buf);
        if (ipl_metrics_escape(buf, sizes[i], value) != buf) abort();
        s_check_escaped(buf, sizes[i], want);
    }
    /* a buffer always big enough: the whole value comes back */
    size_t big = 2 * strlen(want) + 1;
    char *all = malloc(big);
    if (all) {
        ipl_metrics_escape(all, big, value);
        s_check_escaped(all, big, want);
        char *text = malloc(strlen(all) + 8), *back = malloc(strlen(want) + 2);
        if (text && back) {
            strcpy(text, "k=\"");
            strcat(text, all);
            strcat(text, "\"");
            if (ipl_prom_label(text, "k", back, strlen(want) + 2) != 0) abort();
            if (strcmp(back, want) != 0) abort();
        }
        free(text);
        free(back);
        free(all);
    }
    free(want);
    free(value);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    if (data[0] & 1)
        s_fuzz_escape(data + 1, size - 1);
    else
        s_fuzz_parse(data + 1, size - 1);
    return 0;
}
