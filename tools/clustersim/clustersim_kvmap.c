/*
 * clustersim_kvmap — linear probing over {engine, ours, holders}; holders == 0 marks an empty
 * slot, so every 64-bit key (0 included) is storable.
 */
#include "clustersim_kvmap.h"

#include <stdlib.h>

#include "ipl_error.h"
#include "ipl_hash.h"

typedef struct {
    uint64_t engine;
    uint64_t ours;
    uint32_t holders;
} s_slot_t;

struct clustersim_kvmap {
    s_slot_t *slots;
    size_t mask; // capacity - 1 (a power of two)
    size_t n;
};

static inline size_t s_home(const clustersim_kvmap_t *self, uint64_t key)
{
    return (size_t)ipl_mix64(key) & self->mask;
}

clustersim_kvmap_t *clustersim_kvmap_new(void)
{
    clustersim_kvmap_t *self = calloc(1, sizeof *self);
    if (!self) return NULL;
    self->slots = calloc(1024, sizeof *self->slots);
    if (!self->slots) {
        free(self);
        return NULL;
    }
    self->mask = 1023;
    return self;
}

void clustersim_kvmap_destroy(clustersim_kvmap_t **self_p)
{
    if (!self_p || !*self_p) return;
    free((*self_p)->slots);
    free(*self_p);
    *self_p = NULL;
}

static size_t s_find(const clustersim_kvmap_t *self, uint64_t engine)
{
    size_t i = s_home(self, engine);
    while (self->slots[i].holders && self->slots[i].engine != engine)
        i = (i + 1) & self->mask;
    return i;
}

static int s_grow(clustersim_kvmap_t *self)
{
    size_t cap = (self->mask + 1) * 2;
    s_slot_t *old = self->slots, *slots = calloc(cap, sizeof *slots);
    if (!slots) return IPL_E_NOMEM;
    size_t oldcap = self->mask + 1;
    self->slots = slots;
    self->mask = cap - 1;
    for (size_t i = 0; i < oldcap; i++)
        if (old[i].holders) self->slots[s_find(self, old[i].engine)] = old[i];
    free(old);
    return 0;
}

int clustersim_kvmap_hold(clustersim_kvmap_t *self, uint64_t engine, uint64_t ours)
{
    if ((self->n + 1) * 2 > self->mask + 1 && s_grow(self) != 0) return IPL_E_NOMEM;
    s_slot_t *s = &self->slots[s_find(self, engine)];
    if (!s->holders) {
        *s = (s_slot_t){.engine = engine, .ours = ours};
        self->n++;
    }
    s->holders++;
    return 0;
}

bool clustersim_kvmap_get(const clustersim_kvmap_t *self, uint64_t engine, uint64_t *ours)
{
    const s_slot_t *s = &self->slots[s_find(self, engine)];
    if (!s->holders) return false;
    *ours = s->ours;
    return true;
}

bool clustersim_kvmap_release(clustersim_kvmap_t *self, uint64_t engine, uint64_t *ours)
{
    size_t i = s_find(self, engine);
    s_slot_t *s = &self->slots[i];
    if (!s->holders) return false;
    *ours = s->ours;
    if (--s->holders) return true;
    // Backward-shift deletion: pull later members of the probe run into the hole.
    self->n--;
    size_t hole = i;
    for (size_t j = (i + 1) & self->mask; self->slots[j].holders; j = (j + 1) & self->mask) {
        size_t home = s_home(self, self->slots[j].engine);
        // j may move to the hole when its home is not in the cyclic range (hole, j].
        bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
        if (stays) continue;
        self->slots[hole] = self->slots[j];
        hole = j;
    }
    self->slots[hole].holders = 0;
    return true;
}

size_t clustersim_kvmap_size(const clustersim_kvmap_t *self)
{
    return self->n;
}
