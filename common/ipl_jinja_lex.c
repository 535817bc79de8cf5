/*
 * ipl_jinja_lex — the Jinja tokenizer (see ipl_jinja_lex.h).
 *
 * One pass over the normalised source. Text runs are cut at the next "{{", "{%" or "{#";
 * each run is trimmed by the whitespace rules of the tags on both sides of it, then the tag
 * is tokenised up to its end delimiter, which counts only when brackets are balanced (so
 * "{{ {'a': {'b': 1}} }}" works, as in Jinja2).
 */
#include "ipl_jinja_lex.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipl_unicode.h"

typedef struct {
    const char *s; /* the normalised source */
    size_t n;
    size_t pos;
    ipl_jarena_t *a;
    ipl_jtok_t *toks;
    size_t ntoks, cap;
    char *err;
    size_t errlen;
    /* the whitespace state left by the previous tag */
    bool strip_lead;    /* it ended with "-": strip all leading whitespace of the next text */
    bool line_starting; /* what it consumed ended with "\n" (or the template starts here) */
} s_lexer_t;

static const char *const s_op_text[] = {
    [IPL_JOP_ADD] = "+",      [IPL_JOP_SUB] = "-",       [IPL_JOP_MUL] = "*",
    [IPL_JOP_DIV] = "/",      [IPL_JOP_FLOORDIV] = "//", [IPL_JOP_MOD] = "%",
    [IPL_JOP_POW] = "**",     [IPL_JOP_TILDE] = "~",     [IPL_JOP_LBRACKET] = "[",
    [IPL_JOP_RBRACKET] = "]", [IPL_JOP_LPAREN] = "(",    [IPL_JOP_RPAREN] = ")",
    [IPL_JOP_LBRACE] = "{",   [IPL_JOP_RBRACE] = "}",    [IPL_JOP_EQ] = "==",
    [IPL_JOP_NE] = "!=",      [IPL_JOP_GT] = ">",        [IPL_JOP_GTEQ] = ">=",
    [IPL_JOP_LT] = "<",       [IPL_JOP_LTEQ] = "<=",     [IPL_JOP_ASSIGN] = "=",
    [IPL_JOP_DOT] = ".",      [IPL_JOP_COLON] = ":",     [IPL_JOP_PIPE] = "|",
    [IPL_JOP_COMMA] = ",",    [IPL_JOP_SEMICOLON] = ";",
};

const char *ipl_jop_text(int op)
{
    if (op <= 0 || (size_t)op >= sizeof s_op_text / sizeof *s_op_text || !s_op_text[op])
        return "?";
    return s_op_text[op];
}

/* Line and column (1-based) of byte offset off. */
static void s_where(const s_lexer_t *lx, size_t off, uint32_t *line, uint32_t *col)
{
    uint32_t l = 1, c = 1;
    for (size_t i = 0; i < off && i < lx->n; i++) {
        if (lx->s[i] == '\n') {
            l++;
            c = 1;
        } else if (((unsigned char)lx->s[i] & 0xc0) != 0x80) {
            c++;
        }
    }
    *line = l;
    *col = c;
}

static int s_fail(s_lexer_t *lx, size_t off, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int s_fail(s_lexer_t *lx, size_t off, const char *fmt, ...)
{
    if (!lx->err || !lx->errlen) return -1;
    uint32_t line, col;
    s_where(lx, off, &line, &col);
    int k = snprintf(lx->err, lx->errlen, "%u:%u: ", line, col);
    if (k < 0 || (size_t)k >= lx->errlen) return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(lx->err + k, lx->errlen - (size_t)k, fmt, ap);
    va_end(ap);
    return -1;
}

/* Appends a token starting at byte offset off; NULL when out of memory. Positions are filled
 * in afterwards (one pass over the source, see s_positions). */
static ipl_jtok_t *s_push(s_lexer_t *lx, int type, size_t off)
{
    if (lx->ntoks == lx->cap) {
        size_t cap = lx->cap ? lx->cap * 2 : 64;
        ipl_jtok_t *nt = ipl_jarena_alloc(lx->a, cap * sizeof *nt);
        if (!nt) return NULL;
        if (lx->ntoks) memcpy(nt, lx->toks, lx->ntoks * sizeof *nt);
        lx->toks = nt;
        lx->cap = cap;
    }
    ipl_jtok_t *t = &lx->toks[lx->ntoks++];
    memset(t, 0, sizeof *t);
    t->type = (uint8_t)type;
    t->line = (uint32_t)off; /* the offset, until s_positions */
    return t;
}

/* Turns the offsets parked in .line into line:col, in one forward pass. */
static void s_positions(s_lexer_t *lx)
{
    uint32_t line = 1, col = 1;
    size_t at = 0;
    for (size_t k = 0; k < lx->ntoks; k++) {
        size_t off = lx->toks[k].line;
        for (; at < off && at < lx->n; at++) {
            if (lx->s[at] == '\n') {
                line++;
                col = 1;
            } else if (((unsigned char)lx->s[at] & 0xc0) != 0x80) {
                col++;
            }
        }
        lx->toks[k].line = line;
        lx->toks[k].col = col;
    }
}

/* Length of the Python whitespace code point at s[i], or 0. */
static size_t s_space_at(const char *s, size_t n, size_t i)
{
    unsigned char c = (unsigned char)s[i];
    if (c < 0x80) return (c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f));
    uint32_t cp;
    size_t len = ipl_utf8_next((const unsigned char *)s + i, n - i, &cp);
    return cp != IPL_UNICODE_INVALID && ipl_jv_is_space(cp) ? len : 0;
}

/* End of the whitespace run starting at i (Python's \s*). */
static size_t s_skip_space(const char *s, size_t n, size_t i)
{
    size_t k;
    while (i < n && (k = s_space_at(s, n, i)) > 0) i += k;
    return i;
}

/* Start of the trailing whitespace of s[start..end) (what str.rstrip() keeps ends there).
 * Scans forward: UTF-8 whitespace cannot be recognised walking backwards. */
static size_t s_rstrip(const char *s, size_t start, size_t end)
{
    size_t i = start, run = end; /* run: start of the current whitespace run, end: none */
    while (i < end) {
        size_t k = s_space_at(s, end, i);
        if (k) {
            if (run == end) run = i;
            i += k;
        } else {
            run = end;
            i++;
            while (i < end && ((unsigned char)s[i] & 0xc0) == 0x80) i++;
        }
    }
    return run;
}

/* Emits the text s[start..end) as DATA after the whitespace rules: the previous tag's state
 * (strip_lead) and the next tag's opener at `next` (SIZE_MAX at the end of the template). */
static int s_data(s_lexer_t *lx, size_t start, size_t end, size_t next)
{
    const char *s = lx->s;
    if (lx->strip_lead) start = s_skip_space(s, end, start);
    if (next != SIZE_MAX) {
        char kind = s[next + 1], mod = next + 2 < lx->n ? s[next + 2] : '\0';
        if (mod == '-') {
            end = s_rstrip(s, start, end);
        } else if ((kind == '%' || kind == '#') && mod != '+') {
            /* lstrip_blocks: only spaces and tabs between the line start and the tag */
            size_t k = end;
            while (k > start && (s[k - 1] == ' ' || s[k - 1] == '\t')) k--;
            if ((k > start && s[k - 1] == '\n') || (k == start && lx->line_starting)) end = k;
        }
    }
    if (end > start) {
        ipl_jtok_t *t = s_push(lx, IPL_JT_DATA, start);
        if (!t) return s_fail(lx, start, "out of memory");
        t->p = s + start;
        t->n = end - start;
    }
    return 0;
}

/* Where the next "{{", "{%" or "{#" starts at or after i, or SIZE_MAX. */
static size_t s_next_tag(const s_lexer_t *lx, size_t i)
{
    while (i + 1 < lx->n) {
        const char *p = memchr(lx->s + i, '{', lx->n - i - 1);
        if (!p) return SIZE_MAX;
        i = (size_t)(p - lx->s);
        char c = lx->s[i + 1];
        if (c == '{' || c == '%' || c == '#') return i;
        i++;
    }
    return SIZE_MAX;
}

/* After a tag's closing delimiter at [end_at, after): set the whitespace state. `minus`: the
 * delimiter had "-" (eat all whitespace); `block`: a block/comment end (trim_blocks);
 * `plus`: "+%}" (keep the newline). */
static void s_after_tag(s_lexer_t *lx, size_t after, bool minus, bool block, bool plus)
{
    lx->pos = after;
    lx->strip_lead = false;
    lx->line_starting = false;
    if (minus) {
        size_t e = s_skip_space(lx->s, lx->n, after);
        lx->line_starting = e > after && lx->s[e - 1] == '\n';
        lx->pos = e;
    } else if (block && !plus && after < lx->n && lx->s[after] == '\n') {
        lx->pos = after + 1;
        lx->line_starting = true;
    }
}

/* Decodes a string literal whose opening quote is at s[i]; sets *end past the closing quote. */
static int s_string(s_lexer_t *lx, size_t i, size_t *end, ipl_jtok_t *t)
{
    const char *s = lx->s;
    char q = s[i];
    size_t j = i + 1;
    /* the decoded text is never longer than the literal */
    size_t close = j;
    while (close < lx->n && s[close] != q) close += s[close] == '\\' ? 2 : 1;
    if (close >= lx->n) return s_fail(lx, i, "unterminated string literal");
    char *out = ipl_jarena_alloc(lx->a, close - j + 1);
    if (!out) return s_fail(lx, i, "out of memory");
    size_t o = 0;
    while (j < close) {
        char c = s[j];
        if (c != '\\') {
            out[o++] = c;
            j++;
            continue;
        }
        char e = s[j + 1];
        j += 2;
        uint32_t cp = 0;
        int digits = 0;
        switch (e) {
        case '\n': continue; /* a line continuation */
        case '\\': out[o++] = '\\'; continue;
        case '\'': out[o++] = '\''; continue;
        case '"': out[o++] = '"'; continue;
        case 'a': out[o++] = '\a'; continue;
        case 'b': out[o++] = '\b'; continue;
        case 'f': out[o++] = '\f'; continue;
        case 'n': out[o++] = '\n'; continue;
        case 'r': out[o++] = '\r'; continue;
        case 't': out[o++] = '\t'; continue;
        case 'v': out[o++] = '\v'; continue;
        case 'x': digits = 2; break;
        case 'u': digits = 4; break;
        case 'U': digits = 8; break;
        case 'N': return s_fail(lx, j - 2, "\\N{...} escapes are not supported");
        default:
            if (e >= '0' && e <= '7') {
                cp = (uint32_t)(e - '0');
                for (int k = 0; k < 2 && j < close && s[j] >= '0' && s[j] <= '7'; k++)
                    cp = cp * 8 + (uint32_t)(s[j++] - '0');
                o += ipl_utf8_put(cp, (unsigned char *)out + o);
                continue;
            }
            out[o++] = '\\'; /* unknown escapes stay as written, as in Python */
            out[o++] = e;
            continue;
        }
        for (int k = 0; k < digits; k++, j++) {
            char h = j < close ? s[j] : '\0';
            int v = h >= '0' && h <= '9'   ? h - '0'
                    : h >= 'a' && h <= 'f' ? h - 'a' + 10
                    : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                           : -1;
            if (v < 0) return s_fail(lx, j, "truncated \\%c escape in a string literal", e);
            cp = cp * 16 + (uint32_t)v;
        }
        if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return s_fail(lx, j, "escape \\%c in a string literal is not a valid code point", e);
        /* the decoded form of an escape is at most as long as the escape */
        o += ipl_utf8_put(cp, (unsigned char *)out + o);
    }
    out[o] = '\0';
    t->p = out;
    t->n = o;
    *end = close + 1;
    return 0;
}

static bool s_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* A number at s[i]: Python-style integers (with "_", 0x/0o/0b) and floats. */
static int s_number(s_lexer_t *lx, size_t i, size_t *end, ipl_jtok_t *t, bool after_dot)
{
    const char *s = lx->s;
    char buf[128];
    size_t b = 0, j = i;
    int base = 10;
    if (s[j] == '0' && j + 1 < lx->n && strchr("xXoObB", s[j + 1]) && s[j + 1]) {
        char k = (char)(s[j + 1] | 0x20);
        base = k == 'x' ? 16 : k == 'o' ? 8 : 2;
        j += 2;
    }
    bool is_float = false;
    for (; j < lx->n && b < sizeof buf - 1; j++) {
        char c = s[j];
        if (c == '_') continue;
        if (base == 16 ? !!strchr("0123456789abcdefABCDEF", c) && c : s_digit(c)) {
            buf[b++] = c;
        } else if (base == 10 && !after_dot && c == '.' && !is_float && j + 1 < lx->n &&
                   s_digit(s[j + 1])) {
            buf[b++] = c;
            is_float = true;
        } else if (base == 10 && !after_dot && (c == 'e' || c == 'E') && j + 1 < lx->n &&
                   (s_digit(s[j + 1]) ||
                    ((s[j + 1] == '+' || s[j + 1] == '-') && j + 2 < lx->n &&
                     s_digit(s[j + 2])))) {
            buf[b++] = 'e';
            if (s[j + 1] == '+' || s[j + 1] == '-') buf[b++] = s[++j];
            is_float = true;
        } else {
            break;
        }
    }
    buf[b] = '\0';
    if (b == 0) return s_fail(lx, i, "malformed number");
    errno = 0;
    if (is_float) {
        t->type = IPL_JT_FLOAT;
        t->f = strtod(buf, NULL);
    } else {
        t->type = IPL_JT_INT;
        unsigned long long v = strtoull(buf, NULL, base);
        if (errno || v > INT64_MAX) return s_fail(lx, i, "integer literal too large");
        t->i = (int64_t)v;
    }
    *end = j;
    return 0;
}

static bool s_name_start(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool s_name_char(char c)
{
    return s_name_start(c) || s_digit(c);
}

/* Matches an operator at s[i]: sets *op and returns its length, or 0. */
static size_t s_operator(const char *s, size_t n, size_t i, int *op)
{
    char c = s[i], d = i + 1 < n ? s[i + 1] : '\0';
    static const struct {
        char a, b;
        int op;
    } two[] = {{'/', '/', IPL_JOP_FLOORDIV}, {'*', '*', IPL_JOP_POW}, {'=', '=', IPL_JOP_EQ},
               {'!', '=', IPL_JOP_NE},       {'>', '=', IPL_JOP_GTEQ}, {'<', '=', IPL_JOP_LTEQ}};
    for (size_t k = 0; k < sizeof two / sizeof *two; k++)
        if (c == two[k].a && d == two[k].b) {
            *op = two[k].op;
            return 2;
        }
    static const char one[] = "+-*/%~[](){}><=.:|,;";
    static const int one_op[] = {
        IPL_JOP_ADD,      IPL_JOP_SUB,      IPL_JOP_MUL,    IPL_JOP_DIV,    IPL_JOP_MOD,
        IPL_JOP_TILDE,    IPL_JOP_LBRACKET, IPL_JOP_RBRACKET, IPL_JOP_LPAREN, IPL_JOP_RPAREN,
        IPL_JOP_LBRACE,   IPL_JOP_RBRACE,   IPL_JOP_GT,     IPL_JOP_LT,     IPL_JOP_ASSIGN,
        IPL_JOP_DOT,      IPL_JOP_COLON,    IPL_JOP_PIPE,   IPL_JOP_COMMA,  IPL_JOP_SEMICOLON};
    const char *p = c ? strchr(one, c) : NULL;
    if (!p) return 0;
    *op = one_op[p - one];
    return 1;
}

/* Tokenises the inside of a "{{" or "{%" tag opened at `open`; `block` for "{%". */
static int s_tag(s_lexer_t *lx, size_t open, bool block)
{
    const char *s = lx->s;
    size_t i = open + 2;
    if (i < lx->n && (s[i] == '-' || (block && s[i] == '+'))) i++;
    if (!s_push(lx, block ? IPL_JT_BLOCK_BEGIN : IPL_JT_VAR_BEGIN, open))
        return s_fail(lx, open, "out of memory");
    size_t first = lx->ntoks;
    int depth = 0;
    char close = block ? '%' : '}';
    for (;;) {
        i = s_skip_space(s, lx->n, i);
        if (i >= lx->n)
            return s_fail(lx, open, "unexpected end of template: this tag is not closed with "
                                    "'%s'", block ? "%}" : "}}");
        if (depth == 0) {
            bool minus = s[i] == '-' && i + 2 < lx->n && s[i + 1] == close && s[i + 2] == '}';
            bool plus = block && s[i] == '+' && i + 2 < lx->n && s[i + 1] == '%' &&
                        s[i + 2] == '}';
            bool bare = s[i] == close && i + 1 < lx->n && s[i + 1] == '}';
            if (minus || plus || bare) {
                if (!s_push(lx, block ? IPL_JT_BLOCK_END : IPL_JT_VAR_END, i))
                    return s_fail(lx, i, "out of memory");
                size_t after = i + (bare ? 2 : 3);
                s_after_tag(lx, after, minus, block, plus);
                /* {% raw %}: everything up to {% endraw %} is text */
                if (block && lx->ntoks - first == 2 && lx->toks[first].type == IPL_JT_NAME &&
                    lx->toks[first].n == 3 && memcmp(lx->toks[first].p, "raw", 3) == 0)
                    return 1;
                return 0;
            }
        }
        ipl_jtok_t *t = s_push(lx, IPL_JT_OP, i);
        if (!t) return s_fail(lx, i, "out of memory");
        char c = s[i];
        size_t end = i;
        int op = 0;
        if (c == '\'' || c == '"') {
            t->type = IPL_JT_STRING;
            if (s_string(lx, i, &end, t) < 0) return -1;
        } else if (s_digit(c)) {
            bool after_dot = lx->ntoks >= 2 && lx->toks[lx->ntoks - 2].type == IPL_JT_OP &&
                             lx->toks[lx->ntoks - 2].op == IPL_JOP_DOT;
            if (s_number(lx, i, &end, t, after_dot) < 0) return -1;
        } else if (s_name_start(c)) {
            end = i + 1;
            while (end < lx->n && s_name_char(s[end])) end++;
            t->type = IPL_JT_NAME;
            t->p = s + i;
            t->n = end - i;
        } else if ((end = s_operator(s, lx->n, i, &op)) > 0) {
            t->op = (uint8_t)op;
            if (op == IPL_JOP_LPAREN || op == IPL_JOP_LBRACKET || op == IPL_JOP_LBRACE) depth++;
            if ((op == IPL_JOP_RPAREN || op == IPL_JOP_RBRACKET || op == IPL_JOP_RBRACE) &&
                depth > 0)
                depth--;
            end += i;
        } else {
            if ((unsigned char)c >= 0x80)
                return s_fail(lx, i, "unexpected character in a tag (only ASCII names and "
                                     "operators are allowed outside strings)");
            return s_fail(lx, i, "unexpected character '%c' in a tag", c);
        }
        i = end;
    }
}

/* After "{% raw %}": finds "{% endraw %}", emits the text between as DATA. */
static int s_raw(s_lexer_t *lx, size_t tag)
{
    /* drop the three tokens "{%", "raw", "%}" */
    lx->ntoks -= 3;
    const char *s = lx->s;
    size_t start = lx->pos, i = start;
    for (;;) {
        size_t q = s_next_tag(lx, i);
        if (q == SIZE_MAX) return s_fail(lx, tag, "{%% raw %%} without {%% endraw %%}");
        if (s[q + 1] != '%') {
            i = q + 1;
            continue;
        }
        size_t j = q + 2;
        bool minus_open = j < lx->n && s[j] == '-';
        if (j < lx->n && (s[j] == '-' || s[j] == '+')) j++;
        j = s_skip_space(s, lx->n, j);
        if (lx->n - j < 6 || memcmp(s + j, "endraw", 6) != 0) {
            i = q + 1;
            continue;
        }
        j = s_skip_space(s, lx->n, j + 6);
        bool minus = j < lx->n && s[j] == '-', plus = j < lx->n && s[j] == '+';
        if (minus || plus) j++;
        if (lx->n - j < 2 || s[j] != '%' || s[j + 1] != '}') {
            i = q + 1;
            continue;
        }
        size_t end = q;
        if (minus_open) end = s_rstrip(s, start, end);
        if (lx->strip_lead) start = s_skip_space(s, end, start);
        if (end > start) {
            ipl_jtok_t *t = s_push(lx, IPL_JT_DATA, start);
            if (!t) return s_fail(lx, start, "out of memory");
            t->p = s + start;
            t->n = end - start;
        }
        s_after_tag(lx, j + 2, minus, true, plus);
        return 0;
    }
}

/* Normalises newlines and drops one trailing "\n" into an arena copy. */
static char *s_normalise(ipl_jarena_t *a, const char *src, size_t n, size_t *out_n)
{
    char *s = ipl_jarena_alloc(a, n + 1);
    if (!s) return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (src[i] == '\r') {
            s[o++] = '\n';
            if (i + 1 < n && src[i + 1] == '\n') i++;
        } else {
            s[o++] = src[i];
        }
    }
    if (o > 0 && s[o - 1] == '\n') o--;
    s[o] = '\0';
    *out_n = o;
    return s;
}

int ipl_jlex(const char *src, size_t n, ipl_jarena_t *a, ipl_jtok_t **toks, size_t *ntoks,
             char *err, size_t errlen)
{
    s_lexer_t lx = {.a = a, .err = err, .errlen = errlen, .line_starting = true};
    if (err && errlen) err[0] = '\0';
    lx.s = s_normalise(a, src ? src : "", src ? n : 0, &lx.n);
    if (!lx.s) return s_fail(&lx, 0, "out of memory");
    while (lx.pos < lx.n) {
        size_t q = s_next_tag(&lx, lx.pos);
        if (s_data(&lx, lx.pos, q == SIZE_MAX ? lx.n : q, q) < 0) return -1;
        if (q == SIZE_MAX) break;
        char kind = lx.s[q + 1];
        if (kind == '#') {
            const char *e = NULL;
            for (size_t i = q + 2; i + 1 < lx.n; i++)
                if (lx.s[i] == '#' && lx.s[i + 1] == '}') {
                    e = lx.s + i;
                    break;
                }
            if (!e) return s_fail(&lx, q, "unterminated comment: '{#' without '#}'");
            size_t at = (size_t)(e - lx.s);
            bool minus = at > q + 2 && lx.s[at - 1] == '-';
            bool plus = at > q + 2 && lx.s[at - 1] == '+';
            s_after_tag(&lx, at + 2, minus, true, plus);
            continue;
        }
        int rc = s_tag(&lx, q, kind == '%');
        if (rc < 0) return -1;
        if (rc == 1 && s_raw(&lx, q) < 0) return -1;
    }
    if (!s_push(&lx, IPL_JT_EOF, lx.n)) return s_fail(&lx, lx.n, "out of memory");
    s_positions(&lx);
    *toks = lx.toks;
    *ntoks = lx.ntoks;
    return 0;
}
