/*
 * Unit tests of decider_server's --listen: one ROUTER bound to every endpoint of a
 * comma-separated list, each answering ROUTE_REQs on its own connections (here two ipc://
 * endpoints, so that no TCP port is needed), and errors that name the endpoint. The server has
 * no policy service or aggregator (endpoints nobody binds), so it answers NOT_READY.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <pthread.h>
#include <zmq.h>

#include "decider_server.h"
#include "ipl_proto.h"
#include "ipl_signal.h"

static char s_eps[6][96]; // two listen endpoints, four nobody binds (policy, state)

static decider_server_config_t s_config(const char *listen)
{
    for (int i = 0; i < 6; i++)
        snprintf(s_eps[i], sizeof s_eps[i], "ipc:///tmp/ipl-test-decider-server-%ld-%d.sock",
                 (long)getpid(), i);
    decider_server_config_t c = {
        .listen = listen,
        .policy_sub = s_eps[2],
        .policy_req = s_eps[3],
        .state_sub = s_eps[4],
        .state_snapshot = s_eps[5],
        .router = {.default_strategy = "ttft",
                   .prefill_tokens_per_s = 10000,
                   .stale_ms = 1000,
                   .optimistic_ttl_ms = 2000},
        .snapshot_timeout_ms = 1000,
        .max_buffered = 1000,
        .tokenizer = "builtin",
    };
    return c;
}

static void *s_run(void *arg)
{
    decider_server_run(arg);
    return NULL;
}

// One ROUTE_REQ on a new DEALER to `ep`: the status of the ROUTE_REP for req_id, or -1.
static int s_ask(void *ctx, const char *ep, uint64_t req_id)
{
    void *d = zmq_socket(ctx, ZMQ_DEALER);
    int linger = 0, timeout = 5000;
    zmq_setsockopt(d, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(d, ZMQ_RCVTIMEO, &timeout, sizeof timeout);
    assert_int_equal(zmq_connect(d, ep), 0);
    uint64_t hashes[2] = {1, 2};
    ipl_route_req_t rq = {.req_id = req_id,
                          .model = "m",
                          .tenant = "",
                          .hashes = hashes,
                          .hashes_len = 2,
                          .block_size = 16,
                          .strategy = ""};
    assert_int_equal(ipl_msg_send(d, IPL_MSG_ROUTE_REQ, &rq, 0), 0);
    int status = -1;
    zmq_msg_t m;
    zmq_msg_init(&m);
    if (zmq_msg_recv(&m, d, 0) >= 0) {
        ipl_msg_t rep = {0};
        if (ipl_msg_decode(zmq_msg_data(&m), zmq_msg_size(&m), &rep) == 0) {
            if (rep.type == IPL_MSG_ROUTE_REP && rep.u.route_rep.req_id == req_id)
                status = (int)rep.u.route_rep.status;
            ipl_msg_clear(&rep);
        }
    }
    zmq_msg_close(&m);
    zmq_close(d);
    return status;
}

static void test_listens_on_every_endpoint(void **state)
{
    (void)state;
    char listen[256];
    decider_server_config_t c = s_config(""); // names s_eps
    snprintf(listen, sizeof listen, "%s, %s", s_eps[0], s_eps[1]);
    c.listen = listen;
    ipl_metrics_t *metrics = ipl_metrics_new();
    char err[512] = "";
    decider_server_t *server = decider_server_new(&c, metrics, err, sizeof err);
    assert_non_null(server);
    ipl_signal_reset();
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, s_run, server), 0);
    void *ctx = zmq_ctx_new();
    assert_int_equal(s_ask(ctx, s_eps[0], 7), IPL_ROUTE_NOT_READY);
    assert_int_equal(s_ask(ctx, s_eps[1], 8), IPL_ROUTE_NOT_READY);
    ipl_signal_request_stop();
    pthread_join(t, NULL);
    ipl_signal_reset();
    zmq_ctx_term(ctx);
    decider_server_destroy(&server);
    assert_null(server);
    ipl_metrics_destroy(&metrics);
    unlink(s_eps[0] + 6);
    unlink(s_eps[1] + 6);
}

static void test_listen_errors_name_the_endpoint(void **state)
{
    (void)state;
    char listen[256];
    decider_server_config_t c = s_config("");
    snprintf(listen, sizeof listen, "%s,bogus://nowhere", s_eps[0]);
    c.listen = listen;
    ipl_metrics_t *metrics = ipl_metrics_new();
    char err[512] = "";
    assert_null(decider_server_new(&c, metrics, err, sizeof err));
    assert_non_null(strstr(err, "\"bogus://nowhere\""));
    c.listen = "ipc:///tmp/a,ipc:///tmp/b,ipc:///tmp/c,ipc:///tmp/d,ipc:///tmp/e";
    assert_null(decider_server_new(&c, metrics, err, sizeof err));
    assert_non_null(strstr(err, "--listen takes 1 to 4"));
    c.listen = " , ";
    assert_null(decider_server_new(&c, metrics, err, sizeof err));
    assert_non_null(strstr(err, "--listen takes 1 to 4"));
    ipl_metrics_destroy(&metrics);
    unlink(s_eps[0] + 6);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_listens_on_every_endpoint),
        cmocka_unit_test(test_listen_errors_name_the_endpoint),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
