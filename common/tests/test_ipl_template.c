/*
 * Unit tests of ipl_template: loading a model folder as transformers does (tokenizer_config's
 * chat_template as a string or a named list, chat_template.jinja taking precedence,
 * additional_chat_templates/, chat_template.json, special tokens as strings or AddedToken
 * objects, add_bos_token), the variables a render sees, the tool_use / default choice,
 * chat_template_kwargs, continue_final_message, raise_exception, and errors naming the file.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "ipl_error.h"
#include "ipl_template.h"

static char s_dir[256];

static void s_write(const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", s_dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void s_remove(const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", s_dir, name);
    unlink(path);
}

static int s_setup(void **state)
{
    (void)state;
    snprintf(s_dir, sizeof s_dir, "/tmp/ipl-template-XXXXXX");
    assert_non_null(mkdtemp(s_dir));
    return 0;
}

static int s_teardown(void **state)
{
    (void)state;
    const char *files[] = {"tokenizer_config.json", "chat_template.jinja", "chat_template.json",
                           "additional_chat_templates/rag.jinja"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) s_remove(files[i]);
    char sub[512];
    snprintf(sub, sizeof sub, "%s/additional_chat_templates", s_dir);
    rmdir(sub);
    rmdir(s_dir);
    return 0;
}

static ipl_template_t *s_load(void)
{
    char err[512];
    ipl_template_t *t = ipl_template_load(s_dir, err, sizeof err);
    if (!t) fail_msg("load failed: %s", err);
    return t;
}

/* Renders messages/tools/kwargs (JSON texts; NULL for none); returns the code. */
static int s_render(const ipl_template_t *t, const char *messages, const char *tools, bool agp,
                    bool cfm, const char *kwargs, char **out, char *err, size_t errlen)
{
    cJSON *m = cJSON_Parse(messages), *to = tools ? cJSON_Parse(tools) : NULL,
          *kw = kwargs ? cJSON_Parse(kwargs) : NULL;
    size_t len = 0;
    int rc = ipl_template_render(t, m, to, agp, cfm, kw, out, &len, err, errlen);
    if (rc == 0) assert_int_equal(len, strlen(*out));
    cJSON_Delete(m);
    cJSON_Delete(to);
    cJSON_Delete(kw);
    return rc;
}

static void s_expect(const ipl_template_t *t, const char *messages, const char *tools, bool agp,
                     bool cfm, const char *kwargs, const char *want)
{
    char *out = NULL, err[512] = "";
    int rc = s_render(t, messages, tools, agp, cfm, kwargs, &out, err, sizeof err);
    if (rc) fail_msg("render failed (%d): %s", rc, err);
    if (strcmp(out, want) != 0) fail_msg("got  [%s]\nwant [%s]", out, want);
    free(out);
}

static const char *s_msgs = "[{\"role\": \"user\", \"content\": \"Hi\"}]";

static void test_config_and_variables(void **state)
{
    (void)state;
    s_write("tokenizer_config.json",
            "{\"add_bos_token\": true, \"bos_token\": {\"__type\": \"AddedToken\", \"content\": \"<s>\"},"
            " \"eos_token\": \"</s>\", \"pad_token\": null, \"additional_special_tokens\": [\"<a>\", {\"content\": \"<b>\"}],"
            " \"chat_template\": \"{{ bos_token }}|{{ eos_token }}|{{ pad_token is defined }}|"
            "{{ additional_special_tokens|join(',') }}|{{ tools is none }}|{{ documents is none }}|"
            "{{ add_generation_prompt }}|{{ messages|length }}|{{ enable_thinking|default('-') }}\"}");
    ipl_template_t *t = s_load();
    assert_string_equal(ipl_template_bos_token(t), "<s>");
    assert_string_equal(ipl_template_eos_token(t), "</s>");
    assert_int_equal(ipl_template_add_bos_token(t), 1);
    assert_true(ipl_template_uses(t, "enable_thinking"));
    assert_false(ipl_template_uses(t, "reasoning_effort"));
    s_expect(t, s_msgs, NULL, true, false, NULL, "<s>|</s>|False|<a>,<b>|True|True|True|1|-");
    s_expect(t, s_msgs, "[]", false, false, "{\"enable_thinking\": false}",
             "<s>|</s>|False|<a>,<b>|False|True|False|1|False");
    /* kwargs may override a special token, not the parameters of their own */
    s_expect(t, s_msgs, NULL, false, false, "{\"bos_token\": \"B\"}", "B|</s>|False|<a>,<b>|True|True|False|1|-");
    char *out = NULL, err[512];
    assert_int_equal(s_render(t, s_msgs, NULL, false, false, "{\"messages\": []}", &out, err, sizeof err),
                     IPL_E_INVAL);
    assert_string_equal(err, "chat template kwargs: 'messages' is given twice (it is a parameter of its own)");
    /* bad arguments */
    assert_int_equal(s_render(t, "{}", NULL, false, false, NULL, &out, err, sizeof err), IPL_E_INVAL);
    assert_string_equal(err, "messages must be a JSON array");
    assert_int_equal(s_render(t, s_msgs, "{}", false, false, NULL, &out, err, sizeof err), IPL_E_INVAL);
    assert_int_equal(s_render(t, s_msgs, NULL, false, false, "[1]", &out, err, sizeof err), IPL_E_INVAL);
    assert_null(out);
    ipl_template_destroy(&t);
    assert_null(t);
    ipl_template_destroy(NULL);
}

static void test_template_sources(void **state)
{
    (void)state;
    /* a named list: tool_use when tools are given, else default */
    s_write("tokenizer_config.json",
            "{\"chat_template\": [{\"name\": \"default\", \"template\": \"D{{ tools|length if tools }}\"},"
            " {\"name\": \"tool_use\", \"template\": \"T{{ tools|length }}\"}]}");
    ipl_template_t *t = s_load();
    assert_int_equal(ipl_template_add_bos_token(t), -1);
    assert_string_equal(ipl_template_bos_token(t), "");
    s_expect(t, s_msgs, NULL, false, false, NULL, "D");
    s_expect(t, s_msgs, "[{\"type\": \"function\"}]", false, false, NULL, "T1");
    s_expect(t, s_msgs, "null", false, false, NULL, "D");
    ipl_template_destroy(&t);
    /* without a default, a request without tools has no template */
    s_write("tokenizer_config.json", "{\"chat_template\": [{\"name\": \"tool_use\", \"template\": \"T\"}]}");
    t = s_load();
    char *out = NULL, err[512];
    assert_int_equal(s_render(t, s_msgs, NULL, false, false, NULL, &out, err, sizeof err), IPL_E_NOTFOUND);
    assert_string_equal(err, "this model's chat templates have no \"default\"");
    ipl_template_destroy(&t);
    /* chat_template.jinja wins over the config's, and brings additional_chat_templates/ */
    s_write("tokenizer_config.json", "{\"chat_template\": \"config\", \"eos_token\": \"E\"}");
    s_write("chat_template.jinja", "jinja {{ eos_token }}\n");
    char sub[512];
    snprintf(sub, sizeof sub, "%s/additional_chat_templates", s_dir);
    mkdir(sub, 0755);
    s_write("additional_chat_templates/rag.jinja", "rag");
    t = s_load();
    s_expect(t, s_msgs, NULL, false, false, NULL, "jinja E");
    ipl_template_destroy(&t);
    s_remove("additional_chat_templates/rag.jinja");
    rmdir(sub);
    /* a processor folder: chat_template.json */
    s_remove("chat_template.jinja");
    s_write("tokenizer_config.json", "{\"bos_token\": \"<bos>\"}");
    s_write("chat_template.json", "{\"chat_template\": \"proc {{ bos_token }}\"}");
    t = s_load();
    s_expect(t, s_msgs, NULL, false, false, NULL, "proc <bos>");
    ipl_template_destroy(&t);
    s_remove("chat_template.json");
    /* from parts */
    cJSON *cfg = cJSON_Parse("{\"eos_token\": \"e\"}");
    t = ipl_template_new(cfg, "{{ eos_token }}!", "inline", err, sizeof err);
    assert_non_null(t);
    s_expect(t, s_msgs, NULL, false, false, NULL, "e!");
    ipl_template_destroy(&t);
    assert_null(ipl_template_new(cfg, NULL, "inline", err, sizeof err));
    assert_string_equal(err, "inline has no chat template");
    cJSON_Delete(cfg);
}

static void test_load_errors(void **state)
{
    (void)state;
    char err[512], want[768];
    s_write("tokenizer_config.json", "{\"eos_token\": \"E\"}");
    assert_null(ipl_template_load(s_dir, err, sizeof err));
    snprintf(want, sizeof want, "%s/tokenizer_config.json has no chat template (no chat_template "
                                "key, no chat_template.jinja or chat_template.json beside it)", s_dir);
    assert_string_equal(err, want);
    s_write("tokenizer_config.json", "{\"chat_template\": \"{% for m in messages %}\\n{{ m|shout }}{% endfor %}\"}");
    assert_null(ipl_template_load(s_dir, err, sizeof err));
    snprintf(want, sizeof want, "%s/tokenizer_config.json: chat template \"default\": 2:6: unknown filter 'shout'", s_dir);
    assert_string_equal(err, want);
    s_write("tokenizer_config.json", "{\"chat_template\": [{\"name\": 1}]}");
    assert_null(ipl_template_load(s_dir, err, sizeof err));
    snprintf(want, sizeof want, "%s/tokenizer_config.json: chat_template[0] must be an object with string "
                                "\"name\" and \"template\"", s_dir);
    assert_string_equal(err, want);
    s_write("tokenizer_config.json", "[1, 2]");
    assert_null(ipl_template_load(s_dir, err, sizeof err));
    snprintf(want, sizeof want, "%s/tokenizer_config.json: not a JSON object", s_dir);
    assert_string_equal(err, want);
    s_remove("tokenizer_config.json");
    assert_null(ipl_template_load(s_dir, err, sizeof err));
    snprintf(want, sizeof want, "%s: neither tokenizer_config.json nor chat_template.jinja", s_dir);
    assert_string_equal(err, want);
    assert_null(ipl_template_load("/nonexistent/model", err, sizeof err));
    assert_null(ipl_template_load(NULL, NULL, 0));
}

static void test_continue_and_raise(void **state)
{
    (void)state;
    s_write("tokenizer_config.json",
            "{\"chat_template\": \"{% for m in messages %}{% if m.role == 'bad' %}"
            "{{ raise_exception('role ' ~ m.role ~ ' is not allowed') }}{% endif %}"
            "<{{ m.role }}>{{ m.content if m.content is string else m.content[-1].text }}</{{ m.role }}>"
            "{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}\"}");
    ipl_template_t *t = s_load();
    const char *chat = "[{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assistant\", \"content\": \"Hello \"}]";
    s_expect(t, chat, NULL, false, false, NULL, "<user>Hi</user><assistant>Hello </assistant>");
    /* the content is there verbatim (trailing space kept): cut right after it */
    s_expect(t, chat, NULL, false, true, NULL, "<user>Hi</user><assistant>Hello ");
    /* leading whitespace: Python compares the whole content, so it cuts after the stripped one */
    s_expect(t, "[{\"role\": \"assistant\", \"content\": \" Hey \"}]", NULL, false, true, NULL, "<assistant> Hey");
    /* content parts: the last text part */
    s_expect(t, "[{\"role\": \"assistant\", \"content\": [{\"type\": \"text\", \"text\": \"A\"}, "
                "{\"type\": \"text\", \"text\": \"Bee\"}]}]", NULL, false, true, NULL, "<assistant>Bee");
    char *out = NULL, err[512];
    assert_int_equal(s_render(t, chat, NULL, true, true, NULL, &out, err, sizeof err), IPL_E_INVAL);
    assert_non_null(strstr(err, "continue_final_message and add_generation_prompt are not compatible"));
    /* (the template itself fails on None[-1].text, as Python would) */
    assert_int_equal(s_render(t, "[{\"role\": \"assistant\", \"content\": null}]", NULL, false, true, NULL,
                              &out, err, sizeof err), IPL_E_TYPE);
    assert_int_equal(s_render(t, "[{\"role\": \"assistant\", \"content\": [{\"type\": \"image\"}]}]", NULL,
                              false, true, NULL, &out, err, sizeof err), IPL_E_INVAL);
    assert_string_equal(err, "continue_final_message is set but we could not find any text to "
                             "continue in the final message!");
    /* the template's own refusal: its message, verbatim */
    assert_int_equal(s_render(t, "[{\"role\": \"bad\", \"content\": \"x\"}]", NULL, false, false, NULL,
                              &out, err, sizeof err), IPL_E_INVAL);
    assert_string_equal(err, "role bad is not allowed");
    /* limits apply to every render */
    ipl_template_set_limits(t, &(ipl_jinja_limits_t){.max_output = 8});
    assert_int_equal(s_render(t, chat, NULL, false, false, NULL, &out, err, sizeof err), IPL_E_RANGE);
    ipl_template_set_limits(t, NULL);
    s_expect(t, chat, NULL, true, false, NULL, "<user>Hi</user><assistant>Hello </assistant><assistant>");
    ipl_template_destroy(&t);
    /* the final message must survive the template */
    s_write("tokenizer_config.json", "{\"chat_template\": \"{% for m in messages %}[{{ m.role }}]{% endfor %}\"}");
    t = s_load();
    assert_int_equal(s_render(t, chat, NULL, false, true, NULL, &out, err, sizeof err), IPL_E_INVAL);
    assert_non_null(strstr(err, "the final message does not appear in the chat"));
    ipl_template_destroy(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_config_and_variables, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_template_sources, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_load_errors, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_continue_and_raise, s_setup, s_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
