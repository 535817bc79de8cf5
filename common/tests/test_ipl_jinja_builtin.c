/*
 * Unit tests of ipl_jinja_builtin called directly, with evaluated arguments: name lookup,
 * argument handling (positional and keyword, transformers' tojson signature), the generator
 * results of select/map, tests, methods, globals, `in`, `%`, getattr's method-or-key rule,
 * and errors raised through env->fail. (The Python-parity of their outputs inside templates
 * is tested in test_ipl_jinja.c.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "ipl_jinja_builtin.h"

static ipl_jarena_t s_a;
static jmp_buf s_jb;
static char s_err[256];
static cJSON *s_keep[512];
static size_t s_nkeep;

static void s_fail(ipl_jenv_t *env, const char *fmt, ...)
{
    (void)env;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s_err, sizeof s_err, fmt, ap);
    va_end(ap);
    longjmp(s_jb, 1);
}

static ipl_jenv_t s_env = {.a = &s_a, .fail = s_fail, .now = 1721952000, .max_list = 1000};

static int s_setup(void **state)
{
    (void)state;
    ipl_jarena_init(&s_a, 0, NULL, NULL);
    return 0;
}

static int s_teardown(void **state)
{
    (void)state;
    ipl_jarena_free(&s_a);
    for (size_t i = 0; i < s_nkeep; i++) cJSON_Delete(s_keep[i]);
    s_nkeep = 0;
    return 0;
}

static ipl_jv_t s_json(const char *text)
{
    cJSON *j = cJSON_Parse(text);
    assert_non_null(j);
    assert_true(s_nkeep < 512);
    s_keep[s_nkeep++] = j;
    return ipl_jv_from_json(&s_a, j);
}

/* str(v), or "ERR: message" when the builtin failed. */
static const char *s_show(ipl_jv_t v)
{
    ipl_jbuf_t b;
    ipl_jbuf_init(&b, &s_a, 0, NULL, NULL);
    if (ipl_jv_write_str(&b, v) < 0) ipl_jbuf_puts(&b, "<unprintable>");
    ipl_jbuf_putc(&b, '\0');
    return b.p;
}

static int s_filter(const char *name)
{
    int id = ipl_jbuiltin_filter_id(name, strlen(name));
    assert_true(id >= 0);
    return id;
}

/* Calls filter `name` on operand with positional args (JSON array) and keyword args (JSON
 * object); returns its str() or "ERR: ...". */
static const char *s_call(const char *name, ipl_jv_t operand, const char *pos, const char *kw)
{
    ipl_jargs_t a = {0};
    ipl_jv_t p = s_json(pos ? pos : "[]"), k = s_json(kw ? kw : "{}");
    a.n = p.u.l->n;
    a.v = p.u.l->v;
    a.nkw = k.u.d->n;
    a.kw = ipl_jarena_alloc(&s_a, (a.nkw ? a.nkw : 1) * sizeof *a.kw);
    for (size_t i = 0; i < a.nkw; i++)
        a.kw[i] = (ipl_jkwarg_t){k.u.d->k[i].u.s.p, k.u.d->k[i].u.s.n, k.u.d->v[i]};
    if (setjmp(s_jb)) {
        char *e = ipl_jarena_alloc(&s_a, strlen(s_err) + 6);
        sprintf(e, "ERR: %s", s_err);
        return e;
    }
    ipl_jv_t r = ipl_jbuiltin_filter(&s_env, s_filter(name), operand, &a);
    if (r.type == IPL_JV_LIST && (r.flags & IPL_JV_F_GEN)) r.flags &= (uint8_t)~IPL_JV_F_GEN;
    return s_show(r);
}

static void test_names(void **state)
{
    (void)state;
    assert_true(ipl_jbuiltin_filter_id("tojson", 6) >= 0);
    assert_int_equal(ipl_jbuiltin_filter_id("toJSON", 6), -1);
    assert_string_equal(ipl_jbuiltin_filter_name(s_filter("selectattr")), "selectattr");
    assert_string_equal(ipl_jbuiltin_filter_name(-1), "?");
    assert_true(ipl_jbuiltin_test_id("defined", 7) >= 0);
    assert_true(ipl_jbuiltin_test_id("==", 2) >= 0);
    assert_int_equal(ipl_jbuiltin_test_id("definedx", 8), -1);
    int m = ipl_jbuiltin_method_id("startswith", 10);
    assert_true(m >= 0);
    assert_string_equal(ipl_jbuiltin_method_name(m), "startswith");
    assert_int_equal(ipl_jbuiltin_method_id("append", 6), -1); /* a sandbox would refuse it */
    assert_true(ipl_jbuiltin_global_id("namespace", 9) >= 0);
    assert_int_equal(ipl_jbuiltin_global_id("cycler", 6), -1);
    /* getattr finds dict methods before keys, and str/list methods */
    ipl_jv_t d = s_json("{\"items\": 1, \"x\": 2}");
    assert_true(ipl_jbuiltin_is_method_of(d, "items", 5));
    assert_false(ipl_jbuiltin_is_method_of(d, "x", 1));
    assert_true(ipl_jbuiltin_is_method_of(ipl_jv_cstr("s"), "zfill", 5));
    assert_true(ipl_jbuiltin_is_method_of(s_json("[]"), "append", 6));
    assert_false(ipl_jbuiltin_is_method_of(ipl_jv_int(1), "real", 4));
}

static void test_filters(void **state)
{
    (void)state;
    ipl_jv_t m = s_json("[{\"role\": \"user\", \"n\": 2}, {\"role\": \"tool\"}, {\"role\": \"user\", \"n\": 1}]");
    /* transformers' tojson(x, ensure_ascii, indent, separators, sort_keys) */
    ipl_jv_t u = ipl_jv_cstr("\xc3\xa9");
    assert_string_equal(s_call("tojson", u, NULL, NULL), "\"\xc3\xa9\"");
    assert_string_equal(s_call("tojson", u, "[true]", NULL), "\"\\u00e9\"");
    assert_string_equal(s_call("tojson", s_json("{\"b\": 1, \"a\": [2]}"), NULL,
                               "{\"indent\": 1, \"sort_keys\": true}"),
                        "{\n \"a\": [\n  2\n ],\n \"b\": 1\n}");
    assert_string_equal(s_call("tojson", s_json("[1, 2]"), NULL, "{\"separators\": [\";\", \"=\"]}"), "[1;2]");
    assert_string_equal(s_call("tojson", u, NULL, "{\"separators\": [1, 2]}"),
                        "ERR: tojson: separators must be a pair of strings");
    assert_string_equal(s_call("tojson", u, NULL, "{\"indnet\": 2}"),
                        "ERR: tojson got an unexpected keyword argument 'indnet'");
    assert_string_equal(s_call("join", m, "[\",\"]", "{\"attribute\": \"role\"}"), "user,tool,user");
    assert_string_equal(s_call("map", m, NULL, "{\"attribute\": \"n\", \"default\": 0}"), "[2, 0, 1]");
    assert_string_equal(s_call("map", s_json("[1, 2]"), "[\"string\"]", NULL), "['1', '2']");
    assert_string_equal(s_call("map", ipl_jv_none(), "[\"string\"]", NULL), "[]");
    assert_string_equal(s_call("selectattr", s_json("[{\"n\": 2}, {\"n\": 1}]"), "[\"n\", \"gt\", 1]", NULL),
                        "[{'n': 2}]");
    /* a missing attribute is undefined, which `gt` refuses (as Python does) */
    assert_string_equal(s_call("selectattr", m, "[\"n\", \"gt\", 1]", NULL),
                        "ERR: '<' not supported between instances of 'int' and 'Undefined'");
    assert_string_equal(s_call("rejectattr", m, "[\"role\", \"equalto\", \"user\"]", NULL), "[{'role': 'tool'}]");
    assert_string_equal(s_call("select", s_json("[0, 1, 2, 3]"), "[\"odd\"]", NULL), "[1, 3]");
    assert_string_equal(s_call("select", s_json("[1]"), "[\"nope\"]", NULL), "ERR: no test named 'nope'");
    assert_string_equal(s_call("sort", m, NULL, "{\"attribute\": \"role\", \"reverse\": true}"),
                        "[{'role': 'user', 'n': 2}, {'role': 'user', 'n': 1}, {'role': 'tool'}]");
    assert_string_equal(s_call("sort", s_json("[\"b\", \"A\", \"a\", \"B\"]"), NULL, NULL), "['A', 'a', 'b', 'B']");
    assert_string_equal(s_call("sort", s_json("[1, \"a\"]"), NULL, NULL),
                        "ERR: '<' not supported between instances of 'str' and 'int'");
    assert_string_equal(s_call("unique", s_json("[\"a\", \"A\", \"b\"]"), NULL, NULL), "['a', 'b']");
    assert_string_equal(s_call("unique", s_json("[\"a\", \"A\"]"), NULL, "{\"case_sensitive\": true}"), "['a', 'A']");
    assert_string_equal(s_call("dictsort", s_json("{\"b\": 1, \"A\": 2}"), NULL, "{\"by\": \"value\", \"reverse\": true}"),
                        "[('A', 2), ('b', 1)]");
    assert_string_equal(s_call("default", ipl_jv_undef(), "[\"D\"]", NULL), "D");
    assert_string_equal(s_call("default", ipl_jv_cstr(""), "[\"D\"]", NULL), "");
    assert_string_equal(s_call("default", ipl_jv_cstr(""), "[\"D\"]", "{\"boolean\": true}"), "D");
    assert_string_equal(s_call("int", ipl_jv_cstr("ff"), "[0, 16]", NULL), "255");
    assert_string_equal(s_call("int", ipl_jv_cstr("1_000"), NULL, NULL), "1000");
    assert_string_equal(s_call("int", ipl_jv_cstr("4.9"), NULL, NULL), "4");
    assert_string_equal(s_call("float", ipl_jv_cstr("nope"), "[1.5]", NULL), "1.5");
    assert_string_equal(s_call("round", ipl_jv_float(2.675), "[2]", NULL), "2.67");
    assert_string_equal(s_call("round", ipl_jv_float(-0.5), NULL, NULL), "-0.0");
    assert_string_equal(s_call("round", ipl_jv_float(2.1), NULL, "{\"method\": \"up\"}"),
                        "ERR: round: method must be 'common', 'ceil' or 'floor'");
    assert_string_equal(s_call("sum", m, NULL, "{\"attribute\": \"n\"}"),
                        "ERR: sum: unsupported operand type 'Undefined'");
    assert_string_equal(s_call("sum", s_json("[1, 2.5]"), NULL, "{\"start\": 10}"), "13.5");
    assert_string_equal(s_call("max", s_json("[\"a\", \"B\"]"), NULL, NULL), "B");
    assert_string_equal(s_call("min", s_json("[]"), NULL, NULL), "");
    assert_string_equal(s_call("length", ipl_jv_cstr("\xc3\xa9t\xc3\xa9"), NULL, NULL), "3");
    assert_string_equal(s_call("length", ipl_jv_int(1), NULL, NULL), "ERR: object of type 'int' has no len()");
    assert_string_equal(s_call("items", ipl_jv_none(), NULL, NULL), "ERR: items: a mapping is needed, not NoneType");
    assert_string_equal(s_call("first", ipl_jv_cstr("xyz"), NULL, NULL), "x");
    assert_string_equal(s_call("format", ipl_jv_cstr("%s=%d%%"), "[\"a\", 2.9]", NULL), "a=2%");
    assert_string_equal(s_call("attr", s_json("{\"a\": 1}"), "[\"a\"]", NULL), "");
    assert_string_equal(s_call("upper", ipl_jv_int(5), NULL, NULL), "5");
    assert_string_equal(s_call("trim", ipl_jv_cstr("..a.."), "[\".\"]", NULL), "a");
    assert_string_equal(s_call("replace", ipl_jv_cstr("aaa"), "[\"a\", \"b\"]", "{\"count\": 2}"), "bba");
    assert_string_equal(s_call("wordcount", ipl_jv_cstr("one, two_2 \xe4\xbd\xa0\xe5\xa5\xbd"), NULL, NULL), "3");
    assert_string_equal(s_call("abs", ipl_jv_cstr("x"), NULL, NULL), "ERR: bad operand type for abs(): 'str'");
    assert_string_equal(s_call("length", ipl_jv_undef(), "[1]", NULL), "ERR: length takes at most 0 argument(s), got 1");
}

static bool s_test(const char *name, ipl_jv_t v, ipl_jv_t *arg)
{
    ipl_jargs_t a = {.n = arg ? 1 : 0, .v = arg};
    return ipl_jbuiltin_test(&s_env, ipl_jbuiltin_test_id(name, strlen(name)), v, &a);
}

static void test_tests(void **state)
{
    (void)state;
    ipl_jv_t one = ipl_jv_int(1), l = s_json("[1, 2]");
    assert_true(s_test("number", ipl_jv_bool(true), NULL)); /* bool is an int in Python */
    assert_false(s_test("integer", ipl_jv_bool(true), NULL));
    assert_true(s_test("iterable", ipl_jv_undef(), NULL)); /* Undefined has __iter__ */
    assert_true(s_test("sequence", ipl_jv_cstr("x"), NULL));
    ipl_jv_t g = s_json("[]");
    g.flags |= IPL_JV_F_GEN;
    assert_false(s_test("sequence", g, NULL));
    assert_true(s_test("iterable", g, NULL));
    assert_true(s_test("in", one, &l));
    assert_true(s_test("eq", ipl_jv_float(1.0), &one));
    assert_true(s_test("==", ipl_jv_float(1.0), &one));
    assert_true(s_test("ge", one, &one));
    assert_false(s_test("lt", one, &one));
    assert_true(s_test("odd", ipl_jv_float(3.0), NULL));
    assert_true(s_test("sameas", l, &l));
    assert_false(s_test("sameas", l, &(ipl_jv_t){0}));
    assert_true(s_test("lower", ipl_jv_cstr("abc 1"), NULL));
    assert_false(s_test("escaped", ipl_jv_cstr("x"), NULL));
    ipl_jv_t zero = ipl_jv_int(0);
    if (setjmp(s_jb) == 0) {
        s_test("divisibleby", one, &zero);
        fail_msg("divisibleby 0 did not fail");
    }
    assert_string_equal(s_err, "divisibleby: division by zero");
}

static const char *s_method(const char *name, ipl_jv_t self, const char *pos)
{
    ipl_jv_t p = s_json(pos ? pos : "[]");
    ipl_jargs_t a = {.n = p.u.l->n, .v = p.u.l->v};
    if (setjmp(s_jb)) {
        char *e = ipl_jarena_alloc(&s_a, strlen(s_err) + 6);
        sprintf(e, "ERR: %s", s_err);
        return e;
    }
    return s_show(ipl_jbuiltin_method(&s_env, ipl_jbuiltin_method_id(name, strlen(name)), self, &a));
}

static void test_methods_and_globals(void **state)
{
    (void)state;
    ipl_jv_t s = ipl_jv_cstr("a-b-c");
    assert_string_equal(s_method("split", s, "[\"-\", 1]"), "['a', 'b-c']");
    assert_string_equal(s_method("rsplit", s, "[\"-\", 1]"), "['a-b', 'c']");
    assert_string_equal(s_method("split", s, "[\"\"]"), "ERR: split: empty separator");
    assert_string_equal(s_method("index", s, "[\"z\"]"), "ERR: substring not found");
    assert_string_equal(s_method("join", ipl_jv_cstr(", "), "[[\"x\", 1]]"),
                        "ERR: sequence item 1: expected str instance, int found");
    assert_string_equal(s_method("format", ipl_jv_cstr("{}{!r}{0}"), "[\"a\", \"b\"]"), "a'b'a");
    assert_string_equal(s_method("format", ipl_jv_cstr("{:>4}"), "[1]"),
                        "ERR: format: format specs and attribute fields are not supported");
    assert_string_equal(s_method("get", s_json("{\"a\": 1}"), "[\"b\"]"), "None");
    assert_string_equal(s_method("items", s_json("{\"a\": 1}"), NULL), "[('a', 1)]");
    assert_string_equal(s_method("index", s_json("[1, 2]"), "[2]"), "1");
    assert_string_equal(s_method("strip", ipl_jv_int(1), NULL), "ERR: 'int' object has no method 'strip'");
    assert_string_equal(s_method("upper", s_json("[1]"), NULL), "ERR: 'list' object has no method 'upper'");
    /* globals */
    ipl_jv_t r3 = s_json("[1, 10, 3]");
    ipl_jargs_t ra = {.n = 3, .v = r3.u.l->v};
    int range = ipl_jbuiltin_global_id("range", 5);
    assert_string_equal(s_show(ipl_jbuiltin_global(&s_env, range, &ra)), "[1, 4, 7]");
    ipl_jv_t big = ipl_jv_int(1000000);
    ipl_jargs_t rb = {.n = 1, .v = &big};
    if (setjmp(s_jb) == 0) {
        ipl_jbuiltin_global(&s_env, range, &rb);
        fail_msg("range(1000000) was not bounded");
    }
    assert_string_equal(s_err, "range: more than 1000 items");
    ipl_jkwarg_t kw = {"a", 1, ipl_jv_int(1)};
    ipl_jargs_t na = {.nkw = 1, .kw = &kw};
    ipl_jv_t ns = ipl_jbuiltin_global(&s_env, ipl_jbuiltin_global_id("namespace", 9), &na);
    assert_int_equal(ns.type, IPL_JV_NS);
    assert_string_equal(s_show(ns), "<Namespace {'a': 1}>");
    ipl_jv_t fmt = ipl_jv_cstr("%Y-%m-%d");
    ipl_jargs_t fa = {.n = 1, .v = &fmt};
    setenv("TZ", "UTC", 1);
    assert_string_equal(s_show(ipl_jbuiltin_global(&s_env, ipl_jbuiltin_global_id("strftime_now", 12), &fa)),
                        "2024-07-26");
    /* `in`, `%`, str() */
    assert_true(ipl_jbuiltin_contains(&s_env, s_json("{\"k\": 1}"), ipl_jv_cstr("k")));
    assert_false(ipl_jbuiltin_contains(&s_env, ipl_jv_undef(), ipl_jv_int(1)));
    assert_true(ipl_jbuiltin_contains(&s_env, ipl_jv_cstr("abc"), ipl_jv_cstr("")));
    if (setjmp(s_jb) == 0) {
        ipl_jbuiltin_contains(&s_env, ipl_jv_none(), ipl_jv_int(1));
        fail_msg("`in None` did not fail");
    }
    assert_string_equal(s_err, "argument of type 'NoneType' is not iterable");
    ipl_jv_t tup = s_json("[\"x\", 2]");
    tup.flags |= IPL_JV_F_TUPLE;
    assert_string_equal(s_show(ipl_jbuiltin_percent(&s_env, ipl_jv_cstr("%s:%d"), tup)), "x:2");
    assert_string_equal(s_show(ipl_jbuiltin_percent(&s_env, ipl_jv_cstr("-"), s_json("[1]"))), "-");
    assert_string_equal(s_show(ipl_jbuiltin_to_str(&s_env, s_json("[true, null]"))), "[True, None]");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_filters),
        cmocka_unit_test(test_tests),
        cmocka_unit_test(test_methods_and_globals),
    };
    return cmocka_run_group_tests(tests, s_setup, s_teardown);
}
