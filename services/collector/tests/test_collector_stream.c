/*
 * Unit tests for collector_stream: re-hashing of BlockStored chains (root, child, LoRA,
 * extra keys), BlockRemoved through the engine→ours map, AllBlocksCleared, unknown parents,
 * skipped media/groups and malformed input; the exactness state machine: start-up catch-up,
 * gap replays in both reply layouts (live batches kept and de-duplicated), replays that fail
 * (evicted, timeout, bad replies, overflow) → RECOVERING (held blocks demoted to ghosts, a ghost
 * chain promoted when a BlockStored extends it, backoff retries only for causes that pass),
 * restarts (sequence back, replay digest mismatch, told by /metrics), an idle worker taken as
 * empty, and checkpoints: images and every outcome of a resume. Payloads are built with msgpack-c
 * in vLLM's wire format (map-encoded events, array envelope); the replay socket is a recording
 * stub.
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

#include "collector_stream.h"
#include "ipl_error.h"
#include "ipl_hash.h"
#include "ipl_log.h"

/* ---- recorded operations ---- */
typedef struct {
    int op;
    uint64_t hashes[64];
    uint32_t n;
    uint64_t epoch, src_seq, parent;
    uint32_t block_size;
} s_op_t;

typedef struct {
    s_op_t ops[256];
    int nops;
} s_rec_t;

static void s_record(void *arg, const collector_op_t *op)
{
    s_rec_t *r = arg;
    assert_true(r->nops < 256);
    s_op_t *o = &r->ops[r->nops++];
    o->op = op->op;
    o->n = op->nhashes;
    assert_true(op->nhashes <= 64);
    if (op->nhashes) memcpy(o->hashes, op->hashes, op->nhashes * sizeof *op->hashes);
    o->epoch = op->epoch;
    o->src_seq = op->src_seq;
    o->block_size = op->block_size;
    o->parent = op->parent;
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
    int64_t group_idx;      /* < 0: absent */
    bool salted;            /* extra_keys with a cache salt on the first block */
    bool lora_without_keys; /* a LoRA event whose extra_keys are [nil] (older vLLM) */
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
        /* vLLM's generate_block_hash_extra_keys: (lora_name,) on every block of a LoRA
         * request (unless the test wants the older [nil]), the cache salt on the first */
        bool lora = s->lora_name && !s->lora_without_keys;
        bool salt = s->salted && i == 0;
        if (lora || salt) {
            msgpack_pack_array(pk, (size_t)lora + (size_t)salt);
            if (lora) s_str(pk, s->lora_name);
            if (salt) s_str(pk, "salt");
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
    /* without a replay endpoint the base is batch 0, when it comes */
    assert_int_equal(collector_stream_kv_state(f->st), COLLECTOR_KV_SYNCING);
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
    assert_true(f->rec.ops[0].parent == 0); /* the chain starts here */
    assert_int_equal(f->rec.ops[1].n, 2);
    assert_true(f->rec.ops[1].parent == want[2]); /* our hash of the parent: the layout hint */
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
    uint64_t e4 = 4, e5 = 5;
    s_batch_t b;
    s_batch_begin(&b, 5);
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
    /* a salted request to the adapter: (lora_name, salt) on its first block */
    s_block_stored(&b, &(s_stored_t){.engine = &e4,
                                     .nblocks = 1,
                                     .first_token = 7,
                                     .lora_name = "my-adapter",
                                     .salted = true,
                                     .group_idx = -1});
    /* an older vLLM: lora_name with extra_keys [nil] */
    s_block_stored(&b, &(s_stored_t){.engine = &e5,
                                     .nblocks = 1,
                                     .first_token = 7,
                                     .lora_name = "my-adapter",
                                     .lora_without_keys = true,
                                     .group_idx = -1});
    assert_int_equal(s_batch_send(&b, f->st, 0), 0);
    assert_int_equal(f->rec.nops, 5);
    assert_true(f->rec.ops[0].hashes[0] == base[0]);
    assert_true(f->rec.ops[1].hashes[0] == lora[0]);
    /* salted: neither the base nor the LoRA chain, the salt's own (as a salted prompt hashes) */
    assert_true(f->rec.ops[2].hashes[0] != base[0]);
    assert_true(f->rec.ops[2].hashes[0] != lora[0]);
    uint64_t salted[1];
    s_expect(ipl_hash_chain_start(ipl_hash_key(NULL, "salt")), 7, 1, salted);
    assert_true(f->rec.ops[2].hashes[0] == salted[0]);
    /* salted with the adapter: not the adapter's space either (a request to the adapter
     * without that salt must not be promised these blocks) */
    assert_true(f->rec.ops[3].hashes[0] != lora[0]);
    assert_true(f->rec.ops[3].hashes[0] != base[0]);
    assert_true(f->rec.ops[3].hashes[0] != f->rec.ops[2].hashes[0]);
    assert_true(f->rec.ops[4].hashes[0] == lora[0]);
    assert_int_equal(collector_stream_stats(f->st)->private_blocks, 1); /* the adapter's */
}

/* vLLM sends one BlockRemoved per block: a run of them in one batch is one REMOVED op, sent
 * before the next op of another kind and at the end of the batch, so the order of operations
 * is the order of the events. */
static void test_removed_runs_are_coalesced(void **state)
{
    s_fx_t *f = *state;
    uint64_t eng[6] = {0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6};
    uint64_t want[6];
    s_expect(ipl_hash_chain_start(0), 500, 6, want);
    s_batch_t b;
    s_batch_begin(&b, 1);
    s_block_stored(&b,
                   &(s_stored_t){.engine = eng, .nblocks = 6, .first_token = 500, .group_idx = -1});
    assert_int_equal(s_batch_send(&b, f->st, 0), 0);
    int base = f->rec.nops;

    uint64_t e7 = 0xa7, unknown = 0x999;
    uint64_t want7[1];
    s_expect(want[5], 1000, 1, want7);
    s_batch_begin(&b, 6);
    s_block_removed(&b, &eng[0], 1);
    s_block_removed(&b, &unknown, 1); /* ignored, does not split the run */
    s_block_removed(&b, &eng[1], 1);
    s_block_stored(
        &b,
        &(s_stored_t){
            .engine = &e7, .nblocks = 1, .parent = &eng[5], .first_token = 1000, .group_idx = -1});
    s_block_removed(&b, &eng[2], 1);
    s_block_removed(&b, &eng[3], 2); /* 0xa4, 0xa5 */
    assert_int_equal(s_batch_send(&b, f->st, 1), 0);
    assert_int_equal(f->rec.nops, base + 3);
    s_op_t *o = &f->rec.ops[base];
    assert_int_equal(o[0].op, COLLECTOR_OP_REMOVED);
    assert_int_equal(o[0].n, 2);
    assert_true(o[0].hashes[0] == want[0] && o[0].hashes[1] == want[1]);
    assert_int_equal(o[1].op, COLLECTOR_OP_STORED);
    assert_int_equal(o[1].n, 1);
    assert_true(o[1].hashes[0] == want7[0]);
    assert_int_equal(o[2].op, COLLECTOR_OP_REMOVED);
    assert_int_equal(o[2].n, 3);
    assert_true(o[2].hashes[0] == want[2] && o[2].hashes[1] == want[3] &&
                o[2].hashes[2] == want[4]);
    for (int i = 0; i < 3; i++)
        assert_int_equal(o[i].src_seq, 1);
    const collector_stream_stats_t *st = collector_stream_stats(f->st);
    assert_int_equal(st->blocks_removed, 5);
    assert_int_equal(st->unknown_removed, 1);
    assert_int_equal(st->mapped, 2);

    /* a run ending the batch is sent with it, before the next batch's ops */
    s_batch_begin(&b, 1);
    s_block_removed(&b, &e7, 1);
    assert_int_equal(s_batch_send(&b, f->st, 2), 0);
    assert_int_equal(f->rec.nops, base + 4);
    assert_int_equal(f->rec.ops[base + 3].op, COLLECTOR_OP_REMOVED);
    assert_int_equal(f->rec.ops[base + 3].src_seq, 2);
    /* and a run before AllBlocksCleared goes out before the CLEARED */
    s_batch_begin(&b, 2);
    s_block_removed(&b, &eng[5], 1);
    s_all_cleared(&b);
    assert_int_equal(s_batch_send(&b, f->st, 3), 0);
    assert_int_equal(f->rec.nops, base + 6);
    assert_int_equal(f->rec.ops[base + 4].op, COLLECTOR_OP_REMOVED);
    assert_int_equal(f->rec.ops[base + 5].op, COLLECTOR_OP_CLEARED);
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

/* ---- payloads kept as bytes (for live and replayed copies of one batch) ---- */
typedef struct {
    uint8_t *data;
    size_t len;
} s_payload_t;

/* A batch of one root BlockStored of `nblocks` blocks (engine hashes base, base+1, ...,
 * tokens from `first`), or an empty batch when nblocks is 0. `ts` makes payloads differ. */
static s_payload_t s_payload(uint64_t base, uint32_t nblocks, uint32_t first, double ts)
{
    uint64_t eng[16];
    assert_true(nblocks <= 16);
    for (uint32_t i = 0; i < nblocks; i++)
        eng[i] = base + i;
    s_batch_t b;
    msgpack_sbuffer_init(&b.sb);
    msgpack_packer_init(&b.pk, &b.sb, msgpack_sbuffer_write);
    msgpack_pack_array(&b.pk, 3);
    msgpack_pack_double(&b.pk, ts);
    msgpack_pack_array(&b.pk, nblocks ? 1 : 0);
    if (nblocks)
        s_block_stored(
            &b, &(s_stored_t){
                    .engine = eng, .nblocks = nblocks, .first_token = first, .group_idx = -1});
    msgpack_pack_int64(&b.pk, 0);
    s_payload_t p = {malloc(b.sb.size), b.sb.size};
    memcpy(p.data, b.sb.data, b.sb.size);
    msgpack_sbuffer_destroy(&b.sb);
    return p;
}

static void s_seq8(uint64_t seq, uint8_t out[8])
{
    for (int i = 0; i < 8; i++)
        out[i] = (uint8_t)(seq >> (56 - 8 * i));
}

static int s_live(collector_stream_t *st, uint64_t seq, const s_payload_t *p)
{
    uint8_t seqf[8];
    s_seq8(seq, seqf);
    return collector_stream_message(st, seqf, 8, p->data, p->len);
}

/* One replay reply in layout 3 ([topic, seq, payload]) or 2 ([seq, payload]). */
static int s_reply(collector_stream_t *st, int layout, uint64_t seq, const s_payload_t *p)
{
    uint8_t seqf[8];
    s_seq8(seq, seqf);
    const uint8_t *frames[3] = {(const uint8_t *)"kv-events", seqf, p->data};
    size_t lens[3] = {9, 8, p->len};
    return layout == 3 ? collector_stream_replay_reply(st, frames, lens, 3)
                       : collector_stream_replay_reply(st, frames + 1, lens + 1, 2);
}

/* The end marker: [b"", ff*8, b""] (layout 3) or [ff*8, b""] (layout 2). */
static int s_reply_end(collector_stream_t *st, int layout)
{
    static const uint8_t end[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    const uint8_t *frames[3] = {(const uint8_t *)"", end, (const uint8_t *)""};
    size_t lens[3] = {0, 8, 0};
    return layout == 3 ? collector_stream_replay_reply(st, frames, lens, 3)
                       : collector_stream_replay_reply(st, frames + 1, lens + 1, 2);
}

/* ---- the replay socket stub ---- */
typedef struct {
    bool refuse; /* START returns false */
    int starts, stops;
    uint64_t start_seq; /* of the last START */
    bool running;
} s_replay_t;

static bool s_replay_cb(void *arg, collector_replay_op_t op, uint64_t start_seq)
{
    s_replay_t *r = arg;
    if (op == COLLECTOR_REPLAY_START) {
        assert_false(r->running); /* one at a time */
        r->starts++;
        r->start_seq = start_seq;
        if (r->refuse) return false;
        r->running = true;
        return true;
    }
    assert_int_equal(op, COLLECTOR_REPLAY_STOP);
    assert_true(r->running);
    r->running = false;
    r->stops++;
    return true;
}

typedef struct {
    s_rec_t rec;
    collector_stream_t *st;
    s_replay_t replay;
    s_payload_t b[16]; /* b[i]: the batch with seq i (engine hashes 100i.., tokens 1000i..) */
    uint64_t now;
} s_rfx_t;

static int s_rsetup(void **state)
{
    ipl_log_init("test", IPL_LOG_OFF);
    s_rfx_t *f = calloc(1, sizeof *f);
    f->st = collector_stream_new("w0", 1000, s_record, &f->rec);
    assert_non_null(f->st);
    collector_stream_set_replay(f->st, s_replay_cb, &f->replay);
    for (uint64_t i = 0; i < 16; i++)
        f->b[i] = s_payload(100 * i + 1, 2, 1000 * (uint32_t)i, 1700000000.0 + (double)i);
    f->now = 5000;
    collector_stream_tick(f->st, f->now);
    *state = f;
    return 0;
}

static int s_rteardown(void **state)
{
    s_rfx_t *f = *state;
    collector_stream_destroy(&f->st);
    for (int i = 0; i < 16; i++)
        free(f->b[i].data);
    free(f);
    return 0;
}

static void s_advance(s_rfx_t *f, uint64_t ms)
{
    f->now += ms;
    collector_stream_tick(f->st, f->now);
}

static int s_count(const s_rec_t *r, int op)
{
    int n = 0;
    for (int i = 0; i < r->nops; i++)
        n += r->ops[i].op == op;
    return n;
}

static int s_add_hash(void *arg, uint64_t h)
{
    uint64_t *sum = arg;
    *sum += h;
    return 0;
}

/* The sum of our hashes the stream holds, and the sum it should hold for batches [from, to]. */
static uint64_t s_held(s_rfx_t *f)
{
    uint64_t sum = 0;
    assert_int_equal(collector_stream_foreach(f->st, s_add_hash, &sum), 0);
    return sum;
}

static uint64_t s_expected(uint64_t from, uint64_t to)
{
    uint64_t sum = 0, want[2];
    for (uint64_t i = from; i <= to; i++) {
        s_expect(ipl_hash_chain_start(0), 1000 * (uint32_t)i, 2, want);
        sum += want[0] + want[1];
    }
    return sum;
}

static void test_startup_catch_up(void **state)
{
    s_rfx_t *f = *state;
    collector_stream_start(f->st);
    assert_int_equal(f->rec.nops, 1); /* CLEARED for older incarnations */
    assert_int_equal(f->replay.starts, 1);
    assert_int_equal(f->replay.start_seq, 0);
    assert_int_equal(collector_stream_kv_state(f->st), COLLECTOR_KV_SYNCING);
    /* batch 2 arrives live while the worker replays 0..2 */
    assert_int_equal(s_live(f->st, 2, &f->b[2]), 0);
    assert_int_equal(collector_stream_stats(f->st)->pending, 1);
    for (uint64_t i = 0; i < 3; i++)
        assert_int_equal(s_reply(f->st, 3, i, &f->b[i]), 0);
    assert_int_equal(s_reply_end(f->st, 3), 0);
    const collector_stream_stats_t *st = collector_stream_stats(f->st);
    assert_int_equal(f->replay.stops, 1);
    assert_int_equal(st->kv_state, COLLECTOR_KV_EXACT);
    assert_int_equal(st->duplicates, 1); /* live 2 was replayed already */
    assert_int_equal(st->replays_ok, 1);
    assert_int_equal(st->replayed_batches, 3);
    assert_int_equal(s_count(&f->rec, COLLECTOR_OP_STORED), 3);
    assert_true(s_held(f) == s_expected(0, 2));
    assert_int_equal(s_live(f->st, 3, &f->b[3]), 0);
    assert_true(s_held(f) == s_expected(0, 3));
    assert_int_equal(st->kv_state, COLLECTOR_KV_EXACT);
    /* a reply with no replay running is ignored */
    assert_int_equal(s_reply(f->st, 3, 4, &f->b[4]), IPL_E_INVAL);
    assert_int_equal(st->replay_stray, 1);
}

static void test_startup_idle_worker(void **state)
{
    s_rfx_t *f = *state;
    collector_stream_start(f->st);
    assert_int_equal(s_reply_end(f->st, 2), 0); /* nothing buffered: a fresh worker, empty */
    assert_int_equal(collector_stream_kv_state(f->st), COLLECTOR_KV_EXACT);
    assert_string_equal(collector_stream_stats(f->st)->why, "nothing_published");
    assert_int_equal(collector_stream_stats(f->st)->replays_failed, 0);
    assert_int_equal(s_live(f->st, 0, &f->b[0]), 0); /* its first batch: a known base */
    assert_int_equal(collector_stream_kv_state(f->st), COLLECTOR_KV_EXACT);
}

static void test_startup_worker_not_up_yet(void **state)
{
    s_rfx_t *f = *state;
    collector_stream_start(f->st);
    s_advance(f, 2000); /* its replay endpoint does not answer: nothing is known */
    const collector_stream_stats_t *st = collector_stream_stats(f->st);
    assert_int_equal(st->state, COLLECTOR_STATE_RECOVERING);
    assert_string_equal(st->why, "replay_timeout");
    s_advance(f, 1000); /* the retry: the worker is up now, and has published nothing */
    assert_int_equal(f->replay.starts, 2);
    assert_int_equal(s_reply_end(f->st, 3), 0);
    assert_int_equal(st->kv_state, COLLECTOR_KV_EXACT); /* empty, and known to be */
    assert_string_equal(st->why, "nothing_published");
    assert_int_equal(st->retry_at_ms, 0);
    assert_int_equal(s_live(f->st, 0, &f->b[0]), 0);
    assert_int_equal(st->kv_state, COLLECTOR_KV_EXACT);
}

static void test_startup_history_evicted(void **state)
{
    s_rfx_t *f = *state;
    collector_stream_start(f->st);
    assert_int_equal(s_live(f->st, 9, &f->b[9]), 0);
    assert_int_equal(s_reply(f->st, 3, 7, &f->b[7]), 0); /* 0..6 are gone */
    const collector_stream_stats_t *st = collector_stream_stats(f->st);
    assert_int_equal(st->state, COLLECTOR_STATE_RECOVERING);
    assert_int_equal(st->kv_state, COLLECTOR_KV_SYNCING);
    assert_string_equal(st->why, "history_evicted");
    assert_true(f->replay.running); /* what is buffered is used */
    assert_int_equal(s_reply(f->st, 3, 8, &f->b[8]), 0);
    assert_int_equal(s_reply_end(f->st, 3), 0);
    assert_int_equal(f->replay.stops, 1);
    assert_true(s_held(f) == s_expected(7, 9)); /* the buffer, then the kept live batch */
    assert_true(st->has_recover_seq && st->recover_seq == 7);
    assert_string_equal(st->why, "history_evicted");
    assert_int_equal(st->retry_at_ms, 0); /* batch 0 of this process is gone for good */
    assert_int_equal(st->degradations, 1);
}

static void test_gap_replayed_in_order(void **state)
{
    s_rfx_t *f = *state;
    for (int layout = 2; layout <= 3; layout++) {
        collector_stream_t *st = f->st;
        /* round 2 starts with batch 0 again: a restart, so both rounds start from scratch */
        assert_int_equal(s_live(st, 0, &f->b[0]), 0);
        assert_int_equal(s_live(st, 1, &f->b[1]), 0);
        assert_int_equal(collector_stream_kv_state(st), COLLECTOR_KV_EXACT);
        int starts = f->replay.starts;
        /* 2 and 3 are lost; 4 and 5 arrive (5 during the replay) */
        assert_int_equal(s_live(st, 4, &f->b[4]), 0);
        assert_int_equal(f->replay.starts, starts + 1);
        assert_int_equal(f->replay.start_seq, 1); /* the last applied one, for the proof */
        assert_int_equal(collector_stream_kv_state(st), COLLECTOR_KV_SYNCING);
        assert_int_equal(s_live(st, 5, &f->b[5]), 0);
        for (uint64_t i = 1; i <= 5; i++)
            assert_int_equal(s_reply(st, layout, i, &f->b[i]), 0);
        assert_int_equal(s_reply_end(st, layout), 0);
        assert_int_equal(collector_stream_kv_state(st), COLLECTOR_KV_EXACT);
        assert_true(s_held(f) == s_expected(0, 5));
        assert_int_equal(s_live(st, 6, &f->b[6]), 0);
        assert_true(s_held(f) == s_expected(0, 6));
        /* each block was stored exactly once */
        const collector_stream_stats_t *ss = collector_stream_stats(st);
        assert_int_equal(ss->gaps, (uint64_t)(layout - 1));
        assert_int_equal(ss->mapped, 14);
    }
    assert_int_equal(collector_stream_stats(f->st)->restarts, 1);
    assert_int_equal(collector_stream_stats(f->st)->replays_ok, 2);
}

static void test_gap_replay_with_empty_payload_end(void **state)
{
    s_rfx_t *f = *state;
    assert_int_equal(s_live(f->st, 0, &f->b[0]), 0);
    assert_int_equal(s_live(f->st, 2, &f->b[2]), 0);
    /* the last applied batch was evicted, the next is there: accepted unproven */
    assert_int_equal(s_reply(f->st, 2, 1, &f->b[1]), 0);
    assert_int_equal(s_reply(f->st, 2, 2, &f->b[2]), 0);
    uint8_t seqf[8];
    s_seq8(3, seqf);
    const uint8_t *frames[2] = {seqf, (const uint8_t *)""};
    size_t lens[2] = {8, 0};
    assert_int_equal(collector_stream_replay_reply(f->st, frames, lens, 2), 0); /* end */
    assert_int_equal(collector_stream_kv_state(f->st), COLLECTOR_KV_EXACT);
    assert_true(s_held(f) == s_expected(0, 2));
}

static void test_gap_replay_evicted_recovers(void **state)
{
    s_rfx_t *f = *state;
    assert_int_equal(s_live(f->st, 0, &f->b[0]), 0);
    assert_int_equal(s_live(f->st, 1, &f->b[1]), 0);
    assert_int_equal(s_live(f->st, 5, &f->b[5]), 0);
    int cleared = s_count(&f->rec, COLLECTOR_OP_CLEARED);
    assert_int_equal(s_reply(f->st, 3, 3, &f->b[3]), 0); /* 1 and 2 evicted */
    const collector_stream_stats_t *st = collector_stream_stats(f->st);
    assert_int_equal(st->state, COLLECTOR_STATE_RECOVERING);
    assert_int_equal(st->degradations, 1);
    /* what 0 and 1 stored may have been removed in 2: cleared at the aggregator, kept as
     * ghosts */
    assert_int_equal(s_count(&f->rec, COLLECTOR_OP_CLEARED), cleared + 1);
    assert_int_equal(st->ghosts, 4);
    assert_int_equal(s_reply(f->st, 3, 4, &f->b[4]), 0);
    assert_int_equal(s_reply_end(f->st, 3), 0);
    assert_true(s_held(f) == s_expected(3, 5)); /* the buffered ones and the kept one */
    assert_int_equal(st->recover_seq, 3);
    assert_int_equal(st->retry_at_ms, 0); /* nothing to retry: the history is gone */
    /* a later gap that the buffer still covers is replayed: the lower bound goes on */
    assert_int_equal(s_live(f->st, 6, &f->b[6]), 0);
    assert_int_equal(s_live(f->st, 8, &f->b[8]), 0);
    assert_int_equal(f->replay.starts, 2);
    assert_int_equal(f->replay.start_seq, 6);
    assert_int_equal(s_reply(f->st, 3, 6, &f->b[6]), 0);
    assert_int_equal(s_reply(f->st, 3, 7, &f->b[7]), 0);
    assert_int_equal(s_reply_end(f->st, 3), 0);
    assert_true(s_held(f) == s_expected(3, 8));
    assert_int_equal(st->state, COLLECTOR_STATE_RECOVERING);
    assert_int_equal(st->degradations, 1);
    assert_string_equal(st->why, "history_evicted");
    /* a restart of the worker is a new base: exact again */
    assert_int_equal(s_live(f->st, 0, &f->b[0]), 0);
    assert_int_equal(st->kv_state, COLLECTOR_KV_EXACT);
    assert_int_equal(st->ghosts, 0);
}

/* A retry whose replay shows the start of the history gone stops the retries; one that finds
 * batch 0 (a restart nobody saw) rebuilds an exact state. Failed retries change nothing. */
static void test_retries(void **state)
{
    s_rfx_t *f = *state;
    collector_stream_set_limits(f->st, &(collector_stream_limits_t){.replay_timeout_ms = 500});
    assert_int_equal(s_live(f->st, 0, &f->b[0]), 0);
    assert_int_equal(s_live(f->st, 3, &f->b[3]), 0); /* gap replay from 0 */
    s_advance(f, 500);                               /* times out */
    const collector_stream_stats_t *st = collector_stream_stats(f->st);
    assert_int_equal(st->state, COLLECTOR_STATE_RECOVERING);
    assert_string_equal(st->why, "replay_timeout");
    assert_true(s_held(f) == s_expected(3, 3));
    assert_int_equal(st->retry_at_ms, f->now + 1000);
    /* while the retry is pending, a gap is not replayed */
    assert_int_equal(s_live(f->st, 5, &f->b[5]), 0);
    assert_int_equal(f->replay.starts, 1);
    assert_true(s_held(f) == s_expected(5, 5));
    s_advance(f, 1000);
    assert_int_equal(f->replay.starts, 2);
    assert_int_equal(f->replay.start_seq, 0);
    assert_int_equal(st->retries, 1);
    s_advance(f, 500); /* the retry times out too: nothing changes but the backoff */
    assert_int_equal(st->retry_at_ms, f->now + 2000);
    assert_true(s_held(f) == s_expected(5, 5));
    assert_int_equal(st->degradations, 2);
    s_advance(f, 2000);
    assert_int_equal(f->replay.starts, 3);
    assert_int_equal(s_reply(f->st, 3, 4, &f->b[4]), 0); /* batch 0 is gone: stop retrying */
    assert_false(f->replay.running);
    assert_int_equal(st->retry_at_ms, 0);
    assert_int_equal(st->state, COLLECTOR_STATE_RECOVERING);
    assert_true(s_held(f) == s_expected(5, 5));
    assert_int_equal(s_reply(f->st, 3, 5, &f->b[5]), IPL_E_INVAL); /* stray */
    /* gaps are replayed again; this one's start is evicted: recovering from what is there */
    assert_int_equal(s_live(f->st, 8, &f->b[8]), 0);
    assert_int_equal(f->replay.start_seq, 5);
    assert_int_equal(s_reply(f->st, 3, 7, &f->b[7]), 0);
    assert_int_equal(s_reply_end(f->st, 3), 0);
    assert_true(s_held(f) == s_expected(7, 8));
    assert_int_equal(st->ghosts, 6); /* batches 0, 3 and 5: every loss adds its blocks */
    assert_int_equal(st->recover_seq, 7);
    /* a timed-out gap again, and a retry that finds batch 0: exact */
    assert_int_equal(s_live(f->st, 10, &f->b[10]), 0);
    s_advance(f, 500);
    s_advance(f, 1000);
    assert_true(f->replay.running);
    assert_int_equal(f->replay.start_seq, 0);
    assert_int_equal(s_live(f->st, 11, &f->b[11]), 0); /* kept */
    for (uint64_t i = 0; i <= 11; i++)
        assert_int_equal(s_reply(f->st, 3, i, &f->b[i]), 0);
    assert_int_equal(s_reply_end(f->st, 3), 0);
    assert_int_equal(st->kv_state, COLLECTOR_KV_EXACT);
    assert_true(s_held(f) == s_expected(0, 11));
    assert_int_equal(st->ghosts, 0);
    assert_int_equal(st->retry_at_ms, 0);
}

static void test_replay_timeout_and_refusal(void **state)
{
    s_rfx_t *f = *state;
    collector_stream_set_limits(f->st, &(collector_stream_limits_t){.replay_timeout_ms = 500,
                                                                    .retry_min_ms = 100,
                                                                    .retry_max_ms = 250});
    assert_int_equal(s_live(f->st, 0, &f->b[0]), 0);
    assert_int_equal(s_live(f->st, 3, &f->b[3]), 0);
    assert_true(f->replay.running);
    s_advance(f, 400);
    assert_int_equal(s_reply(f->st, 3, 0, &f->b[0]), 0); /* proof: progress resets the clock */
    s_advance(f, 499);
    assert_true(f->replay.running);
    s_advance(f, 1);
    assert_false(f->replay.running);
    const collector_stream_stats_t *st = collector_stream_stats(f->st);
    assert_int_equal(st->state, COLLECTOR_STATE_RECOVERING);
    assert_string_equal(st->why, "replay_timeout");
    assert_true(s_held(f) == s_expected(3, 3));
    /* retries back off 100, 200, 250 (the cap), refused ones included */
    f->replay.refuse = true;
    uint64_t want[] = {100, 200, 250, 250};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(st->retry_at_ms, f->now + want[i]);
        s_advance(f, want[i]);
    }
    assert_int_equal(f->replay.starts, 1 + 4);
    assert_int_equal(st->replays_failed, 1 + 4);
    /* an AllBlocksCleared is a known base: exact again, retries stop */
    s_batch_t b;
    s_batch_begin(&b, 1);
    s_all_cleared(&b);
    assert_int_equal(s_batch_send(&b, f->st, 4), 0);
    assert_int_equal(st->kv_state, COLLECTOR_KV_EXACT);
    assert_int_equal(st->retry_at_ms, 0);
    /* a gap whose replay cannot even start: RECOVERING at once, a retry scheduled */
    assert_int_equal(s_live(f->st, 6, &f->b[6]), 0);
    assert_int_equal(st->state, COLLECTOR_STATE_RECOVERING);
    assert_string_equal(st->why, "replay_failed");
    assert_int_equal(st->retry_at_ms, f->now + 100);
}

static void test_restarts(void **state)
{
    s_rfx_t *f = *state;
    for (uint64_t i = 0; i < 4; i++)
        assert_int_equal(s_live(f->st, i, &f->b[i]), 0);
    const collector_stream_stats_t *st = collector_stream_stats(f->st);
    /* the new process's batch 0 arrives: CLEARED, new epoch, exact */
    int before = f->rec.nops;
    assert_int_equal(s_live(f->st, 0, &f->b[5]), 0);
    assert_int_equal(st->restarts, 1);
    assert_int_equal(st->epoch, 1001);
    assert_int_equal(st->kv_state, COLLECTOR_KV_EXACT);
    assert_int_equal(f->rec.ops[before].op, COLLECTOR_OP_CLEARED);
    assert_int_equal(f->rec.ops[before].epoch, 1001);
    assert_int_equal(f->rec.ops[before + 1].op, COLLECTOR_OP_STORED);
    assert_int_equal(st->mapped, 2);
    /* restart again, batch 0 missed: rebuilt by a replay from 0 */
    assert_int_equal(s_live(f->st, 0, &f->b[6]), 0); /* 0 <= 0: yet another process */
    assert_int_equal(s_live(f->st, 2, &f->b[8]), 0); /* ...whose 1 was lost: a gap */
    assert_int_equal(f->replay.start_seq, 0);
    s_payload_t p1 = s_payload(901, 2, 9000, 42.0);
    assert_int_equal(s_reply(f->st, 3, 0, &f->b[6]), 0); /* proven */
    assert_int_equal(s_reply(f->st, 3, 1, &p1), 0);
    assert_int_equal(s_reply(f->st, 3, 2, &f->b[8]), 0);
    assert_int_equal(s_reply_end(f->st, 3), 0);
    assert_int_equal(st->kv_state, COLLECTOR_KV_EXACT);
    assert_int_equal(st->restarts, 2);
    assert_int_equal(st->mapped, 6);
    /* a new process that is already past our last seq: the digest gives it away */
    assert_int_equal(s_live(f->st, 5, &f->b[5]), 0); /* gap 3..4: replay from 2 */
    assert_int_equal(f->replay.start_seq, 2);
    assert_int_equal(s_reply(f->st, 3, 2, &f->b[2]), 0); /* another batch 2 */
    assert_int_equal(st->restarts, 3);
    assert_int_equal(f->replay.start_seq, 0); /* rebuild */
    assert_int_equal(st->mapped, 0);
    for (uint64_t i = 0; i <= 5; i++)
        assert_int_equal(s_reply(f->st, 2, i, &f->b[i]), 0);
    assert_int_equal(s_reply_end(f->st, 2), 0);
    assert_int_equal(st->kv_state, COLLECTOR_KV_EXACT);
    assert_true(s_held(f) == s_expected(0, 5));
    free(p1.data);
}

static void test_restart_told_by_metrics(void **state)
{
    s_rfx_t *f = *state;
    for (uint64_t i = 0; i < 3; i++)
        assert_int_equal(s_live(f->st, i, &f->b[i]), 0);
    const collector_stream_stats_t *st = collector_stream_stats(f->st);
    int before = f->rec.nops;
    collector_stream_restarted(f->st, "metrics_reset");
    /* the old blocks go at once, before the new process publishes anything */
    assert_int_equal(f->rec.nops, before + 1);
    assert_int_equal(f->rec.ops[before].op, COLLECTOR_OP_CLEARED);
    assert_int_equal(st->restarts, 1);
    assert_int_equal(st->mapped, 0);
    assert_true(f->replay.running); /* its history, from 0 */
    assert_int_equal(f->replay.start_seq, 0);
    assert_int_equal(s_reply_end(f->st, 3), 0);
    assert_int_equal(st->kv_state, COLLECTOR_KV_EXACT); /* nothing published yet: empty */
    /* its batch 0 is not taken for yet another restart */
    assert_int_equal(s_live(f->st, 0, &f->b[5]), 0);
    assert_int_equal(st->restarts, 1);
    assert_int_equal(st->kv_state, COLLECTOR_KV_EXACT);
    assert_int_equal(st->mapped, 2);
}

static void test_restart_during_replay_and_overflow(void **state)
{
    s_rfx_t *f = *state;
    collector_stream_set_limits(f->st, &(collector_stream_limits_t){.max_pending = 2});
    assert_int_equal(s_live(f->st, 0, &f->b[0]), 0);
    assert_int_equal(s_live(f->st, 3, &f->b[3]), 0); /* replay; 3 kept */
    assert_int_equal(s_live(f->st, 4, &f->b[4]), 0); /* kept */
    assert_int_equal(s_live(f->st, 5, &f->b[5]), 0); /* one too many: the replay fails */
    const collector_stream_stats_t *st = collector_stream_stats(f->st);
    assert_false(f->replay.running);
    assert_int_equal(st->state, COLLECTOR_STATE_RECOVERING);
    assert_string_equal(st->why, "pending_overflow");
    assert_true(s_held(f) == s_expected(3, 5)); /* all three applied, in order */
    /* a restart ends RECOVERING: batch 0 of the new process is a known base */
    assert_int_equal(s_live(f->st, 0, &f->b[0]), 0);
    assert_int_equal(st->kv_state, COLLECTOR_KV_EXACT);
    /* restart while a replay runs: the replay is dropped with the old process's batches */
    assert_int_equal(s_live(f->st, 2, &f->b[2]), 0);
    assert_true(f->replay.running);
    assert_int_equal(s_live(f->st, 0, &f->b[7]), 0);
    assert_false(f->replay.running);
    assert_int_equal(st->pending, 0);
    assert_int_equal(st->kv_state, COLLECTOR_KV_EXACT);
    assert_true(s_held(f) == s_expected(7, 7));
}

static void test_bad_replies(void **state)
{
    s_rfx_t *f = *state;
    assert_int_equal(s_live(f->st, 0, &f->b[0]), 0);
    assert_int_equal(s_live(f->st, 2, &f->b[2]), 0);
    const uint8_t *frames[4] = {(const uint8_t *)"a", (const uint8_t *)"b", (const uint8_t *)"c",
                                (const uint8_t *)"d"};
    size_t lens[4] = {1, 1, 1, 1};
    assert_int_equal(collector_stream_replay_reply(f->st, frames, lens, 4), IPL_E_INVAL);
    assert_int_equal(collector_stream_state(f->st), COLLECTOR_STATE_RECOVERING);
    assert_string_equal(collector_stream_stats(f->st)->why, "bad_reply_frames");
    /* a restart, then a replay whose seq frame is not 8 bytes, then one out of order */
    assert_int_equal(s_live(f->st, 0, &f->b[0]), 0);
    assert_int_equal(s_live(f->st, 2, &f->b[2]), 0);
    assert_int_equal(collector_stream_replay_reply(f->st, frames, lens, 2), IPL_E_INVAL);
    assert_string_equal(collector_stream_stats(f->st)->why, "bad_reply_seq");
    assert_int_equal(s_live(f->st, 0, &f->b[0]), 0);
    assert_int_equal(s_live(f->st, 2, &f->b[2]), 0);
    assert_int_equal(s_reply(f->st, 3, 0, &f->b[0]), 0);
    assert_int_equal(s_reply(f->st, 3, 2, &f->b[2]), 0); /* 1 skipped */
    assert_string_equal(collector_stream_stats(f->st)->why, "replay_not_contiguous");
    /* a replay that ends before the gap is closed */
    assert_int_equal(s_live(f->st, 0, &f->b[0]), 0);
    assert_int_equal(s_live(f->st, 3, &f->b[3]), 0);
    assert_int_equal(s_reply(f->st, 3, 0, &f->b[0]), 0);
    assert_int_equal(s_reply(f->st, 3, 1, &f->b[1]), 0);
    assert_int_equal(s_reply_end(f->st, 3), 0);
    assert_string_equal(collector_stream_stats(f->st)->why, "replay_incomplete");
    assert_int_equal(collector_stream_state(f->st), COLLECTOR_STATE_RECOVERING);
    assert_false(f->replay.running);
}

static void test_no_replay_endpoint(void **state)
{
    s_fx_t *f = *state;
    uint64_t e = 5;
    s_batch_t b;
    collector_stream_start(f->st);
    assert_int_equal(collector_stream_kv_state(f->st), COLLECTOR_KV_SYNCING);
    /* joined late: batch 40 first, and no way to fetch 0..39 */
    s_batch_begin(&b, 1);
    s_block_stored(&b,
                   &(s_stored_t){.engine = &e, .nblocks = 1, .first_token = 1, .group_idx = -1});
    assert_int_equal(s_batch_send(&b, f->st, 40), 0);
    const collector_stream_stats_t *st = collector_stream_stats(f->st);
    assert_int_equal(st->state, COLLECTOR_STATE_RECOVERING);
    assert_int_equal(st->kv_state, COLLECTOR_KV_SYNCING); /* a subset: deciders use it */
    assert_string_equal(st->why, "history_unknown");
    assert_true(st->has_recover_seq && st->recover_seq == 40);
    assert_int_equal(st->mapped, 1);      /* a fact all the same */
    assert_int_equal(st->retry_at_ms, 0); /* nothing to retry with */
    s_batch_begin(&b, 0);
    assert_int_equal(s_batch_send(&b, f->st, 41), 0);
    s_batch_begin(&b, 1);
    s_all_cleared(&b);
    assert_int_equal(s_batch_send(&b, f->st, 42), 0);
    assert_int_equal(st->kv_state, COLLECTOR_KV_EXACT);
    /* 43..44 lost: RECOVERING, CLEARED, the held block kept as a ghost */
    s_batch_begin(&b, 1);
    s_block_stored(&b,
                   &(s_stored_t){.engine = &e, .nblocks = 1, .first_token = 1, .group_idx = -1});
    assert_int_equal(s_batch_send(&b, f->st, 43), 0);
    int before = f->rec.nops;
    s_batch_begin(&b, 0);
    assert_int_equal(s_batch_send(&b, f->st, 46), 0);
    assert_int_equal(st->gaps, 1);
    assert_int_equal(st->missed_batches, 2);
    assert_int_equal(st->state, COLLECTOR_STATE_RECOVERING);
    assert_string_equal(st->why, "gap_without_replay");
    assert_int_equal(f->rec.nops, before + 1);
    assert_int_equal(f->rec.ops[before].op, COLLECTOR_OP_CLEARED);
    assert_int_equal(st->mapped, 0);
    assert_int_equal(st->ghosts, 1);
    assert_int_equal(st->last_seq, 46);
    assert_int_equal(st->degradations, 2);
}

static void test_malformed_input(void **state)
{
    s_fx_t *f = *state;
    uint8_t seq[8] = {0};
    const uint8_t junk[] = {0x93, 0xcb, 0x00};
    /* a sequence frame that is not 8 bytes: dropped, nothing changes */
    assert_int_equal(collector_stream_message(f->st, seq, 7, junk, sizeof junk), IPL_E_INVAL);
    assert_false(collector_stream_stats(f->st)->has_seq);
    /* an undecodable payload: dropped, its events are lost → RECOVERING (nothing held that
     * the batch could have removed) */
    int rc = collector_stream_message(f->st, seq, 8, junk, sizeof junk);
    assert_true(rc < 0);
    assert_int_equal(collector_stream_stats(f->st)->decode_errors, 2);
    assert_int_equal(collector_stream_state(f->st), COLLECTOR_STATE_RECOVERING);
    assert_string_equal(collector_stream_stats(f->st)->why, "undecodable_batch");
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

/* ---- RECOVERING: ghosts and their promotion ---- */

static void s_send_empty(collector_stream_t *st, uint64_t seq)
{
    s_batch_t b;
    s_batch_begin(&b, 0);
    assert_int_equal(s_batch_send(&b, st, seq), 0);
}

static void test_recovery_promotes_ghost_chains(void **state)
{
    s_fx_t *f = *state;
    uint64_t a[5] = {0x11, 0x12, 0x13, 0x14, 0x15}, c = 0x21, d = 0x16, e = 0x17, x = 0x99;
    uint64_t want[5], wc[1];
    s_expect(ipl_hash_chain_start(0), 100, 5, want);
    s_expect(ipl_hash_chain_start(0), 500, 1, wc);
    s_batch_t b;
    s_batch_begin(&b, 3);
    s_block_stored(&b,
                   &(s_stored_t){.engine = a, .nblocks = 3, .first_token = 100, .group_idx = -1});
    s_block_stored(
        &b,
        &(s_stored_t){
            .engine = a + 3, .nblocks = 2, .parent = &a[2], .first_token = 148, .group_idx = -1});
    s_block_stored(&b,
                   &(s_stored_t){.engine = &c, .nblocks = 1, .first_token = 500, .group_idx = -1});
    assert_int_equal(s_batch_send(&b, f->st, 0), 0);
    const collector_stream_stats_t *st = collector_stream_stats(f->st);
    assert_int_equal(st->mapped, 6);
    s_send_empty(f->st, 2); /* 1 lost, no replay */
    assert_int_equal(st->state, COLLECTOR_STATE_RECOVERING);
    assert_int_equal(st->mapped, 0);
    assert_int_equal(st->ghosts, 6);
    assert_int_equal(f->rec.ops[f->rec.nops - 1].op, COLLECTOR_OP_CLEARED);

    /* a request extends the ghost chain: it holds every block of it, so they are cached */
    int base = f->rec.nops;
    s_batch_begin(&b, 1);
    s_block_stored(
        &b, &(s_stored_t){
                .engine = &d, .nblocks = 1, .parent = &a[4], .first_token = 180, .group_idx = -1});
    assert_int_equal(s_batch_send(&b, f->st, 3), 0);
    assert_int_equal(f->rec.nops, base + 2);
    s_op_t *o = &f->rec.ops[base];
    assert_int_equal(o[0].op, COLLECTOR_OP_STORED);
    assert_int_equal(o[0].n, 5);
    assert_memory_equal(o[0].hashes, want, sizeof want); /* root first */
    assert_true(o[0].parent == 0);
    uint64_t wd[1];
    s_expect(want[4], 180, 1, wd);
    assert_int_equal(o[1].n, 1);
    assert_true(o[1].hashes[0] == wd[0] && o[1].parent == want[4]);
    assert_int_equal(st->promoted, 5);
    assert_int_equal(st->mapped, 6);
    assert_int_equal(st->ghosts, 1);

    /* a ghost's removal drops it silently; an unknown parent is still unknown */
    base = f->rec.nops;
    s_batch_begin(&b, 2);
    s_block_removed(&b, &c, 1);
    s_block_stored(
        &b, &(s_stored_t){
                .engine = &e, .nblocks = 1, .parent = &x, .first_token = 900, .group_idx = -1});
    assert_int_equal(s_batch_send(&b, f->st, 4), 0);
    assert_int_equal(f->rec.nops, base);
    assert_int_equal(st->ghost_removed, 1);
    assert_int_equal(st->ghosts, 0);
    assert_int_equal(st->unknown_parents, 1);
    assert_int_equal(st->state, COLLECTOR_STATE_RECOVERING);
    assert_int_equal(st->kv_state, COLLECTOR_KV_SYNCING);
    assert_int_equal(st->recover_seq, 2);

    /* another hole demotes the rebuilt blocks again; a chain's walk stops at a held block */
    s_send_empty(f->st, 6);
    assert_int_equal(st->ghosts, 6);
    s_batch_begin(&b, 1);
    s_block_stored(&b, &(s_stored_t){.engine = a,
                                     .nblocks = 1,
                                     .first_token = 100,
                                     .group_idx = -1}); /* stored again: held, not a ghost */
    assert_int_equal(s_batch_send(&b, f->st, 7), 0);
    assert_int_equal(st->ghosts, 5);
    base = f->rec.nops;
    s_batch_begin(&b, 1);
    s_block_stored(
        &b, &(s_stored_t){
                .engine = &e, .nblocks = 1, .parent = &a[2], .first_token = 7000, .group_idx = -1});
    assert_int_equal(s_batch_send(&b, f->st, 8), 0);
    assert_int_equal(f->rec.nops, base + 2);
    o = &f->rec.ops[base];
    assert_int_equal(o[0].n, 2);
    assert_true(o[0].hashes[0] == want[1] && o[0].hashes[1] == want[2]);
    assert_true(o[0].parent == want[0]);
    assert_int_equal(st->promoted, 7);
    assert_int_equal(st->ghosts, 3); /* a[3], a[4], d */
    /* a clear is a known base: exact, ghosts gone */
    s_batch_begin(&b, 1);
    s_all_cleared(&b);
    assert_int_equal(s_batch_send(&b, f->st, 9), 0);
    assert_int_equal(st->kv_state, COLLECTOR_KV_EXACT);
    assert_int_equal(st->ghosts, 0);
}

static void test_ghosts_are_bounded(void **state)
{
    s_fx_t *f = *state;
    collector_stream_set_limits(f->st, &(collector_stream_limits_t){.max_ghosts = 3});
    uint64_t a[5] = {1, 2, 3, 4, 5}, c[2] = {6, 7};
    s_batch_t b;
    s_batch_begin(&b, 1);
    s_block_stored(&b, &(s_stored_t){.engine = a, .nblocks = 5, .first_token = 1, .group_idx = -1});
    assert_int_equal(s_batch_send(&b, f->st, 0), 0);
    s_send_empty(f->st, 2);
    const collector_stream_stats_t *st = collector_stream_stats(f->st);
    assert_int_equal(st->ghosts, 5); /* the newest knowledge is kept whole */
    s_batch_begin(&b, 1);
    s_block_stored(&b,
                   &(s_stored_t){.engine = c, .nblocks = 2, .first_token = 100, .group_idx = -1});
    assert_int_equal(s_batch_send(&b, f->st, 3), 0);
    s_send_empty(f->st, 5);
    assert_int_equal(st->ghosts, 2); /* 5 + 2 > 3: the older ones went */
}

/* Without a replay endpoint, a worker silent since the start is taken as empty. */
static void test_silent_worker_is_empty(void **state)
{
    s_fx_t *f = *state;
    collector_stream_tick(f->st, 1000);
    collector_stream_start(f->st);
    const collector_stream_stats_t *st = collector_stream_stats(f->st);
    collector_stream_tick(f->st, 5999);
    assert_int_equal(st->kv_state, COLLECTOR_KV_SYNCING);
    assert_string_equal(st->why, "waiting_for_batch_0");
    collector_stream_tick(f->st, 6000);
    assert_int_equal(st->kv_state, COLLECTOR_KV_EXACT);
    assert_string_equal(st->why, "no_batch_published");
    assert_int_equal(st->state_since_ms, 6000);
    /* its first batch says otherwise: we joined late */
    s_send_empty(f->st, 3);
    assert_int_equal(st->state, COLLECTOR_STATE_RECOVERING);
    assert_string_equal(st->why, "history_unknown");
    /* batch 0 of it (a restart) is a known base again */
    s_send_empty(f->st, 0);
    assert_int_equal(st->kv_state, COLLECTOR_KV_EXACT);
}

/* ---- checkpoints: images and resumes ---- */

static void s_discard(void *arg, const collector_op_t *op)
{
    (void)arg;
    (void)op;
}

/* The image of a worker that applied f->b[0..last] (exact). */
static collector_stream_image_t s_image_of(s_rfx_t *f, uint64_t last)
{
    collector_stream_t *src = collector_stream_new("w0", 7, s_discard, NULL);
    assert_non_null(src);
    for (uint64_t i = 0; i <= last; i++)
        assert_int_equal(s_live(src, i, &f->b[i]), 0);
    collector_stream_image_t img;
    assert_int_equal(collector_stream_image(src, &img), 0);
    assert_int_equal(img.flags, COLLECTOR_IMAGE_BASE);
    assert_int_equal(img.last_seq, last);
    assert_int_equal(img.nblocks, 2 * (last + 1));
    assert_int_equal(img.nghosts, 0);
    assert_int_equal(img.block_size, 16);
    collector_stream_destroy(&src);
    return img;
}

static void test_resume_proven(void **state)
{
    s_rfx_t *f = *state;
    collector_stream_image_t img = s_image_of(f, 3);
    assert_int_equal(collector_stream_resume(f->st, &img), 0);
    collector_stream_image_free(&img);
    assert_int_equal(f->rec.nops, 1); /* CLEARED only: nothing before the proof */
    assert_int_equal(f->rec.ops[0].op, COLLECTOR_OP_CLEARED);
    const collector_stream_stats_t *st = collector_stream_stats(f->st);
    assert_int_equal(st->kv_state, COLLECTOR_KV_SYNCING);
    assert_string_equal(st->why, "resuming_checkpoint");
    assert_string_equal(st->resume, "resuming");
    assert_true(f->replay.running);
    assert_int_equal(f->replay.start_seq, 3);
    assert_true(s_held(f) == 0);                         /* not proven: not resent either */
    assert_int_equal(s_live(f->st, 5, &f->b[5]), 0);     /* kept */
    assert_int_equal(s_reply(f->st, 3, 3, &f->b[3]), 0); /* the same batch 3: proven */
    assert_string_equal(st->resume, "proven");
    assert_int_equal(f->rec.nops, 2);
    assert_int_equal(f->rec.ops[1].op, COLLECTOR_OP_STORED);
    assert_int_equal(f->rec.ops[1].n, 8);
    assert_int_equal(s_reply(f->st, 3, 4, &f->b[4]), 0);
    assert_int_equal(s_reply_end(f->st, 3), 0);
    assert_int_equal(st->kv_state, COLLECTOR_KV_EXACT);
    assert_string_equal(st->why, "checkpoint_resumed");
    assert_true(s_held(f) == s_expected(0, 5));
    assert_int_equal(st->degradations, 0);
}

static void test_resume_continued_or_evicted(void **state)
{
    s_rfx_t *f = *state;
    collector_stream_image_t img = s_image_of(f, 3);
    assert_int_equal(collector_stream_resume(f->st, &img), 0);
    /* batch 3 itself is gone but 4 is there: accepted as the continuation (as for a gap) */
    assert_int_equal(s_reply(f->st, 2, 4, &f->b[4]), 0);
    assert_int_equal(s_reply_end(f->st, 2), 0);
    const collector_stream_stats_t *st = collector_stream_stats(f->st);
    assert_string_equal(st->resume, "continued");
    assert_int_equal(st->kv_state, COLLECTOR_KV_EXACT);
    assert_true(s_held(f) == s_expected(0, 4));

    /* a collector down for longer than the worker's buffer: the checkpoint's blocks become
     * ghosts and the buffered history is applied */
    s_rec_t rec = {0};
    collector_stream_t *st2 = collector_stream_new("w0", 9, s_record, &rec);
    s_replay_t rp = {0};
    collector_stream_set_replay(st2, s_replay_cb, &rp);
    assert_int_equal(collector_stream_resume(st2, &img), 0);
    collector_stream_image_free(&img);
    assert_int_equal(s_reply(st2, 3, 6, &f->b[6]), 0);
    assert_int_equal(s_reply(st2, 3, 7, &f->b[7]), 0);
    assert_int_equal(s_reply_end(st2, 3), 0);
    const collector_stream_stats_t *s2 = collector_stream_stats(st2);
    assert_string_equal(s2->resume, "evicted");
    assert_int_equal(s2->state, COLLECTOR_STATE_RECOVERING);
    assert_string_equal(s2->why, "history_evicted");
    assert_int_equal(s2->ghosts, 8);
    assert_int_equal(s2->mapped, 4);
    assert_int_equal(s2->retry_at_ms, 0);
    assert_int_equal(s_count(&rec, COLLECTOR_OP_STORED), 2); /* 6 and 7, not the ghosts */
    collector_stream_destroy(&st2);
}

static void test_resume_dropped(void **state)
{
    s_rfx_t *f = *state;
    collector_stream_image_t img = s_image_of(f, 3);
    /* another process answers with another batch 3: a restart, rebuilt from 0 */
    assert_int_equal(collector_stream_resume(f->st, &img), 0);
    assert_int_equal(s_reply(f->st, 3, 3, &f->b[9]), 0);
    const collector_stream_stats_t *st = collector_stream_stats(f->st);
    assert_string_equal(st->resume, "restarted");
    assert_int_equal(st->restarts, 1);
    assert_int_equal(f->replay.start_seq, 0);
    assert_int_equal(s_reply(f->st, 3, 0, &f->b[0]), 0);
    assert_int_equal(s_reply_end(f->st, 3), 0);
    assert_int_equal(st->kv_state, COLLECTOR_KV_EXACT);
    assert_true(s_held(f) == s_expected(0, 0));

    /* nothing buffered at or after batch 3: not the process we saw; from 0, nothing either */
    s_rec_t rec = {0};
    s_replay_t rp = {0};
    collector_stream_t *s2 = collector_stream_new("w0", 9, s_record, &rec);
    collector_stream_set_replay(s2, s_replay_cb, &rp);
    assert_int_equal(collector_stream_resume(s2, &img), 0);
    assert_int_equal(s_reply_end(s2, 3), 0);
    assert_string_equal(collector_stream_stats(s2)->resume, "discarded");
    assert_true(rp.running);
    assert_int_equal(rp.start_seq, 0);
    assert_int_equal(s_reply_end(s2, 3), 0);
    assert_int_equal(collector_stream_kv_state(s2), COLLECTOR_KV_EXACT);
    assert_int_equal(collector_stream_stats(s2)->mapped, 0);
    collector_stream_destroy(&s2);

    /* a live batch at or below the checkpoint's last one: a new process */
    memset(&rp, 0, sizeof rp);
    s2 = collector_stream_new("w0", 9, s_record, &rec);
    collector_stream_set_replay(s2, s_replay_cb, &rp);
    assert_int_equal(collector_stream_resume(s2, &img), 0);
    assert_int_equal(s_live(s2, 1, &f->b[1]), 0);
    assert_string_equal(collector_stream_stats(s2)->resume, "restarted");
    assert_int_equal(collector_stream_stats(s2)->mapped, 0);
    collector_stream_destroy(&s2);

    /* the replay endpoint does not answer: not proven; the blocks become ghosts */
    memset(&rp, 0, sizeof rp);
    s2 = collector_stream_new("w0", 9, s_record, &rec);
    collector_stream_set_replay(s2, s_replay_cb, &rp);
    collector_stream_tick(s2, 100);
    assert_int_equal(collector_stream_resume(s2, &img), 0);
    collector_stream_tick(s2, 2100);
    const collector_stream_stats_t *ss = collector_stream_stats(s2);
    assert_string_equal(ss->resume, "failed");
    assert_int_equal(ss->state, COLLECTOR_STATE_RECOVERING);
    assert_int_equal(ss->ghosts, 8);
    assert_int_equal(ss->retry_at_ms, 3100);
    collector_stream_destroy(&s2);
    collector_stream_image_free(&img);
}

static void test_resume_without_replay(void **state)
{
    s_rfx_t *f = *state;
    collector_stream_image_t img = s_image_of(f, 3);
    s_rec_t rec = {0};
    collector_stream_t *s2 = collector_stream_new("w0", 9, s_record, &rec);
    assert_int_equal(collector_stream_resume(s2, &img), 0);
    assert_int_equal(collector_stream_kv_state(s2), COLLECTOR_KV_SYNCING);
    assert_int_equal(s_live(s2, 4, &f->b[4]), 0); /* the next one: continued */
    assert_string_equal(collector_stream_stats(s2)->resume, "continued");
    assert_int_equal(collector_stream_kv_state(s2), COLLECTOR_KV_EXACT);
    assert_int_equal(collector_stream_stats(s2)->mapped, 10);
    collector_stream_destroy(&s2);
    s2 = collector_stream_new("w0", 9, s_record, &rec);
    assert_int_equal(collector_stream_resume(s2, &img), 0);
    assert_int_equal(s_live(s2, 6, &f->b[6]), 0); /* a hole after it */
    const collector_stream_stats_t *ss = collector_stream_stats(s2);
    assert_string_equal(ss->resume, "failed");
    assert_int_equal(ss->state, COLLECTOR_STATE_RECOVERING);
    assert_string_equal(ss->why, "gap_without_replay");
    assert_int_equal(ss->ghosts, 8);
    assert_int_equal(ss->mapped, 2);
    /* its image says so, ghosts included; a flag set that is not an image is refused */
    collector_stream_image_t again;
    assert_int_equal(collector_stream_image(s2, &again), 0);
    assert_int_equal(again.flags, COLLECTOR_IMAGE_RECOVERING);
    assert_int_equal(again.nghosts, 8);
    assert_int_equal(again.nblocks, 2);
    again.flags = COLLECTOR_IMAGE_BASE | COLLECTOR_IMAGE_RECOVERING;
    assert_int_equal(collector_stream_resume(f->st, &again), IPL_E_INVAL);
    again.flags = 8;
    assert_int_equal(collector_stream_resume(f->st, &again), IPL_E_INVAL);
    collector_stream_image_free(&again);
    collector_stream_destroy(&s2);
    collector_stream_image_free(&img);
    /* nothing applied: nothing to save */
    assert_int_equal(collector_stream_image(f->st, &again), IPL_E_NOTFOUND);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_start_emits_cleared, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_chain_rehash_and_remove, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_removed_runs_are_coalesced, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_lora_and_extra_keys_use_other_hash_spaces, s_setup,
                                        s_teardown),
        cmocka_unit_test_setup_teardown(test_other_media_and_groups_are_skipped, s_setup,
                                        s_teardown),
        cmocka_unit_test_setup_teardown(test_no_replay_endpoint, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_startup_catch_up, s_rsetup, s_rteardown),
        cmocka_unit_test_setup_teardown(test_startup_idle_worker, s_rsetup, s_rteardown),
        cmocka_unit_test_setup_teardown(test_startup_worker_not_up_yet, s_rsetup, s_rteardown),
        cmocka_unit_test_setup_teardown(test_startup_history_evicted, s_rsetup, s_rteardown),
        cmocka_unit_test_setup_teardown(test_gap_replayed_in_order, s_rsetup, s_rteardown),
        cmocka_unit_test_setup_teardown(test_gap_replay_with_empty_payload_end, s_rsetup,
                                        s_rteardown),
        cmocka_unit_test_setup_teardown(test_gap_replay_evicted_recovers, s_rsetup, s_rteardown),
        cmocka_unit_test_setup_teardown(test_retries, s_rsetup, s_rteardown),
        cmocka_unit_test_setup_teardown(test_replay_timeout_and_refusal, s_rsetup, s_rteardown),
        cmocka_unit_test_setup_teardown(test_restarts, s_rsetup, s_rteardown),
        cmocka_unit_test_setup_teardown(test_restart_told_by_metrics, s_rsetup, s_rteardown),
        cmocka_unit_test_setup_teardown(test_restart_during_replay_and_overflow, s_rsetup,
                                        s_rteardown),
        cmocka_unit_test_setup_teardown(test_bad_replies, s_rsetup, s_rteardown),
        cmocka_unit_test_setup_teardown(test_malformed_input, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_recovery_promotes_ghost_chains, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_ghosts_are_bounded, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_silent_worker_is_empty, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_resume_proven, s_rsetup, s_rteardown),
        cmocka_unit_test_setup_teardown(test_resume_continued_or_evicted, s_rsetup, s_rteardown),
        cmocka_unit_test_setup_teardown(test_resume_dropped, s_rsetup, s_rteardown),
        cmocka_unit_test_setup_teardown(test_resume_without_replay, s_rsetup, s_rteardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
