/*
 * inferplane-clustersim — evaluates routing strategies on a simulated cluster, in virtual
 * time, deterministically by seed: for each workload and each strategy, the same requests go
 * through the decider's real router to simulated vLLM engines (clustersim_cluster.h), and the
 * report compares TTFT, end-to-end latency, goodput and cache hits (clustersim_report.h).
 *
 * stdout carries only the results (a table, or with --json one JSON object per figure), so
 * the same seed prints the same bytes; notes and timings go to stderr.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clustersim_cluster.h"
#include "clustersim_report.h"
#include "clustersim_workload.h"
#include "decider_router.h"
#include "ipl_clock.h"
#include "ipl_config.h"
#include "ipl_error.h"
#include "ipl_log.h"
#include "ipl_split.h"
#include "ipl_strategy.h"
#include "sim_profile.h"

#define S_MAX_ITEMS 32

typedef struct {
    char *workloads, *trace, *strategies, *pool_mode, *profile, *delay, *log_level, *csv;
    int64_t requests, prefix_groups, prefix_tokens, suffix_tokens, output_tokens, turns, models,
        tenants, pools, workers_per_pool, num_gpu_blocks, max_num_seqs, max_batched, block_size,
        sample_ms, seed, load_gate, ttl_ms, mooncake_block;
    double rate, think_s, trace_speed, slo_ttft_s, group_skew;
    bool json, calibrate, verbose;
} s_flags_t;

// The default comparison: every strategy of the one list (ipl_strategy.h) in its order, the
// measurement-only ones (oracle) last: "ttft,random,...,prefix-hash,oracle". Static.
static const char *s_default_strategies(void)
{
    static char list[512];
    size_t used = 0;
    for (int measurement = 0; measurement <= 1; measurement++)
        for (size_t i = 0; i < ipl_strategy_count(); i++)
            if (ipl_strategy_measurement(i) == (bool)measurement)
                used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", used ? "," : "",
                                         ipl_strategy_name(i));
    return list;
}

static void s_declare(ipl_config_t *c, s_flags_t *f)
{
    ipl_config_add(c, "workload", IPL_OPT_STR, &f->workloads, "shared-prefix",
                   "comma-separated built-in workloads: shared-prefix, multi-turn, no-prefix");
    ipl_config_add(c, "trace", IPL_OPT_STR, &f->trace, NULL,
                   "a JSONL trace instead (ours or Mooncake-style; see docs/clustersim.md)");
    ipl_config_add(c, "strategies", IPL_OPT_STR, &f->strategies, s_default_strategies(),
                   "comma-separated strategies to compare (unknown ones are skipped)");
    ipl_config_add(c, "requests", IPL_OPT_INT, &f->requests, "0",
                   "requests per workload (0: the workload's default; a trace: all lines)");
    ipl_config_add(c, "rate", IPL_OPT_DOUBLE, &f->rate, "0",
                   "Poisson arrivals per second (0: the workload's default)");
    ipl_config_add(c, "prefix-groups", IPL_OPT_INT, &f->prefix_groups, "-1",
                   "shared prefixes (multi-turn: system prompts); -1: the workload's default");
    ipl_config_add(c, "group-skew", IPL_OPT_DOUBLE, &f->group_skew, "0",
                   "popularity of prefix group g ∝ 1/(g+1)^SKEW (Zipf); 0: uniform");
    ipl_config_add(c, "prefix-tokens", IPL_OPT_INT, &f->prefix_tokens, "-1",
                   "shared prefix length; -1: the workload's default");
    ipl_config_add(c, "suffix-tokens", IPL_OPT_INT, &f->suffix_tokens, "-1",
                   "unique tokens per prompt (multi-turn: per user message; traces: own tokens "
                   "when prefix_tokens is absent); -1: the default");
    ipl_config_add(c, "output-tokens", IPL_OPT_INT, &f->output_tokens, "-1",
                   "output tokens per request; -1: the workload's default");
    ipl_config_add(c, "turns", IPL_OPT_INT, &f->turns, "-1",
                   "multi-turn: turns per conversation; -1: the default (5)");
    ipl_config_add(c, "think-s", IPL_OPT_DOUBLE, &f->think_s, "-1",
                   "multi-turn: mean think time after an answer (s); -1: the default (5)");
    ipl_config_add(c, "models", IPL_OPT_INT, &f->models, "1",
                   "generated workloads: model names to spread requests over");
    ipl_config_add(c, "tenants", IPL_OPT_INT, &f->tenants, "1",
                   "generated workloads: tenants to spread requests over");
    ipl_config_add(c, "trace-speed", IPL_OPT_DOUBLE, &f->trace_speed, "1",
                   "replay a trace this many times faster");
    ipl_config_add(c, "mooncake-block-tokens", IPL_OPT_INT, &f->mooncake_block, "512",
                   "tokens per hash id in Mooncake traces");
    ipl_config_add(c, "pools", IPL_OPT_INT, &f->pools, "2", "worker sets");
    ipl_config_add(c, "workers-per-pool", IPL_OPT_INT, &f->workers_per_pool, "3",
                   "workers in each worker set");
    ipl_config_add(c, "pool-mode", IPL_OPT_STR, &f->pool_mode, "shared",
                   "shared: one InferencePool over every worker set; split: one per worker set, "
                   "each serving some of the workload's models");
    ipl_config_add(c, "profile", IPL_OPT_STR, &f->profile, "l40s-27b-fp8",
                   "simulated GPU + model (sim_profile)");
    ipl_config_add(c, "num-gpu-blocks", IPL_OPT_INT, &f->num_gpu_blocks, "0",
                   "KV capacity per worker in blocks (0: the profile's)");
    ipl_config_add(c, "max-num-seqs", IPL_OPT_INT, &f->max_num_seqs, "256",
                   "running requests per worker at most");
    ipl_config_add(c, "max-num-batched-tokens", IPL_OPT_INT, &f->max_batched, "8192",
                   "tokens per engine step at most");
    ipl_config_add(c, "block-size", IPL_OPT_INT, &f->block_size, "16", "tokens per KV block");
    ipl_config_add(c, "event-delay-ms", IPL_OPT_STR, &f->delay, "5-50",
                   "KV events and load samples reach the decider after this many ms of virtual "
                   "time: one value, or MIN-MAX (uniform)");
    ipl_config_add(c, "sample-period-ms", IPL_OPT_INT, &f->sample_ms, "100",
                   "load sample period per worker (virtual ms)");
    ipl_config_add(c, "slo-ttft-s", IPL_OPT_DOUBLE, &f->slo_ttft_s, "1",
                   "TTFT SLO for goodput (s)");
    ipl_config_add(c, "seed", IPL_OPT_INT, &f->seed, "1",
                   "seed of the workload, the engines, the delays and the router (>= 1)");
    ipl_config_add(c, "load-gate", IPL_OPT_INT, &f->load_gate, "4",
                   "the router's load gate (decider --load-gate)");
    ipl_config_add(c, "optimistic-ttl-ms", IPL_OPT_INT, &f->ttl_ms, "2000",
                   "the router's optimistic-prefix TTL (decider --optimistic-ttl-ms)");
    ipl_config_add(c, "calibrate", IPL_OPT_BOOL, &f->calibrate, "true",
                   "feed observed TTFTs back to the router's predictor");
    ipl_config_add(c, "csv", IPL_OPT_STR, &f->csv, NULL,
                   "also write one CSV line per request and run to this file (predicted vs "
                   "observed TTFT and cached tokens, the predictor's features)");
    ipl_config_add(c, "json", IPL_OPT_BOOL, &f->json, "false",
                   "print one JSON object per figure and line instead of the table");
    ipl_config_add(c, "verbose", IPL_OPT_BOOL, &f->verbose, "false",
                   "print each run's counters and timing to stderr");
    ipl_config_add(c, "log-level", IPL_OPT_STR, &f->log_level, "warn",
                   "debug, info, warn, error or off");
}

// Cuts a comma-separated list (ipl_split) in place into at most S_MAX_ITEMS trimmed items.
static size_t s_split(char *list, char **items)
{
    const char *cursor = list, *item;
    size_t n = 0, len;
    while (n < S_MAX_ITEMS && ipl_split_next(&cursor, &item, &len)) {
        items[n] = list + (item - list);
        items[n++][len] = '\0';
    }
    return n;
}

static int s_parse_delay(const char *text, double *lo, double *hi)
{
    char *end;
    double a = strtod(text, &end), b = a;
    if (end == text) return IPL_E_INVAL;
    if (*end == '-') {
        const char *rest = end + 1;
        b = strtod(rest, &end);
        if (end == rest) return IPL_E_INVAL;
    }
    if (*end || a < 0 || b < a || b > 3600000) return IPL_E_INVAL;
    *lo = a / 1000.0;
    *hi = b / 1000.0;
    return 0;
}

static const char *s_check(const s_flags_t *f)
{
    if (f->requests < 0 || f->requests > 100000000) return "--requests must be 0..100000000";
    if (f->rate < 0) return "--rate must be >= 0";
    if (!(f->group_skew >= 0) || f->group_skew > 10) return "--group-skew must be 0..10";
    if (f->models < 1 || f->tenants < 1 || f->models > 100000 || f->tenants > 100000)
        return "--models and --tenants must be 1..100000";
    if (f->pools < 1 || f->workers_per_pool < 1 || f->pools * f->workers_per_pool > 1024)
        return "--pools and --workers-per-pool must be >= 1, with at most 1024 workers in all";
    if (strcmp(f->pool_mode, "shared") && strcmp(f->pool_mode, "split"))
        return "--pool-mode must be shared or split";
    if (f->num_gpu_blocks < 0 || f->num_gpu_blocks > 100000000 || f->max_num_seqs < 1 ||
        f->max_batched < 1 || f->block_size < 1 || f->block_size > 4096 || f->sample_ms < 1)
        return "--num-gpu-blocks must be >= 0; --max-num-seqs, --max-num-batched-tokens, "
               "--sample-period-ms >= 1; --block-size 1..4096";
    if (f->seed < 1) return "--seed must be >= 1";
    if (!(f->slo_ttft_s > 0)) return "--slo-ttft-s must be > 0";
    if (!(f->trace_speed > 0) || f->mooncake_block < 1)
        return "--trace-speed must be > 0 and --mooncake-block-tokens >= 1";
    if (f->load_gate < 0 || f->ttl_ms < 0) return "--load-gate and --optimistic-ttl-ms >= 0";
    if (f->turns == 0 || f->turns < -1 || f->prefix_groups < -1 || f->prefix_tokens < -1 ||
        f->suffix_tokens < -1 || f->output_tokens == 0 || f->output_tokens < -1 ||
        (f->think_s < 0 && f->think_s != -1))
        return "workload sizes must be >= 0 (--turns, --output-tokens >= 1), or -1 for the "
               "default";
    return NULL;
}

static clustersim_workload_t *s_workload(const s_flags_t *f, const char *name, char *err,
                                         size_t errlen)
{
    if (!name) {
        clustersim_trace_config_t tc;
        clustersim_trace_config_defaults(&tc);
        tc.seed = (uint64_t)f->seed;
        tc.max_requests = (uint32_t)f->requests;
        tc.speed = f->trace_speed;
        tc.mooncake_block = (uint32_t)f->mooncake_block;
        if (f->suffix_tokens >= 0) tc.suffix_tokens = (uint32_t)f->suffix_tokens;
        clustersim_workload_t *wl = NULL;
        (void)clustersim_workload_read(f->trace, &tc, &wl, err, errlen);
        return wl;
    }
    clustersim_gen_kind_t kind;
    if (clustersim_gen_kind_parse(name, &kind) != 0) {
        snprintf(err, errlen,
                 "--workload: unknown workload \"%s\" (known: shared-prefix, multi-turn, "
                 "no-prefix; or --trace FILE)",
                 name);
        return NULL;
    }
    clustersim_gen_config_t g;
    clustersim_gen_config_defaults(kind, &g);
    g.seed = (uint64_t)f->seed;
    if (f->requests) g.requests = (uint32_t)f->requests;
    if (f->rate > 0) g.rate = f->rate;
    if (f->prefix_groups >= 0) g.prefix_groups = (uint32_t)f->prefix_groups;
    if (f->prefix_tokens >= 0) g.prefix_tokens = (uint32_t)f->prefix_tokens;
    if (f->suffix_tokens >= 0) g.suffix_tokens = (uint32_t)f->suffix_tokens;
    if (f->output_tokens > 0) g.output_tokens = (uint32_t)f->output_tokens;
    if (f->turns > 0) g.turns = (uint32_t)f->turns;
    if (f->think_s >= 0) g.think_s = f->think_s;
    g.group_skew = f->group_skew;
    g.models = (uint32_t)f->models;
    g.tenants = (uint32_t)f->tenants;
    clustersim_workload_t *wl = clustersim_workload_generate(kind, &g);
    if (!wl)
        snprintf(err, errlen,
                 "workload %s: invalid sizes (a prompt needs at least one token) or "
                 "out of memory",
                 name);
    return wl;
}

static void s_cluster_config(const s_flags_t *f, clustersim_config_t *c, double lo, double hi)
{
    clustersim_config_defaults(c);
    c->pools = (uint32_t)f->pools;
    c->workers_per_pool = (uint32_t)f->workers_per_pool;
    c->split = !strcmp(f->pool_mode, "split");
    c->profile = f->profile;
    c->num_gpu_blocks = (uint32_t)f->num_gpu_blocks;
    c->block_size = (uint32_t)f->block_size;
    c->max_num_seqs = (uint32_t)f->max_num_seqs;
    c->max_num_batched_tokens = (uint32_t)f->max_batched;
    c->delay_min_s = lo;
    c->delay_max_s = hi;
    c->sample_period_s = (double)f->sample_ms / 1000.0;
    c->seed = (uint64_t)f->seed;
    c->calibrate = f->calibrate;
    c->router.load_gate = (uint64_t)f->load_gate;
    c->router.optimistic_ttl_ms = (uint64_t)f->ttl_ms;
}

// One (workload, strategy) run into *fig. 0, or an IPL_E_* code with `err` set.
static int s_run(const clustersim_config_t *cc, const clustersim_workload_t *wl,
                 const char *strategy, const s_flags_t *f, FILE *csv, clustersim_figures_t *fig,
                 char *err, size_t errlen)
{
    uint64_t t0 = ipl_mono_ns();
    clustersim_cluster_t *cl = clustersim_cluster_new(cc, wl, strategy, err, errlen);
    if (!cl) return IPL_E_INVAL;
    int rc = clustersim_cluster_run(cl, err, errlen);
    if (rc == 0) {
        size_t n;
        const clustersim_record_t *recs = clustersim_cluster_records(cl, &n);
        fig->strategy = strategy;
        fig->workload = clustersim_workload_name(wl);
        rc = clustersim_figures_compute(recs, n, f->slo_ttft_s, fig);
        if (rc != 0) snprintf(err, errlen, "out of memory computing the figures");
        if (csv) clustersim_cluster_write_csv(cl, csv, ftell(csv) == 0);
    }
    double wall = (double)(ipl_mono_ns() - t0) / 1e9;
    clustersim_stats_t st;
    clustersim_cluster_stats(cl, &st);
    if (f->verbose)
        fprintf(stderr,
                "clustersim: %s/%s: %.2f s wall, %.1f s virtual, %llu events, %llu steps, "
                "%llu decisions (cache_hit %llu, load_gate %llu, other %llu), %llu rejected, "
                "%llu KV batches (%llu blocks, %llu unknown), %llu load samples, "
                "%llu preemptions, %llu stalls, queue peak %zu\n",
                fig->workload ? fig->workload : clustersim_workload_name(wl), strategy, wall,
                st.virtual_s, (unsigned long long)st.events, (unsigned long long)st.steps,
                (unsigned long long)st.decisions, (unsigned long long)st.reason_cache_hit,
                (unsigned long long)st.reason_load_gate, (unsigned long long)st.reason_other,
                (unsigned long long)st.rejected, (unsigned long long)st.kv_batches,
                (unsigned long long)st.kv_blocks, (unsigned long long)st.kv_unknown,
                (unsigned long long)st.load_samples, (unsigned long long)st.preemptions,
                (unsigned long long)st.stalls, st.max_queue);
    else
        fprintf(stderr, "clustersim: %s/%s: %.2f s wall, %u requests\n",
                clustersim_workload_name(wl), strategy, wall, clustersim_workload_count(wl));
    if (f->verbose) {
        char *model =
            decider_predictor_json(decider_router_predictor(clustersim_cluster_router(cl)));
        if (model) fprintf(stderr, "clustersim: %s predictor: %s\n", strategy, model);
        free(model);
    }
    clustersim_cluster_destroy(&cl);
    return rc;
}

int main(int argc, char **argv)
{
    s_flags_t f = {0};
    ipl_config_t *c =
        ipl_config_new("inferplane-clustersim", "cluster simulator: compares routing strategies on "
                                                "simulated vLLM workers in virtual time");
    if (!c) return 2;
    s_declare(c, &f);
    char err[1024];
    int rc = ipl_config_parse(c, argc, argv, err, sizeof err);
    if (rc != 0) {
        if (rc < 0) fprintf(stderr, "inferplane-clustersim: %s\n", err);
        ipl_config_destroy(&c);
        return rc > 0 ? 0 : 2;
    }
    ipl_log_level_t level;
    const char *bad = s_check(&f);
    double lo = 0, hi = 0;
    if (!bad && ipl_log_level_parse(f.log_level, &level) != 0)
        bad = "--log-level must be debug, info, warn, error or off";
    if (!bad && s_parse_delay(f.delay, &lo, &hi) != 0)
        bad = "--event-delay-ms must be MS or MIN-MAX (e.g. 5-50), 0 <= MIN <= MAX";
    char profiles[256], why[512];
    if (!bad && !sim_profile_find(f.profile)) {
        snprintf(why, sizeof why, "--profile: unknown profile \"%s\" (known: %s)", f.profile,
                 sim_profile_names(profiles, sizeof profiles));
        bad = why;
    }
    if (bad) {
        fprintf(stderr, "inferplane-clustersim: %s\n", bad);
        ipl_config_destroy(&c);
        return 2;
    }
    ipl_log_init("clustersim", level);

    char *strategies[S_MAX_ITEMS], *workloads[S_MAX_ITEMS];
    size_t nstrat = s_split(f.strategies, strategies), nwl = 0, nrun = 0;
    const char *runnable[S_MAX_ITEMS];
    for (size_t i = 0; i < nstrat; i++) {
        if (decider_router_strategy_known(strategies[i]))
            runnable[nrun++] = strategies[i];
        else
            fprintf(stderr,
                    "clustersim: note: strategy \"%s\" is not implemented by the decider "
                    "(known: %s); skipped\n",
                    strategies[i], decider_router_strategies());
    }
    if (f.trace)
        workloads[nwl++] = NULL;
    else
        nwl = s_split(f.workloads, workloads);
    if (nrun == 0 || nwl == 0) {
        fprintf(stderr, "inferplane-clustersim: nothing to run (no known strategy or workload)\n");
        ipl_config_destroy(&c);
        return 2;
    }
    clustersim_config_t cc;
    s_cluster_config(&f, &cc, lo, hi);

    FILE *csv = f.csv ? fopen(f.csv, "w") : NULL;
    if (f.csv && !csv) {
        fprintf(stderr, "inferplane-clustersim: --csv %s: cannot write it\n", f.csv);
        ipl_config_destroy(&c);
        return 2;
    }
    clustersim_figures_t *rows = calloc(nwl * nrun, sizeof *rows);
    clustersim_workload_t **wls = calloc(nwl, sizeof *wls);
    int status = rows && wls ? 0 : 1;
    size_t nrows = 0;
    uint64_t t0 = ipl_mono_ns();
    for (size_t w = 0; status == 0 && w < nwl; w++) {
        wls[w] = s_workload(&f, workloads[w], err, sizeof err);
        if (!wls[w]) {
            fprintf(stderr, "inferplane-clustersim: %s\n", err);
            status = 2;
            break;
        }
        for (size_t s = 0; s < nrun; s++) {
            clustersim_figures_t *fig = &rows[nrows];
            if (s_run(&cc, wls[w], runnable[s], &f, csv, fig, err, sizeof err) != 0) {
                fprintf(stderr, "inferplane-clustersim: %s/%s: %s\n",
                        clustersim_workload_name(wls[w]), runnable[s], err);
                status = 1;
                break;
            }
            nrows++;
            if (f.json) {
                clustersim_report_json(stdout, fig);
                fflush(stdout);
            }
        }
    }
    if (!f.json && nrows) clustersim_report_table(stdout, rows, nrows);
    fprintf(stderr, "clustersim: %zu runs in %.2f s; seed %lld, %lld workers, TTFT SLO %g s\n",
            nrows, (double)(ipl_mono_ns() - t0) / 1e9, (long long)f.seed,
            (long long)(f.pools * f.workers_per_pool), f.slo_ttft_s);
    for (size_t w = 0; wls && w < nwl; w++)
        clustersim_workload_destroy(&wls[w]);
    free(wls);
    free(rows);
    if (csv) fclose(csv);
    ipl_config_destroy(&c);
    return status;
}
