"""ZeroMQ CURVE on the control plane (--curve-dir, docs/security.md), black-box.

With CURVE on, the whole stack serves and routes by cache as before, and a local process
without the cluster key that connects to the aggregator's PULL port and forges KV_EVENTs is
refused and counted: its events have no effect on routing. With CURVE off (the default) the
same forgery works — which is what the switch is for.

    cd integration && python3 -m unittest -v test_curve
"""
import contextlib
import json
import os
import re
import time
import unittest

from lib.cluster import MODEL, Cluster
from lib.harness import http, http_json, wait_until
from test_decider import CLEARED, STORED, Zmtp, kv_event

PREFIX = " ".join("alpha bravo charlie delta echo foxtrot golf hotel india juliet".split() * 60)


@contextlib.contextmanager
def curve_env(on):
    """Cluster makes its own Stack: Stack(curve=None) reads INFERPLANE_TEST_CURVE."""
    old = os.environ.get("INFERPLANE_TEST_CURVE")
    os.environ["INFERPLANE_TEST_CURVE"] = "1" if on else "0"
    try:
        yield
    finally:
        if old is None:
            del os.environ["INFERPLANE_TEST_CURVE"]
        else:
            os.environ["INFERPLANE_TEST_CURVE"] = old


def metric(proc, name, **labels):
    _, _, text = http("GET", proc.admin_url + "/metrics")
    total, found = 0.0, False
    for line in text.decode().splitlines():
        m = re.match(r"^%s(\{[^}]*\})? (\S+)$" % re.escape(name), line)
        if m and all('%s="%s"' % kv in (m.group(1) or "") for kv in labels.items()):
            total, found = total + float(m.group(2)), True
    return total if found else None


PROBE = {"model": MODEL, "messages": [{"role": "user", "content": PREFIX + " question probe"}]}


def cached_on(c, owner):
    """Sends the prefix to `owner` directly (bypassing inferplane) and waits until the decider
    routes a probe sharing it to `owner` as a cache hit. Returns the aggregator's hashes of it."""
    sim = next(s for s in c.sims if s.worker_name == owner)
    body = {"model": MODEL, "max_tokens": 2,
            "messages": [{"role": "user", "content": PREFIX + " question one"}]}
    status, _, raw = http("POST", sim.url + "/v1/chat/completions", body)
    assert status == 200, raw

    def indexed():
        status, doc = c.route(PROBE)
        return status == 200 and doc["worker"] == owner and doc["cached_tokens"] >= 500 and doc
    wait_until(indexed, 15, what="prefix indexed on " + owner)
    _, _, state = http_json("GET", c.services["aggregator"].admin_url +
                            "/debug/state?hashes=100000")
    w = next(x for x in state["workers"] if x["name"] == owner)
    return [int(h, 16) if isinstance(h, str) else h for h in w["hashes"]]  # "0x..." in JSON


def forge(endpoint, messages):
    """A foreign local process: plain ZMTP (no CURVE), a PUSH to `endpoint`. Returns whether
    the connection got as far as sending (a CURVE server drops it at the handshake)."""
    try:
        z = Zmtp(endpoint, "PUSH", timeout=3.0)
    except (OSError, ConnectionError, AssertionError):
        return False
    try:
        for m in messages:
            z.send([m])
        time.sleep(0.3)
        return True
    except OSError:
        return False
    finally:
        z.close()


class TestCurve(unittest.TestCase):
    def _forgery(self, curve):
        """The issue's attack: the prefix lives on w1; forged events say w1 forgot it and w0
        holds it. Returns (the decider's answer for the probe after the forgery, cluster)."""
        with curve_env(curve):
            c = Cluster(self, workers=2)
        c.wait_workers_up()
        hashes = cached_on(c, "w1")
        self.assertGreater(len(hashes), 10)
        sent = forge(c.ep["agg_pull"], [kv_event("w1", CLEARED, []),
                                        kv_event("w0", STORED, hashes)])
        if curve:
            self.assertFalse(sent, "a CURVE server must not complete a plaintext handshake")
        time.sleep(1.0)  # what the aggregator accepted has reached the decider by now
        status, doc = c.route(PROBE)
        self.assertEqual(status, 200, doc)
        return doc, c

    def test_forged_kv_events_are_refused_with_curve(self):
        doc, c = self._forgery(curve=True)
        self.assertEqual(doc["worker"], "w1", doc)  # the true owner, a true hit
        victim = next(x for x in doc["candidates"] if x["worker"] == "w0")
        self.assertEqual(victim["cached_tokens"], 0, doc)
        agg = c.services["aggregator"]
        refused = wait_until(lambda: (metric(agg, "inferplane_zmq_auth_refused_total",
                                             reason="plaintext") or 0) >= 1 and True,
                             5, what="refusal counted")
        self.assertTrue(refused)
        self.assertIn("zmq_auth_refused", agg.log())

    def test_forged_kv_events_are_accepted_without_curve(self):
        """Documents the default (CURVE off): a local process can steer routing."""
        doc, c = self._forgery(curve=False)
        # w0 now counts as holding a prefix it never saw (a false cache hit). (The winner may
        # still be w1: the decider's own probes left it an optimistic entry for the prefix.)
        victim = next(x for x in doc["candidates"] if x["worker"] == "w0")
        self.assertGreater(victim["cached_tokens"], 500, doc)
        self.assertIsNone(metric(c.services["aggregator"], "inferplane_zmq_auth_refused_total"))

    def test_stack_behaves_the_same_with_curve(self):
        """One existing flow (test_stack's cache-aware routing, requests through the gateway,
        records at the exporter) with every control-plane socket on CURVE."""
        with curve_env(True):
            c = Cluster(self, workers=2)
        c.wait_workers_up()
        for name, proc in c.services.items():
            self.assertEqual(metric(proc, "inferplane_zmq_curve_enabled"), 1.0, name)
        cached_on(c, "w1")
        for i in range(3):
            body = {"model": MODEL, "max_tokens": 4, "messages": [
                {"role": "user", "content": PREFIX + " question %d" % (i + 2)}]}
            status, hdrs, raw = http("POST", c.api + "/v1/chat/completions", body, timeout=30)
            self.assertEqual(status, 200, raw)
            self.assertEqual(hdrs["x-inferplane-worker"], "w1")
            usage = json.loads(raw)["usage"]
            self.assertGreaterEqual(usage["prompt_tokens_details"]["cached_tokens"], 500, usage)
        ex = c.services["exporter"]
        wait_until(lambda: (metric(ex, "inferplane_request_ttft_seconds_count") or 0) >= 3, 10,
                   what="the gateway's records reached the exporter over CURVE")
        for name, proc in c.services.items():
            self.assertIsNone(metric(proc, "inferplane_zmq_auth_refused_total",
                                     reason="unknown_key") or None, name)


if __name__ == "__main__":
    unittest.main()
