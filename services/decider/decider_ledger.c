/*
 * decider_ledger — in-flight rings and generations of optimistic blocks (see the header).
 */
#include "decider_ledger.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ipl_index.h"

typedef struct {
    uint64_t at[DECIDER_LEDGER_RING]; // wall ms of routings, oldest overwritten
    uint32_t next;                    // slot of the next routing
    uint32_t count;                   // valid slots (<= RING)
} s_ring_t;

struct decider_ledger {
    uint64_t ttl_ms;
    ipl_index_t *gen[DECIDER_LEDGER_GENERATIONS]; // [0] newest
    uint64_t rotated_ms;                          // monotonic time of the last rotation
    bool started;                                 // rotated_ms is set
    s_ring_t ring[IPL_INDEX_MAX_WORKERS];
    uint32_t scratch[IPL_INDEX_MAX_WORKERS]; // decider_ledger_match's per-generation result
};

decider_ledger_t *decider_ledger_new(uint64_t ttl_ms)
{
    decider_ledger_t *self = calloc(1, sizeof *self);
    if (!self) return NULL;
    self->ttl_ms = ttl_ms;
    for (int g = 0; g < DECIDER_LEDGER_GENERATIONS; g++) {
        self->gen[g] = ipl_index_new();
        if (!self->gen[g]) {
            decider_ledger_destroy(&self);
            return NULL;
        }
    }
    return self;
}

void decider_ledger_destroy(decider_ledger_t **self_p)
{
    if (!self_p || !*self_p) return;
    for (int g = 0; g < DECIDER_LEDGER_GENERATIONS; g++)
        ipl_index_destroy(&(*self_p)->gen[g]);
    free(*self_p);
    *self_p = NULL;
}

int decider_ledger_worker(decider_ledger_t *self, const char *name)
{
    int id = -1;
    // Every generation names the same workers in the same order, so ids agree.
    for (int g = 0; g < DECIDER_LEDGER_GENERATIONS; g++)
        id = ipl_index_worker(self->gen[g], name);
    return id;
}

// Drops the oldest generation(s) when TTL/2 has passed, keeping worker ids.
static void s_rotate(decider_ledger_t *self, uint64_t mono_ms)
{
    uint64_t period = self->ttl_ms / 2 ? self->ttl_ms / 2 : 1;
    if (!self->started) {
        self->started = true;
        self->rotated_ms = mono_ms;
        return;
    }
    // One rotation per elapsed period; after a long idle time, at most one per generation
    // (which drops them all).
    for (int k = 0; k < DECIDER_LEDGER_GENERATIONS && mono_ms - self->rotated_ms >= period; k++) {
        ipl_index_t *fresh = ipl_index_new();
        if (!fresh) return; // keep the old generations; try again next time
        const ipl_index_t *names = self->gen[0];
        for (int w = 0; w < ipl_index_nworkers(names); w++)
            ipl_index_worker(fresh, ipl_index_worker_name(names, w));
        ipl_index_destroy(&self->gen[DECIDER_LEDGER_GENERATIONS - 1]);
        memmove(&self->gen[1], &self->gen[0], (DECIDER_LEDGER_GENERATIONS - 1) * sizeof *self->gen);
        self->gen[0] = fresh;
        self->rotated_ms += period;
    }
    if (mono_ms - self->rotated_ms >= period) self->rotated_ms = mono_ms;
}

size_t decider_ledger_match(decider_ledger_t *self, const uint64_t *hashes, size_t n,
                            uint32_t *prefix, size_t max, uint64_t mono_ms)
{
    int nworkers = ipl_index_nworkers(self->gen[0]);
    size_t m = (size_t)nworkers < max ? (size_t)nworkers : max;
    memset(prefix, 0, m * sizeof *prefix);
    if (!self->ttl_ms || n == 0) return 0;
    s_rotate(self, mono_ms);
    bool any = false;
    for (int g = 0; g < DECIDER_LEDGER_GENERATIONS; g++) {
        if (ipl_index_memberships(self->gen[g]) == 0) continue;
        any = true;
        ipl_index_match(self->gen[g], hashes, n, self->scratch, m);
        for (size_t w = 0; w < m; w++)
            if (self->scratch[w] > prefix[w]) prefix[w] = self->scratch[w];
    }
    size_t best = 0;
    for (size_t w = 0; any && w < m; w++) {
        // A chain assumed in two steps (a longer prompt routed later) is split across
        // generations: continue it from where the longest part ends, in any generation.
        for (bool grew = prefix[w] > 0; grew && prefix[w] < n;) {
            grew = false;
            for (int g = 0; g < DECIDER_LEDGER_GENERATIONS && prefix[w] < n; g++) {
                if (ipl_index_worker_blocks(self->gen[g], (int)w) == 0) continue;
                ipl_index_match(self->gen[g], hashes + prefix[w], n - prefix[w], self->scratch, m);
                if (self->scratch[w]) {
                    prefix[w] += self->scratch[w];
                    grew = true;
                }
            }
        }
        if (prefix[w] > best) best = prefix[w];
    }
    return best;
}

void decider_ledger_routed(decider_ledger_t *self, int worker, const uint64_t *hashes, size_t n,
                           uint64_t wall_ms, uint64_t mono_ms)
{
    if (worker < 0 || worker >= IPL_INDEX_MAX_WORKERS) return;
    s_ring_t *r = &self->ring[worker];
    r->at[r->next] = wall_ms;
    r->next = (r->next + 1) % DECIDER_LEDGER_RING;
    if (r->count < DECIDER_LEDGER_RING) r->count++;
    if (!self->ttl_ms || n == 0) return;
    // Only blocks not already assumed: an assumption is never extended (see the header).
    uint32_t held[IPL_INDEX_MAX_WORKERS];
    decider_ledger_match(self, hashes, n, held, IPL_INDEX_MAX_WORKERS, mono_ms);
    size_t have = held[worker];
    if (have < n) ipl_index_add(self->gen[0], worker, hashes + have, n - have);
}

uint32_t decider_ledger_inflight(const decider_ledger_t *self, int worker, uint64_t since_wall_ms,
                                 uint64_t wall_ms)
{
    if (worker < 0 || worker >= IPL_INDEX_MAX_WORKERS) return 0;
    const s_ring_t *r = &self->ring[worker];
    uint64_t horizon = wall_ms > DECIDER_LEDGER_INFLIGHT_HORIZON_MS
                           ? wall_ms - DECIDER_LEDGER_INFLIGHT_HORIZON_MS
                           : 0;
    uint64_t after = since_wall_ms > horizon ? since_wall_ms : horizon;
    uint32_t n = 0;
    // Newest first; routings are recorded in time order, so stop at the first old one.
    for (uint32_t i = 0; i < r->count; i++) {
        uint32_t slot = (r->next + DECIDER_LEDGER_RING - 1 - i) % DECIDER_LEDGER_RING;
        if (r->at[slot] <= after) break;
        n++;
    }
    return n;
}

size_t decider_ledger_memberships(const decider_ledger_t *self)
{
    size_t n = 0;
    for (int g = 0; g < DECIDER_LEDGER_GENERATIONS; g++)
        n += ipl_index_memberships(self->gen[g]);
    return n;
}
