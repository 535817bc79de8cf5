/*
 * Unit tests of api_json: strict parsing (one value, white space around it only, the error
 * offset, the given length honoured) and type names.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "api_json.h"

static void test_parse(void **state)
{
    (void)state;
    size_t at = 99;
    cJSON *j = api_json_parse(" {\"a\":1} \r\n\t", 12, &at);
    assert_non_null(j);
    assert_int_equal(at, 0);
    cJSON_Delete(j);
    assert_null(api_json_parse("{\"a\":1} x", 9, &at));
    assert_int_equal(at, 8);
    assert_null(api_json_parse("{\"a\":", 5, &at));
    assert_null(api_json_parse("", 0, &at));
    assert_null(api_json_parse(NULL, 3, NULL));
    /* only len bytes are read: the rest of the C string does not count */
    j = api_json_parse("[1]]]]", 3, NULL);
    assert_non_null(j);
    cJSON_Delete(j);
    j = api_json_parse("\"s\"", 3, NULL);
    assert_true(cJSON_IsString(j));
    cJSON_Delete(j);
}

static void test_types(void **state)
{
    (void)state;
    const struct {
        const char *json, *name;
    } rows[] = {
        {"null", "null"},      {"true", "a boolean"}, {"1", "a number"},
        {"\"x\"", "a string"}, {"[]", "an array"},    {"{}", "an object"},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        cJSON *j = cJSON_Parse(rows[i].json);
        assert_string_equal(api_json_type(j), rows[i].name);
        assert_int_equal(api_json_absent(j), strcmp(rows[i].json, "null") == 0);
        cJSON_Delete(j);
    }
    assert_string_equal(api_json_type(NULL), "nothing");
    assert_true(api_json_absent(NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_types),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
