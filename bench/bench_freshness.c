/*
 * bench_freshness — how long after a worker publishes BlockStored the decider routes with it,
 * through real processes on loopback (tools/run-bench starts them):
 *
 *   this process (worker w0) ──XPUB vLLM batch──► collector ──PUSH──► aggregator ──PUB──►
 *                                                                     │           decider
 *   this process ◄──SUB (split timing only)───────────────────────────┘              ▲
 *   this process ──DEALER ROUTE_REQ (the new blocks) ────────────────────────────────┘
 *
 * This process plays the vLLM worker: it binds the KV-event socket (an XPUB, so it knows when
 * the collector has subscribed) and serves a vLLM-shaped /metrics for the collector's scrapes.
 * Each sample publishes one batch (map format) with a BlockStored of a new 4-block chain at
 * t_pub. Once this process's SUB on the aggregator's PUB has seen the re-published KV_EVENT
 * (the decider cannot have applied it before), it asks the decider, in a closed loop, to route
 * a prompt made of exactly those blocks, until the reply shows w0's candidate with cached
 * tokens (the decider's index has applied the event): t_seen = when that reply arrived.
 * Probing only from then on keeps the probes from competing for the 2 cores with the
 * collector and the aggregator. The decider runs with --optimistic-ttl-ms 0 so that a probe
 * can never make the next probe look cached.
 *
 *   freshness_p50_ms, freshness_p99_ms  t_seen - t_pub. An upper bound: it includes up to one
 *                                       probe round trip (reported) after the apply.
 *   freshness_aggregator_p99_ms         until this process's SUB on the aggregator's PUB saw
 *                                       the re-published KV_EVENT (the same hop as the
 *                                       decider's SUB): collector + aggregator share
 * Samples are spaced 1-5 ms apart (an idle pipeline between events, as with real workers).
 * `--background-rate R` adds a second worker (w1, its own XPUB at --background-bind, /metrics
 * at /w1/metrics) that publishes R batches/s of 16-block BlockStored plus the removal of an
 * old chain.
 *
 *   build/bench/bench_freshness --kv-bind EP --metrics-port PORT --aggregator-pub EP
 *       --decider EP --decider-admin URL [--model sim-model] [--samples 1000]
 *       [--background-bind EP --background-rate R]
 */
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
#include "ipl_clock.h"
#include "ipl_hash.h"
#include "ipl_httpd.h"
#include "ipl_proto.h"
#include "sim_kvbatch.h"
#include "sim_kvwire.h"

#define S_BLOCK           16u
#define S_NBLOCKS         4u
#define S_VOCAB           151936u
#define S_TOPIC           "kv-events"
#define S_PROBE_ANYWAY_NS 50000000ull /* probe even if our SUB has not seen the event */

/* ---- the worker's side: /metrics and the KV-event socket ---------------------------------- */

static void s_metrics(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp)
{
    (void)arg;
    (void)req;
    static const char body[] =
        "# TYPE vllm:num_requests_running gauge\n"
        "vllm:num_requests_running{model_name=\"sim-model\"} 0\n"
        "# TYPE vllm:num_requests_waiting gauge\n"
        "vllm:num_requests_waiting{model_name=\"sim-model\"} 0\n"
        "# TYPE vllm:kv_cache_usage_perc gauge\n"
        "vllm:kv_cache_usage_perc{model_name=\"sim-model\"} 0.1\n"
        "# TYPE vllm:cache_config_info gauge\n"
        "vllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"100000\"} 1\n"
        "# TYPE process_start_time_seconds gauge\n"
        "process_start_time_seconds 1700000000\n";
    ipl_http_resp_set(resp, 200, "text/plain; version=0.0.4", body, sizeof body - 1);
}

/* Binds an XPUB and waits (up to 30 s) for a subscriber. */
static void *s_worker_socket(void *ctx, const char *endpoint)
{
    void *s = bench_socket(ctx, ZMQ_XPUB, endpoint, true);
    int timeout = 30000;
    zmq_setsockopt(s, ZMQ_RCVTIMEO, &timeout, sizeof timeout);
    uint8_t sub[256];
    if (zmq_recv(s, sub, sizeof sub, 0) < 1 || sub[0] != 1)
        BENCH_DIE("nobody subscribed to %s within 30 s (is the collector running?)", endpoint);
    return s;
}

static void s_publish(void *pub, uint64_t seq, const uint8_t *payload, size_t len)
{
    uint8_t seq8[8];
    for (int i = 0; i < 8; i++)
        seq8[i] = (uint8_t)(seq >> (56 - 8 * i));
    zmq_send(pub, S_TOPIC, strlen(S_TOPIC), ZMQ_SNDMORE);
    zmq_send(pub, seq8, sizeof seq8, ZMQ_SNDMORE);
    zmq_send(pub, payload, len, 0);
}

/* A batch with one BlockStored of `n` new root blocks (random tokens) and, when `old` is not
 * NULL, the BlockRemoved of those `nold` engine hashes. Fills our hashes into `ours`. */
static uint8_t *s_batch(sim_kvbatch_t *b, bench_rng_t *rng, uint32_t n, uint64_t *engine,
                        uint64_t *ours, const uint64_t *old, uint32_t nold, size_t *len)
{
    uint32_t tokens[64 * S_BLOCK];
    sim_hash_t hashes[64];
    sim_kvbatch_reset(b);
    for (uint32_t i = 0; i < nold && old; i++) {
        sim_hash_t h = sim_hash_from_u64(old[i]);
        sim_kvbatch_removed(b, &h);
    }
    for (uint32_t i = 0; i < n * S_BLOCK; i++)
        tokens[i] = (uint32_t)(bench_rand(rng) % S_VOCAB);
    for (uint32_t i = 0; i < n; i++) {
        engine[i] = bench_rand(rng);
        hashes[i] = sim_hash_from_u64(engine[i]);
    }
    if (sim_kvbatch_stored(b, hashes, n, NULL, tokens, S_BLOCK, NULL) != 0)
        BENCH_DIE("out of memory");
    if (ours) ipl_block_hashes(ipl_hash_chain_start(0), tokens, n * S_BLOCK, S_BLOCK, ours, n);
    uint8_t *p = sim_kvwire_encode(b, ipl_wall_s(), SIM_KV_FORMAT_MAP, true, len);
    if (!p) BENCH_DIE("out of memory");
    return p;
}

/* ---- background load: a second worker publishing at a fixed rate -------------------------- */

typedef struct {
    void *pub;
    double rate;
    atomic_bool stop;
    uint64_t batches;
} s_background_t;

#define S_BG_BLOCKS 16u
#define S_BG_KEEP   64u /* chains kept before the oldest is removed */

static void *s_background(void *arg)
{
    s_background_t *bg = arg;
    sim_kvbatch_t *b = sim_kvbatch_new();
    bench_rng_t rng = bench_rng(1234);
    static uint64_t chains[S_BG_KEEP][S_BG_BLOCKS];
    uint64_t period_ns = (uint64_t)(1e9 / bg->rate), next = bench_now_ns();
    for (uint64_t seq = 0; !atomic_load(&bg->stop); seq++) {
        uint64_t *slot = chains[seq % S_BG_KEEP];
        size_t len;
        uint8_t *p = s_batch(b, &rng, S_BG_BLOCKS, slot, NULL, seq >= S_BG_KEEP ? slot : NULL,
                             S_BG_BLOCKS, &len);
        /* s_batch wrote the new chain over the old one after queueing its removal */
        s_publish(bg->pub, seq, p, len);
        free(p);
        bg->batches++;
        next += period_ns;
        uint64_t now = bench_now_ns();
        if (next > now) usleep((useconds_t)((next - now) / 1000));
    }
    sim_kvbatch_destroy(&b);
    return NULL;
}

/* ---- the decider's side ------------------------------------------------------------------- */

static bool s_worker_ready(const cJSON *doc, void *arg)
{
    const char *name = arg;
    const cJSON *w;
    cJSON_ArrayForEach(w, cJSON_GetObjectItemCaseSensitive(doc, "workers"))
    {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(w, "name");
        const cJSON *h = cJSON_GetObjectItemCaseSensitive(w, "health");
        const cJSON *k = cJSON_GetObjectItemCaseSensitive(w, "kv_state");
        /* "syncing" until the collector has seen the worker's first batch */
        if (cJSON_IsString(n) && !strcmp(n->valuestring, name) && cJSON_IsString(h) &&
            !strcmp(h->valuestring, "up") && cJSON_IsString(k) &&
            strcmp(k->valuestring, "degraded") != 0)
            return true;
    }
    return false;
}

/* Whether a ROUTE_REP frame shows `worker` with cached tokens. */
static bool s_cached(const void *frame, size_t len, const char *worker)
{
    ipl_msg_t rep;
    if (ipl_msg_decode(frame, len, &rep) != 0) BENCH_DIE("undecodable ROUTE_REP");
    bool cached = false;
    if (rep.type == IPL_MSG_ROUTE_REP)
        for (uint32_t i = 0; i < rep.u.route_rep.candidates_len; i++) {
            const ipl_candidate_t *c = &rep.u.route_rep.candidates[i];
            if (c->worker && !strcmp(c->worker, worker)) cached = c->cached_tokens > 0;
        }
    ipl_msg_clear(&rep);
    return cached;
}

/* Whether an aggregator PUB frame is w0's KV_EVENT for batch `seq`. */
static bool s_is_event(const void *frame, size_t len, uint64_t seq)
{
    ipl_msg_t m;
    if (ipl_msg_decode(frame, len, &m) != 0) return false;
    bool yes = m.type == IPL_MSG_KV_EVENT && m.u.kv_event.worker &&
               !strcmp(m.u.kv_event.worker, "w0") && m.u.kv_event.src_seq == seq &&
               m.u.kv_event.op == IPL_KV_OP_STORED;
    ipl_msg_clear(&m);
    return yes;
}

static double s_ms(uint64_t ns)
{
    return (double)ns / 1e6;
}

int main(int argc, char **argv)
{
    const char *kv = bench_arg(argc, argv, "kv-bind", NULL);
    int metrics_port = (int)bench_arg_int(argc, argv, "metrics-port", 0);
    const char *agg_pub = bench_arg(argc, argv, "aggregator-pub", NULL);
    const char *decider = bench_arg(argc, argv, "decider", NULL);
    const char *admin = bench_arg(argc, argv, "decider-admin", NULL);
    const char *model = bench_arg(argc, argv, "model", "sim-model");
    size_t samples = (size_t)bench_arg_int(argc, argv, "samples", 1000);
    const char *bg_bind = bench_arg(argc, argv, "background-bind", NULL);
    double bg_rate = (double)bench_arg_int(argc, argv, "background-rate", 0);
    if (!kv || metrics_port <= 0 || !agg_pub || !decider || !admin || samples < 100 ||
        (bg_rate > 0 && !bg_bind))
        BENCH_DIE("usage: bench_freshness --kv-bind EP --metrics-port PORT --aggregator-pub EP "
                  "--decider EP --decider-admin URL [--model NAME] [--samples >= 100] "
                  "[--background-bind EP --background-rate R]");
    curl_global_init(CURL_GLOBAL_DEFAULT);
    char listen[64];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", metrics_port);
    ipl_httpd_t *httpd = ipl_httpd_new(listen, 0);
    if (!httpd) BENCH_DIE("cannot serve /metrics on %s", listen);
    ipl_httpd_route(httpd, "GET", "/metrics", s_metrics, NULL);
    ipl_httpd_route(httpd, "GET", "/w1/metrics", s_metrics, NULL); /* the background worker */
    if (ipl_httpd_start(httpd) != 0) BENCH_DIE("cannot start the /metrics server");

    void *ctx = zmq_ctx_new();
    void *sub = bench_socket(ctx, ZMQ_SUB, agg_pub, false);
    zmq_setsockopt(sub, ZMQ_SUBSCRIBE, "", 0);
    void *dealer = bench_socket(ctx, ZMQ_DEALER, decider, false);
    void *pub = s_worker_socket(ctx, kv);
    s_background_t bg = {0};
    pthread_t bgt;
    if (bg_rate > 0) {
        bg.pub = s_worker_socket(ctx, bg_bind);
        bg.rate = bg_rate;
    }
    char url[512];
    snprintf(url, sizeof url, "%s/debug/state", admin);
    if (!bench_wait_json(url, s_worker_ready, (void *)"w0", 30))
        BENCH_DIE("the decider did not see w0 up within 30 s");
    if (bg_rate > 0 && pthread_create(&bgt, NULL, s_background, &bg) != 0)
        BENCH_DIE("pthread_create");

    sim_kvbatch_t *batch = sim_kvbatch_new();
    bench_rng_t rng = bench_rng(42);
    msgpack_sbuffer req;
    msgpack_sbuffer_init(&req);
    uint64_t *e2e = malloc(samples * sizeof *e2e), *agg = malloc(samples * sizeof *agg);
    uint64_t probes = 0, probe_ns = 0, agg_missing = 0;
    size_t warm = samples / 10 + 10; /* the first batches: connections settle */
    for (size_t k = 0; k < warm + samples; k++) {
        uint64_t engine[S_NBLOCKS], ours[S_NBLOCKS];
        size_t len;
        uint8_t *payload = s_batch(batch, &rng, S_NBLOCKS, engine, ours, NULL, 0, &len);
        ipl_route_req_t rq = {.req_id = k,
                              .model = (char *)model,
                              .tenant = "",
                              .prompt_tokens = S_NBLOCKS * S_BLOCK,
                              .block_size = S_BLOCK,
                              .hashes = ours,
                              .hashes_len = S_NBLOCKS,
                              .strategy = ""};
        bench_encode(IPL_MSG_ROUTE_REQ, &rq, &req);

        uint64_t t_pub = bench_now_ns(), t_agg = 0, t_seen = 0;
        s_publish(pub, k, payload, len);
        free(payload);
        bool waiting_reply = false;
        uint64_t sent_at = 0;
        while (!t_seen || !t_agg) {
            uint64_t now = bench_now_ns();
            if (now - t_pub > 2000000000ull) {
                if (!t_seen) BENCH_DIE("batch %zu not visible at the decider after 2 s", k);
                agg_missing++; /* the SUB lost it: keep the e2e sample */
                break;
            }
            /* Probe only once the aggregator has published the event (the decider cannot have
             * it earlier), or after S_PROBE_ANYWAY_NS if our SUB missed it: probing all along
             * would load the 2 cores the pipeline itself runs on. */
            bool probing = t_agg || now - t_pub > S_PROBE_ANYWAY_NS;
            if (probing && !t_seen && !waiting_reply) {
                zmq_send(dealer, req.data, req.size, 0);
                waiting_reply = true;
                sent_at = now;
            }
            zmq_pollitem_t items[2] = {{sub, 0, ZMQ_POLLIN, 0}, {dealer, 0, ZMQ_POLLIN, 0}};
            if (zmq_poll(items, 2, probing ? 100 : 1) < 0)
                BENCH_DIE("poll: %s", zmq_strerror(zmq_errno()));
            now = bench_now_ns();
            zmq_msg_t m;
            while (items[0].revents & ZMQ_POLLIN) {
                zmq_msg_init(&m);
                if (zmq_msg_recv(&m, sub, ZMQ_DONTWAIT) < 0) {
                    zmq_msg_close(&m);
                    break;
                }
                if (!t_agg && s_is_event(zmq_msg_data(&m), zmq_msg_size(&m), k)) t_agg = now;
                zmq_msg_close(&m);
            }
            if (items[1].revents & ZMQ_POLLIN) {
                zmq_msg_init(&m);
                if (zmq_msg_recv(&m, dealer, 0) < 0) BENCH_DIE("recv from the decider");
                waiting_reply = false;
                probes++;
                probe_ns += now - sent_at;
                if (s_cached(zmq_msg_data(&m), zmq_msg_size(&m), "w0")) t_seen = now;
                zmq_msg_close(&m);
            }
        }
        if (waiting_reply) { /* a probe still out: take its reply before the next sample */
            zmq_msg_t m;
            zmq_msg_init(&m);
            zmq_msg_recv(&m, dealer, 0);
            zmq_msg_close(&m);
        }
        if (k >= warm) {
            e2e[k - warm] = t_seen - t_pub;
            agg[k - warm] = t_agg ? t_agg - t_pub : 0;
        }
        usleep((useconds_t)bench_range(&rng, 1000, 5000));
    }

    if (bg_rate > 0) {
        atomic_store(&bg.stop, true);
        pthread_join(bgt, NULL);
        BENCH_LOG("background: %" PRIu64 " batches from w1", bg.batches);
    }
    uint64_t *aggs = malloc(samples * sizeof *aggs);
    size_t nagg = 0;
    for (size_t i = 0; i < samples; i++)
        if (agg[i]) aggs[nagg++] = agg[i];
    double p50 = s_ms(bench_quantile(e2e, samples, 0.5));
    double p99 = s_ms(bench_quantile(e2e, samples, 0.99));
    BENCH_LOG("%zu samples: p50 %.3f ms, p90 %.3f ms, p99 %.3f ms, max %.3f ms; probe round trip "
              "%.1f us (mean of %" PRIu64 "); aggregator hop p50 %.3f ms p99 %.3f ms (%zu seen)",
              samples, p50, s_ms(bench_quantile(e2e, samples, 0.9)), p99, s_ms(e2e[samples - 1]),
              (double)probe_ns / (double)probes / 1e3, probes,
              s_ms(bench_quantile(aggs, nagg, 0.5)), s_ms(bench_quantile(aggs, nagg, 0.99)), nagg);
    char note[256];
    snprintf(note, sizeof note,
             "BlockStored published -> decider routes with it; %zu samples%s; includes <= 1 "
             "probe round trip (%.0f us)",
             samples, bg_rate > 0 ? ", with background load" : "",
             (double)probe_ns / (double)probes / 1e3);
    const char *sfx = bg_rate > 0 ? "_loaded" : "";
    char name[64];
    snprintf(name, sizeof name, "freshness_p50_ms%s", sfx);
    bench_figure(name, p50, "ms", note);
    snprintf(name, sizeof name, "freshness_p99_ms%s", sfx);
    bench_figure(name, p99, "ms", note);
    if (nagg) {
        snprintf(name, sizeof name, "freshness_aggregator_p99_ms%s", sfx);
        bench_figure(name, s_ms(bench_quantile(aggs, nagg, 0.99)), "ms",
                     "published -> re-published by the aggregator (collector + aggregator)");
    }

    free(aggs);
    free(e2e);
    free(agg);
    msgpack_sbuffer_destroy(&req);
    sim_kvbatch_destroy(&batch);
    zmq_close(pub);
    if (bg.pub) zmq_close(bg.pub);
    zmq_close(sub);
    zmq_close(dealer);
    zmq_ctx_term(ctx);
    ipl_httpd_destroy(&httpd);
    curl_global_cleanup();
    return 0;
}
