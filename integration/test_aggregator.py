"""The aggregator on its own: admin endpoints, malformed input on its ZeroMQ sockets, SIGTERM.

The flow collector → aggregator with a real (simulated) worker is in test_collector.py;
publication order and snapshots are covered by services/aggregator/tests.
"""
import re
import unittest

from lib.harness import Stack, http, http_json, wait_until, zmq_endpoint, zmq_poke


def metric_sum(text, name, **labels):
    """Sum of the samples of `name` whose labels include `labels` (None when there is none)."""
    total = None
    for line in text.splitlines():
        if not line.startswith(name) or line.startswith("#"):
            continue
        m = re.match(r'^([^\s{]+)(?:\{(.*)\})?\s+(\S+)', line)
        if not m or m.group(1) != name:
            continue
        got = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        if all(got.get(k) == v for k, v in labels.items()):
            total = (total or 0.0) + float(m.group(3))
    return total


def start_aggregator(st, extra=None):
    pull, pub, snap = zmq_endpoint(), zmq_endpoint(), zmq_endpoint()
    agg = st.start("aggregator", ["--pull", pull, "--pub", pub, "--snapshot", snap] +
                   list(extra or []))
    agg.pull, agg.pub, agg.snap = pull, pub, snap
    return agg


class TestAggregator(unittest.TestCase):
    def test_admin_endpoints(self):
        st = Stack(self)
        agg = start_aggregator(st)
        for path in ("/healthz", "/readyz", "/metrics", "/version"):
            status, _, _ = http("GET", agg.admin_url + path)
            self.assertEqual(status, 200, path)
        status, _, body = http_json("GET", agg.admin_url + "/version")
        self.assertEqual(body["service"], "aggregator")
        status, _, state = http_json("GET", agg.admin_url + "/debug/state")
        self.assertEqual(status, 200)
        self.assertEqual(state["workers"], [])
        self.assertEqual(state["memberships"], 0)
        status, _, body = http_json("GET", agg.admin_url + "/debug/state?hashes=x")
        self.assertEqual(status, 400)
        _, _, text = http("GET", agg.admin_url + "/metrics")
        text = text.decode()
        for name in ("inferplane_aggregator_memberships", "inferplane_aggregator_blocks",
                     "inferplane_aggregator_workers", "inferplane_aggregator_state_seq",
                     "inferplane_frames_dropped_total"):
            self.assertIsNotNone(metric_sum(text, name), name)

    def test_malformed_frames_are_counted_and_survived(self):
        st = Stack(self)
        agg = start_aggregator(st)
        self.assertEqual(zmq_poke(agg.pull, "push", count=200, seed=3), 0)
        self.assertEqual(zmq_poke(agg.snap, "dealer", count=200, seed=4), 0)

        def dropped():
            _, _, text = http("GET", agg.admin_url + "/metrics")
            return metric_sum(text.decode(), "inferplane_frames_dropped_total") or 0
        # poke sends a mix of garbage; most of it (at least half) must be counted as dropped
        wait_until(lambda: dropped() >= 200, timeout=10, what="dropped frames counted")
        self.assertTrue(agg.alive())
        self.assertEqual(http("GET", agg.admin_url + "/healthz")[0], 200)
        status, _, state = http_json("GET", agg.admin_url + "/debug/state")
        self.assertEqual(status, 200)
        # random bytes never decode to a valid KV_EVENT/LOAD: nothing was applied
        _, _, text = http("GET", agg.admin_url + "/metrics")
        applied = metric_sum(text.decode(), "inferplane_aggregator_events_applied_total") or 0
        self.assertEqual(applied, 0)
        self.assertLess(agg.stop(), 2.0)

    def test_raw_tcp_garbage(self):
        st = Stack(self)
        agg = start_aggregator(st)
        for ep in (agg.pull, agg.pub, agg.snap):
            zmq_poke(ep, "raw", count=20, seed=5)
        self.assertTrue(agg.alive())
        self.assertEqual(http("GET", agg.admin_url + "/healthz")[0], 200)

    def test_sigterm_exits_quickly(self):
        st = Stack(self)
        agg = start_aggregator(st, ["--heartbeat-ms", "100"])
        self.assertLess(agg.stop(), 2.0)
        self.assertEqual(agg.proc.returncode, 0)

    def test_bad_flags(self):
        st = Stack(self)
        p = st.start("aggregator", ["--pull", "nonsense://x"], admin=True, ready=False)
        self.assertEqual(p.proc.wait(10), 2)
        self.assertIn("--pull", p.log())


if __name__ == "__main__":
    unittest.main()
