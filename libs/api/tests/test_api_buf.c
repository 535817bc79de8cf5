/*
 * Unit tests of api_buf: appends and growth, printf, JSON string escaping (every escape and
 * every control byte), sticky errors, clear, take.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "api_buf.h"
#include "ipl_error.h"

static void test_append_and_grow(void **state)
{
    (void)state;
    api_buf_t b = {0};
    for (int i = 0; i < 1000; i++)
        assert_int_equal(api_buf_puts(&b, "0123456789"), 0);
    assert_int_equal(b.len, 10000);
    assert_true(b.cap > b.len);
    assert_int_equal(b.data[b.len], '\0');
    assert_int_equal(memcmp(b.data + 9990, "0123456789", 10), 0);
    assert_int_equal(api_buf_printf(&b, "|%d|%s|", 42, "x"), 0);
    assert_string_equal(b.data + 10000, "|42|x|");
    assert_int_equal(api_buf_append(&b, "", 0), 0);
    api_buf_clear(&b);
    assert_int_equal(b.len, 0);
    assert_string_equal(b.data, "");
    api_buf_free(&b);
    assert_null(b.data);
    assert_int_equal(b.cap, 0);
}

static void test_json_string(void **state)
{
    (void)state;
    api_buf_t b = {0};
    const char in[] = "a\"b\\c\n\r\t\b\f\x01\x1f\x7f/é";
    assert_int_equal(api_buf_json_string(&b, in, sizeof(in) - 1), 0);
    assert_string_equal(b.data, "\"a\\\"b\\\\c\\n\\r\\t\\b\\f\\u0001\\u001f\x7f/é\"");
    /* every control byte round-trips through a JSON parser */
    api_buf_clear(&b);
    char all[32];
    for (int i = 0; i < 31; i++)
        all[i] = (char)(i + 1);
    all[31] = '\0';
    api_buf_json_string(&b, all, 31);
    cJSON *j = cJSON_Parse(b.data);
    assert_non_null(j);
    assert_string_equal(j->valuestring, all);
    cJSON_Delete(j);
    /* embedded NUL is escaped, not a terminator */
    api_buf_clear(&b);
    api_buf_json_string(&b, "a\0b", 3);
    assert_string_equal(b.data, "\"a\\u0000b\"");
    api_buf_clear(&b);
    api_buf_json_string(&b, "", 0);
    assert_string_equal(b.data, "\"\"");
    api_buf_free(&b);
}

static void test_sticky_error_and_take(void **state)
{
    (void)state;
    api_buf_t b = {0};
    api_buf_puts(&b, "kept");
    b.error = IPL_E_NOMEM;
    assert_int_equal(api_buf_puts(&b, "lost"), IPL_E_NOMEM);
    assert_int_equal(api_buf_printf(&b, "%s", "lost"), IPL_E_NOMEM);
    assert_int_equal(api_buf_json_string(&b, "x", 1), IPL_E_NOMEM);
    assert_string_equal(b.data, "kept");
    assert_null(api_buf_take(&b)); /* an errored buffer gives nothing, and is freed */
    assert_null(b.data);
    /* growth past the bound is refused */
    api_buf_t c = {0};
    assert_int_equal(api_buf_append(&c, "x", API_BUF_MAX), IPL_E_RANGE);
    assert_int_equal(c.error, IPL_E_RANGE);
    api_buf_clear(&c); /* clear resets the error */
    assert_int_equal(api_buf_puts(&c, "ok"), 0);
    char *s = api_buf_take(&c);
    assert_string_equal(s, "ok");
    free(s);
    assert_null(c.data);
    api_buf_t empty = {0};
    s = api_buf_take(&empty);
    assert_string_equal(s, "");
    free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_append_and_grow),
        cmocka_unit_test(test_json_string),
        cmocka_unit_test(test_sticky_error_and_take),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
