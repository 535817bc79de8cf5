/*
 * Unit tests of ipl_hash: the chain definition of ipl_hash.h recomputed by hand with xxhash,
 * a pinned golden value (the gateway and the collector must agree across releases), partial
 * blocks, capacity, and the key's separation of hash spaces.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <xxhash.h>

#include "ipl_hash.h"

/* The tokens as little-endian u32 bytes, built byte by byte whatever the host. */
static void s_le_bytes(const uint32_t *tokens, size_t n, uint8_t *out)
{
    for (size_t k = 0; k < n; k++)
        for (int b = 0; b < 4; b++)
            out[4 * k + b] = (uint8_t)(tokens[k] >> (8 * b));
}

static void test_block_hash_definition(void **state)
{
    (void)state;
    uint32_t tokens[16];
    uint8_t bytes[64];
    for (int k = 0; k < 16; k++)
        tokens[k] = 0x01020304u * (uint32_t)(k + 1);
    s_le_bytes(tokens, 16, bytes);
    uint64_t parent = UINT64_C(0x1122334455667788);
    assert_true(ipl_block_hash(parent, tokens, 16) == XXH3_64bits_withSeed(bytes, 64, parent));
    /* the parent is the seed: a different parent gives a different hash */
    assert_true(ipl_block_hash(parent + 1, tokens, 16) != ipl_block_hash(parent, tokens, 16));
}

static void test_golden(void **state)
{
    (void)state;
    /* Pinned: changing it invalidates every index built by a previous release. */
    uint32_t tokens[16];
    for (int k = 0; k < 16; k++)
        tokens[k] = (uint32_t)(k + 1);
    assert_true(ipl_hash_chain_start(0) == IPL_HASH_ROOT);
    assert_true(ipl_block_hash(ipl_hash_chain_start(0), tokens, 16) ==
                UINT64_C(0x9360403601452c2c));
}

static void test_chain(void **state)
{
    (void)state;
    enum { BS = 4, N = 4 * BS + 3 }; /* four full blocks and a partial one */
    uint32_t tokens[N];
    for (int k = 0; k < N; k++)
        tokens[k] = (uint32_t)(1000 + k);
    uint64_t out[8] = {0};
    uint64_t start = ipl_hash_chain_start(0);
    assert_int_equal(ipl_block_hashes(start, tokens, N, BS, out, 8), 4);
    uint64_t h = start;
    for (int i = 0; i < 4; i++) {
        h = ipl_block_hash(h, tokens + i * BS, BS);
        assert_true(out[i] == h);
    }
    assert_true(out[4] == 0); /* the partial block is never hashed */

    /* a prefix of a prompt gives a prefix of the chain */
    uint64_t prefix[8];
    assert_int_equal(ipl_block_hashes(start, tokens, 2 * BS + 1, BS, prefix, 8), 2);
    assert_memory_equal(prefix, out, 2 * sizeof(uint64_t));

    /* resuming from the last hash continues the chain */
    uint64_t rest[8];
    assert_int_equal(ipl_block_hashes(out[1], tokens + 2 * BS, N - 2 * BS, BS, rest, 8), 2);
    assert_memory_equal(rest, out + 2, 2 * sizeof(uint64_t));

    /* capacity */
    uint64_t small[2] = {0, 0};
    assert_int_equal(ipl_block_hashes(start, tokens, N, BS, small, 2), 2);
    assert_memory_equal(small, out, sizeof small);
    assert_int_equal(ipl_block_hashes(start, tokens, N, BS, small, 0), 0);
    assert_int_equal(ipl_block_hashes(start, tokens, BS - 1, BS, small, 2), 0);
    assert_int_equal(ipl_block_hashes(start, tokens, N, 0, small, 2), 0);

    /* one changed token changes its block and every later one, not the earlier ones */
    tokens[BS + 1] ^= 1;
    uint64_t changed[8];
    assert_int_equal(ipl_block_hashes(start, tokens, N, BS, changed, 8), 4);
    assert_true(changed[0] == out[0]);
    for (int i = 1; i < 4; i++)
        assert_true(changed[i] != out[i]);
}

static void test_key(void **state)
{
    (void)state;
    assert_true(ipl_hash_key(NULL, NULL) == 0);
    uint64_t a = ipl_hash_key("lora-a", NULL);
    assert_true(a != 0);
    assert_true(a == ipl_hash_key("lora-a", NULL));
    assert_true(a != ipl_hash_key("lora-b", NULL));
    assert_true(a != ipl_hash_key(NULL, "lora-a")); /* a salt is not a LoRA of that name */
    assert_true(ipl_hash_key("ab", "c") != ipl_hash_key("a", "bc"));
    assert_true(ipl_hash_key("", NULL) != 0);
    assert_true(ipl_hash_key("", NULL) != ipl_hash_key(NULL, ""));
    assert_true(ipl_hash_key("x", "salt") != ipl_hash_key("x", NULL));
    /* the key moves the whole chain */
    uint32_t tokens[4] = {1, 2, 3, 4};
    assert_true(ipl_hash_chain_start(a) != ipl_hash_chain_start(0));
    assert_true(ipl_block_hash(ipl_hash_chain_start(a), tokens, 4) !=
                ipl_block_hash(ipl_hash_chain_start(0), tokens, 4));
}

static void test_hash_bytes(void **state)
{
    (void)state;
    static const char text[] = "inferplane";
    assert_true(ipl_hash_bytes(text, strlen(text)) == XXH3_64bits(text, strlen(text)));
    assert_true(ipl_hash_bytes(text, 0) == XXH3_64bits(NULL, 0));
    assert_true(ipl_hash_bytes(text, 3) != ipl_hash_bytes(text, 4));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_block_hash_definition),
        cmocka_unit_test(test_golden),
        cmocka_unit_test(test_chain),
        cmocka_unit_test(test_key),
        cmocka_unit_test(test_hash_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
