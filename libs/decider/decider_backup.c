/*
 * decider_backup — see the header. One mutex guards everything: the policy version decided
 * with (a snapshot reference, its compiled rules and a state of its workers), the in-flight
 * counts (by the policy's worker index, carried over by name to the next version) and the
 * router, its candidates and the wire buffer.
 */
#include "decider_backup.h"

#include <assert.h>
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
#include "ipl_log.h"

typedef struct {
    uint64_t count;   /* decisions here not reported done */
    uint64_t last_ms; /* monotonic: the count last changed */
} s_inflight_t;

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
};

decider_backup_t *decider_backup_new(ipl_policy_view_t *policy)
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
    if (!self->router) decider_backup_destroy(&self);
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
    q.strategy = "least-loaded"; /* the shortest queue: what this gateway has in flight */
    decider_decision_t *d = &self->decision;
    const ipl_policy_t *p = self->snap->policy;
    decider_router_route_at(self->router, p, self->state, 0, &q, d, wall, mono);
    char why[480];
    snprintf(why, sizeof why, "%.*s", (int)sizeof why - 1, d->detail);
    snprintf(d->detail, sizeof d->detail,
             "no decider answered: decided by the gateway, load only, with policy version %llu "
             "(%.40s%s%s)",
             (unsigned long long)p->version, d->reason ? d->reason : "", why[0] ? ": " : "", why);
    if (d->status == IPL_ROUTE_OK) {
        d->reason = "fallback";
        d->strategy = "fallback";
    }
    if (d->status == IPL_ROUTE_OK && d->target == DECIDER_TARGET_WORKER && d->worker) {
        int i = s_worker_index(p, d->worker->name);
        if (i >= 0) {
            self->inflight[i].count++;
            self->inflight[i].last_ms = mono;
        }
    }
    self->decisions++;
    self->frame.size = 0;
    rc = decider_wire_reply(&self->wire, rq->req_id, d, true, rq->brief != 0, &self->frame);
    memset(rep, 0, sizeof *rep);
    if (rc == 0) rc = ipl_msg_decode(self->frame.data, self->frame.size, rep);
    pthread_mutex_unlock(&self->lock);
    return rc;
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
