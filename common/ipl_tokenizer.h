/*
 * ipl_tokenizer — text ⇄ token ids. The gateway and the simulator share it, so the token ids
 * (and therefore the block hashes) the router computes are the ones the worker caches.
 *
 * Two kinds, behind one interface:
 *   - ipl_tokenizer_new_from_file: a model's Hugging Face tokenizer.json (BPE: the Llama-3,
 *     Qwen2/2.5/3, gpt-oss, DeepSeek-V3 and Gemma-3 families), giving exactly the ids vLLM
 *     computes for that model (ipl_bpe.h has the pipeline and the few documented gaps);
 *   - ipl_tokenizer_new_builtin: a stand-in for when no tokenizer.json is configured (the
 *     simulator's default).
 *
 * The built-in tokenizer is reversible and needs no vocabulary file:
 *   - special tokens of the ChatML template ("<|im_start|>", "<|im_end|>", "<|endoftext|>")
 *     are split out first and get ids IPL_TOK_SPECIAL_BASE + k;
 *   - the rest is cut into pieces at word boundaries (a word keeps its leading space, like
 *     GPT-2 style byte-level BPE), each piece at most 3 bytes (the exact rule is in
 *     ipl_tokenizer.c);
 *   - a piece's id is 1 + b0 + (b1 << 8) + (b2 << 16) over its bytes (b1/b2 = 0 when absent,
 *     and a piece never contains NUL), so decoding is exact;
 *   - NUL bytes are dropped: encode(text) == encode(text without its NULs). Any NUL-free
 *     bytes (UTF-8 or not) round-trip exactly: decode(encode(t)) == t.
 * That gives about 3 bytes per token, close to real tokenizers' 3.5–4 for English.
 */
#ifndef IPL_TOKENIZER_H
#define IPL_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#define IPL_TOK_SPECIAL_BASE 0x01000001u
#define IPL_TOK_IM_START     (IPL_TOK_SPECIAL_BASE + 0)
#define IPL_TOK_IM_END       (IPL_TOK_SPECIAL_BASE + 1)
#define IPL_TOK_ENDOFTEXT    (IPL_TOK_SPECIAL_BASE + 2)

typedef struct ipl_tokenizer ipl_tokenizer_t;

/* Tokenizers are immutable after creation: thread-safe to share. */

/* The built-in tokenizer. */
ipl_tokenizer_t *ipl_tokenizer_new_builtin(void);

/* Loads a Hugging Face tokenizer.json. Returns NULL with a message in err (may be NULL;
 * errlen bytes, always NUL-terminated) that names the file, the field and the problem, e.g.
 * "/m/tokenizer.json: pre_tokenizer: not supported (...)". Loading Llama-3's or Qwen3's
 * file takes a few hundred milliseconds. */
ipl_tokenizer_t *ipl_tokenizer_new_from_file(const char *tokenizer_json_path, char *err,
                                             size_t errlen);

/* What a --tokenizer flag names: NULL, "" or "builtin" gives the built-in tokenizer; a
 * directory gives <dir>/tokenizer.json; anything else is a tokenizer.json path. NULL with a
 * message in err on failure. The one way services turn the flag into a tokenizer. */
ipl_tokenizer_t *ipl_tokenizer_open(const char *spec, char *err, size_t errlen);

void ipl_tokenizer_destroy(ipl_tokenizer_t **self_p);

/* "builtin", or "hf:<path>" for a tokenizer.json loaded from <path>. */
const char *ipl_tokenizer_name(const ipl_tokenizer_t *self);

/* Encodes `len` bytes of text as they are, adding no special tokens of its own (vLLM's
 * add_special_tokens=False: what chat requests use, their template carries any BOS).
 * Returns a malloc'd array (the caller frees) and its length in *n; NULL with *n = 0 on
 * allocation failure. Empty text gives a non-NULL empty array. */
uint32_t *ipl_tokenizer_encode(const ipl_tokenizer_t *self, const char *text, size_t len,
                               size_t *n);

/* The same plus the special tokens the tokenizer's post-processor adds around a prompt
 * (vLLM's add_special_tokens=True, the default of /v1/completions): Llama-3.1-style files
 * prepend <|begin_of_text|>, Gemma-3's <bos>; Qwen, gpt-oss and DeepSeek-V3 files and the
 * built-in tokenizer add nothing. */
uint32_t *ipl_tokenizer_encode_with_special(const ipl_tokenizer_t *self, const char *text,
                                            size_t len, size_t *n);

/* The bounds of a tokenizer.json's section cache (ipl_bpe_set_cache; either 0: off); the
 * built-in tokenizer has none (0). Not while another thread encodes. 0 or IPL_E_NOMEM. */
int ipl_tokenizer_set_cache(ipl_tokenizer_t *self, size_t max_entries, size_t max_bytes);

/* Decodes ids back to text (malloc'd, NUL-terminated; the caller frees; NULL on allocation
 * failure). Unknown ids (any id encode never produces) are skipped. A tokenizer.json decodes
 * to the raw bytes of the tokens (special tokens included), which may cut a UTF-8 character
 * between two calls, as the built-in tokenizer can. */
char *ipl_tokenizer_decode(const ipl_tokenizer_t *self, const uint32_t *ids, size_t n);

#endif
