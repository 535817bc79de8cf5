/*
 * Unit tests of gateway_limits: the test plays the policy service on inproc endpoints (a PUB
 * of a POLICY with limits and a provider's cost hints). Admission follows the policy and
 * gives the x-ratelimit-* headers; a refusal is a 429 rate_limit_exceeded naming the limit,
 * with Retry-After from the bucket, and is counted; a provider target's cost spends the daily
 * budget; and two replicas gossiping over inproc charge each other's admissions.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <czmq.h>

#include "gateway_limits.h"
#include "ipl_clock.h"
#include "ipl_error.h"
#include "ipl_log.h"

typedef struct {
    char names[16][48], values[16][32];
    int n;
} s_headers_t;

static void s_set(void *arg, const char *name, const char *value)
{
    s_headers_t *h = arg;
    if (h->n >= 16) return;
    snprintf(h->names[h->n], sizeof h->names[0], "%s", name);
    snprintf(h->values[h->n], sizeof h->values[0], "%s", value);
    h->n++;
}

static const char *s_header(const s_headers_t *h, const char *name)
{
    for (int i = 0; i < h->n; i++)
        if (!strcmp(h->names[i], name)) return h->values[i];
    return NULL;
}

static void s_send_policy(zsock_t *pub, uint64_t version)
{
    ipl_pool_t pool = {.name = "chat", .model = "m", .strategy = "ttft"};
    ipl_provider_t prov = {.name = "cloud",
                           .backend = "b",
                           .input_micros_per_mtok = 150000,
                           .output_micros_per_mtok = 600000};
    ipl_limit_t limits[] = {
        {.policy = "p", .tenant = "a", .requests_per_minute = 2},
        {.policy = "p", .tenant = "c", .cost_per_day_micros = 1000},
        {.policy = "p", .tenant = "s", .requests_per_minute = 6},
    };
    ipl_policy_t p = {.version = version,
                      .source = "test",
                      .pools = &pool,
                      .pools_len = 1,
                      .providers = &prov,
                      .providers_len = 1,
                      .limits = limits,
                      .limits_len = 3};
    assert_int_equal(ipl_msg_send(zsock_resolve(pub), IPL_MSG_POLICY, &p, 0), 0);
}

typedef struct {
    zsock_t *pub;
    ipl_policy_view_t *view;
} s_policy_t;

static s_policy_t s_policy(const char *endpoint)
{
    s_policy_t p = {.pub = zsock_new_pub(endpoint)};
    assert_non_null(p.pub);
    p.view = ipl_policy_view_new(endpoint, "");
    uint64_t deadline = ipl_mono_ms() + 5000; // PUB/SUB drops messages until connected
    while (ipl_policy_view_version(p.view) != 1 && ipl_mono_ms() < deadline) {
        s_send_policy(p.pub, 1);
        zclock_sleep(10);
    }
    assert_int_equal(ipl_policy_view_version(p.view), 1);
    return p;
}

static void s_policy_close(s_policy_t *p)
{
    ipl_policy_view_destroy(&p->view);
    zsock_destroy(&p->pub);
}

static int s_decide(gateway_limits_t *g, s_policy_t *p, const char *tenant, s_headers_t *hd,
                    limits_handle_t *h, gateway_api_error_t *err, int *retry)
{
    memset(hd, 0, sizeof *hd);
    memset(err, 0, sizeof *err);
    *retry = 0;
    return gateway_limits_decide(g, p->view, tenant, 20, 10, h, s_set, hd, err, retry);
}

// A replica without peers.
static gateway_limits_t *s_alone(ipl_metrics_t *m)
{
    char err[256];
    gateway_limits_t *g = gateway_limits_new(&(gateway_limits_config_t){0}, m, err, sizeof err);
    assert_non_null(g);
    return g;
}

static void test_admission_headers_and_refusal(void **state)
{
    (void)state;
    s_policy_t p = s_policy("inproc://test-limits-policy-1");
    ipl_metrics_t *m = ipl_metrics_new();
    gateway_limits_t *g = s_alone(m);
    s_headers_t hd;
    limits_handle_t h;
    gateway_api_error_t err;
    int retry;
    assert_int_equal(s_decide(g, &p, "a", &hd, &h, &err, &retry), 0);
    assert_string_equal(s_header(&hd, "x-ratelimit-limit-requests"), "2");
    assert_string_equal(s_header(&hd, "x-ratelimit-remaining-requests"), "1");
    assert_string_equal(s_header(&hd, "x-ratelimit-reset-requests"), "30s");
    assert_null(s_header(&hd, "x-ratelimit-limit-tokens"));
    gateway_limits_settle(g, &h, 5, 0);
    assert_int_equal(s_decide(g, &p, "a", &hd, &h, &err, &retry), 0);
    gateway_limits_settle(g, &h, 5, 0);
    assert_int_equal(s_decide(g, &p, "a", &hd, &h, &err, &retry), IPL_E_AGAIN);
    assert_int_equal(err.status, 429);
    assert_string_equal(err.code, "rate_limit_exceeded");
    assert_non_null(strstr(err.message, "tenant `a`: requestsPerMinute 2"));
    assert_in_range(retry, 29, 30); // one request back at 2/min
    assert_string_equal(s_header(&hd, "x-ratelimit-remaining-requests"), "0");
    assert_null(h.tenant);
    ipl_metric_t *refused = ipl_metrics_counter(m, "inferplane_gateway_ratelimited_total", "",
                                                "tenant=\"a\",limit=\"requests_per_minute\"");
    assert_int_equal((int)ipl_metric_value(refused), 1);
    // a tenant without limits: admitted, no headers
    assert_int_equal(s_decide(g, &p, "free", &hd, &h, &err, &retry), 0);
    assert_int_equal(hd.n, 0);
    gateway_limits_settle(g, &h, 5, 0);
    gateway_limits_destroy(&g);
    assert_null(g);
    ipl_metrics_destroy(&m);
    s_policy_close(&p);
}

static void test_a_provider_cost_spends_the_daily_budget(void **state)
{
    (void)state;
    s_policy_t p = s_policy("inproc://test-limits-policy-2");
    ipl_metrics_t *m = ipl_metrics_new();
    gateway_limits_t *g = s_alone(m);
    s_headers_t hd;
    limits_handle_t h;
    gateway_api_error_t err;
    int retry;
    // a local worker costs nothing
    assert_int_equal(s_decide(g, &p, "c", &hd, &h, &err, &retry), 0);
    gateway_limits_settle(g, &h, 1000000, 0);
    // the provider: 10,000 × 0.15 + 1,000 × 0.6 per million = 2,100 µUSD > 1,000
    assert_int_equal(s_decide(g, &p, "c", &hd, &h, &err, &retry), 0);
    gateway_limits_settle(g, &h, 1000, gateway_limits_cost_micros(p.view, "cloud", 10000, 1000));
    assert_int_equal(s_decide(g, &p, "c", &hd, &h, &err, &retry), IPL_E_AGAIN);
    assert_non_null(strstr(err.message, "daily cost budget (costPerDayUsd 0.001,"));
    assert_in_range(retry, 1, 86400); // until 00:00 UTC
    gateway_limits_destroy(&g);
    ipl_metrics_destroy(&m);
    s_policy_close(&p);
}

static double s_counter(ipl_metrics_t *m, const char *name)
{
    return ipl_metric_value(ipl_metrics_counter(m, name, "", NULL));
}

static void test_two_replicas_charge_each_others_admissions(void **state)
{
    (void)state;
    s_policy_t p = s_policy("inproc://test-limits-policy-3");
    ipl_metrics_t *ma = ipl_metrics_new(), *mb = ipl_metrics_new();
    char err_text[256];
    gateway_limits_t *a =
        gateway_limits_new(&(gateway_limits_config_t){.listen = "inproc://test-limits-a",
                                                      .peers = "inproc://test-limits-b",
                                                      .id = "a",
                                                      .interval_ms = 10},
                           ma, err_text, sizeof err_text);
    assert_non_null(a);
    gateway_limits_t *b = gateway_limits_new(
        &(gateway_limits_config_t){.listen = "inproc://test-limits-b",
                                   .peers = "inproc://test-limits-a,inproc://test-limits-b",
                                   .id = "b",
                                   .interval_ms = 10},
        mb, err_text, sizeof err_text);
    assert_non_null(b);
    assert_string_equal(gateway_limits_id(b), "b");
    // b learns the limits as the server's policy attach hook tells it, before any request
    ipl_policy_snap_t *snap = ipl_policy_view_get(p.view);
    gateway_limits_policy(b, snap->policy);
    ipl_policy_view_release(p.view, &snap);
    s_headers_t hd;
    limits_handle_t h;
    gateway_api_error_t err;
    int retry;
    // a spends tenant s's whole limit (a lease per interval: a few intervals)
    int admitted = 0;
    uint64_t deadline = ipl_mono_ms() + 5000;
    while (admitted < 6 && ipl_mono_ms() < deadline) {
        if (s_decide(a, &p, "s", &hd, &h, &err, &retry) == 0) {
            admitted++;
            gateway_limits_settle(a, &h, 5, 0);
        } else {
            zclock_sleep(2);
        }
    }
    assert_int_equal(admitted, 6);
    // once b has a's reports since then, b refuses s too (never three at once: not 2×)
    double seen = s_counter(mb, "inferplane_gateway_limits_gossip_received_total");
    deadline = ipl_mono_ms() + 5000;
    while (s_counter(mb, "inferplane_gateway_limits_gossip_received_total") < seen + 3 &&
           ipl_mono_ms() < deadline)
        zclock_sleep(5);
    assert_true(s_counter(mb, "inferplane_gateway_limits_gossip_received_total") >= seen + 3);
    assert_int_equal(s_decide(b, &p, "s", &hd, &h, &err, &retry), IPL_E_AGAIN);
    assert_non_null(strstr(err.message, "requestsPerMinute 6"));
    assert_true(s_counter(ma, "inferplane_gateway_limits_gossip_sent_total") > 0);
    assert_int_equal((int)s_counter(mb, "inferplane_gateway_limits_gossip_malformed_total"), 0);
    gateway_limits_destroy(&a);
    gateway_limits_destroy(&b);
    ipl_metrics_destroy(&ma);
    ipl_metrics_destroy(&mb);
    s_policy_close(&p);
}

static void test_bad_endpoints_are_refused_with_the_fix(void **state)
{
    (void)state;
    ipl_metrics_t *m = ipl_metrics_new();
    char err[512];
    gateway_limits_t *g =
        gateway_limits_new(&(gateway_limits_config_t){.listen = "nonsense"}, m, err, sizeof err);
    assert_null(g);
    assert_non_null(strstr(err, "--limits-listen"));
    g = gateway_limits_new(&(gateway_limits_config_t){.peers = "tcp://nohost"}, m, err, sizeof err);
    assert_null(g);
    assert_non_null(strstr(err, "--limits-peers \"tcp://nohost\""));
    ipl_metrics_destroy(&m);
}

int main(void)
{
    zsys_handler_set(NULL);
    ipl_log_set_level(IPL_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_admission_headers_and_refusal),
        cmocka_unit_test(test_a_provider_cost_spends_the_daily_budget),
        cmocka_unit_test(test_two_replicas_charge_each_others_admissions),
        cmocka_unit_test(test_bad_endpoints_are_refused_with_the_fix),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
