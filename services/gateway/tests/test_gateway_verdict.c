/* Unit tests of gateway_verdict: every ROUTE_REP status as a client error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "gateway_verdict.h"

static void test_rejected(void **state)
{
    (void)state;
    static const struct {
        uint64_t http_status;
        int status;
        const char *type;
    } cases[] = {
        {0, 503, "server_error"},
        {403, 403, "permission_error"},
        {413, 413, "invalid_request_error"},
        {429, 429, "rate_limit_error"},
        {451, 451, "invalid_request_error"},
        {400, 400, "invalid_request_error"},
        {500, 500, "server_error"},
        {503, 503, "server_error"},
        {200, 503, "server_error"},
        {999, 503, "server_error"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        ipl_route_rep_t rep = {0};
        rep.status = IPL_ROUTE_REJECTED;
        rep.http_status = cases[i].http_status;
        rep.detail = "personal data is processed on local workers only";
        rep.rule = "guardrails/pii-stays-local";
        gateway_api_error_t err = {0};
        gateway_verdict_error(&rep, "chat", &err);
        if (err.status != cases[i].status)
            fail_msg("http_status %d: got %d", (int)cases[i].http_status, err.status);
        assert_string_equal(err.type, cases[i].type);
        assert_string_equal(err.code, "policy_rejected");
        assert_non_null(strstr(err.message, "personal data is processed on local workers only"));
        assert_non_null(strstr(err.message, "guardrails/pii-stays-local"));
    }
    ipl_route_rep_t bare = {0};
    bare.status = IPL_ROUTE_REJECTED;
    gateway_api_error_t err = {0};
    gateway_verdict_error(&bare, "chat", &err);
    assert_int_equal(err.status, 503);
    assert_non_null(strstr(err.message, "refused by the routing policy"));
}

static void test_other_statuses(void **state)
{
    (void)state;
    static const struct {
        uint64_t status;
        int http;
        const char *code;
    } cases[] = {
        {IPL_ROUTE_NO_POOL, 404, "model_not_found"},
        {IPL_ROUTE_NO_WORKER, 503, "no_worker_available"},
        {IPL_ROUTE_NOT_READY, 503, "router_not_ready"},
        {IPL_ROUTE_OVERLOADED, 429, "overloaded"},
        {IPL_ROUTE_BAD_REQUEST, 400, "bad_request"},
        {IPL_ROUTE_DEFERRED, 429, "batch_deferred"},
        {99, 502, "bad_decision"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        ipl_route_rep_t rep = {0};
        rep.status = cases[i].status;
        rep.reason = "why";
        gateway_api_error_t err = {0};
        gateway_verdict_error(&rep, "chat", &err);
        assert_int_equal(err.status, cases[i].http);
        assert_string_equal(err.code, cases[i].code);
    }
}

static void test_deferral(void **state)
{
    (void)state;
    assert_int_equal(gateway_verdict_defer_ms(0), 10);
    assert_int_equal(gateway_verdict_defer_ms(9), 10);
    assert_int_equal(gateway_verdict_defer_ms(250), 250);
    assert_int_equal(gateway_verdict_defer_ms(5000), 5000);
    assert_int_equal(gateway_verdict_defer_ms(60000), 5000);
    static const struct {
        uint64_t ms;
        int s;
    } ra[] = {{1, 1}, {999, 1}, {1000, 1}, {1001, 2}, {2500, 3}, {0, 1}, {86400000, 3600}};
    for (size_t i = 0; i < sizeof(ra) / sizeof(ra[0]); i++) {
        ipl_route_rep_t rep = {0};
        rep.status = IPL_ROUTE_DEFERRED;
        rep.retry_after_ms = ra[i].ms;
        rep.rule = "routing/nightly-batch";
        gateway_api_error_t err = {0};
        int s = -1;
        gateway_verdict_deferred(&rep, "chat", 30000, &err, &s);
        if (s != ra[i].s) fail_msg("retry_after_ms %d: got %d s", (int)ra[i].ms, s);
        assert_int_equal(err.status, 429);
        assert_string_equal(err.type, "rate_limit_error");
        assert_string_equal(err.code, "batch_deferred");
        assert_non_null(strstr(err.message, "routing/nightly-batch"));
        assert_non_null(strstr(err.message, "30000 ms"));
    }
}

/* RECORD.outcome: the gateway's word for every way a request ends. */
static void test_outcome(void **state)
{
    (void)state;
    static const struct {
        int status;
        const char *code;
        int attempts;
        bool provider;
        const char *decision_reason;
        const char *want;
    } cases[] = {
        {200, NULL, 1, false, "cache_hit", "ok"},
        {200, NULL, 2, false, "cache_hit", "failed_over"},
        {200, NULL, 1, true, "spill", "spilled"},
        {200, NULL, 1, true, "overflow", "spilled"},
        {200, NULL, 1, true, "rule_provider", "ok"},
        {200, NULL, 1, false, "spill", "ok"}, /* a worker, whatever the reason says */
        {429, "rate_limit_exceeded", 0, false, NULL, "rate_limited"},
        {429, "queue_timeout", 0, false, NULL, "queue_timeout"},
        {429, "queue_full", 0, false, NULL, "queue_timeout"},
        {429, "batch_deferred", 0, false, NULL, "queue_timeout"},
        {429, "overloaded", 0, false, NULL, "rejected"},
        {403, "policy_rejected", 0, false, NULL, "rejected"},
        {503, "policy_rejected", 0, false, NULL, "rejected"},
        {404, "model_not_found", 0, false, NULL, "rejected"},
        {401, "invalid_api_key", 0, false, NULL, "rejected"},
        {400, NULL, 1, false, "cache_hit", "rejected"}, /* the worker's 400 passed on */
        {429, "upstream_rate_limited", 3, false, "cache_hit", "error"},
        {502, "upstream_unreachable", 3, false, "cache_hit", "error"},
        {502, "upstream_failed", 1, false, "cache_hit", "error"},
        {503, "no_worker_available", 0, false, NULL, "error"},
        {500, NULL, 1, false, "cache_hit", "error"},
        {499, "client_gone", 1, false, "cache_hit", "cancelled"},
        {499, "client_gone", 0, false, NULL, "cancelled"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        assert_string_equal(gateway_verdict_outcome(cases[i].status, cases[i].code,
                                                    cases[i].attempts, cases[i].provider,
                                                    cases[i].decision_reason),
                            cases[i].want);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rejected),
        cmocka_unit_test(test_other_statuses),
        cmocka_unit_test(test_deferral),
        cmocka_unit_test(test_outcome),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
