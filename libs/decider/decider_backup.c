/*
 * decider_backup — see the header. One mutex guards everything: the policy version decided
 * with (a snapshot reference, its compiled rules and a state of its workers), the in-flight
 * counts (by the policy's worker index, carried over by name to the next version), the table of
 * learned prefixes and the router, its candidates and the wire buffer.
 */
#include "decider_backup.h"

#include <assert.h>
#include <math.h>
#include <msgpack.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decider_router.h"
#include "decider_rules.h"
#include "decider_state.h"
#include "decider_wire.h"
#include "ipl_clock.h"
#include "ipl_error.h"
#include "ipl_hash.h"
#include "ipl_log.h"

#define S_WAYS 4 /* entries per set of the learned-prefix table */

typedef struct {
    uint64_t count;   /* decisions not reported done */
    uint64_t last_ms; /* monotonic: the count last changed */
} s_inflight_t;

/* A learned prefix (the header's diagram): key 0 is an empty entry. */
typedef struct {
    uint64_t key;    /* s_key(pool, the prefix's last chained block hash) */
    uint32_t worker; /* the low 32 bits of s_name_hash(worker name) */
    uint32_t used;   /* self->tick when last learned or used */
} s_entry_t;

struct decider_backup {
    ipl_policy_view_t *view; /* borrowed */
    pthread_mutex_t lock;
    ipl_policy_snap_t *snap; /* the version decided with (a reference held) */
    decider_rules_t *rules;  /* its rules, or NULL (none, or they do not compile) */
    decider_state_t *state;  /* its workers, all up */
    s_inflight_t *inflight;  /* by snap->policy->workers index */
    decider_router_t *router;
    decider_decision_t decision;
    decider_wire_t wire;
    msgpack_sbuffer frame;
    uint64_t decisions;
    s_entry_t *table; /* capacity entries, capacity / S_WAYS sets */
    size_t capacity;  /* a power of two, >= S_WAYS */
    size_t learned;   /* entries in use */
    uint32_t tick;    /* the table's clock (wraps: ages compare modulo 2^32) */
    uint64_t *names;  /* s_affine's: the candidates' name hashes (0: not healthy) */
    uint32_t names_cap;
};

decider_backup_t *decider_backup_new(ipl_policy_view_t *policy)
{
    return decider_backup_new_sized(policy, 0);
}

decider_backup_t *decider_backup_new_sized(ipl_policy_view_t *policy, size_t capacity)
{
    assert(policy);
    decider_backup_t *self = calloc(1, sizeof *self);
    if (!self) return NULL;
    self->view = policy;
    pthread_mutex_init(&self->lock, NULL);
    decider_router_config_t rc;
    decider_router_config_defaults(&rc);
    rc.observe_window_ms = 0; /* the fallback learns nothing from observations */
    self->router = decider_router_new(&rc);
    decider_decision_init(&self->decision);
    msgpack_sbuffer_init(&self->frame);
    size_t cap = S_WAYS;
    while (cap < (capacity ? capacity : DECIDER_BACKUP_CAPACITY) && cap < SIZE_MAX / 2)
        cap *= 2;
    self->capacity = cap;
    self->table = calloc(cap, sizeof *self->table); /* pages touched as they fill */
    if (!self->router || !self->table) decider_backup_destroy(&self);
    return self;
}

void decider_backup_destroy(decider_backup_t **self_p)
{
    assert(self_p);
    decider_backup_t *self = *self_p;
    if (!self) return;
    decider_rules_destroy(&self->rules); /* borrows the snapshot's policy: first */
    if (self->snap) ipl_policy_view_release(self->view, &self->snap);
    decider_state_destroy(&self->state);
    free(self->inflight);
    decider_router_destroy(&self->router);
    decider_decision_clear(&self->decision);
    decider_wire_clear(&self->wire);
    msgpack_sbuffer_destroy(&self->frame);
    free(self->table);
    free(self->names);
    pthread_mutex_destroy(&self->lock);
    free(self);
    *self_p = NULL;
}

/* The index of worker `name` in `policy`, or -1. */
static int s_worker_index(const ipl_policy_t *policy, const char *name)
{
    for (uint32_t i = 0; name && i < policy->workers_len; i++)
        if (!strcmp(policy->workers[i].name, name)) return (int)i;
    return -1;
}

/* Moves to the policy version of `snap` (a reference the caller got; kept, or released when
 * it is the version in use): its rules, a new state, the in-flight counts carried over by
 * name. Called with the lock held. 0 or IPL_E_NOMEM (the previous version stays). */
static int s_use(decider_backup_t *self, ipl_policy_snap_t *snap)
{
    if (self->snap && self->snap->policy->version == snap->policy->version) {
        ipl_policy_view_release(self->view, &snap);
        return 0;
    }
    const ipl_policy_t *p = snap->policy;
    decider_state_t *state = decider_state_new();
    s_inflight_t *inflight = calloc(p->workers_len ? p->workers_len : 1, sizeof *inflight);
    decider_rules_t *rules = NULL;
    char err[512] = "";
    if (state && inflight && p->rules_len && decider_rules_new(p, &rules, err, sizeof err) != 0)
        /* the router then refuses what the rules would decide (503 policy_error): never
         * routed unchecked */
        IPL_ERROR("fallback_policy_rules_invalid", "version=%llu error=\"%s\"",
                  (unsigned long long)p->version, err);
    if (!state || !inflight) {
        decider_state_destroy(&state);
        free(inflight);
        ipl_policy_view_release(self->view, &snap);
        return IPL_E_NOMEM;
    }
    for (uint32_t i = 0; self->snap && i < p->workers_len; i++) {
        int old = s_worker_index(self->snap->policy, p->workers[i].name);
        if (old >= 0) inflight[i] = self->inflight[old];
    }
    decider_rules_destroy(&self->rules);
    if (self->snap) ipl_policy_view_release(self->view, &self->snap);
    decider_state_destroy(&self->state);
    free(self->inflight);
    self->snap = snap;
    self->rules = rules;
    self->state = state;
    self->inflight = inflight;
    return 0;
}

/* ---- learned prefixes ------------------------------------------------------------------- */

static const uint32_t s_prefix_tokens[DECIDER_BACKUP_NPREFIXES] = DECIDER_BACKUP_PREFIX_TOKENS;

/* XXH3 of two 64-bit words: stable across builds and hosts (the rendezvous scores must agree
 * between gateways), unlike ipl_mix64. */
static uint64_t s_hash2(uint64_t a, uint64_t b)
{
    uint64_t w[2] = {a, b};
    return ipl_hash_bytes(w, sizeof w);
}

static uint64_t s_name_hash(const char *name)
{
    return ipl_hash_bytes(name, strlen(name));
}

/* The table key of the prefix ending with chained block hash `h` in the pool named by hash
 * `pool` (never 0: 0 marks an empty entry). */
static uint64_t s_key(uint64_t pool, uint64_t h)
{
    uint64_t k = s_hash2(pool, h);
    return k ? k : 1;
}

/* The keys of the prefix lengths `rq`'s prompt reaches, shortest first, into keys[] (their
 * lengths in tokens into tokens[]); returns how many. None without a block size. */
static int s_prefix_keys(const ipl_route_req_t *rq, uint64_t pool,
                         uint64_t keys[DECIDER_BACKUP_NPREFIXES],
                         uint32_t tokens[DECIDER_BACKUP_NPREFIXES])
{
    int n = 0;
    uint64_t bs = rq->block_size;
    for (int i = 0; bs && i < DECIDER_BACKUP_NPREFIXES; i++) {
        uint64_t blocks = s_prefix_tokens[i] / bs;
        if (!blocks || blocks > rq->hashes_len) continue;
        keys[n] = s_key(pool, rq->hashes[blocks - 1]);
        tokens[n++] = (uint32_t)(blocks * bs);
    }
    return n;
}

/* The entries of the set `key` falls in. */
static s_entry_t *s_set(decider_backup_t *self, uint64_t key)
{
    return &self->table[(key & (self->capacity / S_WAYS - 1)) * S_WAYS];
}

/* The worker learned for `key` (its name's hash, 32 bits) into *worker: true, and the entry
 * is marked used; false when none is. Lock held. */
static bool s_lookup(decider_backup_t *self, uint64_t key, uint32_t *worker)
{
    s_entry_t *set = s_set(self, key);
    for (int i = 0; i < S_WAYS; i++)
        if (set[i].key == key) {
            set[i].used = ++self->tick;
            *worker = set[i].worker;
            return true;
        }
    return false;
}

/* Remembers `worker` (its name's hash) for `key`: in its entry, else in an empty one of its
 * set, else in place of the set's least recently used. Lock held. */
static void s_remember(decider_backup_t *self, uint64_t key, uint32_t worker)
{
    s_entry_t *set = s_set(self, key), *victim = NULL;
    uint32_t now = ++self->tick;
    for (int i = 0; i < S_WAYS; i++) {
        s_entry_t *e = &set[i];
        if (e->key == key) {
            victim = e;
            break;
        }
        /* an empty entry is the oldest of all; ages compare modulo 2^32 (a wrapped tick) */
        if (!victim || (victim->key && (!e->key || now - e->used > now - victim->used)))
            victim = e;
    }
    if (!victim->key) self->learned++;
    *victim = (s_entry_t){.key = key, .worker = worker, .used = now};
}

/* Remembers `worker` for every prefix length of `rq` in pool `pool` (a name). Lock held. */
static void s_learn_prefixes(decider_backup_t *self, const ipl_route_req_t *rq, const char *pool,
                             const char *worker)
{
    uint64_t keys[DECIDER_BACKUP_NPREFIXES];
    uint32_t tokens[DECIDER_BACKUP_NPREFIXES];
    int n = s_prefix_keys(rq, s_name_hash(pool), keys, tokens);
    uint32_t w = (uint32_t)s_name_hash(worker);
    for (int i = 0; i < n; i++)
        s_remember(self, keys[i], w);
}

/* A load sample for every worker, taken now: up, its in-flight count its queue. */
static void s_sample(decider_backup_t *self, uint64_t wall_ms, uint64_t mono_ms)
{
    const ipl_policy_t *p = self->snap->policy;
    for (uint32_t i = 0; i < p->workers_len; i++) {
        s_inflight_t *f = &self->inflight[i];
        if (f->count && mono_ms - f->last_ms > DECIDER_BACKUP_INFLIGHT_TTL_MS) f->count = 0;
        ipl_msg_t m = {.type = IPL_MSG_LOAD};
        /* sampled "after" every routing so far: the router's ledger adds none of them as
         * in flight on top of the count */
        m.u.load = (ipl_load_t){.worker = p->workers[i].name,
                                .ts_ms = wall_ms + 1,
                                .waiting = f->count, /* the strategies' queue */
                                .block_size = p->workers[i].block_size,
                                .health = IPL_HEALTH_UP,
                                .kv_state = IPL_KV_EXACT};
        (void)decider_state_apply(self->state, &m, mono_ms); /* bounded by the policy's size */
    }
}

/* ---- the choice ------------------------------------------------------------------------- */

/* The load bound over the decision's candidates: a worker may take one more request while its
 * queue (here: its in-flight count) is below this (the header's formula). */
static uint64_t s_bound(const decider_decision_t *d)
{
    uint64_t n = 0, q = 0;
    for (uint32_t i = 0; i < d->ncands; i++)
        if (d->cands[i].healthy) n++, q += d->cands[i].queue;
    double cap = n ? ceil(DECIDER_BACKUP_LOAD_FACTOR * (double)(q + 1) / (double)n) : 0;
    return cap > DECIDER_BACKUP_LOAD_MIN ? (uint64_t)cap : DECIDER_BACKUP_LOAD_MIN;
}

/* The candidate whose name hashes to `worker` (32 bits), or -1. */
static int s_candidate(const decider_decision_t *d, const uint64_t *names, uint32_t worker)
{
    for (uint32_t i = 0; i < d->ncands; i++)
        if (d->cands[i].healthy && (uint32_t)names[i] == worker) return (int)i;
    return -1;
}

/* The rendezvous choice for `rq` among the candidates: the highest s_hash2(key, name), key the
 * prompt's first DECIDER_BACKUP_PREFIX_TOKENS[0] tokens (all its full blocks if shorter);
 * -1 without a full block. Its length in tokens into *tokens. */
static int s_rendezvous(const decider_decision_t *d, const uint64_t *names, uint64_t pool,
                        const ipl_route_req_t *rq, uint64_t *tokens)
{
    if (!rq->hashes_len) return -1;
    uint64_t bs = rq->block_size;
    uint64_t blocks = bs && s_prefix_tokens[0] / bs ? s_prefix_tokens[0] / bs : 1;
    if (blocks > rq->hashes_len) blocks = rq->hashes_len;
    *tokens = blocks * bs;
    uint64_t key = s_hash2(pool, rq->hashes[blocks - 1]), best = 0;
    int pick = -1;
    for (uint32_t i = 0; i < d->ncands; i++) {
        if (!d->cands[i].healthy) continue;
        uint64_t score = s_hash2(key, names[i]);
        if (pick < 0 || score > best) pick = (int)i, best = score;
    }
    return pick;
}

/* Makes candidate i the winner of `d`, as the router commits one. */
static void s_win(decider_decision_t *d, const ipl_policy_t *p, int i)
{
    const decider_candidate_t *c = &d->cands[i];
    d->winner = i;
    d->cands[i].c.eligible = true;
    d->worker = NULL;
    for (uint32_t k = p->workers_len; k-- > 0 && !d->worker;) // the last of that name
        if (p->workers[k].name == c->c.worker) d->worker = &p->workers[k];
    d->predicted_ttft_s = c->c.predicted_ttft_s;
    d->cached_tokens = c->c.cached_tokens;
    d->set = c->set;
    d->features = c->x;
}

/* Picks the worker of routed decision `d` (the router's least-loaded pick) by prefix affinity
 * under the load bound — the header's paths 1 to 3 — and says which in why[]. Lock held. */
static void s_affine(decider_backup_t *self, const ipl_route_req_t *rq, const ipl_policy_t *p,
                     decider_decision_t *d, char *why, size_t size)
{
    if (d->ncands > self->names_cap) {
        uint64_t *names = realloc(self->names, d->ncands * sizeof *names);
        if (!names) {
            snprintf(why, size, "least loaded → %s (no memory for affinity)", d->worker->name);
            return;
        }
        self->names = names;
        self->names_cap = d->ncands;
    }
    for (uint32_t i = 0; i < d->ncands; i++)
        self->names[i] = d->cands[i].healthy ? s_name_hash(d->cands[i].c.worker) : 0;
    uint64_t bound = s_bound(d), pool = s_name_hash(d->pool->name);
    char over[200] = ""; /* the longest affinity not followed, and why */
    int pick = -1;
    uint64_t keys[DECIDER_BACKUP_NPREFIXES];
    uint32_t tokens[DECIDER_BACKUP_NPREFIXES];
    for (int k = s_prefix_keys(rq, pool, keys, tokens); k-- > 0 && pick < 0;) {
        uint32_t w;
        if (!s_lookup(self, keys[k], &w)) continue;
        int i = s_candidate(d, self->names, w);
        const decider_candidate_t *c = i >= 0 ? &d->cands[i] : NULL;
        if (c && c->queue < bound) {
            pick = i;
            snprintf(why, size, "learned prefix %u tokens → %s (%llu in flight here, bound %llu)",
                     tokens[k], c->c.worker, (unsigned long long)c->queue,
                     (unsigned long long)bound);
        } else if (!over[0] && c) {
            snprintf(over, sizeof over,
                     "learned prefix %u tokens → %s over the load bound (%llu in flight here, "
                     "bound %llu)",
                     tokens[k], c->c.worker, (unsigned long long)c->queue,
                     (unsigned long long)bound);
        } else if (!over[0]) {
            snprintf(over, sizeof over, "learned prefix %u tokens: its worker is no candidate",
                     tokens[k]);
        }
    }
    uint64_t first = 0;
    int r = pick < 0 ? s_rendezvous(d, self->names, pool, rq, &first) : -1;
    if (r >= 0 && d->cands[r].queue < bound) {
        pick = r;
        snprintf(why, size, "rendezvous hash of the first %llu tokens → %s (%llu in flight here, "
                            "bound %llu)",
                 (unsigned long long)first, d->cands[r].c.worker,
                 (unsigned long long)d->cands[r].queue, (unsigned long long)bound);
    } else if (r >= 0 && !over[0]) {
        snprintf(over, sizeof over,
                 "rendezvous hash of the first %llu tokens → %s over the load bound (%llu in "
                 "flight here, bound %llu)",
                 (unsigned long long)first, d->cands[r].c.worker,
                 (unsigned long long)d->cands[r].queue, (unsigned long long)bound);
    }
    if (pick < 0) {
        snprintf(why, size, "least loaded → %s (%llu in flight here; %s)", d->worker->name,
                 (unsigned long long)d->cands[d->winner].queue,
                 over[0] ? over : "no full block to hash");
        return;
    }
    size_t len = strlen(why);
    if (over[0] && len + 3 < size) snprintf(why + len, size - len, "; %s", over);
    s_win(d, p, pick);
}

int decider_backup_route(decider_backup_t *self, const ipl_route_req_t *rq, ipl_msg_t *rep)
{
    assert(self && rq && rep);
    ipl_policy_snap_t *snap = ipl_policy_view_get(self->view);
    if (!snap) return IPL_E_NOTFOUND;
    pthread_mutex_lock(&self->lock);
    int rc = s_use(self, snap);
    if (rc != 0) {
        pthread_mutex_unlock(&self->lock);
        return rc;
    }
    uint64_t wall = ipl_wall_ms(), mono = ipl_mono_ms();
    s_sample(self, wall, mono);
    decider_request_t q = decider_wire_request(rq);
    q.terse = true;
    q.rules = self->rules;
    q.strategy = "least-loaded"; /* the candidates, and the shortest queue among them */
    decider_decision_t *d = &self->decision;
    const ipl_policy_t *p = self->snap->policy;
    decider_router_route_at(self->router, p, self->state, 0, &q, d, wall, mono);
    bool worker = d->status == IPL_ROUTE_OK && d->target == DECIDER_TARGET_WORKER && d->worker &&
                  d->pool && d->winner >= 0;
    char why[480];
    if (worker)
        s_affine(self, rq, p, d, why, sizeof why);
    else
        snprintf(why, sizeof why, "%.40s%s%.400s", d->reason ? d->reason : "",
                 d->detail[0] ? ": " : "", d->detail);
    snprintf(d->detail, sizeof d->detail,
             "no decider answered: decided by the gateway with policy version %llu, %s%s",
             (unsigned long long)p->version, d->status == IPL_ROUTE_OK ? "fallback: " : "", why);
    if (d->status == IPL_ROUTE_OK) {
        d->reason = "fallback";
        d->strategy = "fallback";
    }
    if (worker) {
        int i = s_worker_index(p, d->worker->name);
        if (i >= 0) {
            self->inflight[i].count++;
            self->inflight[i].last_ms = mono;
        }
        s_learn_prefixes(self, rq, d->pool->name, d->worker->name); /* it holds them next */
    }
    self->decisions++;
    self->frame.size = 0;
    rc = decider_wire_reply(&self->wire, rq->req_id, d, true, rq->brief != 0, &self->frame);
    memset(rep, 0, sizeof *rep);
    if (rc == 0) rc = ipl_msg_decode(self->frame.data, self->frame.size, rep);
    pthread_mutex_unlock(&self->lock);
    return rc;
}

void decider_backup_learn(decider_backup_t *self, const ipl_route_req_t *rq,
                          const ipl_route_rep_t *rep)
{
    assert(self && rq && rep);
    if (rep->status != IPL_ROUTE_OK || !rep->worker || !rep->worker[0] || !rep->pool ||
        !rep->pool[0] || (rep->target_kind && strcmp(rep->target_kind, "worker") != 0))
        return;
    ipl_policy_snap_t *snap = rep->observe ? ipl_policy_view_get(self->view) : NULL;
    pthread_mutex_lock(&self->lock);
    if (snap && s_use(self, snap) == 0) { /* the in-flight counts are by this version's workers */
        int i = s_worker_index(self->snap->policy, rep->worker);
        if (i >= 0) {
            self->inflight[i].count++;
            self->inflight[i].last_ms = ipl_mono_ms();
        }
    }
    s_learn_prefixes(self, rq, rep->pool, rep->worker);
    pthread_mutex_unlock(&self->lock);
}

void decider_backup_done(decider_backup_t *self, const char *worker)
{
    pthread_mutex_lock(&self->lock);
    int i = self->snap ? s_worker_index(self->snap->policy, worker) : -1;
    if (i >= 0 && self->inflight[i].count) {
        self->inflight[i].count--;
        self->inflight[i].last_ms = ipl_mono_ms();
    }
    pthread_mutex_unlock(&self->lock);
}

uint64_t decider_backup_inflight(decider_backup_t *self, const char *worker)
{
    pthread_mutex_lock(&self->lock);
    int i = self->snap ? s_worker_index(self->snap->policy, worker) : -1;
    uint64_t n = i >= 0 ? self->inflight[i].count : 0;
    pthread_mutex_unlock(&self->lock);
    return n;
}

uint64_t decider_backup_decisions(decider_backup_t *self)
{
    pthread_mutex_lock(&self->lock);
    uint64_t n = self->decisions;
    pthread_mutex_unlock(&self->lock);
    return n;
}

size_t decider_backup_learned(decider_backup_t *self)
{
    pthread_mutex_lock(&self->lock);
    size_t n = self->learned;
    pthread_mutex_unlock(&self->lock);
    return n;
}

size_t decider_backup_capacity(decider_backup_t *self)
{
    return self->capacity; /* fixed at creation */
}
