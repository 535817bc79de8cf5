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
    char *workloads, *trace, *strategies, *pool_mode, *profile, *delay, *log_level, *csv, *load,
        *pool_profiles, *pool_blocks;
    int64_t requests, prefix_groups, prefix_tokens, suffix_tokens, output_tokens, turns, models,
        tenants, pools, workers_per_pool, num_gpu_blocks, max_num_seqs, max_batched, block_size,
        sample_ms, seed, load_gate, ttl_ms, mooncake_block, prompt_median, prompt_p90, prompt_max,
        sub_tokens;
    double rate, think_s, trace_speed, slo_ttft_s, group_skew, tenant_skew, shared_fraction,
        burst_on_s, burst_off_s;
    // Parsed lists (--pool-profiles, --pool-blocks), pointing into the flags' strings.
    char *profiles_v[S_MAX_ITEMS];
    uint32_t blocks_v[S_MAX_ITEMS];
    size_t nprofiles, nblocks;
    double load_factor; // --load as a fraction of the capacity; 0: --rate
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
                   "comma-separated built-in workloads: shared-prefix, multi-turn, no-prefix, "
                   "production, zipf-prefix, bursty, kv-pressure, many-models");
    ipl_config_add(c, "trace", IPL_OPT_STR, &f->trace, NULL,
                   "a JSONL trace instead (ours or Mooncake-style; see docs/clustersim.md)");
    ipl_config_add(c, "strategies", IPL_OPT_STR, &f->strategies, s_default_strategies(),
                   "comma-separated strategies to compare (unknown ones are skipped)");
    ipl_config_add(c, "requests", IPL_OPT_INT, &f->requests, "0",
                   "requests per workload (0: the workload's default; a trace: all lines)");
    ipl_config_add(c, "rate", IPL_OPT_DOUBLE, &f->rate, "0",
                   "Poisson arrivals per second (0: the workload's default)");
    ipl_config_add(c, "load", IPL_OPT_STR, &f->load, NULL,
                   "the rate as a share of the cluster's capacity for this workload (its mean "
                   "service demand, docs/clustersim.md): light (0.5), near (0.85), over (1.2) or "
                   "a number; replaces --rate");
    ipl_config_add(c, "prefix-groups", IPL_OPT_INT, &f->prefix_groups, "-1",
                   "shared prefixes (multi-turn: system prompts); -1: the workload's default");
    ipl_config_add(c, "group-skew", IPL_OPT_DOUBLE, &f->group_skew, "-1",
                   "popularity of prefix group g ∝ 1/(g+1)^SKEW (Zipf; 0 uniform); -1: the "
                   "workload's default");
    ipl_config_add(c, "tenant-skew", IPL_OPT_DOUBLE, &f->tenant_skew, "-1",
                   "many-models: popularity of tenant t ∝ 1/(t+1)^SKEW; -1: the default (1)");
    ipl_config_add(c, "prompt-median", IPL_OPT_INT, &f->prompt_median, "-1",
                   "production: median prompt length (log-normal); -1: the default (7000)");
    ipl_config_add(c, "prompt-p90", IPL_OPT_INT, &f->prompt_p90, "-1",
                   "production: 90th percentile of the prompt length; -1: the default (27000)");
    ipl_config_add(c, "prompt-max", IPL_OPT_INT, &f->prompt_max, "-1",
                   "production: longest prompt; -1: the default (100000)");
    ipl_config_add(c, "shared-fraction", IPL_OPT_DOUBLE, &f->shared_fraction, "-1",
                   "production: leading share of each prompt taken from its group; -1: the "
                   "default (0.45)");
    ipl_config_add(c, "burst-on-s", IPL_OPT_DOUBLE, &f->burst_on_s, "-1",
                   "on/off arrivals: mean on period (s); 0: Poisson; -1: the workload's default");
    ipl_config_add(c, "burst-off-s", IPL_OPT_DOUBLE, &f->burst_off_s, "-1",
                   "on/off arrivals: mean off period (s); -1: the workload's default");
    ipl_config_add(c, "sub-tokens", IPL_OPT_INT, &f->sub_tokens, "-1",
                   "many-models: the (model, tenant) document's tokens; -1: the default");
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
    ipl_config_add(c, "models", IPL_OPT_INT, &f->models, "0",
                   "generated workloads: model names to spread requests over (0: the "
                   "workload's, 1 but for many-models)");
    ipl_config_add(c, "tenants", IPL_OPT_INT, &f->tenants, "0",
                   "generated workloads: tenants to spread requests over (0: the workload's)");
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
    ipl_config_add(c, "pool-profiles", IPL_OPT_STR, &f->pool_profiles, NULL,
                   "heterogeneous worker sets: comma-separated profiles, set P gets item P mod "
                   "N (each set is then calibrated apart)");
    ipl_config_add(c, "pool-blocks", IPL_OPT_STR, &f->pool_blocks, NULL,
                   "heterogeneous worker sets: comma-separated KV blocks per worker, set P gets "
                   "item P mod N (0: the profile's)");
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

/* --load, --pool-profiles and --pool-blocks into f's parsed fields. NULL, or why not (in
 * `why` when it names a value). */
static const char *s_parse_sets(s_flags_t *f, char *why, size_t whylen)
{
    if (f->load) {
        char *end;
        f->load_factor = !strcmp(f->load, "light")  ? 0.5
                         : !strcmp(f->load, "near") ? 0.85
                         : !strcmp(f->load, "over") ? 1.2
                                                    : strtod(f->load, &end);
        if (strcmp(f->load, "light") && strcmp(f->load, "near") && strcmp(f->load, "over") &&
            (*end || end == f->load))
            f->load_factor = 0;
        if (!(f->load_factor > 0) || f->load_factor > 100)
            return "--load must be light, near, over or a share of the capacity in (0, 100]";
        if (f->trace) return "--load applies to generated workloads (use --trace-speed)";
    }
    char profiles[256];
    if (f->pool_profiles) {
        f->nprofiles = s_split(f->pool_profiles, f->profiles_v);
        for (size_t i = 0; i < f->nprofiles; i++)
            if (!sim_profile_find(f->profiles_v[i]) || !*f->profiles_v[i]) {
                snprintf(why, whylen, "--pool-profiles: unknown profile \"%s\" (known: %s)",
                         f->profiles_v[i], sim_profile_names(profiles, sizeof profiles));
                return why;
            }
        if (!f->nprofiles) return "--pool-profiles: give at least one profile";
    }
    if (f->pool_blocks) {
        char *items[S_MAX_ITEMS];
        f->nblocks = s_split(f->pool_blocks, items);
        for (size_t i = 0; i < f->nblocks; i++) {
            char *end;
            long v = strtol(items[i], &end, 10);
            if (end == items[i] || *end || v < 0 || v > 100000000) {
                snprintf(why, whylen,
                         "--pool-blocks: \"%s\" is not a block count 0..100000000 (0: the "
                         "profile's)",
                         items[i]);
                return why;
            }
            f->blocks_v[i] = (uint32_t)v;
        }
        if (!f->nblocks) return "--pool-blocks: give at least one count";
    }
    return NULL;
}

static const char *s_check(const s_flags_t *f)
{
    if (f->requests < 0 || f->requests > 100000000) return "--requests must be 0..100000000";
    if (f->rate < 0) return "--rate must be >= 0";
    if (f->models < 0 || f->tenants < 0 || f->models > 100000 || f->tenants > 100000)
        return "--models and --tenants must be 1..100000 (0: the workload's)";
    if ((f->tenant_skew < 0 && f->tenant_skew != -1) || f->tenant_skew > 10 ||
        (f->group_skew < 0 && f->group_skew != -1) || f->group_skew > 10)
        return "--group-skew and --tenant-skew must be 0..10";
    if (f->prompt_median == 0 || f->prompt_median < -1 || f->prompt_p90 < -1 ||
        f->prompt_max < -1 || f->prompt_median > 1000000 || f->prompt_max > 1000000 ||
        f->prompt_p90 > 1000000 || f->sub_tokens < -1 || f->sub_tokens > 1000000)
        return "--prompt-median must be 1..1000000, --prompt-p90, --prompt-max, --sub-tokens "
               "0..1000000 (-1: the default)";
    if ((f->shared_fraction < 0 && f->shared_fraction != -1) || f->shared_fraction >= 1)
        return "--shared-fraction must be in [0, 1)";
    if ((f->burst_on_s < 0 && f->burst_on_s != -1) || (f->burst_off_s < 0 && f->burst_off_s != -1))
        return "--burst-on-s and --burst-off-s must be >= 0";
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

// The profile and KV blocks of worker set p (--pool-profiles, --pool-blocks, as the cluster
// applies them).
static const sim_profile_t *s_set_profile(const s_flags_t *f, size_t p, uint32_t *blocks)
{
    const sim_profile_t *sp =
        sim_profile_find(f->nprofiles ? f->profiles_v[p % f->nprofiles] : f->profile);
    *blocks = f->num_gpu_blocks ? (uint32_t)f->num_gpu_blocks : sp->num_gpu_blocks;
    if (f->nblocks && f->blocks_v[p % f->nblocks]) *blocks = f->blocks_v[p % f->nblocks];
    return sp;
}

// Decode steps are shared by the sequences decoding together: the part of a step's fixed cost
// one output token bears, for the capacity estimate.
#define S_DECODE_BATCH 16.0

/* The cluster's capacity for `wl` in requests per second: Σ over worker sets of workers /
 * the mean service demand of a request on that set's profile, where a request's demand is
 *   prefill_token_s × (prompt − h × its ideal reuse)            (clustersim_workload_ideal_reuse)
 *   + output × (decode_seq_s + step_s / 16 + context_token_s × (prompt + output / 2))
 * — the engine's step model (sim_profile.h) with every reusable block cached once, as far as
 * the caches hold them (h = min(1, the cluster's KV tokens / the shared parts' working set)),
 * and decode steps shared by 16 sequences. An estimate, not a measurement: docs/clustersim.md
 * compares it with the load where queues start to grow. 0 on allocation failure. */
static double s_capacity(const s_flags_t *f, const clustersim_workload_t *wl)
{
    uint32_t n = clustersim_workload_count(wl);
    uint32_t *reused = malloc((n ? n : 1) * sizeof *reused);
    uint64_t working_set = 0;
    if (!reused ||
        clustersim_workload_ideal_reuse(wl, (uint32_t)f->block_size, reused, &working_set) != 0) {
        free(reused);
        return 0;
    }
    // What the cluster's caches can hold of the shared parts bounds the reuse.
    double cache = 0;
    for (size_t p = 0; p < (size_t)f->pools; p++) {
        uint32_t blocks;
        (void)s_set_profile(f, p, &blocks);
        cache += (double)f->workers_per_pool * blocks * (double)f->block_size;
    }
    double held = working_set > cache ? cache / (double)working_set : 1.0;
    double reuse = 0, tokens = 0;
    for (uint32_t i = 0; i < n; i++) {
        reuse += reused[i];
        tokens += clustersim_workload_req(wl, i)->prompt_tokens;
    }
    fprintf(stderr,
            "clustersim: %s: ideal reuse %.1f%% of prompt tokens, shared working set %.0fk "
            "tokens, the caches hold %.0f%% of it\n",
            clustersim_workload_name(wl), tokens > 0 ? 100.0 * reuse / tokens : 0,
            (double)working_set / 1000.0, 100.0 * held);
    double capacity = 0;
    for (size_t p = 0; p < (size_t)f->pools; p++) {
        uint32_t blocks;
        const sim_profile_t *sp = s_set_profile(f, p, &blocks);
        double demand = 0;
        for (uint32_t i = 0; i < n; i++) {
            const clustersim_req_t *r = clustersim_workload_req(wl, i);
            double out = r->output_tokens, prompt = r->prompt_tokens;
            demand += sp->prefill_token_s * (prompt - held * reused[i]) +
                      out * (sp->decode_seq_s + sp->step_s / S_DECODE_BATCH +
                             sp->context_token_s * (prompt + out / 2));
        }
        demand /= n ? n : 1;
        if (demand > 0) capacity += (double)f->workers_per_pool / demand;
    }
    free(reused);
    return capacity;
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
                 "no-prefix, production, zipf-prefix, bursty, kv-pressure, many-models; or "
                 "--trace FILE)",
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
    if (f->group_skew >= 0) g.group_skew = f->group_skew;
    if (f->tenant_skew >= 0) g.tenant_skew = f->tenant_skew;
    if (f->models > 0) g.models = (uint32_t)f->models;
    if (f->tenants > 0) g.tenants = (uint32_t)f->tenants;
    if (f->prompt_median > 0) g.prompt_median = (uint32_t)f->prompt_median;
    if (f->prompt_p90 >= 0) g.prompt_p90 = (uint32_t)f->prompt_p90;
    if (f->prompt_max >= 0) g.prompt_max = (uint32_t)f->prompt_max;
    if (f->shared_fraction >= 0) g.shared_fraction = f->shared_fraction;
    if (f->burst_on_s >= 0) g.burst_on_s = f->burst_on_s;
    if (f->burst_off_s >= 0) g.burst_off_s = f->burst_off_s;
    if (f->sub_tokens >= 0) g.sub_tokens = (uint32_t)f->sub_tokens;
    clustersim_workload_t *wl = clustersim_workload_generate(kind, &g);
    if (wl && f->load_factor > 0) {
        // --load: the same workload again at the share of the capacity it asks for.
        double capacity = s_capacity(f, wl);
        if (capacity > 0) {
            g.rate = f->load_factor * capacity;
            clustersim_workload_destroy(&wl);
            wl = clustersim_workload_generate(kind, &g);
            fprintf(stderr,
                    "clustersim: %s: load %s = %.2f x capacity %.3f req/s: rate %.3f req/s\n", name,
                    f->load, f->load_factor, capacity, g.rate);
        }
    }
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
    c->pool_profiles = (const char *const *)f->profiles_v;
    c->npool_profiles = (uint32_t)f->nprofiles;
    c->pool_blocks = f->blocks_v;
    c->npool_blocks = (uint32_t)f->nblocks;
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
    if (!bad) bad = s_parse_sets(&f, why, sizeof why);
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
