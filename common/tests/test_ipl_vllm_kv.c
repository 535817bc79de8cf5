/*
 * Unit tests of ipl_vllm_kv: the byte examples of one batch (the 89-byte array form and the
 * 266-byte map form, built by hand from the structs of vllm-project/vllm:
 * vllm/distributed/kv_events.py by msgspec's encoding rules,
 * jcristharif.com/msgspec/structs.html), a capture-like v0.26 map event,
 * every hash encoding, map envelopes, truncation at every byte offset, wrong types, huge
 * declared lengths, the limits, all-or-nothing delivery, and the sequence-frame helpers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ipl_error.h"
#include "ipl_vllm_kv.h"

/* ---- a tiny msgpack writer, so each payload reads like the listing -------------------------- */

typedef struct {
    uint8_t *buf;
    size_t len, cap;
} s_out_t;

static void s_raw(s_out_t *o, const void *data, size_t n)
{
    if (o->len + n > o->cap) {
        o->cap = (o->len + n) * 2 + 256;
        o->buf = realloc(o->buf, o->cap);
        assert_non_null(o->buf);
    }
    memcpy(o->buf + o->len, data, n);
    o->len += n;
}

static void s_byte(s_out_t *o, uint8_t b)
{
    s_raw(o, &b, 1);
}

static void s_be(s_out_t *o, uint64_t v, size_t n)
{
    for (size_t k = n; k > 0; k--)
        s_byte(o, (uint8_t)(v >> (8 * (k - 1))));
}

/* fixstr / str8, as msgspec writes them */
static void s_str(s_out_t *o, const char *s)
{
    size_t n = strlen(s);
    if (n < 32) {
        s_byte(o, (uint8_t)(0xa0 | n));
    } else {
        s_byte(o, 0xd9);
        s_byte(o, (uint8_t)n);
    }
    s_raw(o, s, n);
}

static void s_u64(s_out_t *o, uint64_t v) /* 0xcf, always */
{
    s_byte(o, 0xcf);
    s_be(o, v, 8);
}

static void s_tokens_1_16(s_out_t *o) /* dc 00 10 01 02 ... 10 */
{
    s_byte(o, 0xdc);
    s_be(o, 16, 2);
    for (uint8_t t = 1; t <= 16; t++)
        s_byte(o, t);
}

static void s_ts_header(s_out_t *o, uint8_t nevents) /* 93 cb <1700000000.5> 9n */
{
    static const uint8_t head[] = {0x93, 0xcb, 0x41, 0xd9, 0x54, 0xfc, 0x40, 0x20, 0x00, 0x00};
    s_raw(o, head, sizeof head);
    s_byte(o, (uint8_t)(0x90 | nevents));
}

/* ---- recording the callbacks -------------------------------------------------------------- */

enum { MAXEV = 8 };
typedef struct {
    int calls;
    int stop_after; /* 0: never */
    ipl_vllm_kv_event_t ev[MAXEV];
    uint64_t hashes[MAXEV][4];
    uint32_t tokens[MAXEV][32];
    char medium[MAXEV][8], lora[MAXEV][16], kind[MAXEV][24];
} s_rec_t;

static void s_copy_str(char *dst, size_t size, const char *s, uint32_t len)
{
    if (!s) {
        strcpy(dst, "<nil>");
        return;
    }
    assert_true(len < size);
    memcpy(dst, s, len);
    dst[len] = '\0';
}

static int s_record(void *arg, const ipl_vllm_kv_event_t *ev)
{
    s_rec_t *rec = arg;
    assert_non_null(ev->block_hashes);
    assert_non_null(ev->token_ids);
    if (rec->calls < MAXEV) {
        int i = rec->calls;
        rec->ev[i] = *ev;
        for (uint32_t k = 0; k < ev->nblocks && k < 4; k++)
            rec->hashes[i][k] = ev->block_hashes[k];
        for (uint32_t k = 0; k < ev->ntokens && k < 32; k++)
            rec->tokens[i][k] = ev->token_ids[k];
        s_copy_str(rec->medium[i], sizeof rec->medium[i], ev->medium, ev->medium_len);
        s_copy_str(rec->lora[i], sizeof rec->lora[i], ev->lora_name, ev->lora_name_len);
        s_copy_str(rec->kind[i], sizeof rec->kind[i], ev->spec_kind, ev->spec_kind_len);
    }
    rec->calls++;
    return rec->stop_after && rec->calls == rec->stop_after ? -42 : 0;
}

static int s_setup(void **state)
{
    *state = ipl_vllm_kv_decoder_new();
    return *state ? 0 : -1;
}

static int s_teardown(void **state)
{
    ipl_vllm_kv_decoder_t *dec = *state;
    ipl_vllm_kv_decoder_destroy(&dec);
    assert_null(dec);
    return 0;
}

static int s_decode(void **state, const uint8_t *p, size_t len, ipl_vllm_kv_batch_t *b,
                    s_rec_t *rec)
{
    memset(rec, 0, sizeof *rec);
    return ipl_vllm_kv_decode(*state, p, len, b, s_record, rec);
}

/* The example's BlockStored: hash 0x0123456789abcdef, root parent, tokens 1..16, GPU. */
static void s_check_example_stored(const s_rec_t *rec, int i)
{
    const ipl_vllm_kv_event_t *ev = &rec->ev[i];
    assert_int_equal(ev->kind, IPL_VLLM_KV_BLOCK_STORED);
    assert_int_equal(ev->nblocks, 1);
    assert_true(rec->hashes[i][0] == UINT64_C(0x0123456789abcdef));
    assert_false(ev->has_parent);
    assert_int_equal(ev->ntokens, 16);
    for (uint32_t k = 0; k < 16; k++)
        assert_int_equal(rec->tokens[i][k], k + 1);
    assert_int_equal(ev->block_size, 16);
    assert_false(ev->has_lora_id);
    assert_string_equal(rec->medium[i], "GPU");
}

static void s_check_example_removed(const s_rec_t *rec, int i)
{
    const ipl_vllm_kv_event_t *ev = &rec->ev[i];
    assert_int_equal(ev->kind, IPL_VLLM_KV_BLOCK_REMOVED);
    assert_int_equal(ev->nblocks, 1);
    assert_true(rec->hashes[i][0] == UINT64_C(0x0123456789abcdef));
    assert_int_equal(ev->ntokens, 0);
    assert_int_equal(ev->block_size, 0);
    assert_string_equal(rec->medium[i], "GPU");
}

/* The example in the v0.10-era array form (medium, no lora_name), byte for byte. */
static const uint8_t s_example_array[] = {
    0x93,                                                 /* EventBatch */
    0xcb, 0x41, 0xd9, 0x54, 0xfc, 0x40, 0x20, 0x00, 0x00, /* ts */
    0x92,                                                 /* events */
    0x97,                                                 /* BlockStored */
    0xab, 'B',  'l',  'o',  'c',  'k',  'S',  't',  'o',  'r',  'e',  'd',  0x91, 0xcf, 0x01,
    0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, /* block_hashes */
    0xc0,                                     /* parent_block_hash */
    0xdc, 0x00, 0x10, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c,
    0x0d, 0x0e, 0x0f, 0x10, /* token_ids */
    0x10,                   /* block_size */
    0xc0,                   /* lora_id */
    0xa3, 'G',  'P',  'U',  /* medium */
    0x93,                   /* BlockRemoved */
    0xac, 'B',  'l',  'o',  'c',  'k',  'R',  'e',  'm',  'o',  'v',  'e',  'd',  0x91, 0xcf,
    0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0xa3, 'G',  'P',  'U',  0x00, /* data_parallel_rank
                                                                                   */
};

/* The example in the v0.26+ map form, field by field in declaration order. */
static s_out_t s_example_map(void)
{
    s_out_t o = {0};
    s_ts_header(&o, 2);
    s_byte(&o, 0x8b); /* map(11) */
    s_str(&o, "type"), s_str(&o, "BlockStored");
    s_str(&o, "block_hashes"), s_byte(&o, 0x91), s_u64(&o, UINT64_C(0x0123456789abcdef));
    s_str(&o, "parent_block_hash"), s_byte(&o, 0xc0);
    s_str(&o, "token_ids"), s_tokens_1_16(&o);
    s_str(&o, "block_size"), s_byte(&o, 0x10);
    s_str(&o, "lora_id"), s_byte(&o, 0xc0);
    s_str(&o, "medium"), s_str(&o, "GPU");
    s_str(&o, "lora_name"), s_byte(&o, 0xc0);
    s_str(&o, "extra_keys"), s_byte(&o, 0x91), s_byte(&o, 0xc0);
    s_str(&o, "group_idx"), s_byte(&o, 0x00);
    s_str(&o, "kv_cache_spec_kind"), s_str(&o, "full_attention");
    s_byte(&o, 0x84); /* map(4) */
    s_str(&o, "type"), s_str(&o, "BlockRemoved");
    s_str(&o, "block_hashes"), s_byte(&o, 0x91), s_u64(&o, UINT64_C(0x0123456789abcdef));
    s_str(&o, "medium"), s_str(&o, "GPU");
    s_str(&o, "group_idx"), s_byte(&o, 0x00);
    s_byte(&o, 0x00); /* data_parallel_rank */
    return o;
}

static void test_example_array_form(void **state)
{
    assert_int_equal(sizeof s_example_array, 89);
    ipl_vllm_kv_batch_t b;
    s_rec_t rec;
    assert_int_equal(s_decode(state, s_example_array, sizeof s_example_array, &b, &rec), 0);
    assert_true(b.ts == 1700000000.5);
    assert_int_equal(b.dp_rank, 0);
    assert_int_equal(b.nevents, 2);
    assert_int_equal(rec.calls, 2);
    s_check_example_stored(&rec, 0);
    s_check_example_removed(&rec, 1);
    /* legacy array form: none of the later fields */
    assert_string_equal(rec.lora[0], "<nil>");
    assert_false(rec.ev[0].has_extra_keys);
    assert_int_equal(rec.ev[0].group_idx, -1);
    assert_string_equal(rec.kind[0], "<nil>");
    assert_int_equal(rec.ev[0].sliding_window, -1);
    assert_int_equal(rec.ev[1].group_idx, -1);
}

static void test_example_map_form(void **state)
{
    s_out_t o = s_example_map();
    assert_int_equal(o.len, 266);
    ipl_vllm_kv_batch_t b;
    s_rec_t rec;
    assert_int_equal(s_decode(state, o.buf, o.len, &b, &rec), 0);
    assert_true(b.ts == 1700000000.5);
    assert_int_equal(b.dp_rank, 0);
    assert_int_equal(b.nevents, 2);
    assert_int_equal(rec.calls, 2);
    s_check_example_stored(&rec, 0);
    s_check_example_removed(&rec, 1);
    /* the live capture's fields: lora_name nil, extra_keys [nil], group_idx 0 */
    assert_string_equal(rec.lora[0], "<nil>");
    assert_false(rec.ev[0].has_extra_keys);
    assert_int_equal(rec.ev[0].group_idx, 0);
    assert_string_equal(rec.kind[0], "full_attention");
    assert_int_equal(rec.ev[0].sliding_window, -1);
    assert_int_equal(rec.ev[1].group_idx, 0);
    free(o.buf);
}

/* A v0.26-style capture with non-default values, keys in another order and unknown keys. */
static void test_capture_like_map_event(void **state)
{
    s_out_t o = {0};
    s_ts_header(&o, 1);
    s_byte(&o, 0x8f); /* map(15) */
    s_str(&o, "block_hashes"), s_byte(&o, 0x92), s_u64(&o, UINT64_C(15760518052499183552)),
        s_byte(&o, 0x05);
    s_str(&o, "future_field"), s_byte(&o, 0x82), s_str(&o, "a"), s_byte(&o, 0x91), s_byte(&o, 0x01),
        s_str(&o, "b"), s_byte(&o, 0xd4), s_byte(&o, 0x01), s_byte(&o, 0x00);
    s_str(&o, "type"), s_str(&o, "BlockStored");
    s_str(&o, "parent_block_hash"), s_byte(&o, 0xd3), s_be(&o, (uint64_t)-7, 8); /* negative */
    s_str(&o, "token_ids"), s_byte(&o, 0x94), s_byte(&o, 0xce), s_be(&o, 151644, 4),
        s_byte(&o, 0xcd), s_be(&o, 872, 2), s_byte(&o, 0xcc), s_byte(&o, 198), s_byte(&o, 0x07);
    s_str(&o, "block_size"), s_byte(&o, 0x02);
    s_str(&o, "lora_id"), s_byte(&o, 0x03);
    s_str(&o, "medium"), s_str(&o, "CPU");
    s_str(&o, "lora_name"), s_str(&o, "sql-lora");
    s_str(&o, "extra_keys"), s_byte(&o, 0x92), s_byte(&o, 0xc0), s_byte(&o, 0x92), s_str(&o, "img"),
        s_byte(&o, 0x00);
    s_str(&o, "group_idx"), s_byte(&o, 0x01);
    s_str(&o, "kv_cache_spec_kind"), s_str(&o, "sliding_window");
    s_str(&o, "kv_cache_spec_sliding_window"), s_byte(&o, 0xcd), s_be(&o, 4096, 2);
    s_byte(&o, 0x07), s_str(&o, "int key ignored"); /* a non-string key */
    s_str(&o, "event_version"), s_byte(&o, 0x02);
    s_byte(&o, 0xc0); /* dp rank nil */
    ipl_vllm_kv_batch_t b;
    s_rec_t rec;
    assert_int_equal(s_decode(state, o.buf, o.len, &b, &rec), 0);
    assert_int_equal(b.dp_rank, -1);
    assert_int_equal(rec.calls, 1);
    const ipl_vllm_kv_event_t *ev = &rec.ev[0];
    assert_int_equal(ev->kind, IPL_VLLM_KV_BLOCK_STORED);
    assert_int_equal(ev->nblocks, 2);
    assert_true(rec.hashes[0][0] == UINT64_C(15760518052499183552));
    assert_true(rec.hashes[0][1] == 5);
    assert_true(ev->has_parent);
    assert_true(ev->parent_hash == (uint64_t)-7);
    assert_int_equal(ev->ntokens, 4);
    assert_int_equal(rec.tokens[0][0], 151644);
    assert_int_equal(rec.tokens[0][1], 872);
    assert_int_equal(rec.tokens[0][2], 198);
    assert_int_equal(rec.tokens[0][3], 7);
    assert_int_equal(ev->block_size, 2);
    assert_true(ev->has_lora_id);
    assert_int_equal(ev->lora_id, 3);
    assert_string_equal(rec.medium[0], "CPU");
    assert_string_equal(rec.lora[0], "sql-lora");
    assert_true(ev->has_extra_keys);
    assert_int_equal(ev->group_idx, 1);
    assert_string_equal(rec.kind[0], "sliding_window");
    assert_int_equal(ev->sliding_window, 4096);
    free(o.buf);
}

/* One two-block BlockStored of a LoRA request with the given extra_keys bytes. */
static s_out_t s_lora_event(const uint8_t *extra, size_t extra_len)
{
    s_out_t o = {0};
    s_ts_header(&o, 1);
    s_byte(&o, 0x86); /* map(6) */
    s_str(&o, "type"), s_str(&o, "BlockStored");
    s_str(&o, "block_hashes"), s_byte(&o, 0x92), s_byte(&o, 0x01), s_byte(&o, 0x02);
    s_str(&o, "parent_block_hash"), s_byte(&o, 0xc0);
    s_str(&o, "token_ids"), s_byte(&o, 0x92), s_byte(&o, 0x05), s_byte(&o, 0x06);
    s_str(&o, "block_size"), s_byte(&o, 0x01);
    s_str(&o, "extra_keys");
    for (size_t i = 0; i < extra_len; i++)
        s_byte(&o, extra[i]);
    s_byte(&o, 0xc0); /* dp rank nil */
    return o;
}

/* extra_key_str: the adapter's name when every block's extra keys are just (lora_name,),
 * NULL when any holds more (a cache salt) or differs. */
static void test_extra_keys_of_a_lora_request(void **state)
{
    static const uint8_t same[] = {0x92, 0x91, 0xa2, 'a', 'd', 0x91, 0xa2, 'a', 'd'};
    static const uint8_t salted[] = {0x92, 0x92, 0xa2, 'a', 'd', 0xa1, 's', 0x91, 0xa2, 'a', 'd'};
    static const uint8_t differ[] = {0x92, 0x91, 0xa2, 'a', 'd', 0x91, 0xa2, 'x', 'y'};
    static const uint8_t nil_and_one[] = {0x92, 0xc0, 0x91, 0xa2, 'a', 'd'};
    static const uint8_t not_str[] = {0x92, 0x91, 0x07, 0x91, 0x07};
    const struct {
        const uint8_t *bytes;
        size_t len;
        const char *want; /* NULL: no single string */
    } cases[] = {{same, sizeof same, "ad"},
                 {salted, sizeof salted, NULL},
                 {differ, sizeof differ, NULL},
                 {nil_and_one, sizeof nil_and_one, "ad"},
                 {not_str, sizeof not_str, NULL}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        s_out_t o = s_lora_event(cases[i].bytes, cases[i].len);
        ipl_vllm_kv_batch_t b;
        s_rec_t rec;
        assert_int_equal(s_decode(state, o.buf, o.len, &b, &rec), 0);
        assert_int_equal(rec.calls, 1);
        const ipl_vllm_kv_event_t *ev = &rec.ev[0];
        assert_true(ev->has_extra_keys);
        if (cases[i].want) {
            assert_non_null(ev->extra_key_str);
            assert_int_equal(ev->extra_key_str_len, strlen(cases[i].want));
            assert_memory_equal(ev->extra_key_str, cases[i].want, ev->extra_key_str_len);
        } else {
            assert_null(ev->extra_key_str);
        }
        free(o.buf);
    }
}

/* Pre-0.26 array form with every trailing field, then two unknown extra positions. */
static void test_array_form_all_fields(void **state)
{
    s_out_t o = {0};
    s_ts_header(&o, 2);
    s_byte(&o, 0x9e); /* array(14) */
    s_str(&o, "BlockStored");
    s_byte(&o, 0x91), s_byte(&o, 0x2a); /* block_hashes [42] */
    s_byte(&o, 0x29);                   /* parent 41 */
    s_byte(&o, 0x92), s_byte(&o, 0x01), s_byte(&o, 0x02);
    s_byte(&o, 0x02);                   /* block_size */
    s_byte(&o, 0xff);                   /* lora_id -1 */
    s_byte(&o, 0xc0);                   /* medium nil */
    s_str(&o, "my-lora");               /* lora_name */
    s_byte(&o, 0xc0);                   /* extra_keys nil */
    s_byte(&o, 0x02);                   /* group_idx */
    s_str(&o, "mamba");                 /* kv_cache_spec_kind */
    s_byte(&o, 0xc0);                   /* sliding window nil */
    s_byte(&o, 0xc3), s_byte(&o, 0x80); /* unknown positions 12, 13 */
    s_byte(&o, 0x95);                   /* BlockRemoved with group_idx and an extra */
    s_str(&o, "BlockRemoved");
    s_byte(&o, 0x90); /* no hashes */
    s_byte(&o, 0xc0); /* medium nil */
    s_byte(&o, 0x03); /* group_idx */
    s_str(&o, "x");
    s_byte(&o, 0x00);
    ipl_vllm_kv_batch_t b;
    s_rec_t rec;
    assert_int_equal(s_decode(state, o.buf, o.len, &b, &rec), 0);
    assert_int_equal(rec.calls, 2);
    assert_true(rec.hashes[0][0] == 42);
    assert_true(rec.ev[0].has_parent && rec.ev[0].parent_hash == 41);
    assert_true(rec.ev[0].has_lora_id && rec.ev[0].lora_id == -1);
    assert_string_equal(rec.medium[0], "<nil>");
    assert_string_equal(rec.lora[0], "my-lora");
    assert_false(rec.ev[0].has_extra_keys);
    assert_int_equal(rec.ev[0].group_idx, 2);
    assert_string_equal(rec.kind[0], "mamba");
    assert_int_equal(rec.ev[1].kind, IPL_VLLM_KV_BLOCK_REMOVED);
    assert_int_equal(rec.ev[1].nblocks, 0);
    assert_int_equal(rec.ev[1].group_idx, 3);
    free(o.buf);
}

static void test_all_blocks_cleared_and_mixed(void **state)
{
    s_out_t o = {0};
    s_ts_header(&o, 4);
    s_byte(&o, 0x91), s_str(&o, "AllBlocksCleared");                    /* array form */
    s_byte(&o, 0x81), s_str(&o, "type"), s_str(&o, "AllBlocksCleared"); /* map form */
    s_byte(&o, 0x92), s_str(&o, "AllBlocksCleared"), s_byte(&o, 0x07);  /* extra position */
    s_raw(&o, s_example_array + 11, 49);                                /* array BlockStored */
    s_byte(&o, 0x01);
    ipl_vllm_kv_batch_t b;
    s_rec_t rec;
    assert_int_equal(s_decode(state, o.buf, o.len, &b, &rec), 0);
    assert_int_equal(b.dp_rank, 1);
    assert_int_equal(rec.calls, 4);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(rec.ev[i].kind, IPL_VLLM_KV_ALL_CLEARED);
        assert_int_equal(rec.ev[i].nblocks, 0);
        assert_int_equal(rec.ev[i].group_idx, -1);
    }
    s_check_example_stored(&rec, 3);
    free(o.buf);
}

static void test_map_envelope(void **state)
{
    s_out_t o = {0};
    s_byte(&o, 0x84);
    s_str(&o, "unknown"), s_byte(&o, 0x90);
    s_str(&o, "events"), s_byte(&o, 0x91), s_byte(&o, 0x91), s_str(&o, "AllBlocksCleared");
    s_str(&o, "data_parallel_rank"), s_byte(&o, 0x03);
    s_str(&o, "ts"), s_byte(&o, 0xcb), s_be(&o, UINT64_C(0x3ff8000000000000), 8); /* 1.5 */
    ipl_vllm_kv_batch_t b;
    s_rec_t rec;
    assert_int_equal(s_decode(state, o.buf, o.len, &b, &rec), 0);
    assert_true(b.ts == 1.5);
    assert_int_equal(b.dp_rank, 3);
    assert_int_equal(b.nevents, 1);
    assert_int_equal(rec.calls, 1);
    /* without data_parallel_rank; ts as an int; the two-element array envelope too */
    static const uint8_t no_rank[] = {0x82, 0xa2, 't', 's', 0x05, 0xa6, 'e',
                                      'v',  'e',  'n', 't', 's',  0x90};
    assert_int_equal(s_decode(state, no_rank, sizeof no_rank, &b, &rec), 0);
    assert_true(b.ts == 5.0);
    assert_int_equal(b.dp_rank, -1);
    assert_int_equal(b.nevents, 0);
    static const uint8_t two[] = {0x92, 0xca, 0x3f, 0x80, 0x00, 0x00, 0x90};
    assert_int_equal(s_decode(state, two, sizeof two, &b, &rec), 0);
    assert_true(b.ts == 1.0);
    assert_int_equal(b.dp_rank, -1);
    free(o.buf);
}

static void test_hash_encodings(void **state)
{
    s_out_t o = {0};
    s_ts_header(&o, 1);
    s_byte(&o, 0x94);
    s_str(&o, "BlockRemoved");
    s_byte(&o, 0x96);
    s_byte(&o, 0xff);                                            /* -1 */
    s_byte(&o, 0xd3), s_be(&o, UINT64_C(0x8000000000000000), 8); /* INT64_MIN */
    s_byte(&o, 0xd0), s_byte(&o, 0x80);                          /* -128 */
    s_byte(&o, 0xc6), s_be(&o, 32, 4);                           /* bin32 sha256 digest */
    for (int k = 0; k < 32; k++)
        s_byte(&o, (uint8_t)(0xa0 + k));
    s_byte(&o, 0xc4), s_byte(&o, 16); /* bin8 xxhash128 digest */
    for (int k = 0; k < 16; k++)
        s_byte(&o, (uint8_t)k);
    s_byte(&o, 0xcc), s_byte(&o, 0xff); /* u8 */
    s_str(&o, "GPU");
    s_byte(&o, 0xc0);
    s_byte(&o, 0x00);
    s_rec_t rec;
    assert_int_equal(s_decode(state, o.buf, o.len, NULL, &rec), 0);
    assert_int_equal(rec.calls, 1);
    assert_int_equal(rec.ev[0].nblocks, 6);
    assert_true(rec.hashes[0][0] == UINT64_MAX);
    assert_true(rec.hashes[0][1] == UINT64_C(0x8000000000000000));
    assert_true(rec.hashes[0][2] == (uint64_t)-128);
    assert_true(rec.hashes[0][3] == UINT64_C(0xb8b9babbbcbdbebf));
    free(o.buf);
}

/* Every strict prefix of a valid payload fails, delivers nothing and leaves batch alone. */
static void s_truncate_everywhere(void **state, const uint8_t *p, size_t len)
{
    for (size_t cut = 0; cut < len; cut++) {
        uint8_t *copy = malloc(cut ? cut : 1); /* exact size: ASan sees any over-read */
        memcpy(copy, p, cut);
        ipl_vllm_kv_batch_t b = {.ts = -9, .dp_rank = -9, .nevents = 99};
        s_rec_t rec;
        int rc = s_decode(state, copy, cut, &b, &rec);
        assert_true(rc < 0);
        assert_int_equal(rec.calls, 0);
        assert_int_equal(b.nevents, 99);
        free(copy);
    }
}

static void test_truncated_everywhere(void **state)
{
    s_truncate_everywhere(state, s_example_array, sizeof s_example_array);
    s_out_t o = s_example_map();
    s_truncate_everywhere(state, o.buf, o.len);
    /* a cut inside the events is reported as such, not as a type error */
    s_rec_t rec;
    assert_int_equal(s_decode(state, o.buf, 100, NULL, &rec), IPL_E_TRUNCATED);
    assert_int_equal(s_decode(state, s_example_array, 88, NULL, &rec), IPL_E_TRUNCATED);
    free(o.buf);
}

typedef struct {
    const char *what;
    uint8_t bytes[48];
    size_t len;
    int rc;
} s_bad_t;

#define BAD(what, rc, ...)                                                                         \
    {                                                                                              \
        what, {__VA_ARGS__}, sizeof((uint8_t[]){__VA_ARGS__}), rc                                  \
    }
/* 93 cb <ts> prefix, then the events array */
#define TS      0xcb, 0x41, 0xd9, 0x54, 0xfc, 0x40, 0x20, 0x00, 0x00
#define STORED  0xab, 'B', 'l', 'o', 'c', 'k', 'S', 't', 'o', 'r', 'e', 'd'
#define REMOVED 0xac, 'B', 'l', 'o', 'c', 'k', 'R', 'e', 'm', 'o', 'v', 'e', 'd'

static const s_bad_t s_bad[] = {
    BAD("envelope is an int", IPL_E_TYPE, 0x05),
    BAD("envelope is a string", IPL_E_TYPE, 0xa1, 'x'),
    BAD("envelope reserved byte", IPL_E_TYPE, 0xc1),
    BAD("envelope array too short", IPL_E_INVAL, 0x91, TS),
    BAD("ts is a string", IPL_E_TYPE, 0x93, 0xa1, 'x', 0x90, 0x00),
    BAD("ts is nil", IPL_E_TYPE, 0x93, 0xc0, 0x90, 0x00),
    BAD("events is a map", IPL_E_TYPE, 0x93, TS, 0x80, 0x00),
    BAD("dp rank is a string", IPL_E_TYPE, 0x93, TS, 0x90, 0xa1, '0'),
    BAD("dp rank negative", IPL_E_RANGE, 0x93, TS, 0x90, 0xff),
    BAD("trailing bytes", IPL_E_TRAILING, 0x93, TS, 0x90, 0x00, 0x00),
    BAD("event is an int", IPL_E_TYPE, 0x93, TS, 0x91, 0x01, 0x00),
    BAD("event is nil", IPL_E_TYPE, 0x93, TS, 0x91, 0xc0, 0x00),
    BAD("event array empty", IPL_E_INVAL, 0x93, TS, 0x91, 0x90, 0x00),
    BAD("event tag is an int", IPL_E_TYPE, 0x93, TS, 0x91, 0x91, 0x01, 0x00),
    BAD("unknown tag", IPL_E_UNKNOWN, 0x93, TS, 0x91, 0x91, 0xa3, 'F', 'o', 'o', 0x00),
    BAD("unknown map type", IPL_E_UNKNOWN, 0x93, TS, 0x91, 0x81, 0xa4, 't', 'y', 'p', 'e', 0xa1,
        'X', 0x00),
    BAD("map type not a string", IPL_E_TYPE, 0x93, TS, 0x91, 0x81, 0xa4, 't', 'y', 'p', 'e', 0x01,
        0x00),
    BAD("map event without type", IPL_E_INVAL, 0x93, TS, 0x91, 0x80, 0x00),
    BAD("stored array too short", IPL_E_INVAL, 0x93, TS, 0x91, 0x94, STORED, 0x90, 0xc0, 0x90,
        0x00),
    BAD("removed without hashes", IPL_E_INVAL, 0x93, TS, 0x91, 0x91, REMOVED, 0x00),
    BAD("map removed without hashes", IPL_E_INVAL, 0x93, TS, 0x91, 0x81, 0xa4, 't', 'y', 'p', 'e',
        REMOVED, 0x00),
    BAD("hashes not an array", IPL_E_TYPE, 0x93, TS, 0x91, 0x92, REMOVED, 0x01, 0x00),
    BAD("hash is a string", IPL_E_TYPE, 0x93, TS, 0x91, 0x92, REMOVED, 0x91, 0xa1, 'h', 0x00),
    BAD("hash is a float", IPL_E_TYPE, 0x93, TS, 0x91, 0x92, REMOVED, 0x91, 0xca, 0, 0, 0, 0, 0x00),
    BAD("parent is a string", IPL_E_TYPE, 0x93, TS, 0x91, 0x95, STORED, 0x90, 0xa0, 0x90, 0x01,
        0x00),
    BAD("token negative", IPL_E_RANGE, 0x93, TS, 0x91, 0x95, STORED, 0x90, 0xc0, 0x91, 0xff, 0x01,
        0x00),
    BAD("token above u32", IPL_E_RANGE, 0x93, TS, 0x91, 0x95, STORED, 0x90, 0xc0, 0x91, 0xcf, 0, 0,
        0, 1, 0, 0, 0, 0, 0x01, 0x00),
    BAD("token is nil", IPL_E_TYPE, 0x93, TS, 0x91, 0x95, STORED, 0x90, 0xc0, 0x91, 0xc0, 0x01,
        0x00),
    BAD("block_size 0", IPL_E_RANGE, 0x93, TS, 0x91, 0x95, STORED, 0x90, 0xc0, 0x90, 0x00, 0x00),
    BAD("block_size nil", IPL_E_TYPE, 0x93, TS, 0x91, 0x95, STORED, 0x90, 0xc0, 0x90, 0xc0, 0x00),
    BAD("lora_id is a string", IPL_E_TYPE, 0x93, TS, 0x91, 0x96, STORED, 0x90, 0xc0, 0x90, 0x01,
        0xa0, 0x00),
    BAD("medium is an int", IPL_E_TYPE, 0x93, TS, 0x91, 0x93, REMOVED, 0x90, 0x01, 0x00),
    BAD("group_idx negative", IPL_E_RANGE, 0x93, TS, 0x91, 0x94, REMOVED, 0x90, 0xc0, 0xfe, 0x00),
    BAD("group_idx is a string", IPL_E_TYPE, 0x93, TS, 0x91, 0x94, REMOVED, 0x90, 0xc0, 0xa0, 0x00),
    BAD("extra_keys element cut", IPL_E_TRUNCATED, 0x93, TS, 0x91, 0x99, STORED, 0x90, 0xc0, 0x90,
        0x01, 0xc0, 0xc0, 0xc0, 0x91),
    BAD("map envelope without events", IPL_E_INVAL, 0x81, 0xa2, 't', 's', 0x01),
    BAD("map envelope without ts", IPL_E_INVAL, 0x81, 0xa6, 'e', 'v', 'e', 'n', 't', 's', 0x90),
    BAD("map envelope events wrong", IPL_E_TYPE, 0x82, 0xa2, 't', 's', 0x01, 0xa6, 'e', 'v', 'e',
        'n', 't', 's', 0xc0),
};

static void test_wrong_types(void **state)
{
    for (size_t k = 0; k < sizeof s_bad / sizeof s_bad[0]; k++) {
        s_rec_t rec;
        ipl_vllm_kv_batch_t b = {.nevents = 77};
        int rc = s_decode(state, s_bad[k].bytes, s_bad[k].len, &b, &rec);
        if (rc != s_bad[k].rc) fail_msg("%s: got %d, want %d", s_bad[k].what, rc, s_bad[k].rc);
        assert_int_equal(rec.calls, 0);
        assert_int_equal(b.nevents, 77);
    }
}

/* A valid event followed by a malformed one delivers nothing. */
static void test_all_or_nothing(void **state)
{
    s_out_t o = {0};
    s_ts_header(&o, 3);
    s_raw(&o, s_example_array + 11, 49); /* good BlockStored */
    s_raw(&o, s_example_array + 60, 28); /* good BlockRemoved */
    s_byte(&o, 0x92), s_str(&o, "BlockRemoved"), s_byte(&o, 0x91), s_str(&o, "bad");
    s_byte(&o, 0x00);
    s_rec_t rec;
    assert_int_equal(s_decode(state, o.buf, o.len, NULL, &rec), IPL_E_TYPE);
    assert_int_equal(rec.calls, 0);
    /* a callback can stop the delivery; its value is returned */
    o.len -= 1 + 1 + 13 + 1 + 4;
    o.buf[10] = 0x92;
    s_byte(&o, 0x00);
    memset(&rec, 0, sizeof rec);
    rec.stop_after = 1;
    assert_int_equal(ipl_vllm_kv_decode(*state, o.buf, o.len, NULL, s_record, &rec), -42);
    assert_int_equal(rec.calls, 1);
    /* validation only */
    ipl_vllm_kv_batch_t b;
    assert_int_equal(ipl_vllm_kv_decode(*state, o.buf, o.len, &b, NULL, NULL), 0);
    assert_int_equal(b.nevents, 2);
    free(o.buf);
}

static void test_huge_declared_lengths(void **state)
{
    s_rec_t rec;
    static const uint8_t env32[] = {0xdd, 0xff, 0xff, 0xff, 0xff, TS, 0x90};
    assert_int_equal(s_decode(state, env32, sizeof env32, NULL, &rec), IPL_E_TRUNCATED);
    static const uint8_t map32[] = {0xdf, 0x7f, 0xff, 0xff, 0xff, 0xa2, 't', 's', 0x01};
    assert_int_equal(s_decode(state, map32, sizeof map32, NULL, &rec), IPL_E_TRUNCATED);
    static const uint8_t ev32[] = {0x93, TS, 0xdd, 0xff, 0xff, 0xff, 0xf0, 0x90, 0x00};
    assert_int_equal(s_decode(state, ev32, sizeof ev32, NULL, &rec), IPL_E_TRUNCATED);
    static const uint8_t hashes32[] = {0x93, TS,   0x91, 0x92, REMOVED, 0xdd,
                                       0x10, 0x00, 0x00, 0x00, 0x01,    0x00};
    assert_int_equal(s_decode(state, hashes32, sizeof hashes32, NULL, &rec), IPL_E_TRUNCATED);
    static const uint8_t tokens32[] = {0x93, TS,   0x91, 0x95, STORED, 0x90, 0xc0,
                                       0xdd, 0xff, 0xff, 0xff, 0xff,   0x01, 0x00};
    assert_int_equal(s_decode(state, tokens32, sizeof tokens32, NULL, &rec), IPL_E_TRUNCATED);
    static const uint8_t str32[] = {0x93, TS, 0x91, 0x92, 0xdb, 0xff, 0xff, 0xff, 0xff, 'B', 0x00};
    assert_int_equal(s_decode(state, str32, sizeof str32, NULL, &rec), IPL_E_TRUNCATED);
    assert_int_equal(rec.calls, 0);
}

/* Limits with real data behind them: one more than allowed is IPL_E_RANGE. */
static void s_many(s_out_t *o, uint32_t n, uint8_t item)
{
    s_byte(o, 0xdd);
    s_be(o, n, 4);
    for (uint32_t k = 0; k < n; k++)
        s_byte(o, item);
}

static void test_limits(void **state)
{
    s_rec_t rec;
    ipl_vllm_kv_batch_t b;
    for (uint32_t extra = 0; extra <= 1; extra++) {
        int want = extra ? IPL_E_RANGE : 0;
        s_out_t o = {0};
        s_ts_header(&o, 1);
        s_byte(&o, 0x92), s_str(&o, "BlockRemoved");
        s_many(&o, IPL_VLLM_KV_MAX_BLOCKS + extra, 0x07);
        s_byte(&o, 0x00);
        assert_int_equal(s_decode(state, o.buf, o.len, &b, &rec), want);
        if (!extra) assert_int_equal(rec.ev[0].nblocks, IPL_VLLM_KV_MAX_BLOCKS);
        free(o.buf);

        o = (s_out_t){0};
        s_ts_header(&o, 1);
        s_byte(&o, 0x95), s_str(&o, "BlockStored"), s_byte(&o, 0x90), s_byte(&o, 0xc0);
        s_many(&o, IPL_VLLM_KV_MAX_TOKENS + extra, 0x07);
        s_byte(&o, 0x10);
        s_byte(&o, 0x00);
        assert_int_equal(s_decode(state, o.buf, o.len, &b, &rec), want);
        if (!extra) assert_int_equal(rec.ev[0].ntokens, IPL_VLLM_KV_MAX_TOKENS);
        free(o.buf);

        /* events: the smallest event is 18 bytes; 1M of them is 18 MB, so the count check
         * must come first; a declared count just over the limit with enough bytes behind */
        o = (s_out_t){0};
        s_byte(&o, 0x93), s_byte(&o, 0x00);
        s_byte(&o, 0xdd);
        s_be(&o, IPL_VLLM_KV_MAX_EVENTS + extra, 4);
        for (uint32_t k = 0; k < IPL_VLLM_KV_MAX_EVENTS + extra; k++)
            s_byte(&o, 0x00); /* not an event: fails when the count is accepted */
        s_byte(&o, 0x00);
        assert_int_equal(s_decode(state, o.buf, o.len, &b, &rec), extra ? IPL_E_RANGE : IPL_E_TYPE);
        free(o.buf);
    }
    static const uint8_t big_bs[] = {0x93, TS,   0x91, 0x95, STORED, 0x90, 0xc0,
                                     0x90, 0xce, 0x00, 0x10, 0x00,   0x01, 0x00};
    assert_int_equal(s_decode(state, big_bs, sizeof big_bs, NULL, &rec), IPL_E_RANGE);
}

/* The scratch arrays are reused: a big batch then a small one, pointers still right. */
static void test_reuse(void **state)
{
    s_rec_t rec;
    for (int round = 0; round < 3; round++) {
        s_out_t o = {0};
        s_ts_header(&o, 15);
        for (int k = 0; k < 15; k++)
            s_raw(&o, s_example_array + 11, 49);
        s_byte(&o, 0x00);
        assert_int_equal(s_decode(state, o.buf, o.len, NULL, &rec), 0);
        assert_int_equal(rec.calls, 15);
        for (int k = 0; k < MAXEV; k++)
            s_check_example_stored(&rec, k);
        free(o.buf);
        assert_int_equal(s_decode(state, s_example_array, sizeof s_example_array, NULL, &rec), 0);
        assert_int_equal(rec.calls, 2);
        s_check_example_removed(&rec, 1);
    }
}

static void test_seq_frames(void **state)
{
    (void)state;
    uint64_t seq = 99;
    static const uint8_t zero[8] = {0};
    static const uint8_t big[8] = {0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08};
    static const uint8_t end[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    assert_int_equal(ipl_vllm_kv_seq(zero, 8, &seq), 0);
    assert_true(seq == 0);
    assert_int_equal(ipl_vllm_kv_seq(big, 8, &seq), 0);
    assert_true(seq == UINT64_C(0x0102030405060708));
    assert_int_equal(ipl_vllm_kv_seq(big, 7, &seq), IPL_E_INVAL);
    assert_int_equal(ipl_vllm_kv_seq(big, 9, &seq), IPL_E_INVAL);
    assert_int_equal(ipl_vllm_kv_seq(NULL, 0, &seq), IPL_E_INVAL);
    assert_true(seq == UINT64_C(0x0102030405060708));
    assert_true(ipl_vllm_kv_is_end_seq(end, 8));
    assert_false(ipl_vllm_kv_is_end_seq(end, 7));
    assert_false(ipl_vllm_kv_is_end_seq(big, 8));
    assert_false(ipl_vllm_kv_is_end_seq(NULL, 0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_example_array_form),
        cmocka_unit_test(test_example_map_form),
        cmocka_unit_test(test_capture_like_map_event),
        cmocka_unit_test(test_extra_keys_of_a_lora_request),
        cmocka_unit_test(test_array_form_all_fields),
        cmocka_unit_test(test_all_blocks_cleared_and_mixed),
        cmocka_unit_test(test_map_envelope),
        cmocka_unit_test(test_hash_encodings),
        cmocka_unit_test(test_truncated_everywhere),
        cmocka_unit_test(test_wrong_types),
        cmocka_unit_test(test_all_or_nothing),
        cmocka_unit_test(test_huge_declared_lengths),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_reuse),
        cmocka_unit_test(test_seq_frames),
    };
    return cmocka_run_group_tests(tests, s_setup, s_teardown);
}
