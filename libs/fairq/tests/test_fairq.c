/*
 * Unit tests of fairq: fairness by tokens (a tenant with 50k-token prompts against one with
 * 500-token ones), weights 2:1, strict priority and reserved shares, deadlines, every bound
 * and its reason, no burst of credit after idling (VTC's counter lift), unpop keeping the
 * entry's place and refunding it, removal, and forgetting idle tenants when max_flows is
 * reached. Time is injected: no sleeps.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fairq.h"
#include "ipl_error.h"

#define S_MS 1000000ULL

/* A pool of caller-owned entries; item points at the tenant name it was pushed for. */
typedef struct {
    fairq_entry_t e[4096];
    size_t used;
} s_pool_t;

static fairq_entry_t *s_entry(s_pool_t *p, uint64_t cost, uint64_t deadline_ns)
{
    assert_true(p->used < 4096);
    fairq_entry_t *e = &p->e[p->used++];
    memset(e, 0, sizeof *e);
    e->cost = cost;
    e->deadline_ns = deadline_ns;
    return e;
}

static void s_push(fairq_t *q, s_pool_t *p, const char *tenant, uint32_t weight, fairq_class_t cls,
                   uint64_t cost, uint64_t now)
{
    fairq_entry_t *e = s_entry(p, cost, 0);
    e->item = (void *)tenant;
    fairq_reason_t why;
    int rc = fairq_push(q, tenant, weight, cls, e, now, &why);
    if (rc != 0) fail_msg("push %s: rc %d reason %s", tenant, rc, fairq_reason_name(why));
}

static s_pool_t *s_pool(void)
{
    s_pool_t *p = calloc(1, sizeof *p);
    assert_non_null(p);
    return p;
}

/* Tokens dispatched to tenant `t` among the next `n` pops (the others counted in *other). */
static uint64_t s_pop_tokens(fairq_t *q, int n, const char *t, uint64_t *other, uint64_t now)
{
    uint64_t mine = 0;
    for (int i = 0; i < n; i++) {
        fairq_entry_t *e = fairq_pop(q, now);
        if (!e) break;
        if (!strcmp(e->item, t))
            mine += e->cost;
        else if (other)
            *other += e->cost;
    }
    return mine;
}

static void test_tokens_not_requests(void **state)
{
    (void)state;
    fairq_t *q = fairq_new(NULL);
    s_pool_t *p = s_pool();
    for (int i = 0; i < 40; i++)
        s_push(q, p, "heavy", 1, FAIRQ_STANDARD, 50000, 0);
    for (int i = 0; i < 1000; i++)
        s_push(q, p, "light", 1, FAIRQ_STANDARD, 500, 0);
    // Per request fairness would give light one 500-token request per 50k of heavy's; by
    // tokens they get the same within one heavy request.
    uint64_t heavy = 0, light = s_pop_tokens(q, 510, "light", &heavy, 1 * S_MS);
    assert_true(light >= 200000);
    assert_true(light + 50000 >= heavy && heavy + 50000 >= light);
    fairq_stats_t st;
    assert_true(fairq_stats(q, "light", -1, &st));
    assert_int_equal(st.dispatched_tokens, light);
    assert_int_equal(st.wait_max_ns, 1 * S_MS);
    fairq_destroy(&q);
    assert_null(q);

    // A light request arriving behind a heavy flood is the next one out.
    q = fairq_new(NULL);
    p->used = 0;
    for (int i = 0; i < 40; i++)
        s_push(q, p, "heavy", 1, FAIRQ_STANDARD, 50000, 0);
    for (int i = 0; i < 5; i++)
        assert_string_equal(fairq_pop(q, 0)->item, "heavy");
    s_push(q, p, "light", 1, FAIRQ_STANDARD, 500, 0);
    assert_string_equal(fairq_pop(q, 0)->item, "light");
    fairq_destroy(&q);
    free(p);
}

static void test_weights(void **state)
{
    (void)state;
    fairq_t *q = fairq_new(NULL);
    s_pool_t *p = s_pool();
    for (int i = 0; i < 600; i++) {
        s_push(q, p, "a", 2, FAIRQ_STANDARD, 1000, 0);
        s_push(q, p, "b", 1, FAIRQ_STANDARD, 1000, 0);
    }
    uint64_t b = 0, a = s_pop_tokens(q, 600, "a", &b, 0);
    double ratio = (double)a / (double)b;
    assert_true(ratio > 1.95 && ratio < 2.05);
    // unequal costs and weights: 3:1 with a's requests 4× b's
    fairq_destroy(&q);
    q = fairq_new(NULL);
    p->used = 0;
    for (int i = 0; i < 300; i++)
        s_push(q, p, "a", 3, FAIRQ_STANDARD, 4000, 0);
    for (int i = 0; i < 1200; i++)
        s_push(q, p, "b", 1, FAIRQ_STANDARD, 1000, 0);
    b = 0;
    a = s_pop_tokens(q, 400, "a", &b, 0);
    ratio = (double)a / (double)b;
    assert_true(ratio > 2.8 && ratio < 3.2);
    fairq_destroy(&q);
    free(p);
}

static void test_priorities_and_reserve(void **state)
{
    (void)state;
    // No reserves: strict priority, whatever the push order and the counters.
    fairq_config_t cfg = {.reserve_set = true};
    fairq_t *q = fairq_new(&cfg);
    s_pool_t *p = s_pool();
    for (int i = 0; i < 10; i++)
        s_push(q, p, "b", 1, FAIRQ_BATCH, 10, 0);
    for (int i = 0; i < 10; i++)
        s_push(q, p, "s", 1, FAIRQ_STANDARD, 10, 0);
    for (int i = 0; i < 10; i++)
        s_push(q, p, "i", 1, FAIRQ_INTERACTIVE, 10, 0);
    assert_int_equal(fairq_class_len(q, FAIRQ_BATCH), 10);
    for (int i = 0; i < 30; i++) {
        fairq_entry_t *e = fairq_pop(q, 0);
        assert_int_equal(e->cls, i < 10   ? FAIRQ_INTERACTIVE
                                 : i < 20 ? FAIRQ_STANDARD
                                          : FAIRQ_BATCH);
    }
    assert_null(fairq_pop(q, 0));
    fairq_destroy(&q);

    // Reserves {0, 10, 5}: under an interactive flood standard gets 10% and batch 5% of the
    // dispatches, no more, no less.
    q = fairq_new(NULL);
    p->used = 0;
    for (int i = 0; i < 400; i++)
        s_push(q, p, "i", 1, FAIRQ_INTERACTIVE, 10, 0);
    for (int i = 0; i < 100; i++)
        s_push(q, p, "s", 1, FAIRQ_STANDARD, 10, 0);
    for (int i = 0; i < 100; i++)
        s_push(q, p, "b", 1, FAIRQ_BATCH, 10, 0);
    int n[FAIRQ_CLASSES] = {0};
    for (int i = 0; i < 200; i++)
        n[fairq_pop(q, 0)->cls]++;
    assert_in_range(n[FAIRQ_STANDARD], 19, 21);
    assert_in_range(n[FAIRQ_BATCH], 9, 11);
    assert_int_equal(n[FAIRQ_INTERACTIVE], 200 - n[FAIRQ_STANDARD] - n[FAIRQ_BATCH]);
    fairq_destroy(&q);

    // Reserves above 100 in sum are refused.
    fairq_config_t bad = {.reserve_set = true, .reserve_percent = {50, 40, 20}};
    assert_null(fairq_new(&bad));
    assert_int_equal(fairq_class_parse("batch"), FAIRQ_BATCH);
    assert_int_equal(fairq_class_parse("interactive"), FAIRQ_INTERACTIVE);
    assert_int_equal(fairq_class_parse("urgent"), -1);
    assert_int_equal(fairq_class_parse(NULL), -1);
    assert_string_equal(fairq_class_name(FAIRQ_STANDARD), "standard");
    free(p);
}

static void test_deadlines(void **state)
{
    (void)state;
    fairq_t *q = fairq_new(NULL);
    s_pool_t *p = s_pool();
    fairq_entry_t *a = s_entry(p, 100, 10 * S_MS), *b = s_entry(p, 100, 0),
                  *c = s_entry(p, 100, 20 * S_MS), *d = s_entry(p, 100, 10 * S_MS);
    assert_int_equal(fairq_push(q, "x", 1, FAIRQ_STANDARD, a, 0, NULL), 0);
    assert_int_equal(fairq_push(q, "x", 1, FAIRQ_STANDARD, b, 0, NULL), 0);
    assert_int_equal(fairq_push(q, "y", 1, FAIRQ_BATCH, c, 0, NULL), 0);
    assert_int_equal(fairq_push(q, "y", 1, FAIRQ_BATCH, d, 0, NULL), 0);
    fairq_entry_t *out[8];
    assert_int_equal(fairq_expire(q, 9 * S_MS, out, 8), 0);
    assert_int_equal(fairq_expire(q, 10 * S_MS, out, 8), 2);
    assert_true((out[0] == a && out[1] == d) || (out[0] == d && out[1] == a));
    assert_int_equal(fairq_len(q), 2);
    fairq_stats_t st;
    assert_true(fairq_stats(q, "y", FAIRQ_BATCH, &st));
    assert_int_equal(st.expired, 1);
    assert_int_equal(st.depth, 1);
    // bounded output: one at a time
    assert_int_equal(fairq_expire(q, 30 * S_MS, out, 1), 1);
    assert_ptr_equal(out[0], c);
    assert_int_equal(fairq_expire(q, 30 * S_MS, out, 8), 0); // b has none
    assert_ptr_equal(fairq_pop(q, 30 * S_MS), b);
    assert_int_equal(fairq_len(q), 0);
    fairq_destroy(&q);
    free(p);
}

static void test_bounds(void **state)
{
    (void)state;
    fairq_config_t cfg = {
        .max_entries = 4, .max_tokens = 1000, .tenant_max_entries = 3, .tenant_max_tokens = 600};
    fairq_t *q = fairq_new(&cfg);
    s_pool_t *p = s_pool();
    fairq_reason_t why;
    assert_int_equal(fairq_push(q, "a", 1, FAIRQ_STANDARD, s_entry(p, 100, 0), 0, &why), 0);
    assert_int_equal(fairq_push(q, "a", 1, FAIRQ_STANDARD, s_entry(p, 100, 0), 0, &why), 0);
    assert_int_equal(fairq_push(q, "a", 1, FAIRQ_BATCH, s_entry(p, 500, 0), 0, &why), IPL_E_RANGE);
    assert_int_equal(why, FAIRQ_TENANT_FULL_TOKENS);
    assert_int_equal(fairq_push(q, "a", 1, FAIRQ_BATCH, s_entry(p, 100, 0), 0, &why), 0);
    assert_int_equal(fairq_push(q, "a", 1, FAIRQ_BATCH, s_entry(p, 10, 0), 0, &why), IPL_E_RANGE);
    assert_int_equal(why, FAIRQ_TENANT_FULL_ENTRIES);
    assert_int_equal(fairq_push(q, "b", 1, FAIRQ_BATCH, s_entry(p, 800, 0), 0, &why), IPL_E_RANGE);
    assert_int_equal(why, FAIRQ_FULL_TOKENS);
    assert_int_equal(fairq_push(q, "b", 1, FAIRQ_BATCH, s_entry(p, 500, 0), 0, &why), 0);
    assert_int_equal(fairq_push(q, "c", 1, FAIRQ_BATCH, s_entry(p, 1, 0), 0, &why), IPL_E_RANGE);
    assert_int_equal(why, FAIRQ_FULL_ENTRIES);
    assert_string_equal(fairq_reason_name(why), "full_entries");
    assert_int_equal(fairq_len(q), 4);
    assert_int_equal(fairq_tokens(q), 800);
    fairq_stats_t st;
    assert_true(fairq_stats(q, "a", -1, &st));
    assert_int_equal(st.refused, 2);
    assert_false(fairq_stats(q, "c", -1, &st)); // a refused tenant is not made
    // a pop makes room
    assert_non_null(fairq_pop(q, 0));
    assert_int_equal(fairq_push(q, "c", 1, FAIRQ_BATCH, s_entry(p, 1, 0), 0, &why), 0);
    // bad input
    assert_int_equal(fairq_push(q, "c", 1, (fairq_class_t)7, s_entry(p, 1, 0), 0, &why),
                     IPL_E_INVAL);
    fairq_destroy(&q);

    // max_flows: idle tenants are forgotten to make room; with every tenant busy, refused.
    fairq_config_t fc = {.max_flows = 2};
    q = fairq_new(&fc);
    p->used = 0;
    fairq_entry_t *a = s_entry(p, 10, 0);
    assert_int_equal(fairq_push(q, "a", 1, FAIRQ_STANDARD, a, 0, &why), 0);
    assert_int_equal(fairq_push(q, "b", 1, FAIRQ_STANDARD, s_entry(p, 10, 0), 0, &why), 0);
    assert_int_equal(fairq_push(q, "c", 1, FAIRQ_STANDARD, s_entry(p, 10, 0), 0, &why),
                     IPL_E_RANGE);
    assert_int_equal(why, FAIRQ_FULL_FLOWS);
    assert_ptr_equal(fairq_pop(q, 0), a); // a is idle now (its popped entry still out)
    assert_int_equal(fairq_push(q, "c", 1, FAIRQ_STANDARD, s_entry(p, 10, 0), 0, &why), 0);
    assert_false(fairq_stats(q, "a", -1, &st));
    // a's entry comes back after a was forgotten: found again by name (b is busy, c too)
    assert_int_equal(fairq_unpop(q, a), IPL_E_RANGE);
    assert_ptr_equal(fairq_pop(q, 0)->item, NULL); // b or c
    assert_int_equal(fairq_unpop(q, a), 0);
    assert_true(fairq_stats(q, "a", -1, &st));
    assert_int_equal(st.depth, 1);
    fairq_destroy(&q);
    free(p);
}

static void test_counter_lift(void **state)
{
    (void)state;
    fairq_t *q = fairq_new(NULL);
    s_pool_t *p = s_pool();
    // b is alone for 100 dispatches (a was seen once, long ago)
    s_push(q, p, "a", 1, FAIRQ_STANDARD, 1000, 0);
    assert_string_equal(fairq_pop(q, 0)->item, "a");
    for (int i = 0; i < 300; i++)
        s_push(q, p, "b", 1, FAIRQ_STANDARD, 1000, 0);
    assert_int_equal(s_pop_tokens(q, 100, "b", NULL, 0), 100000);
    // a comes back with plenty: it shares from now on, it does not get 99 in a row
    for (int i = 0; i < 100; i++)
        s_push(q, p, "a", 1, FAIRQ_STANDARD, 1000, 0);
    uint64_t b = 0, a = s_pop_tokens(q, 40, "a", &b, 0);
    assert_in_range(a, 19000, 21000);
    assert_in_range(b, 19000, 21000);
    fairq_destroy(&q);

    // The same when the queue went empty in between: the virtual time stays where it was.
    q = fairq_new(NULL);
    p->used = 0;
    for (int i = 0; i < 50; i++)
        s_push(q, p, "b", 1, FAIRQ_STANDARD, 1000, 0);
    s_pop_tokens(q, 50, "b", NULL, 0);
    for (int i = 0; i < 50; i++) {
        s_push(q, p, "a", 1, FAIRQ_STANDARD, 1000, 0);
        s_push(q, p, "b", 1, FAIRQ_STANDARD, 1000, 0);
    }
    b = 0;
    a = s_pop_tokens(q, 20, "a", &b, 0);
    assert_in_range(a, 9000, 11000);
    fairq_destroy(&q);
    free(p);
}

static void test_unpop_and_remove(void **state)
{
    (void)state;
    fairq_t *q = fairq_new(NULL);
    s_pool_t *p = s_pool();
    fairq_entry_t *x1 = s_entry(p, 100, 0), *x2 = s_entry(p, 100, 0), *y1 = s_entry(p, 100, 0);
    assert_int_equal(fairq_push(q, "x", 1, FAIRQ_STANDARD, x1, 1 * S_MS, NULL), 0);
    assert_int_equal(fairq_push(q, "x", 1, FAIRQ_STANDARD, x2, 2 * S_MS, NULL), 0);
    assert_int_equal(fairq_push(q, "y", 1, FAIRQ_STANDARD, y1, 3 * S_MS, NULL), 0);
    assert_int_equal(fairq_push(q, "y", 1, FAIRQ_STANDARD, y1, 3 * S_MS, NULL), IPL_E_INVAL);
    assert_ptr_equal(fairq_pop(q, 5 * S_MS), x1);
    assert_int_equal(fairq_unpop(q, x1), 0);
    assert_int_equal(fairq_unpop(q, x1), IPL_E_INVAL); // queued, not popped
    fairq_stats_t st;
    assert_true(fairq_stats(q, "x", FAIRQ_STANDARD, &st));
    assert_int_equal(st.dispatched, 0);
    assert_int_equal(st.depth, 2);
    assert_int_equal(st.counter, 0); // refunded
    // x1 keeps its place (head of x, x still first) and its enqueue time
    assert_ptr_equal(fairq_pop(q, 6 * S_MS), x1);
    assert_int_equal(x1->enqueued_ns, 1 * S_MS);
    assert_true(fairq_stats(q, "x", FAIRQ_STANDARD, &st));
    assert_int_equal(st.wait_total_ns, 5 * S_MS);
    assert_true(fairq_remove(q, y1));
    assert_false(fairq_remove(q, y1));
    assert_false(fairq_remove(q, x1)); // popped
    assert_ptr_equal(fairq_pop(q, 7 * S_MS), x2);
    assert_null(fairq_pop(q, 7 * S_MS));
    assert_int_equal(fairq_tokens(q), 0);
    fairq_destroy(&q);
    free(p);
}

static void test_settle(void **state)
{
    (void)state;
    fairq_t *q = fairq_new(NULL);
    s_pool_t *p = s_pool();
    for (int i = 0; i < 10; i++) {
        s_push(q, p, "a", 1, FAIRQ_STANDARD, 1000, 0);
        s_push(q, p, "b", 1, FAIRQ_STANDARD, 1000, 0);
    }
    assert_string_equal(fairq_pop(q, 0)->item, "a");
    assert_string_equal(fairq_pop(q, 0)->item, "b");
    // a's request took 100 tokens, not 1000: a is owed and goes next, twice
    fairq_settle(q, "a", FAIRQ_STANDARD, 1000, 100);
    fairq_stats_t st;
    assert_true(fairq_stats(q, "a", FAIRQ_STANDARD, &st));
    assert_int_equal(st.counter, 100 * FAIRQ_WEIGHT_SCALE);
    assert_string_equal(fairq_pop(q, 0)->item, "a");
    assert_string_equal(fairq_pop(q, 0)->item, "b");
    // b's took 5000: b pays it back
    fairq_settle(q, "b", FAIRQ_STANDARD, 1000, 5000);
    int b = 0;
    for (int i = 0; i < 5; i++)
        b += !strcmp(fairq_pop(q, 0)->item, "b");
    assert_int_equal(b, 0);
    // never below 0; unknown tenants and classes are ignored
    fairq_settle(q, "a", FAIRQ_STANDARD, 1u << 30, 0);
    assert_true(fairq_stats(q, "a", FAIRQ_STANDARD, &st));
    assert_int_equal(st.counter, 0);
    fairq_settle(q, "nobody", FAIRQ_STANDARD, 1, 2);
    fairq_settle(q, "a", (fairq_class_t)9, 1, 2);
    fairq_destroy(&q);
    free(p);
}

typedef struct {
    int flows;
    size_t depth;
} s_seen_t;

static void s_count_flow(void *arg, const char *tenant, fairq_class_t cls, const fairq_stats_t *st)
{
    s_seen_t *s = arg;
    (void)tenant;
    (void)cls;
    s->flows++;
    s->depth += st->depth;
}

static void test_foreach_and_long_names(void **state)
{
    (void)state;
    fairq_t *q = fairq_new(NULL);
    s_pool_t *p = s_pool();
    char longname[200];
    memset(longname, 'n', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    s_push(q, p, longname, 1, FAIRQ_BATCH, 10, 0);
    s_push(q, p, longname, 1, FAIRQ_INTERACTIVE, 10, 0);
    s_push(q, p, "", 1, FAIRQ_STANDARD, 10, 0);
    s_seen_t seen = {0};
    fairq_foreach(q, s_count_flow, &seen);
    assert_int_equal(seen.flows, 3);
    assert_int_equal(seen.depth, 3);
    fairq_stats_t st;
    assert_true(fairq_stats(q, longname, -1, &st)); // cut to FAIRQ_TENANT_MAX either way
    assert_int_equal(st.depth, 2);
    fairq_destroy(&q);
    free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tokens_not_requests),
        cmocka_unit_test(test_weights),
        cmocka_unit_test(test_priorities_and_reserve),
        cmocka_unit_test(test_deadlines),
        cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_counter_lift),
        cmocka_unit_test(test_unpop_and_remove),
        cmocka_unit_test(test_settle),
        cmocka_unit_test(test_foreach_and_long_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
