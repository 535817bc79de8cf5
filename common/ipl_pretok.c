/*
 * ipl_pretok — Split pre-tokenizers by hand (see ipl_pretok.h for what is supported).
 *
 * Every character gets a set of class bits (s_ch_t.cls): its general category group (\p{L},
 * \p{Lu}|\p{Lt}, \p{Ll}, \p{Lm}|\p{Lo}, \p{M}, \p{N}, \p{P}, \p{S}), \s, [\r\n] and DeepSeek's
 * CJK set. A pattern is then a function "end of the match starting at i" that tries the
 * alternatives in order, as a backtracking regex engine does, with the backtracking of each
 * alternative worked out in its comment. The driver (s_stage) runs a pattern the way a regex
 * find-iterator does: leftmost match, then on from its end; a position where nothing matches
 * moves on by one character.
 */
#include "ipl_pretok.h"

#include <string.h>

#include "ipl_unicode.h"

enum {
    C_L = 1 << 0,    /* \p{L} */
    C_N = 1 << 1,    /* \p{N} */
    C_S = 1 << 2,    /* \s (White_Space) */
    C_NL = 1 << 3,   /* [\r\n] */
    C_M = 1 << 4,    /* \p{M} */
    C_P = 1 << 5,    /* \p{P} */
    C_SY = 1 << 6,   /* \p{S} */
    C_UP = 1 << 7,   /* \p{Lu} \p{Lt} */
    C_LOW = 1 << 8,  /* \p{Ll} */
    C_LMO = 1 << 9,  /* \p{Lm} \p{Lo} */
    C_CJK = 1 << 10, /* DeepSeek's [\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff] */
};
#define C_LNS (C_L | C_N | C_S)     /* "other" in [^\s\p{L}\p{N}] is none of these */
#define C_UB  (C_UP | C_LMO | C_M)  /* [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] */
#define C_WB  (C_LOW | C_LMO | C_M) /* [\p{Ll}\p{Lm}\p{Lo}\p{M}] */
#define C_B   (C_LMO | C_M)         /* in both of them */

typedef struct {
    uint32_t cp;
    uint8_t len;
    uint16_t cls;
} s_ch_t;

/* The matchers are inlined into the split loop (GCC and Clang): a call per piece costs more
 * than the matching of a typical 4-byte piece. */
#define S_INLINE static inline __attribute__((always_inline))

/* Class bits of each general category (White_Space and CJK are added per code point). */
static const uint16_t s_gc_cls[IPL_GC_COUNT] = {
    [IPL_GC_LU] = C_L | C_UP,  [IPL_GC_LL] = C_L | C_LOW, [IPL_GC_LT] = C_L | C_UP,
    [IPL_GC_LM] = C_L | C_LMO, [IPL_GC_LO] = C_L | C_LMO, [IPL_GC_MN] = C_M,
    [IPL_GC_MC] = C_M,         [IPL_GC_ME] = C_M,         [IPL_GC_ND] = C_N,
    [IPL_GC_NL] = C_N,         [IPL_GC_NO] = C_N,         [IPL_GC_PC] = C_P,
    [IPL_GC_PD] = C_P,         [IPL_GC_PS] = C_P,         [IPL_GC_PE] = C_P,
    [IPL_GC_PI] = C_P,         [IPL_GC_PF] = C_P,         [IPL_GC_PO] = C_P,
    [IPL_GC_SM] = C_SY,        [IPL_GC_SC] = C_SY,        [IPL_GC_SK] = C_SY,
    [IPL_GC_SO] = C_SY,
};

static uint16_t s_cls_of(uint32_t cp)
{
    uint16_t cls = s_gc_cls[ipl_unicode_category(cp)];
    if (ipl_unicode_is_space(cp)) cls |= C_S;
    if (cp == '\r' || cp == '\n') cls |= C_NL;
    if ((cp >= 0x4E00 && cp <= 0x9FA5) || (cp >= 0x3040 && cp <= 0x30FF)) cls |= C_CJK;
    return cls;
}

/* The classes of ASCII, spelled out (s_cls_of gives the same): letters, digits, the
 * White_Space controls and space, the symbols $+<=>^`|~ (Sc, Sm, Sk), and the rest of the
 * printable characters (punctuation). */
#define S_A(b)                                                                                     \
    (((b) >= 'A' && (b) <= 'Z')                     ? C_L | C_UP                                   \
     : ((b) >= 'a' && (b) <= 'z')                   ? C_L | C_LOW                                  \
     : ((b) >= '0' && (b) <= '9')                   ? C_N                                          \
     : ((b) == '\r' || (b) == '\n')                 ? C_S | C_NL                                   \
     : ((b) == ' ' || ((b) >= '\t' && (b) <= '\r')) ? C_S                                          \
     : ((b) == '$' || (b) == '+' || (b) == '<' || (b) == '=' || (b) == '>' || (b) == '^' ||        \
        (b) == '`' || (b) == '|' || (b) == '~')                                                    \
         ? C_SY                                                                                    \
     : ((b) > ' ' && (b) < 0x7F) ? C_P                                                             \
                                 : 0)
#define S_A8(b)                                                                                    \
    S_A(b), S_A(b + 1), S_A(b + 2), S_A(b + 3), S_A(b + 4), S_A(b + 5), S_A(b + 6), S_A(b + 7)
static const uint16_t s_ascii_cls[128] = {
    S_A8(0),  S_A8(8),  S_A8(16), S_A8(24), S_A8(32), S_A8(40),  S_A8(48),  S_A8(56),
    S_A8(64), S_A8(72), S_A8(80), S_A8(88), S_A8(96), S_A8(104), S_A8(112), S_A8(120),
};

static s_ch_t s_char_utf8(const unsigned char *p, size_t n, size_t i)
{
    s_ch_t c;
    c.len = (uint8_t)ipl_utf8_next(p + i, n - i, &c.cp);
    c.cls = c.cp == IPL_UNICODE_INVALID ? 0 : s_cls_of(c.cp);
    return c;
}

/* The character at p[i] (i < n) and its classes; an invalid UTF-8 byte is one of no class. */
static inline s_ch_t s_char(const unsigned char *p, size_t n, size_t i)
{
    if (p[i] < 0x80) return (s_ch_t){p[i], 1, s_ascii_cls[p[i]]};
    return s_char_utf8(p, n, i);
}

static inline uint16_t s_cls_at(const unsigned char *p, size_t n, size_t i, size_t *len)
{
    if (p[i] < 0x80) {
        *len = 1;
        return s_ascii_cls[p[i]];
    }
    s_ch_t c = s_char_utf8(p, n, i);
    *len = c.len;
    return c.cls;
}

/* The end of the run from p[i] of characters having a bit of `mask` (want true) or none of
 * its bits (want false). ASCII runs take the inner loop. */
static inline size_t s_run(const unsigned char *p, size_t n, size_t i, uint16_t mask, bool want)
{
    for (;;) {
        if (want)
            while (i < n && p[i] < 0x80 && (s_ascii_cls[p[i]] & mask))
                i++;
        else
            while (i < n && p[i] < 0x80 && !(s_ascii_cls[p[i]] & mask))
                i++;
        if (i >= n || p[i] < 0x80) return i;
        s_ch_t c = s_char_utf8(p, n, i);
        if (((c.cls & mask) != 0) != want) return i;
        i += c.len;
    }
}

static bool s_ascii_alpha(unsigned char b)
{
    return (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z');
}

static bool s_ascii_letter(unsigned char b, char lower)
{
    return (b | 0x20) == lower && s_ascii_alpha(b);
}

/* (?i:'s|'t|'re|'ve|'m|'ll|'d) at p[i]: its end, or i (ASCII case folding only). */
static size_t s_contraction(const unsigned char *p, size_t n, size_t i)
{
    if (i + 1 >= n || p[i] != '\'') return i;
    unsigned char a = p[i + 1], b = i + 2 < n ? p[i + 2] : 0;
    if (s_ascii_letter(a, 's') || s_ascii_letter(a, 't') || s_ascii_letter(a, 'm') ||
        s_ascii_letter(a, 'd'))
        return i + 2;
    if ((s_ascii_letter(a, 'r') && s_ascii_letter(b, 'e')) ||
        (s_ascii_letter(a, 'v') && s_ascii_letter(b, 'e')) ||
        (s_ascii_letter(a, 'l') && s_ascii_letter(b, 'l')))
        return i + 3;
    return i;
}

/* \p{N}{1,max} at p[i]: the end of the (at most max) numbers from there, or i. */
static inline size_t s_numbers(const unsigned char *p, size_t n, size_t i, int max)
{
    for (int d = 0; d < max && i < n; d++) {
        s_ch_t c = s_char(p, n, i);
        if (!(c.cls & C_N)) break;
        i += c.len;
    }
    return i;
}

/* \s*[\r\n]+ | \s+(?!\S) | \s+ at a white-space character p[i]: \s*[\r\n]+ ends after the last
 * newline of the run; \s+(?!\S) takes the whole run at the end of the text, else all but its
 * last character (which then starts the next match); \s+ the rest (a run of one). */
static size_t s_space_end(const unsigned char *p, size_t n, size_t i)
{
    size_t end = i, last = i, nl_end = 0, count = 0;
    while (end < n) {
        s_ch_t c = s_char(p, n, end);
        if (!(c.cls & C_S)) break;
        last = end;
        end += c.len;
        count++;
        if (c.cls & C_NL) nl_end = end;
    }
    if (nl_end) return nl_end;
    if (end == n || count == 1) return end;
    return last;
}

/* ' '?[^\s\p{L}\p{N}]+ followed by [\r\n]* (slash: [\r\n/]*) at p[i], whose character c0
 * ends at j: the end, or i. */
static inline size_t s_punct_run(const unsigned char *p, size_t n, size_t i, s_ch_t c0, size_t j,
                                 bool slash)
{
    size_t k;
    if (!(c0.cls & C_LNS)) {
        k = j;
    } else if (c0.cp == ' ' && j < n && !(s_char(p, n, j).cls & C_LNS)) {
        k = j + s_char(p, n, j).len;
    } else {
        return i;
    }
    k = s_run(p, n, k, C_LNS, false);
    while (k < n && (p[k] == '\r' || p[k] == '\n' || (slash && p[k] == '/')))
        k++;
    return k;
}

/* cl100k (Llama-3, digits 3) and Qwen2 (digits 1):
 *   (?i:'s|'t|'re|'ve|'m|'ll|'d) | [^\r\n\p{L}\p{N}]?\p{L}+ | \p{N}{1,digits}
 *   | ' '?[^\s\p{L}\p{N}]+[\r\n]* | \s*[\r\n]+ | \s+(?!\S) | \s+
 * Every character matches one alternative. */
S_INLINE size_t s_cl100k(const unsigned char *p, size_t n, size_t i, int digits)
{
    size_t k;
    if (p[i] == '\'' && (k = s_contraction(p, n, i)) > i) return k;
    s_ch_t c0 = s_char(p, n, i);
    size_t j = i + c0.len;
    if (c0.cls & C_L) return s_run(p, n, j, C_L, true);
    if (!(c0.cls & (C_N | C_NL)) && j < n) { /* one non-letter/number/newline, then letters */
        s_ch_t c1 = s_char(p, n, j);
        if (c1.cls & C_L) return s_run(p, n, j + c1.len, C_L, true);
    }
    if (c0.cls & C_N) return s_numbers(p, n, i, digits);
    k = s_punct_run(p, n, i, c0, j, false);
    if (k > i) return k;
    return s_space_end(p, n, i);
}

/* o200k's first alternative from s (after the optional prefix character):
 *   [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]* [\p{Ll}\p{Lm}\p{Lo}\p{M}]+ (?i:'s|...)?
 * The greedy first class takes the run [s, r) of "upper or both" (UB) characters; the second
 * needs one "lower or both" (WB) character where the first stopped. At r that can only be a
 * lower-case letter (then the second class runs on over WB); giving characters back, only a
 * "both" (Lm, Lo, M) one can start it, so the match ends right after the last such character
 * of the run (what follows it in the run is upper-case). Returns the end, or s when the
 * alternative fails. */
static size_t s_o200k_lower(const unsigned char *p, size_t n, size_t s)
{
    size_t r = s, last_b = s;
    while (r < n) {
        size_t len;
        uint16_t cls = s_cls_at(p, n, r, &len);
        if (!(cls & C_UB)) break;
        r += len;
        if (cls & C_B) last_b = r;
    }
    size_t end;
    if (r < n && (s_char(p, n, r).cls & C_LOW))
        end = s_run(p, n, r, C_WB, true);
    else if (last_b > s)
        end = last_b;
    else
        return s;
    return s_contraction(p, n, end);
}

/* o200k's second alternative from s: [UB]+ [WB]* (?i:'s|...)? — greedy, no backtracking
 * needed once the first class matched one character. The end, or s. */
static size_t s_o200k_upper(const unsigned char *p, size_t n, size_t s)
{
    size_t r = s_run(p, n, s, C_UB, true);
    if (r == s) return s;
    return s_contraction(p, n, s_run(p, n, r, C_WB, true));
}

/* o200k_harmony (gpt-oss):
 *   [^\r\n\p{L}\p{N}]?[UB]*[WB]+(?i:'s|...)? | [^\r\n\p{L}\p{N}]?[UB]+[WB]*(?i:'s|...)?
 *   | \p{N}{1,3} | ' '?[^\s\p{L}\p{N}]+[\r\n/]* | \s*[\r\n]+ | \s+(?!\S) | \s+
 * The optional prefix is tried taken first, then not taken, for the first alternative before
 * the second. Not taking it only matters when it is a mark (M is not L: the prefix class
 * holds it, and so does [UB]): the first alternative then always matches from the mark. */
static inline size_t s_o200k(const unsigned char *p, size_t n, size_t i)
{
    s_ch_t c0 = s_char(p, n, i);
    size_t j = i + c0.len, k;
    if (c0.cls & C_L) {
        if ((k = s_o200k_lower(p, n, i)) > i) return k;
        return s_o200k_upper(p, n, i);
    }
    if (!(c0.cls & (C_N | C_NL))) { /* the prefix can be c0 */
        if (j < n && (k = s_o200k_lower(p, n, j)) > j) return k;
        if (c0.cls & C_M) return s_o200k_lower(p, n, i);
        if (j < n && (k = s_o200k_upper(p, n, j)) > j) return k;
    }
    if (c0.cls & C_N) return s_numbers(p, n, i, 3);
    k = s_punct_run(p, n, i, c0, j, true);
    if (k > i) return k;
    return s_space_end(p, n, i);
}

/* DeepSeek-V3's third stage:
 *   [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+ | [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+
 *   | ' '?[\p{P}\p{S}]+[\r\n]* | \s*[\r\n]+ | \s+(?!\S) | \s+
 * Characters that match none (digits, lone controls, ...) are left between matches. In the
 * second alternative a leading mark is both the prefix and a [\p{L}\p{M}]: either way the match
 * is the run of letters and marks from it. */
static inline size_t s_ds_words(const unsigned char *p, size_t n, size_t i)
{
    s_ch_t c0 = s_char(p, n, i);
    size_t j = i + c0.len;
    if (c0.cp < 0x80 && (c0.cls & (C_P | C_SY)) && j < n && s_ascii_alpha(p[j])) {
        while (j < n && s_ascii_alpha(p[j]))
            j++;
        return j;
    }
    if (c0.cls & (C_L | C_M)) return s_run(p, n, j, C_L | C_M, true);
    s_ch_t c1 = j < n ? s_char(p, n, j) : (s_ch_t){0, 0, 0};
    if (!(c0.cls & (C_NL | C_L | C_P | C_SY)) && (c1.cls & (C_L | C_M)))
        return s_run(p, n, j + c1.len, C_L | C_M, true);
    size_t k = SIZE_MAX;
    if (c0.cls & (C_P | C_SY))
        k = j;
    else if (c0.cp == ' ' && (c1.cls & (C_P | C_SY)))
        k = j + c1.len;
    if (k != SIZE_MAX) {
        k = s_run(p, n, k, C_P | C_SY, true);
        while (k < n && (p[k] == '\r' || p[k] == '\n'))
            k++;
        return k;
    }
    if (c0.cls & C_S) return s_space_end(p, n, i);
    return i;
}

S_INLINE size_t s_match(ipl_pretok_pattern_t pattern, const unsigned char *p, size_t n, size_t i)
{
    switch (pattern) {
    case IPL_PRETOK_LLAMA3:
        return s_cl100k(p, n, i, 3);
    case IPL_PRETOK_QWEN2:
        return s_cl100k(p, n, i, 1);
    case IPL_PRETOK_O200K:
        return s_o200k(p, n, i);
    case IPL_PRETOK_DS_DIGITS:
        return s_numbers(p, n, i, 3);
    case IPL_PRETOK_DS_CJK:
        return s_run(p, n, i, C_CJK, true);
    case IPL_PRETOK_DS_WORDS:
        return s_ds_words(p, n, i);
    case IPL_PRETOK_NPATTERNS:
        break;
    }
    return i;
}

size_t ipl_pretok_match(ipl_pretok_pattern_t pattern, const unsigned char *p, size_t n, size_t i)
{
    return s_match(pattern, p, n, i);
}

/* ---- patterns by their tokenizer.json spelling ------------------------------------------- */

static const struct {
    const char *name, *regex;
} s_patterns[IPL_PRETOK_NPATTERNS] = {
    [IPL_PRETOK_LLAMA3] = {"llama3", "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
                                     "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
                                     "\\s+(?!\\S)|\\s+"},
    [IPL_PRETOK_QWEN2] = {"qwen2", "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
                                   "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
                                   "\\s+(?!\\S)|\\s+"},
    [IPL_PRETOK_O200K] = {"o200k", "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*"
                                   "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
                                   "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+"
                                   "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
                                   "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|"
                                   "\\s+(?!\\S)|\\s+"},
    [IPL_PRETOK_DS_DIGITS] = {"deepseek-digits", "\\p{N}{1,3}"},
    /* [U+4E00-U+9FA5 U+3040-U+309F U+30A0-U+30FF]+, the characters written as UTF-8 */
    [IPL_PRETOK_DS_CJK] = {"deepseek-cjk", "[\xe4\xb8\x80-\xe9\xbe\xa5\xe3\x81\x80-\xe3\x82\x9f"
                                           "\xe3\x82\xa0-\xe3\x83\xbf]+"},
    /* the \r and \n inside the classes are the characters themselves, as in the file */
    [IPL_PRETOK_DS_WORDS] = {"deepseek-words",
                             "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|"
                             "[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|"
                             "\\s*[\r\n]+|\\s+(?!\\S)|\\s+"},
};

int ipl_pretok_pattern_find(const char *regex)
{
    for (int k = 0; k < IPL_PRETOK_NPATTERNS; k++)
        if (!strcmp(regex, s_patterns[k].regex)) return k;
    return -1;
}

const char *ipl_pretok_pattern_name(ipl_pretok_pattern_t pattern)
{
    return (unsigned)pattern < IPL_PRETOK_NPATTERNS ? s_patterns[pattern].name : "?";
}

bool ipl_pretok_add_regex(ipl_pretok_t *self, ipl_pretok_pattern_t pattern)
{
    if (self->n == IPL_PRETOK_MAX_STAGES || (unsigned)pattern >= IPL_PRETOK_NPATTERNS) return false;
    self->stage[self->n++] = (ipl_pretok_stage_t){.pattern = pattern};
    return true;
}

bool ipl_pretok_add_literal(ipl_pretok_t *self, const char *text, size_t len,
                            ipl_pretok_behavior_t behavior)
{
    if (self->n == IPL_PRETOK_MAX_STAGES || len == 0 || len > IPL_PRETOK_MAX_LITERAL) return false;
    ipl_pretok_stage_t *st = &self->stage[self->n++];
    *st = (ipl_pretok_stage_t){.literal = true, .behavior = behavior, .len = len};
    memcpy(st->text, text, len);
    return true;
}

/* ---- the driver ---------------------------------------------------------------------------- */

static bool s_stage(const ipl_pretok_t *self, size_t k, const unsigned char *p, size_t n,
                    ipl_pretok_fn fn, void *ctx);

/* The pieces of one stage, handed to the next: a match (is_match) or the text between two.
 * MergedWithPrevious glues a match to the piece before it unless that piece is a match too, as
 * HF's SplitDelimiterBehavior does; so a piece is only passed on once the next one is known. */
typedef struct {
    const ipl_pretok_t *pt;
    size_t next;
    ipl_pretok_behavior_t behavior;
    const unsigned char *p;
    size_t start, end; /* the pending piece, empty when start == end */
    bool last_match;
    ipl_pretok_fn fn;
    void *ctx;
} s_pieces_t;

static bool s_flush(s_pieces_t *s)
{
    bool ok = s->start == s->end ||
              s_stage(s->pt, s->next, s->p + s->start, s->end - s->start, s->fn, s->ctx);
    s->start = s->end;
    return ok;
}

static bool s_piece(s_pieces_t *s, size_t start, size_t end, bool is_match)
{
    bool ok = true;
    if (is_match && s->behavior == IPL_PRETOK_REMOVED) {
        ok = s_flush(s);
        s->start = s->end = end;
    } else if (is_match && s->behavior == IPL_PRETOK_MERGED_WITH_PREVIOUS && !s->last_match &&
               s->end == start && s->start < s->end) {
        s->end = end;
    } else {
        ok = s_flush(s);
        s->start = start;
        s->end = end;
        if (s->behavior == IPL_PRETOK_ISOLATED) ok = ok && s_flush(s);
    }
    s->last_match = is_match;
    return ok;
}

static bool s_stage(const ipl_pretok_t *self, size_t k, const unsigned char *p, size_t n,
                    ipl_pretok_fn fn, void *ctx)
{
    if (n == 0) return true;
    if (k == self->n) return fn(ctx, p, n);
    const ipl_pretok_stage_t *st = &self->stage[k];
    if (k + 1 == self->n && !st->literal) { /* the last stage, Isolated: pieces go to fn */
        size_t gap = 0;
        for (size_t i = 0; i < n;) {
            size_t end = s_match(st->pattern, p, n, i); /* inlined: the hot loop */
            if (end == i) {
                size_t len;
                s_cls_at(p, n, i, &len);
                i += len;
                continue;
            }
            if ((gap < i && !fn(ctx, p + gap, i - gap)) || !fn(ctx, p + i, end - i)) return false;
            gap = i = end;
        }
        return gap == n || fn(ctx, p + gap, n - gap);
    }
    s_pieces_t s = {self, k + 1, st->behavior, p, 0, 0, false, fn, ctx};
    size_t gap = 0; /* start of the text not matched yet */
    for (size_t i = 0; i < n;) {
        size_t end;
        if (st->literal) { /* the next occurrence (valid UTF-8 never matches mid-character) */
            const unsigned char *at = memmem(p + i, n - i, st->text, st->len);
            if (!at) break;
            i = (size_t)(at - p);
            end = i + st->len;
        } else if ((end = s_match(st->pattern, p, n, i)) == i) {
            size_t len;
            s_cls_at(p, n, i, &len);
            i += len;
            continue;
        }
        if ((gap < i && !s_piece(&s, gap, i, false)) || !s_piece(&s, i, end, true)) return false;
        gap = i = end;
    }
    if (gap < n && !s_piece(&s, gap, n, false)) return false;
    return s_flush(&s);
}

bool ipl_pretok_split(const ipl_pretok_t *self, const unsigned char *p, size_t n, ipl_pretok_fn fn,
                      void *ctx)
{
    return s_stage(self, 0, p, n, fn, ctx);
}
