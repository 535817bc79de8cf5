/*
 * decider_memory — the strategies' memory (see the header): a table of pools searched by name
 * (a router serves few pools; the least recently used is forgotten past the limit), and per
 * worker a backlog record and, created on first use, a ring of pending prefixes.
 *
 *   s_backlog_t        tokens left and drain speed at t_ms; the routings' own remainders, FIFO
 *                      (decider_pool_backlog_requests counts them); recent and placed, each
 *                      decayed to t_ms. Every read drains it to the decision's clock first.
 *   s_pending_ring_t   DECIDER_MEMORY_PENDING entries, by field, replaced oldest first; a view
 *                      of the live ones is kept until the first of them expires.
 */
#include "decider_memory.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ipl_index.h"

// Pending prefixes keep at most this many blocks of a prompt (16k tokens of 16).
#define S_PENDING_MAX_BLOCKS 1024

typedef struct {
    char *name;
    uint64_t used; // tick of the last use
    decider_pool_memory_t m;
} s_pool_entry_t;

typedef decider_backlog_t s_backlog_t; // its fields: decider_memory.h
#define S_BACKLOG_FIFO DECIDER_MEMORY_BACKLOG_FIFO

// A worker's pending prefixes, by field (decider_memory_pending_match reads `start` and
// `first` of every live entry, and the hashes of those that share the prompt).
typedef struct {
    uint64_t until_ms[DECIDER_MEMORY_PENDING]; // 0: free
    uint64_t first[DECIDER_MEMORY_PENDING];    // hashes[0] of the entry
    uint32_t start[DECIDER_MEMORY_PENDING];    // the prompt's block hashes[0] is
    uint32_t n[DECIDER_MEMORY_PENDING];        // hashes[0 .. n) are blocks start .. start + n
    uint32_t cap[DECIDER_MEMORY_PENDING];
    uint64_t *hashes[DECIDER_MEMORY_PENDING];
    uint32_t next;
    // The view of the entries live over [view_from, view_until) (s_pending_view): bit i of
    // `live` per live entry i, and their least start — a worker holding fewer blocks of a
    // prompt has no pending prefix for it. A decision reads it for every candidate, and it
    // changes only when an entry expires or is added (view_until 0: rebuild).
    uint64_t view_from, view_until;
    uint32_t live;
    uint32_t live_min_start;
} s_pending_ring_t;
_Static_assert(DECIDER_MEMORY_PENDING <= 32, "a bit of s_pending_ring_t.live per entry");

struct decider_memory {
    s_pool_entry_t pools[DECIDER_MEMORY_MAX_POOLS];
    size_t npools;
    uint64_t tick;
    uint32_t scratch[IPL_INDEX_MAX_WORKERS];
    s_backlog_t backlog[IPL_INDEX_MAX_WORKERS];
    // The decay factors of the last drain, by its interval in ms (0: none yet; a drain spans at
    // least 1 ms): a decision drains every candidate from the same previous decision's time, so
    // the exp() of one serves them all — the same factors to the bit.
    struct {
        uint64_t dt_ms;
        double recent, placed;
    } decay;
    s_pending_ring_t *pending[IPL_INDEX_MAX_WORKERS]; // created on first use
    struct {
        uint64_t key, t_ms; // key 0 with t_ms 0: free
        double count;
    } heat[DECIDER_MEMORY_HEAT_SLOTS];
};

decider_memory_t *decider_memory_new(void)
{
    return calloc(1, sizeof(decider_memory_t));
}

static void s_entry_clear(s_pool_entry_t *e)
{
    free(e->name);
    decider_history_destroy(&e->m.sglang);
    decider_history_destroy(&e->m.prefix);
    memset(e, 0, sizeof *e);
}

void decider_memory_destroy(decider_memory_t **self_p)
{
    if (!self_p || !*self_p) return;
    for (size_t w = 0; w < IPL_INDEX_MAX_WORKERS; w++) {
        s_pending_ring_t *r = (*self_p)->pending[w];
        for (size_t i = 0; r && i < DECIDER_MEMORY_PENDING; i++)
            free(r->hashes[i]);
        free(r);
    }
    for (size_t i = 0; i < (*self_p)->npools; i++)
        s_entry_clear(&(*self_p)->pools[i]);
    free(*self_p);
    *self_p = NULL;
}

decider_pool_memory_t *decider_memory_pool(decider_memory_t *self, const char *name)
{
    self->tick++;
    s_pool_entry_t *e = NULL;
    for (size_t i = 0; i < self->npools && !e; i++)
        if (!strcmp(self->pools[i].name, name)) e = &self->pools[i];
    if (!e) {
        char *copy = strdup(name);
        if (!copy) return NULL;
        if (self->npools < DECIDER_MEMORY_MAX_POOLS) {
            e = &self->pools[self->npools++];
        } else { // forget the least recently used pool
            e = &self->pools[0];
            for (size_t i = 1; i < self->npools; i++)
                if (self->pools[i].used < e->used) e = &self->pools[i];
            s_entry_clear(e);
        }
        e->name = copy;
    }
    e->used = self->tick;
    e->m.scratch = self->scratch;
    e->m.backlog = self->backlog;
    e->m.owner = self;
    return &e->m;
}

// ---- prefill backlog --------------------------------------------------------------------------

// Drains b from b->t_ms to mono_ms (> b->t_ms). Out of line: a decision reads each
// candidate's backlog several times at one mono_ms, and only the first read drains.
__attribute__((noinline)) void decider_memory_drain(decider_memory_t *self, decider_backlog_t *b,
                                                    uint64_t mono_ms)
{
    uint64_t dt_ms = mono_ms - b->t_ms;
    double dt = (double)dt_ms / 1000.0;
    double budget = dt * b->tokens_per_s; // prefilled since t_ms, first come first served
    double left = b->tokens - budget;
    b->tokens = left > 0 ? left : 0.0; // never negative (nor NaN), inline: one per candidate
    while (b->n && budget > 0) {
        double *head = &b->part[b->head];
        double used = *head < budget ? *head : budget; // both positive
        *head -= used;
        budget -= used;
        if (*head > 0) break;
        b->head = (b->head + 1) % S_BACKLOG_FIFO;
        b->n--;
    }
    if (self->decay.dt_ms != dt_ms) {
        self->decay.dt_ms = dt_ms;
        self->decay.recent = exp(-dt / DECIDER_MEMORY_RECENT_TAU_S);
        self->decay.placed = exp(-dt / DECIDER_MEMORY_PLACED_TAU_S);
    }
    b->recent *= self->decay.recent;
    b->placed *= self->decay.placed;
    b->t_ms = mono_ms;
}

// The backlog of `worker` drained to mono_ms, or NULL for an out-of-range id.
static inline s_backlog_t *s_backlog_drained(decider_memory_t *self, int worker, uint64_t mono_ms)
{
    return decider_memory_backlog_at(self, self->backlog, worker, mono_ms);
}

double decider_memory_backlog(decider_memory_t *self, int worker, uint64_t mono_ms,
                              double tokens_per_s)
{
    s_backlog_t *b = s_backlog_drained(self, worker, mono_ms);
    if (!b) return 0;
    if (tokens_per_s > 0) b->tokens_per_s = tokens_per_s;
    return b->tokens;
}

void decider_memory_backlog_add(decider_memory_t *self, int worker, double tokens, uint64_t mono_ms)
{
    s_backlog_t *b = s_backlog_drained(self, worker, mono_ms);
    if (!b) return;
    if (tokens > 0) {
        b->tokens += tokens;
        if (b->n == S_BACKLOG_FIFO) { // full: the newest entry takes it (counted once)
            b->part[(b->head + b->n - 1) % S_BACKLOG_FIFO] += tokens;
        } else {
            b->part[(b->head + b->n) % S_BACKLOG_FIFO] = tokens;
            b->n++;
        }
    }
    b->recent += 1;
}

double decider_memory_placed(decider_memory_t *self, int worker, uint64_t mono_ms)
{
    s_backlog_t *b = s_backlog_drained(self, worker, mono_ms);
    return b ? b->placed : 0;
}

void decider_memory_place(decider_memory_t *self, int worker, uint64_t mono_ms)
{
    s_backlog_t *b = s_backlog_drained(self, worker, mono_ms);
    if (b) b->placed += 1;
}

bool decider_memory_rebalance(decider_memory_t *self, int worker, uint64_t mono_ms,
                              uint64_t interval_ms)
{
    s_backlog_t *b = s_backlog_drained(self, worker, mono_ms);
    if (!b || (b->rebalanced_ms && mono_ms < b->rebalanced_ms + interval_ms)) return false;
    b->rebalanced_ms = mono_ms ? mono_ms : 1;
    return true;
}

double decider_memory_heat(decider_memory_t *self, uint64_t key, uint64_t mono_ms)
{
    // the slot by a mix of the key (block hashes are well spread; the mix guards the rest)
    uint64_t h = (key ^ (key >> 29)) * 0xbf58476d1ce4e5b9ull;
    size_t i = (size_t)((h >> 32) % DECIDER_MEMORY_HEAT_SLOTS);
    double before = 0;
    uint64_t t = mono_ms;
    if (self->heat[i].key == key && self->heat[i].t_ms) {
        uint64_t last = self->heat[i].t_ms;
        double age_s = mono_ms > last ? (double)(mono_ms - last) / 1000.0 : 0;
        before = self->heat[i].count * exp(-age_s / DECIDER_MEMORY_HEAT_TAU_S);
        if (last > t) t = last; // read before the last: as it was then
    }
    self->heat[i].key = key;
    self->heat[i].t_ms = t ? t : 1;
    self->heat[i].count = before + 1;
    return before;
}

bool decider_memory_newcomer(decider_memory_t *self, int worker, bool cold, bool empty,
                             bool pool_warm)
{
    if (worker < 0 || worker >= IPL_INDEX_MAX_WORKERS) return false;
    s_backlog_t *b = &self->backlog[worker]; // flags only: no clock involved
    if (!b->seen) {
        b->seen = 1;
        b->newcomer = empty && pool_warm;
    }
    if (!cold) { // warm only in a warm pool: in a cold one every worker is "not cold"
        b->warm |= pool_warm;
        b->newcomer = 0;
        return false;
    }
    if (b->warm && empty && pool_warm) {
        b->warm = 0;
        b->newcomer = 1;
    }
    return b->newcomer;
}

// ---- pending prefixes -------------------------------------------------------------------------

void decider_memory_pending_add(decider_memory_t *self, int worker, const uint64_t *hashes,
                                size_t start, size_t n, uint64_t until_ms)
{
    if (worker < 0 || worker >= IPL_INDEX_MAX_WORKERS || start >= n) return;
    n = n - start < S_PENDING_MAX_BLOCKS ? n : start + S_PENDING_MAX_BLOCKS;
    s_pending_ring_t *r = self->pending[worker];
    if (!r && !(r = self->pending[worker] = calloc(1, sizeof *r))) return;
    uint32_t i = r->next;
    if (r->cap[i] < n - start) {
        uint64_t *h = realloc(r->hashes[i], (n - start) * sizeof *h);
        if (!h) return; // not remembered: the next routing of the prefix may scatter
        r->hashes[i] = h;
        r->cap[i] = (uint32_t)(n - start);
    }
    memcpy(r->hashes[i], hashes + start, (n - start) * sizeof *hashes);
    r->first[i] = hashes[start];
    r->start[i] = (uint32_t)start;
    r->n[i] = (uint32_t)(n - start);
    r->until_ms[i] = until_ms;
    r->view_until = 0;
    r->next = (r->next + 1) % DECIDER_MEMORY_PENDING;
}

// Rebuilds r's view of its live entries at mono_ms: valid until the first of them expires (or
// forever when none is live), and not before mono_ms (a clock read earlier may still see an
// entry expired since).
static void s_pending_view(s_pending_ring_t *r, uint64_t mono_ms)
{
    r->live = 0;
    r->live_min_start = UINT32_MAX;
    r->view_from = mono_ms;
    r->view_until = UINT64_MAX;
    for (uint32_t k = 0; k < DECIDER_MEMORY_PENDING; k++) {
        if (r->until_ms[k] <= mono_ms) continue; // free (0) or expired
        r->live |= 1u << k;
        if (r->start[k] < r->live_min_start) r->live_min_start = r->start[k];
        if (r->until_ms[k] < r->view_until) r->view_until = r->until_ms[k];
    }
}

size_t decider_memory_pending_match(decider_memory_t *self, int worker, const uint64_t *hashes,
                                    size_t n, size_t held, uint64_t mono_ms)
{
    if (worker < 0 || worker >= IPL_INDEX_MAX_WORKERS || !self->pending[worker]) return held;
    s_pending_ring_t *r = self->pending[worker];
    if (mono_ms < r->view_from || mono_ms >= r->view_until) s_pending_view(r, mono_ms);
    if (!r->live || held < r->live_min_start) return held;
    size_t best = held;
    for (uint32_t live = r->live; live; live &= live - 1) {
        int i = __builtin_ctz(live);
        size_t start = r->start[i];
        // Chained hashes: equal blocks at `start` mean equal prompts up to there.
        if (start > held || start >= n || hashes[start] != r->first[i] ||
            start + r->n[i] <= best) // or cannot beat best
            continue;
        const uint64_t *e = r->hashes[i];
        size_t k = 1;
        while (k < r->n[i] && start + k < n && hashes[start + k] == e[k])
            k++;
        if (start + k > best) best = start + k;
    }
    return best;
}
