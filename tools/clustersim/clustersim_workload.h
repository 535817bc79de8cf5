/*
 * clustersim_workload — the requests of one simulation: built-in generators and trace readers.
 *
 * A workload is a list of request descriptions, the same for every strategy of a run. Token
 * ids are never stored: clustersim_workload_prompt / _output synthesise them on demand,
 * deterministically from the seed, from what each request shares with others:
 *
 *     shared-prefix, no-prefix, our JSONL traces
 *         prompt = group stream [0, base_tokens) ‖ the request's own tokens
 *     production (log-normal prompt lengths)
 *         prompt = group stream [0, shared_fraction × length) ‖ the request's own tokens
 *     many-models (a model's system prompt, then a (model, tenant) document)
 *         prompt = group stream [0, base − sub_tokens) ‖ sub stream [0, sub_tokens) ‖ own
 *     multi-turn (turn k of a conversation)
 *         prompt = prompt(k-1) ‖ output(k-1) ‖ new user tokens      (turn 0: system prompt ‖ user)
 *     Mooncake traces
 *         prompt = for each hash id h: 512 tokens of stream h, cut to input_length
 *
 * so two requests share exactly the leading blocks their descriptions say they share, and a
 * multi-turn follow-up starts with everything its previous turn read and wrote, as a chat
 * client resending the history does.
 *
 * Arrivals: open loop for every request without a previous turn (arrival_s is absolute, in
 * seconds from the start); a follow-up turn is closed loop: it arrives arrival_s (the user's
 * think time) after its previous turn finished. clustersim_workload_roots lists the open-loop
 * requests in arrival order.
 *
 * Trace formats (one JSON object per line; blank lines and lines starting with '#' skipped;
 * the format is recognised per line):
 *   ours      {"arrival_s": 0.25, "tenant": "team-a", "model": "chat", "prompt_tokens": 2300,
 *              "prefix_group": 3, "output_tokens": 200}
 *             optional "prefix_tokens" (how many leading tokens come from the group; default
 *             prompt_tokens − suffix_tokens); prefix_group may be an integer, a string or null
 *             (no shared prefix); tenant and model may be absent.
 *   Mooncake  {"timestamp": 27482, "input_length": 6955, "output_length": 52,
 *              "hash_ids": [46, 47, 48, ...]}            timestamp in ms, 512 tokens per hash id
 *
 * Immutable once built; reading functions may be called from any thread.
 */
#ifndef CLUSTERSIM_WORKLOAD_H
#define CLUSTERSIM_WORKLOAD_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    CLUSTERSIM_GEN_SHARED_PREFIX = 0, /* "shared-prefix" */
    CLUSTERSIM_GEN_MULTI_TURN,        /* "multi-turn" */
    CLUSTERSIM_GEN_NO_PREFIX,         /* "no-prefix" */
    CLUSTERSIM_GEN_PRODUCTION,        /* "production": heavy-tailed lengths, a third reused */
    CLUSTERSIM_GEN_ZIPF_PREFIX,       /* "zipf-prefix": a few hot prefixes among many */
    CLUSTERSIM_GEN_BURSTY,            /* "bursty": shared-prefix prompts, on/off arrivals */
    CLUSTERSIM_GEN_KV_PRESSURE,       /* "kv-pressure": prefixes far beyond the cluster's cache */
    CLUSTERSIM_GEN_MANY_MODELS,       /* "many-models": model and tenant prefixes, nested */
} clustersim_gen_kind_t;
#define CLUSTERSIM_GEN_NKINDS 8

/* A built-in workload's name (the list above). 0 or IPL_E_INVAL. */
int clustersim_gen_kind_parse(const char *name, clustersim_gen_kind_t *out);
const char *clustersim_gen_kind_name(clustersim_gen_kind_t kind);

typedef struct {
    uint64_t seed;
    uint32_t requests;      /* in all (multi-turn: whole conversations, rounded up) */
    double rate;            /* arrivals per second, Poisson (multi-turn: of first turns × turns) */
    uint32_t prefix_groups; /* shared-prefix: prefixes to draw from; multi-turn: system prompts */
    double group_skew;      /* popularity of group g ∝ 1/(g+1)^skew (Zipf); 0: uniform */
    uint32_t prefix_tokens; /* shared prefix (multi-turn: system prompt) length; 0: none */
    uint32_t suffix_tokens; /* the request's own tokens (multi-turn: per user message) */
    uint32_t output_tokens;
    uint32_t turns;  /* multi-turn: turns per conversation (>= 1) */
    double think_s;  /* multi-turn: mean think time (exponential) before a follow-up turn */
    uint32_t models; /* model names to spread requests over (by group / conversation); >= 1 */
    uint32_t tenants;
    /* production: prompt lengths log-normal with this median and 90th percentile, cut to
     * [block, prompt_max]; each prompt's leading shared_fraction comes from its group. */
    uint32_t prompt_median, prompt_p90, prompt_max;
    double shared_fraction;
    /* bursty: arrivals only during "on" periods (exponential, mean burst_on_s), none during
     * "off" ones (mean burst_off_s), at rate × (on + off) / on while on: the mean is `rate`. */
    double burst_on_s, burst_off_s;
    /* many-models: model m ∝ 1/(m+1)^group_skew, tenant t ∝ 1/(t+1)^tenant_skew; a prompt is
     * the model's system prompt (prefix_tokens), the (model, tenant) document (sub_tokens)
     * and suffix_tokens of its own. */
    uint32_t sub_tokens;
    double tenant_skew;
} clustersim_gen_config_t;

/* The defaults of `kind` (shaped like the published benchmark; see docs/clustersim.md). */
void clustersim_gen_config_defaults(clustersim_gen_kind_t kind, clustersim_gen_config_t *cfg);

typedef struct {
    uint64_t seed;           /* token streams */
    uint32_t max_requests;   /* 0: every line */
    double speed;            /* arrival times are divided by this (> 0; 2: twice the rate) */
    uint32_t suffix_tokens;  /* our format without prefix_tokens: own tokens of each prompt */
    uint32_t mooncake_block; /* tokens per Mooncake hash id (512) */
} clustersim_trace_config_t;

void clustersim_trace_config_defaults(clustersim_trace_config_t *cfg);

/* One request. */
typedef struct {
    double arrival_s;       /* open loop: absolute; follow-up: think time after prev finished */
    uint32_t prompt_tokens; /* >= 1 */
    uint32_t output_tokens; /* >= 1 */
    uint32_t base_tokens;   /* leading tokens shared by construction (group prefix, history) */
    int32_t group;          /* prefix group / system prompt, -1: none */
    int32_t sub;            /* many-models: the (model, tenant) document, -1: none */
    uint32_t sub_tokens;    /* ... its tokens: the last sub_tokens of base_tokens */
    int32_t prev, next;     /* multi-turn links, -1: none */
    uint32_t tenant, model; /* indexes into the name tables */
    uint32_t hash_off;      /* Mooncake: first hash id in the workload's table */
    uint32_t nhash;         /* Mooncake: hash ids (0: not a Mooncake request) */
} clustersim_req_t;

typedef struct clustersim_workload clustersim_workload_t;

/* Generates a workload. NULL on allocation failure or an invalid config (rate <= 0, no
 * requests, zero-length prompts or outputs, turns or models 0). */
clustersim_workload_t *clustersim_workload_generate(clustersim_gen_kind_t kind,
                                                    const clustersim_gen_config_t *cfg);

/* Reads a JSONL trace (see above). 0 with *out set, or IPL_E_IO (unreadable), IPL_E_INVAL
 * (a bad line: `err` says "path:line: what" ) or IPL_E_NOMEM; *out is NULL on failure. */
int clustersim_workload_read(const char *path, const clustersim_trace_config_t *cfg,
                             clustersim_workload_t **out, char *err, size_t errlen);

void clustersim_workload_destroy(clustersim_workload_t **self_p);

/* "shared-prefix", ..., or the trace file's base name. Borrowed. */
const char *clustersim_workload_name(const clustersim_workload_t *self);
uint32_t clustersim_workload_count(const clustersim_workload_t *self);
/* Request i (0 <= i < count). Borrowed. */
const clustersim_req_t *clustersim_workload_req(const clustersim_workload_t *self, uint32_t i);
/* The open-loop requests (no previous turn) by arrival time, ties by index. Borrowed. */
const uint32_t *clustersim_workload_roots(const clustersim_workload_t *self, uint32_t *n);
/* The prompt tokens each request could find cached if every earlier request's prompt were
 * kept in one infinite cache (whole blocks of `block_size`: what it shares with the earlier
 * requests by construction — its group's longest earlier prefix, its previous turn, the
 * Mooncake hash ids it repeats from the start) into reused[i] (count entries). Arrival order
 * is the roots' order; a follow-up turn reuses its whole history. *working_set (may be NULL)
 * gets the tokens such a cache would hold for the shared parts: every group's longest prefix,
 * every document, every distinct Mooncake block (not the histories). 0 or IPL_E_NOMEM. */
int clustersim_workload_ideal_reuse(const clustersim_workload_t *self, uint32_t block_size,
                                    uint32_t *reused, uint64_t *working_set);

/* The longest prompt + output of any request (to size buffers). */
uint32_t clustersim_workload_max_tokens(const clustersim_workload_t *self);

uint32_t clustersim_workload_nmodels(const clustersim_workload_t *self);
const char *clustersim_workload_model(const clustersim_workload_t *self, uint32_t i);
uint32_t clustersim_workload_ntenants(const clustersim_workload_t *self);
const char *clustersim_workload_tenant(const clustersim_workload_t *self, uint32_t i);

/* Writes request i's prompt token ids into buf (capacity >= prompt_tokens). */
void clustersim_workload_prompt(const clustersim_workload_t *self, uint32_t i, uint32_t *buf);
/* Writes request i's output token ids into buf (capacity >= output_tokens). */
void clustersim_workload_output(const clustersim_workload_t *self, uint32_t i, uint32_t *buf);

#endif
