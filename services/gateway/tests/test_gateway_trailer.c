/* Unit tests of gateway_trailer: why a stream broke off (the reason, status and a message that
 * blames the right party) and the error event that ends it, in OpenAI's and Anthropic's shape. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>
#include <signal.h>
#include <unistd.h>

#include "gateway_trailer.h"

static void test_classify(void **state)
{
    (void)state;
    gateway_cut_t cut;
    gateway_xfer_result_t broken = {.status = 200};
    snprintf(broken.error, sizeof broken.error, "Connection reset by peer");
    gateway_trailer_classify(&broken, "worker", "w0", &cut);
    assert_int_equal(cut.status, 502);
    assert_string_equal(cut.reason, "upstream_failed");
    assert_non_null(strstr(cut.message, "the worker's stream broke off: Connection reset"));

    gateway_xfer_result_t idle = {.status = 200, .idle_timeout = true};
    snprintf(idle.error, sizeof idle.error, "no byte from upstream for 1000 ms");
    gateway_trailer_classify(&idle, "provider", "cloud", &cut);
    assert_int_equal(cut.status, 504);
    assert_string_equal(cut.reason, "stream_idle_timeout");
    assert_non_null(strstr(cut.message, "provider `cloud` stopped sending: no byte"));

    gateway_xfer_result_t stop = {.status = 200, .aborted = true};
    gateway_trailer_classify(&stop, "worker", "w1", &cut);
    assert_int_equal(cut.status, 503);
    assert_string_equal(cut.reason, "shutting_down");
    assert_non_null(strstr(cut.message, "shutting down"));
    assert_non_null(strstr(cut.message, "--drain-timeout-ms"));
    assert_non_null(strstr(cut.message, "`w1` was not at fault"));
}

static void s_written(bool anthropic, const gateway_cut_t *cut, char *out, size_t size)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    assert_int_equal(gateway_trailer_write(fds[1], anthropic, cut), 0);
    close(fds[1]);
    ssize_t n = read(fds[0], out, size - 1);
    assert_true(n > 0);
    out[n] = '\0';
    close(fds[0]);
}

static void test_openai_event(void **state)
{
    (void)state;
    gateway_cut_t cut = {.status = 504, .reason = "stream_idle_timeout"};
    snprintf(cut.message, sizeof cut.message, "worker `w0` stopped sending");
    char out[1024];
    s_written(false, &cut, out, sizeof out);
    assert_int_equal(strncmp(out, "data: ", 6), 0);
    const char *done = strstr(out, "\n\ndata: [DONE]\n\n");
    assert_non_null(done);
    assert_string_equal(done, "\n\ndata: [DONE]\n\n");
    cJSON *root = cJSON_ParseWithLength(out + 6, (size_t)(done - out - 6));
    cJSON *err = cJSON_GetObjectItem(root, "error");
    assert_string_equal(cJSON_GetObjectItem(err, "code")->valuestring, "stream_idle_timeout");
    assert_string_equal(cJSON_GetObjectItem(err, "type")->valuestring, "server_error");
    assert_string_equal(cJSON_GetObjectItem(err, "message")->valuestring,
                        "worker `w0` stopped sending");
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(err, "param")));
    cJSON_Delete(root);
}

static void test_anthropic_event(void **state)
{
    (void)state;
    gateway_cut_t cut = {.status = 503, .reason = "shutting_down"};
    snprintf(cut.message, sizeof cut.message, "the gateway is shutting down");
    char out[1024];
    s_written(true, &cut, out, sizeof out);
    assert_int_equal(strncmp(out, "event: error\ndata: ", 19), 0);
    size_t len = strlen(out);
    assert_true(len > 21 && !strcmp(out + len - 2, "\n\n"));
    cJSON *root = cJSON_ParseWithLength(out + 19, len - 21);
    assert_string_equal(cJSON_GetObjectItem(root, "type")->valuestring, "error");
    cJSON *err = cJSON_GetObjectItem(root, "error");
    assert_string_equal(cJSON_GetObjectItem(err, "message")->valuestring,
                        "the gateway is shutting down");
    assert_true(cJSON_IsString(cJSON_GetObjectItem(err, "type")));
    cJSON_Delete(root);
}

static void test_client_gone(void **state)
{
    (void)state;
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    close(fds[0]);
    gateway_cut_t cut = {.status = 502, .reason = "upstream_failed"};
    assert_int_not_equal(gateway_trailer_write(fds[1], false, &cut), 0); /* EPIPE */
    assert_int_not_equal(gateway_trailer_write(fds[1], true, &cut), 0);
    close(fds[1]);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_classify),
        cmocka_unit_test(test_openai_event),
        cmocka_unit_test(test_anthropic_event),
        cmocka_unit_test(test_client_gone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
