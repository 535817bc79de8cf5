/*
 * decider_names — a memo of worker-name → id lookups keyed by the caller's string pointer.
 *
 * Every decision looks up each policy worker's id in the replica and in the ledger by name
 * (128 lookups for a 64-worker pool: about 7% of a decider's CPU in ipl_index_find_worker's
 * hash, probe and strcmp). The names are the policy's strings, the same pointers decision
 * after decision, so a bucket of two slots chosen by the pointer remembers the id; a slot is
 * used only when the text matches too (a policy update may reuse the address for another
 * name), compared inline for names shorter than DECIDER_NAMES_TEXT bytes (longer names are
 * not memoized).
 *
 * `space` names one id space in which a name's id never changes (a decider_state's index,
 * a ledger); 0 is never one. Negative results are not memoized (a worker may appear later).
 * A decider_names_t is zero-initialised and not thread-safe (one per thread or owner).
 */
#ifndef DECIDER_NAMES_H
#define DECIDER_NAMES_H

#include <stdint.h>

#define DECIDER_NAMES_BUCKETS 256 /* of two slots */
#define DECIDER_NAMES_TEXT    16  /* bytes of a memoized name, its NUL included */

typedef struct {
    const char *name; /* the pointer last looked up in this slot */
    uint64_t space;   /* 0: empty */
    int32_t id;
    char text[DECIDER_NAMES_TEXT];
} decider_names_slot_t;

typedef struct {
    decider_names_slot_t slot[DECIDER_NAMES_BUCKETS][2];
} decider_names_t;

/* The id memoized for `name` in `space`, or -1 (look it up, then decider_names_put). */
int decider_names_get(const decider_names_t *self, uint64_t space, const char *name);

/* Memoizes id (>= 0) for `name` in `space`, replacing that slot's entry. */
void decider_names_put(decider_names_t *self, uint64_t space, const char *name, int id);

#endif
