/*
 * ipl_bpe — exact BPE tokenization from a Hugging Face tokenizer.json, producing the token
 * ids vLLM's tokenizer produces, for two kinds of files:
 *   - byte-level BPE (a ByteLevel pre-tokenizer): Llama-3, Qwen2/2.5/3, gpt-oss, DeepSeek-V3;
 *   - SentencePiece-style BPE on characters with byte fallback: Gemma-3.
 *
 * Pipeline of ipl_bpe_encode (the `tokenizers` library's, step by step):
 *
 *   text ─▶ added tokens split out (leftmost-longest; lstrip/rstrip/single_word honoured;
 *           "normalized": false ones matched on the raw text)
 *        ─▶ normalizer on each remaining section (NFC, Replace of a string, or a Sequence),
 *           then the "normalized": true added tokens split out of the normalized text
 *        ─▶ pre-tokenizer: the Split stages (ipl_pretok.h: the Llama-3, Qwen2, o200k and
 *           DeepSeek-V3 regexes matched by hand-written code, or a literal string), then
 *           ByteLevel when the file has it: each piece's UTF-8 bytes (GPT-2 bytes_to_unicode,
 *           applied in reverse to the vocabulary at load time, so BPE runs on raw bytes)
 *        ─▶ model BPE: whole piece if "ignore_merges" and it is in the vocabulary, otherwise
 *           merge the adjacent pair of lowest rank (leftmost on ties) until none applies;
 *           symbols are bytes (ByteLevel) or UTF-8 characters, and a character missing from
 *           the vocabulary becomes its "<0xNN>" tokens ("byte_fallback") or unk ("fuse_unk")
 *        ─▶ post-processor when add_special_tokens: TemplateProcessing's "single" template
 *           (Llama-3.1 / Gemma-3 style BOS), ByteLevel (adds nothing), or a Sequence
 *
 * Speed (one core, shared 2-core VM, warm; docs/benchmarks.md): 80–115 MB/s on English
 * prose and code for Qwen3, Llama-3 and gpt-oss, 50–60 MB/s for DeepSeek-V3 (three splits),
 * 40–55 MB/s on CJK; Gemma-3 about 24 MB/s on prose and code (its pieces are words with their
 * punctuation, fewer of them whole vocabulary entries), 55 MB/s on CJK. Loading Qwen3's 11 MB
 * file takes about 0.4 s and peaks near 100 MB (file + cJSON tree); Gemma-3's 33 MB file
 * 0.9 s and 260 MB; the loaded Qwen3 tokenizer keeps about 15 MB.
 *
 * Accepted tokenizer.json shapes (anything else is refused at load with a message that names
 * the field): model BPE (vocab object; merges as "a b" strings or ["a","b"] pairs; dropout
 * null/0; continuing_subword_prefix and end_of_word_suffix null/""; byte_fallback (not with
 * ByteLevel); optional unk_token and fuse_unk; ignore_merges), normalizer null / NFC /
 * Replace(String pattern) / Sequence of those, pre_tokenizer null / Split / Sequence[Split...,
 * optionally ByteLevel(add_prefix_space false, use_regex false) last] with Split(Regex = a
 * known pattern, Isolated) or Split(String, Isolated / Removed / MergedWithPrevious), invert
 * false; post_processor null / ByteLevel / TemplateProcessing / Sequence of those; decoder
 * ByteLevel (with a ByteLevel pre-tokenizer) or else a Sequence of Replace(String)...,
 * ByteFallback, Fuse, Strip (in that order, each optional).
 *
 * Not covered (documented differences from Hugging Face tokenizers):
 *   - None known from Unicode: categories and White_Space are Oniguruma's (Unicode 15.1), NFC
 *     is HF's normalization crate's (Unicode 9.0), as in HF (ipl_unicode.h). A character
 *     assigned after 15.1 is unassigned in both.
 *   - The contraction groups (?i:'s|'t|...) match ASCII letters only: Oniguruma's case
 *     folding would also accept U+017F (long s) for 's' (ipl_pretok.h).
 *   - Invalid UTF-8 (which HF never sees: its input is a Rust String) is tokenized byte by
 *     byte, each invalid byte a character of its own of no category; on characters, such a
 *     byte is looked up as itself, then byte fallback.
 *   - single_word added tokens test for a word character as letter, number or '_'; HF's \w
 *     also counts combining marks and joiners. (None of the five families uses single_word.)
 *   - Decoding ByteLevel returns the raw bytes (HF replaces invalid UTF-8 with U+FFFD; the
 *     ByteFallback decoder does as HF does) and does not apply transformers'
 *     clean_up_tokenization_spaces.
 *
 * The section cache (the prefix cache of issue 14): the text between two added tokens (e.g.
 * one message of a rendered chat, between its template's special tokens) is encoded on its
 * own — added tokens are split out before anything else runs, and nothing merges across them
 * — so its ids are a function of its bytes alone, and ipl_bpe_encode keeps those of sections
 * of IPL_BPE_CACHE_MIN bytes or more in an ipl_idcache keyed by XXH3-128 of the bytes (one
 * cache per tokenizer: the tokenizer is part of the identity). A system prompt or a document
 * seen before costs a hash and a copy; the ids are exactly the cold path's
 * (common/tests/test_ipl_bpe_cache.c checks that on random chats). On by default, bounded by
 * IPL_BPE_CACHE_ENTRIES entries and IPL_BPE_CACHE_BYTES bytes of ids; ipl_bpe_set_cache
 * changes the bounds or turns it off.
 * Immutable after creation but for the section cache (thread-safe itself): thread-safe to
 * share; encode/decode allocate per call.
 */
#ifndef IPL_BPE_H
#define IPL_BPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ipl_idcache.h"

#define IPL_BPE_CACHE_MIN     256u        /* bytes: shorter sections are encoded every time */
#define IPL_BPE_CACHE_ENTRIES 8192u       /* sections kept */
#define IPL_BPE_CACHE_BYTES   (32u << 20) /* bytes of ids kept */

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
 * ByteLevel map — or, without ByteLevel, through the decoder's Replace steps, ByteFallback
 * (consecutive "<0xNN>" tokens as their bytes when those are UTF-8, else U+FFFD for each) and a
 * final Strip. Unknown ids are skipped. Returns a malloc'd NUL-terminated buffer (the caller
 * frees) with its length in *len (may be NULL), or NULL on allocation failure. */
char *ipl_bpe_decode(const ipl_bpe_t *self, const uint32_t *ids, size_t n, size_t *len);

/* The id of a token spelled as in tokenizer.json (vocab key or added token content), or -1. */
int64_t ipl_bpe_token_id(const ipl_bpe_t *self, const char *token);

/* The section cache's bounds (see above); either 0 turns it off (what a cold benchmark
 * wants). Not while another thread encodes with self. 0, or IPL_E_NOMEM (then off). */
int ipl_bpe_set_cache(ipl_bpe_t *self, size_t max_entries, size_t max_bytes);

/* The section cache's figures (zeros when off). */
void ipl_bpe_cache_stats(const ipl_bpe_t *self, ipl_idcache_stats_t *out);

/* One more than the largest id (vocabulary and added tokens). */
uint32_t ipl_bpe_vocab_size(const ipl_bpe_t *self);

#endif
