/*
 * decider_wire — see the header.
 */
#include "decider_wire.h"

#include <stdlib.h>

#include "ipl_error.h"

decider_request_t decider_wire_request(const ipl_route_req_t *rq)
{
    return (decider_request_t){
        .model = rq->model ? rq->model : "",
        .tenant = rq->tenant,
        .strategy = rq->strategy,
        .prompt_tokens = rq->prompt_tokens,
        .block_size = rq->block_size,
        .hashes = rq->hashes,
        .nhashes = rq->hashes_len,
        .terse = !rq->explain, // gateways never read the notes (HTTP /v1/route explains)
    };
}

int decider_wire_reply(decider_wire_t *self, uint64_t req_id, const decider_decision_t *d,
                       bool observe, bool brief, msgpack_sbuffer *out)
{
    uint32_t ncands = brief ? 0 : d->ncands;
    if (ncands > self->cap) {
        ipl_candidate_t *w = realloc(self->wire, ncands * sizeof *w);
        if (!w) return IPL_E_NOMEM;
        self->wire = w;
        self->cap = ncands;
    }
    for (uint32_t i = 0; i < ncands; i++)
        self->wire[i] = d->cands[i].c;
    const ipl_worker_t *w = d->status == IPL_ROUTE_OK ? d->worker : NULL;
    ipl_route_rep_t rep = {
        .req_id = req_id,
        .status = (uint64_t)d->status,
        .reason = (char *)(d->reason ? d->reason : ""),
        .detail = (char *)d->detail,
        .worker = w ? w->name : "",
        .url = w ? w->url : "",
        .pool = d->pool ? d->pool->name : "",
        .model = w ? w->model : "",
        .predicted_ttft_s = w ? d->predicted_ttft_s : 0,
        .cached_tokens = w ? d->cached_tokens : 0,
        .state_seq = d->state_seq,
        .candidates = self->wire,
        .candidates_len = ncands,
        .observe = observe,
    };
    return ipl_msg_encode(IPL_MSG_ROUTE_REP, &rep, out);
}

void decider_wire_clear(decider_wire_t *self)
{
    free(self->wire);
    self->wire = NULL;
    self->cap = 0;
}
