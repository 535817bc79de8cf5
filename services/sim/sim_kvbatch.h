/*
 * sim_kvbatch — the KV-cache events of one engine step, in order, before encoding.
 *
 * The prefix cache appends events as it commits and evicts blocks; the publisher encodes the
 * batch into vLLM's wire format (sim_kvpub). Hashes are the engine's 64-bit wire values
 * (ExternalBlockHash as an int). Arrays grow as needed and are reused after sim_kvbatch_reset,
 * so a steady-state step allocates nothing. Not thread-safe: the engine's lock guards it.
 */
#ifndef SIM_KVBATCH_H
#define SIM_KVBATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    SIM_KV_STORED = 1,  /* BlockStored */
    SIM_KV_REMOVED = 2, /* BlockRemoved */
    SIM_KV_CLEARED = 3, /* AllBlocksCleared */
} sim_kv_kind_t;

/* A view of one event; pointers are borrowed from the batch until its next change. */
typedef struct {
    sim_kv_kind_t kind;
    const uint64_t *hashes; /* STORED/REMOVED: the blocks' hashes, chain order */
    uint32_t nhashes;
    bool has_parent; /* STORED: false when the first block starts a chain */
    uint64_t parent;
    const uint32_t *tokens; /* STORED: nhashes * block_size token ids, concatenated */
    uint32_t ntokens;
    uint32_t block_size;
} sim_kv_event_t;

typedef struct sim_kvbatch sim_kvbatch_t;

sim_kvbatch_t *sim_kvbatch_new(void);
void sim_kvbatch_destroy(sim_kvbatch_t **self_p);
void sim_kvbatch_reset(sim_kvbatch_t *self); /* empties it, keeps the memory */
size_t sim_kvbatch_count(const sim_kvbatch_t *self);
/* Event i (0 <= i < count) into *out. */
void sim_kvbatch_get(const sim_kvbatch_t *self, size_t i, sim_kv_event_t *out);

/* Appends; `hashes` and `tokens` are copied. 0 or IPL_E_NOMEM (the batch is unchanged). */
int sim_kvbatch_stored(sim_kvbatch_t *self, const uint64_t *hashes, uint32_t nhashes,
                       bool has_parent, uint64_t parent, const uint32_t *tokens,
                       uint32_t block_size);
int sim_kvbatch_removed(sim_kvbatch_t *self, uint64_t hash);
int sim_kvbatch_cleared(sim_kvbatch_t *self);

#endif
