/* Unit tests of exporter_series: record → series mapping, drops, label escaping, the cap. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exporter_series.h"
#include "ipl_unicode.h"
#include "ipl_error.h"
#include "ipl_log.h"

static const double s_ttft_b[] = {0.001, 0.005, 0.01, 0.02,  0.04,  0.06,  0.08, 0.1,
                                  0.25,  0.5,   0.75, 1.0,   2.5,   5.0,   7.5,  10.0,
                                  20.0,  40.0,  80.0, 160.0, 640.0, 2560.0};
static const double s_itl_b[] = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4, 0.5,
                                 0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
static const double s_e2e_b[] = {0.3,  0.5,   0.8,   1.0,   1.5,   2.0,    2.5,
                                 5.0,  10.0,  15.0,  20.0,  30.0,  40.0,   50.0,
                                 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
#define N(a) (sizeof(a) / sizeof((a)[0]))

#define LABELS "model=\"m\",tenant=\"t\",pool=\"p\",endpoint=\"http://w0\""
#define MTP    "model=\"m\",tenant=\"t\",pool=\"p\""
#define GENAI                                                                                      \
    "gen_ai_operation_name=\"chat\",gen_ai_provider_name=\"vllm\",gen_ai_request_model=\"m\""

typedef struct {
    ipl_metrics_t *metrics;
    exporter_series_t *series;
} fixture_t;

static int s_setup(void **state)
{
    fixture_t *f = calloc(1, sizeof(*f));
    f->metrics = ipl_metrics_new();
    f->series = exporter_series_new(f->metrics, &(exporter_series_config_t){.max_label_sets = 3});
    assert_non_null(f->series);
    *state = f;
    return 0;
}

static int s_teardown(void **state)
{
    fixture_t *f = *state;
    exporter_series_destroy(&f->series);
    assert_null(f->series);
    ipl_metrics_destroy(&f->metrics);
    free(f);
    return 0;
}

static ipl_record_t s_record(void)
{
    ipl_record_t r = {0};
    r.request_id = "req-1";
    r.model = "m";
    r.tenant = "t";
    r.pool = "p";
    r.worker = "w0";
    r.endpoint = "http://w0";
    r.api = "chat";
    r.status_code = 200;
    r.reason = "cache_hit";
    r.stream = true;
    r.ttft_s = 0.3;
    r.e2e_s = 2.0;
    r.itl_s = 0.02;
    r.prompt_tokens = 100;
    r.cached_tokens = 64;
    r.completion_tokens = 10;
    r.predicted_ttft_s = 0.25;
    return r;
}

static double s_counter(fixture_t *f, const char *name, const char *labels)
{
    return ipl_metric_value(ipl_metrics_counter(f->metrics, name, "", labels));
}

static ipl_metric_t *s_hist(fixture_t *f, const char *name, const char *labels, const double *b,
                            size_t nb)
{
    return ipl_metrics_histogram(f->metrics, name, "", labels, b, nb);
}

static void test_success_record(void **state)
{
    fixture_t *f = *state;
    ipl_record_t r = s_record();
    exporter_series_apply(f->series, &r);
    exporter_series_apply(f->series, &r);

    assert_int_equal(exporter_series_records(f->series), 2);
    assert_true(s_counter(f, "inferplane_exporter_records_total", NULL) == 2);
    assert_int_equal(exporter_series_label_sets(f->series), 1);
    assert_true(s_counter(f, "inferplane_requests_total", LABELS ",status_code=\"200\"") == 2);
    assert_true(s_counter(f, "inferplane_prompt_tokens_cached_total", LABELS) == 128);
    assert_true(s_counter(f, "inferplane_prompt_tokens_uncached_total", LABELS) == 72);
    assert_true(s_counter(f, "inferplane_completion_tokens_total", LABELS) == 20);

    ipl_metric_t *ttft =
        s_hist(f, "inferplane_request_ttft_seconds", LABELS, s_ttft_b, N(s_ttft_b));
    assert_true(ipl_metric_value(ttft) == 2);
    assert_true(fabs(ipl_metric_sum(ttft) - 0.6) < 1e-9);
    ipl_metric_t *e2e = s_hist(f, "inferplane_request_e2e_seconds", LABELS, s_e2e_b, N(s_e2e_b));
    assert_true(fabs(ipl_metric_sum(e2e) - 4.0) < 1e-9);
    ipl_metric_t *itl = s_hist(f, "inferplane_request_itl_seconds", LABELS, s_itl_b, N(s_itl_b));
    assert_true(ipl_metric_value(itl) == 2);
    ipl_metric_t *err =
        s_hist(f, "inferplane_ttft_prediction_error_seconds", LABELS, s_ttft_b, N(s_ttft_b));
    assert_true(ipl_metric_value(err) == 2);
    assert_true(fabs(ipl_metric_sum(err) - 0.1) < 1e-9); /* 2 × |0.25 − 0.3| */

    size_t len = 0;
    char *text = ipl_metrics_render(f->metrics, &len);
    assert_non_null(text);
    assert_non_null(strstr(text, "inferplane_request_ttft_seconds_bucket"));
    assert_non_null(strstr(text, "status_code=\"200\""));
    assert_non_null(strstr(text, "endpoint=\"http://w0\""));
    free(text);
}

static void test_failed_record_counts_only_status(void **state)
{
    fixture_t *f = *state;
    ipl_record_t r = s_record();
    r.status_code = 503;
    exporter_series_apply(f->series, &r);
    r.status_code = 7; /* nonsense from the wire */
    exporter_series_apply(f->series, &r);

    assert_true(s_counter(f, "inferplane_requests_total", LABELS ",status_code=\"503\"") == 1);
    assert_true(s_counter(f, "inferplane_requests_total", LABELS ",status_code=\"other\"") == 1);
    assert_true(s_counter(f, "inferplane_requests_total", LABELS ",status_code=\"200\"") == 0);
    ipl_metric_t *ttft =
        s_hist(f, "inferplane_request_ttft_seconds", LABELS, s_ttft_b, N(s_ttft_b));
    assert_true(ipl_metric_value(ttft) == 0);
    assert_true(s_counter(f, "inferplane_prompt_tokens_uncached_total", LABELS) == 0);
}

static void test_odd_values_are_clamped_or_skipped(void **state)
{
    fixture_t *f = *state;
    ipl_record_t r = s_record();
    r.cached_tokens = 500; /* more than the prompt: clipped to it */
    r.ttft_s = NAN;
    r.itl_s = -1;
    r.e2e_s = INFINITY;
    exporter_series_apply(f->series, &r);

    assert_true(s_counter(f, "inferplane_prompt_tokens_cached_total", LABELS) == 100);
    assert_true(s_counter(f, "inferplane_prompt_tokens_uncached_total", LABELS) == 0);
    assert_true(ipl_metric_value(s_hist(f, "inferplane_request_ttft_seconds", LABELS, s_ttft_b,
                                        N(s_ttft_b))) == 0);
    assert_true(ipl_metric_value(
                    s_hist(f, "inferplane_request_itl_seconds", LABELS, s_itl_b, N(s_itl_b))) == 0);
    assert_true(ipl_metric_value(
                    s_hist(f, "inferplane_request_e2e_seconds", LABELS, s_e2e_b, N(s_e2e_b))) == 0);
    assert_true(ipl_metric_value(s_hist(f, "inferplane_ttft_prediction_error_seconds", LABELS,
                                        s_ttft_b, N(s_ttft_b))) == 0);
}

static void test_labels_are_escaped(void **state)
{
    fixture_t *f = *state;
    ipl_record_t r = s_record();
    r.model = "a\"b\\c\nd";
    r.tenant = NULL; /* nil on the wire */
    exporter_series_apply(f->series, &r);
    assert_true(s_counter(f, "inferplane_requests_total",
                          "model=\"a\\\"b\\\\c\\nd\",tenant=\"\",pool=\"p\",endpoint=\"http://w0\","
                          "status_code=\"200\"") == 1);
}

/* A client's bytes that are not UTF-8 (a model it asked for, answered 404) never make the
 * exposition invalid: they are rendered as U+FFFD (issue 20, defect 7). */
static void test_invalid_utf8_stays_valid(void **state)
{
    fixture_t *f = *state;
    ipl_record_t r = s_record();
    r.model = "bad\xff\xfe-model";
    r.status_code = 404;
    r.tenant = "t\xc3";
    exporter_series_apply(f->series, &r);
    size_t len = 0;
    char *text = ipl_metrics_render(f->metrics, &len);
    assert_non_null(text);
    assert_non_null(strstr(text, "bad\xEF\xBF\xBD\xEF\xBF\xBD-model"));
    const unsigned char *p = (const unsigned char *)text;
    for (size_t i = 0; i < len;) { /* every byte of the page is valid UTF-8 */
        uint32_t cp;
        size_t n = ipl_utf8_next(p + i, len - i, &cp);
        assert_true(cp != IPL_UNICODE_INVALID);
        i += n;
    }
    free(text);
}

/* Semantic labels are counted by name, at most 64 distinct ones (then __overflow__). */
static void test_semantic_labels(void **state)
{
    fixture_t *f = *state;
    ipl_record_t r = s_record();
    char *two[] = {"pii", "pii:email"};
    r.labels = two;
    r.labels_len = 2;
    exporter_series_apply(f->series, &r);
    exporter_series_apply(f->series, &r);
    assert_true(s_counter(f, "inferplane_request_labels_total", "label=\"pii\"") == 2);
    assert_true(s_counter(f, "inferplane_request_labels_total", "label=\"pii:email\"") == 2);
    char names[70][8], *one[1];
    for (int i = 0; i < 70; i++) {
        snprintf(names[i], sizeof names[i], "l%d", i);
        one[0] = names[i];
        r.labels = one;
        r.labels_len = 1;
        exporter_series_apply(f->series, &r);
    }
    assert_true(s_counter(f, "inferplane_request_labels_total", "label=\"l61\"") == 1);
    assert_true(s_counter(f, "inferplane_request_labels_total", "label=\"__overflow__\"") == 8);
}

static void test_label_sets_are_capped(void **state)
{
    fixture_t *f = *state; /* cap 3 */
    char name[32];
    for (int i = 0; i < 6; i++) {
        ipl_record_t r = s_record();
        snprintf(name, sizeof(name), "tenant-%d", i);
        r.tenant = name;
        exporter_series_apply(f->series, &r);
    }
    /* three real sets, then one overflow set shared by the other three records */
    assert_int_equal(exporter_series_label_sets(f->series), 4);
    assert_true(s_counter(f, "inferplane_exporter_label_overflow_total", NULL) == 3);
    assert_true(s_counter(f, "inferplane_requests_total",
                          "model=\"__overflow__\",tenant=\"__overflow__\",pool=\"__overflow__\","
                          "endpoint=\"__overflow__\",status_code=\"200\"") == 3);
    /* a known set still lands in its own series */
    ipl_record_t r = s_record();
    r.tenant = "tenant-0";
    exporter_series_apply(f->series, &r);
    assert_true(s_counter(f, "inferplane_requests_total",
                          "model=\"m\",tenant=\"tenant-0\",pool=\"p\",endpoint=\"http://w0\","
                          "status_code=\"200\"") == 2);
}

static void test_frames(void **state)
{
    fixture_t *f = *state;
    ipl_record_t r = s_record();
    msgpack_sbuffer buf;
    msgpack_sbuffer_init(&buf);
    assert_int_equal(ipl_msg_encode(IPL_MSG_RECORD, &r, &buf), 0);

    assert_int_equal(exporter_series_frame(f->series, buf.data, buf.size), 0);
    assert_int_equal(exporter_series_records(f->series), 1);
    assert_true(s_counter(f, "inferplane_requests_total", LABELS ",status_code=\"200\"") == 1);

    /* every truncation is dropped and counted, never applied */
    for (size_t cut = 0; cut < buf.size; cut++)
        assert_int_not_equal(exporter_series_frame(f->series, buf.data, cut), 0);
    assert_int_equal(exporter_series_records(f->series), 1);
    assert_int_equal(exporter_series_dropped(f->series), buf.size);
    assert_true(s_counter(f, "inferplane_frames_dropped_total", "reason=\"truncated\"") > 0);

    /* another message type is dropped as unexpected */
    msgpack_sbuffer_clear(&buf);
    ipl_policy_req_t pr = {.have_version = 3};
    assert_int_equal(ipl_msg_encode(IPL_MSG_POLICY_REQ, &pr, &buf), 0);
    assert_int_equal(exporter_series_frame(f->series, buf.data, buf.size), IPL_E_UNKNOWN);
    assert_true(s_counter(f, "inferplane_frames_dropped_total", "reason=\"unexpected_type\"") == 1);

    /* random bytes */
    unsigned char junk[64];
    srand(7);
    for (int i = 0; i < 200; i++) {
        for (size_t k = 0; k < sizeof(junk); k++)
            junk[k] = (unsigned char)rand();
        exporter_series_frame(f->series, junk, (size_t)(rand() % (int)sizeof(junk)));
    }
    assert_int_equal(exporter_series_records(f->series), 1);
    msgpack_sbuffer_destroy(&buf);
}

/* At debug level each record is logged with its request id (the id ties the exporter's line to
 * the other processes' lines about the request); at info nothing is written. */
static void test_records_logged_at_debug(void **state)
{
    fixture_t *f = *state;
    ipl_record_t r = s_record();
    r.request_id = "client-42";
    r.tenant = "team a";
    msgpack_sbuffer buf;
    msgpack_sbuffer_init(&buf);
    assert_int_equal(ipl_msg_encode(IPL_MSG_RECORD, &r, &buf), 0);
    char text[4096] = "";
    FILE *out = fmemopen(text, sizeof text - 1, "w");
    assert_non_null(out);
    ipl_log_level_t was = ipl_log_get_level();
    ipl_log_set_stream(out);
    ipl_log_set_level(IPL_LOG_INFO);
    assert_int_equal(exporter_series_frame(f->series, buf.data, buf.size), 0);
    fflush(out);
    assert_null(strstr(text, "msg=record"));
    ipl_log_set_level(IPL_LOG_DEBUG);
    assert_int_equal(exporter_series_frame(f->series, buf.data, buf.size), 0);
    fflush(out);
    ipl_log_set_stream(NULL);
    ipl_log_set_level(was);
    fclose(out);
    assert_non_null(strstr(text, "msg=record id=\"client-42\" tenant=\"team a\" model=\"m\" "
                                 "pool=p worker=w0 status=200"));
    assert_non_null(strstr(text, "prompt=100 cached=64 completion=10"));
    assert_int_equal(exporter_series_records(f->series), 2);
    msgpack_sbuffer_destroy(&buf);
}

static void test_drop_reason(void **state)
{
    fixture_t *f = *state;
    /* pre-registered at 0 so that dashboards see them */
    assert_true(s_counter(f, "inferplane_frames_dropped_total", "reason=\"multipart\"") == 0);
    exporter_series_drop(f->series, "multipart", NULL);
    assert_true(s_counter(f, "inferplane_frames_dropped_total", "reason=\"multipart\"") == 1);
    assert_int_equal(exporter_series_dropped(f->series), 1);
}

static void test_outcomes_and_failures(void **state)
{
    fixture_t *f = *state;
    ipl_record_t r = s_record();
    exporter_series_apply(f->series, &r); /* no outcome field: derived, ok */
    r.status_code = 429;
    r.reason = "rate_limit_requests_per_minute";
    exporter_series_apply(f->series, &r); /* derived: rate_limited */
    r.status_code = 503;
    r.reason = "queue_full";
    r.outcome = "queue_timeout"; /* said by the gateway */
    exporter_series_apply(f->series, &r);
    r.status_code = 200;
    r.reason = "cache_hit";
    r.outcome = "no-such-word"; /* a newer gateway's word: derived instead */
    exporter_series_apply(f->series, &r);

    assert_true(s_counter(f, "inferplane_request_outcomes_total", LABELS ",outcome=\"ok\"") == 2);
    assert_true(
        s_counter(f, "inferplane_request_outcomes_total", LABELS ",outcome=\"rate_limited\"") == 1);
    assert_true(s_counter(f, "inferplane_request_outcomes_total",
                          LABELS ",outcome=\"queue_timeout\"") == 1);
    assert_true(
        s_counter(f, "inferplane_request_failures_total",
                  MTP ",outcome=\"rate_limited\",reason=\"rate_limit_requests_per_minute\"") == 1);
    assert_true(s_counter(f, "inferplane_request_failures_total",
                          MTP ",outcome=\"queue_timeout\",reason=\"queue_full\"") == 1);
    assert_true(s_counter(f, "inferplane_request_failures_total",
                          MTP ",outcome=\"ok\",reason=\"cache_hit\"") == 0);
}

static void test_decisions_rules_cost_and_queue(void **state)
{
    fixture_t *f = *state;
    ipl_record_t r = s_record();
    r.strategy = "ttft";
    r.target_kind = "worker";
    r.queue_wait_us = 150000;
    r.attempts = 1;
    exporter_series_apply(f->series, &r);
    ipl_record_t p = s_record();
    p.worker = "cloud";
    p.reason = "spill";
    p.strategy = "ttft";
    p.target_kind = "provider";
    p.backend = "cloud-backend";
    p.cost_micros = 2500000;
    p.rule = "pol/spill-when-slow";
    p.attempts = 2; /* failed over to the provider: the attempts say so first */
    exporter_series_apply(f->series, &p);
    p.attempts = 1;
    exporter_series_apply(f->series, &p); /* spilled */
    ipl_record_t none = s_record();
    none.worker = "";
    none.status_code = 404;
    none.reason = "no_pool";
    exporter_series_apply(f->series, &none); /* no decision */

    assert_true(s_counter(f, "inferplane_request_decisions_total",
                          MTP
                          ",strategy=\"ttft\",reason=\"cache_hit\",target_kind=\"worker\"") == 1);
    assert_true(s_counter(f, "inferplane_request_decisions_total",
                          MTP ",strategy=\"ttft\",reason=\"spill\",target_kind=\"provider\"") == 2);
    assert_true(
        s_counter(f, "inferplane_request_rules_total", MTP ",rule=\"pol/spill-when-slow\"") == 2);
    assert_true(
        fabs(s_counter(f, "inferplane_provider_cost_usd_total", MTP ",backend=\"cloud-backend\"") -
             5.0) < 1e-9);
    assert_true(s_counter(f, "inferplane_request_attempts_total", MTP) == 4);
    assert_true(
        s_counter(f, "inferplane_request_outcomes_total", LABELS ",outcome=\"failed_over\"") == 1);
    assert_true(s_counter(f, "inferplane_request_outcomes_total", LABELS ",outcome=\"spilled\"") ==
                1);
    assert_true(s_counter(f, "inferplane_request_outcomes_total", LABELS ",outcome=\"rejected\"") ==
                1);
    ipl_metric_t *q =
        s_hist(f, "inferplane_request_queue_wait_seconds", MTP, s_ttft_b, N(s_ttft_b));
    assert_true(ipl_metric_value(q) == 1);
    assert_true(fabs(ipl_metric_sum(q) - 0.15) < 1e-9);
    /* predicted vs observed: the sums of the four 2xx records */
    assert_true(fabs(s_counter(f, "inferplane_ttft_predicted_seconds_total", LABELS) - 0.75) <
                1e-9);
    assert_true(fabs(s_counter(f, "inferplane_ttft_observed_seconds_total", LABELS) - 0.9) < 1e-9);
}

static const double s_tok_b[] = {1,     4,     16,     64,      256,     1024,     4096,
                                 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864};
static const double s_dur_b[] = {0.01, 0.02, 0.04, 0.08,  0.16,  0.32,  0.64,
                                 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92};
static const double s_gttft_b[] = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,
                                   0.25,  0.5,   0.75, 1.0,  2.5,  5.0,  7.5,  10.0};
static const double s_tpot_b[] = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,
                                  0.3,  0.4,   0.5,  0.75,  1.0, 2.5};

static void test_genai_series(void **state)
{
    fixture_t *f = *state;
    ipl_record_t r = s_record();
    exporter_series_apply(f->series, &r);
    r.api = "completions";
    r.status_code = 503;
    r.reason = "upstream_failed";
    exporter_series_apply(f->series, &r);

    ipl_metric_t *in = s_hist(f, "gen_ai_client_token_usage", GENAI ",gen_ai_token_type=\"input\"",
                              s_tok_b, N(s_tok_b));
    assert_true(ipl_metric_value(in) == 1 && ipl_metric_sum(in) == 100);
    ipl_metric_t *out = s_hist(f, "gen_ai_client_token_usage",
                               GENAI ",gen_ai_token_type=\"output\"", s_tok_b, N(s_tok_b));
    assert_true(ipl_metric_value(out) == 1 && ipl_metric_sum(out) == 10);
    ipl_metric_t *ttft =
        s_hist(f, "gen_ai_server_time_to_first_token_seconds", GENAI, s_gttft_b, N(s_gttft_b));
    assert_true(fabs(ipl_metric_sum(ttft) - 0.3) < 1e-9);
    ipl_metric_t *tpot =
        s_hist(f, "gen_ai_server_time_per_output_token_seconds", GENAI, s_tpot_b, N(s_tpot_b));
    assert_true(ipl_metric_value(tpot) == 1);
    ipl_metric_t *dur =
        s_hist(f, "gen_ai_client_operation_duration_seconds", GENAI, s_dur_b, N(s_dur_b));
    assert_true(ipl_metric_value(dur) == 1 && fabs(ipl_metric_sum(dur) - 2.0) < 1e-9);
    ipl_metric_t *failed = s_hist(f, "gen_ai_client_operation_duration_seconds",
                                  "gen_ai_operation_name=\"text_completion\",gen_ai_provider_name="
                                  "\"vllm\",gen_ai_request_model=\"m\",error_type=\"503\"",
                                  s_dur_b, N(s_dur_b));
    assert_true(ipl_metric_value(failed) == 1);

    size_t len = 0;
    char *text = ipl_metrics_render(f->metrics, &len);
    assert_non_null(strstr(text, "gen_ai_client_token_usage_bucket{"));
    assert_non_null(strstr(text, "le=\"67108864\""));
    free(text);
}

/* Each label has its own cap: a tenant past it reads __overflow__, the other labels stay. */
static void test_label_values_are_capped(void **state)
{
    (void)state;
    ipl_metrics_t *m = ipl_metrics_new();
    exporter_series_config_t c = {.max_tenants = 2, .max_models = 1};
    exporter_series_t *series = exporter_series_new(m, &c);
    assert_non_null(series);
    const char *tenants[] = {"a", "b", "c", "d", "a"};
    for (size_t i = 0; i < 5; i++) {
        ipl_record_t r = s_record();
        r.tenant = (char *)tenants[i];
        exporter_series_apply(series, &r);
    }
    ipl_record_t r = s_record();
    r.model = "other-model";
    r.tenant = "b";
    exporter_series_apply(series, &r);
    double a = ipl_metric_value(ipl_metrics_counter(
        m, "inferplane_requests_total", "",
        "model=\"m\",tenant=\"a\",pool=\"p\",endpoint=\"http://w0\",status_code=\"200\""));
    double over =
        ipl_metric_value(ipl_metrics_counter(m, "inferplane_requests_total", "",
                                             "model=\"m\",tenant=\"__overflow__\",pool=\"p\","
                                             "endpoint=\"http://w0\",status_code=\"200\""));
    double model_over =
        ipl_metric_value(ipl_metrics_counter(m, "inferplane_requests_total", "",
                                             "model=\"__overflow__\",tenant=\"b\",pool=\"p\","
                                             "endpoint=\"http://w0\",status_code=\"200\""));
    assert_true(a == 2 && over == 2 && model_over == 1);
    assert_true(
        ipl_metric_value(ipl_metrics_counter(m, "inferplane_exporter_label_values_overflow_total",
                                             "", "dimension=\"tenant\"")) == 2);
    assert_true(
        ipl_metric_value(ipl_metrics_counter(m, "inferplane_exporter_label_values_overflow_total",
                                             "", "dimension=\"model\"")) == 1);
    exporter_series_destroy(&series);
    ipl_metrics_destroy(&m);
}

int main(void)
{
    ipl_log_init("test", IPL_LOG_OFF);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_success_record, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_failed_record_counts_only_status, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_odd_values_are_clamped_or_skipped, s_setup,
                                        s_teardown),
        cmocka_unit_test_setup_teardown(test_invalid_utf8_stays_valid, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_labels_are_escaped, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_semantic_labels, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_label_sets_are_capped, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_frames, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_drop_reason, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_outcomes_and_failures, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_decisions_rules_cost_and_queue, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_genai_series, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_records_logged_at_debug, s_setup, s_teardown),
        cmocka_unit_test(test_label_values_are_capped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
