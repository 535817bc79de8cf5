/*
 * Unit tests of api_anthropic_stream.
 *
 * - Golden outputs: a text stream and a tool stream as vLLM sends them give exactly the
 *   Anthropic events expected, byte for byte.
 * - Every upstream stream below (good or broken) is fed whole, byte by byte, split in two at
 *   every position, and in random pieces: the output is identical every time.
 * - Every output is checked against the event grammar of VLLM-INTEROP.md §5 (s_check):
 *     message_start ping* (content_block_start ping* content_block_delta* content_block_stop)*
 *     message_delta message_stop        — or, at any point, one error event and nothing after
 *   with block indexes 0, 1, ... in order, each delta's index its open block's, each data's
 *   "type" its event's name.
 * - Stop reasons, usage, the input-token preset, reasoning, bounds, and every failure path.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "api_anthropic_request.h"
#include "api_anthropic_stream.h"
#include "api_buf.h"
#include "api_test.h"
#include "ipl_error.h"

/* ------------------------------------------------------------------------------------- */
/* upstream streams (single-quoted JSON; \\' is an escaped quote inside a JSON string)      */

#define S_C(body)                                                                                  \
    "data: {'id':'chatcmpl-abc','object':'chat.completion.chunk','created':1,"                     \
    "'model':'w'," body "}\n\n"
#define S_ROLE                                                                                     \
    S_C("'choices':[{'index':0,'delta':{'role':'assistant','content':''},'logprobs':null,"         \
        "'finish_reason':null}],'usage':null")
#define S_TEXT(t)                                                                                  \
    S_C("'choices':[{'index':0,'delta':{'content':'" t "'},'logprobs':null,"                       \
        "'finish_reason':null}],'usage':null")
#define S_FINISH(f)                                                                                \
    S_C("'choices':[{'index':0,'delta':{'content':''},'logprobs':null,"                            \
        "'finish_reason':" f "}],'usage':null")
#define S_USAGE                                                                                    \
    S_C("'choices':[],'usage':{'prompt_tokens':17,'total_tokens':49,'completion_tokens':32,"       \
        "'prompt_tokens_details':{'cached_tokens':16}}")
#define S_DONE "data: [DONE]\n\n"
#define S_TOOL(i, extra)                                                                           \
    S_C("'choices':[{'index':0,'delta':{'tool_calls':[{'index':" #i extra "}]},"                   \
        "'logprobs':null,'finish_reason':null}],'usage':null")

// clang-format off
static const char s_text_stream[] =
    S_ROLE
    S_TEXT("Hel")
    S_TEXT("lo \\'world\\'\\n")
    S_FINISH("'stop','stop_reason':null")
    S_USAGE
    S_DONE;

static const char s_tool_stream[] =
    S_ROLE
    S_TEXT("Checking.")
    S_TOOL(0, ",'id':'chatcmpl-tool-1','type':'function','function':{'name':'get_weather','arguments':''}")
    S_TOOL(0, ",'function':{'arguments':'{\\'city\\': \\'Br'}")
    S_TOOL(0, ",'function':{'arguments':'no\\'}'}")
    S_TOOL(1, ",'id':'chatcmpl-tool-2','type':'function','function':{'name':'now','arguments':'{}'}")
    S_FINISH("'tool_calls'")
    S_USAGE
    S_DONE;
// clang-format on

/* ------------------------------------------------------------------------------------- */
/* golden outputs                                                                          */

#define S_E(name, data) "event: " name "\ndata: " data "\n\n"
#define S_START_EV                                                                                 \
    S_E("message_start",                                                                           \
        "{'type':'message_start','message':{'id':'msg_chatcmpl-abc','type':"                       \
        "'message','role':'assistant','model':'claude-x','content':[],'stop_reason':null,"         \
        "'stop_sequence':null,'usage':{'input_tokens':0,'cache_creation_input_tokens':0,"          \
        "'cache_read_input_tokens':0,'output_tokens':0}}}")
#define S_PING_EV S_E("ping", "{'type':'ping'}")
#define S_BSTART_TEXT(i)                                                                           \
    S_E("content_block_start",                                                                     \
        "{'type':'content_block_start','index':" #i ",'content_block':{'type':'text','text':''}}")
#define S_TDELTA(i, t)                                                                             \
    S_E("content_block_delta", "{'type':'content_block_delta','index':" #i                         \
                               ",'delta':{'type':'text_delta','text':'" t "'}}")
#define S_JDELTA(i, t)                                                                             \
    S_E("content_block_delta", "{'type':'content_block_delta','index':" #i                         \
                               ",'delta':{'type':'input_json_delta','partial_json':'" t "'}}")
#define S_BSTOP(i) S_E("content_block_stop", "{'type':'content_block_stop','index':" #i "}")
#define S_MDELTA(reason, seq)                                                                      \
    S_E("message_delta",                                                                           \
        "{'type':'message_delta','delta':{'stop_reason':'" reason "',"                             \
        "'stop_sequence':" seq "},'usage':{'input_tokens':1,'cache_creation_input_tokens':0,"      \
        "'cache_read_input_tokens':16,'output_tokens':32}}")
#define S_MSTOP S_E("message_stop", "{'type':'message_stop'}")

// clang-format off
static const char s_text_golden[] =
    S_START_EV
    S_BSTART_TEXT(0)
    S_PING_EV
    S_TDELTA(0, "Hel")
    S_TDELTA(0, "lo \\'world\\'\\n")
    S_BSTOP(0)
    S_MDELTA("end_turn", "null")
    S_MSTOP;

static const char s_tool_golden[] =
    S_START_EV
    S_BSTART_TEXT(0)
    S_PING_EV
    S_TDELTA(0, "Checking.")
    S_BSTOP(0)
    S_E("content_block_start", "{'type':'content_block_start','index':1,'content_block':"
                               "{'type':'tool_use','id':'chatcmpl-tool-1','name':'get_weather','input':{}}}")
    S_JDELTA(1, "{\\'city\\': \\'Br")
    S_JDELTA(1, "no\\'}")
    S_BSTOP(1)
    S_E("content_block_start", "{'type':'content_block_start','index':2,'content_block':"
                               "{'type':'tool_use','id':'chatcmpl-tool-2','name':'now','input':{}}}")
    S_JDELTA(2, "{}")
    S_BSTOP(2)
    S_MDELTA("tool_use", "null")
    S_MSTOP;
// clang-format on

/* ------------------------------------------------------------------------------------- */
/* harness                                                                                 */

static api_anthropic_request_t *s_request(void)
{
    return api_test_request(API_ANTHROPIC_MESSAGES,
                            "{'model':'claude-x','max_tokens':64,'stream':true,'stop_sequences':"
                            "['END','##'],'messages':[{'role':'user','content':'hi'}]}");
}

typedef struct {
    char *text;                         /* the whole output */
    int rc_finish;                      /* what finish returned */
    api_anthropic_stream_state_t state; /* after finish */
    api_anthropic_stream_stats_t stats;
} s_run_t;

/* Feeds `in` in pieces of the given sizes (0-terminated list; the rest in one piece), then
 * finishes. Each feed's output is appended to one buffer, cleared between feeds as the
 * gateway would after writing it. */
static s_run_t s_run(const char *in, size_t len, const size_t *pieces, uint64_t preset)
{
    api_anthropic_request_t *req = s_request();
    api_anthropic_stream_t *st = api_anthropic_stream_new(req);
    api_anthropic_request_destroy(&req); /* the translator keeps its own copies */
    assert_non_null(st);
    if (preset) api_anthropic_stream_set_input_tokens(st, preset);
    api_buf_t out = {0}, all = {0};
    size_t at = 0;
    for (size_t i = 0; pieces && pieces[i] && at < len; i++) {
        size_t n = pieces[i] < len - at ? pieces[i] : len - at;
        api_anthropic_stream_feed(st, in + at, n, &out);
        api_buf_append(&all, out.data ? out.data : "", out.len);
        api_buf_clear(&out);
        at += n;
    }
    if (at < len) api_anthropic_stream_feed(st, in + at, len - at, &out);
    s_run_t run;
    run.rc_finish = api_anthropic_stream_finish(st, &out);
    /* finish and abort are idempotent once the stream is over */
    assert_int_equal(api_anthropic_stream_finish(st, &out), run.rc_finish);
    api_buf_append(&all, out.data ? out.data : "", out.len);
    run.state = api_anthropic_stream_state(st);
    run.stats = *api_anthropic_stream_stats(st);
    run.text = api_buf_take(&all);
    api_buf_free(&out);
    api_anthropic_stream_destroy(&st);
    assert_null(st);
    return run;
}

static s_run_t s_whole(const char *in, size_t len)
{
    return s_run(in, len, NULL, 0);
}

/* What s_check learnt from a valid output. */
typedef struct {
    int blocks;
    char text[4096];   /* every text_delta joined */
    char json[4][512]; /* each tool block's partial_json joined */
    char tool_name[4][64];
    char reason[32];   /* message_delta's stop_reason */
    char sequence[32]; /* its stop_sequence ("" for null) */
    long long usage_in, usage_out, usage_cached, start_in;
    char error_type[64]; /* the error event's type, or "" */
    char error_message[512];
    int pings;
} s_summary_t;

static void s_copy(char *dst, size_t size, const char *src)
{
    snprintf(dst, size, "%s", src ? src : "");
}

/* Checks `text` against the grammar above; fails the test with the offending event. */
static s_summary_t s_check(const char *text)
{
    s_summary_t sum;
    memset(&sum, 0, sizeof(sum));
    enum { BEFORE, MESSAGE, IN_BLOCK, DELTA_SENT, STOPPED, ERRORED } phase = BEFORE;
    int open = -1;
    const char *p = text;
    while (*p) {
        if (strncmp(p, "event: ", 7) != 0) fail_msg("not an event at: %.80s", p);
        const char *nl = strchr(p, '\n');
        if (!nl || strncmp(nl + 1, "data: ", 6) != 0) fail_msg("event without data: %.80s", p);
        char name[64];
        snprintf(name, sizeof(name), "%.*s", (int)(nl - p - 7), p + 7);
        const char *data = nl + 7, *end = strstr(data, "\n\n");
        if (!end) fail_msg("event not ended by a blank line: %.80s", p);
        cJSON *j = cJSON_ParseWithLength(data, (size_t)(end - data));
        if (!j) fail_msg("data is not JSON: %.*s", (int)(end - data), data);
        const char *type = cJSON_GetStringValue(cJSON_GetObjectItem(j, "type"));
        if (!type || strcmp(type, name) != 0) fail_msg("event %s carries type %s", name, type);
        if (phase == STOPPED || phase == ERRORED) fail_msg("event %s after the end", name);
        cJSON *index = cJSON_GetObjectItem(j, "index");
        if (strcmp(name, "error") == 0) {
            cJSON *e = cJSON_GetObjectItem(j, "error");
            s_copy(sum.error_type, sizeof(sum.error_type),
                   cJSON_GetStringValue(cJSON_GetObjectItem(e, "type")));
            s_copy(sum.error_message, sizeof(sum.error_message),
                   cJSON_GetStringValue(cJSON_GetObjectItem(e, "message")));
            phase = ERRORED;
        } else if (strcmp(name, "message_start") == 0) {
            if (phase != BEFORE) fail_msg("message_start twice");
            cJSON *m = cJSON_GetObjectItem(j, "message");
            assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(m, "content")), 0);
            assert_true(cJSON_IsNull(cJSON_GetObjectItem(m, "stop_reason")));
            sum.start_in = (long long)cJSON_GetNumberValue(
                cJSON_GetObjectItem(cJSON_GetObjectItem(m, "usage"), "input_tokens"));
            phase = MESSAGE;
        } else if (phase == BEFORE) {
            fail_msg("%s before message_start", name);
        } else if (strcmp(name, "ping") == 0) {
            sum.pings++;
        } else if (strcmp(name, "content_block_start") == 0) {
            if (phase != MESSAGE) fail_msg("content_block_start inside a block");
            if ((int)cJSON_GetNumberValue(index) != sum.blocks)
                fail_msg("block %d started as index %d", sum.blocks,
                         (int)cJSON_GetNumberValue(index));
            open = sum.blocks++;
            cJSON *b = cJSON_GetObjectItem(j, "content_block");
            const char *bt = cJSON_GetStringValue(cJSON_GetObjectItem(b, "type"));
            if (strcmp(bt, "tool_use") == 0 && open < 4) {
                s_copy(sum.tool_name[open], 64,
                       cJSON_GetStringValue(cJSON_GetObjectItem(b, "name")));
                assert_true(cJSON_IsObject(cJSON_GetObjectItem(b, "input")));
                assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(b, "input")), 0);
            } else if (strcmp(bt, "text") != 0) {
                fail_msg("block type %s", bt);
            }
            phase = IN_BLOCK;
        } else if (strcmp(name, "content_block_delta") == 0) {
            if (phase != IN_BLOCK && phase != DELTA_SENT) fail_msg("delta outside a block");
            if ((int)cJSON_GetNumberValue(index) != open) fail_msg("delta for a block not open");
            cJSON *d = cJSON_GetObjectItem(j, "delta");
            const char *dt = cJSON_GetStringValue(cJSON_GetObjectItem(d, "type"));
            if (strcmp(dt, "text_delta") == 0)
                strncat(sum.text, cJSON_GetStringValue(cJSON_GetObjectItem(d, "text")),
                        sizeof(sum.text) - strlen(sum.text) - 1);
            else if (strcmp(dt, "input_json_delta") == 0 && open < 4)
                strncat(sum.json[open],
                        cJSON_GetStringValue(cJSON_GetObjectItem(d, "partial_json")),
                        sizeof(sum.json[open]) - strlen(sum.json[open]) - 1);
            else
                fail_msg("delta type %s", dt);
            phase = DELTA_SENT;
        } else if (strcmp(name, "content_block_stop") == 0) {
            if (phase != IN_BLOCK && phase != DELTA_SENT) fail_msg("stop outside a block");
            if ((int)cJSON_GetNumberValue(index) != open) fail_msg("stop for a block not open");
            open = -1;
            phase = MESSAGE;
        } else if (strcmp(name, "message_delta") == 0) {
            if (phase != MESSAGE) fail_msg("message_delta with a block open");
            cJSON *d = cJSON_GetObjectItem(j, "delta"), *u = cJSON_GetObjectItem(j, "usage");
            s_copy(sum.reason, sizeof(sum.reason),
                   cJSON_GetStringValue(cJSON_GetObjectItem(d, "stop_reason")));
            s_copy(sum.sequence, sizeof(sum.sequence),
                   cJSON_GetStringValue(cJSON_GetObjectItem(d, "stop_sequence")));
            sum.usage_in = (long long)cJSON_GetNumberValue(cJSON_GetObjectItem(u, "input_tokens"));
            sum.usage_out =
                (long long)cJSON_GetNumberValue(cJSON_GetObjectItem(u, "output_tokens"));
            sum.usage_cached =
                (long long)cJSON_GetNumberValue(cJSON_GetObjectItem(u, "cache_read_input_tokens"));
            cJSON_Delete(j);
            p = end + 2; /* message_stop must follow */
            static const char stop[] = "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
            if (strncmp(p, stop, sizeof(stop) - 1) != 0)
                fail_msg("message_delta not followed by message_stop: %.60s", p);
            p += sizeof(stop) - 1;
            phase = STOPPED;
            continue;
        } else {
            fail_msg("unknown event %s", name);
        }
        cJSON_Delete(j);
        p = end + 2;
    }
    if (phase != STOPPED && phase != ERRORED) fail_msg("the stream did not end (phase %d)", phase);
    return sum;
}

static uint64_t s_rng = 0x9e3779b97f4a7c15ULL;
static uint64_t s_next(void)
{
    s_rng ^= s_rng << 13;
    s_rng ^= s_rng >> 7;
    s_rng ^= s_rng << 17;
    return s_rng;
}

/* The same input split every way gives the same output; returns the whole-feed run. */
static s_run_t s_all_splits(const char *in, size_t len)
{
    s_run_t whole = s_whole(in, len);
    size_t *pieces = calloc(len + 2, sizeof(size_t));
    /* byte by byte */
    for (size_t i = 0; i < len; i++)
        pieces[i] = 1;
    s_run_t r = s_run(in, len, pieces, 0);
    if (strcmp(r.text, whole.text) != 0)
        fail_msg("byte by byte differs:\n%s\nvs\n%s", r.text, whole.text);
    assert_int_equal(r.rc_finish, whole.rc_finish);
    free(r.text);
    /* two pieces, at every position */
    for (size_t at = 0; at <= len; at++) {
        size_t two[2] = {at, 0};
        r = s_run(in, len, at ? two : NULL, 0);
        if (strcmp(r.text, whole.text) != 0) fail_msg("split at %zu differs", at);
        free(r.text);
    }
    /* random pieces of 1..64 bytes */
    for (int round = 0; round < 200; round++) {
        size_t k = 0, sum = 0;
        while (sum < len) {
            pieces[k] = 1 + s_next() % 64;
            sum += pieces[k++];
        }
        pieces[k] = 0;
        r = s_run(in, len, pieces, 0);
        if (strcmp(r.text, whole.text) != 0) fail_msg("random split (round %d) differs", round);
        free(r.text);
    }
    free(pieces);
    return whole;
}

/* ------------------------------------------------------------------------------------- */
/* tests                                                                                   */

static void s_golden(const char *stream, const char *golden)
{
    char *in = api_test_q(stream), *want = api_test_q(golden);
    s_run_t run = s_all_splits(in, strlen(in));
    if (strcmp(run.text, want) != 0) fail_msg("got\n%s\nwant\n%s", run.text, want);
    assert_int_equal(run.rc_finish, 0);
    assert_int_equal(run.state, API_ANTHROPIC_STREAM_DONE);
    s_check(run.text);
    free(run.text);
    free(in);
    free(want);
}

static void test_golden_text(void **state)
{
    (void)state;
    s_golden(s_text_stream, s_text_golden);
    char *in = api_test_q(s_text_stream);
    s_run_t run = s_whole(in, strlen(in));
    s_summary_t sum = s_check(run.text);
    assert_string_equal(sum.text, "Hello \"world\"\n");
    assert_int_equal(sum.pings, 1);
    assert_true(run.stats.usage.known);
    assert_int_equal(run.stats.usage.prompt_tokens, 17);
    assert_int_equal(run.stats.usage.completion_tokens, 32);
    assert_int_equal(run.stats.usage.cached_tokens, 16);
    assert_int_equal(run.stats.events_in, 6);
    assert_int_equal(run.stats.events_out, 8);
    assert_int_equal(run.stats.blocks, 1);
    assert_int_equal(run.stats.content_deltas, 2);
    assert_int_equal(run.stats.error, 0);
    free(run.text);
    free(in);
}

static void test_golden_tools(void **state)
{
    (void)state;
    s_golden(s_tool_stream, s_tool_golden);
    char *in = api_test_q(s_tool_stream);
    s_run_t run = s_whole(in, strlen(in));
    s_summary_t sum = s_check(run.text);
    assert_int_equal(sum.blocks, 3);
    assert_string_equal(sum.tool_name[1], "get_weather");
    assert_string_equal(sum.json[1], "{\"city\": \"Brno\"}"); /* the pieces make the arguments */
    cJSON *args = cJSON_Parse(sum.json[1]);
    assert_non_null(args);
    cJSON_Delete(args);
    assert_string_equal(sum.tool_name[2], "now");
    assert_string_equal(sum.reason, "tool_use");
    free(run.text);
    free(in);
}

typedef struct {
    const char *name;
    const char *in;       /* upstream (single-quoted) */
    int rc;               /* finish's result */
    const char *reason;   /* stop_reason, or NULL when it must fail */
    const char *sequence; /* stop_sequence ("" for null) */
    const char *text;     /* all text deltas joined */
    int blocks;
    const char *error_type, *error_message; /* when it fails */
} s_case_t;

static const s_case_t s_cases[] = {
    {"length → max_tokens", S_ROLE S_TEXT("ab") S_FINISH("'length'") S_USAGE S_DONE, 0,
     "max_tokens", "", "ab", 1, NULL, NULL},
    {"stop sequence matched (vLLM stop_reason)",
     S_ROLE S_TEXT("a") S_FINISH("'stop','stop_reason':'END'") S_USAGE S_DONE, 0, "stop_sequence",
     "END", "a", 1, NULL, NULL},
    {"stop_reason a token id → end_turn",
     S_ROLE S_TEXT("a") S_FINISH("'stop','stop_reason':151645") S_USAGE S_DONE, 0, "end_turn", "",
     "a", 1, NULL, NULL},
    {"no output at all: no block, no ping", S_ROLE S_FINISH("'stop'") S_USAGE S_DONE, 0, "end_turn",
     "", "", 0, NULL, NULL},
    {"text after a tool call opens a new block",
     S_ROLE S_TOOL(0, ",'id':'t0','function':{'name':'f','arguments':'{}'}") S_TEXT("after")
         S_FINISH("'stop'") S_DONE,
     0, "tool_use", "", "after", 2, NULL, NULL},
    {"the worker repeats the id on every delta",
     S_ROLE S_TOOL(0, ",'id':'t0','function':{'name':'f','arguments':'{'}")
         S_TOOL(0, ",'id':'t0','function':{'arguments':'}'}") S_FINISH("'tool_calls'") S_DONE,
     0, "tool_use", "", "", 1, NULL, NULL},
    {"a new id with a name on the same index is a new call (vLLM's converter)",
     S_ROLE S_TOOL(0, ",'id':'t0','function':{'name':'f','arguments':'{}'}") S_TOOL(
         0, ",'id':'t1','function':{'name':'g','arguments':'{}'}") S_FINISH("'tool_calls'") S_DONE,
     0, "tool_use", "", "", 2, NULL, NULL},
    {"CRLF line ends, comments, other fields, data split over lines",
     ": keep-alive\r\nid: 1\r\nretry: 10\r\nevent: chunk\r\n"
     "data: {'id':'chatcmpl-abc','choices':[{'index':0,'delta':\r\ndata: {'content':'x'}}]}\r\n\r\n"
     "data:{'id':'chatcmpl-abc','choices':[{'index':0,'delta':{},'finish_reason':'stop'}]}\r\n\r\n"
     "data: [DONE]\r\n\r\n",
     0, "end_turn", "", "x", 1, NULL, NULL},
    {"lone CR line ends",
     "data: {'id':'c','choices':[{'delta':{'content':'y'}}]}\r\rdata: {'id':'c',"
     "'choices':[{'delta':{},'finish_reason':'length'}]}\r\rdata: [DONE]\r\r",
     0, "max_tokens", "", "y", 1, NULL, NULL},
    {"closed after the finish chunk without [DONE]", S_ROLE S_TEXT("a") S_FINISH("'stop'") S_USAGE,
     0, "end_turn", "", "a", 1, NULL, NULL},
    {"last event without its blank line", S_ROLE S_TEXT("a") S_FINISH("'stop'") "data: [DONE]", 0,
     "end_turn", "", "a", 1, NULL, NULL},
    {"bytes after [DONE] are ignored",
     S_ROLE S_TEXT("a") S_FINISH("'stop'") S_DONE S_TEXT("zzz") S_DONE, 0, "end_turn", "", "a", 1,
     NULL, NULL},
    {"other choices are not this answer",
     S_ROLE S_C("'choices':[{'index':1,'delta':{'content':'other'}},{'index':0,'delta':{'content':"
                "'mine'}}]") S_FINISH("'stop'") S_DONE,
     0, "end_turn", "", "mine", 1, NULL, NULL},
    {"reasoning is not forwarded",
     S_ROLE S_C("'choices':[{'index':0,'delta':{'reasoning_content':'hmm'}}]")
         S_C("'choices':[{'index':0,'delta':{'reasoning':'so'}}]") S_TEXT("ok") S_FINISH("'stop'")
             S_DONE,
     0, "end_turn", "", "ok", 1, NULL, NULL},
    /* failures */
    {"vLLM's mid-stream error chunk",
     S_ROLE S_TEXT("a") "data: {'error':{'object':'error','message':'engine died','type':"
                        "'InternalServerError','param':null,'code':500}}\n\n" S_DONE,
     IPL_E_IO, NULL, "", "a", 1, "api_error", "engine died"},
    {"an error chunk with a 4xx code keeps its type",
     "data: {'error':{'message':'too long','code':400}}\n\n" S_DONE, IPL_E_IO, NULL, "", "", 0,
     "invalid_request_error", "too long"},
    {"an event that is not JSON", S_ROLE "data: {oops\n\n" S_DONE, IPL_E_TYPE, NULL, "", "", 0,
     "api_error", "the worker sent an event that is not a JSON object"},
    {"cut before the finish", S_ROLE S_TEXT("a"), IPL_E_TRUNCATED, NULL, "", "a", 1, "api_error",
     "the worker's stream ended before the answer was complete"},
    {"nothing at all", "", IPL_E_TRUNCATED, NULL, "", "", 0, "api_error",
     "the worker's stream ended before the answer was complete"},
    {"[DONE] first", S_DONE, IPL_E_TRUNCATED, NULL, "", "", 0, "api_error",
     "the worker's stream ended before any answer"},
    {"a tool call continued after its block closed",
     S_ROLE S_TOOL(0, ",'id':'t0','function':{'name':'f','arguments':'{'}") S_TEXT("x")
         S_TOOL(0, ",'function':{'arguments':'}'}") S_DONE,
     IPL_E_INVAL, NULL, "", "x", 2, "api_error",
     "the worker continued a tool call after its content block was closed"},
    {"a tool call without a name",
     S_ROLE S_TOOL(0, ",'id':'t0','function':{'arguments':'{}'}") S_DONE, IPL_E_INVAL, NULL, "", "",
     0, "api_error", "the worker started a tool call without a function name"},
    {"a tool call delta that is not an object",
     S_ROLE S_C("'choices':[{'index':0,'delta':{'tool_calls':[7]}}]") S_DONE, IPL_E_TYPE, NULL, "",
     "", 0, "api_error", "the worker sent a tool call delta that is not an object"},
    {"a tool call with a bad index",
     S_ROLE S_C("'choices':[{'index':0,'delta':{'tool_calls':[{'index':-1,'id':'t','function':{"
                "'name':'f'}}]}}]") S_DONE,
     IPL_E_TYPE, NULL, "", "", 0, "api_error",
     "the worker sent a tool call delta with a bad index"},
};

static void test_cases(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(s_cases) / sizeof(s_cases[0]); i++) {
        const s_case_t *c = &s_cases[i];
        char *in = api_test_q(c->in);
        s_run_t run = s_all_splits(in, strlen(in));
        s_summary_t sum = s_check(run.text);
        if (run.rc_finish != c->rc)
            fail_msg("case \"%s\": finish gave %d, want %d\n%s", c->name, run.rc_finish, c->rc,
                     run.text);
        if (strcmp(sum.text, c->text) != 0 || sum.blocks != c->blocks)
            fail_msg("case \"%s\": text \"%s\" in %d blocks\n%s", c->name, sum.text, sum.blocks,
                     run.text);
        if (c->reason) {
            assert_int_equal(run.state, API_ANTHROPIC_STREAM_DONE);
            if (strcmp(sum.reason, c->reason) != 0 || strcmp(sum.sequence, c->sequence) != 0)
                fail_msg("case \"%s\": stop %s/%s", c->name, sum.reason, sum.sequence);
            assert_string_equal(sum.error_type, "");
        } else {
            assert_int_equal(run.state, API_ANTHROPIC_STREAM_FAILED);
            assert_int_equal(run.stats.error, c->rc);
            if (strcmp(sum.error_type, c->error_type) != 0 ||
                strcmp(sum.error_message, c->error_message) != 0)
                fail_msg("case \"%s\": error %s: %s", c->name, sum.error_type, sum.error_message);
        }
        free(run.text);
        free(in);
    }
}

static void test_usage_and_preset(void **state)
{
    (void)state;
    /* Without usage from the worker: the preset input, 0 output, in both events. */
    char *in = api_test_q(S_ROLE S_TEXT("a") S_FINISH("'stop'") S_DONE);
    s_run_t run = s_run(in, strlen(in), NULL, 123);
    s_summary_t sum = s_check(run.text);
    assert_int_equal(sum.start_in, 123);
    assert_int_equal(sum.usage_in, 123);
    assert_int_equal(sum.usage_out, 0);
    assert_false(run.stats.usage.known);
    free(run.text);
    free(in);
    /* The worker's usage wins over the preset at the end. */
    in = api_test_q(s_text_stream);
    run = s_run(in, strlen(in), NULL, 123);
    sum = s_check(run.text);
    assert_int_equal(sum.start_in, 123);
    assert_int_equal(sum.usage_in, 1);
    assert_int_equal(sum.usage_cached, 16);
    assert_int_equal(sum.usage_out, 32);
    free(run.text);
    free(in);
    /* A first chunk with usage (continuous_usage_stats) fills message_start. */
    in =
        api_test_q(S_C("'choices':[{'index':0,'delta':{'role':'assistant','content':'a'}}],'usage':"
                       "{'prompt_tokens':50,'completion_tokens':1,'prompt_tokens_details':"
                       "{'cached_tokens':48}}") S_FINISH("'stop'") S_DONE);
    run = s_whole(in, strlen(in));
    sum = s_check(run.text);
    assert_int_equal(sum.start_in, 2);
    assert_int_equal(sum.usage_in, 2);
    assert_int_equal(sum.usage_cached, 48);
    assert_int_equal(sum.usage_out, 1);
    free(run.text);
    free(in);
    /* Reasoning deltas are counted. */
    in = api_test_q(S_ROLE S_C("'choices':[{'index':0,'delta':{'reasoning_content':'hmm'}}]")
                        S_FINISH("'stop'") S_DONE);
    run = s_whole(in, strlen(in));
    assert_int_equal(run.stats.reasoning_deltas, 1);
    free(run.text);
    free(in);
    /* Bytes after the end are counted. */
    in = api_test_q(S_ROLE S_FINISH("'stop'") S_DONE "data: x\n\n");
    run = s_whole(in, strlen(in));
    assert_int_equal(run.stats.bytes_after_end, strlen("data: x\n\n"));
    free(run.text);
    free(in);
}

/* An event over 1 MiB fails the stream; one just under passes. */
static void test_event_bound(void **state)
{
    (void)state;
    for (int over = 0; over <= 1; over++) {
        api_buf_t in = {0};
        char *head = api_test_q(S_ROLE);
        api_buf_puts(&in, head);
        free(head);
        const char *pre = "data: {\"choices\":[{\"delta\":{\"content\":\"", *post = "\"}}]}";
        /* the bound counts the bytes held: the whole line, "data: " included */
        size_t fill = API_ANTHROPIC_STREAM_MAX_EVENT - strlen(pre) - strlen(post) + (size_t)over;
        api_buf_puts(&in, pre);
        for (size_t i = 0; i < fill; i++)
            api_buf_append(&in, "x", 1);
        api_buf_puts(&in, post);
        api_buf_puts(&in,
                     "\n\ndata: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n");
        size_t pieces[] = {4096, 4096, 4096, 0};
        s_run_t run = s_run(in.data, in.len, pieces, 0);
        s_summary_t sum = s_check(run.text);
        if (over) {
            assert_int_equal(run.rc_finish, IPL_E_RANGE);
            assert_string_equal(sum.error_message, "the worker sent an event over 1 MiB");
        } else {
            assert_int_equal(run.rc_finish, 0);
            assert_int_equal(strlen(sum.text) < sizeof(sum.text), 1);
        }
        free(run.text);
        api_buf_free(&in);
    }
}

static void test_abort(void **state)
{
    (void)state;
    api_anthropic_request_t *req = s_request();
    api_anthropic_stream_t *st = api_anthropic_stream_new(req);
    api_buf_t out = {0};
    char *in = api_test_q(S_ROLE S_TEXT("part"));
    assert_int_equal(api_anthropic_stream_feed(st, NULL, 0, &out), 0); /* nothing: a no-op */
    assert_int_equal(out.len, 0);
    assert_int_equal(api_anthropic_stream_feed(st, in, strlen(in), &out), 0);
    assert_int_equal(api_anthropic_stream_state(st), API_ANTHROPIC_STREAM_OPEN);
    assert_int_equal(api_anthropic_stream_stats(st)->content_deltas, 1);
    assert_int_equal(api_anthropic_stream_abort(st, 529, "the worker went away", &out), IPL_E_IO);
    assert_int_equal(api_anthropic_stream_state(st), API_ANTHROPIC_STREAM_FAILED);
    s_summary_t sum = s_check(out.data);
    assert_string_equal(sum.error_type, "overloaded_error");
    assert_string_equal(sum.error_message, "the worker went away");
    /* Nothing more is written once it has failed. */
    size_t len = out.len;
    assert_int_equal(api_anthropic_stream_feed(st, in, strlen(in), &out), IPL_E_IO);
    assert_int_equal(api_anthropic_stream_finish(st, &out), IPL_E_IO);
    assert_int_equal(api_anthropic_stream_abort(st, 500, NULL, &out), IPL_E_IO);
    assert_int_equal(out.len, len);
    api_anthropic_stream_destroy(&st);
    api_buf_clear(&out);

    /* Abort before anything came: a lone error event, the default message. */
    st = api_anthropic_stream_new(req);
    assert_int_equal(api_anthropic_stream_abort(st, 500, NULL, &out), IPL_E_IO);
    sum = s_check(out.data);
    assert_string_equal(sum.error_type, "api_error");
    assert_string_equal(sum.error_message, "the worker's stream broke off");
    api_anthropic_stream_destroy(&st);
    api_buf_clear(&out);

    /* Abort after the end changes nothing. */
    st = api_anthropic_stream_new(req);
    char *done = api_test_q(s_text_stream);
    assert_int_equal(api_anthropic_stream_feed(st, done, strlen(done), &out), 0);
    assert_int_equal(api_anthropic_stream_state(st), API_ANTHROPIC_STREAM_DONE);
    len = out.len;
    assert_int_equal(api_anthropic_stream_abort(st, 500, NULL, &out), 0);
    assert_int_equal(out.len, len);
    api_anthropic_stream_destroy(&st);
    api_anthropic_stream_destroy(&st); /* NULL: no-op */
    free(done);
    free(in);
    api_buf_free(&out);
    api_anthropic_request_destroy(&req);
}

/* A failing output buffer fails the stream with its error, never a partial success. */
static void test_output_error(void **state)
{
    (void)state;
    api_anthropic_request_t *req = s_request();
    api_anthropic_stream_t *st = api_anthropic_stream_new(req);
    api_buf_t out = {0};
    out.error = IPL_E_NOMEM; /* as if an earlier append had failed */
    char *in = api_test_q(S_ROLE);
    assert_int_equal(api_anthropic_stream_feed(st, in, strlen(in), &out), IPL_E_NOMEM);
    assert_int_equal(api_anthropic_stream_state(st), API_ANTHROPIC_STREAM_FAILED);
    free(in);
    api_buf_free(&out);
    api_anthropic_stream_destroy(&st);
    api_anthropic_request_destroy(&req);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden_text),  cmocka_unit_test(test_golden_tools),
        cmocka_unit_test(test_cases),        cmocka_unit_test(test_usage_and_preset),
        cmocka_unit_test(test_event_bound),  cmocka_unit_test(test_abort),
        cmocka_unit_test(test_output_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
