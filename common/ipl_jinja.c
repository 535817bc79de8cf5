/*
 * ipl_jinja — the template class and its evaluator (see ipl_jinja.h).
 *
 * A render is a walk of the parse tree with a chain of scopes:
 *
 *     root (the caller's variables) ◄── template ◄── for-loop ◄── ...
 *                                          ▲
 *     macro call scope ──parent────────────┘ (the scope the macro was defined in)
 *
 * As in Jinja2's frames: each `for` iteration runs in a scope of its own (a `set` in a loop
 * neither leaks out nor carries over to the next iteration), and so do {% set %} block bodies
 * and {% filter %} blocks; `if` opens none; a macro call (or a call block's caller) opens one
 * whose parent is the scope the macro was defined in.
 * Output goes to the current buffer; {% set %} blocks, macro bodies, call and filter blocks
 * render into a fresh buffer that becomes a string value.
 *
 * Errors unwind with longjmp to ipl_jinja_render. That is safe because everything a render
 * allocates lives in its arena (values, scopes, buffers), freed once at the end.
 */
#include "ipl_jinja.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "ipl_error.h"
#include "ipl_jinja_ast.h"
#include "ipl_jinja_builtin.h"
#include "ipl_jinja_lex.h"
#include "ipl_jinja_value.h"

#define S_PARSE_DEPTH 100

struct ipl_jinja {
    ipl_jarena_t arena; /* tokens, nodes, the normalised source */
    ipl_jnode_t *root;
};

/* CALL values (ipl_jv_t.aux) */
enum { S_CALL_MACRO = 1, S_CALL_CALLER, S_CALL_GLOBAL, S_CALL_METHOD };

typedef struct s_scope {
    struct s_scope *parent;
    ipl_jv_t vars; /* DICT */
} s_scope_t;

/* A macro (or a call block's caller) bound to the scope it was defined in. */
typedef struct {
    const ipl_jnode_t *node;
    s_scope_t *closure;
} s_macro_t;

typedef struct {
    ipl_jv_t self;
    int id;
} s_bound_t;

typedef struct {
    ipl_jenv_t env; /* first: builtins get &ctx->env */
    ipl_jarena_t a;
    jmp_buf jb;
    int rc;
    char *err;
    size_t errlen;
    const ipl_jnode_t *at; /* the node being evaluated, for error positions */
    ipl_jbuf_t *out;
    size_t max_output;
    size_t iterations, max_iterations;
    int depth, max_depth;
    ipl_jv_t hole;    /* the operand of a filter block's innermost filter */
    int loop_ctl;     /* 1: break, 2: continue pending */
} s_ctx_t;

static void s_raise(s_ctx_t *c, int rc, bool where, const char *fmt, va_list ap)
    __attribute__((noreturn));

static void s_raise(s_ctx_t *c, int rc, bool where, const char *fmt, va_list ap)
{
    c->rc = rc;
    if (c->err && c->errlen) {
        int k = 0;
        if (where && c->at) k = snprintf(c->err, c->errlen, "%u:%u: ", c->at->line, c->at->col);
        if (k >= 0 && (size_t)k < c->errlen) vsnprintf(c->err + k, c->errlen - (size_t)k, fmt, ap);
    }
    longjmp(c->jb, 1);
}

static void s_fail(s_ctx_t *c, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));

static void s_fail(s_ctx_t *c, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    s_raise(c, rc, true, fmt, ap);
}

static void s_env_fail(ipl_jenv_t *env, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    s_raise((s_ctx_t *)env, IPL_E_TYPE, true, fmt, ap);
}

static void s_oom(void *arg)
{
    s_ctx_t *c = arg;
    s_fail(c, IPL_E_RANGE, "the template used more than %zu bytes of memory", c->a.budget);
}

static void s_out_limit(void *arg)
{
    s_ctx_t *c = arg;
    s_fail(c, IPL_E_RANGE, "the rendered text exceeds %zu bytes", c->max_output);
}

static void s_buf_init(s_ctx_t *c, ipl_jbuf_t *b)
{
    ipl_jbuf_init(b, &c->a, c->max_output, s_out_limit, c);
}

static s_scope_t *s_scope_new(s_ctx_t *c, s_scope_t *parent)
{
    s_scope_t *s = ipl_jarena_alloc(&c->a, sizeof *s);
    s->parent = parent;
    s->vars = ipl_jv_dict(&c->a, 0);
    return s;
}

static void s_scope_set(s_ctx_t *c, s_scope_t *s, ipl_jv_t name, ipl_jv_t v)
{
    ipl_jdict_set(&c->a, &s->vars, name, v);
}

static ipl_jv_t *s_lookup(s_scope_t *s, ipl_jv_t name)
{
    for (; s; s = s->parent) {
        ipl_jv_t *v = ipl_jdict_get(&s->vars, name.u.s.p, name.u.s.n);
        if (v) return v;
    }
    return NULL;
}

static ipl_jv_t s_call_value(s_ctx_t *c, int aux, const void *obj)
{
    (void)c;
    return (ipl_jv_t){.type = IPL_JV_CALL, .aux = (uint16_t)aux, .u.call = obj};
}

static void s_count(s_ctx_t *c)
{
    if (++c->iterations > c->max_iterations)
        s_fail(c, IPL_E_RANGE, "more than %zu loop iterations and macro calls",
               c->max_iterations);
}

static ipl_jv_t s_eval(s_ctx_t *c, const ipl_jnode_t *n, s_scope_t *sc);
static void s_exec(s_ctx_t *c, const ipl_jnode_t *n, s_scope_t *sc);

static const char *s_name_of(const ipl_jnode_t *n)
{
    return n->val.type == IPL_JV_STR ? n->val.u.s.p : "?";
}

static int s_name_len(const ipl_jnode_t *n)
{
    size_t len = n->val.type == IPL_JV_STR ? n->val.u.s.n : 1;
    return (int)(len > 60 ? 60 : len);
}

/* Evaluates the argument nodes kids[from..] into positional and keyword arguments. */
static void s_args(s_ctx_t *c, const ipl_jnode_t *n, size_t from, s_scope_t *sc, ipl_jargs_t *out)
{
    size_t total = n->nkids > from ? n->nkids - from : 0;
    memset(out, 0, sizeof *out);
    if (!total) return;
    out->v = ipl_jarena_alloc(&c->a, total * sizeof *out->v);
    out->kw = ipl_jarena_alloc(&c->a, total * sizeof *out->kw);
    for (size_t i = from; i < n->nkids; i++) {
        const ipl_jnode_t *k = n->kids[i];
        if (k->kind == IPL_JN_KWARG) {
            for (size_t j = 0; j < out->nkw; j++)
                if (out->kw[j].len == k->val.u.s.n &&
                    memcmp(out->kw[j].name, k->val.u.s.p, k->val.u.s.n) == 0)
                    s_fail(c, IPL_E_TYPE, "got multiple values for keyword argument '%.*s'",
                           s_name_len(k), s_name_of(k));
            out->kw[out->nkw++] = (ipl_jkwarg_t){k->val.u.s.p, k->val.u.s.n,
                                                 s_eval(c, k->kids[0], sc)};
        } else {
            out->v[out->n++] = s_eval(c, k, sc);
        }
    }
}

/* Renders a body into a fresh buffer and returns the text. */
static ipl_jv_t s_capture(s_ctx_t *c, const ipl_jnode_t *body, s_scope_t *sc)
{
    ipl_jbuf_t b, *saved = c->out;
    s_buf_init(c, &b);
    c->out = &b;
    s_exec(c, body, sc);
    c->out = saved;
    return ipl_jbuf_value(&b);
}

/* Calls a macro (or a call block's caller) with evaluated arguments. */
static ipl_jv_t s_call_macro(s_ctx_t *c, const s_macro_t *m, const ipl_jargs_t *args,
                             const ipl_jv_t *caller)
{
    const ipl_jnode_t *def = m->node;
    bool is_macro = def->kind == IPL_JN_MACRO;
    size_t first = is_macro ? 1 : 2;
    size_t nparams = def->nkids - first;
    const ipl_jnode_t *body = is_macro ? def->kids[0] : def->kids[1];
    const char *what = is_macro ? s_name_of(def) : "caller";
    int what_n = is_macro ? s_name_len(def) : 6;
    if (c->depth >= c->max_depth)
        s_fail(c, IPL_E_RANGE, "macro calls nested deeper than %d", c->max_depth);
    s_count(c);
    s_scope_t *sc = s_scope_new(c, m->closure);
    if (args->n > nparams && !(def->flags & IPL_JN_F_VARARGS))
        s_fail(c, IPL_E_TYPE, "macro '%.*s' takes not more than %zu argument(s)", what_n, what,
               nparams);
    bool *bound = nparams ? ipl_jarena_zalloc(&c->a, nparams) : NULL;
    for (size_t i = 0; i < nparams && i < args->n; i++) {
        s_scope_set(c, sc, def->kids[first + i]->val, args->v[i]);
        bound[i] = true;
    }
    ipl_jv_t kwargs = ipl_jv_dict(&c->a, 0);
    for (size_t k = 0; k < args->nkw; k++) {
        const ipl_jkwarg_t *kw = &args->kw[k];
        size_t i = 0;
        for (; i < nparams; i++) {
            ipl_jv_t pn = def->kids[first + i]->val;
            if (pn.u.s.n == kw->len && memcmp(pn.u.s.p, kw->name, kw->len) == 0) break;
        }
        if (i < nparams) {
            if (bound[i])
                s_fail(c, IPL_E_TYPE, "macro '%.*s' got multiple values for argument '%.*s'",
                       what_n, what, (int)kw->len, kw->name);
            s_scope_set(c, sc, def->kids[first + i]->val, kw->v);
            bound[i] = true;
        } else if (def->flags & IPL_JN_F_KWARGS) {
            ipl_jdict_set(&c->a, &kwargs, ipl_jv_str(kw->name, kw->len), kw->v);
        } else {
            s_fail(c, IPL_E_TYPE, "macro '%.*s' takes no keyword argument '%.*s'", what_n, what,
                   (int)kw->len, kw->name);
        }
    }
    /* unbound parameters: undefined first (so defaults cannot see an outer variable of the
     * same name), then their defaults in order */
    for (size_t i = 0; i < nparams; i++)
        if (!bound[i]) s_scope_set(c, sc, def->kids[first + i]->val, ipl_jv_undef());
    for (size_t i = 0; i < nparams; i++) {
        const ipl_jnode_t *prm = def->kids[first + i];
        if (!bound[i] && prm->kids[0]) s_scope_set(c, sc, prm->val, s_eval(c, prm->kids[0], sc));
    }
    if (def->flags & IPL_JN_F_VARARGS) {
        ipl_jv_t rest = ipl_jv_list(&c->a, 0);
        for (size_t i = nparams; i < args->n; i++) ipl_jlist_push(&c->a, &rest, args->v[i]);
        rest.flags |= IPL_JV_F_TUPLE;
        s_scope_set(c, sc, ipl_jv_cstr("varargs"), rest);
    }
    if (def->flags & IPL_JN_F_KWARGS) s_scope_set(c, sc, ipl_jv_cstr("kwargs"), kwargs);
    if (is_macro) s_scope_set(c, sc, ipl_jv_cstr("caller"), caller ? *caller : ipl_jv_undef());
    c->depth++;
    int saved_ctl = c->loop_ctl;
    c->loop_ctl = 0;
    ipl_jv_t r = s_capture(c, body, sc);
    c->loop_ctl = saved_ctl;
    c->depth--;
    return r;
}

/* A call by name: a global function, a macro, or `caller`. */
static ipl_jv_t s_eval_call(s_ctx_t *c, const ipl_jnode_t *n, s_scope_t *sc,
                            const ipl_jv_t *caller)
{
    ipl_jv_t *fn = s_lookup(sc, n->val);
    ipl_jargs_t args;
    if (!fn && n->id >= 0) {
        s_args(c, n, 0, sc, &args);
        c->at = n;
        if (n->val.u.s.n == 15 && memcmp(n->val.u.s.p, "raise_exception", 15) == 0) {
            ipl_jbuf_t b;
            s_buf_init(c, &b);
            for (size_t i = 0; i < args.n; i++) ipl_jv_write_str(&b, args.v[i]);
            ipl_jbuf_putc(&b, '\0');
            c->rc = IPL_E_INVAL;
            if (c->err && c->errlen) snprintf(c->err, c->errlen, "%s", b.p);
            longjmp(c->jb, 1);
        }
        return ipl_jbuiltin_global(&c->env, n->id, &args);
    }
    if (!fn || fn->type == IPL_JV_UNDEF)
        s_fail(c, IPL_E_TYPE, "'%.*s' is undefined", s_name_len(n), s_name_of(n));
    if (fn->type != IPL_JV_CALL)
        s_fail(c, IPL_E_TYPE, "'%.*s' is not callable (%s)", s_name_len(n), s_name_of(n),
               ipl_jv_type_name(*fn));
    ipl_jv_t f = *fn;
    s_args(c, n, 0, sc, &args);
    c->at = n;
    switch (f.aux) {
    case S_CALL_MACRO:
    case S_CALL_CALLER:
        return s_call_macro(c, f.u.call, &args, caller);
    case S_CALL_GLOBAL:
        return ipl_jbuiltin_global(&c->env, (int)(intptr_t)f.u.call, &args);
    default: {
        const s_bound_t *bm = f.u.call;
        return ipl_jbuiltin_method(&c->env, bm->id, bm->self, &args);
    }
    }
}

static ipl_jv_t s_bound(s_ctx_t *c, ipl_jv_t self, const char *name, size_t n)
{
    s_bound_t *bm = ipl_jarena_alloc(&c->a, sizeof *bm);
    bm->self = self;
    bm->id = ipl_jbuiltin_method_id(name, n);
    return s_call_value(c, S_CALL_METHOD, bm);
}

static void s_undefined_access(s_ctx_t *c, const ipl_jnode_t *n)
{
    const ipl_jnode_t *obj = n->kids[0];
    if (obj->kind == IPL_JN_NAME)
        s_fail(c, IPL_E_TYPE, "'%.*s' is undefined", s_name_len(obj), s_name_of(obj));
    s_fail(c, IPL_E_TYPE, "an attribute or item of an undefined value was accessed");
}

static ipl_jv_t s_getattr(s_ctx_t *c, ipl_jv_t obj, const char *name, size_t len)
{
    switch (obj.type) {
    case IPL_JV_DICT: {
        if (ipl_jbuiltin_is_method_of(obj, name, len)) return s_bound(c, obj, name, len);
        ipl_jv_t *v = ipl_jdict_get(&obj, name, len);
        return v ? *v : ipl_jv_undef();
    }
    case IPL_JV_NS: {
        ipl_jv_t *v = ipl_jdict_get(&obj, name, len);
        return v ? *v : ipl_jv_undef();
    }
    case IPL_JV_STR:
    case IPL_JV_LIST:
        if (ipl_jbuiltin_is_method_of(obj, name, len)) return s_bound(c, obj, name, len);
        return ipl_jv_undef();
    default:
        return ipl_jv_undef();
    }
}

/* Python's index normalisation: i < 0 counts from the end; -1 when out of range. */
static int64_t s_index(int64_t i, size_t n)
{
    if (i < 0) i += (int64_t)n;
    return i < 0 || (uint64_t)i >= n ? -1 : i;
}

static ipl_jv_t s_getitem(s_ctx_t *c, ipl_jv_t obj, ipl_jv_t key)
{
    if (key.type == IPL_JV_BOOL) key = ipl_jv_int(key.u.b);
    switch (obj.type) {
    case IPL_JV_DICT:
    case IPL_JV_NS: {
        ipl_jv_t *v = ipl_jdict_find(&obj, key);
        if (v) return *v;
        if (key.type == IPL_JV_STR) return s_getattr(c, obj, key.u.s.p, key.u.s.n);
        return ipl_jv_undef();
    }
    case IPL_JV_LIST:
        if (obj.flags & IPL_JV_F_GEN) return ipl_jv_undef(); /* not subscriptable */
        if (key.type == IPL_JV_INT) {
            int64_t i = s_index(key.u.i, obj.u.l->n);
            return i < 0 ? ipl_jv_undef() : obj.u.l->v[i];
        }
        if (key.type == IPL_JV_STR) return s_getattr(c, obj, key.u.s.p, key.u.s.n);
        return ipl_jv_undef();
    case IPL_JV_STR:
        if (key.type == IPL_JV_INT) {
            size_t n = ipl_jv_strlen(obj.u.s.p, obj.u.s.n);
            int64_t i = s_index(key.u.i, n);
            if (i < 0) return ipl_jv_undef();
            size_t a = ipl_jv_offset(obj.u.s.p, obj.u.s.n, (size_t)i);
            size_t b = ipl_jv_offset(obj.u.s.p + a, obj.u.s.n - a, 1);
            return ipl_jv_str(obj.u.s.p + a, b);
        }
        if (key.type == IPL_JV_STR) return s_getattr(c, obj, key.u.s.p, key.u.s.n);
        return ipl_jv_undef();
    default:
        return ipl_jv_undef();
    }
}

/* Python slice semantics (PySlice_AdjustIndices) over n items. */
static int64_t s_slice_bound(s_ctx_t *c, ipl_jv_t v, int64_t dflt, int64_t n, int64_t step)
{
    if (v.type == IPL_JV_UNDEF || v.type == IPL_JV_NONE) return dflt;
    if (v.type == IPL_JV_BOOL) v = ipl_jv_int(v.u.b);
    if (v.type != IPL_JV_INT)
        s_fail(c, IPL_E_TYPE, "slice indices must be integers or None, not %s",
               ipl_jv_type_name(v));
    int64_t i = v.u.i;
    if (i < 0) {
        i += n;
        if (i < 0) i = step < 0 ? -1 : 0;
    } else if (i >= n) {
        i = step < 0 ? n - 1 : n;
    }
    return i;
}

static ipl_jv_t s_slice(s_ctx_t *c, const ipl_jnode_t *n, s_scope_t *sc)
{
    ipl_jv_t obj = s_eval(c, n->kids[0], sc);
    if (obj.type == IPL_JV_UNDEF) s_undefined_access(c, n);
    ipl_jv_t parts[3];
    for (int k = 0; k < 3; k++)
        parts[k] = n->kids[k + 1] ? s_eval(c, n->kids[k + 1], sc) : ipl_jv_undef();
    c->at = n;
    if ((obj.type != IPL_JV_LIST && obj.type != IPL_JV_STR) || (obj.flags & IPL_JV_F_GEN))
        return ipl_jv_undef();
    int64_t step = 1;
    if (parts[2].type != IPL_JV_UNDEF && parts[2].type != IPL_JV_NONE) {
        if (parts[2].type != IPL_JV_INT) s_fail(c, IPL_E_TYPE, "slice step must be an integer");
        step = parts[2].u.i;
        if (step == 0) s_fail(c, IPL_E_TYPE, "slice step cannot be zero");
    }
    /* strings slice by code point: build the offsets when there is non-ASCII text */
    size_t *offs = NULL;
    int64_t len;
    if (obj.type == IPL_JV_LIST) {
        len = (int64_t)obj.u.l->n;
    } else {
        len = (int64_t)ipl_jv_strlen(obj.u.s.p, obj.u.s.n);
        if ((size_t)len != obj.u.s.n) {
            offs = ipl_jarena_alloc(&c->a, ((size_t)len + 1) * sizeof *offs);
            size_t off = 0;
            for (int64_t i = 0; i <= len; i++) {
                offs[i] = off;
                if (i < len) off += ipl_jv_offset(obj.u.s.p + off, obj.u.s.n - off, 1);
            }
        }
    }
    int64_t start = s_slice_bound(c, parts[0], step < 0 ? len - 1 : 0, len, step);
    int64_t stop = s_slice_bound(c, parts[1], step < 0 ? -1 : len, len, step);
    if (obj.type == IPL_JV_LIST) {
        ipl_jv_t out = ipl_jv_list(&c->a, 0);
        out.flags = obj.flags;
        for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
            ipl_jlist_push(&c->a, &out, obj.u.l->v[i]);
        return out;
    }
    if (step == 1) {
        if (stop <= start) return ipl_jv_str("", 0);
        size_t a = offs ? offs[start] : (size_t)start, b = offs ? offs[stop] : (size_t)stop;
        return ipl_jv_str(obj.u.s.p + a, b - a);
    }
    ipl_jbuf_t b;
    s_buf_init(c, &b);
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
        size_t a = offs ? offs[i] : (size_t)i, e = offs ? offs[i + 1] : (size_t)i + 1;
        ipl_jbuf_put(&b, obj.u.s.p + a, e - a);
    }
    return ipl_jbuf_value(&b);
}

/* ---- arithmetic ------------------------------------------------------------------------- */

static bool s_numeric(ipl_jv_t v)
{
    return v.type == IPL_JV_INT || v.type == IPL_JV_FLOAT || v.type == IPL_JV_BOOL;
}

static double s_f(ipl_jv_t v)
{
    return v.type == IPL_JV_FLOAT ? v.u.f : v.type == IPL_JV_INT ? (double)v.u.i : v.u.b;
}

static int64_t s_i(ipl_jv_t v)
{
    return v.type == IPL_JV_INT ? v.u.i : v.type == IPL_JV_BOOL ? v.u.b : 0;
}

static ipl_jv_t s_repeat(s_ctx_t *c, ipl_jv_t seq, int64_t times)
{
    if (times < 0) times = 0;
    if (seq.type == IPL_JV_STR) {
        if (seq.u.s.n && (uint64_t)times > c->max_output / seq.u.s.n)
            s_fail(c, IPL_E_RANGE, "string repetition beyond %zu bytes", c->max_output);
        ipl_jbuf_t b;
        s_buf_init(c, &b);
        for (int64_t i = 0; i < times; i++) ipl_jbuf_put(&b, seq.u.s.p, seq.u.s.n);
        return ipl_jbuf_value(&b);
    }
    if (seq.flags & IPL_JV_F_GEN) s_fail(c, IPL_E_TYPE, "a generator cannot be repeated with '*'");
    size_t n = seq.u.l->n;
    if (n && (uint64_t)times > c->env.max_list / n)
        s_fail(c, IPL_E_RANGE, "list repetition beyond %zu items", c->env.max_list);
    ipl_jv_t out = ipl_jv_list(&c->a, n * (size_t)times);
    out.flags = seq.flags;
    for (int64_t i = 0; i < times; i++)
        for (size_t k = 0; k < n; k++) ipl_jlist_push(&c->a, &out, seq.u.l->v[k]);
    return out;
}

static ipl_jv_t s_binop(s_ctx_t *c, int op, ipl_jv_t a, ipl_jv_t b)
{
    if (op == IPL_JOP_TILDE) {
        ipl_jbuf_t buf;
        s_buf_init(c, &buf);
        if (ipl_jv_write_str(&buf, a) < 0 || ipl_jv_write_str(&buf, b) < 0)
            s_fail(c, IPL_E_TYPE, "cannot convert a %s or %s to a string", ipl_jv_type_name(a),
                   ipl_jv_type_name(b));
        return ipl_jbuf_value(&buf);
    }
    if (a.type == IPL_JV_UNDEF || b.type == IPL_JV_UNDEF)
        s_fail(c, IPL_E_TYPE, "an undefined value used with '%s'", ipl_jop_text(op));
    if (s_numeric(a) && s_numeric(b)) {
        bool ints = a.type != IPL_JV_FLOAT && b.type != IPL_JV_FLOAT;
        int64_t x = s_i(a), y = s_i(b), r;
        double fx = s_f(a), fy = s_f(b);
        switch (op) {
        case IPL_JOP_ADD:
            if (ints && !__builtin_add_overflow(x, y, &r)) return ipl_jv_int(r);
            if (ints) break;
            return ipl_jv_float(fx + fy);
        case IPL_JOP_SUB:
            if (ints && !__builtin_sub_overflow(x, y, &r)) return ipl_jv_int(r);
            if (ints) break;
            return ipl_jv_float(fx - fy);
        case IPL_JOP_MUL:
            if (ints && !__builtin_mul_overflow(x, y, &r)) return ipl_jv_int(r);
            if (ints) break;
            return ipl_jv_float(fx * fy);
        case IPL_JOP_DIV:
            if (fy == 0.0) s_fail(c, IPL_E_TYPE, "division by zero");
            return ipl_jv_float(fx / fy);
        case IPL_JOP_FLOORDIV:
        case IPL_JOP_MOD:
            if (ints) {
                if (y == 0) s_fail(c, IPL_E_TYPE, "integer division or modulo by zero");
                if (x == INT64_MIN && y == -1) break;
                int64_t q = x / y, m = x % y;
                if (m != 0 && ((m < 0) != (y < 0))) {
                    q--;
                    m += y;
                }
                return ipl_jv_int(op == IPL_JOP_MOD ? m : q);
            } else {
                if (fy == 0.0) s_fail(c, IPL_E_TYPE, "float division or modulo by zero");
                /* CPython's float_divmod */
                double m = fmod(fx, fy), d = (fx - m) / fy;
                if (m != 0.0) {
                    if ((fy < 0) != (m < 0)) {
                        m += fy;
                        d -= 1.0;
                    }
                } else {
                    m = copysign(0.0, fy);
                }
                double q = d != 0.0 ? floor(d) : copysign(0.0, fx / fy);
                if (d != 0.0 && d - q > 0.5) q += 1.0;
                return ipl_jv_float(op == IPL_JOP_MOD ? m : q);
            }
        case IPL_JOP_POW:
            if (ints && y >= 0) {
                int64_t acc = 1, base = x, e = y;
                bool ovf = false;
                while (e > 0 && !ovf) {
                    if (e & 1) ovf = __builtin_mul_overflow(acc, base, &acc);
                    e >>= 1;
                    if (e > 0 && !ovf) ovf = __builtin_mul_overflow(base, base, &base);
                }
                if (!ovf) return ipl_jv_int(acc);
                break;
            }
            if (fx == 0.0 && fy < 0) s_fail(c, IPL_E_TYPE, "0.0 cannot be raised to a negative power");
            {
                double p = pow(fx, fy);
                if (isnan(p) && !isnan(fx) && !isnan(fy))
                    s_fail(c, IPL_E_TYPE, "a negative number raised to a fractional power");
                return ipl_jv_float(p);
            }
        default:
            break;
        }
        s_fail(c, IPL_E_RANGE, "integer overflow in '%s' (Python integers are unbounded; "
                               "this engine's are 64-bit)", ipl_jop_text(op));
    }
    if (op == IPL_JOP_ADD && a.type == IPL_JV_STR && b.type == IPL_JV_STR) {
        ipl_jbuf_t buf;
        s_buf_init(c, &buf);
        ipl_jbuf_put(&buf, a.u.s.p, a.u.s.n);
        ipl_jbuf_put(&buf, b.u.s.p, b.u.s.n);
        return ipl_jbuf_value(&buf);
    }
    if (op == IPL_JOP_ADD && a.type == IPL_JV_LIST && b.type == IPL_JV_LIST &&
        !((a.flags | b.flags) & IPL_JV_F_GEN) &&
        (a.flags & IPL_JV_F_TUPLE) == (b.flags & IPL_JV_F_TUPLE)) {
        ipl_jv_t out = ipl_jv_list(&c->a, a.u.l->n + b.u.l->n);
        out.flags = a.flags;
        for (size_t i = 0; i < a.u.l->n; i++) ipl_jlist_push(&c->a, &out, a.u.l->v[i]);
        for (size_t i = 0; i < b.u.l->n; i++) ipl_jlist_push(&c->a, &out, b.u.l->v[i]);
        return out;
    }
    if (op == IPL_JOP_MUL) {
        if ((a.type == IPL_JV_STR || a.type == IPL_JV_LIST) &&
            (b.type == IPL_JV_INT || b.type == IPL_JV_BOOL))
            return s_repeat(c, a, s_i(b));
        if ((b.type == IPL_JV_STR || b.type == IPL_JV_LIST) &&
            (a.type == IPL_JV_INT || a.type == IPL_JV_BOOL))
            return s_repeat(c, b, s_i(a));
    }
    if (op == IPL_JOP_MOD && a.type == IPL_JV_STR) return ipl_jbuiltin_percent(&c->env, a, b);
    s_fail(c, IPL_E_TYPE, "unsupported operand type(s) for %s: '%s' and '%s'", ipl_jop_text(op),
           ipl_jv_type_name(a), ipl_jv_type_name(b));
}

static bool s_compare(s_ctx_t *c, int op, ipl_jv_t a, ipl_jv_t b)
{
    bool lt;
    switch (op) {
    case IPL_JOP_EQ:
        return ipl_jv_equal(a, b);
    case IPL_JOP_NE:
        return !ipl_jv_equal(a, b);
    case IPL_JCMP_IN:
        return ipl_jbuiltin_contains(&c->env, b, a);
    case IPL_JCMP_NOTIN:
        return !ipl_jbuiltin_contains(&c->env, b, a);
    default:
        break;
    }
    bool swap = op == IPL_JOP_GT || op == IPL_JOP_LTEQ;
    if (ipl_jv_less(swap ? b : a, swap ? a : b, &lt) < 0)
        s_fail(c, IPL_E_TYPE, "'%s' not supported between instances of '%s' and '%s'",
               ipl_jop_text(op), ipl_jv_type_name(a), ipl_jv_type_name(b));
    /* LT: a<b; GT: b<a; LTEQ: !(b<a); GTEQ: !(a<b) */
    return op == IPL_JOP_LT || op == IPL_JOP_GT ? lt : !lt;
}

/* ---- expressions ------------------------------------------------------------------------ */

static ipl_jv_t s_filter(s_ctx_t *c, const ipl_jnode_t *n, s_scope_t *sc)
{
    ipl_jv_t operand = n->kids[0] ? s_eval(c, n->kids[0], sc) : c->hole;
    ipl_jargs_t args;
    s_args(c, n, 1, sc, &args);
    c->at = n;
    return ipl_jbuiltin_filter(&c->env, n->id, operand, &args);
}

static ipl_jv_t s_eval(s_ctx_t *c, const ipl_jnode_t *n, s_scope_t *sc)
{
    c->at = n;
    switch (n->kind) {
    case IPL_JN_CONST:
        return n->val;
    case IPL_JN_NAME: {
        ipl_jv_t *v = s_lookup(sc, n->val);
        if (v) return *v;
        int id = ipl_jbuiltin_global_id(n->val.u.s.p, n->val.u.s.n);
        if (id >= 0) return s_call_value(c, S_CALL_GLOBAL, (const void *)(intptr_t)id);
        return ipl_jv_undef();
    }
    case IPL_JN_GETATTR: {
        ipl_jv_t obj = s_eval(c, n->kids[0], sc);
        c->at = n;
        if (obj.type == IPL_JV_UNDEF) s_undefined_access(c, n);
        return s_getattr(c, obj, n->val.u.s.p, n->val.u.s.n);
    }
    case IPL_JN_GETITEM: {
        ipl_jv_t obj = s_eval(c, n->kids[0], sc);
        ipl_jv_t key = s_eval(c, n->kids[1], sc);
        c->at = n;
        if (obj.type == IPL_JV_UNDEF) s_undefined_access(c, n);
        return s_getitem(c, obj, key);
    }
    case IPL_JN_SLICE:
        return s_slice(c, n, sc);
    case IPL_JN_CALL:
        return s_eval_call(c, n, sc, NULL);
    case IPL_JN_METHOD: {
        ipl_jv_t self = s_eval(c, n->kids[0], sc);
        c->at = n;
        if (self.type == IPL_JV_UNDEF)
            s_fail(c, IPL_E_TYPE, "'%.*s()' called on an undefined value", s_name_len(n),
                   s_name_of(n));
        ipl_jargs_t args;
        s_args(c, n, 1, sc, &args);
        c->at = n;
        return ipl_jbuiltin_method(&c->env, n->id, self, &args);
    }
    case IPL_JN_FILTER:
        return s_filter(c, n, sc);
    case IPL_JN_TEST: {
        ipl_jv_t operand = s_eval(c, n->kids[0], sc);
        ipl_jargs_t args;
        s_args(c, n, 1, sc, &args);
        c->at = n;
        bool r = ipl_jbuiltin_test(&c->env, n->id, operand, &args);
        return ipl_jv_bool(n->op ? !r : r);
    }
    case IPL_JN_NEG:
    case IPL_JN_POS: {
        ipl_jv_t v = s_eval(c, n->kids[0], sc);
        c->at = n;
        if (v.type == IPL_JV_BOOL) v = ipl_jv_int(v.u.b);
        if (v.type == IPL_JV_INT) {
            if (n->kind == IPL_JN_POS) return v;
            if (v.u.i == INT64_MIN) s_fail(c, IPL_E_RANGE, "integer overflow");
            return ipl_jv_int(-v.u.i);
        }
        if (v.type == IPL_JV_FLOAT) return ipl_jv_float(n->kind == IPL_JN_NEG ? -v.u.f : v.u.f);
        s_fail(c, IPL_E_TYPE, "bad operand type for unary %s: '%s'",
               n->kind == IPL_JN_NEG ? "-" : "+", ipl_jv_type_name(v));
    }
    case IPL_JN_NOT:
        return ipl_jv_bool(!ipl_jv_truthy(s_eval(c, n->kids[0], sc)));
    case IPL_JN_AND: {
        ipl_jv_t a = s_eval(c, n->kids[0], sc);
        return ipl_jv_truthy(a) ? s_eval(c, n->kids[1], sc) : a;
    }
    case IPL_JN_OR: {
        ipl_jv_t a = s_eval(c, n->kids[0], sc);
        return ipl_jv_truthy(a) ? a : s_eval(c, n->kids[1], sc);
    }
    case IPL_JN_BINOP: {
        ipl_jv_t a = s_eval(c, n->kids[0], sc);
        ipl_jv_t b = s_eval(c, n->kids[1], sc);
        c->at = n;
        return s_binop(c, n->op, a, b);
    }
    case IPL_JN_COMPARE: {
        ipl_jv_t a = s_eval(c, n->kids[0], sc);
        for (uint32_t i = 1; i < n->nkids; i++) {
            ipl_jv_t b = s_eval(c, n->kids[i], sc);
            c->at = n;
            if (!s_compare(c, n->ops[i - 1], a, b)) return ipl_jv_bool(false);
            a = b;
        }
        return ipl_jv_bool(true);
    }
    case IPL_JN_COND:
        if (ipl_jv_truthy(s_eval(c, n->kids[0], sc))) return s_eval(c, n->kids[1], sc);
        return n->kids[2] ? s_eval(c, n->kids[2], sc) : ipl_jv_undef();
    case IPL_JN_LIST:
    case IPL_JN_TUPLE: {
        ipl_jv_t l = ipl_jv_list(&c->a, n->nkids);
        for (uint32_t i = 0; i < n->nkids; i++) ipl_jlist_push(&c->a, &l, s_eval(c, n->kids[i], sc));
        if (n->kind == IPL_JN_TUPLE) l.flags |= IPL_JV_F_TUPLE;
        return l;
    }
    case IPL_JN_DICT: {
        ipl_jv_t d = ipl_jv_dict(&c->a, n->nkids / 2);
        for (uint32_t i = 0; i + 1 < n->nkids; i += 2) {
            ipl_jv_t k = s_eval(c, n->kids[i], sc);
            if (k.type == IPL_JV_LIST && !(k.flags & IPL_JV_F_TUPLE))
                s_fail(c, IPL_E_TYPE, "unhashable type: 'list'");
            if (k.type == IPL_JV_DICT || k.type == IPL_JV_UNDEF)
                s_fail(c, IPL_E_TYPE, "unhashable dict key: '%s'", ipl_jv_type_name(k));
            ipl_jdict_set(&c->a, &d, k, s_eval(c, n->kids[i + 1], sc));
        }
        return d;
    }
    default:
        s_fail(c, IPL_E_TYPE, "internal: node kind %d is not an expression", n->kind);
    }
}

/* ---- statements ------------------------------------------------------------------------- */

static void s_assign(s_ctx_t *c, const ipl_jnode_t *target, ipl_jv_t v, s_scope_t *sc)
{
    c->at = target;
    if (target->kind == IPL_JN_NAME) {
        s_scope_set(c, sc, target->val, v);
    } else if (target->kind == IPL_JN_TUPLE) {
        if (v.type != IPL_JV_LIST)
            s_fail(c, IPL_E_TYPE, "cannot unpack a %s into %u names", ipl_jv_type_name(v),
                   target->nkids);
        if (v.u.l->n != target->nkids)
            s_fail(c, IPL_E_TYPE, "%s values to unpack (expected %u, got %zu)",
                   v.u.l->n < target->nkids ? "not enough" : "too many", target->nkids,
                   v.u.l->n);
        for (uint32_t i = 0; i < target->nkids; i++)
            s_scope_set(c, sc, target->kids[i]->val, v.u.l->v[i]);
    } else { /* GETATTR: namespace attribute */
        ipl_jv_t *ns = s_lookup(sc, target->kids[0]->val);
        if (!ns || ns->type != IPL_JV_NS)
            s_fail(c, IPL_E_TYPE, "cannot assign attribute on non-namespace object");
        ipl_jdict_set(&c->a, ns, target->val, v);
    }
}

/* The items a for loop walks: lists, dict keys, string characters, nothing for undefined. */
static ipl_jv_t s_iterable(s_ctx_t *c, ipl_jv_t v)
{
    switch (v.type) {
    case IPL_JV_LIST:
        return v;
    case IPL_JV_UNDEF:
        return ipl_jv_list(&c->a, 0);
    case IPL_JV_DICT: {
        ipl_jv_t keys = ipl_jv_list(&c->a, v.u.d->n);
        for (size_t i = 0; i < v.u.d->n; i++) ipl_jlist_push(&c->a, &keys, v.u.d->k[i]);
        return keys;
    }
    case IPL_JV_STR: {
        ipl_jv_t chars = ipl_jv_list(&c->a, 0);
        size_t off = 0;
        while (off < v.u.s.n) {
            size_t k = ipl_jv_offset(v.u.s.p + off, v.u.s.n - off, 1);
            ipl_jlist_push(&c->a, &chars, ipl_jv_str(v.u.s.p + off, k));
            off += k;
        }
        return chars;
    }
    default:
        s_fail(c, IPL_E_TYPE, "'%s' object is not iterable", ipl_jv_type_name(v));
    }
}

enum { S_L_INDEX, S_L_INDEX0, S_L_REVINDEX, S_L_REVINDEX0, S_L_FIRST, S_L_LAST, S_L_LENGTH,
       S_L_PREVITEM, S_L_NEXTITEM, S_L_DEPTH, S_L_DEPTH0, S_L_COUNT };
static const char *const s_loop_keys[S_L_COUNT] = {
    "index", "index0", "revindex", "revindex0", "first", "last", "length",
    "previtem", "nextitem", "depth", "depth0"};
static const size_t s_loop_key_len[S_L_COUNT] = {5, 6, 8, 9, 5, 4, 6, 8, 8, 5, 6};

/* Jinja2's loop, including two of its quirks that change what a template prints:
 *   - each iteration runs in a fresh scope (Jinja2 enters the loop frame inside the Python
 *     for statement), so a {% set %} in the body does not carry over to the next iteration;
 *   - the else block runs when no iteration reached the end of the body: an empty loop, but
 *     also one whose every iteration ended in {% continue %}, or that broke in the first one.
 * The else block sees the enclosing scope (an outer loop's `loop`, not this one's). */
static void s_for(s_ctx_t *c, const ipl_jnode_t *n, s_scope_t *sc)
{
    ipl_jv_t items = s_iterable(c, s_eval(c, n->kids[1], sc));
    const ipl_jnode_t *target = n->kids[0], *cond = n->kids[2], *body = n->kids[3];
    if (cond) { /* the loop filter runs first: loop.length counts what it keeps */
        ipl_jv_t kept = ipl_jv_list(&c->a, 0);
        for (size_t i = 0; i < items.u.l->n; i++) {
            s_count(c);
            s_scope_t *test = s_scope_new(c, sc);
            s_assign(c, target, items.u.l->v[i], test);
            if (ipl_jv_truthy(s_eval(c, cond, test))) ipl_jlist_push(&c->a, &kept, items.u.l->v[i]);
        }
        items = kept;
    }
    size_t len = items.u.l->n;
    bool completed = false;
    for (size_t i = 0; i < len; i++) {
        s_count(c);
        ipl_jv_t loop = ipl_jv_dict(&c->a, S_L_COUNT);
        ipl_jv_t v[S_L_COUNT] = {
            [S_L_INDEX] = ipl_jv_int((int64_t)i + 1),
            [S_L_INDEX0] = ipl_jv_int((int64_t)i),
            [S_L_REVINDEX] = ipl_jv_int((int64_t)(len - i)),
            [S_L_REVINDEX0] = ipl_jv_int((int64_t)(len - i - 1)),
            [S_L_FIRST] = ipl_jv_bool(i == 0),
            [S_L_LAST] = ipl_jv_bool(i + 1 == len),
            [S_L_LENGTH] = ipl_jv_int((int64_t)len),
            [S_L_PREVITEM] = i ? items.u.l->v[i - 1] : ipl_jv_undef(),
            [S_L_NEXTITEM] = i + 1 < len ? items.u.l->v[i + 1] : ipl_jv_undef(),
            [S_L_DEPTH] = ipl_jv_int(1),
            [S_L_DEPTH0] = ipl_jv_int(0),
        };
        /* the keys are distinct: fill the dict directly */
        for (int k = 0; k < S_L_COUNT; k++) {
            loop.u.d->k[k] = ipl_jv_str(s_loop_keys[k], s_loop_key_len[k]);
            loop.u.d->v[k] = v[k];
        }
        loop.u.d->n = S_L_COUNT;
        s_scope_t *it = s_scope_new(c, sc);
        s_scope_set(c, it, ipl_jv_cstr("loop"), loop);
        s_assign(c, target, items.u.l->v[i], it);
        s_exec(c, body, it);
        int ctl = c->loop_ctl;
        c->loop_ctl = 0;
        if (ctl == 1) break;
        if (ctl == 0) completed = true;
    }
    if (!completed && n->kids[4]) s_exec(c, n->kids[4], s_scope_new(c, sc));
}

/* {{ v }}: str(v) into the current output. */
static void s_print(s_ctx_t *c, ipl_jv_t v)
{
    if (ipl_jv_write_str(c->out, v) < 0)
        s_fail(c, IPL_E_TYPE, "cannot print a %s", ipl_jv_type_name(v));
}

static void s_exec(s_ctx_t *c, const ipl_jnode_t *n, s_scope_t *sc)
{
    c->at = n;
    switch (n->kind) {
    case IPL_JN_BODY:
        for (uint32_t i = 0; i < n->nkids; i++) {
            s_exec(c, n->kids[i], sc);
            if (c->loop_ctl) return;
        }
        return;
    case IPL_JN_DATA:
        ipl_jbuf_put(c->out, n->val.u.s.p, n->val.u.s.n);
        return;
    case IPL_JN_OUTPUT: {
        ipl_jv_t v = s_eval(c, n->kids[0], sc);
        c->at = n;
        s_print(c, v);
        return;
    }
    case IPL_JN_IF:
        if (ipl_jv_truthy(s_eval(c, n->kids[0], sc)))
            s_exec(c, n->kids[1], sc);
        else if (n->kids[2])
            s_exec(c, n->kids[2], sc);
        return;
    case IPL_JN_FOR:
        s_for(c, n, sc);
        return;
    case IPL_JN_SET:
        s_assign(c, n->kids[0], s_eval(c, n->kids[1], sc), sc);
        return;
    case IPL_JN_SETBLOCK: {
        /* the body has a scope of its own (Jinja2's frame.inner()): its sets stay inside */
        ipl_jv_t v = s_capture(c, n->kids[1], s_scope_new(c, sc));
        if (n->kids[2]) {
            ipl_jv_t saved = c->hole;
            c->hole = v;
            v = s_eval(c, n->kids[2], sc);
            c->hole = saved;
        }
        s_assign(c, n->kids[0], v, sc);
        return;
    }
    case IPL_JN_MACRO: {
        s_macro_t *m = ipl_jarena_alloc(&c->a, sizeof *m);
        m->node = n;
        m->closure = sc;
        s_scope_set(c, sc, n->val, s_call_value(c, S_CALL_MACRO, m));
        return;
    }
    case IPL_JN_CALLBLOCK: {
        s_macro_t *m = ipl_jarena_alloc(&c->a, sizeof *m);
        m->node = n;
        m->closure = sc;
        ipl_jv_t caller = s_call_value(c, S_CALL_CALLER, m);
        ipl_jv_t v = s_eval_call(c, n->kids[0], sc, &caller);
        c->at = n;
        s_print(c, v);
        return;
    }
    case IPL_JN_FILTERBLOCK: {
        ipl_jv_t saved = c->hole;
        c->hole = s_capture(c, n->kids[1], s_scope_new(c, sc)); /* a scope of its own */
        ipl_jv_t v = s_eval(c, n->kids[0], sc);
        c->hole = saved;
        s_print(c, v);
        return;
    }
    case IPL_JN_BREAK:
        c->loop_ctl = 1;
        return;
    case IPL_JN_CONTINUE:
        c->loop_ctl = 2;
        return;
    default: {
        /* an expression in statement position (not produced by the parser) */
        (void)s_eval(c, n, sc);
        return;
    }
    }
}

/* ---- the class -------------------------------------------------------------------------- */

ipl_jinja_t *ipl_jinja_new(const char *src, size_t len, char *err, size_t errlen)
{
    if (err && errlen) err[0] = '\0';
    ipl_jinja_t *self = calloc(1, sizeof *self);
    if (!self) {
        if (err && errlen) snprintf(err, errlen, "out of memory");
        return NULL;
    }
    ipl_jarena_init(&self->arena, 0, NULL, NULL);
    ipl_jtok_t *toks;
    size_t ntoks;
    if (ipl_jlex(src, len, &self->arena, &toks, &ntoks, err, errlen) < 0 ||
        !(self->root = ipl_jparse(toks, ntoks, &self->arena, S_PARSE_DEPTH, err, errlen))) {
        ipl_jinja_destroy(&self);
        return NULL;
    }
    return self;
}

void ipl_jinja_destroy(ipl_jinja_t **self_p)
{
    if (!self_p || !*self_p) return;
    ipl_jarena_free(&(*self_p)->arena);
    free(*self_p);
    *self_p = NULL;
}

static bool s_uses(const ipl_jnode_t *n, const char *name, size_t len)
{
    if (!n) return false;
    if (n->kind == IPL_JN_NAME && n->val.u.s.n == len && memcmp(n->val.u.s.p, name, len) == 0)
        return true;
    for (uint32_t i = 0; i < n->nkids; i++)
        if (s_uses(n->kids[i], name, len)) return true;
    return false;
}

bool ipl_jinja_uses(const ipl_jinja_t *self, const char *name)
{
    return self && name && s_uses(self->root, name, strlen(name));
}

int ipl_jinja_render(const ipl_jinja_t *self, const cJSON *vars, const ipl_jinja_limits_t *limits,
                     char **out, size_t *len, char *err, size_t errlen)
{
    if (err && errlen) err[0] = '\0';
    if (out) *out = NULL;
    if (len) *len = 0;
    if (!self || !out) return IPL_E_INVAL;
    ipl_jinja_limits_t lim = limits ? *limits : (ipl_jinja_limits_t){0};
    if (!lim.max_output) lim.max_output = 4u << 20;
    if (!lim.max_memory) lim.max_memory = 64u << 20;
    if (!lim.max_iterations) lim.max_iterations = 1000000;
    if (lim.max_call_depth <= 0) lim.max_call_depth = 40;
    /* volatile: read after longjmp */
    s_ctx_t *volatile c = calloc(1, sizeof *c);
    if (!c) return IPL_E_NOMEM;
    c->env.fail = s_env_fail;
    c->env.a = &c->a;
    c->env.now = lim.now;
    c->env.max_list = lim.max_output; /* no list is worth more items than output bytes */
    c->err = err;
    c->errlen = errlen;
    c->max_output = lim.max_output;
    c->max_iterations = lim.max_iterations;
    c->max_depth = lim.max_call_depth;
    ipl_jarena_init(&c->a, lim.max_memory, s_oom, c);
    int rc;
    if (setjmp(c->jb)) {
        rc = c->rc ? c->rc : IPL_E_INVAL;
    } else {
        s_scope_t *root = s_scope_new(c, NULL);
        if (vars && cJSON_IsObject(vars))
            for (const cJSON *v = vars->child; v; v = v->next)
                if (v->string) s_scope_set(c, root, ipl_jv_cstr(v->string), ipl_jv_from_json(&c->a, v));
        s_scope_t *top = s_scope_new(c, root);
        ipl_jbuf_t b;
        s_buf_init(c, &b);
        c->out = &b;
        s_exec(c, self->root, top);
        char *text = malloc(b.n + 1);
        if (!text) {
            rc = IPL_E_NOMEM;
            if (err && errlen) snprintf(err, errlen, "out of memory");
        } else {
            if (b.n) memcpy(text, b.p, b.n);
            text[b.n] = '\0';
            *out = text;
            if (len) *len = b.n;
            rc = 0;
        }
    }
    ipl_jarena_free(&c->a);
    free(c);
    return rc;
}
