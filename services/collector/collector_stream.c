/*
 * collector_stream — sequence tracking, vLLM event decoding and re-hashing for one worker.
 *
 * The engine→ours map is a small open-addressing table (linear probing, backward-shift
 * delete) of parallel key/value arrays; key 0 is kept aside (`zero_*`) so that 0 can mark an
 * empty slot while still being a legal engine hash.
 */
#include "collector_stream.h"

#include <assert.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "ipl_error.h"
#include "ipl_hash.h"
#include "ipl_log.h"
#include "ipl_vllm_kv.h"

#define S_MAP_INITIAL 1024u
#define S_LORA_MAX    1024u /* longer LoRA names are hashed by their first 1 KiB */

typedef struct {
    uint64_t *keys;
    uint64_t *vals;
    size_t cap, count;
    bool has_zero;
    uint64_t zero_val;
} s_map_t;

struct collector_stream {
    char *worker;
    collector_op_fn *fn;
    void *arg;
    collector_gap_fn *gap_fn;
    void *gap_arg;
    ipl_vllm_kv_decoder_t *decoder;
    s_map_t map;
    uint64_t *ours; /* scratch for one event's hashes */
    size_t ours_cap;
    uint32_t block_size;
    uint64_t batch_seq; /* seq of the batch being applied */
    collector_stream_stats_t stats;
};

/* ------------------------------------------------------------------------------------------ */
/* engine hash → our hash */

static inline size_t s_map_home(const s_map_t *m, uint64_t key)
{
    return (size_t)((key * 0x9e3779b97f4a7c15ULL) >> 32) & (m->cap - 1);
}

static int s_map_init(s_map_t *m)
{
    memset(m, 0, sizeof *m);
    m->cap = S_MAP_INITIAL;
    m->keys = calloc(m->cap, sizeof *m->keys);
    m->vals = malloc(m->cap * sizeof *m->vals);
    return (m->keys && m->vals) ? 0 : IPL_E_NOMEM;
}

static void s_map_free(s_map_t *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

static void s_map_clear(s_map_t *m)
{
    memset(m->keys, 0, m->cap * sizeof *m->keys);
    m->count = 0;
    m->has_zero = false;
}

static size_t s_map_size(const s_map_t *m)
{
    return m->count + (m->has_zero ? 1 : 0);
}

static bool s_map_get(const s_map_t *m, uint64_t key, uint64_t *val)
{
    if (key == 0) {
        if (m->has_zero) *val = m->zero_val;
        return m->has_zero;
    }
    for (size_t i = s_map_home(m, key);; i = (i + 1) & (m->cap - 1)) {
        if (m->keys[i] == 0) return false;
        if (m->keys[i] == key) {
            *val = m->vals[i];
            return true;
        }
    }
}

static void s_map_insert_raw(uint64_t *keys, uint64_t *vals, size_t cap, size_t home, uint64_t key,
                             uint64_t val)
{
    size_t i = home;
    while (keys[i] != 0 && keys[i] != key)
        i = (i + 1) & (cap - 1);
    keys[i] = key;
    vals[i] = val;
}

static int s_map_put(s_map_t *m, uint64_t key, uint64_t val)
{
    if (key == 0) {
        m->has_zero = true;
        m->zero_val = val;
        return 0;
    }
    if ((m->count + 1) * 4 > m->cap * 3) {
        size_t ncap = m->cap * 2;
        uint64_t *keys = calloc(ncap, sizeof *keys);
        uint64_t *vals = malloc(ncap * sizeof *vals);
        if (!keys || !vals) {
            free(keys);
            free(vals);
            return IPL_E_NOMEM;
        }
        s_map_t grown = {.keys = keys, .vals = vals, .cap = ncap};
        for (size_t i = 0; i < m->cap; i++)
            if (m->keys[i])
                s_map_insert_raw(keys, vals, ncap, s_map_home(&grown, m->keys[i]), m->keys[i],
                                 m->vals[i]);
        free(m->keys);
        free(m->vals);
        m->keys = keys;
        m->vals = vals;
        m->cap = ncap;
    }
    size_t i = s_map_home(m, key);
    while (m->keys[i] != 0 && m->keys[i] != key)
        i = (i + 1) & (m->cap - 1);
    if (m->keys[i] == 0) m->count++;
    m->keys[i] = key;
    m->vals[i] = val;
    return 0;
}

/* Removes `key`, returning its value in *val. */
static bool s_map_take(s_map_t *m, uint64_t key, uint64_t *val)
{
    if (key == 0) {
        bool had = m->has_zero;
        *val = m->zero_val;
        m->has_zero = false;
        return had;
    }
    size_t mask = m->cap - 1;
    size_t i = s_map_home(m, key);
    while (m->keys[i] != key) {
        if (m->keys[i] == 0) return false;
        i = (i + 1) & mask;
    }
    *val = m->vals[i];
    for (size_t j = i;;) {
        j = (j + 1) & mask;
        if (m->keys[j] == 0) break;
        size_t home = s_map_home(m, m->keys[j]);
        bool movable = (i <= j) ? (home <= i || home > j) : (home <= i && home > j);
        if (movable) {
            m->keys[i] = m->keys[j];
            m->vals[i] = m->vals[j];
            i = j;
        }
    }
    m->keys[i] = 0;
    m->count--;
    return true;
}

/* ------------------------------------------------------------------------------------------ */

collector_stream_t *collector_stream_new(const char *worker, uint64_t epoch, collector_op_fn *fn,
                                         void *arg)
{
    assert(worker && fn);
    collector_stream_t *self = calloc(1, sizeof *self);
    if (!self) return NULL;
    self->worker = strdup(worker);
    self->fn = fn;
    self->arg = arg;
    self->decoder = ipl_vllm_kv_decoder_new();
    self->stats.epoch = epoch;
    self->stats.kv_state = COLLECTOR_KV_EXACT;
    if (!self->worker || !self->decoder || s_map_init(&self->map) != 0) {
        collector_stream_destroy(&self);
        return NULL;
    }
    return self;
}

void collector_stream_destroy(collector_stream_t **self_p)
{
    if (!self_p || !*self_p) return;
    collector_stream_t *self = *self_p;
    ipl_vllm_kv_decoder_destroy(&self->decoder);
    s_map_free(&self->map);
    free(self->ours);
    free(self->worker);
    free(self);
    *self_p = NULL;
}

void collector_stream_set_gap_handler(collector_stream_t *self, collector_gap_fn *fn, void *arg)
{
    assert(self);
    self->gap_fn = fn;
    self->gap_arg = arg;
}

static void s_emit(collector_stream_t *self, int op, const uint64_t *hashes, uint32_t n)
{
    collector_op_t o = {.op = op,
                        .hashes = hashes,
                        .nhashes = n,
                        .block_size = self->block_size,
                        .epoch = self->stats.epoch,
                        .src_seq = self->batch_seq};
    self->fn(self->arg, &o);
}

void collector_stream_start(collector_stream_t *self)
{
    assert(self);
    self->batch_seq = 0;
    s_emit(self, COLLECTOR_OP_CLEARED, NULL, 0);
}

static void s_set_state(collector_stream_t *self, int state, const char *why)
{
    if (self->stats.kv_state == state) return;
    self->stats.kv_state = state;
    IPL_INFO("kv_state", "worker=%s state=%s why=%s", self->worker,
             state == COLLECTOR_KV_EXACT     ? "exact"
             : state == COLLECTOR_KV_SYNCING ? "syncing"
                                             : "degraded",
             why);
}

/* Worker forgot everything (restart or AllBlocksCleared): so do we, and we are exact again. */
static void s_forget(collector_stream_t *self, const char *why)
{
    s_map_clear(&self->map);
    s_emit(self, COLLECTOR_OP_CLEARED, NULL, 0);
    s_set_state(self, COLLECTOR_KV_EXACT, why);
}

static int s_reserve(collector_stream_t *self, size_t n)
{
    if (n <= self->ours_cap) return 0;
    size_t cap = self->ours_cap ? self->ours_cap : 64;
    while (cap < n)
        cap *= 2;
    uint64_t *p = realloc(self->ours, cap * sizeof *p);
    if (!p) return IPL_E_NOMEM;
    self->ours = p;
    self->ours_cap = cap;
    return 0;
}

/* The key of a private hash space for blocks whose extra keys we cannot reproduce. */
static uint64_t s_private_key(void)
{
    static uint64_t key;
    if (!key) key = ipl_hash_key(NULL, "\001inferplane:unreproducible-extra-keys");
    return key;
}

static void s_stored(collector_stream_t *self, const ipl_vllm_kv_event_t *ev)
{
    if (ev->block_size == 0 || ev->nblocks == 0 ||
        (uint64_t)ev->nblocks * ev->block_size != ev->ntokens) {
        self->stats.skipped_events++;
        IPL_LOG_EVERY(10, IPL_LOG_WARN, "event_skipped",
                      "worker=%s reason=token_count blocks=%u block_size=%u tokens=%u",
                      self->worker, ev->nblocks, ev->block_size, ev->ntokens);
        return;
    }
    uint64_t parent;
    if (ev->has_parent) {
        if (!s_map_get(&self->map, ev->parent_hash, &parent)) {
            self->stats.unknown_parents++;
            IPL_LOG_EVERY(10, IPL_LOG_WARN, "unknown_parent",
                          "worker=%s parent=0x%016" PRIx64 " blocks=%u seq=%" PRIu64, self->worker,
                          ev->parent_hash, ev->nblocks, self->batch_seq);
            s_set_state(self, COLLECTOR_KV_SYNCING, "unknown_parent");
            return;
        }
    } else {
        char lora[S_LORA_MAX + 1];
        const char *name = NULL;
        if (ev->lora_name) {
            uint32_t len = ev->lora_name_len < S_LORA_MAX ? ev->lora_name_len : S_LORA_MAX;
            memcpy(lora, ev->lora_name, len);
            lora[len] = '\0';
            name = lora;
        }
        parent = ipl_hash_chain_start(ipl_hash_key(name, NULL));
    }
    if (ev->has_extra_keys && !ev->lora_name) {
        /* cache salt / multimodal keys change vLLM's chain; we cannot reproduce them */
        parent ^= s_private_key();
        self->stats.private_blocks += ev->nblocks;
    }
    if (s_reserve(self, ev->nblocks) != 0) {
        self->stats.skipped_events++;
        s_set_state(self, COLLECTOR_KV_SYNCING, "out_of_memory");
        return;
    }
    size_t n = ipl_block_hashes(parent, ev->token_ids, ev->ntokens, ev->block_size, self->ours,
                                ev->nblocks);
    for (size_t i = 0; i < n; i++) {
        if (s_map_put(&self->map, ev->block_hashes[i], self->ours[i]) != 0) {
            n = i;
            s_set_state(self, COLLECTOR_KV_SYNCING, "out_of_memory");
            break;
        }
    }
    self->block_size = ev->block_size;
    if (n > 0) {
        self->stats.blocks_stored += n;
        s_emit(self, COLLECTOR_OP_STORED, self->ours, (uint32_t)n);
    }
}

static void s_removed(collector_stream_t *self, const ipl_vllm_kv_event_t *ev)
{
    if (s_reserve(self, ev->nblocks) != 0) {
        s_set_state(self, COLLECTOR_KV_SYNCING, "out_of_memory");
        return;
    }
    uint32_t n = 0;
    for (uint32_t i = 0; i < ev->nblocks; i++) {
        if (s_map_take(&self->map, ev->block_hashes[i], &self->ours[n]))
            n++;
        else
            self->stats.unknown_removed++;
    }
    if (n > 0) {
        self->stats.blocks_removed += n;
        s_emit(self, COLLECTOR_OP_REMOVED, self->ours, n);
    }
}

static bool s_bytes_eq(const char *s, uint32_t len, const char *lit)
{
    return strlen(lit) == len && memcmp(s, lit, len) == 0;
}

static int s_on_event(void *arg, const ipl_vllm_kv_event_t *ev)
{
    collector_stream_t *self = arg;
    self->stats.events++;
    if (ev->kind == IPL_VLLM_KV_ALL_CLEARED) {
        self->stats.clears++;
        s_forget(self, "all_blocks_cleared");
        return 0;
    }
    /* Only the GPU prefix cache of full-attention KV group 0 is what a request can hit the way
     * the gateway hashes it (VLLM-INTEROP §1.5: hybrid groups and the CPU tier are other hash
     * spaces). */
    if ((ev->medium && !s_bytes_eq(ev->medium, ev->medium_len, "GPU")) || ev->group_idx > 0 ||
        (ev->spec_kind && !s_bytes_eq(ev->spec_kind, ev->spec_kind_len, "full_attention"))) {
        self->stats.skipped_events++;
        return 0;
    }
    if (ev->kind == IPL_VLLM_KV_BLOCK_STORED)
        s_stored(self, ev);
    else if (ev->kind == IPL_VLLM_KV_BLOCK_REMOVED)
        s_removed(self, ev);
    return 0;
}

/* Sequence bookkeeping before a batch is applied. */
static void s_sequence(collector_stream_t *self, uint64_t seq)
{
    collector_stream_stats_t *st = &self->stats;
    if (!st->has_seq) {
        st->has_seq = true;
        return; /* the first batch we see: whatever its number */
    }
    if (seq <= st->last_seq) {
        /* vLLM numbers batches from 0 in each process: going back means a new process */
        st->restarts++;
        st->epoch++;
        IPL_WARN("worker_restarted",
                 "worker=%s last_seq=%" PRIu64 " seq=%" PRIu64 " epoch=%" PRIu64, self->worker,
                 st->last_seq, seq, st->epoch);
        s_forget(self, "worker_restart");
        return;
    }
    if (seq > st->last_seq + 1) {
        uint64_t first = st->last_seq + 1;
        st->gaps++;
        st->missed_batches += seq - first;
        IPL_LOG_EVERY(5, IPL_LOG_WARN, "sequence_gap",
                      "worker=%s expected=%" PRIu64 " got=%" PRIu64 " missed=%" PRIu64,
                      self->worker, first, seq, seq - first);
        bool replaying = self->gap_fn && self->gap_fn(self->gap_arg, first, seq);
        if (!replaying) s_set_state(self, COLLECTOR_KV_SYNCING, "sequence_gap");
    }
}

int collector_stream_message(collector_stream_t *self, const uint8_t *seq_frame, size_t seq_len,
                             const uint8_t *payload, size_t payload_len)
{
    assert(self);
    uint64_t seq;
    if (ipl_vllm_kv_seq(seq_frame, seq_len, &seq) != 0) {
        self->stats.decode_errors++;
        return IPL_E_INVAL;
    }
    s_sequence(self, seq);
    self->stats.last_seq = seq;
    self->batch_seq = seq;
    int rc = ipl_vllm_kv_decode(self->decoder, payload, payload_len, NULL, s_on_event, self);
    self->stats.mapped = s_map_size(&self->map);
    if (rc != 0) {
        self->stats.decode_errors++;
        s_set_state(self, COLLECTOR_KV_SYNCING, "undecodable_batch");
        return rc;
    }
    self->stats.batches++;
    return 0;
}

int collector_stream_kv_state(const collector_stream_t *self)
{
    assert(self);
    return self->stats.kv_state;
}

uint32_t collector_stream_block_size(const collector_stream_t *self)
{
    assert(self);
    return self->block_size;
}

const collector_stream_stats_t *collector_stream_stats(const collector_stream_t *self)
{
    assert(self);
    return &self->stats;
}
