/*
 * Unit tests of ipl_sse: events split at every byte, the three line ends, multi-line data,
 * event types, comments and other fields, overlong events skipped and counted, finish,
 * reset.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>

#include "ipl_sse.h"

// Every event seen, as "type=data" joined with '|'.
typedef struct {
    char out[4096];
    size_t len;
} s_seen_t;

static void s_on_event(void *arg, const char *event, size_t elen, const char *data, size_t dlen)
{
    s_seen_t *s = arg;
    assert_int_equal(strlen(event), elen);
    assert_int_equal(data[dlen], '\0');
    s->len += (size_t)snprintf(s->out + s->len, sizeof s->out - s->len, "%s%.*s=%.*s",
                               s->len ? "|" : "", (int)elen, event, (int)dlen, data);
}

// Feeds `text` in pieces of `step` bytes (0: all at once), then finishes.
static const char *s_run(const char *text, size_t step, size_t max, uint64_t *overlong)
{
    static s_seen_t seen;
    memset(&seen, 0, sizeof seen);
    ipl_sse_t *sse = ipl_sse_new(max, s_on_event, &seen);
    assert_non_null(sse);
    size_t len = strlen(text);
    if (!step) step = len ? len : 1;
    for (size_t off = 0; off < len; off += step)
        ipl_sse_feed(sse, text + off, len - off < step ? len - off : step);
    ipl_sse_finish(sse);
    if (overlong) *overlong = ipl_sse_overlong(sse);
    ipl_sse_destroy(&sse);
    assert_null(sse);
    return seen.out;
}

static void test_openai_stream_any_split(void **state)
{
    (void)state;
    const char *text = "data: {\"a\":1}\n\ndata: {\"b\":2}\n\ndata: [DONE]\n\n";
    for (size_t step = 0; step <= 7; step++)
        assert_string_equal(s_run(text, step, 0, NULL), "={\"a\":1}|={\"b\":2}|=[DONE]");
}

static void test_line_ends(void **state)
{
    (void)state;
    assert_string_equal(s_run("data: x\r\n\r\ndata: y\r\rdata: z\n\n", 1, 0, NULL), "=x|=y|=z");
    // A \r at the end of one feed and its \n at the start of the next are one line end.
    assert_string_equal(s_run("data: a\r\n\r\n", 8, 0, NULL), "=a");
}

static void test_fields(void **state)
{
    (void)state;
    const char *text = ": comment\nevent: message_start\nid: 7\nretry: 10\ndata: {}\n\n"
                       "event:ping\ndata:\n\nunknown: field\n\nevent: x\n\n";
    // The ping has an empty data field (dispatched, empty); the last two have no data.
    assert_string_equal(s_run(text, 3, 0, NULL), "message_start={}|ping=");
    // Data lines join with \n; only one leading space is dropped.
    assert_string_equal(s_run("data: a\ndata:  b\ndata\n\n", 2, 0, NULL), "=a\n b\n");
}

static void test_finish_dispatches_unterminated(void **state)
{
    (void)state;
    assert_string_equal(s_run("data: last", 4, 0, NULL), "=last");
    assert_string_equal(s_run("data: one\n", 0, 0, NULL), "=one");
    assert_string_equal(s_run("", 0, 0, NULL), "");
}

static void test_overlong_skipped_and_counted(void **state)
{
    (void)state;
    char text[512];
    char big[100];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    snprintf(text, sizeof text, "data: ok\n\ndata: %s\n\ndata: a\ndata: %s\n\ndata: fine\n\n", big,
             big);
    for (size_t step = 0; step <= 5; step += 5) {
        uint64_t over = 0;
        assert_string_equal(s_run(text, step, 32, &over), "=ok|=fine");
        assert_int_equal(over, 2);
    }
    // Within the bound, the same event passes.
    uint64_t over = 9;
    assert_string_equal(s_run("data: 0123456789\n\n", 1, 16, &over), "=0123456789");
    assert_int_equal(over, 0);
}

static void test_nul_bytes_and_reset(void **state)
{
    (void)state;
    s_seen_t seen = {0};
    ipl_sse_t *sse = ipl_sse_new(0, s_on_event, &seen);
    ipl_sse_feed(sse, "data: a\0b\n\n", 11);
    assert_int_equal(ipl_sse_events(sse), 1);
    ipl_sse_feed(sse, "data: partial", 13);
    ipl_sse_reset(sse);
    assert_int_equal(ipl_sse_events(sse), 0);
    ipl_sse_feed(sse, "data: new\n\n", 11);
    ipl_sse_finish(sse);
    assert_int_equal(ipl_sse_events(sse), 1);
    assert_string_equal(seen.out, "=a|=new"); // %.*s stops at the NUL; lengths were checked
    ipl_sse_destroy(&sse);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_openai_stream_any_split),
        cmocka_unit_test(test_line_ends),
        cmocka_unit_test(test_fields),
        cmocka_unit_test(test_finish_dispatches_unterminated),
        cmocka_unit_test(test_overlong_skipped_and_counted),
        cmocka_unit_test(test_nul_bytes_and_reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
