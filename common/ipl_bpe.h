/*
 * ipl_bpe — exact byte-level BPE tokenization from a Hugging Face tokenizer.json (the
 * Llama-3 and Qwen2/2.5/3 families), producing the token ids vLLM's tokenizer produces.
 *
 * Pipeline of ipl_bpe_encode (the `tokenizers` library's, step by step):
 *
 *   text ─▶ added tokens split out (leftmost-longest; lstrip/rstrip/single_word honoured;
 *           "normalized": false ones matched on the raw text)
 *        ─▶ normalizer on each remaining section (null or NFC), then the "normalized": true
 *           added tokens split out of the normalized text
 *        ─▶ pre-tokenizer Split(regex, Isolated): the Llama-3 pattern (\p{N}{1,3}) or the
 *           Qwen2 pattern (\p{N}), matched by hand-written code (see ipl_bpe.c)
 *        ─▶ ByteLevel: each piece's UTF-8 bytes (GPT-2 bytes_to_unicode, applied in reverse to
 *           the vocabulary at load time, so BPE runs on raw bytes)
 *        ─▶ model BPE: whole piece if "ignore_merges" and it is in the vocabulary, otherwise
 *           merge the adjacent pair of lowest rank (leftmost on ties) until none applies
 *        ─▶ post-processor when add_special_tokens: TemplateProcessing's "single" template
 *           (Llama-3.1 style <|begin_of_text|>), ByteLevel (adds nothing), or a Sequence
 *
 * Speed (one core, shared 2-core VM): 35–50 MB/s on English text, 5–10 MB/s on CJK; loading
 * Qwen3's 11 MB file takes about 0.4 s and peaks near 90 MB (file + cJSON tree); the loaded
 * tokenizer keeps about 15 MB.
 *
 * Accepted tokenizer.json shapes (anything else is refused at load with a message that names
 * the field): model BPE (vocab object; merges as "a b" strings or ["a","b"] pairs; dropout
 * null/0; continuing_subword_prefix and end_of_word_suffix null/""; byte_fallback false;
 * optional unk_token and fuse_unk), normalizer null / NFC / Sequence of NFC, pre_tokenizer
 * Sequence[Split(Regex = one of the two patterns, behavior Isolated, invert false),
 * ByteLevel(add_prefix_space false, use_regex false)], post_processor null / ByteLevel /
 * TemplateProcessing / Sequence of those, decoder ByteLevel.
 *
 * Not covered (documented differences from Hugging Face tokenizers):
 *   - Unicode version: letters, numbers and NFC follow Unicode 15.1 (see ipl_unicode.h), the
 *     version of the Oniguruma regex engine in current HF tokenizers; a character assigned
 *     later is "other" here and is not normalized.
 *   - The contraction group (?i:'s|'t|...) matches ASCII letters only: Oniguruma's case
 *     folding would also accept U+017F (long s) for 's'.
 *   - Invalid UTF-8 (which HF never sees: its input is a Rust String) is tokenized byte by
 *     byte, each invalid byte a character of its own that is neither letter, number nor space.
 *   - single_word added tokens test for a word character as letter, number or '_'; HF's \w
 *     also counts combining marks and joiners. (Llama-3 and Qwen use no single_word token.)
 *   - Decoding returns the raw bytes (HF replaces invalid UTF-8 with U+FFFD) and does not
 *     apply transformers' clean_up_tokenization_spaces.
 *
 * Immutable after creation: thread-safe to share; encode/decode allocate per call.
 */
#ifndef IPL_BPE_H
#define IPL_BPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ipl_bpe ipl_bpe_t;

/* Loads a tokenizer.json file. Returns NULL with a message in err (may be NULL; errlen bytes,
 * always NUL-terminated) naming the file, the field and the problem, e.g.
 * "x/tokenizer.json: model.merges[17]: token "ab" is not in model.vocab". */
ipl_bpe_t *ipl_bpe_new_from_file(const char *path, char *err, size_t errlen);

/* Same from a JSON text of len bytes in memory; `origin` names it in messages. */
ipl_bpe_t *ipl_bpe_new_from_json(const char *json, size_t len, const char *origin, char *err,
                                 size_t errlen);

void ipl_bpe_destroy(ipl_bpe_t **self_p);

/* Encodes len bytes of text (any bytes; NUL is an ordinary byte). add_special_tokens applies
 * the post-processor (vLLM's add_special_tokens=True: /v1/completions prompts; chat templates
 * carry their own BOS and are encoded with false). Returns a malloc'd array (the caller frees)
 * and its length in *n, or NULL with *n = 0 on allocation failure. */
uint32_t *ipl_bpe_encode(const ipl_bpe_t *self, const char *text, size_t len,
                         bool add_special_tokens, size_t *n);

/* Decodes ids to bytes: added tokens as their content, vocabulary tokens through the inverse
 * ByteLevel map. Unknown ids are skipped. Returns a malloc'd NUL-terminated buffer (the caller
 * frees) with its length in *len (may be NULL), or NULL on allocation failure. */
char *ipl_bpe_decode(const ipl_bpe_t *self, const uint32_t *ids, size_t n, size_t *len);

/* The id of a token spelled as in tokenizer.json (vocab key or added token content), or -1. */
int64_t ipl_bpe_token_id(const ipl_bpe_t *self, const char *token);

/* One more than the largest id (vocabulary and added tokens). */
uint32_t ipl_bpe_vocab_size(const ipl_bpe_t *self);

#endif
