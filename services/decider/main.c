/*
 * inferplane-decider — answers "where should this request go?" from a local replica of the
 * cluster state and the compiled policy (see decider_server.h for the sockets and threads,
 * decider_router.h for the choice).
 */
#include <stdio.h>

#include "decider_router.h"
#include "decider_server.h"
#include "ipl_cpu.h"
#include "ipl_log.h"
#include "ipl_service.h"

int main(int argc, char **argv)
{
    decider_server_config_t cfg = {0};
    decider_router_config_defaults(&cfg.router);
    char *listen = NULL, *state_sub = NULL, *state_snapshot = NULL, *policy_sub = NULL,
         *policy_req = NULL, *strategy = NULL, *id = NULL, *peer_pub = NULL, *peers = NULL,
         *tokenizer = NULL;
    double prefill_tps = 0, running_cost_ms = 0;
    double base_ms = 0, temperature_s = 0; /* predictor prior, ttft exploration */
    int64_t max_queue = 0;
    char strategy_help[512], strategy_bad[512];
    snprintf(strategy_help, sizeof strategy_help, "strategy for pools that name none: %s",
             decider_router_strategies());
    snprintf(strategy_bad, sizeof strategy_bad, "--strategy must be one of: %s",
             decider_router_strategies());
    int64_t load_gate = 0, ttl_ms = 0, stale_ms = 0, seed = 0, snapshot_timeout_ms = 0,
            silence_ms = 0, observe_window_ms = 0, busy_poll_us = 0, cpu = -1;

    ipl_service_t *svc = ipl_service_new("decider",
                                         "decision server: picks the worker for each request "
                                         "from a replica of the cluster state and the policy",
                                         "127.0.0.1:9104");
    if (!svc) return 2;
    ipl_config_t *c = ipl_service_config(svc);
    ipl_config_add(c, "listen", IPL_OPT_STR, &listen, "tcp://127.0.0.1:7021",
                   "ZeroMQ endpoints to bind the ROUTER that answers ROUTE_REQ, comma-separated "
                   "(up to 4, e.g. a tcp:// one for remote gateways and an ipc:// one for a "
                   "gateway on the same host)");
    ipl_config_add(c, "state-sub", IPL_OPT_STR, &state_sub, "tcp://127.0.0.1:7002",
                   "aggregators' PUB endpoints (state deltas), comma-separated: the decider "
                   "follows one and moves to the next when it fails");
    ipl_config_add(c, "state-snapshot", IPL_OPT_STR, &state_snapshot, "tcp://127.0.0.1:7003",
                   "aggregators' ROUTER endpoints (state snapshots), comma-separated, in the "
                   "order of --state-sub");
    ipl_config_add(c, "state-silence-ms", IPL_OPT_INT, &silence_ms, "3000",
                   "an aggregator silent this long (no delta, no heartbeat) counts as failed: "
                   "follow the next one and resync (0: never)");
    ipl_config_add(c, "id", IPL_OPT_STR, &id, NULL,
                   "this decider's id in the ROUTED messages it publishes (default "
                   "hostname-pid)");
    ipl_config_add(c, "peer-pub", IPL_OPT_STR, &peer_pub, NULL,
                   "ZeroMQ endpoint to bind a PUB on, publishing what this decider routes to "
                   "the other replicas (default: none)");
    ipl_config_add(c, "tokenizer", IPL_OPT_STR, &tokenizer, "builtin",
                   "tokenizer for POST /v1/route prompts and messages: a tokenizer.json, a "
                   "directory holding one, or \"builtin\" (use the gateway's)");
    ipl_config_add(c, "peers", IPL_OPT_STR, &peers, NULL,
                   "the other deciders' --peer-pub endpoints, comma-separated: what they route "
                   "counts here as in flight and optimistically cached (default: none)");
    ipl_config_add(c, "policy-sub", IPL_OPT_STR, &policy_sub, "tcp://127.0.0.1:7011",
                   "policy service's PUB endpoint");
    ipl_config_add(c, "policy-req", IPL_OPT_STR, &policy_req, "tcp://127.0.0.1:7012",
                   "policy service's ROUTER endpoint (POLICY_REQ)");
    ipl_config_add(c, "strategy", IPL_OPT_STR, &strategy, "ttft", strategy_help);
    ipl_config_add(c, "base-ms", IPL_OPT_DOUBLE, &base_ms, "40",
                   "predicted TTFT's fixed part before calibration (ms): API server, first step");
    ipl_config_add(c, "temperature-s", IPL_OPT_DOUBLE, &temperature_s, "0",
                   "ttft: sample the winner with probability exp(-ttft/T) instead of the minimum "
                   "(exploration; 0: the minimum)");
    ipl_config_add(c, "max-queue", IPL_OPT_INT, &max_queue, "0",
                   "a worker with more requests queued (waiting + in flight) is not eligible; "
                   "when none is, requests are rejected as overloaded (429) (0: no limit)");
    ipl_config_add(c, "prefill-tokens-per-s", IPL_OPT_DOUBLE, &prefill_tps, "3000",
                   "prefill speed of a worker, for predicted TTFT");
    ipl_config_add(c, "running-cost-ms", IPL_OPT_DOUBLE, &running_cost_ms, "5",
                   "predicted extra wait per running request (ms)");
    ipl_config_add(c, "load-gate", IPL_OPT_INT, &load_gate, "4",
                   "a worker whose queue (waiting + in flight) exceeds the least loaded one's "
                   "by more than this is not eligible");
    ipl_config_add(c, "optimistic-ttl-ms", IPL_OPT_INT, &ttl_ms, "2000",
                   "after routing a prompt, assume the worker caches it for this long (0: off)");
    ipl_config_add(c, "stale-ms", IPL_OPT_INT, &stale_ms, "5000",
                   "state silent for longer than this: cache terms ignored (load only)");
    ipl_config_add(c, "snapshot-timeout-ms", IPL_OPT_INT, &snapshot_timeout_ms, "5000",
                   "re-request a state snapshot that made no progress for this long");
    ipl_config_add(c, "observe-window-ms", IPL_OPT_INT, &observe_window_ms, "60000",
                   "remember each decision this long for the gateway's OBSERVED (the measured "
                   "TTFT that calibrates the prediction); at most 65536 at once (0: no "
                   "calibration from live requests)");
    ipl_config_add(c, "busy-poll-us", IPL_OPT_INT, &busy_poll_us, "0",
                   "after each burst of work, keep checking the sockets for this long before "
                   "sleeping: a request arriving meanwhile skips the thread wake-up (~20 us of "
                   "latency on a shared VM) at the price of up to one core while traffic lasts "
                   "(0: sleep at once; at most 10000)");
    ipl_config_add(c, "cpu", IPL_OPT_INT, &cpu, "-1",
                   "pin the decision loop and ZeroMQ's I/O thread to this core, so a request "
                   "is handed between them on one core instead of waking another (the admin "
                   "server and the policy view stay unpinned; give the decider this core to "
                   "itself) (-1: no pinning)");
    ipl_config_add(c, "seed", IPL_OPT_INT, &seed, "0",
                   "seed for tie-breaks and the random strategy (0: from the clock)");
    int rc = ipl_service_start(svc, argc, argv);
    if (rc != 0) {
        ipl_service_destroy(&svc);
        return rc > 0 ? 0 : 2;
    }
    const char *bad = NULL;
    if (!decider_router_strategy_known(strategy))
        bad = strategy_bad;
    else if (base_ms < 0 || temperature_s < 0 || max_queue < 0)
        bad = "--base-ms, --temperature-s and --max-queue must be >= 0";
    else if (!(prefill_tps > 0))
        bad = "--prefill-tokens-per-s must be above 0";
    else if (running_cost_ms < 0 || load_gate < 0 || ttl_ms < 0 || stale_ms < 1 || seed < 0 ||
             snapshot_timeout_ms < 100 || silence_ms < 0 || observe_window_ms < 0)
        bad = "--running-cost-ms, --load-gate, --optimistic-ttl-ms, --seed, --state-silence-ms "
              "and --observe-window-ms must be >= 0, --stale-ms >= 1 and --snapshot-timeout-ms "
              ">= 100";
    else if (busy_poll_us < 0 || busy_poll_us > 10000)
        bad = "--busy-poll-us must be 0..10000";
    char cpu_err[256];
    if (!bad && (cpu < -1 || cpu > 65535))
        bad = "--cpu must be -1 (no pinning) or a core number";
    else if (!bad && cpu != -1 && ipl_cpu_check((int)cpu, cpu_err, sizeof cpu_err) != 0)
        bad = cpu_err;
    if (bad) {
        fprintf(stderr, "inferplane-decider: %s\n", bad);
        ipl_service_destroy(&svc);
        return 2;
    }
    cfg.listen = listen;
    cfg.state_sub = state_sub;
    cfg.state_snapshot = state_snapshot;
    cfg.policy_sub = policy_sub;
    cfg.policy_req = policy_req;
    cfg.router.default_strategy = strategy;
    cfg.router.prefill_tokens_per_s = prefill_tps;
    cfg.router.running_cost_s = running_cost_ms / 1000.0;
    cfg.router.base_s = base_ms / 1000.0;
    cfg.router.temperature_s = temperature_s;
    cfg.router.max_queue = (uint64_t)max_queue;
    cfg.router.load_gate = (uint64_t)load_gate;
    cfg.router.optimistic_ttl_ms = (uint64_t)ttl_ms;
    cfg.router.stale_ms = (uint64_t)stale_ms;
    cfg.router.seed = (uint64_t)seed;
    cfg.router.observe_window_ms = (uint64_t)observe_window_ms;
    cfg.snapshot_timeout_ms = (uint64_t)snapshot_timeout_ms;
    cfg.silence_ms = (uint64_t)silence_ms;
    cfg.busy_poll_us = (uint64_t)busy_poll_us;
    cfg.max_buffered = 1000000;
    cfg.id = id;
    cfg.peer_pub = peer_pub;
    cfg.peers = peers;
    cfg.tokenizer = tokenizer;

    if (cpu >= 0) ipl_cpu_pin_zmq_io((int)cpu); /* before the first socket */
    char err[512];
    decider_server_t *server = decider_server_new(&cfg, ipl_service_metrics(svc), err, sizeof err);
    if (!server) {
        fprintf(stderr, "inferplane-decider: %s\n", err);
        ipl_service_destroy(&svc);
        return 2;
    }
    ipl_admin_t *admin = ipl_service_admin(svc);
    if (admin) {
        ipl_admin_set_ready(admin, decider_server_ready, server);
        decider_server_register(server, ipl_admin_httpd(admin));
    }
    if (ipl_service_serve(svc) != 0) {
        fprintf(stderr, "inferplane-decider: cannot start the admin server\n");
        decider_server_destroy(&server);
        ipl_service_destroy(&svc);
        return 2;
    }
    char q1[256], q2[256], q3[256], q4[256], q5[256];
    IPL_INFO("listening",
             "listen=%s state_sub=%s state_snapshot=%s strategy=%s peer_pub=%s peers=%s",
             ipl_log_quote(q1, sizeof q1, listen), ipl_log_quote(q2, sizeof q2, state_sub),
             ipl_log_quote(q3, sizeof q3, state_snapshot), strategy,
             ipl_log_quote(q4, sizeof q4, peer_pub ? peer_pub : ""),
             ipl_log_quote(q5, sizeof q5, peers ? peers : ""));
    /* Pinned last, so that the threads made above (admin server, policy view) stay free. */
    if (cpu >= 0 && ipl_cpu_pin_thread((int)cpu) == 0) IPL_INFO("pinned", "cpu=%d", (int)cpu);
    decider_server_run(server);
    IPL_INFO("stopping", NULL);
    ipl_service_stop(svc); /* admin stopped before the state its handlers read goes away */
    decider_server_destroy(&server);
    ipl_service_destroy(&svc);
    return 0;
}
