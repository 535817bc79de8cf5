/*
 * ipl_normalizer — the normalizer of a Hugging Face tokenizer.json: a sequence of steps applied
 * to each section of text between added tokens before pre-tokenization, as the `tokenizers`
 * library applies them. Steps: NFC (ipl_unicode.h: with HF's own Unicode 9.0 data) and
 * Replace with a String pattern (every occurrence, left to right, e.g. Gemma-3's " " → "▁").
 * A Sequence nests; null is no step.
 *
 * Immutable after creation: thread-safe to share.
 */
#ifndef IPL_NORMALIZER_H
#define IPL_NORMALIZER_H

#include <stdbool.h>
#include <stddef.h>

struct cJSON;
typedef struct ipl_normalizer ipl_normalizer_t;

/* Builds the normalizer of tokenizer.json's "normalizer" value (NULL or JSON null: no step).
 * Returns NULL with a message in err (errlen bytes, always NUL-terminated) that names the
 * field from "normalizer" down, e.g. "normalizer.normalizers[1].pattern: only a non-empty
 * {"String": ...} is supported", or "out of memory". */
ipl_normalizer_t *ipl_normalizer_new_from_json(const struct cJSON *json, char *err, size_t errlen);

void ipl_normalizer_destroy(ipl_normalizer_t **self_p);

/* True when the normalizer has no step (every text is its own normal form). */
bool ipl_normalizer_is_identity(const ipl_normalizer_t *self);

/* Normalizes s[0..len): *out is a malloc'd result (NUL-terminated; the caller frees) with its
 * length in *outlen, or NULL with *outlen = len when no step changes the text. False on
 * allocation failure. */
bool ipl_normalizer_apply(const ipl_normalizer_t *self, const char *s, size_t len, char **out,
                          size_t *outlen);

/* s[0..len) with every occurrence of pattern[0..plen) (plen >= 1; non-overlapping, left to
 * right) replaced by content[0..clen): *out is malloc'd (NUL-terminated), or NULL with
 * *outlen = len when there is none. False on allocation failure. Also what the decoders'
 * Replace does to each token. */
bool ipl_normalizer_replace(const char *s, size_t len, const char *pattern, size_t plen,
                            const char *content, size_t clen, char **out, size_t *outlen);

#endif
