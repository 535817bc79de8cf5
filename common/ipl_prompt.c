/*
 * ipl_prompt — the one prompt path. See ipl_prompt.h.
 */
#include "ipl_prompt.h"

#include <assert.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ipl_chat.h"
#include "ipl_error.h"
#include "ipl_hash.h"
#include "ipl_template.h"

#define S_CONFIG_MAX (64u << 20) /* tokenizer_config.json: far above any real one */

struct ipl_prompt {
    ipl_tokenizer_t *tok;
    ipl_template_t *tmpl; /* NULL: ChatML */
    bool add_special;     /* plain prompts get the post-processor's specials (a folder) */
    bool framed;          /* transformers' Llama/Gemma class: bos/eos below, not the file's */
    int64_t bos, eos;     /* framed: the ids added around a plain prompt, -1 for none */
    char *unrenderable;   /* template_fallback: why the template did not load, else NULL */
};

static bool s_exists(const char *dir, const char *name)
{
    char path[4096];
    struct stat st;
    return snprintf(path, sizeof path, "%s/%s", dir, name) < (int)sizeof path &&
           stat(path, &st) == 0;
}

/* tokenizer_config.json of `dir`, parsed; NULL when absent or unreadable (ipl_template_load
 * reports those itself when a template is expected). */
static cJSON *s_config(const char *dir)
{
    char path[4096];
    if (snprintf(path, sizeof path, "%s/tokenizer_config.json", dir) >= (int)sizeof path)
        return NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    cJSON *config = NULL;
    long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    char *text = size >= 0 && (unsigned long)size <= S_CONFIG_MAX ? malloc((size_t)size + 1) : NULL;
    if (text && fseek(f, 0, SEEK_SET) == 0 && fread(text, 1, (size_t)size, f) == (size_t)size) {
        text[size] = '\0';
        config = cJSON_Parse(text);
    }
    free(text);
    fclose(f);
    return config;
}

/* The id of special token `tok` of tokenizer_config.json (a string, or an AddedToken object
 * with "content"), or -1: an added token's content encodes to exactly its own id. */
static int64_t s_special_id(const ipl_tokenizer_t *t, const cJSON *tok)
{
    const cJSON *content = cJSON_IsObject(tok) ? cJSON_GetObjectItemCaseSensitive(tok, "content")
                                               : tok;
    if (!cJSON_IsString(content) || !content->valuestring[0]) return -1;
    size_t n = 0;
    uint32_t *ids = ipl_tokenizer_encode(t, content->valuestring, strlen(content->valuestring), &n);
    int64_t id = ids && n == 1 ? (int64_t)ids[0] : -1;
    free(ids);
    return id;
}

/* transformers' LlamaTokenizerFast and GemmaTokenizerFast (what AutoTokenizer, and so vLLM,
 * loads for these tokenizer_class names) replace tokenizer.json's post-processor when they
 * are created (update_post_processor): bos_token first when add_bos_token (default true),
 * eos_token last when add_eos_token (default false). DeepSeek-V3's file, for one, has a
 * ByteLevel post-processor that adds nothing, and add_bos_token true: vLLM's completions
 * prompts start with <｜begin▁of▁sentence｜>. */
static void s_framing(ipl_prompt_t *self, const cJSON *config)
{
    static const char *const classes[] = {"LlamaTokenizerFast", "LlamaTokenizer",
                                          "GemmaTokenizerFast", "GemmaTokenizer",
                                          "CodeLlamaTokenizerFast", "CodeLlamaTokenizer"};
    const cJSON *cls = cJSON_GetObjectItemCaseSensitive(config, "tokenizer_class");
    bool llama = false;
    for (size_t i = 0; cJSON_IsString(cls) && i < sizeof classes / sizeof *classes; i++)
        llama |= !strcmp(cls->valuestring, classes[i]);
    if (!llama) return;
    const cJSON *add_bos = cJSON_GetObjectItemCaseSensitive(config, "add_bos_token");
    const cJSON *add_eos = cJSON_GetObjectItemCaseSensitive(config, "add_eos_token");
    self->framed = true;
    const cJSON *bos = cJSON_GetObjectItemCaseSensitive(config, "bos_token");
    const cJSON *eos = cJSON_GetObjectItemCaseSensitive(config, "eos_token");
    self->bos = cJSON_IsFalse(add_bos) ? -1 : s_special_id(self->tok, bos);
    self->eos = cJSON_IsTrue(add_eos) ? s_special_id(self->tok, eos) : -1;
}

/* A model folder: the tokenizer, and the template when the folder has one (one that does
 * not load, with `fallback`: none, and self->unrenderable says why). */
static int s_open_dir(ipl_prompt_t *self, const char *dir, bool fallback, char *err,
                      size_t errlen)
{
    if (!(self->tok = ipl_tokenizer_open(dir, err, errlen))) return IPL_E_INVAL;
    cJSON *config = s_config(dir);
    const cJSON *bos = cJSON_GetObjectItemCaseSensitive(config, "add_bos_token");
    self->add_special = !cJSON_IsFalse(bos);
    s_framing(self, config);
    bool templated = s_exists(dir, "chat_template.jinja") || s_exists(dir, "chat_template.json") ||
                     cJSON_GetObjectItemCaseSensitive(config, "chat_template");
    cJSON_Delete(config);
    if (!templated) return 0;
    char why[1024] = "";
    self->tmpl = ipl_template_load(dir, why, sizeof why);
    if (self->tmpl) return 0;
    if (!fallback || !strcmp(why, "out of memory")) {
        ipl_errf(err, errlen, "%s", why);
        return IPL_E_INVAL;
    }
    self->unrenderable = strdup(why[0] ? why : "the chat template does not load");
    return self->unrenderable ? 0 : IPL_E_NOMEM;
}

ipl_prompt_t *ipl_prompt_open(const char *spec, char *err, size_t errlen)
{
    return ipl_prompt_open_opts(spec, NULL, err, errlen);
}

ipl_prompt_t *ipl_prompt_open_opts(const char *spec, const ipl_prompt_opts_t *opts, char *err,
                                   size_t errlen)
{
    if (err && errlen) err[0] = '\0';
    ipl_prompt_t *self = calloc(1, sizeof *self);
    if (!self) {
        ipl_errf(err, errlen, "out of memory");
        return NULL;
    }
    struct stat st;
    int rc = 0;
    if (spec && *spec && strcmp(spec, "builtin") != 0 && stat(spec, &st) == 0 &&
        S_ISDIR(st.st_mode))
        rc = s_open_dir(self, spec, opts && opts->template_fallback, err, errlen);
    else if (!(self->tok = ipl_tokenizer_open(spec, err, errlen)))
        rc = IPL_E_INVAL;
    if (rc != 0) ipl_prompt_destroy(&self);
    return self;
}

void ipl_prompt_destroy(ipl_prompt_t **self_p)
{
    assert(self_p);
    ipl_prompt_t *self = *self_p;
    if (!self) return;
    ipl_tokenizer_destroy(&self->tok);
    ipl_template_destroy(&self->tmpl);
    free(self->unrenderable);
    free(self);
    *self_p = NULL;
}

const ipl_tokenizer_t *ipl_prompt_tokenizer(const ipl_prompt_t *self)
{
    return self->tok;
}

bool ipl_prompt_has_template(const ipl_prompt_t *self)
{
    return self->tmpl != NULL;
}

int ipl_prompt_set_cache(ipl_prompt_t *self, size_t max_entries, size_t max_bytes)
{
    return ipl_tokenizer_set_cache(self->tok, max_entries, max_bytes);
}

const char *ipl_prompt_unrenderable(const ipl_prompt_t *self)
{
    return self->unrenderable;
}

/* ---- vLLM's message preprocessing ------------------------------------------------------- */

/* Content parts → their "text" parts joined with "\n" (vLLM's "string" content format).
 * NULL on allocation failure or for a malformed part (err filled). */
static char *s_join_parts(const cJSON *parts, int index, char *err, size_t errlen)
{
    size_t cap = 1;
    const cJSON *part;
    cJSON_ArrayForEach(part, parts)
    {
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(part, "text");
        if (cJSON_IsString(text)) cap += strlen(text->valuestring) + 1;
    }
    char *out = malloc(cap);
    if (!out) {
        ipl_errf(err, errlen, "out of memory");
        return NULL;
    }
    size_t len = 0;
    int k = 0;
    cJSON_ArrayForEach(part, parts)
    {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(part, "type");
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(part, "text");
        if (!cJSON_IsObject(part)) {
            ipl_errf(err, errlen, "messages[%d].content[%d] is not an object", index, k);
            free(out);
            return NULL;
        }
        if (cJSON_IsString(type) && strcmp(type->valuestring, "text") != 0) {
            k++;
            continue;
        }
        if (!cJSON_IsString(text)) {
            ipl_errf(err, errlen, "messages[%d].content[%d].text is not a string", index, k);
            free(out);
            return NULL;
        }
        size_t n = strlen(text->valuestring);
        if (len) out[len++] = '\n';
        memcpy(out + len, text->valuestring, n);
        len += n;
        k++;
    }
    out[len] = '\0';
    return out;
}

/* Tool calls' "arguments" given as JSON text → the value (as vLLM parses them). */
static int s_parse_arguments(cJSON *message)
{
    cJSON *calls = cJSON_GetObjectItemCaseSensitive(message, "tool_calls");
    cJSON *call;
    cJSON_ArrayForEach(call, calls)
    {
        cJSON *fn = cJSON_GetObjectItemCaseSensitive(call, "function");
        cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
        if (!cJSON_IsString(args)) continue;
        cJSON *value = cJSON_Parse(args->valuestring);
        if (!value) continue; /* not JSON: the template sees the text */
        if (!cJSON_ReplaceItemInObjectCaseSensitive(fn, "arguments", value)) {
            cJSON_Delete(value);
            return IPL_E_NOMEM;
        }
    }
    return 0;
}

/* True when a message needs preprocessing (parts, or tool-call arguments as text). */
static bool s_needs_prep(const cJSON *messages)
{
    const cJSON *m;
    cJSON_ArrayForEach(m, messages)
    {
        if (cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(m, "content"))) return true;
        const cJSON *calls = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
        const cJSON *call;
        cJSON_ArrayForEach(call, calls)
        {
            const cJSON *fn = cJSON_GetObjectItemCaseSensitive(call, "function");
            if (cJSON_IsString(cJSON_GetObjectItemCaseSensitive(fn, "arguments"))) return true;
        }
    }
    return false;
}

/* A preprocessed copy of messages (the caller deletes), or NULL with err filled. */
static cJSON *s_prep(const cJSON *messages, char *err, size_t errlen)
{
    cJSON *copy = cJSON_Duplicate(messages, true);
    if (!copy) {
        ipl_errf(err, errlen, "out of memory");
        return NULL;
    }
    int i = 0;
    cJSON *m;
    cJSON_ArrayForEach(m, copy)
    {
        if (!cJSON_IsObject(m)) {
            ipl_errf(err, errlen, "messages[%d] is not an object", i);
            goto fail;
        }
        cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
        if (cJSON_IsArray(content)) {
            char *text = s_join_parts(content, i, err, errlen);
            cJSON *str = text ? cJSON_CreateString(text) : NULL;
            free(text);
            if (!str || !cJSON_ReplaceItemInObjectCaseSensitive(m, "content", str)) {
                cJSON_Delete(str);
                if (!err || !*err) ipl_errf(err, errlen, "out of memory");
                goto fail;
            }
        }
        if (s_parse_arguments(m) != 0) {
            ipl_errf(err, errlen, "out of memory");
            goto fail;
        }
        i++;
    }
    return copy;
fail:
    cJSON_Delete(copy);
    return NULL;
}

int ipl_prompt_render(const ipl_prompt_t *self, const cJSON *messages, const cJSON *tools,
                      bool add_generation_prompt, bool continue_final_message, const cJSON *kwargs,
                      char **out, size_t *len, char *err, size_t errlen)
{
    assert(self && out);
    *out = NULL;
    if (len) *len = 0;
    if (err && errlen) err[0] = '\0';
    if (!cJSON_IsArray(messages)) {
        ipl_errf(err, errlen, "messages must be an array of message objects"); /* as ipl_chat */
        return IPL_E_INVAL;
    }
    if (self->unrenderable) {
        ipl_errf(err, errlen, "this model's chat template cannot be rendered here: %s",
                 self->unrenderable);
        return IPL_E_INVAL;
    }
    if (!self->tmpl) {
        *out = ipl_chat_render(messages, add_generation_prompt, err, errlen);
        if (!*out) return err && *err && strcmp(err, "out of memory") ? IPL_E_INVAL : IPL_E_NOMEM;
        if (len) *len = strlen(*out);
        return 0;
    }
    cJSON *prep = NULL;
    if (s_needs_prep(messages) && !(prep = s_prep(messages, err, errlen)))
        return strcmp(err ? err : "", "out of memory") ? IPL_E_INVAL : IPL_E_NOMEM;
    size_t n = 0;
    int rc = ipl_template_render(self->tmpl, prep ? prep : messages, tools, add_generation_prompt,
                                 continue_final_message, kwargs, out, &n, err, errlen);
    cJSON_Delete(prep);
    if (rc == IPL_E_NOTFOUND) rc = IPL_E_INVAL;
    if (rc == 0 && len) *len = n;
    return rc;
}

uint32_t *ipl_prompt_encode(const ipl_prompt_t *self, const char *text, size_t len, bool chat,
                            size_t *n)
{
    assert(self && n);
    if (!chat && self->framed) { /* transformers' template around the plain ids (s_framing) */
        uint32_t *ids = ipl_tokenizer_encode(self->tok, text, len, n);
        uint32_t *out = ids ? realloc(ids, (*n + 2) * sizeof *ids) : NULL;
        if (!out) {
            free(ids);
            *n = 0;
            return NULL;
        }
        if (self->bos >= 0) {
            memmove(out + 1, out, *n * sizeof *out);
            out[0] = (uint32_t)self->bos;
            (*n)++;
        }
        if (self->eos >= 0) out[(*n)++] = (uint32_t)self->eos;
        return out;
    }
    return !chat && self->add_special ? ipl_tokenizer_encode_with_special(self->tok, text, len, n)
                                      : ipl_tokenizer_encode(self->tok, text, len, n);
}

char *ipl_prompt_decode(const ipl_prompt_t *self, const uint32_t *ids, size_t n)
{
    return ipl_tokenizer_decode(self->tok, ids, n);
}

size_t ipl_prompt_hashes(const ipl_prompt_t *self, const uint32_t *ids, size_t n, size_t block_size,
                         const char *lora_name, const char *cache_salt, uint64_t *out, size_t max)
{
    (void)self; /* one hash space per model folder today; the parameter keeps callers honest */
    if (!block_size) return 0;
    uint64_t parent = ipl_hash_chain_start(ipl_hash_key(lora_name, cache_salt));
    return ipl_block_hashes(parent, ids, n, block_size, out, max);
}

int ipl_prompt_blocks(const ipl_prompt_t *self, const char *text, size_t len, bool chat,
                      size_t block_size, const char *lora_name, const char *cache_salt, size_t max,
                      uint64_t **hashes, size_t *nhashes, size_t *ntokens)
{
    assert(self && hashes && nhashes && ntokens);
    *hashes = NULL;
    *nhashes = *ntokens = 0;
    size_t ntok = 0;
    uint32_t *ids = ipl_prompt_encode(self, text, len, chat, &ntok);
    if (!ids) return IPL_E_NOMEM;
    size_t nblocks = block_size ? ntok / block_size : 0;
    if (nblocks > max) nblocks = max;
    uint64_t *out = malloc((nblocks ? nblocks : 1) * sizeof *out);
    if (!out) {
        free(ids);
        return IPL_E_NOMEM;
    }
    *nhashes = ipl_prompt_hashes(self, ids, ntok, block_size, lora_name, cache_salt, out, nblocks);
    free(ids);
    *hashes = out;
    *ntokens = ntok;
    return 0;
}
