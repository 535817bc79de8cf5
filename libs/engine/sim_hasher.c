/*
 * sim_hasher — a writer for the two serialised forms (bounded buffer, no allocation per
 * block), then SHA-256 (ipl_sha256) or XXH3-128 (libxxhash) over it.
 */
#include "sim_hasher.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "ipl_error.h"
#include "ipl_sha256.h"

struct sim_hasher {
    sim_hash_algo_t algo;
    sim_hash_t none_hash;
    uint8_t *scratch; /* one serialised block */
    size_t scratch_cap;
};

static const char *const s_names[] = {"sha256", "sha256_cbor", "xxhash", "xxhash_cbor"};

int sim_hash_algo_parse(const char *name, sim_hash_algo_t *out)
{
    for (size_t i = 0; name && i < sizeof s_names / sizeof s_names[0]; i++)
        if (strcmp(name, s_names[i]) == 0) {
            *out = (sim_hash_algo_t)i;
            return 0;
        }
    return IPL_E_INVAL;
}

const char *sim_hash_algo_name(sim_hash_algo_t algo)
{
    return (unsigned)algo < sizeof s_names / sizeof s_names[0] ? s_names[algo] : "?";
}

bool sim_hash_eq(const sim_hash_t *a, const sim_hash_t *b)
{
    return a->lo == b->lo && a->len == b->len && memcmp(a->bytes, b->bytes, a->len) == 0;
}

sim_hash_t sim_hash_from_u64(uint64_t v)
{
    sim_hash_t h = {.len = 32, .lo = v};
    for (int i = 0; i < 8; i++)
        h.bytes[24 + i] = (uint8_t)(v >> (56 - 8 * i));
    return h;
}

static bool s_is_cbor(sim_hash_algo_t algo)
{
    return algo == SIM_HASH_SHA256_CBOR || algo == SIM_HASH_XXHASH_CBOR;
}

/* --- a bounded byte writer ----------------------------------------------------------------- */

typedef struct {
    uint8_t *p;
    size_t cap, len; /* len keeps counting past cap, so the caller learns the size */
} s_out_t;

static void s_put(s_out_t *o, const void *data, size_t n)
{
    if (o->len < o->cap) memcpy(o->p + o->len, data, o->cap - o->len < n ? o->cap - o->len : n);
    o->len += n;
}

static void s_byte(s_out_t *o, uint8_t b)
{
    s_put(o, &b, 1);
}

static void s_le(s_out_t *o, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        s_byte(o, (uint8_t)(v >> (8 * i)));
}

static void s_be(s_out_t *o, uint64_t v, int n)
{
    for (int i = n - 1; i >= 0; i--)
        s_byte(o, (uint8_t)(v >> (8 * i)));
}

/* --- pickle protocol 5 (CPython's C pickler for bytes, tuple[int], str, None) --------------- */

enum {
    P_MARK = '(',
    P_STOP = '.',
    P_BININT = 'J',
    P_BININT1 = 'K',
    P_BININT2 = 'M',
    P_NONE = 'N',
    P_BINUNICODE = 'X',
    P_TUPLE = 't',
    P_SHORT_BINBYTES = 'C',
    P_PROTO = 0x80,
    P_TUPLE1 = 0x85,
    P_LONG1 = 0x8a,
    P_SHORT_BINUNICODE = 0x8c,
    P_MEMOIZE = 0x94,
    P_FRAME = 0x95,
};

static void s_pickle_int(s_out_t *o, uint32_t v)
{
    if (v <= 0xff) {
        s_byte(o, P_BININT1);
        s_byte(o, (uint8_t)v);
    } else if (v <= 0xffff) {
        s_byte(o, P_BININT2);
        s_le(o, v, 2);
    } else if (v <= 0x7fffffff) {
        s_byte(o, P_BININT);
        s_le(o, v, 4);
    } else { /* LONG1: little-endian two's complement, a sign byte needed above 2^31 */
        s_byte(o, P_LONG1);
        s_byte(o, 5);
        s_le(o, v, 5);
    }
}

static void s_pickle_str(s_out_t *o, const char *s)
{
    size_t n = strlen(s);
    if (n < 256) {
        s_byte(o, P_SHORT_BINUNICODE);
        s_byte(o, (uint8_t)n);
    } else {
        s_byte(o, P_BINUNICODE);
        s_le(o, n, 4);
    }
    s_put(o, s, n);
    s_byte(o, P_MEMOIZE);
}

/* Items of a tuple are already written; closes it (TUPLE1..3, or MARK'd TUPLE) + MEMOIZE. */
static void s_pickle_tuple_end(s_out_t *o, uint32_t n)
{
    s_byte(o, n <= 3 ? (uint8_t)(P_TUPLE1 + n - 1) : P_TUPLE);
    s_byte(o, P_MEMOIZE);
}

/* A block's 3-tuple (parent, tokens, extra keys or None), then STOP. */
static void s_pickle_body(s_out_t *o, const sim_hash_t *parent, const uint32_t *tokens, uint32_t n,
                          const sim_extra_keys_t *extra)
{
    s_byte(o, P_SHORT_BINBYTES);
    s_byte(o, parent->len);
    s_put(o, parent->bytes, parent->len);
    s_byte(o, P_MEMOIZE);
    if (n > 3) s_byte(o, P_MARK);
    for (uint32_t i = 0; i < n; i++)
        s_pickle_int(o, tokens[i]);
    s_pickle_tuple_end(o, n);
    if (extra && extra->nkeys) {
        if (extra->nkeys > 3) s_byte(o, P_MARK);
        for (uint32_t i = 0; i < extra->nkeys; i++)
            s_pickle_str(o, extra->keys[i]);
        s_pickle_tuple_end(o, extra->nkeys);
    } else {
        s_byte(o, P_NONE);
    }
    s_pickle_tuple_end(o, 3);
    s_byte(o, P_STOP);
}

/* The frame's contents: a string (NONE_HASH's seed) or a block's tuple, then STOP. */
static void s_pickle_value(s_out_t *o, const sim_hash_t *parent, const uint32_t *tokens, uint32_t n,
                           const sim_extra_keys_t *extra, const char *str)
{
    if (str) {
        s_pickle_str(o, str);
        s_byte(o, P_STOP);
    } else {
        s_pickle_body(o, parent, tokens, n, extra);
    }
}

/* pickle.dumps(x, 5): PROTO 5, FRAME <u64 LE length of the rest>, the body. (CPython leaves
 * the frame out below 4 bytes; every value here is longer.) */
static void s_pickle(s_out_t *o, const sim_hash_t *parent, const uint32_t *tokens, uint32_t n,
                     const sim_extra_keys_t *extra, const char *str)
{
    s_out_t count = {0};
    s_pickle_value(&count, parent, tokens, n, extra, str);
    s_byte(o, P_PROTO);
    s_byte(o, 5);
    s_byte(o, P_FRAME);
    s_le(o, count.len, 8);
    s_pickle_value(o, parent, tokens, n, extra, str);
}

/* --- canonical CBOR (cbor2.dumps(x, canonical=True)) --------------------------------------- */

static void s_cbor_head(s_out_t *o, uint8_t major, uint64_t v)
{
    uint8_t m = (uint8_t)(major << 5);
    if (v < 24) {
        s_byte(o, m | (uint8_t)v);
    } else if (v <= 0xff) {
        s_byte(o, m | 24);
        s_be(o, v, 1);
    } else if (v <= 0xffff) {
        s_byte(o, m | 25);
        s_be(o, v, 2);
    } else if (v <= 0xffffffffu) {
        s_byte(o, m | 26);
        s_be(o, v, 4);
    } else {
        s_byte(o, m | 27);
        s_be(o, v, 8);
    }
}

static void s_cbor_str(s_out_t *o, const char *s)
{
    size_t n = strlen(s);
    s_cbor_head(o, 3, n);
    s_put(o, s, n);
}

/* A tuple is a CBOR array; bytes major 2, ints major 0, str major 3, None 0xf6. */
static void s_cbor(s_out_t *o, const sim_hash_t *parent, const uint32_t *tokens, uint32_t n,
                   const sim_extra_keys_t *extra, const char *str)
{
    if (str) {
        s_cbor_str(o, str);
        return;
    }
    s_cbor_head(o, 4, 3);
    s_cbor_head(o, 2, parent->len);
    s_put(o, parent->bytes, parent->len);
    s_cbor_head(o, 4, n);
    for (uint32_t i = 0; i < n; i++)
        s_cbor_head(o, 0, tokens[i]);
    if (extra && extra->nkeys) {
        s_cbor_head(o, 4, extra->nkeys);
        for (uint32_t i = 0; i < extra->nkeys; i++)
            s_cbor_str(o, extra->keys[i]);
    } else {
        s_byte(o, 0xf6);
    }
}

/* --- hashing ------------------------------------------------------------------------------- */

static size_t s_serialize(sim_hash_algo_t algo, const sim_hash_t *parent, const uint32_t *tokens,
                          uint32_t n, const sim_extra_keys_t *extra, const char *str, uint8_t *out,
                          size_t cap)
{
    s_out_t o = {.p = out, .cap = cap};
    if (s_is_cbor(algo))
        s_cbor(&o, parent, tokens, n, extra, str);
    else
        s_pickle(&o, parent, tokens, n, extra, str);
    return o.len;
}

static sim_hash_t s_digest(sim_hash_algo_t algo, const uint8_t *data, size_t len)
{
    sim_hash_t h = {0};
    if (algo == SIM_HASH_SHA256 || algo == SIM_HASH_SHA256_CBOR) {
        ipl_sha256(data, len, h.bytes);
        h.len = IPL_SHA256_LEN;
    } else {
        XXH128_canonical_t c;
        XXH128_canonicalFromHash(&c, XXH3_128bits(data, len));
        memcpy(h.bytes, c.digest, sizeof c.digest);
        h.len = sizeof c.digest;
    }
    for (int i = 0; i < 8; i++)
        h.lo = (h.lo << 8) | h.bytes[h.len - 8 + i];
    return h;
}

/* Serialises into the scratch buffer (grown as needed) and digests. */
static sim_hash_t s_hash(sim_hasher_t *self, const sim_hash_t *parent, const uint32_t *tokens,
                         uint32_t n, const sim_extra_keys_t *extra, const char *str)
{
    size_t len =
        s_serialize(self->algo, parent, tokens, n, extra, str, self->scratch, self->scratch_cap);
    if (len > self->scratch_cap) {
        uint8_t *p = realloc(self->scratch, len);
        if (!p) abort(); /* a few KiB at most (bounded block and key sizes) */
        self->scratch = p;
        self->scratch_cap = len;
        (void)s_serialize(self->algo, parent, tokens, n, extra, str, p, len);
    }
    return s_digest(self->algo, self->scratch, len);
}

sim_hasher_t *sim_hasher_new(sim_hash_algo_t algo, const char *pythonhashseed,
                             uint64_t fallback_seed)
{
    sim_hasher_t *self = calloc(1, sizeof *self);
    if (!self) return NULL;
    self->algo = algo;
    self->scratch_cap = 1024;
    self->scratch = malloc(self->scratch_cap);
    if (!self->scratch) {
        free(self);
        return NULL;
    }
    if (pythonhashseed) {
        self->none_hash = s_hash(self, NULL, NULL, 0, NULL, pythonhashseed);
    } else {
        /* vLLM: os.urandom(32). Here: 32 bytes nobody else derives, fixed by --seed. */
        uint8_t in[24] = "inferplane-sim-none-hash";
        for (int i = 0; i < 8; i++)
            in[16 + i] ^= (uint8_t)(fallback_seed >> (8 * i));
        sim_hash_t h = s_digest(SIM_HASH_SHA256, in, sizeof in);
        self->none_hash = h;
    }
    return self;
}

void sim_hasher_destroy(sim_hasher_t **self_p)
{
    assert(self_p);
    sim_hasher_t *self = *self_p;
    if (!self) return;
    free(self->scratch);
    free(self);
    *self_p = NULL;
}

sim_hash_algo_t sim_hasher_algo(const sim_hasher_t *self)
{
    return self->algo;
}

const sim_hash_t *sim_hasher_none_hash(const sim_hasher_t *self)
{
    return &self->none_hash;
}

sim_hash_t sim_hasher_block(sim_hasher_t *self, const sim_hash_t *parent, const uint32_t *tokens,
                            uint32_t n, const sim_extra_keys_t *extra)
{
    assert(n >= 1 && n <= SIM_HASHER_MAX_BLOCK && (!extra || extra->nkeys <= 2));
    return s_hash(self, parent ? parent : &self->none_hash, tokens, n, extra, NULL);
}

size_t sim_hasher_serialize(const sim_hasher_t *self, const sim_hash_t *parent,
                            const uint32_t *tokens, uint32_t n, const sim_extra_keys_t *extra,
                            uint8_t *out, size_t cap)
{
    return s_serialize(self->algo, parent ? parent : &self->none_hash, tokens, n, extra, NULL, out,
                       cap);
}
