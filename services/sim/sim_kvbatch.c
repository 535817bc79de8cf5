/*
 * sim_kvbatch — three growable arrays: events, and the hashes and tokens they point into
 * (by offset, so growing an array never invalidates an event).
 */
#include "sim_kvbatch.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "ipl_error.h"

typedef struct {
    sim_kv_kind_t kind;
    bool has_parent;
    uint64_t parent;
    size_t hash_off;
    uint32_t nhashes;
    size_t tok_off;
    uint32_t ntokens;
    uint32_t block_size;
} s_event_t;

struct sim_kvbatch {
    s_event_t *events;
    size_t nevents, events_cap;
    uint64_t *hashes;
    size_t nhashes, hashes_cap;
    uint32_t *tokens;
    size_t ntokens, tokens_cap;
};

/* Grows *arr (elements of `size` bytes) to hold at least `need`. 0 or IPL_E_NOMEM. */
static int s_reserve(void **arr, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap) return 0;
    size_t ncap = *cap ? *cap : 16;
    while (ncap < need)
        ncap *= 2;
    void *p = realloc(*arr, ncap * size);
    if (!p) return IPL_E_NOMEM;
    *arr = p;
    *cap = ncap;
    return 0;
}

sim_kvbatch_t *sim_kvbatch_new(void)
{
    return calloc(1, sizeof(sim_kvbatch_t));
}

void sim_kvbatch_destroy(sim_kvbatch_t **self_p)
{
    assert(self_p);
    sim_kvbatch_t *self = *self_p;
    if (!self) return;
    free(self->events);
    free(self->hashes);
    free(self->tokens);
    free(self);
    *self_p = NULL;
}

void sim_kvbatch_reset(sim_kvbatch_t *self)
{
    self->nevents = self->nhashes = self->ntokens = 0;
}

size_t sim_kvbatch_count(const sim_kvbatch_t *self)
{
    return self->nevents;
}

void sim_kvbatch_get(const sim_kvbatch_t *self, size_t i, sim_kv_event_t *out)
{
    assert(i < self->nevents);
    const s_event_t *e = &self->events[i];
    *out = (sim_kv_event_t){
        .kind = e->kind,
        .hashes = e->nhashes ? self->hashes + e->hash_off : NULL,
        .nhashes = e->nhashes,
        .has_parent = e->has_parent,
        .parent = e->parent,
        .tokens = e->ntokens ? self->tokens + e->tok_off : NULL,
        .ntokens = e->ntokens,
        .block_size = e->block_size,
    };
}

static int s_append(sim_kvbatch_t *self, const s_event_t *ev, const uint64_t *hashes,
                    const uint32_t *tokens)
{
    if (s_reserve((void **)&self->events, &self->events_cap, self->nevents + 1,
                  sizeof *self->events) ||
        s_reserve((void **)&self->hashes, &self->hashes_cap, self->nhashes + ev->nhashes,
                  sizeof *self->hashes) ||
        s_reserve((void **)&self->tokens, &self->tokens_cap, self->ntokens + ev->ntokens,
                  sizeof *self->tokens))
        return IPL_E_NOMEM;
    s_event_t *e = &self->events[self->nevents++];
    *e = *ev;
    e->hash_off = self->nhashes;
    e->tok_off = self->ntokens;
    if (ev->nhashes) memcpy(self->hashes + self->nhashes, hashes, ev->nhashes * sizeof *hashes);
    if (ev->ntokens) memcpy(self->tokens + self->ntokens, tokens, ev->ntokens * sizeof *tokens);
    self->nhashes += ev->nhashes;
    self->ntokens += ev->ntokens;
    return 0;
}

int sim_kvbatch_stored(sim_kvbatch_t *self, const uint64_t *hashes, uint32_t nhashes,
                       bool has_parent, uint64_t parent, const uint32_t *tokens,
                       uint32_t block_size)
{
    assert(nhashes > 0 && block_size > 0);
    s_event_t ev = {.kind = SIM_KV_STORED,
                    .has_parent = has_parent,
                    .parent = has_parent ? parent : 0,
                    .nhashes = nhashes,
                    .ntokens = nhashes * block_size,
                    .block_size = block_size};
    return s_append(self, &ev, hashes, tokens);
}

int sim_kvbatch_removed(sim_kvbatch_t *self, uint64_t hash)
{
    s_event_t ev = {.kind = SIM_KV_REMOVED, .nhashes = 1};
    return s_append(self, &ev, &hash, NULL);
}

int sim_kvbatch_cleared(sim_kvbatch_t *self)
{
    s_event_t ev = {.kind = SIM_KV_CLEARED};
    return s_append(self, &ev, NULL, NULL);
}
