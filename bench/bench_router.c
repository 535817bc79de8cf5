/*
 * bench_router — the decider's own work per decision, in one thread, without the transport:
 * what bench_decision's round trip costs beyond ZeroMQ.
 *
 *   pre-encoded ROUTE_REQ ──ipl_msg_decode──► decider_router_route_at ──► decider_router_remember
 *                         ──decider_wire_reply──► ROUTE_REP frame
 *
 * exactly the decider server's steps for one ROUTE_REQ (decider_server.c s_route_req), minus
 * the socket calls, the rwlock and the metrics. The state is bench_decision's: a pool of
 * `--workers` workers, the bench_world.h population applied as KV_EVENTs of 1-32 blocks with
 * parent hints until `--memberships`, a LOAD per worker (0-8 running, 0-2 waiting) refreshed
 * every 100 ms of the run as the collector scrapes; the router with the decider's defaults
 * (strategy ttft, optimistic blocks for 2 s); 512-block prompts (8,192 tokens) drawn from the
 * cached population.
 *
 *   decision_compute_p50_us, decision_compute_p99_us   per decision (p99: median of 5 rounds'
 *                                                      p99, as bench_decision)
 *   decisions_per_cpu_s_compute                        decisions per second of this thread's
 *                                                      CPU time
 *
 *   build/bench/bench_router [--workers 64] [--memberships 1000000] [--requests 50000]
 *                            [--brief 1] [--optimistic-ttl-ms 2000] [--suffix NAME]
 * (--brief 0: replies with every candidate's figures, as inferplanectl asks;
 * --optimistic-ttl-ms 0: without the ledger's optimistic blocks and the pending prefixes, the
 * decider's flag of the same name.)
 *
 * Deterministic apart from the clock: under `valgrind --tool=callgrind` (with a small
 * --requests) it gives instructions per decision by function.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "bench_stack.h"
#include "bench_world.h"
#include "decider_wire.h"
#include "decider_router.h"
#include "decider_state.h"
#include "ipl_clock.h"
#include "ipl_proto.h"

#define S_FAMILIES    256u
#define S_BLOCK       16u
#define S_NREQ        1024 /* distinct pre-encoded requests */
#define S_MAX_WORKERS 1024
#define S_LOAD_MS     100

typedef struct {
    decider_state_t *state;
    char names[S_MAX_WORKERS][16];
    int nworkers;
    bench_rng_t rng; /* the loads' */
} s_world_t;

static void s_piece(void *arg, int worker, uint64_t prompt, const uint64_t *hashes, uint32_t i,
                    uint32_t n)
{
    s_world_t *w = arg;
    ipl_msg_t m = {.type = IPL_MSG_KV_EVENT};
    m.u.kv_event = bench_world_stored(w->names[worker], prompt, hashes, i, n, S_BLOCK);
    if (decider_state_apply(w->state, &m, ipl_mono_ms()) != 0) BENCH_DIE("KV_EVENT");
}

static uint64_t s_memberships(void *arg)
{
    return ipl_index_memberships(decider_state_index(((s_world_t *)arg)->state));
}

/* A LOAD per worker, stamped now (what the collector's scrape brings every 100 ms). */
static void s_loads(s_world_t *w)
{
    uint64_t now = ipl_wall_ms();
    for (int i = 0; i < w->nworkers; i++) {
        ipl_msg_t m = {.type = IPL_MSG_LOAD};
        m.u.load =
            bench_load(w->names[i], bench_range(&w->rng, 0, 8), bench_range(&w->rng, 0, 2), now);
        if (decider_state_apply(w->state, &m, ipl_mono_ms()) != 0) BENCH_DIE("LOAD");
    }
}

int main(int argc, char **argv)
{
    int nworkers = (int)bench_arg_int(argc, argv, "workers", 64);
    uint64_t target = (uint64_t)bench_arg_int(argc, argv, "memberships", 1000000);
    size_t nreq = (size_t)bench_arg_int(argc, argv, "requests", 50000);
    const char *suffix = bench_arg(argc, argv, "suffix", "");
    uint64_t brief = (uint64_t)bench_arg_int(argc, argv, "brief", 1);
    long long ttl = bench_arg_int(argc, argv, "optimistic-ttl-ms", 2000);
    if (nworkers < 1 || nworkers > S_MAX_WORKERS || nreq < 100 || ttl < 0)
        BENCH_DIE("usage: bench_router [--workers 1..%d] [--memberships N] [--requests >= 100] "
                  "[--brief 0|1] [--optimistic-ttl-ms N] [--suffix NAME]",
                  S_MAX_WORKERS);

    static s_world_t w;
    w.state = decider_state_new();
    w.nworkers = nworkers;
    w.rng = bench_rng(99);
    ipl_worker_t *pw = calloc((size_t)nworkers, sizeof *pw);
    if (!w.state || !pw) BENCH_DIE("out of memory");
    for (int i = 0; i < nworkers; i++) {
        snprintf(w.names[i], sizeof w.names[i], "w%d", i);
        char *url = malloc(64);
        if (!url) BENCH_DIE("out of memory");
        snprintf(url, 64, "http://127.0.0.1:%d", 20000 + i);
        pw[i] = (ipl_worker_t){.name = w.names[i],
                               .pool = "sim-pool",
                               .model = "sim-model",
                               .url = url,
                               .block_size = S_BLOCK};
    }
    ipl_pool_t pool = {.name = "sim-pool", .model = "sim-model", .strategy = ""};
    ipl_policy_t policy = {.version = 1,
                           .source = "bench_router",
                           .pools = &pool,
                           .pools_len = 1,
                           .workers = pw,
                           .workers_len = (uint32_t)nworkers};
    s_loads(&w);

    /* the population, as bench_decision feeds it */
    bench_rng_t rng = bench_rng(42);
    static bench_world_t wd;
    bench_world_init(&wd, S_FAMILIES, nworkers, &rng);
    uint64_t cap = target / (BENCH_PROMPT - BENCH_MAX_PREFIX) + S_FAMILIES + 16;
    uint32_t *family = malloc(cap * sizeof *family);
    if (!family) BENCH_DIE("out of memory");
    uint64_t np = bench_world_fill(&wd, &rng, target, cap, family, s_piece, s_memberships, &w);
    BENCH_LOG("state: %" PRIu64 " prompts, %zu memberships over %d workers", np, s_memberships(&w),
              nworkers);

    static msgpack_sbuffer reqs[S_NREQ];
    uint64_t hashes[BENCH_PROMPT];
    for (size_t k = 0; k < S_NREQ; k++) {
        uint64_t p = bench_rand(&rng) % np;
        ipl_route_req_t rq =
            bench_world_request(&wd, family[p], p, k, "sim-model", S_BLOCK, hashes);
        rq.brief = brief;
        msgpack_sbuffer_init(&reqs[k]);
        bench_encode(IPL_MSG_ROUTE_REQ, &rq, &reqs[k]);
    }

    uint64_t ttl_ms = (uint64_t)ttl;
    decider_router_config_t cfg;
    decider_router_config_defaults(&cfg);
    cfg.optimistic_ttl_ms = ttl_ms;
    decider_router_t *router = decider_router_new(&cfg);
    if (!router) BENCH_DIE("decider_router_new");
    decider_decision_t d;
    decider_decision_init(&d);
    decider_wire_t reply = {0};
    msgpack_sbuffer out;
    msgpack_sbuffer_init(&out);

    size_t warm = nreq / 10;
    uint64_t *lat = malloc(nreq * sizeof *lat);
    if (!lat) BENCH_DIE("out of memory");
    uint64_t routed = 0, hits = 0, loads_ms = ipl_mono_ms(), cpu0 = 0;
    for (size_t k = 0; k < warm + nreq; k++) {
        if (k == warm) cpu0 = bench_cpu_ns();
        if (ipl_mono_ms() - loads_ms >= S_LOAD_MS) { /* outside the timed part */
            s_loads(&w);
            loads_ms = ipl_mono_ms();
        }
        const msgpack_sbuffer *b = &reqs[k % S_NREQ];
        uint64_t t0 = bench_now_ns();
        ipl_msg_t msg;
        if (ipl_msg_decode(b->data, b->size, &msg) != 0 || msg.type != IPL_MSG_ROUTE_REQ)
            BENCH_DIE("decode");
        const ipl_route_req_t *rq = &msg.u.route_req;
        decider_request_t req = decider_wire_request(rq);
        uint64_t mono = ipl_mono_ms();
        int rc =
            decider_router_route_at(router, &policy, w.state, 0, &req, &d, ipl_wall_ms(), mono);
        bool observe =
            rc == IPL_ROUTE_OK && decider_router_remember(router, 1, rq->req_id, &d, mono) == 0;
        msgpack_sbuffer_clear(&out);
        if (decider_wire_reply(&reply, rq->req_id, &d, observe, rq->brief && !rq->explain, &out) !=
            0)
            BENCH_DIE("encode");
        ipl_msg_clear(&msg);
        uint64_t t1 = bench_now_ns();
        if (k >= warm) {
            lat[k - warm] = t1 - t0;
            routed += rc == IPL_ROUTE_OK;
            hits += d.reason && !strcmp(d.reason, "cache_hit");
        }
    }
    double cpu_s = (double)(bench_cpu_ns() - cpu0) / 1e9;
    if (routed != nreq) BENCH_DIE("%" PRIu64 " of %zu decisions routed", routed, nreq);
    BENCH_LOG("%zu decisions: all routed, %" PRIu64 " cache hits, reply %zu bytes; %.2f s CPU",
              nreq, hits, out.size, cpu_s);

    uint64_t p99r[BENCH_ROUNDS];
    double p99 = (double)bench_p99_of_rounds(lat, nreq, p99r) / 1e3;
    double p50 = (double)bench_quantile(lat, nreq, 0.5) / 1e3;
    char note[256], name[128];
    snprintf(note, sizeof note,
             "in-process decode + route + encode, 512-block prompt, %d workers, %zu memberships; "
             "p99: median of %d rounds",
             nworkers, s_memberships(&w), BENCH_ROUNDS);
    snprintf(name, sizeof name, "decision_compute_p50_us%s", suffix);
    bench_figure(name, p50, "us", note);
    snprintf(name, sizeof name, "decision_compute_p99_us%s", suffix);
    bench_figure(name, p99, "us", note);
    snprintf(name, sizeof name, "decisions_per_cpu_s_compute%s", suffix);
    bench_figure(name, (double)nreq / cpu_s, "decisions/s",
                 "one thread, the decider's steps without the transport");

    free(lat);
    msgpack_sbuffer_destroy(&out);
    decider_wire_clear(&reply);
    decider_decision_clear(&d);
    decider_router_destroy(&router);
    for (size_t k = 0; k < S_NREQ; k++)
        msgpack_sbuffer_destroy(&reqs[k]);
    for (int i = 0; i < nworkers; i++)
        free((char *)pw[i].url);
    free(pw);
    free(family);
    decider_state_destroy(&w.state);
    return 0;
}
