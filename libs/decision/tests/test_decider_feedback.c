/*
 * Unit tests of decider_feedback: decisions remembered and taken back by (connection, req_id),
 * the time limit, the fixed capacity (the oldest goes first, counted), and the name limit.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "decider_feedback.h"
#include "ipl_error.h"

static const decider_features_t s_x = {
    .queued = 2, .queued_tokens = 300, .running = 4, .uncached_tokens = 120};

static void test_remember_and_take(void **state)
{
    (void)state;
    decider_feedback_t *f = decider_feedback_new(100, 60000);
    assert_non_null(f);
    assert_int_equal(decider_feedback_capacity(f), 128);
    assert_int_equal(decider_feedback_window_ms(f), 60000);
    char set[16] = "sims", worker[16] = "w1"; // copied: the caller's buffers may change
    assert_int_equal(decider_feedback_remember(f, 7, 42, set, worker, &s_x, 1000), IPL_OK);
    set[0] = worker[0] = 'X';
    // The same req_id on another connection is another decision (req_ids are per gateway).
    decider_features_t y = s_x;
    y.queued = 9;
    assert_int_equal(decider_feedback_remember(f, 8, 42, "other", "w2", &y, 1000), IPL_OK);
    decider_feedback_entry_t e;
    assert_int_equal(decider_feedback_take(f, 7, 42, 1500, &e), IPL_OK);
    assert_string_equal(e.set, "sims");
    assert_string_equal(e.worker, "w1");
    assert_memory_equal(&e.x, &s_x, sizeof s_x);
    assert_int_equal(e.age_ms, 500);
    // Taken once only.
    assert_int_equal(decider_feedback_take(f, 7, 42, 1500, &e), IPL_E_NOTFOUND);
    assert_int_equal(decider_feedback_take(f, 7, 43, 1500, &e), IPL_E_NOTFOUND);
    assert_int_equal(decider_feedback_take(f, 8, 42, 1500, &e), IPL_OK);
    assert_string_equal(e.worker, "w2");
    assert_true(e.x.queued == 9);
    // A second decision under one key replaces the first.
    assert_int_equal(decider_feedback_remember(f, 1, 1, "sims", "w1", &s_x, 2000), IPL_OK);
    assert_int_equal(decider_feedback_remember(f, 1, 1, "sims", "w3", &s_x, 2001), IPL_OK);
    assert_int_equal(decider_feedback_take(f, 1, 1, 2002, &e), IPL_OK);
    assert_string_equal(e.worker, "w3");
    decider_feedback_stats_t st;
    decider_feedback_stats(f, &st);
    assert_int_equal(st.remembered, 4);
    assert_int_equal(st.taken, 3);
    assert_int_equal(st.unknown, 2);
    assert_int_equal(st.pending, 0);
    decider_feedback_destroy(&f);
    assert_null(f);
}

static void test_window(void **state)
{
    (void)state;
    decider_feedback_t *f = decider_feedback_new(16, 1000);
    decider_feedback_entry_t e;
    assert_int_equal(decider_feedback_remember(f, 1, 1, "s", "w", &s_x, 5000), IPL_OK);
    assert_int_equal(decider_feedback_remember(f, 1, 2, "s", "w", &s_x, 5000), IPL_OK);
    assert_int_equal(decider_feedback_take(f, 1, 1, 6000, &e), IPL_OK); // exactly the window
    assert_int_equal(decider_feedback_take(f, 1, 2, 6001, &e), IPL_E_TIMEOUT);
    assert_int_equal(decider_feedback_take(f, 1, 2, 6001, &e), IPL_E_NOTFOUND); // forgotten
    // A clock read before the decision's (another thread) is age 0, not a huge age.
    assert_int_equal(decider_feedback_remember(f, 1, 3, "s", "w", &s_x, 7000), IPL_OK);
    assert_int_equal(decider_feedback_take(f, 1, 3, 6999, &e), IPL_OK);
    assert_int_equal(e.age_ms, 0);
    decider_feedback_stats_t st;
    decider_feedback_stats(f, &st);
    assert_int_equal(st.expired, 1);
    assert_int_equal(st.unknown, 1);
    assert_int_equal(st.taken, 2);
    decider_feedback_destroy(&f);
}

// The ring never grows: the 17th decision in a 16-slot map reuses the oldest slot.
static void test_capacity_is_fixed(void **state)
{
    (void)state;
    decider_feedback_t *f = decider_feedback_new(16, 1000);
    decider_feedback_entry_t e;
    for (uint64_t id = 0; id < 20; id++)
        assert_int_equal(decider_feedback_remember(f, 9, id, "s", "w", &s_x, 100), IPL_OK);
    decider_feedback_stats_t st;
    decider_feedback_stats(f, &st);
    assert_int_equal(st.evicted, 4);
    assert_int_equal(st.pending, 16);
    for (uint64_t id = 0; id < 4; id++)
        assert_int_equal(decider_feedback_take(f, 9, id, 200, &e), IPL_E_NOTFOUND);
    for (uint64_t id = 4; id < 20; id++)
        assert_int_equal(decider_feedback_take(f, 9, id, 200, &e), IPL_OK);
    // Slots taken or long expired are reused without counting an eviction.
    for (uint64_t id = 100; id < 116; id++)
        assert_int_equal(decider_feedback_remember(f, 9, id, "s", "w", &s_x, 300), IPL_OK);
    for (uint64_t id = 200; id < 216; id++)
        assert_int_equal(decider_feedback_remember(f, 9, id, "s", "w", &s_x, 5000), IPL_OK);
    decider_feedback_stats(f, &st);
    assert_int_equal(st.evicted, 4);
    assert_int_equal(st.pending, 16);
    assert_int_equal(decider_feedback_take(f, 9, 100, 5000, &e), IPL_E_NOTFOUND);
    assert_int_equal(decider_feedback_take(f, 9, 215, 5000, &e), IPL_OK);
    decider_feedback_destroy(&f);
}

static void test_names_are_bounded(void **state)
{
    (void)state;
    decider_feedback_t *f = decider_feedback_new(16, 1000);
    assert_int_equal(decider_feedback_remember(f, 1, 1, "", "w", &s_x, 0), IPL_E_INVAL);
    assert_int_equal(decider_feedback_remember(f, 1, 1, "s", NULL, &s_x, 0), IPL_E_INVAL);
    char name[32];
    // "s" and DECIDER_FEEDBACK_MAX_NAMES − 1 workers fill the table ...
    for (int i = 0; i < DECIDER_FEEDBACK_MAX_NAMES - 1; i++) {
        snprintf(name, sizeof name, "w%d", i);
        assert_int_equal(decider_feedback_remember(f, 1, (uint64_t)i, "s", name, &s_x, 0), IPL_OK);
    }
    // ... known names still work, a new one does not.
    assert_int_equal(decider_feedback_remember(f, 2, 1, "s", "w7", &s_x, 0), IPL_OK);
    assert_int_equal(decider_feedback_remember(f, 2, 2, "s", "new", &s_x, 0), IPL_E_RANGE);
    decider_feedback_entry_t e;
    assert_int_equal(decider_feedback_take(f, 2, 1, 0, &e), IPL_OK);
    assert_string_equal(e.worker, "w7");
    decider_feedback_stats_t st;
    decider_feedback_stats(f, &st);
    assert_int_equal(st.dropped, 3);
    decider_feedback_destroy(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_remember_and_take),
        cmocka_unit_test(test_window),
        cmocka_unit_test(test_capacity_is_fixed),
        cmocka_unit_test(test_names_are_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
