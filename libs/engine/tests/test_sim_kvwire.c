/*
 * Unit tests of sim_kvwire: the payload bytes of an example batch in every format (golden, byte
 * for byte; the structs of vllm-project/vllm: vllm/distributed/kv_events.py encoded by hand by
 * msgspec's rules, jcristharif.com/msgspec/structs.html), with LoRA, extra keys and raw
 * digests, decoded back by the collector's decoder (ipl_vllm_kv).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ipl_error.h"
#include "ipl_vllm_kv.h"
#include "sim_kvwire.h"

#define HASH     "\x91\xcf\x01\x23\x45\x67\x89\xab\xcd\xef"
#define TOKENS   "\xdc\x00\x10\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10"
#define ENVELOPE "\x93\xcb\x41\xd9\x54\xfc\x40\x20\x00\x00\x92"

/* One msgpack value per line, in the order msgspec writes them. */
// clang-format off
/* The v0.10-era arrays (medium, no lora_name), 89 bytes. */
static const char s_golden_legacy[] = ENVELOPE
    "\x97" "\xab" "BlockStored" HASH "\xc0" TOKENS "\x10" "\xc0" "\xa3" "GPU"
    "\x93" "\xac" "BlockRemoved" HASH "\xa3" "GPU"
    "\x00";
/* The v0.13-0.25 arrays: lora_name (nil) after medium, 90 bytes. */
static const char s_golden_array[] = ENVELOPE
    "\x98" "\xab" "BlockStored" HASH "\xc0" TOKENS "\x10" "\xc0" "\xa3" "GPU" "\xc0"
    "\x93" "\xac" "BlockRemoved" HASH "\xa3" "GPU"
    "\x00";
/* The v0.26+ maps, as the vLLM 0.26.0 capture in volcano-sh/kthena#1535, 266 bytes. */
static const char s_golden_map[] = ENVELOPE
    "\x8b" "\xa4" "type" "\xab" "BlockStored"
    "\xac" "block_hashes" HASH
    "\xb1" "parent_block_hash" "\xc0"
    "\xa9" "token_ids" TOKENS
    "\xaa" "block_size" "\x10"
    "\xa7" "lora_id" "\xc0"
    "\xa6" "medium" "\xa3" "GPU"
    "\xa9" "lora_name" "\xc0"
    "\xaa" "extra_keys" "\x91\xc0"
    "\xa9" "group_idx" "\x00"
    "\xb2" "kv_cache_spec_kind" "\xae" "full_attention"
    "\x84" "\xa4" "type" "\xac" "BlockRemoved"
    "\xac" "block_hashes" HASH
    "\xa6" "medium" "\xa3" "GPU"
    "\xa9" "group_idx" "\x00"
    "\x00";
// clang-format on

static sim_kvbatch_t *s_example(void)
{
    sim_kvbatch_t *b = sim_kvbatch_new();
    uint32_t tokens[16];
    for (int i = 0; i < 16; i++)
        tokens[i] = (uint32_t)(i + 1);
    sim_hash_t h = sim_hash_from_u64(0x0123456789abcdefULL);
    assert_int_equal(sim_kvbatch_stored(b, &h, 1, NULL, tokens, 16, NULL), 0);
    assert_int_equal(sim_kvbatch_removed(b, &h), 0);
    return b;
}

/* The golden bytes themselves, through the collector's decoder: the example's two events. */
static int s_golden_event(void *arg, const ipl_vllm_kv_event_t *ev)
{
    int *n = arg;
    assert_int_equal(ev->nblocks, 1);
    assert_true(ev->block_hashes[0] == 0x0123456789abcdefULL);
    assert_true(ev->medium && ev->medium_len == 3 && memcmp(ev->medium, "GPU", 3) == 0);
    assert_null(ev->lora_name);
    assert_false(ev->has_lora_id);
    if (*n == 0) {
        assert_int_equal(ev->kind, IPL_VLLM_KV_BLOCK_STORED);
        assert_false(ev->has_parent);
        assert_int_equal(ev->block_size, 16);
        assert_int_equal(ev->ntokens, 16);
        for (uint32_t i = 0; i < 16; i++)
            assert_int_equal(ev->token_ids[i], i + 1);
        assert_false(ev->has_extra_keys);
    } else {
        assert_int_equal(ev->kind, IPL_VLLM_KV_BLOCK_REMOVED);
    }
    (*n)++;
    return 0;
}

static void s_decode_golden(const char *golden, size_t len, sim_kv_format_t fmt)
{
    ipl_vllm_kv_decoder_t *dec = ipl_vllm_kv_decoder_new();
    ipl_vllm_kv_batch_t batch;
    int n = 0;
    assert_int_equal(
        ipl_vllm_kv_decode(dec, (const uint8_t *)golden, len, &batch, s_golden_event, &n), 0);
    assert_int_equal(n, 2);
    assert_true(batch.ts == 1700000000.5);
    assert_int_equal(batch.dp_rank, 0);
    assert_int_equal(batch.nevents, 2);
    (void)fmt;
    ipl_vllm_kv_decoder_destroy(&dec);
}

static void s_check_golden(sim_kv_format_t fmt, const char *golden, size_t golden_len)
{
    sim_kvbatch_t *b = s_example();
    size_t len = 0;
    uint8_t *bytes = sim_kvwire_encode(b, 1700000000.5, fmt, true, &len);
    assert_non_null(bytes);
    assert_int_equal(len, golden_len);
    assert_memory_equal(bytes, golden, golden_len);
    free(bytes);
    sim_kvbatch_destroy(&b);
    s_decode_golden(golden, golden_len, fmt);
}

static void test_golden_array_legacy(void **state)
{
    (void)state;
    assert_int_equal(sizeof s_golden_legacy - 1, 89);
    s_check_golden(SIM_KV_FORMAT_ARRAY_LEGACY, s_golden_legacy, sizeof s_golden_legacy - 1);
}

static void test_golden_array(void **state)
{
    (void)state;
    assert_int_equal(sizeof s_golden_array - 1, 90);
    s_check_golden(SIM_KV_FORMAT_ARRAY, s_golden_array, sizeof s_golden_array - 1);
}

static void test_golden_map(void **state)
{
    (void)state;
    assert_int_equal(sizeof s_golden_map - 1, 266);
    s_check_golden(SIM_KV_FORMAT_MAP, s_golden_map, sizeof s_golden_map - 1);
}

/* VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0 and a LoRA + cache_salt request, map form: the raw
 * 32-byte digests as bin8, lora_id 1, lora_name, and extra_keys [["ad1", "s"], ["ad1"]]
 * (the salt only on the chain's first block). */
#define DIGEST_A                                                                                   \
    "\xa0\xa1\xa2\xa3\xa4\xa5\xa6\xa7\xa8\xa9\xaa\xab\xac\xad\xae\xaf\xb0\xb1\xb2\xb3\xb4\xb5\xb6" \
    "\xb7\xb8\xb9\xba\xbb\xbc\xbd\xbe\xbf"
#define DIGEST_B                                                                                   \
    "\xc0\xc1\xc2\xc3\xc4\xc5\xc6\xc7\xc8\xc9\xca\xcb\xcc\xcd\xce\xcf\xd0\xd1\xd2\xd3\xd4\xd5\xd6" \
    "\xd7\xd8\xd9\xda\xdb\xdc\xdd\xde\xdf"
// clang-format off
static const char s_golden_lora_bytes[] = "\x93\xcb\x41\xd9\x54\xfc\x40\x20\x00\x00\x92"
    "\x8b" "\xa4" "type" "\xab" "BlockStored"
    "\xac" "block_hashes" "\x92" "\xc4\x20" DIGEST_A "\xc4\x20" DIGEST_B
    "\xb1" "parent_block_hash" "\xc0"
    "\xa9" "token_ids" "\xdc\x00\x20" "\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10"
        "\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f\x20"
    "\xaa" "block_size" "\x10"
    "\xa7" "lora_id" "\x01"
    "\xa6" "medium" "\xa3" "GPU"
    "\xa9" "lora_name" "\xa3" "ad1"
    "\xaa" "extra_keys" "\x92" "\x92\xa3" "ad1" "\xa1" "s" "\x91\xa3" "ad1"
    "\xa9" "group_idx" "\x00"
    "\xb2" "kv_cache_spec_kind" "\xae" "full_attention"
    "\x84" "\xa4" "type" "\xac" "BlockRemoved"
    "\xac" "block_hashes" "\x91" "\xc4\x20" DIGEST_B
    "\xa6" "medium" "\xa3" "GPU"
    "\xa9" "group_idx" "\x00"
    "\x00";
/* The same batch in the 0.13-0.25 array form with int hashes: lora_id and lora_name, no
 * extra_keys (those versions did not send them). */
static const char s_golden_lora_array[] = "\x93\xcb\x41\xd9\x54\xfc\x40\x20\x00\x00\x92"
    "\x98" "\xab" "BlockStored" "\x92\xcf\xb8\xb9\xba\xbb\xbc\xbd\xbe\xbf\xcf\xd8\xd9\xda\xdb\xdc\xdd\xde\xdf"
    "\xc0" "\xdc\x00\x20" "\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10"
        "\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f\x20"
    "\x10" "\x01" "\xa3" "GPU" "\xa3" "ad1"
    "\x93" "\xac" "BlockRemoved" "\x91\xcf\xd8\xd9\xda\xdb\xdc\xdd\xde\xdf" "\xa3" "GPU"
    "\x00";
// clang-format on

static sim_kvbatch_t *s_lora_example(void)
{
    sim_kvbatch_t *b = sim_kvbatch_new();
    uint32_t tokens[32];
    for (int i = 0; i < 32; i++)
        tokens[i] = (uint32_t)(i + 1);
    sim_hash_t h[2] = {{.len = 32}, {.len = 32}};
    for (int i = 0; i < 32; i++) {
        h[0].bytes[i] = (uint8_t)(0xa0 + i);
        h[1].bytes[i] = (uint8_t)(0xc0 + i);
    }
    h[0].lo = 0xb8b9babbbcbdbebfULL;
    h[1].lo = 0xd8d9dadbdcdddedfULL;
    sim_block_keys_t keys = {.lora_id = 1, .lora_name = "ad1", .cache_salt = "s"};
    assert_int_equal(sim_kvbatch_stored(b, h, 2, NULL, tokens, 16, &keys), 0);
    assert_int_equal(sim_kvbatch_removed(b, &h[1]), 0);
    return b;
}

static int s_lora_event(void *arg, const ipl_vllm_kv_event_t *ev)
{
    int *n = arg;
    if ((*n)++ == 0) {
        assert_int_equal(ev->kind, IPL_VLLM_KV_BLOCK_STORED);
        assert_int_equal(ev->nblocks, 2);
        assert_true(ev->block_hashes[0] == 0xb8b9babbbcbdbebfULL); /* low 8 bytes, BE */
        assert_true(ev->block_hashes[1] == 0xd8d9dadbdcdddedfULL);
        assert_true(ev->has_lora_id && ev->lora_id == 1);
        assert_true(ev->lora_name_len == 3 && memcmp(ev->lora_name, "ad1", 3) == 0);
        assert_int_equal(ev->ntokens, 32);
    } else {
        assert_int_equal(ev->kind, IPL_VLLM_KV_BLOCK_REMOVED);
        assert_true(ev->block_hashes[0] == 0xd8d9dadbdcdddedfULL);
    }
    return 0;
}

static void test_golden_bytes_hashes_and_lora(void **state)
{
    (void)state;
    struct {
        sim_kv_format_t fmt;
        bool int_hashes;
        const char *golden;
        size_t len;
        bool extra_keys;
    } cases[] = {
        {SIM_KV_FORMAT_MAP, false, s_golden_lora_bytes, sizeof s_golden_lora_bytes - 1, true},
        {SIM_KV_FORMAT_ARRAY, true, s_golden_lora_array, sizeof s_golden_lora_array - 1, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sim_kvbatch_t *b = s_lora_example();
        size_t len = 0;
        uint8_t *bytes = sim_kvwire_encode(b, 1700000000.5, cases[i].fmt, cases[i].int_hashes, &len);
        assert_int_equal(len, cases[i].len);
        assert_memory_equal(bytes, cases[i].golden, len);
        ipl_vllm_kv_decoder_t *dec = ipl_vllm_kv_decoder_new();
        int n = 0;
        assert_int_equal(ipl_vllm_kv_decode(dec, bytes, len, NULL, s_lora_event, &n), 0);
        assert_int_equal(n, 2);
        ipl_vllm_kv_decoder_destroy(&dec);
        free(bytes);
        sim_kvbatch_destroy(&b);
    }
}

/* --- decoding back with the collector's decoder ---------------------------------------------- */

typedef struct {
    int n;
    ipl_vllm_kv_kind_t kinds[8];
    uint64_t first_hash[8];
    bool has_parent[8];
    uint64_t parent[8];
    uint32_t ntokens[8];
    uint32_t last_token[8];
    uint32_t nblocks[8];
    bool gpu[8];
    int64_t group_idx[8];
} s_seen_t;

static int s_on_event(void *arg, const ipl_vllm_kv_event_t *ev)
{
    s_seen_t *s = arg;
    if (s->n >= 8) return -1;
    s->kinds[s->n] = ev->kind;
    s->first_hash[s->n] = ev->nblocks ? ev->block_hashes[0] : 0;
    s->has_parent[s->n] = ev->has_parent;
    s->parent[s->n] = ev->parent_hash;
    s->ntokens[s->n] = ev->ntokens;
    s->last_token[s->n] = ev->ntokens ? ev->token_ids[ev->ntokens - 1] : 0;
    s->nblocks[s->n] = ev->nblocks;
    s->gpu[s->n] = ev->medium && ev->medium_len == 3 && memcmp(ev->medium, "GPU", 3) == 0;
    s->group_idx[s->n] = ev->group_idx;
    s->n++;
    return 0;
}

static void test_decoded_by_collector(void **state)
{
    (void)state;
    sim_kvbatch_t *b = sim_kvbatch_new();
    uint32_t tokens[64];
    for (int i = 0; i < 64; i++)
        tokens[i] = 1000000u + (uint32_t)i; /* large ids: uint32 encodings */
    sim_hash_t hashes[4] = {sim_hash_from_u64(0xffffffffffffffffULL), sim_hash_from_u64(1),
                            sim_hash_from_u64(0x8000000000000000ULL), sim_hash_from_u64(42)};
    sim_hash_t parent = sim_hash_from_u64(77);
    assert_int_equal(sim_kvbatch_stored(b, hashes, 4, &parent, tokens, 16, NULL), 0);
    assert_int_equal(sim_kvbatch_removed(b, &hashes[3]), 0);
    assert_int_equal(sim_kvbatch_cleared(b), 0);
    sim_kv_format_t fmts[] = {SIM_KV_FORMAT_MAP, SIM_KV_FORMAT_ARRAY, SIM_KV_FORMAT_ARRAY_LEGACY};
    ipl_vllm_kv_decoder_t *dec = ipl_vllm_kv_decoder_new();
    for (size_t f = 0; f < 3; f++) {
        size_t len = 0;
        uint8_t *bytes = sim_kvwire_encode(b, 1.25, fmts[f], true, &len);
        s_seen_t seen = {0};
        ipl_vllm_kv_batch_t batch;
        assert_int_equal(ipl_vllm_kv_decode(dec, bytes, len, &batch, s_on_event, &seen), 0);
        assert_true(batch.ts == 1.25);
        assert_int_equal(batch.dp_rank, 0);
        assert_int_equal(seen.n, 3);
        assert_int_equal(seen.kinds[0], IPL_VLLM_KV_BLOCK_STORED);
        assert_int_equal(seen.nblocks[0], 4);
        assert_true(seen.first_hash[0] == 0xffffffffffffffffULL);
        assert_true(seen.has_parent[0] && seen.parent[0] == 77);
        assert_int_equal(seen.ntokens[0], 64);
        assert_int_equal(seen.last_token[0], 1000063);
        assert_int_equal(seen.kinds[1], IPL_VLLM_KV_BLOCK_REMOVED);
        assert_true(seen.first_hash[1] == 42);
        assert_int_equal(seen.kinds[2], IPL_VLLM_KV_ALL_CLEARED);
        assert_true(seen.gpu[0] && seen.gpu[1]);
        assert_int_equal(seen.group_idx[0], fmts[f] == SIM_KV_FORMAT_MAP ? 0 : -1);
        free(bytes);
    }
    ipl_vllm_kv_decoder_destroy(&dec);
    sim_kvbatch_destroy(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden_array_legacy),
        cmocka_unit_test(test_golden_array),
        cmocka_unit_test(test_golden_map),
        cmocka_unit_test(test_golden_bytes_hashes_and_lora),
        cmocka_unit_test(test_decoded_by_collector),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
