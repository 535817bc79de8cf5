/*
 * ipl_idcache — a bounded LRU of token-id arrays. See the header.
 */
#include "ipl_idcache.h"

#include <assert.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#define S_MAX_BUCKETS (1u << 22)

typedef struct s_entry {
    ipl_idcache_key_t key;
    uint32_t *ids;
    size_t n;
    struct s_entry *prev, *next; /* LRU: head is the most recent */
    struct s_entry *hnext;       /* bucket chain */
} s_entry_t;

struct ipl_idcache {
    size_t max_entries, max_bytes;
    pthread_mutex_t lock; /* everything below */
    s_entry_t **buckets;
    size_t mask;
    s_entry_t *head, *tail;
    ipl_idcache_stats_t stats;
};

ipl_idcache_t *ipl_idcache_new(size_t max_entries, size_t max_bytes)
{
    if (!max_entries || !max_bytes) return NULL;
    ipl_idcache_t *self = calloc(1, sizeof *self);
    if (!self) return NULL;
    self->max_entries = max_entries;
    self->max_bytes = max_bytes;
    size_t nb = 16;
    while (nb < 2 * max_entries && nb < S_MAX_BUCKETS)
        nb <<= 1;
    if (!(self->buckets = calloc(nb, sizeof *self->buckets))) {
        free(self);
        return NULL;
    }
    self->mask = nb - 1;
    pthread_mutex_init(&self->lock, NULL);
    return self;
}

void ipl_idcache_destroy(ipl_idcache_t **self_p)
{
    assert(self_p);
    ipl_idcache_t *self = *self_p;
    if (!self) return;
    for (s_entry_t *e = self->head, *next; e; e = next) {
        next = e->next;
        free(e->ids);
        free(e);
    }
    free(self->buckets);
    pthread_mutex_destroy(&self->lock);
    free(self);
    *self_p = NULL;
}

ipl_idcache_key_t ipl_idcache_key(const void *bytes, size_t len, uint64_t seed)
{
    XXH128_hash_t h = XXH3_128bits_withSeed(bytes, len, seed);
    return (ipl_idcache_key_t){h.low64, h.high64};
}

/* ---- under the lock ----------------------------------------------------------------------- */

static s_entry_t **s_slot(ipl_idcache_t *self, ipl_idcache_key_t key)
{
    s_entry_t **p = &self->buckets[key.lo & self->mask];
    while (*p && ((*p)->key.lo != key.lo || (*p)->key.hi != key.hi))
        p = &(*p)->hnext;
    return p;
}

static void s_unlink(ipl_idcache_t *self, s_entry_t *e)
{
    if (e->prev)
        e->prev->next = e->next;
    else
        self->head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        self->tail = e->prev;
    e->prev = e->next = NULL;
}

static void s_push_front(ipl_idcache_t *self, s_entry_t *e)
{
    e->prev = NULL;
    e->next = self->head;
    if (self->head) self->head->prev = e;
    self->head = e;
    if (!self->tail) self->tail = e;
}

static void s_drop(ipl_idcache_t *self, s_entry_t *e)
{
    s_unlink(self, e);
    *s_slot(self, e->key) = e->hnext;
    self->stats.entries--;
    self->stats.bytes -= e->n * sizeof *e->ids;
    free(e->ids);
    free(e);
}

/* ---- the interface ----------------------------------------------------------------------- */

size_t ipl_idcache_get(ipl_idcache_t *self, ipl_idcache_key_t key, uint32_t *out, size_t room)
{
    pthread_mutex_lock(&self->lock);
    s_entry_t *e = *s_slot(self, key);
    size_t n = IPL_IDCACHE_MISS;
    if (e) {
        n = e->n;
        if (n && n <= room) memcpy(out, e->ids, n * sizeof *out);
        if (self->head != e) {
            s_unlink(self, e);
            s_push_front(self, e);
        }
        self->stats.hits++;
    } else {
        self->stats.misses++;
    }
    pthread_mutex_unlock(&self->lock);
    return n;
}

void ipl_idcache_put(ipl_idcache_t *self, ipl_idcache_key_t key, const uint32_t *ids, size_t n)
{
    size_t size = n * sizeof *ids;
    if (size > self->max_bytes) return;
    s_entry_t *e = calloc(1, sizeof *e);
    uint32_t *copy = malloc(size ? size : 1);
    if (!e || !copy) {
        free(e);
        free(copy);
        return;
    }
    if (size) memcpy(copy, ids, size);
    e->key = key;
    e->ids = copy;
    e->n = n;
    pthread_mutex_lock(&self->lock);
    s_entry_t *old = *s_slot(self, key);
    if (old) s_drop(self, old);
    while (self->tail && (self->stats.entries + 1 > self->max_entries ||
                          self->stats.bytes + size > self->max_bytes)) {
        s_drop(self, self->tail);
        self->stats.evictions++;
    }
    *s_slot(self, key) = e;
    s_push_front(self, e);
    self->stats.entries++;
    self->stats.bytes += size;
    pthread_mutex_unlock(&self->lock);
}

void ipl_idcache_stats(ipl_idcache_t *self, ipl_idcache_stats_t *out)
{
    pthread_mutex_lock(&self->lock);
    *out = self->stats;
    pthread_mutex_unlock(&self->lock);
}
