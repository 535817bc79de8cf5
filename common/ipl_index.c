/*
 * ipl_index — the prefix index: block hash → set of workers holding it.
 *
 * Layout
 * ------
 * Two open-addressing tables and one pool of interned (hash-consed) worker sets:
 *
 *   block table: s_slot_t slot[2^k] — linear probing, load <= 3/4, backward-shift delete
 *   (no tombstones); each slot is a packed 12-byte {key, set id}, set id 0 = empty slot.
 *
 *         key (u64 block hash)  set (u32)
 *      +----------------------+-------+
 *    0 | 0x9c1e...  block A   |   3   | ----------+
 *    1 | 0x11f0...  block B   |   3   | ----------+        worker-set pool (id -> set)
 *    2 |                      |   0   |           |      +----+------+------+-----------+
 *    3 | 0x7a02...  block C   |   5   | ------+   +----> |  3 | refs | sig  | {0, 7, 12}|
 *      |        ...           |  ...  |       |          +----+------+------+-----------+
 *      +----------------------+-------+       +--------> |  5 | refs | sig  | {7}       |
 *                                                        +----+------+------+-----------+
 *   set intern table (open addressing over sig → set id), so equal sets share one id:
 *      +---+---+---+---+---+---+
 *      | 0 | 5 | 0 | 3 | 0 |...|      sig(S) = XOR of mix(w) for w in S: adding or removing one
 *      +---+---+---+---+---+---+      worker updates it in O(1), then one probe finds S' .
 *
 * A block costs one 12-byte slot divided by the load factor (3/8 .. 3/4 → 16..32 B) whatever
 * the number of its holders: it stores one set id. Blocks of one prompt chain are almost
 * always held by the same workers, so there are few distinct sets, each shared by many blocks
 * (refcounted, freed at zero). Measured: 10M memberships take ~10 B per membership with 4M
 * blocks (1-4 of 64 workers each), 20 B with 7.5M blocks (1.33 workers each, bench_index).
 *
 * ipl_index_match walks the chain once: one probe per block, and only when the set id changes
 * from the previous block does it intersect the surviving workers with the new set (sorted
 * arrays). It stops at the first block nobody (still alive) holds. A 512-block prompt held by
 * 64 workers costs ~512 probes, not 512 × 64 membership tests; the probes of the next blocks
 * are prefetched, so a cold index pays overlapping DRAM misses, not one after another.
 *
 * Big block tables are mapped in transparent huge pages (s_slots_alloc): a lookup touches
 * random slots all over the table, and with 4 KiB pages most probes would miss the TLB too.
 *
 * Costs: add/remove O(1) amortised per block (+ O(|S|) to build a set the first time it is
 * seen); clear_worker and foreach scan the block table once (O(capacity)).
 */
#include "ipl_index.h"

#include "ipl_error.h"

#include <assert.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define S_INITIAL_SLOTS 1024u /* block table */
#define S_INITIAL_SETS  64u   /* set pool and intern table */
#define S_NAME_SLOTS    2048u /* worker-name table: 2 × IPL_INDEX_MAX_WORKERS */
#define S_PREFETCH      24u   /* match: blocks probed ahead */
#define S_PREFETCH_W    8u    /* add/remove: blocks probed ahead */
#define S_EMPTY_SET     0u    /* set id 0: the empty set, also "empty slot" */

typedef struct {
    uint64_t sig;     /* XOR of s_mix(w) over members */
    uint32_t refs;    /* blocks (and temporary pins) using this set; 0 = free entry */
    uint32_t n;       /* members */
    uint16_t *member; /* sorted worker ids, n of them (NULL when n == 0) */
} s_set_t;

/* One block-table slot: 12 bytes, packed so that a probe touches one cache line (mostly) and
 * a table at load 3/8 still costs only 32 B per block. set == 0 marks an empty slot. */
typedef struct __attribute__((packed, aligned(4))) {
    uint64_t key;
    uint32_t set;
} s_slot_t;
_Static_assert(sizeof(s_slot_t) == 12, "block slots are 12 bytes");

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
    size_t count;
    unsigned shift; /* 64 - log2(cap) */

    /* set pool: ids 1.. ; free ids chained through `member` == NULL && refs == 0 via free list */
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

static inline uint64_t s_mix(uint64_t x)
{
    /* splitmix64 finaliser: a bijection with good avalanche. */
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static inline size_t s_home(const ipl_index_t *self, uint64_t key)
{
    /* Keys are XXH3 outputs already, but tests and adversaries may send 1, 2, 3...:
     * Fibonacci hashing spreads them over the top bits. */
    return (size_t)((key * 0x9e3779b97f4a7c15ULL) >> self->shift);
}

static uint64_t s_name_hash(const char *name)
{
    uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 0x100000001b3ULL;
    return s_mix(h);
}

/* ------------------------------------------------------------------------------------------ */
/* worker sets */

static inline uint32_t s_intern_home(const ipl_index_t *self, uint64_t sig)
{
    return (uint32_t)(s_mix(sig) & (self->intern_cap - 1));
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
        uint32_t j = (uint32_t)(s_mix(self->pool[id].sig) & (ncap - 1));
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
    uint64_t sig = b->sig ^ s_mix((uint64_t)worker);
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
/* block table */

#define S_HUGE_PAGE (2u << 20)
#define S_HUGE_MIN  (4u << 20) /* tables from this size on live in transparent huge pages */

/* A zeroed table of `cap` slots. Large tables are mapped 2 MiB-aligned with MADV_HUGEPAGE:
 * lookups probe random slots all over the table, and with 4 KiB pages nearly every probe of a
 * big table would also miss the TLB. */
static s_slot_t *s_slots_alloc(size_t cap)
{
    size_t bytes = cap * sizeof(s_slot_t);
    if (bytes < S_HUGE_MIN) return calloc(cap, sizeof(s_slot_t));
    size_t len = (bytes + S_HUGE_PAGE - 1) & ~(size_t)(S_HUGE_PAGE - 1);
    uint8_t *p =
        mmap(NULL, len + S_HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    uint8_t *a = (uint8_t *)(((uintptr_t)p + S_HUGE_PAGE - 1) & ~(uintptr_t)(S_HUGE_PAGE - 1));
    if (a > p) munmap(p, (size_t)(a - p));
    uint8_t *end = p + len + S_HUGE_PAGE;
    if (end > a + len) munmap(a + len, (size_t)(end - (a + len)));
    (void)madvise(a, len, MADV_HUGEPAGE); /* advice only: THP may be off */
    return (s_slot_t *)a;
}

static void s_slots_free(s_slot_t *slot, size_t cap)
{
    size_t bytes = cap * sizeof(s_slot_t);
    if (!slot) return;
    if (bytes < S_HUGE_MIN)
        free(slot);
    else
        munmap(slot, (bytes + S_HUGE_PAGE - 1) & ~(size_t)(S_HUGE_PAGE - 1));
}

static unsigned s_log2(size_t cap)
{
    unsigned b = 0;
    while (((size_t)1 << b) < cap)
        b++;
    return b;
}

static int s_table_grow(ipl_index_t *self)
{
    size_t ncap = self->cap * 2;
    s_slot_t *slot = s_slots_alloc(ncap);
    if (!slot) return IPL_E_NOMEM;
    unsigned nshift = 64 - s_log2(ncap);
    for (size_t i = 0; i < self->cap; i++) {
        if (!self->slot[i].set) continue;
        uint64_t key = self->slot[i].key;
        size_t j = (size_t)((key * 0x9e3779b97f4a7c15ULL) >> nshift);
        while (slot[j].set)
            j = (j + 1) & (ncap - 1);
        slot[j] = self->slot[i];
    }
    s_slots_free(self->slot, self->cap);
    self->slot = slot;
    self->cap = ncap;
    self->shift = nshift;
    return 0;
}

/* The slot of `key`, or SIZE_MAX. */
static inline size_t s_find(const ipl_index_t *self, uint64_t key)
{
    size_t mask = self->cap - 1;
    for (size_t i = s_home(self, key);; i = (i + 1) & mask) {
        if (!self->slot[i].set) return SIZE_MAX;
        if (self->slot[i].key == key) return i;
    }
}

/* Starts loading the memory a lookup of `key` will read: its home slot and the next one (a
 * 12-byte slot may straddle two cache lines, and a hit is often one slot past home). The
 * second address may lie past the table's end: computed as an integer, and a prefetch never
 * faults. */
static inline void s_prefetch_home(const ipl_index_t *self, uint64_t key)
{
    uintptr_t a = (uintptr_t)&self->slot[s_home(self, key)];
    __builtin_prefetch((const void *)a);
    __builtin_prefetch((const void *)(a + 2 * sizeof(s_slot_t) - 1));
}

/* Empties slot i, shifting the rest of its cluster back so probes never cross a hole. */
static void s_slot_delete(ipl_index_t *self, size_t i)
{
    size_t mask = self->cap - 1;
    size_t j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (!self->slot[j].set) break;
        size_t home = s_home(self, self->slot[j].key);
        bool movable = (i <= j) ? (home <= i || home > j) : (home <= i && home > j);
        if (movable) {
            self->slot[i] = self->slot[j];
            i = j;
        }
    }
    self->slot[i].set = S_EMPTY_SET;
    self->count--;
}

/* Moves slot i from its set to `to` (already derived, so it exists), fixing refcounts and
 * counters. `to` == 0 deletes the slot; returns true then (the slot now holds another block
 * or nothing, so a scan must look at it again). */
static bool s_slot_move(ipl_index_t *self, size_t i, uint32_t to, int worker, bool adding)
{
    uint32_t from = self->slot[i].set;
    s_set_ref(self, to); /* before unref: `to` may have refs 0 and must not be freed */
    if (adding) {
        self->wblocks[worker]++;
        self->memberships++;
    } else {
        self->wblocks[worker]--;
        self->memberships--;
    }
    if (to == S_EMPTY_SET) {
        s_slot_delete(self, i);
        s_set_unref(self, from);
        return true;
    }
    self->slot[i].set = to;
    s_set_unref(self, from);
    return false;
}

/* ------------------------------------------------------------------------------------------ */
/* public API */

ipl_index_t *ipl_index_new(void)
{
    ipl_index_t *self = calloc(1, sizeof *self);
    if (!self) return NULL;
    self->cap = S_INITIAL_SLOTS;
    self->shift = 64 - s_log2(self->cap);
    self->pool_cap = S_INITIAL_SETS;
    self->pool_used = 1; /* id 0 is the empty set */
    self->intern_cap = S_INITIAL_SETS;
    self->pool = calloc(self->pool_cap, sizeof *self->pool);
    self->free_ids = malloc(self->pool_cap * sizeof *self->free_ids);
    self->intern = calloc(self->intern_cap, sizeof *self->intern);
    self->memo.from = self->memo.to = UINT32_MAX;
    if (!self->pool || !self->free_ids || !self->intern ||
        !(self->slot = s_slots_alloc(self->cap))) {
        free(self->pool);
        free(self->free_ids);
        free(self->intern);
        free(self);
        return NULL;
    }
    return self;
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
    s_slots_free(self->slot, self->cap);
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

int ipl_index_add(ipl_index_t *self, int worker, const uint64_t *hashes, size_t n)
{
    assert(self && (hashes || n == 0));
    if (worker < 0 || worker >= self->nworkers) return IPL_E_RANGE;
    for (size_t k = 0; k < n; k++) {
        uint64_t key = hashes[k];
        if (k + S_PREFETCH_W < n) s_prefetch_home(self, hashes[k + S_PREFETCH_W]);
        size_t i = s_find(self, key);
        if (i == SIZE_MAX) {
            if ((self->count + 1) * 4 > self->cap * 3 && s_table_grow(self) != 0)
                return IPL_E_NOMEM;
            uint32_t to;
            if (s_set_step(self, S_EMPTY_SET, worker, true, &to) != 0) return IPL_E_NOMEM;
            size_t mask = self->cap - 1;
            for (i = s_home(self, key); self->slot[i].set; i = (i + 1) & mask)
                ;
            self->slot[i].key = key;
            self->slot[i].set = S_EMPTY_SET;
            self->count++;
            /* sets[i] is 0 for this instant only; s_slot_move sets it to `to` (non-empty) */
            s_slot_move(self, i, to, worker, true);
            continue;
        }
        uint32_t from = self->slot[i].set;
        if (s_set_has(&self->pool[from], worker)) continue; /* idempotent */
        uint32_t to;
        if (s_set_step(self, from, worker, true, &to) != 0) return IPL_E_NOMEM;
        s_slot_move(self, i, to, worker, true);
    }
    return 0;
}

int ipl_index_remove(ipl_index_t *self, int worker, const uint64_t *hashes, size_t n)
{
    assert(self && (hashes || n == 0));
    if (worker < 0 || worker >= self->nworkers) return IPL_E_RANGE;
    for (size_t k = 0; k < n; k++) {
        if (k + S_PREFETCH_W < n) s_prefetch_home(self, hashes[k + S_PREFETCH_W]);
        size_t i = s_find(self, hashes[k]);
        if (i == SIZE_MAX) continue;
        uint32_t from = self->slot[i].set;
        if (!s_set_has(&self->pool[from], worker)) continue;
        uint32_t to;
        if (s_set_step(self, from, worker, false, &to) != 0) return IPL_E_NOMEM;
        s_slot_move(self, i, to, worker, false);
    }
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
        for (size_t i = 0; i < self->cap;) {
            uint32_t s = self->slot[i].set;
            if (s == S_EMPTY_SET || s >= nsets || remap[s] == s) {
                i++;
                continue;
            }
            if (!s_slot_move(self, i, remap[s], worker, false)) i++;
        }
        for (uint32_t s = 0; s < nsets; s++)
            if (remap[s] != s) s_set_unref(self, remap[s]);
        free(remap);
    }
    /* Slow path (allocation failed, or sets created during the pass): per block. */
    for (size_t i = 0; i < self->cap && self->wblocks[worker] > 0;) {
        uint32_t s = self->slot[i].set;
        uint32_t to;
        if (s == S_EMPTY_SET || !s_set_has(&self->pool[s], worker) ||
            s_set_derive(self, s, worker, false, &to) != 0) {
            i++;
            continue;
        }
        if (!s_slot_move(self, i, to, worker, false)) i++;
    }
}

size_t ipl_index_match(const ipl_index_t *self, const uint64_t *hashes, size_t n, uint32_t *prefix,
                       size_t max)
{
    assert(self && (hashes || n == 0) && (prefix || max == 0));
    size_t nw = (size_t)self->nworkers < max ? (size_t)self->nworkers : max;
    for (size_t w = 0; w < nw; w++)
        prefix[w] = 0;
    if (n == 0) return 0;
    for (size_t i = 1; i < n && i < S_PREFETCH; i++)
        s_prefetch_home(self, hashes[i]);
    size_t i0 = s_find(self, hashes[0]);
    if (i0 == SIZE_MAX) return 0;
    uint32_t cur = self->slot[i0].set;
    const s_set_t *set = &self->pool[cur];
    uint16_t alive[IPL_INDEX_MAX_WORKERS];
    size_t nalive = set->n;
    memcpy(alive, set->member, nalive * sizeof *alive);
    size_t best = 0, depth = 1;
    for (size_t i = 1; i < n; i++) {
        /* The whole chain is known up front: prefetch the home slots a few blocks ahead so the
         * DRAM misses of a cold index overlap instead of queueing one after another. */
        if (i + S_PREFETCH < n) s_prefetch_home(self, hashes[i + S_PREFETCH]);
        size_t slot = s_find(self, hashes[i]);
        if (slot == SIZE_MAX) break;
        uint32_t s = self->slot[slot].set;
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
    return sizeof *self + self->cap * sizeof(s_slot_t) +
           self->pool_cap * (sizeof(s_set_t) + sizeof(uint32_t)) +
           self->intern_cap * sizeof(uint32_t) + self->member_bytes;
}

int ipl_index_foreach(const ipl_index_t *self, int worker, ipl_index_block_fn *fn, void *arg)
{
    assert(self && fn);
    if (worker < 0 || worker >= self->nworkers || self->wblocks[worker] == 0) return 0;
    /* Decide membership once per set, then scan the table. */
    uint32_t nsets = self->pool_used;
    uint8_t *holds = calloc(nsets, 1);
    for (size_t i = 0; i < self->cap; i++) {
        uint32_t s = self->slot[i].set;
        if (s == S_EMPTY_SET) continue;
        bool has;
        if (holds) {
            if (!holds[s]) holds[s] = s_set_has(&self->pool[s], worker) ? 2 : 1;
            has = holds[s] == 2;
        } else {
            has = s_set_has(&self->pool[s], worker);
        }
        if (has) {
            int rc = fn(arg, self->slot[i].key);
            if (rc != 0) {
                free(holds);
                return rc;
            }
        }
    }
    free(holds);
    return 0;
}
