/*
 * Unit tests of sim_kvpub: the payload bytes of VLLM-INTEROP §1.4's example in every format
 * (golden, byte for byte), decoded back by the collector's decoder (ipl_vllm_kv); the config
 * parser and vLLM's bind-or-connect rule; and the live sockets: PUB frames (topic, big-endian
 * seq from 0, payload), both replay layouts, and the drop-every-N fault.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <zmq.h>

#include "ipl_clock.h"
#include "ipl_error.h"
#include "ipl_vllm_kv.h"
#include "sim_kvpub.h"

#define HASH     "\x91\xcf\x01\x23\x45\x67\x89\xab\xcd\xef"
#define TOKENS   "\xdc\x00\x10\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10"
#define ENVELOPE "\x93\xcb\x41\xd9\x54\xfc\x40\x20\x00\x00\x92"

/* One msgpack value per line, as in VLLM-INTEROP §1.4. */
// clang-format off
/* §1.4(a): v0.10-era arrays (medium, no lora_name), 89 bytes. */
static const char s_golden_legacy[] = ENVELOPE
    "\x97" "\xab" "BlockStored" HASH "\xc0" TOKENS "\x10" "\xc0" "\xa3" "GPU"
    "\x93" "\xac" "BlockRemoved" HASH "\xa3" "GPU"
    "\x00";
/* The v0.13-0.25 arrays: lora_name (nil) after medium, 90 bytes. */
static const char s_golden_array[] = ENVELOPE
    "\x98" "\xab" "BlockStored" HASH "\xc0" TOKENS "\x10" "\xc0" "\xa3" "GPU" "\xc0"
    "\x93" "\xac" "BlockRemoved" HASH "\xa3" "GPU"
    "\x00";
/* §1.4(b): v0.26+ maps, as the live capture, 266 bytes. */
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

/* --- configuration ------------------------------------------------------------------------- */

static void test_config(void **state)
{
    (void)state;
    sim_kvconfig_t c;
    char err[256];
    assert_int_equal(sim_kvconfig_parse(NULL, &c, err, sizeof err), 0);
    assert_false(c.enabled);
    assert_string_equal(c.endpoint, "tcp://*:5557");
    assert_int_equal(c.buffer_steps, 10000);
    assert_int_equal(c.hwm, 100000);
    assert_string_equal(c.replay_endpoint, "");
    assert_int_equal(sim_kvconfig_parse("{\"enable_kv_cache_events\":true,\"publisher\":\"zmq\","
                                        "\"endpoint\":\"tcp://*:6000\",\"replay_endpoint\":"
                                        "\"tcp://*:6100\",\"topic\":\"kv\",\"buffer_steps\":5,"
                                        "\"hwm\":7,\"max_queue_size\":1}",
                                        &c, err, sizeof err),
                     0);
    assert_true(c.enabled);
    assert_string_equal(c.endpoint, "tcp://*:6000");
    assert_string_equal(c.replay_endpoint, "tcp://*:6100");
    assert_string_equal(c.topic, "kv");
    assert_int_equal(c.buffer_steps, 5);
    assert_int_equal(c.hwm, 7);
    /* publisher omitted: newer vLLM resolves it to zmq when enabled; "null" disables */
    assert_int_equal(sim_kvconfig_parse("{\"enable_kv_cache_events\":true}", &c, err, sizeof err),
                     0);
    assert_true(c.enabled);
    assert_int_equal(sim_kvconfig_parse("{\"enable_kv_cache_events\":true,\"publisher\":\"null\"}",
                                        &c, err, sizeof err),
                     0);
    assert_false(c.enabled);
    const char *bad[] = {"{",
                         "[]",
                         "{\"enable_kv_cache_events\":1}",
                         "{\"publisher\":\"kafka\"}",
                         "{\"buffer_steps\":-1}",
                         "{\"hwm\":1.5}",
                         "{\"endpoint\":3}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        assert_int_equal(sim_kvconfig_parse(bad[i], &c, err, sizeof err), IPL_E_INVAL);
        assert_true(strstr(err, "kv-events-config") != NULL);
    }
}

static void test_bind_rule(void **state)
{
    (void)state;
    assert_true(sim_kv_endpoint_binds("tcp://*:5557"));
    assert_true(sim_kv_endpoint_binds("tcp://[::]:5557"));
    assert_true(sim_kv_endpoint_binds("ipc:///tmp/kv"));
    assert_true(sim_kv_endpoint_binds("inproc://kv"));
    assert_false(sim_kv_endpoint_binds("tcp://127.0.0.1:5557"));
    assert_false(sim_kv_endpoint_binds("tcp://collector:5557"));
    sim_kv_format_t f;
    sim_kv_bind_t bnd;
    assert_int_equal(sim_kv_format_parse("array", &f), 0);
    assert_int_equal(f, SIM_KV_FORMAT_ARRAY);
    assert_int_equal(sim_kv_format_parse("msgpack", &f), IPL_E_INVAL);
    assert_int_equal(sim_kv_bind_parse("connect", &bnd), 0);
    assert_int_equal(bnd, SIM_KV_BIND_CONNECT);
    assert_int_equal(sim_kv_bind_parse("", &bnd), IPL_E_INVAL);
}

/* --- sockets ------------------------------------------------------------------------------- */

typedef struct {
    void *ctx;
    sim_kvpub_t *pub;
    void *sub;
    char endpoint[128];
    char replay[128];
} s_live_t;

static void s_live_open(s_live_t *l, int layout, int64_t drop_every_n)
{
    sim_kvconfig_t c;
    char err[256];
    assert_int_equal(
        sim_kvconfig_parse("{\"enable_kv_cache_events\":true,\"endpoint\":\"tcp://127.0.0.1:*\","
                           "\"replay_endpoint\":\"tcp://127.0.0.1:*\",\"topic\":\"kv-events\","
                           "\"buffer_steps\":100}",
                           &c, err, sizeof err),
        0);
    sim_kvpub_opts_t o = {.format = SIM_KV_FORMAT_MAP,
                          .bind = SIM_KV_BIND_AUTO,
                          .replay_layout = layout,
                          .drop_every_n = drop_every_n};
    l->pub = sim_kvpub_new(&c, &o, err, sizeof err);
    assert_non_null(l->pub);
    assert_int_equal(sim_kvpub_last_endpoint(l->pub, false, l->endpoint, sizeof l->endpoint), 0);
    assert_int_equal(sim_kvpub_last_endpoint(l->pub, true, l->replay, sizeof l->replay), 0);
    l->ctx = zmq_ctx_new();
    l->sub = zmq_socket(l->ctx, ZMQ_SUB);
    int linger = 0, timeout = 2000;
    zmq_setsockopt(l->sub, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(l->sub, ZMQ_RCVTIMEO, &timeout, sizeof timeout);
    zmq_setsockopt(l->sub, ZMQ_SUBSCRIBE, "kv-events", 9);
    assert_int_equal(zmq_connect(l->sub, l->endpoint), 0);
}

static void s_live_close(s_live_t *l)
{
    zmq_close(l->sub);
    zmq_ctx_term(l->ctx);
    sim_kvpub_destroy(&l->pub);
}

/* Receives one 3-frame message; returns its seq (payload length in *plen). */
static uint64_t s_recv_batch(void *sock, size_t *plen)
{
    char topic[64];
    uint8_t seq8[16];
    static uint8_t payload[4096];
    int n = zmq_recv(sock, topic, sizeof topic, 0);
    assert_int_equal(n, 9);
    assert_memory_equal(topic, "kv-events", 9);
    assert_int_equal(zmq_recv(sock, seq8, sizeof seq8, 0), 8);
    int p = zmq_recv(sock, payload, sizeof payload, 0);
    assert_true(p > 0);
    *plen = (size_t)p;
    uint64_t seq = 0;
    assert_int_equal(ipl_vllm_kv_seq(seq8, 8, &seq), 0);
    return seq;
}

/* PUB joins late (slow joiner): publish until the subscriber sees a batch. Returns the seq of
 * the first batch received. */
static uint64_t s_sync(s_live_t *l, sim_kvbatch_t *b)
{
    for (int i = 0; i < 200; i++) {
        assert_int_equal(sim_kvpub_publish(l->pub, b), 0);
        zmq_pollitem_t it = {.socket = l->sub, .events = ZMQ_POLLIN};
        if (zmq_poll(&it, 1, 20) == 1) {
            size_t len;
            return s_recv_batch(l->sub, &len);
        }
    }
    fail_msg("the subscriber never received a batch");
    return 0;
}

static void test_pub_frames(void **state)
{
    (void)state;
    s_live_t l;
    s_live_open(&l, 3, 0);
    sim_kvbatch_t *b = s_example();
    uint64_t first = s_sync(&l, b);
    sim_kvpub_stats_t st;
    sim_kvpub_stats(l.pub, &st);
    /* Sequence numbers start at 0 and count every batch. */
    assert_true(first < st.next_seq);
    for (uint64_t s = first + 1; s < st.next_seq; s++) {
        size_t len;
        assert_int_equal(s_recv_batch(l.sub, &len), s);
    }
    assert_int_equal(sim_kvpub_publish(l.pub, b), 0);
    size_t len = 0;
    assert_int_equal(s_recv_batch(l.sub, &len), st.next_seq);
    assert_int_equal(len, 266);
    /* An empty batch is not published and uses no sequence number. */
    sim_kvbatch_t *empty = sim_kvbatch_new();
    assert_int_equal(sim_kvpub_publish(l.pub, empty), 0);
    sim_kvpub_stats(l.pub, &st);
    sim_kvbatch_destroy(&empty);
    assert_int_equal(st.dropped, 0);
    sim_kvbatch_destroy(&b);
    s_live_close(&l);
}

/* Asks for replay from `start` with a DEALER; checks the frames of the given layout and
 * returns the sequence numbers received (before the end marker) in seqs. */
static int s_replay(s_live_t *l, int layout, uint64_t start, uint64_t *seqs, int max)
{
    void *d = zmq_socket(l->ctx, ZMQ_DEALER);
    int linger = 0, timeout = 2000;
    zmq_setsockopt(d, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(d, ZMQ_RCVTIMEO, &timeout, sizeof timeout);
    assert_int_equal(zmq_connect(d, l->replay), 0);
    uint8_t seq8[8];
    for (int i = 0; i < 8; i++)
        seq8[i] = (uint8_t)(start >> (56 - 8 * i));
    zmq_send(d, "", 0, ZMQ_SNDMORE);
    zmq_send(d, seq8, 8, 0);
    int n = 0;
    for (;;) {
        uint8_t frames[5][512];
        int lens[5], nf = 0, more = 1;
        while (more && nf < 5) {
            lens[nf] = zmq_recv(d, frames[nf], sizeof frames[nf], 0);
            assert_true(lens[nf] >= 0);
            size_t sz = sizeof more;
            zmq_getsockopt(d, ZMQ_RCVMORE, &more, &sz);
            nf++;
        }
        assert_int_equal(more, 0);
        assert_int_equal(nf, layout + 1); /* the empty delimiter first */
        assert_int_equal(lens[0], 0);
        int seq_at = layout == 3 ? 2 : 1;
        assert_int_equal(lens[seq_at], 8);
        if (ipl_vllm_kv_is_end_seq(frames[seq_at], 8)) {
            assert_int_equal(lens[seq_at + 1], 0);
            if (layout == 3) assert_int_equal(lens[1], 0);
            break;
        }
        if (layout == 3) {
            assert_int_equal(lens[1], 9);
            assert_memory_equal(frames[1], "kv-events", 9);
        }
        assert_true(lens[seq_at + 1] > 0);
        uint64_t s = 0;
        assert_int_equal(ipl_vllm_kv_seq(frames[seq_at], 8, &s), 0);
        assert_true(n < max);
        seqs[n++] = s;
    }
    zmq_close(d);
    return n;
}

static void s_check_replay(int layout)
{
    s_live_t l;
    s_live_open(&l, layout, 0);
    sim_kvbatch_t *b = s_example();
    for (int i = 0; i < 5; i++)
        assert_int_equal(sim_kvpub_publish(l.pub, b), 0);
    uint64_t seqs[16];
    int n = s_replay(&l, layout, 2, seqs, 16);
    assert_int_equal(n, 3);
    for (int i = 0; i < n; i++)
        assert_int_equal(seqs[i], 2 + i);
    assert_int_equal(s_replay(&l, layout, 100, seqs, 16), 0);
    /* A malformed request (a single frame) is counted and dropped; the ROUTER keeps serving. */
    void *d = zmq_socket(l.ctx, ZMQ_DEALER);
    int linger = 0;
    zmq_setsockopt(d, ZMQ_LINGER, &linger, sizeof linger);
    zmq_connect(d, l.replay);
    zmq_send(d, "garbage", 7, 0);
    sim_kvpub_stats_t st = {0};
    for (int i = 0; i < 200 && st.replay_invalid == 0; i++) {
        ipl_sleep_ms(5);
        sim_kvpub_stats(l.pub, &st);
    }
    zmq_close(d);
    assert_int_equal(st.replay_invalid, 1);
    assert_int_equal(s_replay(&l, layout, 0, seqs, 16), 5);
    sim_kvbatch_destroy(&b);
    s_live_close(&l);
}

static void test_replay_layout3(void **state)
{
    (void)state;
    s_check_replay(3);
}

static void test_replay_layout2(void **state)
{
    (void)state;
    s_check_replay(2);
}

static void test_drop_every_n(void **state)
{
    (void)state;
    s_live_t l;
    s_live_open(&l, 3, 3);
    sim_kvbatch_t *b = s_example();
    uint64_t first = s_sync(&l, b);
    sim_kvpub_stats_t st;
    sim_kvpub_stats(l.pub, &st);
    uint64_t base = st.next_seq;
    for (int i = 0; i < 6; i++)
        assert_int_equal(sim_kvpub_publish(l.pub, b), 0);
    /* Received: everything since `first` except seq % 3 == 2. */
    size_t len;
    for (uint64_t s = first + 1; s < base + 6; s++) {
        if (s % 3 == 2) continue;
        assert_int_equal(s_recv_batch(l.sub, &len), s);
    }
    zmq_pollitem_t it = {.socket = l.sub, .events = ZMQ_POLLIN};
    assert_int_equal(zmq_poll(&it, 1, 50), 0);
    sim_kvpub_stats(l.pub, &st);
    assert_true(st.dropped >= 2);
    /* ... but the replay has them all. */
    uint64_t seqs[300];
    int n = s_replay(&l, 3, base, seqs, 300);
    assert_int_equal(n, 6);
    sim_kvbatch_destroy(&b);
    s_live_close(&l);
}

static void test_restart(void **state)
{
    (void)state;
    s_live_t l;
    s_live_open(&l, 3, 0);
    sim_kvbatch_t *b = s_example();
    for (int i = 0; i < 4; i++)
        assert_int_equal(sim_kvpub_publish(l.pub, b), 0);
    uint64_t seqs[16];
    assert_int_equal(s_replay(&l, 3, 0, seqs, 16), 4);
    sim_kvpub_restart(l.pub);
    sim_kvpub_stats_t st;
    sim_kvpub_stats(l.pub, &st);
    assert_int_equal(st.next_seq, 0);
    assert_int_equal(s_replay(&l, 3, 0, seqs, 16), 0); /* a new process remembers nothing */
    assert_int_equal(sim_kvpub_publish(l.pub, b), 0);
    assert_int_equal(s_replay(&l, 3, 0, seqs, 16), 1);
    assert_int_equal(seqs[0], 0);
    sim_kvbatch_destroy(&b);
    s_live_close(&l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden_array_legacy),
        cmocka_unit_test(test_golden_array),
        cmocka_unit_test(test_golden_map),
        cmocka_unit_test(test_golden_bytes_hashes_and_lora),
        cmocka_unit_test(test_decoded_by_collector),
        cmocka_unit_test(test_config),
        cmocka_unit_test(test_bind_rule),
        cmocka_unit_test(test_pub_frames),
        cmocka_unit_test(test_replay_layout3),
        cmocka_unit_test(test_replay_layout2),
        cmocka_unit_test(test_drop_every_n),
        cmocka_unit_test(test_restart),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
