/*
 * bench_decision — the decider alone: ROUTE_REQ → ROUTE_REP round trips over ZeroMQ on
 * loopback, against a running policy service + aggregator + decider (tools/run-bench starts
 * them on ephemeral ports with a pool of `--workers` workers, and passes the endpoints).
 *
 *   this process ──PUSH KV_EVENT/LOAD──► aggregator ──PUB──► decider ◄──DEALER ROUTE_REQ── this
 *   (a synthetic collector)                                           ──► ROUTE_REP
 *
 * State: `--memberships` (block, worker) memberships fed through the real aggregator as
 * KV_EVENT STORED messages of 1-32 blocks (the size of vLLM's BlockStored events): the prompt
 * population of bench_world.h with 256 families (512-block prompts, shared prefixes of 32-256
 * blocks, each prompt cached on one or two of its family's 4 affine workers). A LOAD per worker
 * every 100 ms (the collector's scrape period) keeps every worker up and exact, with queues of 0-8
 * running and 0-2 waiting. A local ipl_index mirrors what was sent, so the benchmark waits until
 * the decider's /debug/state shows exactly that many memberships before it measures.
 *
 * Requests: 512-block prompts (8,192 tokens) drawn from the cached population, pre-encoded,
 * strategy of the pool (ttft), brief as the gateway asks them (the reply names the winner,
 * without the 64 candidates' figures).
 *   decision_p50_us, decision_p99_us   one request in flight (closed loop), client-side round
 *                                      trip; p99 = median of 5 rounds' p99 (see bench_index)
 *   decisions_per_s                    `--window` requests in flight for `--seconds`
 *   decisions_per_decider_cpu_s        the same per second of the decider's CPU time
 *                                      (/proc/<pid>/stat), i.e. per decider core
 *
 *   decision_p50_us_ipc, _p99_us_ipc   with --decider-ipc EP (the decider also listening on an
 *                                      ipc:// endpoint): the latency phase again over ipc://,
 *                                      a transport figure beside the TCP one (the target's)
 *   decision_p50_us_inproc, _p99_us_inproc
 *                                      with --embedded: the latency phase against a
 *                                      decider_server running in a thread of this process
 *                                      (following the same aggregator and policy service),
 *                                      over inproc:// — the decider embedded in its client;
 *                                      then _inproc_busy, the same busy-polling 200 us
 *   decision_p50_us_gateway_inproc, _p99_us_gateway_inproc (and _busy)
 *                                      with --embedded: through gateway_route (the gateway's
 *                                      client: socket pool, req_id, encode, decode) to it —
 *                                      what `inferplane-gateway --decider embedded` waits
 *
 *   build/bench/bench_decision --aggregator EP --decider EP --decider-admin URL
 *       [--decider-pid PID] [--workers 64] [--memberships 1000000] [--model sim-model]
 *       [--requests 50000] [--window 32] [--seconds 3] [--suffix NAME] [--decider-ipc EP]
 * (NAME is appended to the figure names.)
 * Worker names are w0 .. w<workers-1>, the pool's.
 */
#include <czmq.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "bench_stack.h"
#include "bench_world.h"
#include "decider_server.h"
#include "gateway/gateway_route.h"
#include "ipl_clock.h"
#include "ipl_error.h"
#include "ipl_index.h"
#include "ipl_metrics.h"
#include "ipl_proto.h"
#include "ipl_signal.h"
#include "ipl_split.h"

#define S_FAMILIES    256u
#define S_BLOCK       16u
#define S_NREQ        1024 /* distinct pre-encoded requests */
#define S_MAX_WORKERS 1024

typedef struct {
    void *ctx;
    const char *aggregator;
    int nworkers;
    char names[S_MAX_WORKERS][16];
    atomic_bool stop;
} s_loads_t;

/* The synthetic collector's scrape loop: a LOAD per worker every 100 ms. */
static void *s_load_thread(void *arg)
{
    s_loads_t *l = arg;
    void *push = bench_socket(l->ctx, ZMQ_PUSH, l->aggregator, false);
    msgpack_sbuffer buf;
    msgpack_sbuffer_init(&buf);
    bench_rng_t rng = bench_rng(99);
    while (!atomic_load(&l->stop)) {
        uint64_t now = ipl_wall_ms();
        for (int w = 0; w < l->nworkers; w++) {
            ipl_load_t load =
                bench_load(l->names[w], bench_range(&rng, 0, 8), bench_range(&rng, 0, 2), now);
            bench_encode(IPL_MSG_LOAD, &load, &buf);
            zmq_send(push, buf.data, buf.size, 0);
        }
        usleep(100000);
    }
    msgpack_sbuffer_destroy(&buf);
    zmq_close(push);
    return NULL;
}

typedef struct {
    void *push;
    msgpack_sbuffer buf;
    ipl_index_t *mirror;
    uint64_t messages;
} s_feeder_t;

typedef struct {
    s_feeder_t *fd;
    const s_loads_t *loads;
} s_feed_t;

/* A piece of a prompt as the KV_EVENT a collector sends (with its parent hint), mirrored. */
static void s_feed_piece(void *arg, int worker, uint64_t prompt, const uint64_t *hashes, uint32_t i,
                         uint32_t n)
{
    s_feed_t *f = arg;
    ipl_kv_event_t ev = bench_world_stored(f->loads->names[worker], prompt, hashes, i, n, S_BLOCK);
    bench_encode(IPL_MSG_KV_EVENT, &ev, &f->fd->buf);
    if (zmq_send(f->fd->push, f->fd->buf.data, f->fd->buf.size, 0) < 0)
        BENCH_DIE("send KV_EVENT: %s", zmq_strerror(zmq_errno()));
    if (ipl_index_add(f->fd->mirror, worker, hashes + i, n) != 0) BENCH_DIE("mirror");
    f->fd->messages++;
}

static uint64_t s_mirrored(void *arg)
{
    return ipl_index_memberships(((s_feed_t *)arg)->fd->mirror);
}

typedef struct {
    double memberships;
    int nworkers;
} s_want_t;

static bool s_state_ready(const cJSON *doc, void *arg)
{
    const s_want_t *want = arg;
    const cJSON *ix = cJSON_GetObjectItemCaseSensitive(doc, "index");
    const cJSON *workers = cJSON_GetObjectItemCaseSensitive(doc, "workers");
    if (bench_json_num(ix, "memberships") != want->memberships || !cJSON_IsArray(workers) ||
        cJSON_GetArraySize(workers) != want->nworkers)
        return false;
    const cJSON *w;
    cJSON_ArrayForEach(w, workers)
    {
        if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(w, "has_load"))) return false;
    }
    return true;
}

typedef struct {
    void *dealer;
    msgpack_sbuffer *reqs;
    uint64_t sent, ok, cache_hits, failed;
    uint64_t reply_bytes, replies_checked;
} s_client_t;

/* Receives one reply; when `check`, decodes it and counts its outcome. */
static void s_recv_reply(s_client_t *c, bool check)
{
    zmq_msg_t m;
    zmq_msg_init(&m);
    if (zmq_msg_recv(&m, c->dealer, 0) < 0) BENCH_DIE("recv: %s", zmq_strerror(zmq_errno()));
    if (check) {
        c->reply_bytes += zmq_msg_size(&m);
        c->replies_checked++;
        ipl_msg_t rep;
        if (ipl_msg_decode(zmq_msg_data(&m), zmq_msg_size(&m), &rep) != 0 ||
            rep.type != IPL_MSG_ROUTE_REP) {
            c->failed++;
        } else {
            if (rep.u.route_rep.status == IPL_ROUTE_OK)
                c->ok++;
            else
                c->failed++;
            if (rep.u.route_rep.reason && !strcmp(rep.u.route_rep.reason, "cache_hit"))
                c->cache_hits++;
            ipl_msg_clear(&rep);
        }
    }
    zmq_msg_close(&m);
}

static void s_send_req(s_client_t *c, size_t k)
{
    const msgpack_sbuffer *b = &c->reqs[k % S_NREQ];
    if (zmq_send(c->dealer, b->data, b->size, 0) < 0)
        BENCH_DIE("send: %s", zmq_strerror(zmq_errno()));
    c->sent++;
}

/* Prints the latency figures decision_p50_us<transport><suffix> and _p99_ of `nreq` round
 * trips in `lat` (ns; sorted here, then freed). */
static void s_report(uint64_t *lat, size_t nreq, int nworkers, double memberships,
                     const char *transport, const char *suffix)
{
    uint64_t p99r[BENCH_ROUNDS];
    double p99 = (double)bench_p99_of_rounds(lat, nreq, p99r) / 1e3;
    double p50 = (double)bench_quantile(lat, nreq, 0.5) / 1e3;
    BENCH_LOG("latency%s: p50 %.1f us; p99 per round %.1f .. %.1f us (median %.1f), over all "
              "%.1f us; p99.9 %.1f us, max %.1f us",
              transport, p50, (double)p99r[0] / 1e3, (double)p99r[BENCH_ROUNDS - 1] / 1e3, p99,
              (double)bench_quantile(lat, nreq, 0.99) / 1e3,
              (double)bench_quantile(lat, nreq, 0.999) / 1e3, (double)lat[nreq - 1] / 1e3);
    char note[256];
    snprintf(note, sizeof note,
             "ZeroMQ %s round trip, 512-block prompt, %d workers, %.0f memberships; p99: median "
             "of %d rounds",
             !*transport                          ? "TCP"
             : !strncmp(transport, "_gateway", 8) ? "inproc:// (gateway_route, the gateway's "
                                                    "client, to the decider embedded)"
             : !strncmp(transport, "_inproc", 7)  ? "inproc:// (the decider embedded)"
                                                  : "ipc://",
             nworkers, memberships, BENCH_ROUNDS);
    char name[128];
    snprintf(name, sizeof name, "decision_p50_us%s%s", transport, suffix);
    bench_figure(name, p50, "us", note);
    snprintf(name, sizeof name, "decision_p99_us%s%s", transport, suffix);
    bench_figure(name, p99, "us", note);
    free(lat);
}

/* The latency phase on client c: 2000 warm-up decisions, then `nreq` timed ones with one in
 * flight (a sample of the answers checked outside the timed part); prints
 * decision_p50_us<transport><suffix> and decision_p99_us<transport><suffix>. */
static void s_latency(s_client_t *c, size_t nreq, int nworkers, double memberships,
                      const char *transport, const char *suffix)
{
    c->failed = 0;
    for (size_t k = 0; k < 2000; k++) { /* warm-up */
        s_send_req(c, k);
        s_recv_reply(c, true);
    }
    if (c->failed) BENCH_DIE("%" PRIu64 " of 2000 warm-up decisions failed", c->failed);
    uint64_t *lat = malloc(nreq * sizeof *lat);
    c->ok = c->cache_hits = c->reply_bytes = c->replies_checked = 0;
    for (size_t k = 0; k < nreq; k++) {
        uint64_t a = bench_now_ns();
        s_send_req(c, k);
        s_recv_reply(c, false);
        lat[k] = bench_now_ns() - a;
        if (k % 16 == 0) { /* check a sample of the answers outside the timed part */
            s_send_req(c, k);
            s_recv_reply(c, true);
        }
    }
    if (c->failed) BENCH_DIE("%" PRIu64 " decisions failed", c->failed);
    BENCH_LOG("checked %" PRIu64 " answers: %" PRIu64 " routed, %" PRIu64 " cache hits; "
              "request %zu bytes, reply %.0f bytes on average",
              c->replies_checked, c->ok, c->cache_hits, c->reqs[0].size,
              (double)c->reply_bytes / (double)c->replies_checked);
    s_report(lat, nreq, nworkers, memberships, transport, suffix);
}

/* The latency phase again through the gateway's own client of the decider (gateway_route:
 * its socket pool, req_id matching, encoding and decoding) to the embedded decider at
 * `endpoint`: what `inferplane-gateway --decider embedded` waits per request. Prints
 * decision_p50_us<transport><suffix> and _p99_ (transport "_gateway_inproc[_busy]"). */
static void s_gateway_latency(const char *endpoint, ipl_metrics_t *metrics, msgpack_sbuffer *reqs,
                              size_t nreq, int nworkers, double memberships, const char *transport,
                              const char *suffix)
{
    gateway_route_t *route = gateway_route_new(endpoint, 1000, metrics);
    if (!route) BENCH_DIE("gateway_route_new");
    static ipl_msg_t msgs[S_NREQ];
    for (size_t k = 0; k < S_NREQ; k++)
        if (ipl_msg_decode(reqs[k].data, reqs[k].size, &msgs[k]) != 0)
            BENCH_DIE("request %zu does not decode", k);
    uint64_t *lat = malloc(nreq * sizeof *lat);
    size_t failed = 0;
    for (size_t k = 0; k < 2000 + nreq; k++) { /* 2000 warm-up, then timed */
        ipl_msg_t rep;
        uint64_t a = bench_now_ns();
        int rc = gateway_route_ask(route, &msgs[k % S_NREQ].u.route_req, &rep);
        uint64_t b = bench_now_ns();
        if (rc != 0) BENCH_DIE("gateway_route_ask: %s", ipl_strerror(rc));
        failed += rep.u.route_rep.status != IPL_ROUTE_OK;
        ipl_msg_clear(&rep);
        if (k >= 2000) lat[k - 2000] = b - a;
    }
    if (failed) BENCH_DIE("%zu decisions failed through gateway_route", failed);
    s_report(lat, nreq, nworkers, memberships, transport, suffix);
    for (size_t k = 0; k < S_NREQ; k++)
        ipl_msg_clear(&msgs[k]);
    gateway_route_stop(route);
    gateway_route_destroy(&route);
}

/* The decider embedded: a decider_server in a thread of this process, following the same
 * policy service and aggregator, answering on inproc:// (what a gateway embedding it would
 * do: no socket, no libzmq I/O thread, the same protocol and code). `eps`: "state_sub,
 * state_snapshot,policy_sub,policy_req"; the server busy-polls `busy_poll_us` (its
 * --busy-poll-us). Prints decision_p50_us<transport> / _p99_us<transport>. */
typedef struct {
    decider_server_t *server;
} s_embedded_t;

static void *s_embedded_run(void *arg)
{
    decider_server_run(((s_embedded_t *)arg)->server);
    return NULL;
}

static void s_embedded(const char *eps, uint64_t busy_poll_us, const char *transport,
                       msgpack_sbuffer *reqs, size_t nreq, int nworkers, double memberships,
                       const char *suffix)
{
    char *part[4] = {0};
    if (ipl_split_dup(eps, part, 4) != 4)
        BENCH_DIE("--embedded: state_sub,state_snapshot,policy_sub,policy_req");
    /* A name per run: a closed ROUTER releases its inproc:// name asynchronously (libzmq's
     * reaper), so binding the same name again at once may fail with EADDRINUSE. */
    char listen[64];
    snprintf(listen, sizeof listen, "inproc://bench-decider%s", transport);
    decider_server_config_t cfg = {.listen = listen,
                                   .state_sub = part[0],
                                   .state_snapshot = part[1],
                                   .policy_sub = part[2],
                                   .policy_req = part[3],
                                   .snapshot_timeout_ms = 5000,
                                   .silence_ms = 3000,
                                   .max_buffered = 1000000,
                                   .id = "bench-embedded",
                                   .tokenizer = "builtin",
                                   .busy_poll_us = busy_poll_us};
    decider_router_config_defaults(&cfg.router);
    ipl_metrics_t *metrics = ipl_metrics_new();
    char err[512];
    s_embedded_t e = {.server = decider_server_new(&cfg, metrics, err, sizeof err)};
    if (!e.server) BENCH_DIE("embedded decider: %s", err);
    pthread_t t;
    if (pthread_create(&t, NULL, s_embedded_run, &e) != 0) BENCH_DIE("pthread_create");
    char detail[256];
    uint64_t until = bench_now_ns() + 60000000000ull;
    while (!decider_server_ready(e.server, detail, sizeof detail)) {
        if (bench_now_ns() > until) BENCH_DIE("embedded decider not ready: %s", detail);
        usleep(50000);
    }
    usleep(300000); /* a load sample of every worker after the snapshot */
    /* czmq's context: inproc:// needs the server's */
    char connect[80];
    snprintf(connect, sizeof connect, ">%s", listen);
    zsock_t *dealer = zsock_new_dealer(connect);
    if (!dealer) BENCH_DIE("inproc DEALER");
    s_client_t c = {.dealer = zsock_resolve(dealer), .reqs = reqs};
    s_latency(&c, nreq, nworkers, memberships, transport, suffix);
    zsock_destroy(&dealer);
    char gateway[64];
    snprintf(gateway, sizeof gateway, "_gateway%s", transport);
    s_gateway_latency(listen, metrics, reqs, nreq, nworkers, memberships, gateway, suffix);
    ipl_signal_request_stop(); /* the server's loop returns within its 100 ms tick */
    pthread_join(t, NULL);
    ipl_signal_reset();
    decider_server_destroy(&e.server);
    ipl_metrics_destroy(&metrics);
    for (int i = 0; i < 4; i++)
        free(part[i]);
}

int main(int argc, char **argv)
{
    const char *aggregator = bench_arg(argc, argv, "aggregator", NULL);
    const char *decider = bench_arg(argc, argv, "decider", NULL);
    const char *admin = bench_arg(argc, argv, "decider-admin", NULL);
    long decider_pid = (long)bench_arg_int(argc, argv, "decider-pid", 0);
    int nworkers = (int)bench_arg_int(argc, argv, "workers", 64);
    uint64_t target = (uint64_t)bench_arg_int(argc, argv, "memberships", 1000000);
    const char *model = bench_arg(argc, argv, "model", "sim-model");
    size_t nreq = (size_t)bench_arg_int(argc, argv, "requests", 50000);
    int window = (int)bench_arg_int(argc, argv, "window", 32);
    double seconds = (double)bench_arg_int(argc, argv, "seconds", 3);
    const char *suffix = bench_arg(argc, argv, "suffix", "");
    const char *decider_ipc = bench_arg(argc, argv, "decider-ipc", NULL);
    const char *embedded = bench_arg(argc, argv, "embedded", NULL);
    if (!aggregator || !decider || !admin || nworkers < 1 || nworkers > S_MAX_WORKERS ||
        nreq < 1000 || window < 1 || seconds < 1)
        BENCH_DIE("usage: bench_decision --aggregator EP --decider EP --decider-admin URL "
                  "[--decider-pid PID] [--workers 1..%d] [--memberships N] [--model NAME] "
                  "[--requests >= 1000] [--window N] [--seconds N] [--suffix NAME] "
                  "[--decider-ipc EP] [--embedded SUB,SNAPSHOT,POLICY_SUB,POLICY_REQ]",
                  S_MAX_WORKERS);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    void *ctx = zmq_ctx_new();

    /* loads first, so that every worker exists and is up */
    static s_loads_t loads;
    loads.ctx = ctx;
    loads.aggregator = aggregator;
    loads.nworkers = nworkers;
    for (int w = 0; w < nworkers; w++)
        snprintf(loads.names[w], sizeof loads.names[w], "w%d", w);
    pthread_t lt;
    if (pthread_create(&lt, NULL, s_load_thread, &loads) != 0) BENCH_DIE("pthread_create");

    /* the state */
    bench_rng_t rng = bench_rng(7);
    static bench_world_t wd;
    bench_world_init(&wd, S_FAMILIES, nworkers, &rng);
    s_feeder_t fd = {.push = bench_socket(ctx, ZMQ_PUSH, aggregator, false),
                     .mirror = ipl_index_new()};
    msgpack_sbuffer_init(&fd.buf);
    for (int w = 0; w < nworkers; w++)
        ipl_index_worker(fd.mirror, loads.names[w]);
    uint64_t cap = target / (BENCH_PROMPT - BENCH_MAX_PREFIX) + S_FAMILIES + 16;
    uint32_t *family = malloc(cap * sizeof *family);
    uint64_t hashes[BENCH_PROMPT];
    uint64_t t0 = bench_now_ns();
    s_feed_t feed = {&fd, &loads};
    uint64_t np = bench_world_fill(&wd, &rng, target, cap, family, s_feed_piece, s_mirrored, &feed);
    s_want_t want = {(double)ipl_index_memberships(fd.mirror), nworkers};
    char url[512];
    snprintf(url, sizeof url, "%s/debug/state", admin);
    if (!bench_wait_json(url, s_state_ready, &want, 120))
        BENCH_DIE("the decider did not reach %.0f memberships and %d loaded workers in 120 s",
                  want.memberships, nworkers);
    BENCH_LOG("state: %" PRIu64 " prompts, %zu blocks, %.0f memberships over %d workers, sent "
              "as %" PRIu64 " KV_EVENTs, at the decider after %.1f s",
              np, ipl_index_blocks(fd.mirror), want.memberships, nworkers, fd.messages,
              (double)(bench_now_ns() - t0) / 1e9);

    /* the requests */
    static msgpack_sbuffer reqs[S_NREQ];
    for (size_t k = 0; k < S_NREQ; k++) {
        uint64_t p = bench_rand(&rng) % np;
        ipl_route_req_t rq = bench_world_request(&wd, family[p], p, k, model, S_BLOCK, hashes);
        msgpack_sbuffer_init(&reqs[k]);
        bench_encode(IPL_MSG_ROUTE_REQ, &rq, &reqs[k]);
    }
    s_client_t c = {.dealer = bench_socket(ctx, ZMQ_DEALER, decider, false), .reqs = reqs};

    /* latency: one in flight */
    s_latency(&c, nreq, nworkers, want.memberships, "", suffix);
    if (decider_ipc) { /* the same over ipc://, a second connection to the same decider */
        s_client_t ci = {.dealer = bench_socket(ctx, ZMQ_DEALER, decider_ipc, false), .reqs = reqs};
        s_latency(&ci, nreq, nworkers, want.memberships, "_ipc", suffix);
        zmq_close(ci.dealer);
    }

    /* throughput: `window` in flight (TCP) */
    char note[256], name[128];
    double cpu0 = decider_pid ? bench_proc_cpu_s(decider_pid) : -1;
    uint64_t a = bench_now_ns(), end = a + (uint64_t)(seconds * 1e9);
    uint64_t done = 0, k = 0;
    c.ok = c.failed = 0;
    for (int i = 0; i < window; i++)
        s_send_req(&c, k++);
    while (bench_now_ns() < end) {
        s_recv_reply(&c, done % 64 == 0);
        done++;
        s_send_req(&c, k++);
    }
    uint64_t b = bench_now_ns();
    double cpu1 = decider_pid ? bench_proc_cpu_s(decider_pid) : -1;
    for (int i = 0; i < window; i++)
        s_recv_reply(&c, false);
    if (c.failed) BENCH_DIE("%" PRIu64 " decisions failed under load", c.failed);
    double rate = (double)done / ((double)(b - a) / 1e9);
    snprintf(note, sizeof note, "%d in flight for %.0f s, one client on the same 2 cores", window,
             seconds);
    snprintf(name, sizeof name, "decisions_per_s%s", suffix);
    bench_figure(name, rate, "decisions/s", note);
    if (cpu0 >= 0 && cpu1 > cpu0) {
        BENCH_LOG("throughput: %" PRIu64 " decisions in %.2f s; decider CPU %.2f s", done,
                  (double)(b - a) / 1e9, cpu1 - cpu0);
        snprintf(name, sizeof name, "decisions_per_decider_cpu_s%s", suffix);
        bench_figure(name, (double)done / (cpu1 - cpu0), "decisions/s",
                     "per second of the decider process's CPU time (one decider core)");
    }

    if (embedded) { /* as it runs by default, then busy-polling (--busy-poll-us 200) */
        s_embedded(embedded, 0, "_inproc", reqs, nreq, nworkers, want.memberships, suffix);
        s_embedded(embedded, 200, "_inproc_busy", reqs, nreq, nworkers, want.memberships, suffix);
    }

    atomic_store(&loads.stop, true);
    pthread_join(lt, NULL);
    for (size_t i = 0; i < S_NREQ; i++)
        msgpack_sbuffer_destroy(&reqs[i]);
    msgpack_sbuffer_destroy(&fd.buf);
    ipl_index_destroy(&fd.mirror);
    zmq_close(c.dealer);
    zmq_close(fd.push);
    zmq_ctx_term(ctx);
    free(family);
    curl_global_cleanup();
    return 0;
}
