/*
 * decider_backup — the decider of last resort inside a gateway, for the time no decider
 * answers (issue 20: a decider outage must not fail requests). It decides with the decider's
 * own router (decider_router) over the gateway's policy — pools, aliases, LoRA adapters, the
 * InferencePolicy rules (compiled once per policy version), providers — and a made-up state:
 *
 *   every worker of the policy ── LOAD {up, waiting = this gateway's requests in flight there,
 *                                       running 0, kv 0, sampled now} ──► decider_state
 *   no KV events                ── no prefix index: "load only"
 *
 * and the strategy least-loaded (the shortest queue, then at random), so a request goes to the
 * least-loaded worker of its pool by what this gateway sees of it.
 * What it cannot see — a worker that is down (the gateway's failover and circuit breakers,
 * ROUTE_REQ.avoid, steer away from it), other gateways' load, the workers' caches — it does
 * not guess. A worker's in-flight count goes up with each decision for it and down with
 * decider_backup_done (the gateway's OBSERVED for the decision: its first byte, its end, or
 * its abandonment); a count that is never brought down is forgotten after
 * DECIDER_BACKUP_INFLIGHT_TTL_MS, so a lost report cannot shun a worker for good.
 *
 * Answers are ROUTE_REPs as a decider sends them (decider_wire), with reason and strategy
 * "fallback" and a detail that says so, and observe = 1 for a worker: the gateway reports its
 * end as for any decision.
 *
 * Thread-safe: any number of the gateway's handler threads (one mutex; decisions are rare —
 * only while the deciders are out — and take a few microseconds).
 */
#ifndef DECIDER_BACKUP_H
#define DECIDER_BACKUP_H

#include <stdint.h>

#include "ipl_policy_view.h"
#include "ipl_proto.h"

#define DECIDER_BACKUP_INFLIGHT_TTL_MS 600000 /* an unreported decision counts this long */

typedef struct decider_backup decider_backup_t;

/* `policy` is borrowed (the gateway's view) and must outlive the object, which holds a
 * reference to the snapshot it last decided with until destroyed. NULL on allocation failure. */
decider_backup_t *decider_backup_new(ipl_policy_view_t *policy);
void decider_backup_destroy(decider_backup_t **self_p);

/* Decides `rq` (borrowed) with the newest policy and fills *rep with the ROUTE_REP (decoded;
 * the caller ipl_msg_clear's it), its req_id rq->req_id. 0, IPL_E_NOTFOUND (no policy yet:
 * nothing to decide with), IPL_E_NOMEM. A decision that routes nowhere (no pool, a rule's
 * refusal) is a ROUTE_REP too, with its status. */
int decider_backup_route(decider_backup_t *self, const ipl_route_req_t *rq, ipl_msg_t *rep);

/* A request decided here for `worker` is over (or has its first byte): one fewer in flight. */
void decider_backup_done(decider_backup_t *self, const char *worker);

/* Requests decided here in flight at `worker` now (0 for an unknown name). */
uint64_t decider_backup_inflight(decider_backup_t *self, const char *worker);

/* Decisions made (status OK or not). */
uint64_t decider_backup_decisions(decider_backup_t *self);

#endif
