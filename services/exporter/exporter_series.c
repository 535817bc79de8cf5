/*
 * exporter_series — record → series mapping. See exporter_series.h.
 *
 * The label-set cache maps the formatted label string `model="..",tenant="..",pool="..",
 * endpoint=".."` to the series of that label set, so a record costs one hash lookup instead
 * of eight registry lookups (which take the registry mutex). requests_total is also keyed by
 * status code, so it is looked up in the registry per record.
 */
#include "exporter_series.h"

#include <czmq.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipl_drops.h"
#include "ipl_error.h"
#include "ipl_log.h"

#define S_LABEL_VALUE_MAX 256 /* escaped bytes kept per label value */
#define S_OVERFLOW        "__overflow__"
#define S_MAX_LABEL_NAMES 64 /* distinct label values of inferplane_request_labels_total */

/* Reasons pre-registered at 0 so that dashboards see the series before the first drop. */
static const char *const s_drop_reasons[] = {"truncated",       "wrong_type",   "out_of_range",
                                             "bad_version",     "unknown_type", "trailing_bytes",
                                             "unexpected_type", "multipart"};

typedef struct {
    ipl_metric_t *ttft, *e2e, *itl, *pred_err;
    ipl_metric_t *cached, *uncached, *completion;
    char *labels; /* owned; the key of this set */
} s_set_t;

struct exporter_series {
    ipl_metrics_t *metrics; /* borrowed */
    zhashx_t *sets;         /* labels → s_set_t */
    size_t max_sets;
    s_set_t *overflow; /* lazily created, also in `sets` */
    char *label_names[S_MAX_LABEL_NAMES]; /* the label values seen (owned), for the cap */
    size_t nlabel_names;
    ipl_metric_t *overflowed;
    atomic_uint_fast64_t records, dropped;
};

static void s_set_free(void **item)
{
    s_set_t *set = (s_set_t *)*item;
    if (set) {
        free(set->labels);
        free(set);
        *item = NULL;
    }
}

exporter_series_t *exporter_series_new(ipl_metrics_t *metrics, size_t max_label_sets)
{
    assert(metrics);
    exporter_series_t *self = calloc(1, sizeof(*self));
    if (!self) return NULL;
    self->metrics = metrics;
    self->max_sets = max_label_sets ? max_label_sets : EXPORTER_SERIES_DEFAULT_MAX_LABEL_SETS;
    self->sets = zhashx_new();
    if (!self->sets) {
        free(self);
        return NULL;
    }
    zhashx_set_destructor(self->sets, s_set_free);
    self->overflowed = ipl_metrics_counter(
        metrics, "inferplane_exporter_label_overflow_total",
        "Records counted under the __overflow__ label set because too many label sets exist.",
        NULL);
    ipl_drops_register(metrics, s_drop_reasons, sizeof s_drop_reasons / sizeof s_drop_reasons[0]);
    return self;
}

void exporter_series_destroy(exporter_series_t **self_p)
{
    assert(self_p);
    exporter_series_t *self = *self_p;
    if (!self) return;
    zhashx_destroy(&self->sets); /* frees every set, overflow included */
    for (size_t i = 0; i < self->nlabel_names; i++)
        free(self->label_names[i]);
    free(self);
    *self_p = NULL;
}

static s_set_t *s_set_new(exporter_series_t *self, const char *labels)
{
    s_set_t *set = calloc(1, sizeof(*set));
    if (!set) return NULL;
    set->labels = strdup(labels);
    if (!set->labels) {
        free(set);
        return NULL;
    }
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
    return set;
}

/* Formats the label set of a record into buf; `overflow` replaces every value. */
static void s_format_labels(char *buf, size_t size, const ipl_record_t *rec, bool overflow)
{
    char model[S_LABEL_VALUE_MAX], tenant[S_LABEL_VALUE_MAX], pool[S_LABEL_VALUE_MAX],
        endpoint[S_LABEL_VALUE_MAX];
    if (overflow) {
        snprintf(buf, size, "model=\"%s\",tenant=\"%s\",pool=\"%s\",endpoint=\"%s\"", S_OVERFLOW,
                 S_OVERFLOW, S_OVERFLOW, S_OVERFLOW);
        return;
    }
    ipl_metrics_escape(model, sizeof(model), rec->model ? rec->model : "");
    ipl_metrics_escape(tenant, sizeof(tenant), rec->tenant ? rec->tenant : "");
    ipl_metrics_escape(pool, sizeof(pool), rec->pool ? rec->pool : "");
    ipl_metrics_escape(endpoint, sizeof(endpoint), rec->endpoint ? rec->endpoint : "");
    snprintf(buf, size, "model=\"%s\",tenant=\"%s\",pool=\"%s\",endpoint=\"%s\"", model, tenant,
             pool, endpoint);
}

/* The set for a record's labels, created on first use; the overflow set past the cap. */
static s_set_t *s_set_for(exporter_series_t *self, const ipl_record_t *rec, char *labels,
                          size_t size)
{
    s_format_labels(labels, size, rec, false);
    s_set_t *set = zhashx_lookup(self->sets, labels);
    if (set) return set;
    bool full = zhashx_size(self->sets) >= self->max_sets;
    if (full) {
        ipl_metric_inc(self->overflowed);
        IPL_LOG_EVERY(60, IPL_LOG_WARN, "label_sets_full", "max=%zu", self->max_sets);
        s_format_labels(labels, size, rec, true);
        if (self->overflow) return self->overflow;
    }
    set = s_set_new(self, labels);
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

/* inferplane_request_labels_total{label}: requests by semantic label (names only), at most
 * S_MAX_LABEL_NAMES distinct values, the rest as __overflow__. */
static void s_count_label(exporter_series_t *self, const char *label)
{
    if (!label || !*label) return;
    const char *value = NULL;
    for (size_t i = 0; i < self->nlabel_names && !value; i++)
        if (!strcmp(self->label_names[i], label)) value = self->label_names[i];
    if (!value && self->nlabel_names < S_MAX_LABEL_NAMES) {
        char *copy = strdup(label);
        if (copy) value = self->label_names[self->nlabel_names++] = copy;
    }
    if (!value) value = S_OVERFLOW;
    char esc[S_LABEL_VALUE_MAX], labels[S_LABEL_VALUE_MAX + 16];
    ipl_metrics_escape(esc, sizeof esc, value);
    snprintf(labels, sizeof labels, "label=\"%s\"", esc);
    ipl_metric_inc(ipl_metrics_counter(self->metrics, "inferplane_request_labels_total",
                                       "Client requests by semantic label (a request counts "
                                       "once per label it has).",
                                       labels));
}

void exporter_series_apply(exporter_series_t *self, const ipl_record_t *rec)
{
    assert(self && rec);
    char labels[4 * (S_LABEL_VALUE_MAX + 16)];
    s_set_t *set = s_set_for(self, rec, labels, sizeof(labels));
    if (!set) {
        exporter_series_drop(self, "nomem", NULL);
        return;
    }
    atomic_fetch_add(&self->records, 1);

    char full[sizeof(labels) + 32];
    if (rec->status_code >= 100 && rec->status_code <= 599)
        snprintf(full, sizeof(full), "%s,status_code=\"%u\"", set->labels,
                 (unsigned)rec->status_code);
    else
        snprintf(full, sizeof(full), "%s,status_code=\"other\"", set->labels);
    ipl_metric_inc(ipl_metrics_counter(self->metrics, "inferplane_requests_total",
                                       "Client requests completed, by HTTP status code.", full));

    for (uint32_t i = 0; i < rec->labels_len && i < 32; i++)
        s_count_label(self, rec->labels[i]);

    if (rec->status_code < 200 || rec->status_code > 299)
        return; /* failed requests have no meaningful latency or usage */
    if (s_positive(rec->ttft_s)) ipl_metric_observe(set->ttft, rec->ttft_s);
    if (s_positive(rec->e2e_s)) ipl_metric_observe(set->e2e, rec->e2e_s);
    if (s_positive(rec->itl_s)) ipl_metric_observe(set->itl, rec->itl_s);
    if (s_positive(rec->ttft_s) && s_positive(rec->predicted_ttft_s))
        ipl_metric_observe(set->pred_err, fabs(rec->predicted_ttft_s - rec->ttft_s));
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
