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
 * base-model blocks. The map is kept for BlockRemoved (engine hash → our hash, entry dropped)
 * and emptied whenever the worker's state is cleared. Its values are exactly the blocks the
 * aggregator holds for the worker (collector_stream_foreach walks them for a resend).
 *
 * Exactness. vLLM numbers each process's batches from 0 and has no other incarnation id, so
 * the stream is EXACT only while it has applied, with no hole, every batch since a *known
 * base*: batch 0 of the current process (its cache starts empty) or an AllBlocksCleared (the
 * cache is empty after it). States (as LOAD.kv_state):
 *
 *   SYNCING   the base is not established yet (start-up: waiting for batch 0 or for the
 *             catch-up replay), a replay is running, or blocks had to be skipped (unknown
 *             parent, out of memory: the index is a subset of the worker's cache).
 *   EXACT     the index equals the worker's prefix cache (as far as events describe it).
 *   DEGRADED  the base was lost for good: a gap whose replay failed or was impossible (no
 *             replay endpoint, timeout, the start already evicted from the worker's buffer,
 *             a reply that does not continue the sequence), an undecodable batch, or a
 *             history we joined late and cannot replay. On entering it the worker's entries
 *             are CLEARED; later batches are still applied (they are facts, so the index stays
 *             a subset of the cache; another gap clears again), but deciders ignore the index
 *             for a DEGRADED worker. It ends only at a new known base: a worker restart
 *             (sequence back; batch 0 seen or replayed), an AllBlocksCleared, or a retry —
 *             exponential backoff — of a replay from seq 0 that the worker's buffer can still
 *             answer from batch 0. Closing the one gap later is not enough: blocks removed in
 *             it are unknown, so exactness is never claimed after an unrecoverable gap.
 *
 * Replays (vLLM's ROUTER; the caller owns the DEALER): collector_replay_fn START asks for
 * every buffered batch from a start seq; the caller hands each reply message to
 * collector_stream_replay_reply until the stream says STOP. Two kinds:
 *   - gap:     from the LAST APPLIED seq (one more than strictly needed): the first reply must
 *              be that batch with the same payload digest — proof that the replaying process
 *              is the one we followed (a batch carries its wall-clock ts). If the worker
 *              already evicted it but still has last+1, that is accepted unproven. A digest
 *              mismatch means a new process: CLEARED, and a rebuild replay from 0.
 *   - rebuild: from 0, at start-up, after joining late or a restart, and as the DEGRADED
 *              retry: the first reply must be batch 0; the state is cleared and rebuilt.
 * A replay succeeds when it reaches the batch before the live one that triggered it. Live
 * batches arriving meanwhile are buffered (bounded) and applied after it, the ones already
 * replayed dropped. No reply frame for `replay_timeout_ms` fails it.
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

/* Operations: the same values as proto's IPL_KV_OP_* (checked where both are visible). */
enum { COLLECTOR_OP_STORED = 1, COLLECTOR_OP_REMOVED = 2, COLLECTOR_OP_CLEARED = 3 };
/* Exactness: the same values as proto's IPL_KV_EXACT / _SYNCING / _DEGRADED. */
enum { COLLECTOR_KV_EXACT = 0, COLLECTOR_KV_SYNCING = 1, COLLECTOR_KV_DEGRADED = 2 };

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
    uint64_t degradations;     /* times the stream became DEGRADED */
    uint64_t retries;          /* DEGRADED retries (rebuild replays) started */
    bool has_seq;              /* a batch was applied */
    uint64_t last_seq;         /* the last applied batch */
    uint64_t epoch;
    int kv_state;
    bool replaying;
    size_t pending;       /* live batches buffered now */
    uint64_t retry_at_ms; /* next DEGRADED retry (0: none scheduled) */
    size_t mapped;        /* engine→ours entries = blocks held */
    const char *why;      /* what caused the current state (static string) */
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

/* Walks our hashes of every block the worker holds (as the aggregator should have them).
 * `fn` returns 0 to go on; non-zero stops the walk and is returned. */
int collector_stream_foreach(const collector_stream_t *self, int (*fn)(void *arg, uint64_t hash),
                             void *arg);

int collector_stream_kv_state(const collector_stream_t *self);
uint32_t collector_stream_block_size(const collector_stream_t *self); /* last seen, 0 = none */
const collector_stream_stats_t *collector_stream_stats(const collector_stream_t *self);
const char *collector_kv_state_name(int kv_state); /* "exact" | "syncing" | "degraded" */

#endif
