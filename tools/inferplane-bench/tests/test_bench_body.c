/*
 * Unit tests of bench_body: each API's body is valid JSON with the fields GuideLLM sends,
 * the history in order, text escaped, and the buffer growing past its first size.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <cjson/cJSON.h>
#include <string.h>

#include "bench_body.h"

static cJSON *s_build(bench_api_t api, bool stream, bool ignore_eos)
{
    bench_msg_t msgs[] = {{false, "hi \"there\"\n", 11}, {true, "ans\x01", 4}, {false, "next", 4}};
    bench_body_opts_t o = {api, "sim-model", stream, ignore_eos};
    bench_buf_t b = {0};
    bench_body_build(&b, &o, msgs, 3, 16);
    assert_false(b.failed);
    assert_int_equal(strlen(b.p), b.len);
    cJSON *root = cJSON_Parse(b.p);
    assert_non_null(root);
    bench_buf_free(&b);
    return root;
}

static void test_chat(void **state)
{
    (void)state;
    cJSON *r = s_build(BENCH_API_CHAT, true, true);
    assert_string_equal(cJSON_GetObjectItem(r, "model")->valuestring, "sim-model");
    cJSON *m = cJSON_GetObjectItem(r, "messages");
    assert_int_equal(cJSON_GetArraySize(m), 3);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(m, 0), "content")->valuestring,
                        "hi \"there\"\n");
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(m, 1), "role")->valuestring,
                        "assistant");
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(m, 1), "content")->valuestring,
                        "ans\x01");
    assert_int_equal(cJSON_GetObjectItem(r, "max_tokens")->valueint, 16);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(r, "stream")));
    assert_true(cJSON_IsTrue(
        cJSON_GetObjectItem(cJSON_GetObjectItem(r, "stream_options"), "include_usage")));
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(r, "ignore_eos")));
    cJSON_Delete(r);
    r = s_build(BENCH_API_CHAT, false, false);
    assert_null(cJSON_GetObjectItem(r, "stream"));
    assert_null(cJSON_GetObjectItem(r, "ignore_eos"));
    cJSON_Delete(r);
}

static void test_completions_and_messages(void **state)
{
    (void)state;
    cJSON *r = s_build(BENCH_API_COMPLETIONS, true, true);
    assert_string_equal(cJSON_GetObjectItem(r, "prompt")->valuestring,
                        "hi \"there\"\n ans\x01 next");
    assert_null(cJSON_GetObjectItem(r, "messages"));
    cJSON_Delete(r);
    r = s_build(BENCH_API_MESSAGES, true, true);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(r, "messages")), 3);
    assert_null(cJSON_GetObjectItem(r, "stream_options")); // not Anthropic's
    assert_null(cJSON_GetObjectItem(r, "ignore_eos"));
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(r, "stream")));
    cJSON_Delete(r);
    assert_string_equal(bench_body_path(BENCH_API_MESSAGES), "/v1/messages");
    assert_string_equal(bench_body_path(BENCH_API_COMPLETIONS), "/v1/completions");
}

static void test_buffer_growth(void **state)
{
    (void)state;
    bench_buf_t b = {0};
    char big[10000];
    memset(big, 'a', sizeof big);
    for (int i = 0; i < 10; i++)
        bench_buf_add(&b, big, sizeof big);
    assert_int_equal(b.len, 100000);
    assert_false(b.failed);
    char *at = bench_buf_extend(&b, 3);
    memcpy(at, "xyz", 3);
    assert_string_equal(b.p + 100000, "xyz");
    bench_buf_free(&b);
    assert_null(b.p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chat),
        cmocka_unit_test(test_completions_and_messages),
        cmocka_unit_test(test_buffer_growth),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
