/*
 * ipl_bpe — byte-level BPE from tokenizer.json (see ipl_bpe.h for the pipeline and coverage).
 *
 * Data, all built once at load and read-only afterwards:
 *
 *   arena     every token's bytes, back to back. Vocabulary keys are stored as the raw bytes
 *             they stand for (the ByteLevel map "Ġ"→0x20, "Ċ"→0x0A, ... applied in reverse),
 *             so BPE, the vocabulary lookup and decoding all work on plain bytes.
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

#include "ipl_unicode.h"

#define S_MAX_ID    (1u << 24) /* ids above this are refused at load (tables are dense) */
#define S_MAX_FILE  (1u << 30) /* tokenizer.json files above 1 GiB are refused */
#define S_NO_PIECE  UINT32_MAX /* pieces[id].len of an id nothing defines */
#define S_NO_SLOT   UINT32_MAX
#define S_EMPTY_KEY UINT64_MAX

/* The two supported Split patterns (byte-exact as in tokenizer.json). */
static const char s_llama3_regex[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char s_qwen2_regex[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

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
    int64_t byte_id[256]; /* id of each single byte, -1 when the vocabulary lacks it */
    int64_t unk_id;       /* -1: characters missing from the vocabulary are dropped */
    uint8_t *whole;       /* bit per id: BPE of the token's own bytes gives back the token */
    bool fuse_unk, ignore_merges, nfc;
    int digits; /* \p{N}{1,digits}: 3 for Llama-3, 1 for Qwen2 */
    s_added_t *added;
    size_t nadded;
    s_trie_t raw_trie, norm_trie;
    uint32_t *prefix, *suffix; /* post-processor ids around the sequence */
    size_t nprefix, nsuffix;
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
        if (s_unmap(it->string, len, buf, &n)) {
            ok = s_arena_add(self, buf, n, &self->vpieces[id]);
            self->pieces[id] = self->vpieces[id];
            if (ok) s_vocab_insert(self, id);
        } else {
            ok = s_arena_add(self, it->string, len, &self->pieces[id]);
        }
    }
    free(buf);
    for (size_t i = 0; i < 256; i++) {
        unsigned char b = (unsigned char)i;
        self->byte_id[i] = s_vocab_find(self, &b, 1);
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
    if (s_unmap(a, alen, buf, &na) && s_unmap(b, blen, buf + na, &nb)) {
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
    if (s_flag(model, "byte_fallback", false))
        return s_fail(e, "model.byte_fallback: true (SentencePiece-style <0xNN> tokens) is not "
                         "supported with the ByteLevel pre-tokenizer");
    self->ignore_merges = s_flag(model, "ignore_merges", false);
    self->fuse_unk = s_flag(model, "fuse_unk", false);
    if (!s_load_vocab(self, vocab, e)) return false;

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

/* NFC of a token's content when the normalizer is NFC (patterns of "normalized" tokens). */
static bool s_normalized_copy(const ipl_bpe_t *self, const char *s, size_t len, char **out,
                              size_t *outlen)
{
    if (!self->nfc || ipl_unicode_nfc_quick(s, len)) {
        *out = NULL;
        *outlen = len;
        return true;
    }
    *out = ipl_unicode_nfc(s, len, outlen);
    return *out != NULL;
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
        bool ok = !normalized || s_normalized_copy(self, content->valuestring, len, &norm, &nlen);
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

static bool s_load_normalizer(ipl_bpe_t *self, const cJSON *n, s_err_t *e)
{
    if (!n || cJSON_IsNull(n)) return true;
    const char *type = s_type_of(n);
    if (!strcmp(type, "NFC")) {
        self->nfc = true;
        return true;
    }
    if (!strcmp(type, "Sequence")) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(n, "normalizers");
        for (const cJSON *it = cJSON_IsArray(list) ? list->child : NULL; it; it = it->next)
            if (!s_load_normalizer(self, it, e)) return false;
        return true;
    }
    return s_fail(e, "normalizer: type \"%s\" is not supported (null, NFC or a Sequence of NFC)",
                  type);
}

static bool s_load_pre_tokenizer(ipl_bpe_t *self, const cJSON *p, s_err_t *e)
{
    static const char *const want =
        "Sequence[Split(Regex = the Llama-3 or Qwen2 pattern, behavior Isolated, invert false), "
        "ByteLevel(add_prefix_space false, use_regex false)]";
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(p, "pretokenizers");
    if (strcmp(s_type_of(p), "Sequence") != 0 || !cJSON_IsArray(list) ||
        cJSON_GetArraySize(list) != 2)
        return s_fail(e, "pre_tokenizer: not supported (only %s)", want);
    const cJSON *split = list->child, *bl = split->next;
    const cJSON *pattern = cJSON_GetObjectItemCaseSensitive(split, "pattern");
    const cJSON *regex = cJSON_GetObjectItemCaseSensitive(pattern, "Regex");
    const cJSON *behavior = cJSON_GetObjectItemCaseSensitive(split, "behavior");
    if (strcmp(s_type_of(split), "Split") != 0 || !cJSON_IsString(regex) ||
        !cJSON_IsString(behavior) || strcmp(behavior->valuestring, "Isolated") != 0 ||
        s_flag(split, "invert", false))
        return s_fail(e, "pre_tokenizer.pretokenizers[0]: not supported (only %s)", want);
    if (!strcmp(regex->valuestring, s_llama3_regex))
        self->digits = 3;
    else if (!strcmp(regex->valuestring, s_qwen2_regex))
        self->digits = 1;
    else
        return s_fail(e,
                      "pre_tokenizer.pretokenizers[0].pattern.Regex: unknown pattern %s "
                      "(only the Llama-3 and Qwen2 ones are implemented)",
                      regex->valuestring);
    if (strcmp(s_type_of(bl), "ByteLevel") != 0 || s_flag(bl, "add_prefix_space", false) ||
        s_flag(bl, "use_regex", true))
        return s_fail(e, "pre_tokenizer.pretokenizers[1]: not supported (only %s)", want);
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
    const cJSON *decoder = cJSON_GetObjectItemCaseSensitive(root, "decoder");
    if (strcmp(s_type_of(decoder), "ByteLevel") != 0)
        return s_fail(e, "decoder: only ByteLevel is supported");
    if (!s_load_model(self, cJSON_GetObjectItemCaseSensitive(root, "model"), e)) return false;
    if (!self->ignore_merges && !s_precompute_whole(self)) return s_fail(e, "out of memory");
    return s_load_normalizer(self, cJSON_GetObjectItemCaseSensitive(root, "normalizer"), e) &&
           s_load_added(self, cJSON_GetObjectItemCaseSensitive(root, "added_tokens"), e) &&
           s_load_pre_tokenizer(self, cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"), e) &&
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
    if (!ok) ipl_bpe_destroy(&self);
    return self;
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
    int64_t id = s_unmap(token, len, buf, &n) ? s_vocab_find(self, buf, n) : -1;
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

/* Appends a symbol; characters missing from the vocabulary become unk (fused when fuse_unk)
 * or are dropped when there is no unk token, as HF's BPE::merge_word does. */
static void s_add_sym(const ipl_bpe_t *self, s_enc_t *e, size_t *ns, int64_t id, bool *in_unk)
{
    if (id < 0) {
        if (self->unk_id < 0 || (*in_unk && self->fuse_unk)) return;
        id = self->unk_id;
        *in_unk = true;
    } else {
        *in_unk = false;
    }
    e->sym[*ns] = (s_sym_t){(uint32_t)id, (int32_t)*ns - 1, (int32_t)*ns + 1, true};
    (*ns)++;
}

/* BPE of one pre-token w[0..m) (raw bytes). */
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
    size_t ns = 0;
    bool in_unk = false;
    for (size_t i = 0; i < m; i++)
        s_add_sym(self, e, &ns, self->byte_id[w[i]], &in_unk);
    if (ns == 0) return;
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

/* ---- the pre-tokenizer: the Llama-3 / Qwen2 Split regex, by hand -------------------------- */

enum { C_L = 1, C_N = 2, C_S = 4, C_NL = 8 }; /* \p{L}, \p{N}, \s, [\r\n]; 0 = other */

typedef struct {
    uint32_t cp;
    uint8_t len, cls;
} s_ch_t;

/* The class of each ASCII byte. */
#define S_CLS(b)                                                                                   \
    ((((b) | 0x20) >= 'a' && ((b) | 0x20) <= 'z')   ? C_L                                          \
     : ((b) >= '0' && (b) <= '9')                   ? C_N                                          \
     : ((b) == '\r' || (b) == '\n')                 ? C_S | C_NL                                   \
     : ((b) == ' ' || ((b) >= '\t' && (b) <= '\r')) ? C_S                                          \
                                                    : 0)
#define S_CLS8(b)                                                                                  \
    S_CLS(b), S_CLS(b + 1), S_CLS(b + 2), S_CLS(b + 3), S_CLS(b + 4), S_CLS(b + 5), S_CLS(b + 6),  \
        S_CLS(b + 7)
static const uint8_t s_ascii_cls[128] = {
    S_CLS8(0),  S_CLS8(8),   S_CLS8(16),  S_CLS8(24),  S_CLS8(32), S_CLS8(40),
    S_CLS8(48), S_CLS8(56),  S_CLS8(64),  S_CLS8(72),  S_CLS8(80), S_CLS8(88),
    S_CLS8(96), S_CLS8(104), S_CLS8(112), S_CLS8(120),
};

static s_ch_t s_char_utf8(const unsigned char *p, size_t n, size_t i)
{
    s_ch_t c;
    c.len = (uint8_t)ipl_utf8_next(p + i, n - i, &c.cp);
    c.cls = c.cp == IPL_UNICODE_INVALID   ? 0
            : ipl_unicode_is_letter(c.cp) ? C_L
            : ipl_unicode_is_number(c.cp) ? C_N
            : ipl_unicode_is_space(c.cp)  ? C_S
                                          : 0;
    return c;
}

/* The character at p[i] (i < n) and its class; an invalid UTF-8 byte is one "other". */
static inline s_ch_t s_char(const unsigned char *p, size_t n, size_t i)
{
    if (p[i] < 0x80) return (s_ch_t){p[i], 1, s_ascii_cls[p[i]]};
    return s_char_utf8(p, n, i);
}

/* The end of the run of characters from p[i] whose class has a bit of `mask` (mask 0: the
 * run of "other" characters). */
static size_t s_run(const unsigned char *p, size_t n, size_t i, uint8_t mask)
{
    while (i < n) {
        uint8_t cls;
        size_t len = 1;
        if (p[i] < 0x80) {
            cls = s_ascii_cls[p[i]];
        } else {
            s_ch_t c = s_char_utf8(p, n, i);
            cls = c.cls;
            len = c.len;
        }
        if (mask ? !(cls & mask) : cls != 0) break;
        i += len;
    }
    return i;
}

static bool s_ascii_letter(unsigned char b, char lower)
{
    return (b | 0x20) == lower && ((b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z'));
}

/* The end of the pre-token starting at p[i] (i < n): the first alternative of
 *   (?i:'s|'t|'re|'ve|'m|'ll|'d) | [^\r\n\p{L}\p{N}]?\p{L}+ | \p{N}{1,digits}
 *   | ' '?[^\s\p{L}\p{N}]+[\r\n]* | \s*[\r\n]+ | \s+(?!\S) | \s+
 * that matches, with the regex's backtracking worked out per alternative. */
static size_t s_pretoken_end(const unsigned char *p, size_t n, size_t i, int digits)
{
    s_ch_t c0 = s_char(p, n, i);
    size_t j = i + c0.len;
    if (c0.cp == '\'' && j < n) { /* contractions, ASCII case-insensitive */
        unsigned char a = p[j], b = j + 1 < n ? p[j + 1] : 0;
        if (s_ascii_letter(a, 's') || s_ascii_letter(a, 't') || s_ascii_letter(a, 'm') ||
            s_ascii_letter(a, 'd'))
            return j + 1;
        if ((s_ascii_letter(a, 'r') && s_ascii_letter(b, 'e')) ||
            (s_ascii_letter(a, 'v') && s_ascii_letter(b, 'e')) ||
            (s_ascii_letter(a, 'l') && s_ascii_letter(b, 'l')))
            return j + 2;
    }
    if (c0.cls & C_L) return s_run(p, n, j, C_L);
    if (!(c0.cls & (C_N | C_NL)) && j < n) { /* one non-letter/number/newline, then letters */
        s_ch_t c1 = s_char(p, n, j);
        if (c1.cls & C_L) return s_run(p, n, j + c1.len, C_L);
    }
    if (c0.cls & C_N) {
        for (int d = 1; d < digits && j < n; d++) {
            s_ch_t c = s_char(p, n, j);
            if (!(c.cls & C_N)) break;
            j += c.len;
        }
        return j;
    }
    size_t k = SIZE_MAX; /* ' '?[^\s\p{L}\p{N}]+[\r\n]* */
    if (c0.cls == 0) {
        k = j;
    } else if (c0.cp == ' ' && j < n) {
        s_ch_t c1 = s_char(p, n, j);
        if (c1.cls == 0) k = j + c1.len;
    }
    if (k != SIZE_MAX) {
        k = s_run(p, n, k, 0);
        while (k < n && (p[k] == '\r' || p[k] == '\n'))
            k++;
        return k;
    }
    /* c0 is white space. \s*[\r\n]+ ends after the last newline of the run; \s+(?!\S) takes
     * the whole run at the end of the text, else all but its last character; \s+ the rest. */
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

/* Pre-tokenizes and BPE-encodes normalized text without added tokens. */
static void s_encode_plain(const ipl_bpe_t *self, s_enc_t *e, const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n && !e->oom;) {
        size_t end = s_pretoken_end(p, n, i, self->digits);
        s_bpe_word(self, e, p + i, end - i);
        i = end;
    }
}

/* ---- added tokens ------------------------------------------------------------------------ */

/* \w approximated as a letter, a number or '_' (for single_word). */
static bool s_is_word_char(uint32_t cp)
{
    return cp == '_' || ipl_unicode_is_letter(cp) || ipl_unicode_is_number(cp);
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
            while (start > done && (s_char_before(p, start).cls & C_S))
                start -= s_char_before(p, start).len;
        if (a->rstrip)
            while (stop < n && (s_char(p, n, stop).cls & C_S))
                stop += s_char(p, n, stop).len;
        if (start > done) gap(self, e, p + done, start - done);
        s_out(e, a->id);
        done = i = stop;
    }
    if (done < n && !e->oom) gap(self, e, p + done, n - done);
}

/* A section between raw-matched added tokens: normalize, then split on normalized tokens. */
static void s_encode_section(const ipl_bpe_t *self, s_enc_t *e, const unsigned char *p, size_t n)
{
    if (!self->nfc || ipl_unicode_nfc_quick((const char *)p, n)) {
        s_split(self, e, &self->norm_trie, p, n, s_encode_plain);
        return;
    }
    size_t m;
    char *norm = ipl_unicode_nfc((const char *)p, n, &m);
    if (!norm) {
        e->oom = true;
        return;
    }
    s_split(self, e, &self->norm_trie, (const unsigned char *)norm, m, s_encode_plain);
    free(norm);
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

char *ipl_bpe_decode(const ipl_bpe_t *self, const uint32_t *ids, size_t n, size_t *len)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        if (ids[i] < self->nids && self->pieces[ids[i]].len != S_NO_PIECE)
            total += self->pieces[ids[i]].len;
    char *out = malloc(total + 1);
    if (!out) return NULL;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] >= self->nids || self->pieces[ids[i]].len == S_NO_PIECE) continue;
        const s_span_t *sp = &self->pieces[ids[i]];
        memcpy(out + at, self->arena + sp->off, sp->len);
        at += sp->len;
    }
    out[at] = '\0';
    if (len) *len = at;
    return out;
}
