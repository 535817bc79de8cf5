/*
 * sim_kvbatch — four growable arrays: events, and the hashes, tokens and strings they point
 * into (by offset, so growing an array never invalidates an event).
 */
#include "sim_kvbatch.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "ipl_error.h"

#define S_NOSTR ((size_t)-1)

typedef struct {
    sim_kv_kind_t kind;
    bool has_parent;
    sim_hash_t parent;
    size_t hash_off;
    uint32_t nhashes;
    size_t tok_off;
    uint32_t ntokens;
    uint32_t block_size;
    int64_t lora_id;
    size_t lora_off, salt_off; /* into strings, S_NOSTR = NULL */
} s_event_t;

struct sim_kvbatch {
    s_event_t *events;
    size_t nevents, events_cap;
    sim_hash_t *hashes;
    size_t nhashes, hashes_cap;
    uint32_t *tokens;
    size_t ntokens, tokens_cap;
    char *strings; /* NUL-terminated strings, back to back */
    size_t nstrings, strings_cap;
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
    free(self->strings);
    free(self);
    *self_p = NULL;
}

void sim_kvbatch_reset(sim_kvbatch_t *self)
{
    self->nevents = self->nhashes = self->ntokens = self->nstrings = 0;
}

size_t sim_kvbatch_count(const sim_kvbatch_t *self)
{
    return self->nevents;
}

static const char *s_str(const sim_kvbatch_t *self, size_t off)
{
    return off == S_NOSTR ? NULL : self->strings + off;
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
        .keys = {.lora_id = e->lora_id,
                 .lora_name = s_str(self, e->lora_off),
                 .cache_salt = s_str(self, e->salt_off)},
    };
}

/* Copies `s` into the string arena; *off = its offset (S_NOSTR for NULL). */
static int s_intern(sim_kvbatch_t *self, const char *s, size_t *off)
{
    *off = S_NOSTR;
    if (!s) return 0;
    size_t n = strlen(s) + 1;
    if (s_reserve((void **)&self->strings, &self->strings_cap, self->nstrings + n, 1))
        return IPL_E_NOMEM;
    memcpy(self->strings + self->nstrings, s, n);
    *off = self->nstrings;
    self->nstrings += n;
    return 0;
}

static int s_append(sim_kvbatch_t *self, const s_event_t *ev, const sim_hash_t *hashes,
                    const uint32_t *tokens, const sim_block_keys_t *keys)
{
    size_t strings_before = self->nstrings;
    s_event_t e = *ev;
    e.lora_off = e.salt_off = S_NOSTR;
    if (s_reserve((void **)&self->events, &self->events_cap, self->nevents + 1,
                  sizeof *self->events) ||
        s_reserve((void **)&self->hashes, &self->hashes_cap, self->nhashes + ev->nhashes,
                  sizeof *self->hashes) ||
        s_reserve((void **)&self->tokens, &self->tokens_cap, self->ntokens + ev->ntokens,
                  sizeof *self->tokens) ||
        (keys && (s_intern(self, keys->lora_name, &e.lora_off) ||
                  s_intern(self, keys->cache_salt, &e.salt_off)))) {
        self->nstrings = strings_before;
        return IPL_E_NOMEM;
    }
    e.lora_id = keys ? keys->lora_id : 0;
    e.hash_off = self->nhashes;
    e.tok_off = self->ntokens;
    self->events[self->nevents++] = e;
    if (ev->nhashes) memcpy(self->hashes + self->nhashes, hashes, ev->nhashes * sizeof *hashes);
    if (ev->ntokens) memcpy(self->tokens + self->ntokens, tokens, ev->ntokens * sizeof *tokens);
    self->nhashes += ev->nhashes;
    self->ntokens += ev->ntokens;
    return 0;
}

int sim_kvbatch_stored(sim_kvbatch_t *self, const sim_hash_t *hashes, uint32_t nhashes,
                       const sim_hash_t *parent, const uint32_t *tokens, uint32_t block_size,
                       const sim_block_keys_t *keys)
{
    assert(nhashes > 0 && block_size > 0);
    s_event_t ev = {.kind = SIM_KV_STORED,
                    .has_parent = parent != NULL,
                    .nhashes = nhashes,
                    .ntokens = nhashes * block_size,
                    .block_size = block_size};
    if (parent) ev.parent = *parent;
    return s_append(self, &ev, hashes, tokens, keys);
}

int sim_kvbatch_removed(sim_kvbatch_t *self, const sim_hash_t *hash)
{
    s_event_t ev = {.kind = SIM_KV_REMOVED, .nhashes = 1};
    return s_append(self, &ev, hash, NULL, NULL);
}

int sim_kvbatch_cleared(sim_kvbatch_t *self)
{
    s_event_t ev = {.kind = SIM_KV_CLEARED};
    return s_append(self, &ev, NULL, NULL, NULL);
}
