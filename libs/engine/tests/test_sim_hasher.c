/*
 * Unit tests of sim_hasher: vLLM's block hashes for all four --prefix-caching-hash-algo values
 * compared with digests computed by CPython 3.11 (pickle protocol 5, hashlib, cbor2 5.4
 * canonical, python-xxhash xxh3_128_digest) over the same tuples — NONE_HASH from
 * PYTHONHASHSEED="0", a two-block chain whose token ids cross every pickle/CBOR integer width,
 * and the same chain under a LoRA name (every block) and a cache salt (block 0) — plus the
 * serialised bytes themselves, the wire value (last 8 bytes big-endian) and the name parser.
 *
 * The reference values were printed by:
 *   P = lambda x: pickle.dumps(x, protocol=pickle.HIGHEST_PROTOCOL)
 *   C = lambda x: cbor2.dumps(x, canonical=True)
 *   sha256 = sha256(P(x)), sha256_cbor = sha256(C(x)), xxhash = xxh3_128_digest(P(x)), ...
 *   none = f("0"); h0 = f((none, B0, None)); h1 = f((h0, B1, None))
 *   l0 = f((none, B0, ("lora-a", "salty"))); l1 = f((l0, B1, ("lora-a",)))
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sim_hasher.h"
#include "ipl_error.h"

static const uint32_t s_b0[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
static const uint32_t s_b1[16] = {0,           255,         256,    65535, 65536, 2147483647,
                                  2147483648u, 4294967295u, 151644, 872,   198,   7,
                                  8,           9,           10,     11};

static void s_hex(const uint8_t *p, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++)
        snprintf(out + 2 * i, 3, "%02x", p[i]);
}

static void s_expect(const sim_hash_t *h, const char *hex)
{
    char got[2 * SIM_HASH_MAX + 1];
    s_hex(h->bytes, h->len, got);
    assert_string_equal(got, hex);
}

typedef struct {
    const char *algo;
    const char *none, *h0, *h1, *l0, *l1;
    uint64_t h0_wire;
} s_vector_t;

static const s_vector_t s_vectors[] = {
    {"sha256", "1973e23848344dc43a988a9b478663803cfffe1243480253f9a3cf004b14aa7c",
     "bea72b7d33de03c1aa715efbb492d0e0d3801f00c1f985756896072ae8b31325",
     "4a846d0bdc11096f10977de150365841984b3d8ccc05151e956a2377c95c58da",
     "186fa2ee3c3a3805bc504637268454da37c4a6c8700082465e6cf6e7afd82b23",
     "85b7e850844c5c9477fc03a617c6bff0375345454fc5809290b9a91cd439c0f6", 7536218907325174565ull},
    {"sha256_cbor", "4e1195df020de59e0d65a33a4279f1183e7ae4e5d980e309f8b55adff2e61c3e",
     "202da172482d928bbc42ab25b0151e2b895f13f41002e27b2ceabcfae6d332ea",
     "598d2ec81f8cb2f3b28585adc831b9d0d7810f4b2253585fb0b28af7761e8815",
     "c15e4d4cb4d429a4808eb92c91bca7d204cb9538629619cd2c91c31e10e24b76",
     "6c38e0d6bc95165192153371091633d70df93328ea0c21d1a65532fd93201b23", 3236607068019569386ull},
    {"xxhash", "6fb31cc38bba6066183f7f2104b9c051", "6ba7d7fc1608e5f0a4612b1b0c87458f",
     "eca84d4512d2464b03f65c817f1b63c6", "fdccc0792f2070ac183260276470c0a8",
     "70c81f2d84b6d251d4e4f2086b0e566f", 11844795890135418255ull},
    {"xxhash_cbor", "1ebe36576dcb573f26b99533a20aaeca", "c2d7a75070fc6d6b0c3fb0af456c1009",
     "e08ce51d59a03faeb4d14e3318f63c03", "765cc5602a8aa75c6a6b1d218f3668b7",
     "b12c29a7c8cbe829c2756c7d1ab4b72d", 882618318818381833ull},
};

static void test_matches_python(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof s_vectors / sizeof s_vectors[0]; i++) {
        const s_vector_t *v = &s_vectors[i];
        sim_hash_algo_t algo;
        assert_int_equal(sim_hash_algo_parse(v->algo, &algo), 0);
        assert_string_equal(sim_hash_algo_name(algo), v->algo);
        sim_hasher_t *h = sim_hasher_new(algo, "0", 0);
        assert_non_null(h);
        s_expect(sim_hasher_none_hash(h), v->none);
        sim_hash_t h0 = sim_hasher_block(h, NULL, s_b0, 16, NULL);
        s_expect(&h0, v->h0);
        assert_true(h0.lo == v->h0_wire);
        sim_hash_t h1 = sim_hasher_block(h, &h0, s_b1, 16, NULL);
        s_expect(&h1, v->h1);
        sim_extra_keys_t first = {.keys = {"lora-a", "salty"}, .nkeys = 2};
        sim_extra_keys_t rest = {.keys = {"lora-a"}, .nkeys = 1};
        sim_hash_t l0 = sim_hasher_block(h, NULL, s_b0, 16, &first);
        s_expect(&l0, v->l0);
        sim_hash_t l1 = sim_hasher_block(h, &l0, s_b1, 16, &rest);
        s_expect(&l1, v->l1);
        /* An empty extra-key list is None. */
        sim_extra_keys_t none = {.nkeys = 0};
        sim_hash_t n0 = sim_hasher_block(h, NULL, s_b0, 16, &none);
        assert_true(sim_hash_eq(&n0, &h0));
        sim_hasher_destroy(&h);
        assert_null(h);
    }
}

static void test_serialized_forms(void **state)
{
    (void)state;
    /* (bytes(range(32)), (1, 2, 300, 70000, 2**31-1, 2**31, 2**32-1, 0), None) */
    sim_hash_t parent = {.len = 32};
    for (int i = 0; i < 32; i++)
        parent.bytes[i] = (uint8_t)i;
    const uint32_t t[8] = {1, 2, 300, 70000, 2147483647, 2147483648u, 4294967295u, 0};
    static const char pickle_hex[] =
        "8005954b000000000000004320000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c"
        "1d1e1f94284b014b024d2c014a701101004affffff7f8a0500000080008a05ffffffff004b0074944e87"
        "942e";
    static const char cbor_hex[] = "835820000102030405060708090a0b0c0d0e0f101112131415161718191a"
                                   "1b1c1d1e1f88010219012c1a000111701a7fffffff1a800000001affff"
                                   "ffff00f6";
    /* (bytes(range(16)), (5,), ("lora-a", "salty")) */
    sim_hash_t p16 = {.len = 16};
    for (int i = 0; i < 16; i++)
        p16.bytes[i] = (uint8_t)i;
    const uint32_t five[1] = {5};
    sim_extra_keys_t keys = {.keys = {"lora-a", "salty"}, .nkeys = 2};
    static const char pickle2_hex[] = "8005952d000000000000004310000102030405060708090a0b0c0d0e0f"
                                      "944b0585948c066c6f72612d61948c0573616c747994869487942e";
    static const char cbor2_hex[] =
        "8350000102030405060708090a0b0c0d0e0f810582666c6f72612d616573616c7479";
    struct {
        sim_hash_algo_t algo;
        const sim_hash_t *parent;
        const uint32_t *tokens;
        uint32_t n;
        const sim_extra_keys_t *extra;
        const char *hex;
    } cases[] = {
        {SIM_HASH_SHA256, &parent, t, 8, NULL, pickle_hex},
        {SIM_HASH_XXHASH, &parent, t, 8, NULL, pickle_hex},
        {SIM_HASH_SHA256_CBOR, &parent, t, 8, NULL, cbor_hex},
        {SIM_HASH_SHA256, &p16, five, 1, &keys, pickle2_hex},
        {SIM_HASH_XXHASH_CBOR, &p16, five, 1, &keys, cbor2_hex},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sim_hasher_t *h = sim_hasher_new(cases[i].algo, "0", 0);
        uint8_t buf[256];
        char hex[513];
        size_t n = sim_hasher_serialize(h, cases[i].parent, cases[i].tokens, cases[i].n,
                                        cases[i].extra, buf, sizeof buf);
        assert_true(n <= sizeof buf);
        s_hex(buf, n, hex);
        assert_string_equal(hex, cases[i].hex);
        /* A short buffer still reports the full length. */
        assert_int_equal(sim_hasher_serialize(h, cases[i].parent, cases[i].tokens, cases[i].n,
                                              cases[i].extra, buf, 3),
                         n);
        sim_hasher_destroy(&h);
    }
}

static void test_unset_seed_and_big_blocks(void **state)
{
    (void)state;
    /* PYTHONHASHSEED unset: a 32-byte NONE_HASH of our own, fixed by the fallback seed. */
    sim_hasher_t *a = sim_hasher_new(SIM_HASH_XXHASH, NULL, 1);
    sim_hasher_t *b = sim_hasher_new(SIM_HASH_XXHASH, NULL, 1);
    sim_hasher_t *c = sim_hasher_new(SIM_HASH_XXHASH, NULL, 2);
    assert_int_equal(sim_hasher_none_hash(a)->len, 32);
    assert_true(sim_hash_eq(sim_hasher_none_hash(a), sim_hasher_none_hash(b)));
    assert_false(sim_hash_eq(sim_hasher_none_hash(a), sim_hasher_none_hash(c)));
    /* The first block under a 32-byte NONE_HASH gives a 16-byte digest, chained further. */
    sim_hash_t h = sim_hasher_block(a, NULL, s_b0, 16, NULL);
    assert_int_equal(h.len, 16);
    /* The largest block grows the scratch buffer; the result is stable. */
    uint32_t *big = malloc(SIM_HASHER_MAX_BLOCK * sizeof *big);
    for (uint32_t i = 0; i < SIM_HASHER_MAX_BLOCK; i++)
        big[i] = i * 2654435761u;
    sim_hash_t x = sim_hasher_block(a, &h, big, SIM_HASHER_MAX_BLOCK, NULL);
    sim_hash_t y = sim_hasher_block(b, &h, big, SIM_HASHER_MAX_BLOCK, NULL);
    assert_true(sim_hash_eq(&x, &y));
    big[100] ^= 1;
    y = sim_hasher_block(b, &h, big, SIM_HASHER_MAX_BLOCK, NULL);
    assert_false(sim_hash_eq(&x, &y));
    free(big);
    sim_hasher_destroy(&a);
    sim_hasher_destroy(&b);
    sim_hasher_destroy(&c);
    sim_hash_algo_t algo;
    assert_int_equal(sim_hash_algo_parse("builtin", &algo), IPL_E_INVAL);
    assert_int_equal(sim_hash_algo_parse(NULL, &algo), IPL_E_INVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_python),
        cmocka_unit_test(test_serialized_forms),
        cmocka_unit_test(test_unset_seed_and_big_blocks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
