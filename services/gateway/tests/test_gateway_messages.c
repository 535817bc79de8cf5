/*
 * Unit tests of gateway_messages: the parse into a chat body, the statuses and error shape,
 * and an answer translated back — a whole body, a stream fed in pieces, an upstream error, a
 * provider's 401 — written to a pipe as the producer writes to the client.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "gateway_messages.h"

static const char *s_req = "{\"model\":\"m\",\"max_tokens\":8,\"system\":\"be brief\","
                           "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";

static gateway_messages_t *s_parse(char **chat)
{
    gateway_messages_t *m = NULL;
    gateway_api_error_t err = {0};
    assert_int_equal(gateway_messages_parse(s_req, strlen(s_req), false, &m, chat, &err), 0);
    return m;
}

// What the translator wrote, read back from the pipe (the write end closed).
static char *s_drain(int fds[2])
{
    close(fds[1]);
    static char buf[65536];
    size_t n = 0;
    ssize_t r;
    while ((r = read(fds[0], buf + n, sizeof buf - 1 - n)) > 0)
        n += (size_t)r;
    buf[n] = '\0';
    close(fds[0]);
    return buf;
}

static void test_parse_and_errors(void **state)
{
    (void)state;
    char *chat = NULL;
    gateway_messages_t *m = s_parse(&chat);
    cJSON *j = cJSON_Parse(chat);
    assert_non_null(j);
    cJSON *msgs = cJSON_GetObjectItem(j, "messages");
    assert_int_equal(cJSON_GetArraySize(msgs), 2);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(msgs, 0), "role")->valuestring,
                        "system");
    cJSON_Delete(j);
    free(chat);
    gateway_messages_destroy(&m);
    assert_null(m);
    gateway_api_error_t err = {0};
    const char *bad = "{\"model\":\"m\",\"messages\":[]}"; // no max_tokens
    assert_int_equal(gateway_messages_parse(bad, strlen(bad), false, &m, &chat, &err), -1);
    assert_int_equal(err.status, 400);
    assert_null(m);
    const char *count = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}";
    assert_int_equal(gateway_messages_parse(count, strlen(count), true, &m, &chat, &err), 0);
    free(chat);
    gateway_messages_destroy(&m);
    // statuses: overload is Anthropic's 529, the rest as they are
    gateway_api_error_set(&err, 429, "rate_limit_error", NULL, "overloaded", "busy");
    assert_int_equal(gateway_messages_status(&err), 529);
    gateway_api_error_set(&err, 503, "server_error", NULL, "backend_busy", "busy");
    assert_int_equal(gateway_messages_status(&err), 529);
    gateway_api_error_set(&err, 401, "invalid_request_error", NULL, "invalid_api_key", "no");
    assert_int_equal(gateway_messages_status(&err), 401);
    size_t len = 0;
    char *body = gateway_messages_error_body(401, "the API key is not valid", &len);
    j = cJSON_Parse(body);
    assert_string_equal(cJSON_GetObjectItem(j, "type")->valuestring, "error");
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "error"), "type")->valuestring,
                        "authentication_error");
    cJSON_Delete(j);
    free(body);
    body = gateway_messages_count_body(42, &len);
    assert_string_equal(body, "{\"input_tokens\":42}");
    free(body);
}

static void test_whole_answer(void **state)
{
    (void)state;
    char *chat = NULL;
    gateway_messages_t *m = s_parse(&chat);
    free(chat);
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    assert_string_equal(gateway_messages_begin(m, 200, "application/json", 5, false),
                        "application/json");
    const char *ans =
        "{\"id\":\"c1\",\"object\":\"chat.completion\",\"model\":\"m-up\",\"choices\":"
        "[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"Hello!\"},"
        "\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":5,"
        "\"completion_tokens\":2,\"total_tokens\":7}}";
    size_t half = strlen(ans) / 2;
    assert_int_equal(gateway_messages_write(m, fds[1], ans, half), 0);
    assert_int_equal(gateway_messages_write(m, fds[1], ans + half, strlen(ans) - half), 0);
    gateway_messages_finish(m, fds[1], true, NULL);
    cJSON *j = cJSON_Parse(s_drain(fds));
    assert_non_null(j);
    assert_string_equal(cJSON_GetObjectItem(j, "type")->valuestring, "message");
    assert_string_equal(cJSON_GetObjectItem(j, "model")->valuestring, "m"); // the client's
    assert_string_equal(cJSON_GetObjectItem(j, "stop_reason")->valuestring, "end_turn");
    cJSON_Delete(j);
    gateway_messages_destroy(&m);
}

static void test_stream_and_errors(void **state)
{
    (void)state;
    char *chat = NULL;
    gateway_messages_t *m = s_parse(&chat);
    free(chat);
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    assert_string_equal(
        gateway_messages_begin(m, 200, "text/event-stream; charset=utf-8", 5, false),
        "text/event-stream");
    const char *sse =
        "data: {\"id\":\"c2\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\","
        "\"content\":\"He\"}}]}\n\n"
        "data: {\"id\":\"c2\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"llo\"},"
        "\"finish_reason\":\"stop\"}]}\n\n"
        "data: {\"id\":\"c2\",\"choices\":[],\"usage\":{\"prompt_tokens\":5,"
        "\"completion_tokens\":2}}\n\ndata: [DONE]\n\n";
    size_t total = strlen(sse);
    for (size_t i = 0; i < total; i += 7) // in 7-byte pieces
        assert_int_equal(gateway_messages_write(m, fds[1], sse + i, total - i < 7 ? total - i : 7),
                         0);
    gateway_messages_finish(m, fds[1], true, NULL);
    const char *out = s_drain(fds);
    const char *order[] = {"event: message_start",       "event: content_block_start",
                           "event: content_block_delta", "event: content_block_stop",
                           "event: message_delta",       "event: message_stop"};
    const char *at = out;
    for (size_t i = 0; i < 6; i++) {
        at = strstr(at, order[i]);
        if (!at) fail_msg("%s missing in order in:\n%s", order[i], out);
    }
    gateway_messages_destroy(&m);

    // an upstream error becomes Anthropic's, with its status; a provider's 401 says nothing
    // of what the provider said
    m = s_parse(&chat);
    free(chat);
    assert_int_equal(pipe(fds), 0);
    gateway_messages_begin(m, 401, "application/json", 5, true);
    const char *e = "{\"error\":{\"message\":\"Incorrect API key provided: sk-12...cdef\"}}";
    assert_int_equal(gateway_messages_write(m, fds[1], e, strlen(e)), 0);
    gateway_messages_finish(m, fds[1], true, NULL);
    out = s_drain(fds);
    assert_non_null(strstr(out, "authentication_error"));
    assert_null(strstr(out, "sk-12"));
    gateway_messages_destroy(&m);
    // a stream cut off: its error event
    m = s_parse(&chat);
    free(chat);
    assert_int_equal(pipe(fds), 0);
    gateway_messages_begin(m, 200, "text/event-stream", 5, false);
    assert_int_equal(gateway_messages_write(m, fds[1], sse, 60), 0);
    gateway_messages_finish(m, fds[1], false, "the worker went away");
    out = s_drain(fds);
    assert_non_null(strstr(out, "event: error"));
    gateway_messages_destroy(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_and_errors),
        cmocka_unit_test(test_whole_answer),
        cmocka_unit_test(test_stream_and_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
