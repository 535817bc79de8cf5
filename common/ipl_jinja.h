/*
 * ipl_jinja — a Jinja template engine for chat templates: parse once, render many times.
 *
 *     ipl_jinja_t *t = ipl_jinja_new(text, len, err, sizeof err);   // lex + parse + checks
 *     char *out; size_t n;
 *     int rc = ipl_jinja_render(t, vars, NULL, &out, &n, err, sizeof err);
 *     ...; free(out);
 *     ipl_jinja_destroy(&t);
 *
 * It implements the subset of Jinja2 that Hugging Face chat templates use, with the settings
 * transformers (and so vLLM) renders them with: trim_blocks, lstrip_blocks, no trailing
 * newline, no autoescape, loop controls (break/continue), Python semantics for values and
 * operators (see ipl_jinja_value.h, ipl_jinja_builtin.h for the filters, tests and methods,
 * ipl_jinja_ast.h for the statements). Anything outside the subset is refused by
 * ipl_jinja_new with "LINE:COL: what" — never rendered differently.
 *
 * Rendering walks the parse tree; all its memory comes from one arena freed at the end. It is
 * bounded (ipl_jinja_limits_t): output size, memory, loop iterations plus macro calls, macro
 * nesting; a template that exceeds a bound fails with IPL_E_RANGE instead of hanging.
 *
 * Thread-safety: a parsed template is immutable; any number of threads may render it at once.
 */
#ifndef IPL_JINJA_H
#define IPL_JINJA_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

struct cJSON;

typedef struct ipl_jinja ipl_jinja_t;

typedef struct {
    size_t max_output;     /* bytes of rendered text; default 4 MiB */
    size_t max_memory;     /* bytes of the render arena; default 64 MiB */
    size_t max_iterations; /* loop iterations + macro calls; default 1,000,000 */
    int max_call_depth;    /* nested macro calls; default 40 */
    time_t now;            /* the clock strftime_now reads; 0: time(NULL) */
} ipl_jinja_limits_t;

/* Parses src[0..len). Returns NULL with "LINE:COL: what" in err (syntax errors, unsupported
 * statements, unknown filters / tests / methods / functions, nesting past 100 levels). */
ipl_jinja_t *ipl_jinja_new(const char *src, size_t len, char *err, size_t errlen);

/* Frees the template and NULLs *self_p. */
void ipl_jinja_destroy(ipl_jinja_t **self_p);

/* Renders with the members of `vars` (a cJSON object, borrowed; may be NULL) as the template's
 * variables. limits may be NULL (the defaults). On success returns 0 and sets *out to the
 * malloc'd text (NUL-terminated, the caller frees) and *len to its length. Errors, with a
 * message in err:
 *   IPL_E_INVAL  the template called raise_exception(msg): err is msg, verbatim;
 *   IPL_E_TYPE   an operation Python would refuse (e.g. "a" + 1, undefined.attr):
 *                "LINE:COL: what";
 *   IPL_E_RANGE  a limit was exceeded: "LINE:COL: what";
 *   IPL_E_NOMEM  out of memory. */
int ipl_jinja_render(const ipl_jinja_t *self, const struct cJSON *vars,
                     const ipl_jinja_limits_t *limits, char **out, size_t *len, char *err,
                     size_t errlen);

/* True when the template reads a variable called `name` anywhere (e.g. "tools",
 * "enable_thinking"): what vLLM checks before passing a chat_template_kwargs entry. */
bool ipl_jinja_uses(const ipl_jinja_t *self, const char *name);

#endif
