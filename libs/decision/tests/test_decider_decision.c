/*
 * Unit tests of decider_decision: init, reset (keeps the candidate array), clear, and the
 * candidates' notes ("; "-separated, cut at their capacity).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "decider_decision.h"

static void test_init_reset_clear(void **state)
{
    (void)state;
    decider_decision_t d;
    memset(&d, 0x5a, sizeof d);
    decider_decision_init(&d);
    assert_int_equal(d.winner, -1);
    assert_null(d.cands);
    assert_int_equal(d.ncands + d.cap + d.status, 0);
    d.cands = calloc(4, sizeof *d.cands);
    assert_non_null(d.cands);
    decider_candidate_t *cands = d.cands;
    d.cap = 4;
    d.ncands = 3;
    d.winner = 2;
    d.status = IPL_ROUTE_NO_WORKER;
    d.reason = "no_worker";
    strcpy(d.detail, "why");
    decider_decision_reset(&d);
    assert_ptr_equal(d.cands, cands); // kept for the next decision
    assert_int_equal(d.cap, 4);
    assert_int_equal(d.ncands, 0);
    assert_int_equal(d.winner, -1);
    assert_int_equal(d.status, 0);
    assert_null(d.reason);
    assert_string_equal(d.detail, "");
    decider_decision_clear(&d); // frees the array (the sanitizer build checks)
    assert_null(d.cands);
    assert_int_equal(d.cap, 0);
    assert_int_equal(d.winner, -1);
}

static void test_notes(void **state)
{
    (void)state;
    decider_candidate_t c;
    memset(&c, 0, sizeof c);
    decider_candidate_note(&c, "queue %d", 3);
    assert_string_equal(c.note, "queue 3");
    decider_candidate_note(&c, "kv %s", "syncing");
    assert_string_equal(c.note, "queue 3; kv syncing");
    char long_text[400];
    memset(long_text, 'x', sizeof long_text - 1);
    long_text[sizeof long_text - 1] = '\0';
    decider_candidate_note(&c, "%s", long_text); // cut at the capacity
    assert_int_equal(strlen(c.note), sizeof c.note - 1);
    assert_memory_equal(c.note, "queue 3; kv syncing; xx", 23);
    decider_candidate_note(&c, "more"); // full: nothing appended
    assert_int_equal(strlen(c.note), sizeof c.note - 1);
    assert_int_equal(c.note[sizeof c.note - 2], 'x');
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_reset_clear),
        cmocka_unit_test(test_notes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
