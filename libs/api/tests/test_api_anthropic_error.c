/*
 * Unit tests of api_anthropic_error: the status → type table (every row), the body and the
 * streamed event, escaping, truncation, and reading OpenAI/vLLM error bodies.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "api_anthropic_error.h"
#include "api_test.h"

static void test_types(void **state)
{
    (void)state;
    const struct {
        int status;
        const char *type;
    } rows[] = {
        {400, "invalid_request_error"},
        {401, "authentication_error"},
        {402, "billing_error"},
        {403, "permission_error"},
        {404, "not_found_error"},
        {413, "request_too_large"},
        {429, "rate_limit_error"},
        {500, "api_error"},
        {503, "overloaded_error"},
        {529, "overloaded_error"},
        {405, "invalid_request_error"},
        {409, "invalid_request_error"},
        {422, "invalid_request_error"},
        {502, "api_error"},
        {504, "api_error"},
        {200, "api_error"},
        {0, "api_error"},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
        assert_string_equal(api_anthropic_error_type(rows[i].status), rows[i].type);
}

static void test_body_and_event(void **state)
{
    (void)state;
    char *body = api_anthropic_error_body(404, "model \"x\" not found\n(tab\there)");
    assert_string_equal(body,
                        "{\"type\":\"error\",\"error\":{\"type\":\"not_found_error\",\"message\":"
                        "\"model \\\"x\\\" not found\\n(tab\\there)\"}}");
    cJSON *j = cJSON_Parse(body);
    assert_string_equal(
        cJSON_GetObjectItem(cJSON_GetObjectItem(j, "error"), "message")->valuestring,
        "model \"x\" not found\n(tab\there)");
    cJSON_Delete(j);
    free(body);
    body = api_anthropic_error_body(500, NULL);
    assert_string_equal(body,
                        "{\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"\"}}");
    free(body);

    api_buf_t out = {0};
    assert_int_equal(api_anthropic_error_event(&out, 529, "busy"), 0);
    assert_string_equal(out.data, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":"
                                  "\"overloaded_error\",\"message\":\"busy\"}}\n\n");
    api_buf_free(&out);
}

static void test_set_truncates(void **state)
{
    (void)state;
    char big[2 * API_ANTHROPIC_ERROR_MAX];
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    api_anthropic_error_t err;
    assert_ptr_equal(api_anthropic_error_set(&err, 413, "%s", big), &err);
    assert_int_equal(err.status, 413);
    assert_int_equal(strlen(err.message), API_ANTHROPIC_ERROR_MAX - 1);
}

static void test_from_openai(void **state)
{
    (void)state;
    const struct {
        const char *body;
        int found, status;
        const char *message;
    } rows[] = {
        {"{'error':{'message':'bad','type':'invalid_request_error','code':null}}", 1, 418, "bad"},
        {"{'error':{'message':'gone','code':404}}", 1, 404, "gone"},
        {"{'error':{'message':'x','code':200}}", 1, 418, "x"},   /* not an error status */
        {"{'error':{'message':'x','code':'429'}}", 1, 418, "x"}, /* a string code names no status */
        {"{'object':'error','message':'vllm','code':400}", 1, 400, "vllm"},
        {"{'error':'plain'}", 1, 418, "plain"},
        {"{'error':{}}", 1, 418, "the upstream reported an error without a message"},
        {"{'object':'chat.completion'}", 0, 0, NULL},
        {"{'error':null}", 0, 0, NULL},
        {"[1]", 0, 0, NULL},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        cJSON *j = api_test_json(rows[i].body);
        api_anthropic_error_t err = {.status = -1};
        assert_int_equal(api_anthropic_error_from_openai(j, 418, &err), rows[i].found);
        if (rows[i].found) {
            assert_int_equal(err.status, rows[i].status);
            assert_string_equal(err.message, rows[i].message);
        } else {
            assert_int_equal(err.status, -1); /* untouched */
        }
        cJSON_Delete(j);
    }
    assert_int_equal(api_anthropic_error_from_openai(NULL, 500, NULL), 0);
}

static void test_translate(void **state)
{
    (void)state;
    char *in = api_test_q("{'error':{'message':'rate limited','code':429}}");
    char *body = api_anthropic_error_translate(429, in, strlen(in));
    assert_string_equal(body,
                        "{\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":"
                        "\"rate limited\"}}");
    free(body);
    free(in);
    body = api_anthropic_error_translate(502, "<html>bad gateway</html>", 24);
    assert_string_equal(body, "{\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":"
                              "\"the upstream answered HTTP 502\"}}");
    free(body);
    body = api_anthropic_error_translate(503, NULL, 0);
    assert_non_null(strstr(body, "overloaded_error"));
    free(body);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_types),         cmocka_unit_test(test_body_and_event),
        cmocka_unit_test(test_set_truncates), cmocka_unit_test(test_from_openai),
        cmocka_unit_test(test_translate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
