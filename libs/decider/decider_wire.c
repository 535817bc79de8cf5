/*
 * decider_wire — see the header.
 */
#include "decider_wire.h"

#include <stdio.h>
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
        .labels = rq->labels,
        .nlabels = rq->labels_len,
        .headers = rq->headers,
        .nheaders = rq->headers_len,
        .avoid = rq->avoid,
        .navoid = rq->avoid_len,
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
    bool ok = d->status == IPL_ROUTE_OK;
    const ipl_worker_t *w = ok && d->target != DECIDER_TARGET_PROVIDER ? d->worker : NULL;
    bool provider = ok && d->target == DECIDER_TARGET_PROVIDER && d->provider && d->backend;
    char rule[512] = ""; // "policy/rule": two Kubernetes names (253 bytes at most each)
    if (d->rule) snprintf(rule, sizeof rule, "%s/%s", d->rule->policy, d->rule->name);
    ipl_route_rep_t rep = {
        .req_id = req_id,
        .status = (uint64_t)d->status,
        .reason = (char *)(d->reason ? d->reason : ""),
        .detail = (char *)d->detail,
        .worker = w ? w->name : provider ? d->provider->name : "",
        .url = w ? w->url : provider ? d->backend->url : "",
        .pool = d->pool ? d->pool->name : "",
        .model = w ? (char *)(d->upstream_model ? d->upstream_model : w->model) // a LoRA adapter
                   : provider ? (char *)d->upstream_model : "",
        .predicted_ttft_s = w || provider ? d->predicted_ttft_s : 0,
        .cached_tokens = w ? d->cached_tokens : 0,
        .state_seq = d->state_seq,
        .candidates = self->wire,
        .candidates_len = ncands,
        .observe = observe && w,
        .target_kind = w ? "worker" : provider ? "provider" : "",
        .backend = provider ? d->backend->name : "",
        .rule = rule,
        .http_status = d->status == IPL_ROUTE_REJECTED ? d->http_status : 0,
        .retry_after_ms = d->status == IPL_ROUTE_DEFERRED ? d->retry_after_ms : 0,
        .strategy = (char *)(d->strategy ? d->strategy : ""),
    };
    return ipl_msg_encode(IPL_MSG_ROUTE_REP, &rep, out);
}

void decider_wire_clear(decider_wire_t *self)
{
    free(self->wire);
    self->wire = NULL;
    self->cap = 0;
}
