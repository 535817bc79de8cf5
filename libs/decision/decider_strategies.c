/*
 * decider_strategies — the strategies' pick functions (see decider_pick.h for the contract and
 * decider_strategies.h for the list). Each baseline follows its published description; the
 * comment above it names the source (a file in a public repository, "owner/repo: path", or a
 * documentation page) and every deviation. What the strategies remember between decisions is
 * decider_memory's.
 *
 * Common ground: every strategy sees the same candidates, and only healthy ones (a load sample,
 * not DOWN, not above max_queue); a worker whose cache state cannot be trusted has 0 cached
 * tokens for the strategies that read the index. Ties are broken uniformly at random unless
 * the source says otherwise.
 */
#include "decider_pick.h"
#include "decider_strategies.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ipl_index.h"

#define S_TIE_EPSILON 1e-9
// ttft: predictions within max(10 ms, 5 %) of the best are as good (s_best_ttft): TTFT comes
// in engine steps (~10-30 ms) and the model is no more precise than that.
#define S_TIE_BAND_S   0.010
#define S_TIE_BAND_REL 0.05
// ttft: λ, the weight of the delay a placement imposes on the requests that will queue behind
// it (s_pick_ttft): its prefill beyond the cheapest candidate's, for each of them.
#define S_TTFT_IMPOSED_WEIGHT 1.0
// ttft: a prompt needing at least this share of a worker's KV blocks is not sent to a worker
// whose KV cannot hold it beside its running requests' while another can (s_kv_fits).
#define S_TTFT_KV_MIN_SHARE 0.2
// ttft: rebalancing toward a cold worker (s_rebalance): one that holds under this share of the
// pool's mean KV blocks (of at least S_TTFT_COLD_MIN_BLOCKS: a warm pool), is less loaded than
// the winner, and whose predicted TTFT for the request is at most S_TTFT_COLD_TTFT_RATIO × the
// winner's; at most one request per S_TTFT_COLD_INTERVAL_MS toward each such worker.
#define S_TTFT_COLD_SHARE       0.25
#define S_TTFT_EMPTY_SHARE      (1.0 / 32) /* empty: where a newcomer starts (decider_memory.h) */
#define S_TTFT_COLD_MIN_BLOCKS  64.0
#define S_TTFT_COLD_TTFT_RATIO  4.0
#define S_TTFT_COLD_INTERVAL_MS 100
// ... and only a request for a hot prefix: asked for at least this often lately
// (decider_memory_heat, keyed by the hash of its S_TTFT_HEAT_BLOCK-th block or its last)
#define S_TTFT_HOT_HEAT  2.0
#define S_TTFT_HEAT_BLOCK 4
// ttft: a worker's placements (prompts it was routed holding none of them: the prefixes it
// serves, decider_memory_placed) closer than this are equal.
#define S_PLACED_TIE 0.5
// ttft: the load gate sends a request away from its prefix only to relieve a worker more
// loaded than this × the least loaded one (running + queue): SGLang's balance_rel_threshold.
#define S_TTFT_GATE_REL 1.5

// SGLang router cache_aware defaults as its CLI sets them (sgl-project/sglang:
// sgl-model-gateway/bindings/python/src/sglang_router/router_args.py): cache_threshold
// 0.3, balance_abs_threshold 64, balance_rel_threshold 1.5, eviction_interval_secs 60,
// max_tree_size 2^26 characters. Our tree's "characters" are blocks (decider_history.h): 2^26
// characters ≈ 2^24 tokens at ~4 characters per token ≈ 2^20 blocks of 16 tokens.
#define S_SGLANG_CACHE_THRESHOLD 0.3
#define S_SGLANG_BALANCE_ABS     64.0
#define S_SGLANG_BALANCE_REL     1.5
#define S_SGLANG_EVICTION_MS     60000u
#define S_SGLANG_MAX_BLOCKS      (1u << 20)
// production-stack's HashTrie never evicts; we bound it the same way so that a long
// simulation cannot exhaust memory (documented deviation).
#define S_PREFIX_MAX_BLOCKS (1u << 22)
#define S_PREFIX_CHECK_MS   60000u
// GIE default scorer weights from v1.2.0 (the chart's default-plugins.yaml, see s_pick_gie;
// llm-d-router keeps them): queue-scorer 2, kv-cache-utilization-scorer 2, prefix-cache-scorer 3.
#define S_GIE_QUEUE_WEIGHT  2.0
#define S_GIE_KV_WEIGHT     2.0
#define S_GIE_PREFIX_WEIGHT 3.0
// Dynamo KvRouterConfig::default(): overlap_score_weight 1.0, router_temperature 0.0.
#define S_DYNAMO_OVERLAP_WEIGHT 1.0

// ---- the list ---------------------------------------------------------------------------------

// The names are proto's (ipl_strategy.h); the table gives each its pick function, in that order.
#define S_NAME_ENTRY(name, measurement) name,
static const char *const s_names[] = {IPL_STRATEGIES(S_NAME_ENTRY)};
#define S_NNAMES (sizeof s_names / sizeof s_names[0])

static decider_pick_fn s_pick_ttft, s_pick_random, s_pick_round_robin, s_pick_least_loaded,
    s_pick_gie, s_pick_dynamo, s_pick_sglang, s_pick_prefix_hash;

static const struct {
    const char *name;
    decider_pick_fn *pick;
    const char *source;
} s_table[] = {
    {"ttft", s_pick_ttft,
     "minimum predicted TTFT (queue wait + uncached prefill, calibrated per worker set) with a "
     "load gate; inferplane"},
    // The oracle differs in its inputs (the router reads true cached tokens from its hook).
    {"oracle", s_pick_ttft,
     "ttft with the true cached tokens of every worker (measurement only); inferplane"},
    {"random", s_pick_random, "uniform among healthy workers, as a Kubernetes Service"},
    {"round-robin", s_pick_round_robin,
     "each healthy worker in turn; production-stack --routing-logic roundrobin, SGLang "
     "round_robin"},
    {"least-loaded", s_pick_least_loaded,
     "shortest queue (waiting + in flight), then fewest running; SGLang least_load"},
    {"gie-default", s_pick_gie,
     "Gateway API Inference Extension v1.2+ default profile: queue-scorer 2 + "
     "kv-cache-utilization-scorer 2 + prefix-cache-scorer 3, max-score-picker"},
    {"dynamo-cost", s_pick_dynamo,
     "NVIDIA Dynamo KV router: cost = overlap_score_weight (1.0) x prefill blocks + decode "
     "blocks, temperature 0"},
    {"sglang-cache-aware", s_pick_sglang,
     "SGLang router cache_aware: approximate radix tree of routing history (over block hashes), "
     "cache_threshold 0.3, balance_abs_threshold 64, balance_rel_threshold 1.5"},
    {"prefix-hash", s_pick_prefix_hash,
     "vLLM production-stack prefixaware: longest-prefix trie of routing history (block hashes "
     "as chunks), random among the longest matches"},
};
#define S_NTABLE (sizeof s_table / sizeof s_table[0])
_Static_assert(S_NTABLE == S_NNAMES, "every name in IPL_STRATEGIES has a pick function");

const char *decider_strategy_source(const char *name)
{
    for (size_t i = 0; name && i < S_NTABLE; i++)
        if (!strcmp(s_table[i].name, name)) return s_table[i].source;
    return NULL;
}

decider_pick_fn *decider_strategy_pick(const char *name, const char **canonical)
{
    for (size_t i = 0; name && i < S_NTABLE; i++)
        if (!strcmp(s_table[i].name, name)) {
            if (canonical) *canonical = s_table[i].name;
            return s_table[i].pick;
        }
    return NULL;
}

// ---- helpers ----------------------------------------------------------------------------------

static void s_all_healthy_eligible(decider_pick_t *ctx)
{
    for (uint32_t i = 0; i < ctx->out->ncands; i++)
        ctx->out->cands[i].c.eligible = ctx->out->cands[i].healthy;
}

// Orders two candidates: < 0 when a is better.
typedef int(s_cmp_fn)(const decider_candidate_t *a, const decider_candidate_t *b);

// The best eligible candidate under cmp, ties uniformly at random (reservoir sampling); -1 if
// none is eligible.
static int s_best(decider_pick_t *ctx, s_cmp_fn *cmp)
{
    decider_decision_t *out = ctx->out;
    int best = -1;
    uint32_t ties = 0;
    for (uint32_t i = 0; i < out->ncands; i++) {
        if (!out->cands[i].c.eligible) continue;
        int order = best < 0 ? -1 : cmp(&out->cands[i], &out->cands[best]);
        if (order < 0) {
            best = (int)i;
            ties = 1;
        } else if (order == 0 && decider_pick_random(ctx, ++ties) == 0) {
            best = (int)i;
        }
    }
    return best;
}

static int s_cmp_double(double a, double b)
{
    return a < b - S_TIE_EPSILON ? -1 : a > b + S_TIE_EPSILON ? 1 : 0;
}

// ttft and oracle: by cost (score), then the shorter queue.
static int s_cmp_ttft(const decider_candidate_t *a, const decider_candidate_t *b)
{
    int o = s_cmp_double(a->score, b->score);
    return o ? o : (a->queue > b->queue) - (a->queue < b->queue);
}

static int s_cmp_load(const decider_candidate_t *a, const decider_candidate_t *b)
{
    if (a->queue != b->queue) return a->queue < b->queue ? -1 : 1;
    return (a->c.running > b->c.running) - (a->c.running < b->c.running);
}

static int s_cmp_score_desc(const decider_candidate_t *a, const decider_candidate_t *b)
{
    return s_cmp_double(b->score, a->score);
}

static int s_cmp_score_asc(const decider_candidate_t *a, const decider_candidate_t *b)
{
    return s_cmp_double(a->score, b->score);
}

static double s_ms(double s)
{
    return s * 1000.0;
}

// The best eligible candidate other than `w` under cmp (first of equals), or -1.
static int s_runner_up(const decider_decision_t *out, int w, s_cmp_fn *cmp)
{
    int r = -1;
    for (uint32_t i = 0; i < out->ncands; i++)
        if ((int)i != w && out->cands[i].c.eligible &&
            (r < 0 || cmp(&out->cands[i], &out->cands[r]) < 0))
            r = (int)i;
    return r;
}

// ---- ttft (ours) and oracle -------------------------------------------------------------------

static bool s_kv_fits(const decider_pick_t *ctx, const decider_candidate_t *c);

// Writes the prediction, by part, and the cost into the candidate's note.
static void s_note_prediction(decider_candidate_t *c)
{
    const decider_terms_t *t = &c->terms;
    char network[48] = "";
    if (t->network_s > 0) snprintf(network, sizeof network, " + %.1f network", s_ms(t->network_s));
    decider_candidate_note(c,
                           "%.1f ms = %.1f base + %.1f wait + %.1f prefill (%.0f tok)%s; cost "
                           "%.1f ms (+%.1f ms it imposes on the requests behind it)",
                           s_ms(t->total_s), s_ms(t->base_s), s_ms(t->wait_s), s_ms(t->prefill_s),
                           c->x.uncached_tokens, network, s_ms(c->score),
                           s_ms(c->score - t->total_s));
}

// Softmax sampling over −cost/T among the eligible (Dynamo's --router-temperature does the same
// over normalised costs). Returns the drawn index and its probability.
static int s_sample(decider_pick_t *ctx, double temperature_s, double *probability)
{
    decider_decision_t *out = ctx->out;
    double lo = INFINITY, total = 0;
    for (uint32_t i = 0; i < out->ncands; i++)
        if (out->cands[i].c.eligible && out->cands[i].score < lo) lo = out->cands[i].score;
    for (uint32_t i = 0; i < out->ncands; i++)
        if (out->cands[i].c.eligible) total += exp(-(out->cands[i].score - lo) / temperature_s);
    double u = decider_pick_uniform(ctx) * total;
    int last = -1;
    for (uint32_t i = 0; i < out->ncands; i++) {
        if (!out->cands[i].c.eligible) continue;
        double p = exp(-(out->cands[i].score - lo) / temperature_s);
        last = (int)i;
        *probability = p / total;
        if (u < p) break;
        u -= p;
    }
    return last;
}

// Costs this close count as equal (the model is not more precise than that).
static double s_tie_band(double best_s)
{
    return fmax(S_TIE_BAND_S, S_TIE_BAND_REL * best_s);
}

// The requests routed to candidate c lately (decider_pool_recent), 0 without memory.
static inline double s_recent(decider_pick_t *ctx, const decider_candidate_t *c)
{
    return ctx->memory ? decider_pool_recent(ctx->memory, c->ledger_id, ctx->mono_ms) : 0;
}

// The prompts routed to candidate c lately that it held none of — the prefixes it was given
// to compute (decayed over DECIDER_MEMORY_PLACED_TAU_S) —, 0 without memory.
static double s_placed(decider_pick_t *ctx, const decider_candidate_t *c)
{
    return ctx->memory ? decider_memory_placed(ctx->memory->owner, c->ledger_id, ctx->mono_ms) : 0;
}

/* The minimum cost among the eligible; among the candidates within the tie band of it, the one
 * holding the most of the prompt (the least prefill work for the cluster: a burst of one
 * prefix stays together), then the one routed the fewest requests lately (the routings of the
 * last minute are the prefixes a worker attracts), then the shortest queue, then at random.
 *
 * A placement — no candidate within the band holds any of the prompt: a prefix new to the
 * cluster, or one the cost says to compute again — goes instead to the candidate within the
 * band that was given the fewest prefixes (s_placed), then the cheapest, then as above. (Within
 * the band only: with heavy-tailed prompts nearly every request is a placement, and a count
 * that overrode the cost sent 100k-token prompts to workers with 30 s of backlog —
 * docs/clustersim.md, "Three changes to ttft".) Its prefill holds that worker for seconds (an
 * 8k-token prompt is one ~2.8 s step on an L40S), and every request reaching the worker meanwhile
 * waits: a worker serving fewer prefixes receives fewer of those requests, now and for as long as
 * the prefix stays there. The cost alone spreads new prefixes by the work queued now (which drains
 * in seconds) and let one worker collect more prefixes than another (SGLang's smallest tree
 * balances them, and it met the SLO for more requests in the warm-up, docs/clustersim.md).
 * -1 if none. */
static int s_best_ttft(decider_pick_t *ctx)
{
    decider_decision_t *out = ctx->out;
    double lo = INFINITY, lo_ttft = 0; // the minimum cost, and that candidate's prediction
    for (uint32_t i = 0; i < out->ncands; i++)
        if (out->cands[i].c.eligible && out->cands[i].score < lo) {
            lo = out->cands[i].score;
            lo_ttft = out->cands[i].c.predicted_ttft_s;
        }
    double tie = s_tie_band(lo_ttft), band = lo + tie;
    bool placement = true;
    for (uint32_t i = 0; i < out->ncands; i++) {
        const decider_candidate_t *c = &out->cands[i];
        if (c->c.eligible && c->score <= band && c->c.cached_tokens > 0) placement = false;
    }
    int best = -1;
    uint32_t ties = 0;
    double best_recent = 0, best_placed = 0;
    for (uint32_t i = 0; i < out->ncands; i++) {
        const decider_candidate_t *c = &out->cands[i];
        if (!c->c.eligible || c->score > band || (placement && c->c.cached_tokens > 0)) continue;
        const decider_candidate_t *b = best >= 0 ? &out->cands[best] : NULL;
        double recent = s_recent(ctx, c);
        double placed = placement ? s_placed(ctx, c) : 0;
        int order = !b ? -1
                    : c->c.cached_tokens != b->c.cached_tokens
                        ? (c->c.cached_tokens > b->c.cached_tokens ? -1 : 1)
                    : fabs(placed - best_placed) > S_PLACED_TIE ? (placed < best_placed ? -1 : 1)
                    : fabs(c->score - b->score) > tie           ? (c->score < b->score ? -1 : 1)
                    : s_cmp_double(recent, best_recent)         ? s_cmp_double(recent, best_recent)
                    : c->queue != b->queue                      ? (c->queue < b->queue ? -1 : 1)
                                                                : 0;
        if (order < 0) {
            best = (int)i;
            best_recent = recent;
            best_placed = placed;
            ties = 1;
        } else if (order == 0 && decider_pick_random(ctx, ++ties) == 0) {
            best = (int)i;
        }
    }
    return best;
}

// Why the winner beat the runner-up, for the detail ("; next best ...").
static void s_ttft_next(decider_pick_t *ctx, int w, char *next, size_t size)
{
    decider_decision_t *out = ctx->out;
    const decider_candidate_t *win = &out->cands[w];
    int runner = s_runner_up(out, w, s_cmp_ttft);
    if (runner < 0) return;
    const decider_candidate_t *r = &out->cands[runner];
    double margin = r->score - win->score;
    const char *tie = "";
    if (margin <= s_tie_band(win->score))
        tie = r->c.cached_tokens < win->c.cached_tokens ? ", as cheap: chose the one holding "
                                                          "more of the prompt (less work)"
              : s_recent(ctx, r) > s_recent(ctx, win)   ? ", as cheap: chose the one routed "
                                                          "fewer requests lately"
              : r->queue > win->queue                   ? ", as cheap: chose the shorter queue"
                                                        : ", a tie broken at random";
    snprintf(next, size, "; next best %s %.1f ms (cost %.1f ms, %+.1f ms)%s", r->c.worker,
             s_ms(r->c.predicted_ttft_s), s_ms(r->score), s_ms(margin), tie);
}

// Why winner w won a ttft decision (best: the minimum cost; ungated: the best before the load
// gate). The one place that names the reason; the explanation below only words it.
typedef enum { S_EXPLORE, S_LOAD_GATE, S_CACHE_HIT, S_LOAD_ONLY, S_LEAST_LOADED } s_ttft_why_t;
static const char *const s_ttft_reasons[] = {"explore", "load_gate", "cache_hit", "load_only",
                                             "least_loaded"};

static s_ttft_why_t s_ttft_why(const decider_pick_t *ctx, int w, int best, int ungated)
{
    const decider_decision_t *out = ctx->out;
    const decider_candidate_t *win = &out->cands[w], *top = &out->cands[ungated];
    if (w != best && s_cmp_ttft(win, &out->cands[best]) != 0) return S_EXPLORE;
    if (!top->c.eligible && top->c.cached_tokens > win->c.cached_tokens) return S_LOAD_GATE;
    if (win->c.cached_tokens > 0) return S_CACHE_HIT;
    if (!win->cache_used) return S_LOAD_ONLY;
    return S_LEAST_LOADED;
}

// The detail of a ttft decision for winner w (least: the least loaded queue).
static void s_ttft_explain(decider_pick_t *ctx, int w, int best, int ungated, uint64_t least,
                           double temperature, double probability)
{
    decider_decision_t *out = ctx->out;
    const decider_candidate_t *win = &out->cands[w];
    const decider_candidate_t *top = &out->cands[ungated];
    uint64_t gate = ctx->load_gate;
    s_ttft_why_t why = s_ttft_why(ctx, w, best, ungated);
    const char *reason = s_ttft_reasons[why];
    char next[192] = "";
    s_ttft_next(ctx, w, next, sizeof next);
    switch (why) {
    case S_EXPLORE:
        decider_pick_win(ctx, w, reason,
                         "explored at temperature %.3f s: %s drawn with probability %.2f "
                         "(predicted TTFT %.1f ms, %llu cached tokens) instead of the best, %s "
                         "(%.1f ms)",
                         temperature, win->c.worker, probability, s_ms(win->c.predicted_ttft_s),
                         (unsigned long long)win->c.cached_tokens, out->cands[best].c.worker,
                         s_ms(out->cands[best].c.predicted_ttft_s));
        break;
    case S_LOAD_GATE:
        if (!s_kv_fits(ctx, top)) {
            decider_pick_win(ctx, w, reason,
                             "%s holds %llu cached tokens but its KV (%.0f%% in use) cannot hold "
                             "the prompt's %llu tokens; chose %s: predicted TTFT %.1f ms, %llu "
                             "cached tokens%s",
                             top->c.worker, (unsigned long long)top->c.cached_tokens,
                             100.0 * top->c.kv_usage, (unsigned long long)ctx->prompt_tokens,
                             win->c.worker, s_ms(win->c.predicted_ttft_s),
                             (unsigned long long)win->c.cached_tokens, next);
            break;
        }
        decider_pick_win(ctx, w, reason,
                         "%s holds %llu cached tokens but its queue %llu exceeds the least loaded "
                         "(%llu) by more than %llu; chose %s: predicted TTFT %.1f ms, %llu cached "
                         "tokens%s",
                         top->c.worker, (unsigned long long)top->c.cached_tokens,
                         (unsigned long long)top->queue, (unsigned long long)least,
                         (unsigned long long)gate, win->c.worker, s_ms(win->c.predicted_ttft_s),
                         (unsigned long long)win->c.cached_tokens, next);
        break;
    case S_CACHE_HIT:
        decider_pick_win(ctx, w, reason,
                         "%s has %llu of %llu prompt tokens cached, queue %llu: predicted TTFT "
                         "%.1f ms%s",
                         win->c.worker, (unsigned long long)win->c.cached_tokens,
                         (unsigned long long)ctx->prompt_tokens, (unsigned long long)win->queue,
                         s_ms(win->c.predicted_ttft_s), next);
        break;
    case S_LOAD_ONLY:
        decider_pick_win(ctx, w, reason,
                         "cache state of %s not usable (%s); by load: queue %llu, predicted TTFT "
                         "%.1f ms%s",
                         win->c.worker, win->note, (unsigned long long)win->queue,
                         s_ms(win->c.predicted_ttft_s), next);
        break;
    case S_LEAST_LOADED:
        decider_pick_win(ctx, w, reason,
                         "no worker holds a prefix of the prompt; %s has the shortest predicted "
                         "wait (queue %llu, running %llu): predicted TTFT %.1f ms%s",
                         win->c.worker, (unsigned long long)win->queue,
                         (unsigned long long)win->c.running, s_ms(win->c.predicted_ttft_s), next);
        break;
    }
}

// The reason of a ttft decision without its detail (terse decisions).
static void s_ttft_reason(decider_pick_t *ctx, int w, int best, int ungated)
{
    decider_pick_win(ctx, w, s_ttft_reasons[s_ttft_why(ctx, w, best, ungated)], "%s", "");
}

// The part of c's queue the load gate weighs: the requests beyond those this router knows are
// queued there — its backlog for c but the first, which is being prefilled (running, not
// queued): prefill work it routed there and accounts for token by token (decider_memory.h).
// Those the cost prices already; gating on them would only force the prefix to be computed
// again elsewhere (and at load, each duplicate lengthens another queue: the "death spiral" of
// sgl-project/sglang pull request #14305). The gate is for load the prediction only knows by
// count.
static uint64_t s_gated_queue(decider_pick_t *ctx, const decider_candidate_t *c)
{
    uint64_t own = ctx->memory ? (uint64_t)decider_pool_backlog_requests(ctx->memory, c->ledger_id,
                                                                         ctx->mono_ms)
                               : 0;
    uint64_t known = own ? own - 1 : 0;
    return c->queue > known ? c->queue - known : 0;
}

// running + queue: the load SGLang's balance check weighs (decode load included).
static uint64_t s_ttft_load(const decider_candidate_t *c)
{
    return c->c.running + c->queue;
}

// Whether the load gate may exclude c (its queue, beyond this router's own backlog, exceeds
// the least loaded one's by more than load_gate): only when some worker is clearly less
// loaded — c's running + queue above S_TTFT_GATE_REL × the least (`lo_load`). A queue alone
// is often transient: vLLM holds every request that reaches a worker during a long prefill
// step until the step ends (an 8k-token step lasts ~2.8 s on an L40S), and the backlog, a
// fluid, drains them sooner. When every worker is about as loaded, computing the prefix
// again elsewhere only moves the queue and evicts another prefix there: at 8 req/s on six
// workers the bare count gate replicated 0, 2 and 3 prefixes per 600 requests after the
// warm-up (clustersim, seeds 1-3), each an 8.7k-token prefill that stalled the cached requests
// behind it, and 48-50 on two of twelve seeds without calibration (docs/clustersim.md). When some
// worker is idle while a hot prefix's holder queues, spreading it pays off (a thousand workers
// for 200 prefixes).
static bool s_gate_excludes(uint64_t gated, uint64_t least, uint64_t gate,
                            const decider_candidate_t *c, uint64_t lo_load)
{
    return gated > least + gate && (double)s_ttft_load(c) > S_TTFT_GATE_REL * (double)lo_load &&
           (lo_load <= gate || (double)(s_ttft_load(c) - lo_load) > S_SGLANG_BALANCE_ABS);
}

/* The delay placing this request on c imposes on the requests behind it (the cost's second
 * term, s_pick_ttft):
 *
 *   imposed(c) = (1 + β × arrivals(c)) × prefill(c)
 *
 * - prefill(c): the request's uncached prefill on c. vLLM's scheduler runs a request's prefill
 *   to its end before a later arrival's (running requests first, then the waiting ones first
 *   come, first served; chunked prefill only splits it into steps), so whoever reaches c
 *   behind it waits for all of it; a prefix computed again on a second worker also evicts
 *   another one there.
 * - 1: the request itself — the duplicate it computes is work the cluster does twice.
 * - arrivals(c): the requests reaching c until its first token, at the rate c was routed
 *   requests lately (decider_pool_recent over its time constant × its predicted TTFT). A hot
 *   prefix's holder attracts many: its own small prefill weighs more there, which spreads a
 *   hot prefix before its holder's queue explodes.
 * - β (`busy`): the share of candidates with work queued (a backlog or a queue). A request
 *   arriving behind c waits only if it cannot go to an idle worker instead: at light load
 *   those arrivals cost nothing, and a long prompt is not held back for them. */
static double s_imposed(decider_pick_t *ctx, const decider_candidate_t *c, double busy)
{
    double arrivals = s_recent(ctx, c) / DECIDER_MEMORY_RECENT_TAU_S * c->c.predicted_ttft_s;
    return (1.0 + busy * arrivals) * c->terms.prefill_s;
}

/* Whether c's KV cache can hold the prompt beside what its running requests hold (the last
 * sample's kv_usage × its blocks: vLLM's usage counts only blocks referenced by requests) and
 * what the prefill backlog this router sent there will need (x.queued_tokens: without it, a
 * worker with a long queue but little running looks empty and collects every long prompt) —
 * asked only of prompts needing S_TTFT_KV_MIN_SHARE of c's blocks or more. A prompt that does
 * not fit waits until enough running requests finish, or makes the engine preempt one; for a
 * long prompt that is seconds (production-shaped traffic: 47 preemptions per 1,000 requests
 * before, 6 under gie-default, whose KV-utilisation scorer avoids full workers). A short one
 * waits a step or two, and turning it away from its prefix would compute the prefix again:
 * not asked. Unknown capacity (no sample of it): fits. */
static bool s_kv_fits(const decider_pick_t *ctx, const decider_candidate_t *c)
{
    double bs = ctx->block_size ? (double)ctx->block_size : 1.0;
    double need = (double)ctx->prompt_tokens / bs, cap = (double)c->num_blocks;
    if (!c->num_blocks || need < S_TTFT_KV_MIN_SHARE * cap) return true;
    return c->c.kv_usage * cap + c->x.queued_tokens / bs + need <= cap;
}

// Pending prefixes (decider_memory.h): a candidate gets the blocks routed to it that it has not
// computed yet, and its prediction is redone with its own prefill shortened to match.
static void s_apply_pending(decider_pick_t *ctx, bool explain)
{
    decider_decision_t *out = ctx->out;
    const decider_request_t *req = ctx->req;
    uint64_t bs = ctx->block_size;
    if (!ctx->memory || !req->nhashes || !bs || !ctx->optimistic_ttl_ms ||
        (req->block_size && req->block_size != bs))
        return;
    for (uint32_t i = 0; i < out->ncands; i++) {
        decider_candidate_t *c = &out->cands[i];
        if (!c->healthy || !c->cache_used) continue;
        size_t held = (size_t)(c->c.cached_tokens / bs);
        size_t m = decider_memory_pending_match(ctx->memory->owner, c->ledger_id, req->hashes,
                                                req->nhashes, held, ctx->mono_ms);
        uint64_t cached =
            (uint64_t)m * bs < ctx->prompt_tokens ? (uint64_t)m * bs : ctx->prompt_tokens;
        if (cached <= c->c.cached_tokens) continue;
        decider_terms_t *t = &c->terms;
        double per_token = c->x.uncached_tokens > 0 ? t->prefill_s / c->x.uncached_tokens : 0;
        c->c.cached_tokens = cached;
        c->x.uncached_tokens = (double)(ctx->prompt_tokens - cached);
        t->prefill_s = per_token * c->x.uncached_tokens;
        t->total_s = t->base_s + t->wait_s + t->prefill_s + t->network_s;
        if (!(t->total_s > 0)) t->total_s = 0;
        c->c.predicted_ttft_s = t->total_s;
        if (explain)
            decider_candidate_note(c, "%zu blocks pending (routed here, not computed yet)",
                                   m - held);
    }
}

// Remembers the blocks the winner has to compute as pending until its prefill should be done
// and its KV events arrived (decider_memory.h).
static void s_remember_pending(decider_pick_t *ctx, const decider_candidate_t *win)
{
    const decider_request_t *req = ctx->req;
    uint64_t bs = ctx->block_size;
    if (!ctx->memory || !req->nhashes || !bs || !ctx->optimistic_ttl_ms ||
        (req->block_size && req->block_size != bs) || !win->cache_used)
        return;
    uint64_t until =
        ctx->mono_ms + (uint64_t)llround(win->c.predicted_ttft_s * 1000.0) + ctx->optimistic_ttl_ms;
    decider_memory_pending_add(ctx->memory->owner, win->ledger_id, req->hashes,
                               (size_t)(win->c.cached_tokens / bs), req->nhashes, until);
}

/*
 * ttft (ours). Every healthy candidate's predicted TTFT is already computed (decider_router).
 * Load gate: a candidate whose queue exceeds the least loaded one's by more than load_gate is
 * not eligible, so a hot prefix never piles every request onto one worker (the same purpose as
 * SGLang's balance thresholds and the TTFT load gate, maxTTFTPenaltyMs, of llm-d's
 * prefix-cache-affinity-filter: llm-d/llm-d-router:
 * pkg/epp/framework/plugins/scheduling/filter/prefixcacheaffinity/README.md) — counting only
 * the requests beyond those still in this router's backlog for it (s_gated_queue): those the
 * cost prices token by token; and only when some worker is clearly less loaded (running +
 * queue, SGLang's relative threshold 1.5) and either nearly idle (running + queue <=
 * load_gate) or less loaded by more than SGLang's absolute threshold 64 (s_gate_excludes):
 * moving a request off its prefix computes the prefix again, which pays only where it will
 * not queue behind other work.
 *
 * KV gate: a long prompt (S_TTFT_KV_MIN_SHARE of a worker's blocks or more) is not sent to a
 * worker whose KV cannot hold it beside its running requests' while some candidate can
 * (s_kv_fits).
 *
 * Then the minimum cost wins, where
 *
 *   cost(W) = predicted TTFT on W + S_TTFT_IMPOSED_WEIGHT × imposed(W)
 *
 * and imposed(W) (s_imposed) is the delay the placement imposes on the requests that will
 * queue behind it: its prefill on W (an 8k-token miss holds an L40S for ~2.8 s), for itself
 * and each request reaching W until its first token — those only in the share of workers that
 * are busy (behind an idle cluster nobody has to queue). So a request waits for the worker
 * holding its prefix unless that wait exceeds the miss elsewhere by what the miss would cost
 * the others: a hot prefix is replicated when its holder's queue is worth it, not because the
 * holder is briefly busy.
 *
 * Costs within max(10 ms, 5 %) of the minimum count as equal (below the engine's step and the
 * model's precision), and among those the one holding the most of the prompt wins, then the
 * one routed the fewest requests in the last minute, then the shorter queue, then at random
 * (s_best_ttft) — or, with temperature T > 0, a candidate drawn with probability
 * ∝ exp(−cost/T), for exploration. When no candidate within the band holds any of the prompt
 * (a placement: a new prefix), the eligible worker given the fewest prefixes lately wins
 * first, the cost second (s_best_ttft; SGLang's smallest tree by another measure).
 */
/* Rebalancing: a worker that joins the pool or comes back empty (a restart, a new replica)
 * holds no prefix, and every request for a prefix another worker holds costs less there — its
 * own TTFT does — so the cost alone leaves the newcomer idle while the others carry its share
 * (the fault suite: 13% of the requests instead of a third 5 s after a worker restarted, and
 * the median TTFT 11-26% above before, docs/faults.md). A cache-aware router that never moves a
 * prefix cannot use new capacity; SGLang's router moves to the least loaded worker once loads
 * differ by more than a threshold (sgl-project/sglang: sgl-router, cache_aware policy,
 * balance_abs_threshold/balance_rel_threshold), which would take many requests off their
 * prefix at once. Here a few go: a request that the winner serves from its cache goes instead
 * to a cold worker (under S_TTFT_COLD_SHARE of the pool's mean blocks held), less loaded than
 * the winner, whose predicted TTFT for it is within S_TTFT_COLD_TTFT_RATIO of the winner's (no
 * 100k-token prompt is moved to be computed again), at most one per S_TTFT_COLD_INTERVAL_MS
 * per cold worker, and only for a hot prefix (asked for S_TTFT_HOT_HEAT times in the last
 * ~10 s: moving a prompt nobody asks for again computes it for nothing, and breaks a client's
 * affinity for no gain). Requests are drawn as they come, so the hottest move first; once a
 * prefix is on the newcomer too, the cost itself picks the less loaded of its two holders. It
 * ends when the worker holds a quarter of the mean. Only a newcomer (decider_memory_newcomer):
 * a worker found empty (S_TTFT_EMPTY_SHARE of the mean) after being warm — it lost its cache —
 * or first seen empty in a warm pool; not one the pool's few prefixes never reached (on the
 * published benchmark's shape moving those to the idle worker raised the median TTFT by 27%,
 * clustersim seed 1: 0.31 → 0.40 s), nor one whose evictions shrank its share
 * (docs/clustersim.md, "Three changes to ttft"). The least loaded such worker, or -1; *mean_p
 * the pool's mean blocks held. */
static int s_rebalance(decider_pick_t *ctx, int best, double *mean_p)
{
    const decider_decision_t *out = ctx->out;
    if (best < 0 || !ctx->memory) return -1;
    const decider_candidate_t *win = &out->cands[best];
    const decider_request_t *req = ctx->req;
    // how hot the prompt's prefix is: recorded for every decision with a prompt
    double heat = 0;
    if (req->nhashes) {
        size_t k = req->nhashes < S_TTFT_HEAT_BLOCK ? req->nhashes : S_TTFT_HEAT_BLOCK;
        heat = decider_memory_heat(ctx->memory->owner, req->hashes[k - 1], ctx->mono_ms);
    }
    double held = 0, n = 0;
    for (uint32_t i = 0; i < out->ncands; i++)
        if (out->cands[i].healthy) {
            held += (double)out->cands[i].held_blocks;
            n++;
        }
    double mean = n > 0 ? held / n : 0;
    *mean_p = mean;
    bool pool_warm = mean >= S_TTFT_COLD_MIN_BLOCKS;
    int r = -1;
    for (uint32_t i = 0; i < out->ncands; i++) {
        const decider_candidate_t *c = &out->cands[i];
        // every candidate is seen, a worker without a load sample yet too: one listed from
        // the start is no newcomer once its pool warms up
        bool cold = (double)c->held_blocks < S_TTFT_COLD_SHARE * mean;
        bool empty = (double)c->held_blocks < S_TTFT_EMPTY_SHARE * mean;
        if (!decider_memory_newcomer(ctx->memory->owner, c->ledger_id, cold, empty, pool_warm) ||
            !c->healthy || (int)i == best || !c->c.eligible || c->c.cached_tokens > 0 ||
            s_ttft_load(c) >= s_ttft_load(win) ||
            c->c.predicted_ttft_s > S_TTFT_COLD_TTFT_RATIO * win->c.predicted_ttft_s + S_TIE_BAND_S)
            continue;
        if (r < 0 || s_ttft_load(c) < s_ttft_load(&out->cands[r])) r = (int)i;
    }
    if (r < 0 || win->c.cached_tokens == 0 || heat < S_TTFT_HOT_HEAT ||
        !decider_memory_rebalance(ctx->memory->owner, out->cands[r].ledger_id, ctx->mono_ms,
                                  S_TTFT_COLD_INTERVAL_MS))
        return -1;
    return r;
}

static void s_pick_ttft(decider_pick_t *ctx)
{
    decider_decision_t *out = ctx->out;
    bool explain = decider_pick_explains(ctx);
    uint64_t gate = ctx->load_gate;
    uint64_t least = UINT64_MAX, lo_load = UINT64_MAX;
    for (uint32_t i = 0; i < out->ncands; i++) {
        if (!out->cands[i].healthy) continue;
        if (out->cands[i].queue < least) least = out->cands[i].queue;
        if (s_ttft_load(&out->cands[i]) < lo_load) lo_load = s_ttft_load(&out->cands[i]);
    }
    s_apply_pending(ctx, explain);
    // The KV gate needs a candidate that fits and that the load gate keeps: else every
    // candidate could be gated (the least loaded one by KV, the ones that fit by load).
    double busy = 0, healthy = 0;
    bool any_fits = false;
    for (uint32_t i = 0; i < out->ncands; i++) {
        const decider_candidate_t *c = &out->cands[i];
        if (!c->healthy) continue;
        busy += c->x.queued_tokens > 0 || c->x.queued > 0;
        healthy++;
        if (!any_fits && s_kv_fits(ctx, c))
            any_fits = !s_gate_excludes(s_gated_queue(ctx, c), least, gate, c, lo_load);
    }
    busy /= healthy > 0 ? healthy : 1;
    int ungated = -1; // the best cost before the gate: did the gate change the outcome?
    for (uint32_t i = 0; i < out->ncands; i++) {
        decider_candidate_t *c = &out->cands[i];
        if (!c->healthy) continue;
        c->score = c->c.predicted_ttft_s + S_TTFT_IMPOSED_WEIGHT * s_imposed(ctx, c, busy);
        if (ungated < 0 || s_cmp_ttft(c, &out->cands[ungated]) < 0) ungated = (int)i;
        uint64_t gated = s_gated_queue(ctx, c);
        bool load_gated = s_gate_excludes(gated, least, gate, c, lo_load);
        bool kv_full = !load_gated && any_fits && !s_kv_fits(ctx, c);
        c->c.eligible = !load_gated && !kv_full;
        if (explain && kv_full)
            decider_candidate_note(c,
                                   "KV gate: %.0f%% of its KV in use cannot hold the prompt's "
                                   "%llu tokens; another worker's can",
                                   100.0 * c->c.kv_usage, (unsigned long long)ctx->prompt_tokens);
        if (!explain) continue;
        s_note_prediction(c);
        if (load_gated)
            decider_candidate_note(
                c,
                "load gate: queue %llu%s > least loaded %llu + %llu, and load "
                "%llu > %.1f x the least %llu",
                (unsigned long long)gated, gated < c->queue ? " beyond this decider's backlog" : "",
                (unsigned long long)least, (unsigned long long)gate,
                (unsigned long long)s_ttft_load(c), S_TTFT_GATE_REL, (unsigned long long)lo_load);
    }
    int best = s_best_ttft(ctx);
    if (best < 0) { // not reached: the least queued candidate passes both gates (see above)
        for (uint32_t i = 0; i < out->ncands; i++)
            out->cands[i].c.eligible = out->cands[i].healthy;
        best = s_best_ttft(ctx);
    }
    double mean_held = 0;
    int cold = s_rebalance(ctx, best, &mean_held);
    if (cold >= 0) {
        const decider_candidate_t *c = &out->cands[cold], *b = &out->cands[best];
        s_remember_pending(ctx, c);
        decider_pick_win(ctx, cold, "rebalance",
                         "%s holds %llu of the %llu blocks a worker of the pool holds on average: "
                         "chose it (predicted TTFT %.1f ms, load %llu) over %s (%.1f ms, %llu "
                         "cached tokens, load %llu) so that it takes a share of the load",
                         c->c.worker, (unsigned long long)c->held_blocks,
                         (unsigned long long)mean_held, s_ms(c->c.predicted_ttft_s),
                         (unsigned long long)s_ttft_load(c), b->c.worker,
                         s_ms(b->c.predicted_ttft_s), (unsigned long long)b->c.cached_tokens,
                         (unsigned long long)s_ttft_load(b));
        return;
    }
    int w = best;
    double probability = 1;
    double temperature = ctx->temperature_s;
    if (temperature > 0) w = s_sample(ctx, temperature, &probability);
    s_remember_pending(ctx, &out->cands[w]);
    if (ctx->memory && out->cands[w].c.cached_tokens == 0)
        decider_memory_place(ctx->memory->owner, out->cands[w].ledger_id, ctx->mono_ms);
    if (explain)
        s_ttft_explain(ctx, w, best, ungated, least, temperature, probability);
    else
        s_ttft_reason(ctx, w, best, ungated);
}

// ---- load-only baselines ----------------------------------------------------------------------

// random: a plain Kubernetes Service (kube-proxy picks a backend at random), production-stack
// has no equivalent, SGLang `random`.
static void s_pick_random(decider_pick_t *ctx)
{
    decider_decision_t *out = ctx->out;
    s_all_healthy_eligible(ctx);
    uint32_t n = 0;
    for (uint32_t i = 0; i < out->ncands; i++)
        n += out->cands[i].c.eligible;
    uint32_t k = decider_pick_random(ctx, n);
    for (uint32_t i = 0; i < out->ncands; i++)
        if (out->cands[i].c.eligible && k-- == 0) {
            decider_pick_win(ctx, (int)i, "random",
                             "strategy random: %s drawn uniformly from %u eligible workers",
                             out->cands[i].c.worker, n);
            return;
        }
}

// round-robin: production-stack `--routing-logic roundrobin` (vllm-project/production-stack:
// src/vllm_router/routers/routing_logic.py) and SGLang
// `round_robin`: the next worker in a fixed order, per pool, skipping unhealthy ones.
static void s_pick_round_robin(decider_pick_t *ctx)
{
    decider_decision_t *out = ctx->out;
    s_all_healthy_eligible(ctx);
    uint32_t n = out->ncands;
    uint64_t start = ctx->memory ? ctx->memory->next : 0;
    for (uint32_t k = 0; k < n; k++) {
        uint32_t i = (uint32_t)((start + k) % n);
        if (!out->cands[i].healthy) continue;
        if (ctx->memory) ctx->memory->next = (uint64_t)i + 1;
        decider_pick_win(ctx, (int)i, "round_robin",
                         "strategy round-robin: %s is next in turn (position %u of %u)",
                         out->cands[i].c.worker, i + 1, n);
        return;
    }
}

// least-loaded: SGLang `least_load` / the shortest queue: waiting + routed in flight, then
// fewest running.
static void s_pick_least_loaded(decider_pick_t *ctx)
{
    decider_decision_t *out = ctx->out;
    s_all_healthy_eligible(ctx);
    int w = s_best(ctx, s_cmp_load);
    decider_pick_win(ctx, w, "least_loaded",
                     "strategy least-loaded: %s has the shortest queue (%llu waiting + in flight, "
                     "%llu running)",
                     out->cands[w].c.worker, (unsigned long long)out->cands[w].queue,
                     (unsigned long long)out->cands[w].c.running);
}

// ---- gie-default ------------------------------------------------------------------------------

/*
 * gie-default: the Gateway API Inference Extension's default EPP profile from v1.2.0 (its
 * default-plugins.yaml in kubernetes-sigs/gateway-api-inference-extension:
 * config/charts/inferencepool/templates/epp-config.yaml; kept by llm-d/llm-d-router:
 * config/charts/routerlib/templates/_config.yaml), with the scorers of
 * kubernetes-sigs/gateway-api-inference-extension: pkg/epp/scheduling/framework/plugins/scorer/
 * queue.go and kvcache_utilization.go, and .../plugins/multi/prefix/plugin.go:
 *   queue-scorer                 (maxQ − q) / (maxQ − minQ) over the candidates; all 1 if equal
 *   kv-cache-utilization-scorer  1 − KV-cache usage
 *   prefix-cache-scorer          matched blocks / prompt blocks (matchLengthWeight 0)
 *   score = 2 × queue + 2 × kv + 3 × prefix; max-score-picker (ties at random).
 * Deviations, so that the comparison measures the scoring rule rather than the plumbing:
 * q is waiting + this decider's in flight (the EPP refreshes metrics every 50 ms; our samples
 * are older, and llm-d's inflight-load-producer exists for the same reason), and the prefix
 * match is our KV-event index plus optimistic blocks (llm-d's precise producer), the figure
 * ttft uses.
 */
static void s_pick_gie(decider_pick_t *ctx)
{
    decider_decision_t *out = ctx->out;
    s_all_healthy_eligible(ctx);
    uint64_t qmin = UINT64_MAX, qmax = 0;
    for (uint32_t i = 0; i < out->ncands; i++) {
        if (!out->cands[i].healthy) continue;
        if (out->cands[i].queue < qmin) qmin = out->cands[i].queue;
        if (out->cands[i].queue > qmax) qmax = out->cands[i].queue;
    }
    size_t nblocks = ctx->req->nhashes;
    for (uint32_t i = 0; i < out->ncands; i++) {
        decider_candidate_t *c = &out->cands[i];
        if (!c->healthy) continue;
        double q = qmax == qmin ? 1.0 : (double)(qmax - c->queue) / (double)(qmax - qmin);
        double kv = 1.0 - fmin(fmax(c->c.kv_usage, 0.0), 1.0);
        double blocks = ctx->block_size ? (double)(c->c.cached_tokens / ctx->block_size) : 0;
        double p = nblocks ? fmin(blocks / (double)nblocks, 1.0) : 0.0;
        c->score = S_GIE_QUEUE_WEIGHT * q + S_GIE_KV_WEIGHT * kv + S_GIE_PREFIX_WEIGHT * p;
        if (decider_pick_explains(ctx))
            decider_candidate_note(c, "score %.3f = 2 x %.3f queue + 2 x %.3f kv + 3 x %.3f prefix",
                                   c->score, q, kv, p);
    }
    int w = s_best(ctx, s_cmp_score_desc);
    int r = s_runner_up(out, w, s_cmp_score_desc);
    char next[128] = "";
    if (r >= 0 && decider_pick_explains(ctx))
        snprintf(next, sizeof next, "; next best %s %.3f", out->cands[r].c.worker,
                 out->cands[r].score);
    decider_pick_win(ctx, w, "max_score",
                     "strategy gie-default: %s has the highest score %.3f (queue 2, kv-cache "
                     "utilization 2, prefix 3)%s",
                     out->cands[w].c.worker, out->cands[w].score, next);
}

// ---- dynamo-cost ------------------------------------------------------------------------------

/*
 * dynamo-cost: NVIDIA Dynamo's KV router, classic cost (ai-dynamo/dynamo:
 * docs/architecture/kv_cache_routing.md, "Cost Calculation"; the selector with its softmax
 * temperature is ai-dynamo/dynamo: lib/kv-router/src/scheduling/selector.rs, which now credits
 * the overlap instead of weighting it):
 *   prefill_blocks = uncached prompt tokens / block size
 *   decode_blocks  = the worker's active blocks + the request's new blocks
 *   cost = overlap_score_weight (1.0) × prefill_blocks + decode_blocks; the lowest wins,
 *   router_temperature 0 (argmin; ties at random).
 * Active blocks: Dynamo counts the blocks of the requests it routed there. We take the blocks
 * the engine reports in use (KV usage × capacity: vLLM counts only blocks referenced by
 * requests) plus the uncached blocks of the requests routed since that sample. The request's
 * "new blocks" are its uncached ones: Dynamo deduplicates blocks shared with active sequences.
 * The documentation's worked example (weight 1): W1 8 + 10 = 18, W2 5 + 5 = 10 (chosen),
 * W3 2 + 9 = 11 — reproduced in tests/test_decider_strategies.c.
 */
static void s_pick_dynamo(decider_pick_t *ctx)
{
    decider_decision_t *out = ctx->out;
    s_all_healthy_eligible(ctx);
    double bs = ctx->block_size ? (double)ctx->block_size : 1.0;
    for (uint32_t i = 0; i < out->ncands; i++) {
        decider_candidate_t *c = &out->cands[i];
        if (!c->healthy) continue;
        double prefill = (double)(ctx->prompt_tokens - c->c.cached_tokens) / bs;
        double active = c->c.kv_usage * (double)c->num_blocks + c->inflight_tokens / bs;
        double decode = active + prefill;
        c->score = S_DYNAMO_OVERLAP_WEIGHT * prefill + decode;
        if (decider_pick_explains(ctx))
            decider_candidate_note(c, "cost %.1f = 1.0 x %.1f prefill + %.1f decode blocks",
                                   c->score, prefill, decode);
    }
    int w = s_best(ctx, s_cmp_score_asc);
    int r = s_runner_up(out, w, s_cmp_score_asc);
    char next[128] = "";
    if (r >= 0 && decider_pick_explains(ctx))
        snprintf(next, sizeof next, "; next best %s %.1f", out->cands[r].c.worker,
                 out->cands[r].score);
    decider_pick_win(ctx, w, "min_cost",
                     "strategy dynamo-cost: %s has the lowest cost %.1f blocks (overlap weight "
                     "1.0 x prefill + decode)%s",
                     out->cands[w].c.worker, out->cands[w].score, next);
}

// ---- history-based baselines ------------------------------------------------------------------

// The pool's history tree for a strategy (created on first use), or NULL.
static decider_history_t *s_history(decider_pick_t *ctx, bool sglang)
{
    if (!ctx->memory) return NULL;
    decider_history_t **h = sglang ? &ctx->memory->sglang : &ctx->memory->prefix;
    if (!*h)
        *h = sglang ? decider_history_new(S_SGLANG_MAX_BLOCKS, S_SGLANG_EVICTION_MS)
                    : decider_history_new(S_PREFIX_MAX_BLOCKS, S_PREFIX_CHECK_MS);
    return *h;
}

/* Matches the prompt in `h` (may be NULL: nothing matches): prefix[i] = matched blocks of
 * candidate i (healthy ones), using the memory's scratch; ids[i] = candidate i's id in h, or
 * -1. */
static void s_history_match(decider_pick_t *ctx, decider_history_t *h, int *ids, uint32_t *prefix)
{
    decider_decision_t *out = ctx->out;
    for (uint32_t i = 0; i < out->ncands; i++) {
        ids[i] =
            h && out->cands[i].healthy ? decider_history_worker(h, out->cands[i].c.worker) : -1;
        prefix[i] = 0;
    }
    if (!h) return;
    uint32_t *scratch = ctx->memory->scratch;
    decider_history_match(h, ctx->req->hashes, ctx->req->nhashes, scratch, IPL_INDEX_MAX_WORKERS);
    for (uint32_t i = 0; i < out->ncands; i++)
        if (ids[i] >= 0) prefix[i] = scratch[ids[i]];
}

static uint64_t s_load(const decider_candidate_t *c)
{
    return c->c.running + c->queue;
}

static int s_cmp_sglang(const decider_candidate_t *a, const decider_candidate_t *b)
{
    int o = s_cmp_double(a->score, b->score);
    return o ? o : (s_load(a) > s_load(b)) - (s_load(a) < s_load(b));
}

/*
 * sglang-cache-aware: the SGLang router's cache_aware policy (sgl-project/sglang:
 * sgl-model-gateway/src/policies/cache_aware.rs; lightseekorg/smg:
 * model_gateway/src/policies/cache_aware.rs; defaults from sgl-project/sglang:
 * sgl-model-gateway/bindings/python/src/sglang_router/router_args.py):
 *   load(W) = requests on W (running + waiting + routed in flight: SGLang counts its own
 *   in-flight requests per worker);
 *   imbalanced when max − min > balance_abs_threshold (64) AND max > balance_rel_threshold
 *   (1.5) × min → the least loaded worker;
 *   otherwise the approximate tree (routing history, not engine state): match_rate = matched /
 *   prompt length; > cache_threshold (0.3) → the best-matching worker, else the worker with the
 *   smallest tree (most spare cache);
 *   either way the prompt is inserted into the tree under the chosen worker.
 * Deviation: the tree runs over block hashes instead of characters (decider_history.h), so
 * match_rate = matched blocks / prompt blocks and the prompt's last partial block is not seen.
 * Ties: lower load, then at random.
 */
static void s_pick_sglang(decider_pick_t *ctx)
{
    decider_decision_t *out = ctx->out;
    s_all_healthy_eligible(ctx);
    decider_history_t *h = s_history(ctx, true);
    uint64_t lo = UINT64_MAX, hi = 0;
    for (uint32_t i = 0; i < out->ncands; i++) {
        const decider_candidate_t *c = &out->cands[i];
        if (!c->healthy) continue;
        uint64_t l = s_load(c);
        if (l > hi) hi = l;
        if (l < lo) lo = l;
    }
    bool imbalanced =
        (double)(hi - lo) > S_SGLANG_BALANCE_ABS && (double)hi > S_SGLANG_BALANCE_REL * (double)lo;
    int ids[out->ncands ? out->ncands : 1];
    uint32_t prefix[out->ncands ? out->ncands : 1];
    s_history_match(ctx, h, ids, prefix);
    size_t nblocks = ctx->req->nhashes;
    uint32_t best_match = 0;
    for (uint32_t i = 0; i < out->ncands; i++) {
        decider_candidate_t *c = &out->cands[i];
        if (!c->healthy) continue;
        if (prefix[i] > best_match) best_match = prefix[i];
        if (decider_pick_explains(ctx))
            decider_candidate_note(c, "load %llu, tree match %u/%zu blocks, tree %zu blocks",
                                   (unsigned long long)s_load(c), prefix[i], nblocks,
                                   h && ids[i] >= 0 ? decider_history_worker_blocks(h, ids[i]) : 0);
    }
    double rate = nblocks ? (double)best_match / (double)nblocks : 0;
    enum {
        S_LEAST_LOADED,
        S_BEST_MATCH,
        S_SMALLEST_TREE
    } mode = imbalanced                        ? S_LEAST_LOADED
             : rate > S_SGLANG_CACHE_THRESHOLD ? S_BEST_MATCH
                                               : S_SMALLEST_TREE;
    // The mode's key (smaller is better) in score's place; ties: lower load, then at random.
    for (uint32_t i = 0; i < out->ncands; i++) {
        decider_candidate_t *c = &out->cands[i];
        if (!c->healthy) continue;
        c->score = mode == S_LEAST_LOADED ? (double)s_load(c)
                   : mode == S_BEST_MATCH ? -(double)prefix[i]
                   : h && ids[i] >= 0     ? (double)decider_history_worker_blocks(h, ids[i])
                                          : 0;
    }
    int w = s_best(ctx, s_cmp_sglang);
    const char *reason;
    if (imbalanced) {
        reason = "imbalanced";
        decider_pick_win(ctx, w, reason,
                         "strategy sglang-cache-aware: loads imbalanced (max %llu - min %llu > 64 "
                         "and max > 1.5 x min): %s is the least loaded",
                         (unsigned long long)hi, (unsigned long long)lo, out->cands[w].c.worker);
    } else if (rate > S_SGLANG_CACHE_THRESHOLD) {
        reason = "cache_match";
        decider_pick_win(ctx, w, reason,
                         "strategy sglang-cache-aware: %s matches %u of %zu prompt blocks in the "
                         "routing-history tree (rate %.2f > 0.3)",
                         out->cands[w].c.worker, prefix[w], nblocks, rate);
    } else {
        reason = "smallest_tree";
        decider_pick_win(ctx, w, reason,
                         "strategy sglang-cache-aware: best match rate %.2f <= 0.3; %s has the "
                         "smallest tree (%zu blocks)",
                         rate, out->cands[w].c.worker,
                         h && ids[w] >= 0 ? decider_history_worker_blocks(h, ids[w]) : 0);
    }
    if (h && ids[w] >= 0)
        decider_history_insert(h, ids[w], ctx->req->hashes, ctx->req->nhashes, ctx->mono_ms);
}

/*
 * prefix-hash: vLLM production-stack `--routing-logic prefixaware` (vllm-project/production-stack:
 * src/vllm_router/routers/routing_logic.py, and the HashTrie of
 * src/vllm_router/prefix/hashtrie.py): a trie of routed prompts in 128-character chunks
 * hashed with xxh64; the endpoints sharing the longest matched prefix are the candidates (all
 * of them when nothing matches), one is picked at random, and the prompt is inserted under it.
 * --prefix-min-match-length defaults to 0 (no QPS fallback).
 * Deviations: chunks are our blocks (their chained hashes, decider_history.h) instead of 128
 * characters — a 16-token block is ~64 characters; the trie is bounded (see
 * S_PREFIX_MAX_BLOCKS) where production-stack's never evicts.
 */
static void s_pick_prefix_hash(decider_pick_t *ctx)
{
    decider_decision_t *out = ctx->out;
    decider_history_t *h = s_history(ctx, false);
    int ids[out->ncands ? out->ncands : 1];
    uint32_t prefix[out->ncands ? out->ncands : 1];
    s_history_match(ctx, h, ids, prefix);
    uint32_t longest = 0;
    for (uint32_t i = 0; i < out->ncands; i++)
        if (out->cands[i].healthy && prefix[i] > longest) longest = prefix[i];
    uint32_t n = 0;
    for (uint32_t i = 0; i < out->ncands; i++) {
        decider_candidate_t *c = &out->cands[i];
        c->c.eligible = c->healthy && prefix[i] == longest;
        n += c->c.eligible;
        if (!c->healthy) continue;
        c->score = (double)prefix[i];
        if (decider_pick_explains(ctx))
            decider_candidate_note(c, "trie match %u blocks%s", prefix[i],
                                   c->c.eligible ? "" : " (shorter than the longest)");
    }
    uint32_t k = decider_pick_random(ctx, n);
    int w = -1;
    for (uint32_t i = 0; i < out->ncands && w < 0; i++)
        if (out->cands[i].c.eligible && k-- == 0) w = (int)i;
    if (longest)
        decider_pick_win(ctx, w, "prefix_match",
                         "strategy prefix-hash: %s drawn from the %u workers whose routing "
                         "history shares the longest prefix (%u of %zu blocks)",
                         out->cands[w].c.worker, n, longest, ctx->req->nhashes);
    else
        decider_pick_win(ctx, w, "prefix_miss",
                         "strategy prefix-hash: no routed prompt shares a prefix; %s drawn from "
                         "all %u workers",
                         out->cands[w].c.worker, n);
    if (h && ids[w] >= 0)
        decider_history_insert(h, ids[w], ctx->req->hashes, ctx->req->nhashes, ctx->mono_ms);
}
