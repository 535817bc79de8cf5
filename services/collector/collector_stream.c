/*
 * collector_stream — sequence tracking, replay, vLLM event decoding and re-hashing for one
 * worker (see the header for the exactness rules).
 *
 * Two block maps (collector_blockmap): `map`, the blocks held (exactly what the aggregator
 * has for the worker), and `ghosts`, blocks known only by translation since a lost base.
 *
 * Flow of one batch:
 *
 *   message() ── live seq below the previous live one? ── s_restart()
 *       │ replay running: s_pending_push() (applied after the replay)
 *       ▼
 *   s_in_order() ── nothing applied yet: seq 0 → s_rebase(); else rebuild replay / lose base
 *       │          seq <= last applied: duplicate    seq > last + 1: gap replay / lose base
 *       ▼
 *   s_apply() ── decode ── s_on_event() ── s_stored / s_removed / AllBlocksCleared → s_rebase()
 *                  │         s_stored: parent a ghost? s_promote() its chain first
 *                  └ end of batch: s_flush_removed() (a run of BlockRemoved is one REMOVED op)
 *
 *   replay_reply() ── first reply checked (batch 0 / the last applied batch's digest) ──
 *       s_apply() ... end marker ── s_replay_end() ── success? ── s_drain() the buffered
 *                                                   └ no ── s_replay_fail() → lose base
 *
 *   s_lose_base(): held blocks → ghosts (s_demote, CLEARED at the aggregator), RECOVERING
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

#define S_LORA_MAX   1024u /* longer LoRA names are hashed by their first 1 KiB */
#define S_NO_NEED    UINT64_MAX
#define S_EMIT_CHUNK 8192u /* hashes per STORED when many go out at once */

/* A live batch kept while a replay runs (owns its copy of the payload). */
typedef struct {
    uint64_t seq;
    uint8_t *data;
    size_t len;
} s_pending_t;

typedef enum { S_REPLAY_NONE = 0, S_REPLAY_GAP, S_REPLAY_REBUILD, S_REPLAY_RESUME } s_replay_kind_t;

struct collector_stream {
    char *worker;
    collector_op_fn *fn;
    void *arg;
    collector_replay_fn *replay_fn;
    void *replay_arg;
    collector_stream_limits_t lim;
    ipl_vllm_kv_decoder_t *decoder;
    collector_blockmap_t *map;    /* held blocks */
    collector_blockmap_t *ghosts; /* RECOVERING: translations of blocks not held */
    uint64_t *ours;               /* scratch for one op's hashes */
    size_t ours_cap;
    uint64_t *removed; /* engine hashes of the batch's current BlockRemoved run (s_removed) */
    size_t removed_cap, nremoved;
    collector_block_t *chain; /* s_promote's scratch */
    size_t chain_cap;
    uint32_t block_size;
    uint64_t batch_seq; /* seq of the batch being applied */
    uint64_t now_ms;
    bool clock_set;
    uint64_t started_ms; /* start/restart: when the wait for a first batch began */
    bool started;
    /* exactness */
    bool base_known;      /* every batch since a known base was applied */
    bool recovering;      /* the base was lost: a subset rebuilt since */
    bool incomplete;      /* blocks skipped since the base (index ⊂ cache) */
    bool dirty;           /* STORED sent since the last CLEARED */
    bool unsent;          /* resumed: the held blocks are not at the aggregator yet */
    bool resync;          /* the base was just lost: the next batch starts the rebuild, whatever
                             hole lies before it (that one is paid for) */
    uint64_t last_digest; /* of the last applied payload */
    bool has_live;
    uint64_t live_last; /* the last live seq received */
    /* replay */
    s_replay_kind_t replay;
    uint64_t replay_start;
    uint64_t replay_need; /* must reach this seq (S_NO_NEED: nothing in particular) */
    bool replay_first;    /* no reply batch seen yet */
    bool replay_retry;    /* it is a RECOVERING retry */
    bool replay_applied;  /* a reply batch was applied */
    uint64_t replay_deadline_ms;
    uint64_t backoff_ms;
    s_pending_t *pending;
    size_t npending, pending_cap, pending_bytes;
    collector_stream_stats_t stats;
};

/* ------------------------------------------------------------------------------------------ */
/* life cycle */

static const collector_stream_limits_t s_default_limits = {
    .replay_timeout_ms = 2000,
    .retry_min_ms = 1000,
    .retry_max_ms = 30000,
    .max_pending = 65536,
    .max_pending_bytes = 64u << 20,
    .max_ghosts = 1u << 20,
    .silent_exact_ms = 5000,
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
    self->map = collector_blockmap_new();
    self->ghosts = collector_blockmap_new();
    self->stats.epoch = epoch;
    self->stats.kv_state = COLLECTOR_KV_SYNCING;
    self->stats.state = COLLECTOR_KV_SYNCING;
    self->stats.why = "start";
    self->stats.resume = "none";
    if (!self->worker || !self->decoder || !self->map || !self->ghosts) {
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
    collector_blockmap_destroy(&self->map);
    collector_blockmap_destroy(&self->ghosts);
    free(self->ours);
    free(self->removed);
    free(self->chain);
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
        .max_ghosts = lim->max_ghosts ? lim->max_ghosts : d->max_ghosts,
        .silent_exact_ms = lim->silent_exact_ms ? lim->silent_exact_ms : d->silent_exact_ms,
    };
    if (self->lim.retry_max_ms < self->lim.retry_min_ms)
        self->lim.retry_max_ms = self->lim.retry_min_ms;
    self->backoff_ms = self->lim.retry_min_ms;
}

const char *collector_kv_state_name(int state)
{
    return state == COLLECTOR_KV_EXACT           ? "exact"
           : state == COLLECTOR_KV_SYNCING       ? "syncing"
           : state == COLLECTOR_STATE_RECOVERING ? "recovering"
                                                 : "degraded";
}

/* ------------------------------------------------------------------------------------------ */
/* state */

static void s_flush_removed(collector_stream_t *self);

/* The counters that mirror the maps and the pending list (end of every public call). */
static void s_sync_stats(collector_stream_t *self)
{
    self->stats.mapped = collector_blockmap_size(self->map);
    self->stats.ghosts = collector_blockmap_size(self->ghosts);
    self->stats.pending = self->npending;
    self->stats.replaying = self->replay != S_REPLAY_NONE;
}

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
    self->stats.generation++;
    self->fn(self->arg, &o);
}

/* Recomputes the state from the flags; logs a change with its cause. */
static void s_update_state(collector_stream_t *self, const char *why)
{
    int state = self->unsent       ? COLLECTOR_KV_SYNCING
                : self->recovering ? COLLECTOR_STATE_RECOVERING
                : (self->replay || !self->base_known || self->incomplete) ? COLLECTOR_KV_SYNCING
                                                                          : COLLECTOR_KV_EXACT;
    if (why) self->stats.why = why;
    self->stats.replaying = self->replay != S_REPLAY_NONE;
    self->stats.pending = self->npending;
    self->stats.kv_state = state == COLLECTOR_STATE_RECOVERING ? COLLECTOR_KV_SYNCING : state;
    if (self->stats.state == state) return;
    /* losing the base is news; so is getting it back; a replay's SYNCING↔EXACT is routine */
    int level = state == COLLECTOR_STATE_RECOVERING               ? IPL_LOG_WARN
                : self->stats.state == COLLECTOR_STATE_RECOVERING ? IPL_LOG_INFO
                                                                  : IPL_LOG_DEBUG;
    self->stats.state = state;
    self->stats.state_since_ms = self->now_ms;
    self->stats.generation++;
    ipl_log(level, "kv_state", "worker=%s state=%s why=%s", self->worker,
            collector_kv_state_name(state), self->stats.why);
}

/* Forgets every held block, here and (CLEARED) at the aggregator. */
static void s_clear(collector_stream_t *self)
{
    s_flush_removed(self); /* they were before the clear */
    bool had = collector_blockmap_size(self->map) > 0 || self->dirty;
    collector_blockmap_clear(self->map);
    if (had) s_emit(self, COLLECTOR_OP_CLEARED, 0, NULL, 0);
    self->dirty = false;
    self->unsent = false;
}

static void s_forget_ghosts(collector_stream_t *self)
{
    if (collector_blockmap_size(self->ghosts) == 0) return;
    collector_blockmap_clear(self->ghosts);
    self->stats.generation++;
}

/* The held blocks become ghosts (translations only; the older ghosts go first when both would
 * exceed max_ghosts) and are CLEARED at the aggregator: some may have been evicted unseen. */
static void s_demote(collector_stream_t *self)
{
    s_flush_removed(self);
    size_t n = collector_blockmap_size(self->map);
    if (n > 0) {
        if (collector_blockmap_size(self->ghosts) + n > self->lim.max_ghosts) s_forget_ghosts(self);
        if (collector_blockmap_size(self->ghosts) == 0) {
            collector_blockmap_swap(self->map, self->ghosts);
        } else if (collector_blockmap_merge(self->ghosts, self->map) != 0) {
            s_forget_ghosts(self); /* no memory for both: the newer knowledge wins */
            collector_blockmap_swap(self->map, self->ghosts);
        }
        self->stats.generation++;
    }
    s_clear(self);
}

/* From here on the worker's whole state is known (its cache is empty now). */
static void s_rebase(collector_stream_t *self, const char *why)
{
    s_clear(self);
    s_forget_ghosts(self);
    self->base_known = true;
    self->recovering = false;
    self->resync = false;
    self->incomplete = false;
    self->stats.has_recover_seq = false;
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

/* The base is lost: RECOVERING from the next batch applied, held blocks demoted to ghosts;
 * `retry`: the cause may pass, so retries from seq 0 are scheduled. */
static void s_lose_base(collector_stream_t *self, const char *why, bool retry)
{
    if (self->unsent && !strcmp(self->stats.resume, "resuming")) self->stats.resume = "failed";
    /* lost again before a batch was applied since: the same loss */
    if (!(self->recovering && self->resync)) self->stats.degradations++;
    s_demote(self);
    self->resync = true;
    self->recovering = true;
    self->base_known = false;
    self->incomplete = false;
    self->stats.has_recover_seq = false;
    if (retry && self->stats.retry_at_ms == 0) s_schedule_retry(self);
    s_update_state(self, why);
}

/* A pending retry also holds gap replays back (a dead endpoint costs a timeout each). */
static bool s_retry_pending(const collector_stream_t *self)
{
    return self->recovering && self->stats.retry_at_ms != 0;
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
    if (!self->recovering) s_update_state(self, why); /* RECOVERING keeps its own cause */
}

/* The engine's hashes cover extra keys our chain does not: anything beyond the adapter's
 * name — a cache salt with an adapter, or multimodal keys, with or without a LoRA (a salt
 * alone s_stored reproduces). A LoRA
 * request's blocks carry (lora_name,) each, which the adapter's hash space reproduces; an
 * older vLLM that sends no extra_keys at all is taken at its lora_name. */
static bool s_unreproducible(const ipl_vllm_kv_event_t *ev)
{
    if (!ev->has_extra_keys) return false;
    if (!ev->lora_name || !ev->extra_key_str) return true;
    return ev->extra_key_str_len != ev->lora_name_len ||
           memcmp(ev->extra_key_str, ev->lora_name, ev->lora_name_len) != 0;
}

/* Sends `n` held hashes as STORED ops of at most S_EMIT_CHUNK, each placed after the previous
 * one (`parent`: our hash of the block before hashes[0], 0 when none). */
static void s_emit_stored(collector_stream_t *self, uint64_t parent, const uint64_t *hashes,
                          size_t n)
{
    while (n > 0) {
        uint32_t k = n > S_EMIT_CHUNK ? S_EMIT_CHUNK : (uint32_t)n;
        s_emit(self, COLLECTOR_OP_STORED, parent, hashes, k);
        parent = hashes[k - 1];
        hashes += k;
        n -= k;
    }
    self->dirty = true;
}

static int s_chain_push(collector_stream_t *self, size_t n, const collector_block_t *b)
{
    if (n == self->chain_cap) {
        size_t cap = self->chain_cap ? self->chain_cap * 2 : 64;
        collector_block_t *p = realloc(self->chain, cap * sizeof *p);
        if (!p) return IPL_E_NOMEM;
        self->chain = p;
        self->chain_cap = cap;
    }
    self->chain[n] = *b;
    return 0;
}

/* A BlockStored names ghost `engine` as its parent: the request holds it and every block
 * before it, so the whole chain up to a held block (or its root) is cached now. Moves it from
 * the ghosts to the held blocks and STOREs it, root first. Sets *ours to our hash of `engine`.
 * False when `engine` is not a ghost (or nothing could be moved). */
static bool s_promote(collector_stream_t *self, uint64_t engine, uint64_t *ours)
{
    size_t n = 0;
    uint64_t hint = 0, key = engine;
    collector_block_t b, held;
    /* each step takes one ghost: the walk ends (a parent loop finds its start gone) */
    while (collector_blockmap_take(self->ghosts, key, &b)) {
        if (s_chain_push(self, n, &b) != 0) {
            collector_blockmap_put(self->ghosts, &b); /* its slot was just freed */
            break;
        }
        n++;
        if (b.parent == b.engine) break; /* a root */
        if (collector_blockmap_get(self->map, b.parent, &held)) {
            hint = held.ours;
            break;
        }
        key = b.parent;
    }
    if (n == 0) return false;
    /* chain[0] is `engine`, chain[n-1] the first block of the run: held from the top down */
    size_t k = 0;
    if (s_reserve(self, n) != 0) {
        for (size_t i = 0; i < n; i++) /* put back: nothing promoted */
            collector_blockmap_put(self->ghosts, &self->chain[i]);
        return false;
    }
    for (size_t i = n; i-- > 0;) {
        if (collector_blockmap_put(self->map, &self->chain[i]) != 0) {
            for (size_t j = 0; j <= i; j++) /* the rest stays a ghost */
                collector_blockmap_put(self->ghosts, &self->chain[j]);
            break;
        }
        self->ours[k++] = self->chain[i].ours;
    }
    if (k == 0) return false;
    self->stats.promoted += k;
    s_emit_stored(self, hint, self->ours, k);
    *ours = self->chain[0].ours;
    return k == n;
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
    bool salted = false;       /* the chain starts in a cache salt's space */
    if (ev->has_parent) {
        collector_block_t pb;
        if (collector_blockmap_get(self->map, ev->parent_hash, &pb)) {
            parent = pb.ours;
        } else if (!collector_blockmap_size(self->ghosts) ||
                   !s_promote(self, ev->parent_hash, &parent)) {
            self->stats.unknown_parents++;
            /* expected while RECOVERING (the chain was stored before the hole) */
            IPL_LOG_EVERY(10, self->recovering ? IPL_LOG_DEBUG : IPL_LOG_WARN, "unknown_parent",
                          "worker=%s parent=0x%016" PRIx64 " blocks=%u seq=%" PRIu64, self->worker,
                          ev->parent_hash, ev->nblocks, self->batch_seq);
            s_incomplete(self, "unknown_parent");
            return;
        }
        hint = parent;
    } else {
        char lora[S_LORA_MAX + 1], salt[S_LORA_MAX + 1];
        const char *name = NULL;
        if (ev->lora_name) {
            uint32_t len = ev->lora_name_len < S_LORA_MAX ? ev->lora_name_len : S_LORA_MAX;
            memcpy(lora, ev->lora_name, len);
            lora[len] = '\0';
            name = lora;
        }
        /* A cache salt alone — vLLM's (salt,) in a chain's first block's extra keys, no
         * adapter — is reproducible: the salt's own space, as ipl_prompt_hashes hashes a
         * salted prompt (a tenant's, policy_isolation), so it routes exactly within it. */
        if (!ev->lora_name && ev->has_extra_keys && ev->extra_key_str &&
            ev->extra_key_str_len <= S_LORA_MAX) {
            memcpy(salt, ev->extra_key_str, ev->extra_key_str_len);
            salt[ev->extra_key_str_len] = '\0';
            salted = true;
        }
        parent = ipl_hash_chain_start(ipl_hash_key(name, salted ? salt : NULL));
    }
    if (!salted && s_unreproducible(ev)) {
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
    bool ghosts = collector_blockmap_size(self->ghosts) > 0;
    for (size_t i = 0; i < n; i++) {
        if (i + 4 < n) collector_blockmap_prefetch(self->map, ev->block_hashes[i + 4]);
        uint64_t up = i > 0            ? ev->block_hashes[i - 1]
                      : ev->has_parent ? ev->parent_hash
                                       : ev->block_hashes[0];
        collector_block_t b = {ev->block_hashes[i], self->ours[i], up};
        if (collector_blockmap_put(self->map, &b) != 0) {
            n = i;
            s_incomplete(self, "out_of_memory");
            break;
        }
        if (ghosts) collector_blockmap_take(self->ghosts, b.engine, NULL); /* stored again */
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
            /* the blocks would stay in the index although the worker dropped them: not a
             * subset any more, so this is a lost base, not an incomplete one */
            s_lose_base(self, "out_of_memory", false);
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
    self->nremoved = 0; /* first: s_lose_base and s_emit below flush again */
    if (s_reserve(self, k) != 0) {
        s_lose_base(self, "out_of_memory", false); /* as in s_removed */
        return;
    }
    const uint64_t *engine = self->removed;
    bool ghosts = collector_blockmap_size(self->ghosts) > 0;
    for (size_t i = 0; i < k && i < S_PREFETCH_MAP; i++)
        collector_blockmap_prefetch(self->map, engine[i]);
    uint32_t n = 0;
    collector_block_t b;
    for (size_t i = 0; i < k; i++) {
        if (i + S_PREFETCH_MAP < k)
            collector_blockmap_prefetch(self->map, engine[i + S_PREFETCH_MAP]);
        if (collector_blockmap_take(self->map, engine[i], &b))
            self->ours[n++] = b.ours;
        else if (ghosts && collector_blockmap_take(self->ghosts, engine[i], NULL))
            self->stats.ghost_removed++; /* it was still cached; not at the aggregator */
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

/* Applies one batch, in order. A batch that does not decode is lost: the base with it. */
static int s_apply(collector_stream_t *self, uint64_t seq, const uint8_t *payload, size_t len)
{
    self->batch_seq = seq;
    if (self->recovering && !self->stats.has_recover_seq) {
        self->stats.has_recover_seq = true;
        self->stats.recover_seq = seq;
    }
    self->resync = false;
    int rc = ipl_vllm_kv_decode(self->decoder, payload, len, NULL, s_on_event, self);
    s_flush_removed(self); /* the batch's last run of removals */
    self->stats.has_seq = true;
    self->stats.last_seq = seq;
    self->stats.generation++;
    self->last_digest = ipl_hash_bytes(payload, len);
    if (rc != 0) {
        self->stats.decode_errors++;
        IPL_LOG_EVERY(5, IPL_LOG_WARN, "batch_undecodable", "worker=%s seq=%" PRIu64 " error=%s",
                      self->worker, seq, ipl_strerror(rc));
        /* its events are lost; a retry would replay the same bytes */
        s_lose_base(self, "undecodable_batch", false);
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

static const char *s_kind_name(s_replay_kind_t kind)
{
    return kind == S_REPLAY_GAP ? "gap" : kind == S_REPLAY_RESUME ? "resume" : "rebuild";
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
    self->replay_applied = false;
    self->replay_start = start;
    self->replay_need = need;
    self->replay_first = true;
    self->replay_deadline_ms = self->now_ms + self->lim.replay_timeout_ms;
    IPL_DEBUG("replay_started", "worker=%s kind=%s start_seq=%" PRIu64, self->worker,
              s_kind_name(kind), start);
    s_update_state(self, self->recovering || self->unsent ? NULL
                         : kind == S_REPLAY_GAP           ? "replaying_gap"
                                                          : "replaying_history");
    return true;
}

/* Ends the running replay; `why` (may be NULL) names the state that follows. */
static void s_replay_stop(collector_stream_t *self, const char *why)
{
    if (!self->replay) return;
    self->replay = S_REPLAY_NONE;
    self->replay_fn(self->replay_arg, COLLECTOR_REPLAY_STOP, 0);
    s_update_state(self, why);
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

/* The seq the replay of the kept live batches has to reach (S_NO_NEED: none kept). */
static uint64_t s_pending_need(const collector_stream_t *self)
{
    return self->npending ? self->pending[0].seq - 1 : S_NO_NEED;
}

static void s_replay_fail(collector_stream_t *self, const char *why)
{
    self->stats.replays_failed++;
    IPL_LOG_EVERY(5, IPL_LOG_WARN, "replay_failed",
                  "worker=%s kind=%s start_seq=%" PRIu64 " reason=%s", self->worker,
                  s_kind_name(self->replay), self->replay_start, why);
    if (self->replay_retry && !self->replay_applied) {
        /* a retry that changed nothing: the state stays, the next one later */
        s_replay_stop(self, why);
        s_schedule_retry(self);
    } else {
        s_lose_base(self, why, true); /* first: the state never looks exact in between */
        s_replay_stop(self, NULL);
    }
    s_drain(self);
}

/* A retry learnt that the worker's buffer no longer starts at batch 0 (or holds nothing of
 * the process we saw): this process's history is gone for good; no more retries. */
static void s_retry_hopeless(collector_stream_t *self, const char *why)
{
    self->stats.replays_failed++;
    IPL_LOG_EVERY(30, IPL_LOG_INFO, "retry_stopped", "worker=%s reason=%s", self->worker, why);
    s_replay_stop(self, NULL);
    self->stats.retry_at_ms = 0;
    self->backoff_ms = self->lim.retry_min_ms;
    s_update_state(self, NULL);
    s_drain(self);
}

typedef struct {
    collector_stream_t *self;
    uint32_t n;
} s_sender_t;

static int s_send_one(void *arg, const collector_block_t *b)
{
    s_sender_t *s = arg;
    s->self->ours[s->n++] = b->ours;
    if (s->n == S_EMIT_CHUNK) {
        s_emit(s->self, COLLECTOR_OP_STORED, 0, s->self->ours, s->n);
        s->n = 0;
    }
    return 0;
}

/* A resumed checkpoint is proven (or continued at last+1): its blocks go to the aggregator,
 * and the stream is what the checkpoint says. */
static void s_resumed(collector_stream_t *self, const char *result)
{
    self->stats.resume = result;
    self->unsent = false;
    if (s_reserve(self, S_EMIT_CHUNK) != 0) {
        s_lose_base(self, "out_of_memory", false);
        return;
    }
    s_sender_t s = {self, 0};
    collector_blockmap_foreach(self->map, s_send_one, &s);
    if (s.n) s_emit(self, COLLECTOR_OP_STORED, 0, self->ours, s.n);
    if (collector_blockmap_size(self->map)) self->dirty = true;
    IPL_INFO("checkpoint_resumed", "worker=%s result=%s last_seq=%" PRIu64 " blocks=%zu",
             self->worker, result, self->stats.last_seq, collector_blockmap_size(self->map));
    s_update_state(self, self->recovering ? NULL : "checkpoint_resumed");
}

/* Everything is forgotten (a new process, or a checkpoint that cannot be trusted); the
 * history is rebuilt from 0, the kept live batches behind the replay. */
static void s_rebuild_from_scratch(collector_stream_t *self)
{
    s_clear(self);
    s_forget_ghosts(self);
    self->stats.has_seq = false;
    self->base_known = false;
    self->recovering = false;
    self->incomplete = false;
    self->stats.has_recover_seq = false;
    if (!s_replay_begin(self, S_REPLAY_REBUILD, 0, s_pending_need(self))) {
        s_lose_base(self, "history_unknown", true);
        s_drain(self);
    }
}

static void s_replay_end(collector_stream_t *self)
{
    bool nothing = self->replay_first;
    bool reached = self->replay_need == S_NO_NEED ||
                   (self->stats.has_seq && self->stats.last_seq >= self->replay_need);
    if (nothing && self->replay == S_REPLAY_RESUME) {
        /* not even the checkpoint's last batch is buffered: another process answers (one
         * that has published less), or the worker keeps no buffer */
        IPL_WARN("checkpoint_dropped", "worker=%s last_seq=%" PRIu64 " reason=nothing_buffered",
                 self->worker, self->stats.last_seq);
        self->stats.resume = "discarded";
        s_replay_stop(self, NULL);
        s_rebuild_from_scratch(self);
        return;
    }
    if (nothing && self->replay == S_REPLAY_REBUILD && self->replay_need == S_NO_NEED) {
        /* The worker has no buffered batch at all. A retry of a worker we have seen batches
         * of learns nothing (it keeps no buffer, or a new process has not published yet: its
         * /metrics tell). Otherwise it never published a batch: its cache is empty (an empty
         * index is exact); batch 0, when it comes, continues that base. */
        if (self->replay_retry && self->stats.has_seq) {
            s_retry_hopeless(self, "nothing_buffered");
            return;
        }
        s_forget_ghosts(self);
        self->base_known = true;
        self->recovering = false;
        self->incomplete = false;
        self->stats.retry_at_ms = 0;
        self->backoff_ms = self->lim.retry_min_ms;
        self->stats.replays_ok++;
        s_replay_stop(self, "nothing_published");
        s_drain(self);
        return;
    }
    if (nothing || !reached) {
        s_replay_fail(self, nothing ? "nothing_buffered" : "replay_incomplete");
        return;
    }
    self->stats.replays_ok++;
    IPL_DEBUG("replay_done", "worker=%s last_seq=%" PRIu64, self->worker, self->stats.last_seq);
    bool keep_why = self->recovering || self->replay == S_REPLAY_RESUME;
    s_replay_stop(self, keep_why ? NULL : "replayed");
    s_drain(self);
}

/* A replay whose first reply comes after the batch it had to start with: those batches are
 * gone from the worker's buffer. What is buffered is still the best there is: RECOVERING from
 * it (the rest of the replay is applied). */
static void s_recover_from(collector_stream_t *self, uint64_t seq)
{
    IPL_LOG_EVERY(5, IPL_LOG_WARN, "history_evicted",
                  "worker=%s kind=%s start_seq=%" PRIu64 " first_buffered=%" PRIu64, self->worker,
                  s_kind_name(self->replay), self->replay_start, seq);
    if (self->replay == S_REPLAY_RESUME && self->unsent) self->stats.resume = "evicted";
    s_lose_base(self, "history_evicted", false);
    self->stats.has_seq = false; /* the next reply continues from the first buffered one */
}

/* The first reply of a replay: proof that it continues what we applied. Returns true when the
 * batch is to be applied, false when it was handled (skipped or the replay ended). */
static bool s_replay_first(collector_stream_t *self, uint64_t seq, const uint8_t *payload,
                           size_t len)
{
    self->replay_first = false;
    if (self->replay == S_REPLAY_REBUILD) {
        if (seq == 0) {
            self->stats.has_seq = false;
            s_rebase(self, "replayed_from_batch_0");
            return true;
        }
        if (self->replay_retry) { /* still no batch 0: this process's start is gone */
            s_retry_hopeless(self, "history_evicted");
            return false;
        }
        s_recover_from(self, seq);
        return true;
    }
    bool resume = self->replay == S_REPLAY_RESUME;
    uint64_t last = self->stats.last_seq;
    if (seq == last) {
        if (ipl_hash_bytes(payload, len) == self->last_digest) { /* proven */
            if (resume) s_resumed(self, "proven");
            return false;
        }
        /* another process answers: the one we followed (or checkpointed) is gone */
        self->stats.restarts++;
        self->stats.epoch++;
        IPL_WARN("worker_restarted", "worker=%s seq=%" PRIu64 " reason=replay_digest_differs",
                 self->worker, seq);
        if (resume) self->stats.resume = "restarted";
        self->base_known = false;
        s_replay_stop(self, "worker_restart");
        s_rebuild_from_scratch(self);
        return false;
    }
    if (seq == last + 1) { /* the last applied one was evicted: accepted unproven */
        if (resume) s_resumed(self, "continued");
        return true;
    }
    if (seq > last + 1) {
        s_recover_from(self, seq);
        return true;
    }
    s_replay_fail(self, "replay_out_of_order");
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
    int rc = 0;
    if (nframes != 2 && nframes != 3) {
        s_replay_fail(self, "bad_reply_frames");
        rc = IPL_E_INVAL;
        goto done;
    }
    const uint8_t *seqf = frames[nframes - 2], *payload = frames[nframes - 1];
    size_t seq_len = lens[nframes - 2], len = lens[nframes - 1];
    self->replay_deadline_ms = self->now_ms + self->lim.replay_timeout_ms;
    if (ipl_vllm_kv_is_end_seq(seqf, seq_len) || len == 0) {
        s_replay_end(self);
        goto done;
    }
    uint64_t seq;
    if (ipl_vllm_kv_seq(seqf, seq_len, &seq) != 0) {
        s_replay_fail(self, "bad_reply_seq");
        rc = IPL_E_INVAL;
        goto done;
    }
    if (self->replay_first) {
        if (!s_replay_first(self, seq, payload, len)) goto done;
    } else if (!self->stats.has_seq || seq != self->stats.last_seq + 1) {
        s_replay_fail(self, "replay_not_contiguous");
        goto done;
    }
    self->stats.replayed_batches++;
    self->replay_applied = true;
    rc = s_apply(self, seq, payload, len);
    if (rc != 0 && self->replay) s_replay_fail(self, "undecodable_batch");
done:
    s_sync_stats(self);
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
        } else if (!s_retry_pending(self) && s_replay_begin(self, S_REPLAY_REBUILD, 0, seq - 1)) {
            if (s_keep(self, seq, payload, len, &owned)) return 0;
        } else if (!self->recovering) {
            s_lose_base(self, "history_unknown", true); /* joined late, no replay */
        }
    } else if (seq <= st->last_seq) { /* already applied from a replay */
        st->duplicates++;
        free(owned);
        return 0;
    } else if (seq > st->last_seq + 1 && !self->resync) {
        st->gaps++;
        st->missed_batches += seq - st->last_seq - 1;
        IPL_LOG_EVERY(5, IPL_LOG_WARN, "sequence_gap",
                      "worker=%s expected=%" PRIu64 " got=%" PRIu64 " missed=%" PRIu64,
                      self->worker, st->last_seq + 1, seq, seq - st->last_seq - 1);
        if (s_retry_pending(self)) {
            s_lose_base(self, "sequence_gap", false); /* the retry is scheduled already */
        } else if (s_replay_begin(self, S_REPLAY_GAP, st->last_seq, seq - 1)) {
            if (s_keep(self, seq, payload, len, &owned)) return 0;
        } else {
            s_lose_base(self, self->replay_fn ? "replay_failed" : "gap_without_replay", true);
        }
    } else if (self->unsent) { /* resumed without replays: last+1 continues the checkpoint */
        s_resumed(self, "continued");
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
    if (self->unsent) st->resume = "restarted";
    self->base_known = false;
    self->recovering = false;
    s_replay_stop(self, "worker_restart");
    s_pending_clear(self); /* the old process's batches */
    self->batch_seq = seq;
    s_clear(self);
    s_forget_ghosts(self); /* the new process starts empty; old translations are useless */
    st->has_seq = false;
    st->has_recover_seq = false;
    self->base_known = false;
    self->recovering = false; /* a new process: a new chance to know everything */
    self->resync = false;
    self->incomplete = false;
    st->retry_at_ms = 0;
    self->backoff_ms = self->lim.retry_min_ms;
    self->started_ms = self->now_ms;
    s_update_state(self, "worker_restart");
}

void collector_stream_restarted(collector_stream_t *self, const char *why)
{
    assert(self);
    s_restart(self, 0, why ? why : "external");
    self->has_live = false; /* the next live batch belongs to the new process */
    if (!s_replay_begin(self, S_REPLAY_REBUILD, 0, S_NO_NEED))
        s_update_state(self, "waiting_for_batch_0");
    s_sync_stats(self);
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
    int rc = 0;
    /* during a replay the batch waits; if it cannot, the replay fails, the kept ones are
     * applied (which may start another replay, hence the loop) and then this one */
    while (self->replay) {
        if (s_pending_copy(self, seq, p, payload_len) == 0) goto done;
        s_replay_fail(self, "pending_overflow");
    }
    rc = s_in_order(self, seq, p, payload_len, NULL);
done:
    s_sync_stats(self);
    return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* checkpoints */

typedef struct {
    collector_block_t *out;
    size_t n;
} s_copier_t;

static int s_copy_one(void *arg, const collector_block_t *b)
{
    s_copier_t *c = arg;
    c->out[c->n++] = *b;
    return 0;
}

/* A malloc'd copy of every block of `m` (*n of them); NULL only when out of memory. */
static collector_block_t *s_copy_all(const collector_blockmap_t *m, size_t *n)
{
    size_t size = collector_blockmap_size(m);
    s_copier_t c = {malloc((size ? size : 1) * sizeof *c.out), 0};
    if (c.out) collector_blockmap_foreach(m, s_copy_one, &c);
    *n = c.n;
    return c.out;
}

int collector_stream_image(const collector_stream_t *self, collector_stream_image_t *out)
{
    assert(self && out);
    memset(out, 0, sizeof *out);
    if (!self->stats.has_seq) return IPL_E_NOTFOUND;
    out->last_seq = self->stats.last_seq;
    out->last_digest = self->last_digest;
    out->epoch = self->stats.epoch;
    out->block_size = self->block_size;
    out->flags = self->recovering   ? COLLECTOR_IMAGE_RECOVERING
                 : self->base_known ? COLLECTOR_IMAGE_BASE
                                    : 0;
    if (self->incomplete) out->flags |= COLLECTOR_IMAGE_INCOMPLETE;
    out->blocks = s_copy_all(self->map, &out->nblocks);
    out->ghosts = s_copy_all(self->ghosts, &out->nghosts);
    if (!out->blocks || !out->ghosts) {
        collector_stream_image_free(out);
        return IPL_E_NOMEM;
    }
    return 0;
}

void collector_stream_image_free(collector_stream_image_t *img)
{
    if (!img) return;
    free(img->blocks);
    free(img->ghosts);
    memset(img, 0, sizeof *img);
}

/* Puts n blocks into m. 0 or IPL_E_NOMEM. */
static int s_load(collector_blockmap_t *m, const collector_block_t *b, size_t n)
{
    int rc = collector_blockmap_reserve(m, n);
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = collector_blockmap_put(m, &b[i]);
    return rc;
}

int collector_stream_resume(collector_stream_t *self, const collector_stream_image_t *img)
{
    assert(self && img);
    uint32_t f = img->flags;
    if ((f & ~(uint32_t)COLLECTOR_IMAGE_FLAGS) ||
        ((f & COLLECTOR_IMAGE_BASE) && (f & COLLECTOR_IMAGE_RECOVERING)))
        return IPL_E_INVAL;
    if (s_load(self->map, img->blocks, img->nblocks) != 0 ||
        s_load(self->ghosts, img->ghosts, img->nghosts) != 0) {
        collector_blockmap_clear(self->map);
        collector_blockmap_clear(self->ghosts);
        return IPL_E_NOMEM;
    }
    /* as start: the aggregator forgets older incarnations; the blocks follow the proof */
    self->batch_seq = 0;
    s_emit(self, COLLECTOR_OP_CLEARED, 0, NULL, 0);
    self->dirty = false;
    self->started = true;
    self->started_ms = self->now_ms;
    self->unsent = true;
    self->stats.resume = "resuming";
    self->stats.has_seq = true;
    self->stats.last_seq = img->last_seq;
    self->last_digest = img->last_digest;
    self->block_size = img->block_size;
    self->base_known = (f & COLLECTOR_IMAGE_BASE) != 0;
    self->recovering = (f & COLLECTOR_IMAGE_RECOVERING) != 0;
    self->incomplete = (f & COLLECTOR_IMAGE_INCOMPLETE) != 0;
    /* a live batch at or below the checkpoint's last one is a new process */
    self->has_live = true;
    self->live_last = img->last_seq;
    bool replaying = s_replay_begin(self, S_REPLAY_RESUME, img->last_seq, S_NO_NEED);
    if (self->replay_fn && !replaying) /* it could not even start: not proven */
        s_lose_base(self, "replay_failed", true);
    else
        s_update_state(self, "resuming_checkpoint");
    s_sync_stats(self);
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* clock, start, queries */

void collector_stream_tick(collector_stream_t *self, uint64_t now_ms)
{
    assert(self);
    self->now_ms = now_ms;
    if (!self->clock_set) {
        self->clock_set = true;
        self->stats.state_since_ms = now_ms;
    }
    if (self->replay && now_ms >= self->replay_deadline_ms) {
        s_replay_fail(self, "replay_timeout");
    } else if (!self->replay && s_retry_pending(self) && now_ms >= self->stats.retry_at_ms) {
        self->stats.retry_at_ms = 0;
        self->stats.retries++;
        if (s_replay_begin(self, S_REPLAY_REBUILD, 0, S_NO_NEED))
            self->replay_retry = true;
        else
            s_schedule_retry(self);
    } else if (!self->replay_fn && self->started && !self->stats.has_seq && !self->base_known &&
               !self->recovering && now_ms - self->started_ms >= self->lim.silent_exact_ms) {
        /* nothing published since we subscribed: taken as empty (the header says why) */
        self->base_known = true;
        s_update_state(self, "no_batch_published");
    }
    s_sync_stats(self);
}

void collector_stream_start(collector_stream_t *self)
{
    assert(self);
    self->batch_seq = 0;
    s_emit(self, COLLECTOR_OP_CLEARED, 0, NULL, 0);
    self->dirty = false;
    self->started = true;
    self->started_ms = self->now_ms;
    if (!s_replay_begin(self, S_REPLAY_REBUILD, 0, S_NO_NEED))
        s_update_state(self, "waiting_for_batch_0");
    s_sync_stats(self);
}

typedef struct {
    int (*fn)(void *arg, uint64_t hash);
    void *arg;
} s_walk_t;

static int s_walk_one(void *arg, const collector_block_t *b)
{
    s_walk_t *w = arg;
    return w->fn(w->arg, b->ours);
}

int collector_stream_foreach(const collector_stream_t *self, int (*fn)(void *arg, uint64_t hash),
                             void *arg)
{
    assert(self && fn);
    if (self->unsent) return 0;
    s_walk_t w = {fn, arg};
    return collector_blockmap_foreach(self->map, s_walk_one, &w);
}

int collector_stream_kv_state(const collector_stream_t *self)
{
    assert(self);
    return self->stats.kv_state;
}

int collector_stream_state(const collector_stream_t *self)
{
    assert(self);
    return self->stats.state;
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
