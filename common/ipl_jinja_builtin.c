/*
 * ipl_jinja_builtin — filters, tests, methods and globals (see ipl_jinja_builtin.h).
 *
 * Each function follows the Jinja2 3.1 / CPython definition of the same name; comments note
 * where that definition has a quirk worth keeping (it changes the rendered prompt).
 */
#include "ipl_jinja_builtin.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ipl_jinja_str.h"
#include "ipl_unicode.h"

/* ---- name tables (the enums follow the tables' order) ----------------------------------- */

static const char *const s_filters[] = {
    "abs",     "attr",  "capitalize", "count",   "d",       "default",    "dictsort",
    "e",       "escape", "first",     "float",   "format",  "indent",     "int",
    "items",   "join",  "last",       "length",  "list",    "lower",      "map",
    "max",     "min",   "reject",     "rejectattr", "replace", "reverse", "round",
    "safe",    "select", "selectattr", "sort",   "string",  "sum",        "title",
    "tojson",  "trim",  "unique",     "upper",   "wordcount"};
enum {
    F_ABS, F_ATTR, F_CAPITALIZE, F_COUNT, F_D, F_DEFAULT, F_DICTSORT, F_E, F_ESCAPE, F_FIRST,
    F_FLOAT, F_FORMAT, F_INDENT, F_INT, F_ITEMS, F_JOIN, F_LAST, F_LENGTH, F_LIST, F_LOWER,
    F_MAP, F_MAX, F_MIN, F_REJECT, F_REJECTATTR, F_REPLACE, F_REVERSE, F_ROUND, F_SAFE,
    F_SELECT, F_SELECTATTR, F_SORT, F_STRING, F_SUM, F_TITLE, F_TOJSON, F_TRIM, F_UNIQUE,
    F_UPPER, F_WORDCOUNT, F_COUNT_
};

static const char *const s_tests[] = {
    "boolean", "callable", "defined", "divisibleby", "eq", "equalto", "escaped", "even",
    "false",   "float",    "ge",      "gt",          "in", "integer", "iterable", "le",
    "lower",   "lt",       "mapping", "ne",          "none", "number", "odd",    "sameas",
    "sequence", "string",  "true",    "undefined",   "upper", "==",   "!=",     "<",
    "<=",      ">",        ">=",      "greaterthan", "lessthan"};
enum {
    T_BOOLEAN, T_CALLABLE, T_DEFINED, T_DIVISIBLEBY, T_EQ, T_EQUALTO, T_ESCAPED, T_EVEN,
    T_FALSE, T_FLOAT, T_GE, T_GT, T_IN, T_INTEGER, T_ITERABLE, T_LE, T_LOWER, T_LT, T_MAPPING,
    T_NE, T_NONE, T_NUMBER, T_ODD, T_SAMEAS, T_SEQUENCE, T_STRING, T_TRUE, T_UNDEFINED,
    T_UPPER, T_SYM_EQ, T_SYM_NE, T_SYM_LT, T_SYM_LE, T_SYM_GT, T_SYM_GE, T_GREATERTHAN,
    T_LESSTHAN, T_COUNT_
};

static const char *const s_methods[] = {
    "capitalize", "count",  "endswith", "find",   "format",     "index",     "isalnum",
    "isalpha",    "isdigit", "islower", "isspace", "isupper",   "join",      "lower",
    "lstrip",     "replace", "rfind",   "rsplit", "rstrip",     "split",     "splitlines",
    "startswith", "strip",  "title",    "upper",  "get",        "items",     "keys",
    "values"};
enum {
    M_CAPITALIZE, M_COUNT, M_ENDSWITH, M_FIND, M_FORMAT, M_INDEX, M_ISALNUM, M_ISALPHA,
    M_ISDIGIT, M_ISLOWER, M_ISSPACE, M_ISUPPER, M_JOIN, M_LOWER, M_LSTRIP, M_REPLACE, M_RFIND,
    M_RSPLIT, M_RSTRIP, M_SPLIT, M_SPLITLINES, M_STARTSWITH, M_STRIP, M_TITLE, M_UPPER, M_GET,
    M_ITEMS, M_KEYS, M_VALUES, M_COUNT_
};

static const char *const s_globals[] = {"dict", "namespace", "range", "raise_exception",
                                        "strftime_now"};
enum { G_DICT, G_NAMESPACE, G_RANGE, G_RAISE, G_STRFTIME, G_COUNT_ };

/* What Python's getattr finds on each type (all methods, supported or not). */
static const char *const s_str_attrs[] = {
    "capitalize", "casefold", "center", "count", "encode", "endswith", "expandtabs", "find",
    "format", "format_map", "index", "isalnum", "isalpha", "isascii", "isdecimal", "isdigit",
    "isidentifier", "islower", "isnumeric", "isprintable", "isspace", "istitle", "isupper",
    "join", "ljust", "lower", "lstrip", "maketrans", "partition", "removeprefix",
    "removesuffix", "replace", "rfind", "rindex", "rjust", "rpartition", "rsplit", "rstrip",
    "split", "splitlines", "startswith", "strip", "swapcase", "title", "translate", "upper",
    "zfill", NULL};
static const char *const s_dict_attrs[] = {"clear", "copy", "fromkeys", "get", "items", "keys",
                                           "pop", "popitem", "setdefault", "update", "values",
                                           NULL};
static const char *const s_list_attrs[] = {"append", "clear", "copy", "count", "extend",
                                           "index", "insert", "pop", "remove", "reverse",
                                           "sort", NULL};

#define S_LEN(a) (sizeof(a) / sizeof *(a))

static int s_find(const char *const *table, size_t count, const char *name, size_t n)
{
    for (size_t i = 0; i < count && table[i]; i++)
        if (strlen(table[i]) == n && memcmp(table[i], name, n) == 0) return (int)i;
    return -1;
}

int ipl_jbuiltin_filter_id(const char *name, size_t n)
{
    return s_find(s_filters, S_LEN(s_filters), name, n);
}

int ipl_jbuiltin_test_id(const char *name, size_t n)
{
    return s_find(s_tests, S_LEN(s_tests), name, n);
}

int ipl_jbuiltin_method_id(const char *name, size_t n)
{
    return s_find(s_methods, S_LEN(s_methods), name, n);
}

int ipl_jbuiltin_global_id(const char *name, size_t n)
{
    return s_find(s_globals, S_LEN(s_globals), name, n);
}

const char *ipl_jbuiltin_filter_name(int id)
{
    return id >= 0 && id < F_COUNT_ ? s_filters[id] : "?";
}

const char *ipl_jbuiltin_method_name(int id)
{
    return id >= 0 && id < M_COUNT_ ? s_methods[id] : "?";
}

bool ipl_jbuiltin_is_method_of(ipl_jv_t self, const char *name, size_t n)
{
    const char *const *t = self.type == IPL_JV_STR    ? s_str_attrs
                           : self.type == IPL_JV_DICT ? s_dict_attrs
                           : self.type == IPL_JV_LIST ? s_list_attrs
                                                      : NULL;
    return t && s_find(t, SIZE_MAX, name, n) >= 0;
}

/* ---- helpers ---------------------------------------------------------------------------- */

#define S_FAIL(env, ...) ((env)->fail((env), __VA_ARGS__), ipl_jv_undef())

/* Argument `pos` (positional) or keyword `name`; NULL when absent. */
static const ipl_jv_t *s_arg(const ipl_jargs_t *a, size_t pos, const char *name)
{
    if (pos < a->n) return &a->v[pos];
    if (name) {
        size_t n = strlen(name);
        for (size_t i = 0; i < a->nkw; i++)
            if (a->kw[i].len == n && memcmp(a->kw[i].name, name, n) == 0) return &a->kw[i].v;
    }
    return NULL;
}

/* Refuses more than max positional arguments and keywords not in the NULL-ended list. */
static void s_check(ipl_jenv_t *env, const ipl_jargs_t *a, size_t max, const char *const *kw,
                    const char *what)
{
    if (a->n > max) env->fail(env, "%s takes at most %zu argument(s), got %zu", what, max, a->n);
    for (size_t i = 0; i < a->nkw; i++) {
        bool ok = false;
        for (const char *const *k = kw; k && *k && !ok; k++)
            ok = strlen(*k) == a->kw[i].len && memcmp(*k, a->kw[i].name, a->kw[i].len) == 0;
        if (!ok)
            env->fail(env, "%s got an unexpected keyword argument '%.*s'", what,
                      (int)a->kw[i].len, a->kw[i].name);
    }
}

static bool s_bool_arg(const ipl_jv_t *v, bool dflt)
{
    return v ? ipl_jv_truthy(*v) : dflt;
}

static int64_t s_int_arg(ipl_jenv_t *env, const ipl_jv_t *v, int64_t dflt, const char *what)
{
    if (!v || v->type == IPL_JV_NONE) return dflt;
    if (v->type == IPL_JV_BOOL) return v->u.b;
    if (v->type != IPL_JV_INT) env->fail(env, "%s must be an integer, not %s", what, ipl_jv_type_name(*v));
    return v->u.i;
}

static ipl_jv_t s_str_arg(ipl_jenv_t *env, const ipl_jv_t *v, const char *what)
{
    if (!v || v->type != IPL_JV_STR)
        env->fail(env, "%s must be a string, not %s", what, v ? ipl_jv_type_name(*v) : "nothing");
    return *v;
}

ipl_jv_t ipl_jbuiltin_to_str(ipl_jenv_t *env, ipl_jv_t v)
{
    if (v.type == IPL_JV_STR) return v;
    ipl_jbuf_t b;
    ipl_jbuf_init(&b, env->a, 0, NULL, NULL);
    if (ipl_jv_write_str(&b, v) < 0) env->fail(env, "cannot convert a %s to a string", ipl_jv_type_name(v));
    return ipl_jbuf_value(&b);
}

static ipl_jv_t s_case(ipl_jenv_t *env, ipl_jv_t s, ipl_jcase_t mode)
{
    ipl_jv_t out;
    uint32_t bad = 0;
    if (ipl_jstr_case(env->a, ipl_jbuiltin_to_str(env, s), mode, &out, &bad) < 0)
        env->fail(env, "case mapping of U+%04X is not supported (only ASCII, Latin, Greek and "
                       "Cyrillic letters are)", bad);
    return out;
}

/* Python len(). */
static int64_t s_len(ipl_jenv_t *env, ipl_jv_t v)
{
    switch (v.type) {
    case IPL_JV_STR: return (int64_t)ipl_jv_strlen(v.u.s.p, v.u.s.n);
    case IPL_JV_LIST:
        if (v.flags & IPL_JV_F_GEN) env->fail(env, "object of type 'generator' has no len()");
        return (int64_t)v.u.l->n;
    case IPL_JV_DICT: return (int64_t)v.u.d->n;
    case IPL_JV_UNDEF: return 0;
    default: env->fail(env, "object of type '%s' has no len()", ipl_jv_type_name(v));
    }
    return 0;
}

/* The items of an iterable as a list: list, string characters, dict keys, nothing. */
static ipl_jv_t s_items_of(ipl_jenv_t *env, ipl_jv_t v)
{
    switch (v.type) {
    case IPL_JV_LIST:
        return v;
    case IPL_JV_UNDEF:
        return ipl_jv_list(env->a, 0);
    case IPL_JV_DICT: {
        ipl_jv_t l = ipl_jv_list(env->a, v.u.d->n);
        for (size_t i = 0; i < v.u.d->n; i++) ipl_jlist_push(env->a, &l, v.u.d->k[i]);
        return l;
    }
    case IPL_JV_STR: {
        ipl_jv_t l = ipl_jv_list(env->a, 0);
        size_t off = 0;
        while (off < v.u.s.n) {
            size_t k = ipl_jv_offset(v.u.s.p + off, v.u.s.n - off, 1);
            ipl_jlist_push(env->a, &l, ipl_jv_str(v.u.s.p + off, k));
            off += k;
        }
        return l;
    }
    default:
        return S_FAIL(env, "'%s' object is not iterable", ipl_jv_type_name(v));
    }
}

/* Jinja2's environment.getattr / getitem for attribute paths "a.b.0" (make_attrgetter). */
static ipl_jv_t s_attr_path(ipl_jenv_t *env, ipl_jv_t item, ipl_jv_t path)
{
    const char *p = path.u.s.p, *end = p + path.u.s.n;
    for (;;) {
        /* an attribute of an undefined value raises, as everywhere in Jinja2 */
        if (item.type == IPL_JV_UNDEF)
            env->fail(env, "'%.*s': an attribute of an undefined value", (int)path.u.s.n, path.u.s.p);
        const char *dot = memchr(p, '.', (size_t)(end - p));
        size_t n = (size_t)((dot ? dot : end) - p);
        bool digits = n > 0;
        for (size_t i = 0; i < n; i++) digits = digits && p[i] >= '0' && p[i] <= '9';
        ipl_jv_t *v = NULL;
        if (item.type == IPL_JV_DICT || item.type == IPL_JV_NS) {
            v = ipl_jdict_get(&item, p, n);
            if (!v && digits) v = ipl_jdict_find(&item, ipl_jv_int(strtoll(p, NULL, 10)));
        } else if (item.type == IPL_JV_LIST && digits) {
            long long i = strtoll(p, NULL, 10);
            if (i >= 0 && (size_t)i < item.u.l->n) v = &item.u.l->v[i];
        }
        item = v ? *v : ipl_jv_undef();
        if (!dot) break;
        p = dot + 1;
    }
    return item;
}

/* A key for case-insensitive comparisons: strings lower-cased (Jinja2's ignore_case). */
static ipl_jv_t s_sort_key(ipl_jenv_t *env, ipl_jv_t v, bool case_sensitive)
{
    if (!case_sensitive && v.type == IPL_JV_STR) return s_case(env, v, IPL_JCASE_LOWER);
    return v;
}

static bool s_less(ipl_jenv_t *env, ipl_jv_t a, ipl_jv_t b)
{
    bool lt;
    if (ipl_jv_less(a, b, &lt) < 0)
        env->fail(env, "'<' not supported between instances of '%s' and '%s'",
                  ipl_jv_type_name(a), ipl_jv_type_name(b));
    return lt;
}

/* Stable merge sort of items by keys (both arrays permuted together). */
static void s_msort(ipl_jenv_t *env, ipl_jv_t *items, ipl_jv_t *keys, size_t n, bool reverse,
                    ipl_jv_t *ti, ipl_jv_t *tk)
{
    if (n < 2) return;
    size_t h = n / 2;
    s_msort(env, items, keys, h, reverse, ti, tk);
    s_msort(env, items + h, keys + h, n - h, reverse, ti, tk);
    size_t i = 0, j = h, o = 0;
    while (i < h && j < n) {
        /* reverse keeps stability: take the right one only when strictly greater */
        bool right = reverse ? s_less(env, keys[i], keys[j]) : s_less(env, keys[j], keys[i]);
        size_t from = right ? j++ : i++;
        ti[o] = items[from];
        tk[o++] = keys[from];
    }
    while (i < h) {
        ti[o] = items[i];
        tk[o++] = keys[i++];
    }
    while (j < n) {
        ti[o] = items[j];
        tk[o++] = keys[j++];
    }
    memcpy(items, ti, n * sizeof *items);
    memcpy(keys, tk, n * sizeof *keys);
}

static ipl_jv_t s_sorted(ipl_jenv_t *env, ipl_jv_t list, ipl_jv_t *keys, bool reverse)
{
    size_t n = list.u.l->n;
    ipl_jv_t out = ipl_jv_list(env->a, n);
    for (size_t i = 0; i < n; i++) ipl_jlist_push(env->a, &out, list.u.l->v[i]);
    if (n > 1) {
        ipl_jv_t *ti = ipl_jarena_alloc(env->a, n * sizeof *ti);
        ipl_jv_t *tk = ipl_jarena_alloc(env->a, n * sizeof *tk);
        s_msort(env, out.u.l->v, keys, n, reverse, ti, tk);
    }
    return out;
}

static ipl_jv_t s_tuple2(ipl_jenv_t *env, ipl_jv_t a, ipl_jv_t b)
{
    ipl_jv_t t = ipl_jv_list(env->a, 2);
    ipl_jlist_push(env->a, &t, a);
    ipl_jlist_push(env->a, &t, b);
    t.flags |= IPL_JV_F_TUPLE;
    return t;
}

static ipl_jv_t s_dict_items(ipl_jenv_t *env, ipl_jv_t d)
{
    ipl_jv_t l = ipl_jv_list(env->a, d.u.d->n);
    for (size_t i = 0; i < d.u.d->n; i++)
        ipl_jlist_push(env->a, &l, s_tuple2(env, d.u.d->k[i], d.u.d->v[i]));
    return l;
}

/* ---- tojson ----------------------------------------------------------------------------- */

/* transformers' tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
 * json.dumps with these arguments, no HTML escaping (unlike Jinja2's own tojson). */
static ipl_jv_t s_tojson(ipl_jenv_t *env, ipl_jv_t v, const ipl_jargs_t *a)
{
    static const char *const kw[] = {"ensure_ascii", "indent", "separators", "sort_keys", NULL};
    s_check(env, a, 4, kw, "tojson");
    ipl_jjson_opts_t o = {.indent = -1};
    o.ensure_ascii = s_bool_arg(s_arg(a, 0, "ensure_ascii"), false);
    const ipl_jv_t *indent = s_arg(a, 1, "indent");
    if (indent && indent->type != IPL_JV_NONE) {
        if (indent->type != IPL_JV_INT) env->fail(env, "tojson: indent must be an integer");
        o.indent = indent->u.i < 0 ? 0 : indent->u.i > 64 ? 64 : (int)indent->u.i;
    }
    const ipl_jv_t *sep = s_arg(a, 2, "separators");
    if (sep && sep->type != IPL_JV_NONE) {
        if (sep->type != IPL_JV_LIST || sep->u.l->n != 2 || sep->u.l->v[0].type != IPL_JV_STR ||
            sep->u.l->v[1].type != IPL_JV_STR)
            env->fail(env, "tojson: separators must be a pair of strings");
        o.item_sep = sep->u.l->v[0].u.s.p;
        o.item_sep_n = sep->u.l->v[0].u.s.n;
        o.key_sep = sep->u.l->v[1].u.s.p;
        o.key_sep_n = sep->u.l->v[1].u.s.n;
    }
    o.sort_keys = s_bool_arg(s_arg(a, 3, "sort_keys"), false);
    ipl_jbuf_t b;
    ipl_jbuf_init(&b, env->a, 0, NULL, NULL);
    if (ipl_jv_write_json(&b, v, &o) < 0)
        env->fail(env, "tojson: object of type %s (or inside it) is not JSON serializable",
                  ipl_jv_type_name(v));
    return ipl_jbuf_value(&b);
}

/* ---- filters ---------------------------------------------------------------------------- */

static bool s_call_test_by_name(ipl_jenv_t *env, ipl_jv_t name, ipl_jv_t item,
                                const ipl_jargs_t *a, size_t from)
{
    int id = ipl_jbuiltin_test_id(name.u.s.p, name.u.s.n);
    if (id < 0) env->fail(env, "no test named '%.*s'", (int)name.u.s.n, name.u.s.p);
    ipl_jargs_t rest = {.n = a->n > from ? a->n - from : 0, .v = a->v + (a->n > from ? from : a->n),
                        .nkw = a->nkw, .kw = a->kw};
    return ipl_jbuiltin_test(env, id, item, &rest);
}

/* select / reject / selectattr / rejectattr. */
static ipl_jv_t s_select(ipl_jenv_t *env, ipl_jv_t seq, const ipl_jargs_t *a, bool attr, bool keep)
{
    /* Jinja2's select_or_reject starts with `if value:`: None, "" and [] give nothing */
    ipl_jv_t items = ipl_jv_truthy(seq) ? s_items_of(env, seq) : ipl_jv_list(env->a, 0);
    ipl_jv_t out = ipl_jv_list(env->a, 0);
    out.flags |= IPL_JV_F_GEN;
    size_t test_at = attr ? 1 : 0;
    ipl_jv_t path = ipl_jv_undef();
    if (attr) path = s_str_arg(env, s_arg(a, 0, NULL), "selectattr: the attribute");
    const ipl_jv_t *test = s_arg(a, test_at, NULL);
    if (test) s_str_arg(env, test, "the test name");
    for (size_t i = 0; i < items.u.l->n; i++) {
        ipl_jv_t it = items.u.l->v[i];
        ipl_jv_t x = attr ? s_attr_path(env, it, path) : it;
        bool r = test ? s_call_test_by_name(env, *test, x, a, test_at + 1) : ipl_jv_truthy(x);
        if (r == keep) ipl_jlist_push(env->a, &out, it);
    }
    return out;
}

static ipl_jv_t s_map(ipl_jenv_t *env, ipl_jv_t seq, const ipl_jargs_t *a)
{
    /* do_map also starts with `if value:` */
    ipl_jv_t items = ipl_jv_truthy(seq) ? s_items_of(env, seq) : ipl_jv_list(env->a, 0);
    ipl_jv_t out = ipl_jv_list(env->a, items.u.l->n);
    out.flags |= IPL_JV_F_GEN;
    const ipl_jv_t *attribute = s_arg(a, SIZE_MAX, "attribute");
    if (attribute) {
        ipl_jv_t path = ipl_jbuiltin_to_str(env, *attribute);
        const ipl_jv_t *dflt = s_arg(a, SIZE_MAX, "default");
        for (size_t i = 0; i < items.u.l->n; i++) {
            ipl_jv_t v = s_attr_path(env, items.u.l->v[i], path);
            ipl_jlist_push(env->a, &out, v.type == IPL_JV_UNDEF && dflt ? *dflt : v);
        }
        return out;
    }
    ipl_jv_t name = s_str_arg(env, s_arg(a, 0, NULL), "map: the filter name");
    int id = ipl_jbuiltin_filter_id(name.u.s.p, name.u.s.n);
    if (id < 0) env->fail(env, "map: no filter named '%.*s'", (int)name.u.s.n, name.u.s.p);
    ipl_jargs_t rest = {.n = a->n - 1, .v = a->v + 1, .nkw = a->nkw, .kw = a->kw};
    for (size_t i = 0; i < items.u.l->n; i++)
        ipl_jlist_push(env->a, &out, ipl_jbuiltin_filter(env, id, items.u.l->v[i], &rest));
    return out;
}

static ipl_jv_t s_join(ipl_jenv_t *env, ipl_jv_t seq, const ipl_jargs_t *a)
{
    static const char *const kw[] = {"d", "attribute", NULL};
    s_check(env, a, 2, kw, "join");
    const ipl_jv_t *d = s_arg(a, 0, "d"), *attribute = s_arg(a, 1, "attribute");
    ipl_jv_t sep = d ? ipl_jbuiltin_to_str(env, *d) : ipl_jv_str("", 0);
    ipl_jv_t items = s_items_of(env, seq);
    ipl_jbuf_t b;
    ipl_jbuf_init(&b, env->a, 0, NULL, NULL);
    for (size_t i = 0; i < items.u.l->n; i++) {
        ipl_jv_t it = items.u.l->v[i];
        if (attribute && attribute->type != IPL_JV_NONE)
            it = s_attr_path(env, it, ipl_jbuiltin_to_str(env, *attribute));
        if (i) ipl_jbuf_put(&b, sep.u.s.p, sep.u.s.n);
        if (ipl_jv_write_str(&b, it) < 0) env->fail(env, "join: cannot convert a %s to a string", ipl_jv_type_name(it));
    }
    return ipl_jbuf_value(&b);
}

/* Jinja2's do_indent (with its quirk: the text gets a "\n" before splitlines). */
static ipl_jv_t s_indent(ipl_jenv_t *env, ipl_jv_t s, const ipl_jargs_t *a)
{
    static const char *const kw[] = {"width", "first", "blank", NULL};
    s_check(env, a, 3, kw, "indent");
    const ipl_jv_t *w = s_arg(a, 0, "width");
    ipl_jv_t ind;
    if (w && w->type == IPL_JV_STR) {
        ind = *w;
    } else {
        int64_t n = s_int_arg(env, w, 4, "indent: width");
        if (n < 0) n = 0;
        if (n > 256) env->fail(env, "indent: width %lld is too large", (long long)n);
        char *sp = ipl_jarena_alloc(env->a, (size_t)n + 1);
        memset(sp, ' ', (size_t)n);
        ind = ipl_jv_str(sp, (size_t)n);
    }
    bool first = s_bool_arg(s_arg(a, 1, "first"), false), blank = s_bool_arg(s_arg(a, 2, "blank"), false);
    if (s.type != IPL_JV_STR) env->fail(env, "indent: a string is needed, not %s", ipl_jv_type_name(s));
    ipl_jbuf_t t;
    ipl_jbuf_init(&t, env->a, 0, NULL, NULL);
    ipl_jbuf_put(&t, s.u.s.p, s.u.s.n);
    ipl_jbuf_putc(&t, '\n');
    ipl_jv_t lines = ipl_jstr_splitlines(env->a, ipl_jbuf_value(&t), false);
    ipl_jbuf_t b;
    ipl_jbuf_init(&b, env->a, 0, NULL, NULL);
    if (first) ipl_jbuf_put(&b, ind.u.s.p, ind.u.s.n);
    for (size_t i = 0; i < lines.u.l->n; i++) {
        ipl_jv_t line = lines.u.l->v[i];
        if (i) {
            ipl_jbuf_putc(&b, '\n');
            if (blank || line.u.s.n) ipl_jbuf_put(&b, ind.u.s.p, ind.u.s.n);
        }
        ipl_jbuf_put(&b, line.u.s.p, line.u.s.n);
    }
    return ipl_jbuf_value(&b);
}

/* Python int(x) for the |int filter (Jinja2's do_int: int(s, base), else int(float(s))). */
static bool s_parse_int(ipl_jv_t s, int base, int64_t *out)
{
    ipl_jv_t t = ipl_jstr_strip(s, NULL, 'b');
    char buf[80];
    size_t n = 0;
    for (size_t i = 0; i < t.u.s.n; i++) {
        char c = t.u.s.p[i];
        if (c == '_' && i > 0 && i + 1 < t.u.s.n) continue;
        if (n + 1 >= sizeof buf) return false;
        buf[n++] = c;
    }
    buf[n] = '\0';
    if (n == 0) return false;
    char *end;
    errno = 0;
    long long v = strtoll(buf, &end, base);
    if (*end || errno) return false;
    *out = v;
    return true;
}

static bool s_parse_float(ipl_jv_t s, double *out)
{
    ipl_jv_t t = ipl_jstr_strip(s, NULL, 'b');
    char buf[80];
    if (t.u.s.n == 0 || t.u.s.n >= sizeof buf) return false;
    memcpy(buf, t.u.s.p, t.u.s.n);
    buf[t.u.s.n] = '\0';
    char *end;
    double v = strtod(buf, &end);
    if (*end || (buf[0] == '0' && (buf[1] == 'x' || buf[1] == 'X'))) return false;
    *out = v;
    return true;
}

static ipl_jv_t s_to_int(ipl_jenv_t *env, ipl_jv_t v, const ipl_jargs_t *a)
{
    static const char *const kw[] = {"default", "base", NULL};
    s_check(env, a, 2, kw, "int");
    const ipl_jv_t *dflt = s_arg(a, 0, "default");
    int64_t base = s_int_arg(env, s_arg(a, 1, "base"), 10, "int: base");
    ipl_jv_t fallback = dflt ? *dflt : ipl_jv_int(0);
    int64_t i;
    double f;
    switch (v.type) {
    case IPL_JV_INT: return v;
    case IPL_JV_BOOL: return ipl_jv_int(v.u.b);
    case IPL_JV_FLOAT:
        if (!isfinite(v.u.f) || fabs(v.u.f) >= 9.2e18) return fallback;
        return ipl_jv_int((int64_t)v.u.f);
    case IPL_JV_STR:
        if (base >= 2 && base <= 36 && s_parse_int(v, (int)base, &i)) return ipl_jv_int(i);
        if (s_parse_float(v, &f) && isfinite(f) && fabs(f) < 9.2e18) return ipl_jv_int((int64_t)f);
        return fallback;
    default: return fallback;
    }
}

static ipl_jv_t s_to_float(ipl_jenv_t *env, ipl_jv_t v, const ipl_jargs_t *a)
{
    static const char *const kw[] = {"default", NULL};
    s_check(env, a, 1, kw, "float");
    const ipl_jv_t *dflt = s_arg(a, 0, "default");
    double f;
    switch (v.type) {
    case IPL_JV_INT: return ipl_jv_float((double)v.u.i);
    case IPL_JV_BOOL: return ipl_jv_float(v.u.b);
    case IPL_JV_FLOAT: return v;
    case IPL_JV_STR:
        if (s_parse_float(v, &f)) return ipl_jv_float(f);
        break;
    default: break;
    }
    return dflt ? *dflt : ipl_jv_float(0.0);
}

static ipl_jv_t s_html_escape(ipl_jenv_t *env, ipl_jv_t v)
{
    ipl_jv_t s = ipl_jbuiltin_to_str(env, v);
    ipl_jbuf_t b;
    ipl_jbuf_init(&b, env->a, 0, NULL, NULL);
    for (size_t i = 0; i < s.u.s.n; i++) {
        char c = s.u.s.p[i];
        switch (c) {
        case '&': ipl_jbuf_puts(&b, "&amp;"); break;
        case '<': ipl_jbuf_puts(&b, "&lt;"); break;
        case '>': ipl_jbuf_puts(&b, "&gt;"); break;
        case '"': ipl_jbuf_puts(&b, "&#34;"); break;
        case '\'': ipl_jbuf_puts(&b, "&#39;"); break;
        default: ipl_jbuf_putc(&b, c); break;
        }
    }
    return ipl_jbuf_value(&b);
}

/* "%s" % args for the |format filter and the % operator: %s %d %i %r %% only. `lenient`:
 * Python's quirk for `str % mapping` (unused arguments are no error). */
static ipl_jv_t s_printf_(ipl_jenv_t *env, ipl_jv_t fmt, const ipl_jargs_t *a, bool lenient)
{
    fmt = ipl_jbuiltin_to_str(env, fmt);
    ipl_jbuf_t b;
    ipl_jbuf_init(&b, env->a, 0, NULL, NULL);
    size_t next = 0;
    for (size_t i = 0; i < fmt.u.s.n; i++) {
        char c = fmt.u.s.p[i];
        if (c != '%') {
            ipl_jbuf_putc(&b, c);
            continue;
        }
        char k = i + 1 < fmt.u.s.n ? fmt.u.s.p[++i] : '\0';
        if (k == '%') {
            ipl_jbuf_putc(&b, '%');
            continue;
        }
        if (k != 's' && k != 'd' && k != 'i' && k != 'r')
            env->fail(env, "format: only %%s, %%d, %%i, %%r and %%%% are supported");
        if (next >= a->n) env->fail(env, "format: not enough arguments for format string");
        ipl_jv_t v = a->v[next++];
        if (k == 'd' || k == 'i') {
            if (v.type == IPL_JV_FLOAT) v = ipl_jv_int((int64_t)v.u.f);
            if (v.type == IPL_JV_BOOL) v = ipl_jv_int(v.u.b);
            if (v.type != IPL_JV_INT) env->fail(env, "format: %%d needs a number, not %s", ipl_jv_type_name(v));
        }
        if ((k == 'r' ? ipl_jv_write_repr(&b, v) : ipl_jv_write_str(&b, v)) < 0)
            env->fail(env, "format: cannot format a %s", ipl_jv_type_name(v));
    }
    if (next < a->n && !lenient)
        env->fail(env, "format: not all arguments converted during string formatting");
    return ipl_jbuf_value(&b);
}

static ipl_jv_t s_printf(ipl_jenv_t *env, ipl_jv_t fmt, const ipl_jargs_t *a)
{
    return s_printf_(env, fmt, a, false);
}

ipl_jv_t ipl_jbuiltin_percent(ipl_jenv_t *env, ipl_jv_t fmt, ipl_jv_t arg)
{
    ipl_jargs_t a = {0};
    ipl_jv_t one = arg;
    if (arg.type == IPL_JV_LIST && (arg.flags & IPL_JV_F_TUPLE)) {
        a.n = arg.u.l->n;
        a.v = arg.u.l->v;
    } else {
        a.n = 1;
        a.v = &one;
    }
    bool mapping = arg.type == IPL_JV_DICT || (arg.type == IPL_JV_LIST && !(arg.flags & IPL_JV_F_TUPLE));
    return s_printf_(env, fmt, &a, mapping);
}

/* min / max / sum / unique / sort / dictsort share the attribute and case handling. */
static ipl_jv_t s_keyed(ipl_jenv_t *env, int id, ipl_jv_t seq, const ipl_jargs_t *a)
{
    bool cs, reverse = false;
    const ipl_jv_t *attribute;
    if (id == F_SORT) {
        static const char *const kw[] = {"reverse", "case_sensitive", "attribute", NULL};
        s_check(env, a, 3, kw, "sort");
        reverse = s_bool_arg(s_arg(a, 0, "reverse"), false);
        cs = s_bool_arg(s_arg(a, 1, "case_sensitive"), false);
        attribute = s_arg(a, 2, "attribute");
    } else {
        static const char *const kw[] = {"case_sensitive", "attribute", NULL};
        s_check(env, a, 2, kw, ipl_jbuiltin_filter_name(id));
        cs = s_bool_arg(s_arg(a, 0, "case_sensitive"), false);
        attribute = s_arg(a, 1, "attribute");
    }
    ipl_jv_t items = s_items_of(env, seq);
    size_t n = items.u.l->n;
    ipl_jv_t *keys = ipl_jarena_alloc(env->a, (n ? n : 1) * sizeof *keys);
    for (size_t i = 0; i < n; i++) {
        ipl_jv_t k = items.u.l->v[i];
        if (attribute && attribute->type != IPL_JV_NONE)
            k = s_attr_path(env, k, ipl_jbuiltin_to_str(env, *attribute));
        keys[i] = s_sort_key(env, k, cs);
    }
    if (id == F_SORT) return s_sorted(env, items, keys, reverse);
    if (id == F_UNIQUE) {
        ipl_jv_t out = ipl_jv_list(env->a, 0), seen = ipl_jv_list(env->a, 0);
        for (size_t i = 0; i < n; i++) {
            if (keys[i].type == IPL_JV_DICT || keys[i].type == IPL_JV_NS ||
                (keys[i].type == IPL_JV_LIST && !(keys[i].flags & IPL_JV_F_TUPLE)))
                env->fail(env, "unique: unhashable type: '%s'", ipl_jv_type_name(keys[i]));
            bool dup = false;
            for (size_t j = 0; j < seen.u.l->n && !dup; j++) dup = ipl_jv_equal(seen.u.l->v[j], keys[i]);
            if (dup) continue;
            ipl_jlist_push(env->a, &seen, keys[i]);
            ipl_jlist_push(env->a, &out, items.u.l->v[i]);
        }
        out.flags |= IPL_JV_F_GEN; /* do_unique yields */
        return out;
    }
    /* min / max: the first of the extreme items */
    if (n == 0) return ipl_jv_undef();
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (id == F_MIN ? s_less(env, keys[i], keys[best]) : s_less(env, keys[best], keys[i]))
            best = i;
    return items.u.l->v[best];
}

static ipl_jv_t s_sum(ipl_jenv_t *env, ipl_jv_t seq, const ipl_jargs_t *a)
{
    static const char *const kw[] = {"attribute", "start", NULL};
    s_check(env, a, 2, kw, "sum");
    const ipl_jv_t *attribute = s_arg(a, 0, "attribute"), *start = s_arg(a, 1, "start");
    ipl_jv_t items = s_items_of(env, seq);
    bool is_float = start && start->type == IPL_JV_FLOAT;
    int64_t si = start && start->type == IPL_JV_INT ? start->u.i : 0;
    double sf = start && start->type == IPL_JV_FLOAT ? start->u.f : (double)si;
    for (size_t i = 0; i < items.u.l->n; i++) {
        ipl_jv_t v = items.u.l->v[i];
        if (attribute && attribute->type != IPL_JV_NONE)
            v = s_attr_path(env, v, ipl_jbuiltin_to_str(env, *attribute));
        if (v.type == IPL_JV_BOOL) v = ipl_jv_int(v.u.b);
        if (v.type == IPL_JV_INT) {
            if (!is_float && __builtin_add_overflow(si, v.u.i, &si)) env->fail(env, "sum: integer overflow");
            sf += (double)v.u.i;
        } else if (v.type == IPL_JV_FLOAT) {
            is_float = true;
            sf += v.u.f;
        } else {
            env->fail(env, "sum: unsupported operand type '%s'", ipl_jv_type_name(v));
        }
    }
    return is_float ? ipl_jv_float(sf) : ipl_jv_int(si);
}

static ipl_jv_t s_round(ipl_jenv_t *env, ipl_jv_t v, const ipl_jargs_t *a)
{
    static const char *const kw[] = {"precision", "method", NULL};
    s_check(env, a, 2, kw, "round");
    int64_t prec = s_int_arg(env, s_arg(a, 0, "precision"), 0, "round: precision");
    const ipl_jv_t *m = s_arg(a, 1, "method");
    ipl_jv_t method = m ? s_str_arg(env, m, "round: method") : ipl_jv_cstr("common");
    if (v.type != IPL_JV_INT && v.type != IPL_JV_FLOAT && v.type != IPL_JV_BOOL)
        env->fail(env, "round: a number is needed, not %s", ipl_jv_type_name(v));
    if (prec < -20 || prec > 20) env->fail(env, "round: precision out of range");
    bool common = method.u.s.n == 6 && memcmp(method.u.s.p, "common", 6) == 0;
    /* round(int, n) is an int in Python (the common method only: ceil/floor go through math) */
    if (common && v.type != IPL_JV_FLOAT && prec >= 0) return ipl_jv_int(v.type == IPL_JV_INT ? v.u.i : v.u.b);
    double f = v.type == IPL_JV_FLOAT ? v.u.f : v.type == IPL_JV_INT ? (double)v.u.i : v.u.b;
    if (common && prec >= 0 && isfinite(f)) {
        /* Python's round(x, n) rounds the exact binary value, half to even: as printf does
         * (round(2.675, 2) is 2.67: 2.675 is 2.67499999... in binary) */
        char buf[400];
        snprintf(buf, sizeof buf, "%.*f", (int)prec, f);
        return ipl_jv_float(strtod(buf, NULL));
    }
    double scale = pow(10.0, (double)prec), x = f * scale;
    if (common)
        x = nearbyint(x); /* half to even */
    else if (method.u.s.n == 4 && memcmp(method.u.s.p, "ceil", 4) == 0)
        x = ceil(x);
    else if (method.u.s.n == 5 && memcmp(method.u.s.p, "floor", 5) == 0)
        x = floor(x);
    else
        env->fail(env, "round: method must be 'common', 'ceil' or 'floor'");
    return ipl_jv_float(x / scale);
}

static ipl_jv_t s_wordcount(ipl_jenv_t *env, ipl_jv_t v)
{
    ipl_jv_t s = ipl_jbuiltin_to_str(env, v);
    const unsigned char *p = (const unsigned char *)s.u.s.p;
    size_t i = 0, n = s.u.s.n;
    int64_t words = 0;
    bool in = false;
    while (i < n) {
        uint32_t cp;
        i += ipl_utf8_next(p + i, n - i, &cp);
        bool w = cp == '_' || (cp != IPL_UNICODE_INVALID &&
                               (ipl_unicode_is_letter(cp) || ipl_unicode_is_number(cp)));
        if (w && !in) words++;
        in = w;
    }
    return ipl_jv_int(words);
}

ipl_jv_t ipl_jbuiltin_filter(ipl_jenv_t *env, int id, ipl_jv_t v, const ipl_jargs_t *a)
{
    switch (id) {
    case F_ABS:
        s_check(env, a, 0, NULL, "abs");
        if (v.type == IPL_JV_BOOL) v = ipl_jv_int(v.u.b);
        if (v.type == IPL_JV_INT) {
            if (v.u.i == INT64_MIN) env->fail(env, "abs: integer overflow");
            return ipl_jv_int(v.u.i < 0 ? -v.u.i : v.u.i);
        }
        if (v.type == IPL_JV_FLOAT) return ipl_jv_float(fabs(v.u.f));
        return S_FAIL(env, "bad operand type for abs(): '%s'", ipl_jv_type_name(v));
    case F_ATTR: {
        ipl_jv_t name = s_str_arg(env, s_arg(a, 0, NULL), "attr: the name");
        if (v.type == IPL_JV_NS) {
            ipl_jv_t *r = ipl_jdict_get(&v, name.u.s.p, name.u.s.n);
            return r ? *r : ipl_jv_undef();
        }
        return ipl_jv_undef(); /* getattr only: dict keys are not attributes */
    }
    case F_CAPITALIZE: return s_case(env, v, IPL_JCASE_CAPITALIZE);
    case F_TITLE: return s_case(env, v, IPL_JCASE_JTITLE);
    case F_LOWER: return s_case(env, v, IPL_JCASE_LOWER);
    case F_UPPER: return s_case(env, v, IPL_JCASE_UPPER);
    case F_COUNT:
    case F_LENGTH:
        s_check(env, a, 0, NULL, "length");
        return ipl_jv_int(s_len(env, v));
    case F_D:
    case F_DEFAULT: {
        static const char *const kw[] = {"default_value", "boolean", NULL};
        s_check(env, a, 2, kw, "default");
        const ipl_jv_t *d = s_arg(a, 0, "default_value");
        bool boolean = s_bool_arg(s_arg(a, 1, "boolean"), false);
        if (v.type == IPL_JV_UNDEF || (boolean && !ipl_jv_truthy(v))) return d ? *d : ipl_jv_str("", 0);
        return v;
    }
    case F_DICTSORT: {
        static const char *const kw[] = {"case_sensitive", "by", "reverse", NULL};
        s_check(env, a, 3, kw, "dictsort");
        if (v.type != IPL_JV_DICT) return S_FAIL(env, "dictsort: a dict is needed, not %s", ipl_jv_type_name(v));
        bool cs = s_bool_arg(s_arg(a, 0, "case_sensitive"), false);
        const ipl_jv_t *by = s_arg(a, 1, "by");
        bool by_value = by && by->type == IPL_JV_STR && by->u.s.n == 5 && memcmp(by->u.s.p, "value", 5) == 0;
        bool reverse = s_bool_arg(s_arg(a, 2, "reverse"), false);
        ipl_jv_t items = s_dict_items(env, v);
        ipl_jv_t *keys = ipl_jarena_alloc(env->a, (v.u.d->n ? v.u.d->n : 1) * sizeof *keys);
        for (size_t i = 0; i < v.u.d->n; i++)
            keys[i] = s_sort_key(env, by_value ? v.u.d->v[i] : v.u.d->k[i], cs);
        return s_sorted(env, items, keys, reverse);
    }
    case F_E:
    case F_ESCAPE: return s_html_escape(env, v);
    case F_FIRST:
    case F_LAST: {
        s_check(env, a, 0, NULL, ipl_jbuiltin_filter_name(id));
        if (v.type == IPL_JV_UNDEF) return v;
        if (id == F_LAST && (v.flags & IPL_JV_F_GEN))
            return S_FAIL(env, "last: 'generator' object is not reversible");
        ipl_jv_t items = s_items_of(env, v);
        if (items.u.l->n == 0) return ipl_jv_undef();
        return items.u.l->v[id == F_FIRST ? 0 : items.u.l->n - 1];
    }
    case F_FLOAT: return s_to_float(env, v, a);
    case F_INT: return s_to_int(env, v, a);
    case F_FORMAT: return s_printf(env, v, a);
    case F_INDENT: return s_indent(env, v, a);
    case F_ITEMS: {
        s_check(env, a, 0, NULL, "items");
        if (v.type == IPL_JV_UNDEF) return ipl_jv_list(env->a, 0);
        if (v.type != IPL_JV_DICT) return S_FAIL(env, "items: a mapping is needed, not %s", ipl_jv_type_name(v));
        ipl_jv_t out = s_dict_items(env, v);
        out.flags |= IPL_JV_F_GEN; /* Jinja2 3.1's do_items yields */
        return out;
    }
    case F_JOIN: return s_join(env, v, a);
    case F_LIST: {
        s_check(env, a, 0, NULL, "list");
        ipl_jv_t items = s_items_of(env, v), out = ipl_jv_list(env->a, items.u.l->n);
        for (size_t i = 0; i < items.u.l->n; i++) ipl_jlist_push(env->a, &out, items.u.l->v[i]);
        return out;
    }
    case F_MAP: return s_map(env, v, a);
    case F_MAX:
    case F_MIN:
    case F_SORT:
    case F_UNIQUE: return s_keyed(env, id, v, a);
    case F_REJECT: return s_select(env, v, a, false, false);
    case F_SELECT: return s_select(env, v, a, false, true);
    case F_REJECTATTR: return s_select(env, v, a, true, false);
    case F_SELECTATTR: return s_select(env, v, a, true, true);
    case F_REPLACE: {
        static const char *const kw[] = {"old", "new", "count", NULL};
        s_check(env, a, 3, kw, "replace");
        const ipl_jv_t *o = s_arg(a, 0, "old"), *nw = s_arg(a, 1, "new");
        if (!o || !nw) return S_FAIL(env, "replace: needs the old and the new text");
        ipl_jv_t out;
        if (ipl_jstr_replace(env->a, ipl_jbuiltin_to_str(env, v), ipl_jbuiltin_to_str(env, *o),
                             ipl_jbuiltin_to_str(env, *nw),
                             s_int_arg(env, s_arg(a, 2, "count"), -1, "replace: count"),
                             env->max_list, &out) < 0)
            return S_FAIL(env, "replace: the result is too large");
        return out;
    }
    case F_REVERSE: {
        s_check(env, a, 0, NULL, "reverse");
        ipl_jv_t items = s_items_of(env, v);
        if (v.type == IPL_JV_STR) {
            ipl_jbuf_t b;
            ipl_jbuf_init(&b, env->a, 0, NULL, NULL);
            for (size_t i = items.u.l->n; i-- > 0;) ipl_jbuf_put(&b, items.u.l->v[i].u.s.p, items.u.l->v[i].u.s.n);
            return ipl_jbuf_value(&b);
        }
        ipl_jv_t out = ipl_jv_list(env->a, items.u.l->n);
        for (size_t i = items.u.l->n; i-- > 0;) ipl_jlist_push(env->a, &out, items.u.l->v[i]);
        if (v.type == IPL_JV_LIST && !(v.flags & IPL_JV_F_GEN)) out.flags |= IPL_JV_F_GEN; /* reversed() */
        return out;
    }
    case F_ROUND: return s_round(env, v, a);
    case F_SAFE: return v;
    case F_STRING: return ipl_jbuiltin_to_str(env, v);
    case F_SUM: return s_sum(env, v, a);
    case F_TOJSON: return s_tojson(env, v, a);
    case F_TRIM: {
        static const char *const kw[] = {"chars", NULL};
        s_check(env, a, 1, kw, "trim");
        const ipl_jv_t *chars = s_arg(a, 0, "chars");
        ipl_jv_t cs;
        if (chars && chars->type != IPL_JV_NONE) cs = s_str_arg(env, chars, "trim: chars");
        return ipl_jstr_strip(ipl_jbuiltin_to_str(env, v), chars && chars->type != IPL_JV_NONE ? &cs : NULL, 'b');
    }
    case F_WORDCOUNT: return s_wordcount(env, v);
    default: return S_FAIL(env, "unknown filter %d", id);
    }
}

/* ---- tests ------------------------------------------------------------------------------ */

static bool s_cmp_test(ipl_jenv_t *env, int id, ipl_jv_t v, ipl_jv_t other)
{
    switch (id) {
    case T_EQ:
    case T_EQUALTO:
    case T_SYM_EQ: return ipl_jv_equal(v, other);
    case T_NE:
    case T_SYM_NE: return !ipl_jv_equal(v, other);
    case T_LT:
    case T_SYM_LT:
    case T_LESSTHAN: return s_less(env, v, other);
    case T_GT:
    case T_SYM_GT:
    case T_GREATERTHAN: return s_less(env, other, v);
    case T_LE:
    case T_SYM_LE: return !s_less(env, other, v);
    default: return !s_less(env, v, other); /* ge */
    }
}

bool ipl_jbuiltin_test(ipl_jenv_t *env, int id, ipl_jv_t v, const ipl_jargs_t *a)
{
    const ipl_jv_t *x = s_arg(a, 0, NULL);
    switch (id) {
    case T_BOOLEAN: return v.type == IPL_JV_BOOL;
    case T_CALLABLE: return v.type == IPL_JV_CALL || v.type == IPL_JV_UNDEF;
    case T_DEFINED: return v.type != IPL_JV_UNDEF;
    case T_UNDEFINED: return v.type == IPL_JV_UNDEF;
    case T_NONE: return v.type == IPL_JV_NONE;
    case T_STRING: return v.type == IPL_JV_STR;
    case T_MAPPING: return v.type == IPL_JV_DICT;
    case T_NUMBER: return v.type == IPL_JV_INT || v.type == IPL_JV_FLOAT || v.type == IPL_JV_BOOL;
    case T_INTEGER: return v.type == IPL_JV_INT;
    case T_FLOAT: return v.type == IPL_JV_FLOAT;
    case T_TRUE: return v.type == IPL_JV_BOOL && v.u.b;
    case T_FALSE: return v.type == IPL_JV_BOOL && !v.u.b;
    /* Jinja2's Undefined has __iter__, __len__ and __getitem__ */
    case T_ITERABLE: return v.type == IPL_JV_STR || v.type == IPL_JV_LIST || v.type == IPL_JV_DICT || v.type == IPL_JV_UNDEF;
    case T_SEQUENCE: return v.type == IPL_JV_STR || (v.type == IPL_JV_LIST && !(v.flags & IPL_JV_F_GEN)) || v.type == IPL_JV_DICT || v.type == IPL_JV_UNDEF;
    case T_ESCAPED: return false;
    case T_EVEN:
    case T_ODD:
    case T_DIVISIBLEBY: {
        if (v.type == IPL_JV_BOOL) v = ipl_jv_int(v.u.b);
        int64_t d = id == T_DIVISIBLEBY ? s_int_arg(env, x, 1, "divisibleby: the divisor") : 2;
        if (v.type == IPL_JV_FLOAT) { /* Python: value % 2 == 1 works on floats too */
            if (d == 0) env->fail(env, "divisibleby: division by zero");
            double m = fmod(v.u.f, (double)d);
            if (m != 0.0 && ((m < 0) != (d < 0))) m += (double)d;
            return id == T_ODD ? m == 1.0 : m == 0.0;
        }
        if (v.type != IPL_JV_INT) env->fail(env, "%s: a number is needed, not %s", s_tests[id], ipl_jv_type_name(v));
        if (d == 0) env->fail(env, "divisibleby: division by zero");
        int64_t m = d == -1 ? 0 : v.u.i % d;
        return id == T_ODD ? m != 0 : m == 0;
    }
    case T_LOWER:
    case T_UPPER: {
        if (v.type != IPL_JV_STR) v = ipl_jbuiltin_to_str(env, v);
        bool r;
        uint32_t bad = 0;
        if (ipl_jstr_is_case(v, id == T_UPPER, &r, &bad) < 0)
            env->fail(env, "case test of U+%04X is not supported", bad);
        return r;
    }
    case T_IN:
        if (!x) env->fail(env, "in: needs a container");
        return ipl_jbuiltin_contains(env, *x, v);
    case T_SAMEAS:
        if (!x) env->fail(env, "sameas: needs a value");
        if (v.type != x->type) return false;
        if (v.type == IPL_JV_LIST) return v.u.l == x->u.l;
        if (v.type == IPL_JV_DICT || v.type == IPL_JV_NS) return v.u.d == x->u.d;
        return ipl_jv_equal(v, *x);
    default:
        if (id < 0 || id >= T_COUNT_) env->fail(env, "unknown test %d", id);
        if (!x) env->fail(env, "%s: needs a value to compare with", s_tests[id]);
        return s_cmp_test(env, id, v, *x);
    }
}

bool ipl_jbuiltin_contains(ipl_jenv_t *env, ipl_jv_t hay, ipl_jv_t needle)
{
    switch (hay.type) {
    case IPL_JV_STR:
        if (needle.type != IPL_JV_STR)
            env->fail(env, "'in <string>' requires a string as left operand, not %s", ipl_jv_type_name(needle));
        return needle.u.s.n == 0 || (needle.u.s.n <= hay.u.s.n &&
                                     memmem(hay.u.s.p, hay.u.s.n, needle.u.s.p, needle.u.s.n));
    case IPL_JV_LIST:
        for (size_t i = 0; i < hay.u.l->n; i++)
            if (ipl_jv_equal(hay.u.l->v[i], needle)) return true;
        return false;
    case IPL_JV_DICT:
        if ((needle.type == IPL_JV_LIST && !(needle.flags & IPL_JV_F_TUPLE)) || needle.type == IPL_JV_DICT)
            env->fail(env, "unhashable type: '%s'", ipl_jv_type_name(needle));
        return ipl_jdict_find(&hay, needle) != NULL;
    case IPL_JV_UNDEF:
        return false;
    default:
        env->fail(env, "argument of type '%s' is not iterable", ipl_jv_type_name(hay));
    }
    return false;
}

/* ---- methods ---------------------------------------------------------------------------- */

/* str.format: {} {0} {name} {{ }} with !s / !r; no format specs. */
static ipl_jv_t s_format(ipl_jenv_t *env, ipl_jv_t fmt, const ipl_jargs_t *a)
{
    ipl_jbuf_t b;
    ipl_jbuf_init(&b, env->a, 0, NULL, NULL);
    size_t auto_i = 0;
    const char *p = fmt.u.s.p, *end = p + fmt.u.s.n;
    while (p < end) {
        char c = *p++;
        if (c == '}' && p < end && *p == '}') {
            ipl_jbuf_putc(&b, '}');
            p++;
            continue;
        }
        if (c != '{') {
            ipl_jbuf_putc(&b, c);
            continue;
        }
        if (p < end && *p == '{') {
            ipl_jbuf_putc(&b, '{');
            p++;
            continue;
        }
        const char *close = memchr(p, '}', (size_t)(end - p));
        if (!close) env->fail(env, "format: single '{' encountered in format string");
        const char *field = p, *fend = close;
        char conv = 's';
        const char *bang = memchr(field, '!', (size_t)(fend - field));
        if (memchr(field, ':', (size_t)(fend - field)) || memchr(field, '.', (size_t)(fend - field)) ||
            memchr(field, '[', (size_t)(fend - field)))
            env->fail(env, "format: format specs and attribute fields are not supported");
        if (bang) {
            conv = bang + 1 < fend ? bang[1] : '?';
            if ((conv != 's' && conv != 'r') || bang + 2 != fend) env->fail(env, "format: bad conversion");
            fend = bang;
        }
        const ipl_jv_t *v;
        size_t flen = (size_t)(fend - field);
        if (flen == 0) {
            v = s_arg(a, auto_i++, NULL);
        } else if (field[0] >= '0' && field[0] <= '9') {
            v = s_arg(a, (size_t)strtoul(field, NULL, 10), NULL);
        } else {
            v = NULL;
            for (size_t i = 0; i < a->nkw && !v; i++)
                if (a->kw[i].len == flen && memcmp(a->kw[i].name, field, flen) == 0) v = &a->kw[i].v;
        }
        if (!v) env->fail(env, "format: no argument for field '{%.*s}'", (int)flen, field);
        if ((conv == 'r' ? ipl_jv_write_repr(&b, *v) : ipl_jv_write_str(&b, *v)) < 0)
            env->fail(env, "format: cannot format a %s", ipl_jv_type_name(*v));
        p = close + 1;
    }
    return ipl_jbuf_value(&b);
}

static ipl_jv_t s_str_method(ipl_jenv_t *env, int id, ipl_jv_t s, const ipl_jargs_t *a)
{
    const char *name = s_methods[id];
    switch (id) {
    case M_CAPITALIZE: s_check(env, a, 0, NULL, name); return s_case(env, s, IPL_JCASE_CAPITALIZE);
    case M_TITLE: s_check(env, a, 0, NULL, name); return s_case(env, s, IPL_JCASE_TITLE);
    case M_LOWER: s_check(env, a, 0, NULL, name); return s_case(env, s, IPL_JCASE_LOWER);
    case M_UPPER: s_check(env, a, 0, NULL, name); return s_case(env, s, IPL_JCASE_UPPER);
    case M_ISLOWER:
    case M_ISUPPER: {
        s_check(env, a, 0, NULL, name);
        bool r;
        uint32_t bad = 0;
        if (ipl_jstr_is_case(s, id == M_ISUPPER, &r, &bad) < 0)
            env->fail(env, "%s of U+%04X is not supported", name, bad);
        return ipl_jv_bool(r);
    }
    case M_ISDIGIT: return ipl_jv_bool(ipl_jstr_is_class(s, 0));
    case M_ISALPHA: return ipl_jv_bool(ipl_jstr_is_class(s, 1));
    case M_ISALNUM: return ipl_jv_bool(ipl_jstr_is_class(s, 2));
    case M_ISSPACE: return ipl_jv_bool(ipl_jstr_is_class(s, 3));
    case M_STRIP:
    case M_LSTRIP:
    case M_RSTRIP: {
        static const char *const kw[] = {"chars", NULL};
        s_check(env, a, 1, kw, name);
        const ipl_jv_t *chars = s_arg(a, 0, "chars");
        ipl_jv_t cs;
        bool have = chars && chars->type != IPL_JV_NONE;
        if (have) cs = s_str_arg(env, chars, "strip: chars");
        return ipl_jstr_strip(s, have ? &cs : NULL, id == M_STRIP ? 'b' : id == M_LSTRIP ? 'l' : 'r');
    }
    case M_SPLIT:
    case M_RSPLIT: {
        static const char *const kw[] = {"sep", "maxsplit", NULL};
        s_check(env, a, 2, kw, name);
        const ipl_jv_t *sep = s_arg(a, 0, "sep");
        ipl_jv_t sv;
        bool have = sep && sep->type != IPL_JV_NONE;
        if (have) sv = s_str_arg(env, sep, "split: sep");
        int64_t maxsplit = s_int_arg(env, s_arg(a, 1, "maxsplit"), -1, "split: maxsplit");
        ipl_jv_t out;
        if (have && sv.u.s.n == 0) return S_FAIL(env, "%s: empty separator", name);
        if (ipl_jstr_split(env->a, s, have ? &sv : NULL, maxsplit, id == M_RSPLIT, env->max_list, &out) < 0)
            return S_FAIL(env, "%s: too many pieces", name);
        return out;
    }
    case M_SPLITLINES: {
        static const char *const kw[] = {"keepends", NULL};
        s_check(env, a, 1, kw, name);
        return ipl_jstr_splitlines(env->a, s, s_bool_arg(s_arg(a, 0, "keepends"), false));
    }
    case M_STARTSWITH:
    case M_ENDSWITH: {
        s_check(env, a, 1, NULL, name);
        const ipl_jv_t *x = s_arg(a, 0, NULL);
        if (x && x->type == IPL_JV_LIST && (x->flags & IPL_JV_F_TUPLE)) {
            for (size_t i = 0; i < x->u.l->n; i++) {
                ipl_jv_t pfx = s_str_arg(env, &x->u.l->v[i], "the prefix");
                if (ipl_jstr_starts(s, pfx, id == M_ENDSWITH)) return ipl_jv_bool(true);
            }
            return ipl_jv_bool(false);
        }
        ipl_jv_t pfx = s_str_arg(env, x, "the prefix (a string or a tuple of strings)");
        return ipl_jv_bool(ipl_jstr_starts(s, pfx, id == M_ENDSWITH));
    }
    case M_FIND:
    case M_RFIND:
    case M_INDEX: {
        s_check(env, a, 1, NULL, name);
        int64_t at = ipl_jstr_find(s, s_str_arg(env, s_arg(a, 0, NULL), "the substring"), id == M_RFIND);
        if (id == M_INDEX && at < 0) return S_FAIL(env, "substring not found");
        return ipl_jv_int(at);
    }
    case M_COUNT:
        s_check(env, a, 1, NULL, name);
        return ipl_jv_int(ipl_jstr_count(s, s_str_arg(env, s_arg(a, 0, NULL), "the substring")));
    case M_REPLACE: {
        static const char *const kw[] = {"count", NULL};
        s_check(env, a, 3, kw, name);
        ipl_jv_t out;
        if (ipl_jstr_replace(env->a, s, s_str_arg(env, s_arg(a, 0, NULL), "replace: old"),
                             s_str_arg(env, s_arg(a, 1, NULL), "replace: new"),
                             s_int_arg(env, s_arg(a, 2, "count"), -1, "replace: count"),
                             env->max_list, &out) < 0)
            return S_FAIL(env, "replace: the result is too large");
        return out;
    }
    case M_JOIN: {
        s_check(env, a, 1, NULL, name);
        const ipl_jv_t *x = s_arg(a, 0, NULL);
        if (!x) return S_FAIL(env, "join() takes exactly one argument");
        ipl_jv_t items = s_items_of(env, *x);
        ipl_jbuf_t b;
        ipl_jbuf_init(&b, env->a, 0, NULL, NULL);
        for (size_t i = 0; i < items.u.l->n; i++) {
            ipl_jv_t it = items.u.l->v[i];
            if (it.type != IPL_JV_STR)
                return S_FAIL(env, "sequence item %zu: expected str instance, %s found", i, ipl_jv_type_name(it));
            if (i) ipl_jbuf_put(&b, s.u.s.p, s.u.s.n);
            ipl_jbuf_put(&b, it.u.s.p, it.u.s.n);
        }
        return ipl_jbuf_value(&b);
    }
    case M_FORMAT: return s_format(env, s, a);
    default: return S_FAIL(env, "'str' object has no method '%s'", name);
    }
}

ipl_jv_t ipl_jbuiltin_method(ipl_jenv_t *env, int id, ipl_jv_t self, const ipl_jargs_t *a)
{
    if (id < 0 || id >= M_COUNT_) return S_FAIL(env, "unsupported method");
    const char *name = s_methods[id];
    if (self.type == IPL_JV_STR) return s_str_method(env, id, self, a);
    if (self.type == IPL_JV_DICT) {
        switch (id) {
        case M_GET: {
            s_check(env, a, 2, NULL, name);
            const ipl_jv_t *k = s_arg(a, 0, NULL), *d = s_arg(a, 1, NULL);
            if (!k) return S_FAIL(env, "get expected at least 1 argument");
            ipl_jv_t *v = ipl_jdict_find(&self, *k);
            return v ? *v : d ? *d : ipl_jv_none();
        }
        case M_ITEMS: s_check(env, a, 0, NULL, name); return s_dict_items(env, self);
        case M_KEYS: s_check(env, a, 0, NULL, name); return s_items_of(env, self);
        case M_VALUES: {
            s_check(env, a, 0, NULL, name);
            ipl_jv_t l = ipl_jv_list(env->a, self.u.d->n);
            for (size_t i = 0; i < self.u.d->n; i++) ipl_jlist_push(env->a, &l, self.u.d->v[i]);
            return l;
        }
        default: break;
        }
    } else if (self.type == IPL_JV_LIST && (id == M_COUNT || id == M_INDEX)) {
        s_check(env, a, 1, NULL, name);
        const ipl_jv_t *x = s_arg(a, 0, NULL);
        if (!x) return S_FAIL(env, "%s() takes exactly one argument", name);
        int64_t count = 0;
        for (size_t i = 0; i < self.u.l->n; i++)
            if (ipl_jv_equal(self.u.l->v[i], *x)) {
                if (id == M_INDEX) return ipl_jv_int((int64_t)i);
                count++;
            }
        if (id == M_INDEX) return S_FAIL(env, "list.index(x): x not in list");
        return ipl_jv_int(count);
    }
    return S_FAIL(env, "'%s' object has no method '%s'", ipl_jv_type_name(self), name);
}

/* ---- globals ---------------------------------------------------------------------------- */

static ipl_jv_t s_mapping_from(ipl_jenv_t *env, const ipl_jargs_t *a, int type)
{
    if (a->n > 1) return S_FAIL(env, "expected at most 1 positional argument, got %zu", a->n);
    ipl_jv_t d = ipl_jv_dict(env->a, 0);
    if (a->n == 1) {
        ipl_jv_t src = a->v[0];
        if (src.type == IPL_JV_DICT) {
            for (size_t i = 0; i < src.u.d->n; i++) ipl_jdict_set(env->a, &d, src.u.d->k[i], src.u.d->v[i]);
        } else if (src.type == IPL_JV_LIST) {
            for (size_t i = 0; i < src.u.l->n; i++) {
                ipl_jv_t pair = src.u.l->v[i];
                if (pair.type != IPL_JV_LIST || pair.u.l->n != 2)
                    return S_FAIL(env, "expected a mapping or an iterable of pairs");
                ipl_jdict_set(env->a, &d, pair.u.l->v[0], pair.u.l->v[1]);
            }
        } else {
            return S_FAIL(env, "'%s' object is not iterable", ipl_jv_type_name(src));
        }
    }
    for (size_t i = 0; i < a->nkw; i++)
        ipl_jdict_set(env->a, &d, ipl_jv_str(a->kw[i].name, a->kw[i].len), a->kw[i].v);
    d.type = (uint8_t)type;
    return d;
}

ipl_jv_t ipl_jbuiltin_global(ipl_jenv_t *env, int id, const ipl_jargs_t *a)
{
    switch (id) {
    case G_DICT: return s_mapping_from(env, a, IPL_JV_DICT);
    case G_NAMESPACE: return s_mapping_from(env, a, IPL_JV_NS);
    case G_RANGE: {
        s_check(env, a, 3, NULL, "range");
        if (a->n == 0) return S_FAIL(env, "range expected at least 1 argument");
        int64_t start = 0, stop, step = 1;
        if (a->n == 1) {
            stop = s_int_arg(env, &a->v[0], 0, "range: stop");
        } else {
            start = s_int_arg(env, &a->v[0], 0, "range: start");
            stop = s_int_arg(env, &a->v[1], 0, "range: stop");
            if (a->n == 3) step = s_int_arg(env, &a->v[2], 1, "range: step");
        }
        if (step == 0) return S_FAIL(env, "range() arg 3 must not be zero");
        ipl_jv_t l = ipl_jv_list(env->a, 0);
        for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
            if (l.u.l->n >= env->max_list) return S_FAIL(env, "range: more than %zu items", env->max_list);
            ipl_jlist_push(env->a, &l, ipl_jv_int(i));
            if ((step > 0 && i > INT64_MAX - step) || (step < 0 && i < INT64_MIN - step)) break;
        }
        return l;
    }
    case G_STRFTIME: {
        s_check(env, a, 1, NULL, "strftime_now");
        ipl_jv_t fmt = s_str_arg(env, s_arg(a, 0, NULL), "strftime_now: the format");
        time_t now = env->now ? env->now : time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        char f[256], out[512];
        if (fmt.u.s.n >= sizeof f) return S_FAIL(env, "strftime_now: format too long");
        memcpy(f, fmt.u.s.p, fmt.u.s.n);
        f[fmt.u.s.n] = '\0';
        size_t n = strftime(out, sizeof out, f, &tm);
        if (n == 0 && f[0]) return S_FAIL(env, "strftime_now: the result is empty or too long");
        char *s = ipl_jarena_strdup(env->a, out, n);
        return ipl_jv_str(s, n);
    }
    default:
        return S_FAIL(env, "unsupported global function");
    }
}
