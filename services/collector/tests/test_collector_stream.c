/*
 * Unit tests for collector_stream: re-hashing of BlockStored chains (root, child, LoRA,
 * extra keys), BlockRemoved through the engine→ours map, AllBlocksCleared, unknown parents,
 * sequence gaps and restarts, skipped media/groups and malformed input. Payloads are built
 * with msgpack-c in vLLM's wire format (map-encoded events, array envelope).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <msgpack.h>

#include "../collector_stream.h"
#include "ipl_error.h"
#include "ipl_hash.h"
#include "ipl_log.h"

/* ---- recorded operations ---- */
typedef struct {
    int op;
    uint64_t hashes[64];
    uint32_t n;
    uint64_t epoch, src_seq;
    uint32_t block_size;
} s_op_t;

typedef struct {
    s_op_t ops[32];
    int nops;
} s_rec_t;

static void s_record(void *arg, const collector_op_t *op)
{
    s_rec_t *r = arg;
    assert_true(r->nops < 32);
    s_op_t *o = &r->ops[r->nops++];
    o->op = op->op;
    o->n = op->nhashes;
    assert_true(op->nhashes <= 64);
    if (op->nhashes) memcpy(o->hashes, op->hashes, op->nhashes * sizeof *op->hashes);
    o->epoch = op->epoch;
    o->src_seq = op->src_seq;
    o->block_size = op->block_size;
}

/* ---- payload builder ---- */
typedef struct {
    msgpack_sbuffer sb;
    msgpack_packer pk;
} s_batch_t;

static void s_str(msgpack_packer *pk, const char *s)
{
    msgpack_pack_str_with_body(pk, s, strlen(s));
}

static void s_batch_begin(s_batch_t *b, uint32_t nevents)
{
    msgpack_sbuffer_init(&b->sb);
    msgpack_packer_init(&b->pk, &b->sb, msgpack_sbuffer_write);
    msgpack_pack_array(&b->pk, 3);
    msgpack_pack_double(&b->pk, 1700000000.5);
    msgpack_pack_array(&b->pk, nevents);
}

typedef struct {
    const uint64_t *engine;
    uint32_t nblocks;
    const uint64_t *parent; /* NULL: nil */
    uint32_t first_token;   /* tokens first_token, first_token+1, ... */
    const char *lora_name;
    const char *medium;
    int64_t group_idx; /* < 0: absent */
    bool salted;       /* extra_keys with a cache salt on the first block */
} s_stored_t;

static void s_block_stored(s_batch_t *b, const s_stored_t *s)
{
    msgpack_packer *pk = &b->pk;
    msgpack_pack_map(pk, s->group_idx >= 0 ? 10 : 9);
    s_str(pk, "type");
    s_str(pk, "BlockStored");
    s_str(pk, "block_hashes");
    msgpack_pack_array(pk, s->nblocks);
    for (uint32_t i = 0; i < s->nblocks; i++)
        msgpack_pack_uint64(pk, s->engine[i]);
    s_str(pk, "parent_block_hash");
    if (s->parent)
        msgpack_pack_uint64(pk, *s->parent);
    else
        msgpack_pack_nil(pk);
    s_str(pk, "token_ids");
    msgpack_pack_array(pk, s->nblocks * 16);
    for (uint32_t i = 0; i < s->nblocks * 16; i++)
        msgpack_pack_uint32(pk, s->first_token + i);
    s_str(pk, "block_size");
    msgpack_pack_uint32(pk, 16);
    s_str(pk, "lora_id");
    msgpack_pack_nil(pk);
    s_str(pk, "medium");
    s_str(pk, s->medium ? s->medium : "GPU");
    s_str(pk, "lora_name");
    if (s->lora_name)
        s_str(pk, s->lora_name);
    else
        msgpack_pack_nil(pk);
    s_str(pk, "extra_keys");
    msgpack_pack_array(pk, s->nblocks);
    for (uint32_t i = 0; i < s->nblocks; i++) {
        if (s->salted && i == 0) {
            msgpack_pack_array(pk, 1);
            s_str(pk, "salt");
        } else {
            msgpack_pack_nil(pk);
        }
    }
    if (s->group_idx >= 0) {
        s_str(pk, "group_idx");
        msgpack_pack_int64(pk, s->group_idx);
    }
}

/* array-encoded (pre-0.26) BlockRemoved */
static void s_block_removed(s_batch_t *b, const uint64_t *engine, uint32_t n)
{
    msgpack_pack_array(&b->pk, 3);
    s_str(&b->pk, "BlockRemoved");
    msgpack_pack_array(&b->pk, n);
    for (uint32_t i = 0; i < n; i++)
        msgpack_pack_uint64(&b->pk, engine[i]);
    s_str(&b->pk, "GPU");
}

static void s_all_cleared(s_batch_t *b)
{
    msgpack_pack_array(&b->pk, 1);
    s_str(&b->pk, "AllBlocksCleared");
}

/* Ends the batch and hands it to the stream with sequence `seq`. */
static int s_batch_send(s_batch_t *b, collector_stream_t *st, uint64_t seq)
{
    msgpack_pack_int64(&b->pk, 0); /* dp rank */
    uint8_t seqf[8];
    for (int i = 0; i < 8; i++)
        seqf[i] = (uint8_t)(seq >> (56 - 8 * i));
    int rc = collector_stream_message(st, seqf, 8, (const uint8_t *)b->sb.data, b->sb.size);
    msgpack_sbuffer_destroy(&b->sb);
    return rc;
}

/* Our expected hashes for tokens first..first+16n-1 starting at `parent`. */
static void s_expect(uint64_t parent, uint32_t first, uint32_t nblocks, uint64_t *out)
{
    uint32_t tokens[64 * 16];
    for (uint32_t i = 0; i < nblocks * 16; i++)
        tokens[i] = first + i;
    assert_int_equal(ipl_block_hashes(parent, tokens, nblocks * 16, 16, out, nblocks), nblocks);
}

typedef struct {
    s_rec_t rec;
    collector_stream_t *st;
} s_fx_t;

static int s_setup(void **state)
{
    ipl_log_init("test", IPL_LOG_OFF);
    s_fx_t *f = calloc(1, sizeof *f);
    f->st = collector_stream_new("w0", 1000, s_record, &f->rec);
    assert_non_null(f->st);
    *state = f;
    return 0;
}

static int s_teardown(void **state)
{
    s_fx_t *f = *state;
    collector_stream_destroy(&f->st);
    assert_null(f->st);
    free(f);
    return 0;
}

static void test_start_emits_cleared(void **state)
{
    s_fx_t *f = *state;
    collector_stream_start(f->st);
    assert_int_equal(f->rec.nops, 1);
    assert_int_equal(f->rec.ops[0].op, COLLECTOR_OP_CLEARED);
    assert_int_equal(f->rec.ops[0].epoch, 1000);
    assert_int_equal(collector_stream_kv_state(f->st), COLLECTOR_KV_EXACT);
}

static void test_chain_rehash_and_remove(void **state)
{
    s_fx_t *f = *state;
    uint64_t eng[5] = {0xe1, 0xe2, 0xe3, 0xe4, 0}; /* 0 is a legal engine hash */
    uint64_t want[5];
    s_expect(ipl_hash_chain_start(0), 100, 5, want);

    s_batch_t b;
    s_batch_begin(&b, 2);
    s_block_stored(&b,
                   &(s_stored_t){.engine = eng, .nblocks = 3, .first_token = 100, .group_idx = 0});
    /* the child event continues the chain from engine hash 0xe3 */
    s_block_stored(&b, &(s_stored_t){.engine = eng + 3,
                                     .nblocks = 2,
                                     .parent = &eng[2],
                                     .first_token = 100 + 48,
                                     .group_idx = -1});
    assert_int_equal(s_batch_send(&b, f->st, 0), 0);
    assert_int_equal(f->rec.nops, 2);
    assert_int_equal(f->rec.ops[0].op, COLLECTOR_OP_STORED);
    assert_int_equal(f->rec.ops[0].n, 3);
    assert_memory_equal(f->rec.ops[0].hashes, want, 3 * sizeof(uint64_t));
    assert_int_equal(f->rec.ops[1].n, 2);
    assert_memory_equal(f->rec.ops[1].hashes, want + 3, 2 * sizeof(uint64_t));
    assert_int_equal(f->rec.ops[1].block_size, 16);
    assert_int_equal(f->rec.ops[1].src_seq, 0);
    assert_int_equal(f->rec.ops[1].epoch, 1000);
    assert_int_equal(collector_stream_stats(f->st)->mapped, 5);

    /* removal maps engine hashes back to ours; unknown ones are ignored */
    uint64_t rm[3] = {0xe2, 0x999, 0};
    s_batch_begin(&b, 1);
    s_block_removed(&b, rm, 3);
    assert_int_equal(s_batch_send(&b, f->st, 1), 0);
    assert_int_equal(f->rec.nops, 3);
    assert_int_equal(f->rec.ops[2].op, COLLECTOR_OP_REMOVED);
    assert_int_equal(f->rec.ops[2].n, 2);
    assert_true(f->rec.ops[2].hashes[0] == want[1]);
    assert_true(f->rec.ops[2].hashes[1] == want[4]);
    assert_int_equal(f->rec.ops[2].src_seq, 1);
    const collector_stream_stats_t *st = collector_stream_stats(f->st);
    assert_int_equal(st->unknown_removed, 1);
    assert_int_equal(st->mapped, 3);
    assert_int_equal(st->blocks_stored, 5);
    assert_int_equal(st->blocks_removed, 2);
    assert_int_equal(st->batches, 2);
    assert_int_equal(st->events, 3);

    /* AllBlocksCleared empties the map: a child of a cleared block has an unknown parent */
    s_batch_begin(&b, 1);
    s_all_cleared(&b);
    assert_int_equal(s_batch_send(&b, f->st, 2), 0);
    assert_int_equal(f->rec.ops[3].op, COLLECTOR_OP_CLEARED);
    assert_int_equal(collector_stream_stats(f->st)->mapped, 0);
    s_batch_begin(&b, 1);
    s_block_stored(
        &b,
        &(s_stored_t){
            .engine = eng + 4, .nblocks = 1, .parent = &eng[0], .first_token = 1, .group_idx = -1});
    assert_int_equal(s_batch_send(&b, f->st, 3), 0);
    assert_int_equal(f->rec.nops, 4); /* skipped */
    assert_int_equal(collector_stream_stats(f->st)->unknown_parents, 1);
    assert_int_equal(collector_stream_kv_state(f->st), COLLECTOR_KV_SYNCING);
    /* a clear makes it exact again */
    s_batch_begin(&b, 1);
    s_all_cleared(&b);
    assert_int_equal(s_batch_send(&b, f->st, 4), 0);
    assert_int_equal(collector_stream_kv_state(f->st), COLLECTOR_KV_EXACT);
}

static void test_lora_and_extra_keys_use_other_hash_spaces(void **state)
{
    s_fx_t *f = *state;
    uint64_t e1 = 1, e2 = 2, e3 = 3;
    uint64_t base[1], lora[1];
    s_expect(ipl_hash_chain_start(0), 7, 1, base);
    s_expect(ipl_hash_chain_start(ipl_hash_key("my-adapter", NULL)), 7, 1, lora);
    assert_true(base[0] != lora[0]);
    s_batch_t b;
    s_batch_begin(&b, 3);
    s_block_stored(&b,
                   &(s_stored_t){.engine = &e1, .nblocks = 1, .first_token = 7, .group_idx = -1});
    s_block_stored(&b, &(s_stored_t){.engine = &e2,
                                     .nblocks = 1,
                                     .first_token = 7,
                                     .lora_name = "my-adapter",
                                     .group_idx = -1});
    s_block_stored(
        &b, &(s_stored_t){
                .engine = &e3, .nblocks = 1, .first_token = 7, .salted = true, .group_idx = -1});
    assert_int_equal(s_batch_send(&b, f->st, 0), 0);
    assert_int_equal(f->rec.nops, 3);
    assert_true(f->rec.ops[0].hashes[0] == base[0]);
    assert_true(f->rec.ops[1].hashes[0] == lora[0]);
    /* salted: neither the base nor the LoRA chain */
    assert_true(f->rec.ops[2].hashes[0] != base[0]);
    assert_true(f->rec.ops[2].hashes[0] != lora[0]);
    assert_int_equal(collector_stream_stats(f->st)->private_blocks, 1);
}

static void test_other_media_and_groups_are_skipped(void **state)
{
    s_fx_t *f = *state;
    uint64_t e1 = 1, e2 = 2;
    s_batch_t b;
    s_batch_begin(&b, 2);
    s_block_stored(
        &b, &(s_stored_t){
                .engine = &e1, .nblocks = 1, .first_token = 7, .medium = "CPU", .group_idx = -1});
    s_block_stored(&b,
                   &(s_stored_t){.engine = &e2, .nblocks = 1, .first_token = 7, .group_idx = 1});
    assert_int_equal(s_batch_send(&b, f->st, 0), 0);
    assert_int_equal(f->rec.nops, 0);
    assert_int_equal(collector_stream_stats(f->st)->skipped_events, 2);
    assert_int_equal(collector_stream_kv_state(f->st), COLLECTOR_KV_EXACT);
}

static bool s_gap_replays(void *arg, uint64_t first, uint64_t received)
{
    uint64_t *seen = arg;
    seen[0] = first;
    seen[1] = received;
    return true;
}

static void test_sequence_gap_and_restart(void **state)
{
    s_fx_t *f = *state;
    uint64_t e = 5;
    s_batch_t b;
    /* the first batch may have any number */
    s_batch_begin(&b, 1);
    s_block_stored(&b,
                   &(s_stored_t){.engine = &e, .nblocks = 1, .first_token = 1, .group_idx = -1});
    assert_int_equal(s_batch_send(&b, f->st, 40), 0);
    s_batch_begin(&b, 0);
    assert_int_equal(s_batch_send(&b, f->st, 41), 0);
    assert_int_equal(collector_stream_stats(f->st)->gaps, 0);
    /* 42..44 lost */
    s_batch_begin(&b, 0);
    assert_int_equal(s_batch_send(&b, f->st, 45), 0);
    const collector_stream_stats_t *st = collector_stream_stats(f->st);
    assert_int_equal(st->gaps, 1);
    assert_int_equal(st->missed_batches, 3);
    assert_int_equal(st->kv_state, COLLECTOR_KV_SYNCING);
    assert_int_equal(st->last_seq, 45);

    /* the worker restarts: sequence back to 0 → CLEARED, new epoch, exact again */
    int before = f->rec.nops;
    s_batch_begin(&b, 0);
    assert_int_equal(s_batch_send(&b, f->st, 0), 0);
    assert_int_equal(st->restarts, 1);
    assert_int_equal(st->epoch, 1001);
    assert_int_equal(st->kv_state, COLLECTOR_KV_EXACT);
    assert_int_equal(st->mapped, 0);
    assert_int_equal(f->rec.nops, before + 1);
    assert_int_equal(f->rec.ops[before].op, COLLECTOR_OP_CLEARED);
    assert_int_equal(f->rec.ops[before].epoch, 1001);

    /* with a replay handler the gap is reported to it and the stream stays exact */
    uint64_t seen[2] = {0, 0};
    collector_stream_set_gap_handler(f->st, s_gap_replays, seen);
    s_batch_begin(&b, 0);
    assert_int_equal(s_batch_send(&b, f->st, 3), 0);
    assert_int_equal(seen[0], 1);
    assert_int_equal(seen[1], 3);
    assert_int_equal(st->gaps, 2);
    assert_int_equal(st->kv_state, COLLECTOR_KV_EXACT);
}

static void test_malformed_input(void **state)
{
    s_fx_t *f = *state;
    uint8_t seq[8] = {0};
    const uint8_t junk[] = {0x93, 0xcb, 0x00};
    /* a sequence frame that is not 8 bytes: dropped, nothing changes */
    assert_int_equal(collector_stream_message(f->st, seq, 7, junk, sizeof junk), IPL_E_INVAL);
    assert_false(collector_stream_stats(f->st)->has_seq);
    /* an undecodable payload: dropped, its events are lost → SYNCING */
    int rc = collector_stream_message(f->st, seq, 8, junk, sizeof junk);
    assert_true(rc < 0);
    assert_int_equal(collector_stream_stats(f->st)->decode_errors, 2);
    assert_int_equal(collector_stream_kv_state(f->st), COLLECTOR_KV_SYNCING);
    assert_int_equal(f->rec.nops, 0);
    seq[7] = 1;
    rc = collector_stream_message(f->st, seq, 8, NULL, 0);
    assert_true(rc < 0);
    /* token count that does not match blocks × block_size: skipped */
    uint64_t e = 9;
    s_batch_t b;
    s_batch_begin(&b, 1);
    msgpack_pack_map(&b.pk, 5);
    s_str(&b.pk, "type");
    s_str(&b.pk, "BlockStored");
    s_str(&b.pk, "block_hashes");
    msgpack_pack_array(&b.pk, 1);
    msgpack_pack_uint64(&b.pk, e);
    s_str(&b.pk, "parent_block_hash");
    msgpack_pack_nil(&b.pk);
    s_str(&b.pk, "token_ids");
    msgpack_pack_array(&b.pk, 3);
    for (int i = 0; i < 3; i++)
        msgpack_pack_uint32(&b.pk, 1);
    s_str(&b.pk, "block_size");
    msgpack_pack_uint32(&b.pk, 16);
    rc = s_batch_send(&b, f->st, 2);
    if (rc == 0) /* the decoder may already reject it; either way nothing is stored */
        assert_int_equal(collector_stream_stats(f->st)->skipped_events, 1);
    assert_int_equal(f->rec.nops, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_start_emits_cleared, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_chain_rehash_and_remove, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_lora_and_extra_keys_use_other_hash_spaces, s_setup,
                                        s_teardown),
        cmocka_unit_test_setup_teardown(test_other_media_and_groups_are_skipped, s_setup,
                                        s_teardown),
        cmocka_unit_test_setup_teardown(test_sequence_gap_and_restart, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_malformed_input, s_setup, s_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
