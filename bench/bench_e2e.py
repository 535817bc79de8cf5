#!/usr/bin/env python3
"""bench_e2e — the published benchmark end to end through the real processes (issue 15).

    bench/bench_e2e.py [--repeats R] [--time-scale S] [--docs docs/benchmarks.md]
                       (tools/run-bench --only e2e; `make bench`)
    bench/bench_e2e.py --quick           a short version (`make bench-quick`, make test)

The stack as a user runs it, every process separate, on ephemeral loopback ports
(integration/lib/harness.py): 2 pools (InferenceWorkerSets) x 3 simulated workers
(build/inferplane-sim --profile l40s-27b-fp8 --time-scale S) behind one InferencePool, the
policy service, aggregator, collector, decider, exporter and gateway; the load comes from
build/inferplane-bench (GuideLLM's metrics) through the gateway. The three workloads of the
published benchmark, shaped as the cluster simulator's defaults (docs/clustersim.md,
"Workloads"), run for every strategy:

    shared-prefix      Poisson 2 req/s; one of 20 prefixes of 8,192 tokens + 512 own; 128 out
    multi-turn         conversations at 0.4/s, 5 turns; turn 1 = one of 20 system prompts of
                       2,000 tokens + 400; each next turn resends the history + 400 new
                       tokens, an exponential think time (mean 5 s) after the answer; 200 out
    no-prefix          Poisson 1.5 req/s; 8,704 own tokens; 128 out
    multi-turn-closed  the multi-turn conversations from a fixed number of users in a closed
                       loop (GuideLLM's concurrent profile), for the throughput target; no
                       cluster-simulator counterpart (its conversations arrive open-loop)

Every time is simulated: the workers run S times faster than real time, so the bench's rates
are multiplied by S and its think times and TTFT SLO divided by S, and what it measures is
multiplied back (times x S, rates / S). docs/benchmarks.md ("End-to-end comparison") says what
that preserves and what it does not; the gateway's own per-request cost, which does not scale,
is measured first (e2e_gateway_added_ttft_ms).

Strategies are switched by rewriting the InferencePool's `strategy` (the policy service reloads
its directory; the decider follows), and before every cell the workers' prefix caches are
emptied (POST /reset_prefix_cache, vLLM's; the decider's index is then empty too) so that no
strategy inherits another's warm cache. Repeats use seeds seed, seed+1, ...: within a repeat
every strategy gets the same requests at the same times (a paired comparison, as the cluster
simulator's). The cluster simulator then runs the same traces (shared prefix, no prefix; drawn
here, replayed by both) or its own conversations of the same shape (multi-turn).

Output: one JSON object per figure and line on stdout, {"name", "value", "unit", "strategy",
"workload"} (simulated seconds unless the unit says otherwise); progress on stderr. With
--docs FILE the generated part of that file's "End-to-end comparison" section (between
<!-- bench_e2e:begin --> and <!-- bench_e2e:end -->) is rewritten, and the plots go to --img.
Exit status 0 when every cell ran (whatever the figures), 1 otherwise.
"""
import argparse
import datetime
import json
import math
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "integration"))
from lib.harness import Stack, binary, free_port, http, http_json, wait_until  # noqa: E402
from lib.harness import zmq_endpoint  # noqa: E402

MODEL = "sim-model"
PROFILE = "l40s-27b-fp8"
STRATEGIES = ["random", "round-robin", "least-loaded", "gie-default", "dynamo-cost",
              "sglang-cache-aware", "prefix-hash", "ttft"]
SLO_S = 1.0  # the TTFT SLO of goodput, as the cluster simulator's --slo-ttft-s

# The workloads in simulated units (docs/clustersim.md's defaults). `requests` counts requests
# (multi-turn: conversations x turns); `rate` is requests per second (conversations arrive at
# rate / turns, as in the cluster simulator). `trace`: the arrivals, prefix groups and lengths
# are drawn here into a JSONL trace that both inferplane-bench (replayed S times faster) and the
# cluster simulator run, so that the two see the very same requests; multi-turn cannot be a
# trace (a turn follows the previous answer), so both draw their own conversations.
# `strategies`: only these (None: every one).
WORKLOADS = {
    "shared-prefix": dict(rate=2.0, requests=600, prefix_count=20, prefix_tokens=8192,
                          prompt_tokens=512, output_tokens=128, turns=1, think_s=0,
                          trace=True, strategies=None),
    "multi-turn": dict(rate=2.0, requests=600, prefix_count=20, prefix_tokens=2000,
                       prompt_tokens=400, output_tokens=200, turns=5, think_s=5.0, trace=False,
                       strategies=None),
    "no-prefix": dict(rate=1.5, requests=600, prefix_count=0, prefix_tokens=0,
                      prompt_tokens=8704, output_tokens=128, turns=1, think_s=0, trace=True,
                      strategies=None),
    "multi-turn-closed": dict(users=48, seconds=240, prefix_count=20, prefix_tokens=2000,
                              prompt_tokens=400, output_tokens=200, turns=5, think_s=5.0,
                              trace=False, strategies=["random", "least-loaded", "ttft"]),
}
CLUSTERSIM_FLAGS = {  # multi-turn's shape -> the cluster simulator's flags for it
    "rate": "--rate", "requests": "--requests", "prefix_count": "--prefix-groups",
    "prefix_tokens": "--prefix-tokens", "output_tokens": "--output-tokens", "turns": "--turns",
    "think_s": "--think-s",
}
# The figures per cell: (name, unit, the better direction)
# unsimulated_ms: the client's mean TTFT minus the workers' own (vllm:time_to_first_token_
# seconds, simulated time from the engine's arrival), in real ms: what the scale does not
# shrink (the bench, the gateway, the decider, HTTP, the workers' tokenization), under load.
FIGURES = [("ttft_p50_s", "s", -1), ("ttft_p90_s", "s", -1), ("ttft_p99_s", "s", -1),
           ("e2e_p50_s", "s", -1), ("e2e_p99_s", "s", -1), ("itl_p50_ms", "ms", -1),
           ("goodput_rpm", "req/min", 1), ("throughput_rpm", "req/min", 1),
           ("cache_hit_ratio", "", 1), ("errors", "", -1), ("incomplete", "", -1),
           ("ttft_mean_s", "s", -1), ("worker_ttft_mean_s", "s", -1),
           ("unsimulated_ms", "ms", -1)]
# The targets, ttft against random: (figure, workload, how, threshold)
#   reduction: 100 * (1 - ttft / random) >= threshold;  ratio: ttft / random >= threshold
TARGETS = [("ttft_p50_s", "shared-prefix", "reduction", 95),
           ("goodput_rpm", "shared-prefix", "ratio", 7.4),
           ("e2e_p50_s", "shared-prefix", "reduction", 45),
           ("ttft_p50_s", "multi-turn", "reduction", 65),
           ("e2e_p50_s", "multi-turn", "reduction", 32),
           ("throughput_rpm", "multi-turn-closed", "ratio", 3.5),
           ("ttft_p50_s", "no-prefix", "reduction", 0)]
SHORT = {"shared-prefix": "sp", "multi-turn": "mt", "no-prefix": "np",
         "multi-turn-closed": "mtc"}


def log(msg):
    print("bench_e2e: " + msg, file=sys.stderr, flush=True)


def emit(name, value, unit, strategy="", workload=""):
    """One figure as a JSON line on stdout; a figure that could not be measured (NaN: e.g. a
    rendered run without the workers' side) is left out rather than printed as invalid JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return
    print(json.dumps({"name": name, "value": round(value, 6) if isinstance(value, float)
                      else value, "unit": unit, "strategy": strategy, "workload": workload}),
          flush=True)


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return [float(x) for x in f.read().split()[:3]]
    except (OSError, ValueError):
        return [-1.0, -1.0, -1.0]


def machine():
    model = "?"
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        with open("/proc/meminfo") as f:
            mem = int(f.readline().split()[1]) / 1048576
    except (OSError, ValueError, IndexError):
        mem = 0
    return {"cpu": model, "cores": os.cpu_count() or 0, "memory_gib": round(mem, 1)}


def cpu_seconds(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            x = f.read().rsplit(")", 1)[1].split()
        return (int(x[11]) + int(x[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


# ---- the stack -----------------------------------------------------------------------------


def policy_yaml(pools, strategy):
    """One InferenceWorkerSet per pool of workers, one InferencePool over all of them."""
    lines = []
    for k, sims in enumerate(pools):
        lines += ["apiVersion: inferplane.io/v1alpha1", "kind: InferenceWorkerSet",
                  "metadata: {name: pool-%d}" % k, "spec:", "  model: %s" % MODEL,
                  "  blockSize: 16", "  workers:"]
        for s in sims:
            lines += ["    - name: %s" % s.worker_name, "      url: %s" % s.url,
                      "      kvEvents: %s" % s.kv, "      replay: %s" % s.replay]
        lines.append("---")
    lines += ["apiVersion: inferplane.io/v1alpha1", "kind: InferencePool",
              "metadata: {name: chat}", "spec:", "  model: %s" % MODEL,
              "  strategy: %s" % strategy, "  targets:"]
    lines += ["    - workerSet: pool-%d" % k for k in range(len(pools))]
    return "\n".join(lines) + "\n"


class E2EStack:
    """The processes of one benchmark run. Times the decider and collector are told are
    divided by the time scale, so that they mean in simulated time what their defaults mean
    in real time (the scrape period, the predictor's prior, the optimistic TTL)."""

    def __init__(self, pools, workers_per_pool, scale, strategy):
        self.scale = scale
        self.st = Stack(None)
        self.strategy = None
        try:
            self._start(pools, workers_per_pool, strategy)
        except BaseException:
            self.close(failed=True)
            raise

    def _svc(self, name, args, ready=True):
        port = free_port()
        p = self.st.start(name, list(args) + ["--admin-listen", "127.0.0.1:%d" % port,
                                              "--log-level", "info"], admin=False, ready=False)
        p.admin_url = "http://127.0.0.1:%d" % port
        if ready:
            p.wait_ready(timeout=30)
        return p

    def _start(self, npools, wpp, strategy):
        S = self.scale
        self.sims = []
        for i in range(npools * wpp):
            self.sims.append(self.st.start_sim(
                "w%d" % i, extra=["--time-scale", "%g" % S, "--profile", PROFILE,
                                  "--seed", str(i + 1)]))
        self.pools = [self.sims[k * wpp:(k + 1) * wpp] for k in range(npools)]
        self.policy_path = self.st.write("policy/cluster.yaml", policy_yaml(self.pools, strategy))
        ep = {k: zmq_endpoint() for k in ("agg_pull", "agg_pub", "agg_snap", "pol_pub",
                                          "pol_rep", "decider", "exp_pull")}
        pol = ["--policy-sub", ep["pol_pub"], "--policy-req", ep["pol_rep"]]
        self.procs = {}
        self.procs["policy"] = self._svc("policy", ["--dir", os.path.dirname(self.policy_path),
                                                    "--pub", ep["pol_pub"], "--rep",
                                                    ep["pol_rep"]])
        self.procs["aggregator"] = self._svc("aggregator", ["--pull", ep["agg_pull"], "--pub",
                                                            ep["agg_pub"], "--snapshot",
                                                            ep["agg_snap"]])
        # the collector's default 100 ms scrape period, in simulated time, where the
        # collector allows it (10 ms at least: 10 x S simulated ms above a time scale of 10)
        self.scrape_ms = max(10, int(round(100 / S)))
        self.procs["collector"] = self._svc("collector", ["--aggregator", ep["agg_pull"],
                                                          "--scrape-interval-ms",
                                                          str(self.scrape_ms)] + pol)
        # the predictor's prior (40 ms base, 3,000 prompt tokens/s, 5 ms per running request)
        # and the optimistic TTL (2 s), in simulated time; calibration then learns the rest
        self.optimistic_ttl_ms = max(1, int(round(2000 / S)))
        self.procs["decider"] = self._svc("decider", [
            "--listen", ep["decider"], "--state-sub", ep["agg_pub"], "--state-snapshot",
            ep["agg_snap"], "--seed", "7", "--base-ms", "%g" % (40 / S),
            "--prefill-tokens-per-s", "%g" % (3000 * S), "--running-cost-ms", "%g" % (5 / S),
            "--optimistic-ttl-ms", str(self.optimistic_ttl_ms)] + pol)
        self.procs["exporter"] = self._svc("exporter", ["--pull", ep["exp_pull"]])
        port = free_port()
        self.procs["gateway"] = self._svc("gateway", ["--listen", "127.0.0.1:%d" % port,
                                                      "--decider", ep["decider"], "--exporter",
                                                      ep["exp_pull"]] + pol)
        self.api = "http://127.0.0.1:%d" % port
        self.decider_url = self.procs["decider"].admin_url
        self._wait_policy(strategy, 30)
        self.wait_idle(30)

    def _decider_strategy(self):
        status, _, doc = http_json("GET", self.decider_url + "/debug/policy", timeout=2)
        if status != 200 or not doc:
            return None
        pools = [p for p in doc.get("pools", []) if p.get("name") == "chat"]
        return pools[0].get("strategy") if pools else None

    def _wait_policy(self, strategy, timeout):
        wait_until(lambda: self._decider_strategy() == strategy, timeout,
                   what="the decider to run strategy %s" % strategy)
        self.strategy = strategy

    def set_strategy(self, strategy):
        """Rewrites the InferencePool's strategy (atomically: the policy service reloads the
        directory on inotify) and waits until the decider runs it."""
        if strategy == self.strategy:
            return
        tmp = self.policy_path + ".tmp"
        with open(tmp, "w") as f:
            f.write(policy_yaml(self.pools, strategy))
        os.replace(tmp, self.policy_path)
        self._wait_policy(strategy, 20)

    def _state(self):
        status, _, doc = http_json("GET", self.decider_url + "/debug/state", timeout=2)
        return doc if status == 200 else None

    def wait_idle(self, timeout=30):
        """Every worker reported up and idle by the decider's replica, its index empty."""
        def idle():
            s = self._state()
            if not s or not s.get("synced"):
                return False
            ws = s.get("workers", [])
            return (len(ws) == len(self.sims) and
                    all(w.get("health") == "up" and not w.get("running") and
                        not w.get("waiting") for w in ws) and
                    not s.get("index", {}).get("memberships"))
        wait_until(idle, timeout, interval=0.1, what="idle workers and an empty decider index")
        # The ledger's optimistic blocks expire within 1.5 TTL (they are dropped lazily, at
        # the next decision, so /debug/state still counts them): wait that long.
        time.sleep(1.5 * self.optimistic_ttl_ms / 1000 + 0.05)

    def reset_caches(self):
        """Empties every worker's prefix cache (vLLM's POST /reset_prefix_cache: an
        AllBlocksCleared event follows), then waits until the decider's index is empty."""
        def running():
            n = 0
            for s in self.sims:
                _, _, raw = http("GET", s.url + "/metrics", timeout=5)
                for line in raw.decode("utf-8", "replace").splitlines():
                    if line.startswith(("vllm:num_requests_running",
                                        "vllm:num_requests_waiting")):
                        n += float(line.rsplit(" ", 1)[1])
            return n
        wait_until(lambda: running() == 0, 60, interval=0.1, what="the workers to drain")
        for s in self.sims:
            status, _, raw = http("POST", s.url + "/reset_prefix_cache", timeout=10)
            if status != 200:
                raise RuntimeError("%s: POST /reset_prefix_cache answered %d: %s"
                                   % (s.worker_name, status, raw[:200]))
        self.wait_idle(30)

    def pids(self):
        out = {k: p.proc.pid for k, p in self.procs.items()}
        out.update({s.worker_name: s.proc.pid for s in self.sims})
        return out

    def close(self, failed=False):
        for p in reversed(self.st.procs):
            p.stop()
        bad = [p.name for p in self.st.procs if p.proc.returncode not in (0, None, -15)]
        if failed or bad:
            log("process logs kept in %s%s" % (self.st.dir, (" (exited badly: %s)"
                                                             % ", ".join(bad)) if bad else ""))
        else:
            shutil.rmtree(self.st.dir, ignore_errors=True)
        return not bad


# ---- one cell: a workload under a strategy --------------------------------------------------


def make_trace(path, w, seed):
    """Draws an open-loop workload's requests into a JSONL trace (docs/clustersim.md's format):
    Poisson arrivals at w["rate"], a uniform prefix group each (none without prefixes)."""
    rng = random.Random(seed * 1000003 + w["prompt_tokens"])
    t = 0.0
    with open(path, "w") as f:
        for _ in range(w["requests"]):
            t += rng.expovariate(w["rate"])
            r = {"arrival_s": round(t, 6), "prompt_tokens": w["prefix_tokens"] + w["prompt_tokens"],
                 "output_tokens": w["output_tokens"], "prefix_group": None}
            if w["prefix_count"]:
                r["prefix_group"] = rng.randrange(w["prefix_count"])
                r["prefix_tokens"] = w["prefix_tokens"]
            f.write(json.dumps(r) + "\n")
    return path


def bench_args(w, scale, seed, trace="TRACE"):
    """inferplane-bench's arguments for workload `w` at time scale `scale`."""
    a = ["--seed", str(seed), "--slo-ttft-ms", "%g" % (SLO_S * 1000 / scale),
         "--request-timeout", "%g" % max(60.0, 600.0 / scale)]
    if w["trace"]:
        return ["--trace", trace, "--profile", "replay", "--trace-speed", "%g" % scale] + a
    a += ["--prompt-tokens", str(w["prompt_tokens"]), "--output-tokens", str(w["output_tokens"])]
    if w.get("prefix_count"):
        a += ["--prefix-count", str(w["prefix_count"]), "--prefix-tokens",
              str(w["prefix_tokens"])]
    if w["turns"] > 1:
        a += ["--turns", str(w["turns"]), "--think-ms",
              "exponential:%g" % (w["think_s"] * 1000 / scale)]
    if "users" in w:  # closed loop for a fixed (simulated) time
        a += ["--profile", "concurrent", "--streams", str(w["users"]), "--max-seconds",
              "%g" % (w["seconds"] / scale)]
    else:
        a += ["--profile", "poisson", "--rate", "%g" % (w["rate"] / w["turns"] * scale)]
        if w["turns"] > 1:
            a += ["--max-conversations", str(max(1, w["requests"] // w["turns"]))]
        else:
            a += ["--max-requests", str(w["requests"])]
    return a


def figures_of(report, scale):
    """The cell's figures in simulated units from an inferplane-bench report."""
    b = report["benchmarks"][0]
    m = b["metrics"]
    tot = m["request_totals"]
    ttft = m["time_to_first_token_ms"]["successful"]
    lat = m["request_latency"]["successful"]
    itl = m["inter_token_latency_ms"]["successful"]
    dur = max(b["duration"], 1e-9)
    good = b["inferplane"].get("goodput", {}).get("requests_meeting_slo", 0)
    cache = b["inferplane"].get("cache", {}).get("hit_ratio") or 0.0
    return {
        "ttft_p50_s": ttft["percentiles"]["p50"] * scale / 1000,
        "ttft_p90_s": ttft["percentiles"]["p90"] * scale / 1000,
        "ttft_p99_s": ttft["percentiles"]["p99"] * scale / 1000,
        "e2e_p50_s": lat["percentiles"]["p50"] * scale,
        "e2e_p99_s": lat["percentiles"]["p99"] * scale,
        "itl_p50_ms": itl["percentiles"]["p50"] * scale,
        # per minute of simulated time: the window (first request sent, last one ended)
        "goodput_rpm": good / (dur * scale) * 60,
        "throughput_rpm": tot["successful"] / (dur * scale) * 60,
        "cache_hit_ratio": cache,
        "errors": tot["errored"],
        "incomplete": tot["incomplete"],
        "ttft_mean_s": ttft["mean"] * scale / 1000,
    }


def trace_path(out_dir, name, seed):
    return os.path.join(out_dir, "trace-%s-%d.jsonl" % (name, seed))


def worker_ttft(stack):
    """(sum, count) of every worker's vllm:time_to_first_token_seconds (simulated seconds)."""
    tot, n = 0.0, 0.0
    for s in stack.sims:
        _, _, raw = http("GET", s.url + "/metrics", timeout=5)
        for line in raw.decode("utf-8", "replace").splitlines():
            if line.startswith("vllm:time_to_first_token_seconds_sum"):
                tot += float(line.rsplit(" ", 1)[1])
            elif line.startswith("vllm:time_to_first_token_seconds_count"):
                n += float(line.rsplit(" ", 1)[1])
    return tot, n


def run_cell(stack, name, w, strategy, seed, out_dir, timeout):
    stack.set_strategy(strategy)
    stack.reset_caches()
    wt0 = worker_ttft(stack)
    path = os.path.join(out_dir, "%s-%s-%d.json" % (name, strategy, seed))
    # every request in the report (a few hundred KB): kept with --keep for a closer look
    cmd = [binary("inferplane-bench"), "--target", stack.api, "--output", path, "--quiet",
           "--sample-requests", "100000",
           "--label", "strategy=%s,workload=%s" % (strategy, name)] + \
        bench_args(w, stack.scale, seed, trace_path(out_dir, name, seed))
    pids = stack.pids()
    c0 = {k: cpu_seconds(p) for k, p in pids.items()}
    t0 = time.monotonic()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=timeout)
    wall = time.monotonic() - t0
    if p.returncode != 0 or not os.path.exists(path):
        raise RuntimeError("inferplane-bench exited %d: %s" % (p.returncode, p.stderr[-2000:]))
    with open(path) as f:
        report = json.load(f)
    fig = figures_of(report, stack.scale)
    wt1 = worker_ttft(stack)
    n = wt1[1] - wt0[1]
    fig["worker_ttft_mean_s"] = (wt1[0] - wt0[0]) / n if n > 0 else float("nan")
    fig["unsimulated_ms"] = (fig["ttft_mean_s"] - fig["worker_ttft_mean_s"]) * 1000 / stack.scale
    cpu = sum(cpu_seconds(p) - c0[k] for k, p in pids.items())
    fig["_wall_s"] = wall
    fig["_cpu_s"] = cpu + report["benchmarks"][0]["inferplane"].get("bench_cpu_seconds", 0)
    fig["_report"] = path
    return fig


# ---- the gateway's own cost -----------------------------------------------------------------


def overhead(stack, out_dir, requests, rounds=3):
    """TTFT of the same warm, cached request sent directly to a worker and through the
    gateway, one at a time, the two paths taking turns for `rounds` rounds: what the gateway,
    the decider and the extra hop add per request in real milliseconds, for the shared-prefix
    prompt (8,704 tokens, which the gateway tokenizes and hashes) and a short one. The
    cache-aware strategy sends every repeat to the worker that holds it, as the direct path
    does. Returns {label: (direct p50 ms, gateway p50 ms)}."""
    stack.set_strategy("ttft")
    stack.reset_caches()
    res = {}
    for label, data in (("8k", ["--prefix-count", "1", "--prefix-tokens", "8192",
                                "--prompt-tokens", "512"]),
                        ("short", ["--prompt-tokens", "64"])):
        ttfts = {"direct": [], "gateway": []}
        for r in range(rounds):
            for path, target in (("direct", stack.sims[0].url), ("gateway", stack.api)):
                out = os.path.join(out_dir, "overhead-%s-%s-%d.json" % (label, path, r))
                # the same seed: the same prompts, cached by the first round on every path
                cmd = [binary("inferplane-bench"), "--target", target, "--output", out,
                       "--quiet", "--profile", "synchronous", "--max-requests", str(requests),
                       "--output-tokens", "4", "--seed", "5", "--sample-requests",
                       "100000"] + data
                subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               text=True, timeout=120, check=True)
                with open(out) as f:
                    reqs = json.load(f)["benchmarks"][0]["requests"]["successful"]
                if r > 0:  # the first round warms the caches (and the connections)
                    ttfts[path] += [q["time_to_first_token_ms"] for q in reqs]
        direct, gw = statistics.median(ttfts["direct"]), statistics.median(ttfts["gateway"])
        res[label] = (direct, gw)
        log("overhead, %s prompt: TTFT p50 direct %.2f ms, through the gateway %.2f ms "
            "(%d requests each)" % (label, direct, gw, len(ttfts["direct"])))
    return res


# ---- the cluster simulator ------------------------------------------------------------------


def clustersim(names, strategies, seeds, npools, wpp, out_dir, sample_ms):
    """The cluster simulator's figures for the same shapes, {(workload, strategy): {figure:
    [value per seed]}}: the same traces (shared-prefix, no-prefix), or its own multi-turn
    conversations drawn with the same seeds and at least three of them (its spread is then
    the draw's). sample_ms: its load-sample period in simulated ms (the live collector's)."""
    out = {}
    for name in names:
        w = WORKLOADS[name]
        if "users" in w:
            continue
        strats = [s for s in strategies if w["strategies"] is None or s in w["strategies"]]
        runs = seeds if w["trace"] else sorted(set(seeds) | {seeds[0] + k for k in range(3)})
        for seed in runs:
            cmd = [binary("inferplane-clustersim"), "--json", "--strategies", ",".join(strats),
                   "--seed", str(seed), "--pools", str(npools), "--workers-per-pool", str(wpp),
                   "--pool-profiles", ",".join([PROFILE] * npools),
                   "--slo-ttft-s", "%g" % SLO_S, "--sample-period-ms", str(int(sample_ms))]
            if w["trace"]:
                cmd += ["--trace", trace_path(out_dir, name, seed)]
            else:
                cmd += ["--workload", name, "--suffix-tokens", str(w["prompt_tokens"])]
                for k, flag in CLUSTERSIM_FLAGS.items():
                    cmd += [flag, "%g" % w[k]]
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               timeout=600)
            if p.returncode != 0:
                raise RuntimeError("clustersim exited %d: %s" % (p.returncode, p.stderr[-500:]))
            for line in p.stdout.splitlines():
                try:
                    f = json.loads(line)
                except ValueError:
                    continue
                key = (name, f["strategy"])
                out.setdefault(key, {}).setdefault(f["name"], []).append(f["value"])
    return out


# ---- aggregation, targets ------------------------------------------------------------------


def mean_se(values):
    if not values:
        return float("nan"), float("nan")
    m = statistics.fmean(values)
    se = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else float("nan")
    return m, se


def paired_se(a, b):
    """Standard error of the mean paired difference a - b (the same seeds)."""
    d = [x - y for x, y in zip(a, b)]
    return statistics.stdev(d) / math.sqrt(len(d)) if len(d) > 1 else 0.0


def evaluate(cells, names):
    """The issue's targets from the mean figures: [(label, value, threshold, met, detail)],
    and the comparisons where ttft is behind another strategy by more than one standard
    error (median TTFT, p99 TTFT, goodput)."""
    rows = []
    for fig, name, how, thr in TARGETS:
        t, r = cells.get((name, "ttft")), cells.get((name, "random"))
        if not t or not r:
            continue
        tv, rv = statistics.fmean(t[fig]), statistics.fmean(r[fig])
        if how == "reduction":
            v = 100 * (1 - tv / rv) if rv else float("nan")
            met = v >= thr if thr > 0 else v > 0
            label = "%s %s, ttft vs random: reduction" % (name, fig)
            rows.append((label, v, "%s %g%%" % (">=" if thr > 0 else ">", thr), met,
                         "ttft %.3g, random %.3g" % (tv, rv),
                         "e2e_%s_%s_reduction_pct" % (SHORT[name], fig.rsplit("_", 1)[0])))
        else:
            v = tv / rv if rv else float("inf")
            rows.append(("%s %s, ttft / random" % (name, fig), v, ">= %gx" % thr, v >= thr,
                         "ttft %.3g, random %.3g" % (tv, rv),
                         "e2e_%s_%s_ratio" % (SHORT[name], fig.rsplit("_", 1)[0])))
    t, ll = cells.get(("no-prefix", "ttft")), cells.get(("no-prefix", "least-loaded"))
    if t and ll:
        v = statistics.fmean(t["ttft_p50_s"]) / statistics.fmean(ll["ttft_p50_s"])
        rows.append(("no-prefix ttft_p50_s, ttft / least-loaded", v, "<= 1.03x", v <= 1.03,
                     "", "e2e_np_ttft_p50_vs_least_loaded"))
    behind = []
    for name in names:
        t = cells.get((name, "ttft"))
        if not t:
            continue
        for (wn, strat), other in sorted(cells.items()):
            if wn != name or strat == "ttft":
                continue
            for fig, sign in (("ttft_p50_s", -1), ("ttft_p99_s", -1), ("goodput_rpm", 1)):
                d = statistics.fmean(t[fig]) - statistics.fmean(other[fig])
                se = paired_se(t[fig], other[fig])
                if d * sign < 0 and abs(d) > se:
                    behind.append((name, strat, fig, d, se))
    return rows, behind


# ---- the docs -------------------------------------------------------------------------------

BEGIN, END = "<!-- bench_e2e:begin -->", "<!-- bench_e2e:end -->"


def fmt(v, se=None, digits=3):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    s = ("%%.%dg" % digits) % v if abs(v) < 1000 else "%.0f" % v
    if se is not None and not math.isnan(se):
        s += " ± " + (("%%.%dg" % 2) % se)
    return s


def pct_diff(a, b):
    return 100 * (a - b) / b if b else float("nan")


def corrected_p50(cell, scale):
    """The live median TTFT less the cell's mean unsimulated latency × scale (what the time
    scale added; a mean taken off a median: an estimate), simulated seconds."""
    u = [x for x in cell["unsimulated_ms"] if math.isfinite(x)]
    if not u:
        return float("nan")
    return statistics.fmean(cell["ttft_p50_s"]) - statistics.fmean(u) * scale / 1000


def render(ctx):
    """The generated Markdown (between the markers)."""
    L = []
    S = ctx["scale"]
    L.append("")
    L.append("Generated by `%s` on %s (%s UTC, %.0f s). Machine: `%s`, %d cores, %.1f GiB; "
             "1-minute load average %s at the start and %s at the end (other developers' work "
             "shares the cores). Source: `%s`. %d repeat%s (seeds %s); time scale %g; "
             "%s." % (ctx["command"], ctx["date"], ctx["time"], ctx["seconds"],
                      ctx["machine"]["cpu"], ctx["machine"]["cores"],
                      ctx["machine"]["memory_gib"], fmt(ctx["load0"][0]), fmt(ctx["load1"][0]),
                      ctx["version"], ctx["repeats"], "" if ctx["repeats"] == 1 else "s",
                      ", ".join(map(str, ctx["seeds"])), S,
                      "± is one standard error over the repeats" if ctx["repeats"] > 1 else
                      "one repeat, so no standard errors"))
    L.append("")
    oh = ctx["overhead"]
    if oh:
        L.append("**The gateway's own cost at this scale** (TTFT p50 of the same warm request, "
                 "one at a time, real milliseconds): 8,704-token prompt %.2f ms direct, %.2f ms "
                 "through the gateway (**+%.2f ms** real = +%.0f ms simulated); 64-token prompt "
                 "%.2f ms direct, %.2f ms through the gateway (+%.2f ms = +%.0f ms simulated)."
                 % (oh["8k"][0], oh["8k"][1], oh["8k"][1] - oh["8k"][0],
                    (oh["8k"][1] - oh["8k"][0]) * S, oh["short"][0], oh["short"][1],
                    oh["short"][1] - oh["short"][0], (oh["short"][1] - oh["short"][0]) * S))
        L.append("")
    L.append("### Targets (ttft against random)")
    L.append("")
    L.append("| target | measured | wanted | | |")
    L.append("|---|---|---|---|---|")
    for label, v, want, met, detail, fig_name in ctx["targets"]:
        unit = "%" if fig_name.endswith("_pct") else "x"
        L.append("| %s (`%s`) | %s%s | %s | %s | %s |"
                 % (label, fig_name, fmt(v), unit, want, "met" if met else "**missed**",
                    detail))
    behind = ctx["behind"]
    L.append("| ttft behind another strategy by more than one standard error (median TTFT, "
             "p99 TTFT, goodput; every workload) | %d | 0 | %s | %s |"
             % (len(behind), "met" if not behind else "**missed**",
                "; ".join("%s %s %s %+.3g (se %.2g)" % b for b in behind) or "none"))
    L.append("")
    cs = ctx["clustersim"]
    for name in ctx["workloads"]:
        w = WORKLOADS[name]
        L.append("### %s" % name)
        L.append("")
        if w["trace"]:
            L.append("%d requests drawn into a trace per repeat (Poisson at %g req/s%s, %d "
                     "prompt tokens, %d out), replayed by `inferplane-bench %s`; the cluster "
                     "simulator runs the same trace."
                     % (w["requests"], w["rate"], (", one of %d prefixes of %d tokens + %d own"
                                                   % (w["prefix_count"], w["prefix_tokens"],
                                                      w["prompt_tokens"]))
                        if w["prefix_count"] else "", w["prefix_tokens"] + w["prompt_tokens"],
                        w["output_tokens"], " ".join(bench_args(w, S, ctx["seeds"][0]))))
        else:
            L.append("`inferplane-bench %s`%s" % (
                " ".join(bench_args(w, S, ctx["seeds"][0])),
                "; the cluster simulator draws its own conversations of the same shape "
                "(`--workload %s`, seeds %s)" % (name, ", ".join(
                    str(x) for x in sorted(set(ctx["seeds"]) |
                                           {ctx["seeds"][0] + k for k in range(3)})))
                if "users" not in w else "; no cluster-simulator counterpart (its "
                "conversations arrive open-loop)"))
        L.append("")
        head = ("| strategy | TTFT p50 | p90 | p99 | e2e p50 | e2e p99 | ITL p50 (ms) | goodput "
                "(req/min) | throughput (req/min) | cache hit | errors | unsimulated (real ms) |")
        L.append(head)
        L.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for strat in ctx["strategies"]:
            c = ctx["cells"].get((name, strat))
            if not c:
                continue
            row = [("**%s**" % strat) if strat == "ttft" else strat]
            for fig in ("ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "e2e_p50_s", "e2e_p99_s",
                        "itl_p50_ms", "goodput_rpm", "throughput_rpm"):
                m, se = mean_se(c[fig])
                row.append(fmt(m, se if fig in ("ttft_p50_s", "goodput_rpm", "ttft_p99_s")
                               else None))
            row.append("%.1f%%" % (100 * statistics.fmean(c["cache_hit_ratio"])))
            row.append("%d" % sum(c["errors"]) + (" (+%d incomplete)" % sum(c["incomplete"])
                                                 if sum(c["incomplete"]) else ""))
            row.append(fmt(mean_se(c["unsimulated_ms"])[0], digits=2))
            L.append("| " + " | ".join(row) + " |")
        L.append("")
        if "users" not in w:
            L += compare_table(ctx, name, cs, S)
    L.append("Seconds of simulated time unless stated (measured × %g); goodput counts TTFT ≤ "
             "%g s. Plots (the first repeat): " % (S, SLO_S) +
             ", ".join("[%s](img/%s)" % (p, p) for p in ctx["plots"]) + ".")
    L.append("")
    for p in ctx["plots"]:
        L.append("![%s](img/%s)" % (p, p))
    L.append("")
    return "\n".join(L)


def compare_table(ctx, name, cs, scale):
    """Live against the cluster simulator for one workload: median TTFT (with the seeds' range
    for the simulator), the gap, the gap once the unsimulated latency × S is taken off the live
    median, and the decode time (median end-to-end − median TTFT) of both."""
    L = ["Beside the cluster simulator (%s):" % (
             "the same traces" if WORKLOADS[name]["trace"] else "its own conversations"),
         "",
         "| strategy | TTFT p50 live | clustersim | live vs clustersim | less unsimulated × S "
         "| decode live / clustersim | goodput live / clustersim |",
         "|---|---|---|---|---|---|---|"]
    for strat in ctx["strategies"]:
        c, k = ctx["cells"].get((name, strat)), cs.get((name, strat), {})
        if not c or not k.get("ttft_p50_s"):
            continue
        v = k["ttft_p50_s"]
        cm, lm = statistics.fmean(v), statistics.fmean(c["ttft_p50_s"])
        rng = (" (%s–%s)" % (fmt(min(v)), fmt(max(v)))) if len(v) > 1 else ""
        cor = corrected_p50(c, scale)
        dec_l = statistics.fmean(c["e2e_p50_s"]) - lm
        dec_c = statistics.fmean(k["e2e_p50_s"]) - cm if k.get("e2e_p50_s") else float("nan")
        g = k.get("goodput_rpm")
        L.append("| %s | %s | %s%s | %+.0f%% | %s | %s / %s (%+.0f%%) | %s / %s |" % (
            ("**%s**" % strat) if strat == "ttft" else strat, fmt(lm), fmt(cm), rng,
            pct_diff(lm, cm), ("%+.0f%%" % pct_diff(cor, cm)) if math.isfinite(cor) else "–",
            fmt(dec_l), fmt(dec_c), pct_diff(dec_l, dec_c),
            fmt(statistics.fmean(c["goodput_rpm"])), fmt(statistics.fmean(g)) if g else "–"))
    L.append("")
    return L


def write_docs(path, text):
    with open(path) as f:
        doc = f.read()
    i, j = doc.find(BEGIN), doc.find(END)
    if i < 0 or j < i:
        raise RuntimeError("%s has no %s ... %s block to rewrite" % (path, BEGIN, END))
    doc = doc[:i + len(BEGIN)] + "\n" + text + "\n" + doc[j:]
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(doc)
    os.replace(tmp, path)


def plots(reports, img_dir, scale):
    """tools/inferplane-bench/plot of the first repeat's reports: one TTFT plot per workload
    and one goodput plot, copied to img_dir as e2e-*.png. Returns the file names."""
    tool = os.path.join(ROOT, "tools", "inferplane-bench", "plot")
    made = []
    by_workload = {}
    for (name, _), path in reports.items():
        by_workload.setdefault(name, []).append(path)
    with tempfile.TemporaryDirectory(prefix="ipl-e2e-plot-") as tmp:
        for name, paths in sorted(by_workload.items()):
            d = os.path.join(tmp, name)
            p = subprocess.run([tool, "--out", d, "--time-scale", "%g" % scale, "--log-y",
                                "--title", "%s (simulated, time scale %g)" % (name, scale)]
                               + sorted(paths), capture_output=True, text=True, timeout=120)
            if p.returncode != 0:
                log("plot failed: %s" % p.stderr.strip())
                return made
            for src, dst in (("ttft.png", "e2e-ttft-%s.png" % name),
                             ("goodput.png", "e2e-goodput-%s.png" % name)):
                if name == "no-prefix" and src == "goodput.png":
                    continue  # every strategy's is 0: an 8.7k-token prefill alone is > 1 s
                shutil.copyfile(os.path.join(d, src), os.path.join(img_dir, dst))
                made.append(dst)
    return made


# ---- main -----------------------------------------------------------------------------------


def shapes(names, nworkers, quick, requests):
    """The workloads as run: the published shapes for 6 workers, the load (and the prefixes)
    per worker kept for fewer; --quick shortens every cell."""
    out = {}
    f = nworkers / 6.0
    for n in names:
        w = dict(WORKLOADS[n])
        if "rate" in w:
            w["rate"] *= f
            if requests:
                w["requests"] = requests
            elif quick:
                w["requests"] = {"shared-prefix": 60, "multi-turn": 40}.get(n, 20)
            else:
                w["requests"] = int(round(w["requests"] * f))
            w["requests"] = max(w["turns"], w["requests"] - w["requests"] % w["turns"])
        else:
            w["users"] = max(1, int(round(w["users"] * f)))
            if quick:
                w["seconds"] = 60
        if w.get("prefix_count"):
            w["prefix_count"] = max(1, int(round(w["prefix_count"] * f)))
            if quick and n == "shared-prefix":
                # 12 prefixes of 8.7k tokens: more than one worker holds (7), half of them fit
                # one: the published shape's property, for two workers
                w["prefix_count"] = 12
        out[n] = w
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help="1 worker per pool, a few seconds per cell, random/least-loaded/ttft, "
                         "three workloads (make bench-quick)")
    ap.add_argument("--time-scale", type=float,
                    help="simulated seconds per real second (12; --quick 50)")
    ap.add_argument("--repeats", type=int, default=1, help="runs of every cell (seeds)")
    ap.add_argument("--seed", type=int, default=1, help="the first repeat's seed (1)")
    ap.add_argument("--requests", type=int, help="requests per open-loop cell (600)")
    ap.add_argument("--strategies", help="comma-separated (default: all eight)")
    ap.add_argument("--workloads", help="comma-separated (default: all four; --quick three)")
    ap.add_argument("--pools", type=int, default=2)
    ap.add_argument("--workers-per-pool", type=int, help="3 (--quick 1)")
    ap.add_argument("--no-clustersim", action="store_true")
    ap.add_argument("--docs", metavar="FILE", help="rewrite the generated part of this file")
    ap.add_argument("--img", metavar="DIR", default=os.path.join(ROOT, "docs", "img"),
                    help="where --docs puts the plots (docs/img)")
    ap.add_argument("--keep", metavar="DIR", help="keep the traces and bench reports here")
    ap.add_argument("--render", metavar="DIR",
                    help="run nothing: print and write (--docs) a kept run's figures again")
    a = ap.parse_args()
    # SIGTERM (a test's timeout, tools/run-bench's watchdog): unwind, so that the stack's
    # processes are stopped by the finally blocks rather than left behind
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if a.render:
        return render_kept(a.render, a.docs, a.img)
    t_start = time.monotonic()
    wpp = a.workers_per_pool or (1 if a.quick else 3)
    scale = a.time_scale or (50.0 if a.quick else 12.0)
    strategies = (a.strategies.split(",") if a.strategies else
                  ["random", "least-loaded", "ttft"] if a.quick else STRATEGIES)
    names = (a.workloads.split(",") if a.workloads else
             ["shared-prefix", "multi-turn", "no-prefix"] if a.quick else list(WORKLOADS))
    for n in names:
        if n not in WORKLOADS:
            ap.error("unknown workload %r (known: %s)" % (n, ", ".join(WORKLOADS)))
    for s in strategies:
        if s not in STRATEGIES + ["oracle"]:
            ap.error("unknown strategy %r" % s)
    if a.repeats < 1 or not scale > 0:
        ap.error("--repeats must be >= 1 and --time-scale > 0")
    nworkers = a.pools * wpp
    workloads = shapes(names, nworkers, a.quick, a.requests)
    WORKLOADS.update(workloads)  # the docs and the cluster simulator read the shapes run
    seeds = [a.seed + r for r in range(a.repeats)]
    keep = a.keep or tempfile.mkdtemp(prefix="ipl-e2e-")
    os.makedirs(keep, exist_ok=True)
    for name, w in workloads.items():
        if w["trace"]:
            for seed in seeds:
                make_trace(trace_path(keep, name, seed), w, seed)
    load0 = loadavg()
    log("%d workers (%d pools), time scale %g, strategies %s, workloads %s, %d repeat(s); "
        "load average %.2f; traces and reports in %s"
        % (nworkers, a.pools, scale, ",".join(strategies), ",".join(names), a.repeats, load0[0],
           keep))
    stack = E2EStack(a.pools, wpp, scale, strategies[0])
    ok = True
    cells, first_reports, worker_side = {}, {}, {}
    cpu_total = [0.0, 0.0]
    oh = None
    try:
        log("stack up in %.1f s" % (time.monotonic() - t_start))
        oh = overhead(stack, keep, 8 if a.quick else 30, 2 if a.quick else 4)
        for label, (direct, gw) in oh.items():
            emit("e2e_gateway_added_ttft_ms_%s" % label, gw - direct, "ms")
            emit("e2e_gateway_added_ttft_sim_ms_%s" % label, (gw - direct) * scale, "ms")
        for r, seed in enumerate(seeds):
            for name in names:
                w = workloads[name]
                strats = [x for x in strategies
                          if w["strategies"] is None or x in w["strategies"]]
                # rotate the order each repeat: drifts of the machine's load spread evenly
                order = strats[r % len(strats):] + strats[:r % len(strats)]
                for strat in order:
                    try:
                        fig = run_cell(stack, name, w, strat, seed, keep,
                                       timeout=120 if a.quick else 900)
                    except (RuntimeError, AssertionError, OSError,
                            subprocess.SubprocessError) as e:
                        log("%s / %s (seed %d) FAILED: %s" % (name, strat, seed, e))
                        ok = False
                        continue
                    c = cells.setdefault((name, strat), {k: [] for k, _, _ in FIGURES})
                    for k, _, _ in FIGURES:
                        c[k].append(fig[k])
                    cpu_total[0] += fig["_wall_s"]
                    cpu_total[1] += fig["_cpu_s"]
                    first_reports.setdefault((name, strat), fig["_report"])
                    worker_side["%s|%s|%d" % (name, strat, seed)] = {
                        k: fig[k] for k in ("worker_ttft_mean_s", "unsimulated_ms")}
                    log("%-17s %-18s seed %d: TTFT p50 %7.3f s p99 %7.2f, e2e p50 %6.2f, "
                        "goodput %6.1f/min, cache %4.1f%%, errors %d, unsimulated %.1f ms "
                        "(%.1f s, %.1f CPU-s, load %.1f)"
                        % (name, strat, seed, fig["ttft_p50_s"], fig["ttft_p99_s"],
                           fig["e2e_p50_s"], fig["goodput_rpm"], 100 * fig["cache_hit_ratio"],
                           fig["errors"], fig["unsimulated_ms"], fig["_wall_s"], fig["_cpu_s"],
                           loadavg()[0]))
    finally:
        ok = stack.close(failed=not ok) and ok
    now = datetime.datetime.now(datetime.timezone.utc)
    version = subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty"],
                             capture_output=True, text=True).stdout.strip() or "?"
    meta = {"scale": scale,
            "command": " ".join(["bench/bench_e2e.py"] + [x.replace(ROOT + os.sep, "")
                                                          for x in sys.argv[1:]]),
            "date": now.strftime("%Y-%m-%d"), "time": now.strftime("%H:%M"),
            "seconds": time.monotonic() - t_start, "machine": machine(), "load0": load0,
            "load1": loadavg(), "version": version, "repeats": a.repeats, "seeds": seeds,
            "overhead": oh, "workloads": names, "strategies": strategies, "pools": a.pools,
            "wpp": wpp, "shapes": workloads, "scrape_ms": stack.scrape_ms,
            "cores_used": cpu_total[1] / max(cpu_total[0], 1e-9), "worker_side": worker_side}
    with open(os.path.join(keep, "run.json"), "w") as f:
        json.dump(meta, f, indent=1)
    ok = report(meta, cells, first_reports, keep, a.docs if ok else None, a.img,
                not a.no_clustersim) and ok
    if not a.keep:
        shutil.rmtree(keep, ignore_errors=True)
    return 0 if ok else 1


def cells_from(keep, meta):
    """The cells of a kept run, rebuilt from its reports (--render)."""
    cells, first = {}, {}
    for seed in meta["seeds"]:
        for name in meta["workloads"]:
            for strat in meta["strategies"]:
                path = os.path.join(keep, "%s-%s-%d.json" % (name, strat, seed))
                if not os.path.exists(path):
                    continue
                with open(path) as f:
                    fig = figures_of(json.load(f), meta["scale"])
                side = meta.get("worker_side", {}).get("%s|%s|%d" % (name, strat, seed), {})
                fig["worker_ttft_mean_s"] = side.get("worker_ttft_mean_s", float("nan"))
                fig["unsimulated_ms"] = side.get("unsimulated_ms", float("nan"))
                c = cells.setdefault((name, strat), {k: [] for k, _, _ in FIGURES})
                for k, _, _ in FIGURES:
                    c[k].append(fig[k])
                first.setdefault((name, strat), path)
    return cells, first


def report(meta, cells, first_reports, keep, docs, img, with_clustersim):
    """Prints the figures, runs the cluster simulator beside, evaluates the targets and, with
    `docs`, writes the tables and plots. Returns False when the cluster simulator failed."""
    ok = True
    scale, names, strategies = meta["scale"], meta["workloads"], meta["strategies"]
    seeds = meta["seeds"]
    units = {k: u for k, u, _ in FIGURES}
    for (name, strat), c in sorted(cells.items()):
        for k, vals in c.items():
            m, se = mean_se(vals)
            emit(k, m, units[k], strat, name)
            if len(vals) > 1 and k in ("ttft_p50_s", "ttft_p99_s", "goodput_rpm", "e2e_p50_s"):
                emit(k + "_se", se, units[k], strat, name)
    cs, gaps = {}, []
    if with_clustersim:
        try:
            cs = clustersim(names, strategies, seeds, meta["pools"], meta["wpp"], keep,
                            meta["scrape_ms"] * scale)
        except (RuntimeError, OSError, subprocess.SubprocessError) as e:
            log("clustersim FAILED: %s" % e)
            ok = False
        for (name, strat), c in sorted(cs.items()):
            if strat not in strategies:
                continue
            for k in ("ttft_p50_s", "ttft_p99_s", "e2e_p50_s", "goodput_rpm"):
                if k in c:
                    emit("clustersim_" + k, statistics.fmean(c[k]), units[k], strat, name)
            live = cells.get((name, strat))
            if live and c.get("ttft_p50_s"):
                gap = pct_diff(statistics.fmean(live["ttft_p50_s"]),
                               statistics.fmean(c["ttft_p50_s"]))
                gaps.append(abs(gap))
                emit("e2e_vs_clustersim_ttft_p50_pct", gap, "%", strat, name)
                emit("e2e_vs_clustersim_ttft_p50_corrected_pct",
                     pct_diff(corrected_p50(live, scale), statistics.fmean(c["ttft_p50_s"])),
                     "%", strat, name)
        if gaps:
            emit("e2e_vs_clustersim_ttft_p50_max_abs_pct", max(gaps), "%")
    targets, behind = evaluate(cells, names)
    for label, v, want, met, detail, fig_name in targets:
        emit(fig_name, v, "%" if fig_name.endswith("_pct") else "x", "ttft", "")
    emit("e2e_ttft_behind_by_more_than_se", len(behind), "", "ttft", "")
    emit("e2e_wall_s", meta["seconds"], "s")
    emit("e2e_stack_cpu_cores", meta["cores_used"], "cores")
    log("done in %.0f s (load average %.2f at the end); the stack and the bench used %.2f cores "
        "while the cells ran" % (meta["seconds"], meta["load1"][0], meta["cores_used"]))
    for label, v, want, met, detail, _ in targets:
        log("target %-55s %8.3g (%s) %s" % (label, v, want, "met" if met else "MISSED"))
    for b in behind:
        log("ttft behind: %s %s %s by %+.3g (se %.2g)" % b)
    if docs:
        made = plots(first_reports, img, scale) if first_reports else []
        ctx = dict(meta, targets=targets, behind=behind, clustersim=cs, cells=cells,
                   plots=made)
        write_docs(docs, render(ctx))
        log("wrote %s and %d plots in %s" % (docs, len(made), img))
    return ok


def render_kept(keep, docs, img):
    """--render DIR: the figures, tables and plots of a kept run (--keep DIR), again."""
    with open(os.path.join(keep, "run.json")) as f:
        meta = json.load(f)
    meta["overhead"] = {k: tuple(v) for k, v in (meta.get("overhead") or {}).items()}
    WORKLOADS.update(meta["shapes"])
    cells, first = cells_from(keep, meta)
    return 0 if report(meta, cells, first, keep, docs, img, True) else 1


if __name__ == "__main__":
    sys.exit(main())
