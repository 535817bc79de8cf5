/*
 * exporter_series — maps request RECORDs to Prometheus series (docs/metrics.md lists them all).
 *
 * Every record lands in the label set of its (model, tenant, pool, endpoint):
 *
 *   inferplane_requests_total{...,status_code}          every record
 *   inferplane_request_outcomes_total{...,outcome}      every record (exporter_outcome.h)
 *   inferplane_request_ttft_seconds                      2xx with ttft_s > 0
 *   inferplane_request_e2e_seconds                       2xx with e2e_s > 0
 *   inferplane_request_itl_seconds                       2xx with itl_s > 0 (mean ITL of it)
 *   inferplane_prompt_tokens_cached_total                2xx: usage cached tokens
 *   inferplane_prompt_tokens_uncached_total              2xx: prompt − cached
 *   inferplane_completion_tokens_total                   2xx: completion tokens
 *   inferplane_ttft_prediction_error_seconds             2xx with both TTFTs > 0:
 *                                                        |predicted_ttft_s − ttft_s|
 *   inferplane_ttft_predicted_seconds_total, ..._observed_seconds_total   the same records'
 *                                                        sums (bias = their ratio)
 *
 * and, without the endpoint: failures by outcome and reason, decisions by strategy, reason and
 * target kind, the deciding rule, queue waits, attempts and provider cost; then the
 * OpenTelemetry GenAI metrics (gen_ai_client_token_usage, gen_ai_client_operation_duration_seconds,
 * gen_ai_server_time_to_first_token_seconds, gen_ai_server_time_per_output_token_seconds) by
 * operation, provider and model, with the semantic conventions' buckets.
 *
 * Histogram buckets of our own series follow vLLM's (vllm-project/vllm: vllm/v1/metrics/
 * loggers.py) so dashboards compare like with like. Every series is a counter or a histogram,
 * so the series of several exporter replicas (each receiving a share of the records) add up
 * with sum() in PromQL.
 *
 * Label values come from remote input: they are escaped, and each label has a cap on its
 * distinct values (exporter_values.h: tenants, models, pools, endpoints configurable; reasons,
 * strategies, rules, backends and semantic labels fixed) past which a value reads
 * "__overflow__"; on top of that the number of (model, tenant, pool, endpoint) sets is capped,
 * and records beyond it land in the set whose every value is "__overflow__" (counted in
 * inferplane_exporter_label_overflow_total).
 *
 * Frames that do not decode, or decode to anything but a RECORD, are counted in
 * inferplane_frames_dropped_total{reason} and logged (rate-limited); the records applied in
 * inferplane_exporter_records_total.
 *
 * Threading: one thread applies records (the exporter's receive loop); the metric series it
 * updates may be rendered concurrently by the admin server.
 */
#ifndef EXPORTER_SERIES_H
#define EXPORTER_SERIES_H

#include <stddef.h>
#include <stdint.h>

#include "ipl_metrics.h"
#include "ipl_proto.h"

#define EXPORTER_SERIES_DEFAULT_MAX_LABEL_SETS 10000
#define EXPORTER_SERIES_DEFAULT_MAX_TENANTS    1000
#define EXPORTER_SERIES_DEFAULT_MAX_MODELS     200
#define EXPORTER_SERIES_DEFAULT_MAX_POOLS      200
#define EXPORTER_SERIES_DEFAULT_MAX_ENDPOINTS  1000

typedef struct exporter_series exporter_series_t;

/* The caps; 0 means the default. */
typedef struct {
    size_t max_label_sets; /* distinct (model, tenant, pool, endpoint) sets */
    size_t max_tenants, max_models, max_pools, max_endpoints; /* distinct values of each */
} exporter_series_config_t;

/* `metrics` is borrowed and must outlive the object; `config` is read now (NULL: defaults).
 * NULL when out of memory. */
exporter_series_t *exporter_series_new(ipl_metrics_t *metrics,
                                       const exporter_series_config_t *config);
void exporter_series_destroy(exporter_series_t **self_p);

/* Applies one record (borrowed). */
void exporter_series_apply(exporter_series_t *self, const ipl_record_t *rec);

/* Decodes one ZeroMQ frame and applies it when it is a RECORD. Returns 0, or the IPL_E_*
 * code of a frame that was dropped (IPL_E_UNKNOWN for a well-formed message of another type).
 * Either way the frame is fully handled: the caller only reads the return value for tests. */
int exporter_series_frame(exporter_series_t *self, const void *buf, size_t len);

/* Counts a frame dropped for `reason` (a stable snake_case word, e.g. "multipart") and logs
 * it with the key=value context `kv_fmt` (or NULL), as ipl_drops_count does. */
void exporter_series_drop(exporter_series_t *self, const char *reason, const char *kv_fmt, ...)
    __attribute__((format(printf, 3, 4)));

uint64_t exporter_series_records(const exporter_series_t *self); /* records applied */
uint64_t exporter_series_dropped(const exporter_series_t *self); /* frames dropped */
size_t exporter_series_label_sets(const exporter_series_t *self);

#endif
