/*
 * decider_predictor — predicted time to first token of one request on one worker, with
 * parameters per worker set calibrated online from observed TTFTs.
 *
 * The model is linear in five features of the candidate worker W (decider_features_t), which
 * mirrors the engine's step model (sim_profile.h, vLLM's continuous batching): every step costs
 * a fixed part plus a part per running sequence plus a part per prompt token computed, and the
 * request's first token comes after the prefills queued ahead of it and its own:
 *
 *   ttft(W) = θ0                              base: API server, scheduling, the first step
 *           + θ1 × queued                     per request ahead (waiting + routed in flight)
 *           + θ2 × queued_tokens              per uncached prompt token ahead of it
 *           + θ3 × running                    per running sequence (every step is longer)
 *           + θ4 × uncached_tokens            its own prefill: prompt − cached prefix
 *           + network_s                       remote providers: a fixed latency per worker set
 *                                             (a seam for now; 0 for local workers)
 *
 * Calibration: recursive least squares, one estimator per worker set, on observations
 * (features at decision time, observed TTFT − network_s):
 *
 *   e = y − θ·x            (a-priori error; /debug/model reports the router's, clamped θ)
 *   k = P x / (λ + xᵀ P x) θ ← clamp(θ + k e)      P ← (P − k xᵀ P) / λ
 *
 * bounded so that a quiet or noisy stream cannot wreck it:
 *   - forgetting factor λ (default 0.995: a memory of ~200 requests) tracks drift;
 *   - P starts at p0·I around the prior (the flags' figures) and its trace is capped, so a
 *     feature that stays constant for hours (P grows as 1/λⁿ in that direction) cannot make
 *     the next sample swing θ ("covariance wind-up");
 *   - the router predicts with each θi clamped to a physical range (no negative costs,
 *     prefill between 100 and 1,000,000 tokens/s); the estimator itself stays unclamped (a
 *     coordinate-wise clamp inside RLS biases every later step, the gain being correlated
 *     across parameters) and starts over from the prior only on a numerical failure;
 *   - outlier guard: after `warmup` samples, an observation whose |e| exceeds
 *     max(outlier_k × the recent RMSE, outlier_floor_s) × sqrt(1 + xᵀPx) is not learned from
 *     (the last factor widens the limit where the estimator knows little, e.g. a feature seen
 *     for the first time); the recent RMSE still takes in the clipped error, so a real shift of
 *     the system is accepted after a few consecutive "outliers" while an isolated one is
 *     ignored.
 * Token features enter the estimator in thousands of tokens, so that P is well scaled.
 *
 * Worker sets are named by the caller (the router uses the InferenceWorkerSet's name, see
 * decider_router.h) and created on first use, at most DECIDER_PREDICTOR_MAX_SETS.
 *
 * Thread-safe (one mutex): the router predicts on its decision thread, observations may come
 * from any thread.
 */
#ifndef DECIDER_PREDICTOR_H
#define DECIDER_PREDICTOR_H

#include <stddef.h>
#include <stdint.h>

#define DECIDER_PREDICTOR_NPARAMS  5
#define DECIDER_PREDICTOR_MAX_SETS 1024

/* What the router knows about one candidate when it predicts. All >= 0. */
typedef struct {
    double queued;          /* requests ahead of this one: waiting + routed in flight */
    double queued_tokens;   /* prefill work ahead of it: uncached prompt tokens not yet
                               prefilled (the router's backlog, decider_router.h) */
    double running;         /* requests running */
    double uncached_tokens; /* this prompt's tokens not cached on the worker */
} decider_features_t;

/* One worker set's parameters (θ0..θ4 as in the header comment) and network term. */
typedef struct {
    double theta[DECIDER_PREDICTOR_NPARAMS];
    double network_s;
} decider_model_t;

/* A prediction split into the parts an explanation shows. */
typedef struct {
    double base_s;    /* θ0 */
    double wait_s;    /* θ1·queued + θ2·queued_tokens + θ3·running */
    double prefill_s; /* θ4·uncached_tokens */
    double network_s;
    double total_s; /* their sum, never below 0 */
} decider_terms_t;

typedef struct {
    double prior[DECIDER_PREDICTOR_NPARAMS]; /* θ before any observation */
    double lo[DECIDER_PREDICTOR_NPARAMS];    /* clamps */
    double hi[DECIDER_PREDICTOR_NPARAMS];
    double forgetting;      /* λ in (0.9, 1] */
    double p0;              /* initial covariance scale: how weak the prior is */
    double p_max;           /* cap on trace(P) */
    double outlier_k;       /* reject when |e| > k × recent RMSE ... */
    double outlier_floor_s; /* ... and > this */
    uint32_t warmup;        /* samples learned before the guard applies */
} decider_predictor_config_t;

/* Fills the defaults. The prior is the default engine profile (l40s-27b-fp8 in sim_profile.c):
 * base 0.04 s, 0 per queued request, 1/3000 s per queued or uncached token, 5 ms per running
 * request; λ 0.995, p0 1 (the prior weighs about as much as a few observations), p_max 1e4, outlier
 * 5 × recent RMSE (floor 0.05 s), warmup 10. */
void decider_predictor_config_defaults(decider_predictor_config_t *config);

typedef struct decider_predictor decider_predictor_t;

/* The config is copied. NULL on allocation failure. */
decider_predictor_t *decider_predictor_new(const decider_predictor_config_t *config);
void decider_predictor_destroy(decider_predictor_t **self_p);

/* The current model of worker set `set` (created with the prior on first use) into *out.
 * Returns 0, or IPL_E_RANGE (too many sets: *out gets the prior) / IPL_E_INVAL (empty name). */
int decider_predictor_model(decider_predictor_t *self, const char *set, decider_model_t *out);

/* Pure: the prediction of `model` for features `x`, split into terms. Returns terms->total_s.
 * Inline: the router predicts every candidate of every decision. */
static inline double decider_model_predict(const decider_model_t *m, const decider_features_t *x,
                                           decider_terms_t *terms)
{
    decider_terms_t t = {
        .base_s = m->theta[0],
        .wait_s =
            m->theta[1] * x->queued + m->theta[2] * x->queued_tokens + m->theta[3] * x->running,
        .prefill_s = m->theta[4] * x->uncached_tokens,
        .network_s = m->network_s,
    };
    t.total_s = t.base_s + t.wait_s + t.prefill_s + t.network_s;
    if (!(t.total_s > 0)) t.total_s = 0;
    if (terms) *terms = t;
    return t.total_s;
}

/* Learns from one observation: `x` as predicted at decision time, `ttft_s` as observed (it
 * includes the network term). Returns 0 (learned), IPL_E_RANGE (rejected as an outlier; counted)
 * or IPL_E_INVAL (negative or non-finite input, empty set name; counted). */
int decider_predictor_observe(decider_predictor_t *self, const char *set,
                              const decider_features_t *x, double ttft_s);

/* Sets the fixed network latency of a worker set (remote providers). 0 or IPL_E_INVAL/RANGE. */
int decider_predictor_set_network(decider_predictor_t *self, const char *set, double seconds);

typedef struct {
    uint64_t samples;     /* observations learned from */
    uint64_t outliers;    /* rejected by the guard */
    uint64_t invalid;     /* rejected as malformed */
    double mae_s;         /* mean |error| of the predictions made (before each observation), over
                             learned and rejected samples */
    double rmse_s;        /* root mean square of the same */
    double recent_rmse_s; /* the estimator's recent a-priori error (EWMA), for the guard */
} decider_predictor_stats_t;

/* Statistics and model of `set`. 0, or IPL_E_NOTFOUND when the set does not exist. */
int decider_predictor_stats(decider_predictor_t *self, const char *set,
                            decider_predictor_stats_t *stats, decider_model_t *model);

/* Every set's parameters, prior, sample counts and errors as a JSON object (malloc'd; the
 * caller frees), for GET /debug/model. NULL on allocation failure. */
char *decider_predictor_json(decider_predictor_t *self);

#endif
