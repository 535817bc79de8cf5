/*
 * ipl_unicode — the few Unicode facts an exact tokenizer needs: UTF-8 decoding, the general
 * categories (\p{L}, \p{Lu}, \p{M}, \p{N}, \p{P}, \p{S}, ...), White_Space, and NFC
 * normalization.
 *
 * The tables come from the data the two halves of Hugging Face tokenizers (what vLLM runs)
 * use, so that text classifies and normalizes as there (tools/gen-unicode-tables.py):
 *   - categories and \s: the Oniguruma regex engine's own tables (6.9.9, Unicode 15.1;
 *     ipl_unicode_version()): code points assigned later are unassigned (IPL_GC_CN) here;
 *   - NFC: the tables of unicode-normalization-alignments 0.1.12, the crate HF's normalizers
 *     use, which are Unicode 9.0 (ipl_unicode_nfc_version()): a character assigned after 9.0
 *     has combining class 0 and no decomposition, so NFC leaves it where it is (Python's NFC
 *     would reorder, e.g., U+08CC before U+1D166; HF does not).
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
static inline size_t ipl_utf8_next(const unsigned char *s, size_t len, uint32_t *cp)
{
    unsigned char c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    size_t n;
    uint32_t v, min;
    if (c >= 0xC2 && c <= 0xDF) {
        n = 2, v = c & 0x1Fu, min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 3, v = c & 0x0Fu, min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4, v = c & 0x07u, min = 0x10000;
    } else {
        *cp = IPL_UNICODE_INVALID;
        return 1;
    }
    if (n > len) {
        *cp = IPL_UNICODE_INVALID;
        return 1;
    }
    for (size_t k = 1; k < n; k++) {
        if ((s[k] & 0xC0) != 0x80) {
            *cp = IPL_UNICODE_INVALID;
            return 1;
        }
        v = (v << 6) | (s[k] & 0x3Fu);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) {
        *cp = IPL_UNICODE_INVALID;
        return 1;
    }
    *cp = v;
    return n;
}

/* Encodes cp (<= U+10FFFF) as UTF-8 into out (room for 4 bytes); returns the length. */
size_t ipl_utf8_put(uint32_t cp, unsigned char *out);

/* Unicode general categories, grouped by major class (so a class is a range of values). */
typedef enum {
    IPL_GC_CN = 0, /* unassigned (and anything past U+10FFFF) */
    /* \p{L} */
    IPL_GC_LU,
    IPL_GC_LL,
    IPL_GC_LT,
    IPL_GC_LM,
    IPL_GC_LO,
    /* \p{M} */
    IPL_GC_MN,
    IPL_GC_MC,
    IPL_GC_ME,
    /* \p{N} */
    IPL_GC_ND,
    IPL_GC_NL,
    IPL_GC_NO,
    /* \p{P} */
    IPL_GC_PC,
    IPL_GC_PD,
    IPL_GC_PS,
    IPL_GC_PE,
    IPL_GC_PI,
    IPL_GC_PF,
    IPL_GC_PO,
    /* \p{S} */
    IPL_GC_SM,
    IPL_GC_SC,
    IPL_GC_SK,
    IPL_GC_SO,
    /* \p{Z} */
    IPL_GC_ZS,
    IPL_GC_ZL,
    IPL_GC_ZP,
    /* \p{C} but Cn */
    IPL_GC_CC,
    IPL_GC_CF,
    IPL_GC_CS,
    IPL_GC_CO,
    IPL_GC_COUNT
} ipl_unicode_gc_t;

/* The category table (ipl_unicode_gc.h, generated): two levels of IPL_UNICODE_GC_BLOCK code
 * points. Read through ipl_unicode_category. */
#define IPL_UNICODE_GC_BLOCK 128
extern const uint16_t ipl_unicode_gc_index[];
extern const uint8_t ipl_unicode_gc_blocks[][IPL_UNICODE_GC_BLOCK];

/* The general category of cp (two table reads; inline: tokenizers ask for every character). */
static inline ipl_unicode_gc_t ipl_unicode_category(uint32_t cp)
{
    if (cp > 0x10FFFF) return IPL_GC_CN;
    return (ipl_unicode_gc_t)ipl_unicode_gc_blocks[ipl_unicode_gc_index[cp / IPL_UNICODE_GC_BLOCK]]
                                                  [cp % IPL_UNICODE_GC_BLOCK];
}

/* General category L* (Lu, Ll, Lt, Lm, Lo): regex \p{L}. */
bool ipl_unicode_is_letter(uint32_t cp);
/* General category N* (Nd, Nl, No): regex \p{N}. */
bool ipl_unicode_is_number(uint32_t cp);
/* The White_Space property: U+0009–U+000D, U+0020, U+0085, U+00A0, U+1680, U+2000–U+200A,
 * U+2028, U+2029, U+202F, U+205F, U+3000. That is Oniguruma's Unicode \s and Rust's
 * char::is_whitespace (JavaScript's \s differs: it adds U+FEFF and lacks U+0085). */
static inline bool ipl_unicode_is_space(uint32_t cp)
{
    if (cp < 0x80) return cp == ' ' || (cp >= 0x09 && cp <= 0x0D);
    if (cp < 0x2000) return cp == 0x85 || cp == 0xA0 || cp == 0x1680;
    return cp <= 0x200A || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
           cp == 0x3000;
}

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

/* The Unicode version of the category tables ("15.1.0") and of the NFC tables ("9.0.0"). */
const char *ipl_unicode_version(void);
const char *ipl_unicode_nfc_version(void);

#endif
