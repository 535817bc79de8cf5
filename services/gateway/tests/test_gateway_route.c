/*
 * Unit tests of gateway_route against fake deciders (ROUTERs on inproc, answered by a
 * thread each): a question and its answer, and the OBSERVED that goes back on the very
 * connection that asked — sent at once when the socket is idle, queued and sent by the holder
 * when another question holds it, dropped (counted) when the connection is unknown. Several
 * deciders: one that does not answer, answers NOT_READY or cannot be reached is marked down and
 * the question goes to the next; it is probed again and comes back; with none answering the
 * backup (decider_backup over a policy the test publishes) decides, and /readyz's text says so.
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

/* How a fake decider answers ROUTE_REQs. */
enum { S_ANSWER, S_SILENT, S_NOT_READY };

typedef struct {
    zsock_t *router;
    pthread_t thread;
    atomic_bool stop;
    atomic_int mode;    /* S_ANSWER (but model "silent"), S_SILENT, S_NOT_READY */
    const char *worker; /* the worker it answers with: who answered */
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
            int mode = atomic_load(&d->mode);
            if (msg.type == IPL_MSG_ROUTE_REQ && mode != S_SILENT &&
                strcmp(msg.u.route_req.model, "silent")) {
                ipl_route_rep_t rep = {.req_id = msg.u.route_req.req_id,
                                       .status =
                                           mode == S_NOT_READY ? IPL_ROUTE_NOT_READY : IPL_ROUTE_OK,
                                       .reason = mode == S_NOT_READY ? "not_ready" : "cache_hit",
                                       .worker = (char *)d->worker,
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

static s_decider_t *s_decider_at(const char *endpoint, const char *worker, int mode)
{
    s_decider_t *d = calloc(1, sizeof *d);
    assert_non_null(d);
    d->router = zsock_new_router(endpoint);
    assert_non_null(d->router);
    d->worker = worker;
    atomic_store(&d->mode, mode);
    pthread_mutex_init(&d->lock, NULL);
    assert_int_equal(pthread_create(&d->thread, NULL, s_serve, d), 0);
    return d;
}

static s_decider_t *s_decider_start(void)
{
    return s_decider_at(S_ENDPOINT, "w0", S_ANSWER);
}

static void s_decider_stop(s_decider_t *d)
{
    atomic_store(&d->stop, true);
    pthread_join(d->thread, NULL);
    zsock_destroy(&d->router);
    pthread_mutex_destroy(&d->lock);
    free(d);
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

/* Asks once; the answering worker's name in who[32] ("" when it failed), the rc. */
static int s_ask_who(gateway_route_t *route, char *who, uint64_t *ms, uint64_t *conn)
{
    ipl_route_req_t req = {.model = "m", .tenant = "", .strategy = ""};
    ipl_msg_t rep = {0};
    uint64_t t0 = ipl_mono_ms(), c = 0;
    int rc = gateway_route_ask_conn(route, &req, &rep, &c);
    if (ms) *ms = ipl_mono_ms() - t0;
    if (conn) *conn = c;
    snprintf(who, 32, "%s", rc == 0 && rep.u.route_rep.worker ? rep.u.route_rep.worker : "");
    if (rc == 0) ipl_msg_clear(&rep);
    return rc;
}

static double s_gauge(ipl_metrics_t *m, const char *endpoint)
{
    char labels[128];
    snprintf(labels, sizeof labels, "endpoint=\"%s\"", endpoint);
    return ipl_metric_value(ipl_metrics_gauge(m, "inferplane_gateway_decider_up", "", labels));
}

static void test_endpoint_lists(void **state)
{
    (void)state;
    ipl_metrics_t *m = ipl_metrics_new();
    assert_null(gateway_route_new("", 100, m));
    assert_null(gateway_route_new(" , ", 100, m));
    assert_null(gateway_route_new("a,b,c,d,e,f,g,h,i", 100, m)); /* more than 8 */
    gateway_route_t *r = gateway_route_new("inproc://a, inproc://b", 100, m);
    assert_non_null(r);
    size_t up = 0;
    assert_int_equal(gateway_route_deciders(r, &up), 2);
    assert_int_equal(up, 2);
    char text[256] = "policy version 1";
    assert_true(gateway_route_describe(r, text, sizeof text));
    assert_string_equal(text, "policy version 1"); /* nothing amiss: nothing added */
    assert_true(s_gauge(m, "inproc://b") == 1);
    gateway_route_destroy(&r);
    ipl_metrics_destroy(&m);
}

static void test_failover_to_the_next_decider(void **state)
{
    (void)state;
    s_decider_t *a = s_decider_at("inproc://route-a", "wa", S_SILENT);
    s_decider_t *b = s_decider_at("inproc://route-b", "wb", S_ANSWER);
    ipl_metrics_t *m = ipl_metrics_new();
    gateway_route_t *r = gateway_route_new("inproc://route-a,inproc://route-b", 600, m);
    char who[32];
    uint64_t ms;
    /* Whichever is asked first, b answers; a's silence costs at most its share (300 ms). */
    for (int i = 0; i < 6; i++) {
        assert_int_equal(s_ask_who(r, who, &ms, NULL), 0);
        assert_string_equal(who, "wb");
        assert_true(ms < 550);
    }
    size_t up;
    gateway_route_deciders(r, &up);
    assert_int_equal(up, 1);
    assert_true(s_gauge(m, "inproc://route-a") == 0);
    assert_true(s_gauge(m, "inproc://route-b") == 1);
    char text[512] = "policy version 1";
    assert_true(gateway_route_describe(r, text, sizeof text));
    assert_non_null(strstr(text, "; decider inproc://route-a down "));
    assert_non_null(strstr(text, "(timeout), 1 of 2 answering"));
    /* Down, a is skipped: questions are quick (a probe may wait its 250 ms). */
    int quick = 0;
    for (int i = 0; i < 10; i++) {
        assert_int_equal(s_ask_who(r, who, &ms, NULL), 0);
        quick += ms < 100;
    }
    assert_true(quick >= 8);
    /* a answers again: a probe after the back-off finds it. */
    atomic_store(&a->mode, S_ANSWER);
    bool back = false;
    for (int i = 0; i < 300 && !back; i++) {
        assert_int_equal(s_ask_who(r, who, NULL, NULL), 0);
        back = !strcmp(who, "wa");
        zclock_sleep(10);
    }
    assert_true(back);
    assert_true(s_gauge(m, "inproc://route-a") == 1);
    text[0] = '\0';
    gateway_route_describe(r, text, sizeof text);
    assert_string_equal(text, "");
    assert_true(ipl_metric_value(ipl_metrics_counter(m, "inferplane_gateway_route_failovers_total",
                                                     "", NULL)) >= 1);
    gateway_route_stop(r);
    gateway_route_destroy(&r);
    ipl_metrics_destroy(&m);
    s_decider_stop(a);
    s_decider_stop(b);
}

static void test_not_ready_and_unreachable_go_on(void **state)
{
    (void)state;
    s_decider_t *a = s_decider_at("inproc://route-nr", "wa", S_NOT_READY);
    s_decider_t *b = s_decider_at("inproc://route-ok", "wb", S_ANSWER);
    ipl_metrics_t *m = ipl_metrics_new();
    /* A TCP port nobody listens on: no connection, seen within the connect wait. */
    zsock_t *probe = zsock_new_router("tcp://127.0.0.1:*[60000-]");
    assert_non_null(probe);
    char closed[64];
    snprintf(closed, sizeof closed, "tcp://127.0.0.1:%d",
             zsock_endpoint(probe) ? atoi(strrchr(zsock_endpoint(probe), ':') + 1) : 1);
    zsock_destroy(&probe);
    char list[256];
    snprintf(list, sizeof list, "inproc://route-nr,%s,inproc://route-ok", closed);
    gateway_route_t *r = gateway_route_new(list, 3000, m);
    char who[32];
    uint64_t ms;
    /* every one in turn comes first (round robin); once b has decided, NOT_READY is down */
    for (int i = 0; i < 6; i++) {
        assert_int_equal(s_ask_who(r, who, &ms, NULL), 0);
        assert_string_equal(who, "wb");
        assert_true(ms < 1500); /* not a 1 s share of 3 s waited out */
    }
    char text[512] = "";
    assert_true(gateway_route_describe(r, text, sizeof text));
    assert_non_null(strstr(text, "inproc://route-nr down"));
    assert_non_null(strstr(text, "(not_ready)"));
    assert_non_null(strstr(text, "(unreachable)"));
    assert_non_null(strstr(text, "1 of 3 answering"));
    /* With b gone too and no backup, every decider is still asked: NOT_READY is the answer. */
    atomic_store(&b->mode, S_SILENT);
    zclock_sleep(600);
    ipl_route_req_t req = {.model = "m", .tenant = "", .strategy = ""};
    ipl_msg_t rep = {0};
    int rc = gateway_route_ask(r, &req, &rep);
    assert_true(rc == 0 || rc == IPL_E_TIMEOUT);
    if (rc == 0) {
        assert_int_equal(rep.u.route_rep.status, IPL_ROUTE_NOT_READY);
        ipl_msg_clear(&rep);
    }
    gateway_route_stop(r);
    gateway_route_destroy(&r);
    ipl_metrics_destroy(&m);
    s_decider_stop(a);
    s_decider_stop(b);
}

/* The policy the backup decides with, published on inproc until the view has it. */
static ipl_policy_view_t *s_policy_view(zsock_t **pub_p, const char *endpoint)
{
    zsock_t *pub = *pub_p = zsock_new_pub(endpoint);
    assert_non_null(pub);
    ipl_policy_view_t *view = ipl_policy_view_new(endpoint, "");
    ipl_pool_t pool = {.name = "chat", .model = "m", .strategy = "ttft"};
    ipl_worker_t workers[] = {
        {.name = "w0", .pool = "chat", .model = "m", .url = "http://w0", .block_size = 16},
        {.name = "w1", .pool = "chat", .model = "m", .url = "http://w1", .block_size = 16},
    };
    ipl_policy_t p = {.version = 1,
                      .source = "test",
                      .pools = &pool,
                      .pools_len = 1,
                      .workers = workers,
                      .workers_len = 2};
    for (int i = 0; i < 500 && ipl_policy_view_version(view) != 1; i++) {
        assert_int_equal(ipl_msg_send(zsock_resolve(pub), IPL_MSG_POLICY, &p, 0), 0);
        zclock_sleep(10);
    }
    assert_int_equal(ipl_policy_view_version(view), 1);
    return view;
}

static void test_backup_when_no_decider_answers(void **state)
{
    (void)state;
    s_decider_t *a = s_decider_at("inproc://route-only", "wa", S_SILENT);
    zsock_t *pub;
    ipl_policy_view_t *view = s_policy_view(&pub, "inproc://route-policy-1");
    ipl_metrics_t *m = ipl_metrics_new();
    gateway_route_t *r = gateway_route_new("inproc://route-only", 300, m);
    char text[512] = "";
    assert_false(gateway_route_describe(r, text, sizeof text) && false);
    assert_int_equal(gateway_route_backup(r, view), 0);
    char who[32];
    uint64_t ms, conn;
    /* The first waits the timeout out, then the backup decides. */
    assert_int_equal(s_ask_who(r, who, &ms, &conn), 0);
    assert_true(!strcmp(who, "w0") || !strcmp(who, "w1"));
    assert_int_equal(conn, GATEWAY_ROUTE_BACKUP_CONN);
    assert_true(ms >= 290);
    /* The decider down: the backup at once, spreading by its in-flight counts. */
    char w2[32], w3[32];
    assert_int_equal(s_ask_who(r, w2, &ms, &conn), 0);
    assert_true(ms < 100);
    assert_string_not_equal(who, w2);
    ipl_observed_t obs = {.worker = w2, .status = 200};
    assert_int_equal(gateway_route_observe(r, GATEWAY_ROUTE_BACKUP_CONN, &obs), 0); /* w2 done */
    assert_int_equal(s_ask_who(r, w3, NULL, NULL), 0);
    assert_string_equal(w3, w2);
    assert_true(ipl_metric_value(ipl_metrics_counter(m, "inferplane_gateway_route_backup_total", "",
                                                     NULL)) >= 3);
    assert_true(gateway_route_describe(r, text, sizeof text)); /* still serving: ready */
    assert_non_null(strstr(text, "; degraded: no decider answers (decider inproc://route-only "
                                 "down "));
    assert_non_null(strstr(text, "routing load-only from the gateway's policy (backup)"));
    /* The decider back: a probe finds it, and it decides again. */
    atomic_store(&a->mode, S_ANSWER);
    bool back = false;
    for (int i = 0; i < 300 && !back; i++) {
        assert_int_equal(s_ask_who(r, who, NULL, &conn), 0);
        back = !strcmp(who, "wa") && conn != GATEWAY_ROUTE_BACKUP_CONN;
        zclock_sleep(10);
    }
    assert_true(back);
    text[0] = '\0';
    assert_true(gateway_route_describe(r, text, sizeof text));
    assert_string_equal(text, "");
    gateway_route_stop(r);
    gateway_route_destroy(&r);
    ipl_metrics_destroy(&m);
    ipl_policy_view_destroy(&view);
    zsock_destroy(&pub);
    s_decider_stop(a);
}

static void test_no_backup_no_service(void **state)
{
    (void)state;
    s_decider_t *a = s_decider_at("inproc://route-none", "wa", S_SILENT);
    ipl_metrics_t *m = ipl_metrics_new();
    gateway_route_t *r = gateway_route_new("inproc://route-none", 200, m);
    char who[32];
    assert_int_equal(s_ask_who(r, who, NULL, NULL), IPL_E_TIMEOUT);
    char text[512] = "";
    assert_false(gateway_route_describe(r, text, sizeof text));
    assert_non_null(strstr(text, "no backup: requests fail"));
    /* Still asked (there is nobody else): it answers again, it is up again. */
    atomic_store(&a->mode, S_ANSWER);
    assert_int_equal(s_ask_who(r, who, NULL, NULL), 0);
    assert_string_equal(who, "wa");
    assert_true(gateway_route_describe(r, text, sizeof text));
    gateway_route_stop(r);
    gateway_route_destroy(&r);
    ipl_metrics_destroy(&m);
    s_decider_stop(a);
}

/* A cold start: before any decider has decided, NOT_READY is the answer (not the backup's). */
static void test_cold_start_not_ready_is_the_answer(void **state)
{
    (void)state;
    s_decider_t *a = s_decider_at("inproc://route-cold", "wa", S_NOT_READY);
    zsock_t *pub;
    ipl_policy_view_t *view = s_policy_view(&pub, "inproc://route-policy-2");
    ipl_metrics_t *m = ipl_metrics_new();
    gateway_route_t *r = gateway_route_new("inproc://route-cold", 300, m);
    assert_int_equal(gateway_route_backup(r, view), 0);
    for (int i = 0; i < 3; i++) {
        ipl_route_req_t req = {.model = "m", .tenant = "", .strategy = ""};
        ipl_msg_t rep = {0};
        uint64_t conn = 0;
        assert_int_equal(gateway_route_ask_conn(r, &req, &rep, &conn), 0);
        assert_int_equal(rep.u.route_rep.status, IPL_ROUTE_NOT_READY);
        assert_true(conn != GATEWAY_ROUTE_BACKUP_CONN);
        ipl_msg_clear(&rep);
    }
    size_t up;
    gateway_route_deciders(r, &up);
    assert_int_equal(up, 1); /* not down: starting */
    /* once it has decided, a NOT_READY (a restart) goes to the backup */
    atomic_store(&a->mode, S_ANSWER);
    char who[32];
    uint64_t conn;
    assert_int_equal(s_ask_who(r, who, NULL, &conn), 0);
    assert_string_equal(who, "wa");
    atomic_store(&a->mode, S_NOT_READY);
    assert_int_equal(s_ask_who(r, who, NULL, &conn), 0);
    assert_int_equal(conn, GATEWAY_ROUTE_BACKUP_CONN);
    gateway_route_stop(r);
    gateway_route_destroy(&r);
    ipl_metrics_destroy(&m);
    ipl_policy_view_destroy(&view);
    zsock_destroy(&pub);
    s_decider_stop(a);
}

int main(void)
{
    ipl_log_set_level(IPL_LOG_OFF);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_observed_goes_back_on_the_asking_connection),
        cmocka_unit_test(test_endpoint_lists),
        cmocka_unit_test(test_failover_to_the_next_decider),
        cmocka_unit_test(test_not_ready_and_unreachable_go_on),
        cmocka_unit_test(test_backup_when_no_decider_answers),
        cmocka_unit_test(test_no_backup_no_service),
        cmocka_unit_test(test_cold_start_not_ready_is_the_answer),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    zsys_shutdown();
    return rc;
}
