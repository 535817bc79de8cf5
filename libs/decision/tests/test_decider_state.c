/*
 * Unit tests of decider_state: KV events and load samples applied to the replica, and the
 * remote-input errors it rejects without changing anything.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "decider_state.h"
#include "ipl_error.h"

static uint64_t s_h[4] = {10, 11, 12, 13};

static int s_kv(decider_state_t *st, const char *w, uint64_t op, uint32_t n)
{
    ipl_msg_t m = {.type = IPL_MSG_KV_EVENT};
    m.u.kv_event = (ipl_kv_event_t){.worker = (char *)w, .op = op, .hashes = s_h, .hashes_len = n};
    return decider_state_apply(st, &m, 42);
}

static void test_kv_events_and_loads(void **state)
{
    (void)state;
    decider_state_t *st = decider_state_new();
    assert_int_equal(decider_state_find(st, "w0"), -1);
    assert_null(decider_state_worker(st, 0));
    int n = -1;
    assert_non_null(decider_state_workers(st, &n));
    assert_int_equal(n, 0);
    assert_int_equal(s_kv(st, "w0", IPL_KV_OP_STORED, 4), 0);
    int id = decider_state_find(st, "w0");
    assert_int_equal(id, 0);
    uint32_t prefix[4];
    assert_int_equal(ipl_index_match(decider_state_index(st), s_h, 4, prefix, 4), 4);
    assert_int_equal(s_kv(st, "w0", IPL_KV_OP_REMOVED, 2), 0); // blocks 10, 11
    assert_int_equal(ipl_index_match(decider_state_index(st), s_h, 4, prefix, 4), 0);
    assert_int_equal(ipl_index_worker_blocks(decider_state_index(st), id), 2);
    assert_int_equal(s_kv(st, "w0", IPL_KV_OP_CLEARED, 0), 0);
    assert_int_equal(ipl_index_worker_blocks(decider_state_index(st), id), 0);
    const decider_worker_t *w = decider_state_worker(st, id);
    assert_false(w->has_load);
    assert_int_equal(w->kv_events, 3);
    assert_int_equal(w->updated_ms, 42);

    ipl_msg_t m = {.type = IPL_MSG_LOAD};
    m.u.load = (ipl_load_t){.worker = "w0",
                            .ts_ms = 7,
                            .running = 2,
                            .waiting = 3,
                            .kv_usage = 0.25,
                            .block_size = 16,
                            .num_blocks = 100,
                            .health = IPL_HEALTH_UP,
                            .kv_state = IPL_KV_SYNCING};
    assert_int_equal(decider_state_apply(st, &m, 50), 0);
    assert_true(w->has_load);
    assert_int_equal(w->ts_ms, 7);
    assert_int_equal(w->running, 2);
    assert_int_equal(w->waiting, 3);
    assert_float_equal(w->kv_usage, 0.25, 1e-12);
    assert_int_equal(w->num_blocks, 100);
    assert_int_equal(w->health, IPL_HEALTH_UP);
    assert_int_equal(w->kv_state, IPL_KV_SYNCING);
    // All of them at once: the same workers, by id.
    m.u.load.worker = "w1";
    assert_int_equal(decider_state_apply(st, &m, 60), 0);
    const decider_worker_t *all = decider_state_workers(st, &n);
    assert_int_equal(n, 2);
    assert_ptr_equal(&all[id], w);
    assert_ptr_equal(&all[decider_state_find(st, "w1")], decider_state_worker(st, 1));
    assert_int_equal(all[1].updated_ms, 60);

    decider_state_set_seq(st, 99);
    assert_int_equal(decider_state_seq(st), 99);
    decider_state_destroy(&st);
    assert_null(st);
}

static void test_rejects_bad_messages(void **state)
{
    (void)state;
    decider_state_t *st = decider_state_new();
    assert_int_equal(s_kv(st, "", IPL_KV_OP_STORED, 1), IPL_E_INVAL);
    assert_int_equal(s_kv(st, NULL, IPL_KV_OP_STORED, 1), IPL_E_INVAL);
    assert_int_equal(s_kv(st, "w0", 9, 1), IPL_E_INVAL);
    ipl_msg_t m = {.type = IPL_MSG_LOAD};
    assert_int_equal(decider_state_apply(st, &m, 0), IPL_E_INVAL); // no worker name
    m.type = IPL_MSG_ROUTE_REQ;
    assert_int_equal(decider_state_apply(st, &m, 0), IPL_E_UNKNOWN);
    assert_int_equal(ipl_index_nworkers(decider_state_index(st)), 0); // nothing created
    // More workers than the index holds: refused, the state stays usable.
    char name[16];
    for (int i = 0; i < IPL_INDEX_MAX_WORKERS; i++) {
        snprintf(name, sizeof name, "w%d", i);
        assert_int_equal(s_kv(st, name, IPL_KV_OP_STORED, 1), 0);
    }
    assert_int_equal(s_kv(st, "one-too-many", IPL_KV_OP_STORED, 1), IPL_E_RANGE);
    assert_int_equal(decider_state_find(st, "w5"), 5);
    decider_state_destroy(&st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kv_events_and_loads),
        cmocka_unit_test(test_rejects_bad_messages),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
