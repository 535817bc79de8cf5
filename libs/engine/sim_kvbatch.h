/*
 * sim_kvbatch — the KV-cache events of one engine step, in order, before encoding.
 *
 * The prefix cache appends events as it commits and evicts blocks; the publisher encodes the
 * batch into vLLM's wire format (sim_kvwire). Hashes are the engine's full digests (sim_hasher),
 * so the encoder can send either vLLM's default int form (the last 8 bytes) or the raw bytes.
 * A BlockStored event also carries the request's LoRA adapter and cache salt, from which the
 * encoder writes lora_id, lora_name and extra_keys as vLLM does. Everything is copied in:
 * the requests behind the events may be gone before the batch is published. Arrays grow as
 * needed and are reused after sim_kvbatch_reset, so a steady-state step allocates nothing.
 * Not thread-safe: the engine's lock guards it.
 */
#ifndef SIM_KVBATCH_H
#define SIM_KVBATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sim_hasher.h"

typedef enum {
    SIM_KV_STORED = 1,  /* BlockStored */
    SIM_KV_REMOVED = 2, /* BlockRemoved */
    SIM_KV_CLEARED = 3, /* AllBlocksCleared */
} sim_kv_kind_t;

/* What besides its tokens keys a request's blocks (vLLM's extra_keys): its LoRA adapter (on
 * every block) and its cache salt (on the chain's first block only). */
typedef struct {
    int64_t lora_id;        /* vLLM's lora_int_id (1, 2, ...), 0 = no LoRA */
    const char *lora_name;  /* NULL = no LoRA */
    const char *cache_salt; /* NULL = no salt */
} sim_block_keys_t;

/* A view of one event; pointers are borrowed from the batch until its next change. */
typedef struct {
    sim_kv_kind_t kind;
    const sim_hash_t *hashes; /* STORED/REMOVED: the blocks' digests, chain order */
    uint32_t nhashes;
    bool has_parent; /* STORED: false when the first block starts a chain */
    sim_hash_t parent;
    const uint32_t *tokens; /* STORED: nhashes * block_size token ids, concatenated */
    uint32_t ntokens;
    uint32_t block_size;
    sim_block_keys_t keys; /* STORED; strings borrowed from the batch */
} sim_kv_event_t;

typedef struct sim_kvbatch sim_kvbatch_t;

sim_kvbatch_t *sim_kvbatch_new(void);
void sim_kvbatch_destroy(sim_kvbatch_t **self_p);
void sim_kvbatch_reset(sim_kvbatch_t *self); /* empties it, keeps the memory */
size_t sim_kvbatch_count(const sim_kvbatch_t *self);
/* Event i (0 <= i < count) into *out. */
void sim_kvbatch_get(const sim_kvbatch_t *self, size_t i, sim_kv_event_t *out);

/* Appends; everything is copied. `parent` NULL when the first block starts a chain; `keys`
 * NULL for none. 0 or IPL_E_NOMEM (the batch is unchanged). */
int sim_kvbatch_stored(sim_kvbatch_t *self, const sim_hash_t *hashes, uint32_t nhashes,
                       const sim_hash_t *parent, const uint32_t *tokens, uint32_t block_size,
                       const sim_block_keys_t *keys);
int sim_kvbatch_removed(sim_kvbatch_t *self, const sim_hash_t *hash);
int sim_kvbatch_cleared(sim_kvbatch_t *self);

#endif
