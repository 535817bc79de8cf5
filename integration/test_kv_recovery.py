"""The KV index recovers from faults, or says it cannot: real sims, collector, aggregators,
policy and deciders on loopback.

- dropped batches are replayed from the worker's buffer (both reply layouts): the index ends up
  equal, hash for hash, to the index of a twin worker that lost nothing;
- a worker restart (in-process fault and a new process on the same ports) clears its entries
  before it publishes anything, and the index is rebuilt from the new process's events;
- an unrecoverable gap (buffer too small, no replay endpoint, replay endpoint dead) makes the
  worker RECOVERING (SYNCING at the aggregator: its index, rebuilt after the gap, is a subset);
  the decider goes on using it, and a restart makes it exact again (collector restarts:
  test_collector_restart.py);
- of two active-active aggregators, one is killed: the decider following the survivor keeps
  routing by cache; the killed one comes back empty and converges to the survivor's state, and
  its own decider routes by cache again.
"""
import json
import time
import unittest

from lib.harness import Stack, free_port, http, http_json, wait_until, zmq_endpoint
from test_aggregator import metric_sum

MODEL = "sim-model"
WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike "
         "november oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee "
         "zulu").split()


def text(seed, nwords):
    """Deterministic words (different seeds share nothing but the vocabulary)."""
    out, x = [], seed * 2654435761 % 2 ** 32 or 1
    for _ in range(nwords):
        x = (x * 1103515245 + 12345) % 2 ** 31
        out.append(WORDS[x % len(WORDS)])
    return " ".join(out)


# ---- processes ----------------------------------------------------------------------------

def start_sim(st, name, seed=1, replay=True, buffer_steps=None, extra=(), ports=None):
    """A sim worker; `ports` (from an earlier start) restarts it on the same ports. replay=False
    gives it no replay endpoint at all."""
    ports = dict(ports or {"port": free_port(), "kv": zmq_endpoint(), "replay": zmq_endpoint()})
    cfg = {"enable_kv_cache_events": True, "publisher": "zmq", "endpoint": ports["kv"],
           "topic": "kv-events"}
    if replay:
        cfg["replay_endpoint"] = ports["replay"]
    if buffer_steps is not None:
        cfg["buffer_steps"] = buffer_steps
    args = ["--host", "127.0.0.1", "--port", str(ports["port"]), "--served-model-name", MODEL,
            "--kv-events-config", json.dumps(cfg), "--kv-events-bind", "bind",
            "--enable-prompt-tokens-details", "--time-scale", "20", "--seed", str(seed)]
    p = st.start("sim", args + list(extra), admin=False, ready=False)
    p.url = p.admin_url = "http://127.0.0.1:%d" % ports["port"]
    p.kv, p.replay, p.worker_name, p.ports = ports["kv"], ports["replay"] if replay else "", name, ports
    p.wait_ready(path="/health")
    return p


def start_aggregator(st, eps=None):
    """An aggregator; `eps` (from an earlier start) restarts it on the same endpoints."""
    eps = dict(eps or {"pull": zmq_endpoint(), "pub": zmq_endpoint(), "snap": zmq_endpoint()})
    agg = st.start("aggregator", ["--pull", eps["pull"], "--pub", eps["pub"],
                                  "--snapshot", eps["snap"]])
    agg.eps, agg.pull = eps, eps["pull"]
    return agg


def spec(sims, replay_override=None):
    """--workers for the collector: name=url|kv[|replay]."""
    items = []
    for s in sims:
        rep = (replay_override or {}).get(s.worker_name, s.replay)
        items.append("%s=%s|%s" % (s.worker_name, s.url, s.kv) + ("|" + rep if rep else ""))
    return ",".join(items)


def start_collector(st, aggs, sims, replay_override=None):
    return st.start("collector", ["--aggregator", ",".join(a.pull for a in aggs),
                                  "--workers", spec(sims, replay_override),
                                  "--scrape-interval-ms", "50"])


def policy_yaml(sims):
    lines = ["apiVersion: inferplane.io/v1alpha1", "kind: InferenceWorkerSet",
             "metadata: {name: sims}", "spec:", "  model: %s" % MODEL, "  blockSize: 16",
             "  workers:"]
    for s in sims:
        lines += ["    - name: %s" % s.worker_name, "      url: %s" % s.url,
                  "      kvEvents: %s" % s.kv]
        if s.replay:
            lines.append("      replay: %s" % s.replay)
    lines += ["---", "apiVersion: inferplane.io/v1alpha1", "kind: InferencePool",
              "metadata: {name: chat}", "spec:", "  model: %s" % MODEL, "  strategy: ttft",
              "  targets:", "    - workerSet: sims", ""]
    return "\n".join(lines)


class Plane:
    """policy + the given aggregators + a collector feeding all of them + one decider per
    aggregator (decider i follows aggregator i)."""

    def __init__(self, st, sims, aggs):
        self.st, self.sims, self.aggs = st, sims, aggs
        st.write("policy/sims.yaml", policy_yaml(sims))
        self.pol_pub, self.pol_rep = zmq_endpoint(), zmq_endpoint()
        st.start("policy", ["--dir", st.dir + "/policy", "--pub", self.pol_pub,
                            "--rep", self.pol_rep, "--republish-ms", "500"])
        self.collector = start_collector(st, aggs, sims)
        self.deciders = [self.start_decider(a) for a in aggs]

    def start_decider(self, agg):
        return self.st.start("decider", ["--listen", zmq_endpoint(), "--state-sub", agg.eps["pub"],
                                         "--state-snapshot", agg.eps["snap"],
                                         "--policy-sub", self.pol_pub,
                                         "--policy-req", self.pol_rep])


# ---- observation --------------------------------------------------------------------------

def agg_worker(agg, name, hashes=0):
    status, _, state = http_json("GET", agg.admin_url + "/debug/state" +
                                 ("?hashes=%d" % hashes if hashes else ""), timeout=5)
    if status != 200:
        return None
    return next((w for w in state["workers"] if w["name"] == name), None)


def agg_hashes(agg, name):
    w = agg_worker(agg, name, hashes=100000)
    return set(w["hashes"]) if w else set()


def col_worker(col, name):
    status, _, doc = http_json("GET", col.admin_url + "/debug/workers", timeout=5)
    return next(w for w in doc["workers"] if w["name"] == name)


def col_metric(col, name, **labels):
    _, _, text = http("GET", col.admin_url + "/metrics")
    return metric_sum(text.decode(), name, **labels) or 0


def complete(sim, prompt, max_tokens=40):
    status, _, body = http_json("POST", sim.url + "/v1/completions",
                                {"model": MODEL, "prompt": prompt, "max_tokens": max_tokens},
                                timeout=30)
    assert status == 200, (sim.worker_name, status, body)
    return body


def chat(sim, content, max_tokens=32):
    status, _, body = http_json("POST", sim.url + "/v1/chat/completions",
                                {"model": MODEL, "max_tokens": max_tokens,
                                 "messages": [{"role": "user", "content": content}]}, timeout=30)
    assert status == 200, (sim.worker_name, status, body)
    return body


def route(decider, content):
    status, _, doc = http_json("POST", decider.admin_url + "/v1/route",
                               {"model": MODEL, "messages": [{"role": "user", "content": content}]})
    return status, doc


def cand(doc, worker):
    return next(c for c in doc["candidates"] if c["worker"] == worker)


def wait_subscribed(col, aggs, names):
    """Every worker up at every aggregator, its catch-up replay done; then the SUB's slow
    joiner margin."""
    def ready():
        for a in aggs:
            for n in names:
                w = agg_worker(a, n)
                if not w or w["health"] != "up":
                    return False
        return all(not col_worker(col, n)["replaying"] for n in names)
    wait_until(ready, 15, what="workers up and caught up")
    time.sleep(0.3)


class TestKvRecovery(unittest.TestCase):
    def test_dropped_batches_are_replayed(self):
        st = Stack(self)
        # every 2nd batch never reaches the collector but stays in the worker's replay buffer;
        # the twin serves the same requests and loses nothing
        lossy3 = start_sim(st, "lossy3", extra=["--drop-every-n-batches", "2"])
        lossy2 = start_sim(st, "lossy2", extra=["--drop-every-n-batches", "2",
                                                "--replay-layout", "2",
                                                "--kv-events-format", "array"])
        twin = start_sim(st, "twin")
        sims = [lossy3, lossy2, twin]
        agg = start_aggregator(st)
        col = start_collector(st, [agg], sims)
        wait_subscribed(col, [agg], [s.worker_name for s in sims])
        for i in range(6):
            for s in sims:
                complete(s, text(i, 60 + 20 * i))

        # the last batch may have been the dropped one: nobody can see that gap until the next
        # batch, so keep the workers busy until the indexes agree
        def agree(k=[0]):
            want = agg_hashes(agg, "twin")
            got = [agg_hashes(agg, n) for n in ("lossy3", "lossy2")]
            if want and all(g == want for g in got) and \
                    all(not col_worker(col, n)["replaying"] for n in ("lossy3", "lossy2")):
                return want
            k[0] += 1
            if k[0] % 10 == 0:
                for s in sims:
                    complete(s, text(1000 + k[0], 40))
            return False
        want = wait_until(agree, 20, interval=0.1, what="lossy indexes equal to the twin's")
        self.assertGreater(len(want), 20)
        for name in ("lossy3", "lossy2"):
            cw = col_worker(col, name)
            self.assertGreaterEqual(cw["gaps"], 1, cw)
            self.assertGreaterEqual(cw["replays_ok"], 2, cw)  # catch-up + at least one gap
            self.assertGreaterEqual(cw["replayed_batches"], 1, cw)
            self.assertEqual(cw["degradations"], 0, cw)
            self.assertEqual(cw["kv_state"], "exact", cw)
            self.assertEqual(agg_worker(agg, name)["kv_state"], "exact")
            self.assertGreaterEqual(col_metric(col, "inferplane_collector_replays_total",
                                               worker=name, result="ok"), 2)
        self.assertEqual(col_worker(col, "twin")["gaps"], 0)

    def test_worker_restart_clears_and_rebuilds(self):
        st = Stack(self)
        inproc = start_sim(st, "inproc")   # restarted by the sim's own fault, if it has one
        proc = start_sim(st, "proc")       # restarted as a new process on the same ports
        twin = start_sim(st, "twin")       # serves only what the restarted workers serve after
        agg = start_aggregator(st)
        col = start_collector(st, [agg], [inproc, proc, twin])
        wait_subscribed(col, [agg], ["inproc", "proc", "twin"])
        for s in (inproc, proc):
            complete(s, text(1, 300))
            complete(s, text(2, 200))
        for name in ("inproc", "proc"):
            wait_until(lambda: (agg_worker(agg, name) or {}).get("blocks", 0) > 20, 10,
                       what=name + "'s blocks")

        status, _, _ = http("POST", inproc.url + "/sim/restart")
        if status != 200:  # no restart fault in this sim yet: a new process does the same
            inproc.stop()
            inproc = start_sim(st, "inproc", ports=inproc.ports)
        else:
            wait_until(lambda: http("GET", inproc.url + "/health")[0] == 200, 10,
                       what="inproc up after its restart")
        proc.stop()
        proc = start_sim(st, "proc", ports=proc.ports)

        # before the new process publishes anything, its old blocks are gone: its /metrics
        # show a new process start time. (The in-process fault keeps the process and, for now,
        # its counters: that restart shows when its batches start again from 0.)
        w = wait_until(lambda: (agg_worker(agg, "proc") or {}).get("blocks") == 0 and
                       agg_worker(agg, "proc"), 10, what="proc's old blocks cleared")
        self.assertEqual(w["health"], "up", w)
        self.assertGreater(agg_worker(agg, "inproc")["blocks"], 0)
        time.sleep(0.3)  # the SUB reconnects to the new process

        for s in (inproc, proc, twin):
            complete(s, text(3, 250))
            complete(s, text(1, 120))  # shares a prefix with what the old process held
        want = wait_until(lambda: agg_hashes(agg, "twin"), 10, what="twin's blocks")

        def rebuilt():
            return all(agg_hashes(agg, n) == want for n in ("inproc", "proc"))
        wait_until(rebuilt, 15, what="restarted workers' entries equal to the twin's")
        for name in ("inproc", "proc"):
            cw = col_worker(col, name)
            self.assertGreaterEqual(cw["restarts"], 1, cw)
            self.assertEqual(cw["kv_state"], "exact", cw)
            self.assertEqual(agg_worker(agg, name)["kv_state"], "exact")
            self.assertGreaterEqual(col_metric(col, "inferplane_collector_worker_restarts_total",
                                               worker=name), 1)

    def test_unrecoverable_gaps_recover(self):
        st = Stack(self)
        drop = ["--drop-every-n-batches", "2"]
        tiny = start_sim(st, "tiny", buffer_steps=1, extra=drop)     # start evicted at once
        noreplay = start_sim(st, "noreplay", replay=False, extra=drop)
        dead = start_sim(st, "dead", extra=drop)  # the collector is given a dead endpoint
        agg = start_aggregator(st)
        col = start_collector(st, [agg], [tiny, noreplay, dead],
                              replay_override={"dead": zmq_endpoint()})
        wait_until(lambda: all((agg_worker(agg, n) or {}).get("health") == "up"
                               for n in ("tiny", "noreplay", "dead")), 15, what="workers up")
        time.sleep(0.3)
        reasons = {"tiny": "history_evicted", "noreplay": "gap_without_replay",
                   "dead": "replay_timeout"}
        for i in range(3):
            for s in (tiny, noreplay, dead):
                complete(s, text(10 + i, 150), max_tokens=48)

        def recovering():
            return all(col_worker(col, n)["kv_state"] == "recovering" for n in reasons)
        wait_until(recovering, 20, what="every lossy worker recovering")
        for name, why in reasons.items():
            # the cause (for "dead", a gap while its retry is pending says "sequence_gap"
            # until the next retry times out)
            cw = wait_until(lambda: col_worker(col, name)["kv_state_reason"] == why and
                            col_worker(col, name), 10, what="%s recovering by %s" % (name, why))
            self.assertEqual(cw["kv_state"], "recovering", cw)
            self.assertEqual(cw["wire_kv_state"], "syncing", cw)
            self.assertGreaterEqual(cw["degradations"], 1, cw)  # every lost gap counts
            w = wait_until(lambda: agg_worker(agg, name)["kv_state"] == "syncing" and
                           agg_worker(agg, name), 5, what=name + " syncing at the aggregator")
            self.assertEqual(w["health"], "up")
            self.assertGreaterEqual(col_metric(col, "inferplane_collector_degraded_total",
                                               worker=name), 1)
            self.assertEqual(col_metric(col, "inferplane_collector_worker_state", worker=name,
                                        state="recovering"), 1)
        self.assertEqual(col_worker(col, "noreplay")["replays"], 0)
        # retried with backoff where the cause may pass (a dead endpoint); not where the
        # worker's buffer shows batch 0 gone, nor without a replay endpoint
        wait_until(lambda: col_worker(col, "dead")["retries"] >= 1, 10, what="dead retried")
        self.assertIsNone(col_worker(col, "tiny")["retry_in_ms"])
        self.assertIsNone(col_worker(col, "noreplay")["retry_in_ms"])
        _, _, text_ = http("GET", agg.admin_url + "/metrics")
        self.assertEqual(metric_sum(text_.decode(), "inferplane_aggregator_workers_by_kv_state",
                                    kv_state="degraded"), 0)
        self.assertEqual(metric_sum(text_.decode(), "inferplane_aggregator_workers_by_kv_state",
                                    kv_state="syncing"), 3)
        _, _, state = http_json("GET", agg.admin_url + "/debug/state")
        self.assertEqual(state["kv_states"]["syncing"], 3)

    def test_recovering_worker_is_routed_until_exact_again(self):
        st = Stack(self)
        w0 = start_sim(st, "w0", seed=1, buffer_steps=1, extra=["--drop-every-n-batches", "2"])
        w1 = start_sim(st, "w1", seed=2)
        agg = start_aggregator(st)
        plane = Plane(st, [w0, w1], [agg])
        decider = plane.deciders[0]
        wait_subscribed(plane.collector, [agg], ["w0", "w1"])
        prefix = text(7, 700)
        for i in range(3):
            chat(w0, prefix + " question %d" % i, max_tokens=48)
        wait_until(lambda: col_worker(plane.collector, "w0")["kv_state"] == "recovering", 20,
                   what="w0 recovering")

        def subset_used():
            status, doc = route(decider, prefix + " probe")
            if status != 200:
                return False
            c = cand(doc, "w0")
            return "kv syncing" in c["note"] and "degraded" not in c["note"] and doc
        doc = wait_until(subset_used, 10, what="w0's rebuilt index used")
        self.assertNotEqual(doc["reason"], "load_only", doc)

        # a new w0 process, on the same ports, without the fault: exact again, cache-aware again
        w0.stop()
        w0 = start_sim(st, "w0", seed=1, ports=w0.ports)
        wait_until(lambda: col_worker(plane.collector, "w0")["kv_state"] == "exact", 15,
                   what="w0 exact again")
        time.sleep(0.3)
        chat(w0, prefix + " question again", max_tokens=4)

        def cache_aware():
            status, doc = route(decider, prefix + " probe")
            return status == 200 and doc["worker"] == "w0" and doc["reason"] == "cache_hit" \
                and cand(doc, "w0")["cached_tokens"] >= 1000 and doc
        wait_until(cache_aware, 15, what="w0 routed by its cache again")
        self.assertEqual(agg_worker(agg, "w0")["kv_state"], "exact")

    def test_killing_one_of_two_aggregators(self):
        st = Stack(self)
        w0, w1 = start_sim(st, "w0", seed=1), start_sim(st, "w1", seed=2)
        a, b = start_aggregator(st), start_aggregator(st)
        plane = Plane(st, [w0, w1], [a, b])
        da, db = plane.deciders
        wait_subscribed(plane.collector, [a, b], ["w0", "w1"])
        p, q = text(21, 700), text(22, 700)

        def routes_by_cache(decider, prompt, owner):
            def ok():
                status, doc = route(decider, prompt + " probe")
                return status == 200 and doc["worker"] == owner and \
                    doc["reason"] == "cache_hit" and cand(doc, owner)["cached_tokens"] >= 1000
            return ok

        chat(w1, p + " first")
        for d in (da, db):  # either aggregator serves: a decider can follow either
            wait_until(routes_by_cache(d, p, "w1"), 15, what="P on w1")

        incarnation = http_json("GET", a.admin_url + "/debug/state")[2]["incarnation"]
        a.proc.kill()  # a crash: no goodbye
        a.proc.wait(5)
        chat(w0, q + " first")
        # the decider following the survivor loses nothing
        wait_until(routes_by_cache(db, q, "w0"), 15, what="Q on w0 via the survivor")
        self.assertTrue(routes_by_cache(db, p, "w1")())
        wait_until(lambda: not next(x for x in http_json(
            "GET", plane.collector.admin_url + "/debug/workers")[2]["aggregators"]
            if x["endpoint"] == a.pull)["connected"], 10, what="collector sees A gone")

        # A comes back empty on the same endpoints; the collector resends everything
        a2 = start_aggregator(st, a.eps)
        state = http_json("GET", a2.admin_url + "/debug/state")[2]
        self.assertNotEqual(state["incarnation"], incarnation)

        def converged():
            return all(agg_hashes(a2, n) == agg_hashes(b, n) and agg_hashes(b, n)
                       for n in ("w0", "w1")) and \
                all(agg_worker(a2, n)["kv_state"] == "exact" for n in ("w0", "w1"))
        wait_until(converged, 15, what="the restarted aggregator converged")
        # and the decider that followed it routes by cache again
        wait_until(routes_by_cache(da, q, "w0"), 20, what="Q on w0 via the restarted one")
        self.assertTrue(routes_by_cache(da, p, "w1")())
        cagg = next(x for x in http_json("GET", plane.collector.admin_url + "/debug/workers")[2]
                    ["aggregators"] if x["endpoint"] == a.pull)
        self.assertGreaterEqual(cagg["resends"], 2, cagg)
        self.assertTrue(cagg["connected"], cagg)


if __name__ == "__main__":
    unittest.main()
