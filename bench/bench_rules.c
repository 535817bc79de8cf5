/*
 * bench_rules — InferencePolicy rule evaluation (libs/decision/decider_rules) per request, in
 * one thread: what the rules will add to a decision once the router evaluates them (issue 12:
 * at most 2 us at p50 with 200 rules and 100 tenants).
 *
 * The policy, built by hand as libs/policy would publish it: `--rules` rules (200) over
 * `--tenants` tenants (100), 8 models and 2 aliases, in evaluation order:
 *   - 8 guardrails first: a label (pii → keepLocal), a header with a value and a night window
 *     (admitBatch), a huge prompt (reject), a suspended tenant (reject), pool state (queue depth
 *     and KV utilization → route; predicted TTFT above the SLO → spill), a header present;
 *   - then per-tenant rules, each on 1-3 tenants and 1-2 models or aliases (route or prefer),
 *     every 7th also bounding the prompt, every 11th wanting a label, every 13th a header;
 *   - the last few on a model only (no catch-all: some requests match nothing).
 * `--requests` inputs (4096 distinct, cycled) draw a tenant (5% anonymous, 5% unknown), a model
 * or alias, 3 headers (sometimes the batch class), rarely labels, a prompt of 10..20,000
 * tokens (rarely 200,000), pool state and a minute of the week, so matches land at every depth;
 * the depth mix goes to stderr.
 *
 *   policy_eval_p50_us, policy_eval_p99_us   one decider_rules_eval each, timed alone (the
 *                                            clock read, ~20-30 ns, is included); p99: median of
 *                                            5 rounds' p99
 *   policy_evals_per_s                       evaluations per second of this thread's CPU time,
 *                                            back to back, untimed
 *
 *   build/bench/bench_rules [--rules 200] [--tenants 100] [--requests 200000] [--seed 1]
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "decider_rules.h"
#include "ipl_proto.h"

#define S_NREQ    4096
#define S_NMODELS 8
#define S_GUARDS  8

static const char *s_models[] = {"m0", "m1", "m2", "m3", "m4", "m5", "m6", "m7", "chat", "big"};
#define S_NNAMES (sizeof s_models / sizeof *s_models)

static char *s_dup(const char *s)
{
    char *d = strdup(s);
    if (!d) BENCH_DIE("out of memory");
    return d;
}

/* A strs field of n strings (owned by the bench, freed by s_free_strs). */
static char **s_strs(uint32_t n)
{
    char **v = calloc(n ? n : 1, sizeof *v);
    if (!v) BENCH_DIE("out of memory");
    return v;
}

static void s_free_strs(char **v, uint32_t n)
{
    for (uint32_t i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}

static char *s_tenant(int t)
{
    char b[32];
    snprintf(b, sizeof b, "tenant-%03d", t);
    return s_dup(b);
}

static void s_guard(ipl_rule_t *r, int i)
{
    switch (i) {
    case 0:
        r->labels = s_strs(1), r->labels_len = 1, r->labels[0] = s_dup("pii");
        r->action = "keepLocal", r->reason = "personal data stays local";
        break;
    case 1:
        r->headers = s_strs(1), r->headers_len = 1;
        r->headers[0] = s_dup("x-inferplane-class=batch");
        r->has_time = true, r->days = 0x1f, r->from_minute = 22 * 60, r->to_minute = 6 * 60;
        r->action = "admitBatch", r->max_utilization_percent = 60;
        break;
    case 2:
        r->prompt_min = 100000, r->action = "reject", r->status = 413;
        break;
    case 3:
        r->tenants = s_strs(1), r->tenants_len = 1, r->tenants[0] = s_dup("suspended");
        r->action = "reject", r->status = 403, r->reason = "suspended";
        break;
    case 4:
        r->models = s_strs(1), r->models_len = 1, r->models[0] = s_dup("m1");
        r->has_queue_depth = true, r->queue_depth_above = 32;
        r->has_kv_utilization = true, r->kv_utilization_above_percent = 90;
        r->action = "route", r->pool = "p1";
        break;
    case 5:
        r->models = s_strs(1), r->models_len = 1, r->models[0] = s_dup("chat");
        r->predicted_ttft_above_slo = 2;
        r->action = "spill", r->provider = "burst", r->while_above_slo = true;
        r->enter_percent = 100, r->exit_percent = 80, r->min_hold_ms = 5000;
        break;
    case 6:
        r->labels = s_strs(2), r->labels_len = 2;
        r->labels[0] = s_dup("eu"), r->labels[1] = s_dup("internal");
        r->action = "route", r->pool = "p0";
        break;
    default:
        r->headers = s_strs(1), r->headers_len = 1, r->headers[0] = s_dup("x-debug-route");
        r->action = "route", r->pool = "p2";
        break;
    }
}

static void s_policy(ipl_policy_t *p, int nrules, int ntenants, bench_rng_t *rng)
{
    static ipl_pool_t pools[S_NMODELS];
    static char pool_names[S_NMODELS][8];
    for (int i = 0; i < S_NMODELS; i++) {
        snprintf(pool_names[i], sizeof pool_names[i], "p%d", i);
        pools[i] = (ipl_pool_t){.name = pool_names[i],
                                .model = (char *)s_models[i],
                                .strategy = "ttft",
                                .ttft_slo_ms = 500};
    }
    static ipl_alias_t aliases[] = {{.policy = "bench", .name = "big"},
                                    {.policy = "bench", .name = "chat"}};
    static ipl_alias_target_t targets[] = {
        {.alias = "big", .kind = "pool", .name = "p7", .weight = 1},
        {.alias = "chat", .kind = "model", .name = "m0", .weight = 9},
        {.alias = "chat", .kind = "model", .name = "m1", .weight = 1}};
    ipl_rule_t *rules = calloc((size_t)nrules, sizeof *rules);
    if (!rules) BENCH_DIE("out of memory");
    for (int i = 0; i < nrules; i++) {
        ipl_rule_t *r = &rules[i];
        char name[32];
        snprintf(name, sizeof name, "rule-%03d", i);
        r->policy = "bench", r->name = s_dup(name), r->index = (uint64_t)i;
        r->prompt_max = UINT64_MAX;
        if (i < S_GUARDS) {
            s_guard(r, i);
            continue;
        }
        if (i >= nrules - 4) { /* model only */
            r->models = s_strs(1), r->models_len = 1;
            r->models[0] = s_dup(s_models[i % S_NMODELS]);
            r->action = "route", r->pool = pool_names[i % S_NMODELS];
            continue;
        }
        r->tenants_len = (uint32_t)bench_range(rng, 1, 3);
        r->tenants = s_strs(r->tenants_len);
        for (uint32_t k = 0; k < r->tenants_len; k++)
            r->tenants[k] = s_tenant((int)bench_range(rng, 0, (uint64_t)ntenants - 1));
        r->models_len = (uint32_t)bench_range(rng, 1, 2);
        r->models = s_strs(r->models_len);
        for (uint32_t k = 0; k < r->models_len; k++)
            r->models[k] = s_dup(s_models[bench_range(rng, 0, S_NNAMES - 1)]);
        if (i % 7 == 0) r->prompt_max = 4000;
        if (i % 11 == 0) r->labels = s_strs(1), r->labels_len = 1, r->labels[0] = s_dup("eu");
        if (i % 13 == 0)
            r->headers = s_strs(1), r->headers_len = 1, r->headers[0] = s_dup("x-team=blue");
        if (i % 2) {
            r->action = "route", r->pool = pool_names[i % S_NMODELS];
        } else {
            r->action = "prefer", r->pool = pool_names[i % S_NMODELS];
            r->target = "small", r->unless_holder = "large";
        }
    }
    *p = (ipl_policy_t){.version = 1,
                        .source = "bench",
                        .pools = pools,
                        .pools_len = S_NMODELS,
                        .rules = rules,
                        .rules_len = (uint32_t)nrules,
                        .aliases = aliases,
                        .aliases_len = 2,
                        .alias_targets = targets,
                        .alias_targets_len = 3};
}

static void s_policy_free(ipl_policy_t *p)
{
    for (uint32_t i = 0; i < p->rules_len; i++) {
        ipl_rule_t *r = &p->rules[i];
        free(r->name);
        s_free_strs(r->tenants, r->tenants_len);
        s_free_strs(r->models, r->models_len);
        s_free_strs(r->labels, r->labels_len);
        s_free_strs(r->headers, r->headers_len);
    }
    free(p->rules);
}

typedef struct {
    decider_rules_input_t in;
    decider_rules_header_t headers[3];
    const char *labels[2];
} s_req_t;

static void s_requests(s_req_t *reqs, char **tenant_names, int ntenants, bench_rng_t *rng)
{
    static const char *const label_sets[][2] = {{"pii", NULL}, {"eu", NULL}, {"eu", "internal"}};
    for (int k = 0; k < S_NREQ; k++) {
        s_req_t *q = &reqs[k];
        memset(q, 0, sizeof *q);
        uint64_t d = bench_range(rng, 0, 99);
        q->in.tenant = d < 5    ? ""
                       : d < 10 ? "tenant-unknown"
                       : d < 11 ? "suspended"
                                : tenant_names[bench_range(rng, 0, (uint64_t)ntenants - 1)];
        q->in.model = s_models[bench_range(rng, 0, S_NNAMES - 1)];
        q->headers[0] = (decider_rules_header_t){"content-type", "application/json"};
        q->headers[1] = (decider_rules_header_t){"authorization", "Bearer x"};
        uint64_t h = bench_range(rng, 0, 99);
        q->headers[2] = h < 5    ? (decider_rules_header_t){"x-inferplane-class", "batch"}
                        : h < 20 ? (decider_rules_header_t){"x-team", "blue"}
                                 : (decider_rules_header_t){"user-agent", "bench"};
        q->in.headers = q->headers, q->in.nheaders = 3;
        uint64_t l = bench_range(rng, 0, 99);
        if (l < 6) {
            const char *const *set = label_sets[l % 3];
            q->labels[0] = set[0], q->labels[1] = set[1];
            q->in.labels = q->labels, q->in.nlabels = set[1] ? 2 : 1;
        }
        q->in.prompt_tokens = bench_range(rng, 0, 999) == 0 ? 200000 : bench_range(rng, 10, 20000);
        q->in.queue_depth = bench_range(rng, 0, 40);
        q->in.kv_utilization_percent = bench_range(rng, 20, 99);
        q->in.predicted_ttft_ms = (double)bench_range(rng, 50, 800);
        q->in.ttft_slo_ms = 500;
        q->in.minute_of_week = (uint32_t)bench_range(rng, 0, DECIDER_RULES_MINUTES_WEEK - 1);
    }
}

int main(int argc, char **argv)
{
    int nrules = (int)bench_arg_int(argc, argv, "rules", 200);
    int ntenants = (int)bench_arg_int(argc, argv, "tenants", 100);
    size_t nreq = (size_t)bench_arg_int(argc, argv, "requests", 200000);
    bench_rng_t rng = bench_rng((uint64_t)bench_arg_int(argc, argv, "seed", 1));
    if (nrules < S_GUARDS + 8 || ntenants < 1 || nreq < 1000) BENCH_DIE("arguments too small");

    ipl_policy_t policy;
    s_policy(&policy, nrules, ntenants, &rng);
    decider_rules_t *rules = NULL;
    char err[256];
    uint64_t b0 = bench_now_ns();
    if (decider_rules_new(&policy, &rules, err, sizeof err) != 0)
        BENCH_DIE("decider_rules_new: %s", err);
    double build_us = (double)(bench_now_ns() - b0) / 1e3;

    char **tenant_names = calloc((size_t)ntenants, sizeof *tenant_names);
    s_req_t *reqs = calloc(S_NREQ, sizeof *reqs);
    uint64_t *lat = malloc(nreq * sizeof *lat);
    if (!tenant_names || !reqs || !lat) BENCH_DIE("out of memory");
    for (int t = 0; t < ntenants; t++)
        tenant_names[t] = s_tenant(t);
    s_requests(reqs, tenant_names, ntenants, &rng);

    /* The depth mix, once over the distinct requests. */
    decider_rules_result_t out;
    size_t none = 0, guard = 0, deep = 0, depth_sum = 0, matched = 0;
    for (int k = 0; k < S_NREQ; k++) {
        if (decider_rules_eval(rules, &reqs[k].in, &out) == DECIDER_RULES_NONE) {
            none++;
            continue;
        }
        matched++;
        depth_sum += (size_t)out.rule;
        guard += out.rule < S_GUARDS;
        deep += out.rule >= nrules / 2;
    }
    BENCH_LOG("%d rules, %d tenants, built in %.0f us; of %d requests: %zu match nothing, %zu a "
              "guardrail, %zu a rule in the second half; mean matched index %.1f",
              nrules, ntenants, build_us, S_NREQ, none, guard, deep,
              matched ? (double)depth_sum / (double)matched : 0.0);

    size_t warm = nreq / 10;
    uint64_t sink = 0;
    for (size_t k = 0; k < warm + nreq; k++) {
        const decider_rules_input_t *in = &reqs[k % S_NREQ].in;
        uint64_t t0 = bench_now_ns();
        decider_rules_action_t a = decider_rules_eval(rules, in, &out);
        uint64_t t1 = bench_now_ns();
        sink += (uint64_t)a + (uint64_t)(out.rule + 1);
        if (k >= warm) lat[k - warm] = t1 - t0;
    }
    uint64_t c0 = bench_cpu_ns();
    for (size_t k = 0; k < nreq; k++)
        sink += (uint64_t)decider_rules_eval(rules, &reqs[k % S_NREQ].in, &out);
    double cpu_s = (double)(bench_cpu_ns() - c0) / 1e9;
    BENCH_LOG("checksum %" PRIu64, sink);

    uint64_t p99r[BENCH_ROUNDS];
    double p99 = (double)bench_p99_of_rounds(lat, nreq, p99r) / 1e3;
    double p50 = (double)bench_quantile(lat, nreq, 0.5) / 1e3;
    char note[256];
    snprintf(note, sizeof note,
             "decider_rules_eval, %d rules, %d tenants, %zu%% match nothing; p99: median of %d "
             "rounds",
             nrules, ntenants, none * 100 / S_NREQ, BENCH_ROUNDS);
    bench_figure("policy_eval_p50_us", p50, "us", note);
    bench_figure("policy_eval_p99_us", p99, "us", note);
    bench_figure("policy_evals_per_s", (double)nreq / cpu_s, "evals/s",
                 "one thread, back to back, per second of its CPU time");

    free(lat);
    free(reqs);
    for (int t = 0; t < ntenants; t++)
        free(tenant_names[t]);
    free(tenant_names);
    decider_rules_destroy(&rules);
    s_policy_free(&policy);
    return 0;
}
