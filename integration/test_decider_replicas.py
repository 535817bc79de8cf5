"""Decider replicas and aggregator fail-over, black-box: real policy, aggregators and deciders on
loopback, with state fed by a test collector (plain-Python ZMTP, see test_decider.py) that
pushes every frame to every aggregator, as collectors do with --aggregator a,b.

  - a decider started late, or restarted, catches up from a snapshot;
  - a decider following two aggregators moves to the other when the one it follows goes
    silent (SIGSTOP) or dies, resyncs from its snapshot, and still finds cached prefixes;
  - two deciders with --peers: what A routes shows at B as in flight and optimistically cached.

    cd integration && python3 -m unittest -v test_decider_replicas
"""
import os
import re
import signal
import time
import unittest

from lib.harness import Stack, http, http_json, wait_until, zmq_endpoint
from test_decider import (BLOCK, MODEL, STORED, Zmtp, chain, decode_route_rep, kv_event, load,
                          policy_yaml, route_req)

WORKERS = ("w0", "w1", "w2")


def metric(text, name, labels=""):
    """The value of one series in a Prometheus text page (None when absent)."""
    m = re.search(r"^%s%s (\S+)$" % (re.escape(name), re.escape(labels)), text, re.M)
    return float(m.group(1)) if m else None


class Replicas:
    """policy + `aggregators` aggregators + a test collector pushing to all of them; deciders
    are started with start_decider()."""

    def __init__(self, test, aggregators=1):
        self.test = test
        st = self.stack = Stack(test)
        self.policy_dir = os.path.dirname(st.write("policy/p.yaml", policy_yaml(list(WORKERS))))
        self.ep = {k: zmq_endpoint() for k in ("pol_pub", "pol_rep")}
        self.policy = st.start("policy", ["--dir", self.policy_dir, "--pub", self.ep["pol_pub"],
                                          "--rep", self.ep["pol_rep"], "--republish-ms", "300"])
        self.aggs = []
        for _ in range(aggregators):
            ep = {k: zmq_endpoint() for k in ("pull", "pub", "snap")}
            proc = st.start("aggregator", ["--pull", ep["pull"], "--pub", ep["pub"],
                                           "--snapshot", ep["snap"], "--heartbeat-ms", "200"])
            push = Zmtp(ep["pull"], "PUSH")
            test.addCleanup(push.close)
            self.aggs.append({"proc": proc, "ep": ep, "push": push, "alive": True})

    def start_decider(self, aggs=None, extra=(), ready=True):
        """A decider following the aggregators `aggs` (indexes; default all), in that order."""
        aggs = range(len(self.aggs)) if aggs is None else aggs
        sub = ",".join(self.aggs[i]["ep"]["pub"] for i in aggs)
        snap = ",".join(self.aggs[i]["ep"]["snap"] for i in aggs)
        return self.stack.start("decider", ["--listen", zmq_endpoint(), "--state-sub", sub,
                                            "--state-snapshot", snap,
                                            "--policy-sub", self.ep["pol_pub"],
                                            "--policy-req", self.ep["pol_rep"], "--seed", "7"]
                                + list(extra), ready=ready)

    def send(self, *frames):
        """Pushes every frame to every live aggregator."""
        for a in self.aggs:
            if a["alive"]:
                for f in frames:
                    a["push"].send([f])

    def loads(self, ts_ms=None):
        ts = int(time.time() * 1000) if ts_ms is None else ts_ms
        self.send(*[load(w, ts_ms=ts) for w in WORKERS])
        return ts

    def wait_aggregators(self, pred, what):
        """Waits until pred(/debug/state of each live aggregator)."""
        for a in self.aggs:
            if a["alive"]:
                url = a["proc"].admin_url + "/debug/state"
                wait_until(lambda: pred(http_json("GET", url)[2]), 10, what=what)


def dstate(decider):
    doc = http_json("GET", decider.admin_url + "/debug/state")[2]
    if not isinstance(doc, dict):
        raise ValueError("no JSON from %s/debug/state" % decider.admin_url)  # wait_until retries
    return doc


def blocks_of(doc, worker):
    """Blocks of `worker` in a /debug/state document (a decider's or an aggregator's)."""
    return next((w["blocks"] for w in doc.get("workers", []) if w["name"] == worker), None)


def wait_decider(decider, pred, what, timeout=10.0):
    return wait_until(lambda: pred(dstate(decider)), timeout, what=what)


def route(decider, hashes, **extra):
    body = {"model": MODEL, "block_hashes": hashes}
    body.update(extra)
    status, _, doc = http_json("POST", decider.admin_url + "/v1/route", body)
    return status, doc


def cands(doc):
    return {c["worker"]: c for c in doc["candidates"]}


class TestDeciderReplicas(unittest.TestCase):
    def test_late_and_restarted_decider_catch_up_from_a_snapshot(self):
        r = Replicas(self)
        hot = chain(32, salt=41)
        r.loads()
        r.send(kv_event("w1", STORED, hot))
        r.wait_aggregators(lambda d: blocks_of(d, "w1") == 32, "w1's blocks at the aggregator")
        # Started after the fact: everything it knows comes from the snapshot.
        d = r.start_decider()
        doc = wait_decider(d, lambda s: s["synced"] and blocks_of(s, "w1") == 32 and s, "snapshot")
        self.assertGreaterEqual(doc["snapshots"], 1)
        self.assertEqual(sum(doc["resyncs"].values()), 0, doc)
        r.loads()
        status, rdoc = route(d, hot + [7])
        self.assertEqual(status, 200, rdoc)
        self.assertEqual(cands(rdoc)["w1"]["cached_tokens"], 32 * BLOCK, rdoc)
        # /readyz and /metrics say how far along it is.
        status, _, ready = http_json("GET", d.admin_url + "/readyz")
        self.assertEqual(status, 200)
        m = re.search(r"state_seq=(\d+) lag_ms=(\d+)", ready["detail"])
        self.assertIsNotNone(m, ready)
        self.assertGreater(int(m.group(1)), 0)
        self.assertLess(int(m.group(2)), 2000, "heartbeats every 200 ms keep the lag small")
        self.assertIn(r.aggs[0]["ep"]["pub"], ready["detail"])
        metrics = http("GET", d.admin_url + "/metrics")[2].decode()
        self.assertGreater(metric(metrics, "inferplane_decider_state_seq"), 0)
        self.assertLess(metric(metrics, "inferplane_decider_state_lag_seconds"), 2.0)
        self.assertIsNotNone(metric(metrics, "inferplane_decider_resyncs_total",
                                    '{reason="incarnation"}'), metrics)
        seq_before = int(m.group(1))

        # Restarted while the state moved on: it catches up again.
        self.assertLess(d.stop(), 2.0)
        r.send(kv_event("w2", STORED, chain(12, salt=42)))
        r.wait_aggregators(lambda a: blocks_of(a, "w2") == 12, "w2's blocks at the aggregator")
        d = r.start_decider()
        doc = wait_decider(d, lambda s: blocks_of(s, "w2") == 12 and s, "the restarted decider")
        self.assertEqual(blocks_of(doc, "w1"), 32)
        self.assertGreater(doc["state_seq"], seq_before)
        status, rdoc = route(d, hot)
        self.assertEqual(cands(rdoc)["w1"]["cached_tokens"], 32 * BLOCK, rdoc)

    def test_follows_the_other_aggregator_when_one_fails(self):
        r = Replicas(self, aggregators=2)
        a0, a1 = r.aggs
        # Optimistic blocks off: every cached token below comes from the replicated index.
        d = r.start_decider(extra=["--state-silence-ms", "1000", "--optimistic-ttl-ms", "0"])
        r.loads()
        hot = chain(48, salt=51)
        r.send(kv_event("w1", STORED, hot))
        doc = wait_decider(d, lambda s: blocks_of(s, "w1") == 48 and s, "w1's blocks")
        self.assertEqual(doc["source"]["index"], 0)
        self.assertEqual(doc["source"]["state_sub"], a0["ep"]["pub"])
        first_incarnation = doc["incarnation"]

        # Silent (stopped, connection still open): after 1 s the decider follows the other.
        a0["proc"].signal(signal.SIGSTOP)
        self.addCleanup(a0["proc"].signal, signal.SIGCONT)
        t0 = time.monotonic()
        doc = wait_decider(d, lambda s: s["source"]["index"] == 1 and s["synced"]
                           and not s["resyncing"] and s, "the switch to the second aggregator")
        self.assertGreaterEqual(time.monotonic() - t0, 0.5)
        self.assertEqual(doc["resyncs"]["silent"], 1, doc)
        self.assertNotEqual(doc["incarnation"], first_incarnation, "another aggregator")
        self.assertEqual(blocks_of(doc, "w1"), 48, "its snapshot has the same state")
        r.loads()
        status, rdoc = route(d, hot)
        self.assertEqual(status, 200, rdoc)
        self.assertEqual(cands(rdoc)["w1"]["cached_tokens"], 48 * BLOCK, rdoc)
        # Live deltas now come from the second aggregator.
        r.send(kv_event("w2", STORED, chain(9, salt=52)))
        wait_decider(d, lambda s: blocks_of(s, "w2") == 9, "a delta from the second aggregator")

        # The first one resumes (and catches up on what it was sent while stopped: the frames
        # waited in its socket buffers); the second dies: back to the first.
        a0["proc"].signal(signal.SIGCONT)
        r.send(kv_event("w0", STORED, chain(5, salt=53)))
        r.wait_aggregators(lambda a: blocks_of(a, "w0") == 5, "w0's blocks everywhere")
        self.assertLess(a1["proc"].stop(), 2.0)
        a1["alive"] = False
        doc = wait_decider(d, lambda s: s["source"]["index"] == 0 and s["synced"]
                           and not s["resyncing"] and s, "the switch back to the first")
        self.assertEqual(doc["resyncs"]["disconnected"], 1, doc)
        self.assertEqual(doc["source"]["switches"], 2)
        self.assertEqual((blocks_of(doc, "w0"), blocks_of(doc, "w1"), blocks_of(doc, "w2")),
                         (5, 48, 9))
        r.loads()
        status, rdoc = route(d, hot + chain(3, salt=54))
        self.assertEqual(status, 200, rdoc)
        self.assertEqual(cands(rdoc)["w1"]["cached_tokens"], 48 * BLOCK, rdoc)
        metrics = http("GET", d.admin_url + "/metrics")[2].decode()
        self.assertEqual(metric(metrics, "inferplane_decider_resyncs_total",
                                '{reason="disconnected"}'), 1)
        self.assertEqual(metric(metrics, "inferplane_decider_resyncs_total",
                                '{reason="silent"}'), 1)
        self.assertEqual(metric(metrics, "inferplane_decider_state_source"), 0)
        self.assertTrue(d.alive())

    def test_peers_see_what_the_other_replica_routed(self):
        r = Replicas(self)
        pa, pb = zmq_endpoint(), zmq_endpoint()
        a = r.start_decider(extra=["--id", "A", "--peer-pub", pa, "--peers", pb])
        b = r.start_decider(extra=["--id", "B", "--peer-pub", pb, "--peers", pa])
        lone = r.start_decider(extra=["--id", "C"])  # no peers: the control
        deciders = (a, b, lone)

        def fresh_loads():
            ts = r.loads()
            for d in deciders:
                wait_decider(d, lambda s: all(w.get("sample_ts_ms") == ts for w in s["workers"])
                             and len(s["workers"]) == 3, "load samples at %s" % d.name)
            time.sleep(0.02)  # routings from now on are newer than the samples

        fresh_loads()
        # PUB/SUB joins asynchronously: probe both ways until each hears the other.
        for src, dst in ((a, b), (b, a)):
            def heard():
                route(src, chain(2, salt=99))
                return dstate(dst)["peers"]["received"] > 0
            wait_until(heard, 10, what="%s hearing %s" % (dst.name, src.name))
        fresh_loads()  # the probes are no longer in flight anywhere
        received = dstate(b)["peers"]["received"]

        # A burst through decider A (ZeroMQ, as the gateway asks).
        dealer = Zmtp(re.search(r"--listen (\S+)", " ".join(a.argv)).group(1), "DEALER")
        self.addCleanup(dealer.close)
        prompts = [chain(24, salt=60 + k) for k in range(3)]
        routed = {}
        for k, p in enumerate(prompts):
            dealer.send([route_req(k + 1, MODEL, p)])
            rep = decode_route_rep(dealer.recv()[0])
            self.assertEqual(rep["status"], 0, rep)
            routed.setdefault(rep["worker"], []).append(k)
        wait_decider(b, lambda s: s["peers"]["received"] >= received + 3, "A's burst at B")

        # B counts A's routings in flight and assumes their prefixes cached, like its own.
        status, doc = route(b, prompts[0])
        self.assertEqual(status, 200, doc)
        c = cands(doc)
        for w in WORKERS:
            self.assertEqual(c[w]["inflight"], len(routed.get(w, [])), (w, routed, doc))
        owner = next(w for w, ks in routed.items() if 0 in ks)
        self.assertEqual(c[owner]["cached_tokens"], 24 * BLOCK, doc)
        # The control without peers sees idle workers and nothing cached.
        status, doc = route(lone, prompts[0])
        self.assertTrue(all(x["inflight"] == 0 and x["cached_tokens"] == 0
                            for x in doc["candidates"]), doc)
        ma = http("GET", a.admin_url + "/metrics")[2].decode()
        mb = http("GET", b.admin_url + "/metrics")[2].decode()
        self.assertGreaterEqual(metric(ma, "inferplane_decider_peer_routed_total",
                                       '{event="sent"}'), 3)
        self.assertGreaterEqual(metric(mb, "inferplane_decider_peer_routed_total",
                                       '{event="received"}'), 3)
        self.assertEqual(metric(mb, "inferplane_decider_peer_routed_total", '{event="lost"}'), 0)
        self.assertEqual(dstate(b)["peers"]["peers_heard"], 1)

    def test_mismatched_endpoint_lists_are_refused(self):
        st = Stack(self)
        p = st.start("decider", ["--state-sub", "%s,%s" % (zmq_endpoint(), zmq_endpoint()),
                                 "--state-snapshot", zmq_endpoint(), "--listen", zmq_endpoint()],
                     ready=False)
        wait_until(lambda: not p.alive(), 5, what="the decider to refuse")
        self.assertEqual(p.proc.returncode, 2)
        self.assertIn("--state-snapshot", p.log())


if __name__ == "__main__":
    unittest.main()
