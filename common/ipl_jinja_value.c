/*
 * ipl_jinja_value — values, arena and text output of the Jinja engine (see ipl_jinja_value.h).
 */
#include "ipl_jinja_value.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "ipl_unicode.h"

#define S_MAX_DEPTH 64

/* ---- arena ------------------------------------------------------------------------------ */

struct ipl_jarena_chunk {
    ipl_jarena_chunk_t *next;
    size_t size, used;
    max_align_t data[]; /* size bytes */
};

void ipl_jarena_init(ipl_jarena_t *self, size_t budget, void (*on_oom)(void *), void *arg)
{
    memset(self, 0, sizeof *self);
    self->budget = budget;
    self->on_oom = on_oom;
    self->oom_arg = arg;
}

void ipl_jarena_free(ipl_jarena_t *self)
{
    ipl_jarena_chunk_t *c = self->head;
    while (c) {
        ipl_jarena_chunk_t *next = c->next;
        free(c);
        c = next;
    }
    self->head = NULL;
    self->used = 0;
}

static void *s_oom(ipl_jarena_t *self)
{
    if (self->on_oom) self->on_oom(self->oom_arg);
    return NULL;
}

void *ipl_jarena_alloc(ipl_jarena_t *self, size_t n)
{
    n = (n + 7) & ~(size_t)7;
    if (n == 0) n = 8;
    if (self->budget && (n > self->budget || self->used > self->budget - n)) return s_oom(self);
    ipl_jarena_chunk_t *c = self->head;
    if (!c || c->size - c->used < n) {
        size_t size = c ? c->size * 2 : 4096;
        if (size > (1u << 20)) size = 1u << 20;
        if (size < n) size = n;
        c = malloc(sizeof *c + size);
        if (!c) return s_oom(self);
        c->size = size;
        c->used = 0;
        c->next = self->head;
        self->head = c;
    }
    void *p = (char *)c->data + c->used;
    c->used += n;
    self->used += n;
    return p;
}

void *ipl_jarena_zalloc(ipl_jarena_t *self, size_t n)
{
    void *p = ipl_jarena_alloc(self, n);
    if (p) memset(p, 0, n);
    return p;
}

char *ipl_jarena_strdup(ipl_jarena_t *self, const char *p, size_t n)
{
    char *s = ipl_jarena_alloc(self, n + 1);
    if (!s) return NULL;
    if (n) memcpy(s, p, n);
    s[n] = '\0';
    return s;
}

/* ---- constructors ----------------------------------------------------------------------- */

ipl_jv_t ipl_jv_undef(void)
{
    return (ipl_jv_t){.type = IPL_JV_UNDEF};
}

ipl_jv_t ipl_jv_none(void)
{
    return (ipl_jv_t){.type = IPL_JV_NONE};
}

ipl_jv_t ipl_jv_bool(bool b)
{
    return (ipl_jv_t){.type = IPL_JV_BOOL, .u.b = b};
}

ipl_jv_t ipl_jv_int(int64_t i)
{
    return (ipl_jv_t){.type = IPL_JV_INT, .u.i = i};
}

ipl_jv_t ipl_jv_float(double f)
{
    return (ipl_jv_t){.type = IPL_JV_FLOAT, .u.f = f};
}

ipl_jv_t ipl_jv_str(const char *p, size_t n)
{
    return (ipl_jv_t){.type = IPL_JV_STR, .u.s = {p ? p : "", n}};
}

ipl_jv_t ipl_jv_cstr(const char *s)
{
    return ipl_jv_str(s, strlen(s));
}

ipl_jv_t ipl_jv_list(ipl_jarena_t *a, size_t cap)
{
    ipl_jlist_t *l = ipl_jarena_zalloc(a, sizeof *l);
    if (l && cap) {
        l->v = ipl_jarena_alloc(a, cap * sizeof *l->v);
        l->cap = l->v ? cap : 0;
    }
    return (ipl_jv_t){.type = IPL_JV_LIST, .u.l = l};
}

ipl_jv_t ipl_jv_dict(ipl_jarena_t *a, size_t cap)
{
    ipl_jdict_t *d = ipl_jarena_zalloc(a, sizeof *d);
    if (d && cap) {
        d->k = ipl_jarena_alloc(a, cap * sizeof *d->k);
        d->v = ipl_jarena_alloc(a, cap * sizeof *d->v);
        d->cap = d->k && d->v ? cap : 0;
    }
    return (ipl_jv_t){.type = IPL_JV_DICT, .u.d = d};
}

void ipl_jlist_push(ipl_jarena_t *a, ipl_jv_t *list, ipl_jv_t v)
{
    ipl_jlist_t *l = list->u.l;
    if (!l) return;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        ipl_jv_t *nv = ipl_jarena_alloc(a, cap * sizeof *nv);
        if (!nv) return;
        if (l->n) memcpy(nv, l->v, l->n * sizeof *nv);
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++] = v;
}

ipl_jv_t *ipl_jdict_get(const ipl_jv_t *dict, const char *p, size_t n)
{
    const ipl_jdict_t *d = dict->u.d;
    if (!d) return NULL;
    for (size_t i = 0; i < d->n; i++) {
        const ipl_jv_t *k = &d->k[i];
        if (k->type == IPL_JV_STR && k->u.s.n == n && memcmp(k->u.s.p, p, n) == 0)
            return &d->v[i];
    }
    return NULL;
}

ipl_jv_t *ipl_jdict_find(const ipl_jv_t *dict, ipl_jv_t k)
{
    if (k.type == IPL_JV_STR) return ipl_jdict_get(dict, k.u.s.p, k.u.s.n);
    const ipl_jdict_t *d = dict->u.d;
    if (!d) return NULL;
    for (size_t i = 0; i < d->n; i++)
        if (ipl_jv_equal(d->k[i], k)) return &d->v[i];
    return NULL;
}

void ipl_jdict_set(ipl_jarena_t *a, ipl_jv_t *dict, ipl_jv_t k, ipl_jv_t v)
{
    ipl_jv_t *slot = ipl_jdict_find(dict, k);
    if (slot) {
        *slot = v;
        return;
    }
    ipl_jdict_t *d = dict->u.d;
    if (!d) return;
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 4;
        ipl_jv_t *nk = ipl_jarena_alloc(a, cap * sizeof *nk);
        ipl_jv_t *nv = ipl_jarena_alloc(a, cap * sizeof *nv);
        if (!nk || !nv) return;
        if (d->n) {
            memcpy(nk, d->k, d->n * sizeof *nk);
            memcpy(nv, d->v, d->n * sizeof *nv);
        }
        d->k = nk;
        d->v = nv;
        d->cap = cap;
    }
    d->k[d->n] = k;
    d->v[d->n] = v;
    d->n++;
}

static ipl_jv_t s_from_json(ipl_jarena_t *a, const cJSON *j, int depth)
{
    if (!j || depth > 512) return ipl_jv_none();
    if (cJSON_IsNull(j)) return ipl_jv_none();
    if (cJSON_IsTrue(j)) return ipl_jv_bool(true);
    if (cJSON_IsFalse(j)) return ipl_jv_bool(false);
    if (cJSON_IsNumber(j)) {
        double f = j->valuedouble;
        if (f == floor(f) && fabs(f) <= 9007199254740992.0) return ipl_jv_int((int64_t)f);
        return ipl_jv_float(f);
    }
    if (cJSON_IsString(j)) return ipl_jv_cstr(j->valuestring ? j->valuestring : "");
    if (cJSON_IsArray(j)) {
        ipl_jv_t l = ipl_jv_list(a, (size_t)cJSON_GetArraySize(j));
        for (const cJSON *c = j->child; c; c = c->next)
            ipl_jlist_push(a, &l, s_from_json(a, c, depth + 1));
        return l;
    }
    if (cJSON_IsObject(j)) {
        ipl_jv_t d = ipl_jv_dict(a, (size_t)cJSON_GetArraySize(j));
        /* json.loads keeps the last of duplicate keys, in the first one's position */
        for (const cJSON *c = j->child; c; c = c->next)
            ipl_jdict_set(a, &d, ipl_jv_cstr(c->string ? c->string : ""),
                          s_from_json(a, c, depth + 1));
        return d;
    }
    return ipl_jv_none();
}

ipl_jv_t ipl_jv_from_json(ipl_jarena_t *a, const cJSON *json)
{
    return s_from_json(a, json, 0);
}

/* ---- comparisons ------------------------------------------------------------------------ */

bool ipl_jv_truthy(ipl_jv_t v)
{
    switch (v.type) {
    case IPL_JV_BOOL:
        return v.u.b;
    case IPL_JV_INT:
        return v.u.i != 0;
    case IPL_JV_FLOAT:
        return v.u.f != 0.0;
    case IPL_JV_STR:
        return v.u.s.n > 0;
    case IPL_JV_LIST:
        return (v.flags & IPL_JV_F_GEN) || (v.u.l && v.u.l->n > 0);
    case IPL_JV_DICT:
        return v.u.d && v.u.d->n > 0;
    case IPL_JV_NS:
    case IPL_JV_CALL:
        return true;
    default:
        return false;
    }
}

static bool s_is_num(ipl_jv_t v)
{
    return v.type == IPL_JV_INT || v.type == IPL_JV_FLOAT || v.type == IPL_JV_BOOL;
}

static double s_num(ipl_jv_t v)
{
    return v.type == IPL_JV_FLOAT ? v.u.f : v.type == IPL_JV_INT ? (double)v.u.i : v.u.b;
}

static bool s_equal(ipl_jv_t a, ipl_jv_t b, int depth)
{
    if (depth > S_MAX_DEPTH) return false;
    if (s_is_num(a) && s_is_num(b)) {
        if (a.type != IPL_JV_FLOAT && b.type != IPL_JV_FLOAT)
            return (a.type == IPL_JV_INT ? a.u.i : a.u.b) == (b.type == IPL_JV_INT ? b.u.i : b.u.b);
        return s_num(a) == s_num(b);
    }
    if (a.type != b.type) return false;
    switch (a.type) {
    case IPL_JV_UNDEF:
    case IPL_JV_NONE:
        return true;
    case IPL_JV_STR:
        return a.u.s.n == b.u.s.n && memcmp(a.u.s.p, b.u.s.p, a.u.s.n) == 0;
    case IPL_JV_LIST: {
        if ((a.flags | b.flags) & IPL_JV_F_GEN) return a.u.l == b.u.l;
        /* a tuple never equals a list in Python */
        if ((a.flags & IPL_JV_F_TUPLE) != (b.flags & IPL_JV_F_TUPLE)) return false;
        size_t na = a.u.l ? a.u.l->n : 0, nb = b.u.l ? b.u.l->n : 0;
        if (na != nb) return false;
        for (size_t i = 0; i < na; i++)
            if (!s_equal(a.u.l->v[i], b.u.l->v[i], depth + 1)) return false;
        return true;
    }
    case IPL_JV_DICT: {
        size_t na = a.u.d ? a.u.d->n : 0, nb = b.u.d ? b.u.d->n : 0;
        if (na != nb) return false;
        for (size_t i = 0; i < na; i++) {
            ipl_jv_t *o = ipl_jdict_find(&b, a.u.d->k[i]);
            if (!o || !s_equal(a.u.d->v[i], *o, depth + 1)) return false;
        }
        return true;
    }
    case IPL_JV_NS:
        return a.u.d == b.u.d;
    case IPL_JV_CALL:
        return a.u.call == b.u.call && a.aux == b.aux;
    default:
        return false;
    }
}

bool ipl_jv_equal(ipl_jv_t a, ipl_jv_t b)
{
    return s_equal(a, b, 0);
}

static int s_less(ipl_jv_t a, ipl_jv_t b, bool *lt, int depth)
{
    if (depth > S_MAX_DEPTH) return -1;
    if (s_is_num(a) && s_is_num(b)) {
        if (a.type == IPL_JV_INT && b.type == IPL_JV_INT)
            *lt = a.u.i < b.u.i;
        else
            *lt = s_num(a) < s_num(b);
        return 0;
    }
    if (a.type == IPL_JV_STR && b.type == IPL_JV_STR) {
        /* UTF-8 byte order is code point order */
        size_t n = a.u.s.n < b.u.s.n ? a.u.s.n : b.u.s.n;
        int c = n ? memcmp(a.u.s.p, b.u.s.p, n) : 0;
        *lt = c < 0 || (c == 0 && a.u.s.n < b.u.s.n);
        return 0;
    }
    if (a.type == IPL_JV_LIST && b.type == IPL_JV_LIST && !((a.flags | b.flags) & IPL_JV_F_GEN) &&
        (a.flags & IPL_JV_F_TUPLE) == (b.flags & IPL_JV_F_TUPLE)) {
        size_t na = a.u.l ? a.u.l->n : 0, nb = b.u.l ? b.u.l->n : 0;
        for (size_t i = 0; i < na && i < nb; i++) {
            if (s_equal(a.u.l->v[i], b.u.l->v[i], depth + 1)) continue;
            return s_less(a.u.l->v[i], b.u.l->v[i], lt, depth + 1);
        }
        *lt = na < nb;
        return 0;
    }
    return -1;
}

int ipl_jv_less(ipl_jv_t a, ipl_jv_t b, bool *lt)
{
    return s_less(a, b, lt, 0);
}

const char *ipl_jv_type_name(ipl_jv_t v)
{
    switch (v.type) {
    case IPL_JV_UNDEF:
        return "Undefined";
    case IPL_JV_NONE:
        return "NoneType";
    case IPL_JV_BOOL:
        return "bool";
    case IPL_JV_INT:
        return "int";
    case IPL_JV_FLOAT:
        return "float";
    case IPL_JV_STR:
        return "str";
    case IPL_JV_LIST:
        return v.flags & IPL_JV_F_GEN ? "generator" : v.flags & IPL_JV_F_TUPLE ? "tuple" : "list";
    case IPL_JV_DICT:
        return "dict";
    case IPL_JV_NS:
        return "Namespace";
    default:
        return "function";
    }
}

/* ---- buffers ---------------------------------------------------------------------------- */

void ipl_jbuf_init(ipl_jbuf_t *b, ipl_jarena_t *a, size_t limit, void (*on_limit)(void *),
                   void *arg)
{
    memset(b, 0, sizeof *b);
    b->a = a;
    b->limit = limit;
    b->on_limit = on_limit;
    b->arg = arg;
}

void ipl_jbuf_put(ipl_jbuf_t *b, const char *p, size_t n)
{
    if (n == 0) return;
    if (b->limit && (n > b->limit || b->n > b->limit - n)) {
        if (b->on_limit) b->on_limit(b->arg);
        return;
    }
    if (b->cap - b->n < n) {
        size_t cap = b->cap ? b->cap * 2 : 64;
        while (cap - b->n < n) cap *= 2;
        char *np = ipl_jarena_alloc(b->a, cap);
        if (!np) return;
        if (b->n) memcpy(np, b->p, b->n);
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
}

void ipl_jbuf_puts(ipl_jbuf_t *b, const char *s)
{
    ipl_jbuf_put(b, s, strlen(s));
}

void ipl_jbuf_putc(ipl_jbuf_t *b, char c)
{
    ipl_jbuf_put(b, &c, 1);
}

void ipl_jbuf_printf(ipl_jbuf_t *b, const char *fmt, ...)
{
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n >= sizeof tmp) n = sizeof tmp - 1;
    ipl_jbuf_put(b, tmp, (size_t)n);
}

ipl_jv_t ipl_jbuf_value(ipl_jbuf_t *b)
{
    return ipl_jv_str(b->p ? b->p : "", b->n);
}

/* ---- str / repr ------------------------------------------------------------------------- */

void ipl_jv_write_float(ipl_jbuf_t *b, double f)
{
    if (isnan(f)) {
        ipl_jbuf_puts(b, "nan");
        return;
    }
    if (isinf(f)) {
        ipl_jbuf_puts(b, f < 0 ? "-inf" : "inf");
        return;
    }
    /* the shortest %e form that reads back as f: Python's repr digits */
    char e[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(e, sizeof e, "%.*e", prec - 1, f);
        if (strtod(e, NULL) == f) break;
    }
    const char *p = e;
    bool neg = *p == '-';
    if (neg) p++;
    char digits[24];
    size_t nd = 0;
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9' && nd < sizeof digits - 1) digits[nd++] = *p;
    int exp = *p == 'e' ? atoi(p + 1) : 0;
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    if (neg) ipl_jbuf_putc(b, '-');
    if (exp >= -4 && exp < 16) {
        if (exp >= 0) {
            for (int i = 0; i <= exp; i++) ipl_jbuf_putc(b, (size_t)i < nd ? digits[i] : '0');
            ipl_jbuf_putc(b, '.');
            if ((size_t)exp + 1 < nd)
                ipl_jbuf_put(b, digits + exp + 1, nd - (size_t)exp - 1);
            else
                ipl_jbuf_putc(b, '0');
        } else {
            ipl_jbuf_puts(b, "0.");
            for (int i = 0; i < -exp - 1; i++) ipl_jbuf_putc(b, '0');
            ipl_jbuf_put(b, digits, nd);
        }
    } else {
        ipl_jbuf_putc(b, digits[0]);
        if (nd > 1) {
            ipl_jbuf_putc(b, '.');
            ipl_jbuf_put(b, digits + 1, nd - 1);
        }
        ipl_jbuf_printf(b, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    }
}

/* Python's str.isprintable() for a non-ASCII code point, without the full category tables:
 * the separators (Zs, Zl, Zp), the C1 controls, the common format characters (Cf) and the
 * private-use and surrogate ranges are not printable; everything else is taken as printable
 * (unassigned code points, which Python escapes, are the known gap). */
static bool s_printable(uint32_t cp)
{
    if (cp < 0x20 || (cp >= 0x7f && cp <= 0xa0) || cp == 0xad) return false;
    if (cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200f) || (cp >= 0x2028 && cp <= 0x202f) ||
        (cp >= 0x205f && cp <= 0x206f) || cp == 0x3000 || cp == 0xfeff ||
        (cp >= 0xfff9 && cp <= 0xfffb) || (cp >= 0x600 && cp <= 0x605) || cp == 0x61c ||
        cp == 0x6dd || cp == 0x70f || cp == 0x180e || (cp >= 0xd800 && cp <= 0xf8ff) ||
        cp >= 0xf0000 || (cp >= 0xe0000 && cp <= 0xe007f))
        return false;
    return true;
}

static void s_repr_str(ipl_jbuf_t *b, const char *p, size_t n)
{
    bool sq = memchr(p, '\'', n) != NULL, dq = memchr(p, '"', n) != NULL;
    char q = sq && !dq ? '"' : '\'';
    ipl_jbuf_putc(b, q);
    size_t i = 0;
    while (i < n) {
        uint32_t cp;
        size_t len = ipl_utf8_next((const unsigned char *)p + i, n - i, &cp);
        if (cp == IPL_UNICODE_INVALID) {
            ipl_jbuf_printf(b, "\\x%02x", (unsigned char)p[i]);
        } else if (cp == (uint32_t)q || cp == '\\') {
            ipl_jbuf_putc(b, '\\');
            ipl_jbuf_putc(b, (char)cp);
        } else if (cp == '\n') {
            ipl_jbuf_puts(b, "\\n");
        } else if (cp == '\r') {
            ipl_jbuf_puts(b, "\\r");
        } else if (cp == '\t') {
            ipl_jbuf_puts(b, "\\t");
        } else if (cp < 0x80 ? (cp < 0x20 || cp == 0x7f) : !s_printable(cp)) {
            if (cp <= 0xff)
                ipl_jbuf_printf(b, "\\x%02x", cp);
            else if (cp <= 0xffff)
                ipl_jbuf_printf(b, "\\u%04x", cp);
            else
                ipl_jbuf_printf(b, "\\U%08x", cp);
        } else {
            ipl_jbuf_put(b, p + i, len);
        }
        i += len;
    }
    ipl_jbuf_putc(b, q);
}

static int s_write(ipl_jbuf_t *b, ipl_jv_t v, bool repr, int depth)
{
    if (depth > S_MAX_DEPTH) return -1;
    switch (v.type) {
    case IPL_JV_UNDEF:
        if (repr) ipl_jbuf_puts(b, "Undefined"); /* repr(jinja2.Undefined()) */
        return 0;
    case IPL_JV_NONE:
        ipl_jbuf_puts(b, "None");
        return 0;
    case IPL_JV_BOOL:
        ipl_jbuf_puts(b, v.u.b ? "True" : "False");
        return 0;
    case IPL_JV_INT:
        ipl_jbuf_printf(b, "%lld", (long long)v.u.i);
        return 0;
    case IPL_JV_FLOAT:
        ipl_jv_write_float(b, v.u.f);
        return 0;
    case IPL_JV_STR:
        if (repr)
            s_repr_str(b, v.u.s.p, v.u.s.n);
        else
            ipl_jbuf_put(b, v.u.s.p, v.u.s.n);
        return 0;
    case IPL_JV_LIST: {
        if (v.flags & IPL_JV_F_GEN) return -1; /* "<generator object ...>": no stable text */
        bool tuple = v.flags & IPL_JV_F_TUPLE;
        size_t n = v.u.l ? v.u.l->n : 0;
        ipl_jbuf_putc(b, tuple ? '(' : '[');
        for (size_t i = 0; i < n; i++) {
            if (i) ipl_jbuf_puts(b, ", ");
            if (s_write(b, v.u.l->v[i], true, depth + 1) < 0) return -1;
        }
        if (tuple && n == 1) ipl_jbuf_putc(b, ',');
        ipl_jbuf_putc(b, tuple ? ')' : ']');
        return 0;
    }
    case IPL_JV_DICT:
    case IPL_JV_NS: {
        if (v.type == IPL_JV_NS) ipl_jbuf_puts(b, "<Namespace ");
        ipl_jbuf_putc(b, '{');
        size_t n = v.u.d ? v.u.d->n : 0;
        for (size_t i = 0; i < n; i++) {
            if (i) ipl_jbuf_puts(b, ", ");
            if (s_write(b, v.u.d->k[i], true, depth + 1) < 0) return -1;
            ipl_jbuf_puts(b, ": ");
            if (s_write(b, v.u.d->v[i], true, depth + 1) < 0) return -1;
        }
        ipl_jbuf_putc(b, '}');
        if (v.type == IPL_JV_NS) ipl_jbuf_putc(b, '>');
        return 0;
    }
    default:
        return -1;
    }
}

int ipl_jv_write_str(ipl_jbuf_t *b, ipl_jv_t v)
{
    return s_write(b, v, false, 0);
}

int ipl_jv_write_repr(ipl_jbuf_t *b, ipl_jv_t v)
{
    return s_write(b, v, true, 0);
}

/* ---- JSON ------------------------------------------------------------------------------- */

static void s_json_str(ipl_jbuf_t *b, const char *p, size_t n, bool ascii)
{
    ipl_jbuf_putc(b, '"');
    size_t i = 0, run = 0; /* run: start of the pending verbatim bytes */
    while (i < n) {
        unsigned char c = (unsigned char)p[i];
        const char *esc = NULL;
        char tmp[16];
        size_t len = 1;
        if (c == '"')
            esc = "\\\"";
        else if (c == '\\')
            esc = "\\\\";
        else if (c == '\n')
            esc = "\\n";
        else if (c == '\r')
            esc = "\\r";
        else if (c == '\t')
            esc = "\\t";
        else if (c == '\b')
            esc = "\\b";
        else if (c == '\f')
            esc = "\\f";
        else if (c < 0x20 || (ascii && c == 0x7f)) {
            snprintf(tmp, sizeof tmp, "\\u%04x", c);
            esc = tmp;
        } else if (ascii && c >= 0x80) {
            uint32_t cp;
            len = ipl_utf8_next((const unsigned char *)p + i, n - i, &cp);
            if (cp == IPL_UNICODE_INVALID) cp = 0xfffd; /* Python strings hold no bad bytes */
            if (cp >= 0x10000) {
                cp -= 0x10000;
                snprintf(tmp, sizeof tmp, "\\u%04x\\u%04x", 0xd800 + (cp >> 10),
                         0xdc00 + (cp & 0x3ff));
            } else {
                snprintf(tmp, sizeof tmp, "\\u%04x", cp);
            }
            esc = tmp;
        }
        if (esc) {
            ipl_jbuf_put(b, p + run, i - run);
            ipl_jbuf_puts(b, esc);
            i += len;
            run = i;
        } else {
            i++;
        }
    }
    ipl_jbuf_put(b, p + run, i - run);
    ipl_jbuf_putc(b, '"');
}

static void s_json_indent(ipl_jbuf_t *b, const ipl_jjson_opts_t *o, int level)
{
    ipl_jbuf_putc(b, '\n');
    for (int i = 0; i < level * o->indent; i++) ipl_jbuf_putc(b, ' ');
}

/* A dict key as json.dumps writes it: str as is; int, float, bool, None converted. */
static int s_json_key(ipl_jbuf_t *b, ipl_jv_t k, bool ascii)
{
    switch (k.type) {
    case IPL_JV_STR:
        s_json_str(b, k.u.s.p, k.u.s.n, ascii);
        return 0;
    case IPL_JV_INT:
        ipl_jbuf_printf(b, "\"%lld\"", (long long)k.u.i);
        return 0;
    case IPL_JV_BOOL:
        ipl_jbuf_puts(b, k.u.b ? "\"true\"" : "\"false\"");
        return 0;
    case IPL_JV_NONE:
        ipl_jbuf_puts(b, "\"null\"");
        return 0;
    case IPL_JV_FLOAT:
        ipl_jbuf_putc(b, '"');
        ipl_jv_write_float(b, k.u.f);
        ipl_jbuf_putc(b, '"');
        return 0;
    default:
        return -1;
    }
}

static int s_key_cmp(const void *x, const void *y)
{
    const ipl_jv_t *a = *(const ipl_jv_t *const *)x, *b = *(const ipl_jv_t *const *)y;
    bool lt = false;
    if (ipl_jv_less(*a, *b, &lt) == 0 && lt) return -1;
    if (ipl_jv_less(*b, *a, &lt) == 0 && lt) return 1;
    return 0;
}

static int s_json(ipl_jbuf_t *b, ipl_jv_t v, const ipl_jjson_opts_t *o, int level)
{
    if (level > S_MAX_DEPTH) return -1;
    const char *isep = o->item_sep ? o->item_sep : o->indent >= 0 ? "," : ", ";
    size_t isep_n = o->item_sep ? o->item_sep_n : strlen(isep);
    const char *ksep = o->key_sep ? o->key_sep : ": ";
    size_t ksep_n = o->key_sep ? o->key_sep_n : 2;
    switch (v.type) {
    case IPL_JV_NONE:
        ipl_jbuf_puts(b, "null");
        return 0;
    case IPL_JV_BOOL:
        ipl_jbuf_puts(b, v.u.b ? "true" : "false");
        return 0;
    case IPL_JV_INT:
        ipl_jbuf_printf(b, "%lld", (long long)v.u.i);
        return 0;
    case IPL_JV_FLOAT:
        if (isnan(v.u.f))
            ipl_jbuf_puts(b, "NaN");
        else if (isinf(v.u.f))
            ipl_jbuf_puts(b, v.u.f < 0 ? "-Infinity" : "Infinity");
        else
            ipl_jv_write_float(b, v.u.f);
        return 0;
    case IPL_JV_STR:
        s_json_str(b, v.u.s.p, v.u.s.n, o->ensure_ascii);
        return 0;
    case IPL_JV_LIST: {
        if (v.flags & IPL_JV_F_GEN) return -1;
        size_t n = v.u.l ? v.u.l->n : 0;
        ipl_jbuf_putc(b, '[');
        for (size_t i = 0; i < n; i++) {
            if (i) ipl_jbuf_put(b, isep, isep_n);
            if (o->indent >= 0) s_json_indent(b, o, level + 1);
            if (s_json(b, v.u.l->v[i], o, level + 1) < 0) return -1;
        }
        if (n && o->indent >= 0) s_json_indent(b, o, level);
        ipl_jbuf_putc(b, ']');
        return 0;
    }
    case IPL_JV_DICT: {
        size_t n = v.u.d ? v.u.d->n : 0;
        /* the entry order: insertion, or sorted keys (pointers into the dict) */
        const ipl_jv_t **order = NULL;
        if (o->sort_keys && n > 1) {
            order = ipl_jarena_alloc(b->a, n * sizeof *order);
            if (!order) return -1;
            for (size_t i = 0; i < n; i++) order[i] = &v.u.d->k[i];
            qsort(order, n, sizeof *order, s_key_cmp);
        }
        ipl_jbuf_putc(b, '{');
        for (size_t i = 0; i < n; i++) {
            size_t at = order ? (size_t)(order[i] - v.u.d->k) : i;
            if (i) ipl_jbuf_put(b, isep, isep_n);
            if (o->indent >= 0) s_json_indent(b, o, level + 1);
            if (s_json_key(b, v.u.d->k[at], o->ensure_ascii) < 0) return -1;
            ipl_jbuf_put(b, ksep, ksep_n);
            if (s_json(b, v.u.d->v[at], o, level + 1) < 0) return -1;
        }
        if (n && o->indent >= 0) s_json_indent(b, o, level);
        ipl_jbuf_putc(b, '}');
        return 0;
    }
    default:
        return -1;
    }
}

int ipl_jv_write_json(ipl_jbuf_t *b, ipl_jv_t v, const ipl_jjson_opts_t *opts)
{
    return s_json(b, v, opts, 0);
}

/* ---- UTF-8 ------------------------------------------------------------------------------ */

bool ipl_jv_is_space(uint32_t cp)
{
    return (cp >= 0x1c && cp <= 0x1f) || ipl_unicode_is_space(cp);
}

size_t ipl_jv_strlen(const char *p, size_t n)
{
    size_t count = 0, i = 0;
    while (i < n) {
        if ((unsigned char)p[i] < 0x80) {
            i++;
        } else {
            uint32_t cp;
            i += ipl_utf8_next((const unsigned char *)p + i, n - i, &cp);
        }
        count++;
    }
    return count;
}

size_t ipl_jv_offset(const char *p, size_t n, size_t i)
{
    size_t off = 0, count = 0;
    while (off < n) {
        if (count == i) return off;
        uint32_t cp;
        off += ipl_utf8_next((const unsigned char *)p + off, n - off, &cp);
        count++;
    }
    return n;
}
