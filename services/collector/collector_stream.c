/*
 * collector_stream — sequence tracking, replay, vLLM event decoding and re-hashing for one
 * worker (see the header for the exactness rules).
 *
 * The engine→ours map is a small open-addressing table (linear probing, backward-shift
 * delete) of key/value pairs, so a probe touches one cache line; key 0 is kept aside
 * (`zero_*`) so that 0 can mark an empty slot while still being a legal engine hash.
 *
 * Flow of one batch:
 *
 *   message() ── live seq below the previous live one? ── s_restart()
 *       │ replay running: s_pending_push() (applied after the replay)
 *       ▼
 *   s_in_order() ── nothing applied yet: seq 0 → s_rebase(); else rebuild replay / DEGRADED
 *       │          seq <= last applied: duplicate    seq > last + 1: gap replay / DEGRADED
 *       ▼
 *   s_apply() ── decode ── s_on_event() ── s_stored / s_removed / AllBlocksCleared → s_rebase()
 *                  └ end of batch: s_flush_removed() (a run of BlockRemoved is one REMOVED op)
 *
 *   replay_reply() ── first reply checked (batch 0 / the last applied batch's digest) ──
 *       s_apply() ... end marker ── s_replay_end() ── success? ── s_drain() the buffered
 *                                                   └ no ── s_replay_fail() → DEGRADED
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
#define S_NO_NEED     UINT64_MAX

typedef struct {
    uint64_t key; /* 0: empty slot */
    uint64_t val;
} s_pair_t;

typedef struct {
    s_pair_t *slot; /* key and value side by side: one cache miss per probe, not two */
    size_t cap, count;
    bool has_zero;
    uint64_t zero_val;
} s_map_t;

/* A live batch kept while a replay runs (owns its copy of the payload). */
typedef struct {
    uint64_t seq;
    uint8_t *data;
    size_t len;
} s_pending_t;

typedef enum { S_REPLAY_NONE = 0, S_REPLAY_GAP, S_REPLAY_REBUILD } s_replay_kind_t;

struct collector_stream {
    char *worker;
    collector_op_fn *fn;
    void *arg;
    collector_replay_fn *replay_fn;
    void *replay_arg;
    collector_stream_limits_t lim;
    ipl_vllm_kv_decoder_t *decoder;
    s_map_t map;
    uint64_t *ours; /* scratch for one event's hashes */
    size_t ours_cap;
    uint64_t *removed; /* engine hashes of the batch's current BlockRemoved run (s_removed) */
    size_t removed_cap, nremoved;
    uint32_t block_size;
    uint64_t batch_seq; /* seq of the batch being applied */
    uint64_t now_ms;
    /* exactness */
    bool base_known; /* every batch since a known base was applied */
    bool degraded;
    bool incomplete;      /* blocks skipped since the base (index ⊂ cache) */
    bool dirty;           /* STORED sent since the last CLEARED */
    uint64_t last_digest; /* of the last applied payload */
    bool has_live;
    uint64_t live_last; /* the last live seq received */
    /* replay */
    s_replay_kind_t replay;
    uint64_t replay_start;
    uint64_t replay_need; /* must reach this seq (S_NO_NEED: nothing in particular) */
    bool replay_first;    /* no reply batch seen yet */
    bool replay_retry;    /* it is a DEGRADED retry */
    uint64_t replay_deadline_ms;
    uint64_t backoff_ms;
    s_pending_t *pending;
    size_t npending, pending_cap, pending_bytes;
    collector_stream_stats_t stats;
};

/* ------------------------------------------------------------------------------------------ */
/* engine hash → our hash */

static inline size_t s_map_home(const s_map_t *m, uint64_t key)
{
    return (size_t)((key * 0x9e3779b97f4a7c15ULL) >> 32) & (m->cap - 1);
}

/* Starts loading the home slot of `key` (a prefetch never faults). */
static inline void s_map_prefetch(const s_map_t *m, uint64_t key)
{
    __builtin_prefetch(&m->slot[s_map_home(m, key)]);
}

static int s_map_init(s_map_t *m)
{
    memset(m, 0, sizeof *m);
    m->cap = S_MAP_INITIAL;
    m->slot = calloc(m->cap, sizeof *m->slot);
    return m->slot ? 0 : IPL_E_NOMEM;
}

static void s_map_free(s_map_t *m)
{
    free(m->slot);
    memset(m, 0, sizeof *m);
}

static void s_map_clear(s_map_t *m)
{
    memset(m->slot, 0, m->cap * sizeof *m->slot);
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
        if (m->slot[i].key == 0) return false;
        if (m->slot[i].key == key) {
            *val = m->slot[i].val;
            return true;
        }
    }
}

static int s_map_put(s_map_t *m, uint64_t key, uint64_t val)
{
    if (key == 0) {
        m->has_zero = true;
        m->zero_val = val;
        return 0;
    }
    if ((m->count + 1) * 4 > m->cap * 3) {
        s_map_t grown = {.cap = m->cap * 2};
        grown.slot = calloc(grown.cap, sizeof *grown.slot);
        if (!grown.slot) return IPL_E_NOMEM;
        for (size_t i = 0; i < m->cap; i++) {
            if (!m->slot[i].key) continue;
            size_t j = s_map_home(&grown, m->slot[i].key);
            while (grown.slot[j].key)
                j = (j + 1) & (grown.cap - 1);
            grown.slot[j] = m->slot[i];
        }
        free(m->slot);
        m->slot = grown.slot;
        m->cap = grown.cap;
    }
    size_t i = s_map_home(m, key);
    while (m->slot[i].key != 0 && m->slot[i].key != key)
        i = (i + 1) & (m->cap - 1);
    if (m->slot[i].key == 0) m->count++;
    m->slot[i] = (s_pair_t){key, val};
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
    while (m->slot[i].key != key) {
        if (m->slot[i].key == 0) return false;
        i = (i + 1) & mask;
    }
    *val = m->slot[i].val;
    /* backward-shift delete: no tombstones */
    for (size_t j = i;;) {
        j = (j + 1) & mask;
        if (m->slot[j].key == 0) break;
        size_t home = s_map_home(m, m->slot[j].key);
        bool movable = (i <= j) ? (home <= i || home > j) : (home <= i && home > j);
        if (movable) {
            m->slot[i] = m->slot[j];
            i = j;
        }
    }
    m->slot[i].key = 0;
    m->count--;
    return true;
}

/* ------------------------------------------------------------------------------------------ */
/* life cycle */

static const collector_stream_limits_t s_default_limits = {
    .replay_timeout_ms = 2000,
    .retry_min_ms = 1000,
    .retry_max_ms = 30000,
    .max_pending = 65536,
    .max_pending_bytes = 64u << 20,
};

collector_stream_t *collector_stream_new(const char *worker, uint64_t epoch, collector_op_fn *fn,
                                         void *arg)
{
    assert(worker && fn);
    collector_stream_t *self = calloc(1, sizeof *self);
    if (!self) return NULL;
    self->worker = strdup(worker);
    self->fn = fn;
    self->arg = arg;
    self->lim = s_default_limits;
    self->backoff_ms = self->lim.retry_min_ms;
    self->decoder = ipl_vllm_kv_decoder_new();
    self->stats.epoch = epoch;
    self->stats.kv_state = COLLECTOR_KV_SYNCING;
    self->stats.why = "start";
    if (!self->worker || !self->decoder || s_map_init(&self->map) != 0) {
        collector_stream_destroy(&self);
        return NULL;
    }
    return self;
}

static void s_pending_clear(collector_stream_t *self)
{
    for (size_t i = 0; i < self->npending; i++)
        free(self->pending[i].data);
    self->npending = 0;
    self->pending_bytes = 0;
}

void collector_stream_destroy(collector_stream_t **self_p)
{
    if (!self_p || !*self_p) return;
    collector_stream_t *self = *self_p;
    s_pending_clear(self);
    free(self->pending);
    ipl_vllm_kv_decoder_destroy(&self->decoder);
    s_map_free(&self->map);
    free(self->ours);
    free(self->removed);
    free(self->worker);
    free(self);
    *self_p = NULL;
}

void collector_stream_set_replay(collector_stream_t *self, collector_replay_fn *fn, void *arg)
{
    assert(self);
    self->replay_fn = fn;
    self->replay_arg = arg;
}

void collector_stream_set_limits(collector_stream_t *self, const collector_stream_limits_t *lim)
{
    assert(self && lim);
    const collector_stream_limits_t *d = &s_default_limits;
    self->lim = (collector_stream_limits_t){
        .replay_timeout_ms = lim->replay_timeout_ms ? lim->replay_timeout_ms : d->replay_timeout_ms,
        .retry_min_ms = lim->retry_min_ms ? lim->retry_min_ms : d->retry_min_ms,
        .retry_max_ms = lim->retry_max_ms ? lim->retry_max_ms : d->retry_max_ms,
        .max_pending = lim->max_pending ? lim->max_pending : d->max_pending,
        .max_pending_bytes = lim->max_pending_bytes ? lim->max_pending_bytes : d->max_pending_bytes,
    };
    if (self->lim.retry_max_ms < self->lim.retry_min_ms)
        self->lim.retry_max_ms = self->lim.retry_min_ms;
    self->backoff_ms = self->lim.retry_min_ms;
}

const char *collector_kv_state_name(int kv_state)
{
    return kv_state == COLLECTOR_KV_EXACT     ? "exact"
           : kv_state == COLLECTOR_KV_SYNCING ? "syncing"
                                              : "degraded";
}

/* ------------------------------------------------------------------------------------------ */
/* state */

static void s_flush_removed(collector_stream_t *self);

/* Every op goes through here. The pending removals (s_removed) are applied and sent first, so
 * the aggregator sees the operations in the order of the events. */
static void s_emit(collector_stream_t *self, int op, uint64_t parent, const uint64_t *hashes,
                   uint32_t n)
{
    s_flush_removed(self);
    collector_op_t o = {.op = op,
                        .parent = parent,
                        .hashes = hashes,
                        .nhashes = n,
                        .block_size = self->block_size,
                        .epoch = self->stats.epoch,
                        .src_seq = self->batch_seq};
    self->fn(self->arg, &o);
}

/* Recomputes kv_state from the flags; logs a change with its cause. */
static void s_update_state(collector_stream_t *self, const char *why)
{
    int state = self->degraded                                            ? COLLECTOR_KV_DEGRADED
                : (self->replay || !self->base_known || self->incomplete) ? COLLECTOR_KV_SYNCING
                                                                          : COLLECTOR_KV_EXACT;
    if (why) self->stats.why = why;
    self->stats.replaying = self->replay != S_REPLAY_NONE;
    self->stats.pending = self->npending;
    if (self->stats.kv_state == state) return;
    /* DEGRADED is news; so is its end; a replay's SYNCING↔EXACT is routine */
    int level = state == COLLECTOR_KV_DEGRADED                  ? IPL_LOG_WARN
                : self->stats.kv_state == COLLECTOR_KV_DEGRADED ? IPL_LOG_INFO
                                                                : IPL_LOG_DEBUG;
    self->stats.kv_state = state;
    ipl_log(level, "kv_state", "worker=%s state=%s why=%s", self->worker,
            collector_kv_state_name(state), self->stats.why);
}

/* Forgets every block of the worker, here and (CLEARED) at the aggregator. */
static void s_clear(collector_stream_t *self)
{
    s_flush_removed(self); /* they were before the clear */
    bool had = s_map_size(&self->map) > 0 || self->dirty;
    s_map_clear(&self->map);
    self->stats.mapped = 0;
    if (had) s_emit(self, COLLECTOR_OP_CLEARED, 0, NULL, 0);
    self->dirty = false;
}

/* From here on the worker's whole state is known (its cache is empty now). */
static void s_rebase(collector_stream_t *self, const char *why)
{
    s_clear(self);
    self->base_known = true;
    self->degraded = false;
    self->incomplete = false;
    self->stats.retry_at_ms = 0;
    self->backoff_ms = self->lim.retry_min_ms;
    s_update_state(self, why);
}

static void s_schedule_retry(collector_stream_t *self)
{
    if (!self->replay_fn) return;
    self->stats.retry_at_ms = self->now_ms + self->backoff_ms;
    self->backoff_ms = self->backoff_ms * 2 > self->lim.retry_max_ms ? self->lim.retry_max_ms
                                                                     : self->backoff_ms * 2;
}

/* The base is lost: entries cleared (once), retries scheduled. */
static void s_degrade(collector_stream_t *self, const char *why)
{
    if (!self->degraded) {
        self->degraded = true;
        self->stats.degradations++;
        s_clear(self);
    }
    self->base_known = false;
    self->incomplete = false;
    if (self->stats.retry_at_ms == 0) s_schedule_retry(self);
    s_update_state(self, why);
}

/* ------------------------------------------------------------------------------------------ */
/* events */

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

/* Blocks could not be recorded: the index is now a strict subset of the worker's cache. */
static void s_incomplete(collector_stream_t *self, const char *why)
{
    self->incomplete = true;
    if (!self->degraded) s_update_state(self, why); /* DEGRADED keeps its own cause */
}

/* The engine's hashes cover extra keys our chain does not: anything beyond the adapter's
 * name — a cache salt (first block) or multimodal keys, with or without a LoRA. A LoRA
 * request's blocks carry (lora_name,) each, which the adapter's hash space reproduces; an
 * older vLLM that sends no extra_keys at all is taken at its lora_name. */
static bool s_unreproducible(const ipl_vllm_kv_event_t *ev)
{
    if (!ev->has_extra_keys) return false;
    if (!ev->lora_name || !ev->extra_key_str) return true;
    return ev->extra_key_str_len != ev->lora_name_len ||
           memcmp(ev->extra_key_str, ev->lora_name, ev->lora_name_len) != 0;
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
    uint64_t parent, hint = 0; /* hint: our hash of the parent block, for the index's layout */
    if (ev->has_parent) {
        if (!s_map_get(&self->map, ev->parent_hash, &parent)) {
            self->stats.unknown_parents++;
            IPL_LOG_EVERY(10, IPL_LOG_WARN, "unknown_parent",
                          "worker=%s parent=0x%016" PRIx64 " blocks=%u seq=%" PRIu64, self->worker,
                          ev->parent_hash, ev->nblocks, self->batch_seq);
            s_incomplete(self, "unknown_parent");
            return;
        }
        hint = parent;
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
    if (s_unreproducible(ev)) {
        /* cache salt / multimodal keys change vLLM's chain; we cannot reproduce them */
        parent ^= s_private_key();
        self->stats.private_blocks += ev->nblocks;
    }
    if (s_reserve(self, ev->nblocks) != 0) {
        self->stats.skipped_events++;
        s_incomplete(self, "out_of_memory");
        return;
    }
    size_t n = ipl_block_hashes(parent, ev->token_ids, ev->ntokens, ev->block_size, self->ours,
                                ev->nblocks);
    for (size_t i = 0; i < n; i++) {
        if (i + 4 < n) s_map_prefetch(&self->map, ev->block_hashes[i + 4]);
        if (s_map_put(&self->map, ev->block_hashes[i], self->ours[i]) != 0) {
            n = i;
            s_incomplete(self, "out_of_memory");
            break;
        }
    }
    self->block_size = ev->block_size;
    if (n > 0) {
        self->stats.blocks_stored += n;
        self->dirty = true;
        s_emit(self, COLLECTOR_OP_STORED, hint, self->ours, (uint32_t)n);
    }
}

/* vLLM sends one BlockRemoved per evicted block, many in a row. A run of consecutive
 * removals of a batch is handled as one: s_removed only collects the engine hashes, and
 * s_flush_removed — called before anything else touches the map or sends an op (s_on_event,
 * s_clear, s_emit) and at the end of the batch (s_apply) — takes them from the map with the
 * slots of the next ones prefetched, and sends one REMOVED op. A KV_EVENT carries at most
 * IPL_VLLM_KV_MAX_BLOCKS hashes from here. */
static void s_removed(collector_stream_t *self, const ipl_vllm_kv_event_t *ev)
{
    if (self->nremoved + ev->nblocks > IPL_VLLM_KV_MAX_BLOCKS) s_flush_removed(self);
    size_t need = self->nremoved + ev->nblocks;
    if (need > self->removed_cap) {
        size_t cap = self->removed_cap ? self->removed_cap : 64;
        while (cap < need)
            cap *= 2;
        uint64_t *p = realloc(self->removed, cap * sizeof *p);
        if (!p) {
            /* the blocks stay in the index although the worker dropped them: not a subset
             * any more, so this is a lost base, not an incomplete one */
            s_degrade(self, "out_of_memory");
            return;
        }
        self->removed = p;
        self->removed_cap = cap;
    }
    memcpy(self->removed + self->nremoved, ev->block_hashes,
           ev->nblocks * sizeof *ev->block_hashes);
    self->nremoved += ev->nblocks;
}

#define S_PREFETCH_MAP 8 /* map slots loaded ahead in a run of removals */

static void s_flush_removed(collector_stream_t *self)
{
    size_t k = self->nremoved;
    if (k == 0) return;
    self->nremoved = 0; /* first: s_degrade and s_emit below flush again */
    if (s_reserve(self, k) != 0) {
        s_degrade(self, "out_of_memory"); /* as in s_removed */
        return;
    }
    const uint64_t *engine = self->removed;
    for (size_t i = 0; i < k && i < S_PREFETCH_MAP; i++)
        s_map_prefetch(&self->map, engine[i]);
    uint32_t n = 0;
    for (size_t i = 0; i < k; i++) {
        if (i + S_PREFETCH_MAP < k) s_map_prefetch(&self->map, engine[i + S_PREFETCH_MAP]);
        if (s_map_take(&self->map, engine[i], &self->ours[n]))
            n++;
        else
            self->stats.unknown_removed++;
    }
    if (n > 0) {
        self->stats.blocks_removed += n;
        s_emit(self, COLLECTOR_OP_REMOVED, 0, self->ours, n);
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
    /* any other event sees the map (and the aggregator) after the removals before it */
    if (ev->kind != IPL_VLLM_KV_BLOCK_REMOVED) s_flush_removed(self);
    if (ev->kind == IPL_VLLM_KV_ALL_CLEARED) {
        self->stats.clears++;
        s_rebase(self, "all_blocks_cleared");
        return 0;
    }
    /* Only the GPU prefix cache of full-attention KV group 0 is what a request can hit the way
     * the gateway hashes it (vllm-project/vllm: vllm/distributed/kv_events.py, BlockStored's
     * medium, group_idx and kv_cache_spec_kind: hybrid groups and the CPU tier are other hash
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

/* Applies one batch, in order. A batch that does not decode is lost: DEGRADED. */
static int s_apply(collector_stream_t *self, uint64_t seq, const uint8_t *payload, size_t len)
{
    self->batch_seq = seq;
    int rc = ipl_vllm_kv_decode(self->decoder, payload, len, NULL, s_on_event, self);
    s_flush_removed(self); /* the batch's last run of removals */
    self->stats.has_seq = true;
    self->stats.last_seq = seq;
    self->last_digest = ipl_hash_bytes(payload, len);
    self->stats.mapped = s_map_size(&self->map);
    if (rc != 0) {
        self->stats.decode_errors++;
        IPL_LOG_EVERY(5, IPL_LOG_WARN, "batch_undecodable", "worker=%s seq=%" PRIu64 " error=%s",
                      self->worker, seq, ipl_strerror(rc));
        s_degrade(self, "undecodable_batch");
        return rc;
    }
    self->stats.batches++;
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* replay */

static int s_pending_push(collector_stream_t *self, uint64_t seq, uint8_t *data, size_t len)
{
    if (self->npending >= self->lim.max_pending ||
        self->pending_bytes + len > self->lim.max_pending_bytes)
        return IPL_E_RANGE;
    if (self->npending == self->pending_cap) {
        size_t cap = self->pending_cap ? self->pending_cap * 2 : 64;
        s_pending_t *p = realloc(self->pending, cap * sizeof *p);
        if (!p) return IPL_E_NOMEM;
        self->pending = p;
        self->pending_cap = cap;
    }
    self->pending[self->npending++] = (s_pending_t){seq, data, len};
    self->pending_bytes += len;
    return 0;
}

/* Keeps a copy of a live batch for after the replay. */
static int s_pending_copy(collector_stream_t *self, uint64_t seq, const uint8_t *payload,
                          size_t len)
{
    uint8_t *copy = malloc(len ? len : 1);
    if (!copy) return IPL_E_NOMEM;
    if (len) memcpy(copy, payload, len);
    int rc = s_pending_push(self, seq, copy, len);
    if (rc != 0) free(copy);
    return rc;
}

static bool s_replay_begin(collector_stream_t *self, s_replay_kind_t kind, uint64_t start,
                           uint64_t need)
{
    if (!self->replay_fn) return false;
    self->stats.replays++;
    if (!self->replay_fn(self->replay_arg, COLLECTOR_REPLAY_START, start)) {
        self->stats.replays_failed++;
        IPL_LOG_EVERY(5, IPL_LOG_WARN, "replay_failed",
                      "worker=%s start_seq=%" PRIu64 " reason=cannot_start", self->worker, start);
        return false;
    }
    self->replay = kind;
    self->replay_retry = false;
    self->replay_start = start;
    self->replay_need = need;
    self->replay_first = true;
    self->replay_deadline_ms = self->now_ms + self->lim.replay_timeout_ms;
    IPL_DEBUG("replay_started", "worker=%s kind=%s start_seq=%" PRIu64, self->worker,
              kind == S_REPLAY_GAP ? "gap" : "rebuild", start);
    s_update_state(self, kind == S_REPLAY_GAP ? "replaying_gap" : "replaying_history");
    return true;
}

static void s_replay_stop(collector_stream_t *self)
{
    if (!self->replay) return;
    self->replay = S_REPLAY_NONE;
    self->replay_fn(self->replay_arg, COLLECTOR_REPLAY_STOP, 0);
    s_update_state(self, NULL);
}

static int s_in_order(collector_stream_t *self, uint64_t seq, const uint8_t *payload, size_t len,
                      uint8_t *owned);

/* Applies the live batches kept during a replay, in order. One of them may start another
 * replay: the rest is then kept again, behind it. */
static void s_drain(collector_stream_t *self)
{
    s_pending_t *list = self->pending;
    size_t n = self->npending;
    self->pending = NULL;
    self->npending = self->pending_cap = self->pending_bytes = 0;
    for (size_t i = 0; i < n; i++) {
        s_pending_t *p = &list[i];
        if (self->replay) {
            if (s_pending_push(self, p->seq, p->data, p->len) != 0) free(p->data);
            continue;
        }
        s_in_order(self, p->seq, p->data, p->len, p->data); /* takes p->data */
    }
    free(list);
}

static void s_replay_fail(collector_stream_t *self, const char *why)
{
    self->stats.replays_failed++;
    IPL_LOG_EVERY(5, IPL_LOG_WARN, "replay_failed",
                  "worker=%s kind=%s start_seq=%" PRIu64 " reason=%s", self->worker,
                  self->replay == S_REPLAY_GAP ? "gap" : "rebuild", self->replay_start, why);
    bool retry = self->replay_retry;
    s_replay_stop(self);
    if (retry) s_schedule_retry(self); /* the next one later (backoff doubled) */
    s_degrade(self, why);
    s_drain(self);
}

static void s_replay_end(collector_stream_t *self)
{
    bool nothing = self->replay_first;
    bool reached = self->replay_need == S_NO_NEED ||
                   (self->stats.has_seq && self->stats.last_seq >= self->replay_need);
    if (nothing && self->replay == S_REPLAY_REBUILD && self->replay_need == S_NO_NEED) {
        /* The worker has no buffered batch at all: it never published one (or keeps none).
         * Not a known base; batch 0, when it comes live, will be. A retry of a worker we have
         * seen batches of learns nothing new, though: it stays DEGRADED. */
        if (self->replay_retry && self->stats.has_seq) {
            s_replay_fail(self, "nothing_buffered");
            return;
        }
        self->degraded = false; /* e.g. its replay endpoint was not up yet at start */
        self->stats.retry_at_ms = 0;
        self->stats.replays_ok++;
        s_replay_stop(self);
        s_update_state(self, "waiting_for_batch_0");
        s_drain(self);
        return;
    }
    if (nothing || !reached) {
        s_replay_fail(self, nothing ? "nothing_buffered" : "replay_incomplete");
        return;
    }
    self->stats.replays_ok++;
    IPL_DEBUG("replay_done", "worker=%s last_seq=%" PRIu64, self->worker, self->stats.last_seq);
    s_replay_stop(self);
    s_update_state(self, "replayed");
    s_drain(self);
}

/* The first reply of a replay: proof that it continues what we applied. Returns true when the
 * batch is to be applied, false when it was handled (skipped or the replay ended). */
static bool s_replay_first(collector_stream_t *self, uint64_t seq, const uint8_t *payload,
                           size_t len)
{
    self->replay_first = false;
    if (self->replay == S_REPLAY_REBUILD) {
        if (seq != 0) {
            s_replay_fail(self, "history_evicted");
            return false;
        }
        self->stats.has_seq = false;
        s_rebase(self, "replayed_from_batch_0");
        return true;
    }
    uint64_t last = self->stats.last_seq;
    if (seq == last) {
        if (ipl_hash_bytes(payload, len) == self->last_digest) return false; /* proven */
        /* another process answers: the one we followed is gone */
        self->stats.restarts++;
        self->stats.epoch++;
        IPL_WARN("worker_restarted", "worker=%s seq=%" PRIu64 " reason=replay_digest_differs",
                 self->worker, seq);
        s_replay_stop(self);
        self->stats.has_seq = false;
        self->base_known = false;
        s_clear(self);
        uint64_t need = self->npending ? self->pending[0].seq - 1 : S_NO_NEED;
        if (!s_replay_begin(self, S_REPLAY_REBUILD, 0, need)) {
            s_degrade(self, "history_unknown");
            s_drain(self);
        }
        return false;
    }
    if (seq == last + 1) return true; /* the last applied one was evicted: accepted unproven */
    s_replay_fail(self, seq > last ? "history_evicted" : "replay_out_of_order");
    return false;
}

int collector_stream_replay_reply(collector_stream_t *self, const uint8_t *const *frames,
                                  const size_t *lens, size_t nframes)
{
    assert(self && (frames || nframes == 0));
    if (!self->replay) {
        self->stats.replay_stray++;
        return IPL_E_INVAL;
    }
    if (nframes != 2 && nframes != 3) {
        s_replay_fail(self, "bad_reply_frames");
        return IPL_E_INVAL;
    }
    const uint8_t *seqf = frames[nframes - 2], *payload = frames[nframes - 1];
    size_t seq_len = lens[nframes - 2], len = lens[nframes - 1];
    self->replay_deadline_ms = self->now_ms + self->lim.replay_timeout_ms;
    if (ipl_vllm_kv_is_end_seq(seqf, seq_len) || len == 0) {
        s_replay_end(self);
        return 0;
    }
    uint64_t seq;
    if (ipl_vllm_kv_seq(seqf, seq_len, &seq) != 0) {
        s_replay_fail(self, "bad_reply_seq");
        return IPL_E_INVAL;
    }
    if (self->replay_first) {
        if (!s_replay_first(self, seq, payload, len)) return 0;
    } else if (seq != self->stats.last_seq + 1) {
        s_replay_fail(self, "replay_not_contiguous");
        return 0;
    }
    self->stats.replayed_batches++;
    int rc = s_apply(self, seq, payload, len);
    self->stats.mapped = s_map_size(&self->map);
    if (rc != 0 && self->replay) s_replay_fail(self, "undecodable_batch");
    return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* live batches */

/* Keeps the batch that started a replay, for after it. False when it cannot be kept (the
 * replay then failed, and the caller applies the batch as it is). Takes `owned`. */
static bool s_keep(collector_stream_t *self, uint64_t seq, const uint8_t *payload, size_t len,
                   uint8_t **owned)
{
    int rc =
        *owned ? s_pending_push(self, seq, *owned, len) : s_pending_copy(self, seq, payload, len);
    if (rc == 0) {
        *owned = NULL;
        return true;
    }
    s_replay_fail(self, "pending_overflow");
    return false;
}

/* A batch in order of arrival, no replay running. `owned` (may be NULL) is a malloc'd buffer
 * holding `payload` that this function takes. */
static int s_in_order(collector_stream_t *self, uint64_t seq, const uint8_t *payload, size_t len,
                      uint8_t *owned)
{
    collector_stream_stats_t *st = &self->stats;
    if (!st->has_seq) {
        if (seq == 0) { /* the process's first batch: its cache was empty before */
            s_rebase(self, "batch_0");
        } else if (!self->degraded && s_replay_begin(self, S_REPLAY_REBUILD, 0, seq - 1)) {
            if (s_keep(self, seq, payload, len, &owned)) return 0;
        } else if (!self->degraded) {
            s_degrade(self, "history_unknown"); /* joined late, no replay */
        }
    } else if (seq <= st->last_seq) { /* already applied from a replay */
        st->duplicates++;
        free(owned);
        return 0;
    } else if (seq > st->last_seq + 1) {
        st->gaps++;
        st->missed_batches += seq - st->last_seq - 1;
        IPL_LOG_EVERY(5, IPL_LOG_WARN, "sequence_gap",
                      "worker=%s expected=%" PRIu64 " got=%" PRIu64 " missed=%" PRIu64,
                      self->worker, st->last_seq + 1, seq, seq - st->last_seq - 1);
        if (self->degraded) {
            s_clear(self); /* removals may be missing: keep the index a subset */
        } else if (s_replay_begin(self, S_REPLAY_GAP, st->last_seq, seq - 1)) {
            if (s_keep(self, seq, payload, len, &owned)) return 0;
        } else {
            s_degrade(self, self->replay_fn ? "replay_failed" : "gap_without_replay");
        }
    }
    int rc = s_apply(self, seq, payload, len);
    free(owned);
    return rc;
}

/* A new worker process: a live seq that does not exceed the previous live one (`seq`), or
 * restart evidence from elsewhere. */
static void s_restart(collector_stream_t *self, uint64_t seq, const char *why)
{
    collector_stream_stats_t *st = &self->stats;
    st->restarts++;
    st->epoch++;
    IPL_WARN("worker_restarted",
             "worker=%s why=%s last_live_seq=%" PRIu64 " seq=%" PRIu64 " epoch=%" PRIu64,
             self->worker, why, self->live_last, seq, st->epoch);
    s_replay_stop(self);
    s_pending_clear(self); /* the old process's batches */
    self->batch_seq = seq;
    s_clear(self);
    st->has_seq = false;
    self->base_known = false;
    self->degraded = false; /* a new process: a new chance to know everything */
    self->incomplete = false;
    st->retry_at_ms = 0;
    self->backoff_ms = self->lim.retry_min_ms;
    s_update_state(self, "worker_restart");
}

void collector_stream_restarted(collector_stream_t *self, const char *why)
{
    assert(self);
    s_restart(self, 0, why ? why : "external");
    self->has_live = false; /* the next live batch belongs to the new process */
    if (!s_replay_begin(self, S_REPLAY_REBUILD, 0, S_NO_NEED))
        s_update_state(self, "waiting_for_batch_0");
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
    if (!payload) payload_len = 0;
    /* vLLM numbers batches from 0 in each process and PUB never reorders: going back (or
     * repeating) means a new process */
    if (self->has_live && seq <= self->live_last) s_restart(self, seq, "sequence_back");
    self->has_live = true;
    self->live_last = seq;
    const uint8_t *p = payload ? payload : (const uint8_t *)"";
    /* during a replay the batch waits; if it cannot, the replay fails, the kept ones are
     * applied (which may start another replay, hence the loop) and then this one */
    while (self->replay) {
        if (s_pending_copy(self, seq, p, payload_len) == 0) {
            self->stats.pending = self->npending;
            return 0;
        }
        s_replay_fail(self, "pending_overflow");
    }
    int rc = s_in_order(self, seq, p, payload_len, NULL);
    self->stats.pending = self->npending;
    return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* clock, start, queries */

void collector_stream_tick(collector_stream_t *self, uint64_t now_ms)
{
    assert(self);
    self->now_ms = now_ms;
    if (self->replay && now_ms >= self->replay_deadline_ms) {
        s_replay_fail(self, "replay_timeout");
    } else if (!self->replay && self->degraded && self->stats.retry_at_ms &&
               now_ms >= self->stats.retry_at_ms) {
        self->stats.retry_at_ms = 0;
        self->stats.retries++;
        if (s_replay_begin(self, S_REPLAY_REBUILD, 0, S_NO_NEED))
            self->replay_retry = true;
        else
            s_schedule_retry(self);
    }
    self->stats.pending = self->npending;
}

void collector_stream_start(collector_stream_t *self)
{
    assert(self);
    self->batch_seq = 0;
    s_emit(self, COLLECTOR_OP_CLEARED, 0, NULL, 0);
    self->dirty = false;
    if (!s_replay_begin(self, S_REPLAY_REBUILD, 0, S_NO_NEED))
        s_update_state(self, "waiting_for_batch_0");
}

int collector_stream_foreach(const collector_stream_t *self, int (*fn)(void *arg, uint64_t hash),
                             void *arg)
{
    assert(self && fn);
    const s_map_t *m = &self->map;
    if (m->has_zero) {
        int rc = fn(arg, m->zero_val);
        if (rc) return rc;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->slot[i].key) continue;
        int rc = fn(arg, m->slot[i].val);
        if (rc) return rc;
    }
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
