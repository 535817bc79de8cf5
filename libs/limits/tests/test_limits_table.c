/*
 * Unit tests of limits_table: each limit refuses with its name and a retry-after computed
 * from its bucket; output tokens are reserved (max_tokens or the tenant's estimate) and
 * settled; the cost budget resets at 00:00 UTC; "*" gives every other tenant its own
 * buckets; peers' reports are charged once (lost and repeated messages, restarts), their
 * in-flight gauges count until they time out; a replica takes only its lease per interval;
 * and three replicas gossiping every interval hold a tenant to one limit, within the
 * documented bound, also when one of them dies. The clock is injected: no sleeps.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "limits_table.h"

#define T0 (20000LL * 86400000LL + 3600000LL) // 01:00 UTC on some day

static ipl_limit_t s_limit(const char *tenant, uint64_t rpm, uint64_t itpm, uint64_t otpm,
                           uint64_t conc, uint64_t cost)
{
    return (ipl_limit_t){.policy = "p",
                         .tenant = (char *)tenant,
                         .requests_per_minute = rpm,
                         .input_tokens_per_minute = itpm,
                         .output_tokens_per_minute = otpm,
                         .concurrent_requests = conc,
                         .cost_per_day_micros = cost};
}

static limits_table_t *s_table(ipl_limit_t *limits, size_t n)
{
    limits_table_t *t = limits_table_new(NULL);
    limits_table_set(t, limits, n, T0);
    return t;
}

static bool s_admit(limits_table_t *t, const char *tenant, uint64_t prompt, uint64_t max_tokens,
                    int64_t now, limits_verdict_t *v)
{
    limits_handle_t h;
    limits_verdict_t local;
    bool ok = limits_table_admit(t, tenant, prompt, max_tokens, now, &h, v ? v : &local);
    limits_table_settle(t, &h, 0, 0, now);
    return ok;
}

static void test_requests_per_minute(void **state)
{
    (void)state;
    ipl_limit_t l[] = {s_limit("a", 60, 0, 0, 0, 0)};
    limits_table_t *t = s_table(l, 1);
    limits_verdict_t v;
    for (int i = 0; i < 60; i++)
        assert_true(s_admit(t, "a", 10, 0, T0, &v));
    assert_true(v.has_requests);
    assert_int_equal(v.limit_requests, 60);
    assert_int_equal(v.remaining_requests, 0);
    assert_int_equal(v.reset_requests_ms, 60000);
    assert_false(v.has_tokens);
    assert_false(s_admit(t, "a", 10, 0, T0, &v));
    assert_int_equal(v.refused, LIMITS_REQUESTS);
    assert_int_equal(v.refused_limit, 60);
    assert_int_equal(v.retry_after_ms, 1000);
    assert_string_equal(limits_dim_name(v.refused), "requests_per_minute");
    assert_string_equal(limits_dim_field(v.refused), "requestsPerMinute");
    assert_false(s_admit(t, "a", 10, 0, T0 + 999, &v));
    assert_true(s_admit(t, "a", 10, 0, T0 + 1000, &v));
    limits_tenant_stats_t st[2];
    assert_int_equal(limits_table_stats(t, T0 + 1000, st, 2), 1);
    assert_int_equal(st[0].admitted, 61);
    assert_int_equal(st[0].refused[LIMITS_REQUESTS], 2);
    limits_table_destroy(&t);
    assert_null(t);
}

static void test_input_tokens_are_charged_exactly(void **state)
{
    (void)state;
    ipl_limit_t l[] = {s_limit("a", 0, 1000, 0, 0, 0)};
    limits_table_t *t = s_table(l, 1);
    limits_verdict_t v;
    assert_true(s_admit(t, "a", 600, 0, T0, &v));
    assert_true(v.has_tokens);
    assert_int_equal(v.limit_tokens, 1000);
    assert_int_equal(v.remaining_tokens, 400);
    assert_int_equal(v.reset_tokens_ms, 36000);
    assert_false(s_admit(t, "a", 600, 0, T0, &v));
    assert_int_equal(v.refused, LIMITS_INPUT_TOKENS);
    assert_int_equal(v.retry_after_ms, 12000); // 200 tokens at 1000/min
    assert_true(s_admit(t, "a", 400, 0, T0, &v));
    // a prompt larger than the whole limit passes on a full bucket, into debt
    assert_true(s_admit(t, "a", 5000, 0, T0 + 60000, &v));
    assert_false(s_admit(t, "a", 1, 0, T0 + 60000 + 239000, &v));
    assert_true(s_admit(t, "a", 1, 0, T0 + 60000 + 240060, &v));
    limits_table_destroy(&t);
}

static void test_output_tokens_are_reserved_then_settled(void **state)
{
    (void)state;
    ipl_limit_t l[] = {s_limit("a", 0, 0, 1000, 0, 0)};
    limits_table_t *t = s_table(l, 1);
    limits_verdict_t v;
    limits_handle_t h1, h2, h3;
    assert_true(limits_table_admit(t, "a", 5, 800, T0, &h1, &v));
    assert_int_equal(h1.reserved_output, 800);
    assert_int_equal(v.remaining_tokens, 200); // the output bucket speaks for tokens
    assert_false(limits_table_admit(t, "a", 5, 800, T0, &h2, &v));
    assert_int_equal(v.refused, LIMITS_OUTPUT_TOKENS);
    assert_null(h2.tenant);
    limits_table_settle(t, &h1, 100, 0, T0); // 700 refunded
    assert_null(h1.tenant);
    limits_table_settle(t, &h1, 100, 0, T0); // a settled handle is a no-op
    assert_true(limits_table_admit(t, "a", 5, 800, T0, &h2, &v));
    assert_int_equal(v.remaining_tokens, 100);
    limits_table_settle(t, &h2, 800, 0, T0);
    // an excess is charged: reserve 10, produce 500
    assert_true(limits_table_admit(t, "a", 5, 10, T0, &h3, &v));
    limits_table_settle(t, &h3, 500, 0, T0);
    limits_tenant_stats_t st;
    limits_table_stats(t, T0, &st, 1);
    assert_true(st.level[LIMITS_OUTPUT_TOKENS] < -399.9 && st.level[2] > -400.1); // 100 − 10 − 490
    uint32_t n;
    ipl_tenant_usage_t *u = limits_table_usage(t, &n);
    assert_int_equal(n, 1);
    assert_int_equal(u[0].output_tokens, 800 + 800 + 10 + 490);
    assert_int_equal(u[0].output_refunded, 700);
    assert_int_equal(u[0].inflight, 0);
    free(u);
    limits_table_destroy(&t);
}

static void test_without_max_tokens_the_estimate_is_reserved(void **state)
{
    (void)state;
    ipl_limit_t l[] = {s_limit("a", 0, 0, 100000, 0, 0), s_limit("small", 0, 0, 100, 0, 0)};
    limits_table_t *t = s_table(l, 2);
    limits_verdict_t v;
    limits_handle_t h;
    assert_true(limits_table_admit(t, "a", 5, 0, T0, &h, &v));
    assert_int_equal(h.reserved_output, 256); // nothing seen yet
    limits_table_settle(t, &h, 40, 0, T0);
    for (int i = 0; i < 40; i++) {
        assert_true(limits_table_admit(t, "a", 5, 0, T0, &h, &v));
        limits_table_settle(t, &h, 40, 0, T0);
    }
    assert_true(limits_table_admit(t, "a", 5, 0, T0, &h, &v));
    assert_in_range(h.reserved_output, 40, 42); // the running mean of completions
    limits_table_settle(t, &h, 40, 0, T0);
    assert_true(limits_table_admit(t, "small", 5, 0, T0, &h, &v));
    assert_int_equal(h.reserved_output, 100); // capped at the capacity
    limits_table_settle(t, &h, 0, 0, T0);
    limits_table_destroy(&t);
}

static void test_concurrent_requests(void **state)
{
    (void)state;
    ipl_limit_t l[] = {s_limit("a", 0, 0, 0, 2, 0)};
    limits_table_t *t = s_table(l, 1);
    limits_verdict_t v;
    limits_handle_t h[3];
    assert_true(limits_table_admit(t, "a", 1, 0, T0, &h[0], &v));
    assert_true(limits_table_admit(t, "a", 1, 0, T0, &h[1], &v));
    assert_false(limits_table_admit(t, "a", 1, 0, T0, &h[2], &v));
    assert_int_equal(v.refused, LIMITS_CONCURRENT);
    assert_int_equal(v.retry_after_ms, 1000);
    assert_false(v.has_requests || v.has_tokens);
    limits_table_settle(t, &h[0], 0, 0, T0 + 5);
    assert_true(limits_table_admit(t, "a", 1, 0, T0 + 5, &h[2], &v));
    limits_table_settle(t, &h[1], 0, 0, T0);
    limits_table_settle(t, &h[2], 0, 0, T0);
    limits_tenant_stats_t st;
    limits_table_stats(t, T0, &st, 1);
    assert_int_equal(st.inflight, 0);
    limits_table_destroy(&t);
}

static void test_cost_budget_resets_at_midnight_utc(void **state)
{
    (void)state;
    ipl_limit_t l[] = {s_limit("a", 0, 0, 0, 0, 1000000)}; // 1 USD
    limits_table_t *t = s_table(l, 1);
    limits_verdict_t v;
    limits_handle_t h;
    assert_true(limits_table_admit(t, "a", 1, 0, T0, &h, &v));
    limits_table_settle(t, &h, 10, 999999, T0);
    assert_true(limits_table_admit(t, "a", 1, 0, T0, &h, &v)); // under the budget still
    limits_table_settle(t, &h, 10, 1, T0);
    assert_false(limits_table_admit(t, "a", 1, 0, T0 + 1000, &h, &v));
    assert_int_equal(v.refused, LIMITS_COST);
    assert_int_equal(v.refused_limit, 1000000);
    assert_int_equal(v.retry_after_ms, 23LL * 3600000 - 1000); // until 00:00 UTC
    assert_true(limits_table_admit(t, "a", 1, 0, T0 + v.retry_after_ms + 1000, &h, &v));
    limits_table_settle(t, &h, 0, 0, T0);
    limits_table_destroy(&t);
}

static void test_wildcard_gives_each_tenant_its_own_buckets(void **state)
{
    (void)state;
    ipl_limit_t l[] = {s_limit("*", 2, 0, 0, 0, 0), s_limit("vip", 100, 0, 0, 0, 0)};
    limits_table_t *t = s_table(l, 2);
    limits_verdict_t v;
    for (int i = 0; i < 2; i++) {
        assert_true(s_admit(t, "x", 1, 0, T0, &v));
        assert_true(s_admit(t, "y", 1, 0, T0, &v));
        assert_true(s_admit(t, "", 1, 0, T0, &v)); // anonymous is a tenant too
    }
    assert_false(s_admit(t, "x", 1, 0, T0, &v));
    assert_false(s_admit(t, "y", 1, 0, T0, &v));
    for (int i = 0; i < 50; i++)
        assert_true(s_admit(t, "vip", 1, 0, T0, &v));
    assert_int_equal(v.limit_requests, 100);
    limits_table_destroy(&t);

    // no entry and no "*": admitted, counted, no headers
    ipl_limit_t only[] = {s_limit("vip", 1, 0, 0, 0, 0)};
    t = s_table(only, 1);
    for (int i = 0; i < 10; i++)
        assert_true(s_admit(t, "free", 1, 0, T0, &v));
    assert_false(v.has_requests || v.has_tokens);
    limits_tenant_stats_t st[2];
    assert_int_equal(limits_table_stats(t, T0, st, 2), 1);
    assert_false(st[0].limited);
    assert_int_equal(st[0].admitted, 10);
    limits_table_destroy(&t);
}

static void test_a_policy_change_keeps_the_level(void **state)
{
    (void)state;
    ipl_limit_t l[] = {s_limit("a", 100, 0, 0, 0, 0)};
    limits_table_t *t = s_table(l, 1);
    for (int i = 0; i < 90; i++)
        assert_true(s_admit(t, "a", 1, 0, T0, NULL));
    l[0].requests_per_minute = 50; // lowered: 10 left stays 10
    limits_table_set(t, l, 1, T0);
    limits_verdict_t v;
    assert_true(s_admit(t, "a", 1, 0, T0, &v));
    assert_int_equal(v.remaining_requests, 9);
    limits_table_set(t, NULL, 0, T0); // no limits at all
    for (int i = 0; i < 20; i++)
        assert_true(s_admit(t, "a", 1, 0, T0, NULL));
    limits_table_destroy(&t);
}

static void test_too_many_tenants_share_one_state(void **state)
{
    (void)state;
    ipl_limit_t l[] = {s_limit("*", 1, 0, 0, 0, 0)};
    limits_table_t *t = limits_table_new(&(limits_options_t){.max_tenants = 2});
    limits_table_set(t, l, 1, T0);
    assert_true(s_admit(t, "a", 1, 0, T0, NULL));
    assert_true(s_admit(t, "b", 1, 0, T0, NULL));
    assert_true(s_admit(t, "c", 1, 0, T0, NULL)); // the first of "(other)"
    assert_false(s_admit(t, "d", 1, 0, T0, NULL));
    limits_tenant_stats_t st[8];
    assert_int_equal(limits_table_stats(t, T0, st, 8), 3);
    assert_string_equal(st[0].tenant, LIMITS_OTHER_TENANT);
    limits_table_destroy(&t);
}

// ---- across replicas --------------------------------------------------------------------------

// t's report, sent at the start of the interval at `at` (ms).
static ipl_limits_usage_t s_report_at(limits_table_t *t, const char *id, uint64_t incarnation,
                                      int64_t at)
{
    ipl_limits_usage_t m = {.replica = (char *)id,
                            .incarnation = incarnation,
                            .interval_ms = 50,
                            .epoch = (uint64_t)(at / 50)};
    m.tenants = limits_table_usage(t, &m.tenants_len);
    return m;
}

static ipl_limits_usage_t s_report(limits_table_t *t, const char *id, uint64_t incarnation)
{
    return s_report_at(t, id, incarnation, T0);
}

static double s_level(limits_table_t *t, int dim, int64_t now)
{
    limits_tenant_stats_t st;
    limits_table_stats(t, now, &st, 1);
    return st.level[dim];
}

static void test_peers_reports_are_charged_once(void **state)
{
    (void)state;
    ipl_limit_t l[] = {s_limit("a", 600, 0, 1000, 0, 0)};
    limits_table_t *a = s_table(l, 1), *b = s_table(l, 1);
    for (int i = 0; i < 30; i++)
        assert_true(s_admit(a, "a", 1, 10, T0, NULL)); // refunded
    ipl_limits_usage_t m1 = s_report(a, "a", 7);
    assert_int_equal(m1.tenants_len, 1);
    assert_int_equal(m1.tenants[0].requests, 30);
    assert_int_equal(limits_table_apply(b, &m1, T0), 1);
    assert_true(s_level(b, LIMITS_REQUESTS, T0) > 569.9 && s_level(b, 0, T0) < 570.1);
    assert_true(s_level(b, LIMITS_OUTPUT_TOKENS, T0) > 999.9); // reserved and refunded
    assert_int_equal(limits_table_apply(b, &m1, T0), 1);       // a repeat charges nothing more
    assert_true(s_level(b, LIMITS_REQUESTS, T0) > 569.9);
    assert_int_equal(limits_table_replicas(b, T0), 2);

    // a lost message loses nothing: the next one carries the sum
    for (int i = 0; i < 20; i++)
        assert_true(s_admit(a, "a", 1, 10, T0, NULL));
    ipl_limits_usage_t lost = s_report(a, "a", 7);
    for (int i = 0; i < 20; i++)
        assert_true(s_admit(a, "a", 1, 10, T0, NULL));
    ipl_limits_usage_t m2 = s_report(a, "a", 7);
    limits_table_apply(b, &m2, T0);
    assert_true(s_level(b, LIMITS_REQUESTS, T0) > 529.9 && s_level(b, 0, T0) < 530.1);

    // a restart (new incarnation) counts from zero: not charged twice
    limits_table_t *a2 = s_table(l, 1);
    for (int i = 0; i < 5; i++)
        assert_true(s_admit(a2, "a", 1, 10, T0, NULL));
    ipl_limits_usage_t m3 = s_report(a2, "a", 8);
    limits_table_apply(b, &m3, T0);
    assert_true(s_level(b, LIMITS_REQUESTS, T0) > 524.9 && s_level(b, 0, T0) < 525.1);

    // b's own admissions stay out of its report's peer counters, and it still refills
    assert_true(s_level(b, LIMITS_REQUESTS, T0 + 6000) > 584.9);
    free(m1.tenants);
    free(lost.tenants);
    free(m2.tenants);
    free(m3.tenants);
    limits_table_destroy(&a);
    limits_table_destroy(&a2);
    limits_table_destroy(&b);
}

static void test_peers_in_flight_count_until_they_time_out(void **state)
{
    (void)state;
    ipl_limit_t l[] = {s_limit("a", 0, 0, 0, 3, 0)};
    limits_table_t *a = s_table(l, 1), *b = s_table(l, 1);
    limits_handle_t h[3];
    limits_verdict_t v;
    assert_true(limits_table_admit(a, "a", 1, 0, T0, &h[0], &v));
    assert_true(limits_table_admit(a, "a", 1, 0, T0, &h[1], &v));
    ipl_limits_usage_t m = s_report(a, "a", 1);
    limits_table_apply(b, &m, T0);
    free(m.tenants);
    int64_t later = T0 + 100; // a new interval
    assert_true(limits_table_admit(b, "a", 1, 0, later, &h[2], &v));
    limits_handle_t x;
    assert_false(limits_table_admit(b, "a", 1, 0, later, &x, &v));
    assert_int_equal(v.refused, LIMITS_CONCURRENT);
    // a's reports stop (it died): after the timeout (20 intervals) its gauge is gone
    assert_false(limits_table_admit(b, "a", 1, 0, T0 + 1000, &x, &v));
    assert_int_equal(limits_table_replicas(b, T0 + 1001), 1);
    assert_true(limits_table_admit(b, "a", 1, 0, T0 + 1001, &x, &v));
    limits_table_settle(b, &x, 0, 0, T0);
    limits_table_settle(b, &h[2], 0, 0, T0);
    limits_table_settle(a, &h[0], 0, 0, T0);
    limits_table_settle(a, &h[1], 0, 0, T0);
    limits_table_destroy(&a);
    limits_table_destroy(&b);
}

static void test_a_replica_takes_only_its_lease_per_interval(void **state)
{
    (void)state;
    ipl_limit_t l[] = {s_limit("a", 60, 0, 0, 0, 0)};
    limits_table_t *b = s_table(l, 1);
    int64_t now = T0 + 50 * 100; // the start of an interval
    ipl_limits_usage_t p1 = {.replica = "p1", .incarnation = 1, .epoch = (uint64_t)now / 50};
    ipl_limits_usage_t p2 = {.replica = "p2", .incarnation = 1, .epoch = (uint64_t)now / 50};
    limits_table_apply(b, &p1, now);
    limits_table_apply(b, &p2, now);
    assert_int_equal(limits_table_replicas(b, now), 3);
    limits_verdict_t v;
    int admitted = 0;
    while (admitted < 100 && s_admit(b, "a", 1, 0, now, &v))
        admitted++;
    assert_int_equal(admitted, 20); // 60 / 3
    assert_int_equal(v.refused, LIMITS_REQUESTS);
    assert_in_range(v.retry_after_ms, 1, 50); // the next interval
    // the next interval, both peers' reports in: a third of what is left
    now += 50;
    p1.epoch = p2.epoch = (uint64_t)now / 50;
    limits_table_apply(b, &p1, now);
    limits_table_apply(b, &p2, now);
    admitted = 0;
    while (admitted < 100 && s_admit(b, "a", 1, 0, now, &v))
        admitted++;
    assert_int_equal(admitted, 13); // 40.05 / 3
    // the next, the reports late: the last lease (spent) goes on for a fifth of the interval
    now += 50;
    admitted = 0;
    while (admitted < 100 && s_admit(b, "a", 1, 0, now, &v))
        admitted++;
    assert_int_equal(admitted, 0);
    // then a lease that assumes each peer spent its last lease: (27.1 − 2 × 13.35) / 3
    now += 10;
    while (admitted < 100 && s_admit(b, "a", 1, 0, now, &v))
        admitted++;
    assert_int_equal(admitted, 1);         // only the interval's first request
    limits_table_expect(b, 3, now + 1000); // a starting replica with two configured peers
    assert_int_equal(limits_table_replicas(b, now + 1001), 1);
    limits_table_destroy(&b);

    // a lone replica has no lease: the whole bucket at once
    b = s_table(l, 1);
    admitted = 0;
    while (admitted < 100 && s_admit(b, "a", 1, 0, T0, &v))
        admitted++;
    assert_int_equal(admitted, 60);
    limits_table_destroy(&b);
}

// Three replicas, a tenant far over its limit, reports every interval (delivered at the next
// tick, the worst case for staleness); each replica gets `per_tick` requests per interval.
// Returns the requests admitted over `ms`. `kill_at`: replica 2 stops then (its unreported
// admissions are lost with it, its reports stop).
static long s_cluster(uint64_t rpm, int per_tick, int64_t ms, int64_t kill_at, int64_t from_ms,
                      long *admitted_after)
{
    ipl_limit_t l[] = {s_limit("t", rpm, 0, 0, 0, 0)};
    limits_table_t *r[3];
    const char *ids[3] = {"g0", "g1", "g2"};
    for (int i = 0; i < 3; i++) {
        r[i] = s_table(l, 1);
        limits_table_expect(r[i], 3, T0 + 1000);
    }
    long admitted = 0;
    *admitted_after = 0;
    ipl_limits_usage_t pending[3] = {{0}};
    for (int64_t now = T0; now < T0 + ms; now += 50) {
        // the first round of the tick, then the reports of the previous tick (late: the
        // leases of this interval were computed without them)
        for (int i = 0; i < 3; i++) {
            if (kill_at && now >= T0 + kill_at && i == 2) continue;
            if (s_admit(r[i], "t", 1, 0, now, NULL)) {
                admitted++;
                if (now >= T0 + from_ms) (*admitted_after)++;
            }
        }
        for (int s = 0; s < 3; s++) {
            if (!pending[s].replica) continue;
            for (int d = 0; d < 3; d++)
                if (d != s && !(kill_at && now >= T0 + kill_at && d == 2))
                    limits_table_apply(r[d], &pending[s], now);
            free(pending[s].tenants);
            pending[s] = (ipl_limits_usage_t){0};
        }
        for (int k = 1; k < per_tick; k++)
            for (int i = 0; i < 3; i++) {
                if (kill_at && now >= T0 + kill_at && i == 2) continue;
                int64_t at = now + (k * 50) / per_tick;
                if (s_admit(r[i], "t", 1, 0, at, NULL)) {
                    admitted++;
                    if (at >= T0 + from_ms) (*admitted_after)++;
                }
            }
        for (int i = 0; i < 3; i++)
            if (!(kill_at && now >= T0 + kill_at && i == 2))
                pending[i] = s_report_at(r[i], ids[i], 1, now + 50);
    }
    for (int s = 0; s < 3; s++)
        free(pending[s].tenants);
    for (int i = 0; i < 3; i++)
        limits_table_destroy(&r[i]);
    return admitted;
}

static void test_three_replicas_hold_a_tenant_to_one_limit(void **state)
{
    (void)state;
    long after;
    // 600/min over 120 s, demand 3 × 20 per 50 ms = 1200/s: allowed 600 (the burst) + 1200
    long n = s_cluster(600, 20, 120000, 0, 60000, &after);
    assert_in_range(n, 1800 - 10, 1800 + 3 * 10);
    // the steady state, from the 60th second: the refill rate, within 1%
    assert_in_range(after, 594, 606);
    // one replica killed at 30 s: the others still hold the limit
    n = s_cluster(600, 20, 120000, 30000, 60000, &after);
    assert_in_range(n, 1800 - 10, 1800 + 3 * 10);
    assert_in_range(after, 594, 606);
}

static void test_a_burst_overshoots_at_most_a_lease(void **state)
{
    (void)state;
    long after;
    // 3000/min, the first 50 ms of demand: each replica takes its third of the bucket and the
    // others' reports arrive only at the next tick; at the second tick each sees the others'
    long n = s_cluster(3000, 2000, 100, 0, 0, &after);
    assert_in_range(n, 3000, 3000 + 3 * 2 + 5); // the first request of each tick, the refill
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_requests_per_minute),
        cmocka_unit_test(test_input_tokens_are_charged_exactly),
        cmocka_unit_test(test_output_tokens_are_reserved_then_settled),
        cmocka_unit_test(test_without_max_tokens_the_estimate_is_reserved),
        cmocka_unit_test(test_concurrent_requests),
        cmocka_unit_test(test_cost_budget_resets_at_midnight_utc),
        cmocka_unit_test(test_wildcard_gives_each_tenant_its_own_buckets),
        cmocka_unit_test(test_a_policy_change_keeps_the_level),
        cmocka_unit_test(test_too_many_tenants_share_one_state),
        cmocka_unit_test(test_peers_reports_are_charged_once),
        cmocka_unit_test(test_peers_in_flight_count_until_they_time_out),
        cmocka_unit_test(test_a_replica_takes_only_its_lease_per_interval),
        cmocka_unit_test(test_three_replicas_hold_a_tenant_to_one_limit),
        cmocka_unit_test(test_a_burst_overshoots_at_most_a_lease),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
