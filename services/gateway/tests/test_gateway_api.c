/* Unit tests of gateway_api: validation, error bodies, the upstream body. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway_api.h"
#include "ipl_error.h"
#include "ipl_prompt.h"

static ipl_prompt_t *s_prompt; /* the built-in model: chats render as ChatML */

/* Parses `body`; expects success. */
static gateway_api_req_t *s_ok(gateway_api_kind_t kind, const char *body)
{
    gateway_api_req_t *req = NULL;
    gateway_api_error_t err = {0};
    int rc = gateway_api_parse(kind, body, strlen(body), s_prompt, &req, &err);
    if (rc != 0) fail_msg("unexpected error for %s: %s", body, err.message);
    assert_non_null(req);
    return req;
}

/* Parses `body`; expects a 400 naming `param` (NULL: none) and mentioning `needle`. */
static void s_bad(gateway_api_kind_t kind, const char *body, const char *param, const char *needle)
{
    gateway_api_req_t *req = (gateway_api_req_t *)0x1;
    gateway_api_error_t err = {0};
    int rc = gateway_api_parse(kind, body, body ? strlen(body) : 0, s_prompt, &req, &err);
    if (rc == 0) fail_msg("accepted invalid body %s", body);
    assert_int_equal(rc, IPL_E_INVAL);
    assert_null(req);
    assert_int_equal(err.status, 400);
    assert_string_equal(err.type, "invalid_request_error");
    if (param) {
        assert_non_null(err.param);
        assert_string_equal(err.param, param);
    } else {
        assert_null(err.param);
    }
    if (!strstr(err.message, needle)) fail_msg("message \"%s\" lacks \"%s\"", err.message, needle);
}

static void test_chat_valid(void **state)
{
    (void)state;
    gateway_api_req_t *req =
        s_ok(GATEWAY_API_CHAT, "{\"model\":\"m\",\"stream\":true,\"max_tokens\":5,"
                               "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
                               "\"temperature\":0.5}");
    assert_int_equal(req->kind, GATEWAY_API_CHAT);
    assert_string_equal(req->model, "m");
    assert_true(req->stream);
    assert_int_equal(req->max_tokens, 5);
    assert_int_equal(req->prompts, 1);
    assert_string_equal(req->prompt, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
    assert_int_equal(req->prompt_len, strlen(req->prompt));
    gateway_api_req_destroy(&req);
    assert_null(req);

    /* nulls mean absent; max_completion_tokens is accepted; no generation prompt on request */
    req = s_ok(GATEWAY_API_CHAT, " {\"model\":\"m\",\"stream\":null,\"max_tokens\":null,"
                                 "\"max_completion_tokens\":7,\"add_generation_prompt\":false,"
                                 "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]} \n");
    assert_false(req->stream);
    assert_int_equal(req->max_tokens, 7);
    assert_string_equal(req->prompt, "<|im_start|>user\nhi<|im_end|>\n");
    assert_true(req->chat);
    assert_null(req->cache_salt);
    gateway_api_req_destroy(&req);

    /* vLLM's cache_salt is kept for the block hashes */
    req = s_ok(GATEWAY_API_CHAT, "{\"model\":\"m\",\"cache_salt\":\"s1\","
                                 "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}");
    assert_string_equal(req->cache_salt, "s1");
    gateway_api_req_destroy(&req);
    req = s_ok(GATEWAY_API_COMPLETIONS, "{\"model\":\"m\",\"prompt\":\"x\"}");
    assert_false(req->chat);
    gateway_api_req_destroy(&req);
}

static void test_chat_fields_checked(void **state)
{
    (void)state;
    const char *msgs = "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]";
    char body[256];
    snprintf(body, sizeof body, "{\"model\":\"m\",\"cache_salt\":5,%s}", msgs);
    s_bad(GATEWAY_API_CHAT, body, "cache_salt", "must be a string");
    snprintf(body, sizeof body, "{\"model\":\"m\",\"tools\":{},%s}", msgs);
    s_bad(GATEWAY_API_CHAT, body, "tools", "must be an array");
    snprintf(body, sizeof body, "{\"model\":\"m\",\"chat_template_kwargs\":[],%s}", msgs);
    s_bad(GATEWAY_API_CHAT, body, "chat_template_kwargs", "must be an object");
    snprintf(body, sizeof body, "{\"model\":\"m\",\"continue_final_message\":1,%s}", msgs);
    s_bad(GATEWAY_API_CHAT, body, "continue_final_message", "must be a boolean");
}

static void test_chat_invalid(void **state)
{
    (void)state;
    const gateway_api_kind_t C = GATEWAY_API_CHAT;
    s_bad(C, NULL, NULL, "empty");
    s_bad(C, "", NULL, "empty");
    s_bad(C, "{\"model\":", NULL, "not valid JSON");
    s_bad(C, "{\"model\":\"m\"} trailing", NULL, "not valid JSON");
    s_bad(C, "[1,2]", NULL, "must be a JSON object, got an array");
    s_bad(C, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", "model", "required");
    s_bad(C, "{\"model\":5,\"messages\":[]}", "model", "got a number");
    s_bad(C, "{\"model\":\"\",\"messages\":[]}", "model", "empty string");
    s_bad(C, "{\"model\":\"m\"}", "messages", "required");
    s_bad(C, "{\"model\":\"m\",\"messages\":{}}", "messages", "got an object");
    s_bad(C, "{\"model\":\"m\",\"messages\":[]}", "messages", "at least one");
    s_bad(C, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":5}]}", "messages",
          "invalid \"messages\"");
    s_bad(C, "{\"model\":\"m\",\"messages\":[7]}", "messages", "invalid \"messages\"");
    const char *ok_msgs = "\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]";
    char body[256];
    const struct {
        const char *field;
        const char *needle;
    } cases[] = {
        {"\"stream\":\"yes\"", "boolean"},
        {"\"stream\":1", "boolean"},
        {"\"stream_options\":[]", "object"},
        {"\"max_tokens\":0", "positive integer"},
        {"\"max_tokens\":-3", "positive integer"},
        {"\"max_tokens\":1.5", "positive integer"},
        {"\"max_tokens\":\"5\"", "got a string"},
        {"\"max_tokens\":1e12", "positive integer"},
        {"\"max_completion_tokens\":0", "positive integer"},
        {"\"add_generation_prompt\":1", "boolean"},
    };
    const char *params[] = {"stream",
                            "stream",
                            "stream_options",
                            "max_tokens",
                            "max_tokens",
                            "max_tokens",
                            "max_tokens",
                            "max_tokens",
                            "max_completion_tokens",
                            "add_generation_prompt"};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        snprintf(body, sizeof(body), "{\"model\":\"m\",%s,%s}", ok_msgs, cases[i].field);
        s_bad(C, body, params[i], cases[i].needle);
    }
}

static void test_completions(void **state)
{
    (void)state;
    const gateway_api_kind_t P = GATEWAY_API_COMPLETIONS;
    gateway_api_req_t *req = s_ok(P, "{\"model\":\"m\",\"prompt\":\"Once upon\",\"max_tokens\":3}");
    assert_string_equal(req->prompt, "Once upon");
    assert_int_equal(req->prompts, 1);
    assert_int_equal(req->max_tokens, 3);
    assert_false(req->stream);
    gateway_api_req_destroy(&req);

    req = s_ok(P, "{\"model\":\"m\",\"prompt\":[\"first\",\"second\"],\"stream\":true}");
    assert_string_equal(req->prompt, "first");
    assert_int_equal(req->prompts, 2);
    assert_true(req->stream);
    gateway_api_req_destroy(&req);

    s_bad(P, "{\"model\":\"m\"}", "prompt", "required");
    s_bad(P, "{\"model\":\"m\",\"prompt\":5}", "prompt", "got a number");
    s_bad(P, "{\"model\":\"m\",\"prompt\":[]}", "prompt", "empty array");
    s_bad(P, "{\"model\":\"m\",\"prompt\":[\"a\",3]}", "prompt", "\"prompt\"[1]");
    s_bad(P, "{\"model\":\"m\",\"prompt\":\"a\",\"max_tokens\":0}", "max_tokens", "positive");
    /* a chat body is not a completions body */
    s_bad(P, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", "prompt",
          "required");
}

static void test_upstream_body(void **state)
{
    (void)state;
    const char *body = "{\"model\":\"alias\", \"prompt\":\"x\",\"seed\":12,\"n\":1}";
    gateway_api_req_t *req = s_ok(GATEWAY_API_COMPLETIONS, body);
    size_t len = 0;
    char *same = gateway_api_upstream_body(req, "alias", &len);
    assert_string_equal(same, body); /* byte for byte, whitespace included */
    assert_int_equal(len, strlen(body));
    free(same);
    same = gateway_api_upstream_body(req, NULL, &len);
    assert_string_equal(same, body);
    free(same);

    char *other = gateway_api_upstream_body(req, "real-model", &len);
    assert_non_null(other);
    assert_int_equal(len, strlen(other));
    cJSON *root = cJSON_Parse(other);
    assert_non_null(root);
    assert_string_equal(cJSON_GetObjectItem(root, "model")->valuestring, "real-model");
    assert_string_equal(cJSON_GetObjectItem(root, "prompt")->valuestring, "x");
    assert_int_equal(cJSON_GetObjectItem(root, "seed")->valueint, 12);
    cJSON_Delete(root);
    free(other);
    assert_string_equal(req->model, "alias"); /* the request itself is unchanged */
    gateway_api_req_destroy(&req);
}

static void test_error_body(void **state)
{
    (void)state;
    size_t len = 0;
    char *body =
        gateway_api_error_body("invalid_request_error", "bad \"thing\"", "messages", NULL, &len);
    assert_int_equal(len, strlen(body));
    cJSON *root = cJSON_Parse(body);
    cJSON *err = cJSON_GetObjectItem(root, "error");
    assert_true(cJSON_IsObject(err));
    assert_string_equal(cJSON_GetObjectItem(err, "message")->valuestring, "bad \"thing\"");
    assert_string_equal(cJSON_GetObjectItem(err, "type")->valuestring, "invalid_request_error");
    assert_string_equal(cJSON_GetObjectItem(err, "param")->valuestring, "messages");
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(err, "code")));
    cJSON_Delete(root);
    free(body);

    body = gateway_api_error_body("invalid_request_error", "no", NULL, "model_not_found", NULL);
    root = cJSON_Parse(body);
    err = cJSON_GetObjectItem(root, "error");
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(err, "param")));
    assert_string_equal(cJSON_GetObjectItem(err, "code")->valuestring, "model_not_found");
    cJSON_Delete(root);
    free(body);

    gateway_api_error_t e;
    gateway_api_error_set(&e, 429, "rate_limit_error", NULL, "overloaded", "x=%d", 3);
    assert_int_equal(e.status, 429);
    assert_string_equal(e.message, "x=3");
    assert_string_equal(gateway_api_kind_name(GATEWAY_API_CHAT), "chat");
    assert_string_equal(gateway_api_kind_name(GATEWAY_API_COMPLETIONS), "completions");
}

static void test_deep_nesting_is_rejected(void **state)
{
    (void)state;
    size_t depth = 5000;
    char *body = malloc(2 * depth + 1);
    memset(body, '[', depth);
    memset(body + depth, ']', depth);
    body[2 * depth] = '\0';
    s_bad(GATEWAY_API_CHAT, body, NULL, "not valid JSON");
    free(body);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chat_valid),
        cmocka_unit_test(test_chat_invalid),
        cmocka_unit_test(test_chat_fields_checked),
        cmocka_unit_test(test_completions),
        cmocka_unit_test(test_upstream_body),
        cmocka_unit_test(test_error_body),
        cmocka_unit_test(test_deep_nesting_is_rejected),
    };
    s_prompt = ipl_prompt_open("builtin", NULL, 0);
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    ipl_prompt_destroy(&s_prompt);
    return failed;
}
