/*
 * decider_state — the index plus a table of per-worker load, indexed by the index's worker id.
 */
#include "decider_state.h"

#include <stdatomic.h>
#include <stdlib.h>

#include "decider_names.h"
#include "ipl_error.h"

struct decider_state {
    ipl_index_t *index;
    decider_worker_t workers[IPL_INDEX_MAX_WORKERS]; // by index worker id
    uint64_t seq;
    uint64_t space; // this state's id space for decider_names, unique in the process
};

// decider_state_find's memo, one per thread (HTTP decisions read the state beside the loop
// thread); it serves any state: `space` tells them apart.
static _Thread_local decider_names_t s_names;
static atomic_uint_fast64_t s_spaces = 1;

decider_state_t *decider_state_new(void)
{
    decider_state_t *self = calloc(1, sizeof *self);
    if (!self) return NULL;
    self->index = ipl_index_new();
    self->space = atomic_fetch_add(&s_spaces, 1);
    if (!self->index) {
        free(self);
        return NULL;
    }
    return self;
}

void decider_state_destroy(decider_state_t **self_p)
{
    if (!self_p || !*self_p) return;
    ipl_index_destroy(&(*self_p)->index);
    free(*self_p);
    *self_p = NULL;
}

static int s_kv_event(decider_state_t *self, const ipl_kv_event_t *ev, uint64_t now_ms)
{
    if (!ev->worker || !*ev->worker) return IPL_E_INVAL;
    if (ev->op != IPL_KV_OP_STORED && ev->op != IPL_KV_OP_REMOVED && ev->op != IPL_KV_OP_CLEARED)
        return IPL_E_INVAL;
    int id = ipl_index_worker(self->index, ev->worker);
    if (id < 0) return IPL_E_RANGE;
    int rc = IPL_OK;
    if (ev->op == IPL_KV_OP_STORED)
        rc = ipl_index_add_chain(self->index, id, ev->parent, ev->hashes, ev->hashes_len);
    else if (ev->op == IPL_KV_OP_REMOVED)
        rc = ipl_index_remove(self->index, id, ev->hashes, ev->hashes_len);
    else
        ipl_index_clear_worker(self->index, id);
    self->workers[id].kv_events++;
    self->workers[id].updated_ms = now_ms;
    return rc;
}

static int s_load(decider_state_t *self, const ipl_load_t *load, uint64_t now_ms)
{
    if (!load->worker || !*load->worker) return IPL_E_INVAL;
    int id = ipl_index_worker(self->index, load->worker);
    if (id < 0) return IPL_E_RANGE;
    decider_worker_t *w = &self->workers[id];
    w->has_load = true;
    w->ts_ms = load->ts_ms;
    w->running = load->running;
    w->waiting = load->waiting;
    w->kv_usage = load->kv_usage;
    w->block_size = load->block_size;
    w->num_blocks = load->num_blocks;
    w->health = load->health;
    w->kv_state = load->kv_state;
    w->updated_ms = now_ms;
    return IPL_OK;
}

int decider_state_apply(decider_state_t *self, const ipl_msg_t *msg, uint64_t now_ms)
{
    switch (msg->type) {
    case IPL_MSG_KV_EVENT:
        return s_kv_event(self, &msg->u.kv_event, now_ms);
    case IPL_MSG_LOAD:
        return s_load(self, &msg->u.load, now_ms);
    default:
        return IPL_E_UNKNOWN;
    }
}

uint64_t decider_state_seq(const decider_state_t *self)
{
    return self->seq;
}

void decider_state_set_seq(decider_state_t *self, uint64_t seq)
{
    self->seq = seq;
}

const ipl_index_t *decider_state_index(const decider_state_t *self)
{
    return self->index;
}

uint64_t decider_state_space(const decider_state_t *self)
{
    return self->space;
}

int decider_state_find(const decider_state_t *self, const char *name)
{
    int id = decider_names_get(&s_names, self->space, name);
    if (id >= 0) return id;
    id = ipl_index_find_worker(self->index, name);
    decider_names_put(&s_names, self->space, name, id);
    return id;
}

const decider_worker_t *decider_state_worker(const decider_state_t *self, int id)
{
    if (id < 0 || id >= ipl_index_nworkers(self->index)) return NULL;
    return &self->workers[id];
}

const decider_worker_t *decider_state_workers(const decider_state_t *self, int *n)
{
    *n = ipl_index_nworkers(self->index);
    return self->workers;
}
