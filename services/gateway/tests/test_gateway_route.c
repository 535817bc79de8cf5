/*
 * Unit tests of gateway_route against a fake decider (a ROUTER on inproc, answered by a
 * thread): a question and its answer, and the OBSERVED that goes back on the very connection
 * that asked — sent at once when the socket is idle, queued and sent by the holder when
 * another question holds it, dropped (counted) when the connection is unknown.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <czmq.h>
#include <pthread.h>

#include "gateway_route.h"
#include "ipl_clock.h"
#include "ipl_error.h"
#include "ipl_log.h"

#define S_ENDPOINT "inproc://gateway-route-test"
#define S_MAX_SEEN 64

/* What the fake decider received: the type, the sender's identity, and a req_id. */
typedef struct {
    int type;
    char identity[32];
    size_t identity_len;
    uint64_t req_id;
    double ttft_s;
} s_seen_t;

typedef struct {
    zsock_t *router;
    pthread_t thread;
    atomic_bool stop;
    pthread_mutex_t lock;
    s_seen_t seen[S_MAX_SEEN];
    size_t nseen;
} s_decider_t;

// Answers every ROUTE_REQ but those for model "silent" with a routed ROUTE_REP asking for an
// OBSERVED; records everything.
static void *s_serve(void *arg)
{
    s_decider_t *d = arg;
    void *raw = zsock_resolve(d->router);
    while (!atomic_load(&d->stop)) {
        zmq_pollitem_t item = {raw, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&item, 1, 10) <= 0) continue;
        zmq_msg_t id, body;
        zmq_msg_init(&id);
        zmq_msg_init(&body);
        if (zmq_msg_recv(&id, raw, 0) < 0 || zmq_msg_recv(&body, raw, 0) < 0) {
            zmq_msg_close(&id);
            zmq_msg_close(&body);
            continue;
        }
        ipl_msg_t msg;
        if (ipl_msg_decode(zmq_msg_data(&body), zmq_msg_size(&body), &msg) == IPL_OK) {
            s_seen_t s = {.type = msg.type, .identity_len = zmq_msg_size(&id)};
            if (s.identity_len > sizeof s.identity) s.identity_len = sizeof s.identity;
            memcpy(s.identity, zmq_msg_data(&id), s.identity_len);
            s.req_id =
                msg.type == IPL_MSG_ROUTE_REQ ? msg.u.route_req.req_id : msg.u.observed.req_id;
            s.ttft_s = msg.type == IPL_MSG_OBSERVED ? msg.u.observed.ttft_s : 0;
            pthread_mutex_lock(&d->lock);
            if (d->nseen < S_MAX_SEEN) d->seen[d->nseen++] = s;
            pthread_mutex_unlock(&d->lock);
            if (msg.type == IPL_MSG_ROUTE_REQ && strcmp(msg.u.route_req.model, "silent")) {
                ipl_route_rep_t rep = {.req_id = msg.u.route_req.req_id,
                                       .status = IPL_ROUTE_OK,
                                       .reason = "cache_hit",
                                       .worker = "w0",
                                       .url = "http://w0",
                                       .observe = 1};
                zmq_send(raw, zmq_msg_data(&id), zmq_msg_size(&id), ZMQ_SNDMORE);
                // Not asserted off the test's thread: a lost answer fails the asker.
                (void)ipl_msg_send(raw, IPL_MSG_ROUTE_REP, &rep, 0);
            }
            ipl_msg_clear(&msg);
        }
        zmq_msg_close(&id);
        zmq_msg_close(&body);
    }
    return NULL;
}

static s_decider_t *s_decider_start(void)
{
    static s_decider_t d;
    memset(&d, 0, sizeof d);
    d.router = zsock_new_router(S_ENDPOINT);
    assert_non_null(d.router);
    pthread_mutex_init(&d.lock, NULL);
    assert_int_equal(pthread_create(&d.thread, NULL, s_serve, &d), 0);
    return &d;
}

static void s_decider_stop(s_decider_t *d)
{
    atomic_store(&d->stop, true);
    pthread_join(d->thread, NULL);
    zsock_destroy(&d->router);
    pthread_mutex_destroy(&d->lock);
}

// Waits (at most 3 s) until the fake decider has seen `n` messages; returns the n-th.
static s_seen_t s_wait_seen(s_decider_t *d, size_t n)
{
    for (int i = 0; i < 300; i++) {
        pthread_mutex_lock(&d->lock);
        size_t have = d->nseen;
        s_seen_t s = have >= n ? d->seen[n - 1] : (s_seen_t){0};
        pthread_mutex_unlock(&d->lock);
        if (have >= n) return s;
        zclock_sleep(10);
    }
    fail_msg("the fake decider saw fewer than %zu messages", n);
    return (s_seen_t){0};
}

static void s_same_connection(const s_seen_t *a, const s_seen_t *b)
{
    assert_int_equal(a->identity_len, b->identity_len);
    assert_memory_equal(a->identity, b->identity, a->identity_len);
}

typedef struct {
    gateway_route_t *route;
    int rc;
} s_asker_t;

static void *s_ask_silent(void *arg)
{
    s_asker_t *a = arg;
    ipl_route_req_t req = {.model = "silent", .tenant = "", .strategy = ""};
    ipl_msg_t rep;
    a->rc = gateway_route_ask(a->route, &req, &rep);
    return NULL;
}

static void test_observed_goes_back_on_the_asking_connection(void **state)
{
    (void)state;
    s_decider_t *d = s_decider_start();
    ipl_metrics_t *metrics = ipl_metrics_new();
    gateway_route_t *route = gateway_route_new(S_ENDPOINT, 400, metrics);
    assert_non_null(route);
    ipl_metric_t *sent = ipl_metrics_counter(metrics, "inferplane_gateway_observations_total", "",
                                             "result=\"sent\"");
    ipl_metric_t *dropped = ipl_metrics_counter(metrics, "inferplane_gateway_observations_total",
                                                "", "result=\"dropped\"");

    // A question and its answer; the answer asks for an OBSERVED.
    ipl_route_req_t req = {.model = "m", .tenant = "", .strategy = ""};
    ipl_msg_t rep;
    uint64_t conn = 0;
    assert_int_equal(gateway_route_ask_conn(route, &req, &rep, &conn), IPL_OK);
    assert_int_equal(rep.u.route_rep.req_id, req.req_id);
    assert_int_equal(rep.u.route_rep.observe, 1);
    assert_true(conn > 0);
    ipl_msg_clear(&rep);
    s_seen_t asked = s_wait_seen(d, 1);

    // Idle socket: sent at once, from the same connection.
    ipl_observed_t obs = {
        .req_id = req.req_id, .worker = "w0", .status = 200, .stream = true, .ttft_s = 0.25};
    assert_int_equal(gateway_route_observe(route, conn, &obs), IPL_OK);
    s_seen_t got = s_wait_seen(d, 2);
    assert_int_equal(got.type, IPL_MSG_OBSERVED);
    assert_int_equal(got.req_id, req.req_id);
    assert_true(got.ttft_s == 0.25);
    s_same_connection(&asked, &got);

    // Busy socket: another thread's question holds it (the decider does not answer); the
    // OBSERVED waits on it and goes out when the question gives the socket back.
    s_asker_t asker = {.route = route};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, s_ask_silent, &asker), 0);
    s_seen_t silent = s_wait_seen(d, 3);
    assert_int_equal(silent.type, IPL_MSG_ROUTE_REQ);
    s_same_connection(&asked, &silent); // the pool's one socket
    obs.ttft_s = 0.5;
    assert_int_equal(gateway_route_observe(route, conn, &obs), IPL_OK); // queued
    pthread_join(t, NULL);
    assert_int_equal(asker.rc, IPL_E_TIMEOUT);
    got = s_wait_seen(d, 4);
    assert_int_equal(got.type, IPL_MSG_OBSERVED);
    assert_true(got.ttft_s == 0.5);
    s_same_connection(&asked, &got);
    assert_true(ipl_metric_value(sent) == 2);

    // An unknown connection: dropped and counted.
    assert_int_equal(gateway_route_observe(route, conn + 100, &obs), IPL_E_NOTFOUND);
    assert_true(ipl_metric_value(dropped) == 1);

    gateway_route_stop(route);
    gateway_route_destroy(&route);
    assert_null(route);
    ipl_metrics_destroy(&metrics);
    s_decider_stop(d);
}

int main(void)
{
    ipl_log_set_level(IPL_LOG_OFF);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_observed_goes_back_on_the_asking_connection),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    zsys_shutdown();
    return rc;
}
