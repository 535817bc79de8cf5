/*
 * Unit tests for aggregator_server over real loopback sockets: ingest → publication with
 * state sequence numbers, malformed frames counted and dropped, snapshots, heartbeats.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <czmq.h>

#include "aggregator_server.h"
#include "ipl_clock.h"
#include "ipl_error.h"
#include "ipl_log.h"

typedef struct {
    ipl_metrics_t *metrics;
    aggregator_server_t *server;
    zsock_t *push, *sub, *dealer;
} s_fixture_t;

static int s_setup_with(void **state, uint64_t heartbeat_ms)
{
    ipl_log_init("test", IPL_LOG_ERROR);
    s_fixture_t *f = calloc(1, sizeof *f);
    f->metrics = ipl_metrics_new();
    aggregator_config_t cfg = {.pull = "tcp://127.0.0.1:*",
                               .pub = "tcp://127.0.0.1:*",
                               .snapshot = "tcp://127.0.0.1:*",
                               .heartbeat_ms = heartbeat_ms,
                               .stale_ms = 60000};
    char err[256];
    f->server = aggregator_server_new(&cfg, f->metrics, err, sizeof err);
    assert_non_null(f->server);
    f->push = zsock_new_push(aggregator_server_endpoint(f->server, 0));
    f->sub = zsock_new_sub(aggregator_server_endpoint(f->server, 1), "");
    f->dealer = zsock_new_dealer(aggregator_server_endpoint(f->server, 2));
    assert_non_null(f->push);
    assert_non_null(f->sub);
    assert_non_null(f->dealer);
    zsock_set_rcvtimeo(f->sub, 2000);
    zsock_set_rcvtimeo(f->dealer, 2000);
    zclock_sleep(300); /* let the SUB's subscription reach the PUB */
    *state = f;
    return 0;
}

static int s_setup(void **state)
{
    return s_setup_with(state, 60000); /* no heartbeat during the test */
}

static int s_setup_hb(void **state)
{
    return s_setup_with(state, 200);
}

static int s_teardown(void **state)
{
    s_fixture_t *f = *state;
    zsock_destroy(&f->push);
    zsock_destroy(&f->sub);
    zsock_destroy(&f->dealer);
    aggregator_server_destroy(&f->server);
    ipl_metrics_destroy(&f->metrics);
    free(f);
    return 0;
}

/* Runs `rounds` poll rounds of up to 20 ms each. */
static void s_pump(s_fixture_t *f, int rounds)
{
    for (int i = 0; i < rounds; i++)
        aggregator_server_poll(f->server, 20, -1);
}

/* Receives one single-frame message (2 s timeout) and decodes it into *out. */
static int s_recv_msg(zsock_t *sock, ipl_msg_t *out)
{
    zframe_t *frame = zframe_recv(sock);
    if (!frame) return IPL_E_TIMEOUT;
    memset(out, 0, sizeof *out);
    int rc = ipl_msg_decode(zframe_data(frame), zframe_size(frame), out);
    zframe_destroy(&frame);
    return rc;
}

static double s_counter(s_fixture_t *f, const char *name, const char *labels)
{
    return ipl_metric_value(ipl_metrics_counter(f->metrics, name, "", labels));
}

static void test_ingest_publishes_with_seq(void **state)
{
    s_fixture_t *f = *state;
    uint64_t h[2] = {0xaaa, 0xbbb};
    ipl_kv_event_t ev = {.worker = "w0",
                         .epoch = 1,
                         .src_seq = 5,
                         .op = IPL_KV_OP_STORED,
                         .hashes = h,
                         .hashes_len = 2,
                         .block_size = 16};
    assert_int_equal(ipl_msg_send(zsock_resolve(f->push), IPL_MSG_KV_EVENT, &ev, 0), 0);
    ipl_load_t load = {.worker = "w0", .running = 2, .health = IPL_HEALTH_UP};
    assert_int_equal(ipl_msg_send(zsock_resolve(f->push), IPL_MSG_LOAD, &load, 0), 0);
    s_pump(f, 10);

    ipl_msg_t m;
    assert_int_equal(s_recv_msg(f->sub, &m), 0);
    assert_int_equal(m.type, IPL_MSG_KV_EVENT);
    assert_int_equal(m.u.kv_event.seq, 1);
    assert_string_equal(m.u.kv_event.worker, "w0");
    assert_int_equal(m.u.kv_event.hashes_len, 2);
    assert_true(m.u.kv_event.hashes[1] == 0xbbb);
    ipl_msg_clear(&m);
    assert_int_equal(s_recv_msg(f->sub, &m), 0);
    assert_int_equal(m.type, IPL_MSG_LOAD);
    assert_int_equal(m.u.load.seq, 2);
    assert_int_equal(m.u.load.running, 2);
    ipl_msg_clear(&m);
    assert_int_equal(s_counter(f, "inferplane_aggregator_events_applied_total", "op=\"stored\""),
                     1);
    assert_int_equal(s_counter(f, "inferplane_aggregator_loads_applied_total", NULL), 1);
}

static void test_malformed_frames_dropped(void **state)
{
    s_fixture_t *f = *state;
    /* garbage, a multipart message, a valid message of the wrong type, a bad op */
    zsock_send(f->push, "b", "\xff\x01\x02", (size_t)3);
    zsock_send(f->push, "ss", "a", "b");
    ipl_snapshot_req_t req = {0};
    ipl_msg_send(zsock_resolve(f->push), IPL_MSG_SNAPSHOT_REQ, &req, 0);
    ipl_kv_event_t ev = {.worker = "w0", .op = 42};
    ipl_msg_send(zsock_resolve(f->push), IPL_MSG_KV_EVENT, &ev, 0);
    /* and garbage on the snapshot ROUTER */
    zsock_send(f->dealer, "b", "\x93\x01", (size_t)2);
    s_pump(f, 10);
    double total = 0;
    const char *reasons[] = {"truncated", "wrong_type", "bad_version",    "unknown_type",
                             "invalid",   "multipart",  "trailing_bytes", "out_of_range"};
    for (size_t i = 0; i < sizeof reasons / sizeof reasons[0]; i++) {
        char labels[64];
        snprintf(labels, sizeof labels, "reason=\"%s\"", reasons[i]);
        total += s_counter(f, "inferplane_frames_dropped_total", labels);
    }
    assert_true(total == 5);
    assert_int_equal(s_counter(f, "inferplane_frames_dropped_total", "reason=\"multipart\""), 1);
    assert_int_equal(s_counter(f, "inferplane_frames_dropped_total", "reason=\"unknown_type\""), 1);
    assert_int_equal(s_counter(f, "inferplane_frames_dropped_total", "reason=\"invalid\""), 1);
    assert_int_equal(aggregator_state_seq(aggregator_server_state(f->server)), 0);
}

static void test_snapshot(void **state)
{
    s_fixture_t *f = *state;
    uint64_t h[3] = {1, 2, 3};
    ipl_kv_event_t ev = {.worker = "w0", .op = IPL_KV_OP_STORED, .hashes = h, .hashes_len = 3};
    ipl_msg_send(zsock_resolve(f->push), IPL_MSG_KV_EVENT, &ev, 0);
    ev.worker = "w1";
    ev.hashes_len = 1;
    ipl_msg_send(zsock_resolve(f->push), IPL_MSG_KV_EVENT, &ev, 0);
    s_pump(f, 10);
    ipl_snapshot_req_t req = {0};
    assert_int_equal(ipl_msg_send(zsock_resolve(f->dealer), IPL_MSG_SNAPSHOT_REQ, &req, 0), 0);
    s_pump(f, 10);
    int kv = 0, loads = 0;
    uint64_t hashes = 0;
    ipl_msg_t m;
    for (int i = 0; i < 10; i++) {
        assert_int_equal(s_recv_msg(f->dealer, &m), 0);
        if (m.type == IPL_MSG_SNAPSHOT_END) {
            assert_int_equal(m.u.snapshot_end.seq, 2);
            assert_int_equal(m.u.snapshot_end.workers, 2);
            assert_int_equal(m.u.snapshot_end.blocks, 4);
            ipl_msg_clear(&m);
            break;
        }
        if (m.type == IPL_MSG_KV_EVENT) {
            kv++;
            hashes += m.u.kv_event.hashes_len;
            assert_int_equal(m.u.kv_event.seq, 2);
        } else {
            assert_int_equal(m.type, IPL_MSG_LOAD);
            loads++;
        }
        ipl_msg_clear(&m);
    }
    assert_int_equal(kv, 2);
    assert_int_equal(loads, 2);
    assert_int_equal(hashes, 4);
    assert_int_equal(s_counter(f, "inferplane_aggregator_snapshots_total", NULL), 1);
}

static void test_heartbeat(void **state)
{
    s_fixture_t *f = *state;
    ipl_load_t load = {.worker = "w0", .health = IPL_HEALTH_UP};
    ipl_msg_send(zsock_resolve(f->push), IPL_MSG_LOAD, &load, 0);
    /* run the loop for ~500 ms: at least two heartbeats at 200 ms */
    uint64_t until = ipl_mono_ms() + 500;
    while (ipl_mono_ms() < until)
        aggregator_server_poll(f->server, 50, -1);
    uint64_t last = 0;
    int n = 0;
    ipl_msg_t m;
    zsock_set_rcvtimeo(f->sub, 100);
    while (n < 10 && s_recv_msg(f->sub, &m) == 0) {
        assert_int_equal(m.type, IPL_MSG_LOAD);
        assert_true(m.u.load.seq > last); /* strictly increasing */
        last = m.u.load.seq;
        n++;
        ipl_msg_clear(&m);
    }
    assert_true(n >= 3); /* the LOAD itself, then heartbeats */
    assert_true(s_counter(f, "inferplane_aggregator_heartbeats_total", NULL) >= 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_ingest_publishes_with_seq, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_malformed_frames_dropped, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_snapshot, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_heartbeat, s_setup_hb, s_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
