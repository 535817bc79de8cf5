/*
 * collector_blockmap — engine hash → {ours, parent}, open addressing (see the header).
 */
#include "collector_blockmap.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "ipl_error.h"

#define S_INITIAL 1024u /* slots; a power of two */

typedef struct {
    uint64_t key; /* 0: empty slot */
    uint64_t ours;
    uint64_t parent;
} s_slot_t;

struct collector_blockmap {
    s_slot_t *slot;
    size_t cap, count;
    bool has_zero; /* the block whose engine hash is 0 */
    collector_block_t zero;
};

static inline size_t s_home(size_t cap, uint64_t key)
{
    return (size_t)((key * 0x9e3779b97f4a7c15ULL) >> 32) & (cap - 1);
}

collector_blockmap_t *collector_blockmap_new(void)
{
    collector_blockmap_t *self = calloc(1, sizeof *self);
    if (!self) return NULL;
    self->cap = S_INITIAL;
    self->slot = calloc(self->cap, sizeof *self->slot);
    if (!self->slot) {
        free(self);
        return NULL;
    }
    return self;
}

void collector_blockmap_destroy(collector_blockmap_t **self_p)
{
    if (!self_p || !*self_p) return;
    free((*self_p)->slot);
    free(*self_p);
    *self_p = NULL;
}

size_t collector_blockmap_size(const collector_blockmap_t *self)
{
    assert(self);
    return self->count + (self->has_zero ? 1 : 0);
}

void collector_blockmap_clear(collector_blockmap_t *self)
{
    assert(self);
    if (self->count) memset(self->slot, 0, self->cap * sizeof *self->slot);
    self->count = 0;
    self->has_zero = false;
}

void collector_blockmap_prefetch(const collector_blockmap_t *self, uint64_t engine)
{
    __builtin_prefetch(&self->slot[s_home(self->cap, engine)]);
}

bool collector_blockmap_get(const collector_blockmap_t *self, uint64_t engine,
                            collector_block_t *out)
{
    assert(self);
    if (engine == 0) {
        if (self->has_zero && out) *out = self->zero;
        return self->has_zero;
    }
    size_t mask = self->cap - 1;
    for (size_t i = s_home(self->cap, engine);; i = (i + 1) & mask) {
        const s_slot_t *s = &self->slot[i];
        if (s->key == 0) return false;
        if (s->key == engine) {
            if (out) *out = (collector_block_t){s->key, s->ours, s->parent};
            return true;
        }
    }
}

/* Rehashes into a table of `cap` slots. */
static int s_grow(collector_blockmap_t *self, size_t cap)
{
    s_slot_t *slot = calloc(cap, sizeof *slot);
    if (!slot) return IPL_E_NOMEM;
    for (size_t i = 0; i < self->cap; i++) {
        if (!self->slot[i].key) continue;
        size_t j = s_home(cap, self->slot[i].key);
        while (slot[j].key)
            j = (j + 1) & (cap - 1);
        slot[j] = self->slot[i];
    }
    free(self->slot);
    self->slot = slot;
    self->cap = cap;
    return 0;
}

int collector_blockmap_reserve(collector_blockmap_t *self, size_t n)
{
    assert(self);
    size_t cap = self->cap;
    while (n * 4 > cap * 3) {
        if (cap > SIZE_MAX / 2 / sizeof(s_slot_t)) return IPL_E_NOMEM;
        cap *= 2;
    }
    return cap == self->cap ? 0 : s_grow(self, cap);
}

int collector_blockmap_put(collector_blockmap_t *self, const collector_block_t *b)
{
    assert(self && b);
    if (b->engine == 0) {
        self->has_zero = true;
        self->zero = *b;
        return 0;
    }
    if ((self->count + 1) * 4 > self->cap * 3) {
        int rc = collector_blockmap_reserve(self, self->count + 1);
        if (rc != 0) return rc;
    }
    size_t mask = self->cap - 1;
    size_t i = s_home(self->cap, b->engine);
    while (self->slot[i].key != 0 && self->slot[i].key != b->engine)
        i = (i + 1) & mask;
    if (self->slot[i].key == 0) self->count++;
    self->slot[i] = (s_slot_t){b->engine, b->ours, b->parent};
    return 0;
}

bool collector_blockmap_take(collector_blockmap_t *self, uint64_t engine, collector_block_t *out)
{
    assert(self);
    if (engine == 0) {
        bool had = self->has_zero;
        if (had && out) *out = self->zero;
        self->has_zero = false;
        return had;
    }
    size_t mask = self->cap - 1;
    size_t i = s_home(self->cap, engine);
    while (self->slot[i].key != engine) {
        if (self->slot[i].key == 0) return false;
        i = (i + 1) & mask;
    }
    if (out)
        *out = (collector_block_t){self->slot[i].key, self->slot[i].ours, self->slot[i].parent};
    /* backward-shift delete: move later entries of the run into the hole when their home
     * does not lie (cyclically) between the hole and them */
    for (size_t j = i;;) {
        j = (j + 1) & mask;
        if (self->slot[j].key == 0) break;
        size_t home = s_home(self->cap, self->slot[j].key);
        bool movable = (i <= j) ? (home <= i || home > j) : (home <= i && home > j);
        if (movable) {
            self->slot[i] = self->slot[j];
            i = j;
        }
    }
    self->slot[i].key = 0;
    self->count--;
    return true;
}

int collector_blockmap_merge(collector_blockmap_t *self, collector_blockmap_t *from)
{
    assert(self && from && self != from);
    int rc = collector_blockmap_reserve(self, collector_blockmap_size(self) +
                                                  collector_blockmap_size(from));
    if (rc != 0) return rc;
    if (from->has_zero) {
        collector_blockmap_put(self, &from->zero); /* cannot fail: key 0 is kept aside */
        from->has_zero = false;
    }
    for (size_t i = 0; i < from->cap; i++) {
        s_slot_t *s = &from->slot[i];
        if (!s->key) continue;
        /* room was reserved above: this put does not allocate */
        collector_blockmap_put(self, &(collector_block_t){s->key, s->ours, s->parent});
    }
    collector_blockmap_clear(from);
    return 0;
}

void collector_blockmap_swap(collector_blockmap_t *a, collector_blockmap_t *b)
{
    assert(a && b);
    collector_blockmap_t t = *a;
    *a = *b;
    *b = t;
}

int collector_blockmap_foreach(const collector_blockmap_t *self,
                               int (*fn)(void *arg, const collector_block_t *b), void *arg)
{
    assert(self && fn);
    if (self->has_zero) {
        int rc = fn(arg, &self->zero);
        if (rc) return rc;
    }
    for (size_t i = 0; i < self->cap; i++) {
        const s_slot_t *s = &self->slot[i];
        if (!s->key) continue;
        int rc = fn(arg, &(collector_block_t){s->key, s->ours, s->parent});
        if (rc) return rc;
    }
    return 0;
}
