/*
 * decider_wire — a decision's wire forms (proto/ipl_proto.h): the request a ROUTE_REQ asks,
 * and the ROUTE_REP frame of a decision. The decider server answers gateways with them, and
 * bench_router times the same steps in-process.
 *
 * Reusable: the candidates' wire array grows to the largest decision seen and is kept.
 * Not thread-safe (one per thread).
 */
#ifndef DECIDER_WIRE_H
#define DECIDER_WIRE_H

#include <msgpack.h>
#include <stdbool.h>
#include <stdint.h>

#include "decider_router.h"

typedef struct {
    ipl_candidate_t *wire; /* the candidates' wire figures */
    uint32_t cap;
} decider_wire_t;

/* The request a decoded ROUTE_REQ asks (its strings and hashes borrowed from rq). */
decider_request_t decider_wire_request(const ipl_route_req_t *rq);

/* Appends the ROUTE_REP of decision d (answering req_id; `observe` asks the gateway for an
 * OBSERVED) to `out`, with every candidate's figures unless `brief` (ROUTE_REQ.brief). The
 * decision's strings are read, not kept. Returns 0, IPL_E_NOMEM or a codec error (then `out`
 * may hold part of a frame: the caller truncates it). */
int decider_wire_reply(decider_wire_t *self, uint64_t req_id, const decider_decision_t *d,
                       bool observe, bool brief, msgpack_sbuffer *out);

void decider_wire_clear(decider_wire_t *self);

#endif
