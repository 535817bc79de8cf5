/*
 * Unit tests of api_anthropic_response: every row of the OpenAI completion → Anthropic
 * message mapping (content blocks, stop reasons, stop sequences, usage, ids, the client's
 * model name), every way a worker's answer is refused, and the helpers the stream shares.
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
#include "api_anthropic_response.h"
#include "api_test.h"
#include "ipl_error.h"

/* The request every row answers: model "claude-x", stop sequences END and "##". */
static api_anthropic_request_t *s_request(void)
{
    return api_test_request(API_ANTHROPIC_MESSAGES,
                            "{'model':'claude-x','max_tokens':64,'stop_sequences':['END','##'],"
                            "'messages':[{'role':'user','content':'hi'}]}");
}

#define S_USAGE                                                                                    \
    "'usage':{'prompt_tokens':40,'completion_tokens':7,'total_tokens':47,"                         \
    "'prompt_tokens_details':{'cached_tokens':32}}"
#define S_AUSAGE                                                                                   \
    "'usage':{'input_tokens':8,'cache_creation_input_tokens':0,"                                   \
    "'cache_read_input_tokens':32,'output_tokens':7}"
#define S_CHOICE(msg, finish)                                                                      \
    "{'id':'chatcmpl-1','object':'chat.completion','model':'worker-model','choices':[{'index':0,"  \
    "'message':" msg ",'finish_reason':" finish "}]," S_USAGE "}"
#define S_MSG_HEAD "{'id':'msg_chatcmpl-1','type':'message','role':'assistant','model':'claude-x',"

typedef struct {
    const char *name;
    const char *in;  /* the worker's chat completion */
    const char *out; /* the Anthropic message */
} s_row_t;

static const s_row_t s_rows[] = {
    {"text, stop → end_turn; usage in Anthropic's meaning",
     S_CHOICE("{'role':'assistant','content':'Hello!'}", "'stop','stop_reason':null"),
     S_MSG_HEAD "'content':[{'type':'text','text':'Hello!'}],'stop_reason':'end_turn',"
                "'stop_sequence':null," S_AUSAGE "}"},
    {"length → max_tokens", S_CHOICE("{'role':'assistant','content':'Hel'}", "'length'"),
     S_MSG_HEAD "'content':[{'type':'text','text':'Hel'}],'stop_reason':'max_tokens',"
                "'stop_sequence':null," S_AUSAGE "}"},
    {"vLLM's stop_reason names a stop sequence → stop_sequence",
     S_CHOICE("{'role':'assistant','content':'one two'}", "'stop','stop_reason':'##'"),
     S_MSG_HEAD "'content':[{'type':'text','text':'one two'}],'stop_reason':'stop_sequence',"
                "'stop_sequence':'##'," S_AUSAGE "}"},
    {"stop_reason a token id (EOS) → end_turn",
     S_CHOICE("{'role':'assistant','content':'x'}", "'stop','stop_reason':151645"),
     S_MSG_HEAD "'content':[{'type':'text','text':'x'}],'stop_reason':'end_turn',"
                "'stop_sequence':null," S_AUSAGE "}"},
    {"stop_reason a string the client did not ask for → end_turn",
     S_CHOICE("{'role':'assistant','content':'x'}", "'stop','stop_reason':'</s>'"),
     S_MSG_HEAD "'content':[{'type':'text','text':'x'}],'stop_reason':'end_turn',"
                "'stop_sequence':null," S_AUSAGE "}"},
    {"tool_calls → tool_use blocks with parsed input",
     S_CHOICE(
         "{'role':'assistant','content':null,'tool_calls':[{'id':'chatcmpl-tool-9','type':"
         "'function','function':{'name':'get_weather','arguments':'{\\'city\\': \\'Brno\\'}'}},"
         "{'id':'call_2','type':'function','function':{'name':'now','arguments':''}}]}",
         "'tool_calls'"),
     S_MSG_HEAD "'content':[{'type':'tool_use','id':'chatcmpl-tool-9','name':'get_weather','input':"
                "{'city':'Brno'}},{'type':'tool_use','id':'call_2','name':'now','input':{}}],"
                "'stop_reason':'tool_use','stop_sequence':null," S_AUSAGE "}"},
    {"text then tool calls; a named tool_choice's stop is tool_use",
     S_CHOICE("{'role':'assistant','content':'Let me check.','tool_calls':[{'id':'c1','type':"
              "'function','function':{'name':'f','arguments':' {\\'a\\':[1,2]} '}}]}",
              "'stop','stop_reason':null"),
     S_MSG_HEAD
     "'content':[{'type':'text','text':'Let me check.'},{'type':'tool_use','id':'c1',"
     "'name':'f','input':{'a':[1,2]}}],'stop_reason':'tool_use','stop_sequence':null," S_AUSAGE
     "}"},
    {"arguments given as an object (some providers)",
     S_CHOICE("{'role':'assistant','tool_calls':[{'id':'c1','function':{'name':'f','arguments':"
              "{'k':'v'}}}]}",
              "'function_call'"),
     S_MSG_HEAD "'content':[{'type':'tool_use','id':'c1','name':'f','input':{'k':'v'}}],"
                "'stop_reason':'tool_use','stop_sequence':null," S_AUSAGE "}"},
    {"empty content → no block", S_CHOICE("{'role':'assistant','content':''}", "'stop'"),
     S_MSG_HEAD "'content':[],'stop_reason':'end_turn','stop_sequence':null," S_AUSAGE "}"},
    {"content_filter → refusal",
     S_CHOICE("{'role':'assistant','content':'No.'}", "'content_filter'"),
     S_MSG_HEAD "'content':[{'type':'text','text':'No.'}],'stop_reason':'refusal',"
                "'stop_sequence':null," S_AUSAGE "}"},
    {"abort and other finish reasons → end_turn",
     S_CHOICE("{'role':'assistant','content':'x'}", "'abort'"),
     S_MSG_HEAD "'content':[{'type':'text','text':'x'}],'stop_reason':'end_turn',"
                "'stop_sequence':null," S_AUSAGE "}"},
    {"no finish_reason, no usage → end_turn and zeros",
     "{'id':'chatcmpl-1','choices':[{'message':{'content':'x'}}]}",
     S_MSG_HEAD "'content':[{'type':'text','text':'x'}],'stop_reason':'end_turn','stop_sequence':"
                "null,'usage':{'input_tokens':0,'cache_creation_input_tokens':0,"
                "'cache_read_input_tokens':0,'output_tokens':0}}"},
    {"no cached_tokens → all input uncached",
     "{'id':'chatcmpl-1','choices':[{'message':{'content':'x'},'finish_reason':'stop'}],'usage':"
     "{'prompt_tokens':5,'completion_tokens':1,'prompt_tokens_details':null}}",
     S_MSG_HEAD "'content':[{'type':'text','text':'x'}],'stop_reason':'end_turn','stop_sequence':"
                "null,'usage':{'input_tokens':5,'cache_creation_input_tokens':0,"
                "'cache_read_input_tokens':0,'output_tokens':1}}"},
    {"cached above prompt tokens is clamped",
     "{'id':'chatcmpl-1','choices':[{'message':{'content':'x'},'finish_reason':'stop'}],'usage':"
     "{'prompt_tokens':5,'completion_tokens':1,'prompt_tokens_details':{'cached_tokens':16}}}",
     S_MSG_HEAD "'content':[{'type':'text','text':'x'}],'stop_reason':'end_turn','stop_sequence':"
                "null,'usage':{'input_tokens':0,'cache_creation_input_tokens':0,"
                "'cache_read_input_tokens':5,'output_tokens':1}}"},
};

static void test_mapping(void **state)
{
    (void)state;
    api_anthropic_request_t *req = s_request();
    for (size_t i = 0; i < sizeof(s_rows) / sizeof(s_rows[0]); i++) {
        char *in = api_test_q(s_rows[i].in), *want = api_test_q(s_rows[i].out);
        char *out = NULL;
        api_anthropic_usage_t usage = {0};
        api_anthropic_error_t err;
        int rc = api_anthropic_response_translate(req, in, strlen(in), &out, &usage, &err);
        if (rc) fail_msg("row \"%s\": refused: %s", s_rows[i].name, err.message);
        /* Compared as text: the key order is Anthropic's too. */
        cJSON *w = cJSON_Parse(want);
        if (!w) fail_msg("row \"%s\": expected output is not JSON", s_rows[i].name);
        char *wtext = cJSON_PrintUnformatted(w);
        if (strcmp(out, wtext) != 0)
            fail_msg("row \"%s\":\n got  %s\n want %s", s_rows[i].name, out, wtext);
        assert_true(usage.known == (strstr(in, "prompt_tokens") != NULL));
        free(wtext);
        cJSON_Delete(w);
        free(out);
        free(in);
        free(want);
    }
    api_anthropic_request_destroy(&req);
}

static void test_usage_out_and_ids(void **state)
{
    (void)state;
    api_anthropic_request_t *req = s_request();
    char *in = api_test_q(S_CHOICE("{'content':'x','tool_calls':[{'function':{'name':'f',"
                                   "'arguments':'{}'}}]}",
                                   "'tool_calls'"));
    char *out = NULL;
    api_anthropic_usage_t usage = {0};
    api_anthropic_error_t err;
    assert_int_equal(api_anthropic_response_translate(req, in, strlen(in), &out, &usage, &err), 0);
    assert_true(usage.known);
    assert_int_equal(usage.prompt_tokens, 40);
    assert_int_equal(usage.completion_tokens, 7);
    assert_int_equal(usage.cached_tokens, 32);
    /* A tool call without an id gets a generated toolu_ one. */
    cJSON *msg = cJSON_Parse(out);
    cJSON *tool = cJSON_GetArrayItem(cJSON_GetObjectItem(msg, "content"), 1);
    const char *id = cJSON_GetObjectItem(tool, "id")->valuestring;
    assert_int_equal(strncmp(id, "toolu_", 6), 0);
    assert_int_equal(strlen(id), 6 + 24);
    cJSON_Delete(msg);
    free(out);
    free(in);

    /* No upstream id: a generated msg_ id, different each time. */
    in = api_test_q("{'choices':[{'message':{'content':'x'},'finish_reason':'stop'}]}");
    char *a = NULL, *b = NULL;
    assert_int_equal(api_anthropic_response_translate(req, in, strlen(in), &a, NULL, &err), 0);
    assert_int_equal(api_anthropic_response_translate(req, in, strlen(in), &b, NULL, &err), 0);
    cJSON *ja = cJSON_Parse(a), *jb = cJSON_Parse(b);
    const char *ida = cJSON_GetObjectItem(ja, "id")->valuestring;
    const char *idb = cJSON_GetObjectItem(jb, "id")->valuestring;
    assert_int_equal(strncmp(ida, "msg_", 4), 0);
    assert_int_equal(strlen(ida), 4 + 24);
    assert_string_not_equal(ida, idb);
    assert_string_equal(cJSON_GetObjectItem(ja, "model")->valuestring, "claude-x");
    cJSON_Delete(ja);
    cJSON_Delete(jb);
    free(a);
    free(b);
    free(in);
    api_anthropic_request_destroy(&req);
}

typedef struct {
    const char *in;
    int status;
    const char *message;
} s_bad_t;

static const s_bad_t s_bad[] = {
    {"not json", 502, "the worker's answer is not a chat completion: not a JSON object"},
    {"[1]", 502, "the worker's answer is not a chat completion: not a JSON object"},
    {"{'id':'x'}", 502,
     "the worker's answer is not a chat completion: it has no choices.0.message"},
    {"{'choices':[]}", 502,
     "the worker's answer is not a chat completion: it has no choices.0.message"},
    {"{'choices':[{'text':'x'}]}", 502,
     "the worker's answer is not a chat completion: it has no choices.0.message"},
    {"{'choices':[{'message':{'content':5}}]}", 502,
     "the worker's answer is not a chat completion: choices.0.message.content is neither a string "
     "nor null"},
    {"{'choices':[{'message':{'tool_calls':{}}}]}", 502,
     "the worker's answer is not a chat completion: choices.0.message.tool_calls is not an array"},
    {"{'choices':[{'message':{'tool_calls':[{'id':'c','function':{'arguments':'{}'}}]}}]}", 502,
     "the worker's tool call 0 has no function name"},
    {"{'choices':[{'message':{'tool_calls':[{'id':'a','function':{'name':'f','arguments':'{}'}},"
     "{'id':'c','function':{'name':'g','arguments':'{broken'}}]}}]}",
     502, "the worker's tool call 1 (\"g\") has arguments that are not a JSON object"},
    {"{'choices':[{'message':{'tool_calls':[{'id':'c','function':{'name':'g','arguments':'[1]'}}]}}"
     "]}",
     502, "the worker's tool call 0 (\"g\") has arguments that are not a JSON object"},
    {"{'choices':[{'message':{'tool_calls':[{'id':'c','function':{'name':'g','arguments':7}}]}}]}",
     502, "the worker's tool call 0 (\"g\") has arguments that are not a JSON object"},
    /* Error bodies: their message, their code's status. */
    {"{'error':{'message':'context too long','type':'BadRequestError','code':400}}", 400,
     "context too long"},
    {"{'object':'error','message':'The model `x` does not "
     "exist.','type':'NotFoundError','code':404}",
     404, "The model `x` does not exist."},
    {"{'error':{'message':'boom'}}", 502, "boom"},
    {"{'error':'plain text'}", 502, "plain text"},
    {"{'error':{'code':'server_error'}}", 502, "the upstream reported an error without a message"},
};

static void test_refused(void **state)
{
    (void)state;
    api_anthropic_request_t *req = s_request();
    for (size_t i = 0; i < sizeof(s_bad) / sizeof(s_bad[0]); i++) {
        char *in = api_test_q(s_bad[i].in);
        const char *message = s_bad[i].message; /* real quotes: messages hold apostrophes */
        char *out = (char *)1;
        api_anthropic_error_t err = {0};
        int rc = api_anthropic_response_translate(req, in, strlen(in), &out, NULL, &err);
        if (rc != IPL_E_INVAL) fail_msg("accepted: %s", in);
        assert_null(out);
        assert_int_equal(err.status, s_bad[i].status);
        if (strcmp(err.message, message) != 0)
            fail_msg("for %s\n got  %s\n want %s", in, err.message, message);
        free(in);
    }
    char *out = NULL;
    api_anthropic_error_t err;
    assert_int_equal(api_anthropic_response_translate(req, "", 0, &out, NULL, &err), IPL_E_INVAL);
    assert_int_equal(err.status, 502);
    api_anthropic_request_destroy(&req);
}

/* The stop-reason table, every row (the stream uses the same function). */
static void test_stop_reason(void **state)
{
    (void)state;
    const char *stops[] = {"END", "##"};
    const struct {
        const char *finish, *matched;
        bool tool_use;
        const char *reason, *sequence;
    } rows[] = {
        {"stop", NULL, false, "end_turn", NULL},
        {"stop", "END", false, "stop_sequence", "END"},
        {"stop", "##", false, "stop_sequence", "##"},
        {"stop", "EN", false, "end_turn", NULL},
        {"stop", "END", true, "tool_use", NULL},
        {"stop", NULL, true, "tool_use", NULL},
        {"length", "END", false, "max_tokens", NULL},
        {"length", NULL, true, "max_tokens", NULL},
        {"tool_calls", NULL, true, "tool_use", NULL},
        {"tool_calls", NULL, false, "tool_use", NULL},
        {"function_call", NULL, false, "tool_use", NULL},
        {"content_filter", NULL, false, "refusal", NULL},
        {"abort", NULL, false, "end_turn", NULL},
        {"abort", NULL, true, "tool_use", NULL},
        {NULL, NULL, false, "end_turn", NULL},
        {NULL, "END", false, "end_turn", NULL},
        {NULL, NULL, true, "tool_use", NULL},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        const char *seq = (const char *)1;
        const char *reason = api_anthropic_response_stop_reason(rows[i].finish, rows[i].matched,
                                                                rows[i].tool_use, stops, 2, &seq);
        if (strcmp(reason, rows[i].reason) != 0)
            fail_msg("row %zu: got %s, want %s", i, reason, rows[i].reason);
        if (rows[i].sequence) {
            assert_non_null(seq);
            assert_string_equal(seq, rows[i].sequence);
        } else {
            assert_null(seq);
        }
    }
    const char *seq;
    assert_string_equal(api_anthropic_response_stop_reason("stop", "END", false, NULL, 0, &seq),
                        "end_turn");
}

static void test_helpers(void **state)
{
    (void)state;
    api_anthropic_usage_t u = {0};
    api_anthropic_response_read_usage(NULL, &u);
    assert_false(u.known);
    cJSON *j = api_test_json("{'prompt_tokens':-3,'completion_tokens':2.9,'prompt_tokens_details':"
                             "{'cached_tokens':'x'}}");
    api_anthropic_response_read_usage(j, &u);
    assert_true(u.known);
    assert_int_equal(u.prompt_tokens, 0);
    assert_int_equal(u.completion_tokens, 2);
    assert_int_equal(u.cached_tokens, 0);
    cJSON_Delete(j);

    char buf[16];
    assert_string_equal(api_anthropic_response_id(buf, sizeof(buf), "msg_", "abc"), "msg_abc");
    assert_string_equal(api_anthropic_response_id(buf, sizeof(buf), "msg_", "0123456789abcdef"),
                        "msg_0123456789a"); /* cut to fit */
    char big[64];
    api_anthropic_response_id(big, sizeof(big), "toolu_", "");
    assert_int_equal(strlen(big), 6 + 24);

    cJSON *m = api_anthropic_response_message("msg_1", "m");
    char *text = cJSON_PrintUnformatted(m);
    assert_string_equal(text,
                        "{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":"
                        "\"m\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null}");
    free(text);
    cJSON_Delete(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mapping), cmocka_unit_test(test_usage_out_and_ids),
        cmocka_unit_test(test_refused), cmocka_unit_test(test_stop_reason),
        cmocka_unit_test(test_helpers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
