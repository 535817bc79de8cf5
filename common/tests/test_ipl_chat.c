/*
 * Unit tests of ipl_chat: ChatML text for string and part-array contents, the generation
 * prompt, null content, and an error naming the place for each malformed shape.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "ipl_chat.h"

/* Renders a JSON text; returns the rendering (caller frees) or NULL with err filled. */
static char *s_render(const char *json, bool gen, char *err, size_t errlen)
{
    cJSON *messages = cJSON_Parse(json);
    assert_non_null(messages);
    char *text = ipl_chat_render(messages, gen, err, errlen);
    cJSON_Delete(messages);
    return text;
}

static void s_expect(const char *json, bool gen, const char *want)
{
    char err[256] = "";
    char *text = s_render(json, gen, err, sizeof err);
    if (!text) fail_msg("unexpected error: %s", err);
    assert_string_equal(text, want);
    free(text);
}

static void s_expect_error(const char *json, const char *want)
{
    char err[256] = "";
    char *text = s_render(json, true, err, sizeof err);
    assert_null(text);
    assert_string_equal(err, want);
}

static void test_strings(void **state)
{
    (void)state;
    static const char json[] = "[{\"role\":\"system\",\"content\":\"You are terse.\"},"
                               "{\"role\":\"user\",\"content\":\"Hi\\nthere\",\"name\":\"bob\"}]";
    s_expect(json, true,
             "<|im_start|>system\nYou are terse.<|im_end|>\n"
             "<|im_start|>user\nHi\nthere<|im_end|>\n"
             "<|im_start|>assistant\n");
    s_expect(json, false,
             "<|im_start|>system\nYou are terse.<|im_end|>\n"
             "<|im_start|>user\nHi\nthere<|im_end|>\n");
}

static void test_parts(void **state)
{
    (void)state;
    s_expect("[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Look:\"},"
             "{\"type\":\"image_url\",\"image_url\":{\"url\":\"http://x/y.png\"}},"
             "{\"type\":\"text\",\"text\":\"what is it?\"}]}]",
             false, "<|im_start|>user\nLook:\nwhat is it?<|im_end|>\n");
    s_expect("[{\"role\":\"user\",\"content\":[]}]", false, "<|im_start|>user\n<|im_end|>\n");
}

static void test_null_content(void **state)
{
    (void)state;
    s_expect("[{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c1\"}]},"
             "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"42\"}]",
             true,
             "<|im_start|>assistant\n<|im_end|>\n<|im_start|>tool\n42<|im_end|>\n"
             "<|im_start|>assistant\n");
    s_expect("[{\"role\":\"user\"}]", false, "<|im_start|>user\n<|im_end|>\n");
}

static void test_empty_and_unicode(void **state)
{
    (void)state;
    s_expect("[]", true, "<|im_start|>assistant\n");
    s_expect("[]", false, "");
    s_expect("[{\"role\":\"user\",\"content\":\"gr\\u00fc\\u00df \\ud83d\\ude42\"}]", false,
             "<|im_start|>user\ngr\xc3\xbc\xc3\x9f \xf0\x9f\x99\x82<|im_end|>\n");
}

static void test_errors(void **state)
{
    (void)state;
    s_expect_error("{\"role\":\"user\"}", "messages must be an array of message objects");
    s_expect_error("[{\"role\":\"user\",\"content\":\"a\"},3]", "messages[1] is not an object");
    s_expect_error("[{\"content\":\"a\"}]", "messages[0].role is missing or not a string");
    s_expect_error("[{\"role\":7,\"content\":\"a\"}]",
                   "messages[0].role is missing or not a string");
    s_expect_error("[{\"role\":\"user\",\"content\":5}]",
                   "messages[0].content must be a string or an array of content parts");
    s_expect_error("[{\"role\":\"user\",\"content\":{\"type\":\"text\"}}]",
                   "messages[0].content must be a string or an array of content parts");
    s_expect_error("[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},\"b\"]}]",
                   "messages[0].content[1] is not an object");
    s_expect_error("[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":null}]}]",
                   "messages[0].content[0]: a \"text\" part needs a string \"text\"");
    /* NULL and tiny error buffers are fine */
    assert_null(s_render("[1]", true, NULL, 0));
    char tiny[4] = "xxx";
    assert_null(s_render("[1]", true, tiny, sizeof tiny));
    assert_string_equal(tiny, "mes");
    assert_null(ipl_chat_render(NULL, true, NULL, 0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_strings),      cmocka_unit_test(test_parts),
        cmocka_unit_test(test_null_content), cmocka_unit_test(test_empty_and_unicode),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
