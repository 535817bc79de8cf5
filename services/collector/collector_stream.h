/*
 * collector_stream — one worker's vLLM KV-event stream turned into our index operations.
 *
 *   [topic, seq(8 B BE), payload] ──► sequence check ──► ipl_vllm_kv decode ──► re-hash
 *                                       │ gap: count, log, gap hook (replay seam)    │
 *                                       │ seq back to 0 / below last: restart        ▼
 *                                       └──► op CLEARED, new epoch      collector_op_fn(op)
 *
 * Hashes: the engine's block hashes are never forwarded. For each BlockStored we recompute
 * OUR chained hashes (ipl_hash.h) from its token ids, starting from the parent's hash: the
 * engine's parent_block_hash is looked up in this worker's engine→ours map; a nil parent starts
 * a chain at ipl_hash_chain_start(ipl_hash_key(lora_name, NULL)), so LoRA blocks never match
 * base-model blocks. The map is kept for BlockRemoved (engine hash → our hash, entry dropped)
 * and emptied on AllBlocksCleared and on a restart.
 *
 * Exactness (kv_state, as in LOAD): EXACT until something makes the index unreliable —
 *   - a sequence gap (batches missed: removals may be missing) → SYNCING, unless the gap hook
 *     reports that a replay was started (issue 5 plugs the DEALER replay in there);
 *   - a BlockStored whose parent is unknown (its chain cannot be rebuilt) → SYNCING, event
 *     skipped;
 *   - a payload that fails to decode (its events are lost) → SYNCING.
 * AllBlocksCleared and a worker restart make the stream EXACT again (nothing is held).
 *
 * Blocks we cannot hash like the gateway does: events for a medium other than GPU, for a
 * KV-cache group other than 0 or a spec kind other than full_attention (hybrid models), are
 * skipped (counted); blocks with extra keys
 * that are not a LoRA name (cache salt, multimodal) are hashed into a private key space that
 * no request ever matches (never a false cache hit).
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

/* One operation for the aggregator. Pointers are borrowed for the duration of the callback. */
typedef struct {
    int op;
    const uint64_t *hashes; /* our chained hashes (STORED / REMOVED), chain order */
    uint32_t nhashes;
    uint32_t block_size; /* of the event, or the last one seen */
    uint64_t epoch;
    uint64_t src_seq; /* the worker's batch sequence number (0 for start-up CLEARED) */
} collector_op_t;

typedef void(collector_op_fn)(void *arg, const collector_op_t *op);

/* The replay seam. Called on a gap with the first missing sequence number and the one that
 * arrived. Return true when a replay of [first_missing, received) was started and will be fed
 * back through collector_stream_message (the stream then stays EXACT); false leaves it
 * SYNCING. */
typedef bool(collector_gap_fn)(void *arg, uint64_t first_missing, uint64_t received);

typedef struct {
    uint64_t batches;         /* payloads decoded and applied */
    uint64_t events;          /* events in them */
    uint64_t blocks_stored;   /* our hashes sent in STORED */
    uint64_t blocks_removed;  /* our hashes sent in REMOVED */
    uint64_t clears;          /* AllBlocksCleared received */
    uint64_t gaps;            /* sequence gaps */
    uint64_t missed_batches;  /* batches lost in them */
    uint64_t restarts;        /* sequence went back: worker restarted */
    uint64_t unknown_parents; /* BlockStored skipped: parent not in the map */
    uint64_t unknown_removed; /* BlockRemoved hashes not in the map (ignored) */
    uint64_t skipped_events;  /* other medium / KV group, or token count mismatch */
    uint64_t private_blocks;  /* hashed into the private key space (extra keys) */
    uint64_t decode_errors;   /* messages dropped (bad seq frame or payload) */
    bool has_seq;             /* a batch was seen */
    uint64_t last_seq;
    uint64_t epoch;
    int kv_state;
    size_t mapped; /* engine→ours entries */
} collector_stream_stats_t;

typedef struct collector_stream collector_stream_t;

/* `worker` is copied (for logs). `epoch` is this incarnation's first epoch; it grows by one on
 * every restart (pass something unique per collector start, e.g. wall-clock ms). `fn` receives
 * every operation. NULL when out of memory. */
collector_stream_t *collector_stream_new(const char *worker, uint64_t epoch, collector_op_fn *fn,
                                         void *arg);
void collector_stream_destroy(collector_stream_t **self_p);

void collector_stream_set_gap_handler(collector_stream_t *self, collector_gap_fn *fn, void *arg);

/* Emits CLEARED with the current epoch: the aggregator forgets whatever a previous incarnation
 * of this collector reported for the worker. Call when the worker is first subscribed. */
void collector_stream_start(collector_stream_t *self);

/* Handles one PUB message: its sequence frame and its payload frame (the topic is not
 * needed). Returns 0, or the IPL_E_* code of a message that was dropped (IPL_E_INVAL: the
 * sequence frame is not 8 bytes, state unchanged; a decoder code: the batch is lost, the
 * sequence still advances and the stream becomes SYNCING). */
int collector_stream_message(collector_stream_t *self, const uint8_t *seq_frame, size_t seq_len,
                             const uint8_t *payload, size_t payload_len);

int collector_stream_kv_state(const collector_stream_t *self);
uint32_t collector_stream_block_size(const collector_stream_t *self); /* last seen, 0 = none */
const collector_stream_stats_t *collector_stream_stats(const collector_stream_t *self);

#endif
