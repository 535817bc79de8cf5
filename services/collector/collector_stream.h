/*
 * collector_stream — one worker's vLLM KV-event stream turned into our index operations, with
 * sequence tracking, replay and an honest exactness state. Pure: no sockets, no clock (the
 * caller feeds messages, replay replies and the time in).
 *
 *   live [seq, payload] ──► restart? ─► in order? ──► decode ──► re-hash ──► collector_op_fn
 *                              │           │ gap: replay from the worker (live batches are
 *                              │           │      buffered meanwhile, duplicates dropped)
 *                              │           └ seq <= last applied: duplicate, dropped
 *                              └ seq below the last live one: new process → CLEARED, resync
 *                                (also collector_stream_restarted: /metrics saw a new process)
 *
 * Hashes: the engine's block hashes are never forwarded. For each BlockStored we recompute
 * OUR chained hashes (ipl_hash.h) from its token ids, starting from the parent's hash: the
 * engine's parent_block_hash is looked up in this worker's engine→ours map; a nil parent starts
 * a chain at ipl_hash_chain_start(ipl_hash_key(lora_name, NULL)), so LoRA blocks never match
 * base-model blocks. The map (collector_blockmap: engine hash → our hash and the engine hash
 * of the parent) is kept for BlockRemoved (entry dropped) and emptied whenever the worker's
 * state is cleared. Its values are exactly the blocks the aggregator holds for the worker
 * (collector_stream_foreach walks them for a resend). A second map holds the ghosts (below).
 *
 * Exactness. vLLM numbers each process's batches from 0 and has no other incarnation id, so
 * the stream is EXACT only while it has applied, with no hole, every batch since a *known
 * base*: batch 0 of the current process (its cache starts empty), an AllBlocksCleared (the
 * cache is empty after it), a replay that shows the worker never published a batch, or a
 * checkpoint of this stream that a replay proves to continue (collector_stream_resume).
 * States (collector_stream_state; LOAD.kv_state in brackets):
 *
 *   SYNCING     [SYNCING] the base is not established yet (start-up: the catch-up replay,
 *               a checkpoint being proven), a replay is running, or blocks had to be skipped
 *               (unknown parent, out of memory: the index is a subset of the worker's cache).
 *   EXACT       [EXACT] the index equals the worker's prefix cache (as events describe it).
 *   RECOVERING  [SYNCING] the base was lost: a gap whose replay failed or was impossible (no
 *               replay endpoint, timeout, the start already evicted from the worker's buffer),
 *               an undecodable batch, or a history we joined late (a collector restarted
 *               after the worker's buffer turned over). On entering it the held blocks are
 *               CLEARED at the aggregator — blocks removed in the hole are unknown — and kept
 *               here as *ghosts*: translations (engine hash → ours, parent) that are not
 *               routed on. The index is rebuilt from the batches after the hole: blocks
 *               stored since, and every ghost chain a new BlockStored extends — the request
 *               that stored a child holds its parent and every ancestor, so they are cached
 *               now (promoted: moved to the held blocks and STORED). A removal drops a held
 *               block or a ghost. So the index is always a subset of the cache, and a prefix
 *               in use comes back the first time a request extends it. It is EXACT again only
 *               at a new known base (a restart of the worker, an AllBlocksCleared, or a retry
 *               that finds batch 0 still buffered): cached blocks that no event mentions after
 *               the hole (a prefix hit by requests that store nothing new) cannot be told from
 *               evicted ones, so exactness is never claimed from the rebuild alone. Another
 *               hole demotes what was rebuilt to ghosts again.
 *   (DEGRADED   [DEGRADED] is not a stream state: collector_node reports it for a worker
 *               whose KV events cannot be subscribed to.)
 *
 * Replays (vLLM's ROUTER; the caller owns the DEALER): collector_replay_fn START asks for
 * every buffered batch from a start seq; the caller hands each reply message to
 * collector_stream_replay_reply until the stream says STOP. Three kinds:
 *   - gap:     from the LAST APPLIED seq (one more than strictly needed): the first reply must
 *              be that batch with the same payload digest — proof that the replaying process
 *              is the one we followed (a batch carries its wall-clock ts). If the worker
 *              already evicted it but still has last+1, that is accepted unproven. A digest
 *              mismatch means a new process: CLEARED, and a rebuild replay from 0. A first
 *              reply after last+1: the hole is not buffered any more; RECOVERING from it (the
 *              rest of the replay is applied).
 *   - resume:  a gap replay from a checkpoint's last seq (collector_stream_resume); proven
 *              (or continued at last+1), the checkpoint's blocks are STORED and the stream is
 *              what the checkpoint was; evicted, they become ghosts (RECOVERING); a digest
 *              mismatch or nothing at all buffered: the checkpoint is dropped (another worker
 *              process) and the history rebuilt from 0.
 *   - rebuild: from 0, at start-up, after joining late or a restart, and as the RECOVERING
 *              retry: the first reply must be batch 0; the state is cleared and rebuilt. A
 *              first reply after 0 (not a retry): RECOVERING from it. Nothing buffered at all
 *              (not a retry, or nothing seen of the worker yet): it never published a batch,
 *              so its cache is empty: EXACT.
 * A replay succeeds when it reaches the batch before the live one that triggered it. Live
 * batches arriving meanwhile are buffered (bounded) and applied after it, the ones already
 * replayed dropped. No reply frame for `replay_timeout_ms` fails it.
 *
 * Retries (rebuild replays from 0, exponential backoff) follow a loss whose cause may pass (a
 * replay that timed out, could not start or broke off); not one whose cause is permanent (the
 * worker's buffer no longer starts at batch 0: that process's batch 0 is gone for good, and a
 * new process is seen by its sequence or its /metrics). While a retry is pending, gaps are not
 * replayed (a dead replay endpoint costs a timeout each). A retry that fails leaves the state
 * as it is.
 *
 * Without a replay endpoint, a worker that publishes nothing for `silent_exact_ms` after the
 * start is taken as empty (EXACT): nothing tells it from one that published before we joined,
 * but an empty index is a subset of any cache, and its first batch after 0 shows the truth.
 *
 * Blocks we cannot hash like the gateway does: events for a medium other than GPU, for a
 * KV-cache group other than 0 or a spec kind other than full_attention (hybrid models), are
 * skipped (counted); blocks with extra keys that are not a LoRA name (cache salt, multimodal)
 * are hashed into a private key space that no request ever matches (never a false cache hit).
 *
 * Not thread-safe; one stream per worker, driven by the collector's loop. This header includes
 * neither ipl_vllm_kv.h nor ipl_proto.h: the vLLM side and our wire side stay apart.
 */
#ifndef COLLECTOR_STREAM_H
#define COLLECTOR_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collector_blockmap.h"

/* Operations: the same values as proto's IPL_KV_OP_* (checked where both are visible). */
enum { COLLECTOR_OP_STORED = 1, COLLECTOR_OP_REMOVED = 2, COLLECTOR_OP_CLEARED = 3 };
/* Exactness: the same values as proto's IPL_KV_EXACT / _SYNCING / _DEGRADED. */
enum { COLLECTOR_KV_EXACT = 0, COLLECTOR_KV_SYNCING = 1, COLLECTOR_KV_DEGRADED = 2 };
/* The collector's own view adds RECOVERING (sent as SYNCING: the index is a subset). */
enum { COLLECTOR_STATE_RECOVERING = 3, COLLECTOR_NSTATES = 4 };

/* One operation for the aggregator. Pointers are borrowed for the duration of the callback.
 * Operations come in the order of the events. A STORED is one BlockStored (one chain); a
 * REMOVED is a whole run of consecutive BlockRemoved events of one batch (vLLM sends one per
 * block), the hashes the map knew, in event order (at most IPL_VLLM_KV_MAX_BLOCKS per op). */
typedef struct {
    int op;
    const uint64_t *hashes; /* our chained hashes (STORED: chain order; REMOVED: event order) */
    uint64_t parent;        /* STORED: our hash of the block before hashes[0]; 0: none known */
    uint32_t nhashes;
    uint32_t block_size; /* of the event, or the last one seen */
    uint64_t epoch;
    uint64_t src_seq; /* the worker's batch sequence number (0 for start-up CLEARED) */
} collector_op_t;

typedef void(collector_op_fn)(void *arg, const collector_op_t *op);

/* The replay seam (the caller owns the socket).
 *   START: connect to the worker's replay endpoint and send [b"", start_seq 8-byte BE]; return
 *          false when that is impossible right now (the stream counts it as a failed replay).
 *          Only one replay runs at a time.
 *   STOP:  the replay is over (done, failed or timed out): drop its socket, so that a late
 *          reply of it never reaches the stream. `start_seq` is 0.
 * Called from inside collector_stream_* calls, possibly STOP then START in one call. */
typedef enum { COLLECTOR_REPLAY_START = 1, COLLECTOR_REPLAY_STOP = 2 } collector_replay_op_t;
typedef bool(collector_replay_fn)(void *arg, collector_replay_op_t op, uint64_t start_seq);

/* Timing and bounds; zero fields take the defaults in brackets. */
typedef struct {
    uint64_t replay_timeout_ms; /* no reply message for this long: failed [2000] */
    uint64_t retry_min_ms;      /* first DEGRADED retry after [1000], doubling... */
    uint64_t retry_max_ms;      /* ...up to [30000] */
    size_t max_pending;         /* live batches buffered during a replay [65536] */
    size_t max_pending_bytes;   /* and their bytes [64 MiB]; beyond: the replay fails */
    size_t max_ghosts;          /* ghosts kept while RECOVERING [1 Mi blocks]; beyond, the
                                   older ones go (only translations are lost) */
    uint64_t silent_exact_ms;   /* no replay endpoint: empty after this long silent [5000] */
} collector_stream_limits_t;

typedef struct {
    uint64_t batches;          /* payloads decoded and applied */
    uint64_t events;           /* events in them */
    uint64_t blocks_stored;    /* our hashes sent in STORED */
    uint64_t blocks_removed;   /* our hashes sent in REMOVED */
    uint64_t clears;           /* AllBlocksCleared received */
    uint64_t gaps;             /* sequence gaps */
    uint64_t missed_batches;   /* batches lost in them (before replay) */
    uint64_t restarts;         /* a new worker process was detected */
    uint64_t unknown_parents;  /* BlockStored skipped: parent not in the map */
    uint64_t unknown_removed;  /* BlockRemoved hashes not in the map (ignored) */
    uint64_t skipped_events;   /* other medium / KV group, or token count mismatch */
    uint64_t private_blocks;   /* hashed into the private key space (extra keys) */
    uint64_t decode_errors;    /* messages dropped (bad seq frame or payload) */
    uint64_t duplicates;       /* live batches dropped: already applied (from a replay) */
    uint64_t replays;          /* replays started */
    uint64_t replays_ok;       /* ... that succeeded */
    uint64_t replays_failed;   /* ... that failed (START refused, timeout, evicted, ...) */
    uint64_t replayed_batches; /* batches applied from replays */
    uint64_t replay_stray;     /* reply messages with no replay running (ignored) */
    uint64_t degradations;     /* times the base was lost (the stream became RECOVERING) */
    uint64_t retries;          /* RECOVERING retries (rebuild replays) started */
    uint64_t promoted;         /* ghosts confirmed cached by a child's BlockStored, and held */
    uint64_t ghost_removed;    /* BlockRemoved of a ghost (dropped) */
    bool has_seq;              /* a batch was applied */
    uint64_t last_seq;         /* the last applied batch */
    uint64_t epoch;
    int kv_state;            /* on the wire (COLLECTOR_KV_*) */
    int state;               /* collector_stream_state() */
    uint64_t state_since_ms; /* the stream's clock when `state` was entered */
    bool has_recover_seq;    /* RECOVERING: a batch was applied since the base was lost... */
    uint64_t recover_seq;    /* ...the first of them */
    bool replaying;
    size_t pending;       /* live batches buffered now */
    uint64_t retry_at_ms; /* next DEGRADED retry (0: none scheduled) */
    size_t mapped;        /* engine→ours entries = blocks held */
    size_t ghosts;        /* blocks known by translation only (RECOVERING) */
    uint64_t generation;  /* grows whenever what collector_stream_image saves changes */
    const char *why;      /* what caused the current state (static string) */
    const char *resume;   /* a checkpoint's fate (static): "none" (not resumed), "resuming",
                             "proven", "continued", "evicted", "restarted", "discarded",
                             "failed" */
} collector_stream_stats_t;

typedef struct collector_stream collector_stream_t;

/* `worker` is copied (for logs). `epoch` is this incarnation's first epoch; it grows by one on
 * every restart (pass something unique per collector start, e.g. wall-clock ms). `fn` receives
 * every operation. NULL when out of memory. */
collector_stream_t *collector_stream_new(const char *worker, uint64_t epoch, collector_op_fn *fn,
                                         void *arg);
void collector_stream_destroy(collector_stream_t **self_p);

/* Enables replays (call before start; without it every gap is unrecoverable). */
void collector_stream_set_replay(collector_stream_t *self, collector_replay_fn *fn, void *arg);
void collector_stream_set_limits(collector_stream_t *self, const collector_stream_limits_t *lim);

/* The stream's clock (monotonic ms): call before start and then regularly (every loop round);
 * it fires replay timeouts and DEGRADED retries. */
void collector_stream_tick(collector_stream_t *self, uint64_t now_ms);

/* Emits CLEARED with the current epoch (the aggregator forgets whatever a previous incarnation
 * of this collector reported for the worker) and, with replays enabled, starts the catch-up
 * replay from seq 0. Call once, when the worker is first subscribed. */
void collector_stream_start(collector_stream_t *self);

/* What a checkpoint saves: the stream as of its last applied batch. */
enum {
    COLLECTOR_IMAGE_BASE = 1,       /* every batch since a known base applied */
    COLLECTOR_IMAGE_INCOMPLETE = 2, /* ...but blocks were skipped (a subset) */
    COLLECTOR_IMAGE_RECOVERING = 4, /* the base was lost; the blocks are a rebuilt subset */
    COLLECTOR_IMAGE_FLAGS = 7
};
typedef struct {
    uint64_t last_seq, last_digest; /* the last applied batch and its payload's digest */
    uint64_t epoch;                 /* informational */
    uint32_t block_size;
    uint32_t flags;            /* COLLECTOR_IMAGE_*; BASE and RECOVERING exclude each other */
    collector_block_t *blocks; /* held (what the aggregator has) */
    size_t nblocks;
    collector_block_t *ghosts; /* translations only */
    size_t nghosts;
} collector_stream_image_t;

/* Fills *out with malloc'd copies (free with collector_stream_image_free). IPL_E_NOTFOUND when
 * there is nothing worth saving (no batch applied), IPL_E_NOMEM, or 0. */
int collector_stream_image(const collector_stream_t *self, collector_stream_image_t *out);
void collector_stream_image_free(collector_stream_image_t *img);

/* Instead of collector_stream_start, after a collector restart: emits CLEARED (like start),
 * takes the image's blocks and ghosts (copied; none is sent before the proof) and checks,
 * with a resume replay from its last seq, that the worker is the process it describes and
 * that no batch is missing since; without replays, the first live batch must be last+1. See
 * the header comment for the outcomes (stats.resume). IPL_E_INVAL for an image that is not
 * one (flags), IPL_E_NOMEM (then nothing was taken: call collector_stream_start). */
int collector_stream_resume(collector_stream_t *self, const collector_stream_image_t *img);

/* Handles one live PUB message: its sequence frame and its payload frame (the topic is not
 * needed). Returns 0, or the IPL_E_* code of a message that was dropped (IPL_E_INVAL: the
 * sequence frame is not 8 bytes, state unchanged; a decoder code: the batch is lost and the
 * stream becomes DEGRADED). */
int collector_stream_message(collector_stream_t *self, const uint8_t *seq_frame, size_t seq_len,
                             const uint8_t *payload, size_t payload_len);

/* The worker restarted, as told by something other than its sequence (its /metrics: a new
 * process start time, counters that went down). Its entries are CLEARED at once — a restarted
 * worker must not attract requests with the old process's cache before it publishes anything
 * — and its history is replayed from 0 (with replays), as at start. */
void collector_stream_restarted(collector_stream_t *self, const char *why);

/* One reply message of the running replay: the frames after the empty delimiter, either 2
 * ([seq, payload], vLLM <= 0.25) or 3 ([topic, seq, payload], vLLM >= 0.26). The end marker is
 * a seq of eight 0xff bytes or an empty payload. Returns 0, IPL_E_INVAL for a message that is
 * not a valid reply (the replay then failed) or that came with no replay running (ignored), or
 * the decoder's code for a replayed batch that does not decode. */
int collector_stream_replay_reply(collector_stream_t *self, const uint8_t *const *frames,
                                  const size_t *lens, size_t nframes);

/* Walks our hashes of every block the worker holds (as the aggregator should have them;
 * nothing while a resumed checkpoint is not proven yet).
 * `fn` returns 0 to go on; non-zero stops the walk and is returned. */
int collector_stream_foreach(const collector_stream_t *self, int (*fn)(void *arg, uint64_t hash),
                             void *arg);

int collector_stream_kv_state(const collector_stream_t *self); /* COLLECTOR_KV_*, as sent */
/* COLLECTOR_KV_EXACT, COLLECTOR_KV_SYNCING or COLLECTOR_STATE_RECOVERING */
int collector_stream_state(const collector_stream_t *self);
uint32_t collector_stream_block_size(const collector_stream_t *self); /* last seen, 0 = none */
const collector_stream_stats_t *collector_stream_stats(const collector_stream_t *self);
/* "exact" | "syncing" | "degraded" | "recovering" (COLLECTOR_KV_* or _STATE_RECOVERING) */
const char *collector_kv_state_name(int state);

#endif
