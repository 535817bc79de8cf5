"""The decider's feedback loop, end to end: requests through the gateway come back to the decider
that routed them as OBSERVED (the TTFT the gateway measured), and the decider's TTFT model
calibrates itself from them — /debug/model shows the samples and the error moving under load,
the exporter the prediction error of every request.

    cd integration && python3 -m unittest -v test_calibration
"""
import json
import math
import random
import threading
import unittest

from lib.cluster import MODEL, Cluster
from lib.harness import http, http_json, sse_events, wait_until
from test_exporter import metric, scrape

WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike "
         "november oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee "
         "zulu").split()
WORKER_SET = "sims"  # lib.cluster's InferenceWorkerSet: the predictor's key
REQUESTS = 40
CONCURRENCY = 4


def text(seed, nwords):
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(nwords))


def worker_set(decider_url):
    """The decider's /debug/model entry of our worker set (None before it predicted once)."""
    status, _, doc = http_json("GET", decider_url + "/debug/model")
    if status != 200:
        raise AssertionError("GET /debug/model: %d %r" % (status, doc))
    sets = {s["name"]: s for s in doc["predictor"]["worker_sets"]}
    return sets.get(WORKER_SET), doc


class TestCalibration(unittest.TestCase):
    def test_observed_ttfts_calibrate_the_decider(self):
        c = Cluster(self, workers=3)
        c.wait_workers_up()
        dec = c.services["decider"].admin_url
        shared = text(7, 300)
        failures = []

        def one(i):
            # Half share a long prefix (cache hits), half are fresh prompts of varied length.
            content = (shared + " " + text(100 + i, 20)) if i % 2 else text(200 + i, 40 + 8 * i)
            body = {"model": MODEL, "messages": [{"role": "user", "content": content}],
                    "max_tokens": 6, "stream": True}
            status, hdrs, raw = http("POST", c.api + "/v1/chat/completions", body, timeout=30)
            events = sse_events(raw) if status == 200 else []
            if status != 200 or not events or events[-1] != "[DONE]":
                failures.append((i, status, raw[:300]))

        def batch(first, n):
            ids = list(range(first, first + n))
            threads = [threading.Thread(target=lambda k=k: [one(i) for i in ids[k::CONCURRENCY]])
                       for k in range(CONCURRENCY)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)

        half = REQUESTS // 2
        batch(0, half)
        self.assertEqual(failures, [])
        mid = wait_until(lambda: (lambda s: s if s and s["samples"] >= half * 3 // 4 else None)(
            worker_set(dec)[0]), 10, what="the first half's observations at the decider")

        batch(half, REQUESTS - half)
        self.assertEqual(failures, [])
        end = wait_until(lambda: (lambda s: s if s and s["samples"] >= 30 else None)(
            worker_set(dec)[0]), 10, what=">= 30 observed TTFTs learned by the decider")
        _, doc = worker_set(dec)
        # The error statistics are of real predictions against real TTFTs, and they move.
        self.assertTrue(math.isfinite(end["mae_s"]) and end["mae_s"] > 0, end)
        self.assertTrue(math.isfinite(end["rmse_s"]), end)
        self.assertGreater(end["samples"], mid["samples"])
        self.assertNotEqual(end["mae_s"], mid["mae_s"])
        prior = doc["predictor"]["prior"]
        self.assertNotEqual(end["params"], prior, "the parameters never left the prior")
        obs = doc["observations"]
        self.assertGreaterEqual(obs["results"]["learned"], 30, obs)
        for bad in ("unknown", "expired", "mismatch"):
            self.assertEqual(obs["results"][bad], 0, obs)
        self.assertEqual(obs["window_ms"], 60000)
        self.assertLessEqual(obs["pending"], 8, obs)  # every request reported back

        s = scrape(dec)
        self.assertGreaterEqual(metric(s, "inferplane_decider_observations_total",
                                       result="learned"), 30)
        gw = scrape(c.services["gateway"].admin_url)
        self.assertGreaterEqual(metric(gw, "inferplane_gateway_observations_total",
                                       result="sent"), REQUESTS)
        self.assertEqual(metric(gw, "inferplane_gateway_observations_total", result="dropped"), 0)

        # The exporter has every request's prediction error too.
        def recorded():
            ex = scrape(c.services["exporter"].admin_url)
            n = metric(ex, "inferplane_ttft_prediction_error_seconds_count", model=MODEL)
            return ex if n >= REQUESTS else None
        ex = wait_until(recorded, 10, what="the prediction error of every request at the exporter")
        err_sum = metric(ex, "inferplane_ttft_prediction_error_seconds_sum", model=MODEL)
        self.assertTrue(math.isfinite(err_sum) and err_sum > 0)

    def test_every_reason_has_its_decision_series(self):
        c = Cluster(self, workers=2, strategy="gie-default")
        c.wait_workers_up()
        for strategy in ("dynamo-cost", "round-robin", "prefix-hash", "sglang-cache-aware"):
            status, doc = c.route({"model": MODEL, "prompt": text(3, 30), "strategy": strategy})
            self.assertEqual(status, 200, doc)
        status, _, raw = http("POST", c.api + "/v1/chat/completions",
                              {"model": MODEL, "max_tokens": 2,
                               "messages": [{"role": "user", "content": "hello"}]})
        self.assertEqual(status, 200, raw)
        self.assertEqual(json.loads(raw)["object"], "chat.completion")
        s = scrape(c.services["decider"].admin_url)
        for reason in ("max_score", "min_cost", "round_robin"):
            self.assertGreaterEqual(metric(s, "inferplane_decider_decisions_total", reason=reason),
                                    1, reason)
        self.assertEqual(metric(s, "inferplane_decider_decisions_total", reason="other"), 0)


if __name__ == "__main__":
    unittest.main()
