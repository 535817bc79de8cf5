/*
 * decider_predictor — bounded recursive least squares per worker set (see the header).
 */
#include "decider_predictor.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ipl_error.h"

#define S_NP                DECIDER_PREDICTOR_NPARAMS
#define S_RECENT_ALPHA      0.05 // weight of one sample in the recent RMSE
#define S_MAX_FEATURE       1e9  // features beyond this are malformed
#define S_MAX_OBSERVED_TTFT 3600.0

// Estimator coordinates: z = x × s_scale (tokens in thousands), θ = w × s_scale.
static const double s_scale[S_NP] = {1, 1, 1e-3, 1, 1e-3};
static const char *const s_param_names[S_NP] = {"base_s", "per_queued_request_s",
                                                "per_queued_token_s", "per_running_s",
                                                "per_uncached_token_s"};

typedef struct {
    char *name;
    double w[S_NP];       // parameters in estimator coordinates
    double P[S_NP][S_NP]; // covariance in estimator coordinates
    double network_s;
    uint64_t samples, outliers, invalid, errors; // errors: samples in the error sums
    double sum_abs, sum_sq, recent_sq;
} s_set_t;

struct decider_predictor {
    decider_predictor_config_t config;
    pthread_mutex_t lock;
    s_set_t *sets;
    size_t nsets, cap;
};

void decider_predictor_config_defaults(decider_predictor_config_t *c)
{
    *c = (decider_predictor_config_t){
        // l40s-27b-fp8 (sim_profile.c): a 31 ms step + 10 ms before the scheduler; 3,000
        // prompt tokens/s; the extra time a running sequence adds to the steps before the
        // first token (decode work, context reads) ≈ 5 ms.
        .prior = {0.04, 0.0, 1.0 / 3000.0, 0.005, 1.0 / 3000.0},
        .lo = {0.0, 0.0, 0.0, 0.0, 1e-6},
        .hi = {10.0, 30.0, 1e-2, 1.0, 1e-2},
        .forgetting = 0.995,
        .p0 = 1.0,
        .p_max = 1e4,
        .outlier_k = 5.0,
        .outlier_floor_s = 0.05,
        .warmup = 10,
    };
}

decider_predictor_t *decider_predictor_new(const decider_predictor_config_t *config)
{
    decider_predictor_t *self = calloc(1, sizeof *self);
    if (!self) return NULL;
    self->config = *config;
    decider_predictor_config_t *c = &self->config;
    if (!(c->forgetting > 0.9 && c->forgetting <= 1.0)) c->forgetting = 0.995;
    if (!(c->p0 > 0)) c->p0 = 1.0;
    if (!(c->p_max >= c->p0 * S_NP)) c->p_max = c->p0 * S_NP * 1000;
    if (!(c->outlier_k > 1)) c->outlier_k = 5.0;
    for (int i = 0; i < S_NP; i++) {
        if (!(c->hi[i] >= c->lo[i])) c->hi[i] = c->lo[i];
        c->prior[i] = fmin(fmax(c->prior[i], c->lo[i]), c->hi[i]);
    }
    pthread_mutex_init(&self->lock, NULL);
    return self;
}

void decider_predictor_destroy(decider_predictor_t **self_p)
{
    if (!self_p || !*self_p) return;
    decider_predictor_t *self = *self_p;
    for (size_t i = 0; i < self->nsets; i++)
        free(self->sets[i].name);
    free(self->sets);
    pthread_mutex_destroy(&self->lock);
    free(self);
    *self_p = NULL;
}

static void s_set_init(const decider_predictor_config_t *c, s_set_t *s)
{
    memset(s->P, 0, sizeof s->P);
    for (int i = 0; i < S_NP; i++) {
        s->w[i] = c->prior[i] / s_scale[i];
        s->P[i][i] = c->p0;
    }
}

// The set named `name`, created when `create`. NULL when absent, full or out of memory.
static s_set_t *s_find(decider_predictor_t *self, const char *name, bool create)
{
    for (size_t i = 0; i < self->nsets; i++)
        if (!strcmp(self->sets[i].name, name)) return &self->sets[i];
    if (!create || self->nsets >= DECIDER_PREDICTOR_MAX_SETS) return NULL;
    if (self->nsets == self->cap) {
        size_t cap = self->cap ? self->cap * 2 : 8;
        s_set_t *sets = realloc(self->sets, cap * sizeof *sets);
        if (!sets) return NULL;
        self->sets = sets;
        self->cap = cap;
    }
    s_set_t *s = &self->sets[self->nsets];
    memset(s, 0, sizeof *s);
    s->name = strdup(name);
    if (!s->name) return NULL;
    s_set_init(&self->config, s);
    self->nsets++;
    return s;
}

// The model the router uses: the estimator's parameters within their clamps.
static void s_model(const decider_predictor_config_t *c, const s_set_t *s, decider_model_t *out)
{
    for (int i = 0; i < S_NP; i++)
        out->theta[i] = fmin(fmax(s->w[i] * s_scale[i], c->lo[i]), c->hi[i]);
    out->network_s = s->network_s;
}

static void s_prior(const decider_predictor_config_t *c, decider_model_t *out)
{
    memcpy(out->theta, c->prior, sizeof out->theta);
    out->network_s = 0;
}

int decider_predictor_model(decider_predictor_t *self, const char *set, decider_model_t *out)
{
    if (!set || !*set) {
        s_prior(&self->config, out);
        return IPL_E_INVAL;
    }
    pthread_mutex_lock(&self->lock);
    s_set_t *s = s_find(self, set, true);
    if (s)
        s_model(&self->config, s, out);
    else
        s_prior(&self->config, out);
    pthread_mutex_unlock(&self->lock);
    return s ? IPL_OK : IPL_E_RANGE;
}


static bool s_valid(double v, double max)
{
    return isfinite(v) && v >= 0 && v <= max;
}

// The estimator's input for features x.
static void s_z(const decider_features_t *x, double z[S_NP])
{
    const double raw[S_NP] = {1.0, x->queued, x->queued_tokens, x->running, x->uncached_tokens};
    for (int i = 0; i < S_NP; i++)
        z[i] = raw[i] * s_scale[i];
}

// One RLS step on set s with input z and target y (a-priori error e), then the bounds.
static void s_update(const decider_predictor_config_t *c, s_set_t *s, const double z[S_NP],
                     double e)
{
    double Pz[S_NP], denom = c->forgetting;
    for (int i = 0; i < S_NP; i++) {
        Pz[i] = 0;
        for (int j = 0; j < S_NP; j++)
            Pz[i] += s->P[i][j] * z[j];
        denom += z[i] * Pz[i];
    }
    double k[S_NP];
    for (int i = 0; i < S_NP; i++) {
        k[i] = Pz[i] / denom;
        s->w[i] += k[i] * e;
    }
    // P ← (P − k (Pz)ᵀ) / λ, kept symmetric; then the trace cap.
    double trace = 0;
    for (int i = 0; i < S_NP; i++) {
        for (int j = i; j < S_NP; j++) {
            double v = (s->P[i][j] - k[i] * Pz[j]) / c->forgetting;
            s->P[i][j] = s->P[j][i] = v;
        }
        if (!(s->P[i][i] > 0)) s->P[i][i] = 1e-9; // numerical floor: stay positive definite
        trace += s->P[i][i];
    }
    if (trace > c->p_max) {
        double f = c->p_max / trace;
        for (int i = 0; i < S_NP; i++)
            for (int j = 0; j < S_NP; j++)
                s->P[i][j] *= f;
    }
    // The estimator itself is never clamped (clamping its coordinates would bias every later
    // step: the gain is correlated across parameters); s_model clamps what the router uses.
    // Only a numerical failure starts it over from the prior.
    bool finite = true;
    for (int i = 0; i < S_NP; i++)
        for (int j = 0; j < S_NP; j++)
            finite = finite && isfinite(s->w[i]) && isfinite(s->P[i][j]);
    if (!finite) s_set_init(c, s);
}

int decider_predictor_observe(decider_predictor_t *self, const char *set,
                              const decider_features_t *x, double ttft_s)
{
    if (!set || !*set) return IPL_E_INVAL;
    pthread_mutex_lock(&self->lock);
    s_set_t *s = s_find(self, set, true);
    if (!s) {
        pthread_mutex_unlock(&self->lock);
        return IPL_E_RANGE;
    }
    if (!s_valid(x->queued, S_MAX_FEATURE) || !s_valid(x->queued_tokens, S_MAX_FEATURE) ||
        !s_valid(x->running, S_MAX_FEATURE) || !s_valid(x->uncached_tokens, S_MAX_FEATURE) ||
        !s_valid(ttft_s, S_MAX_OBSERVED_TTFT)) {
        s->invalid++;
        pthread_mutex_unlock(&self->lock);
        return IPL_E_INVAL;
    }
    const decider_predictor_config_t *c = &self->config;
    double z[S_NP], yhat = 0;
    s_z(x, z);
    for (int i = 0; i < S_NP; i++)
        yhat += s->w[i] * z[i];
    double e = (ttft_s - s->network_s) - yhat; // the estimator's innovation
    double ae = fabs(e);
    // Error statistics are of the prediction the router made (clamped parameters).
    decider_model_t used;
    s_model(c, s, &used);
    double ue = ttft_s - decider_model_predict(&used, x, NULL);
    s->errors++;
    s->sum_abs += fabs(ue);
    s->sum_sq += ue * ue;
    // The a-priori error is expected to be larger where the estimator knows little (zᵀPz
    // large: a feature never seen before), so the limit widens there.
    double zPz = 0;
    for (int i = 0; i < S_NP; i++)
        for (int j = 0; j < S_NP; j++)
            zPz += z[i] * s->P[i][j] * z[j];
    double limit =
        fmax(c->outlier_k * sqrt(s->recent_sq), c->outlier_floor_s) * sqrt(1.0 + fmax(zPz, 0.0));
    bool outlier = s->samples >= c->warmup && ae > limit;
    // The recent RMSE takes the error clipped to the limit: isolated outliers barely move it,
    // a persistent shift raises it until the shifted samples are accepted.
    double clipped = s->samples >= c->warmup ? fmin(ae, limit) : ae;
    s->recent_sq = s->errors == 1
                       ? clipped * clipped
                       : (1 - S_RECENT_ALPHA) * s->recent_sq + S_RECENT_ALPHA * clipped * clipped;
    int rc = IPL_OK;
    if (outlier) {
        s->outliers++;
        rc = IPL_E_RANGE;
    } else {
        s_update(c, s, z, e);
        s->samples++;
    }
    pthread_mutex_unlock(&self->lock);
    return rc;
}

int decider_predictor_set_network(decider_predictor_t *self, const char *set, double seconds)
{
    if (!set || !*set || !s_valid(seconds, S_MAX_OBSERVED_TTFT)) return IPL_E_INVAL;
    pthread_mutex_lock(&self->lock);
    s_set_t *s = s_find(self, set, true);
    if (s) s->network_s = seconds;
    pthread_mutex_unlock(&self->lock);
    return s ? IPL_OK : IPL_E_RANGE;
}

static void s_stats(const s_set_t *s, decider_predictor_stats_t *st)
{
    *st = (decider_predictor_stats_t){
        .samples = s->samples,
        .outliers = s->outliers,
        .invalid = s->invalid,
        .mae_s = s->errors ? s->sum_abs / (double)s->errors : 0,
        .rmse_s = s->errors ? sqrt(s->sum_sq / (double)s->errors) : 0,
        .recent_rmse_s = sqrt(s->recent_sq),
    };
}

int decider_predictor_stats(decider_predictor_t *self, const char *set,
                            decider_predictor_stats_t *stats, decider_model_t *model)
{
    pthread_mutex_lock(&self->lock);
    s_set_t *s = set ? s_find(self, set, false) : NULL;
    if (s) {
        if (stats) s_stats(s, stats);
        if (model) s_model(&self->config, s, model);
    }
    pthread_mutex_unlock(&self->lock);
    return s ? IPL_OK : IPL_E_NOTFOUND;
}

static cJSON *s_params_json(const double theta[S_NP])
{
    cJSON *o = cJSON_CreateObject();
    for (int i = 0; i < S_NP; i++)
        cJSON_AddNumberToObject(o, s_param_names[i], theta[i]);
    return o;
}

char *decider_predictor_json(decider_predictor_t *self)
{
    cJSON *root = cJSON_CreateObject();
    if (!root) return NULL;
    const decider_predictor_config_t *c = &self->config;
    cJSON_AddStringToObject(root, "model",
                            "ttft = base_s + per_queued_request_s x queued + per_queued_token_s x "
                            "queued_tokens + per_running_s x running + per_uncached_token_s x "
                            "uncached_tokens + network_s");
    cJSON_AddStringToObject(root, "calibration", "recursive least squares per worker set");
    cJSON_AddNumberToObject(root, "forgetting", c->forgetting);
    cJSON_AddNumberToObject(root, "outlier_k", c->outlier_k);
    cJSON_AddNumberToObject(root, "outlier_floor_s", c->outlier_floor_s);
    cJSON_AddNumberToObject(root, "warmup", c->warmup);
    cJSON_AddItemToObject(root, "prior", s_params_json(c->prior));
    cJSON_AddItemToObject(root, "min", s_params_json(c->lo));
    cJSON_AddItemToObject(root, "max", s_params_json(c->hi));
    cJSON *sets = cJSON_AddArrayToObject(root, "worker_sets");
    pthread_mutex_lock(&self->lock);
    for (size_t i = 0; i < self->nsets; i++) {
        const s_set_t *s = &self->sets[i];
        decider_model_t m;
        decider_predictor_stats_t st;
        s_model(&self->config, s, &m);
        s_stats(s, &st);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", s->name);
        cJSON_AddItemToObject(o, "params", s_params_json(m.theta));
        cJSON_AddNumberToObject(o, "network_s", m.network_s);
        cJSON_AddNumberToObject(o, "prefill_tokens_per_s", m.theta[4] > 0 ? 1.0 / m.theta[4] : 0);
        cJSON_AddNumberToObject(o, "samples", (double)st.samples);
        cJSON_AddNumberToObject(o, "outliers", (double)st.outliers);
        cJSON_AddNumberToObject(o, "invalid", (double)st.invalid);
        cJSON_AddNumberToObject(o, "mae_s", st.mae_s);
        cJSON_AddNumberToObject(o, "rmse_s", st.rmse_s);
        cJSON_AddNumberToObject(o, "recent_rmse_s", st.recent_rmse_s);
        cJSON_AddItemToArray(sets, o);
    }
    pthread_mutex_unlock(&self->lock);
    char *json = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return json;
}
