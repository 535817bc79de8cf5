/*
 * Unit tests of decider_sync: the Clone pattern's sequences — snapshot plus buffered deltas,
 * live deltas, gaps, a restarted aggregator, overflow, timeout, reconnect, stray messages —
 * and that readers keep the old replica during a resync; aggregator incarnations, and moving
 * to the next aggregator when the one followed goes silent, disconnects or times out.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "decider_sync.h"
#include "ipl_log.h"

static uint64_t s_blocks[3] = {11, 12, 13};

static ipl_msg_t s_load(uint64_t seq, const char *worker, uint64_t waiting)
{
    ipl_msg_t m = {.type = IPL_MSG_LOAD};
    m.u.load = (ipl_load_t){.seq = seq,
                            .worker = (char *)worker,
                            .waiting = waiting,
                            .health = IPL_HEALTH_UP,
                            .ts_ms = 1};
    return m;
}

static ipl_msg_t s_kv(uint64_t seq, const char *worker, uint64_t op)
{
    ipl_msg_t m = {.type = IPL_MSG_KV_EVENT};
    m.u.kv_event = (ipl_kv_event_t){
        .seq = seq, .worker = (char *)worker, .op = op, .hashes = s_blocks, .hashes_len = 3};
    return m;
}

static ipl_msg_t s_end(uint64_t seq)
{
    ipl_msg_t m = {.type = IPL_MSG_SNAPSHOT_END};
    m.u.snapshot_end.seq = seq;
    return m;
}

// The same messages from aggregator incarnation `inc`.
static ipl_msg_t s_inc(ipl_msg_t m, uint64_t inc)
{
    if (m.type == IPL_MSG_LOAD) m.u.load.incarnation = inc;
    if (m.type == IPL_MSG_KV_EVENT) m.u.kv_event.incarnation = inc;
    if (m.type == IPL_MSG_SNAPSHOT_END) m.u.snapshot_end.incarnation = inc;
    return m;
}

static int s_delta(decider_sync_t *s, ipl_msg_t m, uint64_t now)
{
    int rc = decider_sync_delta(s, &m, now);
    assert_int_equal(m.type, 0); // taken
    return rc;
}

static int s_snap(decider_sync_t *s, ipl_msg_t m, uint64_t now)
{
    return decider_sync_snapshot(s, &m, now);
}

// The live replica's seq and w's waiting (-1 if unknown), read under the lock.
static uint64_t s_seq(decider_sync_t *s)
{
    decider_sync_rdlock(s);
    const decider_state_t *st = decider_sync_state(s);
    uint64_t seq = st ? decider_state_seq(st) : UINT64_MAX;
    decider_sync_unlock(s);
    return seq;
}

static long s_waiting(decider_sync_t *s, const char *w)
{
    decider_sync_rdlock(s);
    const decider_state_t *st = decider_sync_state(s);
    const decider_worker_t *wk = st ? decider_state_worker(st, decider_state_find(st, w)) : NULL;
    long v = wk ? (long)wk->waiting : -1;
    decider_sync_unlock(s);
    return v;
}

static size_t s_blocks_of(decider_sync_t *s, const char *w)
{
    decider_sync_rdlock(s);
    const decider_state_t *st = decider_sync_state(s);
    size_t n = ipl_index_worker_blocks(decider_state_index(st), decider_state_find(st, w));
    decider_sync_unlock(s);
    return n;
}

// A synced instance at seq 10 with w0 holding 3 blocks and waiting 1.
static decider_sync_t *s_synced(void)
{
    decider_sync_t *s = decider_sync_new(100, 1000);
    assert_int_equal(decider_sync_tick(s, 0), DECIDER_SYNC_RESYNC); // ask for the first one
    decider_sync_requested(s, 0);
    assert_int_equal(s_snap(s, s_kv(10, "w0", IPL_KV_OP_STORED), 1), DECIDER_SYNC_OK);
    assert_int_equal(s_snap(s, s_load(10, "w0", 1), 1), DECIDER_SYNC_OK);
    assert_int_equal(s_snap(s, s_end(10), 2), DECIDER_SYNC_OK);
    return s;
}

static void test_first_snapshot_with_buffered_deltas(void **state)
{
    (void)state;
    decider_sync_t *s = decider_sync_new(100, 1000);
    assert_int_equal(s_seq(s), UINT64_MAX); // no replica yet
    assert_int_equal(decider_sync_tick(s, 0), DECIDER_SYNC_RESYNC);
    decider_sync_requested(s, 0);
    assert_int_equal(decider_sync_tick(s, 10), DECIDER_SYNC_OK);
    // Deltas arrive while the snapshot (seq 10) is built: 9 is in it, 11 and 12 are not.
    assert_int_equal(s_delta(s, s_load(9, "w0", 9), 1), DECIDER_SYNC_OK);
    assert_int_equal(s_delta(s, s_load(11, "w0", 5), 1), DECIDER_SYNC_OK);
    assert_int_equal(s_snap(s, s_kv(10, "w0", IPL_KV_OP_STORED), 2), DECIDER_SYNC_OK);
    assert_int_equal(s_delta(s, s_load(12, "w1", 7), 2), DECIDER_SYNC_OK);
    assert_int_equal(s_snap(s, s_load(10, "w0", 1), 3), DECIDER_SYNC_OK);
    decider_sync_stats_t st;
    decider_sync_stats(s, &st);
    assert_false(st.synced);
    assert_int_equal(st.buffered, 3);
    assert_int_equal(s_snap(s, s_end(10), 4), DECIDER_SYNC_OK);
    assert_int_equal(s_seq(s), 12);
    assert_int_equal(s_waiting(s, "w0"), 5);
    assert_int_equal(s_waiting(s, "w1"), 7);
    assert_int_equal(s_blocks_of(s, "w0"), 3);
    decider_sync_stats(s, &st);
    assert_true(st.synced);
    assert_false(st.syncing);
    assert_int_equal(st.seq, 12);
    assert_int_equal(st.snapshots, 1);
    assert_int_equal(st.deltas, 2);
    assert_int_equal(st.buffered, 0);
    assert_int_equal(st.resyncs[DECIDER_RESYNC_START], 0);
    decider_sync_destroy(&s);
    assert_null(s);
}

static void test_live_deltas_and_gap(void **state)
{
    (void)state;
    decider_sync_t *s = s_synced();
    assert_int_equal(s_delta(s, s_kv(11, "w0", IPL_KV_OP_REMOVED), 5), DECIDER_SYNC_OK);
    assert_int_equal(s_blocks_of(s, "w0"), 0);
    assert_int_equal(s_delta(s, s_load(12, "w0", 4), 5), DECIDER_SYNC_OK);
    assert_int_equal(s_seq(s), 12);
    // 13 lost: 14 is a gap.
    assert_int_equal(s_delta(s, s_load(14, "w0", 8), 6), DECIDER_SYNC_RESYNC);
    assert_int_equal(decider_sync_last_reason(s), DECIDER_RESYNC_GAP);
    // Readers keep the old replica meanwhile.
    assert_int_equal(s_seq(s), 12);
    assert_int_equal(s_waiting(s, "w0"), 4);
    decider_sync_requested(s, 6);
    assert_int_equal(s_delta(s, s_load(15, "w0", 9), 7), DECIDER_SYNC_OK);
    assert_int_equal(s_snap(s, s_load(13, "w0", 2), 7), DECIDER_SYNC_OK);
    assert_int_equal(s_snap(s, s_end(13), 8), DECIDER_SYNC_OK);
    assert_int_equal(s_seq(s), 15); // 14 (the one that revealed the gap) and 15 applied
    assert_int_equal(s_waiting(s, "w0"), 9);
    assert_int_equal(s_blocks_of(s, "w0"), 0); // the new snapshot has no blocks for w0
    decider_sync_stats_t st;
    decider_sync_stats(s, &st);
    assert_int_equal(st.resyncs[DECIDER_RESYNC_GAP], 1);
    assert_int_equal(st.snapshots, 2);
    decider_sync_destroy(&s);
}

static void test_regressed_seq_is_a_new_aggregator(void **state)
{
    (void)state;
    decider_sync_t *s = s_synced();
    assert_int_equal(s_delta(s, s_load(1, "w9", 0), 5), DECIDER_SYNC_RESYNC);
    assert_int_equal(decider_sync_last_reason(s), DECIDER_RESYNC_REGRESSED);
    assert_string_equal(decider_sync_reason_name(DECIDER_RESYNC_REGRESSED), "seq_regressed");
    decider_sync_requested(s, 5);
    assert_int_equal(s_snap(s, s_end(3), 6), DECIDER_SYNC_OK); // an empty new state
    assert_int_equal(s_seq(s), 3);
    assert_int_equal(s_waiting(s, "w0"), -1);
    decider_sync_destroy(&s);
}

static void test_buffered_deltas_that_do_not_continue_the_snapshot(void **state)
{
    (void)state;
    decider_sync_t *s = s_synced();
    assert_int_equal(s_delta(s, s_load(12, "w0", 0), 5), DECIDER_SYNC_RESYNC); // gap (11)
    decider_sync_requested(s, 5);
    assert_int_equal(s_delta(s, s_load(13, "w0", 0), 5), DECIDER_SYNC_OK);
    // A snapshot at 10 (older than what we buffered): 11 is missing between them.
    assert_int_equal(s_snap(s, s_end(10), 6), DECIDER_SYNC_RESYNC);
    assert_int_equal(decider_sync_last_reason(s), DECIDER_RESYNC_GAP);
    assert_int_equal(s_seq(s), 10); // still the old replica
    decider_sync_destroy(&s);
}

static void test_overflow_timeout_reconnect_and_stray(void **state)
{
    (void)state;
    decider_sync_t *s = decider_sync_new(2, 1000);
    decider_sync_requested(s, 0);
    assert_int_equal(s_delta(s, s_load(1, "w0", 0), 1), DECIDER_SYNC_OK);
    assert_int_equal(s_delta(s, s_load(2, "w0", 0), 1), DECIDER_SYNC_OK);
    assert_int_equal(s_delta(s, s_load(3, "w0", 0), 1), DECIDER_SYNC_RESYNC);
    assert_int_equal(decider_sync_last_reason(s), DECIDER_RESYNC_OVERFLOW);
    decider_sync_destroy(&s);

    s = s_synced();
    assert_int_equal(decider_sync_reset(s, DECIDER_RESYNC_RECONNECT), DECIDER_SYNC_RESYNC);
    assert_int_equal(decider_sync_tick(s, 10), DECIDER_SYNC_RESYNC); // not requested yet
    decider_sync_requested(s, 10);
    assert_int_equal(decider_sync_tick(s, 500), DECIDER_SYNC_OK);
    assert_int_equal(s_snap(s, s_load(20, "w0", 3), 600), DECIDER_SYNC_OK); // progress
    assert_int_equal(decider_sync_tick(s, 1500), DECIDER_SYNC_OK);
    assert_int_equal(decider_sync_tick(s, 1600), DECIDER_SYNC_RESYNC);
    assert_int_equal(decider_sync_last_reason(s), DECIDER_RESYNC_TIMEOUT);
    // A late part of the abandoned snapshot is stray.
    assert_int_equal(s_snap(s, s_end(20), 1700), DECIDER_SYNC_OK);
    decider_sync_stats_t st;
    decider_sync_stats(s, &st);
    assert_int_equal(st.stray, 1);
    assert_int_equal(st.resyncs[DECIDER_RESYNC_RECONNECT], 1);
    assert_int_equal(st.resyncs[DECIDER_RESYNC_TIMEOUT], 1);
    assert_true(st.syncing);
    assert_int_equal(s_seq(s), 10);
    decider_sync_destroy(&s);
}

static void test_bad_messages_are_counted_not_fatal(void **state)
{
    (void)state;
    decider_sync_t *s = s_synced();
    ipl_msg_t bad = s_kv(11, "", IPL_KV_OP_STORED); // no worker name
    assert_int_equal(s_delta(s, bad, 5), DECIDER_SYNC_OK);
    bad = s_kv(12, "w0", 77); // unknown op
    assert_int_equal(s_delta(s, bad, 5), DECIDER_SYNC_OK);
    decider_sync_stats_t st;
    decider_sync_stats(s, &st);
    assert_int_equal(st.apply_errors, 2);
    assert_int_equal(s_seq(s), 12); // the stream still advanced
    decider_sync_destroy(&s);
}

static void test_incarnation_change_resyncs(void **state)
{
    (void)state;
    decider_sync_t *s = s_synced(); // incarnation 0 (an aggregator that predates the field)
    // A restarted aggregator whose seq happens to continue ours.
    assert_int_equal(s_delta(s, s_inc(s_load(11, "w0", 4), 77), 5), DECIDER_SYNC_RESYNC);
    assert_int_equal(decider_sync_last_reason(s), DECIDER_RESYNC_INCARNATION);
    assert_string_equal(decider_sync_reason_name(DECIDER_RESYNC_INCARNATION), "incarnation");
    assert_int_equal(s_waiting(s, "w0"), 1); // not applied to the old replica
    decider_sync_requested(s, 5);
    assert_int_equal(s_snap(s, s_inc(s_load(10, "w0", 2), 77), 6), DECIDER_SYNC_OK);
    assert_int_equal(s_snap(s, s_inc(s_end(10), 77), 6), DECIDER_SYNC_OK);
    // The delta that revealed the restart continues the new snapshot.
    assert_int_equal(s_seq(s), 11);
    assert_int_equal(s_waiting(s, "w0"), 4);
    decider_sync_stats_t st;
    decider_sync_stats(s, &st);
    assert_true(st.incarnation == 77);
    assert_int_equal(st.resyncs[DECIDER_RESYNC_INCARNATION], 1);
    assert_int_equal(s_delta(s, s_inc(s_load(12, "w0", 5), 77), 7), DECIDER_SYNC_OK);
    assert_int_equal(s_seq(s), 12);
    decider_sync_destroy(&s);
}

static void test_buffered_deltas_of_other_incarnations(void **state)
{
    (void)state;
    decider_sync_t *s = s_synced();
    assert_int_equal(decider_sync_reset(s, DECIDER_RESYNC_RECONNECT), DECIDER_SYNC_RESYNC);
    decider_sync_requested(s, 5);
    // The previous life's last deltas, then the new one's: the old ones are dropped.
    assert_int_equal(s_delta(s, s_inc(s_load(30, "w0", 9), 1), 5), DECIDER_SYNC_OK);
    assert_int_equal(s_delta(s, s_inc(s_load(4, "w0", 6), 2), 5), DECIDER_SYNC_OK);
    assert_int_equal(s_snap(s, s_inc(s_end(3), 2), 6), DECIDER_SYNC_OK);
    assert_int_equal(s_seq(s), 4);
    assert_int_equal(s_waiting(s, "w0"), 6);
    // Snapshot from incarnation 2, but a delta of a newer life (3) came after its own:
    // the aggregator restarted again meanwhile. Start over.
    assert_int_equal(decider_sync_reset(s, DECIDER_RESYNC_RECONNECT), DECIDER_SYNC_RESYNC);
    decider_sync_requested(s, 7);
    assert_int_equal(s_delta(s, s_inc(s_load(5, "w0", 1), 2), 7), DECIDER_SYNC_OK);
    assert_int_equal(s_delta(s, s_inc(s_load(1, "w0", 1), 3), 7), DECIDER_SYNC_OK);
    assert_int_equal(s_snap(s, s_inc(s_end(4), 2), 8), DECIDER_SYNC_RESYNC);
    assert_int_equal(decider_sync_last_reason(s), DECIDER_RESYNC_INCARNATION);
    assert_int_equal(s_seq(s), 4); // the replica in use did not change
    decider_sync_destroy(&s);
}

static void test_silence_disconnect_and_timeout_switch_sources(void **state)
{
    (void)state;
    decider_sync_t *s = s_synced(); // synced at t=2, w0 known
    decider_sync_set_sources(s, 2, 1000);
    assert_int_equal(decider_sync_source(s), 0);
    decider_sync_stats_t st;
    decider_sync_stats(s, &st);
    assert_int_equal(st.last_applied_ms, 2);
    assert_int_equal(s_delta(s, s_load(11, "w0", 3), 500), DECIDER_SYNC_OK);
    decider_sync_stats(s, &st);
    assert_int_equal(st.last_applied_ms, 500);
    assert_int_equal(decider_sync_tick(s, 1499), DECIDER_SYNC_OK);
    // Silent for 1000 ms although heartbeats are due: follow the other aggregator.
    assert_int_equal(decider_sync_tick(s, 1500), DECIDER_SYNC_SWITCH);
    assert_int_equal(decider_sync_last_reason(s), DECIDER_RESYNC_SILENT);
    assert_int_equal(decider_sync_source(s), 1);
    assert_int_equal(s_seq(s), 11); // the old replica serves meanwhile
    assert_int_equal(decider_sync_tick(s, 1501), DECIDER_SYNC_RESYNC); // not requested yet
    decider_sync_requested(s, 1600);
    // Its snapshot (its own seq and incarnation) replaces the replica.
    assert_int_equal(s_snap(s, s_inc(s_load(40, "w0", 7), 9), 1700), DECIDER_SYNC_OK);
    assert_int_equal(s_snap(s, s_inc(s_end(40), 9), 1700), DECIDER_SYNC_OK);
    assert_int_equal(s_seq(s), 40);
    assert_int_equal(s_waiting(s, "w0"), 7);
    assert_int_equal(decider_sync_tick(s, 2600), DECIDER_SYNC_OK); // the snapshot was news
    // Disconnected: back to the first one.
    assert_int_equal(decider_sync_fail(s, DECIDER_RESYNC_DISCONNECTED), DECIDER_SYNC_SWITCH);
    assert_int_equal(decider_sync_source(s), 0);
    // A snapshot that times out moves on too, with several sources.
    decider_sync_requested(s, 3000);
    assert_int_equal(decider_sync_tick(s, 3999), DECIDER_SYNC_OK);
    assert_int_equal(decider_sync_tick(s, 4000), DECIDER_SYNC_SWITCH);
    assert_int_equal(decider_sync_last_reason(s), DECIDER_RESYNC_TIMEOUT);
    assert_int_equal(decider_sync_source(s), 1);
    decider_sync_stats(s, &st);
    assert_int_equal(st.switches, 3);
    assert_int_equal(st.source, 1);
    assert_int_equal(st.resyncs[DECIDER_RESYNC_SILENT], 1);
    assert_int_equal(st.resyncs[DECIDER_RESYNC_DISCONNECTED], 1);
    assert_int_equal(st.resyncs[DECIDER_RESYNC_TIMEOUT], 1);
    decider_sync_destroy(&s);
}

static void test_silence_without_workers_proves_nothing(void **state)
{
    (void)state;
    decider_sync_t *s = decider_sync_new(100, 1000);
    decider_sync_set_sources(s, 2, 1000);
    assert_int_equal(decider_sync_tick(s, 0), DECIDER_SYNC_RESYNC);
    decider_sync_requested(s, 0);
    assert_int_equal(s_snap(s, s_end(5), 1), DECIDER_SYNC_OK); // an empty state
    assert_int_equal(decider_sync_tick(s, 100000), DECIDER_SYNC_OK);
    assert_int_equal(decider_sync_source(s), 0);
    // One source: a failure follows the same one again (fresh sockets), no switch counted.
    decider_sync_set_sources(s, 1, 1000);
    assert_int_equal(decider_sync_fail(s, DECIDER_RESYNC_SILENT), DECIDER_SYNC_SWITCH);
    assert_int_equal(decider_sync_source(s), 0);
    decider_sync_stats_t st;
    decider_sync_stats(s, &st);
    assert_int_equal(st.switches, 0);
    decider_sync_destroy(&s);
}

int main(void)
{
    ipl_log_set_level(IPL_LOG_OFF);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_first_snapshot_with_buffered_deltas),
        cmocka_unit_test(test_live_deltas_and_gap),
        cmocka_unit_test(test_regressed_seq_is_a_new_aggregator),
        cmocka_unit_test(test_buffered_deltas_that_do_not_continue_the_snapshot),
        cmocka_unit_test(test_overflow_timeout_reconnect_and_stray),
        cmocka_unit_test(test_bad_messages_are_counted_not_fatal),
        cmocka_unit_test(test_incarnation_change_resyncs),
        cmocka_unit_test(test_buffered_deltas_of_other_incarnations),
        cmocka_unit_test(test_silence_disconnect_and_timeout_switch_sources),
        cmocka_unit_test(test_silence_without_workers_proves_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
