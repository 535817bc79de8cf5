/* Unit tests of gateway_sse: SSE reassembly across arbitrary chunk splits, timing, usage. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway_sse.h"

/* A vLLM chat stream with include_usage: role chunk, three content chunks, finish, usage. */
static const char s_chat[] =
    "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"model\":\"m\","
    "\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},"
    "\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\n\n"
    "data: {\"id\":\"chatcmpl-1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}],"
    "\"usage\":null}\n\n"
    "data: {\"id\":\"chatcmpl-1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo "
    "\\u00e9\"}}],"
    "\"usage\":null}\n\n"
    "data: {\"id\":\"chatcmpl-1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"!\"}}],"
    "\"usage\":null}\n\n"
    "data: {\"id\":\"chatcmpl-1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\"},"
    "\"finish_reason\":\"stop\",\"stop_reason\":null}],\"usage\":null}\n\n"
    "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[],"
    "\"usage\":{\"prompt_tokens\":17,\"total_tokens\":49,\"completion_tokens\":32,"
    "\"prompt_tokens_details\":{\"cached_tokens\":16}}}\n\n"
    "data: [DONE]\n\n";

static void s_check_chat(const gateway_sse_stats_t *st)
{
    assert_int_equal(st->events, 7);
    assert_int_equal(st->content_events, 3);
    assert_true(st->usage);
    assert_int_equal(st->prompt_tokens, 17);
    assert_int_equal(st->completion_tokens, 32);
    assert_int_equal(st->cached_tokens, 16);
    assert_true(st->done);
    assert_false(st->error);
    assert_int_equal(st->malformed, 0);
    assert_int_equal(st->overlong, 0);
    assert_int_equal(st->bytes, strlen(s_chat));
}

static void test_chat_stream_whole(void **state)
{
    (void)state;
    gateway_sse_t *p = gateway_sse_new(GATEWAY_SSE_STREAM, 0);
    gateway_sse_feed(p, s_chat, strlen(s_chat), 100);
    gateway_sse_finish(p, 200);
    s_check_chat(gateway_sse_stats(p));
    gateway_sse_destroy(&p);
    assert_null(p);
}

/* Every split into two chunks, and into three, gives the same result. */
static void test_chat_stream_every_split(void **state)
{
    (void)state;
    size_t len = strlen(s_chat);
    for (size_t a = 0; a <= len; a++) {
        gateway_sse_t *p = gateway_sse_new(GATEWAY_SSE_STREAM, 0);
        gateway_sse_feed(p, s_chat, a, 1);
        gateway_sse_feed(p, s_chat + a, len - a, 2);
        gateway_sse_finish(p, 3);
        s_check_chat(gateway_sse_stats(p));
        gateway_sse_destroy(&p);
    }
    for (size_t a = 0; a <= len; a += 7) {
        for (size_t b = a; b <= len; b += 5) {
            gateway_sse_t *p = gateway_sse_new(GATEWAY_SSE_STREAM, 0);
            gateway_sse_feed(p, s_chat, a, 1);
            gateway_sse_feed(p, s_chat + a, b - a, 2);
            gateway_sse_feed(p, s_chat + b, len - b, 3);
            gateway_sse_finish(p, 4);
            s_check_chat(gateway_sse_stats(p));
            gateway_sse_destroy(&p);
        }
    }
}

/* Byte by byte with a clock that ticks per byte: TTFT and ITL come from the bytes that
 * complete the content events, and the role-only first chunk does not count. */
static void test_timing_byte_by_byte(void **state)
{
    (void)state;
    size_t len = strlen(s_chat);
    gateway_sse_t *p = gateway_sse_new(GATEWAY_SSE_STREAM, 0);
    for (size_t i = 0; i < len; i++)
        gateway_sse_feed(p, s_chat + i, 1, 1000 + i);
    gateway_sse_finish(p, 5000);
    const gateway_sse_stats_t *st = gateway_sse_stats(p);
    s_check_chat(st);
    /* the blank line that dispatches the 2nd event is its last byte */
    const char *ev2 = strstr(s_chat, "\"Hel\"");
    const char *end2 = strstr(ev2, "\n\n") + 1;
    assert_int_equal(st->first_byte_ns, 1000);
    assert_int_equal(st->first_content_ns, 1000 + (uint64_t)(end2 - s_chat));
    const char *ev4 = strstr(s_chat, "\"!\"");
    const char *end4 = strstr(ev4, "\n\n") + 1;
    assert_int_equal(st->last_content_ns, 1000 + (uint64_t)(end4 - s_chat));
    double itl = gateway_sse_itl_s(p);
    assert_true(itl > 0);
    assert_true(fabs(itl * 1e9 - (double)(end4 - end2) / 2) < 1e-3);
    gateway_sse_destroy(&p);
}

static void test_line_endings(void **state)
{
    (void)state;
    const char *crlf = "data: {\"choices\":[{\"text\":\"a\"}]}\r\n\r\n"
                       "data: {\"choices\":[{\"text\":\"b\"}]}\r\r"
                       ": a comment\n"
                       "event: ignored\n"
                       "data: [DONE]\r\n\r\n";
    size_t len = strlen(crlf);
    for (size_t a = 0; a <= len; a++) { /* a \r\n split between chunks is still one ending */
        gateway_sse_t *p = gateway_sse_new(GATEWAY_SSE_STREAM, 0);
        gateway_sse_feed(p, crlf, a, 1);
        gateway_sse_feed(p, crlf + a, len - a, 2);
        gateway_sse_finish(p, 3);
        const gateway_sse_stats_t *st = gateway_sse_stats(p);
        assert_int_equal(st->events, 3);
        assert_int_equal(st->content_events, 2);
        assert_true(st->done);
        assert_false(st->usage);
        gateway_sse_destroy(&p);
    }
}

static void test_content_kinds(void **state)
{
    (void)state;
    const char *s = "data: {\"choices\":[{\"delta\":{\"reasoning_content\":\"hm\"}}]}\n\n"
                    "data: {\"choices\":[{\"delta\":{\"reasoning\":\"hm\"}}]}\n\n"
                    "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0}]}}]}\n\n"
                    "data: {\"choices\":[{\"delta\":{\"tool_calls\":[]}}]}\n\n"
                    "data: {\"choices\":[{\"text\":\"\"}]}\n\n"
                    "data: {\"choices\":\"nonsense\",\"usage\":7}\n\n";
    gateway_sse_t *p = gateway_sse_new(GATEWAY_SSE_STREAM, 0);
    gateway_sse_feed(p, s, strlen(s), 1);
    gateway_sse_finish(p, 2);
    const gateway_sse_stats_t *st = gateway_sse_stats(p);
    assert_int_equal(st->events, 6);
    assert_int_equal(st->content_events, 3);
    assert_false(st->usage); /* a usage that is not an object is ignored */
    assert_false(st->done);
    gateway_sse_destroy(&p);
}

static void test_multiline_data_and_unterminated_end(void **state)
{
    (void)state;
    const char *s =
        "data: {\"choices\":\n"
        "data: [{\"text\":\"x\"}]}\n\n"
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":1}}";
    gateway_sse_t *p = gateway_sse_new(GATEWAY_SSE_STREAM, 0);
    gateway_sse_feed(p, s, strlen(s), 1);
    assert_false(gateway_sse_stats(p)->usage); /* the last event is not complete yet */
    gateway_sse_finish(p, 2);
    const gateway_sse_stats_t *st = gateway_sse_stats(p);
    assert_int_equal(st->events, 2);
    assert_int_equal(st->content_events, 1);
    assert_true(st->usage);
    assert_int_equal(st->prompt_tokens, 5);
    assert_int_equal(st->cached_tokens, 0);
    assert_int_equal(st->malformed, 0);
    gateway_sse_destroy(&p);
}

static void test_malformed_error_and_overlong(void **state)
{
    (void)state;
    char big[300];
    memset(big, 'x', sizeof(big));
    gateway_sse_t *p = gateway_sse_new(GATEWAY_SSE_STREAM, 64);
    const char *a = "data: not json\n\ndata: {\"error\":{\"message\":\"boom\"}}\n\ndata: ";
    gateway_sse_feed(p, a, strlen(a), 1);
    for (int i = 0; i < 3; i++) /* one data line of 900 bytes in three chunks */
        gateway_sse_feed(p, big, sizeof(big), 2);
    const char *b = "\n\ndata: {\"choices\":[{\"text\":\"ok\"}]}\n\n";
    gateway_sse_feed(p, b, strlen(b), 3);
    gateway_sse_finish(p, 4);
    const gateway_sse_stats_t *st = gateway_sse_stats(p);
    assert_int_equal(st->malformed, 1);
    assert_true(st->error);
    assert_int_equal(st->overlong, 1);
    assert_int_equal(st->content_events, 1); /* parsing resumed after the long line */
    assert_int_equal(st->first_content_ns, 3);
    gateway_sse_destroy(&p);
}

/* An over-long comment (keep-alive padding) spoils nothing, whether it arrives in one chunk
 * or in many: the field name at its start decides (found by fuzz/fuzz_sse, where a whole-chunk
 * comment spoiled the next event's content). */
static void test_overlong_comment_spoils_nothing(void **state)
{
    (void)state;
    char pad[200];
    memset(pad, ' ', sizeof(pad));
    pad[0] = ':';
    const char *ev = "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n";
    for (int split = 0; split < 2; split++) {
        gateway_sse_t *p = gateway_sse_new(GATEWAY_SSE_STREAM, 64);
        if (split)
            for (size_t i = 0; i < sizeof(pad); i += 10)
                gateway_sse_feed(p, pad + i, 10, 1);
        else
            gateway_sse_feed(p, pad, sizeof(pad), 1);
        gateway_sse_feed(p, "\n", 1, 1);
        gateway_sse_feed(p, ev, strlen(ev), 2);
        gateway_sse_finish(p, 3);
        const gateway_sse_stats_t *st = gateway_sse_stats(p);
        assert_int_equal(st->overlong, 0);
        assert_int_equal(st->content_events, 1);
        assert_int_equal(st->events, 1);
        gateway_sse_destroy(&p);
    }
}

static void test_json_body(void **state)
{
    (void)state;
    const char *body = "{\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"choices\":[{\"text\":"
                       "\"hello\"}],\"usage\":{\"prompt_tokens\":40,\"completion_tokens\":8,"
                       "\"prompt_tokens_details\":{\"cached_tokens\":32}}}";
    size_t len = strlen(body);
    for (size_t a = 0; a <= len; a += 3) {
        gateway_sse_t *p = gateway_sse_new(GATEWAY_SSE_JSON, 0);
        gateway_sse_feed(p, body, a, 10);
        gateway_sse_feed(p, body + a, len - a, 20);
        assert_false(gateway_sse_stats(p)->usage);
        gateway_sse_finish(p, 30);
        const gateway_sse_stats_t *st = gateway_sse_stats(p);
        assert_true(st->usage);
        assert_int_equal(st->prompt_tokens, 40);
        assert_int_equal(st->completion_tokens, 8);
        assert_int_equal(st->cached_tokens, 32);
        assert_int_equal(st->first_byte_ns, a ? 10 : 20);
        assert_int_equal(st->events, 0);
        gateway_sse_destroy(&p);
    }
    /* beyond the bound: passed through, not parsed */
    gateway_sse_t *p = gateway_sse_new(GATEWAY_SSE_JSON, 32);
    gateway_sse_feed(p, body, len, 1);
    gateway_sse_finish(p, 2);
    assert_false(gateway_sse_stats(p)->usage);
    assert_int_equal(gateway_sse_stats(p)->overlong, 1);
    assert_int_equal(gateway_sse_stats(p)->bytes, len);
    gateway_sse_destroy(&p);
    /* an error body */
    p = gateway_sse_new(GATEWAY_SSE_JSON, 0);
    const char *err = "{\"error\":{\"message\":\"bad\",\"type\":\"BadRequestError\",\"code\":400}}";
    gateway_sse_feed(p, err, strlen(err), 1);
    gateway_sse_finish(p, 2);
    assert_true(gateway_sse_stats(p)->error);
    gateway_sse_destroy(&p);
}

static void test_garbage_never_crashes(void **state)
{
    (void)state;
    srand(11);
    char buf[512];
    for (int round = 0; round < 200; round++) {
        gateway_sse_t *p = gateway_sse_new(round % 2 ? GATEWAY_SSE_JSON : GATEWAY_SSE_STREAM, 128);
        uint64_t fed = 0;
        for (int k = 0; k < 8; k++) {
            size_t n = (size_t)(rand() % (int)sizeof(buf));
            for (size_t i = 0; i < n; i++) {
                int r = rand() % 8;
                buf[i] = r == 0 ? '\n' : r == 1 ? '\r' : r == 2 ? ':' : (char)rand();
            }
            gateway_sse_feed(p, buf, n, (uint64_t)k);
            fed += n;
        }
        gateway_sse_finish(p, 9);
        assert_int_equal(gateway_sse_stats(p)->bytes, fed);
        assert_int_equal(gateway_sse_stats(p)->usage, false);
        gateway_sse_destroy(&p);
    }
}

static void test_mode_for(void **state)
{
    (void)state;
    assert_int_equal(gateway_sse_mode_for("text/event-stream"), GATEWAY_SSE_STREAM);
    assert_int_equal(gateway_sse_mode_for("text/event-stream; charset=utf-8"), GATEWAY_SSE_STREAM);
    assert_int_equal(gateway_sse_mode_for("Text/Event-Stream"), GATEWAY_SSE_STREAM);
    assert_int_equal(gateway_sse_mode_for("application/json"), GATEWAY_SSE_JSON);
    assert_int_equal(gateway_sse_mode_for("text/event-streamx"), GATEWAY_SSE_JSON);
    assert_int_equal(gateway_sse_mode_for(""), GATEWAY_SSE_JSON);
    assert_int_equal(gateway_sse_mode_for(NULL), GATEWAY_SSE_JSON);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chat_stream_whole),
        cmocka_unit_test(test_chat_stream_every_split),
        cmocka_unit_test(test_timing_byte_by_byte),
        cmocka_unit_test(test_line_endings),
        cmocka_unit_test(test_content_kinds),
        cmocka_unit_test(test_multiline_data_and_unterminated_end),
        cmocka_unit_test(test_malformed_error_and_overlong),
        cmocka_unit_test(test_overlong_comment_spoils_nothing),
        cmocka_unit_test(test_json_body),
        cmocka_unit_test(test_garbage_never_crashes),
        cmocka_unit_test(test_mode_for),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
