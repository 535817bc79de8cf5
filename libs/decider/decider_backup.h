/*
 * decider_backup — the decider of last resort inside a gateway, for the time no decider
 * answers (issue 20: a decider outage must not fail requests). It decides with the decider's
 * own router (decider_router) over the gateway's policy — pools, aliases, LoRA adapters, the
 * InferencePolicy rules (compiled once per policy version), providers — and a made-up state:
 *
 *   every worker of the policy ── LOAD {up, waiting = this gateway's requests in flight there,
 *                                       running 0, kv 0, sampled now} ──► decider_state
 *   no KV events                ── no prefix index
 *
 * The router (strategy least-loaded) finds the candidates — the pool's workers that serve the
 * request, not avoided — and the least-loaded one; the backup then picks among the candidates
 * by prefix affinity, bounded by load (docs/operations.md, "Decider outages"):
 *
 *   1. learned   the longest prefix of the prompt (DECIDER_BACKUP_PREFIX_TOKENS: 16384, 4096,
 *                1024, 256 tokens, those the prompt reaches) whose worker is remembered from a
 *                real decision (decider_backup_learn: the gateway hands over every ROUTE_REP a
 *                decider sent it) and is a candidate under the load bound;
 *   2. hashed    else the rendezvous (highest random weight) hash of the prompt's first 256
 *                tokens (all its full blocks if shorter) over the candidates, if under the bound:
 *                every gateway agrees on it without sharing anything, and a worker leaving the
 *                pool moves only the prompts it had;
 *   3. least     else the router's pick, the least loaded (no full block, or every choice above
 *                over the bound).
 *
 * The load bound is consistent hashing with bounded loads (Mirrokni, Thorup, Zadimoghaddam,
 * "Consistent Hashing with Bounded Loads", SODA 2018): with n candidates and Q requests in
 * flight here among them, a worker may take the request when it has fewer than
 *     cap = max(DECIDER_BACKUP_LOAD_MIN, ceil(DECIDER_BACKUP_LOAD_FACTOR × (Q + 1) / n))
 * so no worker gets more than 1.25 times its share however skewed the prefixes are.
 *
 * The learned prefixes (decider_backup_learn, and the backup's own decisions) are a fixed
 * table of capacity entries, 4-way set associative, least recently used out of its set:
 *
 *   set = key mod (capacity / 4)        key = XXH3(pool name's hash, chained hash of the
 *   ┌────────────┬────────────┬───┐                   prefix's last block) — the chained hash
 *   │ key│wkr│use│ key│wkr│use│ … │ × 4               names the whole prefix, its length, LoRA
 *   └────────────┴────────────┴───┘                   adapter and cache salt (ipl_hash.h)
 *   wkr = 32 bits of XXH3(worker name)  use = a clock tick: the oldest of the set goes first
 *
 * 16 bytes an entry: 1 MiB at DECIDER_BACKUP_CAPACITY, allocated once, never grown.
 *
 * In flight: a worker's count goes up with each decision for it — the backup's own, and a
 * decider's that asked for an OBSERVED (ROUTE_REP.observe) — and down with decider_backup_done
 * (the gateway's OBSERVED for the decision: its first byte, its end, or its abandonment), so
 * an outage starts with the requests this gateway already has waiting for a first byte; a
 * count that is never brought down is forgotten after DECIDER_BACKUP_INFLIGHT_TTL_MS, so a lost
 * report cannot shun a worker for good. What it cannot see — a worker that is down (the
 * gateway's failover and circuit breakers, ROUTE_REQ.avoid, steer away from it), other
 * gateways' load, evictions from the workers' caches — it does not guess.
 *
 * Answers are ROUTE_REPs as a decider sends them (decider_wire), with reason and strategy
 * "fallback", a detail that names the path ("fallback: learned prefix 1024 tokens → w1 ..."),
 * and observe = 1 for a worker: the gateway reports its end as for any decision.
 *
 * Thread-safe: any number of the gateway's handler threads (one mutex; a decision takes a few
 * microseconds and happens only while the deciders are out; learning, on every request, a few
 * hundred nanoseconds).
 */
#ifndef DECIDER_BACKUP_H
#define DECIDER_BACKUP_H

#include <stddef.h>
#include <stdint.h>

#include "ipl_policy_view.h"
#include "ipl_proto.h"

#define DECIDER_BACKUP_INFLIGHT_TTL_MS 600000 /* an unreported decision counts this long */
#define DECIDER_BACKUP_CAPACITY        65536  /* learned prefixes remembered at most */
#define DECIDER_BACKUP_LOAD_FACTOR     1.25   /* the load bound: 1.25 × the mean, */
#define DECIDER_BACKUP_LOAD_MIN        2      /* and at least this many in flight */
#define DECIDER_BACKUP_NPREFIXES       4
/* The prefix lengths learned, in tokens, shortest first; the first is also the rendezvous
 * key's length. */
#define DECIDER_BACKUP_PREFIX_TOKENS {256, 1024, 4096, 16384}

typedef struct decider_backup decider_backup_t;

/* `policy` is borrowed (the gateway's view) and must outlive the object, which holds a
 * reference to the snapshot it last decided with until destroyed. NULL on allocation failure. */
decider_backup_t *decider_backup_new(ipl_policy_view_t *policy);
/* The same with room for `capacity` learned prefixes (rounded up to a power of two, at least
 * 4; 0: DECIDER_BACKUP_CAPACITY). */
decider_backup_t *decider_backup_new_sized(ipl_policy_view_t *policy, size_t capacity);
void decider_backup_destroy(decider_backup_t **self_p);

/* Decides `rq` (borrowed) with the newest policy and fills *rep with the ROUTE_REP (decoded;
 * the caller ipl_msg_clear's it), its req_id rq->req_id. 0, IPL_E_NOTFOUND (no policy yet:
 * nothing to decide with), IPL_E_NOMEM. A decision that routes nowhere (no pool, a rule's
 * refusal) is a ROUTE_REP too, with its status. A worker decided is learned for the prompt's
 * prefixes as decider_backup_learn does. */
int decider_backup_route(decider_backup_t *self, const ipl_route_req_t *rq, ipl_msg_t *rep);

/* A decider answered `rq` (both borrowed; remote input: anything is accepted, nothing
 * asserted): when `rep` routes to a worker (status OK, target_kind "worker" or absent, a
 * worker and a pool named), remembers that worker for each prefix length the prompt reaches,
 * and — when rep->observe asks for an OBSERVED, whose decider_backup_done brings it down —
 * counts it in flight there. Anything else is ignored. Never blocks on more than the object's
 * mutex, held for a few table probes. */
void decider_backup_learn(decider_backup_t *self, const ipl_route_req_t *rq,
                          const ipl_route_rep_t *rep);

/* A request decided for `worker` (here, or by a decider that asked for an OBSERVED) is over
 * (or has its first byte): one fewer in flight. */
void decider_backup_done(decider_backup_t *self, const char *worker);

/* Requests in flight at `worker` as counted here (0 for an unknown name). */
uint64_t decider_backup_inflight(decider_backup_t *self, const char *worker);

/* Decisions made (status OK or not). */
uint64_t decider_backup_decisions(decider_backup_t *self);

/* Learned prefixes held now, and the table's capacity (never exceeded). */
size_t decider_backup_learned(decider_backup_t *self);
size_t decider_backup_capacity(decider_backup_t *self);

#endif
