/*
 * ipl_template — a model's chat template, loaded and applied as Hugging Face transformers
 * (and so vLLM) apply it: the prompt text vLLM would tokenize for a chat request.
 *
 *     ipl_template_t *t = ipl_template_load("/models/qwen3", err, sizeof err);
 *     char *prompt; size_t n;
 *     int rc = ipl_template_render(t, messages, tools, true, false, kwargs, &prompt, &n,
 *                                  err, sizeof err);
 *     ... tokenize prompt with add_special_tokens=false (the template wrote the BOS) ...
 *     free(prompt);
 *     ipl_template_destroy(&t);
 *
 * Loading a model folder, as transformers' tokenizer loading does:
 *   - the template: `chat_template.jinja` when present (plus named templates
 *     `additional_chat_templates/NAME.jinja`); otherwise `chat_template` of
 *     `tokenizer_config.json`, a string or a list of {"name", "template"}; otherwise
 *     `chat_template.json`'s "chat_template" (processor folders);
 *   - the special tokens bos_token, eos_token, unk_token, sep_token, pad_token, cls_token,
 *     mask_token (a string or an AddedToken object {"content": ...}) and
 *     additional_special_tokens, passed to the template as variables when set;
 *   - add_bos_token (for plain-text prompts; a chat prompt's BOS comes from the template).
 * Every template is parsed once here; an unsupported construct fails the load with
 * "FILE: LINE:COL: what".
 *
 * Rendering (transformers' apply_chat_template with tokenize=False):
 *   - the template: with named templates, "tool_use" when tools is given (not NULL) and one
 *     exists, else "default";
 *   - the variables: messages, tools (None when NULL), documents (None),
 *     add_generation_prompt, the special tokens, then the members of `kwargs` (vLLM's
 *     chat_template_kwargs, e.g. {"enable_thinking": false}), which may override the
 *     special tokens but not the first four (an error, as in Python);
 *   - continue_final_message: the text is cut after the final message's content, so the
 *     model continues it (incompatible with add_generation_prompt, as in transformers).
 * `messages` is used as given: callers that want vLLM's exact input apply vLLM's message
 * preprocessing first (content parts, tool-call arguments parsed from JSON strings).
 *
 * Thread-safety: a loaded template is immutable; renders may run concurrently.
 */
#ifndef IPL_TEMPLATE_H
#define IPL_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>

#include "ipl_jinja.h"

struct cJSON;

typedef struct ipl_template ipl_template_t;

/* Loads the chat template of a model folder (see above). NULL with a message in err when the
 * folder has no readable tokenizer_config.json nor chat_template.jinja, when no template is
 * found ("... has no chat template"), or when a template does not parse. */
ipl_template_t *ipl_template_load(const char *dir, char *err, size_t errlen);

/* The same from parsed parts: `config` is tokenizer_config.json's object (borrowed, may be
 * NULL), `jinja` a separate chat_template.jinja text (may be NULL: the config's is used).
 * `origin` names the source in error messages (e.g. a path). */
ipl_template_t *ipl_template_new(const struct cJSON *config, const char *jinja,
                                 const char *origin, char *err, size_t errlen);

void ipl_template_destroy(ipl_template_t **self_p);

/* Renders the prompt. messages: a JSON array (borrowed); tools: an array or NULL; kwargs: an
 * object or NULL. On success 0, *out malloc'd (NUL-terminated; the caller frees), *len its
 * length. Errors (message in err): IPL_E_INVAL for bad arguments or the template's own
 * raise_exception (err is then the template's message), IPL_E_NOTFOUND when no template
 * applies (named templates without "default"), and ipl_jinja_render's other codes. */
int ipl_template_render(const ipl_template_t *self, const struct cJSON *messages,
                        const struct cJSON *tools, bool add_generation_prompt,
                        bool continue_final_message, const struct cJSON *kwargs, char **out,
                        size_t *len, char *err, size_t errlen);

/* Render limits for every later render (defaults: ipl_jinja's). */
void ipl_template_set_limits(ipl_template_t *self, const ipl_jinja_limits_t *limits);

/* The special tokens as loaded ("" when unset; borrowed, valid while self lives). */
const char *ipl_template_bos_token(const ipl_template_t *self);
const char *ipl_template_eos_token(const ipl_template_t *self);

/* tokenizer_config.json's add_bos_token: 1 true, 0 false, -1 absent. */
int ipl_template_add_bos_token(const ipl_template_t *self);

/* True when a template reads the variable `name` (vLLM passes a chat_template_kwargs entry
 * only then; callers can do the same). */
bool ipl_template_uses(const ipl_template_t *self, const char *name);

#endif
