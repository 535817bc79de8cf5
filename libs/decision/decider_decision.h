/*
 * decider_decision — what a decision is made of and what it says: the request, every
 * candidate worker with its figures, and the outcome. The vocabulary shared by decider_router
 * (which fills the candidates and commits the winner) and the strategies (decider_pick.h,
 * which choose among them); it knows neither.
 *
 *   decider_request_t    the question: model, prompt (block hashes), strategy, tenant
 *   decider_decision_t   the answer: status, reason, detail, the winner and its prediction,
 *                        and the candidates array (owned, reused across decisions)
 *     cands[i]           decider_candidate_t: the wire figures (ipl_candidate_t) plus what the
 *                        choice was made of (queue, trusted cache, features, prediction,
 *                        the strategy's score) and a note explaining it
 *
 * Strings in a decision (pool, worker, url, model, set) are borrowed from the policy snapshot
 * it was decided with: keep that snapshot referenced while the decision is used.
 * Not thread-safe: a decision belongs to one caller at a time.
 */
#ifndef DECIDER_DECISION_H
#define DECIDER_DECISION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "decider_predictor.h"
#include "ipl_proto.h"

struct decider_rules;

/* One request to decide. Every pointer is borrowed for the call. */
typedef struct decider_request {
    const char *model;
    const char *tenant;     /* may be NULL */
    const char *strategy;   /* NULL or "": the pool's */
    uint64_t prompt_tokens; /* 0: nhashes × block_size */
    uint64_t block_size;    /* that the hashes were computed with; 0: the pool's */
    const uint64_t *hashes;
    size_t nhashes;
    bool terse; /* decide without explanations: the candidates' notes and the decision's detail
                   stay empty (reasons, figures and predictions are filled as ever) */
    /* InferencePolicy inputs (ROUTE_REQ.labels, .headers): */
    char *const *labels; /* nlabels semantic labels */
    size_t nlabels;
    char *const *headers; /* nheaders "name=value" (name lower-case) */
    size_t nheaders;
    /* ROUTE_REQ.avoid: worker, provider and GatewayBackend names not to choose (a gateway's
     * retry after a failed attempt, its open circuit breakers). An avoided worker is not a
     * candidate (noted "avoided"); an avoided provider, or one whose backend is avoided, is not
     * gone to. None (navoid 0): every decision as without the field, byte for byte. */
    char *const *avoid;
    size_t navoid;
    /* The compiled rules of the policy decided with (decider_rules_new of that very policy,
     * e.g. the policy snapshot's attachment). NULL while the policy has rules: the decision is
     * refused (503, "policy_error"), never made without them. */
    const struct decider_rules *rules;
} decider_request_t;

/* What a decision chose. */
typedef enum {
    DECIDER_TARGET_NONE = 0, /* not routed */
    DECIDER_TARGET_WORKER,   /* a local worker: worker, cands[winner] */
    DECIDER_TARGET_PROVIDER, /* an InferenceProvider: provider, backend, upstream_model */
} decider_target_kind_t;

/* One candidate: the wire figures plus what the choice was made of. */
typedef struct {
    ipl_candidate_t c; /* c.worker and c.url borrowed from the policy; c.note → note */
    uint64_t queue;    /* waiting + inflight */
    bool cache_used;   /* cache term trusted */
    bool healthy;      /* could be chosen before strategy-specific gates */
    int state_id, ledger_id;
    uint32_t state_blocks;  /* leading blocks its KV events show it holds (cache_used) */
    const char *set;        /* worker set (predictor key), borrowed from the policy */
    decider_features_t x;   /* the predictor's input */
    decider_terms_t terms;  /* the prediction, by part (terms.total_s = c.predicted_ttft_s) */
    double inflight_tokens; /* uncached prompt tokens routed here since the last sample */
    uint64_t num_blocks;    /* KV capacity in blocks (last sample; 0 unknown) */
    uint64_t held_blocks;   /* blocks of any prompt its KV events show it holds */
    double score;           /* the strategy's own figure (score, cost, match), see its note */
    char note[256];         /* last: a candidate is reset up to it, and note[0] cleared */
} decider_candidate_t;

/* A decision. Strings (pool, worker, url, model, set) are borrowed from the policy snapshot
 * used to decide: keep it referenced while the decision is used. Reusable across decisions. */
typedef struct {
    int status;         /* IPL_ROUTE_* */
    const char *reason; /* static */
    char detail[768];
    const char *strategy;
    const ipl_pool_t *pool;     /* NULL unless a pool was found */
    const ipl_worker_t *worker; /* the winner, or NULL */
    int winner;                 /* index in cands, or -1 */
    double predicted_ttft_s;
    uint64_t cached_tokens;
    uint64_t prompt_tokens;
    uint64_t state_seq;
    const char *set;             /* the winner's worker set, for decider_router_observe */
    decider_features_t features; /* the winner's features, for decider_router_observe */
    /* Where it goes (status OK), and the policy's part in it. */
    decider_target_kind_t target;
    const ipl_provider_t *provider; /* PROVIDER: the provider, its backend, the model name */
    const ipl_backend_t *backend;   /* to send (remote name) */
    const char *upstream_model;     /* WORKER: the LoRA adapter requested (the model to send), */
                                    /* or NULL: the worker's own model */
    const ipl_rule_t *rule;  /* the InferencePolicy rule that decided, or NULL */
    unsigned http_status;    /* REJECTED: the HTTP status */
    uint64_t retry_after_ms; /* DEFERRED: ask again after */
    decider_candidate_t *cands; /* owned: ncands in use, room for cap */
    uint32_t ncands, cap;
} decider_decision_t;

/* An empty decision (no candidates, winner -1). */
void decider_decision_init(decider_decision_t *d);
/* Frees the candidate array and empties the decision (init again). */
void decider_decision_clear(decider_decision_t *d);
/* Empties the decision for the next one but keeps the candidate array (cands, cap). Inline:
 * once per decision, on the router's hot path. */
static inline void decider_decision_reset(decider_decision_t *d)
{
    decider_candidate_t *cands = d->cands;
    uint32_t cap = d->cap;
    memset(d, 0, sizeof *d);
    d->cands = cands;
    d->cap = cap;
    d->winner = -1;
}

/* Appends "; "-separated text to a candidate's note; text past its capacity is cut, and once
 * fewer than 3 bytes are left nothing more is appended. */
void decider_candidate_note(decider_candidate_t *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
