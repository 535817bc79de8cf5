/*
 * Unit tests of api_anthropic_count: a /v1/messages request and the equivalent
 * /v1/chat/completions request render the same prompt text (ipl_chat_render, as the gateway
 * renders chat requests), with a system prompt, several turns, text blocks, tool calls and
 * tool results; the text is the expected ChatML; count_tokens and messages bodies agree; the
 * count_tokens answer's shape.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "api_anthropic_count.h"
#include "api_anthropic_request.h"
#include "api_test.h"
#include "ipl_chat.h"
#include "ipl_prompt.h"

static ipl_prompt_t *s_prompt; /* the built-in model: ChatML, as ipl_chat_render */

typedef struct {
    const char *name;
    const char *anthropic; /* a /v1/messages body */
    const char *openai;    /* the equivalent chat request's "messages" */
} s_pair_t;

static const s_pair_t s_pairs[] = {
    {"one user turn", "{'model':'m','max_tokens':8,'messages':[{'role':'user','content':'hi'}]}",
     "[{'role':'user','content':'hi'}]"},
    {"system and several turns",
     "{'model':'m','max_tokens':8,'system':'You are terse.','messages':[{'role':'user','content':"
     "'a'},{'role':'assistant','content':'b'},{'role':'user','content':[{'type':'text','text':'c'},"
     "{'type':'text','text':'d'}]}]}",
     "[{'role':'system','content':'You are terse.'},{'role':'user','content':'a'},{'role':"
     "'assistant','content':'b'},{'role':'user','content':[{'type':'text','text':'c'},{'type':"
     "'text','text':'d'}]}]"},
    {"system as blocks",
     "{'model':'m','max_tokens':8,'system':[{'type':'text','text':'Be '},{'type':'text','text':"
     "'kind.','cache_control':{'type':'ephemeral'}}],'messages':[{'role':'user','content':'x'}]}",
     "[{'role':'system','content':'Be kind.'},{'role':'user','content':'x'}]"},
    {"a tool round trip",
     "{'model':'m','max_tokens':8,'tools':[{'name':'w','input_schema':{}}],'messages':[{'role':"
     "'user','content':'weather?'},{'role':'assistant','content':[{'type':'text','text':'Checking.'"
     "},"
     "{'type':'tool_use','id':'t1','name':'w','input':{'c':'Brno'}}]},{'role':'user','content':"
     "[{'type':'tool_result','tool_use_id':'t1','content':'18 "
     "C'},{'type':'text','text':'thanks'}]}]}",
     "[{'role':'user','content':'weather?'},{'role':'assistant','content':'Checking.','tool_calls':"
     "[{'id':'t1','type':'function','function':{'name':'w','arguments':'{}'}}]},{'role':'tool',"
     "'tool_call_id':'t1','content':'18 C'},{'role':'user','content':'thanks'}]"},
    {"consecutive same-role turns",
     "{'model':'m','max_tokens':8,'messages':[{'role':'user','content':'a'},{'role':'user',"
     "'content':'b'}]}",
     "[{'role':'user','content':'a'},{'role':'user','content':'b'}]"},
};

static void test_same_prompt_as_chat(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(s_pairs) / sizeof(s_pairs[0]); i++) {
        api_anthropic_request_t *req =
            api_test_request(API_ANTHROPIC_MESSAGES, s_pairs[i].anthropic);
        char why[128] = "";
        char *ours = api_anthropic_count_prompt(req, s_prompt, why, sizeof(why));
        assert_non_null(ours);
        cJSON *chat = api_test_json(s_pairs[i].openai);
        char *theirs = ipl_chat_render(chat, true, why, sizeof(why));
        assert_non_null(theirs);
        if (strcmp(ours, theirs) != 0)
            fail_msg("pair \"%s\":\n anthropic %s\n openai    %s", s_pairs[i].name, ours, theirs);
        /* count_tokens of the same body renders the same text */
        api_anthropic_request_t *count =
            api_test_request(API_ANTHROPIC_COUNT_TOKENS, s_pairs[i].anthropic);
        char *counted = api_anthropic_count_prompt(count, s_prompt, NULL, 0);
        assert_string_equal(counted, ours);
        free(counted);
        api_anthropic_request_destroy(&count);
        cJSON_Delete(chat);
        free(theirs);
        free(ours);
        api_anthropic_request_destroy(&req);
    }
}

/* The text itself, so that both sides cannot be wrong the same way. */
static void test_chatml_text(void **state)
{
    (void)state;
    api_anthropic_request_t *req = api_test_request(API_ANTHROPIC_MESSAGES, s_pairs[3].anthropic);
    char *text = api_anthropic_count_prompt(req, s_prompt, NULL, 0);
    assert_string_equal(text, "<|im_start|>user\nweather?<|im_end|>\n"
                              "<|im_start|>assistant\nChecking.<|im_end|>\n"
                              "<|im_start|>tool\n18 C<|im_end|>\n"
                              "<|im_start|>user\nthanks<|im_end|>\n"
                              "<|im_start|>assistant\n");
    free(text);
    api_anthropic_request_destroy(&req);

    req = api_test_request(API_ANTHROPIC_MESSAGES, s_pairs[1].anthropic);
    text = api_anthropic_count_prompt(req, s_prompt, NULL, 0);
    assert_string_equal(text, "<|im_start|>system\nYou are terse.<|im_end|>\n"
                              "<|im_start|>user\na<|im_end|>\n"
                              "<|im_start|>assistant\nb<|im_end|>\n"
                              "<|im_start|>user\nc\nd<|im_end|>\n"
                              "<|im_start|>assistant\n");
    free(text);
    api_anthropic_request_destroy(&req);
}

/* The caller broke the body it was lent: the render says so instead of crashing. */
static void test_render_error(void **state)
{
    (void)state;
    api_anthropic_request_t *req =
        api_test_request(API_ANTHROPIC_MESSAGES,
                         "{'model':'m','max_tokens':8,'messages':[{'role':'user','content':'x'}]}");
    cJSON_DeleteItemFromObject(api_anthropic_request_openai(req), "messages");
    char why[128] = "";
    assert_null(api_anthropic_count_prompt(req, s_prompt, why, sizeof(why)));
    assert_string_equal(why, "messages must be an array of message objects");
    api_anthropic_request_destroy(&req);
}

static void test_body(void **state)
{
    (void)state;
    char *b = api_anthropic_count_body(0);
    assert_string_equal(b, "{\"input_tokens\":0}");
    free(b);
    b = api_anthropic_count_body(123456789012ULL);
    assert_string_equal(b, "{\"input_tokens\":123456789012}");
    free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_prompt_as_chat),
        cmocka_unit_test(test_chatml_text),
        cmocka_unit_test(test_render_error),
        cmocka_unit_test(test_body),
    };
    s_prompt = ipl_prompt_open("builtin", NULL, 0);
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    ipl_prompt_destroy(&s_prompt);
    return failed;
}
