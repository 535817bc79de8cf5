/*
 * Unit tests of ipl_jinja_value: Python's float repr, str() and repr() of every type,
 * json.dumps with transformers' tojson options, equality / ordering / truthiness as Python
 * has them, JSON input (ints vs floats, duplicate keys), the arena's budget and the buffer's
 * limit. Expected texts are Python 3's output for the same values.
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

#include "ipl_jinja_value.h"

static ipl_jarena_t s_a;
/* the JSON trees the values borrow from, freed at teardown */
static cJSON *s_keep[64];
static size_t s_nkeep;

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

static const char *s_text(ipl_jbuf_t *b)
{
    ipl_jbuf_putc(b, '\0');
    return b->p;
}

static void s_expect_float(double f, const char *want)
{
    ipl_jbuf_t b;
    ipl_jbuf_init(&b, &s_a, 0, NULL, NULL);
    ipl_jv_write_float(&b, f);
    assert_string_equal(s_text(&b), want);
}

static ipl_jv_t s_json(const char *text)
{
    cJSON *j = cJSON_Parse(text);
    assert_non_null(j);
    /* the value borrows the cJSON strings: keep the tree until teardown */
    assert_true(s_nkeep < 64);
    s_keep[s_nkeep++] = j;
    return ipl_jv_from_json(&s_a, j);
}

static void s_expect(ipl_jv_t v, bool repr, const char *want)
{
    ipl_jbuf_t b;
    ipl_jbuf_init(&b, &s_a, 0, NULL, NULL);
    assert_int_equal(repr ? ipl_jv_write_repr(&b, v) : ipl_jv_write_str(&b, v), 0);
    assert_string_equal(s_text(&b), want);
}

static void s_expect_json(ipl_jv_t v, const ipl_jjson_opts_t *o, const char *want)
{
    ipl_jbuf_t b;
    ipl_jbuf_init(&b, &s_a, 0, NULL, NULL);
    assert_int_equal(ipl_jv_write_json(&b, v, o), 0);
    assert_string_equal(s_text(&b), want);
}

static void test_float_repr(void **state)
{
    (void)state;
    static const struct {
        double f;
        const char *want;
    } cases[] = {
        {1.0, "1.0"},          {0.1, "0.1"},          {1e16, "1e+16"},
        {1.5e-05, "1.5e-05"},  {123456789012345678.0, "1.2345678901234568e+17"},
        {1e-4, "0.0001"},      {1e-5, "1e-05"},       {-0.0, "-0.0"},
        {0.1 + 0.2, "0.30000000000000004"},           {5e-324, "5e-324"},
        {1.7976931348623157e308, "1.7976931348623157e+308"}, {100.0, "100.0"},
        {1e15, "1000000000000000.0"}, {2.5, "2.5"},   {-3.25e-7, "-3.25e-07"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) s_expect_float(cases[i].f, cases[i].want);
    s_expect_float(1.0 / 0.0, "inf");
    s_expect_float(-1.0 / 0.0, "-inf");
    s_expect_float(0.0 / 0.0, "nan");
}

static void test_str_and_repr(void **state)
{
    (void)state;
    s_expect(ipl_jv_undef(), false, "");
    s_expect(ipl_jv_undef(), true, "Undefined");
    s_expect(ipl_jv_none(), false, "None");
    s_expect(ipl_jv_bool(true), false, "True");
    s_expect(ipl_jv_int(-42), false, "-42");
    s_expect(ipl_jv_cstr("it's"), false, "it's");
    s_expect(ipl_jv_cstr("it's"), true, "\"it's\"");
    s_expect(ipl_jv_cstr("a\"b"), true, "'a\"b'");
    s_expect(ipl_jv_cstr("both'\""), true, "'both\\'\"'");
    s_expect(ipl_jv_cstr("\x07\xe2\x80\x8b\xc2\xa0\xc3\xa9\xf0\x9f\x98\x80\t\n\\"), true,
             "'\\x07\\u200b\\xa0\xc3\xa9\xf0\x9f\x98\x80\\t\\n\\\\'");
    s_expect(s_json("[1, \"a\", null, true, 2.5, [], {}]"), false,
             "[1, 'a', None, True, 2.5, [], {}]");
    s_expect(s_json("{\"k\": [1, {\"n\": null}], \"s\": \"x\"}"), false,
             "{'k': [1, {'n': None}], 's': 'x'}");
    ipl_jv_t t = s_json("[1]");
    t.flags |= IPL_JV_F_TUPLE;
    s_expect(t, false, "(1,)");
    ipl_jv_t ns = s_json("{\"a\": 1}");
    ns.type = IPL_JV_NS;
    s_expect(ns, false, "<Namespace {'a': 1}>");
    /* no stable text for a generator or a callable */
    ipl_jbuf_t b;
    ipl_jbuf_init(&b, &s_a, 0, NULL, NULL);
    ipl_jv_t g = s_json("[1]");
    g.flags |= IPL_JV_F_GEN;
    assert_int_equal(ipl_jv_write_str(&b, g), -1);
    assert_int_equal(ipl_jv_write_str(&b, (ipl_jv_t){.type = IPL_JV_CALL}), -1);
    assert_string_equal(ipl_jv_type_name(g), "generator");
    assert_string_equal(ipl_jv_type_name(t), "tuple");
}

static void test_json(void **state)
{
    (void)state;
    ipl_jjson_opts_t plain = {.indent = -1};
    s_expect_json(s_json("{\"k\": [\"\xf0\x9f\x98\x80\", \"\xc3\xa9\\u0001\\u007f\", 1.5, null, true, {}], \"e\": []}"),
                  &plain, "{\"k\": [\"\xf0\x9f\x98\x80\", \"\xc3\xa9\\u0001\x7f\", 1.5, null, true, {}], \"e\": []}");
    ipl_jjson_opts_t ascii = {.indent = -1, .ensure_ascii = true};
    s_expect_json(s_json("[\"\xf0\x9f\x98\x80\", \"\xc3\xa9\\u0001\\u007f\"]"), &ascii,
                  "[\"\\ud83d\\ude00\", \"\\u00e9\\u0001\\u007f\"]");
    ipl_jjson_opts_t pretty = {.indent = 2, .sort_keys = true};
    s_expect_json(s_json("{\"b\": [1, {\"c\": []}], \"a\": 2}"), &pretty,
                  "{\n  \"a\": 2,\n  \"b\": [\n    1,\n    {\n      \"c\": []\n    }\n  ]\n}");
    ipl_jjson_opts_t zero = {.indent = 0};
    s_expect_json(s_json("[1]"), &zero, "[\n1\n]");
    ipl_jjson_opts_t compact = {.indent = -1, .item_sep = ",", .item_sep_n = 1, .key_sep = ":", .key_sep_n = 1};
    s_expect_json(s_json("[1, [2, {\"a\": 3}]]"), &compact, "[1,[2,{\"a\":3}]]");
    s_expect_json(ipl_jv_cstr("q\"\\\n\t\b\f\r\x1f"), &plain, "\"q\\\"\\\\\\n\\t\\b\\f\\r\\u001f\"");
    s_expect_json(ipl_jv_float(1.0), &plain, "1.0");
    s_expect_json(ipl_jv_float(1.0 / 0.0), &plain, "Infinity");
    /* dict keys as Python converts them; 1 and True are one key */
    ipl_jv_t d = ipl_jv_dict(&s_a, 0);
    ipl_jdict_set(&s_a, &d, ipl_jv_int(1), ipl_jv_cstr("x"));
    ipl_jdict_set(&s_a, &d, ipl_jv_bool(true), ipl_jv_cstr("y"));
    ipl_jdict_set(&s_a, &d, ipl_jv_none(), ipl_jv_cstr("z"));
    ipl_jdict_set(&s_a, &d, ipl_jv_float(2.5), ipl_jv_cstr("w"));
    s_expect_json(d, &plain, "{\"1\": \"y\", \"null\": \"z\", \"2.5\": \"w\"}");
    /* what json.dumps refuses */
    ipl_jbuf_t b;
    ipl_jbuf_init(&b, &s_a, 0, NULL, NULL);
    assert_int_equal(ipl_jv_write_json(&b, ipl_jv_undef(), &plain), -1);
    ipl_jv_t ns = s_json("{}");
    ns.type = IPL_JV_NS;
    assert_int_equal(ipl_jv_write_json(&b, ns, &plain), -1);
}

static void test_compare(void **state)
{
    (void)state;
    assert_true(ipl_jv_equal(ipl_jv_int(1), ipl_jv_float(1.0)));
    assert_true(ipl_jv_equal(ipl_jv_bool(true), ipl_jv_int(1)));
    assert_false(ipl_jv_equal(ipl_jv_cstr("1"), ipl_jv_int(1)));
    assert_true(ipl_jv_equal(ipl_jv_undef(), ipl_jv_undef()));
    assert_false(ipl_jv_equal(ipl_jv_undef(), ipl_jv_none()));
    assert_true(ipl_jv_equal(s_json("{\"a\": [1, {\"b\": null}]}"), s_json("{\"a\": [1.0, {\"b\": null}]}")));
    assert_false(ipl_jv_equal(s_json("[1, 2]"), s_json("[1]")));
    ipl_jv_t t = s_json("[1]");
    t.flags |= IPL_JV_F_TUPLE;
    assert_false(ipl_jv_equal(t, s_json("[1]")));
    bool lt;
    assert_int_equal(ipl_jv_less(ipl_jv_cstr("ab"), ipl_jv_cstr("b"), &lt), 0);
    assert_true(lt);
    assert_int_equal(ipl_jv_less(ipl_jv_cstr("\xc3\xa9"), ipl_jv_cstr("z"), &lt), 0);
    assert_false(lt); /* code point order */
    assert_int_equal(ipl_jv_less(s_json("[1, 2]"), s_json("[1, 3]"), &lt), 0);
    assert_true(lt);
    assert_int_equal(ipl_jv_less(ipl_jv_int(1), ipl_jv_cstr("a"), &lt), -1);
    assert_int_equal(ipl_jv_less(ipl_jv_none(), ipl_jv_none(), &lt), -1);
    /* truthiness */
    assert_false(ipl_jv_truthy(s_json("[]")));
    assert_false(ipl_jv_truthy(s_json("{}")));
    assert_false(ipl_jv_truthy(ipl_jv_cstr("")));
    assert_false(ipl_jv_truthy(ipl_jv_float(0.0)));
    assert_true(ipl_jv_truthy(ipl_jv_cstr("0")));
    ipl_jv_t g = s_json("[]");
    g.flags |= IPL_JV_F_GEN;
    assert_true(ipl_jv_truthy(g)); /* a generator object is always true */
}

static void test_from_json(void **state)
{
    (void)state;
    ipl_jv_t v = s_json("{\"i\": 3, \"f\": 2.5, \"big\": 1e300, \"dup\": 1, \"x\": 0, \"dup\": 2}");
    assert_int_equal(v.type, IPL_JV_DICT);
    assert_int_equal(ipl_jdict_get(&v, "i", 1)->type, IPL_JV_INT);
    assert_int_equal(ipl_jdict_get(&v, "f", 1)->type, IPL_JV_FLOAT);
    assert_int_equal(ipl_jdict_get(&v, "big", 3)->type, IPL_JV_FLOAT);
    /* json.loads: the last duplicate wins, in the first one's place */
    assert_int_equal(v.u.d->n, 5);
    assert_int_equal(ipl_jdict_get(&v, "dup", 3)->u.i, 2);
    assert_memory_equal(v.u.d->k[3].u.s.p, "dup", 3);
    assert_null(ipl_jdict_get(&v, "nope", 4));
    assert_int_equal(ipl_jv_from_json(&s_a, NULL).type, IPL_JV_NONE);
    /* UTF-8 helpers */
    assert_int_equal(ipl_jv_strlen("a\xc3\xa9\xf0\x9f\x98\x80", 7), 3);
    assert_int_equal(ipl_jv_offset("a\xc3\xa9\xf0\x9f\x98\x80", 7, 2), 3);
    assert_int_equal(ipl_jv_offset("ab", 2, 5), 2);
    assert_true(ipl_jv_is_space(0x3000));
    assert_true(ipl_jv_is_space(0x1f));
    assert_false(ipl_jv_is_space(0xfeff));
}

static int s_oom_calls;
static jmp_buf s_jb;

static void s_on_limit(void *arg)
{
    (void)arg;
    s_oom_calls++;
    longjmp(s_jb, 1);
}

static void test_limits(void **state)
{
    (void)state;
    ipl_jarena_t a;
    ipl_jarena_init(&a, 10000, s_on_limit, NULL);
    s_oom_calls = 0;
    if (setjmp(s_jb) == 0) {
        for (int i = 0; i < 100; i++) assert_non_null(ipl_jarena_alloc(&a, 1000));
        fail_msg("the budget was not enforced");
    }
    assert_int_equal(s_oom_calls, 1);
    ipl_jarena_free(&a);
    /* without a hook the arena returns NULL */
    ipl_jarena_init(&a, 100, NULL, NULL);
    assert_non_null(ipl_jarena_alloc(&a, 64));
    assert_null(ipl_jarena_alloc(&a, 64));
    assert_string_equal(ipl_jarena_strdup(&a, "abc", 2), "ab");
    ipl_jarena_free(&a);
    /* a large allocation gets its own chunk */
    ipl_jarena_init(&a, 0, NULL, NULL);
    char *big = ipl_jarena_alloc(&a, 5u << 20);
    assert_non_null(big);
    memset(big, 1, 5u << 20);
    ipl_jarena_free(&a);
    /* the buffer's byte limit */
    ipl_jarena_init(&a, 0, NULL, NULL);
    ipl_jbuf_t b;
    ipl_jbuf_init(&b, &a, 10, s_on_limit, NULL);
    s_oom_calls = 0;
    if (setjmp(s_jb) == 0) {
        ipl_jbuf_puts(&b, "0123456789");
        ipl_jbuf_putc(&b, 'x');
        fail_msg("the limit was not enforced");
    }
    assert_int_equal(s_oom_calls, 1);
    assert_int_equal(b.n, 10);
    ipl_jarena_free(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_float_repr), cmocka_unit_test(test_str_and_repr),
        cmocka_unit_test(test_json),       cmocka_unit_test(test_compare),
        cmocka_unit_test(test_from_json),  cmocka_unit_test(test_limits),
    };
    return cmocka_run_group_tests(tests, s_setup, s_teardown);
}
