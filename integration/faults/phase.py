"""One fault under steady load, measured (issue 20's fault suite):

    t0          two inferplane-bench processes start, one per gateway, replaying a trace at a
                constant rate (one of PREFIX_GROUPS shared prefixes and a suffix of its own per
                request), and a third straight to the control worker (fleet.py); the probe's
                seeds are sent (probe.py)
    t0+lead     the "before" window: TTFT, cache hits and probe rounds of the healthy cluster
    t_fault     the fault is injected (catalogue.py) and held hold_s
    t_heal      it ends (the process started again, SIGCONT, the fault disarmed); probe
                rounds back to back from here
    t_heal+5    the "after" window, after_s long; the gateways' circuit breakers are read
    end         the benches end: every request ended, or was cut by --request-timeout

and what it found: per gateway, what became of every request (lib.faults.outcome); how long
routing took to be cache-aware again; TTFT and cache hits before and after; the longest
request; the processes that died. request_problems() and routing_problems() are the suite's
assertions, as sentences.
"""
import json
import os
import random
import re
import threading
import time

from lib.faults import Bench, count_outcomes, median
from lib.harness import http

from faults.catalogue import Ctx
from faults.fleet import TIMEOUT_MS
from faults.probe import Probe, recovery

BLOCK_TOKENS = 64   # tokens per trace hash id (the bench's --block-tokens)
PREFIX_BLOCKS = 16  # 1,024 tokens of shared prefix per request
PREFIX_GROUPS = 48  # distinct shared prefixes, the same in every phase


class Plan:
    """The shape of a run: short() for `make test`, soak() for `make soak`."""

    def __init__(self, **kw):
        self.rate = 20.0          # requests per second through each gateway
        self.output_tokens = 32
        self.lead_s = 0.8
        self.before_s = 2.0
        self.recover_s = 5.0      # routing back within this long (the bound)
        self.after_s = 2.0        # the after window: [t_heal + recover_s, + after_s]
        self.within = 0.10        # after the fault, TTFT and cache hits within 10% of before
        self.request_timeout_s = 10.0
        self.scale = 1.0          # the faults' hold times are multiplied by this
        self.seeds = 24           # the probe's prompts from before the fault
        self.__dict__.update(kw)

    @classmethod
    def short(cls):
        return cls()

    @classmethod
    def soak(cls):
        return cls(rate=25.0, before_s=10.0, after_s=10.0, scale=2.0)


def write_trace(path, plan, seconds, rng, first_id, rate):
    """A Mooncake-style trace for inferplane-bench --profile replay: `rate` requests a second
    for `seconds`, each PREFIX_BLOCKS blocks of one shared prefix and one block of its own
    (hash ids from first_id up, unique in the run)."""
    n = int(rate * seconds)
    with open(path, "w") as f:
        for k in range(n):
            g = rng.randrange(PREFIX_GROUPS)
            ids = list(range(g * PREFIX_BLOCKS, (g + 1) * PREFIX_BLOCKS)) + [first_id + k]
            f.write(json.dumps({"timestamp": int(round(1000.0 * k / rate)),
                                "input_length": BLOCK_TOKENS * len(ids),
                                "output_length": plan.output_tokens, "hash_ids": ids}) + "\n")
    return n


def start_load(fleet, plan, seconds, workdir, tag, first_id):
    """One bench per gateway, and one straight to the control worker at one worker's share of
    the load; returns [(key, Bench)] ("gw0", "gw1", "control")."""
    rng = random.Random(tag)
    out = []
    share = 2.0 / len(fleet.sims)
    for g, (key, url, rate) in enumerate((("gw0", fleet.procs["gw0"].api, 1.0),
                                          ("gw1", fleet.procs["gw1"].api, 1.0),
                                          ("control", fleet.control.url, share))):
        path = os.path.join(workdir, "trace-%s-%s.jsonl" % (tag, key))
        write_trace(path, plan, seconds, rng, first_id + g * 100000, rate * plan.rate)
        out.append((key, Bench(url, ["--profile", "replay", "--trace", path, "--block-tokens",
                                     str(BLOCK_TOKENS), "--request-timeout",
                                     str(plan.request_timeout_s)],
                               hang_s=plan.request_timeout_s, label=key)))
    return out


def finish_load(benches, timeout):
    reqs = []
    for _, b in benches:
        reqs += b.wait(timeout=timeout)
    return reqs


def warm(fleet, plan, workdir, seconds=4.0):
    """Load without a fault, so that the first phase starts on warm prefix caches (the shared
    prefixes are the same in every phase)."""
    finish_load(start_load(fleet, plan, seconds, workdir, "warm", 100000),
                seconds + plan.request_timeout_s + 30)


def _sleep_until(t):
    d = t - time.time()
    if d > 0:
        time.sleep(d)


def breakers(fleet):
    """{gateway: {worker: 1}} of the circuit breakers that are open (the worker avoided),
    from each gateway's /metrics; half-open ones (2) wait for the next request to probe."""
    out = {}
    for key in ("gw0", "gw1"):
        try:
            text = http("GET", fleet.procs[key].admin_url + "/metrics", timeout=2)[2].decode()
        except OSError as e:
            out[key] = {"?": repr(e)[:80]}
            continue
        open_ = {t: int(float(v)) for t, v in re.findall(
            r'^inferplane_gateway_breaker_state\{target="([^"]+)"\} (\S+)$', text, re.M)
            if float(v) == 1}
        if open_:
            out[key] = open_
    return out


def served(fleet):
    """{worker: requests it completed (vllm:request_success_total, all reasons)} now; a worker
    that does not answer is left out."""
    out = {}
    for w in fleet.workers:
        try:
            text = http("GET", w.url + "/metrics", timeout=2)[2].decode()
        except OSError:
            continue
        out[w.worker_name] = sum(float(v) for v in re.findall(
            r"^vllm:request_success_total(?:\{[^}]*\})? (\S+)$", text, re.M))
    return out


def _share(a, b):
    """Each worker's share of the requests completed between samples a and b (a worker
    restarted in between, whose counter went down, counts from 0)."""
    d = {k: b[k] - a.get(k, 0) if b[k] >= a.get(k, 0) else b[k] for k in b}
    total = sum(d.values())
    return {k: round(v / total, 2) for k, v in sorted(d.items())} if total else {}


class ReadyWatch(threading.Thread):
    """Records when each process a fault started again first answers its /readyz (a sim's
    /health) with 200."""

    def __init__(self, ctx, until):
        super().__init__(daemon=True)
        self.ctx, self.until, self.ready_at = ctx, until, {}

    def run(self):
        while time.time() < self.until:
            for key in list(self.ctx.restarted):
                p = self.ctx.fleet.procs[key]
                if key in self.ready_at:
                    continue
                try:
                    path = "/health" if p.name == "sim" else "/readyz"
                    if http("GET", p.admin_url + path, timeout=0.5)[0] == 200:
                        self.ready_at[key] = time.time()
                except OSError:
                    pass
            time.sleep(0.05)


def settle(fleet, timeout=30.0):
    """Waits (at most `timeout`) until every process answers ready and no gateway avoids a
    worker, so that a phase starts on a healthy cluster whatever the one before left. A
    breaker moves only when requests come, so a request goes through each gateway every
    round. Returns the seconds it took."""
    t0 = time.time()
    body = {"model": fleet.model, "prompt": "settling", "max_tokens": 1}
    while time.time() < t0 + timeout:
        try:
            ok = not fleet.dead() and all(
                http("GET", p.admin_url + ("/health" if p.name == "sim" else "/readyz"),
                     timeout=1)[0] == 200 for p in fleet.procs.values())
        except OSError:
            ok = False
        if ok and not breakers(fleet):
            break
        for gw in fleet.gateways:
            try:
                http("POST", gw.api + "/v1/completions", body, timeout=5)
            except OSError:
                pass
        time.sleep(0.2)
    return round(time.time() - t0, 2)


def run_phase(fleet, plan, fault, index, workdir):
    """Runs one fault (catalogue.Fault) on a settled cluster; returns what it found."""
    settle_s = settle(fleet)
    ctx = Ctx(fleet, plan)
    hold = fault.hold_s * plan.scale
    after_s = max(plan.after_s, fault.after_s or 0)
    span = plan.lead_s + plan.before_s + hold + plan.recover_s + after_s + 0.3
    t0 = time.time()
    benches = start_load(fleet, plan, span, workdir, "%02d-%s" % (index, fault.name),
                         1000000 * (index + 1))
    probe = Probe(fleet, seed=index)
    probe.seed(plan.seeds)
    _sleep_until(t0 + plan.lead_s)
    t_fault = t0 + plan.lead_s + plan.before_s
    _sleep_until(t_fault - plan.before_s)
    counts = [served(fleet)]
    before, failed_before = [], []
    while time.time() < t_fault - 0.6 or not before:
        ok, detail = probe.round()
        before.append((time.time(), ok))
        if not ok and len(failed_before) < 3:
            failed_before.append(detail)
    _sleep_until(t_fault)
    t_fault = time.time()
    counts.append(served(fleet))
    fault.inject(ctx)
    _sleep_until(t_fault + hold)
    fault.heal(ctx)
    t_heal = time.time()
    after_lo, t_end = t_heal + plan.recover_s, t_heal + plan.recover_s + after_s
    watch = ReadyWatch(ctx, t_end)
    watch.start()
    rounds, failed_rounds, open_breakers = [], [], None
    while time.time() < t_end:
        t = time.time()
        if open_breakers is None and t >= after_lo:
            open_breakers = breakers(fleet)
            counts.append(served(fleet))
        ok, detail = probe.round(skip_workers=ctx.cache_lost, after=True)
        rounds.append((t, ok))
        if not ok and len(failed_rounds) < 4:
            failed_rounds.append((round(t - t_heal, 2), detail))
    counts.append(served(fleet))
    watch.join()
    reqs = finish_load(benches, span + plan.request_timeout_s + 30)
    control = [r for r in reqs if r["target"] == "control"]
    reqs = [r for r in reqs if r["target"] != "control"]
    for key in ctx.down:
        ctx.down[key][1] = watch.ready_at.get(key, t_end)
    seeds = probe.new_results()
    t_route, t_kv = recovery(rounds), recovery(seeds)
    res = {
        "fault": fault.name, "what": fault.what % ("%.1f s" % hold),
        "control_plane": fault.control_plane, "t0": t0, "t_fault": t_fault, "t_heal": t_heal,
        "events": [(round(t - t0, 3), w) for t, w in ctx.events],
        "cut_at": ctx.cut_at, "down": ctx.down, "restarted": ctx.restarted,
        "ready_after_s": {k: round(v - t_heal, 3) for k, v in watch.ready_at.items()},
        "requests": reqs,
        "probe_before": [ok for _, ok in before],
        "probe_after": [ok for t, ok in rounds + seeds if t >= after_lo],
        "probe_failures": failed_rounds, "probe_before_failures": failed_before,
        "new_seeds": [(round(t - t_heal, 2), ok) for t, ok in seeds],
        "route_recovery_s": _since(t_route, t_heal), "kv_recovery_s": _since(t_kv, t_heal),
        "recovery_s": None if t_route is None or t_kv is None else _since(max(t_route, t_kv),
                                                                           t_heal),
        "breakers_after": open_breakers or {},
        "share_before": _share(counts[0], counts[1]),
        "share_after": _share(counts[2], counts[3]) if len(counts) == 4 else {},
        "dead": fleet.dead(),
        "before": window(reqs, t_fault - plan.before_s, t_fault),
        "after": window(reqs, after_lo, t_end),
        "during": window(reqs, t_fault, t_heal),
        "control_before": window(control, t_fault - plan.before_s, t_fault),
        "control_after": window(control, after_lo, t_end),
        "gateways": {k: count_outcomes([r for r in reqs if r["target"] == k])
                     for k in ("gw0", "gw1")},
        "total": count_outcomes(reqs),
        "max_latency_s": round(max((r["request_latency"] for r in reqs), default=0), 3),
        "rss": fleet.rss(), "settle_s": settle_s, "within": plan.within,
    }
    res["stalled"] = fault.stalls(res, TIMEOUT_MS / 1000.0) if fault.stalls else []
    return res


def _since(t, t_heal):
    return None if t is None else round(max(0.0, t - t_heal), 2)


def window(reqs, lo, hi):
    """Median TTFT (ms) and cache-hit ratio of the complete requests started in [lo, hi)."""
    w = [r for r in reqs if lo <= r["request_start_time"] < hi and r["outcome"] == "complete"]
    prompt = sum(r["prompt_tokens"] or 0 for r in w)
    cached = sum(r["cached_tokens"] or 0 for r in w)
    return {"n": len(w), "ttft_ms": median([r["time_to_first_token_ms"] for r in w]),
            "hit_ratio": cached / prompt if prompt else None}


# ---- the checks --------------------------------------------------------------------------

def excused(r, res):
    """Whether a request's failure is one the fault could not avoid: a stream under way (its
    200 and first event were sent: the gateway sends them only once the worker's first event
    came) on a process killed or stopped under it, ending with an error event; anything in
    flight through a gateway killed under it, or sent to it while it was down. A request that
    had received nothing when its worker failed is not excused: the gateway retries it on
    another worker (docs/failover.md)."""
    start, end = r["request_start_time"], r["request_end_time"]
    down = res["down"].get(r["target"])  # [killed, ready again] of this request's gateway
    if down and (start <= down[0] <= end or down[0] <= start <= down[1]):
        return True
    return (r["outcome"] == "clear_error" and r["http_status"] == 200
            and any(start <= t <= end for t in res["cut_at"]))


def request_problems(res, plan):
    """What went wrong for clients: lost, hung, failed or stalled requests, dead processes."""
    out = []
    reqs = res["requests"]
    for key, c in res["gateways"].items():
        if c["sent"] < 10:
            out.append("%s: only %d requests sent" % (key, c["sent"]))
    hung = [r for r in reqs if r["outcome"] == "hung"]
    if hung:
        out.append("%d requests hung (no end within --request-timeout %.0f s): %s"
                   % (len(hung), plan.request_timeout_s, _few(hung, res)))
    lost = [r for r in reqs if r["outcome"] == "lost" and not excused(r, res)]
    if lost:
        out.append("%d requests lost (%d before their first byte): no answer and no error: %s"
                   % (len(lost), sum(1 for r in lost if not r["got_bytes"]), _few(lost, res)))
    failed = [r for r in reqs if r["outcome"] == "clear_error" and not excused(r, res)]
    if failed:
        why = ("the data path does not need the process" if res["control_plane"]
               else "they were not in flight on what failed")
        out.append("%d requests failed with an error although %s: %s"
                   % (len(failed), why, _few(failed, res)))
    stalled = res["stalled"]
    if stalled:
        out.append("%d requests waited on the hung worker past the gateways' %d ms first-byte "
                   "and stream-idle timeouts: %s" % (len(stalled), TIMEOUT_MS,
                                                     _few(stalled, res)))
    if res["dead"]:
        out.append("processes exited: %s" % res["dead"])
    return out


def routing_problems(res, plan):
    """What went wrong for routing: not cache-aware again within recover_s of the fault's end,
    a healthy worker still avoided then, TTFT or cache hits more than `within` worse."""
    out = []
    if not all(res["probe_before"]):
        out.append("the cache probe failed before the fault: %s; failed rounds: %s"
                   % (res["probe_before"], json.dumps(res["probe_before_failures"])[:1500]))
    if res["recovery_s"] is None or res["recovery_s"] > plan.recover_s:
        out.append("routing not cache-aware again within %.0f s of the fault's end: probe "
                   "rounds from %s s, prompts stored after the fault from %s s; new seeds "
                   "(s after the end, routed by cache): %s; failed rounds: %s"
                   % (plan.recover_s, res["route_recovery_s"], res["kv_recovery_s"],
                      res["new_seeds"], json.dumps(res["probe_failures"])[:2000]))
    after = res["probe_after"]
    if after and sum(after) < (1 - plan.within) * len(after):
        out.append("%d of %d probe checks failed in the after window"
                   % (len(after) - sum(after), len(after)))
    if res["breakers_after"]:
        out.append("%.0f s after the fault's end gateways still avoided workers (circuit "
                   "breaker open): %s" % (plan.recover_s, res["breakers_after"]))
    b, a = res["before"], res["after"]
    if not b["n"] or not a["n"]:
        out.append("no complete request in the %s window" % ("before" if not b["n"] else "after"))
        return out
    raw = a["ttft_ms"] / b["ttft_ms"]
    ratio, machine = ttft_ratio(res)
    # A machine shared with others changes speed from second to second: when the control
    # worker (no fault touches it) got more than `within` faster or slower between the two
    # windows, they cannot be compared (figures() says so). Otherwise the cluster must not
    # be worse by more than `within`, neither as measured nor net of the control's change.
    if abs(machine - 1) <= plan.within and raw > 1 + plan.within and ratio > 1 + plan.within:
        out.append("median TTFT %.1f ms in the after window vs %.1f ms before: %+.0f%% "
                   "(%+.0f%% net of the machine's own change: the control worker's median "
                   "TTFT %.1f -> %.1f ms); the bound is +%d%%"
                   % (a["ttft_ms"], b["ttft_ms"], 100 * (raw - 1), 100 * (ratio - 1),
                      res["control_before"]["ttft_ms"], res["control_after"]["ttft_ms"],
                      round(100 * plan.within)))
    if a["hit_ratio"] is not None and b["hit_ratio"] is not None and \
            a["hit_ratio"] < (1 - plan.within) * b["hit_ratio"]:
        out.append("cache-hit ratio %.3f in the after window vs %.3f before"
                   % (a["hit_ratio"], b["hit_ratio"]))
    return out


def ttft_ratio(res):
    """(after/before median TTFT of the cluster divided by the control worker's, the
    control's after/before): how much slower the cluster got beyond the machine."""
    cb, ca = res["control_before"]["ttft_ms"], res["control_after"]["ttft_ms"]
    machine = ca / cb if cb and ca else 1.0
    return res["after"]["ttft_ms"] / res["before"]["ttft_ms"] / machine, machine


def _few(rs, res, n=4):
    return "; ".join("%s started at t_fault%+.2fs, took %.2fs (first token %.2fs), %s (%s, "
                     "http %s)" % (r["target"], r["request_start_time"] - res["t_fault"],
                                   r["request_latency"],
                                   (r.get("time_to_first_token_ms") or 0) / 1000.0,
                                   r["outcome"], r["error"], r["http_status"])
                     for r in rs[:n])


def figures(res):
    """The phase's figures (JSON-able), for docs/faults.md."""
    g = res["gateways"]
    return {
        "fault": res["fault"], "what": res["what"],
        "sent": res["total"]["sent"], "per_gateway_sent": {k: v["sent"] for k, v in g.items()},
        "clear_error": res["total"]["clear_error"], "lost": res["total"]["lost"],
        "hung": res["total"]["hung"],
        "lost_excused": sum(1 for r in res["requests"]
                            if r["outcome"] == "lost" and excused(r, res)),
        "per_gateway": {k: {o: v[o] for o in ("complete", "clear_error", "lost", "hung")}
                        for k, v in g.items()},
        "recovery_s": res["recovery_s"], "route_recovery_s": res["route_recovery_s"],
        "kv_recovery_s": res["kv_recovery_s"], "ready_after_s": res["ready_after_s"],
        "breakers_after": res["breakers_after"],
        "share_before": res["share_before"], "share_after": res["share_after"],
        "ttft_before_ms": _r(res["before"]["ttft_ms"]),
        "ttft_after_ms": _r(res["after"]["ttft_ms"]),
        "hit_before": _r(res["before"]["hit_ratio"], 3),
        "hit_after": _r(res["after"]["hit_ratio"], 3),
        "control_ttft_before_ms": _r(res["control_before"]["ttft_ms"]),
        "control_ttft_after_ms": _r(res["control_after"]["ttft_ms"]),
        "ttft_change_pct": _pct(res, lambda: res["after"]["ttft_ms"] /
                                res["before"]["ttft_ms"]),
        "ttft_net_change_pct": _pct(res, lambda: ttft_ratio(res)[0]),
        "machine_change_pct": _pct(res, lambda: ttft_ratio(res)[1]),
        # false: the control worker changed speed by more than `within`, the TTFT windows
        # were not compared
        "ttft_comparable": _pct(res, lambda: ttft_ratio(res)[1]) is not None and
        abs(ttft_ratio(res)[1] - 1) <= res["within"],
        "ttft_during_ms": _r(res["during"]["ttft_ms"]),
        "max_latency_s": res["max_latency_s"], "settle_s": res.get("settle_s"),
        "rss_mb": {k: round(v / 2 ** 20, 1) for k, (_, v) in res["rss"].items() if v},
        "events": res["events"],
    }


def _pct(res, ratio):
    if not res["before"]["ttft_ms"] or not res["after"]["ttft_ms"]:
        return None
    return round(100 * (ratio() - 1), 1)


def _r(x, nd=1):
    return None if x is None else round(x, nd)
