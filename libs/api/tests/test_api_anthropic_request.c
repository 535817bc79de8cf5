/*
 * Unit tests of api_anthropic_request: every row of the Anthropic → OpenAI mapping (the
 * translated body compared with the expected one, and the accessors), every rejection with
 * its exact message, the size bounds, and ownership (the OpenAI body is editable, the
 * accessors keep their own copies).
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
#include "api_buf.h"
#include "api_test.h"
#include "ipl_error.h"

/* A minimal valid request around a messages array (single-quoted JSON). */
#define S_HEAD     "{'model':'m','max_tokens':16,"
#define S_MSGS(m)  S_HEAD "'messages':" m "}"
#define S_USER     "[{'role':'user','content':'hi'}]"
#define S_OUT_HEAD "{'model':'m',"
#define S_OUT_USER "'messages':[{'role':'user','content':'hi'}],'max_tokens':16"

typedef struct {
    const char *name;
    const char *in;  /* the Anthropic body */
    const char *out; /* the OpenAI body it must become */
} s_row_t;

static const s_row_t s_rows[] = {
    {"minimal", S_MSGS(S_USER), S_OUT_HEAD S_OUT_USER "}"},
    {"system string becomes the first message", S_HEAD "'system':'be brief','messages':" S_USER "}",
     S_OUT_HEAD
     "'messages':[{'role':'system','content':'be brief'},{'role':'user','content':'hi'}],"
     "'max_tokens':16}"},
    {"system blocks joined as they are, billing header left out, cache_control ignored",
     S_HEAD
     "'system':[{'type':'text','text':'A. '},{'type':'text','text':'x-anthropic-billing-header: "
     "cc_version=1; cch=abc'},{'type':'text','text':'B.','cache_control':{'type':'ephemeral'}}],"
     "'messages':" S_USER "}",
     S_OUT_HEAD "'messages':[{'role':'system','content':'A. B.'},{'role':'user','content':'hi'}],"
                "'max_tokens':16}"},
    {"empty system adds no message", S_HEAD "'system':'','messages':" S_USER "}",
     S_OUT_HEAD S_OUT_USER "}"},
    {"empty system blocks add no message", S_HEAD "'system':[],'messages':" S_USER "}",
     S_OUT_HEAD S_OUT_USER "}"},
    {"null system is absent", S_HEAD "'system':null,'messages':" S_USER "}",
     S_OUT_HEAD S_OUT_USER "}"},
    {"one text block becomes a string",
     S_MSGS("[{'role':'user','content':[{'type':'text','text':'hi','cache_control':{'type':'"
            "ephemeral'}}]}]"),
     S_OUT_HEAD S_OUT_USER "}"},
    {"several text blocks become text parts (empty ones add nothing)",
     S_MSGS("[{'role':'user','content':[{'type':'text','text':'a'},{'type':'text','text':''},"
            "{'type':'text','text':'b'}]}]"),
     S_OUT_HEAD "'messages':[{'role':'user','content':[{'type':'text','text':'a'},"
                "{'type':'text','text':'b'}]}],'max_tokens':16}"},
    {"a user turn of only empty text keeps its place",
     S_MSGS("[{'role':'user','content':[{'type':'text','text':''}]}]"),
     S_OUT_HEAD "'messages':[{'role':'user','content':''}],'max_tokens':16}"},
    {"consecutive same-role turns stay separate (as vLLM)",
     S_MSGS("[{'role':'user','content':'a'},{'role':'user','content':'b'},"
            "{'role':'assistant','content':'c'},{'role':'assistant','content':[{'type':'text','"
            "text':'d'}]}]"),
     S_OUT_HEAD
     "'messages':[{'role':'user','content':'a'},{'role':'user','content':'b'},"
     "{'role':'assistant','content':'c'},{'role':'assistant','content':'d'}],'max_tokens':16}"},
    {"assistant text and tool_use → content and tool_calls",
     S_MSGS("[{'role':'user','content':'weather?'},{'role':'assistant','content':[{'type':'text',"
            "'text':'Checking.'},{'type':'tool_use','id':'toolu_1','name':'get_weather','input':"
            "{'city':'Brno','days':2}}]}]"),
     S_OUT_HEAD
     "'messages':[{'role':'user','content':'weather?'},{'role':'assistant','content':"
     "'Checking.','tool_calls':[{'id':'toolu_1','type':'function','function':{'name':"
     "'get_weather','arguments':'{\\'city\\':\\'Brno\\',\\'days\\':2}'}}]}],'max_tokens':16}"},
    {"assistant tool_use only → tool_calls without content",
     S_MSGS("[{'role':'user','content':'q'},{'role':'assistant','content':[{'type':'tool_use','id':"
            "'t1','name':'f','input':{}},{'type':'tool_use','id':'t2','name':'g','input':{'x':[1]}}"
            "]}]"),
     S_OUT_HEAD
     "'messages':[{'role':'user','content':'q'},{'role':'assistant','tool_calls':[{'id':"
     "'t1','type':'function','function':{'name':'f','arguments':'{}'}},{'id':'t2','type':"
     "'function','function':{'name':'g','arguments':'{\\'x\\':[1]}'}}]}],'max_tokens':16}"},
    {"an assistant turn of only empty text keeps its place",
     S_MSGS("[{'role':'user','content':'q'},{'role':'assistant','content':[{'type':'text','text':''"
            "}]}]"),
     S_OUT_HEAD "'messages':[{'role':'user','content':'q'},{'role':'assistant','content':''}],"
                "'max_tokens':16}"},
    {"tool_result (string) → a tool message; the user message is left out",
     S_MSGS("[{'role':'user','content':[{'type':'tool_result','tool_use_id':'t1','content':'18 "
            "C'}]}]"),
     S_OUT_HEAD
     "'messages':[{'role':'tool','tool_call_id':'t1','content':'18 C'}],'max_tokens':16}"},
    {"tool_result text blocks joined with a newline; is_error accepted",
     S_MSGS("[{'role':'user','content':[{'type':'tool_result','tool_use_id':'t1','is_error':true,"
            "'content':[{'type':'text','text':'a'},{'type':'text','text':'b'}]}]}]"),
     S_OUT_HEAD
     "'messages':[{'role':'tool','tool_call_id':'t1','content':'a\\nb'}],'max_tokens':16}"},
    {"tool_result without content → empty tool message",
     S_MSGS("[{'role':'user','content':[{'type':'tool_result','tool_use_id':'t1'}]}]"),
     S_OUT_HEAD "'messages':[{'role':'tool','tool_call_id':'t1','content':''}],'max_tokens':16}"},
    {"tool results come before the user message's text (as vLLM orders them)",
     S_MSGS("[{'role':'user','content':[{'type':'text','text':'and?'},{'type':'tool_result',"
            "'tool_use_id':'t1','content':'1'},{'type':'tool_result','tool_use_id':'t2','content':'"
            "2'}]}]"),
     S_OUT_HEAD
     "'messages':[{'role':'tool','tool_call_id':'t1','content':'1'},{'role':'tool',"
     "'tool_call_id':'t2','content':'2'},{'role':'user','content':'and?'}],'max_tokens':16}"},
    {"stop_sequences → stop", S_HEAD "'stop_sequences':['END','\\n\\n'],'messages':" S_USER "}",
     S_OUT_HEAD S_OUT_USER ",'stop':['END','\\n\\n']}"},
    {"empty stop_sequences adds nothing", S_HEAD "'stop_sequences':[],'messages':" S_USER "}",
     S_OUT_HEAD S_OUT_USER "}"},
    {"temperature, top_p, top_k copied",
     S_HEAD "'temperature':0.25,'top_p':0.9,'top_k':40,'messages':" S_USER "}",
     S_OUT_HEAD S_OUT_USER ",'temperature':0.25,'top_p':0.9,'top_k':40}"},
    {"range ends accepted", S_HEAD "'temperature':1,'top_p':0,'top_k':0,'messages':" S_USER "}",
     S_OUT_HEAD S_OUT_USER ",'temperature':1,'top_p':0,'top_k':0}"},
    {"metadata.user_id → user", S_HEAD "'metadata':{'user_id':'u-42'},'messages':" S_USER "}",
     S_OUT_HEAD S_OUT_USER ",'user':'u-42'}"},
    {"metadata without user_id adds nothing",
     S_HEAD "'metadata':{'user_id':null,'other':1},'messages':" S_USER "}",
     S_OUT_HEAD S_OUT_USER "}"},
    {"tools → function tools, tool_choice auto as vLLM; a schema without type is an object",
     S_HEAD
     "'tools':[{'name':'get_weather','description':'Weather of a city','input_schema':{'type':"
     "'object','properties':{'city':{'type':'string'}},'required':['city']}},{'name':'now',"
     "'input_schema':{},'cache_control':{'type':'ephemeral'}}],'messages':" S_USER "}",
     S_OUT_HEAD S_OUT_USER
     ",'tools':[{'type':'function','function':{'name':'get_weather','description':"
     "'Weather of a city','parameters':{'type':'object','properties':{'city':{'type':"
     "'string'}},'required':['city']}}},{'type':'function','function':{'name':'now',"
     "'parameters':{'type':'object'}}}],'tool_choice':'auto'}"},
    {"custom tool type accepted",
     S_HEAD
     "'tools':[{'type':'custom','name':'f','input_schema':{'type':'object'}}],'messages':" S_USER
     "}",
     S_OUT_HEAD S_OUT_USER
     ",'tools':[{'type':'function','function':{'name':'f','parameters':{'type':"
     "'object'}}}],'tool_choice':'auto'}"},
    {"empty tools adds nothing", S_HEAD "'tools':[],'messages':" S_USER "}",
     S_OUT_HEAD S_OUT_USER "}"},
    {"tool_choice any → required",
     S_HEAD "'tools':[{'name':'f','input_schema':{'type':'object'}}],'tool_choice':{'type':'any'},"
            "'messages':" S_USER "}",
     S_OUT_HEAD S_OUT_USER
     ",'tools':[{'type':'function','function':{'name':'f','parameters':{'type':"
     "'object'}}}],'tool_choice':'required'}"},
    {"tool_choice tool → the named function",
     S_HEAD "'tools':[{'name':'f','input_schema':{'type':'object'}}],'tool_choice':{'type':'tool',"
            "'name':'f'},'messages':" S_USER "}",
     S_OUT_HEAD S_OUT_USER
     ",'tools':[{'type':'function','function':{'name':'f','parameters':{'type':"
     "'object'}}}],'tool_choice':{'type':'function','function':{'name':'f'}}}"},
    {"tool_choice none → none",
     S_HEAD "'tools':[{'name':'f','input_schema':{'type':'object'}}],'tool_choice':{'type':'none'},"
            "'messages':" S_USER "}",
     S_OUT_HEAD S_OUT_USER
     ",'tools':[{'type':'function','function':{'name':'f','parameters':{'type':"
     "'object'}}}],'tool_choice':'none'}"},
    {"disable_parallel_tool_use → parallel_tool_calls false",
     S_HEAD "'tools':[{'name':'f','input_schema':{'type':'object'}}],'tool_choice':{'type':'auto',"
            "'disable_parallel_tool_use':true},'messages':" S_USER "}",
     S_OUT_HEAD S_OUT_USER
     ",'tools':[{'type':'function','function':{'name':'f','parameters':{'type':"
     "'object'}}}],'tool_choice':'auto','parallel_tool_calls':false}"},
    {"disable_parallel_tool_use false adds nothing",
     S_HEAD "'tools':[{'name':'f','input_schema':{'type':'object'}}],'tool_choice':{'type':'any',"
            "'disable_parallel_tool_use':false},'messages':" S_USER "}",
     S_OUT_HEAD S_OUT_USER
     ",'tools':[{'type':'function','function':{'name':'f','parameters':{'type':"
     "'object'}}}],'tool_choice':'required'}"},
    {"tool_choice auto or none without tools is left out",
     S_HEAD "'tool_choice':{'type':'none'},'messages':" S_USER "}", S_OUT_HEAD S_OUT_USER "}"},
    {"stream → stream and include_usage", S_HEAD "'stream':true,'messages':" S_USER "}",
     S_OUT_HEAD S_OUT_USER ",'stream':true,'stream_options':{'include_usage':true}}"},
    {"stream false adds nothing", S_HEAD "'stream':false,'messages':" S_USER "}",
     S_OUT_HEAD S_OUT_USER "}"},
    {"thinking disabled accepted", S_HEAD "'thinking':{'type':'disabled'},'messages':" S_USER "}",
     S_OUT_HEAD S_OUT_USER "}"},
    {"unknown fields and null optional fields are ignored",
     S_HEAD "'service_tier':'auto','anthropic_version':'x','temperature':null,'top_k':null,"
            "'metadata':null,'tools':null,'tool_choice':null,'stream':null,'stop_sequences':null,"
            "'mcp_servers':null,'messages':" S_USER "}",
     S_OUT_HEAD S_OUT_USER "}"},
};

static void test_mapping(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(s_rows) / sizeof(s_rows[0]); i++) {
        const s_row_t *row = &s_rows[i];
        char *in = api_test_q(row->in);
        cJSON *want = api_test_json(row->out);
        if (!want) fail_msg("row \"%s\": the expected body is not JSON", row->name);
        api_anthropic_request_t *req = NULL;
        api_anthropic_error_t err = {0};
        int rc = api_anthropic_request_parse(API_ANTHROPIC_MESSAGES, in, strlen(in), &req, &err);
        if (rc != 0) fail_msg("row \"%s\": refused: %s", row->name, err.message);
        cJSON *got = api_anthropic_request_openai(req);
        if (!cJSON_Compare(got, want, 1)) {
            char *g = cJSON_PrintUnformatted(got), *w = cJSON_PrintUnformatted(want);
            print_error("row \"%s\":\n got  %s\n want %s\n", row->name, g, w);
            free(g);
            free(w);
            fail();
        }
        cJSON_Delete(want);
        free(in);
        api_anthropic_request_destroy(&req);
        assert_null(req);
    }
}

/* Key order of the OpenAI body, as a worker's log shows it. */
static void test_serialised_order(void **state)
{
    (void)state;
    api_anthropic_request_t *req = api_test_request(
        API_ANTHROPIC_MESSAGES, "{'stream':true,'tool_choice':{'type':'any'},'tools':[{'name':'f',"
                                "'input_schema':{'type':'object'}}],'metadata':{'user_id':'u'},"
                                "'top_k':5,'top_p':0.5,'temperature':0.5,'stop_sequences':['S'],"
                                "'messages':[{'role':'user','content':'hi'}],'system':'sys',"
                                "'max_tokens':9,'model':'m'}");
    char *json = api_anthropic_request_openai_json(req);
    char *want = api_test_q(
        "{'model':'m','messages':[{'role':'system','content':'sys'},{'role':'user','content':'hi'}]"
        ","
        "'max_tokens':9,'stop':['S'],'temperature':0.5,'top_p':0.5,'top_k':5,'user':'u','tools':"
        "[{'type':'function','function':{'name':'f','parameters':{'type':'object'}}}],"
        "'tool_choice':'required','stream':true,'stream_options':{'include_usage':true}}");
    assert_string_equal(json, want);
    free(json);
    free(want);
    api_anthropic_request_destroy(&req);
}

static void test_accessors(void **state)
{
    (void)state;
    api_anthropic_request_t *req = api_test_request(
        API_ANTHROPIC_MESSAGES,
        "{'model':'qwen','max_tokens':300,'stream':true,'stop_sequences':['a','bc'],"
        "'tools':[{'name':'f','input_schema':{}}],'messages':[{'role':'user',"
        "'content':'hi'}]}");
    assert_int_equal(api_anthropic_request_kind(req), API_ANTHROPIC_MESSAGES);
    assert_string_equal(api_anthropic_request_model(req), "qwen");
    assert_true(api_anthropic_request_stream(req));
    assert_int_equal(api_anthropic_request_max_tokens(req), 300);
    assert_true(api_anthropic_request_has_tools(req));
    size_t n = 0;
    const char *const *stops = api_anthropic_request_stops(req, &n);
    assert_int_equal(n, 2);
    assert_string_equal(stops[0], "a");
    assert_string_equal(stops[1], "bc");
    /* The caller may point the body at a provider's remote name; the asked-for model stays. */
    cJSON *body = api_anthropic_request_openai(req);
    cJSON_ReplaceItemInObjectCaseSensitive(body, "model", cJSON_CreateString("vendor/remote"));
    assert_string_equal(api_anthropic_request_model(req), "qwen");
    char *json = api_anthropic_request_openai_json(req);
    assert_non_null(strstr(json, "\"model\":\"vendor/remote\""));
    free(json);
    api_anthropic_request_destroy(&req);

    req =
        api_test_request(API_ANTHROPIC_MESSAGES,
                         "{'model':'m','max_tokens':1,'messages':[{'role':'user','content':'x'}]}");
    assert_false(api_anthropic_request_stream(req));
    assert_false(api_anthropic_request_has_tools(req));
    assert_null(api_anthropic_request_stops(req, &n));
    assert_int_equal(n, 0);
    api_anthropic_request_destroy(&req);
    api_anthropic_request_destroy(&req); /* destroying NULL is a no-op */
}

/* count_tokens: no max_tokens needed (nor sent), stream ignored, the rest translated. */
static void test_count_tokens_kind(void **state)
{
    (void)state;
    api_anthropic_request_t *req = api_test_request(
        API_ANTHROPIC_COUNT_TOKENS,
        "{'model':'m','stream':true,'system':'s','tools':[{'name':'f','input_schema':"
        "{}}],'messages':[{'role':'user','content':'hi'}]}");
    assert_int_equal(api_anthropic_request_kind(req), API_ANTHROPIC_COUNT_TOKENS);
    assert_false(api_anthropic_request_stream(req));
    assert_int_equal(api_anthropic_request_max_tokens(req), 0);
    cJSON *want =
        api_test_json("{'model':'m','messages':[{'role':'system','content':'s'},{'role':"
                      "'user','content':'hi'}],'tools':[{'type':'function','function':"
                      "{'name':'f','parameters':{'type':'object'}}}],'tool_choice':'auto'}");
    assert_true(cJSON_Compare(api_anthropic_request_openai(req), want, 1));
    cJSON_Delete(want);
    api_anthropic_request_destroy(&req);
    /* The same body on /v1/messages needs max_tokens. */
    api_anthropic_error_t err;
    char *in = api_test_q("{'model':'m','messages':[{'role':'user','content':'hi'}]}");
    assert_int_equal(
        api_anthropic_request_parse(API_ANTHROPIC_MESSAGES, in, strlen(in), &req, &err),
        IPL_E_INVAL);
    assert_null(req);
    free(in);
}

typedef struct {
    const char *in;      /* the body (single-quoted) */
    const char *message; /* the exact message (single quotes here are real double quotes) */
} s_bad_t;

#define S_M0(blocks) S_MSGS("[{'role':'user','content':" blocks "}]")
#define S_A1(blocks)                                                                               \
    S_MSGS("[{'role':'user','content':'q'},{'role':'assistant','content':" blocks "}]")
#define S_TOOL_F "'tools':[{'name':'f','input_schema':{'type':'object'}}],"

static const s_bad_t s_bad[] = {
    {"[]", "the request body must be a JSON object, got an array"},
    {"'text'", "the request body must be a JSON object, got a string"},
    {"{'max_tokens':1,'messages':" S_USER "}", "model: field required (a string)"},
    {"{'model':'','max_tokens':1,'messages':" S_USER "}", "model: must not be empty"},
    {"{'model':7,'max_tokens':1,'messages':" S_USER "}", "model: must be a string, got a number"},
    {"{'model':'m','messages':" S_USER "}",
     "max_tokens: field required (a positive whole number, e.g. 'max_tokens': 1024)"},
    {"{'model':'m','max_tokens':0,'messages':" S_USER "}",
     "max_tokens: must be a positive whole number up to 1000000000, got a number out of range or "
     "with a fraction"},
    {"{'model':'m','max_tokens':1.5,'messages':" S_USER "}",
     "max_tokens: must be a positive whole number up to 1000000000, got a number out of range or "
     "with a fraction"},
    {"{'model':'m','max_tokens':2e9,'messages':" S_USER "}",
     "max_tokens: must be a positive whole number up to 1000000000, got a number out of range or "
     "with a fraction"},
    {"{'model':'m','max_tokens':'16','messages':" S_USER "}",
     "max_tokens: must be a positive whole number up to 1000000000, got a string"},
    {S_HEAD "'x':1}", "messages: field required (an array of messages), got nothing"},
    {S_HEAD "'messages':{}}", "messages: field required (an array of messages), got an object"},
    {S_MSGS("[]"), "messages: must contain at least one message"},
    {S_MSGS("['hi']"), "messages.0: must be a message object, got a string"},
    {S_MSGS("[{'content':'hi'}]"), "messages.0.role: field required ('user' or 'assistant')"},
    {S_MSGS("[{'role':'system','content':'hi'}]"),
     "messages.0.role: 'system' is not a message role; put the system prompt in the top-level "
     "'system' field"},
    {S_MSGS("[{'role':'user','content':'a'},{'role':'tool','content':'hi'}]"),
     "messages.1.role: must be 'user' or 'assistant', got 'tool'"},
    {S_MSGS("[{'role':'user'}]"),
     "messages.0.content: must be a string or an array of content blocks, got nothing"},
    {S_M0("5"), "messages.0.content: must be a string or an array of content blocks, got a number"},
    {S_M0("[]"), "messages.0.content: must not be an empty array"},
    {S_M0("['hi']"), "messages.0.content.0: must be a content block object, got a string"},
    {S_M0("[{'text':'hi'}]"),
     "messages.0.content.0.type: field required (a string such as 'text')"},
    {S_M0("[{'type':'text'}]"), "messages.0.content.0.text: must be a string, got nothing"},
    {S_M0("[{'type':'text','text':1}]"),
     "messages.0.content.0.text: must be a string, got a number"},
    {S_MSGS("[{'role':'user','content':'a'},{'role':'assistant','content':'b'},{'role':'user',"
            "'content':[{'type':'image','source':{'type':'base64','media_type':'image/"
            "png','data':'AA=='}}]}]"),
     "messages.2.content.0.type: 'image' is not supported by this text model"},
    {S_M0("[{'type':'text','text':'see'},{'type':'document','source':{}}]"),
     "messages.0.content.1.type: 'document' is not supported by this text model"},
    {S_M0("[{'type':'search_result','source':'s','title':'t','content':[]}]"),
     "messages.0.content.0.type: 'search_result' is not supported by this text model"},
    {S_M0("[{'type':'container_upload','file_id':'f'}]"),
     "messages.0.content.0.type: 'container_upload' is not supported by this text model"},
    {S_A1("[{'type':'thinking','thinking':'hmm','signature':'s'}]"),
     "messages.1.content.0.type: 'thinking' is not supported on this text path (extended thinking "
     "is off here; send the conversation without thinking blocks)"},
    {S_A1("[{'type':'redacted_thinking','data':'x'}]"),
     "messages.1.content.0.type: 'redacted_thinking' is not supported on this text path (extended "
     "thinking is off here; send the conversation without thinking blocks)"},
    {S_A1("[{'type':'server_tool_use','id':'s','name':'web_search','input':{}}]"),
     "messages.1.content.0.type: 'server_tool_use' is not supported: this gateway runs no server "
     "tools"},
    {S_M0("[{'type':'web_search_tool_result','tool_use_id':'s','content':[]}]"),
     "messages.0.content.0.type: 'web_search_tool_result' is not supported: this gateway runs no "
     "server tools"},
    {S_M0("[{'type':'web_fetch_tool_result','tool_use_id':'s','content':{}}]"),
     "messages.0.content.0.type: 'web_fetch_tool_result' is not supported: this gateway runs no "
     "server tools"},
    {S_M0("[{'type':'code_execution_tool_result','tool_use_id':'s','content':{}}]"),
     "messages.0.content.0.type: 'code_execution_tool_result' is not supported: this gateway runs "
     "no server tools"},
    {S_A1("[{'type':'mcp_tool_use','id':'m','name':'n','server_name':'s','input':{}}]"),
     "messages.1.content.0.type: 'mcp_tool_use' is not supported: this gateway connects to no MCP "
     "servers"},
    {S_M0("[{'type':'mcp_tool_result','tool_use_id':'m','content':'x'}]"),
     "messages.0.content.0.type: 'mcp_tool_result' is not supported: this gateway connects to no "
     "MCP servers"},
    {S_M0("[{'type':'audio'}]"),
     "messages.0.content.0.type: unknown content block type 'audio' (this gateway takes text, "
     "tool_use and tool_result)"},
    {S_M0("[{'type':'tool_use','id':'t','name':'f','input':{}}]"),
     "messages.0.content.0.type: 'tool_use' blocks belong in assistant messages"},
    {S_A1("[{'type':'tool_result','tool_use_id':'t','content':'x'}]"),
     "messages.1.content.0.type: 'tool_result' blocks belong in user messages"},
    {S_A1("[{'type':'tool_use','name':'f','input':{}}]"),
     "messages.1.content.0.id: field required (a string)"},
    {S_A1("[{'type':'tool_use','id':'','name':'f','input':{}}]"),
     "messages.1.content.0.id: must not be empty"},
    {S_A1("[{'type':'tool_use','id':'t','input':{}}]"),
     "messages.1.content.0.name: field required (a string)"},
    {S_A1("[{'type':'tool_use','id':'t','name':'f'}]"),
     "messages.1.content.0.input: must be an object (the tool arguments), got nothing"},
    {S_A1("[{'type':'tool_use','id':'t','name':'f','input':'{}'}]"),
     "messages.1.content.0.input: must be an object (the tool arguments), got a string"},
    {S_M0("[{'type':'tool_result','content':'x'}]"),
     "messages.0.content.0.tool_use_id: field required (a string)"},
    {S_M0("[{'type':'tool_result','tool_use_id':'t','content':3}]"),
     "messages.0.content.0.content: must be a string or an array of text blocks, got a number"},
    {S_M0("[{'type':'tool_result','tool_use_id':'t','is_error':'yes'}]"),
     "messages.0.content.0.is_error: must be a boolean, got a string"},
    {S_M0("[{'type':'tool_result','tool_use_id':'t','content':[{'type':'image','source':{}}]}]"),
     "messages.0.content.0.content.0.type: 'image' is not supported by this text model"},
    {S_M0("[{'type':'tool_result','tool_use_id':'t','content':[{'type':'text','text':'a'},"
          "{'type':'tool_use','id':'x','name':'f','input':{}}]}]"),
     "messages.0.content.0.content.1.type: 'tool_use' cannot be part of a tool_result (text "
     "blocks only)"},
    {S_M0("[{'type':'tool_result','tool_use_id':'t','content':['a']}]"),
     "messages.0.content.0.content.0: must be a content block object, got a string"},
    {S_M0("[{'type':'tool_result','tool_use_id':'t','content':[{'text':'a'}]}]"),
     "messages.0.content.0.content.0.type: field required (a string such as 'text')"},
    {S_M0("[{'type':'tool_result','tool_use_id':'t','content':[{'type':'text','text':null}]}]"),
     "messages.0.content.0.content.0.text: must be a string, got null"},
    {S_HEAD "'system':3,'messages':" S_USER "}",
     "system: must be a string or an array of text blocks, got a number"},
    {S_HEAD "'system':['a'],'messages':" S_USER "}",
     "system.0: must be a text block object, got a string"},
    {S_HEAD "'system':[{'text':'a'}],'messages':" S_USER "}",
     "system.0.type: field required ('text')"},
    {S_HEAD "'system':[{'type':'text','text':'a'},{'type':'image','source':{}}],'messages':" S_USER
            "}",
     "system.1.type: 'image' is not allowed in system (text blocks only)"},
    {S_HEAD "'system':[{'type':'text'}],'messages':" S_USER "}",
     "system.0.text: must be a string, got nothing"},
    {S_HEAD "'stop_sequences':'END','messages':" S_USER "}",
     "stop_sequences: must be an array of strings, got a string"},
    {S_HEAD "'stop_sequences':['a',1],'messages':" S_USER "}",
     "stop_sequences.1: must be a string, got a number"},
    {S_HEAD "'stop_sequences':[''],'messages':" S_USER "}", "stop_sequences.0: must not be empty"},
    {S_HEAD "'temperature':1.5,'messages':" S_USER "}",
     "temperature: must be a number from 0 to 1, got 1.5"},
    {S_HEAD "'temperature':'hot','messages':" S_USER "}",
     "temperature: must be a number, got a string"},
    {S_HEAD "'top_p':-0.1,'messages':" S_USER "}", "top_p: must be a number from 0 to 1, got -0.1"},
    {S_HEAD "'top_k':1.5,'messages':" S_USER "}",
     "top_k: must be a whole number from 0 to 1000000000, got 1.5"},
    {S_HEAD "'top_k':-1,'messages':" S_USER "}",
     "top_k: must be a whole number from 0 to 1000000000, got -1"},
    {S_HEAD "'metadata':'u','messages':" S_USER "}", "metadata: must be an object, got a string"},
    {S_HEAD "'metadata':{'user_id':5},'messages':" S_USER "}",
     "metadata.user_id: must be a string, got a number"},
    {S_HEAD "'tools':{},'messages':" S_USER "}", "tools: must be an array of tools, got an object"},
    {S_HEAD "'tools':['f'],'messages':" S_USER "}", "tools.0: must be a tool object, got a string"},
    {S_HEAD "'tools':[{'type':'web_search_20250305','name':'web_search'}],'messages':" S_USER "}",
     "tools.0.type: 'web_search_20250305' is a server tool, which this gateway does not run; only "
     "client tools (name, description, input_schema) are supported"},
    {S_HEAD "'tools':[{'input_schema':{}}],'messages':" S_USER "}",
     "tools.0.name: field required (a string)"},
    {S_HEAD "'tools':[{'name':'f','description':2,'input_schema':{}}],'messages':" S_USER "}",
     "tools.0.description: must be a string, got a number"},
    {S_HEAD "'tools':[{'name':'f'}],'messages':" S_USER "}",
     "tools.0.input_schema: field required (a JSON Schema object), got nothing"},
    {S_HEAD
     "'tools':[{'name':'f','input_schema':{}},{'name':'f','input_schema':{}}],'messages':" S_USER
     "}",
     "tools.1.name: 'f' is given twice; tool names must be unique"},
    {S_HEAD "'tool_choice':'auto','messages':" S_USER "}",
     "tool_choice: must be an object such as {'type': 'auto'}, got a string"},
    {S_HEAD S_TOOL_F "'tool_choice':{},'messages':" S_USER "}",
     "tool_choice.type: field required (a string)"},
    {S_HEAD S_TOOL_F "'tool_choice':{'type':'some'},'messages':" S_USER "}",
     "tool_choice.type: must be 'auto', 'any', 'tool' or 'none', got 'some'"},
    {S_HEAD "'tool_choice':{'type':'any'},'messages':" S_USER "}",
     "tool_choice.type: 'any' needs at least one tool in 'tools'"},
    {S_HEAD "'tool_choice':{'type':'tool','name':'f'},'messages':" S_USER "}",
     "tool_choice.type: 'tool' needs at least one tool in 'tools'"},
    {S_HEAD S_TOOL_F "'tool_choice':{'type':'tool'},'messages':" S_USER "}",
     "tool_choice.name: field required (a string)"},
    {S_HEAD S_TOOL_F "'tool_choice':{'type':'tool','name':'g'},'messages':" S_USER "}",
     "tool_choice.name: 'g' is not one of the tools (e.g. 'f')"},
    {S_HEAD S_TOOL_F
     "'tool_choice':{'type':'auto','disable_parallel_tool_use':1},'messages':" S_USER "}",
     "tool_choice.disable_parallel_tool_use: must be a boolean, got a number"},
    {S_HEAD "'stream':'yes','messages':" S_USER "}", "stream: must be a boolean, got a string"},
    {S_HEAD "'thinking':{'type':'enabled','budget_tokens':1024},'messages':" S_USER "}",
     "thinking.type: 'enabled': extended thinking is not supported by this text model; leave "
     "'thinking' out or set {'type': 'disabled'}"},
    {S_HEAD "'thinking':'on','messages':" S_USER "}",
     "thinking: must be an object such as {'type': 'disabled'}, got a string"},
    {S_HEAD "'mcp_servers':[{'type':'url','url':'https://x','name':'x'}],'messages':" S_USER "}",
     "mcp_servers: MCP servers are not supported by this gateway; leave it out"},
    {S_HEAD "'container':'c1','messages':" S_USER "}",
     "container: code-execution containers are not supported by this gateway; leave it out"},
    {S_HEAD "'output_format':{'type':'json_schema','schema':{}},'messages':" S_USER "}",
     "output_format: structured output formats are not supported by this gateway; leave it out"},
    {S_HEAD "'output_config':{'effort':'low'},'messages':" S_USER "}",
     "output_config: output_config (effort, structured output) is not supported by this gateway; "
     "leave it out"},
};

static void s_expect_refused(api_anthropic_kind_t kind, const char *body, size_t len,
                             const char *message)
{
    api_anthropic_request_t *req = (api_anthropic_request_t *)1;
    api_anthropic_error_t err = {0};
    int rc = api_anthropic_request_parse(kind, body, len, &req, &err);
    if (rc != IPL_E_INVAL) fail_msg("accepted (rc %d): %.200s", rc, body);
    assert_null(req);
    assert_int_equal(err.status, 400);
    if (message && strcmp(err.message, message) != 0)
        fail_msg("for %.300s\n got  %s\n want %s", body, err.message, message);
}

static void test_rejections(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(s_bad) / sizeof(s_bad[0]); i++) {
        char *in = api_test_q(s_bad[i].in), *message = api_test_q(s_bad[i].message);
        s_expect_refused(API_ANTHROPIC_MESSAGES, in, strlen(in), message);
        free(in);
        free(message);
    }
}

static void test_not_json(void **state)
{
    (void)state;
    s_expect_refused(API_ANTHROPIC_MESSAGES, "", 0,
                     "the request body is empty; send a JSON object");
    s_expect_refused(API_ANTHROPIC_MESSAGES, NULL, 0,
                     "the request body is empty; send a JSON object");
    s_expect_refused(API_ANTHROPIC_MESSAGES, "{\"model\":", 9,
                     "the request body is not valid JSON (error near byte 8)");
    s_expect_refused(API_ANTHROPIC_MESSAGES, "{} {}", 5,
                     "the request body is not valid JSON (error near byte 3)");
    /* The length is the body's, not the C string's: bytes past it are not read. */
    const char *body = "{\"model\":\"m\",\"max_tokens\":1,\"messages\":[{\"role\":\"user\","
                       "\"content\":\"hi\"}]}GARBAGE";
    api_anthropic_request_t *req = NULL;
    api_anthropic_error_t err;
    assert_int_equal(api_anthropic_request_parse(API_ANTHROPIC_MESSAGES, body,
                                                 strlen(body) - strlen("GARBAGE"), &req, &err),
                     0);
    api_anthropic_request_destroy(&req);
    s_expect_refused(API_ANTHROPIC_MESSAGES, body, strlen(body), NULL);
}

/* A body with `n` copies of `item` (a JSON value) joined with commas at `at` ("%s" once). */
static char *s_repeat(const char *fmt, const char *item, size_t n)
{
    api_buf_t list = {0};
    for (size_t i = 0; i < n; i++) {
        if (i) api_buf_puts(&list, ",");
        api_buf_puts(&list, item);
    }
    api_buf_t out = {0};
    api_buf_printf(&out, fmt, list.data ? list.data : "");
    api_buf_free(&list);
    return api_buf_take(&out);
}

static void s_bound(const char *fmt, const char *item, const char *message)
{
    /* At the bound: accepted. One more: refused with the message. */
    char *ok = s_repeat(fmt, item, API_ANTHROPIC_MAX_ITEMS);
    api_anthropic_request_t *req = NULL;
    api_anthropic_error_t err;
    if (api_anthropic_request_parse(API_ANTHROPIC_MESSAGES, ok, strlen(ok), &req, &err) != 0)
        fail_msg("refused at the bound: %s", err.message);
    api_anthropic_request_destroy(&req);
    free(ok);
    char *over = s_repeat(fmt, item, API_ANTHROPIC_MAX_ITEMS + 1);
    s_expect_refused(API_ANTHROPIC_MESSAGES, over, strlen(over), message);
    free(over);
}

static void test_bounds(void **state)
{
    (void)state;
    s_bound("{\"model\":\"m\",\"max_tokens\":1,\"messages\":[%s]}",
            "{\"role\":\"user\",\"content\":\"x\"}", "messages: at most 10000 messages, got 10001");
    s_bound(
        "{\"model\":\"m\",\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":[%s]}]}",
        "{\"type\":\"text\",\"text\":\"x\"}",
        "messages.0.content: at most 10000 blocks, got 10001");
    s_bound("{\"model\":\"m\",\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":[{"
            "\"type\":\"tool_result\",\"tool_use_id\":\"t\",\"content\":[%s]}]}]}",
            "{\"type\":\"text\",\"text\":\"x\"}",
            "messages.0.content.0.content: at most 10000 blocks, got 10001");
    s_bound("{\"model\":\"m\",\"max_tokens\":1,\"system\":[%s],\"messages\":[{\"role\":\"user\","
            "\"content\":\"x\"}]}",
            "{\"type\":\"text\",\"text\":\"x\"}", "system: at most 10000 blocks, got 10001");

    /* tools: unique names, so built here. */
    for (int extra = 0; extra <= 1; extra++) {
        api_buf_t b = {0};
        api_buf_puts(&b, "{\"model\":\"m\",\"max_tokens\":1,\"messages\":[{\"role\":\"user\","
                         "\"content\":\"x\"}],\"tools\":[");
        for (int i = 0; i < API_ANTHROPIC_MAX_ITEMS + extra; i++)
            api_buf_printf(&b, "%s{\"name\":\"t%d\",\"input_schema\":{}}", i ? "," : "", i);
        api_buf_puts(&b, "]}");
        api_anthropic_request_t *req = NULL;
        api_anthropic_error_t err;
        int rc = api_anthropic_request_parse(API_ANTHROPIC_MESSAGES, b.data, b.len, &req, &err);
        if (extra) {
            assert_int_equal(rc, IPL_E_INVAL);
            assert_string_equal(err.message, "tools: at most 10000, got 10001");
        } else {
            assert_int_equal(rc, 0);
        }
        api_anthropic_request_destroy(&req);
        api_buf_free(&b);
    }

    char *stops = s_repeat("{\"model\":\"m\",\"max_tokens\":1,\"stop_sequences\":[%s],\"messages\":"
                           "[{\"role\":\"user\",\"content\":\"x\"}]}",
                           "\"s\"", API_ANTHROPIC_MAX_STOP + 1);
    s_expect_refused(API_ANTHROPIC_MESSAGES, stops, strlen(stops),
                     "stop_sequences: at most 256, got 257");
    free(stops);

    /* Names and ids: a 129-byte tool name and a 257-byte user_id are refused. */
    char name[API_ANTHROPIC_MAX_TOOL_NAME + 2];
    memset(name, 'n', sizeof(name) - 1);
    name[sizeof(name) - 1] = '\0';
    api_buf_t b = {0};
    api_buf_printf(&b,
                   "{\"model\":\"m\",\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":"
                   "\"x\"}],\"tools\":[{\"name\":\"%s\",\"input_schema\":{}}]}",
                   name);
    s_expect_refused(API_ANTHROPIC_MESSAGES, b.data, b.len,
                     "tools.0.name: at most 128 bytes, got 129");
    api_buf_clear(&b);
    char user[258];
    memset(user, 'u', sizeof(user) - 1);
    user[sizeof(user) - 1] = '\0';
    api_buf_printf(&b,
                   "{\"model\":\"m\",\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":"
                   "\"x\"}],\"metadata\":{\"user_id\":\"%s\"}}",
                   user);
    s_expect_refused(API_ANTHROPIC_MESSAGES, b.data, b.len,
                     "metadata.user_id: at most 256 bytes, got 257");
    api_buf_free(&b);

    /* Nesting deeper than cJSON's limit is refused as JSON, not a crash. */
    api_buf_t deep = {0};
    api_buf_puts(&deep, "{\"model\":\"m\",\"max_tokens\":1,\"metadata\":");
    for (int i = 0; i < 2000; i++)
        api_buf_puts(&deep, "[");
    for (int i = 0; i < 2000; i++)
        api_buf_puts(&deep, "]");
    api_buf_puts(&deep, "}");
    s_expect_refused(API_ANTHROPIC_MESSAGES, deep.data, deep.len, NULL);
    api_buf_free(&deep);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mapping),    cmocka_unit_test(test_serialised_order),
        cmocka_unit_test(test_accessors),  cmocka_unit_test(test_count_tokens_kind),
        cmocka_unit_test(test_rejections), cmocka_unit_test(test_not_json),
        cmocka_unit_test(test_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
