/*
 * ipl_jinja_lex — splits a Jinja template into tokens, with Jinja2's whitespace rules.
 *
 * The settings are those Hugging Face transformers renders chat templates with (vLLM uses
 * them): trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False, default
 * delimiters. Concretely, as Jinja2's lexer does:
 *   - newlines are normalised ("\r\n" and "\r" become "\n") and one trailing "\n" of the
 *     template is dropped;
 *   - "{%-", "{{-", "{#-" strip all whitespace before the tag; "-%}", "-}}", "-#}" all after;
 *   - trim_blocks: the first "\n" after a block or comment tag ("%}", "#}", not "}}") is
 *     dropped ("+%}" keeps it);
 *   - lstrip_blocks: spaces and tabs between the start of a line and a block or comment tag
 *     are dropped ("{%+" keeps them);
 *   - "{% raw %}...{% endraw %}" is text;
 *   - comments produce no token.
 * The text between tags becomes DATA tokens (already trimmed); inside a tag, the usual
 * expression tokens. String literals are unescaped as Python's unicode-escape does.
 *
 * Token text points into the arena passed to ipl_jlex (the normalised copy of the source),
 * so tokens live as long as the arena.
 */
#ifndef IPL_JINJA_LEX_H
#define IPL_JINJA_LEX_H

#include <stddef.h>
#include <stdint.h>

#include "ipl_jinja_value.h"

typedef enum {
    IPL_JT_EOF = 0,
    IPL_JT_DATA,
    IPL_JT_VAR_BEGIN,   /* {{ */
    IPL_JT_VAR_END,     /* }} */
    IPL_JT_BLOCK_BEGIN, /* {% */
    IPL_JT_BLOCK_END,   /* %} */
    IPL_JT_NAME,
    IPL_JT_STRING, /* p/n: the unescaped value */
    IPL_JT_INT,    /* i */
    IPL_JT_FLOAT,  /* f */
    IPL_JT_OP,     /* op: one of IPL_JOP_* */
} ipl_jtok_type_t;

typedef enum {
    IPL_JOP_NONE = 0,
    IPL_JOP_ADD,      /* + */
    IPL_JOP_SUB,      /* - */
    IPL_JOP_MUL,      /* * */
    IPL_JOP_DIV,      /* / */
    IPL_JOP_FLOORDIV, /* // */
    IPL_JOP_MOD,      /* % */
    IPL_JOP_POW,      /* ** */
    IPL_JOP_TILDE,    /* ~ */
    IPL_JOP_LBRACKET,
    IPL_JOP_RBRACKET,
    IPL_JOP_LPAREN,
    IPL_JOP_RPAREN,
    IPL_JOP_LBRACE,
    IPL_JOP_RBRACE,
    IPL_JOP_EQ,   /* == */
    IPL_JOP_NE,   /* != */
    IPL_JOP_GT,   /* > */
    IPL_JOP_GTEQ, /* >= */
    IPL_JOP_LT,   /* < */
    IPL_JOP_LTEQ, /* <= */
    IPL_JOP_ASSIGN,
    IPL_JOP_DOT,
    IPL_JOP_COLON,
    IPL_JOP_PIPE,
    IPL_JOP_COMMA,
    IPL_JOP_SEMICOLON,
} ipl_jop_t;

typedef struct {
    uint8_t type; /* ipl_jtok_type_t */
    uint8_t op;   /* ipl_jop_t, for IPL_JT_OP */
    uint32_t line, col; /* 1-based, of the token's first character */
    const char *p;      /* DATA, NAME, STRING: the text */
    size_t n;
    int64_t i;
    double f;
} ipl_jtok_t;

/* Tokenises src[0..n). On success returns 0 and sets *toks (arena-allocated, ending with an
 * EOF token) and *ntoks (EOF included). On a syntax error returns -1 with "LINE:COL: what"
 * in err (unterminated tag, comment or string, a bad escape, an unexpected character). The
 * arena must check its allocations itself (no on_oom that jumps): -1 "out of memory". */
int ipl_jlex(const char *src, size_t n, ipl_jarena_t *a, ipl_jtok_t **toks, size_t *ntoks,
             char *err, size_t errlen);

/* The source text of an operator ("+", "//", "==", ...), for messages. */
const char *ipl_jop_text(int op);

#endif
