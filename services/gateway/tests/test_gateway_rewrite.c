/* Unit tests of gateway_rewrite: the model span scan, JSON bodies and SSE streams rewritten
 * the same whatever the chunk splits, bounds, escapes and sink errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway_rewrite.h"
#include "ipl_error.h"

/* ---- a sink collecting the output ---------------------------------------------------------- */

typedef struct {
    char *buf;
    size_t len;
    int calls;
    int fail_at; /* the call number that fails (0: never) */
} s_sink_t;

static int s_collect(void *arg, const char *data, size_t len)
{
    s_sink_t *s = arg;
    s->calls++;
    if (s->fail_at && s->calls >= s->fail_at) return IPL_E_IO;
    s->buf = realloc(s->buf, s->len + len + 1);
    memcpy(s->buf + s->len, data, len);
    s->len += len;
    s->buf[s->len] = '\0';
    return 0;
}

/* Rewrites `in` fed in pieces cut at `cuts` (ascending offsets, `ncuts` of them). */
static char *s_run(gateway_sse_mode_t mode, const char *model, const char *in, const size_t *cuts,
                   size_t ncuts, size_t max, uint64_t *rewritten)
{
    gateway_rewrite_t *rw = gateway_rewrite_new(mode, model, max);
    assert_non_null(rw);
    s_sink_t sink = {0};
    size_t len = strlen(in), at = 0;
    for (size_t i = 0; i <= ncuts; i++) {
        size_t end = i < ncuts ? cuts[i] : len;
        assert_int_equal(gateway_rewrite_feed(rw, in + at, end - at, s_collect, &sink), 0);
        at = end;
    }
    assert_int_equal(gateway_rewrite_finish(rw, s_collect, &sink), 0);
    if (rewritten) *rewritten = gateway_rewrite_stats(rw)->rewritten;
    gateway_rewrite_destroy(&rw);
    assert_null(rw);
    if (!sink.buf) sink.buf = strdup("");
    return sink.buf;
}

static void s_expect_all_splits(gateway_sse_mode_t mode, const char *model, const char *in,
                                const char *want, uint64_t want_rewritten)
{
    size_t len = strlen(in);
    uint64_t n = 0;
    char *whole = s_run(mode, model, in, NULL, 0, 0, &n);
    assert_string_equal(whole, want);
    assert_int_equal(n, want_rewritten);
    free(whole);
    for (size_t a = 0; a <= len; a++) {
        size_t cut[1] = {a};
        char *out = s_run(mode, model, in, cut, 1, 0, &n);
        if (strcmp(out, want)) fail_msg("split at %zu: got %s", a, out);
        assert_int_equal(n, want_rewritten);
        free(out);
    }
    for (size_t a = 0; a <= len; a += 7)
        for (size_t b = a; b <= len; b += 5) {
            size_t cuts[2] = {a, b};
            char *out = s_run(mode, model, in, cuts, 2, 0, &n);
            if (strcmp(out, want)) fail_msg("splits at %zu, %zu: got %s", a, b, out);
            free(out);
        }
    /* byte by byte */
    size_t *cuts = malloc(len * sizeof(*cuts));
    for (size_t i = 0; i < len; i++)
        cuts[i] = i;
    char *out = s_run(mode, model, in, cuts, len, 0, &n);
    assert_string_equal(out, want);
    assert_int_equal(n, want_rewritten);
    free(out);
    free(cuts);
}

/* ---- tests --------------------------------------------------------------------------------- */

static void test_model_span(void **state)
{
    (void)state;
    static const struct {
        const char *json;
        int want;
        const char *value; /* the span, when found */
    } cases[] = {
        {"{\"model\":\"m\"}", 1, "\"m\""},
        {"  {\"id\":\"x\",\"model\" : \"vendor/x-8b\",\"a\":1}", 1, "\"vendor/x-8b\""},
        {"{\"id\":\"a\\\"model\\\":\\\"no\",\"model\":\"yes\"}", 1, "\"yes\""},
        {"{\"nested\":{\"model\":\"no\"},\"arr\":[{\"model\":\"no\"}],\"model\":\"yes\"}", 1,
         "\"yes\""},
        {"{\"n\":-1.5e3,\"t\":true,\"z\":null,\"model\":\"e\\\\\\\"x\"}", 1, "\"e\\\\\\\"x\""},
        {"{\"a\":1}", 0, NULL},
        {"{}", 0, NULL},
        {"{\"model\":null,\"x\":1}", 0, NULL},
        {"[{\"model\":\"m\"}]", 0, NULL},
        {"data", 0, NULL},
        {"{\"a\" 1}", 0, NULL},
        {"", -1, NULL},
        {"{\"id\":\"chat", -1, NULL},
        {"{\"id\":\"x\",\"model\":\"ven", -1, NULL},
        {"{\"id\":12", -1, NULL},
        {"{\"o\":{\"a\":[1,2", -1, NULL},
        {"{\"modelx\":\"a\",\"model\":\"b\"}", 1, "\"b\""},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t start = 0, end = 0;
        const char *j = cases[i].json;
        int r = gateway_rewrite_model_span(j, strlen(j), &start, &end);
        if (r != cases[i].want) fail_msg("%s: got %d, want %d", j, r, cases[i].want);
        if (r == 1) {
            char got[128];
            snprintf(got, sizeof(got), "%.*s", (int)(end - start), j + start);
            assert_string_equal(got, cases[i].value);
        }
    }
}

static const char s_body[] =
    "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion\",\"created\":1700000000,"
    "\"model\":\"remote-chat\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\","
    "\"content\":\"remote-chat says \\\"hi\\\"\"}}],\"usage\":{\"prompt_tokens\":9,"
    "\"completion_tokens\":4,\"total_tokens\":13}}";

static void test_json_body_every_split(void **state)
{
    (void)state;
    char want[sizeof(s_body) + 16];
    const char *at = strstr(s_body, "\"remote-chat\"");
    snprintf(want, sizeof(want), "%.*s\"chat-model\"%s", (int)(at - s_body), s_body,
             at + strlen("\"remote-chat\""));
    s_expect_all_splits(GATEWAY_SSE_JSON, "chat-model", s_body, want, 1);
}

static const char s_stream[] =
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"remote-chat\","
    "\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n"
    ": a comment with \"model\":\"remote-chat\"\n"
    "event: message\r\n"
    "data: {\"id\":\"c1\",\"model\":\"remote-chat\",\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}"
    "\r\n\r\n"
    "data:{\"model\":\"remote-chat\",\"choices\":[],\"usage\":{\"prompt_tokens\":3}}\n\n"
    "data: [DONE]\n\n";

static const char s_stream_want[] =
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"chat-model\","
    "\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n"
    ": a comment with \"model\":\"remote-chat\"\n"
    "event: message\r\n"
    "data: {\"id\":\"c1\",\"model\":\"chat-model\",\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}"
    "\r\n\r\n"
    "data:{\"model\":\"chat-model\",\"choices\":[],\"usage\":{\"prompt_tokens\":3}}\n\n"
    "data: [DONE]\n\n";

static void test_sse_every_split(void **state)
{
    (void)state;
    s_expect_all_splits(GATEWAY_SSE_STREAM, "chat-model", s_stream, s_stream_want, 3);
}

/* Complete lines are never held back: each feed sends every line it completed. */
static void test_sse_lines_not_held(void **state)
{
    (void)state;
    gateway_rewrite_t *rw = gateway_rewrite_new(GATEWAY_SSE_STREAM, "m", 0);
    s_sink_t sink = {0};
    const char *a = "data: {\"model\":\"r\",\"x\":1}\n\ndata: {\"mod";
    assert_int_equal(gateway_rewrite_feed(rw, a, strlen(a), s_collect, &sink), 0);
    assert_string_equal(sink.buf, "data: {\"model\":\"m\",\"x\":1}\n\n");
    const char *b = "el\":\"r\"}\n\n";
    assert_int_equal(gateway_rewrite_feed(rw, b, strlen(b), s_collect, &sink), 0);
    assert_string_equal(sink.buf, "data: {\"model\":\"m\",\"x\":1}\n\ndata: {\"model\":\"m\"}\n\n");
    assert_int_equal(sink.calls, 2);
    /* an unterminated last line is rewritten at the end */
    const char *c = "data: {\"model\":\"r\"}";
    assert_int_equal(gateway_rewrite_feed(rw, c, strlen(c), s_collect, &sink), 0);
    assert_int_equal(sink.calls, 2);
    assert_int_equal(gateway_rewrite_finish(rw, s_collect, &sink), 0);
    assert_non_null(strstr(sink.buf, "\n\ndata: {\"model\":\"m\"}"));
    assert_int_equal(gateway_rewrite_stats(rw)->rewritten, 3);
    gateway_rewrite_destroy(&rw);
    free(sink.buf);
}

static void test_unchanged_without_model(void **state)
{
    (void)state;
    const char *err = "{\"error\":{\"message\":\"bad\",\"type\":\"x\"}}";
    s_expect_all_splits(GATEWAY_SSE_JSON, "m", err, err, 0);
    s_expect_all_splits(GATEWAY_SSE_JSON, "m", "not json at all", "not json at all", 0);
    s_expect_all_splits(GATEWAY_SSE_JSON, "m", "", "", 0);
    /* an unfinished body passes unchanged at the end */
    s_expect_all_splits(GATEWAY_SSE_JSON, "m", "{\"id\":\"x\",\"mo", "{\"id\":\"x\",\"mo", 0);
    const char *sse = "data: [DONE]\n\nid: 3\n\ndata: {\"model\":5}\n\n";
    s_expect_all_splits(GATEWAY_SSE_STREAM, "m", sse, sse, 0);
}

static void test_model_is_escaped(void **state)
{
    (void)state;
    char *out = s_run(GATEWAY_SSE_JSON, "we\"ird\\name\n", "{\"model\":\"r\"}", NULL, 0, 0, NULL);
    assert_string_equal(out, "{\"model\":\"we\\\"ird\\\\name\\u000a\"}");
    free(out);
}

/* Beyond the bound: passed unchanged (and counted), and the stream recovers on the next line. */
static void test_bounded(void **state)
{
    (void)state;
    char line[400];
    snprintf(line, sizeof(line), "data: {\"pad\":\"%0200d\",\"model\":\"r\"}\n\n", 0);
    char in[1000];
    snprintf(in, sizeof(in), "%sdata: {\"model\":\"r\"}\n\n", line);
    gateway_rewrite_t *rw = gateway_rewrite_new(GATEWAY_SSE_STREAM, "m", 64);
    s_sink_t sink = {0};
    for (size_t i = 0; i < strlen(in); i += 10) {
        size_t n = strlen(in) - i < 10 ? strlen(in) - i : 10;
        assert_int_equal(gateway_rewrite_feed(rw, in + i, n, s_collect, &sink), 0);
    }
    assert_int_equal(gateway_rewrite_finish(rw, s_collect, &sink), 0);
    char want[1000];
    snprintf(want, sizeof(want), "%sdata: {\"model\":\"m\"}\n\n", line);
    assert_string_equal(sink.buf, want);
    assert_int_equal(gateway_rewrite_stats(rw)->overlong, 1);
    assert_int_equal(gateway_rewrite_stats(rw)->rewritten, 1);
    gateway_rewrite_destroy(&rw);
    free(sink.buf);

    /* a JSON body whose model comes too late passes unchanged */
    char body[600];
    snprintf(body, sizeof(body), "{\"pad\":\"%0300d\",\"model\":\"r\"}", 0);
    uint64_t n = 9;
    size_t cut[1] = {100};
    char *out = s_run(GATEWAY_SSE_JSON, "m", body, cut, 1, 128, &n);
    assert_string_equal(out, body);
    assert_int_equal(n, 0);
    free(out);
}

static void test_sink_error_sticks(void **state)
{
    (void)state;
    gateway_rewrite_t *rw = gateway_rewrite_new(GATEWAY_SSE_STREAM, "m", 0);
    s_sink_t sink = {.fail_at = 2};
    assert_int_equal(gateway_rewrite_feed(rw, "data: 1\n", 8, s_collect, &sink), 0);
    assert_int_equal(gateway_rewrite_feed(rw, "data: 2\n", 8, s_collect, &sink), IPL_E_IO);
    assert_int_equal(gateway_rewrite_feed(rw, "data: 3\n", 8, s_collect, &sink), IPL_E_IO);
    assert_int_equal(gateway_rewrite_finish(rw, s_collect, &sink), IPL_E_IO);
    assert_int_equal(sink.calls, 2);
    assert_string_equal(sink.buf, "data: 1\n");
    gateway_rewrite_destroy(&rw);
    gateway_rewrite_destroy(&rw); /* NULL: nothing */
    free(sink.buf);
}

/* Random bytes never crash it, and what comes out is what came in when no model is there. */
static void test_garbage(void **state)
{
    (void)state;
    srand(7);
    char in[4096];
    for (int round = 0; round < 50; round++) {
        size_t len = (size_t)(rand() % (int)sizeof(in));
        for (size_t i = 0; i < len; i++) {
            static const char alphabet[] = "{}[]\":,\\ \n\rdata:abc0123";
            in[i] = alphabet[rand() % (int)(sizeof(alphabet) - 1)];
        }
        for (int mode = 0; mode < 2; mode++) {
            gateway_rewrite_t *rw = gateway_rewrite_new((gateway_sse_mode_t)mode, "m", 256);
            s_sink_t sink = {0};
            for (size_t i = 0; i < len;) {
                size_t n = (size_t)(rand() % 64) + 1;
                if (n > len - i) n = len - i;
                assert_int_equal(gateway_rewrite_feed(rw, in + i, n, s_collect, &sink), 0);
                i += n;
            }
            assert_int_equal(gateway_rewrite_finish(rw, s_collect, &sink), 0);
            if (gateway_rewrite_stats(rw)->rewritten == 0) {
                assert_int_equal(sink.len, len);
                if (len) assert_memory_equal(sink.buf, in, len);
            }
            gateway_rewrite_destroy(&rw);
            free(sink.buf);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_span),
        cmocka_unit_test(test_json_body_every_split),
        cmocka_unit_test(test_sse_every_split),
        cmocka_unit_test(test_sse_lines_not_held),
        cmocka_unit_test(test_unchanged_without_model),
        cmocka_unit_test(test_model_is_escaped),
        cmocka_unit_test(test_bounded),
        cmocka_unit_test(test_sink_error_sticks),
        cmocka_unit_test(test_garbage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
