/*
 * ipl_unicode — the few Unicode facts an exact tokenizer needs: UTF-8 decoding, the general
 * categories L (letters) and N (numbers), White_Space, and NFC normalization.
 *
 * The tables are generated from one Unicode version, 15.1 (ipl_unicode_version(); see
 * tools/gen-unicode-tables.py, run with Python 3.13). That is the version of the Oniguruma
 * regex engine (6.9.9) inside current Hugging Face tokenizers, so \p{L}, \p{N} and \s
 * classify as vLLM's tokenizer does; code points assigned later are "other" here.
 *
 * All functions are pure and thread-safe.
 */
#ifndef IPL_UNICODE_H
#define IPL_UNICODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Marks a byte that does not start a valid UTF-8 sequence (see ipl_utf8_next). */
#define IPL_UNICODE_INVALID 0xFFFFFFFFu

/* Decodes the code point at s[0..len) (len >= 1) into *cp and returns its length in bytes.
 * Overlong forms, surrogates, code points past U+10FFFF and truncated sequences are invalid:
 * then it returns 1 and sets *cp = IPL_UNICODE_INVALID, so callers can carry the raw byte. */
size_t ipl_utf8_next(const unsigned char *s, size_t len, uint32_t *cp);

/* Encodes cp (<= U+10FFFF) as UTF-8 into out (room for 4 bytes); returns the length. */
size_t ipl_utf8_put(uint32_t cp, unsigned char *out);

/* General category L* (Lu, Ll, Lt, Lm, Lo): regex \p{L}. */
bool ipl_unicode_is_letter(uint32_t cp);
/* General category N* (Nd, Nl, No): regex \p{N}. */
bool ipl_unicode_is_number(uint32_t cp);
/* The White_Space property: U+0009–U+000D, U+0020, U+0085, U+00A0, U+1680, U+2000–U+200A,
 * U+2028, U+2029, U+202F, U+205F, U+3000. That is Oniguruma's Unicode \s and Rust's
 * char::is_whitespace (JavaScript's \s differs: it adds U+FEFF and lacks U+0085). */
bool ipl_unicode_is_space(uint32_t cp);

/* True when s[0..len) is certainly in NFC: every code point in it is NFC_Quick_Check=Yes and
 * of combining class 0 (ASCII, Latin-1, CJK, Hangul syllables, emoji, ...). False means it
 * may or may not be: call ipl_unicode_nfc. Invalid UTF-8 bytes count as safe. */
bool ipl_unicode_nfc_quick(const char *s, size_t len);

/* Unicode Normalization Form C of s[0..len): canonical decomposition (including Hangul),
 * canonical ordering of combining marks, then canonical composition, as specified in UAX #15.
 * Bytes that are not valid UTF-8 are copied unchanged and act as starters that never
 * compose. Returns a malloc'd buffer (the caller frees; NUL-terminated for convenience) with
 * its length in *outlen, or NULL on allocation failure. */
char *ipl_unicode_nfc(const char *s, size_t len, size_t *outlen);

/* The Unicode version of the tables, e.g. "15.1.0". */
const char *ipl_unicode_version(void);

#endif
