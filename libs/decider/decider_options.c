/*
 * decider_options — the decider's settings (see decider_options.h).
 */
#include "decider_options.h"

#include <stdio.h>
#include <string.h>

#include "decider_router.h"
#include "ipl_cpu.h"
#include "ipl_error.h"

#define S_BIG 1e15 /* no upper bound worth naming */

void decider_options_add(decider_options_t *self, ipl_config_t *c, bool embedded)
{
    memset(self, 0, sizeof *self);
    self->cpu = -1;
    snprintf(self->strategy_help, sizeof self->strategy_help,
             "strategy for pools that name none: %s", decider_router_strategies());
    if (embedded)
        ipl_config_add(c, "listen", IPL_OPT_STR, &self->listen, "",
                       "ZeroMQ endpoints to bind besides the host process's inproc:// one, "
                       "comma-separated (up to 3, e.g. a tcp:// one for inferplanectl route "
                       "--explain; default none)");
    else
        ipl_config_add(c, "listen", IPL_OPT_STR, &self->listen, "tcp://127.0.0.1:7021",
                       "ZeroMQ endpoints to bind the ROUTER that answers ROUTE_REQ, "
                       "comma-separated (up to 4, e.g. a tcp:// one for remote gateways and an "
                       "ipc:// one for a gateway on the same host)");
    ipl_config_add(c, "state-sub", IPL_OPT_STR, &self->state_sub, "tcp://127.0.0.1:7002",
                   "aggregators' PUB endpoints (state deltas), comma-separated: the decider "
                   "follows one and moves to the next when it fails");
    ipl_config_add(c, "state-snapshot", IPL_OPT_STR, &self->state_snapshot, "tcp://127.0.0.1:7003",
                   "aggregators' ROUTER endpoints (state snapshots), comma-separated, in the "
                   "order of --state-sub");
    ipl_config_add(c, "state-silence-ms", IPL_OPT_INT, &self->silence_ms, "3000",
                   "an aggregator silent this long (no delta, no heartbeat) counts as failed: "
                   "follow the next one and resync (0: never)");
    ipl_config_add(c, "id", IPL_OPT_STR, &self->id, NULL,
                   "this decider's id in the ROUTED messages it publishes (default "
                   "hostname-pid)");
    ipl_config_add(c, "peer-pub", IPL_OPT_STR, &self->peer_pub, NULL,
                   "ZeroMQ endpoint to bind a PUB on, publishing what this decider routes to "
                   "the other replicas (default: none)");
    ipl_config_add(c, "tokenizer", IPL_OPT_STR, &self->tokenizer, "builtin",
                   "tokenizer for POST /v1/route prompts and messages: a model folder "
                   "(tokenizer.json and its chat template), a tokenizer.json, or \"builtin\" "
                   "(use the gateway's)");
    ipl_config_add(c, "peers", IPL_OPT_STR, &self->peers, NULL,
                   "the other deciders' --peer-pub endpoints, comma-separated: what they route "
                   "counts here as in flight and optimistically cached (default: none)");
    ipl_config_add(c, "policy-sub", IPL_OPT_STR, &self->policy_sub, "tcp://127.0.0.1:7011",
                   "policy service's PUB endpoint");
    ipl_config_add(c, "policy-req", IPL_OPT_STR, &self->policy_req, "tcp://127.0.0.1:7012",
                   "policy service's ROUTER endpoint (POLICY_REQ)");
    ipl_config_add(c, "strategy", IPL_OPT_STR, &self->strategy, "ttft", self->strategy_help);
    ipl_config_add(c, "base-ms", IPL_OPT_DOUBLE, &self->base_ms, "40",
                   "predicted TTFT's fixed part before calibration (ms): API server, first step");
    ipl_config_add(c, "temperature-s", IPL_OPT_DOUBLE, &self->temperature_s, "0",
                   "ttft: sample the winner with probability exp(-ttft/T) instead of the minimum "
                   "(exploration; 0: the minimum)");
    ipl_config_add(c, "max-queue", IPL_OPT_INT, &self->max_queue, "0",
                   "a worker with more requests queued (waiting + in flight) is not eligible; "
                   "when none is, requests are rejected as overloaded (429) (0: no limit)");
    ipl_config_add(c, "prefill-tokens-per-s", IPL_OPT_DOUBLE, &self->prefill_tps, "3000",
                   "prefill speed of a worker, for predicted TTFT");
    ipl_config_add(c, "running-cost-ms", IPL_OPT_DOUBLE, &self->running_cost_ms, "5",
                   "predicted extra wait per running request (ms)");
    ipl_config_add(c, "load-gate", IPL_OPT_INT, &self->load_gate, "4",
                   "a worker whose queue (waiting + in flight) exceeds the least loaded one's "
                   "by more than this is not eligible");
    ipl_config_add(c, "optimistic-ttl-ms", IPL_OPT_INT, &self->ttl_ms, "2000",
                   "after routing a prompt, assume the worker caches it for this long (0: off)");
    ipl_config_add(c, "stale-ms", IPL_OPT_INT, &self->stale_ms, "5000",
                   "state silent for longer than this: cache terms ignored (load only)");
    ipl_config_add(c, "snapshot-timeout-ms", IPL_OPT_INT, &self->snapshot_timeout_ms, "5000",
                   "re-request a state snapshot that made no progress for this long");
    ipl_config_add(c, "observe-window-ms", IPL_OPT_INT, &self->observe_window_ms, "60000",
                   "remember each decision this long for the gateway's OBSERVED (the measured "
                   "TTFT that calibrates the prediction); at most 65536 at once (0: no "
                   "calibration from live requests)");
    ipl_config_add(c, "busy-poll-us", IPL_OPT_INT, &self->busy_poll_us, "0",
                   "after each burst of work, keep checking the sockets for this long before "
                   "sleeping: a request arriving meanwhile skips the thread wake-up (~20 us of "
                   "latency on a shared VM) at the price of up to one core while traffic lasts "
                   "(0: sleep at once; at most 10000)");
    if (!embedded)
        ipl_config_add(c, "cpu", IPL_OPT_INT, &self->cpu, "-1",
                       "pin the decision loop and ZeroMQ's I/O thread to this core, so a request "
                       "is handed between them on one core instead of waking another (the admin "
                       "server and the policy view stay unpinned; give the decider this core to "
                       "itself) (-1: no pinning)");
    ipl_config_add(c, "seed", IPL_OPT_INT, &self->seed, "0",
                   "seed for tie-breaks and the random strategy (0: from the clock)");
    /* Checked where the value came from: "flag --load-gate: -1 is out of range (0..1e+15)",
     * or the --decider-config file's line for an embedded decider. */
    static const struct {
        const char *name;
        double min, max;
    } ranges[] = {
        {"base-ms", 0, S_BIG},
        {"temperature-s", 0, S_BIG},
        {"max-queue", 0, S_BIG},
        {"prefill-tokens-per-s", 1e-3, S_BIG},
        {"running-cost-ms", 0, S_BIG},
        {"load-gate", 0, S_BIG},
        {"optimistic-ttl-ms", 0, S_BIG},
        {"stale-ms", 1, S_BIG},
        {"snapshot-timeout-ms", 100, S_BIG},
        {"state-silence-ms", 0, S_BIG},
        {"observe-window-ms", 0, S_BIG},
        {"busy-poll-us", 0, 10000},
        {"seed", 0, 9e18},
    };
    for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++)
        ipl_config_range(c, ranges[i].name, ranges[i].min, ranges[i].max);
    if (!embedded) ipl_config_range(c, "cpu", -1, 65535);
}

int decider_options_check(const decider_options_t *self, char *err, size_t errlen)
{
    /* The numeric ranges were checked by ipl_config_parse (decider_options_add). */
    if (!decider_router_strategy_known(self->strategy)) {
        snprintf(err, errlen, "--strategy must be one of: %s", decider_router_strategies());
        return IPL_E_INVAL;
    }
    if (self->cpu != -1) return ipl_cpu_check((int)self->cpu, err, errlen);
    return IPL_OK;
}

void decider_options_server_config(const decider_options_t *self, decider_server_config_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    decider_router_config_defaults(&cfg->router);
    cfg->listen = self->listen;
    cfg->state_sub = self->state_sub;
    cfg->state_snapshot = self->state_snapshot;
    cfg->policy_sub = self->policy_sub;
    cfg->policy_req = self->policy_req;
    cfg->router.default_strategy = self->strategy;
    cfg->router.prefill_tokens_per_s = self->prefill_tps;
    cfg->router.running_cost_s = self->running_cost_ms / 1000.0;
    cfg->router.base_s = self->base_ms / 1000.0;
    cfg->router.temperature_s = self->temperature_s;
    cfg->router.max_queue = (uint64_t)self->max_queue;
    cfg->router.load_gate = (uint64_t)self->load_gate;
    cfg->router.optimistic_ttl_ms = (uint64_t)self->ttl_ms;
    cfg->router.stale_ms = (uint64_t)self->stale_ms;
    cfg->router.seed = (uint64_t)self->seed;
    cfg->router.observe_window_ms = (uint64_t)self->observe_window_ms;
    cfg->snapshot_timeout_ms = (uint64_t)self->snapshot_timeout_ms;
    cfg->silence_ms = (uint64_t)self->silence_ms;
    cfg->busy_poll_us = (uint64_t)self->busy_poll_us;
    cfg->max_buffered = 1000000;
    cfg->id = self->id;
    cfg->peer_pub = self->peer_pub;
    cfg->peers = self->peers;
    cfg->tokenizer = self->tokenizer;
}
