/*
 * fairq — see fairq.h for the algorithm and its sources.
 *
 * Layout: tenants in a fixed-size chained hash (FNV-1a of the name), each holding its three
 * flows; per class a list of the backlogged flows in the order they became backlogged (ties
 * of the smallest counter go to the earlier one). Tenant structs are allocated on first use,
 * at most max_flows of them, and recycled (never freed before fairq_destroy): an entry popped
 * while its idle tenant is forgotten still points at valid memory, and its generation tells
 * fairq_unpop to find the tenant again by name.
 */
#include "fairq.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "ipl_error.h"

#define S_DEFAULT_ENTRIES 10000
#define S_DEFAULT_FLOWS   4096
#define S_CREDIT_DUE      100u

enum { S_FREE = 0, S_QUEUED = 1, S_POPPED = 2 };

typedef struct s_flow s_flow_t;
struct s_flow {
    struct fairq_tenant *tenant;
    fairq_class_t cls;
    fairq_entry_t *head, *tail;
    uint64_t counter; /* service received, tokens × FAIRQ_WEIGHT_SCALE / weight */
    bool used;        /* ever pushed to (fairq_foreach shows it) */
    bool backlogged;
    s_flow_t *bprev, *bnext;
    fairq_stats_t st; /* depth, tokens and the counts; counter filled when read */
};

struct fairq_tenant {
    char name[FAIRQ_TENANT_MAX + 1];
    uint64_t hash, gen;
    uint32_t weight;
    size_t depth;
    uint64_t tokens;
    s_flow_t flow[FAIRQ_CLASSES];
    struct fairq_tenant *hnext; /* hash chain, or the free list */
};
typedef struct fairq_tenant s_tenant_t;

typedef struct {
    s_flow_t *head, *tail; /* backlogged flows */
    size_t len;            /* entries queued in the class */
    uint64_t vtime;        /* smallest backlogged counter at the last dispatch */
    unsigned credit;       /* reserve credit, S_CREDIT_DUE makes the class due */
} s_class_t;

struct fairq {
    fairq_config_t cfg;
    s_class_t cls[FAIRQ_CLASSES];
    s_tenant_t **buckets;
    size_t nbuckets; /* a power of two */
    size_t ntenants; /* in the hash */
    size_t allocated;
    s_tenant_t *free_list;
    size_t len;
    uint64_t tokens, pop_seq;
};

/* ---- names --------------------------------------------------------------------------------- */

const char *fairq_reason_name(fairq_reason_t reason)
{
    switch (reason) {
    case FAIRQ_OK:
        return "ok";
    case FAIRQ_FULL_ENTRIES:
        return "full_entries";
    case FAIRQ_FULL_TOKENS:
        return "full_tokens";
    case FAIRQ_TENANT_FULL_ENTRIES:
        return "tenant_full_entries";
    case FAIRQ_TENANT_FULL_TOKENS:
        return "tenant_full_tokens";
    case FAIRQ_FULL_FLOWS:
        return "full_tenants";
    case FAIRQ_EXPIRED:
        return "expired";
    }
    return "?";
}

static const char *const s_class_names[FAIRQ_CLASSES] = {"interactive", "standard", "batch"};

const char *fairq_class_name(fairq_class_t cls)
{
    return (unsigned)cls < FAIRQ_CLASSES ? s_class_names[cls] : "?";
}

int fairq_class_parse(const char *name)
{
    for (int c = 0; name && c < FAIRQ_CLASSES; c++)
        if (!strcmp(name, s_class_names[c])) return c;
    return -1;
}

/* ---- life cycle ---------------------------------------------------------------------------- */

fairq_t *fairq_new(const fairq_config_t *config)
{
    fairq_config_t cfg = config ? *config : (fairq_config_t){0};
    if (!cfg.max_entries) cfg.max_entries = S_DEFAULT_ENTRIES;
    if (!cfg.tenant_max_entries || cfg.tenant_max_entries > cfg.max_entries)
        cfg.tenant_max_entries = cfg.max_entries;
    if (!cfg.tenant_max_tokens || (cfg.max_tokens && cfg.tenant_max_tokens > cfg.max_tokens))
        cfg.tenant_max_tokens = cfg.max_tokens;
    if (!cfg.max_flows) cfg.max_flows = S_DEFAULT_FLOWS;
    if (!cfg.reserve_set) {
        const unsigned def[FAIRQ_CLASSES] = {0, 10, 5};
        memcpy(cfg.reserve_percent, def, sizeof def);
        cfg.reserve_set = true;
    }
    unsigned sum = 0;
    for (int c = 0; c < FAIRQ_CLASSES; c++)
        sum += cfg.reserve_percent[c] <= 100 ? cfg.reserve_percent[c] : 101;
    if (sum > 100) return NULL;
    fairq_t *self = calloc(1, sizeof *self);
    if (!self) return NULL;
    self->cfg = cfg;
    self->nbuckets = 16;
    while (self->nbuckets < cfg.max_flows && self->nbuckets < ((size_t)1 << 20))
        self->nbuckets <<= 1;
    self->buckets = calloc(self->nbuckets, sizeof *self->buckets);
    if (!self->buckets) {
        free(self);
        return NULL;
    }
    return self;
}

void fairq_destroy(fairq_t **self_p)
{
    assert(self_p);
    fairq_t *self = *self_p;
    if (!self) return;
    for (size_t b = 0; b < self->nbuckets; b++)
        for (s_tenant_t *t = self->buckets[b], *next; t; t = next) {
            next = t->hnext;
            free(t);
        }
    for (s_tenant_t *t = self->free_list, *next; t; t = next) {
        next = t->hnext;
        free(t);
    }
    free(self->buckets);
    free(self);
    *self_p = NULL;
}

/* ---- tenants ------------------------------------------------------------------------------- */

static uint64_t s_hash(const char *name, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)name[i]) * 0x100000001b3ULL;
    return h;
}

/* The name as kept: at most FAIRQ_TENANT_MAX bytes. */
static size_t s_name_len(const char *name)
{
    size_t n = 0;
    while (name[n] && n < FAIRQ_TENANT_MAX)
        n++;
    return n;
}

static s_tenant_t *s_find(const fairq_t *self, const char *name)
{
    size_t len = s_name_len(name);
    uint64_t h = s_hash(name, len);
    for (s_tenant_t *t = self->buckets[h & (self->nbuckets - 1)]; t; t = t->hnext)
        if (t->hash == h && !strncmp(t->name, name, len) && t->name[len] == '\0') return t;
    return NULL;
}

static void s_unhash(fairq_t *self, s_tenant_t *t)
{
    s_tenant_t **pp = &self->buckets[t->hash & (self->nbuckets - 1)];
    while (*pp != t)
        pp = &(*pp)->hnext;
    *pp = t->hnext;
    self->ntenants--;
}

/* Forgets one idle tenant (nothing queued) to make room; false when every tenant has work. */
static bool s_evict_idle(fairq_t *self)
{
    for (size_t b = 0; b < self->nbuckets; b++)
        for (s_tenant_t *t = self->buckets[b]; t; t = t->hnext)
            if (t->depth == 0) {
                s_unhash(self, t);
                t->gen++; /* popped entries that point here find their tenant again by name */
                t->hnext = self->free_list;
                self->free_list = t;
                return true;
            }
    return false;
}

/* The tenant `name`, made when new (counters 0: lifted at its first push). NULL with *why
 * FAIRQ_FULL_FLOWS when every known tenant has work queued, or out of memory (*why OK). */
static s_tenant_t *s_tenant(fairq_t *self, const char *name, fairq_reason_t *why)
{
    *why = FAIRQ_OK;
    s_tenant_t *t = s_find(self, name);
    if (t) return t;
    if (self->ntenants >= self->cfg.max_flows && !s_evict_idle(self)) {
        *why = FAIRQ_FULL_FLOWS;
        return NULL;
    }
    uint64_t gen = 0;
    if (self->free_list) {
        t = self->free_list;
        self->free_list = t->hnext;
        gen = t->gen;
    } else {
        t = malloc(sizeof *t);
        if (!t) return NULL;
        self->allocated++;
    }
    memset(t, 0, sizeof *t);
    t->gen = gen;
    size_t len = s_name_len(name);
    memcpy(t->name, name, len);
    t->name[len] = '\0';
    t->hash = s_hash(name, len);
    t->weight = 1;
    for (int c = 0; c < FAIRQ_CLASSES; c++) {
        t->flow[c].tenant = t;
        t->flow[c].cls = (fairq_class_t)c;
    }
    s_tenant_t **bucket = &self->buckets[t->hash & (self->nbuckets - 1)];
    t->hnext = *bucket;
    *bucket = t;
    self->ntenants++;
    return t;
}

/* ---- flows --------------------------------------------------------------------------------- */

static void s_backlog_add(fairq_t *self, s_flow_t *f, bool at_head)
{
    s_class_t *k = &self->cls[f->cls];
    if (f->counter < k->vtime) f->counter = k->vtime; /* VTC's counter lift */
    f->backlogged = true;
    if (at_head) {
        f->bprev = NULL;
        f->bnext = k->head;
        if (k->head)
            k->head->bprev = f;
        else
            k->tail = f;
        k->head = f;
    } else {
        f->bnext = NULL;
        f->bprev = k->tail;
        if (k->tail)
            k->tail->bnext = f;
        else
            k->head = f;
        k->tail = f;
    }
}

static void s_backlog_remove(fairq_t *self, s_flow_t *f)
{
    s_class_t *k = &self->cls[f->cls];
    if (f->bprev)
        f->bprev->bnext = f->bnext;
    else
        k->head = f->bnext;
    if (f->bnext)
        f->bnext->bprev = f->bprev;
    else
        k->tail = f->bprev;
    f->bprev = f->bnext = NULL;
    f->backlogged = false;
}

/* Links `e` into flow `f` (head or tail) and counts it everywhere. */
static void s_link(fairq_t *self, s_flow_t *f, fairq_entry_t *e, bool at_head)
{
    if (!f->backlogged) s_backlog_add(self, f, at_head);
    if (at_head) {
        e->prev = NULL;
        e->next = f->head;
        if (f->head)
            f->head->prev = e;
        else
            f->tail = e;
        f->head = e;
    } else {
        e->next = NULL;
        e->prev = f->tail;
        if (f->tail)
            f->tail->next = e;
        else
            f->head = e;
        f->tail = e;
    }
    memcpy(e->tenant_name, f->tenant->name, sizeof e->tenant_name);
    e->tenant = f->tenant;
    e->tenant_gen = f->tenant->gen;
    e->state = S_QUEUED;
    f->used = true;
    f->st.depth++;
    f->st.tokens += e->cost;
    f->tenant->depth++;
    f->tenant->tokens += e->cost;
    self->cls[f->cls].len++;
    self->len++;
    self->tokens += e->cost;
}

/* Unlinks queued `e` from its flow and uncounts it. */
static void s_unlink(fairq_t *self, fairq_entry_t *e)
{
    s_flow_t *f = &e->tenant->flow[e->cls];
    if (e->prev)
        e->prev->next = e->next;
    else
        f->head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        f->tail = e->prev;
    e->prev = e->next = NULL;
    f->st.depth--;
    f->st.tokens -= e->cost;
    e->tenant->depth--;
    e->tenant->tokens -= e->cost;
    self->cls[e->cls].len--;
    self->len--;
    self->tokens -= e->cost;
    if (!f->head) s_backlog_remove(self, f);
}

/* ---- the operations ------------------------------------------------------------------------ */

int fairq_push(fairq_t *self, const char *tenant, uint32_t weight, fairq_class_t cls,
               fairq_entry_t *e, uint64_t now_ns, fairq_reason_t *why)
{
    fairq_reason_t dummy;
    if (!why) why = &dummy;
    *why = FAIRQ_OK;
    if (!self || !e || (unsigned)cls >= FAIRQ_CLASSES || e->state == S_QUEUED) return IPL_E_INVAL;
    if (!tenant) tenant = "";
    if (e->cost == 0) e->cost = 1;
    const fairq_config_t *c = &self->cfg;
    s_tenant_t *t = s_find(self, tenant);
    if (self->len >= c->max_entries)
        *why = FAIRQ_FULL_ENTRIES;
    else if (c->max_tokens && self->tokens + e->cost > c->max_tokens)
        *why = FAIRQ_FULL_TOKENS;
    else if (t && t->depth >= c->tenant_max_entries)
        *why = FAIRQ_TENANT_FULL_ENTRIES;
    else if (c->tenant_max_tokens && (t ? t->tokens : 0) + e->cost > c->tenant_max_tokens)
        *why = FAIRQ_TENANT_FULL_TOKENS;
    if (*why == FAIRQ_OK && !t) {
        t = s_tenant(self, tenant, why);
        if (!t && *why == FAIRQ_OK) return IPL_E_NOMEM;
    }
    if (*why != FAIRQ_OK) {
        if (t) t->flow[cls].st.refused++;
        return IPL_E_RANGE;
    }
    t->weight = weight < 1 ? 1 : weight > FAIRQ_WEIGHT_MAX ? FAIRQ_WEIGHT_MAX : weight;
    e->cls = cls;
    e->enqueued_ns = now_ns;
    e->charged = 0;
    s_link(self, &t->flow[cls], e, false);
    return 0;
}

/* The class to serve next (reserves first, then by priority); updates the credits. */
static int s_pick_class(fairq_t *self)
{
    int chosen = -1;
    for (int c = 0; c < FAIRQ_CLASSES; c++) {
        s_class_t *k = &self->cls[c];
        if (!k->len) {
            k->credit = 0; /* no banking while idle */
            continue;
        }
        k->credit += self->cfg.reserve_percent[c];
    }
    for (int c = 0; c < FAIRQ_CLASSES && chosen < 0; c++)
        if (self->cls[c].len && self->cls[c].credit >= S_CREDIT_DUE) chosen = c;
    for (int c = 0; c < FAIRQ_CLASSES && chosen < 0; c++)
        if (self->cls[c].len) chosen = c;
    s_class_t *k = &self->cls[chosen];
    k->credit = k->credit >= S_CREDIT_DUE ? k->credit - S_CREDIT_DUE : 0;
    return chosen;
}

fairq_entry_t *fairq_pop(fairq_t *self, uint64_t now_ns)
{
    if (!self || !self->len) return NULL;
    unsigned before[FAIRQ_CLASSES];
    for (int c = 0; c < FAIRQ_CLASSES; c++)
        before[c] = self->cls[c].credit;
    s_class_t *k = &self->cls[s_pick_class(self)];
    s_flow_t *best = k->head;
    for (s_flow_t *f = best ? best->bnext : NULL; f; f = f->bnext)
        if (f->counter < best->counter) best = f;
    if (best->counter > k->vtime) k->vtime = best->counter;
    fairq_entry_t *e = best->head;
    s_unlink(self, e);
    uint32_t w = best->tenant->weight;
    e->charged = e->cost * FAIRQ_WEIGHT_SCALE / w;
    best->counter += e->charged;
    e->state = S_POPPED;
    e->pop_seq = ++self->pop_seq;
    e->popped_ns = now_ns;
    memcpy(e->credit_before, before, sizeof before);
    uint64_t wait = now_ns > e->enqueued_ns ? now_ns - e->enqueued_ns : 0;
    best->st.dispatched++;
    best->st.dispatched_tokens += e->cost;
    best->st.wait_total_ns += wait;
    if (wait > best->st.wait_max_ns) best->st.wait_max_ns = wait;
    return e;
}

int fairq_unpop(fairq_t *self, fairq_entry_t *e)
{
    if (!self || !e || e->state != S_POPPED) return IPL_E_INVAL;
    /* the tenant may have been forgotten (and its struct reused) meanwhile: find it by name */
    s_tenant_t *t = e->tenant;
    bool same = self->pop_seq == e->pop_seq;
    bool forgotten = t->gen != e->tenant_gen;
    if (forgotten) {
        fairq_reason_t why;
        t = s_tenant(self, e->tenant_name, &why);
        if (!t) return why == FAIRQ_OK ? IPL_E_NOMEM : IPL_E_RANGE;
    }
    s_flow_t *f = &t->flow[e->cls];
    if (!forgotten) {
        f->counter -= e->charged < f->counter ? e->charged : f->counter;
        f->st.dispatched--;
        f->st.dispatched_tokens -= e->cost;
        uint64_t wait = e->popped_ns > e->enqueued_ns ? e->popped_ns - e->enqueued_ns : 0;
        f->st.wait_total_ns -= wait <= f->st.wait_total_ns ? wait : f->st.wait_total_ns;
    }
    e->charged = 0;
    s_link(self, f, e, true);
    if (same)
        for (int c = 0; c < FAIRQ_CLASSES; c++)
            self->cls[c].credit = e->credit_before[c];
    return 0;
}

void fairq_settle(fairq_t *self, const char *tenant, fairq_class_t cls, uint64_t charged,
                  uint64_t actual)
{
    s_tenant_t *t = self && (unsigned)cls < FAIRQ_CLASSES ? s_find(self, tenant ? tenant : "")
                                                         : NULL;
    if (!t || charged == actual) return;
    s_flow_t *f = &t->flow[cls];
    uint64_t was = charged * FAIRQ_WEIGHT_SCALE / t->weight;
    uint64_t is = actual * FAIRQ_WEIGHT_SCALE / t->weight;
    if (is >= was) f->counter += is - was;
    else f->counter -= was - is < f->counter ? was - is : f->counter;
}

bool fairq_remove(fairq_t *self, fairq_entry_t *e)
{
    if (!self || !e || e->state != S_QUEUED) return false;
    /* a queued entry's tenant is never forgotten (it has depth): the entry is this queue's
     * when the hash holds that very struct under its name */
    if (s_find(self, e->tenant_name) != e->tenant) return false;
    s_unlink(self, e);
    e->state = S_FREE;
    return true;
}

size_t fairq_expire(fairq_t *self, uint64_t now_ns, fairq_entry_t **out, size_t max)
{
    size_t n = 0;
    for (int c = 0; self && c < FAIRQ_CLASSES && n < max; c++) {
        s_flow_t *next_f;
        for (s_flow_t *f = self->cls[c].head; f && n < max; f = next_f) {
            next_f = f->bnext; /* f leaves the list when its last entry goes */
            fairq_entry_t *next_e;
            for (fairq_entry_t *e = f->head; e && n < max; e = next_e) {
                next_e = e->next;
                if (!e->deadline_ns || e->deadline_ns > now_ns) continue;
                f->st.expired++;
                s_unlink(self, e);
                e->state = S_FREE;
                out[n++] = e;
            }
        }
    }
    return n;
}

/* ---- figures ------------------------------------------------------------------------------- */

size_t fairq_len(const fairq_t *self)
{
    return self ? self->len : 0;
}

uint64_t fairq_tokens(const fairq_t *self)
{
    return self ? self->tokens : 0;
}

size_t fairq_class_len(const fairq_t *self, fairq_class_t cls)
{
    return self && (unsigned)cls < FAIRQ_CLASSES ? self->cls[cls].len : 0;
}

static void s_add_stats(fairq_stats_t *sum, const s_flow_t *f)
{
    sum->depth += f->st.depth;
    sum->tokens += f->st.tokens;
    sum->dispatched += f->st.dispatched;
    sum->dispatched_tokens += f->st.dispatched_tokens;
    sum->expired += f->st.expired;
    sum->refused += f->st.refused;
    sum->wait_total_ns += f->st.wait_total_ns;
    if (f->st.wait_max_ns > sum->wait_max_ns) sum->wait_max_ns = f->st.wait_max_ns;
    if (f->counter > sum->counter) sum->counter = f->counter;
}

bool fairq_stats(const fairq_t *self, const char *tenant, int cls, fairq_stats_t *out)
{
    memset(out, 0, sizeof *out);
    const s_tenant_t *t = self ? s_find(self, tenant ? tenant : "") : NULL;
    if (!t || cls >= FAIRQ_CLASSES) return false;
    for (int c = 0; c < FAIRQ_CLASSES; c++)
        if (cls < 0 || cls == c) s_add_stats(out, &t->flow[c]);
    return true;
}

void fairq_foreach(const fairq_t *self, fairq_flow_fn *fn, void *arg)
{
    for (size_t b = 0; self && b < self->nbuckets; b++)
        for (const s_tenant_t *t = self->buckets[b]; t; t = t->hnext)
            for (int c = 0; c < FAIRQ_CLASSES; c++) {
                if (!t->flow[c].used) continue;
                fairq_stats_t st = {0};
                s_add_stats(&st, &t->flow[c]);
                fn(arg, t->name, (fairq_class_t)c, &st);
            }
}
