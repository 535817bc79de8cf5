/*
 * Unit tests for aggregator_state: applying KV_EVENT/LOAD, sequence stamping, rejected
 * messages, snapshots (chunking, empty workers, seq), heartbeats (staleness), counts by
 * kv_state and convergence by a full-state resend.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "aggregator_state.h"
#include "ipl_error.h"

static ipl_msg_t s_kv(const char *worker, uint64_t op, uint64_t *hashes, uint32_t n)
{
    ipl_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = IPL_MSG_KV_EVENT;
    m.u.kv_event = (ipl_kv_event_t){.worker = (char *)worker,
                                    .epoch = 7,
                                    .src_seq = 3,
                                    .op = op,
                                    .hashes = hashes,
                                    .hashes_len = n,
                                    .block_size = 16};
    return m;
}

static ipl_msg_t s_load(const char *worker, uint64_t running, uint64_t health)
{
    ipl_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = IPL_MSG_LOAD;
    m.u.load = (ipl_load_t){.worker = (char *)worker,
                            .ts_ms = 1,
                            .running = running,
                            .waiting = 2,
                            .kv_usage = 0.5,
                            .block_size = 16,
                            .num_blocks = 100,
                            .health = health,
                            .kv_state = IPL_KV_EXACT};
    return m;
}

static void test_apply_and_seq(void **state)
{
    (void)state;
    aggregator_state_t *st = aggregator_state_new();
    assert_non_null(st);
    assert_int_equal(aggregator_state_seq(st), 0);
    uint64_t h[3] = {11, 12, 13};
    ipl_msg_t m = s_kv("w0", IPL_KV_OP_STORED, h, 3);
    assert_int_equal(aggregator_state_apply(st, &m, 100), 0);
    assert_int_equal(m.u.kv_event.seq, 1);
    m = s_load("w0", 4, IPL_HEALTH_UP);
    assert_int_equal(aggregator_state_apply(st, &m, 150), 0);
    assert_int_equal(m.u.load.seq, 2);
    m = s_kv("w1", IPL_KV_OP_STORED, h, 2);
    assert_int_equal(aggregator_state_apply(st, &m, 200), 0);
    assert_int_equal(m.u.kv_event.seq, 3);
    assert_int_equal(aggregator_state_nworkers(st), 2);
    assert_int_equal(ipl_index_memberships(aggregator_state_index(st)), 5);

    aggregator_worker_info_t info;
    assert_int_equal(aggregator_state_worker(st, 0, &info), 0);
    assert_string_equal(info.name, "w0");
    assert_int_equal(info.blocks, 3);
    assert_true(info.has_load);
    assert_int_equal(info.load.running, 4);
    assert_int_equal(info.load.seq, 2);
    assert_int_equal(info.epoch, 7);
    assert_int_equal(info.src_seq, 3);
    assert_int_equal(info.kv_events, 1);
    assert_int_equal(info.updated_ms, 150);
    assert_int_equal(info.load_ms, 150);
    assert_int_equal(aggregator_state_worker(st, 1, &info), 0);
    assert_false(info.has_load);
    assert_int_equal(aggregator_state_worker(st, 2, &info), IPL_E_RANGE);

    /* removed, then cleared */
    m = s_kv("w0", IPL_KV_OP_REMOVED, h, 1);
    assert_int_equal(aggregator_state_apply(st, &m, 300), 0);
    assert_int_equal(m.u.kv_event.seq, 4);
    assert_int_equal(ipl_index_worker_blocks(aggregator_state_index(st), 0), 2);
    m = s_kv("w0", IPL_KV_OP_CLEARED, NULL, 0);
    assert_int_equal(aggregator_state_apply(st, &m, 300), 0);
    assert_int_equal(ipl_index_worker_blocks(aggregator_state_index(st), 0), 0);
    assert_int_equal(ipl_index_worker_blocks(aggregator_state_index(st), 1), 2);
    assert_int_equal(aggregator_state_seq(st), 5);
    aggregator_state_destroy(&st);
    assert_null(st);
}

static void test_rejects(void **state)
{
    (void)state;
    aggregator_state_t *st = aggregator_state_new();
    uint64_t h = 1;
    ipl_msg_t m = s_kv("w0", 9, &h, 1);
    assert_int_equal(aggregator_state_apply(st, &m, 1), IPL_E_INVAL);
    m = s_kv("", IPL_KV_OP_STORED, &h, 1);
    assert_int_equal(aggregator_state_apply(st, &m, 1), IPL_E_INVAL);
    m = s_kv(NULL, IPL_KV_OP_STORED, &h, 1);
    assert_int_equal(aggregator_state_apply(st, &m, 1), IPL_E_INVAL);
    m = s_load(NULL, 1, IPL_HEALTH_UP);
    assert_int_equal(aggregator_state_apply(st, &m, 1), IPL_E_INVAL);
    memset(&m, 0, sizeof m);
    m.type = IPL_MSG_SNAPSHOT_REQ;
    assert_int_equal(aggregator_state_apply(st, &m, 1), IPL_E_UNKNOWN);
    assert_int_equal(aggregator_state_seq(st), 0); /* nothing consumed a sequence number */
    assert_int_equal(aggregator_state_nworkers(st), 0);
    /* worker table full */
    char name[16];
    for (int i = 0; i < IPL_INDEX_MAX_WORKERS; i++) {
        snprintf(name, sizeof name, "w%d", i);
        m = s_load(name, 0, IPL_HEALTH_UP);
        assert_int_equal(aggregator_state_apply(st, &m, 1), 0);
    }
    m = s_load("one-more", 0, IPL_HEALTH_UP);
    assert_int_equal(aggregator_state_apply(st, &m, 1), IPL_E_RANGE);
    assert_int_equal(aggregator_state_seq(st), IPL_INDEX_MAX_WORKERS);
    aggregator_state_destroy(&st);
}

/* Records what a snapshot or heartbeat emits. */
typedef struct {
    int kv_msgs, load_msgs;
    uint64_t hashes, sum;
    uint64_t seqs[64];
    char workers[64][16];
    uint64_t healths[64], kv_states[64];
    int stop_at; /* 0: never */
} s_sink_t;

static int s_emit(void *arg, int type, const void *body)
{
    s_sink_t *s = arg;
    int i = s->kv_msgs + s->load_msgs;
    if (type == IPL_MSG_KV_EVENT) {
        const ipl_kv_event_t *ev = body;
        assert_int_equal(ev->op, IPL_KV_OP_STORED);
        assert_true(ev->hashes_len <= 4);
        for (uint32_t k = 0; k < ev->hashes_len; k++)
            s->sum += ev->hashes[k];
        s->hashes += ev->hashes_len;
        s->kv_msgs++;
        if (i < 64) {
            s->seqs[i] = ev->seq;
            snprintf(s->workers[i], 16, "%s", ev->worker);
        }
    } else {
        assert_int_equal(type, IPL_MSG_LOAD);
        const ipl_load_t *l = body;
        s->load_msgs++;
        if (i < 64) {
            s->seqs[i] = l->seq;
            snprintf(s->workers[i], 16, "%s", l->worker);
            s->healths[i] = l->health;
            s->kv_states[i] = l->kv_state;
        }
    }
    return (s->stop_at && i + 1 == s->stop_at) ? 5 : 0;
}

static void test_snapshot(void **state)
{
    (void)state;
    aggregator_state_t *st = aggregator_state_new();
    uint64_t h[10];
    uint64_t sum = 0;
    for (int i = 0; i < 10; i++) {
        h[i] = 1000 + (uint64_t)i;
        sum += h[i];
    }
    ipl_msg_t m = s_kv("a", IPL_KV_OP_STORED, h, 10);
    aggregator_state_apply(st, &m, 1);
    m = s_load("a", 3, IPL_HEALTH_UP);
    aggregator_state_apply(st, &m, 1);
    m = s_load("b", 1, IPL_HEALTH_DOWN); /* a worker with no blocks */
    aggregator_state_apply(st, &m, 1);

    s_sink_t sink = {0};
    ipl_snapshot_end_t end;
    assert_int_equal(aggregator_state_snapshot(st, 4, s_emit, &sink, &end), 0);
    /* a: 3 chunks (4+4+2) + LOAD; b: one empty KV_EVENT + LOAD */
    assert_int_equal(sink.kv_msgs, 4);
    assert_int_equal(sink.load_msgs, 2);
    assert_int_equal(sink.hashes, 10);
    assert_true(sink.sum == sum);
    assert_int_equal(end.seq, 3);
    assert_int_equal(end.workers, 2);
    assert_int_equal(end.blocks, 10);
    for (int i = 0; i < 6; i++)
        assert_int_equal(sink.seqs[i], 3);
    assert_string_equal(sink.workers[0], "a");
    assert_string_equal(sink.workers[3], "a"); /* a's LOAD after its chunks */
    assert_string_equal(sink.workers[4], "b");
    assert_string_equal(sink.workers[5], "b");
    assert_int_equal(sink.healths[5], IPL_HEALTH_DOWN);
    assert_int_equal(aggregator_state_seq(st), 3); /* a snapshot changes nothing */

    /* an emitter error stops the walk and is returned */
    sink = (s_sink_t){.stop_at = 2};
    assert_int_equal(aggregator_state_snapshot(st, 4, s_emit, &sink, &end), 5);
    assert_int_equal(sink.kv_msgs + sink.load_msgs, 2);
    aggregator_state_destroy(&st);
}

static void test_heartbeat(void **state)
{
    (void)state;
    aggregator_state_t *st = aggregator_state_new();
    ipl_msg_t m = s_load("a", 3, IPL_HEALTH_UP);
    aggregator_state_apply(st, &m, 1000);
    m = s_load("b", 1, IPL_HEALTH_UP);
    aggregator_state_apply(st, &m, 3000);
    s_sink_t sink = {0};
    /* at 4500 with stale 2000: a (last heard 1000) is stale, b is not */
    assert_int_equal(aggregator_state_heartbeat(st, 4500, 2000, s_emit, &sink), 0);
    assert_int_equal(sink.load_msgs, 2);
    assert_int_equal(sink.seqs[0], 3);
    assert_int_equal(sink.seqs[1], 4);
    assert_int_equal(sink.healths[0], IPL_HEALTH_UNKNOWN);
    assert_int_equal(sink.kv_states[0], IPL_KV_DEGRADED);
    assert_int_equal(sink.healths[1], IPL_HEALTH_UP);
    assert_int_equal(sink.kv_states[1], IPL_KV_EXACT);
    assert_int_equal(aggregator_state_seq(st), 4);
    /* the heartbeat is state: a snapshot now says the same */
    aggregator_worker_info_t info;
    aggregator_state_worker(st, 0, &info);
    assert_int_equal(info.load.health, IPL_HEALTH_UNKNOWN);
    assert_int_equal(info.load.seq, 3);
    /* a fresh LOAD brings it back */
    m = s_load("a", 3, IPL_HEALTH_UP);
    aggregator_state_apply(st, &m, 4600);
    sink = (s_sink_t){0};
    aggregator_state_heartbeat(st, 4700, 2000, s_emit, &sink);
    assert_int_equal(sink.healths[0], IPL_HEALTH_UP);
    /* an emitter failure does not consume sequence numbers it did not emit */
    uint64_t seq = aggregator_state_seq(st);
    sink = (s_sink_t){.stop_at = 1};
    assert_int_equal(aggregator_state_heartbeat(st, 4800, 2000, s_emit, &sink), 5);
    assert_int_equal(aggregator_state_seq(st), seq);
    aggregator_state_destroy(&st);
}

/* Counts by kv_state; a collector's full-state resend (CLEARED + STORED) converges a state
 * that missed messages to the collector's view. */
static void test_kv_counts_and_resend(void **state)
{
    (void)state;
    aggregator_state_t *st = aggregator_state_new();
    uint64_t h[4] = {1, 2, 3, 4};
    size_t counts[3];
    aggregator_state_kv_counts(st, counts);
    assert_true(counts[0] == 0 && counts[1] == 0 && counts[2] == 0);
    ipl_msg_t m = s_kv("w0", IPL_KV_OP_STORED, h, 3); /* w0 has no LOAD: not counted */
    assert_int_equal(aggregator_state_apply(st, &m, 1), 0);
    const char *names[3] = {"w1", "w2", "w3"};
    uint64_t states[3] = {IPL_KV_DEGRADED, IPL_KV_EXACT, IPL_KV_DEGRADED};
    for (int i = 0; i < 3; i++) {
        m = s_load(names[i], 0, IPL_HEALTH_UP);
        m.u.load.kv_state = states[i];
        assert_int_equal(aggregator_state_apply(st, &m, 1), 0);
    }
    aggregator_state_kv_counts(st, counts);
    assert_int_equal(counts[IPL_KV_EXACT], 1);
    assert_int_equal(counts[IPL_KV_SYNCING], 0);
    assert_int_equal(counts[IPL_KV_DEGRADED], 2);
    /* w0 holds 1,2,3 but the collector holds 2,4 (a REMOVED and a STORED were lost) */
    m = s_kv("w0", IPL_KV_OP_CLEARED, NULL, 0);
    assert_int_equal(aggregator_state_apply(st, &m, 2), 0);
    uint64_t now_held[2] = {2, 4};
    m = s_kv("w0", IPL_KV_OP_STORED, now_held, 2);
    assert_int_equal(aggregator_state_apply(st, &m, 2), 0);
    const ipl_index_t *idx = aggregator_state_index(st);
    assert_int_equal(ipl_index_worker_blocks(idx, 0), 2);
    aggregator_state_destroy(&st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_apply_and_seq),
        cmocka_unit_test(test_rejects),
        cmocka_unit_test(test_snapshot),
        cmocka_unit_test(test_heartbeat),
        cmocka_unit_test(test_kv_counts_and_resend),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
