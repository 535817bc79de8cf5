/*
 * labels_words — the words of a UTF-8 text, case-folded and hashed, in one pass.
 *
 * A word is a maximal run of word characters: ASCII letters, digits and '_', and the non-ASCII
 * code points that are letters or numbers (ipl_unicode's L and N) or combining marks
 * (U+0300..U+036F), so "e-mail" is two words, "snake_case" one, and quotes, dashes and
 * no-break spaces such as “ — U+00A0 separate words. Bytes that are not valid UTF-8 count as
 * word characters (a Latin-1 "Müller" stays one word).
 *
 * Each word is reported as a 64-bit hash of its case-folded UTF-8 (labels_words_fold), so
 * "Password", "PASSWORD" and "password" hash alike, and so do "Пароль" and "пароль". Words
 * of up to 8 folded bytes hash without collisions (a bijection of their bytes and length);
 * longer ones collide with probability ~2^-64 per pair.
 *
 *   labels_words_t it;
 *   uint64_t h[256];
 *   labels_words_init(&it, text, len);
 *   for (size_t n; (n = labels_words_next(&it, h, 256)) > 0;)
 *       ... h[0 .. n) in text order ...
 *
 * Cost: ASCII text is classified 8 bytes at a time (SWAR) and each word hashed from word-sized
 * loads, with no branch per byte; a word holding non-ASCII bytes is decoded code point by
 * code point. Nothing allocates. The iterator borrows the text until its last call; the
 * functions are pure (any thread, an iterator per thread).
 */
#ifndef LABELS_WORDS_H
#define LABELS_WORDS_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    const unsigned char *text;
    size_t len;
    size_t pos;        /* the next 64-byte block to classify */
    uint64_t pending;  /* transitions of the current chunk not yet walked (high bit a byte) */
    size_t word_start; /* of the word in progress, when in_word */
    size_t slow_pos;   /* a run being decoded: slow_pos .. slow_end (empty when equal) */
    size_t slow_end;
    int in_word;
} labels_words_t;

void labels_words_init(labels_words_t *it, const char *text, size_t len);

/* Stores the hashes of the next words, at most `max` (>= 1) of them, into out[]; returns how
 * many, 0 at the end of the text. */
size_t labels_words_next(labels_words_t *it, uint64_t *out, size_t max);

/* The hash of the one word `word[0 .. len)` as labels_words_next reports it (the text must be
 * exactly one word: callers tokenize keywords with labels_words_next). */
uint64_t labels_words_hash(const char *word, size_t len);

/* A hash for the pair (a, b) in this order: bigram features and keyword phrases are chained
 * with it, ((a, b), c) for three words. */
static inline uint64_t labels_words_pair(uint64_t a, uint64_t b)
{
    uint64_t x = (a ^ (b >> 17) ^ (b << 47)) * 0x9fb21c651e98df25ull;
    return x ^ (x >> 28) ^ b;
}

/* The simple lower case of code point `cp` for the scripts the corpus covers: ASCII, Latin-1,
 * Latin Extended-A (Czech, Slovak, Polish, ...), Greek and Cyrillic (Ukrainian, Russian);
 * ẞ → ß; İ → i. Other code points are returned as they are. */
uint32_t labels_words_fold(uint32_t cp);

#endif
