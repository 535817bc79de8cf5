/*
 * Unit tests of decider_router's policy step: InferencePolicy rules (every action), provider
 * targets (overflow, spill, a rule's target), aliases (weights, failover), and a policy with
 * rules decided without its compiled rules. The targets' lookups are decider_targets'.
 *
 * Fixture: pool "chat" (model "m", SLO 800 ms) with worker sets small (s1, s2) and large (l1),
 * and provider "cloud" (overflow; backend "cloud-backend", offers m as "remote-m"); pool "big"
 * (model "big-m") with worker b1. The predictor's prior: base 0, prefill 1000 tokens/s, 10 ms
 * per running request. A 100-block prompt of 400 tokens: an idle worker predicts 400 ms, one
 * with R running 400 + 10 R ms.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "decider_router.h"
#include "decider_rules.h"
#include "decider_state.h"
#include "decider_targets.h"
#include "ipl_error.h"
#include "ipl_log.h"

#define NB   100
#define WALL 1000000u
#define S_ANY .prompt_max = UINT64_MAX

static uint64_t s_hashes[NB];
static ipl_pool_t s_pools[] = {
    {.name = "chat", .model = "m", .strategy = "", .ttft_slo_ms = 800},
    {.name = "big", .model = "big-m", .strategy = ""},
};
static ipl_worker_t s_workers[] = {
    {.name = "s1", .pool = "chat", .model = "m", .url = "http://s1", .block_size = 4,
     .worker_set = "small"},
    {.name = "s2", .pool = "chat", .model = "m", .url = "http://s2", .block_size = 4,
     .worker_set = "small"},
    {.name = "l1", .pool = "chat", .model = "m-large", .url = "http://l1", .block_size = 4,
     .worker_set = "large"},
    {.name = "b1", .pool = "big", .model = "big-m", .url = "http://b1", .block_size = 4,
     .worker_set = "bigset"},
};
static ipl_backend_t s_backends[] = {{.name = "cloud-backend", .url = "http://cloud/v1"}};
static ipl_provider_t s_providers[] = {
    {.name = "cloud", .backend = "cloud-backend", .latency_hint_ms = 300}};
static ipl_provider_model_t s_pmodels[] = {
    {.provider = "cloud", .name = "m", .remote_name = "remote-m"}};
static ipl_pool_target_t s_targets[] = {
    {.pool = "chat", .kind = "workerSet", .name = "small", .role = "primary", .weight = 1},
    {.pool = "chat", .kind = "workerSet", .name = "large", .role = "primary", .weight = 1},
    {.pool = "chat", .kind = "provider", .name = "cloud", .role = "overflow", .weight = 1},
    {.pool = "big", .kind = "workerSet", .name = "bigset", .role = "primary", .weight = 1},
};
static char *s_fo[] = {"big-m"};
static ipl_alias_t s_aliases[] = {
    {.policy = "p", .name = "assistant"},
    {.policy = "p", .name = "fo", .failover = s_fo, .failover_len = 1},
    {.policy = "p", .name = "split"},
};
static ipl_alias_target_t s_alias_targets[] = {
    {.alias = "assistant", .kind = "model", .name = "m", .weight = 1},
    {.alias = "fo", .kind = "pool", .name = "chat", .weight = 1},
    {.alias = "split", .kind = "pool", .name = "chat", .weight = 3},
    {.alias = "split", .kind = "model", .name = "big-m", .weight = 1},
};

static ipl_policy_t s_policy(ipl_rule_t *rules, uint32_t nrules)
{
    return (ipl_policy_t){.version = 1,
                          .source = "t",
                          .pools = s_pools,
                          .pools_len = 2,
                          .workers = s_workers,
                          .workers_len = 4,
                          .backends = s_backends,
                          .backends_len = 1,
                          .providers = s_providers,
                          .providers_len = 1,
                          .provider_models = s_pmodels,
                          .provider_models_len = 1,
                          .pool_targets = s_targets,
                          .pool_targets_len = 4,
                          .rules = rules,
                          .rules_len = nrules,
                          .aliases = s_aliases,
                          .aliases_len = 3,
                          .alias_targets = s_alias_targets,
                          .alias_targets_len = 4};
}

typedef struct {
    decider_state_t *state;
    decider_router_t *router;
    decider_decision_t d;
    ipl_policy_t policy;
    decider_rules_t *rules;
} s_fix_t;

static void s_load(decider_state_t *st, const char *w, uint64_t running, double kv,
                   uint64_t health)
{
    ipl_msg_t m = {.type = IPL_MSG_LOAD};
    m.u.load = (ipl_load_t){.worker = (char *)w,
                            .ts_ms = WALL - 10,
                            .running = running,
                            .kv_usage = kv,
                            .block_size = 4,
                            .health = health};
    assert_int_equal(decider_state_apply(st, &m, 0), 0);
}

static void s_loads(s_fix_t *f, uint64_t running, double kv, uint64_t health)
{
    const char *names[] = {"s1", "s2", "l1", "b1"};
    for (int i = 0; i < 4; i++)
        s_load(f->state, names[i], running, kv, health);
}

static int s_setup(void **state)
{
    s_fix_t *f = calloc(1, sizeof *f);
    for (int i = 0; i < NB; i++)
        s_hashes[i] = 0x5eed000 + (uint64_t)i;
    decider_router_config_t cfg;
    decider_router_config_defaults(&cfg);
    cfg.prefill_tokens_per_s = 1000;
    cfg.running_cost_s = 0.01;
    cfg.base_s = 0;
    cfg.seed = 7;
    cfg.load_gate = 1000; // no load gate: the predictions decide
    f->router = decider_router_new(&cfg);
    f->state = decider_state_new();
    assert_non_null(f->router);
    s_loads(f, 0, 0.1, IPL_HEALTH_UP);
    decider_decision_init(&f->d);
    f->policy = s_policy(NULL, 0);
    *state = f;
    return 0;
}

static int s_teardown(void **state)
{
    s_fix_t *f = *state;
    decider_router_destroy(&f->router);
    decider_state_destroy(&f->state);
    decider_decision_clear(&f->d);
    decider_rules_destroy(&f->rules);
    free(f);
    return 0;
}

// Installs `rules` (static storage) as the policy's.
static void s_rules(s_fix_t *f, ipl_rule_t *rules, uint32_t n)
{
    decider_rules_destroy(&f->rules);
    f->policy = s_policy(rules, n);
    char err[256] = "";
    assert_int_equal(decider_rules_new(&f->policy, &f->rules, err, sizeof err), 0);
}

static decider_request_t s_req(const s_fix_t *f, const char *model)
{
    return (decider_request_t){.model = model,
                               .prompt_tokens = 400,
                               .block_size = 4,
                               .hashes = s_hashes,
                               .nhashes = NB,
                               .rules = f->rules};
}

static int s_route_at(s_fix_t *f, const decider_request_t *req, uint64_t mono_ms)
{
    return decider_router_route_at(f->router, &f->policy, f->state, 0, req, &f->d, WALL, mono_ms);
}

static int s_route(s_fix_t *f, const decider_request_t *req)
{
    return s_route_at(f, req, 5000);
}

static void s_assert_provider(const s_fix_t *f, const char *reason)
{
    assert_int_equal(f->d.status, IPL_ROUTE_OK);
    assert_int_equal(f->d.target, DECIDER_TARGET_PROVIDER);
    assert_string_equal(f->d.reason, reason);
    assert_string_equal(f->d.provider->name, "cloud");
    assert_string_equal(f->d.backend->name, "cloud-backend");
    assert_string_equal(f->d.upstream_model, "remote-m");
    assert_null(f->d.worker);
    assert_true(fabs(f->d.predicted_ttft_s - 0.3) < 1e-9); // the latency hint
}

static void s_assert_worker_set(const s_fix_t *f, const char *set)
{
    assert_int_equal(f->d.status, IPL_ROUTE_OK);
    assert_int_equal(f->d.target, DECIDER_TARGET_WORKER);
    assert_non_null(f->d.worker);
    assert_string_equal(f->d.worker->worker_set, set);
}

/* No rules: local workers as ever; none healthy → the pool's overflow provider. */
static void test_overflow_provider_without_rules(void **state)
{
    s_fix_t *f = *state;
    decider_request_t req = s_req(f, "m");
    assert_int_equal(s_route(f, &req), IPL_ROUTE_OK);
    assert_int_equal(f->d.target, DECIDER_TARGET_WORKER);
    assert_null(f->d.rule);
    s_loads(f, 0, 0.1, IPL_HEALTH_DOWN);
    assert_int_equal(s_route(f, &req), IPL_ROUTE_OK);
    s_assert_provider(f, "overflow");
    assert_non_null(strstr(f->d.detail, "remote-m"));
    // a pool without a provider target still fails
    req.model = "big-m";
    assert_int_equal(s_route(f, &req), IPL_ROUTE_NO_WORKER);
}

/* ROUTE_REQ.avoid: an avoided worker is no candidate (the next best wins); every local worker
 * avoided → the overflow provider; the provider (or its backend) avoided too → no worker; an
 * avoided spill target → the pool's own workers. No avoid list: the same decision as ever. */
static void test_avoid(void **state)
{
    s_fix_t *f = *state;
    s_loads(f, 0, 0.1, IPL_HEALTH_UP);
    decider_request_t req = s_req(f, "m");
    assert_int_equal(s_route(f, &req), IPL_ROUTE_OK);
    const char *first = f->d.worker->name;
    char *avoid[4] = {(char *)first};
    req.avoid = avoid;
    req.navoid = 1;
    assert_int_equal(s_route(f, &req), IPL_ROUTE_OK);
    assert_int_equal(f->d.target, DECIDER_TARGET_WORKER);
    assert_string_not_equal(f->d.worker->name, first);
    for (uint32_t i = 0; i < f->d.ncands; i++)
        if (!strcmp(f->d.cands[i].c.worker, first)) assert_false(f->d.cands[i].healthy);
    // every local worker avoided: the overflow provider
    avoid[0] = "s1", avoid[1] = "s2", avoid[2] = "l1";
    req.navoid = 3;
    assert_int_equal(s_route(f, &req), IPL_ROUTE_OK);
    s_assert_provider(f, "overflow");
    // ... and the provider too, by its name or its backend's
    avoid[3] = "cloud";
    req.navoid = 4;
    assert_int_equal(s_route(f, &req), IPL_ROUTE_NO_WORKER);
    avoid[3] = "cloud-backend";
    assert_int_equal(s_route(f, &req), IPL_ROUTE_NO_WORKER);
    assert_null(f->d.provider);
    // names of nothing change nothing
    avoid[0] = "nobody";
    req.navoid = 1;
    assert_int_equal(s_route(f, &req), IPL_ROUTE_OK);
    assert_int_equal(f->d.target, DECIDER_TARGET_WORKER);
    // a spill whose provider is avoided stays on the pool's workers
    static ipl_rule_t rules[] = {
        {.policy = "r", .name = "burst", S_ANY, .action = "spill", .provider = "cloud"}};
    s_rules(f, rules, 1);
    req = s_req(f, "m");
    assert_int_equal(s_route(f, &req), IPL_ROUTE_OK);
    s_assert_provider(f, "spill");
    avoid[0] = "cloud";
    req.avoid = avoid;
    req.navoid = 1;
    assert_int_equal(s_route(f, &req), IPL_ROUTE_OK);
    assert_int_equal(f->d.target, DECIDER_TARGET_WORKER);
}

/* keepLocal: local workers when up (even saturated), refused with the reason when down, and
 * never the provider. */
static void test_keep_local(void **state)
{
    s_fix_t *f = *state;
    static char *pii[] = {"pii"};
    static ipl_rule_t rules[] = {{.policy = "g", .name = "pii", .labels = pii, .labels_len = 1,
                                  S_ANY, .action = "keepLocal", .reason = "personal data stays"}};
    s_rules(f, rules, 1);
    char *labels[] = {"pii"};
    decider_request_t req = s_req(f, "m");
    req.labels = labels;
    req.nlabels = 1;
    s_loads(f, 90, 0.99, IPL_HEALTH_UP); // saturated: predicted 1300 ms, above the SLO
    assert_int_equal(s_route(f, &req), IPL_ROUTE_OK);
    assert_int_equal(f->d.target, DECIDER_TARGET_WORKER);
    assert_string_equal(f->d.rule->name, "pii");
    s_loads(f, 0, 0.1, IPL_HEALTH_DOWN);
    assert_int_equal(s_route(f, &req), IPL_ROUTE_REJECTED);
    assert_int_equal(f->d.http_status, 503);
    assert_string_equal(f->d.reason, "keep_local");
    assert_non_null(strstr(f->d.detail, "personal data stays"));
    assert_null(f->d.provider);
    // without the label the same request overflows to the provider
    req.nlabels = 0;
    assert_int_equal(s_route(f, &req), IPL_ROUTE_OK);
    s_assert_provider(f, "overflow");
}

/* reject: the rule's status (503 when none) and reason; no candidates needed. */
static void test_reject(void **state)
{
    s_fix_t *f = *state;
    static char *tenants[] = {"suspended"};
    static ipl_rule_t rules[] = {
        {.policy = "g", .name = "blocked", .tenants = tenants, .tenants_len = 1, S_ANY,
         .action = "reject", .reason = "tenant suspended", .status = 403},
        {.policy = "g", .name = "huge", .prompt_min = 1000, S_ANY, .action = "reject",
         .reason = "too long"},
    };
    s_rules(f, rules, 2);
    decider_request_t req = s_req(f, "nothing-serves-this");
    req.tenant = "suspended";
    assert_int_equal(s_route(f, &req), IPL_ROUTE_REJECTED);
    assert_int_equal(f->d.http_status, 403);
    assert_string_equal(f->d.detail, "tenant suspended");
    req.tenant = "ok";
    req.model = "m";
    req.prompt_tokens = 5000;
    assert_int_equal(s_route(f, &req), IPL_ROUTE_REJECTED);
    assert_int_equal(f->d.http_status, 503);
    assert_string_equal(f->d.rule->name, "huge");
    req.prompt_tokens = 400;
    assert_int_equal(s_route(f, &req), IPL_ROUTE_OK);
    assert_null(f->d.rule);
    req.model = "nothing-serves-this";
    assert_int_equal(s_route(f, &req), IPL_ROUTE_NO_POOL);
}

/* admitBatch: deferred while the pool's mean KV use is at or over the threshold. */
static void test_admit_batch(void **state)
{
    s_fix_t *f = *state;
    static char *hdrs[] = {"x-class=batch"};
    static ipl_rule_t rules[] = {{.policy = "r", .name = "batch", .headers = hdrs,
                                  .headers_len = 1, S_ANY, .action = "admitBatch",
                                  .max_utilization_percent = 60}};
    s_rules(f, rules, 1);
    char *headers[] = {"x-other=1", "x-class=batch"};
    decider_request_t req = s_req(f, "m");
    req.headers = headers;
    req.nheaders = 2;
    s_loads(f, 0, 0.9, IPL_HEALTH_UP);
    assert_int_equal(s_route(f, &req), IPL_ROUTE_DEFERRED);
    assert_int_equal(f->d.retry_after_ms, 500);
    assert_non_null(strstr(f->d.detail, "90%"));
    s_loads(f, 0, 0.2, IPL_HEALTH_UP);
    assert_int_equal(s_route(f, &req), IPL_ROUTE_OK);
    assert_string_equal(f->d.rule->name, "batch");
    // interactive work is not the rule's
    s_loads(f, 0, 0.9, IPL_HEALTH_UP);
    headers[1] = "x-class=interactive";
    assert_int_equal(s_route(f, &req), IPL_ROUTE_OK);
    assert_null(f->d.rule);
}

/* spill: to the provider above enter, back below exit, steady in between; a minimum hold. */
static void test_spill_hysteresis(void **state)
{
    s_fix_t *f = *state;
    static ipl_rule_t rules[] = {{.policy = "r", .name = "burst", S_ANY, .action = "spill",
                                  .provider = "cloud", .while_above_slo = true,
                                  .enter_percent = 100, .exit_percent = 80,
                                  .min_hold_ms = 1000}};
    s_rules(f, rules, 1);
    decider_request_t req = s_req(f, "m");
    struct {
        uint64_t running; // every worker's: predicted 400 + 10 R ms, SLO 800
        uint64_t mono_ms;
        bool spill;
    } steps[] = {
        {10, 1000, false}, // 500 ms: 62%
        {50, 2000, true},  // 900 ms: 112% > 100: spill
        {32, 2500, true},  // 720 ms: 90%, between: stays
        {20, 2600, true},  // 600 ms: 75% < 80, but held 600 ms < 1000: stays
        {20, 3100, false}, // held 1100 ms: back
        {32, 3200, false}, // 90%: stays local
        {45, 3300, false}, // 850 ms: 106%, but held 200 ms: stays local
        {45, 4200, true},  // held 1100 ms: spill again
    };
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        s_loads(f, steps[i].running, 0.5, IPL_HEALTH_UP);
        assert_int_equal(s_route_at(f, &req, steps[i].mono_ms), IPL_ROUTE_OK);
        if (steps[i].spill)
            s_assert_provider(f, "spill");
        else
            assert_int_equal(f->d.target, DECIDER_TARGET_WORKER);
        assert_string_equal(f->d.rule->name, "burst");
    }
}

/* prefer: the preferred set, unless the holder holds the prefix and predicts less. */
static void test_prefer_unless_holder(void **state)
{
    s_fix_t *f = *state;
    static ipl_rule_t rules[] = {{.policy = "r", .name = "small-first", S_ANY,
                                  .action = "prefer", .pool = "chat", .target = "small",
                                  .unless_holder = "large"}};
    s_rules(f, rules, 1);
    decider_request_t req = s_req(f, "m");
    req.terse = false;
    assert_int_equal(s_route(f, &req), IPL_ROUTE_OK);
    s_assert_worker_set(f, "small"); // all idle, nobody holds it: 400 ms each
    assert_non_null(strstr(f->d.detail, "preferred"));
    // l1 holds 80 of the 100 blocks: 80 ms < 400 ms
    ipl_msg_t m = {.type = IPL_MSG_KV_EVENT};
    m.u.kv_event = (ipl_kv_event_t){
        .worker = "l1", .op = IPL_KV_OP_STORED, .hashes = s_hashes, .hashes_len = 80};
    assert_int_equal(decider_state_apply(f->state, &m, 0), 0);
    assert_int_equal(s_route(f, &req), IPL_ROUTE_OK);
    s_assert_worker_set(f, "large");
    assert_string_equal(f->d.worker->name, "l1");
    // ... unless it is so busy that small predicts less: 80 + 10×50 = 580 > 400
    s_load(f->state, "l1", 50, 0.5, IPL_HEALTH_UP);
    assert_int_equal(s_route(f, &req), IPL_ROUTE_OK);
    s_assert_worker_set(f, "small");
}

/* route: a subset of the pool's targets; another pool; a provider target. */
static void test_route_targets(void **state)
{
    s_fix_t *f = *state;
    static char *only_large[] = {"large"}, *only_cloud[] = {"cloud"}, *t_a[] = {"team-a"},
                *t_b[] = {"team-b"};
    static ipl_rule_t rules[] = {
        {.policy = "r", .name = "a-large", .tenants = t_a, .tenants_len = 1, S_ANY,
         .action = "route", .pool = "chat", .targets = only_large, .targets_len = 1},
        {.policy = "r", .name = "b-cloud", .tenants = t_b, .tenants_len = 1, S_ANY,
         .action = "route", .pool = "chat", .targets = only_cloud, .targets_len = 1},
        {.policy = "r", .name = "rest-big", S_ANY, .action = "route", .pool = "big"},
    };
    s_rules(f, rules, 3);
    decider_request_t req = s_req(f, "m");
    req.tenant = "team-a";
    for (int i = 0; i < 4; i++) { // never small, however loaded large is
        assert_int_equal(s_route(f, &req), IPL_ROUTE_OK);
        s_assert_worker_set(f, "large");
    }
    req.tenant = "team-b";
    assert_int_equal(s_route(f, &req), IPL_ROUTE_OK);
    s_assert_provider(f, "rule_provider");
    req.tenant = "team-c";
    assert_int_equal(s_route(f, &req), IPL_ROUTE_OK);
    assert_string_equal(f->d.worker->name, "b1");
    assert_string_equal(f->d.pool->name, "big");
}

/* Aliases: resolved (weighted), and failover to the next model when the target has no worker. */
static void test_aliases(void **state)
{
    s_fix_t *f = *state;
    decider_request_t req = s_req(f, "assistant");
    assert_int_equal(s_route(f, &req), IPL_ROUTE_OK);
    assert_string_equal(f->d.pool->name, "chat");
    int chat = 0, big = 0;
    req.model = "split";
    for (int i = 0; i < 400; i++) {
        assert_int_equal(s_route(f, &req), IPL_ROUTE_OK);
        chat += !strcmp(f->d.pool->name, "chat");
        big += !strcmp(f->d.pool->name, "big");
    }
    assert_int_equal(chat + big, 400);
    assert_true(chat > 250 && chat < 350); // 3:1
    // "fo" → pool chat; chat's workers down → its overflow provider comes first
    s_load(f->state, "s1", 0, 0, IPL_HEALTH_DOWN);
    s_load(f->state, "s2", 0, 0, IPL_HEALTH_DOWN);
    s_load(f->state, "l1", 0, 0, IPL_HEALTH_DOWN);
    req.model = "fo";
    assert_int_equal(s_route(f, &req), IPL_ROUTE_OK);
    s_assert_provider(f, "overflow");
    // with a keepLocal rule there is no provider: the alias fails over to big-m (local too)
    static ipl_rule_t rules[] = {{.policy = "g", .name = "local", S_ANY, .action = "keepLocal"}};
    s_rules(f, rules, 1);
    req.rules = f->rules;
    assert_int_equal(s_route(f, &req), IPL_ROUTE_OK);
    assert_string_equal(f->d.worker->name, "b1");
    // ... and when that is down too, refused with the rule's reason
    s_load(f->state, "b1", 0, 0, IPL_HEALTH_DOWN);
    assert_int_equal(s_route(f, &req), IPL_ROUTE_REJECTED);
    assert_string_equal(f->d.reason, "keep_local");
    assert_null(f->d.provider);
}

/* Alias failover proper: no provider in the way. */
static void test_alias_failover(void **state)
{
    s_fix_t *f = *state;
    s_targets[2].role = "primary"; // cloud no longer overflow: nothing to overflow to
    s_load(f->state, "s1", 0, 0, IPL_HEALTH_DOWN);
    s_load(f->state, "s2", 0, 0, IPL_HEALTH_DOWN);
    s_load(f->state, "l1", 0, 0, IPL_HEALTH_DOWN);
    decider_request_t req = s_req(f, "fo");
    req.terse = false;
    int rc = s_route(f, &req);
    s_targets[2].role = "overflow";
    assert_int_equal(rc, IPL_ROUTE_OK);
    assert_string_equal(f->d.worker->name, "b1");
    assert_non_null(strstr(f->d.detail, "failed over"));
}

/* A policy with rules decided without its compiled rules is refused, never routed. */
static void test_rules_missing_is_refused(void **state)
{
    s_fix_t *f = *state;
    static ipl_rule_t rules[] = {{.policy = "g", .name = "x", S_ANY, .action = "keepLocal"}};
    s_rules(f, rules, 1);
    decider_request_t req = s_req(f, "m");
    req.rules = NULL;
    assert_int_equal(s_route(f, &req), IPL_ROUTE_REJECTED);
    assert_string_equal(f->d.reason, "policy_error");
    assert_int_equal(f->d.http_status, 503);
}

/* The lookups. */
static void test_targets(void **state)
{
    (void)state;
    ipl_policy_t p = s_policy(NULL, 0);
    const ipl_alias_t *a = NULL;
    assert_ptr_equal(decider_targets_resolve(&p, "m", 0.5, &a), &s_pools[0]);
    assert_null(a);
    assert_ptr_equal(decider_targets_resolve(&p, "assistant", 0.5, &a), &s_pools[0]);
    assert_string_equal(a->name, "assistant");
    assert_ptr_equal(decider_targets_resolve(&p, "split", 0.74, NULL), &s_pools[0]);
    assert_ptr_equal(decider_targets_resolve(&p, "split", 0.76, NULL), &s_pools[1]);
    assert_ptr_equal(decider_targets_resolve(&p, "split", 7.0, NULL), &s_pools[0]); // clamped
    assert_null(decider_targets_resolve(&p, "nothing", 0, NULL));
    assert_null(decider_targets_resolve(&p, NULL, 0, NULL));
    assert_string_equal(decider_targets_provider_target(&p, &s_pools[0], "overflow")->name,
                        "cloud");
    assert_null(decider_targets_provider_target(&p, &s_pools[1], NULL));
    assert_string_equal(decider_targets_remote_model(&p, "cloud", "m"), "remote-m");
    assert_null(decider_targets_remote_model(&p, "cloud", "big-m"));
    assert_null(decider_targets_backend(&p, "nope"));
    assert_string_equal(decider_targets_target(&p, &s_pools[0], "large")->kind, "workerSet");
    // an alias cycle ends (the compiler rejects them; the lookup must not loop)
    ipl_alias_t cyc[] = {{.name = "x"}, {.name = "y"}};
    ipl_alias_target_t ct[] = {{.alias = "x", .kind = "model", .name = "y", .weight = 1},
                               {.alias = "y", .kind = "model", .name = "x", .weight = 1}};
    p.aliases = cyc;
    p.aliases_len = 2;
    p.alias_targets = ct;
    p.alias_targets_len = 2;
    assert_null(decider_targets_resolve(&p, "x", 0.3, NULL));
}

int main(void)
{
    ipl_log_set_level(IPL_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_overflow_provider_without_rules, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_avoid, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_keep_local, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_reject, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_admit_batch, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_spill_hysteresis, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_prefer_unless_holder, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_route_targets, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_aliases, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_alias_failover, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_rules_missing_is_refused, s_setup, s_teardown),
        cmocka_unit_test(test_targets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
