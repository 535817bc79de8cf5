/*
 * ipl_bpe — BPE from tokenizer.json (see ipl_bpe.h for the pipeline and coverage); the
 * pre-tokenizer is ipl_pretok, the normalizer ipl_normalizer.
 *
 * Data, all built once at load and read-only afterwards:
 *
 *   arena     every token's bytes, back to back. Vocabulary keys are stored as the raw bytes
 *             they stand for (the ByteLevel map "Ġ"→0x20, "Ċ"→0x0A, ... applied in reverse;
 *             without ByteLevel the spelling itself, "▁the"), so BPE, the vocabulary lookup
 *             and decoding all work on plain bytes. Decoded spellings get the decoder's
 *             Replace steps at load ("▁" → " ").
 *   pieces    id → span of the arena (decode); vpieces + vmap: vocabulary bytes → id (open
 *             addressing on XXH3).
 *   merges    (left id, right id) → (rank, merged id), open addressing on the packed pair.
 *   tries     added tokens, one trie for "normalized": false (matched on the raw text) and
 *             one for "normalized": true (matched on the normalized text).
 *
 * BPE of one pre-token (s_bpe_word), the O(n log n) scheme of HF tokenizers' Word::merge_all:
 *
 *   bytes  h  e  l  l  o          symbols: a doubly linked list over an array, one per byte
 *   heap   (rank(h,e),0) (rank(e,l),1) (rank(l,l),2) (rank(l,o),3)   ordered by (rank, pos)
 *   pop the lowest; skip it if stale (either side changed since it was pushed); otherwise
 *   merge the right symbol into the left one and push the two new neighbour pairs.
 *
 * (Symbols are characters rather than bytes without ByteLevel, with "<0xNN>" byte-fallback
 * symbols for characters outside the vocabulary.) Words of up to S_SMALL_WORD symbols use the
 * same rule by scanning an array of pair ranks instead (s_bpe_small): fewer steps for the few
 * symbols of a word.
 *
 * Most words are vocabulary entries that BPE rebuilds whole ("Ġthe" merges back into
 * "Ġthe"). Loading runs BPE once on every entry and keeps one bit per id saying so (`whole`);
 * a pre-token found in the vocabulary with its bit set then costs one lookup instead of a
 * merge loop. This is exact (BPE is a function of the bytes) and keeps the tokenizer
 * immutable, unlike the per-word cache of HF tokenizers.
 *
 * Encoding allocates its scratch per call (s_enc_t), so a loaded tokenizer is shareable.
 */
#include "ipl_bpe.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "ipl_error.h"
#include "ipl_normalizer.h"
#include "ipl_pretok.h"
#include "ipl_unicode.h"

#define S_MAX_ID    (1u << 24) /* ids above this are refused at load (tables are dense) */
#define S_MAX_FILE  (1u << 30) /* tokenizer.json files above 1 GiB are refused */
#define S_NO_PIECE  UINT32_MAX /* pieces[id].len of an id nothing defines */
#define S_NO_SLOT   UINT32_MAX
#define S_EMPTY_KEY UINT64_MAX

typedef struct {
    uint32_t off, len;
} s_span_t;

typedef struct {
    uint64_t key; /* left << 32 | right; S_EMPTY_KEY when free */
    uint32_t rank, id;
} s_merge_t;

typedef struct {
    int32_t child, sibling, token; /* token: index into added[], -1 when none ends here */
    unsigned char byte;
} s_tnode_t;

typedef struct {
    s_tnode_t *nodes; /* nodes[0] is the root */
    size_t n, cap;
    bool first[256]; /* bytes some token starts with */
} s_trie_t;

typedef struct {
    s_span_t content;
    uint32_t id;
    bool single_word, lstrip, rstrip;
} s_added_t;

#define S_MAX_GLUE   32
#define S_SMALL_WORD 24 /* words of up to this many symbols merge by scanning, not a heap */
#define S_MARK       "\xE2\x96\x81" /* U+2581 "▁", SentencePiece's word mark */

/* Decoder Strip(content, start, stop) after Fuse: up to start leading and stop trailing
 * characters equal to content are cut from the decoded text. */
typedef struct {
    unsigned char content[4];
    size_t len, start, stop;
} s_strip_t;

struct ipl_bpe {
    unsigned char *arena;
    size_t arena_len, arena_cap;
    s_span_t *pieces;  /* by id, nids entries: what decode writes (added content wins) */
    s_span_t *vpieces; /* by id: the bytes of byte-level vocabulary entries (for vmap) */
    uint32_t nids;
    uint32_t *vmap; /* ids of byte-level vocabulary entries, S_NO_SLOT when free */
    size_t vmap_mask;
    s_merge_t *mmap;
    size_t mmap_mask;
    int64_t byte_id[256];     /* id of each single byte, -1 when the vocabulary lacks it */
    int64_t fallback_id[256]; /* byte_fallback: the id of "<0xNN>", -1 when missing */
    int16_t *byte_token; /* by id: the byte a "<0xNN>" token decodes to (ByteFallback), or -1 */
    int64_t unk_id;      /* -1: characters missing from the vocabulary are dropped */
    uint8_t *whole;      /* bit per id: BPE of the token's own bytes gives back the token */
    bool fuse_unk, ignore_merges, byte_fallback;
    bool byte_level; /* ByteLevel pre-tokenizer: BPE on bytes; else on UTF-8 characters */
    ipl_normalizer_t *norm;
    ipl_pretok_t pretok;
    bool decode_fallback; /* the decoder has ByteFallback */
    s_strip_t strip;      /* the decoder's final Strip, if any */
    /* BPE on characters: a piece is cut before each "▁" that follows a character other than
     * "▁" and glue[] (see s_find_glue), which gives the same ids much faster. */
    bool split_marks;
    uint32_t glue[S_MAX_GLUE];
    size_t nglue;
    s_added_t *added;
    size_t nadded;
    s_trie_t raw_trie, norm_trie;
    uint32_t *prefix, *suffix; /* post-processor ids around the sequence */
    size_t nprefix, nsuffix;
    ipl_idcache_t *cache; /* sections' ids (see the header), or NULL: off */
};

/* ---- errors ---------------------------------------------------------------------------- */

typedef struct {
    char *buf;
    size_t len;
    const char *origin;
} s_err_t;

/* Formats "origin: message" into the caller's buffer; returns false for `return s_fail(...)`. */
static bool s_fail(s_err_t *e, const char *fmt, ...)
{
    if (!e->buf || e->len == 0) return false;
    int k = snprintf(e->buf, e->len, "%s: ", e->origin);
    if (k < 0 || (size_t)k >= e->len) return false;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->buf + k, e->len - (size_t)k, fmt, ap);
    va_end(ap);
    return false;
}

/* ---- the ByteLevel map ---------------------------------------------------------------- */

/* GPT-2 bytes_to_unicode: printable bytes map to themselves, the 68 others (0x00–0x20,
 * 0x7F–0xA0, 0xAD) in increasing order to U+0100, U+0101, ... Inverse: code point → byte. */
static int s_cp_to_byte(uint32_t cp)
{
    if ((cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF))
        return (int)cp;
    if (cp < 0x100 || cp >= 0x100 + 68) return -1;
    uint32_t k = cp - 0x100;                         /* the k-th non-printable byte */
    if (k <= 0x20) return (int)k;                    /* 0x00–0x20: 33 bytes */
    if (k <= 0x20 + 34) return (int)(0x7F + k - 33); /* 0x7F–0xA0: 34 bytes */
    return 0xAD;                                     /* the 68th */
}

/* Converts a tokenizer.json token spelling to the bytes it stands for; false when a
 * character is outside the map (the token is then not byte-level). out: room for len. */
static bool s_unmap(const char *s, size_t len, unsigned char *out, size_t *outlen)
{
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        i += ipl_utf8_next((const unsigned char *)s + i, len - i, &cp);
        int b = cp == IPL_UNICODE_INVALID ? -1 : s_cp_to_byte(cp);
        if (b < 0) return false;
        out[n++] = (unsigned char)b;
    }
    *outlen = n;
    return true;
}

/* The bytes a tokenizer.json token spelling stands for: through the inverse ByteLevel map
 * when the pre-tokenizer is ByteLevel (false when a character is outside it), else the
 * spelling itself (SentencePiece-style vocabularies: "▁the" is those UTF-8 bytes). */
static bool s_spelling(const ipl_bpe_t *self, const char *s, size_t len, unsigned char *out,
                       size_t *outlen)
{
    if (self->byte_level) return s_unmap(s, len, out, outlen);
    memcpy(out, s, len);
    *outlen = len;
    return true;
}

/* ---- arena, vocabulary and merge maps ------------------------------------------------- */

static bool s_arena_add(ipl_bpe_t *self, const void *bytes, size_t len, s_span_t *span)
{
    if (self->arena_len + len > UINT32_MAX) return false;
    if (self->arena_len + len > self->arena_cap) {
        size_t cap = self->arena_cap ? self->arena_cap : 1 << 16;
        while (cap < self->arena_len + len)
            cap *= 2;
        unsigned char *a = realloc(self->arena, cap);
        if (!a) return false;
        self->arena = a;
        self->arena_cap = cap;
    }
    memcpy(self->arena + self->arena_len, bytes, len);
    span->off = (uint32_t)self->arena_len;
    span->len = (uint32_t)len;
    self->arena_len += len;
    return true;
}

static size_t s_pow2_at_least(size_t n)
{
    size_t p = 16;
    while (p < n)
        p *= 2;
    return p;
}

/* The id of the byte-level vocabulary entry spelling bytes w[0..n), or -1. */
static int64_t s_vocab_find(const ipl_bpe_t *self, const unsigned char *w, size_t n)
{
    size_t slot = (size_t)XXH3_64bits(w, n) & self->vmap_mask;
    for (;;) {
        uint32_t id = self->vmap[slot];
        if (id == S_NO_SLOT) return -1;
        const s_span_t *sp = &self->vpieces[id];
        if (sp->len == n && memcmp(self->arena + sp->off, w, n) == 0) return id;
        slot = (slot + 1) & self->vmap_mask;
    }
}

/* Inserts id (vpieces[id] already set); a later duplicate spelling replaces the earlier id. */
static void s_vocab_insert(ipl_bpe_t *self, uint32_t id)
{
    const s_span_t *sp = &self->vpieces[id];
    size_t slot = (size_t)XXH3_64bits(self->arena + sp->off, sp->len) & self->vmap_mask;
    for (;;) {
        uint32_t other = self->vmap[slot];
        if (other == S_NO_SLOT) break;
        const s_span_t *op = &self->vpieces[other];
        if (op->len == sp->len &&
            memcmp(self->arena + op->off, self->arena + sp->off, sp->len) == 0)
            break;
        slot = (slot + 1) & self->vmap_mask;
    }
    self->vmap[slot] = id;
}

static size_t s_mix(uint64_t x)
{
    x ^= x >> 31;
    x *= UINT64_C(0x7fb5d329728ea185);
    x ^= x >> 27;
    x *= UINT64_C(0x81dadef4bc2dd44d);
    x ^= x >> 33;
    return (size_t)x;
}

static const s_merge_t *s_merge_find(const ipl_bpe_t *self, uint32_t left, uint32_t right)
{
    uint64_t key = (uint64_t)left << 32 | right;
    for (size_t slot = s_mix(key) & self->mmap_mask;; slot = (slot + 1) & self->mmap_mask) {
        const s_merge_t *m = &self->mmap[slot];
        if (m->key == key) return m;
        if (m->key == S_EMPTY_KEY) return NULL;
    }
}

/* A later duplicate pair replaces the earlier rank, as HF's HashMap collect does. */
static void s_merge_insert(ipl_bpe_t *self, uint32_t left, uint32_t right, uint32_t rank,
                           uint32_t id)
{
    uint64_t key = (uint64_t)left << 32 | right;
    size_t slot = s_mix(key) & self->mmap_mask;
    while (self->mmap[slot].key != S_EMPTY_KEY && self->mmap[slot].key != key)
        slot = (slot + 1) & self->mmap_mask;
    self->mmap[slot] = (s_merge_t){key, rank, id};
}

/* ---- added-token tries ---------------------------------------------------------------- */

static int32_t s_trie_node(s_trie_t *t, unsigned char byte)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        s_tnode_t *v = realloc(t->nodes, cap * sizeof *v);
        if (!v) return -1;
        t->nodes = v;
        t->cap = cap;
    }
    t->nodes[t->n] = (s_tnode_t){-1, -1, -1, byte};
    return (int32_t)t->n++;
}

static bool s_trie_add(s_trie_t *t, const unsigned char *s, size_t len, int32_t token)
{
    if (t->n == 0 && s_trie_node(t, 0) < 0) return false;
    int32_t at = 0;
    for (size_t i = 0; i < len; i++) {
        int32_t c = t->nodes[at].child;
        while (c >= 0 && t->nodes[c].byte != s[i])
            c = t->nodes[c].sibling;
        if (c < 0) {
            if ((c = s_trie_node(t, s[i])) < 0) return false;
            t->nodes[c].sibling = t->nodes[at].child;
            t->nodes[at].child = c;
        }
        at = c;
    }
    t->nodes[at].token = token; /* a later duplicate content replaces the earlier token */
    t->first[s[0]] = true;
    return true;
}

/* The longest token starting at p[0..n): its index (end in *end), or -1. */
static int32_t s_trie_longest(const s_trie_t *t, const unsigned char *p, size_t n, size_t *end)
{
    int32_t best = -1, at = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t c = t->nodes[at].child;
        while (c >= 0 && t->nodes[c].byte != p[i])
            c = t->nodes[c].sibling;
        if (c < 0) break;
        at = c;
        if (t->nodes[at].token >= 0) {
            best = t->nodes[at].token;
            *end = i + 1;
        }
    }
    return best;
}

/* ---- loading --------------------------------------------------------------------------- */

static const char *s_type_of(const cJSON *obj)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(obj, "type");
    return cJSON_IsString(t) ? t->valuestring : "";
}

static bool s_flag(const cJSON *obj, const char *key, bool dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsBool(v) ? cJSON_IsTrue(v) : dflt;
}

/* A JSON integer in [0, S_MAX_ID). */
static bool s_get_id(const cJSON *v, uint32_t *id)
{
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble >= S_MAX_ID ||
        v->valuedouble != (double)(uint32_t)v->valuedouble)
        return false;
    *id = (uint32_t)v->valuedouble;
    return true;
}

/* model.vocab: ids, pieces and the byte-level map. */
static bool s_load_vocab(ipl_bpe_t *self, const cJSON *vocab, s_err_t *e)
{
    size_t count = 0;
    for (const cJSON *it = vocab->child; it; it = it->next)
        count++;
    self->vmap_mask = s_pow2_at_least(count * 2 + 1) - 1;
    self->vmap = malloc((self->vmap_mask + 1) * sizeof *self->vmap);
    if (!self->vmap) return s_fail(e, "out of memory");
    memset(self->vmap, 0xff, (self->vmap_mask + 1) * sizeof *self->vmap);
    unsigned char *buf = NULL;
    size_t bufcap = 0;
    bool ok = true;
    for (const cJSON *it = vocab->child; it && ok; it = it->next) {
        uint32_t id = 0;
        s_get_id(it, &id); /* checked by s_max_id */
        size_t len = strlen(it->string), n;
        if (len > bufcap) {
            unsigned char *b = realloc(buf, len);
            if (!(ok = b != NULL)) break;
            buf = b;
            bufcap = len;
        }
        /* Entries outside the ByteLevel alphabet cannot come out of BPE on bytes; they are
         * kept for decoding only, by their UTF-8 spelling, as HF's ByteLevel decoder does. */
        if (s_spelling(self, it->string, len, buf, &n)) {
            ok = s_arena_add(self, buf, n, &self->vpieces[id]);
            self->pieces[id] = self->vpieces[id];
            if (ok) s_vocab_insert(self, id);
        } else {
            ok = s_arena_add(self, it->string, len, &self->pieces[id]);
        }
    }
    free(buf);
    for (size_t i = 0; i < 256; i++) {
        unsigned char b = (unsigned char)i, name[8];
        self->byte_id[i] = s_vocab_find(self, &b, 1);
        snprintf((char *)name, sizeof name, "<0x%02X>", (unsigned)i); /* Rust's {:#04X} */
        self->fallback_id[i] = self->byte_level ? -1 : s_vocab_find(self, name, 6);
    }
    return ok ? true : s_fail(e, "out of memory");
}

/* One merge "a b" or ["a", "b"] of rank `rank`. */
static bool s_load_merge(ipl_bpe_t *self, const cJSON *m, uint32_t rank, s_err_t *e)
{
    const char *a, *b;
    size_t alen, blen;
    if (cJSON_IsString(m)) {
        a = m->valuestring;
        const char *sp = strchr(a, ' ');
        if (!sp || strchr(sp + 1, ' '))
            return s_fail(e, "model.merges[%u]: \"%s\" is not two tokens separated by one space",
                          rank, a);
        alen = (size_t)(sp - a);
        b = sp + 1;
        blen = strlen(b);
    } else if (cJSON_IsArray(m) && cJSON_GetArraySize(m) == 2 && cJSON_IsString(m->child) &&
               cJSON_IsString(m->child->next)) {
        a = m->child->valuestring;
        alen = strlen(a);
        b = m->child->next->valuestring;
        blen = strlen(b);
    } else {
        return s_fail(e, "model.merges[%u]: neither a string \"a b\" nor a pair [\"a\", \"b\"]",
                      rank);
    }
    unsigned char stackbuf[256], *buf = stackbuf;
    if (alen + blen > sizeof stackbuf && !(buf = malloc(alen + blen)))
        return s_fail(e, "out of memory");
    size_t na, nb;
    bool ok = true;
    /* A merge of tokens outside the ByteLevel alphabet can never apply: skip it. */
    if (s_spelling(self, a, alen, buf, &na) && s_spelling(self, b, blen, buf + na, &nb)) {
        int64_t l = s_vocab_find(self, buf, na), r = s_vocab_find(self, buf + na, nb);
        int64_t id = s_vocab_find(self, buf, na + nb);
        if (l < 0)
            ok = s_fail(e, "model.merges[%u]: token \"%.*s\" is not in model.vocab", rank,
                        (int)alen, a);
        else if (r < 0)
            ok = s_fail(e, "model.merges[%u]: token \"%.*s\" is not in model.vocab", rank,
                        (int)blen, b);
        else if (id < 0)
            ok = s_fail(e, "model.merges[%u]: token \"%.*s%.*s\" is not in model.vocab", rank,
                        (int)alen, a, (int)blen, b);
        else
            s_merge_insert(self, (uint32_t)l, (uint32_t)r, rank, (uint32_t)id);
    }
    if (buf != stackbuf) free(buf);
    return ok;
}

/* SentencePiece-style vocabularies (BPE on characters, "▁" for spaces) whose pre-tokenizer
 * leaves the whole text as one piece: BPE only ever merges two symbols into a vocabulary entry,
 * so no merge crosses a point between two characters that no entry spans. Entries spanning
 * "c▁" for a character c other than "▁" are rare (Gemma-3: only ">▁</"); their characters are
 * kept in glue[], and a piece can be cut before every other "▁" that ends a run of non-"▁"
 * characters: the pieces then merge exactly as the whole would (each merge is inside one
 * piece, and merges of different pieces do not interact), but in word-sized heaps, and most
 * pieces are one vocabulary lookup. Off when "▁" is not in the vocabulary (its unk or byte
 * fallback could fuse across the cut) or more than S_MAX_GLUE characters glue; never after a
 * character missing from the vocabulary (see s_piece_cb). */
static void s_find_glue(ipl_bpe_t *self)
{
    self->split_marks = s_vocab_find(self, (const unsigned char *)S_MARK, 3) >= 0;
    for (uint32_t id = 0; id < self->nids && self->split_marks; id++) {
        const s_span_t *sp = &self->vpieces[id];
        if (sp->len == S_NO_PIECE) continue;
        const unsigned char *t = self->arena + sp->off;
        for (size_t i = 0; i < sp->len && self->split_marks;) {
            uint32_t cp;
            size_t len = ipl_utf8_next(t + i, sp->len - i, &cp);
            if (cp != 0x2581 && i + len + 3 <= sp->len && !memcmp(t + i + len, S_MARK, 3)) {
                size_t k = 0;
                while (k < self->nglue && self->glue[k] != cp)
                    k++;
                if (k == S_MAX_GLUE)
                    self->split_marks = false;
                else if (k == self->nglue)
                    self->glue[self->nglue++] = cp;
            }
            i += len;
        }
    }
}

static bool s_load_model(ipl_bpe_t *self, const cJSON *model, s_err_t *e)
{
    if (!cJSON_IsObject(model)) return s_fail(e, "model: missing or not an object");
    const char *type = s_type_of(model);
    if (*type && strcmp(type, "BPE") != 0)
        return s_fail(e, "model.type: \"%s\" is not supported (only BPE)", type);
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    if (!cJSON_IsObject(vocab)) return s_fail(e, "model.vocab: missing or not an object");
    if (!cJSON_IsArray(merges)) return s_fail(e, "model.merges: missing or not an array");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(model, "dropout");
    if (v && !cJSON_IsNull(v) && !(cJSON_IsNumber(v) && v->valuedouble == 0))
        return s_fail(e, "model.dropout: only null or 0 is supported (dropout is random)");
    static const char *const affixes[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (size_t i = 0; i < 2; i++) {
        v = cJSON_GetObjectItemCaseSensitive(model, affixes[i]);
        if (v && !cJSON_IsNull(v) && !(cJSON_IsString(v) && v->valuestring[0] == '\0'))
            return s_fail(e, "model.%s: only null or \"\" is supported", affixes[i]);
    }
    self->byte_fallback = s_flag(model, "byte_fallback", false);
    if (self->byte_fallback && self->byte_level)
        return s_fail(e, "model.byte_fallback: true (SentencePiece-style <0xNN> tokens) is not "
                         "supported with the ByteLevel pre-tokenizer");
    self->ignore_merges = s_flag(model, "ignore_merges", false);
    self->fuse_unk = s_flag(model, "fuse_unk", false);
    if (!s_load_vocab(self, vocab, e)) return false;
    if (!self->byte_level) s_find_glue(self);

    size_t nmerges = (size_t)cJSON_GetArraySize(merges);
    self->mmap_mask = s_pow2_at_least(nmerges * 2 + 1) - 1;
    self->mmap = malloc((self->mmap_mask + 1) * sizeof *self->mmap);
    if (!self->mmap) return s_fail(e, "out of memory");
    for (size_t i = 0; i <= self->mmap_mask; i++)
        self->mmap[i].key = S_EMPTY_KEY;
    uint32_t rank = 0;
    for (const cJSON *m = merges->child; m; m = m->next, rank++)
        if (!s_load_merge(self, m, rank, e)) return false;

    self->unk_id = -1;
    v = cJSON_GetObjectItemCaseSensitive(model, "unk_token");
    if (cJSON_IsString(v)) /* an unk_token missing from the vocabulary acts as none */
        self->unk_id = ipl_bpe_token_id(self, v->valuestring);
    return true;
}

/* The largest id of the vocabulary and the added tokens, to size the dense tables. */
static bool s_max_id(const cJSON *root, uint32_t *max, s_err_t *e)
{
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    *max = 0;
    for (const cJSON *it = vocab ? vocab->child : NULL; it; it = it->next) {
        uint32_t id;
        if (!s_get_id(it, &id))
            return s_fail(e, "model.vocab[\"%s\"]: the id is not an integer in [0, %u)",
                          it->string ? it->string : "?", S_MAX_ID);
        if (id > *max) *max = id;
    }
    size_t i = 0;
    for (const cJSON *it = cJSON_IsArray(added) ? added->child : NULL; it; it = it->next, i++) {
        uint32_t id;
        if (!s_get_id(cJSON_GetObjectItemCaseSensitive(it, "id"), &id))
            return s_fail(e, "added_tokens[%zu].id: missing or not an integer in [0, %u)", i,
                          S_MAX_ID);
        if (id > *max) *max = id;
    }
    return true;
}

static bool s_load_added(ipl_bpe_t *self, const cJSON *added, s_err_t *e)
{
    if (!added || cJSON_IsNull(added)) return true;
    if (!cJSON_IsArray(added)) return s_fail(e, "added_tokens: not an array");
    size_t n = (size_t)cJSON_GetArraySize(added);
    self->added = calloc(n ? n : 1, sizeof *self->added);
    if (!self->added) return s_fail(e, "out of memory");
    size_t i = 0;
    for (const cJSON *it = added->child; it; it = it->next, i++) {
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(it, "content");
        uint32_t id = 0;
        s_get_id(cJSON_GetObjectItemCaseSensitive(it, "id"), &id); /* checked by s_max_id */
        if (!cJSON_IsString(content))
            return s_fail(e, "added_tokens[%zu].content: missing or not a string", i);
        size_t len = strlen(content->valuestring);
        if (len == 0) continue; /* HF ignores empty added tokens */
        bool special = s_flag(it, "special", false);
        bool normalized = s_flag(it, "normalized", !special);
        s_added_t *a = &self->added[self->nadded];
        a->id = id;
        a->single_word = s_flag(it, "single_word", false);
        a->lstrip = s_flag(it, "lstrip", false);
        a->rstrip = s_flag(it, "rstrip", false);
        if (!s_arena_add(self, content->valuestring, len, &a->content))
            return s_fail(e, "out of memory");
        self->pieces[id] = a->content;
        char *norm = NULL;
        size_t nlen = len;
        bool ok = !normalized ||
                  ipl_normalizer_apply(self->norm, content->valuestring, len, &norm, &nlen);
        const char *pattern = norm ? norm : content->valuestring;
        ok = ok &&
             (nlen == 0 || s_trie_add(normalized ? &self->norm_trie : &self->raw_trie,
                                      (const unsigned char *)pattern, nlen, (int32_t)self->nadded));
        free(norm);
        if (!ok) return s_fail(e, "out of memory");
        self->nadded++;
    }
    return true;
}

/* A String pattern {"String": "..."} of a Replace or Split (a Regex one is refused). */
static const char *s_string_pattern(const cJSON *obj)
{
    const cJSON *pattern = cJSON_GetObjectItemCaseSensitive(obj, "pattern");
    const cJSON *str = cJSON_GetObjectItemCaseSensitive(pattern, "String");
    return cJSON_IsString(str) ? str->valuestring : NULL;
}

static bool s_load_normalizer(ipl_bpe_t *self, const cJSON *n, s_err_t *e)
{
    char err[256];
    if (!(self->norm = ipl_normalizer_new_from_json(n, err, sizeof err)))
        return s_fail(e, "%s", err);
    return true;
}

/* One Split stage of the pre-tokenizer. */
static bool s_load_split(ipl_bpe_t *self, const cJSON *split, const char *where, s_err_t *e)
{
    const cJSON *pattern = cJSON_GetObjectItemCaseSensitive(split, "pattern");
    const cJSON *regex = cJSON_GetObjectItemCaseSensitive(pattern, "Regex");
    const cJSON *behavior = cJSON_GetObjectItemCaseSensitive(split, "behavior");
    const char *literal = s_string_pattern(split);
    if (!cJSON_IsString(behavior)) return s_fail(e, "%s.behavior: missing or not a string", where);
    if (s_flag(split, "invert", false))
        return s_fail(e, "%s.invert: only false is supported", where);
    if (self->pretok.n == IPL_PRETOK_MAX_STAGES)
        return s_fail(e, "%s: more than %d Split stages", where, IPL_PRETOK_MAX_STAGES);
    const char *b = behavior->valuestring;
    if (cJSON_IsString(regex)) {
        int k = ipl_pretok_pattern_find(regex->valuestring);
        if (k < 0)
            return s_fail(e,
                          "%s.pattern.Regex: unknown pattern %s (implemented: the Llama-3, Qwen2, "
                          "o200k (gpt-oss) and DeepSeek-V3 ones)",
                          where, regex->valuestring);
        if (strcmp(b, "Isolated") != 0)
            return s_fail(e, "%s.behavior: \"%s\" is not supported with a Regex (only Isolated)",
                          where, b);
        ipl_pretok_add_regex(&self->pretok, (ipl_pretok_pattern_t)k);
        return true;
    }
    ipl_pretok_behavior_t how = !strcmp(b, "Isolated")             ? IPL_PRETOK_ISOLATED
                                : !strcmp(b, "Removed")            ? IPL_PRETOK_REMOVED
                                : !strcmp(b, "MergedWithPrevious") ? IPL_PRETOK_MERGED_WITH_PREVIOUS
                                                                   : (ipl_pretok_behavior_t)-1;
    if (!literal)
        return s_fail(e, "%s.pattern: missing, or neither {\"Regex\": ...} nor {\"String\": ...}",
                      where);
    if ((int)how < 0)
        return s_fail(e,
                      "%s.behavior: \"%s\" is not supported (Isolated, Removed or "
                      "MergedWithPrevious)",
                      where, b);
    if (!ipl_pretok_add_literal(&self->pretok, literal, strlen(literal), how))
        return s_fail(e, "%s.pattern.String: empty or longer than %d bytes", where,
                      IPL_PRETOK_MAX_LITERAL);
    return true;
}

/* Sequence[Split..., ByteLevel(add_prefix_space false, use_regex false)] (byte-level BPE), or
 * no ByteLevel at all: null, one Split, or a Sequence of Splits (BPE on characters). */
static bool s_load_pre_tokenizer(ipl_bpe_t *self, const cJSON *p, s_err_t *e)
{
    if (!p || cJSON_IsNull(p)) return true;
    const char *type = s_type_of(p);
    if (!strcmp(type, "Split")) return s_load_split(self, p, "pre_tokenizer", e);
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(p, "pretokenizers");
    if (strcmp(type, "Sequence") != 0 || !cJSON_IsArray(list))
        return s_fail(e,
                      "pre_tokenizer: type \"%s\" is not supported (only null, Split, or a "
                      "Sequence of Splits optionally ending in ByteLevel)",
                      type);
    size_t i = 0;
    for (const cJSON *it = list->child; it; it = it->next, i++) {
        char where[64];
        snprintf(where, sizeof where, "pre_tokenizer.pretokenizers[%zu]", i);
        const char *t = s_type_of(it);
        if (!strcmp(t, "Split")) {
            if (!s_load_split(self, it, where, e)) return false;
        } else if (!strcmp(t, "ByteLevel") && !it->next) {
            if (s_flag(it, "add_prefix_space", false) || s_flag(it, "use_regex", true))
                return s_fail(e,
                              "%s: ByteLevel is supported with add_prefix_space false and "
                              "use_regex false only",
                              where);
            self->byte_level = true;
        } else {
            return s_fail(e,
                          "%s: type \"%s\" is not supported here (Split stages, then "
                          "optionally ByteLevel last)",
                          where, t);
        }
    }
    return true;
}

static bool s_append_ids(uint32_t **v, size_t *n, const uint32_t *ids, size_t k, bool front)
{
    uint32_t *w = realloc(*v, (*n + k + 1) * sizeof *w);
    if (!w) return false;
    if (front) {
        memmove(w + k, w, *n * sizeof *w);
        memcpy(w, ids, k * sizeof *w);
    } else {
        memcpy(w + *n, ids, k * sizeof *w);
    }
    *v = w;
    *n += k;
    return true;
}

/* TemplateProcessing "single": the ids before and after Sequence A. A later template wraps
 * the result of an earlier one. */
static bool s_load_template(ipl_bpe_t *self, const cJSON *p, s_err_t *e)
{
    const cJSON *single = cJSON_GetObjectItemCaseSensitive(p, "single");
    const cJSON *specials = cJSON_GetObjectItemCaseSensitive(p, "special_tokens");
    if (!cJSON_IsArray(single))
        return s_fail(e, "post_processor: TemplateProcessing without single");
    uint32_t pre[64], suf[64];
    size_t npre = 0, nsuf = 0;
    bool seen_a = false;
    for (const cJSON *it = single->child; it; it = it->next) {
        const cJSON *sp = cJSON_GetObjectItemCaseSensitive(it, "SpecialToken");
        const cJSON *seq = cJSON_GetObjectItemCaseSensitive(it, "Sequence");
        if (seq) {
            seen_a = true;
            continue;
        }
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(sp, "id");
        if (!cJSON_IsString(name))
            return s_fail(e, "post_processor: a single template item is neither SpecialToken "
                             "nor Sequence");
        const cJSON *entry = cJSON_GetObjectItemCaseSensitive(specials, name->valuestring);
        const cJSON *ids = cJSON_GetObjectItemCaseSensitive(entry, "ids");
        uint32_t one;
        const cJSON *idv = cJSON_IsArray(ids) ? ids->child : NULL;
        int64_t fallback = idv ? -1 : ipl_bpe_token_id(self, name->valuestring);
        if (!idv && fallback < 0)
            return s_fail(e, "post_processor: special token \"%s\" has no ids", name->valuestring);
        do {
            if (idv && !s_get_id(idv, &one))
                return s_fail(e, "post_processor: special token \"%s\": bad id", name->valuestring);
            if (!idv) one = (uint32_t)fallback;
            uint32_t *dst = seen_a ? suf : pre;
            size_t *nd = seen_a ? &nsuf : &npre;
            if (*nd == 64) return s_fail(e, "post_processor: template too long");
            dst[(*nd)++] = one;
        } while (idv && (idv = idv->next) != NULL);
    }
    if (!s_append_ids(&self->prefix, &self->nprefix, pre, npre, true) ||
        !s_append_ids(&self->suffix, &self->nsuffix, suf, nsuf, false))
        return s_fail(e, "out of memory");
    return true;
}

static bool s_load_post_processor(ipl_bpe_t *self, const cJSON *p, s_err_t *e)
{
    if (!p || cJSON_IsNull(p)) return true;
    const char *type = s_type_of(p);
    if (!strcmp(type, "ByteLevel")) return true; /* offsets only */
    if (!strcmp(type, "TemplateProcessing")) return s_load_template(self, p, e);
    if (!strcmp(type, "Sequence")) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(p, "processors");
        for (const cJSON *it = cJSON_IsArray(list) ? list->child : NULL; it; it = it->next)
            if (!s_load_post_processor(self, it, e)) return false;
        return true;
    }
    return s_fail(e,
                  "post_processor: type \"%s\" is not supported (ByteLevel, "
                  "TemplateProcessing or a Sequence of them)",
                  type);
}

static bool s_precompute_whole(ipl_bpe_t *self);

/* The decoder's Replace on every token's decoded spelling (added tokens included: HF decodes
 * them through the decoder too). */
static bool s_decode_replace(ipl_bpe_t *self, const char *pattern, const char *content)
{
    size_t plen = strlen(pattern), clen = strlen(content);
    for (uint32_t id = 0; id < self->nids; id++) {
        s_span_t *sp = &self->pieces[id];
        char *out;
        size_t n;
        if (sp->len == S_NO_PIECE) continue;
        if (!ipl_normalizer_replace((const char *)self->arena + sp->off, sp->len, pattern, plen,
                                    content, clen, &out, &n))
            return false;
        bool ok = !out || s_arena_add(self, out, n, sp);
        free(out);
        if (!ok) return false;
    }
    return true;
}

static int s_hex(unsigned char c)
{
    return c >= '0' && c <= '9'                     ? c - '0'
           : (c | 0x20) >= 'a' && (c | 0x20) <= 'f' ? (c | 0x20) - 'a' + 10
                                                    : -1;
}

/* ByteFallback: the byte of each token spelled "<0xNN>" (Rust's u8::from_str_radix of the two
 * characters after "<0x", which also takes "+N"). */
static bool s_find_byte_tokens(ipl_bpe_t *self)
{
    if (!(self->byte_token = malloc(self->nids * sizeof *self->byte_token))) return false;
    for (uint32_t id = 0; id < self->nids; id++) {
        const s_span_t *sp = &self->pieces[id];
        const unsigned char *t = self->arena + sp->off;
        self->byte_token[id] = -1;
        if (sp->len != 6 || memcmp(t, "<0x", 3) != 0 || t[5] != '>') continue;
        int hi = t[3] == '+' ? 0 : s_hex(t[3]), lo = s_hex(t[4]);
        if (hi >= 0 && lo >= 0) self->byte_token[id] = (int16_t)(hi * 16 + lo);
    }
    return true;
}

/* ByteLevel with a ByteLevel pre-tokenizer; otherwise a Sequence of Replace (String
 * patterns), ByteFallback, Fuse and a final Strip, in that order (each optional; HF joins the
 * decoded tokens without a separator whether or not Fuse is there). */
static bool s_load_decoder(ipl_bpe_t *self, const cJSON *d, s_err_t *e)
{
    const char *type = s_type_of(d);
    if (self->byte_level) {
        if (strcmp(type, "ByteLevel") != 0)
            return s_fail(e,
                          "decoder: type \"%s\" is not supported with the ByteLevel "
                          "pre-tokenizer (only ByteLevel)",
                          type);
        return true;
    }
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(d, "decoders");
    if (strcmp(type, "Sequence") != 0 || !cJSON_IsArray(list))
        return s_fail(e,
                      "decoder: type \"%s\" is not supported without a ByteLevel pre-tokenizer "
                      "(only a Sequence of Replace, ByteFallback, Fuse, Strip)",
                      type);
    enum { REPLACING, FALLBACK, FUSED, STRIPPED } at = REPLACING;
    size_t i = 0;
    for (const cJSON *it = list->child; it; it = it->next, i++) {
        const char *t = s_type_of(it);
        if (!strcmp(t, "Replace") && at == REPLACING) {
            const char *pattern = s_string_pattern(it);
            const cJSON *content = cJSON_GetObjectItemCaseSensitive(it, "content");
            if (!pattern || !*pattern || !cJSON_IsString(content))
                return s_fail(e,
                              "decoder.decoders[%zu]: Replace needs a non-empty "
                              "{\"String\": ...} pattern and a string content",
                              i);
            if (!s_decode_replace(self, pattern, content->valuestring))
                return s_fail(e, "out of memory");
        } else if (!strcmp(t, "ByteFallback") && at == REPLACING) {
            self->decode_fallback = true;
            at = FALLBACK;
        } else if (!strcmp(t, "Fuse") && at < FUSED) {
            at = FUSED;
        } else if (!strcmp(t, "Strip") && at == FUSED) {
            const cJSON *content = cJSON_GetObjectItemCaseSensitive(it, "content");
            const cJSON *start = cJSON_GetObjectItemCaseSensitive(it, "start");
            const cJSON *stop = cJSON_GetObjectItemCaseSensitive(it, "stop");
            size_t clen = cJSON_IsString(content) ? strlen(content->valuestring) : 0;
            uint32_t cp = 0;
            if (clen == 0 || clen > 4 ||
                ipl_utf8_next((const unsigned char *)content->valuestring, clen, &cp) != clen ||
                !cJSON_IsNumber(start) || start->valuedouble < 0 || !cJSON_IsNumber(stop) ||
                stop->valuedouble < 0)
                return s_fail(e,
                              "decoder.decoders[%zu]: Strip needs a one-character content and "
                              "non-negative start and stop",
                              i);
            memcpy(self->strip.content, content->valuestring, clen);
            self->strip.len = clen;
            self->strip.start = (size_t)start->valuedouble;
            self->strip.stop = (size_t)stop->valuedouble;
            at = STRIPPED;
        } else {
            return s_fail(e,
                          "decoder.decoders[%zu]: \"%s\" is not supported here (Replace..., "
                          "ByteFallback, Fuse, Strip, in that order)",
                          i, t);
        }
    }
    if (self->decode_fallback && !s_find_byte_tokens(self)) return s_fail(e, "out of memory");
    return true;
}

static bool s_load(ipl_bpe_t *self, const cJSON *root, s_err_t *e)
{
    if (!cJSON_IsObject(root)) return s_fail(e, "not a JSON object");
    uint32_t max;
    if (!s_max_id(root, &max, e)) return false;
    self->nids = max + 1;
    self->pieces = malloc(self->nids * sizeof *self->pieces);
    self->vpieces = malloc(self->nids * sizeof *self->vpieces);
    if (!self->pieces || !self->vpieces) return s_fail(e, "out of memory");
    for (uint32_t i = 0; i < self->nids; i++)
        self->pieces[i] = self->vpieces[i] = (s_span_t){0, S_NO_PIECE};
    /* The pre-tokenizer first: whether it ends in ByteLevel decides how tokens are spelled. */
    if (!s_load_pre_tokenizer(self, cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"), e) ||
        !s_load_model(self, cJSON_GetObjectItemCaseSensitive(root, "model"), e))
        return false;
    if (!self->ignore_merges && !s_precompute_whole(self)) return s_fail(e, "out of memory");
    return s_load_normalizer(self, cJSON_GetObjectItemCaseSensitive(root, "normalizer"), e) &&
           s_load_added(self, cJSON_GetObjectItemCaseSensitive(root, "added_tokens"), e) &&
           s_load_decoder(self, cJSON_GetObjectItemCaseSensitive(root, "decoder"), e) &&
           s_load_post_processor(self, cJSON_GetObjectItemCaseSensitive(root, "post_processor"), e);
}

ipl_bpe_t *ipl_bpe_new_from_json(const char *json, size_t len, const char *origin, char *err,
                                 size_t errlen)
{
    s_err_t e = {err, errlen, origin ? origin : "tokenizer.json"};
    if (err && errlen) err[0] = '\0';
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        s_fail(&e, "invalid JSON near byte %zu",
               at && at >= json && at <= json + len ? (size_t)(at - json) : (size_t)0);
        return NULL;
    }
    ipl_bpe_t *self = calloc(1, sizeof *self);
    bool ok = self ? s_load(self, root, &e) : s_fail(&e, "out of memory");
    cJSON_Delete(root);
    if (ok) self->cache = ipl_idcache_new(IPL_BPE_CACHE_ENTRIES, IPL_BPE_CACHE_BYTES);
    if (!ok) ipl_bpe_destroy(&self);
    return self;
}

int ipl_bpe_set_cache(ipl_bpe_t *self, size_t max_entries, size_t max_bytes)
{
    ipl_idcache_destroy(&self->cache);
    if (!max_entries || !max_bytes) return 0;
    self->cache = ipl_idcache_new(max_entries, max_bytes);
    return self->cache ? 0 : IPL_E_NOMEM;
}

void ipl_bpe_cache_stats(const ipl_bpe_t *self, ipl_idcache_stats_t *out)
{
    memset(out, 0, sizeof *out);
    if (self->cache) ipl_idcache_stats(self->cache, out);
}

ipl_bpe_t *ipl_bpe_new_from_file(const char *path, char *err, size_t errlen)
{
    s_err_t e = {err, errlen, path};
    FILE *f = fopen(path, "rb");
    if (!f) {
        s_fail(&e, "cannot open: %s", strerror(errno));
        return NULL;
    }
    char *buf = NULL;
    long size = -1;
    if (fseek(f, 0, SEEK_END) == 0 && (size = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (unsigned long)size <= S_MAX_FILE && (buf = malloc((size_t)size + 1)) != NULL &&
        fread(buf, 1, (size_t)size, f) != (size_t)size) {
        free(buf);
        buf = NULL;
    }
    int saved = errno;
    fclose(f);
    if (!buf) {
        if (size >= 0 && (unsigned long)size > S_MAX_FILE)
            s_fail(&e, "larger than %u bytes", S_MAX_FILE);
        else
            s_fail(&e, "cannot read: %s", strerror(saved ? saved : EIO));
        return NULL;
    }
    buf[size] = '\0';
    ipl_bpe_t *self = ipl_bpe_new_from_json(buf, (size_t)size, path, err, errlen);
    free(buf);
    return self;
}

void ipl_bpe_destroy(ipl_bpe_t **self_p)
{
    if (!self_p || !*self_p) return;
    ipl_bpe_t *self = *self_p;
    free(self->arena);
    free(self->pieces);
    free(self->vpieces);
    free(self->vmap);
    free(self->whole);
    free(self->byte_token);
    ipl_normalizer_destroy(&self->norm);
    ipl_idcache_destroy(&self->cache);
    free(self->mmap);
    free(self->added);
    free(self->raw_trie.nodes);
    free(self->norm_trie.nodes);
    free(self->prefix);
    free(self->suffix);
    free(self);
    *self_p = NULL;
}

int64_t ipl_bpe_token_id(const ipl_bpe_t *self, const char *token)
{
    size_t len = strlen(token);
    for (size_t i = self->nadded; i-- > 0;) {
        const s_span_t *c = &self->added[i].content;
        if (c->len == len && memcmp(self->arena + c->off, token, len) == 0)
            return self->added[i].id;
    }
    unsigned char stackbuf[256], *buf = len <= sizeof stackbuf ? stackbuf : malloc(len);
    if (!buf) return -1;
    size_t n;
    int64_t id = s_spelling(self, token, len, buf, &n) ? s_vocab_find(self, buf, n) : -1;
    if (buf != stackbuf) free(buf);
    return id;
}

uint32_t ipl_bpe_vocab_size(const ipl_bpe_t *self)
{
    return self->nids;
}

/* ---- encoding --------------------------------------------------------------------------- */

typedef struct {
    uint32_t id;
    int32_t prev, next;
    bool alive;
} s_sym_t;

typedef struct {
    uint32_t rank, pos, left, right, id;
} s_cand_t; /* a merge candidate: symbols pos and its next, ids left + right → id */

typedef struct {
    uint32_t *ids;
    size_t n, cap;
    s_sym_t *sym;
    size_t symcap;
    s_cand_t *heap;
    size_t nheap, heapcap;
    bool oom;
} s_enc_t;

static void s_out(s_enc_t *e, uint32_t id)
{
    if (e->n == e->cap) {
        size_t cap = e->cap ? e->cap * 2 : 256;
        uint32_t *v = realloc(e->ids, cap * sizeof *v);
        if (!v) {
            e->oom = true;
            return;
        }
        e->ids = v;
        e->cap = cap;
    }
    e->ids[e->n++] = id;
}

static bool s_cand_less(const s_cand_t *a, const s_cand_t *b)
{
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

/* Pushes the merge of symbols pos and its next, if the pair has a rank. */
static void s_heap_push(const ipl_bpe_t *self, s_enc_t *e, uint32_t pos)
{
    const s_sym_t *l = &e->sym[pos], *r = &e->sym[l->next];
    const s_merge_t *m = s_merge_find(self, l->id, r->id);
    if (!m) return;
    if (e->nheap == e->heapcap) {
        size_t cap = e->heapcap ? e->heapcap * 2 : 64;
        s_cand_t *h = realloc(e->heap, cap * sizeof *h);
        if (!h) {
            e->oom = true;
            return;
        }
        e->heap = h;
        e->heapcap = cap;
    }
    size_t i = e->nheap++;
    s_cand_t c = {m->rank, pos, l->id, r->id, m->id};
    while (i > 0 && s_cand_less(&c, &e->heap[(i - 1) / 2])) {
        e->heap[i] = e->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    e->heap[i] = c;
}

static s_cand_t s_heap_pop(s_enc_t *e)
{
    s_cand_t top = e->heap[0], last = e->heap[--e->nheap];
    size_t i = 0, n = e->nheap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && s_cand_less(&e->heap[c + 1], &e->heap[c])) c++;
        if (!s_cand_less(&e->heap[c], &last)) break;
        e->heap[i] = e->heap[c];
        i = c;
    }
    if (n > 0) e->heap[i] = last;
    return top;
}

static void s_push_sym(s_enc_t *e, size_t *ns, uint32_t id)
{
    e->sym[*ns] = (s_sym_t){id, (int32_t)*ns - 1, (int32_t)*ns + 1, true};
    (*ns)++;
}

/* Appends the symbol of one character c[0..len) whose vocabulary id is id (-1: missing), as
 * HF's BPE::merge_word: a missing character becomes its "<0xNN>" byte tokens when
 * byte_fallback has them all, else unk — held back in *unk so that consecutive ones fuse when
 * fuse_unk (byte-fallback tokens do not flush it) — or is dropped when there is no unk. */
static void s_add_sym(const ipl_bpe_t *self, s_enc_t *e, size_t *ns, int64_t id,
                      const unsigned char *c, size_t len, bool *unk)
{
    if (id >= 0) {
        if (*unk) s_push_sym(e, ns, (uint32_t)self->unk_id);
        *unk = false;
        s_push_sym(e, ns, (uint32_t)id);
        return;
    }
    if (self->byte_fallback) {
        size_t k = 0;
        while (k < len && self->fallback_id[c[k]] >= 0)
            k++;
        if (k == len) {
            for (k = 0; k < len; k++)
                s_push_sym(e, ns, (uint32_t)self->fallback_id[c[k]]);
            return;
        }
    }
    if (self->unk_id < 0) return;
    if (*unk && !self->fuse_unk) s_push_sym(e, ns, (uint32_t)self->unk_id);
    *unk = true;
}

/* The merge of symbols l and r: its rank (UINT32_MAX: none) and the merged id in *id. */
static inline uint32_t s_rank(const ipl_bpe_t *self, uint32_t l, uint32_t r, uint32_t *id)
{
    const s_merge_t *m = s_merge_find(self, l, r);
    *id = m ? m->id : 0;
    return m ? m->rank : UINT32_MAX;
}

/* BPE of a short word's symbols e->sym[0..ns) (ns <= S_SMALL_WORD): each step merges the
 * leftmost pair of lowest rank, found by a scan of the pairs' ranks (only the two pairs next
 * to a merge change) — the same merges in the same order as the heap of s_bpe_word, cheaper
 * for the few symbols of a word. */
static void s_bpe_small(const ipl_bpe_t *self, s_enc_t *e, size_t ns)
{
    uint32_t id[S_SMALL_WORD], rank[S_SMALL_WORD], merged[S_SMALL_WORD];
    for (size_t i = 0; i < ns; i++)
        id[i] = e->sym[i].id;
    for (size_t i = 0; i + 1 < ns; i++)
        rank[i] = s_rank(self, id[i], id[i + 1], &merged[i]);
    for (;;) {
        size_t at = 0;
        uint32_t best = UINT32_MAX;
        for (size_t i = 0; i + 1 < ns; i++)
            if (rank[i] < best) best = rank[at = i];
        if (best == UINT32_MAX) break;
        id[at] = merged[at];
        ns--;
        for (size_t i = at + 1; i < ns; i++) {
            id[i] = id[i + 1];
            rank[i] = rank[i + 1];
            merged[i] = merged[i + 1];
        }
        if (at + 1 < ns) rank[at] = s_rank(self, id[at], id[at + 1], &merged[at]);
        if (at > 0) rank[at - 1] = s_rank(self, id[at - 1], id[at], &merged[at - 1]);
    }
    for (size_t i = 0; i < ns; i++)
        s_out(e, id[i]);
}

/* BPE of one pre-token w[0..m) (raw bytes): its symbols are bytes with a ByteLevel
 * pre-tokenizer, UTF-8 characters otherwise. */
static void s_bpe_word(const ipl_bpe_t *self, s_enc_t *e, const unsigned char *w, size_t m)
{
    if (m == 1 && self->byte_id[w[0]] >= 0) {
        s_out(e, (uint32_t)self->byte_id[w[0]]);
        return;
    }
    int64_t whole = s_vocab_find(self, w, m);
    if (whole >= 0 &&
        (self->ignore_merges || (self->whole && (self->whole[whole >> 3] >> (whole & 7) & 1)))) {
        s_out(e, (uint32_t)whole);
        return;
    }
    if (m > e->symcap) {
        s_sym_t *s = m < INT32_MAX ? realloc(e->sym, m * sizeof *s) : NULL;
        if (!s) {
            e->oom = true;
            return;
        }
        e->sym = s;
        e->symcap = m;
    }
    size_t ns = 0; /* at most one symbol per byte: the arrays hold m */
    bool unk = false;
    if (self->byte_level) {
        for (size_t i = 0; i < m; i++) {
            int64_t id = self->byte_id[w[i]];
            if (id >= 0 && !unk) /* the common case, inline */
                s_push_sym(e, &ns, (uint32_t)id);
            else
                s_add_sym(self, e, &ns, id, w + i, 1, &unk);
        }
    } else {
        for (size_t i = 0, len; i < m; i += len) {
            uint32_t cp;
            len = w[i] < 0x80 ? 1 : ipl_utf8_next(w + i, m - i, &cp);
            int64_t id = len == 1 ? self->byte_id[w[i]] : s_vocab_find(self, w + i, len);
            s_add_sym(self, e, &ns, id, w + i, len, &unk);
        }
    }
    if (unk) s_push_sym(e, &ns, (uint32_t)self->unk_id);
    if (ns == 0) return;
    if (ns <= S_SMALL_WORD) {
        s_bpe_small(self, e, ns);
        return;
    }
    e->sym[ns - 1].next = -1;
    e->nheap = 0;
    for (size_t i = 0; i + 1 < ns; i++)
        s_heap_push(self, e, (uint32_t)i);
    while (e->nheap > 0 && !e->oom) {
        s_cand_t c = s_heap_pop(e);
        s_sym_t *l = &e->sym[c.pos];
        if (!l->alive || l->next < 0 || l->id != c.left || e->sym[l->next].id != c.right)
            continue; /* stale: a side merged since this candidate was pushed */
        s_sym_t *r = &e->sym[l->next];
        l->id = c.id;
        r->alive = false;
        l->next = r->next;
        if (l->next >= 0) e->sym[l->next].prev = (int32_t)c.pos;
        if (l->prev >= 0) s_heap_push(self, e, (uint32_t)l->prev);
        if (l->next >= 0) s_heap_push(self, e, c.pos);
    }
    for (int32_t i = 0; i >= 0; i = e->sym[i].next) /* symbol 0 is never merged away */
        s_out(e, e->sym[i].id);
}

static void s_enc_free(s_enc_t *e)
{
    free(e->ids);
    free(e->sym);
    free(e->heap);
}

/* Sets the `whole` bit of every byte-level vocabulary entry that BPE rebuilds whole. */
static bool s_precompute_whole(ipl_bpe_t *self)
{
    s_enc_t e = {0};
    if (!(self->whole = calloc(self->nids / 8 + 1, 1))) return false;
    for (uint32_t id = 0; id < self->nids && !e.oom; id++) {
        const s_span_t *sp = &self->vpieces[id];
        if (sp->len == S_NO_PIECE || sp->len < 2) continue;
        e.n = 0;
        s_bpe_word(self, &e, self->arena + sp->off, sp->len);
        if (e.n == 1 && e.ids[0] == id) self->whole[id >> 3] |= (uint8_t)(1u << (id & 7));
    }
    s_enc_free(&e);
    return !e.oom;
}

/* ---- pre-tokenizer and normalizer --------------------------------------------------------- */

typedef struct {
    const ipl_bpe_t *self;
    s_enc_t *e;
} s_piece_ctx_t;

static bool s_glues(const ipl_bpe_t *self, uint32_t cp)
{
    for (size_t k = 0; k < self->nglue; k++)
        if (self->glue[k] == cp) return true;
    return false;
}

static bool s_piece_cb(void *ctx, const unsigned char *piece, size_t len)
{
    s_piece_ctx_t *c = ctx;
    const ipl_bpe_t *self = c->self;
    if (!self->split_marks) {
        s_bpe_word(self, c->e, piece, len);
        return !c->e->oom;
    }
    /* Cut before "▁" after a character that neither is "▁" nor glues, and is in the vocabulary:
     * a missing one becomes "<0xNN>" or unk symbols, whose spellings are not the character's
     * (a merge of "<0x41>" with "▁x" would span ">▁"), so no cut after those. */
    size_t start = 0, prev_at = 0, prev_len = 0;
    uint32_t prev = 0x2581;
    for (size_t i = 0; i < len && !c->e->oom;) {
        uint32_t cp;
        size_t k = piece[i] < 0x80 ? (cp = piece[i], 1) : ipl_utf8_next(piece + i, len - i, &cp);
        if (cp == 0x2581 && prev != 0x2581 && i > start && !s_glues(self, prev) &&
            (prev_len == 1 ? self->byte_id[piece[prev_at]]
                           : s_vocab_find(self, piece + prev_at, prev_len)) >= 0) {
            s_bpe_word(self, c->e, piece + start, i - start);
            start = i;
        }
        prev = cp;
        prev_at = i;
        prev_len = k;
        i += k;
    }
    if (start < len && !c->e->oom) s_bpe_word(self, c->e, piece + start, len - start);
    return !c->e->oom;
}

/* Pre-tokenizes and BPE-encodes normalized text without added tokens. */
static void s_encode_plain(const ipl_bpe_t *self, s_enc_t *e, const unsigned char *p, size_t n)
{
    s_piece_ctx_t ctx = {self, e};
    ipl_pretok_split(&self->pretok, p, n, s_piece_cb, &ctx);
}

/* ---- added tokens ------------------------------------------------------------------------ */

/* \w approximated as a letter, a number or '_' (for single_word). */
static bool s_is_word_char(uint32_t cp)
{
    return cp == '_' || ipl_unicode_is_letter(cp) || ipl_unicode_is_number(cp);
}

typedef struct {
    uint32_t cp; /* IPL_UNICODE_INVALID for a byte that is not UTF-8 */
    size_t len;
} s_ch_t;

static s_ch_t s_char(const unsigned char *p, size_t n, size_t i)
{
    s_ch_t c;
    c.len = ipl_utf8_next(p + i, n - i, &c.cp);
    return c;
}

/* The character ending just before p[end] (end > 0). */
static s_ch_t s_char_before(const unsigned char *p, size_t end)
{
    size_t i = end - 1;
    while (i > 0 && end - i < 4 && (p[i] & 0xC0) == 0x80)
        i--;
    s_ch_t c = s_char(p, end, i);
    if (i + c.len != end) c = s_char(p, end, end - 1); /* not a whole character: one byte */
    return c;
}

static bool s_is_space(s_ch_t c)
{
    return c.cp != IPL_UNICODE_INVALID && ipl_unicode_is_space(c.cp);
}

typedef void (*s_gap_fn)(const ipl_bpe_t *self, s_enc_t *e, const unsigned char *p, size_t n);

/* Splits p[0..n) on the tokens of trie t like HF's AddedVocabulary::find_matches (leftmost-
 * longest, non-overlapping; single_word, lstrip, rstrip), emitting token ids and passing the
 * text between them to `gap`. */
static void s_split(const ipl_bpe_t *self, s_enc_t *e, const s_trie_t *t, const unsigned char *p,
                    size_t n, s_gap_fn gap)
{
    size_t done = 0; /* everything before has been emitted */
    for (size_t i = 0; i < n && t->n > 0 && !e->oom;) {
        size_t end = 0;
        int32_t k = t->first[p[i]] ? s_trie_longest(t, p + i, n - i, &end) : -1;
        if (k < 0) {
            i++;
            continue;
        }
        const s_added_t *a = &self->added[k];
        size_t start = i, stop = i + end;
        i = stop;
        if (a->single_word && ((start > 0 && s_is_word_char(s_char_before(p, start).cp)) ||
                               (stop < n && s_is_word_char(s_char(p, n, stop).cp))))
            continue; /* inside a word: not a match, and the search goes on after it */
        if (a->lstrip)
            while (start > done && s_is_space(s_char_before(p, start)))
                start -= s_char_before(p, start).len;
        if (a->rstrip)
            while (stop < n && s_is_space(s_char(p, n, stop)))
                stop += s_char(p, n, stop).len;
        if (start > done) gap(self, e, p + done, start - done);
        s_out(e, a->id);
        done = i = stop;
    }
    if (done < n && !e->oom) gap(self, e, p + done, n - done);
}

/* Appends the cached ids of a section to e; false when the cache has none. */
static bool s_from_cache(const ipl_bpe_t *self, s_enc_t *e, ipl_idcache_key_t key)
{
    for (int tries = 0; tries < 4; tries++) { /* another thread may replace it meanwhile */
        size_t got = ipl_idcache_get(self->cache, key, e->ids + e->n, e->cap - e->n);
        if (got == IPL_IDCACHE_MISS) return false;
        if (got <= e->cap - e->n) {
            e->n += got;
            return true;
        }
        uint32_t *v = realloc(e->ids, (e->n + got) * 2 * sizeof *v);
        if (!v) return false;
        e->ids = v;
        e->cap = (e->n + got) * 2;
    }
    return false;
}

/* A section between raw-matched added tokens: normalize, then split on normalized tokens.
 * Its ids depend on its bytes only: a long one's come from (and go to) the section cache. */
static void s_encode_section(const ipl_bpe_t *self, s_enc_t *e, const unsigned char *p, size_t n)
{
    bool cached = self->cache && n >= IPL_BPE_CACHE_MIN;
    ipl_idcache_key_t key = {0, 0};
    if (cached && s_from_cache(self, e, key = ipl_idcache_key(p, n, 0))) return;
    size_t from = e->n;
    char *norm;
    size_t m;
    if (!ipl_normalizer_apply(self->norm, (const char *)p, n, &norm, &m)) {
        e->oom = true;
        return;
    }
    s_split(self, e, &self->norm_trie, norm ? (const unsigned char *)norm : p, m, s_encode_plain);
    free(norm);
    if (cached && !e->oom) ipl_idcache_put(self->cache, key, e->ids + from, e->n - from);
}

uint32_t *ipl_bpe_encode(const ipl_bpe_t *self, const char *text, size_t len,
                         bool add_special_tokens, size_t *n)
{
    s_enc_t e = {0};
    *n = 0;
    e.cap = len / 3 + 16 + self->nprefix + self->nsuffix;
    e.ids = malloc(e.cap * sizeof *e.ids);
    e.oom = e.ids == NULL;
    for (size_t i = 0; add_special_tokens && i < self->nprefix; i++)
        s_out(&e, self->prefix[i]);
    if (!e.oom)
        s_split(self, &e, &self->raw_trie, (const unsigned char *)text, len, s_encode_section);
    for (size_t i = 0; add_special_tokens && i < self->nsuffix; i++)
        s_out(&e, self->suffix[i]);
    if (e.oom) {
        s_enc_free(&e);
        return NULL;
    }
    free(e.sym);
    free(e.heap);
    *n = e.n;
    return e.ids;
}

/* ByteFallback's flush: the pending bytes of consecutive "<0xNN>" tokens as they are when they
 * are valid UTF-8, else U+FFFD for each (HF: String::from_utf8 or one "\u{FFFD}" per token). */
static size_t s_flush_bytes(char *out, const unsigned char *bytes, size_t n)
{
    bool valid = true;
    for (size_t i = 0; i < n && valid;) {
        uint32_t cp;
        i += ipl_utf8_next(bytes + i, n - i, &cp);
        valid = cp != IPL_UNICODE_INVALID;
    }
    if (valid) {
        memcpy(out, bytes, n);
        return n;
    }
    for (size_t i = 0; i < n; i++)
        memcpy(out + 3 * i, "\xEF\xBF\xBD", 3);
    return 3 * n;
}

/* Decoder Strip on the whole text: up to start leading and stop trailing copies of content. */
static size_t s_strip(const s_strip_t *st, char *out, size_t n)
{
    size_t k = st->len, head = 0, tail = n;
    for (size_t i = 0; i < st->start && tail - head >= k && !memcmp(out + head, st->content, k);
         i++)
        head += k;
    for (size_t i = 0; i < st->stop && tail - head >= k && !memcmp(out + tail - k, st->content, k);
         i++)
        tail -= k;
    memmove(out, out + head, tail - head);
    return tail - head;
}

char *ipl_bpe_decode(const ipl_bpe_t *self, const uint32_t *ids, size_t n, size_t *len)
{
    size_t total = 0, nbytes = 0;
    for (size_t i = 0; i < n; i++)
        if (ids[i] < self->nids && self->pieces[ids[i]].len != S_NO_PIECE)
            total += self->pieces[ids[i]].len + (self->decode_fallback ? 3 : 0);
    char *out = malloc(total + 1);
    unsigned char *bytes = self->decode_fallback ? malloc(n + 1) : NULL;
    if (!out || (self->decode_fallback && !bytes)) {
        free(out);
        free(bytes);
        return NULL;
    }
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] >= self->nids || self->pieces[ids[i]].len == S_NO_PIECE) continue;
        if (self->decode_fallback && self->byte_token[ids[i]] >= 0) {
            bytes[nbytes++] = (unsigned char)self->byte_token[ids[i]];
            continue;
        }
        if (nbytes) at += s_flush_bytes(out + at, bytes, nbytes);
        nbytes = 0;
        const s_span_t *sp = &self->pieces[ids[i]];
        memcpy(out + at, self->arena + sp->off, sp->len);
        at += sp->len;
    }
    if (nbytes) at += s_flush_bytes(out + at, bytes, nbytes);
    free(bytes);
    if (self->strip.len) at = s_strip(&self->strip, out, at);
    out[at] = '\0';
    if (len) *len = at;
    return out;
}
