/*
 * Unit tests of ipl_jinja_lex: token types, values and positions; Jinja2's whitespace rules
 * as transformers sets them (trim_blocks, lstrip_blocks, "-" and "+" modifiers, comments,
 * newline normalisation, one trailing newline dropped); raw blocks; Python string escapes;
 * numbers; balanced braces; errors with their line:column.
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

#include "ipl_jinja_lex.h"

typedef struct {
    ipl_jarena_t a;
    ipl_jtok_t *t;
    size_t n;
} s_lexed_t;

static void s_lex(s_lexed_t *l, const char *src)
{
    ipl_jarena_init(&l->a, 0, NULL, NULL);
    char err[256];
    if (ipl_jlex(src, strlen(src), &l->a, &l->t, &l->n, err, sizeof err) < 0)
        fail_msg("lex of %s failed: %s", src, err);
    assert_int_equal(l->t[l->n - 1].type, IPL_JT_EOF);
}

/* The text of the template's DATA tokens joined with "|" (what the whitespace rules kept). */
static void s_expect_data(const char *src, const char *want)
{
    s_lexed_t l;
    s_lex(&l, src);
    char got[1024] = "";
    size_t o = 0;
    bool first = true;
    for (size_t i = 0; i < l.n; i++) {
        if (l.t[i].type != IPL_JT_DATA) continue;
        o += (size_t)snprintf(got + o, sizeof got - o, "%s%.*s", first ? "" : "|", (int)l.t[i].n,
                              l.t[i].p);
        first = false;
    }
    if (strcmp(got, want) != 0) fail_msg("%s:\n  got  [%s]\n  want [%s]", src, got, want);
    ipl_jarena_free(&l.a);
}

static void s_expect_error(const char *src, const char *want)
{
    ipl_jarena_t a;
    ipl_jarena_init(&a, 0, NULL, NULL);
    ipl_jtok_t *t;
    size_t n;
    char err[256] = "";
    assert_int_equal(ipl_jlex(src, strlen(src), &a, &t, &n, err, sizeof err), -1);
    if (strcmp(err, want) != 0) fail_msg("%s:\n  got  %s\n  want %s", src, err, want);
    ipl_jarena_free(&a);
}

static void test_tokens(void **state)
{
    (void)state;
    s_lexed_t l;
    s_lex(&l, "a {{ x.y + 1 }}\n{% if z >= 2.5 %}c{% endif %}");
    static const struct {
        int type, op;
        uint32_t line, col;
    } want[] = {
        {IPL_JT_DATA, 0, 1, 1},        {IPL_JT_VAR_BEGIN, 0, 1, 3}, {IPL_JT_NAME, 0, 1, 6},
        {IPL_JT_OP, IPL_JOP_DOT, 1, 7}, {IPL_JT_NAME, 0, 1, 8},      {IPL_JT_OP, IPL_JOP_ADD, 1, 10},
        {IPL_JT_INT, 0, 1, 12},        {IPL_JT_VAR_END, 0, 1, 14},  {IPL_JT_DATA, 0, 1, 16},
        {IPL_JT_BLOCK_BEGIN, 0, 2, 1}, {IPL_JT_NAME, 0, 2, 4},      {IPL_JT_NAME, 0, 2, 7},
        {IPL_JT_OP, IPL_JOP_GTEQ, 2, 9}, {IPL_JT_FLOAT, 0, 2, 12},  {IPL_JT_BLOCK_END, 0, 2, 16},
        {IPL_JT_DATA, 0, 2, 18},       {IPL_JT_BLOCK_BEGIN, 0, 2, 19}, {IPL_JT_NAME, 0, 2, 22},
        {IPL_JT_BLOCK_END, 0, 2, 28},  {IPL_JT_EOF, 0, 2, 30},
    };
    assert_int_equal(l.n, sizeof want / sizeof *want);
    for (size_t i = 0; i < l.n; i++) {
        if (l.t[i].type != want[i].type || l.t[i].line != want[i].line ||
            l.t[i].col != want[i].col || (want[i].op && l.t[i].op != want[i].op))
            fail_msg("token %zu: type %d op %d at %u:%u, want type %d op %d at %u:%u", i,
                     l.t[i].type, l.t[i].op, l.t[i].line, l.t[i].col, want[i].type, want[i].op,
                     want[i].line, want[i].col);
    }
    assert_int_equal(l.t[6].i, 1);
    assert_true(l.t[13].f == 2.5);
    assert_int_equal(l.t[2].n, 1);
    assert_memory_equal(l.t[4].p, "y", 1);
    ipl_jarena_free(&l.a);
}

static void test_whitespace(void **state)
{
    (void)state;
    /* trim_blocks + lstrip_blocks: block lines vanish */
    s_expect_data("a\n  {% if x %}\n  b\n  {% endif %}\nc", "a\n|  b\n|c");
    /* not for {{ }}: its line keeps its indentation and newline */
    s_expect_data("a\n  {{ x }}\nb", "a\n  |\nb");
    /* lstrip only when the tag starts the line */
    s_expect_data("a {% if x %}b{% endif %}", "a |b");
    /* "-" strips all whitespace, newlines included */
    s_expect_data("a \n {%- if x -%} \n b \n {%- endif -%}\n c", "a|b|c");
    s_expect_data("a  {{- x -}}  b", "a|b");
    /* "+" disables lstrip_blocks / trim_blocks */
    s_expect_data("a\n  {%+ if x %}b{% endif +%}\nc", "a\n  |b|\nc");
    /* comments: no token, same rules */
    s_expect_data("a\n  {# note #}\nb {#- x -#} c", "a\n|b|c");
    /* newlines normalised, one trailing newline dropped */
    s_expect_data("x\r\ny\rz\n", "x\ny\nz");
    s_expect_data("x\n\n", "x\n");
    /* after a block tag that ate its newline, the next line's indentation counts as a line
     * start (lstrip) */
    s_expect_data("{% if a %}\n    {% if b %}\nx{% endif %}{% endif %}", "x");
    /* at the very start of the template too */
    s_expect_data("   {% if a %}x{% endif %}", "x");
    /* raw: text verbatim, its own tags follow the rules */
    s_expect_data("{% raw %}{{ x }} {% if %}{% endraw %}!", "{{ x }} {% if %}|!");
    s_expect_data("a {%- raw -%}  b  {%- endraw -%} c", "a|b|c");
    /* Unicode whitespace counts for "-" (Python's str.isspace) */
    s_expect_data("a\xe3\x80\x80{{- x }}", "a");
}

static void test_strings_and_numbers(void **state)
{
    (void)state;
    s_lexed_t l;
    s_lex(&l, "{{ 'a\\n\\t\\x41\\u00e9\\U0001F600\\101\\q\\'\\\\' \"d\\\"q\" 1_000 0x1F 0o17 0b101 "
              "1.5e3 2e-2 x.0 }}");
    assert_int_equal(l.t[1].type, IPL_JT_STRING);
    const char want[] = "a\n\tA\xc3\xa9\xf0\x9f\x98\x80" "A\\q'\\";
    assert_int_equal(l.t[1].n, sizeof want - 1);
    assert_memory_equal(l.t[1].p, want, sizeof want - 1);
    assert_int_equal(l.t[2].n, 3);
    assert_memory_equal(l.t[2].p, "d\"q", 3);
    int64_t ints[] = {1000, 31, 15, 5};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(l.t[3 + i].type, IPL_JT_INT);
        assert_int_equal(l.t[3 + i].i, ints[i]);
    }
    assert_int_equal(l.t[7].type, IPL_JT_FLOAT);
    assert_true(l.t[7].f == 1500.0);
    assert_true(l.t[8].f == 0.02);
    /* after a dot, digits are an integer attribute, not a float */
    assert_int_equal(l.t[9].type, IPL_JT_NAME);
    assert_int_equal(l.t[10].op, IPL_JOP_DOT);
    assert_int_equal(l.t[11].type, IPL_JT_INT);
    ipl_jarena_free(&l.a);

    /* "}}" inside braces does not end the tag */
    s_lex(&l, "{{ {'a': {'b': 1}} }}");
    assert_int_equal(l.n, 12);
    assert_int_equal(l.t[10].type, IPL_JT_VAR_END);
    ipl_jarena_free(&l.a);

    /* operators */
    s_lex(&l, "{{ a // b ** c != d <= e ~ f | g }}");
    int ops[] = {IPL_JOP_FLOORDIV, IPL_JOP_POW, IPL_JOP_NE, IPL_JOP_LTEQ, IPL_JOP_TILDE, IPL_JOP_PIPE};
    for (int i = 0; i < 6; i++) assert_int_equal(l.t[2 + 2 * i].op, ops[i]);
    assert_string_equal(ipl_jop_text(IPL_JOP_FLOORDIV), "//");
    assert_string_equal(ipl_jop_text(999), "?");
    ipl_jarena_free(&l.a);
}

static void test_errors(void **state)
{
    (void)state;
    s_expect_error("ok\n {{ x", "2:2: unexpected end of template: this tag is not closed with '}}'");
    s_expect_error("{% if (x %}", "1:1: unexpected end of template: this tag is not closed with '%}'");
    s_expect_error("a {# b", "1:3: unterminated comment: '{#' without '#}'");
    s_expect_error("{{ \"abc }}", "1:4: unterminated string literal");
    s_expect_error("{{ '\\u12' }}", "1:9: truncated \\u escape in a string literal");
    s_expect_error("{{ '\\ud800' }}", "1:11: escape \\u in a string literal is not a valid code point");
    s_expect_error("{{ '\\N{DASH}' }}", "1:5: \\N{...} escapes are not supported");
    s_expect_error("{{ a @ b }}", "1:6: unexpected character '@' in a tag");
    s_expect_error("{{ \xc3\xa9 }}", "1:4: unexpected character in a tag (only ASCII names and "
                                     "operators are allowed outside strings)");
    s_expect_error("{{ 99999999999999999999 }}", "1:4: integer literal too large");
    s_expect_error("{% raw %} never ended", "1:1: {% raw %} without {% endraw %}");
    /* no source is an empty template; NULL errors are fine */
    ipl_jarena_t a;
    ipl_jarena_init(&a, 0, NULL, NULL);
    ipl_jtok_t *t;
    size_t n;
    assert_int_equal(ipl_jlex(NULL, 0, &a, &t, &n, NULL, 0), 0);
    assert_int_equal(n, 1);
    assert_int_equal(ipl_jlex("{{", 2, &a, &t, &n, NULL, 0), -1);
    ipl_jarena_free(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tokens),
        cmocka_unit_test(test_whitespace),
        cmocka_unit_test(test_strings_and_numbers),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
