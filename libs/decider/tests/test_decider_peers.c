/*
 * Unit tests of decider_peers: a ROUTED published by one replica reaches another over a real
 * PUB/SUB pair (inproc) and lands in the ledger lent to it; own messages are ignored,
 * sequence gaps are counted as lost, malformed frames are dropped, and hashes are capped.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <czmq.h>

#include "decider_ledger.h"
#include "decider_peers.h"
#include "ipl_clock.h"
#include "ipl_error.h"
#include "ipl_log.h"

static int s_drops;
static char s_last_drop[64];

static void s_on_drop(void *arg, const char *reason)
{
    (void)arg;
    s_drops++;
    snprintf(s_last_drop, sizeof s_last_drop, "%s", reason);
}

// Drains `b` until its stats say `received + own` reached `want` (at most 3 s).
static void s_wait(decider_peers_t *b, uint64_t want)
{
    for (int i = 0; i < 300; i++) {
        zmq_pollitem_t item = {decider_peers_socket(b), 0, ZMQ_POLLIN, 0};
        zmq_poll(&item, 1, 10);
        decider_peers_drain(b, 100);
        decider_peers_stats_t st;
        decider_peers_stats(b, &st);
        if (st.received + st.own >= want) return;
    }
    fail_msg("peer messages did not arrive");
}

static void test_routed_reaches_the_other_replica(void **state)
{
    (void)state;
    char err[256];
    const char *a_peers[] = {"inproc://peers-b"};
    const char *b_peers[] = {"inproc://peers-a", "inproc://peers-b"}; // itself too
    decider_ledger_t *ledger = decider_ledger_new(2000), *a_ledger = decider_ledger_new(2000);
    decider_peers_config_t ca = {
        .id = "A", .pub = "inproc://peers-a", .peers = a_peers, .npeers = 1, .ledger = a_ledger};
    decider_peers_config_t cb = {.id = "B",
                                 .pub = "inproc://peers-b",
                                 .peers = b_peers,
                                 .npeers = 2,
                                 .on_drop = s_on_drop,
                                 .ledger = ledger};
    decider_peers_t *a = decider_peers_new(&ca, err, sizeof err);
    assert_non_null(a);
    decider_peers_t *b = decider_peers_new(&cb, err, sizeof err);
    assert_non_null(b);
    assert_string_equal(decider_peers_id(b), "B");
    // PUB/SUB joins late: publish until the first one arrives.
    uint64_t hashes[DECIDER_PEERS_MAX_HASHES + 10];
    for (size_t i = 0; i < sizeof hashes / sizeof hashes[0]; i++)
        hashes[i] = 1000 + i;
    uint64_t wall = ipl_wall_ms();
    decider_peers_stats_t st;
    for (int i = 0; i < 300; i++) {
        assert_int_equal(decider_peers_publish(a, "probe", NULL, 0, 16, 0, 0, wall), IPL_OK);
        zmq_pollitem_t item = {decider_peers_socket(b), 0, ZMQ_POLLIN, 0};
        zmq_poll(&item, 1, 10);
        decider_peers_drain(b, 1000);
        decider_peers_stats(b, &st);
        if (st.received) break;
    }
    assert_true(st.received > 0);
    uint64_t before = st.received;
    decider_ledger_apply_peers(ledger);
    // A real routing: all hashes but the cap, in flight and optimistic in our ledger.
    assert_int_equal(decider_peers_publish(a, "w1", hashes, sizeof hashes / sizeof hashes[0], 16,
                                           20000, 300, wall),
                     IPL_OK);
    s_wait(b, before + 1);
    int w1 = decider_ledger_worker(ledger, "w1");
    assert_int_equal(decider_ledger_inflight(ledger, w1, wall - 1, wall + 1), 1);
    assert_int_equal(decider_ledger_inflight_tokens(ledger, w1, wall - 1, wall + 1), 300);
    uint32_t prefix[8] = {0};
    size_t best = decider_ledger_match(ledger, hashes, sizeof hashes / sizeof hashes[0], prefix, 8,
                                       ipl_mono_ms());
    assert_int_equal(best, DECIDER_PEERS_MAX_HASHES);
    assert_int_equal(prefix[w1], DECIDER_PEERS_MAX_HASHES);
    // B's own ROUTED comes back on its SUB (it lists itself): ignored.
    decider_peers_stats(b, &st);
    uint64_t seen = st.received + st.own;
    for (int i = 0; i < 300 && st.own == 0; i++) {
        assert_int_equal(decider_peers_publish(b, "w2", NULL, 0, 16, 0, 0, wall), IPL_OK);
        zmq_pollitem_t item = {decider_peers_socket(b), 0, ZMQ_POLLIN, 0};
        zmq_poll(&item, 1, 10);
        decider_peers_drain(b, 1000);
        decider_peers_stats(b, &st);
    }
    assert_true(st.own > 0);
    assert_true(st.received + st.own > seen);
    int w2 = decider_ledger_worker(ledger, "w2");
    assert_int_equal(decider_ledger_inflight(ledger, w2, 0, wall + 1), 0);
    assert_int_equal(st.peers_seen, 1);
    assert_int_equal(st.lost, 0);
    decider_peers_stats(a, &st);
    assert_true(st.sent > 1);
    // Each replica's routings land in the ledger lent to the receiving side only: B's holds
    // the probe(s) and w1; A's, whose SUB this test never drains, holds nothing.
    decider_ledger_peer_stats_t ls;
    decider_ledger_peer_stats(ledger, &ls);
    assert_true(ls.posted >= 2);
    decider_ledger_peer_stats(a_ledger, &ls);
    assert_int_equal(ls.posted, 0);
    decider_ledger_destroy(&ledger);
    decider_ledger_destroy(&a_ledger);
    decider_peers_destroy(&a);
    decider_peers_destroy(&b);
    assert_null(b);
}

static void test_gaps_malformed_and_no_sockets(void **state)
{
    (void)state;
    char err[256];
    s_drops = 0;
    const char *peers[] = {"inproc://peers-raw"};
    decider_ledger_t *ledger = decider_ledger_new(2000);
    decider_peers_config_t c = {
        .id = "B", .peers = peers, .npeers = 1, .on_drop = s_on_drop, .ledger = ledger};
    zsock_t *raw = zsock_new_pub("inproc://peers-raw");
    assert_non_null(raw);
    decider_peers_t *b = decider_peers_new(&c, err, sizeof err);
    assert_non_null(b);
    // Sequence numbers straight into decider_peers_receive: 1, 2, 5 → 2 lost; a restart (1).
    ipl_routed_t r = {.decider = "A", .worker = "w", .ts_ms = 1};
    uint64_t seqs[] = {1, 2, 5, 1, 2};
    for (size_t i = 0; i < 5; i++) {
        r.seq = seqs[i];
        assert_int_equal(decider_peers_receive(b, &r, 10, 0), IPL_OK);
    }
    decider_peers_stats_t st;
    decider_peers_stats(b, &st);
    assert_int_equal(st.lost, 2);
    assert_int_equal(st.received, 5);
    int w = decider_ledger_worker(ledger, "w"); // all five in flight in the ledger lent
    assert_int_equal(decider_ledger_inflight(ledger, w, 0, 10), 5);
    r.worker = "";
    assert_int_equal(decider_peers_receive(b, &r, 10, 0), IPL_E_INVAL);
    r.worker = "w";
    r.decider = "B";
    assert_int_equal(decider_peers_receive(b, &r, 10, 0), 1);
    // Garbage and a wrong message type on the SUB: dropped with a reason, never fatal.
    for (int i = 0; i < 300 && s_drops < 2; i++) {
        zstr_send(raw, "not msgpack");
        ipl_snapshot_req_t q = {0};
        ipl_msg_send(zsock_resolve(raw), IPL_MSG_SNAPSHOT_REQ, &q, 0);
        zmq_pollitem_t item = {decider_peers_socket(b), 0, ZMQ_POLLIN, 0};
        zmq_poll(&item, 1, 10);
        decider_peers_drain(b, 1000);
    }
    assert_true(s_drops >= 2);
    decider_peers_destroy(&b);
    decider_ledger_destroy(&ledger);
    zsock_destroy(&raw);
    // No PUB and no peers: publishing is a no-op, there is nothing to poll.
    decider_peers_config_t none = {.id = "C"};
    decider_peers_t *cpeers = decider_peers_new(&none, err, sizeof err);
    assert_non_null(cpeers);
    assert_null(decider_peers_socket(cpeers));
    assert_int_equal(decider_peers_publish(cpeers, "w", NULL, 0, 16, 0, 0, 1), IPL_OK);
    decider_peers_drain(cpeers, 10);
    decider_peers_destroy(&cpeers);
    // Peers without a ledger to apply their routings to: refused.
    decider_peers_config_t orphan = {.id = "E", .peers = peers, .npeers = 1};
    assert_null(decider_peers_new(&orphan, err, sizeof err));
    assert_non_null(strstr(err, "ledger"));
    // A PUB endpoint that cannot be bound: a message naming it.
    decider_peers_config_t bad = {.id = "D", .pub = "nonsense://x"};
    assert_null(decider_peers_new(&bad, err, sizeof err));
    assert_non_null(strstr(err, "--peer-pub"));
}

int main(void)
{
    ipl_log_set_level(IPL_LOG_OFF);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_routed_reaches_the_other_replica),
        cmocka_unit_test(test_gaps_malformed_and_no_sockets),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    zsys_shutdown();
    return rc;
}
