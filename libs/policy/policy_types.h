/*
 * policy_types — the compiled resources, as policy_compiler exposes them (no functions).
 *
 * Ownership: every pointer in these structs (strings, arrays, references to other compiled
 * resources) is borrowed from the compiler that produced them and lives until
 * policy_compiler_destroy. Optional numbers are 0 when unset unless noted; optional strings
 * are NULL. Each resource carries the place of its metadata.name (`loc`), for explanations.
 */
#ifndef POLICY_TYPES_H
#define POLICY_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *file;
    size_t line, col; /* 1-based */
} policy_loc_t;

/* ---- GatewayBackend ------------------------------------------------------------------------ */

typedef enum { POLICY_PROTOCOL_OPENAI, POLICY_PROTOCOL_ANTHROPIC } policy_protocol_t;
typedef enum { POLICY_AUTH_NONE, POLICY_AUTH_BEARER, POLICY_AUTH_HEADER } policy_auth_t;
typedef enum {
    POLICY_SECRET_NONE,
    POLICY_SECRET_KUBERNETES, /* name: the Secret, key: its key */
    POLICY_SECRET_FILE,       /* name: the path */
    POLICY_SECRET_ENV,        /* name: the variable */
} policy_secret_source_t;

/* Where a secret comes from — never its value (the compiler never reads it). */
typedef struct {
    policy_secret_source_t source;
    const char *name, *key;
} policy_secret_t;

typedef struct {
    const char *name, *url;
    policy_protocol_t protocol;
    policy_auth_t auth;
    const char *auth_header; /* POLICY_AUTH_HEADER: the header name */
    policy_secret_t secret;  /* source NONE without auth */
    const char *ca_bundle;   /* a PEM file, or NULL */
    policy_secret_t ca_secret;
    bool insecure_skip_verify;
    uint64_t connect_ms, response_ms, max_connections; /* defaults filled in */
    policy_loc_t loc;
} policy_backend_t;

#define POLICY_DEFAULT_CONNECT_MS      5000
#define POLICY_DEFAULT_RESPONSE_MS     120000
#define POLICY_DEFAULT_MAX_CONNECTIONS 64

/* ---- InferenceProvider ---------------------------------------------------------------------- */

typedef struct {
    const char *name;        /* the local model name (a pool's model) */
    const char *remote_name; /* the provider's name (default name) */
} policy_provider_model_t;

typedef struct {
    const char *name;
    const char *backend_name;
    const policy_backend_t *backend; /* resolved */
    const policy_provider_model_t *models;
    size_t nmodels;
    uint64_t latency_hint_ms;
    uint64_t input_micros_per_mtok, output_micros_per_mtok;
    uint64_t concurrent_requests, tokens_per_minute; /* 0: no limit */
    policy_loc_t loc;
} policy_provider_t;

/* ---- InferenceWorkerSet (what ipl_worker_t does not carry) ---------------------------------- */

typedef enum {
    POLICY_SELECT_IN,
    POLICY_SELECT_NOT_IN,
    POLICY_SELECT_EXISTS,
    POLICY_SELECT_DOES_NOT_EXIST
} policy_select_op_t;

typedef struct {
    const char *key;
    policy_select_op_t op;
    const char *const *values;
    size_t nvalues;
} policy_select_expr_t;

typedef struct {
    const char *key, *value;
} policy_label_t;

/* A container port: a number (1..65535), or a container port name (number 0). */
typedef struct {
    uint32_t number;
    const char *name; /* NULL when unset or a number */
} policy_port_t;

typedef struct {
    const char *name, *model;
    uint64_t block_size;
    size_t nworkers; /* static workers (ipl_policy_t.workers) */
    bool has_selector;
    const policy_label_t *match_labels;
    size_t nmatch_labels;
    const policy_select_expr_t *match_exprs;
    size_t nmatch_exprs;
    policy_port_t api_port, kv_events_port, replay_port, metrics_port; /* with the selector */
    const char *const *lora_adapters;
    size_t nlora_adapters;
    const char *profile; /* NULL when unset */
    bool messages_api;   /* spec.apis lists "anthropic": the workers serve /v1/messages */
    const char *pool;    /* the pool that targets it, or NULL */
    policy_loc_t loc;
} policy_workerset_t;

/* ---- InferencePool -------------------------------------------------------------------------- */

typedef enum { POLICY_TARGET_WORKER_SET, POLICY_TARGET_PROVIDER } policy_target_kind_t;
typedef enum { POLICY_ROLE_PRIMARY, POLICY_ROLE_OVERFLOW, POLICY_ROLE_BATCH } policy_role_t;

typedef struct {
    policy_target_kind_t kind;
    const char *name; /* the worker set or provider */
    policy_role_t role;
    uint32_t weight; /* 1..1000, default 1 */
    policy_loc_t loc;
} policy_target_t;

typedef struct {
    const char *name, *model;
    const char *strategy; /* NULL: the decider's --strategy */
    uint64_t slo_ttft_ms; /* 0: no SLO */
    const policy_target_t *targets;
    size_t ntargets;
    policy_loc_t loc, model_loc;
} policy_pool_t;

/* ---- InferencePolicy ------------------------------------------------------------------------ */

typedef enum {
    POLICY_ACTION_ROUTE,
    POLICY_ACTION_PREFER,
    POLICY_ACTION_SPILL,
    POLICY_ACTION_KEEP_LOCAL,
    POLICY_ACTION_REJECT,
    POLICY_ACTION_ADMIT_BATCH,
} policy_action_t;

typedef enum { POLICY_TRI_UNSET, POLICY_TRI_FALSE, POLICY_TRI_TRUE } policy_tri_t;

typedef struct {
    const char *name;
    const char *value; /* NULL: present with any value */
} policy_header_match_t;

typedef struct {
    const char *const *tenants; /* any of; none: every tenant */
    size_t ntenants;
    const char *const *models; /* any of (pool models or aliases); none: every model */
    size_t nmodels;
    const char *const *labels; /* all of */
    size_t nlabels;
    const policy_header_match_t *headers; /* all of */
    size_t nheaders;
    uint64_t prompt_min, prompt_max; /* inclusive; 0 and UINT64_MAX when unset */
    bool has_queue_depth, has_kv_utilization;
    uint64_t queue_depth_above, kv_utilization_above_percent;
    policy_tri_t predicted_ttft_above_slo;
    bool has_time;
    uint8_t days;                    /* bit 0 Monday .. bit 6 Sunday; 0x7f when unset */
    uint16_t from_minute, to_minute; /* minutes after 00:00 UTC; from > to wraps */
} policy_match_t;

typedef struct {
    const char *policy; /* the InferencePolicy's name */
    int64_t priority;   /* the policy's */
    const char *name;
    size_t index; /* in the policy's spec.rules */
    policy_match_t match;
    policy_action_t action;
    const char *pool;           /* route, prefer */
    const char *const *targets; /* route: a subset of the pool's targets (none: all) */
    size_t ntargets;
    const char *target, *unless_holder;                /* prefer (unless_holder may be NULL) */
    const char *provider;                              /* spill */
    bool while_above_slo;                              /* spill, default true */
    uint64_t enter_percent, exit_percent, min_hold_ms; /* spill hysteresis */
    const char *reason;                                /* keepLocal, reject */
    uint64_t status;                                   /* reject, default 503 */
    uint64_t max_utilization_percent;                  /* admitBatch */
    policy_loc_t loc;                                  /* of the rule's name */
} policy_rule_t;

typedef enum { POLICY_ALIAS_MODEL, POLICY_ALIAS_POOL } policy_alias_kind_t;

typedef struct {
    policy_alias_kind_t kind;
    const char *name; /* a pool's model or another alias; or a pool */
    uint32_t weight;
} policy_alias_target_t;

typedef struct {
    const char *policy, *name;
    const policy_alias_target_t *targets;
    size_t ntargets;
    const char *const *failover; /* in order */
    size_t nfailover;
    policy_loc_t loc;
} policy_alias_t;

typedef struct {
    const char *policy, *tenant; /* "*": every tenant without its own entry */
    uint64_t requests_per_minute, input_tokens_per_minute, output_tokens_per_minute,
        concurrent_requests; /* 0: no limit */
    uint64_t weight;              /* fair-queuing share, 1..1000 (default 1) */
    const char *priority;         /* highest priority class: "interactive" | "standard"
                                     (default) | "batch" */
    uint64_t cost_per_day_micros; /* daily cost budget, micro-USD (0: none) */
    policy_loc_t loc;
} policy_limit_t;

#endif
