/*
 * Unit tests of ipl_jinja_ast: the tree's shape for Jinja2's precedence rules (printed as
 * S-expressions), statements and their parts, macro flags, and refusals with positions.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ipl_jinja_ast.h"

static const char *s_kind(int k)
{
    static const char *const names[] = {
        [IPL_JN_CONST] = "const",   [IPL_JN_NAME] = "name",       [IPL_JN_GETATTR] = "attr",
        [IPL_JN_GETITEM] = "item",  [IPL_JN_SLICE] = "slice",     [IPL_JN_CALL] = "call",
        [IPL_JN_METHOD] = "method", [IPL_JN_FILTER] = "filter",   [IPL_JN_TEST] = "test",
        [IPL_JN_KWARG] = "kw",      [IPL_JN_NEG] = "neg",         [IPL_JN_POS] = "pos",
        [IPL_JN_NOT] = "not",       [IPL_JN_BINOP] = "op",        [IPL_JN_AND] = "and",
        [IPL_JN_OR] = "or",         [IPL_JN_COMPARE] = "cmp",     [IPL_JN_COND] = "cond",
        [IPL_JN_LIST] = "list",     [IPL_JN_TUPLE] = "tuple",     [IPL_JN_DICT] = "dict",
        [IPL_JN_BODY] = "body",     [IPL_JN_DATA] = "data",       [IPL_JN_OUTPUT] = "out",
        [IPL_JN_IF] = "if",         [IPL_JN_FOR] = "for",         [IPL_JN_SET] = "set",
        [IPL_JN_SETBLOCK] = "setblock", [IPL_JN_MACRO] = "macro", [IPL_JN_CALLBLOCK] = "callblock",
        [IPL_JN_FILTERBLOCK] = "filterblock", [IPL_JN_BREAK] = "break",
        [IPL_JN_CONTINUE] = "continue", [IPL_JN_PARAM] = "param",
    };
    return names[k];
}

/* (kind[:val|op] kids...) with "_" for a NULL kid. */
static void s_dump(const ipl_jnode_t *n, char *out, size_t *o, size_t cap)
{
    if (!n) {
        *o += (size_t)snprintf(out + *o, cap - *o, " _");
        return;
    }
    *o += (size_t)snprintf(out + *o, cap - *o, " (%s", s_kind(n->kind));
    if (n->kind == IPL_JN_BINOP) *o += (size_t)snprintf(out + *o, cap - *o, ":%s", ipl_jop_text(n->op));
    if (n->kind == IPL_JN_COMPARE)
        for (uint32_t i = 0; i + 1 < n->nkids; i++)
            *o += (size_t)snprintf(out + *o, cap - *o, ":%s", n->ops[i] == IPL_JCMP_IN ? "in"
                                   : n->ops[i] == IPL_JCMP_NOTIN ? "notin" : ipl_jop_text(n->ops[i]));
    if (n->kind == IPL_JN_TEST && n->op) *o += (size_t)snprintf(out + *o, cap - *o, ":not");
    if (n->val.type == IPL_JV_STR)
        *o += (size_t)snprintf(out + *o, cap - *o, ":%.*s", (int)n->val.u.s.n, n->val.u.s.p);
    else if (n->val.type == IPL_JV_INT)
        *o += (size_t)snprintf(out + *o, cap - *o, ":%lld", (long long)n->val.u.i);
    if (n->flags) *o += (size_t)snprintf(out + *o, cap - *o, "#%d", n->flags);
    for (uint32_t i = 0; i < n->nkids; i++) s_dump(n->kids[i], out, o, cap);
    *o += (size_t)snprintf(out + *o, cap - *o, ")");
}

static void s_expect(const char *src, const char *want)
{
    ipl_jarena_t a;
    ipl_jarena_init(&a, 0, NULL, NULL);
    ipl_jtok_t *t;
    size_t n;
    char err[256];
    if (ipl_jlex(src, strlen(src), &a, &t, &n, err, sizeof err) < 0) fail_msg("lex: %s", err);
    ipl_jnode_t *root = ipl_jparse(t, n, &a, 100, err, sizeof err);
    if (!root) fail_msg("%s: %s", src, err);
    char got[2048];
    size_t o = 0;
    /* the body of the single output or statement */
    s_dump(root->nkids == 1 && root->kids[0]->kind == IPL_JN_OUTPUT ? root->kids[0]->kids[0] : root,
           got, &o, sizeof got);
    if (strcmp(got + 1, want) != 0) fail_msg("%s:\n  got  %s\n  want %s", src, got + 1, want);
    ipl_jarena_free(&a);
}

static void s_expect_error(const char *src, const char *want)
{
    ipl_jarena_t a;
    ipl_jarena_init(&a, 0, NULL, NULL);
    ipl_jtok_t *t;
    size_t n;
    char err[256] = "";
    assert_int_equal(ipl_jlex(src, strlen(src), &a, &t, &n, err, sizeof err), 0);
    assert_null(ipl_jparse(t, n, &a, 100, err, sizeof err));
    if (strcmp(err, want) != 0) fail_msg("%s:\n  got  %s\n  want %s", src, err, want);
    ipl_jarena_free(&a);
}

static void test_precedence(void **state)
{
    (void)state;
    /* ~ binds tighter than + and -, looser than * */
    s_expect("{{ a + b ~ c * d }}",
             "(op:+ (name:a) (op:~ (name:b) (op:* (name:c) (name:d))))");
    /* ** is left-associative in Jinja2 */
    s_expect("{{ 2 ** 3 ** 2 }}", "(op:** (op:** (const:2) (const:3)) (const:2))");
    /* a unary minus takes no filter: -x|abs is (-x)|abs */
    s_expect("{{ -x|abs }}", "(filter:abs (neg (name:x)))");
    /* filters and tests bind to the unary operand */
    s_expect("{{ x|length > 1 }}", "(cmp:> (filter:length (name:x)) (const:1))");
    s_expect("{{ not a in b }}", "(not (cmp:in (name:a) (name:b)))");
    s_expect("{{ a not in b }}", "(cmp:notin (name:a) (name:b))");
    s_expect("{{ x is not defined and y }}", "(and (test:not:defined (name:x)) (name:y))");
    s_expect("{{ x is divisibleby 3 }}", "(test:divisibleby (name:x) (const:3))");
    s_expect("{{ 1 < x <= 3 }}", "(cmp:<:<= (const:1) (name:x) (const:3))");
    s_expect("{{ a or b and c }}", "(or (name:a) (and (name:b) (name:c)))");
    s_expect("{{ a if b else c if d }}", "(cond (name:b) (name:a) (cond (name:d) (name:c) _))");
    s_expect("{{ x.y[0].z }}", "(attr:z (item (attr:y (name:x)) (const:0)))");
    s_expect("{{ x.0 }}", "(item (name:x) (const:0))");
    s_expect("{{ s[1:-1] }}", "(slice (name:s) (const:1) (neg (const:1)) _)");
    s_expect("{{ s[::-1] }}", "(slice (name:s) _ _ (neg (const:1)))");
    s_expect("{{ s.strip('\\n')|upper }}", "(filter:upper (method:strip (name:s) (const:\n)))");
    s_expect("{{ x|join(', ', attribute='n') }}", "(filter:join (name:x) (const:, ) (kw:attribute (const:n)))");
    s_expect("{{ range(3) }}", "(call:range (const:3))");
    s_expect("{{ 'a' 'b' }}", "(const:ab)");
    s_expect("{{ (1,) }} ", "(body (out (tuple (const:1))) (data: ))");
    s_expect("{{ [1, 2,] }}", "(list (const:1) (const:2))");
    s_expect("{{ {'a': 1, 'b': [x]} }}", "(dict (const:a) (const:1) (const:b) (list (name:x)))");
    s_expect("{{ True }}{{ none }}", "(body (out (const)) (out (const)))");
}

static void test_statements(void **state)
{
    (void)state;
    s_expect("{% for k, v in d|items if v %}x{% else %}y{% endfor %}",
             "(body (for (tuple (name:k) (name:v)) (filter:items (name:d)) (name:v) (body (data:x)) (body (data:y))))");
    s_expect("{% if a %}1{% elif b %}2{% else %}3{% endif %}",
             "(body (if (name:a) (body (data:1)) (if (name:b) (body (data:2)) (body (data:3)))))");
    s_expect("{% set ns.x = 1 %}", "(body (set (attr:x (name:ns)) (const:1)))");
    s_expect("{% set a, b = 1, 2 %}", "(body (set (tuple (name:a) (name:b)) (tuple (const:1) (const:2))))");
    s_expect("{% set x | trim | upper %} y {% endset %}",
             "(body (setblock (name:x) (body (data: y )) (filter:upper (filter:trim _))))");
    s_expect("{% macro m(a, b=1) %}{{ varargs }}{{ caller() }}{% endmacro %}",
             "(body (macro:m#5 (body (out (name:varargs)) (out (call:caller))) (param:a _) (param:b (const:1))))");
    s_expect("{% macro m() %}{% endmacro %}{% call(x) m() %}{{ x }}{% endcall %}",
             "(body (macro:m (body)) (callblock (call:m) (body (out (name:x))) (param:x _)))");
    s_expect("{% filter upper %}a{% endfilter %}", "(body (filterblock (filter:upper _) (body (data:a))))");
    s_expect("{% for x in y %}{% break %}{% continue %}{% endfor %}",
             "(body (for (name:x) (name:y) _ (body (break) (continue)) _))");
    s_expect("{% generation %}a{% endgeneration %}", "(body (body (data:a)))");
}

static void test_errors(void **state)
{
    (void)state;
    s_expect_error("{{ x|nope }}", "1:6: unknown filter 'nope'");
    s_expect_error("{{ x is nope }}", "1:9: unknown test 'nope'");
    s_expect_error("{{ x.nope() }}", "1:6: unsupported method 'nope()'");
    s_expect_error("{{ f() }}", "1:4: unknown function 'f' (not a macro of this template nor a "
                                "supported global)");
    s_expect_error("{{ x[1, 2] }}", "1:7: tuple subscripts are not supported");
    s_expect_error("{{ x[0]() }}", "1:8: only functions, macros and methods can be called here");
    s_expect_error("{{ f(a=1, 2) }}", "1:11: a positional argument after keyword arguments");
    s_expect_error("{% with x = 1 %}{% endwith %}", "1:4: unsupported statement 'with'");
    s_expect_error("{% set a, b %}x{% endset %}", "1:13: a block set assigns one name");
    s_expect_error("{% call x %}{% endcall %}", "1:9: {% call %} needs a macro call");
    s_expect_error("{% for x of y %}{% endfor %}", "1:10: expected 'in' in a for loop");
    s_expect_error("{% %}", "1:4: expected a statement name after '{%'");
    s_expect_error("{{ }}", "1:4: expected an expression");
    s_expect_error("{{ a b }}", "1:6: expected '}}', got 'b'");
    /* macros defined anywhere count, before or after the call */
    ipl_jarena_t a;
    ipl_jarena_init(&a, 0, NULL, NULL);
    ipl_jtok_t *t;
    size_t n;
    const char *src = "{{ later() }}{% macro later() %}x{% endmacro %}";
    assert_int_equal(ipl_jlex(src, strlen(src), &a, &t, &n, NULL, 0), 0);
    assert_non_null(ipl_jparse(t, n, &a, 100, NULL, 0));
    /* the depth bound */
    src = "{{ ((((((((((1)))))))))) }}";
    assert_int_equal(ipl_jlex(src, strlen(src), &a, &t, &n, NULL, 0), 0);
    char err[128];
    assert_null(ipl_jparse(t, n, &a, 10, err, sizeof err));
    assert_non_null(strstr(err, "nested too deeply (limit 10)"));
    assert_null(ipl_jparse(NULL, 0, &a, 10, err, sizeof err));
    ipl_jarena_free(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_precedence),
        cmocka_unit_test(test_statements),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
