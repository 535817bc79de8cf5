/*
 * ipl_pretok — the pre-tokenizer of a Hugging Face tokenizer.json: a Sequence of Split stages
 * that cut normalized text into the pieces BPE then encodes one by one, computed exactly as
 * the `tokenizers` library computes them but without a regex engine: each supported Regex is
 * recognized by its exact string and matched by hand-written code (ipl_pretok.c works out the
 * backtracking of each pattern).
 *
 *   text ─▶ stage 0 ─▶ pieces ─▶ stage 1 (on each piece alone) ─▶ ... ─▶ callback per piece
 *
 * A stage is Split(pattern, behavior, invert false). Regex patterns (behavior Isolated: every
 * match is a piece and so is every run of text between matches):
 *   - IPL_PRETOK_LLAMA3 / IPL_PRETOK_QWEN2: tiktoken's cl100k pattern with \p{N}{1,3} / \p{N};
 *   - IPL_PRETOK_O200K: o200k_harmony (gpt-oss): cased letter runs with optional contractions,
 *     \p{N}{1,3}, punctuation runs ending in [\r\n/]*, the usual white-space rules;
 *   - IPL_PRETOK_DS_DIGITS, IPL_PRETOK_DS_CJK, IPL_PRETOK_DS_WORDS: DeepSeek-V3's three
 *     stages (\p{N}{1,3}; runs of U+4E00–U+9FA5, U+3040–U+30FF; a GPT-style word pattern).
 * String patterns (any literal) with behavior Isolated, Removed or MergedWithPrevious.
 *
 * Regex lookarounds such as \s+(?!\S) look at the current piece only (its end is the end of
 * the text), as in Hugging Face, where each stage runs on each piece separately.
 *
 * Documented differences from Oniguruma (the regex engine of HF tokenizers):
 *   - the contraction group (?i:'s|'t|...) matches ASCII letters only: Oniguruma's case
 *     folding also accepts U+017F (long s) for 's';
 *   - bytes that are not valid UTF-8 (HF never sees them: its input is a Rust String) are one
 *     character each, of no category (like an unassigned code point).
 *
 * Values are plain data (no allocation); all functions are pure and thread-safe.
 */
#ifndef IPL_PRETOK_H
#define IPL_PRETOK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    IPL_PRETOK_LLAMA3 = 0,
    IPL_PRETOK_QWEN2,
    IPL_PRETOK_O200K,
    IPL_PRETOK_DS_DIGITS,
    IPL_PRETOK_DS_CJK,
    IPL_PRETOK_DS_WORDS,
    IPL_PRETOK_NPATTERNS
} ipl_pretok_pattern_t;

typedef enum {
    IPL_PRETOK_ISOLATED = 0,
    IPL_PRETOK_REMOVED,
    IPL_PRETOK_MERGED_WITH_PREVIOUS,
} ipl_pretok_behavior_t;

#define IPL_PRETOK_MAX_STAGES  8
#define IPL_PRETOK_MAX_LITERAL 16

typedef struct {
    bool literal;                 /* a String pattern (else a known Regex) */
    ipl_pretok_pattern_t pattern; /* the Regex */
    ipl_pretok_behavior_t behavior;
    unsigned char text[IPL_PRETOK_MAX_LITERAL]; /* the String, len bytes (>= 1) */
    size_t len;
} ipl_pretok_stage_t;

/* A sequence of stages; zero stages: the whole text is one piece. Build with ipl_pretok_add_*.
 * Zero-initialized ({0}) is the empty sequence. */
typedef struct {
    ipl_pretok_stage_t stage[IPL_PRETOK_MAX_STAGES];
    size_t n;
} ipl_pretok_t;

/* The pattern whose tokenizer.json Regex is exactly `regex`, or -1. */
int ipl_pretok_pattern_find(const char *regex);

/* Short names of the patterns, for messages: "llama3", "qwen2", "o200k", ... */
const char *ipl_pretok_pattern_name(ipl_pretok_pattern_t pattern);

/* Appends a Regex stage (behavior Isolated) / a String stage. False when the sequence is full
 * or the literal is empty or longer than IPL_PRETOK_MAX_LITERAL bytes. */
bool ipl_pretok_add_regex(ipl_pretok_t *self, ipl_pretok_pattern_t pattern);
bool ipl_pretok_add_literal(ipl_pretok_t *self, const char *text, size_t len,
                            ipl_pretok_behavior_t behavior);

/* Called once per piece, in order, with a non-empty piece of the text; returns false to stop
 * the split (ipl_pretok_split then returns false too). */
typedef bool (*ipl_pretok_fn)(void *ctx, const unsigned char *piece, size_t len);

/* Splits p[0..n) through every stage and calls fn on each final piece. Returns false when fn
 * stopped it. */
bool ipl_pretok_split(const ipl_pretok_t *self, const unsigned char *p, size_t n, ipl_pretok_fn fn,
                      void *ctx);

/* The end of the match of `pattern` that starts exactly at p[i] (i < n; the whole text is
 * p[0..n)), or i when the pattern does not match there. Exposed for tests. */
size_t ipl_pretok_match(ipl_pretok_pattern_t pattern, const unsigned char *p, size_t n, size_t i);

#endif
