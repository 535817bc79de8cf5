/*
 * ipl_jinja_ast — recursive-descent parser for Jinja templates (see ipl_jinja_ast.h).
 *
 * The functions mirror jinja2/parser.py's (parse_condexpr, parse_or, ...), so precedence and
 * associativity can be checked against it line by line. Errors unwind with longjmp to
 * ipl_jparse: every allocation is in the template's arena, so nothing leaks.
 */
#include "ipl_jinja_ast.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "ipl_jinja_builtin.h"

#define S_MAX_MACROS 256

typedef struct {
    const ipl_jtok_t *t; /* tokens; the last is EOF */
    size_t n, i;
    ipl_jarena_t *a;
    char *err;
    size_t errlen;
    jmp_buf jb;
    int depth, max_depth;
    ipl_jnode_t *macro; /* the innermost macro or call block being parsed (for flags) */
    /* calls of non-global names, checked against the macro names at the end */
    ipl_jnode_t **calls;
    size_t ncalls, calls_cap;
    const ipl_jnode_t *macros[S_MAX_MACROS];
    size_t nmacros;
} s_parser_t;

static void s_fail_at(s_parser_t *p, uint32_t line, uint32_t col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5), noreturn));

static void s_fail_at(s_parser_t *p, uint32_t line, uint32_t col, const char *fmt, ...)
{
    if (p->err && p->errlen) {
        int k = snprintf(p->err, p->errlen, "%u:%u: ", line, col);
        if (k >= 0 && (size_t)k < p->errlen) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(p->err + k, p->errlen - (size_t)k, fmt, ap);
            va_end(ap);
        }
    }
    longjmp(p->jb, 1);
}

#define s_fail(p, fmt, ...)                                                                   \
    s_fail_at((p), (p)->t[(p)->i].line, (p)->t[(p)->i].col, fmt, ##__VA_ARGS__)

static const ipl_jtok_t *s_cur(s_parser_t *p)
{
    return &p->t[p->i];
}

static const ipl_jtok_t *s_peek(s_parser_t *p, size_t k)
{
    size_t j = p->i + k;
    return &p->t[j < p->n ? j : p->n - 1];
}

static void s_next(s_parser_t *p)
{
    if (p->i + 1 < p->n) p->i++;
}

static bool s_is_op(const ipl_jtok_t *t, int op)
{
    return t->type == IPL_JT_OP && t->op == op;
}

static bool s_is_name(const ipl_jtok_t *t, const char *name)
{
    size_t n = strlen(name);
    return t->type == IPL_JT_NAME && t->n == n && memcmp(t->p, name, n) == 0;
}

static bool s_skip_op(s_parser_t *p, int op)
{
    if (!s_is_op(s_cur(p), op)) return false;
    s_next(p);
    return true;
}

static bool s_skip_name(s_parser_t *p, const char *name)
{
    if (!s_is_name(s_cur(p), name)) return false;
    s_next(p);
    return true;
}

static const char *s_describe(const ipl_jtok_t *t, char *buf, size_t n)
{
    switch (t->type) {
    case IPL_JT_EOF: return "end of template";
    case IPL_JT_DATA: return "text";
    case IPL_JT_VAR_BEGIN: return "'{{'";
    case IPL_JT_VAR_END: return "'}}'";
    case IPL_JT_BLOCK_BEGIN: return "'{%'";
    case IPL_JT_BLOCK_END: return "'%}'";
    case IPL_JT_NAME: snprintf(buf, n, "'%.*s'", (int)(t->n > 40 ? 40 : t->n), t->p); return buf;
    case IPL_JT_STRING: return "a string";
    case IPL_JT_INT:
    case IPL_JT_FLOAT: return "a number";
    default: snprintf(buf, n, "'%s'", ipl_jop_text(t->op)); return buf;
    }
}

static void s_expect_op(s_parser_t *p, int op)
{
    if (s_skip_op(p, op)) return;
    char b[64];
    s_fail(p, "expected '%s', got %s", ipl_jop_text(op), s_describe(s_cur(p), b, sizeof b));
}

static void s_expect_type(s_parser_t *p, int type, const char *what)
{
    if (s_cur(p)->type == type) {
        s_next(p);
        return;
    }
    char b[64];
    s_fail(p, "expected %s, got %s", what, s_describe(s_cur(p), b, sizeof b));
}

static void *s_alloc(s_parser_t *p, size_t n)
{
    void *m = ipl_jarena_zalloc(p->a, n);
    if (!m) s_fail(p, "out of memory");
    return m;
}

static ipl_jnode_t *s_node(s_parser_t *p, int kind, const ipl_jtok_t *at)
{
    ipl_jnode_t *nd = s_alloc(p, sizeof *nd);
    nd->kind = (uint8_t)kind;
    nd->id = -1;
    nd->line = at->line;
    nd->col = at->col;
    return nd;
}

/* A growable list of nodes used while parsing (copied into the node when done). */
typedef struct {
    ipl_jnode_t **v;
    size_t n, cap;
} s_vec_t;

static void s_vec_push(s_parser_t *p, s_vec_t *v, ipl_jnode_t *nd)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 4;
        ipl_jnode_t **nv = s_alloc(p, cap * sizeof *nv);
        if (v->n) memcpy(nv, v->v, v->n * sizeof *nv);
        v->v = nv;
        v->cap = cap;
    }
    v->v[v->n++] = nd;
}

static void s_set_kids(ipl_jnode_t *nd, s_vec_t *v)
{
    nd->kids = v->v;
    nd->nkids = (uint32_t)v->n;
}

static ipl_jnode_t *s_node_kids(s_parser_t *p, int kind, const ipl_jtok_t *at, size_t n, ...)
{
    ipl_jnode_t *nd = s_node(p, kind, at);
    nd->kids = s_alloc(p, (n ? n : 1) * sizeof *nd->kids);
    nd->nkids = (uint32_t)n;
    va_list ap;
    va_start(ap, n);
    for (size_t i = 0; i < n; i++) nd->kids[i] = va_arg(ap, ipl_jnode_t *);
    va_end(ap);
    return nd;
}

static void s_enter(s_parser_t *p)
{
    if (++p->depth > p->max_depth) s_fail(p, "template nested too deeply (limit %d)", p->max_depth);
}

static void s_leave(s_parser_t *p)
{
    p->depth--;
}

static ipl_jv_t s_tok_str(const ipl_jtok_t *t)
{
    return ipl_jv_str(t->p, t->n);
}

/* ---- expressions ------------------------------------------------------------------------ */

static ipl_jnode_t *s_expression(s_parser_t *p, bool with_condexpr);
static ipl_jnode_t *s_unary(s_parser_t *p, bool with_filter);
static ipl_jnode_t *s_primary(s_parser_t *p);
static ipl_jnode_t *s_postfix(s_parser_t *p, ipl_jnode_t *node);

/* `a, b, c` (a TUPLE when there is a comma). `end_name`: a keyword that also ends it. */
static ipl_jnode_t *s_tuple(s_parser_t *p, bool with_condexpr, const char *end_name,
                            bool explicit_parens)
{
    const ipl_jtok_t *at = s_cur(p);
    s_vec_t items = {0};
    bool is_tuple = false;
    for (;;) {
        if (items.n) s_expect_op(p, IPL_JOP_COMMA);
        const ipl_jtok_t *t = s_cur(p);
        if (t->type == IPL_JT_VAR_END || t->type == IPL_JT_BLOCK_END ||
            s_is_op(t, IPL_JOP_RPAREN) || (end_name && s_is_name(t, end_name)))
            break;
        s_vec_push(p, &items, s_expression(p, with_condexpr));
        if (s_is_op(s_cur(p), IPL_JOP_COMMA))
            is_tuple = true;
        else
            break;
    }
    if (!is_tuple) {
        if (items.n) return items.v[0];
        if (!explicit_parens) s_fail(p, "expected an expression");
    }
    ipl_jnode_t *nd = s_node(p, IPL_JN_TUPLE, at);
    s_set_kids(nd, &items);
    return nd;
}

/* Call arguments after "(": positional, then name=value. */
static void s_call_args(s_parser_t *p, s_vec_t *args)
{
    s_expect_op(p, IPL_JOP_LPAREN);
    bool any = false, kw = false;
    while (!s_is_op(s_cur(p), IPL_JOP_RPAREN)) {
        if (any) {
            s_expect_op(p, IPL_JOP_COMMA);
            if (s_is_op(s_cur(p), IPL_JOP_RPAREN)) break;
        }
        if (s_is_op(s_cur(p), IPL_JOP_MUL) || s_is_op(s_cur(p), IPL_JOP_POW))
            s_fail(p, "*args and **kwargs in calls are not supported");
        const ipl_jtok_t *t = s_cur(p);
        if (t->type == IPL_JT_NAME && s_is_op(s_peek(p, 1), IPL_JOP_ASSIGN)) {
            s_next(p);
            s_next(p);
            ipl_jnode_t *k = s_node_kids(p, IPL_JN_KWARG, t, 1, s_expression(p, true));
            k->val = s_tok_str(t);
            s_vec_push(p, args, k);
            kw = true;
        } else {
            if (kw) s_fail(p, "a positional argument after keyword arguments");
            s_vec_push(p, args, s_expression(p, true));
        }
        any = true;
    }
    s_expect_op(p, IPL_JOP_RPAREN);
}

/* node(args): a method call when node is `obj.name`, a function call when it is a name. */
static ipl_jnode_t *s_call(s_parser_t *p, ipl_jnode_t *callee)
{
    const ipl_jtok_t *at = s_cur(p);
    s_vec_t args = {0};
    ipl_jnode_t *nd;
    if (callee->kind == IPL_JN_GETATTR) {
        int id = ipl_jbuiltin_method_id(callee->val.u.s.p, callee->val.u.s.n);
        if (id < 0)
            s_fail_at(p, callee->line, callee->col, "unsupported method '%.*s()'",
                      (int)callee->val.u.s.n, callee->val.u.s.p);
        nd = s_node(p, IPL_JN_METHOD, at);
        nd->id = (int16_t)id;
        nd->val = callee->val;
        s_vec_push(p, &args, callee->kids[0]);
    } else if (callee->kind == IPL_JN_NAME) {
        nd = s_node(p, IPL_JN_CALL, at);
        nd->val = callee->val;
        nd->line = callee->line;
        nd->col = callee->col;
        nd->id = (int16_t)ipl_jbuiltin_global_id(callee->val.u.s.p, callee->val.u.s.n);
        if (nd->id < 0) {
            if (p->ncalls == p->calls_cap) {
                size_t cap = p->calls_cap ? p->calls_cap * 2 : 16;
                ipl_jnode_t **nc = s_alloc(p, cap * sizeof *nc);
                if (p->ncalls) memcpy(nc, p->calls, p->ncalls * sizeof *nc);
                p->calls = nc;
                p->calls_cap = cap;
            }
            p->calls[p->ncalls++] = nd;
        }
    } else {
        s_fail(p, "only functions, macros and methods can be called here");
    }
    s_call_args(p, &args);
    s_set_kids(nd, &args);
    return nd;
}

/* The subscript inside [ ]: an expression or a slice a:b:c. */
static ipl_jnode_t *s_subscript(s_parser_t *p, ipl_jnode_t *obj, const ipl_jtok_t *at)
{
    ipl_jnode_t *parts[3] = {NULL, NULL, NULL};
    if (!s_is_op(s_cur(p), IPL_JOP_COLON)) {
        parts[0] = s_expression(p, true);
        if (!s_is_op(s_cur(p), IPL_JOP_COLON)) {
            if (s_is_op(s_cur(p), IPL_JOP_COMMA)) s_fail(p, "tuple subscripts are not supported");
            return s_node_kids(p, IPL_JN_GETITEM, at, 2, obj, parts[0]);
        }
    }
    s_expect_op(p, IPL_JOP_COLON);
    if (!s_is_op(s_cur(p), IPL_JOP_RBRACKET) && !s_is_op(s_cur(p), IPL_JOP_COLON))
        parts[1] = s_expression(p, true);
    if (s_skip_op(p, IPL_JOP_COLON) && !s_is_op(s_cur(p), IPL_JOP_RBRACKET))
        parts[2] = s_expression(p, true);
    return s_node_kids(p, IPL_JN_SLICE, at, 4, obj, parts[0], parts[1], parts[2]);
}

static ipl_jnode_t *s_postfix(s_parser_t *p, ipl_jnode_t *node)
{
    for (;;) {
        const ipl_jtok_t *t = s_cur(p);
        if (s_is_op(t, IPL_JOP_DOT)) {
            s_next(p);
            const ipl_jtok_t *name = s_cur(p);
            if (name->type == IPL_JT_NAME) {
                s_next(p);
                node = s_node_kids(p, IPL_JN_GETATTR, name, 1, node);
                node->val = s_tok_str(name);
            } else if (name->type == IPL_JT_INT) {
                s_next(p);
                ipl_jnode_t *k = s_node(p, IPL_JN_CONST, name);
                k->val = ipl_jv_int(name->i);
                node = s_node_kids(p, IPL_JN_GETITEM, t, 2, node, k);
            } else {
                s_fail(p, "expected a name after '.'");
            }
        } else if (s_is_op(t, IPL_JOP_LBRACKET)) {
            s_next(p);
            node = s_subscript(p, node, t);
            s_expect_op(p, IPL_JOP_RBRACKET);
        } else if (s_is_op(t, IPL_JOP_LPAREN)) {
            node = s_call(p, node);
        } else {
            return node;
        }
    }
}

/* A filter or test name (Jinja2 allows dotted names; none of ours has a dot). */
static const ipl_jtok_t *s_filter_name(s_parser_t *p, const char *what)
{
    const ipl_jtok_t *t = s_cur(p);
    if (t->type != IPL_JT_NAME) s_fail(p, "expected a %s name", what);
    s_next(p);
    return t;
}

static ipl_jnode_t *s_filter(s_parser_t *p, ipl_jnode_t *operand)
{
    const ipl_jtok_t *name = s_filter_name(p, "filter");
    int id = ipl_jbuiltin_filter_id(name->p, name->n);
    if (id < 0)
        s_fail_at(p, name->line, name->col, "unknown filter '%.*s'", (int)name->n, name->p);
    ipl_jnode_t *nd = s_node(p, IPL_JN_FILTER, name);
    nd->id = (int16_t)id;
    nd->val = s_tok_str(name);
    s_vec_t args = {0};
    s_vec_push(p, &args, operand);
    if (s_is_op(s_cur(p), IPL_JOP_LPAREN)) s_call_args(p, &args);
    s_set_kids(nd, &args);
    return nd;
}

static ipl_jnode_t *s_test(s_parser_t *p, ipl_jnode_t *operand)
{
    bool negate = s_skip_name(p, "not");
    const ipl_jtok_t *name = s_cur(p);
    int id;
    /* `is ==`-style operator tests are not Jinja syntax; tests are names */
    name = s_filter_name(p, "test");
    id = ipl_jbuiltin_test_id(name->p, name->n);
    if (id < 0)
        s_fail_at(p, name->line, name->col, "unknown test '%.*s'", (int)name->n, name->p);
    ipl_jnode_t *nd = s_node(p, IPL_JN_TEST, name);
    nd->id = (int16_t)id;
    nd->op = negate;
    nd->val = s_tok_str(name);
    s_vec_t args = {0};
    s_vec_push(p, &args, operand);
    const ipl_jtok_t *t = s_cur(p);
    if (s_is_op(t, IPL_JOP_LPAREN)) {
        s_call_args(p, &args);
    } else if ((t->type == IPL_JT_NAME || t->type == IPL_JT_STRING || t->type == IPL_JT_INT ||
                t->type == IPL_JT_FLOAT || s_is_op(t, IPL_JOP_LBRACKET) ||
                s_is_op(t, IPL_JOP_LBRACE)) &&
               !s_is_name(t, "else") && !s_is_name(t, "or") && !s_is_name(t, "and")) {
        if (s_is_name(t, "is")) s_fail(p, "you cannot chain multiple tests with 'is'");
        s_vec_push(p, &args, s_postfix(p, s_primary(p)));
    }
    s_set_kids(nd, &args);
    return nd;
}

static ipl_jnode_t *s_filter_expr(s_parser_t *p, ipl_jnode_t *node)
{
    for (;;) {
        const ipl_jtok_t *t = s_cur(p);
        if (s_is_op(t, IPL_JOP_PIPE)) {
            s_next(p);
            node = s_filter(p, node);
        } else if (s_is_name(t, "is")) {
            s_next(p);
            node = s_test(p, node);
        } else if (s_is_op(t, IPL_JOP_LPAREN)) {
            node = s_call(p, node);
        } else {
            return node;
        }
    }
}

static ipl_jnode_t *s_primary(s_parser_t *p)
{
    const ipl_jtok_t *t = s_cur(p);
    ipl_jnode_t *nd;
    switch (t->type) {
    case IPL_JT_NAME:
        s_next(p);
        if (s_is_name(t, "true") || s_is_name(t, "True") || s_is_name(t, "false") ||
            s_is_name(t, "False")) {
            nd = s_node(p, IPL_JN_CONST, t);
            nd->val = ipl_jv_bool(t->p[0] == 't' || t->p[0] == 'T');
        } else if (s_is_name(t, "none") || s_is_name(t, "None")) {
            nd = s_node(p, IPL_JN_CONST, t);
            nd->val = ipl_jv_none();
        } else {
            nd = s_node(p, IPL_JN_NAME, t);
            nd->val = s_tok_str(t);
            if (p->macro) {
                if (s_is_name(t, "varargs")) p->macro->flags |= IPL_JN_F_VARARGS;
                if (s_is_name(t, "kwargs")) p->macro->flags |= IPL_JN_F_KWARGS;
                if (s_is_name(t, "caller")) p->macro->flags |= IPL_JN_F_CALLER;
            }
        }
        return nd;
    case IPL_JT_STRING: {
        /* adjacent string literals concatenate, as in Python */
        size_t total = 0, k = p->i;
        while (p->t[k].type == IPL_JT_STRING) total += p->t[k++].n;
        nd = s_node(p, IPL_JN_CONST, t);
        if (k == p->i + 1) {
            nd->val = s_tok_str(t);
            s_next(p);
        } else {
            char *s = s_alloc(p, total + 1);
            size_t o = 0;
            while (s_cur(p)->type == IPL_JT_STRING) {
                memcpy(s + o, s_cur(p)->p, s_cur(p)->n);
                o += s_cur(p)->n;
                s_next(p);
            }
            nd->val = ipl_jv_str(s, o);
        }
        return nd;
    }
    case IPL_JT_INT:
        s_next(p);
        nd = s_node(p, IPL_JN_CONST, t);
        nd->val = ipl_jv_int(t->i);
        return nd;
    case IPL_JT_FLOAT:
        s_next(p);
        nd = s_node(p, IPL_JN_CONST, t);
        nd->val = ipl_jv_float(t->f);
        return nd;
    default:
        break;
    }
    if (s_skip_op(p, IPL_JOP_LPAREN)) {
        nd = s_tuple(p, true, NULL, true);
        s_expect_op(p, IPL_JOP_RPAREN);
        return nd;
    }
    if (s_skip_op(p, IPL_JOP_LBRACKET)) {
        nd = s_node(p, IPL_JN_LIST, t);
        s_vec_t items = {0};
        while (!s_is_op(s_cur(p), IPL_JOP_RBRACKET)) {
            if (items.n) {
                s_expect_op(p, IPL_JOP_COMMA);
                if (s_is_op(s_cur(p), IPL_JOP_RBRACKET)) break;
            }
            s_vec_push(p, &items, s_expression(p, true));
        }
        s_expect_op(p, IPL_JOP_RBRACKET);
        s_set_kids(nd, &items);
        return nd;
    }
    if (s_skip_op(p, IPL_JOP_LBRACE)) {
        nd = s_node(p, IPL_JN_DICT, t);
        s_vec_t items = {0};
        while (!s_is_op(s_cur(p), IPL_JOP_RBRACE)) {
            if (items.n) {
                s_expect_op(p, IPL_JOP_COMMA);
                if (s_is_op(s_cur(p), IPL_JOP_RBRACE)) break;
            }
            s_vec_push(p, &items, s_expression(p, true));
            s_expect_op(p, IPL_JOP_COLON);
            s_vec_push(p, &items, s_expression(p, true));
        }
        s_expect_op(p, IPL_JOP_RBRACE);
        s_set_kids(nd, &items);
        return nd;
    }
    char b[64];
    s_fail(p, "unexpected %s", s_describe(t, b, sizeof b));
}

static ipl_jnode_t *s_unary(s_parser_t *p, bool with_filter)
{
    s_enter(p);
    const ipl_jtok_t *t = s_cur(p);
    ipl_jnode_t *node;
    if (s_skip_op(p, IPL_JOP_SUB))
        node = s_node_kids(p, IPL_JN_NEG, t, 1, s_unary(p, false));
    else if (s_skip_op(p, IPL_JOP_ADD))
        node = s_node_kids(p, IPL_JN_POS, t, 1, s_unary(p, false));
    else
        node = s_primary(p);
    node = s_postfix(p, node);
    if (with_filter) node = s_filter_expr(p, node);
    s_leave(p);
    return node;
}

static ipl_jnode_t *s_binop(s_parser_t *p, int op, ipl_jnode_t *l, ipl_jnode_t *r,
                            const ipl_jtok_t *at)
{
    ipl_jnode_t *nd = s_node_kids(p, IPL_JN_BINOP, at, 2, l, r);
    nd->op = (uint8_t)op;
    return nd;
}

static ipl_jnode_t *s_pow(s_parser_t *p)
{
    ipl_jnode_t *left = s_unary(p, true);
    while (s_is_op(s_cur(p), IPL_JOP_POW)) {
        const ipl_jtok_t *t = s_cur(p);
        s_next(p);
        left = s_binop(p, IPL_JOP_POW, left, s_unary(p, true), t);
    }
    return left;
}

static ipl_jnode_t *s_math2(s_parser_t *p)
{
    ipl_jnode_t *left = s_pow(p);
    for (;;) {
        const ipl_jtok_t *t = s_cur(p);
        if (t->type != IPL_JT_OP || (t->op != IPL_JOP_MUL && t->op != IPL_JOP_DIV &&
                                     t->op != IPL_JOP_FLOORDIV && t->op != IPL_JOP_MOD))
            return left;
        s_next(p);
        left = s_binop(p, t->op, left, s_pow(p), t);
    }
}

static ipl_jnode_t *s_concat(s_parser_t *p)
{
    ipl_jnode_t *left = s_math2(p);
    while (s_is_op(s_cur(p), IPL_JOP_TILDE)) {
        const ipl_jtok_t *t = s_cur(p);
        s_next(p);
        left = s_binop(p, IPL_JOP_TILDE, left, s_math2(p), t);
    }
    return left;
}

static ipl_jnode_t *s_math1(s_parser_t *p)
{
    ipl_jnode_t *left = s_concat(p);
    for (;;) {
        const ipl_jtok_t *t = s_cur(p);
        if (!s_is_op(t, IPL_JOP_ADD) && !s_is_op(t, IPL_JOP_SUB)) return left;
        s_next(p);
        left = s_binop(p, t->op, left, s_concat(p), t);
    }
}

static ipl_jnode_t *s_compare(s_parser_t *p)
{
    const ipl_jtok_t *at = s_cur(p);
    ipl_jnode_t *first = s_math1(p);
    s_vec_t kids = {0};
    uint8_t ops[64];
    size_t nops = 0;
    for (;;) {
        const ipl_jtok_t *t = s_cur(p);
        int op = 0;
        if (t->type == IPL_JT_OP && (t->op == IPL_JOP_EQ || t->op == IPL_JOP_NE ||
                                     t->op == IPL_JOP_LT || t->op == IPL_JOP_LTEQ ||
                                     t->op == IPL_JOP_GT || t->op == IPL_JOP_GTEQ)) {
            op = t->op;
            s_next(p);
        } else if (s_is_name(t, "in")) {
            op = IPL_JCMP_IN;
            s_next(p);
        } else if (s_is_name(t, "not") && s_is_name(s_peek(p, 1), "in")) {
            op = IPL_JCMP_NOTIN;
            s_next(p);
            s_next(p);
        } else {
            break;
        }
        if (nops == sizeof ops) s_fail(p, "too many chained comparisons");
        if (!kids.n) s_vec_push(p, &kids, first);
        ops[nops++] = (uint8_t)op;
        s_vec_push(p, &kids, s_math1(p));
    }
    if (!nops) return first;
    ipl_jnode_t *nd = s_node(p, IPL_JN_COMPARE, at);
    s_set_kids(nd, &kids);
    nd->ops = s_alloc(p, nops);
    memcpy(nd->ops, ops, nops);
    return nd;
}

static ipl_jnode_t *s_not(s_parser_t *p)
{
    const ipl_jtok_t *t = s_cur(p);
    if (s_skip_name(p, "not")) {
        s_enter(p);
        ipl_jnode_t *nd = s_node_kids(p, IPL_JN_NOT, t, 1, s_not(p));
        s_leave(p);
        return nd;
    }
    return s_compare(p);
}

/* parse_and / parse_or: `or` over `and` over `not`, both left-associative. */
static ipl_jnode_t *s_logic(s_parser_t *p, bool is_or)
{
    const char *word = is_or ? "or" : "and";
    ipl_jnode_t *left = is_or ? s_logic(p, false) : s_not(p);
    while (s_is_name(s_cur(p), word)) {
        const ipl_jtok_t *t = s_cur(p);
        s_next(p);
        ipl_jnode_t *right = is_or ? s_logic(p, false) : s_not(p);
        left = s_node_kids(p, is_or ? IPL_JN_OR : IPL_JN_AND, t, 2, left, right);
    }
    return left;
}

static ipl_jnode_t *s_condexpr(s_parser_t *p)
{
    ipl_jnode_t *expr1 = s_logic(p, true);
    while (s_is_name(s_cur(p), "if")) {
        const ipl_jtok_t *t = s_cur(p);
        s_next(p);
        ipl_jnode_t *test = s_logic(p, true), *other = NULL;
        if (s_skip_name(p, "else")) {
            s_enter(p);
            other = s_condexpr(p);
            s_leave(p);
        }
        expr1 = s_node_kids(p, IPL_JN_COND, t, 3, test, expr1, other);
    }
    return expr1;
}

static ipl_jnode_t *s_expression(s_parser_t *p, bool with_condexpr)
{
    s_enter(p);
    ipl_jnode_t *nd = with_condexpr ? s_condexpr(p) : s_logic(p, true);
    s_leave(p);
    return nd;
}

/* ---- statements ------------------------------------------------------------------------- */

static ipl_jnode_t *s_body(s_parser_t *p, const char *const *ends);

static void s_block_end(s_parser_t *p)
{
    s_expect_type(p, IPL_JT_BLOCK_END, "'%}'");
}

/* An assignment target: a name, names separated by commas, or (with_ns) name.attr. */
static ipl_jnode_t *s_target(s_parser_t *p, bool with_ns, const char *end_name)
{
    const ipl_jtok_t *at = s_cur(p);
    s_vec_t names = {0};
    bool parens = s_skip_op(p, IPL_JOP_LPAREN);
    for (;;) {
        const ipl_jtok_t *t = s_cur(p);
        if (t->type != IPL_JT_NAME) s_fail(p, "expected a variable name to assign to");
        s_next(p);
        ipl_jnode_t *nd = s_node(p, IPL_JN_NAME, t);
        nd->val = s_tok_str(t);
        if (with_ns && !parens && !names.n && s_is_op(s_cur(p), IPL_JOP_DOT)) {
            s_next(p);
            const ipl_jtok_t *attr = s_cur(p);
            s_expect_type(p, IPL_JT_NAME, "an attribute name");
            ipl_jnode_t *g = s_node_kids(p, IPL_JN_GETATTR, attr, 1, nd);
            g->val = s_tok_str(attr);
            return g;
        }
        s_vec_push(p, &names, nd);
        if (!s_skip_op(p, IPL_JOP_COMMA)) break;
        if (end_name && s_is_name(s_cur(p), end_name)) break;
    }
    if (parens) s_expect_op(p, IPL_JOP_RPAREN);
    if (names.n == 1 && !parens) return names.v[0];
    ipl_jnode_t *tup = s_node(p, IPL_JN_TUPLE, at);
    s_set_kids(tup, &names);
    return tup;
}

/* The filters of "{% set x | f %}" / "{% filter f | g %}": a chain over a NULL operand. */
static ipl_jnode_t *s_filter_chain(s_parser_t *p, bool leading_pipe)
{
    ipl_jnode_t *node = NULL;
    bool first = true;
    while (first ? (!leading_pipe || s_skip_op(p, IPL_JOP_PIPE)) : s_skip_op(p, IPL_JOP_PIPE)) {
        node = s_filter(p, node);
        first = false;
    }
    return node;
}

/* Macro or caller parameters "(a, b=1)". */
static void s_params(s_parser_t *p, s_vec_t *out)
{
    s_expect_op(p, IPL_JOP_LPAREN);
    bool any = false, defaults = false;
    while (!s_is_op(s_cur(p), IPL_JOP_RPAREN)) {
        if (any) s_expect_op(p, IPL_JOP_COMMA);
        const ipl_jtok_t *t = s_cur(p);
        s_expect_type(p, IPL_JT_NAME, "a parameter name");
        ipl_jnode_t *prm = s_node(p, IPL_JN_PARAM, t);
        prm->val = s_tok_str(t);
        prm->kids = s_alloc(p, sizeof *prm->kids);
        prm->nkids = 1;
        if (s_skip_op(p, IPL_JOP_ASSIGN)) {
            prm->kids[0] = s_expression(p, true);
            defaults = true;
        } else if (defaults) {
            s_fail_at(p, t->line, t->col, "a parameter without default after one with");
        }
        s_vec_push(p, out, prm);
        any = true;
    }
    s_expect_op(p, IPL_JOP_RPAREN);
}

static const char *const s_end_for[] = {"endfor", "else", NULL};
static const char *const s_end_endfor[] = {"endfor", NULL};
static const char *const s_end_if[] = {"elif", "else", "endif", NULL};
static const char *const s_end_endif[] = {"endif", NULL};
static const char *const s_end_set[] = {"endset", NULL};
static const char *const s_end_macro[] = {"endmacro", NULL};
static const char *const s_end_call[] = {"endcall", NULL};
static const char *const s_end_filter[] = {"endfilter", NULL};
static const char *const s_end_generation[] = {"endgeneration", NULL};

/* Consumes "{% end... %}" (the name is current). */
static void s_end_tag(s_parser_t *p)
{
    s_next(p);
    s_block_end(p);
}

static ipl_jnode_t *s_for(s_parser_t *p, const ipl_jtok_t *at)
{
    ipl_jnode_t *target = s_target(p, false, "in");
    if (!s_skip_name(p, "in")) s_fail(p, "expected 'in' in a for loop");
    ipl_jnode_t *iter = s_tuple(p, false, "recursive", false), *cond = NULL, *other = NULL;
    if (s_skip_name(p, "if")) cond = s_expression(p, true);
    if (s_is_name(s_cur(p), "recursive")) s_fail(p, "recursive loops are not supported");
    s_block_end(p);
    ipl_jnode_t *body = s_body(p, s_end_for);
    if (s_is_name(s_cur(p), "else")) {
        s_end_tag(p);
        other = s_body(p, s_end_endfor);
    }
    s_end_tag(p);
    return s_node_kids(p, IPL_JN_FOR, at, 5, target, iter, cond, body, other);
}

static ipl_jnode_t *s_if(s_parser_t *p, const ipl_jtok_t *at)
{
    ipl_jnode_t *test = s_tuple(p, false, NULL, false);
    s_block_end(p);
    ipl_jnode_t *body = s_body(p, s_end_if), *other = NULL;
    const ipl_jtok_t *t = s_cur(p);
    if (s_is_name(t, "elif")) {
        s_next(p);
        s_enter(p);
        other = s_if(p, t); /* consumes up to and including endif */
        s_leave(p);
        return s_node_kids(p, IPL_JN_IF, at, 3, test, body, other);
    }
    if (s_is_name(t, "else")) {
        s_end_tag(p);
        other = s_body(p, s_end_endif);
    }
    s_end_tag(p);
    return s_node_kids(p, IPL_JN_IF, at, 3, test, body, other);
}

static ipl_jnode_t *s_set(s_parser_t *p, const ipl_jtok_t *at)
{
    ipl_jnode_t *target = s_target(p, true, NULL);
    if (s_skip_op(p, IPL_JOP_ASSIGN)) {
        ipl_jnode_t *value = s_tuple(p, true, NULL, false);
        s_block_end(p);
        return s_node_kids(p, IPL_JN_SET, at, 2, target, value);
    }
    if (target->kind == IPL_JN_TUPLE) s_fail(p, "a block set assigns one name");
    ipl_jnode_t *filters = s_filter_chain(p, true);
    s_block_end(p);
    ipl_jnode_t *body = s_body(p, s_end_set);
    s_end_tag(p);
    return s_node_kids(p, IPL_JN_SETBLOCK, at, 3, target, body, filters);
}

static ipl_jnode_t *s_macro(s_parser_t *p, const ipl_jtok_t *at)
{
    const ipl_jtok_t *name = s_cur(p);
    s_expect_type(p, IPL_JT_NAME, "a macro name");
    ipl_jnode_t *nd = s_node(p, IPL_JN_MACRO, at);
    nd->val = s_tok_str(name);
    s_vec_t kids = {0};
    s_vec_push(p, &kids, NULL); /* the body, below */
    s_params(p, &kids);
    s_block_end(p);
    ipl_jnode_t *outer = p->macro;
    p->macro = nd;
    kids.v[0] = s_body(p, s_end_macro);
    p->macro = outer;
    s_end_tag(p);
    s_set_kids(nd, &kids);
    if (p->nmacros == S_MAX_MACROS) s_fail_at(p, at->line, at->col, "too many macros");
    p->macros[p->nmacros++] = nd;
    return nd;
}

static ipl_jnode_t *s_callblock(s_parser_t *p, const ipl_jtok_t *at)
{
    ipl_jnode_t *nd = s_node(p, IPL_JN_CALLBLOCK, at);
    s_vec_t kids = {0};
    s_vec_push(p, &kids, NULL);
    s_vec_push(p, &kids, NULL);
    if (s_is_op(s_cur(p), IPL_JOP_LPAREN)) s_params(p, &kids);
    ipl_jnode_t *call = s_expression(p, true);
    if (call->kind != IPL_JN_CALL) s_fail_at(p, call->line, call->col, "{%% call %%} needs a macro call");
    s_block_end(p);
    kids.v[0] = call;
    ipl_jnode_t *outer = p->macro;
    p->macro = nd;
    kids.v[1] = s_body(p, s_end_call);
    p->macro = outer;
    s_end_tag(p);
    s_set_kids(nd, &kids);
    return nd;
}

static ipl_jnode_t *s_statement(s_parser_t *p)
{
    const ipl_jtok_t *at = s_cur(p); /* the "{%" */
    s_next(p);
    const ipl_jtok_t *t = s_cur(p);
    if (t->type != IPL_JT_NAME) s_fail(p, "expected a statement name after '{%%'");
    s_next(p);
    s_enter(p);
    ipl_jnode_t *nd;
    if (s_is_name(t, "for"))
        nd = s_for(p, at);
    else if (s_is_name(t, "if"))
        nd = s_if(p, at);
    else if (s_is_name(t, "set"))
        nd = s_set(p, at);
    else if (s_is_name(t, "macro"))
        nd = s_macro(p, at);
    else if (s_is_name(t, "call"))
        nd = s_callblock(p, at);
    else if (s_is_name(t, "filter")) {
        ipl_jnode_t *filters = s_filter_chain(p, false);
        s_block_end(p);
        ipl_jnode_t *body = s_body(p, s_end_filter);
        s_end_tag(p);
        nd = s_node_kids(p, IPL_JN_FILTERBLOCK, at, 2, filters, body);
    } else if (s_is_name(t, "generation")) {
        s_block_end(p);
        nd = s_body(p, s_end_generation);
        s_end_tag(p);
    } else if (s_is_name(t, "break") || s_is_name(t, "continue")) {
        s_block_end(p);
        nd = s_node(p, t->p[0] == 'b' ? IPL_JN_BREAK : IPL_JN_CONTINUE, at);
    } else {
        s_fail_at(p, t->line, t->col, "unsupported statement '%.*s'", (int)(t->n > 40 ? 40 : t->n),
                  t->p);
    }
    s_leave(p);
    return nd;
}

/* Statements until EOF (ends NULL) or a "{% name %}" with a name in ends (left current). */
static ipl_jnode_t *s_body(s_parser_t *p, const char *const *ends)
{
    const ipl_jtok_t *at = s_cur(p);
    ipl_jnode_t *body = s_node(p, IPL_JN_BODY, at);
    s_vec_t kids = {0};
    for (;;) {
        const ipl_jtok_t *t = s_cur(p);
        if (t->type == IPL_JT_EOF) {
            if (ends) s_fail(p, "unexpected end of template: expected {%% %s %%}", ends[0]);
            break;
        }
        if (t->type == IPL_JT_DATA) {
            ipl_jnode_t *d = s_node(p, IPL_JN_DATA, t);
            d->val = s_tok_str(t);
            s_vec_push(p, &kids, d);
            s_next(p);
        } else if (t->type == IPL_JT_VAR_BEGIN) {
            s_next(p);
            ipl_jnode_t *e = s_tuple(p, true, NULL, false);
            s_expect_type(p, IPL_JT_VAR_END, "'}}'");
            s_vec_push(p, &kids, s_node_kids(p, IPL_JN_OUTPUT, t, 1, e));
        } else if (t->type == IPL_JT_BLOCK_BEGIN) {
            const ipl_jtok_t *name = s_peek(p, 1);
            if (ends && name->type == IPL_JT_NAME) {
                bool end = false;
                for (const char *const *e = ends; *e; e++) end = end || s_is_name(name, *e);
                if (end) {
                    s_next(p); /* leave the name current */
                    break;
                }
            }
            if (name->type == IPL_JT_NAME && name->n >= 3 && memcmp(name->p, "end", 3) == 0)
                s_fail_at(p, name->line, name->col, "unexpected {%% %.*s %%}%s%s%s",
                          (int)(name->n > 40 ? 40 : name->n), name->p,
                          ends ? " (expected {% " : "", ends ? ends[0] : "", ends ? " %})" : "");
            if (name->type == IPL_JT_NAME && (s_is_name(name, "elif") || s_is_name(name, "else")))
                s_fail_at(p, name->line, name->col, "unexpected {%% %.*s %%}", (int)name->n,
                          name->p);
            s_vec_push(p, &kids, s_statement(p));
        } else {
            char b[64];
            s_fail(p, "unexpected %s", s_describe(t, b, sizeof b));
        }
    }
    s_set_kids(body, &kids);
    return body;
}

ipl_jnode_t *ipl_jparse(const ipl_jtok_t *toks, size_t ntoks, ipl_jarena_t *a, int max_depth,
                        char *err, size_t errlen)
{
    if (!toks || ntoks == 0) return NULL;
    s_parser_t *p = ipl_jarena_zalloc(a, sizeof *p);
    if (!p) {
        if (err && errlen) snprintf(err, errlen, "out of memory");
        return NULL;
    }
    p->t = toks;
    p->n = ntoks;
    p->a = a;
    p->err = err;
    p->errlen = errlen;
    p->max_depth = max_depth > 0 ? max_depth : 200;
    if (setjmp(p->jb)) return NULL;
    ipl_jnode_t *root = s_body(p, NULL);
    /* every call of a non-global name must name a macro of the template (or `caller`) */
    for (size_t i = 0; i < p->ncalls; i++) {
        const ipl_jnode_t *c = p->calls[i];
        bool ok = c->val.u.s.n == 6 && memcmp(c->val.u.s.p, "caller", 6) == 0;
        for (size_t k = 0; k < p->nmacros && !ok; k++)
            ok = ipl_jv_equal(p->macros[k]->val, c->val);
        if (!ok)
            s_fail_at(p, c->line, c->col, "unknown function '%.*s' (not a macro of this template "
                      "nor a supported global)", (int)(c->val.u.s.n > 40 ? 40 : c->val.u.s.n),
                      c->val.u.s.p);
    }
    return root;
}
