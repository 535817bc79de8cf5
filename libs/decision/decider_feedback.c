/*
 * decider_feedback — a ring of decisions with a chained hash index over its slots, and an
 * intern table for the names (see the header).
 */
#include "decider_feedback.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ipl_error.h"
#include "ipl_hash.h"

#define S_NONE       UINT32_MAX
#define S_MIN_CAP    16u
#define S_MAX_CAP    (1u << 24)
#define S_NAME_SLOTS (2 * DECIDER_FEEDBACK_MAX_NAMES) // open addressing, half full at most

typedef struct {
    uint64_t conn, req_id;
    uint64_t at_ms; // monotonic time of the decision
    decider_features_t x;
    uint32_t next;        // next slot in the same bucket, or S_NONE
    uint16_t set, worker; // name ids
    bool used;
} s_entry_t;

struct decider_feedback {
    s_entry_t *ring;
    uint32_t cap;  // power of two
    uint32_t head; // the slot the next decision takes
    uint32_t *buckets;
    uint32_t nbuckets; // 2 × cap
    uint64_t window_ms;
    char *names[DECIDER_FEEDBACK_MAX_NAMES];
    uint32_t nnames;
    uint16_t name_slots[S_NAME_SLOTS]; // id + 1, 0 when empty
    decider_feedback_stats_t stats;
};

decider_feedback_t *decider_feedback_new(size_t capacity, uint64_t window_ms)
{
    uint32_t cap = S_MIN_CAP;
    while (cap < capacity && cap < S_MAX_CAP)
        cap <<= 1;
    decider_feedback_t *self = calloc(1, sizeof *self);
    if (!self) return NULL;
    self->cap = cap;
    self->nbuckets = 2 * cap;
    self->window_ms = window_ms;
    self->ring = calloc(cap, sizeof *self->ring);
    self->buckets = malloc(self->nbuckets * sizeof *self->buckets);
    if (!self->ring || !self->buckets) {
        decider_feedback_destroy(&self);
        return NULL;
    }
    for (uint32_t b = 0; b < self->nbuckets; b++)
        self->buckets[b] = S_NONE;
    return self;
}

void decider_feedback_destroy(decider_feedback_t **self_p)
{
    if (!self_p || !*self_p) return;
    decider_feedback_t *self = *self_p;
    for (uint32_t i = 0; i < self->nnames; i++)
        free(self->names[i]);
    free(self->ring);
    free(self->buckets);
    free(self);
    *self_p = NULL;
}

// ---- names --------------------------------------------------------------------------------------

// The id of `name`, interned on first sight. -1 when the table is full or out of memory.
static int s_intern(decider_feedback_t *self, const char *name)
{
    size_t len = strlen(name);
    uint32_t mask = S_NAME_SLOTS - 1;
    for (uint32_t i = (uint32_t)ipl_hash_bytes(name, len) & mask;; i = (i + 1) & mask) {
        uint16_t v = self->name_slots[i];
        if (v == 0) {
            if (self->nnames == DECIDER_FEEDBACK_MAX_NAMES) return -1;
            char *copy = malloc(len + 1);
            if (!copy) return -1;
            memcpy(copy, name, len + 1);
            self->names[self->nnames] = copy;
            self->name_slots[i] = (uint16_t)(++self->nnames);
            return (int)self->nnames - 1;
        }
        if (!strcmp(self->names[v - 1], name)) return v - 1;
    }
}

// ---- the index ----------------------------------------------------------------------------------

static uint32_t s_bucket(const decider_feedback_t *self, uint64_t conn, uint64_t req_id)
{
    return (uint32_t)ipl_mix64(conn ^ (req_id * 0x9e3779b97f4a7c15ULL)) & (self->nbuckets - 1);
}

static uint32_t s_find(const decider_feedback_t *self, uint64_t conn, uint64_t req_id)
{
    for (uint32_t s = self->buckets[s_bucket(self, conn, req_id)]; s != S_NONE;
         s = self->ring[s].next)
        if (self->ring[s].conn == conn && self->ring[s].req_id == req_id) return s;
    return S_NONE;
}

// Takes a used slot out of its chain and frees it.
static void s_forget(decider_feedback_t *self, uint32_t slot)
{
    s_entry_t *e = &self->ring[slot];
    for (uint32_t *p = &self->buckets[s_bucket(self, e->conn, e->req_id)]; *p != S_NONE;
         p = &self->ring[*p].next)
        if (*p == slot) {
            *p = e->next;
            break;
        }
    e->used = false;
    e->next = S_NONE;
    self->stats.pending--;
}

static uint64_t s_age(uint64_t at_ms, uint64_t mono_ms)
{
    return mono_ms > at_ms ? mono_ms - at_ms : 0;
}

// ---- remember and take --------------------------------------------------------------------------

int decider_feedback_remember(decider_feedback_t *self, uint64_t conn, uint64_t req_id,
                              const char *set, const char *worker, const decider_features_t *x,
                              uint64_t mono_ms)
{
    if (!set || !*set || !worker || !*worker) {
        self->stats.dropped++;
        return IPL_E_INVAL;
    }
    int set_id = s_intern(self, set), worker_id = set_id < 0 ? -1 : s_intern(self, worker);
    if (worker_id < 0) {
        self->stats.dropped++;
        return IPL_E_RANGE;
    }
    uint32_t old = s_find(self, conn, req_id);
    if (old != S_NONE) s_forget(self, old);
    uint32_t slot = self->head;
    self->head = (self->head + 1) & (self->cap - 1);
    s_entry_t *e = &self->ring[slot];
    if (e->used) {
        if (s_age(e->at_ms, mono_ms) <= self->window_ms) self->stats.evicted++;
        s_forget(self, slot);
    }
    uint32_t b = s_bucket(self, conn, req_id);
    *e = (s_entry_t){.conn = conn,
                     .req_id = req_id,
                     .at_ms = mono_ms,
                     .x = *x,
                     .next = self->buckets[b],
                     .set = (uint16_t)set_id,
                     .worker = (uint16_t)worker_id,
                     .used = true};
    self->buckets[b] = slot;
    self->stats.remembered++;
    self->stats.pending++;
    return IPL_OK;
}

int decider_feedback_take(decider_feedback_t *self, uint64_t conn, uint64_t req_id,
                          uint64_t mono_ms, decider_feedback_entry_t *out)
{
    uint32_t slot = s_find(self, conn, req_id);
    if (slot == S_NONE) {
        self->stats.unknown++;
        return IPL_E_NOTFOUND;
    }
    const s_entry_t *e = &self->ring[slot];
    uint64_t age = s_age(e->at_ms, mono_ms);
    *out = (decider_feedback_entry_t){
        .set = self->names[e->set], .worker = self->names[e->worker], .x = e->x, .age_ms = age};
    s_forget(self, slot);
    if (age > self->window_ms) {
        self->stats.expired++;
        return IPL_E_TIMEOUT;
    }
    self->stats.taken++;
    return IPL_OK;
}

void decider_feedback_stats(const decider_feedback_t *self, decider_feedback_stats_t *out)
{
    *out = self->stats;
}

size_t decider_feedback_capacity(const decider_feedback_t *self)
{
    return self->cap;
}

uint64_t decider_feedback_window_ms(const decider_feedback_t *self)
{
    return self->window_ms;
}
