/*
 * ipl_jinja_builtin — the filters, tests, methods and global functions of the Jinja engine.
 *
 * Each is identified by a small integer that the parser looks up by name at load time (an
 * unknown name is a load error, so a template we cannot render is refused up front) and the
 * evaluator passes back with already-evaluated arguments. Semantics are Jinja2 3.x's and
 * Python's, with transformers' chat-template additions (tojson with ensure_ascii / indent /
 * separators / sort_keys and no HTML escaping; raise_exception; strftime_now).
 *
 *   filters  abs attr capitalize count d default dictsort e escape first float format
 *            indent int items join last length list lower map max min reject rejectattr
 *            replace reverse round safe select selectattr sort string sum title tojson trim
 *            unique upper wordcount
 *   tests    boolean callable defined divisibleby eq equalto escaped even false float ge gt
 *            in integer iterable le lower lt mapping ne none number odd sameas sequence
 *            string true undefined upper == != < <= > >=
 *   methods  str: capitalize count endswith find format index isalnum isalpha isdigit
 *            islower isspace isupper join lower lstrip replace rfind rsplit rstrip split
 *            splitlines startswith strip title upper
 *            dict: get items keys values     list: count index
 *   globals  dict namespace range raise_exception strftime_now
 *
 * Case mapping (upper, lower, title, capitalize) covers ASCII, Latin-1, Latin Extended-A,
 * Greek and Cyrillic; other cased scripts are an error rather than a silently different prompt.
 */
#ifndef IPL_JINJA_BUILTIN_H
#define IPL_JINJA_BUILTIN_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "ipl_jinja_value.h"

/* What a builtin needs from the evaluator. */
typedef struct ipl_jenv ipl_jenv_t;
struct ipl_jenv {
    ipl_jarena_t *a;
    /* Raises a render error (printf-style); never returns. */
    void (*fail)(ipl_jenv_t *env, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
    /* strftime_now's clock: 0 means time(NULL). */
    time_t now;
    size_t max_list; /* bound on lists a builtin builds (range, split, ...) */
};

/* Evaluated call arguments: positional v[0..n), keyword kw[0..nkw). */
typedef struct {
    const char *name;
    size_t len;
    ipl_jv_t v;
} ipl_jkwarg_t;

typedef struct {
    size_t n, nkw;
    ipl_jv_t *v;
    ipl_jkwarg_t *kw;
} ipl_jargs_t;

/* Name → id, or -1 when unknown. */
int ipl_jbuiltin_filter_id(const char *name, size_t n);
int ipl_jbuiltin_test_id(const char *name, size_t n);
int ipl_jbuiltin_method_id(const char *name, size_t n);
int ipl_jbuiltin_global_id(const char *name, size_t n);
/* Id → name. */
const char *ipl_jbuiltin_filter_name(int id);
const char *ipl_jbuiltin_method_name(int id);

/* Calls them. Errors go through env->fail. */
ipl_jv_t ipl_jbuiltin_filter(ipl_jenv_t *env, int id, ipl_jv_t operand, const ipl_jargs_t *args);
bool ipl_jbuiltin_test(ipl_jenv_t *env, int id, ipl_jv_t operand, const ipl_jargs_t *args);
ipl_jv_t ipl_jbuiltin_method(ipl_jenv_t *env, int id, ipl_jv_t self, const ipl_jargs_t *args);
ipl_jv_t ipl_jbuiltin_global(ipl_jenv_t *env, int id, const ipl_jargs_t *args);

/* True when Python's getattr(self, name) finds a method (e.g. dict.items): Jinja2's
 * `x.items` then means the method, not the key "items". */
bool ipl_jbuiltin_is_method_of(ipl_jv_t self, const char *name, size_t n);

/* str(v) as a new arena string (for ~, join, string, ...); a CALL fails through env. */
ipl_jv_t ipl_jbuiltin_to_str(ipl_jenv_t *env, ipl_jv_t v);

/* Python's `fmt % arg` for strings (%s %d %i %r %% only; a tuple spreads). */
ipl_jv_t ipl_jbuiltin_percent(ipl_jenv_t *env, ipl_jv_t fmt, ipl_jv_t arg);

/* Python `needle in haystack`. */
bool ipl_jbuiltin_contains(ipl_jenv_t *env, ipl_jv_t haystack, ipl_jv_t needle);

#endif
