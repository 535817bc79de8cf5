/*
 * Unit tests of decider_follow against a fake aggregator (a PUB and a ROUTER bound on
 * ephemeral 127.0.0.1 ports, driven by the test): the follower subscribes, then asks for a
 * snapshot, applies it and the deltas after it; a frame that does not decode is dropped and
 * reported with its socket; a gap in the deltas brings a new snapshot request. And a SUB
 * endpoint that cannot be connected fails decider_follow_start.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <unistd.h>
#include <zmq.h>

#include "decider_follow.h"
#include "ipl_error.h"

typedef struct {
    void *ctx, *pub, *router;
    char pub_ep[64], router_ep[64];
    const char *subs[1], *snaps[1];
    zmq_msg_t identity; // of the last snapshot request
    int drops;
    char drop[128]; // "socket reason" of the last one
} s_agg_t;

static void s_on_drop(void *arg, const char *socket, const char *reason)
{
    s_agg_t *a = arg;
    a->drops++;
    snprintf(a->drop, sizeof a->drop, "%s %s", socket, reason);
}

static void *s_bind(s_agg_t *a, int type, char *ep, size_t size)
{
    void *s = zmq_socket(a->ctx, type);
    int linger = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    assert_int_equal(zmq_bind(s, "tcp://127.0.0.1:*"), 0);
    assert_int_equal(zmq_getsockopt(s, ZMQ_LAST_ENDPOINT, ep, &size), 0);
    return s;
}

static void s_agg_open(s_agg_t *a)
{
    memset(a, 0, sizeof *a);
    a->ctx = zmq_ctx_new();
    a->pub = s_bind(a, ZMQ_PUB, a->pub_ep, sizeof a->pub_ep);
    a->router = s_bind(a, ZMQ_ROUTER, a->router_ep, sizeof a->router_ep);
    a->subs[0] = a->pub_ep;
    a->snaps[0] = a->router_ep;
    zmq_msg_init(&a->identity);
}

static void s_agg_close(s_agg_t *a)
{
    zmq_msg_close(&a->identity);
    zmq_close(a->pub);
    zmq_close(a->router);
    zmq_ctx_term(a->ctx);
}

static void s_send(void *sock, int type, const void *body, int flags)
{
    msgpack_sbuffer buf;
    msgpack_sbuffer_init(&buf);
    assert_int_equal(ipl_msg_encode(type, body, &buf), 0);
    assert_int_equal(zmq_send(sock, buf.data, buf.size, flags), (int)buf.size);
    msgpack_sbuffer_destroy(&buf);
}

static void s_publish_load(s_agg_t *a, uint64_t seq)
{
    ipl_load_t l = {.seq = seq, .worker = "w0", .ts_ms = 1, .waiting = seq, .health = 1};
    s_send(a->pub, IPL_MSG_LOAD, &l, 0);
}

/* One snapshot request waiting on the ROUTER: keeps its identity. */
static bool s_snapshot_requested(s_agg_t *a)
{
    zmq_msg_t frame;
    zmq_msg_init(&frame);
    if (zmq_msg_recv(&a->identity, a->router, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&frame);
        return false;
    }
    assert_true(zmq_msg_more(&a->identity));
    assert_true(zmq_msg_recv(&frame, a->router, 0) >= 0);
    ipl_msg_t m = {0};
    assert_int_equal(ipl_msg_decode(zmq_msg_data(&frame), zmq_msg_size(&frame), &m), 0);
    assert_int_equal(m.type, IPL_MSG_SNAPSHOT_REQ);
    ipl_msg_clear(&m);
    zmq_msg_close(&frame);
    return true;
}

/* Answers the last request with one LOAD and SNAPSHOT_END{seq}. */
static void s_answer_snapshot(s_agg_t *a, uint64_t seq)
{
    ipl_load_t l = {.seq = seq, .worker = "w0", .ts_ms = 1, .health = 1};
    ipl_snapshot_end_t end = {.seq = seq, .workers = 1};
    const int types[2] = {IPL_MSG_LOAD, IPL_MSG_SNAPSHOT_END};
    const void *bodies[2] = {&l, &end};
    for (int i = 0; i < 2; i++) {
        assert_true(zmq_send(a->router, zmq_msg_data(&a->identity), zmq_msg_size(&a->identity),
                             ZMQ_SNDMORE) >= 0);
        s_send(a->router, types[i], bodies[i], 0);
    }
}

/* One pass of the decider's loop, without its poll: every socket counts as readable
 * (draining a socket with nothing waiting is a no-op). */
static void s_pass(decider_follow_t *f)
{
    decider_follow_tick(f);
    const bool ready[DECIDER_FOLLOW_NSOCKETS] = {true, true, true};
    decider_follow_serve(f, ready);
    usleep(5000);
}

static decider_sync_stats_t s_stats(decider_follow_t *f)
{
    decider_sync_stats_t st;
    decider_sync_stats(decider_follow_sync(f), &st);
    return st;
}

static void test_follows_snapshot_then_deltas(void **state)
{
    (void)state;
    s_agg_t a;
    s_agg_open(&a);
    decider_follow_config_t c = {.subs = a.subs,
                                 .snaps = a.snaps,
                                 .nsources = 1,
                                 .max_buffered = 1000,
                                 .snapshot_timeout_ms = 5000,
                                 .on_drop = s_on_drop,
                                 .drop_arg = &a};
    decider_follow_t *f = decider_follow_new(&c);
    assert_non_null(f);
    bool quiet = true;
    assert_null(decider_follow_socket(f, DECIDER_FOLLOW_SUB, &quiet));
    assert_false(quiet);
    assert_int_equal(decider_follow_start(f), 0);
    assert_non_null(decider_follow_socket(f, DECIDER_FOLLOW_SUB, &quiet));
    assert_non_null(decider_follow_socket(f, DECIDER_FOLLOW_MONITOR, &quiet));

    // Subscribe first, then request: the request comes once the SUB is connected.
    bool asked = false;
    for (int i = 0; i < 1000 && !asked; i++) {
        s_pass(f);
        asked = s_snapshot_requested(&a);
    }
    assert_true(asked);
    assert_true(decider_follow_connected(f));
    assert_non_null(decider_follow_socket(f, DECIDER_FOLLOW_DEALER, &quiet));
    assert_false(s_stats(f).synced);
    s_answer_snapshot(&a, 5);
    for (int i = 0; i < 1000 && !s_stats(f).synced; i++)
        s_pass(f);
    assert_true(s_stats(f).synced);
    assert_int_equal(s_stats(f).seq, 5);
    decider_sync_stats_t st = s_stats(f);
    assert_true(st.last_applied_ms > 0 && decider_follow_lag_ms(&st) < 5000);
    assert_int_equal(decider_follow_lag_ms(&(decider_sync_stats_t){.last_applied_ms = 0}), 0);

    // The next delta is applied; a frame that does not decode is dropped and reported.
    s_publish_load(&a, 6);
    assert_int_equal(zmq_send(a.pub, "\xc1", 1, 0), 1);
    for (int i = 0; i < 1000 && (s_stats(f).seq != 6 || !a.drops); i++)
        s_pass(f);
    assert_int_equal(s_stats(f).seq, 6);
    assert_int_equal(a.drops, 1);
    assert_non_null(strstr(a.drop, "state_sub "));
    decider_sync_rdlock(decider_follow_sync(f));
    const decider_state_t *replica = decider_sync_state(decider_follow_sync(f));
    assert_non_null(replica);
    assert_int_equal(decider_state_seq(replica), 6);
    decider_sync_unlock(decider_follow_sync(f));

    // A gap: the follower resyncs with a new snapshot request.
    s_publish_load(&a, 9);
    asked = false;
    for (int i = 0; i < 1000 && !asked; i++) {
        s_pass(f);
        asked = s_snapshot_requested(&a);
    }
    assert_true(asked);
    assert_int_equal(s_stats(f).resyncs[DECIDER_RESYNC_GAP], 1);
    s_answer_snapshot(&a, 9);
    for (int i = 0; i < 1000 && s_stats(f).snapshots < 2; i++)
        s_pass(f);
    assert_int_equal(s_stats(f).snapshots, 2);
    assert_int_equal(s_stats(f).seq, 9);

    decider_follow_destroy(&f);
    assert_null(f);
    decider_follow_destroy(&f); // NULL: nothing
    s_agg_close(&a);
}

static void test_start_fails_on_a_bad_endpoint(void **state)
{
    (void)state;
    const char *subs[] = {"bogus://nowhere"}, *snaps[] = {"tcp://127.0.0.1:9"};
    decider_follow_config_t c = {.subs = subs,
                                 .snaps = snaps,
                                 .nsources = 1,
                                 .max_buffered = 10,
                                 .snapshot_timeout_ms = 100};
    decider_follow_t *f = decider_follow_new(&c);
    assert_non_null(f);
    assert_int_equal(decider_follow_start(f), -1);
    bool quiet;
    assert_null(decider_follow_socket(f, DECIDER_FOLLOW_SUB, &quiet));
    decider_follow_destroy(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_follows_snapshot_then_deltas),
        cmocka_unit_test(test_start_fails_on_a_bad_endpoint),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
