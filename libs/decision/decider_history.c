/*
 * decider_history — two generations of ipl_index (see the header).
 */
#include "decider_history.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ipl_error.h"
#include "ipl_index.h"

struct decider_history {
    ipl_index_t *gen[2]; // [0] newest
    size_t max_blocks;
    uint64_t check_ms, checked_ms;
    bool started;
    uint64_t evictions;
    uint32_t scratch[IPL_INDEX_MAX_WORKERS];
};

decider_history_t *decider_history_new(size_t max_blocks, uint64_t check_ms)
{
    decider_history_t *self = calloc(1, sizeof *self);
    if (!self) return NULL;
    self->max_blocks = max_blocks;
    self->check_ms = check_ms;
    self->gen[0] = ipl_index_new();
    self->gen[1] = ipl_index_new();
    if (!self->gen[0] || !self->gen[1]) decider_history_destroy(&self);
    return self;
}

void decider_history_destroy(decider_history_t **self_p)
{
    if (!self_p || !*self_p) return;
    ipl_index_destroy(&(*self_p)->gen[0]);
    ipl_index_destroy(&(*self_p)->gen[1]);
    free(*self_p);
    *self_p = NULL;
}

int decider_history_worker(decider_history_t *self, const char *name)
{
    // Both generations name the same workers in the same order, so ids agree.
    int id = ipl_index_worker(self->gen[0], name);
    if (id >= 0) ipl_index_worker(self->gen[1], name);
    return id;
}

// Drops the older generation; the new one knows every worker under the same id.
static void s_rotate(decider_history_t *self)
{
    ipl_index_t *fresh = ipl_index_new();
    if (!fresh) return; // keep both; try again at the next check
    for (int w = 0; w < ipl_index_nworkers(self->gen[0]); w++)
        ipl_index_worker(fresh, ipl_index_worker_name(self->gen[0], w));
    ipl_index_destroy(&self->gen[1]);
    self->gen[1] = self->gen[0];
    self->gen[0] = fresh;
    self->evictions++;
}

int decider_history_insert(decider_history_t *self, int worker, const uint64_t *hashes, size_t n,
                           uint64_t now_ms)
{
    if (worker < 0 || worker >= ipl_index_nworkers(self->gen[0])) return IPL_E_RANGE;
    if (!self->started) {
        self->started = true;
        self->checked_ms = now_ms;
    } else if (now_ms - self->checked_ms >= self->check_ms) {
        self->checked_ms = now_ms;
        if (decider_history_memberships(self) > self->max_blocks) s_rotate(self);
    }
    return n ? ipl_index_add(self->gen[0], worker, hashes, n) : IPL_OK;
}

size_t decider_history_match(decider_history_t *self, const uint64_t *hashes, size_t n,
                             uint32_t *prefix, size_t max)
{
    size_t m = (size_t)ipl_index_nworkers(self->gen[0]);
    if (m > max) m = max;
    memset(prefix, 0, m * sizeof *prefix);
    if (!n) return 0;
    // Every routed prompt is inserted whole from its first block, so the longest prefix of a
    // worker lies entirely in one generation: the maximum over them is exact.
    size_t best = 0;
    for (int g = 0; g < 2; g++) {
        if (ipl_index_memberships(self->gen[g]) == 0) continue;
        ipl_index_match(self->gen[g], hashes, n, self->scratch, m);
        for (size_t w = 0; w < m; w++) {
            if (self->scratch[w] > prefix[w]) prefix[w] = self->scratch[w];
            if (prefix[w] > best) best = prefix[w];
        }
    }
    return best;
}

size_t decider_history_worker_blocks(const decider_history_t *self, int worker)
{
    return ipl_index_worker_blocks(self->gen[0], worker) +
           ipl_index_worker_blocks(self->gen[1], worker);
}

size_t decider_history_memberships(const decider_history_t *self)
{
    return ipl_index_memberships(self->gen[0]) + ipl_index_memberships(self->gen[1]);
}

uint64_t decider_history_evictions(const decider_history_t *self)
{
    return self->evictions;
}
