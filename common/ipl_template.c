/*
 * ipl_template — chat templates loaded and applied as transformers does (see ipl_template.h).
 */
#include "ipl_template.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "ipl_error.h"
#include "ipl_jinja_str.h"
#include "ipl_jinja_value.h"

#define S_MAX_FILE    (16u << 20)
#define S_MAX_NAMED   16

/* The special tokens transformers puts in the template's variables (special_tokens_map). */
static const char *const s_special[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                        "pad_token", "cls_token", "mask_token"};
#define S_NSPECIAL (sizeof s_special / sizeof *s_special)

typedef struct {
    char *name;
    ipl_jinja_t *tpl;
} s_named_t;

struct ipl_template {
    s_named_t named[S_MAX_NAMED]; /* named[0] is "default" when the template is a string */
    size_t nnamed;
    char *special[S_NSPECIAL]; /* NULL when unset */
    cJSON *additional;         /* additional_special_tokens (strings) or NULL */
    int add_bos;
    ipl_jinja_limits_t limits;
};

/* Reads a whole file; NULL with errno set (ENOENT when absent). */
static char *s_read(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (cap - n < 65536) {
            cap = cap ? cap * 2 : 65536;
            if (cap > S_MAX_FILE + 65536) {
                free(buf);
                fclose(f);
                errno = EFBIG;
                return NULL;
            }
            char *nb = realloc(buf, cap + 1);
            if (!nb) {
                free(buf);
                fclose(f);
                errno = ENOMEM;
                return NULL;
            }
            buf = nb;
        }
        size_t k = fread(buf + n, 1, cap - n, f);
        n += k;
        if (k == 0) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        errno = EIO;
        return NULL;
    }
    buf[n] = '\0';
    if (len) *len = n;
    return buf;
}

static int s_add(ipl_template_t *self, const char *name, const char *text, const char *origin,
                 char *err, size_t errlen)
{
    if (self->nnamed == S_MAX_NAMED) {
        ipl_errf(err, errlen, "%s: more than %d named chat templates", origin, S_MAX_NAMED);
        return -1;
    }
    char jerr[512];
    ipl_jinja_t *tpl = ipl_jinja_new(text, strlen(text), jerr, sizeof jerr);
    if (!tpl) {
        ipl_errf(err, errlen, "%s: chat template \"%s\": %s", origin, name, jerr);
        return -1;
    }
    self->named[self->nnamed].name = strdup(name);
    self->named[self->nnamed].tpl = tpl;
    self->nnamed++;
    return 0;
}

/* A special token's text: a string or an AddedToken object {"content": "..."}. */
static const char *s_token_text(const cJSON *v)
{
    if (cJSON_IsString(v)) return v->valuestring;
    if (cJSON_IsObject(v)) {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(v, "content");
        if (cJSON_IsString(c)) return c->valuestring;
    }
    return NULL;
}

/* Reads the template list or string of a config object (tokenizer_config.json, or
 * chat_template.json) into self. Returns 1 when it had one, 0 when not, -1 on error. */
static int s_config_templates(ipl_template_t *self, const cJSON *config, const char *origin,
                              char *err, size_t errlen)
{
    const cJSON *ct = cJSON_GetObjectItemCaseSensitive(config, "chat_template");
    if (cJSON_IsString(ct)) return s_add(self, "default", ct->valuestring, origin, err, errlen) < 0 ? -1 : 1;
    if (!cJSON_IsArray(ct)) return 0;
    int i = 0;
    for (const cJSON *e = ct->child; e; e = e->next, i++) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(e, "template");
        if (!cJSON_IsString(name) || !cJSON_IsString(text)) {
            ipl_errf(err, errlen, "%s: chat_template[%d] must be an object with string \"name\" and "
                               "\"template\"", origin, i);
            return -1;
        }
        if (s_add(self, name->valuestring, text->valuestring, origin, err, errlen) < 0) return -1;
    }
    return self->nnamed > 0;
}

static void s_tokens(ipl_template_t *self, const cJSON *config)
{
    for (size_t i = 0; i < S_NSPECIAL; i++) {
        const char *t = s_token_text(cJSON_GetObjectItemCaseSensitive(config, s_special[i]));
        if (t) self->special[i] = strdup(t);
    }
    const cJSON *extra = cJSON_GetObjectItemCaseSensitive(config, "additional_special_tokens");
    if (cJSON_IsArray(extra)) {
        self->additional = cJSON_CreateArray();
        for (const cJSON *e = extra->child; e && self->additional; e = e->next) {
            const char *t = s_token_text(e);
            if (t) cJSON_AddItemToArray(self->additional, cJSON_CreateString(t));
        }
    }
    const cJSON *ab = cJSON_GetObjectItemCaseSensitive(config, "add_bos_token");
    self->add_bos = cJSON_IsBool(ab) ? cJSON_IsTrue(ab) : -1;
}

static ipl_template_t *s_alloc(void)
{
    ipl_template_t *self = calloc(1, sizeof *self);
    if (self) self->add_bos = -1;
    return self;
}

ipl_template_t *ipl_template_new(const cJSON *config, const char *jinja, const char *origin,
                                 char *err, size_t errlen)
{
    if (err && errlen) err[0] = '\0';
    if (!origin) origin = "chat template";
    ipl_template_t *self = s_alloc();
    if (!self) {
        ipl_errf(err, errlen, "out of memory");
        return NULL;
    }
    if (config) s_tokens(self, config);
    int have = 0;
    if (jinja) {
        have = s_add(self, "default", jinja, origin, err, errlen) < 0 ? -1 : 1;
    } else if (config) {
        have = s_config_templates(self, config, origin, err, errlen);
    }
    if (have <= 0) {
        if (have == 0) ipl_errf(err, errlen, "%s has no chat template", origin);
        ipl_template_destroy(&self);
    }
    return self;
}

/* additional_chat_templates/NAME.jinja (transformers' named templates beside
 * chat_template.jinja). */
static int s_additional(ipl_template_t *self, const char *dir, char *err, size_t errlen)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/additional_chat_templates", dir);
    DIR *d = opendir(path);
    if (!d) return 0;
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n <= 6 || strcmp(e->d_name + n - 6, ".jinja") != 0) continue;
        char file[4096 + 256];
        snprintf(file, sizeof file, "%s/%s", path, e->d_name);
        char *text = s_read(file, NULL);
        if (!text) {
            ipl_errf(err, errlen, "%s: %s", file, strerror(errno));
            rc = -1;
            break;
        }
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(n - 6), e->d_name);
        rc = s_add(self, name, text, file, err, errlen);
        free(text);
    }
    closedir(d);
    return rc;
}

ipl_template_t *ipl_template_load(const char *dir, char *err, size_t errlen)
{
    if (err && errlen) err[0] = '\0';
    if (!dir) {
        ipl_errf(err, errlen, "no model folder given");
        return NULL;
    }
    char cfg_path[4096], jinja_path[4096];
    snprintf(cfg_path, sizeof cfg_path, "%s/tokenizer_config.json", dir);
    snprintf(jinja_path, sizeof jinja_path, "%s/chat_template.jinja", dir);
    char *cfg_text = s_read(cfg_path, NULL);
    if (!cfg_text && errno != ENOENT) {
        ipl_errf(err, errlen, "%s: %s", cfg_path, strerror(errno));
        return NULL;
    }
    cJSON *config = NULL;
    if (cfg_text) {
        config = cJSON_Parse(cfg_text);
        free(cfg_text);
        if (!cJSON_IsObject(config)) {
            ipl_errf(err, errlen, "%s: not a JSON object", cfg_path);
            cJSON_Delete(config);
            return NULL;
        }
    }
    char *jinja = s_read(jinja_path, NULL);
    if (!jinja && errno != ENOENT) {
        ipl_errf(err, errlen, "%s: %s", jinja_path, strerror(errno));
        cJSON_Delete(config);
        return NULL;
    }
    ipl_template_t *self = NULL;
    if (jinja) {
        self = ipl_template_new(config, jinja, jinja_path, err, errlen);
        if (self && s_additional(self, dir, err, errlen) < 0) ipl_template_destroy(&self);
    } else if (config && cJSON_GetObjectItemCaseSensitive(config, "chat_template")) {
        self = ipl_template_new(config, NULL, cfg_path, err, errlen);
    } else {
        /* a processor folder: chat_template.json {"chat_template": "..."} */
        char proc_path[4096];
        snprintf(proc_path, sizeof proc_path, "%s/chat_template.json", dir);
        char *proc_text = s_read(proc_path, NULL);
        cJSON *proc = proc_text ? cJSON_Parse(proc_text) : NULL;
        free(proc_text);
        if (cJSON_IsObject(proc)) {
            self = s_alloc();
            if (self) {
                if (config) s_tokens(self, config);
                int have = s_config_templates(self, proc, proc_path, err, errlen);
                if (have == 0) ipl_errf(err, errlen, "%s has no chat template", proc_path);
                if (have <= 0) ipl_template_destroy(&self);
            }
        } else if (!config) {
            ipl_errf(err, errlen, "%s: neither tokenizer_config.json nor chat_template.jinja", dir);
        } else {
            ipl_errf(err, errlen, "%s has no chat template (no chat_template key, no "
                               "chat_template.jinja or chat_template.json beside it)", cfg_path);
        }
        cJSON_Delete(proc);
    }
    free(jinja);
    cJSON_Delete(config);
    return self;
}

void ipl_template_destroy(ipl_template_t **self_p)
{
    if (!self_p || !*self_p) return;
    ipl_template_t *self = *self_p;
    for (size_t i = 0; i < self->nnamed; i++) {
        free(self->named[i].name);
        ipl_jinja_destroy(&self->named[i].tpl);
    }
    for (size_t i = 0; i < S_NSPECIAL; i++) free(self->special[i]);
    cJSON_Delete(self->additional);
    free(self);
    *self_p = NULL;
}

void ipl_template_set_limits(ipl_template_t *self, const ipl_jinja_limits_t *limits)
{
    if (self) self->limits = limits ? *limits : (ipl_jinja_limits_t){0};
}

const char *ipl_template_bos_token(const ipl_template_t *self)
{
    return self && self->special[0] ? self->special[0] : "";
}

const char *ipl_template_eos_token(const ipl_template_t *self)
{
    return self && self->special[1] ? self->special[1] : "";
}

int ipl_template_add_bos_token(const ipl_template_t *self)
{
    return self ? self->add_bos : -1;
}

bool ipl_template_uses(const ipl_template_t *self, const char *name)
{
    if (!self) return false;
    for (size_t i = 0; i < self->nnamed; i++)
        if (ipl_jinja_uses(self->named[i].tpl, name)) return true;
    return false;
}

static const ipl_jinja_t *s_pick(const ipl_template_t *self, bool tools)
{
    const ipl_jinja_t *dflt = NULL;
    for (size_t i = 0; i < self->nnamed; i++) {
        if (tools && strcmp(self->named[i].name, "tool_use") == 0) return self->named[i].tpl;
        if (strcmp(self->named[i].name, "default") == 0) dflt = self->named[i].tpl;
    }
    return dflt;
}

/* A cJSON node that refers to v without copying (freed by cJSON_Delete without v). */
static cJSON *s_ref(const cJSON *v)
{
    if (cJSON_IsArray(v)) return cJSON_CreateArrayReference(v->child);
    if (cJSON_IsObject(v)) return cJSON_CreateObjectReference(v->child);
    if (cJSON_IsString(v)) return cJSON_CreateStringReference(v->valuestring);
    if (cJSON_IsNumber(v)) return cJSON_CreateNumber(v->valuedouble);
    if (cJSON_IsBool(v)) return cJSON_CreateBool(cJSON_IsTrue(v));
    return cJSON_CreateNull();
}

/* transformers' continue_final_message: cut the text after the final message's content. */
static int s_continue_final(const cJSON *messages, char *text, size_t *len, char *err,
                            size_t errlen)
{
    const cJSON *last = messages->child;
    while (last && last->next) last = last->next;
    const cJSON *content = last ? cJSON_GetObjectItemCaseSensitive(last, "content") : NULL;
    const char *final = NULL;
    if (cJSON_IsString(content)) {
        final = content->valuestring;
    } else if (cJSON_IsArray(content)) {
        for (const cJSON *part = content->child; part; part = part->next) {
            const cJSON *t = cJSON_GetObjectItemCaseSensitive(part, "text");
            if (cJSON_IsString(t)) final = t->valuestring; /* the last text part wins */
        }
        if (!final) {
            ipl_errf(err, errlen, "continue_final_message is set but we could not find any text "
                               "to continue in the final message!");
            return IPL_E_INVAL;
        }
    }
    if (!final) {
        ipl_errf(err, errlen, "continue_final_message is set but the final message has no text "
                           "content");
        return IPL_E_INVAL;
    }
    ipl_jv_t whole = ipl_jv_cstr(final);
    ipl_jv_t stripped = ipl_jstr_strip(whole, NULL, 'b');
    ipl_jv_t lstripped = ipl_jstr_strip(whole, NULL, 'l');
    /* rindex of the stripped content */
    size_t at = SIZE_MAX;
    if (stripped.u.s.n <= *len)
        for (size_t k = *len - stripped.u.s.n + 1; k-- > 0;)
            if (memcmp(text + k, stripped.u.s.p, stripped.u.s.n) == 0) {
                at = k;
                break;
            }
    if (at == SIZE_MAX) {
        ipl_errf(err, errlen, "continue_final_message is set but the final message does not "
                           "appear in the chat after applying the chat template! This can "
                           "happen if the chat template deletes portions of the final message. "
                           "Please verify the chat template and final message in your chat to "
                           "ensure they are compatible.");
        return IPL_E_INVAL;
    }
    /* Python compares text[at:at+len(lstripped)] with the whole content: equal only when
     * the content has no leading whitespace and the template kept its trailing whitespace */
    size_t fl = whole.u.s.n;
    bool verbatim = lstripped.u.s.n == fl && at + fl <= *len && memcmp(text + at, final, fl) == 0;
    size_t keep = verbatim ? fl : stripped.u.s.n;
    *len = at + keep;
    text[*len] = '\0';
    return 0;
}

int ipl_template_render(const ipl_template_t *self, const cJSON *messages, const cJSON *tools,
                        bool add_generation_prompt, bool continue_final_message,
                        const cJSON *kwargs, char **out, size_t *len, char *err, size_t errlen)
{
    if (err && errlen) err[0] = '\0';
    if (out) *out = NULL;
    if (len) *len = 0;
    if (!self || !out || !cJSON_IsArray(messages)) {
        ipl_errf(err, errlen, "messages must be a JSON array");
        return IPL_E_INVAL;
    }
    if (tools && !cJSON_IsArray(tools) && !cJSON_IsNull(tools)) {
        ipl_errf(err, errlen, "tools must be a JSON array or null");
        return IPL_E_INVAL;
    }
    if (tools && cJSON_IsNull(tools)) tools = NULL;
    if (kwargs && !cJSON_IsObject(kwargs) && !cJSON_IsNull(kwargs)) {
        ipl_errf(err, errlen, "chat template kwargs must be a JSON object");
        return IPL_E_INVAL;
    }
    if (continue_final_message && add_generation_prompt) {
        ipl_errf(err, errlen, "continue_final_message and add_generation_prompt are not compatible. "
                           "Use continue_final_message when you want the model to continue the "
                           "final message, and add_generation_prompt when you want to add a "
                           "header that will prompt it to start a new assistant message instead.");
        return IPL_E_INVAL;
    }
    const ipl_jinja_t *tpl = s_pick(self, tools != NULL);
    if (!tpl) {
        ipl_errf(err, errlen, "this model's chat templates have no \"default\"%s",
              tools ? " nor \"tool_use\"" : "");
        return IPL_E_NOTFOUND;
    }
    cJSON *vars = cJSON_CreateObject();
    if (!vars) return IPL_E_NOMEM;
    cJSON_AddItemToObject(vars, "messages", s_ref(messages));
    cJSON_AddItemToObject(vars, "tools", tools ? s_ref(tools) : cJSON_CreateNull());
    cJSON_AddItemToObject(vars, "documents", cJSON_CreateNull());
    cJSON_AddItemToObject(vars, "add_generation_prompt", cJSON_CreateBool(add_generation_prompt));
    for (size_t i = 0; i < S_NSPECIAL; i++)
        if (self->special[i])
            cJSON_AddItemToObject(vars, s_special[i], cJSON_CreateStringReference(self->special[i]));
    if (self->additional)
        cJSON_AddItemToObject(vars, "additional_special_tokens", s_ref(self->additional));
    if (kwargs && cJSON_IsObject(kwargs)) {
        for (const cJSON *k = kwargs->child; k; k = k->next) {
            if (!k->string) continue;
            if (!strcmp(k->string, "messages") || !strcmp(k->string, "tools") ||
                !strcmp(k->string, "documents") || !strcmp(k->string, "add_generation_prompt")) {
                ipl_errf(err, errlen, "chat template kwargs: '%s' is given twice (it is a "
                                   "parameter of its own)", k->string);
                cJSON_Delete(vars);
                return IPL_E_INVAL;
            }
            cJSON_AddItemToObject(vars, k->string, s_ref(k));
        }
    }
    char *text = NULL;
    size_t n = 0;
    int rc = ipl_jinja_render(tpl, vars, &self->limits, &text, &n, err, errlen);
    cJSON_Delete(vars);
    if (rc == 0 && continue_final_message) {
        rc = s_continue_final(messages, text, &n, err, errlen);
        if (rc) {
            free(text);
            text = NULL;
        }
    }
    if (rc) return rc;
    *out = text;
    if (len) *len = n;
    return 0;
}
