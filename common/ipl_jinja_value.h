/*
 * ipl_jinja_value — the values a Jinja template computes with, and the arena they live in.
 *
 * The chat-template engine (ipl_jinja.h) evaluates a parsed template against a context built
 * from JSON. Every value it makes during one render (strings, lists, dicts, namespaces, scope
 * frames) is allocated from one ipl_jarena_t and freed at once when the render ends, nginx
 * style: no reference counts, no per-value free. Strings are byte ranges (UTF-8, not
 * NUL-terminated) that point into the arena, into the parsed template, or into the caller's
 * cJSON context, all of which outlive the render.
 *
 * Semantics follow Python and Jinja2 as Hugging Face transformers configures them (what vLLM
 * runs), because the rendered prompt must be byte-identical to vLLM's:
 *
 *     type     str() (what {{ x }} prints)   truthy when
 *     UNDEF    ""                            never
 *     NONE     "None"                        never
 *     BOOL     "True" / "False"              true
 *     INT      "42"                          != 0
 *     FLOAT    Python repr: "1.0", "1e-05"   != 0.0
 *     STR      the text                      non-empty
 *     LIST     "['a', 1]" (Python repr)      non-empty   (TUPLE flag: "('a', 1)")
 *     DICT     "{'a': 1}"                    non-empty   insertion-ordered
 *     NS       "<Namespace {...}>"           always      namespace(): a mutable dict
 *     CALL     (not printable)               always      a macro, a bound method, a global
 *
 * Limits: every allocation is counted against the arena's byte budget; when it is exceeded the
 * arena's `on_oom` hook runs (the evaluator longjmps out with an error), so no caller ever sees
 * a NULL from ipl_jarena_alloc.
 *
 * Thread-safety: none; one arena per render, one render per thread.
 */
#ifndef IPL_JINJA_VALUE_H
#define IPL_JINJA_VALUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cJSON;

/* ---- arena ------------------------------------------------------------------------------ */

typedef struct ipl_jarena_chunk ipl_jarena_chunk_t;
typedef struct {
    ipl_jarena_chunk_t *head; /* newest chunk first */
    size_t used;              /* bytes handed out, for the budget */
    size_t budget;            /* 0: unlimited */
    void (*on_oom)(void *arg); /* called (must not return) when the budget or malloc fails */
    void *oom_arg;
} ipl_jarena_t;

/* Zeroes the arena; budget 0 means unlimited; on_oom may be NULL only for arenas whose
 * allocations are checked by the caller (ipl_jarena_alloc then returns NULL). */
void ipl_jarena_init(ipl_jarena_t *self, size_t budget, void (*on_oom)(void *), void *arg);
/* Frees every chunk; the arena can be reused after ipl_jarena_init. */
void ipl_jarena_free(ipl_jarena_t *self);
/* n bytes, 8-aligned, uninitialised. */
void *ipl_jarena_alloc(ipl_jarena_t *self, size_t n);
void *ipl_jarena_zalloc(ipl_jarena_t *self, size_t n);
/* A copy of p[0..n) with a NUL after it. */
char *ipl_jarena_strdup(ipl_jarena_t *self, const char *p, size_t n);

/* ---- values ----------------------------------------------------------------------------- */

typedef enum {
    IPL_JV_UNDEF = 0,
    IPL_JV_NONE,
    IPL_JV_BOOL,
    IPL_JV_INT,
    IPL_JV_FLOAT,
    IPL_JV_STR,
    IPL_JV_LIST,
    IPL_JV_DICT,
    IPL_JV_NS,
    IPL_JV_CALL,
} ipl_jv_type_t;

#define IPL_JV_F_TUPLE 0x01 /* a LIST written as a tuple: repr uses ( ) */
/* A LIST that Python would hold as a generator or iterator (the results of the map, select,
 * reject, selectattr, rejectattr, items, unique and reverse filters): always truthy, no len(),
 * not subscriptable, not printable, not JSON-serialisable, equal only to itself. Templates
 * that test `{% if xs|selectattr(...) %}` get Python's (surprising) answer: true. */
#define IPL_JV_F_GEN 0x02

typedef struct ipl_jlist ipl_jlist_t;
typedef struct ipl_jdict ipl_jdict_t;

typedef struct {
    uint8_t type;  /* ipl_jv_type_t */
    uint8_t flags; /* IPL_JV_F_* */
    uint16_t aux;  /* CALL: what kind of callable (the evaluator's business) */
    union {
        bool b;
        int64_t i;
        double f;
        struct {
            const char *p;
            size_t n;
        } s;
        ipl_jlist_t *l;
        ipl_jdict_t *d;    /* DICT and NS */
        const void *call;  /* CALL: the evaluator's object */
    } u;
} ipl_jv_t;

struct ipl_jlist {
    size_t n, cap;
    ipl_jv_t *v;
};

struct ipl_jdict {
    size_t n, cap;
    ipl_jv_t *k; /* keys (strings, except for dict literals with other keys) */
    ipl_jv_t *v;
};

/* Constructors (no allocation except where an arena is passed). */
ipl_jv_t ipl_jv_undef(void);
ipl_jv_t ipl_jv_none(void);
ipl_jv_t ipl_jv_bool(bool b);
ipl_jv_t ipl_jv_int(int64_t i);
ipl_jv_t ipl_jv_float(double f);
/* A string over p[0..n) (borrowed: it must outlive the render). */
ipl_jv_t ipl_jv_str(const char *p, size_t n);
ipl_jv_t ipl_jv_cstr(const char *s);
ipl_jv_t ipl_jv_list(ipl_jarena_t *a, size_t cap);
ipl_jv_t ipl_jv_dict(ipl_jarena_t *a, size_t cap);

/* Appends v to a LIST (grows it in the arena). */
void ipl_jlist_push(ipl_jarena_t *a, ipl_jv_t *list, ipl_jv_t v);
/* Sets key k (replacing an equal key) in a DICT or NS. */
void ipl_jdict_set(ipl_jarena_t *a, ipl_jv_t *dict, ipl_jv_t k, ipl_jv_t v);
/* The value under string key p[0..n), or NULL. */
ipl_jv_t *ipl_jdict_get(const ipl_jv_t *dict, const char *p, size_t n);
/* The value under any key (Python equality), or NULL. */
ipl_jv_t *ipl_jdict_find(const ipl_jv_t *dict, ipl_jv_t k);

/* JSON (borrowed: strings point into the cJSON tree) to a value: objects become DICTs, arrays
 * LISTs, integral numbers within ±2^53 INTs (the rest FLOATs), as json.loads would give. */
ipl_jv_t ipl_jv_from_json(ipl_jarena_t *a, const struct cJSON *json);

/* Python truthiness. */
bool ipl_jv_truthy(ipl_jv_t v);
/* Python ==. Numbers compare by value across INT/FLOAT/BOOL; UNDEF equals only UNDEF;
 * containers compare deeply (depth-bounded; deeper is unequal). */
bool ipl_jv_equal(ipl_jv_t a, ipl_jv_t b);
/* Python <: sets *lt and returns 0, or returns -1 when the types cannot be ordered. */
int ipl_jv_less(ipl_jv_t a, ipl_jv_t b, bool *lt);
/* Python type name ("str", "int", "list", "dict", "NoneType", "Undefined", ...) for errors. */
const char *ipl_jv_type_name(ipl_jv_t v);

/* ---- text building ---------------------------------------------------------------------- */

/* A growable byte buffer in an arena, with a byte limit (0: none). Exceeding it calls
 * on_limit(arg) (which must not return). */
typedef struct {
    ipl_jarena_t *a;
    char *p;
    size_t n, cap, limit;
    void (*on_limit)(void *arg);
    void *arg;
} ipl_jbuf_t;

void ipl_jbuf_init(ipl_jbuf_t *b, ipl_jarena_t *a, size_t limit, void (*on_limit)(void *),
                   void *arg);
void ipl_jbuf_put(ipl_jbuf_t *b, const char *p, size_t n);
void ipl_jbuf_puts(ipl_jbuf_t *b, const char *s);
void ipl_jbuf_putc(ipl_jbuf_t *b, char c);
void ipl_jbuf_printf(ipl_jbuf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The bytes so far as a STR value (the buffer keeps them; do not append afterwards). */
ipl_jv_t ipl_jbuf_value(ipl_jbuf_t *b);

/* Appends str(v) (see the table above) / repr(v). Returns -1 for a CALL or a container nested
 * deeper than 64 (nothing sensible to print), 0 otherwise. */
int ipl_jv_write_str(ipl_jbuf_t *b, ipl_jv_t v);
int ipl_jv_write_repr(ipl_jbuf_t *b, ipl_jv_t v);
/* Python repr() of a float ("1.0", "0.1", "1e+16", "inf", "nan"). */
void ipl_jv_write_float(ipl_jbuf_t *b, double f);

/* json.dumps options, as transformers' tojson filter passes them. */
typedef struct {
    bool ensure_ascii;
    bool sort_keys;
    int indent;          /* -1: none (one line) */
    const char *item_sep; /* NULL: ", " (or "," with indent) */
    size_t item_sep_n;
    const char *key_sep; /* NULL: ": " */
    size_t key_sep_n;
} ipl_jjson_opts_t;

/* Appends json.dumps(v, ...). Returns -1 for what Python cannot serialise (UNDEF, NS, CALL,
 * a non-scalar dict key, nesting past 64), 0 otherwise. */
int ipl_jv_write_json(ipl_jbuf_t *b, ipl_jv_t v, const ipl_jjson_opts_t *opts);

/* ---- UTF-8 helpers shared by the engine ------------------------------------------------- */

/* Python's str.isspace() for one code point (Unicode White_Space plus U+001C..U+001F). */
bool ipl_jv_is_space(uint32_t cp);
/* Number of code points in p[0..n) (invalid bytes count one each). */
size_t ipl_jv_strlen(const char *p, size_t n);
/* Byte offset of code point index i (0 <= i <= strlen). */
size_t ipl_jv_offset(const char *p, size_t n, size_t i);

#endif
