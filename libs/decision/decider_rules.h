/*
 * decider_rules — the InferencePolicy rules of one policy version, compiled for evaluation,
 * and the first-match evaluation of one request against them (docs/crds.md, InferencePolicy).
 *
 * A pure class of the decision core: no sockets, no clock, no logging. decider_router
 * evaluates it for every decision; inferplanectl explain traces it for people.
 *
 *   ipl_policy_t.rules[] ──decider_rules_new──► decider_rules_t (read-only)
 *                                                   │
 *   decider_rules_input_t ──decider_rules_eval──────┴──► decider_rules_result_t
 *                         ──decider_rules_explain──► the same, and each rule's "why" (for people)
 *
 * Compiled form. Tenant, model and label names are interned to small ids (XXH3 of the name,
 * open addressing, the text compared on a hit). Each interned tenant has a bitset of the rules
 * its tenant condition lets through (rules without one, and rules listing it), and so has each
 * interned model; a name no rule lists gets the "any" bitset (rules without that condition).
 * Evaluation ANDs the two bitsets word by word and checks the remaining conditions only of the
 * rules left, lowest index first, so a request costs two hashes plus the rules that pass
 * tenant and model, not all of them.
 *
 * Semantics (each choice is tested in libs/decision/tests/test_decider_rules.c):
 *  - Order: ipl_policy_t.rules is already in evaluation order (priority, policy, list order;
 *    libs/policy); the first rule whose conditions all hold decides. No match: action NONE
 *    (the pool's strategy routes, as today).
 *  - tenants: the request's tenant is one of them (exact, case-sensitive). An anonymous request
 *    (tenant NULL or "") matches only rules without a tenant condition.
 *  - models and aliases: the rule's list holds the requested name, or a name the requested
 *    alias resolves to: the closure of an alias over its targets, transitively (kind "model":
 *    a model or another alias; kind "pool": that pool's spec.model), not over its failover
 *    list. So a request for alias "chat" (→ small-model) matches a rule on "small-model"; a
 *    request for "small-model" does not match a rule on "chat". Cycles (the compiler rejects
 *    them) end the walk, they do not fail the build.
 *  - labels: the request carries all of them (exact). At most DECIDER_RULES_MAX_LABELS of the
 *    request's labels are looked at; labels no rule names are ignored.
 *  - headers: each "name" is present (any value, "" included) or "name=value" is present with
 *    exactly that value (split at the first '='). Names compare case-insensitively (HTTP), values
 *    exactly. Looked up through `header_fn` when set, else in `headers[]` (first of a name).
 *  - promptTokens: prompt_min <= prompt_tokens <= prompt_max, inclusive.
 *  - pool state, of the request's pool, as the caller fills it: queue_depth > queue_depth_above;
 *    kv_utilization_percent > kv_utilization_above_percent; predicted TTFT above the SLO means
 *    predicted_ttft_ms > ttft_slo_ms. With ttft_slo_ms == 0 (no SLO) a predicted-TTFT condition
 *    (either value) never holds.
 *  - time: minute_of_week is 0 at Monday 00:00 UTC (0..10079). A window from < to holds on the
 *    listed days for from <= minute < to. A window that wraps (from > to) holds from `from` to
 *    midnight and on from midnight to `to` the next day, and counts as the day it opened: a
 *    Friday 22:00-02:00 window holds on Saturday 01:00 when Friday is listed (not Saturday).
 *    days == 0 is read as every day.
 *  - actions: every action is terminal. route and prefer name a pool and targets (prefer's
 *    "unless the holder predicts a lower TTFT" needs the prefix and the predictions: the
 *    router decides it). spill gives its parameters; whether to spill now is the caller's
 *    per-pool decider_rules_spill_step. keepLocal gives the reason. reject gives the status
 *    (503 when the policy gives 0) and the reason. admitBatch gives the threshold and `admit`:
 *    kv_utilization_percent < max_utilization_percent.
 *  - Names a rule gives that exist nowhere (a pool, a target, a model, a tenant) are not build
 *    errors: they match by name (a model no pool serves matches only a request asking for it,
 *    which the router then refuses) or are handed to the caller as given. Build errors are
 *    only what cannot be evaluated (see decider_rules_new).
 *
 * Ownership and threads: decider_rules_new borrows `policy`: the policy (its strings and
 * arrays, which results point into) must outlive the rules object; the decider keeps both for
 * one policy version. Built once, read-only afterwards: decider_rules_eval (and
 * decider_rules_explain) may run from any number of threads at once. Neither allocates.
 */
#ifndef DECIDER_RULES_H
#define DECIDER_RULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ipl_proto.h"

#define DECIDER_RULES_MAX_LABELS    32 /* request labels looked at */
#define DECIDER_RULES_MINUTES_WEEK  10080
#define DECIDER_RULES_REJECT_STATUS 503 /* reject's status when the policy gives none */

typedef struct decider_rules decider_rules_t;

typedef enum {
    DECIDER_RULES_NONE = 0, /* no rule matched */
    DECIDER_RULES_ROUTE,
    DECIDER_RULES_PREFER,
    DECIDER_RULES_SPILL,
    DECIDER_RULES_KEEP_LOCAL,
    DECIDER_RULES_REJECT,
    DECIDER_RULES_ADMIT_BATCH,
} decider_rules_action_t;

/* "none", "route", "prefer", "spill", "keepLocal", "reject", "admitBatch" (the YAML's). */
const char *decider_rules_action_name(decider_rules_action_t a);

typedef struct {
    const char *name;  /* borrowed; not NULL */
    const char *value; /* borrowed; not NULL ("" for an empty value) */
} decider_rules_header_t;

/* The value of header `name` (case-insensitive), NULL when absent; borrowed. */
typedef const char *(decider_rules_header_fn)(void *arg, const char *name);

/* One request, as the caller knows it at decision time. Every pointer is borrowed for the
 * call only. Zero-initialise and fill what is known. */
typedef struct {
    const char *tenant;        /* NULL or "": anonymous */
    const char *model;         /* the requested model or alias; NULL: "" */
    const char *const *labels; /* nlabels semantic labels */
    size_t nlabels;
    decider_rules_header_fn *header_fn; /* when set, used instead of headers[] */
    void *header_arg;
    const decider_rules_header_t *headers;
    size_t nheaders;
    uint64_t prompt_tokens;
    /* the state of the request's pool */
    uint64_t queue_depth;            /* requests waiting */
    uint64_t kv_utilization_percent; /* 0..100 */
    double predicted_ttft_ms;        /* the best predicted TTFT */
    uint64_t ttft_slo_ms;            /* the pool's SLO; 0: none */
    uint32_t minute_of_week;         /* 0: Monday 00:00 UTC; see decider_rules_minute_of_week */
} decider_rules_input_t;

typedef struct {
    uint64_t enter_percent; /* start spilling above this % of the SLO */
    uint64_t exit_percent;  /* stop below this % */
    uint64_t min_hold_ms;   /* stay in a state at least this long */
    bool while_above_slo;   /* false: spill whenever the rule matches (no step needed) */
} decider_rules_spill_params_t;

/* The decision of the first matching rule. Strings and arrays are borrowed from the policy
 * given to decider_rules_new; fields of other actions are NULL/0. */
typedef struct {
    decider_rules_action_t action;
    int rule;             /* index in policy->rules (evaluation order); -1: none */
    const char *name;     /* the rule's name, NULL when none */
    const char *policy;   /* its InferencePolicy's name */
    const char *pool;     /* route, prefer */
    char *const *targets; /* route: the subset of the pool's targets (ntargets 0: all) */
    size_t ntargets;
    const char *target;        /* prefer */
    const char *unless_holder; /* prefer: NULL when none */
    const char *provider;      /* spill */
    decider_rules_spill_params_t spill;
    const char *reason;               /* keepLocal, reject */
    unsigned status;                  /* reject */
    uint64_t max_utilization_percent; /* admitBatch */
    bool admit;                       /* admitBatch: utilization under the threshold now */
} decider_rules_result_t;

/* Compiles `policy`'s rules and aliases (borrowed: see above). Returns 0 and *out, or
 * IPL_E_INVAL with a message naming the rule in err (when errlen > 0) for a rule that cannot
 * be evaluated: an unknown action, a header with an empty name, promptTokens min > max, a time
 * window with from == to or a minute past 23:59, a spill whose exit percent is not below its
 * enter percent; IPL_E_NOMEM. A policy without rules gives an object that matches nothing. */
int decider_rules_new(const ipl_policy_t *policy, decider_rules_t **out, char *err, size_t errlen);
void decider_rules_destroy(decider_rules_t **self_p);

size_t decider_rules_count(const decider_rules_t *self);

/* Evaluates one request: fills *out (always) and returns its action (NONE: no rule matched).
 * Read-only on self; safe from many threads. */
decider_rules_action_t decider_rules_eval(const decider_rules_t *self,
                                          const decider_rules_input_t *in,
                                          decider_rules_result_t *out);

/*
 * Explanation, for people (inferplanectl explain): the evaluation of decider_rules_eval — the
 * same *out, the same return, the same first match on every input — that also reports each
 * rule it considers, in evaluation order, up to and including the first match:
 *
 *   fn(arg, 0, false, "tenant \"team-b\" is not one of [team-a]")   rule 0 does not match
 *   fn(arg, 1, false, "label \"pii\" missing")                       nor does rule 1
 *   fn(arg, 2, true, "keepLocal: personal data stays local")        rule 2 decides
 *
 * For a rule that does not match, `why` names the first condition that fails, in the order the
 * YAML lists them (tenants, models, labels, headers, promptTokens, pool: queueDepthAbove,
 * kvUtilizationAbovePercent, predictedTtftAboveSlo, time), with the request's value; for the
 * match it is decider_rules_describe of the result. When no rule matches, fn is called for
 * every rule. `why` is borrowed for the call only; fn may be NULL.
 *
 * It checks every rule in turn (no bitset skipping) and words each failure, so it is slower than
 * eval; it allocates nothing: each text is built in a DECIDER_RULES_WHY_MAX buffer on the stack
 * (a longer one ends in "..."). Read-only on self; safe from many threads.
 */
#define DECIDER_RULES_WHY_MAX 512

typedef void(decider_rules_trace_fn)(void *arg, size_t rule, bool matched, const char *why);

decider_rules_action_t decider_rules_explain(const decider_rules_t *self,
                                             const decider_rules_input_t *in,
                                             decider_rules_trace_fn *fn, void *arg,
                                             decider_rules_result_t *out);

/* A result in words, led by the action's name: "keepLocal: <reason>", "route: pool chat,
 * targets [small]", "reject: 403, <reason>", "admitBatch: admit (KV utilization under 60%)",
 * "none: no rule matched (the pool's strategy routes)"... Writes at most len bytes, NUL
 * included (a longer text ends in "..."); returns buf. */
const char *decider_rules_describe(const decider_rules_result_t *r, char *buf, size_t len);

/* A minute of the week as "Mon 14:05" (len >= 10); returns buf. */
const char *decider_rules_format_minute(uint32_t minute_of_week, char *buf, size_t len);

/* Parses "Mon 14:05" (a weekday Mon..Sun, any case, then HH:MM, UTC) into a minute of the
 * week. Returns 0, or IPL_E_INVAL for anything else (nothing after the minutes). */
int decider_rules_parse_minute(const char *text, uint32_t *minute_of_week);

/* The UTC minute of the week (0: Monday 00:00) of a time in ms since the epoch. */
uint32_t decider_rules_minute_of_week(uint64_t epoch_ms);

/* The predicted TTFT as a percentage of the SLO (0 when slo_ms is 0), for the spill step. */
uint64_t decider_rules_slo_percent(double predicted_ttft_ms, uint64_t slo_ms);

/*
 * Spill hysteresis, per pool and owned by the caller (zero-initialised: not spilling, never
 * switched). A step with the pool's current predicted TTFT (% of the SLO):
 *
 *   not spilling ──(percent > enter, and held >= min_hold_ms)──► spilling
 *   spilling     ──(percent < exit,  and held >= min_hold_ms)──► not spilling
 *
 * "held" is now_ms minus the last switch; before the first switch there is no hold. Between
 * exit and enter the state stays as it is, so a signal oscillating between the two thresholds
 * never flaps. Returns whether to spill now. Not thread-safe per state (the caller's lock).
 */
typedef struct {
    bool spilling;
    bool switched;     /* since_ms is valid */
    uint64_t since_ms; /* the last switch */
} decider_rules_spill_state_t;

bool decider_rules_spill_step(decider_rules_spill_state_t *state, uint64_t percent, uint64_t now_ms,
                              const decider_rules_spill_params_t *params);

#endif
