"""The decision, black-box: every strategy name accepted by the policy and answered by the
decider, GET /debug/model, the overload reject (429), and `inferplanectl route --explain`
printing every candidate's prediction and the why. State comes from a test collector, as in
test_decider, so every figure is known in advance.

    cd integration && python3 -m unittest -v test_strategies
"""
import subprocess
import unittest

from lib.harness import binary, http, http_json
from test_decider import (DEGRADED, MODEL, STORED, DeciderStack, candidates, chain,
                          kv_event)

STRATEGIES = ["ttft", "oracle", "random", "round-robin", "least-loaded", "gie-default",
              "dynamo-cost", "sglang-cache-aware", "prefix-hash"]


class TestStrategies(unittest.TestCase):
    def test_every_strategy_and_the_model(self):
        s = DeciderStack(self, strategy="gie-default")
        s.wait_loads(w0={"waiting": 2, "kv_usage": 0.5}, w2={"kv_usage": 0.9})
        hot = chain(32, salt=11)
        s.send(kv_event("w1", STORED, hot))
        s.wait_state(lambda d: any(w["name"] == "w1" and w["blocks"] == 32 for w in d["workers"]),
                     "w1's blocks")
        # The pool's strategy (gie-default): w1 holds the whole prompt, an empty queue and a free
        # cache: 2 x 1 + 2 x 1 + 3 x 1 = 7, the maximum.
        status, doc = s.route({"model": MODEL, "block_hashes": hot})
        self.assertEqual(status, 200, doc)
        self.assertEqual((doc["strategy"], doc["worker"], doc["reason"]),
                         ("gie-default", "w1", "max_score"), doc)
        self.assertIn("score 7.000", candidates(doc)["w1"]["note"])
        # Every strategy answers, and every candidate carries a prediction.
        for name in STRATEGIES:
            status, doc = s.route({"model": MODEL, "block_hashes": hot, "strategy": name})
            self.assertEqual(status, 200, (name, doc))
            self.assertEqual(doc["strategy"], name)
            self.assertTrue(doc["reason"] and doc["detail"], doc)
            self.assertTrue(all(c["predicted_ttft_ms"] > 0 for c in doc["candidates"]), doc)

        status, _, model = http_json("GET", s.decider.admin_url + "/debug/model")
        self.assertEqual(status, 200)
        self.assertEqual(model["router"]["default_strategy"], "ttft")
        self.assertEqual(model["router"]["strategies"], ", ".join(STRATEGIES))
        sets = {x["name"]: x for x in model["predictor"]["worker_sets"]}
        self.assertIn("sims", sets, model)  # worker sets are keyed by InferenceWorkerSet name
        for key in ("base_s", "per_queued_request_s", "per_queued_token_s", "per_running_s",
                    "per_uncached_token_s"):
            self.assertIn(key, sets["sims"]["params"])
        self.assertEqual(sets["sims"]["samples"], 0)
        for key in ("mae_s", "rmse_s", "outliers"):
            self.assertIn(key, sets["sims"])
        self.assertIn("stale", model["fallbacks"])

    def test_overloaded_is_429_and_fallbacks_are_counted(self):
        s = DeciderStack(self, decider_args=["--max-queue", "3"])
        s.wait_loads(w0={"waiting": 5}, w1={"waiting": 4}, w2={"waiting": 9, "kv_state": DEGRADED})
        status, doc = s.route({"model": MODEL, "block_hashes": chain(4)})
        self.assertEqual(status, 429, doc)
        self.assertEqual(doc["reason"], "overloaded")
        self.assertEqual(doc["error"]["code"], 429)
        self.assertIn("more than 3 requests queued (least: w1 with 4", doc["detail"])
        s.wait_loads(w0={"waiting": 1}, w1={"waiting": 4}, w2={"waiting": 0, "kv_state": DEGRADED})
        status, doc = s.route({"model": MODEL, "block_hashes": chain(4)})
        self.assertEqual(status, 200, doc)
        self.assertIn("above the max queue 3", candidates(doc)["w1"]["note"])
        _, _, metrics = http("GET", s.decider.admin_url + "/metrics")
        self.assertIn(b'inferplane_decider_fallbacks_total{reason="overloaded"} 1', metrics)
        self.assertIn(b'inferplane_decider_fallbacks_total{reason="degraded"}', metrics)
        doc = http_json("GET", s.decider.admin_url + "/debug/model")[2]
        self.assertEqual(doc["fallbacks"]["overloaded"], 1)
        self.assertEqual(doc["router"]["max_queue"], 3)

    def test_inferplanectl_route_explain(self):
        s = DeciderStack(self)
        s.wait_loads(w2={"waiting": 1})
        out = subprocess.run([binary("inferplanectl"), "route", "--decider", s.ep["decider"],
                              "--model", MODEL, "--prompt", "hello world " * 60, "--explain",
                              "--admin", s.decider.admin_url],
                             capture_output=True, text=True, timeout=10)
        self.assertEqual(out.returncode, 0, out.stderr)
        text = out.stdout
        for needle in ("Why ", "RANK", "PRED_TTFT_MS", "VS_WINNER", "ms = ", " base + ",
                       " prefill (", "How to read it", "worker set sims: base 40.0 ms",
                       "prefill 3000 tokens/s", "calibrated on 0 observed TTFTs"):
            self.assertIn(needle, text)
        for w in s.workers:
            self.assertIn(w, text)
        self.assertIn("*1", text)  # the winner ranks first: the smallest prediction
        # A reject explains itself too, with the HTTP status the gateway will answer.
        out = subprocess.run([binary("inferplanectl"), "route", "--decider", s.ep["decider"],
                              "--model", "nope", "--prompt", "x", "--explain"],
                             capture_output=True, text=True, timeout=10)
        self.assertEqual(out.returncode, 1)
        self.assertIn("not routed: reason no_pool (status 1, HTTP 404", out.stdout)


if __name__ == "__main__":
    unittest.main()
