/*
 * exporter_series — record → series mapping. See exporter_series.h.
 *
 * The label-set cache maps the formatted label string `model="..",tenant="..",pool="..",
 * endpoint=".."` to the series of that label set, so a record costs one hash lookup instead
 * of a dozen registry lookups (which take the registry mutex and scan a family's series).
 * Series keyed by more than the label set (status code, outcome and reason, decision, ...)
 * are found through `cache`, "name{labels}" → the registry's series, for the same reason.
 */
#include "exporter_series.h"

#include <czmq.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exporter_outcome.h"
#include "exporter_values.h"
#include "ipl_drops.h"
#include "ipl_error.h"
#include "ipl_log.h"

#define S_OVERFLOW        EXPORTER_VALUES_OVERFLOW
#define S_MAX_LABEL_NAMES 64 /* distinct label values of inferplane_request_labels_total */
#define S_MAX_REASONS     64 /* distinct RECORD.reason values */
#define S_MAX_STRATEGIES  32
#define S_MAX_RULES       256
#define S_MAX_BACKENDS    64
#define S_SET_LABELS      (4 * (EXPORTER_VALUES_MAX_LEN + 16)) /* a formatted label set */
#define S_LABELS          (S_SET_LABELS + 4 * (EXPORTER_VALUES_MAX_LEN + 24))

/* Reasons pre-registered at 0 so that dashboards see the series before the first drop. */
static const char *const s_drop_reasons[] = {"truncated",       "wrong_type",   "out_of_range",
                                             "bad_version",     "unknown_type", "trailing_bytes",
                                             "unexpected_type", "multipart"};

/* OpenTelemetry GenAI semantic conventions (docs/gen-ai/gen-ai-metrics.md), explicit bucket
 * boundaries as the conventions give them. */
static const double s_genai_token_b[] = {
    1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864};
static const double s_genai_duration_b[] = {0.01, 0.02, 0.04, 0.08,  0.16,  0.32,  0.64,
                                            1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92};
/* gen_ai.server.time_to_first_token's boundaries are vLLM's first 16 TTFT buckets (0.001 .. 10),
 * gen_ai.server.time_per_output_token's vLLM's first 13 inter-token ones (0.01 .. 2.5). */
#define S_GENAI_TTFT_NB 16
#define S_GENAI_TPOT_NB 13
#define S_N(a)          (sizeof(a) / sizeof((a)[0]))

typedef struct {
    ipl_metric_t *ttft, *e2e, *itl, *pred_err;
    ipl_metric_t *cached, *uncached, *completion;
    ipl_metric_t *ttft_predicted, *ttft_observed;
    ipl_metric_t *outcomes[EXPORTER_OUTCOME_COUNT]; /* created on first use */
    const char *model, *tenant, *pool;              /* escaped, borrowed from the values */
    char *labels;                                   /* owned; the key of this set */
    char *mtp; /* owned: model, tenant and pool only (the series without the endpoint) */
} s_set_t;

struct exporter_series {
    ipl_metrics_t *metrics; /* borrowed */
    zhashx_t *sets;         /* labels → s_set_t */
    size_t max_sets;
    s_set_t *overflow; /* lazily created, also in `sets` */
    exporter_values_t *tenants, *models, *pools, *endpoints;
    exporter_values_t *reasons, *strategies, *rules, *backends, *label_names;
    zhashx_t *cache; /* "name{labels}" → ipl_metric_t (the registry's) */
    ipl_metric_t *overflowed, *applied;
    atomic_uint_fast64_t records, dropped;
};

static void s_set_free(void **item)
{
    s_set_t *set = (s_set_t *)*item;
    if (set) {
        free(set->labels);
        free(set->mtp);
        free(set);
        *item = NULL;
    }
}

static size_t s_or(size_t value, size_t fallback)
{
    return value ? value : fallback;
}

exporter_series_t *exporter_series_new(ipl_metrics_t *metrics,
                                       const exporter_series_config_t *config)
{
    assert(metrics);
    exporter_series_config_t c = config ? *config : (exporter_series_config_t){0};
    exporter_series_t *self = calloc(1, sizeof(*self));
    if (!self) return NULL;
    self->metrics = metrics;
    self->max_sets = s_or(c.max_label_sets, EXPORTER_SERIES_DEFAULT_MAX_LABEL_SETS);
    self->sets = zhashx_new();
    self->cache = zhashx_new();
    self->tenants = exporter_values_new(metrics, "tenant",
                                        s_or(c.max_tenants, EXPORTER_SERIES_DEFAULT_MAX_TENANTS));
    self->models = exporter_values_new(metrics, "model",
                                       s_or(c.max_models, EXPORTER_SERIES_DEFAULT_MAX_MODELS));
    self->pools =
        exporter_values_new(metrics, "pool", s_or(c.max_pools, EXPORTER_SERIES_DEFAULT_MAX_POOLS));
    self->endpoints = exporter_values_new(
        metrics, "endpoint", s_or(c.max_endpoints, EXPORTER_SERIES_DEFAULT_MAX_ENDPOINTS));
    self->reasons = exporter_values_new(metrics, "reason", S_MAX_REASONS);
    self->strategies = exporter_values_new(metrics, "strategy", S_MAX_STRATEGIES);
    self->rules = exporter_values_new(metrics, "rule", S_MAX_RULES);
    self->backends = exporter_values_new(metrics, "backend", S_MAX_BACKENDS);
    self->label_names = exporter_values_new(metrics, "label", S_MAX_LABEL_NAMES);
    if (!self->sets || !self->cache || !self->tenants || !self->models || !self->pools ||
        !self->endpoints || !self->reasons || !self->strategies || !self->rules ||
        !self->backends || !self->label_names) {
        exporter_series_destroy(&self);
        return NULL;
    }
    zhashx_set_destructor(self->sets, s_set_free);
    self->overflowed = ipl_metrics_counter(
        metrics, "inferplane_exporter_label_overflow_total",
        "Records counted under the __overflow__ label set because too many label sets exist.",
        NULL);
    self->applied = ipl_metrics_counter(metrics, "inferplane_exporter_records_total",
                                        "RECORDs applied (frames that decoded to one).", NULL);
    ipl_drops_register(metrics, s_drop_reasons, sizeof s_drop_reasons / sizeof s_drop_reasons[0]);
    return self;
}

void exporter_series_destroy(exporter_series_t **self_p)
{
    assert(self_p);
    exporter_series_t *self = *self_p;
    if (!self) return;
    zhashx_destroy(&self->sets); /* frees every set, overflow included */
    zhashx_destroy(&self->cache);
    exporter_values_destroy(&self->tenants);
    exporter_values_destroy(&self->models);
    exporter_values_destroy(&self->pools);
    exporter_values_destroy(&self->endpoints);
    exporter_values_destroy(&self->reasons);
    exporter_values_destroy(&self->strategies);
    exporter_values_destroy(&self->rules);
    exporter_values_destroy(&self->backends);
    exporter_values_destroy(&self->label_names);
    free(self);
    *self_p = NULL;
}

typedef enum { S_COUNTER, S_HISTOGRAM } s_kind_t;

/* The registry's series `name{labels}`, through the cache. `bounds` for histograms. */
static ipl_metric_t *s_series(exporter_series_t *self, s_kind_t kind, const char *name,
                              const char *help, const char *labels, const double *bounds,
                              size_t nbounds)
{
    char key[S_LABELS + 256];
    int n = snprintf(key, sizeof key, "%s{%s}", name, labels);
    bool cacheable = n > 0 && (size_t)n < sizeof key; /* a cut key could name another series */
    ipl_metric_t *metric = cacheable ? zhashx_lookup(self->cache, key) : NULL;
    if (metric) return metric;
    metric = kind == S_COUNTER
                 ? ipl_metrics_counter(self->metrics, name, help, labels)
                 : ipl_metrics_histogram(self->metrics, name, help, labels, bounds, nbounds);
    if (cacheable) /* out of memory: found without the cache next time */
        (void)zhashx_insert(self->cache, key, metric);
    return metric;
}

static s_set_t *s_set_new(exporter_series_t *self, const char *labels, const char *model,
                          const char *tenant, const char *pool)
{
    s_set_t *set = calloc(1, sizeof(*set));
    if (!set) return NULL;
    char mtp[S_SET_LABELS];
    snprintf(mtp, sizeof mtp, "model=\"%s\",tenant=\"%s\",pool=\"%s\"", model, tenant, pool);
    set->labels = strdup(labels);
    set->mtp = strdup(mtp);
    if (!set->labels || !set->mtp) {
        void *item = set;
        s_set_free(&item);
        return NULL;
    }
    set->model = model, set->tenant = tenant, set->pool = pool;
    ipl_metrics_t *m = self->metrics;
    set->ttft =
        ipl_metrics_histogram(m, "inferplane_request_ttft_seconds",
                              "Time to first token as clients saw it at the gateway.", labels,
                              ipl_metrics_vllm_ttft_buckets, ipl_metrics_vllm_ttft_nbuckets);
    set->e2e = ipl_metrics_histogram(m, "inferplane_request_e2e_seconds",
                                     "End-to-end request latency at the gateway.", labels,
                                     ipl_metrics_vllm_e2e_buckets, ipl_metrics_vllm_e2e_nbuckets);
    set->itl = ipl_metrics_histogram(m, "inferplane_request_itl_seconds",
                                     "Mean inter-token latency of each streamed request.", labels,
                                     ipl_metrics_vllm_itl_buckets, ipl_metrics_vllm_itl_nbuckets);
    set->pred_err = ipl_metrics_histogram(
        m, "inferplane_ttft_prediction_error_seconds",
        "Absolute difference between the decider's predicted TTFT and the observed TTFT.", labels,
        ipl_metrics_vllm_ttft_buckets, ipl_metrics_vllm_ttft_nbuckets);
    set->cached =
        ipl_metrics_counter(m, "inferplane_prompt_tokens_cached_total",
                            "Prompt tokens served from the prefix cache (usage).", labels);
    set->uncached = ipl_metrics_counter(m, "inferplane_prompt_tokens_uncached_total",
                                        "Prompt tokens that had to be prefilled (usage).", labels);
    set->completion = ipl_metrics_counter(m, "inferplane_completion_tokens_total",
                                          "Completion tokens generated (usage).", labels);
    set->ttft_predicted = ipl_metrics_counter(
        m, "inferplane_ttft_predicted_seconds_total",
        "Sum of the decider's predicted TTFT over the successful requests that have both a "
        "prediction and an observed TTFT.",
        labels);
    set->ttft_observed = ipl_metrics_counter(
        m, "inferplane_ttft_observed_seconds_total",
        "Sum of the observed TTFT over the same requests as "
        "inferplane_ttft_predicted_seconds_total (their ratio is the prediction's bias).",
        labels);
    return set;
}

/* The set for a record's labels, created on first use; the overflow set past the cap. */
static s_set_t *s_set_for(exporter_series_t *self, const ipl_record_t *rec)
{
    const char *model = exporter_values_get(self->models, rec->model);
    const char *tenant = exporter_values_get(self->tenants, rec->tenant);
    const char *pool = exporter_values_get(self->pools, rec->pool);
    const char *endpoint = exporter_values_get(self->endpoints, rec->endpoint);
    char labels[S_SET_LABELS];
    snprintf(labels, sizeof labels, "model=\"%s\",tenant=\"%s\",pool=\"%s\",endpoint=\"%s\"", model,
             tenant, pool, endpoint);
    s_set_t *set = zhashx_lookup(self->sets, labels);
    if (set) return set;
    bool full = zhashx_size(self->sets) >= self->max_sets;
    if (full) {
        ipl_metric_inc(self->overflowed);
        IPL_LOG_EVERY(60, IPL_LOG_WARN, "label_sets_full", "max=%zu", self->max_sets);
        if (self->overflow) return self->overflow;
        model = tenant = pool = endpoint = S_OVERFLOW;
        snprintf(labels, sizeof labels, "model=\"%s\",tenant=\"%s\",pool=\"%s\",endpoint=\"%s\"",
                 model, tenant, pool, endpoint);
    }
    set = s_set_new(self, labels, model, tenant, pool);
    if (!set) return NULL;
    if (zhashx_insert(self->sets, set->labels, set) != 0) {
        void *item = set;
        s_set_free(&item);
        return NULL;
    }
    if (full) self->overflow = set;
    return set;
}

static bool s_positive(double v)
{
    return isfinite(v) && v > 0;
}

static const char *s_str(const char *s)
{
    return s ? s : "";
}

/* inferplane_request_labels_total{label}: requests by semantic label (names only), at most
 * S_MAX_LABEL_NAMES distinct values, the rest as __overflow__. */
static void s_count_label(exporter_series_t *self, const char *label)
{
    if (!label || !*label) return;
    char labels[EXPORTER_VALUES_MAX_LEN + 16];
    snprintf(labels, sizeof labels, "label=\"%s\"", exporter_values_get(self->label_names, label));
    ipl_metric_inc(s_series(self, S_COUNTER, "inferplane_request_labels_total",
                            "Client requests by semantic label (a request counts once per label "
                            "it has).",
                            labels, NULL, 0));
}

/* What happened to the request: outcome, and for failures, why. */
static void s_count_outcome(exporter_series_t *self, s_set_t *set, const ipl_record_t *rec,
                            exporter_outcome_t outcome)
{
    char labels[S_LABELS];
    if (!set->outcomes[outcome]) {
        snprintf(labels, sizeof labels, "%s,outcome=\"%s\"", set->labels,
                 exporter_outcome_name(outcome));
        set->outcomes[outcome] = ipl_metrics_counter(
            self->metrics, "inferplane_request_outcomes_total",
            "Client requests by outcome: ok, rejected, rate_limited, queue_timeout, "
            "failed_over, spilled, error (docs/metrics.md, Outcomes).",
            labels);
    }
    ipl_metric_inc(set->outcomes[outcome]);
    if (!exporter_outcome_failed(outcome)) return;
    snprintf(labels, sizeof labels, "%s,outcome=\"%s\",reason=\"%s\"", set->mtp,
             exporter_outcome_name(outcome), exporter_values_get(self->reasons, rec->reason));
    ipl_metric_inc(s_series(self, S_COUNTER, "inferplane_request_failures_total",
                            "Client requests that got no answer, by outcome and reason.", labels,
                            NULL, 0));
}

/* Where routing sent it and why, the rule that decided, what it cost. */
static void s_count_decision(exporter_series_t *self, s_set_t *set, const ipl_record_t *rec)
{
    char labels[S_LABELS];
    if (rec->worker && *rec->worker) {
        const char *kind = rec->target_kind && *rec->target_kind ? rec->target_kind : "worker";
        snprintf(labels, sizeof labels, "%s,strategy=\"%s\",reason=\"%s\",target_kind=\"%s\"",
                 set->mtp, exporter_values_get(self->strategies, rec->strategy),
                 exporter_values_get(self->reasons, rec->reason),
                 strcmp(kind, "provider") ? "worker" : "provider");
        ipl_metric_inc(s_series(self, S_COUNTER, "inferplane_request_decisions_total",
                                "Routed client requests by strategy, decision reason and what "
                                "was chosen (a worker or a provider).",
                                labels, NULL, 0));
    }
    if (rec->rule && *rec->rule) {
        snprintf(labels, sizeof labels, "%s,rule=\"%s\"", set->mtp,
                 exporter_values_get(self->rules, rec->rule));
        ipl_metric_inc(s_series(self, S_COUNTER, "inferplane_request_rules_total",
                                "Client requests an InferencePolicy rule decided, by rule "
                                "(policy/rule).",
                                labels, NULL, 0));
    }
    if (rec->cost_micros) {
        snprintf(labels, sizeof labels, "%s,backend=\"%s\"", set->mtp,
                 exporter_values_get(self->backends, rec->backend));
        ipl_metric_add(s_series(self, S_COUNTER, "inferplane_provider_cost_usd_total",
                                "Provider cost of client requests, USD, from the "
                                "InferenceProviders' cost hints.",
                                labels, NULL, 0),
                       (double)rec->cost_micros / 1e6);
    }
    if (rec->attempts)
        ipl_metric_add(s_series(self, S_COUNTER, "inferplane_request_attempts_total",
                                "Upstream attempts of client requests, the first included "
                                "(minus inferplane_requests_total: the retries).",
                                set->mtp, NULL, 0),
                       (double)rec->attempts);
    if (rec->queue_wait_us)
        ipl_metric_observe(s_series(self, S_HISTOGRAM, "inferplane_request_queue_wait_seconds",
                                    "Time requests that waited spent in the gateway's queue "
                                    "before they were routed or given up.",
                                    set->mtp, ipl_metrics_vllm_ttft_buckets,
                                    ipl_metrics_vllm_ttft_nbuckets),
                           (double)rec->queue_wait_us / 1e6);
}

/* The OpenTelemetry GenAI metrics, by gen_ai_operation_name, gen_ai_provider_name and
 * gen_ai_request_model (docs/metrics.md, "OpenTelemetry GenAI"). */
static void s_count_genai(exporter_series_t *self, s_set_t *set, const ipl_record_t *rec,
                          exporter_outcome_t outcome)
{
    const char *op = !strcmp(s_str(rec->api), "completions") ? "text_completion" : "chat";
    bool provider = rec->target_kind && !strcmp(rec->target_kind, "provider");
    const char *prov = provider ? exporter_values_get(self->backends, rec->backend) : "vllm";
    char base[S_LABELS], labels[S_LABELS + 64];
    snprintf(base, sizeof base,
             "gen_ai_operation_name=\"%s\",gen_ai_provider_name=\"%s\",gen_ai_request_model=\"%s\"",
             op, prov, set->model);
    if (s_positive(rec->e2e_s)) {
        if (exporter_outcome_failed(outcome)) {
            char code[16] = "_OTHER";
            if (rec->status_code >= 100 && rec->status_code <= 599)
                snprintf(code, sizeof code, "%u", (unsigned)rec->status_code);
            snprintf(labels, sizeof labels, "%s,error_type=\"%s\"", base, code);
        } else {
            snprintf(labels, sizeof labels, "%s", base);
        }
        ipl_metric_observe(s_series(self, S_HISTOGRAM, "gen_ai_client_operation_duration_seconds",
                                    "GenAI operation duration (OpenTelemetry "
                                    "gen_ai.client.operation.duration), as the gateway served it.",
                                    labels, s_genai_duration_b, S_N(s_genai_duration_b)),
                           rec->e2e_s);
    }
    if (rec->status_code < 200 || rec->status_code > 299) return;
    static const char *const help_tokens =
        "Number of input and output tokens used (OpenTelemetry gen_ai.client.token.usage).";
    if (rec->prompt_tokens) {
        snprintf(labels, sizeof labels, "%s,gen_ai_token_type=\"input\"", base);
        ipl_metric_observe(s_series(self, S_HISTOGRAM, "gen_ai_client_token_usage", help_tokens,
                                    labels, s_genai_token_b, S_N(s_genai_token_b)),
                           (double)rec->prompt_tokens);
    }
    if (rec->completion_tokens) {
        snprintf(labels, sizeof labels, "%s,gen_ai_token_type=\"output\"", base);
        ipl_metric_observe(s_series(self, S_HISTOGRAM, "gen_ai_client_token_usage", help_tokens,
                                    labels, s_genai_token_b, S_N(s_genai_token_b)),
                           (double)rec->completion_tokens);
    }
    if (s_positive(rec->ttft_s))
        ipl_metric_observe(s_series(self, S_HISTOGRAM, "gen_ai_server_time_to_first_token_seconds",
                                    "Time to generate the first token of successful responses "
                                    "(OpenTelemetry gen_ai.server.time_to_first_token).",
                                    base, ipl_metrics_vllm_ttft_buckets, S_GENAI_TTFT_NB),
                           rec->ttft_s);
    if (s_positive(rec->itl_s))
        ipl_metric_observe(s_series(self, S_HISTOGRAM,
                                    "gen_ai_server_time_per_output_token_seconds",
                                    "Time per output token after the first of successful responses "
                                    "(OpenTelemetry gen_ai.server.time_per_output_token).",
                                    base, ipl_metrics_vllm_itl_buckets, S_GENAI_TPOT_NB),
                           rec->itl_s);
}

void exporter_series_apply(exporter_series_t *self, const ipl_record_t *rec)
{
    assert(self && rec);
    s_set_t *set = s_set_for(self, rec);
    if (!set) {
        exporter_series_drop(self, "nomem", NULL);
        return;
    }
    atomic_fetch_add(&self->records, 1);
    ipl_metric_inc(self->applied);

    char full[S_SET_LABELS + 32];
    if (rec->status_code >= 100 && rec->status_code <= 599)
        snprintf(full, sizeof(full), "%s,status_code=\"%u\"", set->labels,
                 (unsigned)rec->status_code);
    else
        snprintf(full, sizeof(full), "%s,status_code=\"other\"", set->labels);
    ipl_metric_inc(s_series(self, S_COUNTER, "inferplane_requests_total",
                            "Client requests completed, by HTTP status code.", full, NULL, 0));

    for (uint32_t i = 0; i < rec->labels_len && i < 32; i++)
        s_count_label(self, rec->labels[i]);

    exporter_outcome_t outcome = exporter_outcome_of(rec);
    s_count_outcome(self, set, rec, outcome);
    s_count_decision(self, set, rec);
    s_count_genai(self, set, rec, outcome);

    if (rec->status_code < 200 || rec->status_code > 299)
        return; /* failed requests have no meaningful latency or usage */
    if (s_positive(rec->ttft_s)) ipl_metric_observe(set->ttft, rec->ttft_s);
    if (s_positive(rec->e2e_s)) ipl_metric_observe(set->e2e, rec->e2e_s);
    if (s_positive(rec->itl_s)) ipl_metric_observe(set->itl, rec->itl_s);
    if (s_positive(rec->ttft_s) && s_positive(rec->predicted_ttft_s)) {
        ipl_metric_observe(set->pred_err, fabs(rec->predicted_ttft_s - rec->ttft_s));
        ipl_metric_add(set->ttft_predicted, rec->predicted_ttft_s);
        ipl_metric_add(set->ttft_observed, rec->ttft_s);
    }
    uint64_t cached =
        rec->cached_tokens < rec->prompt_tokens ? rec->cached_tokens : rec->prompt_tokens;
    if (cached) ipl_metric_add(set->cached, (double)cached);
    if (rec->prompt_tokens > cached)
        ipl_metric_add(set->uncached, (double)(rec->prompt_tokens - cached));
    if (rec->completion_tokens) ipl_metric_add(set->completion, (double)rec->completion_tokens);
}

void exporter_series_drop(exporter_series_t *self, const char *reason, const char *kv_fmt, ...)
{
    assert(self && reason);
    va_list args;
    va_start(args, kv_fmt);
    ipl_drops_vcount(self->metrics, reason, kv_fmt, args);
    va_end(args);
    atomic_fetch_add(&self->dropped, 1);
}

/* The debug line of one record (--log-level debug): its request id ties it to the gateway's,
 * the decider's and the worker's lines about the same request. The caller checked the level,
 * so the quoting costs nothing otherwise. */
static void s_log_record(const ipl_record_t *r)
{
    char id[160], tenant[160], model[160], outcome[40];
    IPL_DEBUG("record",
              "id=%s tenant=%s model=%s pool=%s worker=%s status=%" PRIu64 " outcome=%s reason=%s "
              "ttft_ms=%.1f e2e_ms=%.1f prompt=%" PRIu64 " cached=%" PRIu64 " completion=%" PRIu64,
              ipl_log_quote(id, sizeof id, r->request_id && *r->request_id ? r->request_id : "-"),
              ipl_log_quote(tenant, sizeof tenant, r->tenant && *r->tenant ? r->tenant : "-"),
              ipl_log_quote(model, sizeof model, r->model && *r->model ? r->model : "-"),
              r->pool && *r->pool ? r->pool : "-", r->worker && *r->worker ? r->worker : "-",
              r->status_code, ipl_log_quote(outcome, sizeof outcome, r->outcome ? r->outcome : "-"),
              r->reason && *r->reason ? r->reason : "-", r->ttft_s * 1e3, r->e2e_s * 1e3,
              r->prompt_tokens, r->cached_tokens, r->completion_tokens);
}

int exporter_series_frame(exporter_series_t *self, const void *buf, size_t len)
{
    assert(self);
    ipl_msg_t msg = {0};
    int rc = ipl_msg_decode(buf, len, &msg);
    if (rc != 0) {
        exporter_series_drop(self, ipl_strerror(rc), "bytes=%zu", len);
        return rc;
    }
    if (msg.type != IPL_MSG_RECORD) {
        exporter_series_drop(self, "unexpected_type", "type=%s", ipl_msg_type_name(msg.type));
        ipl_msg_clear(&msg);
        return IPL_E_UNKNOWN;
    }
    if (ipl_log_get_level() <= IPL_LOG_DEBUG) s_log_record(&msg.u.record);
    exporter_series_apply(self, &msg.u.record);
    ipl_msg_clear(&msg);
    return 0;
}

uint64_t exporter_series_records(const exporter_series_t *self)
{
    return atomic_load(&((exporter_series_t *)self)->records);
}

uint64_t exporter_series_dropped(const exporter_series_t *self)
{
    return atomic_load(&((exporter_series_t *)self)->dropped);
}

size_t exporter_series_label_sets(const exporter_series_t *self)
{
    return zhashx_size(self->sets);
}
