#!/usr/bin/env python3
"""bench_limits — per-tenant limits held cluster-wide (docs/limits.md): 3 gateway replicas
gossiping their usage, 3 tenants sending well over their limits through all three at once.

    bench/bench_limits.py [--seconds 120] [--warmup 15]      (tools/run-bench --only limits)

Each tenant has a token limit: `in-a` and `in-b` inputTokensPerMinute, `out-c`
outputTokensPerMinute. Its clients send back to back, round robin over the gateways, pausing
20 ms after a 429. The tokens admitted (usage of the 200 answers: prompt tokens for an input
limit, completion tokens for an output limit) are counted from --warmup on, when the buckets'
initial burst (a minute's worth) is spent, and compared with the limit × the time:

    ratelimit_error_pct              the largest |admitted/min − limit| / limit, in %
    ratelimit_error_pct_<tenant>     the same per tenant
    ratelimit_tokens_per_min_<tenant>  what was admitted per minute
    ratelimit_refused_pct            refused requests / requests, all tenants

One JSON object per line on stdout ({"name", "value", "unit"}), like the C benchmarks; progress
on stderr. Target (issue 17): ratelimit_error_pct ≤ 5 over a 2-minute run.
"""
import argparse
import json
import os
import sys
import threading
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "integration"))
from lib.harness import Stack, http_json, wait_until, zmq_endpoint  # noqa: E402

LIMITS = {"in-a": ("input", 30000), "in-b": ("input", 60000), "out-c": ("output", 6000)}
CLIENTS_PER_TENANT = 3
HEADER = "x-bench-tenant"

POLICY = """apiVersion: inferplane.io/v1alpha1
kind: InferenceWorkerSet
metadata: {name: sims}
spec:
  model: sim-model
  blockSize: 16
  workers:
%s
---
apiVersion: inferplane.io/v1alpha1
kind: InferencePool
metadata: {name: chat}
spec:
  model: sim-model
  targets: [{workerSet: sims}]
---
apiVersion: inferplane.io/v1alpha1
kind: InferencePolicy
metadata: {name: limits}
spec:
  limits:
    - {tenant: in-a, inputTokensPerMinute: 30000}
    - {tenant: in-b, inputTokensPerMinute: 60000}
    - {tenant: out-c, outputTokensPerMinute: 6000}
"""

# prompts of a few lengths (~60 to ~500 tokens)
WORDS = ("the quick brown fox jumps over the lazy dog while a rate limiter counts every "
         "token that passes ").split()
PROMPTS = [" ".join(WORDS[i % len(WORDS)] for i in range(n)) for n in (50, 120, 250, 400)]


def log(msg):
    print("bench_limits: " + msg, file=sys.stderr, flush=True)


class Tenant:
    def __init__(self, name, kind, limit):
        self.name, self.kind, self.limit = name, kind, limit
        self.lock = threading.Lock()
        self.tokens = 0  # admitted after the warmup
        self.requests = self.refused = self.errors = 0


def client(t, gws, k, start, warmup, end):
    i = k
    while time.monotonic() < end:
        api = gws[i % len(gws)].api
        i += 1
        body = {"model": "sim-model", "max_tokens": 20,
                "messages": [{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}]}
        try:
            st, _, doc = http_json("POST", api + "/v1/chat/completions", body,
                                   {HEADER: t.name}, timeout=10)
        except OSError:
            st, doc = 0, None
        now = time.monotonic()
        with t.lock:
            t.requests += 1
            if st == 200 and doc and now >= start + warmup:
                u = doc.get("usage") or {}
                t.tokens += u.get("prompt_tokens" if t.kind == "input" else
                                  "completion_tokens", 0)
            elif st == 429:
                t.refused += 1
            elif st != 200:
                t.errors += 1
        if st != 200:
            time.sleep(0.02)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=120)
    ap.add_argument("--warmup", type=float, default=15)
    a = ap.parse_args()
    st = Stack(None)
    try:
        sims = [st.start_sim("w%d" % i, extra=["--time-scale", "50"]) for i in range(2)]
        workers = "\n".join('    - {name: w%d, url: "%s", kvEvents: "%s", replay: "%s"}'
                            % (i, s.url, s.kv, s.replay) for i, s in enumerate(sims))
        st.write("policy/p.yaml", POLICY % workers)
        eps = [zmq_endpoint() for _ in range(3)]

        def args(i):
            return ["--trusted-tenant-header", HEADER, "--limits-listen", eps[i],
                    "--limits-peers", ",".join(eps), "--limits-id", "bench-gw%d" % i]
        gws = [st.start_chain(os.path.join(st.dir, "policy"), args(0))]
        gws += [st.add_gateway(gws[0], args(i)) for i in (1, 2)]
        for g in gws:
            wait_until(lambda: http_json("POST", g.api + "/v1/chat/completions",
                                         {"model": "sim-model", "max_tokens": 1,
                                          "messages": [{"role": "user", "content": "hi"}]})[0]
                       == 200, 20, 0.2, "the first request")
        tenants = [Tenant(n, k, l) for n, (k, l) in LIMITS.items()]
        log("3 gateways, %d tenants × %d clients, %.0f s (warmup %.0f s)"
            % (len(tenants), CLIENTS_PER_TENANT, a.seconds, a.warmup))
        start = time.monotonic()
        end = start + a.seconds
        threads = [threading.Thread(target=client, args=(t, gws, k, start, a.warmup, end))
                   for t in tenants for k in range(CLIENTS_PER_TENANT)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(a.seconds + 30)
        minutes = (a.seconds - a.warmup) / 60.0
        figs, worst, requests, refused = [], 0.0, 0, 0
        for t in tenants:
            rate = t.tokens / minutes
            err = abs(rate - t.limit) / t.limit * 100
            worst = max(worst, err)
            requests += t.requests
            refused += t.refused
            figs.append({"name": "ratelimit_tokens_per_min_" + t.name.replace("-", "_"),
                         "value": round(rate, 1), "unit": "tokens/min"})
            figs.append({"name": "ratelimit_error_pct_" + t.name.replace("-", "_"),
                         "value": round(err, 2), "unit": "%"})
            log("%s: %s limit %d/min, admitted %.0f/min (%.2f%% off), %d requests, %d refused, "
                "%d errors" % (t.name, t.kind, t.limit, rate, err, t.requests, t.refused,
                               t.errors))
        figs.append({"name": "ratelimit_refused_pct",
                     "value": round(100.0 * refused / max(requests, 1), 1), "unit": "%"})
        figs.append({"name": "ratelimit_error_pct", "value": round(worst, 2), "unit": "%"})
        for f in figs:
            print(json.dumps(f), flush=True)
        if any(t.errors > t.requests // 100 for t in tenants):
            log("more than 1% of the requests failed otherwise than 429")
            return 1
        return 0
    finally:
        st.stop_all()


if __name__ == "__main__":
    sys.exit(main())
