/*
 * ipl_jinja_ast — the parse tree of a Jinja template, and the parser that builds it.
 *
 * The grammar and operator precedence are Jinja2's (jinja2/parser.py), loosest first:
 *     x if c else y  →  or  →  and  →  not  →  comparisons (== != < <= > >= in, not in)
 *     →  + -  →  ~  →  * / // %  →  **  →  unary - +  →  postfix (.a [i] [a:b:c] (args))
 *     and filters / tests ( x|f(args), x is [not] t(args) ) binding to the unary operand.
 * Statements: if/elif/else, for (with `if` filter, else), set (expression and block form,
 * with filters, namespace attributes and tuple targets), macro, call (with caller args),
 * filter blocks, break/continue, generation (transformers' tag: renders its body).
 *
 * Everything the evaluator could not run is refused here, with the line and column:
 * unknown statements (include, import, extends, block, with, ...), unknown filters, tests and
 * methods, calls of names that are neither macros of the template nor global functions,
 * recursive loops, *args / **kwargs in calls.
 *
 *     node ──kids──► node, node, ...      one generic node type; `kind` says what the kids
 *       │                                 and `val` (constant, name, text) mean, see below
 *       └─ val: constant / name / text
 *
 * Nodes live in the arena passed to ipl_jparse (the template's), read-only after parsing.
 */
#ifndef IPL_JINJA_AST_H
#define IPL_JINJA_AST_H

#include <stddef.h>
#include <stdint.h>

#include "ipl_jinja_lex.h"
#include "ipl_jinja_value.h"

typedef enum {
    /* expressions */
    IPL_JN_CONST,   /* val */
    IPL_JN_NAME,    /* val: the name */
    IPL_JN_GETATTR, /* kids[0] . val */
    IPL_JN_GETITEM, /* kids[0] [ kids[1] ] */
    IPL_JN_SLICE,   /* kids[0] [ kids[1] : kids[2] : kids[3] ]  (each of 1..3 may be NULL) */
    IPL_JN_CALL,    /* val: function name; id: global id or -1 (a macro or caller); args */
    IPL_JN_METHOD,  /* kids[0] . val (args); id: method id; args from kids[1] */
    IPL_JN_FILTER,  /* kids[0] | id (args); kids[0] NULL in filter blocks (the body) */
    IPL_JN_TEST,    /* kids[0] is [not: op=1] id (args) */
    IPL_JN_KWARG,   /* val = kids[0], inside argument lists */
    IPL_JN_NEG,
    IPL_JN_POS,
    IPL_JN_NOT,
    IPL_JN_BINOP,   /* kids[0] op kids[1], op: IPL_JOP_ADD..IPL_JOP_TILDE */
    IPL_JN_AND,
    IPL_JN_OR,
    IPL_JN_COMPARE, /* kids[0] ops[0] kids[1] ops[1] kids[2] ... */
    IPL_JN_COND,    /* kids[1] if kids[0] else kids[2] (NULL: undefined) */
    IPL_JN_LIST,
    IPL_JN_TUPLE,
    IPL_JN_DICT,    /* kids: key, value, key, value, ... */
    /* statements */
    IPL_JN_BODY,    /* kids: statements */
    IPL_JN_DATA,    /* val: text */
    IPL_JN_OUTPUT,  /* {{ kids[0] }} */
    IPL_JN_IF,      /* kids[0] test, kids[1] body, kids[2] else body / elif IF / NULL */
    IPL_JN_FOR,     /* kids[0] target, [1] iterable, [2] condition|NULL, [3] body, [4] else|NULL */
    IPL_JN_SET,     /* kids[0] target (NAME, TUPLE of NAMEs, GETATTR of a name), kids[1] value */
    IPL_JN_SETBLOCK, /* kids[0] target, kids[1] body, kids[2] filter chain or NULL */
    IPL_JN_MACRO,   /* val: name; kids[0] body; kids[1..] PARAMs; flags: IPL_JN_F_* */
    IPL_JN_CALLBLOCK, /* kids[0] the CALL, kids[1] body, kids[2..] PARAMs of caller */
    IPL_JN_FILTERBLOCK, /* kids[0] filter chain (innermost operand NULL), kids[1] body */
    IPL_JN_BREAK,
    IPL_JN_CONTINUE,
    IPL_JN_PARAM,   /* val: name; kids[0] default or NULL */
} ipl_jnode_kind_t;

/* IPL_JN_MACRO / IPL_JN_CALLBLOCK flags: what the body reads. */
#define IPL_JN_F_VARARGS 0x01
#define IPL_JN_F_KWARGS  0x02
#define IPL_JN_F_CALLER  0x04

/* IPL_JN_COMPARE operators beyond ipl_jop_t. */
#define IPL_JCMP_IN    100
#define IPL_JCMP_NOTIN 101

typedef struct ipl_jnode ipl_jnode_t;
struct ipl_jnode {
    uint8_t kind; /* ipl_jnode_kind_t */
    uint8_t op;
    uint8_t flags;
    int16_t id; /* filter / test / method / global id */
    uint32_t line, col;
    uint32_t nkids;
    ipl_jnode_t **kids;
    uint8_t *ops; /* IPL_JN_COMPARE: nkids - 1 operators */
    ipl_jv_t val;
};

/* Parses tokens (from ipl_jlex) into a BODY node. Returns NULL with "LINE:COL: what" in err.
 * max_depth bounds the nesting of expressions and blocks (the parser recurses). The arena
 * must return NULL on failure (no on_oom). */
ipl_jnode_t *ipl_jparse(const ipl_jtok_t *toks, size_t ntoks, ipl_jarena_t *a, int max_depth,
                        char *err, size_t errlen);

#endif
