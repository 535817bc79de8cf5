/*
 * ipl_jinja_str — Python str operations on UTF-8 (see ipl_jinja_str.h).
 */
#include "ipl_jinja_str.h"

#include <string.h>

#include "ipl_unicode.h"

/* ---- case tables ------------------------------------------------------------------------ */

/* Outcome of a case lookup: the code point has no case (returned as is), or maps to up to
 * two code points, or is cased but outside the tables (-1). */
enum { S_CASELESS = 0, S_LOWER = 1, S_UPPER = 2, S_UNKNOWN = -1 };

/* Classifies cp and gives its lower and upper forms (upper may be two code points: ß → SS). */
static int s_case_info(uint32_t cp, uint32_t *lo, uint32_t up[2], int *nup)
{
    *lo = cp;
    up[0] = cp;
    *nup = 1;
    if (cp < 0x80) {
        if (cp >= 'a' && cp <= 'z') {
            up[0] = cp - 32;
            return S_LOWER;
        }
        if (cp >= 'A' && cp <= 'Z') {
            *lo = cp + 32;
            return S_UPPER;
        }
        return S_CASELESS;
    }
    if (cp < 0xc0) {
        if (cp == 0xb5) { /* micro sign: upper is Greek capital mu */
            up[0] = 0x39c;
            return S_LOWER;
        }
        return S_CASELESS;
    }
    if (cp <= 0xff) {
        if (cp == 0xd7 || cp == 0xf7) return S_CASELESS;
        if (cp == 0xdf) {
            up[0] = 'S';
            up[1] = 'S';
            *nup = 2;
            return S_LOWER;
        }
        if (cp == 0xff) {
            up[0] = 0x178;
            return S_LOWER;
        }
        if (cp >= 0xe0) {
            up[0] = cp - 32;
            return S_LOWER;
        }
        *lo = cp + 32;
        return S_UPPER;
    }
    if (cp <= 0x17f) {
        /* Latin Extended-A: alternating pairs, with a few irregular ones left out */
        if (cp == 0x130 || cp == 0x131 || cp == 0x138 || cp == 0x149 || cp == 0x17f)
            return S_UNKNOWN;
        if (cp == 0x178) {
            *lo = 0xff;
            return S_UPPER;
        }
        bool even_upper = (cp >= 0x100 && cp <= 0x137) || (cp >= 0x14a && cp <= 0x177);
        bool upper = even_upper ? (cp % 2 == 0) : (cp % 2 == 1);
        if (upper) {
            *lo = cp + 1;
            return S_UPPER;
        }
        up[0] = cp - 1;
        return S_LOWER;
    }
    if (cp >= 0x391 && cp <= 0x3a9 && cp != 0x3a2) {
        if (cp == 0x3a3) return S_UNKNOWN; /* Σ: lower depends on the position (final ς) */
        *lo = cp + 32;
        return S_UPPER;
    }
    if (cp >= 0x3b1 && cp <= 0x3c9) {
        up[0] = cp == 0x3c2 ? 0x3a3 : cp - 32;
        return S_LOWER;
    }
    if (cp >= 0x410 && cp <= 0x42f) {
        *lo = cp + 32;
        return S_UPPER;
    }
    if (cp >= 0x430 && cp <= 0x44f) {
        up[0] = cp - 32;
        return S_LOWER;
    }
    if (cp >= 0x400 && cp <= 0x40f) {
        *lo = cp + 80;
        return S_UPPER;
    }
    if (cp >= 0x450 && cp <= 0x45f) {
        up[0] = cp - 80;
        return S_LOWER;
    }
    if (cp >= 0xff21 && cp <= 0xff3a) {
        *lo = cp + 32;
        return S_UPPER;
    }
    if (cp >= 0xff41 && cp <= 0xff5a) {
        up[0] = cp - 32;
        return S_LOWER;
    }
    /* cased symbols that are not letters: circled letters, Roman numerals */
    if ((cp >= 0x24b6 && cp <= 0x24e9) || (cp >= 0x2160 && cp <= 0x217f)) return S_UNKNOWN;
    if (!ipl_unicode_is_letter(cp)) return S_CASELESS;
    /* letters of scripts without case */
    if ((cp >= 0x590 && cp <= 0x1cff && !(cp >= 0x10a0 && cp <= 0x10ff) &&
         !(cp >= 0x13a0 && cp <= 0x13ff) && !(cp >= 0x1c80 && cp <= 0x1cbf)) ||
        (cp >= 0x2e80 && cp <= 0xa4cf) || (cp >= 0xa800 && cp <= 0xabff && !(cp >= 0xab70 && cp <= 0xabbf)) ||
        (cp >= 0xac00 && cp <= 0xd7ff) || (cp >= 0xf900 && cp <= 0xfaff) ||
        (cp >= 0xfb1d && cp <= 0xfdff) || (cp >= 0xfe70 && cp <= 0xfefc) ||
        (cp >= 0xff66 && cp <= 0xffdc) || cp >= 0x20000)
        return S_CASELESS;
    return S_UNKNOWN;
}

int ipl_jstr_case(ipl_jarena_t *a, ipl_jv_t s, ipl_jcase_t mode, ipl_jv_t *out, uint32_t *bad)
{
    const unsigned char *p = (const unsigned char *)s.u.s.p;
    size_t n = s.u.s.n;
    /* an upper-cased code point takes at most 2 × 3 bytes from a 2-byte input */
    char *o = ipl_jarena_alloc(a, n * 3 + 1);
    if (!o) return -1;
    size_t k = 0, i = 0;
    bool prev_cased = false, word_start = true, first = true;
    while (i < n) {
        uint32_t cp, lo, up[2];
        int nup;
        size_t len = ipl_utf8_next(p + i, n - i, &cp);
        if (cp == IPL_UNICODE_INVALID) {
            o[k++] = (char)p[i];
            i += len;
            prev_cased = false;
            first = false;
            word_start = false;
            continue;
        }
        int kind = s_case_info(cp, &lo, up, &nup);
        if (kind == S_UNKNOWN) {
            if (bad) *bad = cp;
            return -1;
        }
        bool to_upper;
        bool cased = kind != S_CASELESS;
        switch (mode) {
        case IPL_JCASE_LOWER: to_upper = false; break;
        case IPL_JCASE_UPPER: to_upper = true; break;
        case IPL_JCASE_TITLE: to_upper = !prev_cased; break;
        case IPL_JCASE_CAPITALIZE: to_upper = first; break;
        default: to_upper = word_start; break;
        }
        if (!cased) {
            memcpy(o + k, p + i, len);
            k += len;
        } else if (to_upper) {
            for (int j = 0; j < nup; j++) k += ipl_utf8_put(up[j], (unsigned char *)o + k);
        } else {
            k += ipl_utf8_put(lo, (unsigned char *)o + k);
        }
        if (mode == IPL_JCASE_JTITLE) {
            bool sep = cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' ||
                       ipl_jv_is_space(cp);
            word_start = sep;
        }
        prev_cased = cased;
        first = false;
        i += len;
    }
    o[k] = '\0';
    *out = ipl_jv_str(o, k);
    return 0;
}

int ipl_jstr_is_case(ipl_jv_t s, bool upper, bool *result, uint32_t *bad)
{
    const unsigned char *p = (const unsigned char *)s.u.s.p;
    size_t n = s.u.s.n, i = 0;
    bool any = false;
    while (i < n) {
        uint32_t cp, lo, up[2];
        int nup;
        i += ipl_utf8_next(p + i, n - i, &cp);
        if (cp == IPL_UNICODE_INVALID) continue;
        int kind = s_case_info(cp, &lo, up, &nup);
        if (kind == S_UNKNOWN) {
            if (bad) *bad = cp;
            return -1;
        }
        if (kind == S_CASELESS) continue;
        any = true;
        if ((kind == S_UPPER) != upper) {
            *result = false;
            return 0;
        }
    }
    *result = any;
    return 0;
}

/* ---- strip / split ---------------------------------------------------------------------- */

static bool s_in_chars(uint32_t cp, const ipl_jv_t *chars)
{
    if (!chars) return ipl_jv_is_space(cp);
    const unsigned char *p = (const unsigned char *)chars->u.s.p;
    size_t n = chars->u.s.n, i = 0;
    while (i < n) {
        uint32_t c;
        i += ipl_utf8_next(p + i, n - i, &c);
        if (c == cp) return true;
    }
    return false;
}

ipl_jv_t ipl_jstr_strip(ipl_jv_t s, const ipl_jv_t *chars, char which)
{
    const unsigned char *p = (const unsigned char *)s.u.s.p;
    size_t n = s.u.s.n, start = 0, end = n;
    if (which != 'r') {
        while (start < n) {
            uint32_t cp;
            size_t len = ipl_utf8_next(p + start, n - start, &cp);
            if (cp == IPL_UNICODE_INVALID || !s_in_chars(cp, chars)) break;
            start += len;
        }
    }
    if (which != 'l') {
        /* walk back from the end over strippable code points, O(what is stripped): a
         * system prompt's `| trim` must not cost its length. A last byte that does not end a
         * whole UTF-8 character is a character of its own, as ipl_utf8_next reads it going
         * forward, so both directions cut the text into the same characters. */
        while (end > start) {
            size_t i = end - 1;
            while (i > start && end - i < 4 && (p[i] & 0xC0) == 0x80)
                i--;
            uint32_t cp;
            size_t len = ipl_utf8_next(p + i, end - i, &cp);
            if (i + len != end || cp == IPL_UNICODE_INVALID || !s_in_chars(cp, chars)) break;
            end = i;
        }
    }
    return ipl_jv_str(s.u.s.p + start, end > start ? end - start : 0);
}

/* Length of the whitespace code point at p[i] (0 if none). */
static size_t s_space(const unsigned char *p, size_t n, size_t i)
{
    uint32_t cp;
    size_t len = ipl_utf8_next(p + i, n - i, &cp);
    return cp != IPL_UNICODE_INVALID && ipl_jv_is_space(cp) ? len : 0;
}

/* Pushes piece p[a..b) at the front or the back of a list being built. */
static int s_piece(ipl_jarena_t *a, ipl_jv_t *list, const char *p, size_t from, size_t to,
                   size_t max_items)
{
    if (list->u.l->n >= max_items) return -1;
    ipl_jlist_push(a, list, ipl_jv_str(p + from, to - from));
    return 0;
}

static void s_reverse(ipl_jv_t *list)
{
    ipl_jlist_t *l = list->u.l;
    for (size_t i = 0; i < l->n / 2; i++) {
        ipl_jv_t t = l->v[i];
        l->v[i] = l->v[l->n - 1 - i];
        l->v[l->n - 1 - i] = t;
    }
}

int ipl_jstr_split(ipl_jarena_t *a, ipl_jv_t s, const ipl_jv_t *sep, int64_t maxsplit,
                   bool from_right, size_t max_items, ipl_jv_t *out)
{
    const char *p = s.u.s.p;
    const unsigned char *u = (const unsigned char *)p;
    size_t n = s.u.s.n;
    *out = ipl_jv_list(a, 0);
    if (maxsplit < 0) maxsplit = INT64_MAX;
    if (sep && sep->u.s.n == 0) return -1;
    if (!from_right) {
        if (!sep) {
            size_t i = 0;
            int64_t splits = 0;
            for (;;) {
                size_t k;
                while (i < n && (k = s_space(u, n, i))) i += k;
                if (i >= n) break;
                if (splits == maxsplit) {
                    /* the rest, without its trailing whitespace kept: Python keeps it */
                    return s_piece(a, out, p, i, n, max_items);
                }
                size_t j = i;
                while (j < n && !s_space(u, n, j)) j += ipl_jv_offset(p + j, n - j, 1);
                if (s_piece(a, out, p, i, j, max_items) < 0) return -1;
                splits++;
                i = j;
            }
            return 0;
        }
        size_t i = 0;
        int64_t splits = 0;
        while (splits < maxsplit) {
            const char *hit = n - i >= sep->u.s.n ? memmem(p + i, n - i, sep->u.s.p, sep->u.s.n)
                                                  : NULL;
            if (!hit) break;
            size_t at = (size_t)(hit - p);
            if (s_piece(a, out, p, i, at, max_items) < 0) return -1;
            i = at + sep->u.s.n;
            splits++;
        }
        return s_piece(a, out, p, i, n, max_items);
    }
    /* rsplit: find the split points from the right, collect reversed, then flip */
    if (!sep) {
        /* code point starts, so whitespace can be found walking backwards */
        size_t count = ipl_jv_strlen(p, n);
        size_t *offs = ipl_jarena_alloc(a, (count + 1) * sizeof *offs);
        if (!offs) return -1;
        size_t off = 0;
        for (size_t k = 0; k <= count; k++) {
            offs[k] = off;
            if (k < count) off += ipl_jv_offset(p + off, n - off, 1);
        }
        size_t e = count; /* index in code points */
        int64_t splits = 0;
        for (;;) {
            while (e > 0 && s_space(u, n, offs[e - 1])) e--;
            if (e == 0) break;
            if (splits == maxsplit) {
                if (s_piece(a, out, p, 0, offs[e], max_items) < 0) return -1;
                break;
            }
            size_t b = e;
            while (b > 0 && !s_space(u, n, offs[b - 1])) b--;
            if (s_piece(a, out, p, offs[b], offs[e], max_items) < 0) return -1;
            splits++;
            e = b;
        }
        s_reverse(out);
        return 0;
    }
    size_t end = n;
    int64_t splits = 0;
    size_t m = sep->u.s.n;
    while (splits < maxsplit && end >= m) {
        size_t at = SIZE_MAX;
        for (size_t k = end - m + 1; k-- > 0;)
            if (memcmp(p + k, sep->u.s.p, m) == 0) {
                at = k;
                break;
            }
        if (at == SIZE_MAX) break;
        if (s_piece(a, out, p, at + m, end, max_items) < 0) return -1;
        end = at;
        splits++;
    }
    if (s_piece(a, out, p, 0, end, max_items) < 0) return -1;
    s_reverse(out);
    return 0;
}

/* A line boundary of str.splitlines at p[i]: its length (2 for "\r\n"), or 0. */
static size_t s_line_break(const unsigned char *p, size_t n, size_t i)
{
    unsigned char c = p[i];
    if (c == '\r') return i + 1 < n && p[i + 1] == '\n' ? 2 : 1;
    if (c == '\n' || c == 0x0b || c == 0x0c || (c >= 0x1c && c <= 0x1e)) return 1;
    if (c < 0x80) return 0;
    uint32_t cp;
    size_t len = ipl_utf8_next(p + i, n - i, &cp);
    return cp == 0x85 || cp == 0x2028 || cp == 0x2029 ? len : 0;
}

ipl_jv_t ipl_jstr_splitlines(ipl_jarena_t *a, ipl_jv_t s, bool keepends)
{
    const unsigned char *p = (const unsigned char *)s.u.s.p;
    size_t n = s.u.s.n, start = 0, i = 0;
    ipl_jv_t out = ipl_jv_list(a, 0);
    while (i < n) {
        size_t k = s_line_break(p, n, i);
        if (!k) {
            i++;
            continue;
        }
        ipl_jlist_push(a, &out, ipl_jv_str(s.u.s.p + start, (keepends ? i + k : i) - start));
        i += k;
        start = i;
    }
    if (start < n) ipl_jlist_push(a, &out, ipl_jv_str(s.u.s.p + start, n - start));
    return out;
}

int64_t ipl_jstr_find(ipl_jv_t s, ipl_jv_t sub, bool from_right)
{
    const char *p = s.u.s.p;
    size_t n = s.u.s.n, m = sub.u.s.n;
    if (m > n) return -1;
    size_t at = SIZE_MAX;
    if (!from_right) {
        const char *hit = m ? memmem(p, n, sub.u.s.p, m) : p;
        if (hit) at = (size_t)(hit - p);
    } else {
        for (size_t k = n - m + 1; k-- > 0;)
            if (memcmp(p + k, sub.u.s.p, m) == 0) {
                at = k;
                break;
            }
    }
    return at == SIZE_MAX ? -1 : (int64_t)ipl_jv_strlen(p, at);
}

int64_t ipl_jstr_count(ipl_jv_t s, ipl_jv_t sub)
{
    if (sub.u.s.n == 0) return (int64_t)ipl_jv_strlen(s.u.s.p, s.u.s.n) + 1;
    int64_t count = 0;
    size_t i = 0;
    while (i + sub.u.s.n <= s.u.s.n) {
        const char *hit = memmem(s.u.s.p + i, s.u.s.n - i, sub.u.s.p, sub.u.s.n);
        if (!hit) break;
        count++;
        i = (size_t)(hit - s.u.s.p) + sub.u.s.n;
    }
    return count;
}

int ipl_jstr_replace(ipl_jarena_t *a, ipl_jv_t s, ipl_jv_t old, ipl_jv_t new_, int64_t count,
                     size_t max_bytes, ipl_jv_t *out)
{
    ipl_jbuf_t b;
    ipl_jbuf_init(&b, a, 0, NULL, NULL);
    const char *p = s.u.s.p;
    size_t n = s.u.s.n, i = 0;
    if (count < 0) count = INT64_MAX;
    int64_t done = 0;
    if (old.u.s.n == 0) {
        /* inserted before every code point and at the end */
        while (done < count) {
            ipl_jbuf_put(&b, new_.u.s.p, new_.u.s.n);
            done++;
            if (i >= n) break;
            size_t k = ipl_jv_offset(p + i, n - i, 1);
            ipl_jbuf_put(&b, p + i, k);
            i += k;
            if (b.n > max_bytes) return -1;
        }
        ipl_jbuf_put(&b, p + i, n - i);
    } else {
        while (done < count && i < n) {
            const char *hit = n - i >= old.u.s.n ? memmem(p + i, n - i, old.u.s.p, old.u.s.n)
                                                 : NULL;
            if (!hit) break;
            size_t at = (size_t)(hit - p);
            ipl_jbuf_put(&b, p + i, at - i);
            ipl_jbuf_put(&b, new_.u.s.p, new_.u.s.n);
            i = at + old.u.s.n;
            done++;
            if (b.n > max_bytes) return -1;
        }
        ipl_jbuf_put(&b, p + i, n - i);
    }
    if (b.n > max_bytes) return -1;
    *out = ipl_jbuf_value(&b);
    return 0;
}

bool ipl_jstr_starts(ipl_jv_t s, ipl_jv_t prefix, bool at_end)
{
    if (prefix.u.s.n > s.u.s.n) return false;
    const char *p = at_end ? s.u.s.p + s.u.s.n - prefix.u.s.n : s.u.s.p;
    return prefix.u.s.n == 0 || memcmp(p, prefix.u.s.p, prefix.u.s.n) == 0;
}

bool ipl_jstr_is_class(ipl_jv_t s, int which)
{
    const unsigned char *p = (const unsigned char *)s.u.s.p;
    size_t n = s.u.s.n, i = 0;
    if (n == 0) return false;
    while (i < n) {
        uint32_t cp;
        i += ipl_utf8_next(p + i, n - i, &cp);
        if (cp == IPL_UNICODE_INVALID) return false;
        bool ok;
        switch (which) {
        case 0: ok = cp < 0x80 ? (cp >= '0' && cp <= '9') : ipl_unicode_is_number(cp); break;
        case 1: ok = cp < 0x80 ? ((cp | 32) >= 'a' && (cp | 32) <= 'z') : ipl_unicode_is_letter(cp); break;
        case 2: ok = ipl_unicode_is_letter(cp) || ipl_unicode_is_number(cp); break;
        default: ok = ipl_jv_is_space(cp); break;
        }
        if (!ok) return false;
    }
    return true;
}
