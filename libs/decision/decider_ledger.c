/*
 * decider_ledger — in-flight rings, generations of optimistic blocks, and the inbox of peer
 * routings (see the header).
 *
 * Each ledger's `inbox_lock` guards its inbox (a FIFO list) and peer counters; everything else
 * belongs to the ledger's owner thread. The owner only takes the lock when `pending` says the
 * inbox is not empty, and then just long enough to take the whole list.
 */
#include "decider_ledger.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "decider_names.h"
#include "ipl_error.h"
#include "ipl_index.h"

// A worker's routings in time order, the oldest overwritten. In-flight queries run once per
// candidate and decision, so they take a binary search for the first routing after the load
// sample and one subtraction of running totals, instead of a walk over every routing since
// (at 30,000 decisions/s that walk was an eighth of a decider's CPU).
typedef struct {
    uint64_t at[DECIDER_LEDGER_RING];     // wall ms of routings, in time order; oldest overwritten
    uint64_t cum[DECIDER_LEDGER_RING];    // running total of tokens through this routing
    uint32_t tokens[DECIDER_LEDGER_RING]; // their uncached tokens (saturated)
    uint32_t next;                        // slot of the next routing
    uint32_t count;                       // valid slots (<= RING)
    uint64_t base;                        // running total before the oldest valid routing
    // The last decider_ledger_inflight_sum's answer, for routings after `memo_after`: between
    // two routings to a worker its load sample rarely changes, so most decisions ask each ring
    // the question it answered last. Valid until the ring changes (s_ring_add clears it).
    bool memo_valid;
    uint32_t memo_count;
    uint64_t memo_after, memo_tokens;
} s_ring_t;

// One queued peer routing, in one allocation: the hashes, then the worker name.
typedef struct s_peer {
    struct s_peer *next;
    uint64_t wall_ms, mono_ms, tokens;
    size_t nhashes;
    char *worker;
    uint64_t hashes[];
} s_peer_t;

struct decider_ledger {
    uint64_t ttl_ms;
    ipl_index_t *gen[DECIDER_LEDGER_GENERATIONS]; // [0] newest
    uint64_t rotated_ms;                          // monotonic time of the last rotation
    bool started;                                 // rotated_ms is set
    s_ring_t ring[IPL_INDEX_MAX_WORKERS];
    uint32_t scratch[IPL_INDEX_MAX_WORKERS]; // s_match's per-generation result
    uint32_t grow[IPL_INDEX_MAX_WORKERS];    // s_match: workers whose chain may continue
    uint32_t held[IPL_INDEX_MAX_WORKERS];    // s_assume's prefix per worker
    decider_names_t names;                   // s_worker's memo (ids never change)
    // What changes the optimistic blocks (an assumption added, a rotation) bumps `epoch`; the
    // last decider_ledger_match is kept in `memo` for decider_ledger_record_matched while the
    // epoch, the hashes and the clock are the same.
    uint64_t epoch;
    struct {
        bool valid;
        const uint64_t *hashes;
        size_t n;
        uint64_t mono_ms, epoch;
        int nworkers; // workers created later hold nothing in it
        uint32_t prefix[IPL_INDEX_MAX_WORKERS];
    } memo;

    pthread_mutex_t inbox_lock; // guards the fields below, except `pending`
    s_peer_t *inbox_head, *inbox_tail;
    size_t inbox_count, inbox_hashes;
    decider_ledger_peer_stats_t peer_stats; // .pending unused (inbox_count)
    atomic_bool pending;                    // inbox not empty (read without the lock)
};

decider_ledger_t *decider_ledger_new(uint64_t ttl_ms)
{
    decider_ledger_t *self = calloc(1, sizeof *self);
    if (!self) return NULL;
    self->ttl_ms = ttl_ms;
    atomic_init(&self->pending, false);
    pthread_mutex_init(&self->inbox_lock, NULL);
    for (int g = 0; g < DECIDER_LEDGER_GENERATIONS; g++) {
        self->gen[g] = ipl_index_new();
        if (!self->gen[g]) {
            decider_ledger_destroy(&self);
            return NULL;
        }
    }
    return self;
}

static void s_free_peers(s_peer_t *p)
{
    while (p) {
        s_peer_t *next = p->next;
        free(p);
        p = next;
    }
}

void decider_ledger_destroy(decider_ledger_t **self_p)
{
    if (!self_p || !*self_p) return;
    decider_ledger_t *self = *self_p;
    s_free_peers(self->inbox_head);
    for (int g = 0; g < DECIDER_LEDGER_GENERATIONS; g++)
        ipl_index_destroy(&self->gen[g]);
    pthread_mutex_destroy(&self->inbox_lock);
    free(self);
    *self_p = NULL;
}

// The ledger id of `name`, without applying the inbox.
static int s_worker(decider_ledger_t *self, const char *name)
{
    int id = decider_names_get(&self->names, 1, name);
    if (id >= 0) return id;
    // Every generation names the same workers in the same order, so ids agree: one known to
    // the newest is known to all.
    id = ipl_index_find_worker(self->gen[0], name);
    if (id < 0)
        for (int g = 0; g < DECIDER_LEDGER_GENERATIONS; g++)
            id = ipl_index_worker(self->gen[g], name);
    decider_names_put(&self->names, 1, name, id);
    return id;
}

int decider_ledger_worker(decider_ledger_t *self, const char *name)
{
    decider_ledger_apply_peers(self);
    return s_worker(self, name);
}

// Drops the oldest generation(s) when TTL/2 has passed, keeping worker ids. A time before
// the last rotation (a clock read just before another thread's decision) changes nothing.
static void s_rotate(decider_ledger_t *self, uint64_t mono_ms)
{
    uint64_t period = self->ttl_ms / 2 ? self->ttl_ms / 2 : 1;
    if (!self->started) {
        self->started = true;
        self->rotated_ms = mono_ms;
        return;
    }
    if (mono_ms < self->rotated_ms) return;
    // One rotation per elapsed period; after a long idle time, at most one per generation
    // (which drops them all).
    for (int k = 0; k < DECIDER_LEDGER_GENERATIONS && mono_ms - self->rotated_ms >= period; k++) {
        ipl_index_t *fresh = ipl_index_new();
        if (!fresh) return; // keep the old generations; try again next time
        const ipl_index_t *names = self->gen[0];
        for (int w = 0; w < ipl_index_nworkers(names); w++)
            ipl_index_worker(fresh, ipl_index_worker_name(names, w));
        // It will likely assume about as many blocks as the last one: room for them at once
        // (a hint: without it, the index grows as they come)
        (void)ipl_index_reserve(fresh, ipl_index_blocks(self->gen[0]));
        ipl_index_destroy(&self->gen[DECIDER_LEDGER_GENERATIONS - 1]);
        memmove(&self->gen[1], &self->gen[0], (DECIDER_LEDGER_GENERATIONS - 1) * sizeof *self->gen);
        self->gen[0] = fresh;
        self->rotated_ms += period;
        self->epoch++;
    }
    if (mono_ms - self->rotated_ms >= period) self->rotated_ms = mono_ms;
}

// One continuation step in generation `gen` for the workers self->grow[0..ngrow) (sorted by
// id): each one holding blocks there and not at the prompt's end yet extends prefix[w] by the
// blocks gen assumes for it from there, and marks `grew`. Workers at the same offset share one
// match.
static void s_continue(decider_ledger_t *self, const ipl_index_t *gen, const uint64_t *hashes,
                       size_t n, uint32_t *prefix, size_t m, size_t ngrow, uint8_t *grew)
{
    uint32_t start[IPL_INDEX_MAX_WORKERS]; // each worker's offset before this step
    for (size_t k = 0; k < ngrow; k++)
        start[k] = prefix[self->grow[k]];
    uint8_t done[IPL_INDEX_MAX_WORKERS]; // by k, like start
    memset(done, 0, ngrow);
    for (size_t k = 0; k < ngrow; k++) {
        if (done[k]) continue;
        uint32_t off = start[k];
        bool matched = false;
        for (size_t j = k; j < ngrow; j++) {
            if (done[j] || start[j] != off) continue;
            done[j] = 1;
            uint32_t w = self->grow[j];
            if (off >= n || ipl_index_worker_blocks(gen, (int)w) == 0) continue;
            if (!matched) {
                ipl_index_match(gen, hashes + off, n - off, self->scratch, m);
                matched = true;
            }
            if (self->scratch[w]) {
                prefix[w] = off + self->scratch[w];
                grew[w / 8] |= (uint8_t)(1u << (w % 8));
            }
        }
    }
}

// decider_ledger_match without applying the inbox first.
static size_t s_match(decider_ledger_t *self, const uint64_t *hashes, size_t n, uint32_t *prefix,
                      size_t max, uint64_t mono_ms)
{
    int nworkers = ipl_index_nworkers(self->gen[0]);
    size_t m = (size_t)nworkers < max ? (size_t)nworkers : max;
    memset(prefix, 0, m * sizeof *prefix);
    if (!self->ttl_ms || n == 0) return 0;
    s_rotate(self, mono_ms);
    size_t top = 0; // the longest match in any generation
    for (int g = 0; g < DECIDER_LEDGER_GENERATIONS; g++) {
        if (ipl_index_memberships(self->gen[g]) == 0) continue;
        size_t got = ipl_index_match(self->gen[g], hashes, n, self->scratch, m);
        if (!got) continue; // nobody holds any of it there
        if (got > top) top = got;
        for (size_t w = 0; w < m; w++)
            if (self->scratch[w] > prefix[w]) prefix[w] = self->scratch[w];
    }
    if (!top) return 0; // prefix is all 0: nothing to continue
    // A chain assumed in two steps (a longer prompt routed later) is split across generations:
    // continue it from where the longest part ends, in any generation, until it stops growing.
    // Every worker steps through the generations in lockstep, and one match from an offset
    // serves every worker continuing from there (a match reports all workers).
    size_t ngrow = 0;
    for (size_t w = 0; w < m; w++)
        if (prefix[w] > 0 && prefix[w] < n) self->grow[ngrow++] = (uint32_t)w;
    while (ngrow) {
        uint8_t grew[IPL_INDEX_MAX_WORKERS / 8] = {0}; // bit per worker
        for (int g = 0; g < DECIDER_LEDGER_GENERATIONS; g++)
            s_continue(self, self->gen[g], hashes, n, prefix, m, ngrow, grew);
        size_t keep = 0;
        for (size_t k = 0; k < ngrow; k++) {
            uint32_t w = self->grow[k];
            if ((grew[w / 8] >> (w % 8) & 1) && prefix[w] < n) self->grow[keep++] = w;
        }
        ngrow = keep;
    }
    size_t best = 0;
    for (size_t w = 0; w < m; w++)
        if (prefix[w] > best) best = prefix[w];
    return best;
}

size_t decider_ledger_match(decider_ledger_t *self, const uint64_t *hashes, size_t n,
                            uint32_t *prefix, size_t max, uint64_t mono_ms)
{
    decider_ledger_apply_peers(self);
    size_t best = s_match(self, hashes, n, prefix, max, mono_ms);
    int nworkers = ipl_index_nworkers(self->gen[0]);
    self->memo.valid = max >= (size_t)nworkers;
    if (self->memo.valid) {
        self->memo.hashes = hashes;
        self->memo.n = n;
        self->memo.mono_ms = mono_ms;
        self->memo.epoch = self->epoch;
        self->memo.nworkers = nworkers;
        memcpy(self->memo.prefix, prefix, (size_t)nworkers * sizeof *prefix);
    }
    return best;
}

#define S_SLOT(r, i) (((r)->next + DECIDER_LEDGER_RING - (r)->count + (i)) % DECIDER_LEDGER_RING)

// Records a routing in `worker`'s ring, keeping the ring in time order (a peer's routing may
// arrive after later local ones). One older than everything a full ring keeps is dropped.
static void s_ring_add(s_ring_t *r, uint64_t wall_ms, uint64_t tokens)
{
    r->memo_valid = false;
    if (r->count == DECIDER_LEDGER_RING) {
        if (wall_ms < r->at[r->next]) return;
        r->base += r->tokens[r->next]; // the oldest routing leaves
    }
    uint32_t pos = r->next;
    r->next = (r->next + 1) % DECIDER_LEDGER_RING;
    if (r->count < DECIDER_LEDGER_RING) r->count++;
    for (uint32_t i = 1; i < r->count; i++) {
        uint32_t prev = (pos + DECIDER_LEDGER_RING - 1) % DECIDER_LEDGER_RING;
        if (r->at[prev] <= wall_ms) break;
        r->at[pos] = r->at[prev];
        r->tokens[pos] = r->tokens[prev];
        pos = prev;
    }
    r->at[pos] = wall_ms;
    r->tokens[pos] = tokens > UINT32_MAX ? UINT32_MAX : (uint32_t)tokens;
    // Running totals from the new routing on (the ones it moved past included).
    uint32_t oldest = S_SLOT(r, 0);
    for (uint32_t i = (pos + DECIDER_LEDGER_RING - oldest) % DECIDER_LEDGER_RING; i < r->count;
         i++) {
        uint32_t s = S_SLOT(r, i);
        r->cum[s] = (i ? r->cum[S_SLOT(r, i - 1)] : r->base) + r->tokens[s];
    }
}

// The leading blocks of `hashes` that `worker` is assumed to hold at mono_ms: the memo of the
// last decider_ledger_match when `matched` says these are its hashes and nothing changed since,
// else a match.
static size_t s_held(decider_ledger_t *self, int worker, const uint64_t *hashes, size_t n,
                     uint64_t mono_ms, bool matched)
{
    if (matched && self->memo.valid && self->memo.epoch == self->epoch &&
        self->memo.hashes == hashes && self->memo.n == n && self->memo.mono_ms == mono_ms)
        return worker < self->memo.nworkers ? self->memo.prefix[worker] : 0;
    s_match(self, hashes, n, self->held, IPL_INDEX_MAX_WORKERS, mono_ms);
    return self->held[worker];
}

// Assumes `worker` holds the blocks (those not already assumed: an assumption is never
// extended, see the header), in the generation that was the newest at `mono_ms`.
static void s_assume(decider_ledger_t *self, int worker, const uint64_t *hashes, size_t n,
                     uint64_t mono_ms, bool matched)
{
    if (!self->ttl_ms || n == 0) return;
    size_t have = s_held(self, worker, hashes, n, mono_ms, matched);
    uint64_t period = self->ttl_ms / 2 ? self->ttl_ms / 2 : 1;
    uint64_t g = mono_ms >= self->rotated_ms ? 0 : 1 + (self->rotated_ms - 1 - mono_ms) / period;
    if (g >= DECIDER_LEDGER_GENERATIONS) return; // already expired
    if (have < n) {
        // The blocks continue the chain after hashes[have - 1]: the hint lets the index store
        // them next to it (when it is in the same generation), for a faster match.
        ipl_index_add_chain(self->gen[g], worker, have ? hashes[have - 1] : 0, hashes + have,
                            n - have);
        self->epoch++;
    }
}

static void s_record(decider_ledger_t *self, int worker, const uint64_t *hashes, size_t n,
                     uint64_t uncached_tokens, uint64_t wall_ms, uint64_t mono_ms, bool matched)
{
    if (worker < 0 || worker >= IPL_INDEX_MAX_WORKERS) return;
    s_ring_add(&self->ring[worker], wall_ms, uncached_tokens);
    s_assume(self, worker, hashes, n, mono_ms, matched);
}

void decider_ledger_record(decider_ledger_t *self, int worker, const uint64_t *hashes, size_t n,
                           uint64_t uncached_tokens, uint64_t wall_ms, uint64_t mono_ms)
{
    s_record(self, worker, hashes, n, uncached_tokens, wall_ms, mono_ms, false);
}

void decider_ledger_record_matched(decider_ledger_t *self, int worker, const uint64_t *hashes,
                                   size_t n, uint64_t uncached_tokens, uint64_t wall_ms,
                                   uint64_t mono_ms)
{
    s_record(self, worker, hashes, n, uncached_tokens, wall_ms, mono_ms, true);
}

void decider_ledger_routed(decider_ledger_t *self, int worker, const uint64_t *hashes, size_t n,
                           uint64_t wall_ms, uint64_t mono_ms)
{
    decider_ledger_record(self, worker, hashes, n, 0, wall_ms, mono_ms);
}

// Where in-flight routings start: after the load sample (`since_wall_ms`), and within the
// horizon before `wall_ms`.
static uint64_t s_inflight_after(uint64_t since_wall_ms, uint64_t wall_ms)
{
    uint64_t horizon = wall_ms > DECIDER_LEDGER_INFLIGHT_HORIZON_MS
                           ? wall_ms - DECIDER_LEDGER_INFLIGHT_HORIZON_MS
                           : 0;
    return since_wall_ms > horizon ? since_wall_ms : horizon;
}

// The routings of r after `after`: their count, and *tokens (if set) their sum.
static uint32_t s_ring_after(const s_ring_t *r, uint64_t after, uint64_t *tokens)
{
    if (tokens) *tokens = 0;
    // The ring is in time order: the first routing after `after`, by bisection.
    uint32_t lo = 0, hi = r->count;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (r->at[S_SLOT(r, mid)] <= after)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (tokens && lo < r->count)
        *tokens = r->cum[S_SLOT(r, r->count - 1)] - (lo ? r->cum[S_SLOT(r, lo - 1)] : r->base);
    return r->count - lo;
}

// The routings after max(since, horizon): their count, and *tokens (if set) their sum.
static uint32_t s_inflight(const decider_ledger_t *self, int worker, uint64_t since_wall_ms,
                           uint64_t wall_ms, uint64_t *tokens)
{
    if (worker < 0 || worker >= IPL_INDEX_MAX_WORKERS) {
        if (tokens) *tokens = 0;
        return 0;
    }
    return s_ring_after(&self->ring[worker], s_inflight_after(since_wall_ms, wall_ms), tokens);
}

uint32_t decider_ledger_inflight(const decider_ledger_t *self, int worker, uint64_t since_wall_ms,
                                 uint64_t wall_ms)
{
    return s_inflight(self, worker, since_wall_ms, wall_ms, NULL);
}

uint64_t decider_ledger_inflight_tokens(const decider_ledger_t *self, int worker,
                                        uint64_t since_wall_ms, uint64_t wall_ms)
{
    uint64_t tokens;
    s_inflight(self, worker, since_wall_ms, wall_ms, &tokens);
    return tokens;
}

uint32_t decider_ledger_inflight_sum(decider_ledger_t *self, int worker, uint64_t since_wall_ms,
                                     uint64_t wall_ms, uint64_t *tokens)
{
    if (worker < 0 || worker >= IPL_INDEX_MAX_WORKERS) {
        *tokens = 0;
        return 0;
    }
    s_ring_t *r = &self->ring[worker];
    uint64_t after = s_inflight_after(since_wall_ms, wall_ms);
    if (!r->memo_valid || r->memo_after != after) {
        r->memo_count = s_ring_after(r, after, &r->memo_tokens);
        r->memo_after = after;
        r->memo_valid = true;
    }
    *tokens = r->memo_tokens;
    return r->memo_count;
}

size_t decider_ledger_memberships(const decider_ledger_t *self)
{
    size_t n = 0;
    for (int g = 0; g < DECIDER_LEDGER_GENERATIONS; g++)
        n += ipl_index_memberships(self->gen[g]);
    return n;
}

// ---- peers ------------------------------------------------------------------------------------

static s_peer_t *s_peer_new(const decider_ledger_peer_t *r, uint64_t wall_ms, uint64_t mono_ms)
{
    size_t n = r->hashes ? r->nhashes : 0;
    if (n > DECIDER_LEDGER_INBOX_MAX_HASHES) n = DECIDER_LEDGER_INBOX_MAX_HASHES;
    size_t name_len = strlen(r->worker);
    s_peer_t *p = malloc(sizeof *p + n * sizeof *p->hashes + name_len + 1);
    if (!p) return NULL;
    p->next = NULL;
    p->wall_ms = r->wall_ms < wall_ms ? r->wall_ms : wall_ms;
    p->mono_ms = mono_ms;
    p->tokens = r->uncached_tokens;
    p->nhashes = n;
    if (n) memcpy(p->hashes, r->hashes, n * sizeof *p->hashes);
    p->worker = (char *)(p->hashes + n);
    memcpy(p->worker, r->worker, name_len + 1);
    return p;
}

// Appends under inbox_lock, dropping the oldest routings beyond the inbox's bounds.
static void s_enqueue(decider_ledger_t *self, s_peer_t *p)
{
    if (self->inbox_tail)
        self->inbox_tail->next = p;
    else
        self->inbox_head = p;
    self->inbox_tail = p;
    self->inbox_count++;
    self->inbox_hashes += p->nhashes;
    self->peer_stats.posted++;
    while (self->inbox_count > DECIDER_LEDGER_INBOX_MAX ||
           self->inbox_hashes > DECIDER_LEDGER_INBOX_MAX_HASHES) {
        s_peer_t *old = self->inbox_head;
        self->inbox_head = old->next;
        if (!self->inbox_head) self->inbox_tail = NULL;
        self->inbox_count--;
        self->inbox_hashes -= old->nhashes;
        self->peer_stats.dropped++;
        free(old);
    }
    atomic_store_explicit(&self->pending, self->inbox_head != NULL, memory_order_release);
}

int decider_ledger_post(decider_ledger_t *self, const decider_ledger_peer_t *routing,
                        uint64_t wall_ms, uint64_t mono_ms)
{
    if (!routing->worker || !*routing->worker) return IPL_E_INVAL;
    s_peer_t *p = s_peer_new(routing, wall_ms, mono_ms);
    if (!p) return IPL_E_NOMEM;
    pthread_mutex_lock(&self->inbox_lock);
    s_enqueue(self, p);
    pthread_mutex_unlock(&self->inbox_lock);
    return IPL_OK;
}

void decider_ledger_apply_peers(decider_ledger_t *self)
{
    if (!atomic_load_explicit(&self->pending, memory_order_acquire)) return;
    pthread_mutex_lock(&self->inbox_lock);
    s_peer_t *list = self->inbox_head;
    self->inbox_head = self->inbox_tail = NULL;
    self->inbox_count = self->inbox_hashes = 0;
    atomic_store_explicit(&self->pending, false, memory_order_release);
    pthread_mutex_unlock(&self->inbox_lock);
    uint64_t applied = 0, dropped = 0;
    for (s_peer_t *p = list; p; p = p->next) {
        int id = s_worker(self, p->worker);
        if (id < 0) {
            dropped++;
            continue;
        }
        decider_ledger_record(self, id, p->hashes, p->nhashes, p->tokens, p->wall_ms, p->mono_ms);
        applied++;
    }
    s_free_peers(list);
    pthread_mutex_lock(&self->inbox_lock);
    self->peer_stats.applied += applied;
    self->peer_stats.dropped += dropped;
    pthread_mutex_unlock(&self->inbox_lock);
}

void decider_ledger_peer_stats(decider_ledger_t *self, decider_ledger_peer_stats_t *out)
{
    pthread_mutex_lock(&self->inbox_lock);
    *out = self->peer_stats;
    out->pending = self->inbox_count;
    pthread_mutex_unlock(&self->inbox_lock);
}
