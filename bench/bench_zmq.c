/*
 * bench_zmq — the transport floor under the decision benchmark: a DEALER → ROUTER → DEALER
 * round trip over TCP loopback between two threads of this process, each with its own libzmq
 * context (and so its own I/O thread, as two processes have), with raw libzmq (one
 * frame each way, as the gateway and the decider exchange ROUTE_REQ / ROUTE_REP), for a tiny
 * message and for frames the size of a 512-block ROUTE_REQ (4.7 KB) and a brief ROUTE_REP
 * (100 B: the winner, as gateways ask). The echo side does no work: what is left is ZeroMQ and
 * the kernel.
 *
 *   zmq_rtt_p50_us_64b, zmq_rtt_p99_us_64b        64 B each way
 *   zmq_rtt_p50_us_route, zmq_rtt_p99_us_route    4,700 B request, 100 B reply
 *   zmq_rtt_p50_us_route_ipc, _p99_us_route_ipc   the same over ipc:// (a Unix socket): the
 *                                                 floor for a gateway on the decider's host
 *   zmq_rtt_p50_us_route_inproc, _p99_...         the same over inproc:// between two threads
 *                                                 of one context (no I/O thread)
 *
 *   build/bench/bench_zmq [--round-trips 20000]
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "bench.h"

typedef struct {
    void *router;
    size_t reply;
} s_echo_t;

/* Answers every [identity, request] with [identity, `reply` bytes] until an empty request. */
static void *s_echo(void *arg)
{
    s_echo_t *e = arg;
    char *reply = calloc(1, e->reply ? e->reply : 1);
    for (;;) {
        zmq_msg_t id, req;
        zmq_msg_init(&id);
        zmq_msg_init(&req);
        if (zmq_msg_recv(&id, e->router, 0) < 0 || zmq_msg_recv(&req, e->router, 0) < 0) break;
        bool stop = zmq_msg_size(&req) == 0;
        zmq_send(e->router, zmq_msg_data(&id), zmq_msg_size(&id), ZMQ_SNDMORE);
        zmq_send(e->router, reply, e->reply, 0);
        zmq_msg_close(&id);
        zmq_msg_close(&req);
        if (stop) break;
    }
    free(reply);
    return NULL;
}

/* `bind`: "tcp://127.0.0.1:" or "ipc://" followed by "*" (libzmq picks the port or a
 * temporary file). */
static void s_run(void *ctx, void *echo_ctx, const char *bind, const char *what, size_t req_size,
                  size_t rep_size, size_t n)
{
    s_echo_t e = {.router = zmq_socket(echo_ctx, ZMQ_ROUTER), .reply = rep_size};
    int zero = 0;
    zmq_setsockopt(e.router, ZMQ_LINGER, &zero, sizeof zero);
    if (zmq_bind(e.router, bind) != 0) BENCH_DIE("bind %s: %s", bind, zmq_strerror(errno));
    char ep[128];
    size_t len = sizeof ep;
    zmq_getsockopt(e.router, ZMQ_LAST_ENDPOINT, ep, &len);
    pthread_t t;
    if (pthread_create(&t, NULL, s_echo, &e) != 0) BENCH_DIE("pthread_create");
    void *dealer = zmq_socket(ctx, ZMQ_DEALER);
    zmq_setsockopt(dealer, ZMQ_LINGER, &zero, sizeof zero);
    if (zmq_connect(dealer, ep) != 0) BENCH_DIE("connect: %s", zmq_strerror(errno));
    char *req = calloc(1, req_size);
    uint64_t *lat = malloc(n * sizeof *lat);
    char *buf = malloc(rep_size + 1);
    for (size_t k = 0; k < n + n / 10; k++) {
        uint64_t a = bench_now_ns();
        zmq_send(dealer, req, req_size, 0);
        if (zmq_recv(dealer, buf, rep_size + 1, 0) < 0) BENCH_DIE("recv");
        if (k >= n / 10) lat[k - n / 10] = bench_now_ns() - a; /* the first tenth: warm-up */
    }
    zmq_send(dealer, "", 0, 0); /* stops the echo thread */
    zmq_recv(dealer, buf, rep_size + 1, 0);
    pthread_join(t, NULL);
    double p50 = (double)bench_quantile(lat, n, 0.5) / 1e3;
    double p99 = (double)bench_quantile(lat, n, 0.99) / 1e3;
    char name[64], note[128];
    snprintf(note, sizeof note, "%s, %zu B request / %zu B reply, %zu round trips",
             !strncmp(bind, "ipc:", 4)      ? "ipc:// (Unix socket)"
             : !strncmp(bind, "inproc:", 7) ? "inproc:// (one context, no I/O thread)"
                                            : "TCP loopback",
             req_size, rep_size, n);
    snprintf(name, sizeof name, "zmq_rtt_p50_us_%s", what);
    bench_figure(name, p50, "us", note);
    snprintf(name, sizeof name, "zmq_rtt_p99_us_%s", what);
    bench_figure(name, p99, "us", note);
    free(buf);
    free(lat);
    free(req);
    zmq_close(dealer);
    zmq_close(e.router);
}

int main(int argc, char **argv)
{
    size_t n = (size_t)bench_arg_int(argc, argv, "round-trips", 20000);
    if (n < 1000) BENCH_DIE("usage: bench_zmq [--round-trips >= 1000]");
    // Two contexts, so each side has its own libzmq I/O thread, as the gateway and the decider
    // (two processes) do: a message crosses both, as a decision's do.
    void *ctx = zmq_ctx_new(), *echo_ctx = zmq_ctx_new();
    s_run(ctx, echo_ctx, "tcp://127.0.0.1:*", "64b", 64, 64, n);
    s_run(ctx, echo_ctx, "tcp://127.0.0.1:*", "route", 4700, 100, n);
    s_run(ctx, echo_ctx, "ipc://*", "route_ipc", 4700, 100, n);
    // inproc:// joins two sockets of one context with no I/O thread: the transport a decider
    // embedded in its client would use (bench_decision's decision_*_inproc).
    s_run(ctx, ctx, "inproc://bench-zmq-route", "route_inproc", 4700, 100, n);
    zmq_ctx_term(ctx);
    zmq_ctx_term(echo_ctx);
    return 0;
}
