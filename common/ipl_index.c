/*
 * ipl_index — the prefix index: block hash → set of workers holding it.
 *
 * Layout
 * ------
 * Blocks live in an arena, in chain order; a hash table finds a block's arena entry; each
 * entry names an interned (hash-consed) worker set:
 *
 *   block table (open addressing,         arena: entries in insertion order, 12 B each;
 *   8 B slots, load <= 3/4)               blocks of one chain sit next to each other
 *   +--------+---------+                  +------------------+-----+
 *   | tag    | ref     | ---------------> | key (u64 hash) A | set | 3  --+
 *   | tag    | ref     | -----+           | key B  (A's child)     | 3  --+   worker-set pool
 *   | (empty)| 0       |      |           | key C  (B's child)     | 5  --|-+ +---+-----------+
 *   +--------+---------+      |           | (hole: set 0)    |  0  |      +-->| 3 | {0, 7, 12}|
 *                             +---------> | key X  (a new run)     | 3      |  | 5 | {7}       |
 *                                         +------------------------+        +->+---+-----------+
 *
 *   tag = the top 32 bits of mix(key); a key's home slot is the top log2(cap) bits of its tag,
 *   so the table can grow and delete (backward shift, no tombstones) without the arena, and a
 *   probe reads the arena only when a tag matches (then compares the full key).
 *   Worker sets: one id per distinct set, refcounted; sig(S) = XOR of mix(w) for w in S, so
 *   adding or removing one worker finds S' with one probe of an intern table.
 *
 * Lookups (ipl_index_match): a prompt's blocks are a chain, and the arena keeps a chain's blocks
 * in consecutive entries, so after one probe for the first block the walk compares the next
 * prompt hash with the next arena entry — a sequential read — and probes the table again only
 * where the chain continues elsewhere (another run). A 512-block prompt costs a few probes and
 * a 6 KB scan, not 512 random reads of a table far larger than the caches.
 *
 * Placement (ipl_index_add_chain): a new block goes right after its predecessor (the previous
 * hash of the call, or the call's `parent` hint for the first) when that entry is a hole, or at
 * the top of the arena when its predecessor is the top entry; otherwise it starts a new run at
 * the top. A call that leaves a run at the top reserves holes after it (for a new chain as many
 * as it brought, up to S_SLACK_NEW; S_SLACK_GROW for one already continued elsewhere, which
 * is growing piecewise), where the chain's next blocks land
 * later: vLLM reports chunked prefill and decode blocks piece by piece, interleaved with every
 * other request's. Placement is only about speed: the walk checks every key, so any
 * layout gives the same answers.
 *
 * Holes (removed blocks, unused slack) are squeezed out by an incremental compaction: once the
 * holes outnumber the live blocks, every add/remove call also slides a bounded number of
 * entries down over the holes (order kept, so runs stay runs), updating their table refs.
 * No call pays for the whole arena.
 *
 * Memory per block: 8 B / load (3/8 .. 3/4 → 11..21 B) in the table + 12 B in the arena (+ its
 * holes, at most as many as the live blocks before compaction starts), whatever the number of
 * its holders. Big tables and arenas live in transparent huge pages (s_mem_alloc).
 *
 * Costs: add/remove O(1) amortised per block (+ O(|S|) to build a set the first time it is
 * seen); clear_worker and foreach scan the arena once (O(top)), foreach in chain order.
 */
#include "ipl_index.h"

#include "ipl_error.h"
#include "ipl_hash.h"

#include <assert.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define S_INITIAL_SLOTS 1024u /* block table */
#define S_INITIAL_ARENA 1024u /* arena entries */
#define S_INITIAL_SETS  64u   /* set pool and intern table */
#define S_NAME_SLOTS    2048u /* worker-name table: 2 × IPL_INDEX_MAX_WORKERS */
#define S_PREFETCH_W    8u    /* add/remove: blocks probed ahead */
#define S_STREAM_AHEAD  512u  /* match: bytes of a run loaded ahead of the walk */
#define S_SLACK_NEW     16u   /* holes reserved after a new chain's run at the arena's top */
#define S_SLACK_GROW    128u  /* ... after a run that continues a chain stored elsewhere */
#define S_COMPACT_MIN   16384u /* holes tolerated whatever the size */
#define S_MAX_BITS      31u   /* table capacity <= 2^31 slots (a tag has 32 bits) */
#define S_EMPTY_SET     0u    /* set id 0: the empty set, also "hole" in the arena */
#define S_NONE          SIZE_MAX

typedef struct {
    uint64_t sig;     /* XOR of ipl_mix64(w) over members */
    uint32_t refs;    /* blocks (and temporary pins) using this set; 0 = free entry */
    uint32_t n;       /* members */
    uint16_t *member; /* sorted worker ids, n of them (NULL when n == 0) */
} s_set_t;

/* One block-table slot. ref == 0: empty; otherwise the block's arena position + 1. */
typedef struct {
    uint32_t tag;
    uint32_t ref;
} s_slot_t;

/* One arena entry: 12 bytes, packed. set == 0: a hole (its key means nothing). */
typedef struct __attribute__((packed, aligned(4))) {
    uint64_t key;
    uint32_t set;
} s_ent_t;
_Static_assert(sizeof(s_ent_t) == 12, "arena entries are 12 bytes");

/* The last set transition of an add/remove loop: consecutive blocks of a chain usually share
 * their holder set, so the next block reuses it without an intern lookup. Invalidated whenever
 * a set id is freed (the id could be reused). */
typedef struct {
    uint32_t from, to;
    int worker;
    bool adding;
} s_memo_t;

struct ipl_index {
    /* block table */
    s_slot_t *slot;
    size_t cap; /* power of two */
    size_t count; /* blocks = live arena entries */
    unsigned bits; /* log2(cap) */

    /* arena: entries [0, top) used (live or holes), capacity acap */
    s_ent_t *ent;
    size_t top, acap;
    /* incremental compaction, when `compacting`: [0, cw) done, [cw, cr) holes nobody may fill,
     * [cr, top) still to slide down */
    bool compacting;
    size_t cw, cr;

    /* set pool: ids 1.. ; freed ids on the free_ids stack */
    s_set_t *pool;
    uint32_t pool_cap;
    uint32_t pool_used; /* ids < pool_used have been handed out at least once */
    uint32_t *free_ids; /* stack of freed ids */
    uint32_t nfree;
    uint32_t *intern; /* set ids, 0 = empty; capacity intern_cap (power of two) */
    uint32_t intern_cap;
    uint32_t intern_count;
    size_t member_bytes;
    s_memo_t memo;

    /* workers */
    char *names[IPL_INDEX_MAX_WORKERS];
    size_t wblocks[IPL_INDEX_MAX_WORKERS];
    int16_t name_slots[S_NAME_SLOTS]; /* worker id + 1, 0 = empty */
    int nworkers;
    size_t memberships;
};

/* ------------------------------------------------------------------------------------------ */
/* hashing helpers */

/* Keys are XXH3 outputs already, but tests and adversaries may send 1, 2, 3...: the tag is
 * taken from a full mix of the key. */
static inline uint32_t s_tag(uint64_t key)
{
    return (uint32_t)(ipl_mix64(key) >> 32);
}

static inline size_t s_home(const ipl_index_t *self, uint32_t tag)
{
    return (size_t)(tag >> (32 - self->bits));
}

static uint64_t s_name_hash(const char *name)
{
    uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 0x100000001b3ULL;
    return ipl_mix64(h);
}

/* ------------------------------------------------------------------------------------------ */
/* worker sets */

static inline uint32_t s_intern_home(const ipl_index_t *self, uint64_t sig)
{
    return (uint32_t)(ipl_mix64(sig) & (self->intern_cap - 1));
}

static bool s_set_has(const s_set_t *set, int worker)
{
    size_t lo = 0, hi = set->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (set->member[mid] < worker)
            lo = mid + 1;
        else if (set->member[mid] > worker)
            hi = mid;
        else
            return true;
    }
    return false;
}

static int s_intern_grow(ipl_index_t *self)
{
    uint32_t ncap = self->intern_cap * 2;
    uint32_t *tab = calloc(ncap, sizeof *tab);
    if (!tab) return IPL_E_NOMEM;
    for (uint32_t i = 0; i < self->intern_cap; i++) {
        uint32_t id = self->intern[i];
        if (!id) continue;
        uint32_t j = (uint32_t)(ipl_mix64(self->pool[id].sig) & (ncap - 1));
        while (tab[j])
            j = (j + 1) & (ncap - 1);
        tab[j] = id;
    }
    free(self->intern);
    self->intern = tab;
    self->intern_cap = ncap;
    return 0;
}

static void s_intern_delete(ipl_index_t *self, uint32_t id)
{
    uint32_t mask = self->intern_cap - 1;
    uint32_t i = s_intern_home(self, self->pool[id].sig);
    while (self->intern[i] != id) {
        assert(self->intern[i] != 0);
        i = (i + 1) & mask;
    }
    /* backward-shift deletion */
    uint32_t j = i;
    for (;;) {
        j = (j + 1) & mask;
        uint32_t other = self->intern[j];
        if (!other) break;
        uint32_t home = s_intern_home(self, self->pool[other].sig);
        /* `other` may move into the hole at i iff its home is not in (i, j] cyclically */
        bool movable = (i <= j) ? (home <= i || home > j) : (home <= i && home > j);
        if (movable) {
            self->intern[i] = other;
            i = j;
        }
    }
    self->intern[i] = 0;
    self->intern_count--;
}

static void s_set_free(ipl_index_t *self, uint32_t id)
{
    s_set_t *set = &self->pool[id];
    assert(id != S_EMPTY_SET && set->refs == 0);
    s_intern_delete(self, id);
    self->member_bytes -= set->n * sizeof(uint16_t);
    free(set->member);
    memset(set, 0, sizeof *set);
    self->free_ids[self->nfree++] = id;
    self->memo.from = self->memo.to = UINT32_MAX; /* the id may be reused */
}

static inline void s_set_ref(ipl_index_t *self, uint32_t id)
{
    if (id != S_EMPTY_SET) self->pool[id].refs++;
}

static inline void s_set_unref(ipl_index_t *self, uint32_t id)
{
    if (id != S_EMPTY_SET && --self->pool[id].refs == 0) s_set_free(self, id);
}

/* Whether c == b + worker (adding) or c == b - worker: the larger set minus `worker` must
 * equal the smaller one, element by element. */
static bool s_set_is_step(const s_set_t *c, const s_set_t *b, int worker, bool adding)
{
    const s_set_t *big = adding ? c : b, *small = adding ? b : c;
    if (big->n != small->n + 1) return false;
    uint32_t si = 0;
    bool skipped = false;
    for (uint32_t bi = 0; bi < big->n; bi++) {
        if (!skipped && big->member[bi] == worker) {
            skipped = true;
            continue;
        }
        if (si >= small->n || small->member[si++] != big->member[bi]) return false;
    }
    return skipped;
}

/* Finds or creates the set `base` with `worker` added (adding=true) or removed. Returns its
 * id (0 = the empty set) in *out, or IPL_E_NOMEM. The new set starts with refs 0: the caller
 * references it at once (before any other set can be freed). */
static int s_set_derive(ipl_index_t *self, uint32_t base, int worker, bool adding, uint32_t *out)
{
    const s_set_t *b = &self->pool[base];
    uint32_t n = adding ? b->n + 1 : b->n - 1;
    if (n == 0) {
        *out = S_EMPTY_SET;
        return 0;
    }
    uint64_t sig = b->sig ^ ipl_mix64((uint64_t)worker);
    uint32_t mask = self->intern_cap - 1;
    for (uint32_t i = s_intern_home(self, sig); self->intern[i]; i = (i + 1) & mask) {
        const s_set_t *c = &self->pool[self->intern[i]];
        if (c->sig != sig || c->n != n) continue;
        bool same = s_set_is_step(c, b, worker, adding);
        if (same) {
            *out = self->intern[i];
            return 0;
        }
    }

    /* create it */
    if ((self->intern_count + 1) * 2 > self->intern_cap && s_intern_grow(self) != 0)
        return IPL_E_NOMEM;
    uint16_t *m = malloc(n * sizeof *m);
    if (!m) return IPL_E_NOMEM;
    uint32_t k = 0;
    bool placed = false;
    for (uint32_t i = 0; i < b->n; i++) {
        if (adding && !placed && worker < b->member[i]) {
            m[k++] = (uint16_t)worker;
            placed = true;
        }
        if (!adding && b->member[i] == worker) continue;
        m[k++] = b->member[i];
    }
    if (adding && !placed) m[k++] = (uint16_t)worker;
    assert(k == n);

    uint32_t id;
    if (self->nfree > 0) {
        id = self->free_ids[--self->nfree];
    } else {
        if (self->pool_used == self->pool_cap) {
            uint32_t ncap = self->pool_cap * 2;
            s_set_t *pool = realloc(self->pool, ncap * sizeof *pool);
            uint32_t *fr = pool ? realloc(self->free_ids, ncap * sizeof *fr) : NULL;
            if (pool) self->pool = pool;
            if (!fr) {
                free(m);
                return IPL_E_NOMEM;
            }
            self->free_ids = fr;
            memset(pool + self->pool_cap, 0, (ncap - self->pool_cap) * sizeof *pool);
            self->pool_cap = ncap;
        }
        id = self->pool_used++;
    }
    s_set_t *set = &self->pool[id];
    set->sig = sig;
    set->refs = 0;
    set->n = n;
    set->member = m;
    self->member_bytes += n * sizeof(uint16_t);
    uint32_t i = s_intern_home(self, sig);
    while (self->intern[i])
        i = (i + 1) & (self->intern_cap - 1);
    self->intern[i] = id;
    self->intern_count++;
    *out = id;
    return 0;
}

/* s_set_derive through the one-entry memo. */
static int s_set_step(ipl_index_t *self, uint32_t base, int worker, bool adding, uint32_t *out)
{
    s_memo_t *memo = &self->memo;
    if (memo->from == base && memo->worker == worker && memo->adding == adding) {
        *out = memo->to;
        return 0;
    }
    int rc = s_set_derive(self, base, worker, adding, out);
    if (rc == 0) *memo = (s_memo_t){.from = base, .to = *out, .worker = worker, .adding = adding};
    return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* memory */

#define S_HUGE_PAGE (2u << 20)
#define S_HUGE_MIN  (4u << 20) /* blocks from this size on live in transparent huge pages */

static size_t s_huge_len(size_t bytes)
{
    return (bytes + S_HUGE_PAGE - 1) & ~(size_t)(S_HUGE_PAGE - 1);
}

/* Zeroed memory. Large blocks are mapped 2 MiB-aligned with MADV_HUGEPAGE: lookups probe random
 * slots all over the table, and with 4 KiB pages nearly every probe of a big table would also
 * miss the TLB. Untouched pages of a mapping cost no RSS. */
static void *s_mem_alloc(size_t bytes)
{
    if (bytes < S_HUGE_MIN) return calloc(1, bytes);
    size_t len = s_huge_len(bytes);
    uint8_t *p =
        mmap(NULL, len + S_HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    uint8_t *a = (uint8_t *)(((uintptr_t)p + S_HUGE_PAGE - 1) & ~(uintptr_t)(S_HUGE_PAGE - 1));
    if (a > p) munmap(p, (size_t)(a - p));
    uint8_t *end = p + len + S_HUGE_PAGE;
    if (end > a + len) munmap(a + len, (size_t)(end - (a + len)));
    (void)madvise(a, len, MADV_HUGEPAGE); /* advice only: THP may be off */
    return a;
}

static void s_mem_free(void *p, size_t bytes)
{
    if (!p) return;
    if (bytes < S_HUGE_MIN)
        free(p);
    else
        munmap(p, s_huge_len(bytes));
}

/* p (`old` bytes from s_mem_alloc) grown to `bytes`, zero past `old`; NULL (p intact) on
 * failure. Large blocks grow by mremap: no copy, and the new pages cost nothing until used. */
static void *s_mem_grow(void *p, size_t old, size_t bytes)
{
    if (bytes < S_HUGE_MIN) {
        uint8_t *q = realloc(p, bytes);
        if (q) memset(q + old, 0, bytes - old);
        return q;
    }
    if (old < S_HUGE_MIN) {
        uint8_t *q = s_mem_alloc(bytes);
        if (q) {
            memcpy(q, p, old);
            free(p);
        }
        return q;
    }
    size_t nlen = s_huge_len(bytes);
    void *q = mremap(p, s_huge_len(old), nlen, MREMAP_MAYMOVE);
    if (q == MAP_FAILED) return NULL;
    (void)madvise(q, nlen, MADV_HUGEPAGE);
    return q;
}

/* ------------------------------------------------------------------------------------------ */
/* block table */

/* The table with 2^nbits slots (more than now), its blocks rehashed. */
static int s_table_resize(ipl_index_t *self, unsigned nbits)
{
    size_t ncap = (size_t)1 << nbits;
    s_slot_t *slot = s_mem_alloc(ncap * sizeof *slot);
    if (!slot) return IPL_E_NOMEM;
    for (size_t i = 0; i < self->cap; i++) {
        s_slot_t s = self->slot[i];
        if (!s.ref) continue;
        size_t j = s.tag >> (32 - nbits);
        while (slot[j].ref)
            j = (j + 1) & (ncap - 1);
        slot[j] = s;
    }
    s_mem_free(self->slot, self->cap * sizeof *slot);
    self->slot = slot;
    self->cap = ncap;
    self->bits = nbits;
    return 0;
}

static int s_table_grow(ipl_index_t *self)
{
    return self->bits >= S_MAX_BITS ? IPL_E_NOMEM : s_table_resize(self, self->bits + 1);
}

/* The table slot of `key`, or S_NONE. */
static inline size_t s_find_slot(const ipl_index_t *self, uint64_t key)
{
    uint32_t tag = s_tag(key);
    size_t mask = self->cap - 1;
    for (size_t i = s_home(self, tag);; i = (i + 1) & mask) {
        s_slot_t s = self->slot[i];
        if (!s.ref) return S_NONE;
        if (s.tag == tag && self->ent[s.ref - 1].key == key) return i;
    }
}

/* The arena position of `key`, or S_NONE. */
static inline size_t s_find(const ipl_index_t *self, uint64_t key)
{
    size_t i = s_find_slot(self, key);
    return i == S_NONE ? S_NONE : self->slot[i].ref - 1;
}

/* The table slot pointing at the live arena entry `pos`. */
static size_t s_slot_of(const ipl_index_t *self, size_t pos)
{
    size_t mask = self->cap - 1;
    size_t i = s_home(self, s_tag(self->ent[pos].key));
    while (self->slot[i].ref != pos + 1) {
        assert(self->slot[i].ref != 0);
        i = (i + 1) & mask;
    }
    return i;
}

/* Starts loading the home slot of `key` (8-byte slots never straddle a cache line). */
static inline void s_prefetch_home(const ipl_index_t *self, uint64_t key)
{
    __builtin_prefetch(&self->slot[s_home(self, s_tag(key))]);
}

/* Empties slot i, shifting the rest of its cluster back so probes never cross a hole. */
static void s_slot_delete(ipl_index_t *self, size_t i)
{
    size_t mask = self->cap - 1;
    size_t j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (!self->slot[j].ref) break;
        size_t home = s_home(self, self->slot[j].tag);
        bool movable = (i <= j) ? (home <= i || home > j) : (home <= i && home > j);
        if (movable) {
            self->slot[i] = self->slot[j];
            i = j;
        }
    }
    self->slot[i] = (s_slot_t){0, 0};
    self->count--;
}

/* ------------------------------------------------------------------------------------------ */
/* arena */

/* Room for `n` more entries at the top. */
static int s_arena_reserve(ipl_index_t *self, size_t n)
{
    if (self->top + n <= self->acap) return 0;
    if (n > UINT32_MAX - 1 - self->top) return IPL_E_NOMEM; /* table refs are 32-bit */
    size_t ncap = self->acap * 2;
    while (ncap < self->top + n)
        ncap *= 2;
    s_ent_t *e = s_mem_grow(self->ent, self->acap * sizeof *e, ncap * sizeof *e);
    if (!e) return IPL_E_NOMEM;
    self->ent = e;
    self->acap = ncap;
    return 0;
}

/* Where a new block goes, given its predecessor's position (S_NONE: unknown): right after it
 * if that entry is a hole (not one the compaction is sliding over) or the top; otherwise a new
 * run at the top. Room at the top must be reserved. */
static size_t s_place(ipl_index_t *self, size_t prev)
{
    if (prev != S_NONE) {
        size_t p = prev + 1;
        if (p < self->top && self->ent[p].set == S_EMPTY_SET &&
            !(self->compacting && p >= self->cw && p < self->cr))
            return p;
    }
    return self->top++;
}

/* Moves the block at arena position `pos` (table slot `slot`, or S_NONE to look it up) from
 * its set to `to` (already derived, so it exists), fixing refcounts and counters. `to` == 0
 * deletes the block: its table slot goes and its entry becomes a hole. */
static void s_block_move(ipl_index_t *self, size_t pos, size_t slot, uint32_t to, int worker,
                         bool adding)
{
    uint32_t from = self->ent[pos].set;
    s_set_ref(self, to); /* before unref: `to` may have refs 0 and must not be freed */
    if (adding) {
        self->wblocks[worker]++;
        self->memberships++;
    } else {
        self->wblocks[worker]--;
        self->memberships--;
    }
    if (to == S_EMPTY_SET) s_slot_delete(self, slot == S_NONE ? s_slot_of(self, pos) : slot);
    self->ent[pos].set = to;
    s_set_unref(self, from);
}

/* One bounded step of the incremental compaction (see the top of the file), started once the
 * holes outnumber the live blocks (+ S_COMPACT_MIN): each live entry moved costs a table probe,
 * so a pass must free at least as many holes as it moves entries. `n`: blocks the calling operation
 * touched; the step slides over a multiple of that, more than the operation can add, so a
 * compaction always finishes. */
static void s_compact_step(ipl_index_t *self, size_t n)
{
    if (!self->compacting) {
        if (self->top - self->count <= self->count + S_COMPACT_MIN) return;
        self->compacting = true;
        self->cw = self->cr = 0;
    }
    size_t budget = 4 * n + 2 * S_SLACK_GROW + 64;
    for (; budget > 0 && self->cr < self->top; budget--, self->cr++) {
        /* each live entry moved needs its table slot: load the slots of those ahead */
        size_t ahead = self->cr + S_PREFETCH_W;
        if (ahead < self->top && self->ent[ahead].set != S_EMPTY_SET)
            s_prefetch_home(self, self->ent[ahead].key);
        s_ent_t e = self->ent[self->cr];
        if (e.set == S_EMPTY_SET) continue;
        if (self->cw != self->cr) {
            self->slot[s_slot_of(self, self->cr)].ref = (uint32_t)(self->cw + 1);
            self->ent[self->cw] = e;
            self->ent[self->cr].set = S_EMPTY_SET;
        }
        self->cw++;
    }
    if (self->cr == self->top) {
        self->top = self->cw;
        self->compacting = false;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* public API */

ipl_index_t *ipl_index_new(void)
{
    ipl_index_t *self = calloc(1, sizeof *self);
    if (!self) return NULL;
    self->cap = S_INITIAL_SLOTS;
    self->bits = 10;
    _Static_assert(S_INITIAL_SLOTS == 1u << 10, "bits = log2(S_INITIAL_SLOTS)");
    self->acap = S_INITIAL_ARENA;
    self->pool_cap = S_INITIAL_SETS;
    self->pool_used = 1; /* id 0 is the empty set */
    self->intern_cap = S_INITIAL_SETS;
    self->pool = calloc(self->pool_cap, sizeof *self->pool);
    self->free_ids = malloc(self->pool_cap * sizeof *self->free_ids);
    self->intern = calloc(self->intern_cap, sizeof *self->intern);
    self->memo.from = self->memo.to = UINT32_MAX;
    self->slot = s_mem_alloc(self->cap * sizeof *self->slot);
    self->ent = s_mem_alloc(self->acap * sizeof *self->ent);
    if (!self->pool || !self->free_ids || !self->intern || !self->slot || !self->ent) {
        free(self->pool);
        free(self->free_ids);
        free(self->intern);
        s_mem_free(self->slot, self->cap * sizeof *self->slot);
        s_mem_free(self->ent, self->acap * sizeof *self->ent);
        free(self);
        return NULL;
    }
    return self;
}

int ipl_index_reserve(ipl_index_t *self, size_t blocks)
{
    assert(self);
    unsigned bits = self->bits; /* the load the adds keep: at most 3/4 */
    while (bits < S_MAX_BITS && (blocks + 1) * 4 > ((size_t)3 << bits))
        bits++;
    if (bits > self->bits && s_table_resize(self, bits) != 0) return IPL_E_NOMEM;
    return blocks <= UINT32_MAX - 1 - S_SLACK_GROW ? s_arena_reserve(self, blocks + S_SLACK_GROW)
                                                   : IPL_E_NOMEM;
}

void ipl_index_destroy(ipl_index_t **self_p)
{
    if (!self_p || !*self_p) return;
    ipl_index_t *self = *self_p;
    for (uint32_t i = 1; i < self->pool_used; i++)
        free(self->pool[i].member);
    free(self->pool);
    free(self->free_ids);
    free(self->intern);
    s_mem_free(self->slot, self->cap * sizeof *self->slot);
    s_mem_free(self->ent, self->acap * sizeof *self->ent);
    for (int w = 0; w < self->nworkers; w++)
        free(self->names[w]);
    free(self);
    *self_p = NULL;
}

/* The name-table slot for `name`: its worker, or the empty slot where it would go. */
static size_t s_name_slot(const ipl_index_t *self, const char *name)
{
    size_t i = s_name_hash(name) & (S_NAME_SLOTS - 1);
    while (self->name_slots[i] && strcmp(self->names[self->name_slots[i] - 1], name) != 0)
        i = (i + 1) & (S_NAME_SLOTS - 1);
    return i;
}

int ipl_index_worker(ipl_index_t *self, const char *name)
{
    assert(self && name);
    size_t i = s_name_slot(self, name);
    if (self->name_slots[i]) return self->name_slots[i] - 1;
    if (self->nworkers >= IPL_INDEX_MAX_WORKERS) return IPL_E_RANGE;
    char *copy = strdup(name);
    if (!copy) return IPL_E_NOMEM;
    int w = self->nworkers++;
    self->names[w] = copy;
    self->name_slots[i] = (int16_t)(w + 1);
    return w;
}

int ipl_index_find_worker(const ipl_index_t *self, const char *name)
{
    assert(self && name);
    size_t i = s_name_slot(self, name);
    return self->name_slots[i] ? self->name_slots[i] - 1 : -1;
}

const char *ipl_index_worker_name(const ipl_index_t *self, int worker)
{
    assert(self);
    return (worker >= 0 && worker < self->nworkers) ? self->names[worker] : NULL;
}

int ipl_index_nworkers(const ipl_index_t *self)
{
    assert(self);
    return self->nworkers;
}

int ipl_index_add_chain(ipl_index_t *self, int worker, uint64_t parent, const uint64_t *hashes,
                        size_t n)
{
    assert(self && (hashes || n == 0));
    if (worker < 0 || worker >= self->nworkers) return IPL_E_RANGE;
    if (n == 0) return 0;
    if (s_arena_reserve(self, n + S_SLACK_GROW) != 0) return IPL_E_NOMEM;
    size_t prev = parent ? s_find(self, parent) : S_NONE;
    bool at_top = false; /* the last new block ended a run at the top */
    size_t slack = n < S_SLACK_NEW ? n : S_SLACK_NEW; /* a new chain: as much as it brought */
    for (size_t k = 0; k < n; k++) {
        uint64_t key = hashes[k];
        if (k + S_PREFETCH_W < n) s_prefetch_home(self, hashes[k + S_PREFETCH_W]);
        size_t i = s_find_slot(self, key);
        if (i == S_NONE) {
            if ((self->count + 1) * 4 > self->cap * 3 && s_table_grow(self) != 0)
                return IPL_E_NOMEM;
            uint32_t to;
            if (s_set_step(self, S_EMPTY_SET, worker, true, &to) != 0) return IPL_E_NOMEM;
            size_t pos = s_place(self, prev);
            at_top = pos + 1 == self->top;
            /* a chain that grows in pieces interleaved with others (decoding, chunked prefill)
             * gets room to grow in place */
            if (at_top && prev != S_NONE && pos != prev + 1) slack = S_SLACK_GROW;
            self->ent[pos] = (s_ent_t){.key = key, .set = S_EMPTY_SET};
            uint32_t tag = s_tag(key);
            size_t mask = self->cap - 1;
            for (i = s_home(self, tag); self->slot[i].ref; i = (i + 1) & mask)
                ;
            self->slot[i] = (s_slot_t){.tag = tag, .ref = (uint32_t)(pos + 1)};
            self->count++;
            /* the entry's set is 0 for this instant only; s_block_move makes it `to` (non-empty) */
            s_block_move(self, pos, i, to, worker, true);
            prev = pos;
            continue;
        }
        size_t pos = self->slot[i].ref - 1;
        prev = pos;
        at_top = false;
        uint32_t from = self->ent[pos].set;
        if (s_set_has(&self->pool[from], worker)) continue; /* idempotent */
        uint32_t to;
        if (s_set_step(self, from, worker, true, &to) != 0) return IPL_E_NOMEM;
        s_block_move(self, pos, i, to, worker, true);
    }
    if (at_top) self->top += slack; /* reserved above; entries past top are holes */
    s_compact_step(self, n);
    return 0;
}

int ipl_index_add(ipl_index_t *self, int worker, const uint64_t *hashes, size_t n)
{
    return ipl_index_add_chain(self, worker, 0, hashes, n);
}

int ipl_index_remove(ipl_index_t *self, int worker, const uint64_t *hashes, size_t n)
{
    assert(self && (hashes || n == 0));
    if (worker < 0 || worker >= self->nworkers) return IPL_E_RANGE;
    for (size_t k = 0; k < n; k++) {
        if (k + S_PREFETCH_W < n) s_prefetch_home(self, hashes[k + S_PREFETCH_W]);
        size_t i = s_find_slot(self, hashes[k]);
        if (i == S_NONE) continue;
        size_t pos = self->slot[i].ref - 1;
        uint32_t from = self->ent[pos].set;
        if (!s_set_has(&self->pool[from], worker)) continue;
        uint32_t to;
        if (s_set_step(self, from, worker, false, &to) != 0) return IPL_E_NOMEM;
        s_block_move(self, pos, i, to, worker, false);
    }
    s_compact_step(self, n);
    return 0;
}

void ipl_index_clear_worker(ipl_index_t *self, int worker)
{
    assert(self);
    if (worker < 0 || worker >= self->nworkers || self->wblocks[worker] == 0) return;
    /* One pass over the sets: remap[s] = s minus worker, for every set holding it; each target
     * is pinned (+1 ref) so it survives until the scan has moved every block onto it. */
    uint32_t nsets = self->pool_used;
    uint32_t *remap = malloc(nsets * sizeof *remap);
    if (remap) {
        bool ok = true;
        for (uint32_t s = 0; s < nsets; s++) {
            remap[s] = s;
            if (ok && self->pool[s].refs > 0 && s_set_has(&self->pool[s], worker)) {
                uint32_t to;
                if (s_set_derive(self, s, worker, false, &to) != 0) {
                    ok = false; /* fall back to the slow path for this set */
                    continue;
                }
                s_set_ref(self, to);
                remap[s] = to;
            }
        }
        for (size_t p = 0; p < self->top; p++) {
            uint32_t s = self->ent[p].set;
            if (s != S_EMPTY_SET && s < nsets && remap[s] != s)
                s_block_move(self, p, S_NONE, remap[s], worker, false);
        }
        for (uint32_t s = 0; s < nsets; s++)
            if (remap[s] != s) s_set_unref(self, remap[s]);
        free(remap);
    }
    /* Slow path (allocation failed, or sets created during the pass): per block. */
    for (size_t p = 0; p < self->top && self->wblocks[worker] > 0; p++) {
        uint32_t s = self->ent[p].set;
        uint32_t to;
        if (s != S_EMPTY_SET && s_set_has(&self->pool[s], worker) &&
            s_set_derive(self, s, worker, false, &to) == 0)
            s_block_move(self, p, S_NONE, to, worker, false);
    }
}

/* Whether arena entry e holds block hash h for the holder set `cur`. */
static inline bool s_continues(const s_ent_t *e, const uint64_t *h, uint32_t cur)
{
    return e->key == *h && e->set == cur;
}

size_t ipl_index_match(const ipl_index_t *self, const uint64_t *hashes, size_t n, uint32_t *prefix,
                       size_t max)
{
    assert(self && (hashes || n == 0) && (prefix || max == 0));
    size_t nw = (size_t)self->nworkers < max ? (size_t)self->nworkers : max;
    for (size_t w = 0; w < nw; w++)
        prefix[w] = 0;
    if (n == 0) return 0;
    size_t pos = s_find(self, hashes[0]);
    if (pos == S_NONE) return 0;
    const s_ent_t *ent = self->ent;
    uint32_t cur = ent[pos].set;
    const s_set_t *set = &self->pool[cur];
    uint16_t alive[IPL_INDEX_MAX_WORKERS];
    size_t nalive = set->n;
    memcpy(alive, set->member, nalive * sizeof *alive);
    size_t best = 0, depth = 1;
    for (size_t i = 1; i < n; i++) {
        /* The chain's next blocks are usually the next arena entries, with the same holders: a
         * sequential read, without a probe or an intersection while that lasts (`run` blocks
         * of it; the holders of a hole are no one's, so a run needs some). */
        size_t lim = self->top - pos - 1 < n - i ? self->top - pos - 1 : n - i;
        if (cur == S_EMPTY_SET) lim = 0;
        const s_ent_t *e = &ent[pos + 1];
        const uint64_t *h = &hashes[i];
        /* Four blocks a step while they all continue it, then one by one. Each step streams
         * the run ahead of the hardware prefetcher, which starts late on each run (a prefetch
         * past the arena's end is harmless: it never faults). */
        size_t run = 0;
        while (run + 4 <= lim && s_continues(&e[run], &h[run], cur) &&
               s_continues(&e[run + 1], &h[run + 1], cur) &&
               s_continues(&e[run + 2], &h[run + 2], cur) &&
               s_continues(&e[run + 3], &h[run + 3], cur)) {
            __builtin_prefetch((const char *)&e[run] + S_STREAM_AHEAD);
            run += 4;
        }
        while (run < lim && s_continues(&e[run], &h[run], cur))
            __builtin_prefetch((const char *)&e[run++] + S_STREAM_AHEAD);
        if (run) {
            pos += run;
            i += run - 1;
            depth = i + 1;
            continue;
        }
        /* Elsewhere: the next arena entry with other holders, or a probe of the table. */
        size_t p = pos + 1;
        if (p < self->top && ent[p].key == hashes[i] && ent[p].set != S_EMPTY_SET) {
            pos = p;
            __builtin_prefetch((const char *)&ent[pos] + S_STREAM_AHEAD);
        } else {
            pos = s_find(self, hashes[i]);
            if (pos == S_NONE) break;
        }
        uint32_t s = ent[pos].set;
        if (s != cur) {
            /* intersect alive (sorted) with the new set (sorted); drop-outs stop at depth i */
            const s_set_t *t = &self->pool[s];
            size_t keep = 0, ti = 0;
            for (size_t a = 0; a < nalive; a++) {
                uint16_t w = alive[a];
                while (ti < t->n && t->member[ti] < w)
                    ti++;
                if (ti < t->n && t->member[ti] == w) {
                    alive[keep++] = w;
                } else {
                    if (w < nw) prefix[w] = (uint32_t)i;
                    best = i;
                }
            }
            nalive = keep;
            if (nalive == 0) return best;
            cur = s;
        }
        depth = i + 1;
    }
    for (size_t a = 0; a < nalive; a++)
        if (alive[a] < nw) prefix[alive[a]] = (uint32_t)depth;
    return depth;
}

size_t ipl_index_worker_blocks(const ipl_index_t *self, int worker)
{
    assert(self);
    return (worker >= 0 && worker < self->nworkers) ? self->wblocks[worker] : 0;
}

size_t ipl_index_blocks(const ipl_index_t *self)
{
    assert(self);
    return self->count;
}

size_t ipl_index_memberships(const ipl_index_t *self)
{
    assert(self);
    return self->memberships;
}

size_t ipl_index_memory_bytes(const ipl_index_t *self)
{
    assert(self);
    /* A large arena is a mapping: only the pages up to its top have ever been touched. */
    size_t arena = self->acap * sizeof(s_ent_t);
    if (arena >= S_HUGE_MIN) arena = s_huge_len(self->top * sizeof(s_ent_t));
    return sizeof *self + self->cap * sizeof(s_slot_t) + arena +
           self->pool_cap * (sizeof(s_set_t) + sizeof(uint32_t)) +
           self->intern_cap * sizeof(uint32_t) + self->member_bytes;
}

size_t ipl_index_arena_entries(const ipl_index_t *self)
{
    assert(self);
    return self->top;
}

int ipl_index_foreach(const ipl_index_t *self, int worker, ipl_index_block_fn *fn, void *arg)
{
    assert(self && fn);
    if (worker < 0 || worker >= self->nworkers || self->wblocks[worker] == 0) return 0;
    /* Decide membership once per set, then scan the arena (chain order). */
    uint32_t nsets = self->pool_used;
    uint8_t *holds = calloc(nsets, 1);
    for (size_t p = 0; p < self->top; p++) {
        uint32_t s = self->ent[p].set;
        if (s == S_EMPTY_SET) continue;
        bool has;
        if (holds) {
            if (!holds[s]) holds[s] = s_set_has(&self->pool[s], worker) ? 2 : 1;
            has = holds[s] == 2;
        } else {
            has = s_set_has(&self->pool[s], worker);
        }
        if (has) {
            int rc = fn(arg, self->ent[p].key);
            if (rc != 0) {
                free(holds);
                return rc;
            }
        }
    }
    free(holds);
    return 0;
}
