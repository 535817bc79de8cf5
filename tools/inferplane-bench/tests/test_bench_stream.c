/*
 * Unit tests of bench_stream: an OpenAI chat stream split at every byte (iterations, first
 * and last token times, usage with cached tokens, [DONE]), completions, reasoning before
 * content, an Anthropic event stream, non-streamed bodies of the three APIs, and malformed
 * or hostile input: counted, never trusted.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "bench_stream.h"

static bench_stream_t *s;

static int setup(void **state)
{
    (void)state;
    s = bench_stream_new(0);
    return s ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    bench_stream_destroy(&s);
    return s == NULL ? 0 : -1;
}

// Feeds `text` `step` bytes at a time, the clock advancing 1 ns per feed from 1000.
static const bench_stream_stats_t *s_feed(bench_api_t api, bool streamed, const char *text,
                                          size_t step)
{
    bench_stream_start(s, api, streamed, true);
    size_t len = strlen(text);
    uint64_t now = 1000;
    if (!step) step = len;
    for (size_t off = 0; off < len; off += step)
        bench_stream_feed(s, text + off, len - off < step ? len - off : step, now++);
    bench_stream_finish(s, now);
    return bench_stream_stats(s);
}

#define CHUNK(content) "data: {\"choices\":[{\"delta\":{\"content\":\"" content "\"}}]}\n\n"

static void test_chat_stream(void **state)
{
    (void)state;
    const char *text =
        "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n" CHUNK(
            "Hel") CHUNK("lo")
            CHUNK("!") "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"length\"}]}\n\n"
                       "data: "
                       "{\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":3,"
                       "\"prompt_tokens_details\":{\"cached_tokens\":8}}}\n\n"
                       "data: [DONE]\n\n";
    for (size_t step = 0; step < 9; step++) {
        const bench_stream_stats_t *st = s_feed(BENCH_API_CHAT, true, text, step);
        assert_int_equal(st->iterations, 3); // the empty role chunk is no token
        assert_true(st->done);
        assert_true(st->finished);
        assert_false(st->error);
        assert_int_equal(st->prompt_tokens, 12);
        assert_int_equal(st->completion_tokens, 3);
        assert_int_equal(st->cached_tokens, 8);
        assert_int_equal(st->malformed, 0);
        assert_true(st->first_ns > 0 && st->first_ns <= st->last_ns);
        assert_int_equal(st->first_output_ns, st->first_ns);
        assert_string_equal(bench_stream_text(s, NULL), "Hello!");
    }
    // All at once: every event at the same time.
    const bench_stream_stats_t *st = s_feed(BENCH_API_CHAT, true, text, 0);
    assert_int_equal(st->first_ns, 1000);
    assert_int_equal(st->last_ns, 1000);
}

static void test_reasoning_then_content(void **state)
{
    (void)state;
    const char *text = "data: {\"choices\":[{\"delta\":{\"reasoning_content\":\"hm\"}}]}\n\n" CHUNK(
        "A") "data: [DONE]\n\n";
    const bench_stream_stats_t *st = s_feed(BENCH_API_CHAT, true, text, 10);
    assert_int_equal(st->iterations, 2);
    assert_true(st->first_output_ns > st->first_ns);
    assert_int_equal(st->cached_tokens, -1); // no usage at all
    assert_false(st->usage);
}

static void test_completions_stream(void **state)
{
    (void)state;
    const char *text =
        "data: {\"choices\":[{\"text\":\" a\"}]}\r\n\r\n"
        "data: {\"choices\":[{\"text\":\" b\",\"finish_reason\":\"length\"}]}\r\n\r\n"
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2}}\r\n\r\n";
    const bench_stream_stats_t *st = s_feed(BENCH_API_COMPLETIONS, true, text, 3);
    assert_int_equal(st->iterations, 2);
    assert_false(st->done); // no [DONE]: the caller decides from `finished`
    assert_true(st->finished);
    assert_int_equal(st->completion_tokens, 2);
    assert_int_equal(st->cached_tokens, -1);
    assert_string_equal(bench_stream_text(s, NULL), " a b");
}

static void test_anthropic_stream(void **state)
{
    (void)state;
    const char *text =
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":"
        "{\"input_tokens\":4,\"cache_read_input_tokens\":6,\"output_tokens\":0}}}\n\n"
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0}\n\n"
        "event: ping\ndata: {\"type\":\"ping\"}\n\n"
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":"
        "{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n"
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":"
        "{\"type\":\"text_delta\",\"text\":\" you\"}}\n\n"
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":"
        "\"max_tokens\"},\"usage\":{\"input_tokens\":4,\"cache_read_input_tokens\":6,"
        "\"output_tokens\":2}}\n\n"
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
    for (size_t step = 0; step < 40; step += 13) {
        const bench_stream_stats_t *st = s_feed(BENCH_API_MESSAGES, true, text, step);
        assert_int_equal(st->iterations, 2);
        assert_true(st->done);
        assert_true(st->finished);
        assert_int_equal(st->prompt_tokens, 10); // input + cache reads
        assert_int_equal(st->cached_tokens, 6);
        assert_int_equal(st->completion_tokens, 2);
        assert_string_equal(bench_stream_text(s, NULL), "Hi you");
    }
    const bench_stream_stats_t *st = s_feed(
        BENCH_API_MESSAGES, true,
        "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\"}}\n\n",
        0);
    assert_true(st->error);
    assert_false(st->done);
}

static void test_bodies(void **state)
{
    (void)state;
    const bench_stream_stats_t *st =
        s_feed(BENCH_API_CHAT, false,
               "{\"choices\":[{\"message\":{\"content\":\"ok\"},\"finish_reason\":\"stop\"}],"
               "\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1}}",
               5);
    assert_true(st->done);
    assert_int_equal(st->iterations, 0);
    assert_int_equal(st->first_ns, st->last_ns); // the whole answer at once
    assert_true(st->first_ns > 1000);
    assert_int_equal(st->completion_tokens, 1);
    assert_string_equal(bench_stream_text(s, NULL), "ok");

    st = s_feed(BENCH_API_COMPLETIONS, false, "{\"choices\":[{\"text\":\"x y\"}]}", 0);
    assert_true(st->done);
    assert_string_equal(bench_stream_text(s, NULL), "x y");

    st = s_feed(BENCH_API_MESSAGES, false,
                "{\"type\":\"message\",\"content\":[{\"type\":\"text\",\"text\":\"yo\"}],"
                "\"stop_reason\":\"end_turn\",\"usage\":{\"input_tokens\":2,\"output_tokens\":1}}",
                0);
    assert_true(st->done);
    assert_int_equal(st->prompt_tokens, 2);

    st = s_feed(BENCH_API_CHAT, false, "{\"error\":{\"message\":\"boom\"}}", 0);
    assert_true(st->error);
    assert_false(st->done);
    st = s_feed(BENCH_API_MESSAGES, false, "{\"type\":\"error\",\"error\":{}}", 0);
    assert_true(st->error);
    st = s_feed(BENCH_API_CHAT, false, "<html>bad gateway</html>", 0);
    assert_int_equal(st->malformed, 1);
    assert_false(st->done);
}

static void test_malformed_input(void **state)
{
    (void)state;
    const char *text = "data: {not json\n\n"
                       "data: [1,2]\n\n"
                       "data: {\"choices\":\"nope\"}\n\n"
                       "data: {\"choices\":[{\"delta\":\"x\"},{\"delta\":{\"content\":7}}]}\n\n"
                       "data: {\"usage\":{\"prompt_tokens\":-5,\"completion_tokens\":1e300}}\n\n"
                       "data: {\"choices\":[{\"delta\":{\"content\":\"ok\"}}]}\n\n"
                       "data: {\"error\":{\"message\":\"mid-stream\"}}\n\n";
    const bench_stream_stats_t *st = s_feed(BENCH_API_CHAT, true, text, 7);
    assert_int_equal(st->malformed, 2);
    assert_int_equal(st->iterations, 1);
    assert_int_equal(st->prompt_tokens, -1);
    assert_int_equal(st->completion_tokens, -1);
    assert_true(st->error);
    assert_false(st->done);

    // An event beyond the bound is skipped and counted, the stream goes on.
    bench_stream_t *small = bench_stream_new(64);
    bench_stream_start(small, BENCH_API_CHAT, true, false);
    char big[256];
    snprintf(big, sizeof big, "data: {\"choices\":[{\"delta\":{\"content\":\"%0100d\"}}]}\n\n", 0);
    bench_stream_feed(small, big, strlen(big), 1);
    bench_stream_feed(small, CHUNK("a") "data: [DONE]\n\n", strlen(CHUNK("a") "data: [DONE]\n\n"),
                      2);
    bench_stream_finish(small, 3);
    assert_int_equal(bench_stream_stats(small)->overlong, 1);
    assert_int_equal(bench_stream_stats(small)->iterations, 1);
    assert_true(bench_stream_stats(small)->done);
    assert_string_equal(bench_stream_text(small, NULL), ""); // keep_text off
    bench_stream_destroy(&small);
}

static void test_api_names(void **state)
{
    (void)state;
    bench_api_t api;
    assert_int_equal(bench_api_parse("anthropic", &api), 0);
    assert_int_equal(api, BENCH_API_MESSAGES);
    assert_int_equal(bench_api_parse("completions", &api), 0);
    assert_string_equal(bench_api_name(api), "completions");
    assert_true(bench_api_parse("grpc", &api) < 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_chat_stream, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reasoning_then_content, setup, teardown),
        cmocka_unit_test_setup_teardown(test_completions_stream, setup, teardown),
        cmocka_unit_test_setup_teardown(test_anthropic_stream, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bodies, setup, teardown),
        cmocka_unit_test_setup_teardown(test_malformed_input, setup, teardown),
        cmocka_unit_test(test_api_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
