/*
 * Unit tests of decider_names: a hit needs the same pointer, the same text and the same id
 * space; long names and negative ids are not memoized.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "decider_names.h"
#include "decider_state.h"
#include "ipl_proto.h"

static void test_hits_need_pointer_text_and_space(void **state)
{
    (void)state;
    static decider_names_t n; // zeroed
    char a[32] = "w1", b[32] = "w1";
    assert_int_equal(decider_names_get(&n, 7, a), -1);
    decider_names_put(&n, 7, a, 3);
    assert_int_equal(decider_names_get(&n, 7, a), 3);
    assert_int_equal(decider_names_get(&n, 8, a), -1); // another id space
    assert_int_equal(decider_names_get(&n, 0, a), -1); // never a space
    assert_int_equal(decider_names_get(&n, 7, b), -1); // same text, another pointer
    // The address reused for another name (a policy update): a miss, not the old id.
    strcpy(a, "w12");
    assert_int_equal(decider_names_get(&n, 7, a), -1);
    strcpy(a, "w");
    assert_int_equal(decider_names_get(&n, 7, a), -1);
    decider_names_put(&n, 7, a, 4);
    assert_int_equal(decider_names_get(&n, 7, a), 4);
    // Not memoized: negative ids, space 0, names of DECIDER_NAMES_TEXT bytes or more.
    decider_names_put(&n, 7, b, -1);
    assert_int_equal(decider_names_get(&n, 7, b), -1);
    decider_names_put(&n, 0, b, 5);
    assert_int_equal(decider_names_get(&n, 0, b), -1);
    char long_name[DECIDER_NAMES_TEXT + 1];
    memset(long_name, 'x', DECIDER_NAMES_TEXT);
    long_name[DECIDER_NAMES_TEXT] = 0;
    decider_names_put(&n, 7, long_name, 6);
    assert_int_equal(decider_names_get(&n, 7, long_name), -1);
    long_name[DECIDER_NAMES_TEXT - 1] = 0; // the longest memoized
    decider_names_put(&n, 7, long_name, 6);
    assert_int_equal(decider_names_get(&n, 7, long_name), 6);
}

static void test_many_names(void **state)
{
    (void)state;
    static decider_names_t n;
    static char names[1024][8];
    for (int i = 0; i < 1024; i++) {
        snprintf(names[i], sizeof names[i], "w%d", i);
        decider_names_put(&n, 1, names[i], i);
    }
    // Slots are shared: every hit is right, and the most recent names mostly hit.
    // (1024 names in 512 slots.)
    int hits = 0;
    for (int i = 0; i < 1024; i++) {
        int id = decider_names_get(&n, 1, names[i]);
        if (id >= 0) {
            assert_int_equal(id, i);
            hits++;
        }
    }
    assert_true(hits >= 256 && hits <= 512);
}

// The policy's names, allocated one after the other: nearly all of them fit at once (three in
// one bucket of two are possible: a handful of misses, whatever the addresses).
static void test_a_pool_of_names_all_hit(void **state)
{
    (void)state;
    static decider_names_t n;
    static char arena[64 * 48];
    char *names[64];
    for (int i = 0; i < 64; i++) {
        names[i] = arena + i * 48;
        snprintf(names[i], 16, "w%d", i);
        decider_names_put(&n, 3, names[i], i);
    }
    int hits = 0;
    for (int i = 0; i < 64; i++) {
        int id = decider_names_get(&n, 3, names[i]);
        if (id < 0) continue;
        assert_int_equal(id, i);
        hits++;
    }
    assert_true(hits >= 58);
}

// Registers worker `name` in state st through a LOAD (ids are handed out in arrival order).
static void s_load(decider_state_t *st, const char *name)
{
    ipl_msg_t m = {.type = IPL_MSG_LOAD, .u.load = {.worker = (char *)name}};
    assert_int_equal(decider_state_apply(st, &m, 1), 0);
}

// decider_state_find's use: two replicas that gave the same name different ids answer each
// with its own, for the same string pointer (a resync builds a new state).
static void test_states_keep_their_own_ids(void **state)
{
    (void)state;
    char w1[] = "w1";
    decider_state_t *a = decider_state_new(), *b = decider_state_new();
    s_load(a, "w0");
    s_load(a, w1);
    s_load(b, w1);
    for (int round = 0; round < 2; round++) { // the second time from the memo
        assert_int_equal(decider_state_find(a, w1), 1);
        assert_int_equal(decider_state_find(b, w1), 0);
        assert_int_equal(decider_state_find(b, "w0"), -1);
    }
    s_load(b, "w0"); // a worker that appears later is found (misses are not memoized)
    assert_int_equal(decider_state_find(b, "w0"), 1);
    decider_state_destroy(&a);
    decider_state_destroy(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_states_keep_their_own_ids),
        cmocka_unit_test(test_a_pool_of_names_all_hit),
        cmocka_unit_test(test_hits_need_pointer_text_and_space),
        cmocka_unit_test(test_many_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
