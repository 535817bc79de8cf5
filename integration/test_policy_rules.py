"""InferencePolicy rules decided by real processes: the policy service (a directory of YAML,
hot-reloaded), the aggregator and the decider, with worker state fed by a test collector
(test_decider's ZMTP PUSH), so every load and every prediction is known in advance. Decisions
are asked over the decider's POST /v1/route (labels and headers in the body, as the gateway
sends them in ROUTE_REQ).

The predictor's prior is set so that predictions are round numbers: no fixed part, prefill
1000 tokens/s, 10 ms per running request. A 100-token prompt on an idle worker predicts
100 ms; with R running, 100 + 10 R ms.

    cd integration && python3 -m unittest -v test_policy_rules
"""
import json
import os
import threading
import time
import unittest

from lib.harness import Stack, free_port, http_json, wait_until, zmq_endpoint
from test_decider import BLOCK, STORED, UP, DOWN, Zmtp, chain, kv_event, load

SMALL = ["s0", "s1"]
LARGE = ["l0"]
OTHER = ["o0"]
WORKERS = SMALL + LARGE + OTHER
PROMPT = 100  # tokens of the prompts asked about (hashes of 6 blocks of 16)


def resources(slo_ms=500, rules="", aliases="", url=None):
    """Worker sets small (s0, s1) and large (l0) in pool chat (small-model, the SLO, provider
    cloud as overflow), worker set other (o0) in pool other (other-model); `rules` and
    `aliases` are YAML list bodies of InferencePolicy "p" (indented 4). Worker s0's URL is
    `url` when given (a simulator), the others' ports nothing listens on."""
    docs = []
    for name, model, workers, port in (("small", "small-model", SMALL, 18300),
                                       ("large", "large-model", LARGE, 18310),
                                       ("other", "other-model", OTHER, 18320)):
        ws = ["    - {name: %s, url: \"%s\"}" % (w, url if url and w == "s0" else
                                                 "http://127.0.0.1:%d" % (port + i))
              for i, w in enumerate(workers)]
        docs.append("\n".join(["apiVersion: inferplane.io/v1alpha1", "kind: InferenceWorkerSet",
                               "metadata: {name: %s}" % name, "spec:", "  model: %s" % model,
                               "  blockSize: %d" % BLOCK, "  workers:"] + ws))
    docs.append("""apiVersion: inferplane.io/v1alpha1
kind: GatewayBackend
metadata: {name: cloud-backend}
spec:
  url: http://127.0.0.1:9/v1
  protocol: openai
  auth: {type: bearer, env: CLOUD_TOKEN}""")
    docs.append("""apiVersion: inferplane.io/v1alpha1
kind: InferenceProvider
metadata: {name: cloud}
spec:
  backend: cloud-backend
  models: [{name: small-model, remoteName: remote-small}]
  latencyHintMs: 250""")
    docs.append("""apiVersion: inferplane.io/v1alpha1
kind: InferencePool
metadata: {name: chat}
spec:
  model: small-model
  slo: {ttftMs: %d}
  targets:
    - {workerSet: small}
    - {workerSet: large}
    - {provider: cloud, role: overflow}""" % slo_ms)
    docs.append("""apiVersion: inferplane.io/v1alpha1
kind: InferencePool
metadata: {name: other}
spec:
  model: other-model
  targets: [{workerSet: other}]""")
    if rules or aliases:
        body = ["apiVersion: inferplane.io/v1alpha1", "kind: InferencePolicy",
                "metadata: {name: p}", "spec:"]
        if rules:
            body += ["  rules:", rules.rstrip("\n")]
        if aliases:
            body += ["  aliases:", aliases.rstrip("\n")]
        docs.append("\n".join(body))
    return "\n---\n".join(docs) + "\n"


class RulesStack:
    """policy (a directory, hot-reloaded) + aggregator + decider, and a test collector."""

    def __init__(self, test, yaml_text):
        st = self.stack = Stack(test)
        self.path = st.write("policy/p.yaml", yaml_text)
        ep = self.ep = {k: zmq_endpoint() for k in ("pol_pub", "pol_rep", "agg_pull", "agg_pub",
                                                     "agg_snap", "decider")}
        self.policy = st.start("policy", ["--dir", os.path.dirname(self.path), "--pub",
                                          ep["pol_pub"], "--rep", ep["pol_rep"],
                                          "--republish-ms", "300"])
        st.start("aggregator", ["--pull", ep["agg_pull"], "--pub", ep["agg_pub"],
                                "--snapshot", ep["agg_snap"], "--heartbeat-ms", "200"])
        self.decider = st.start("decider", [
            "--listen", ep["decider"], "--state-sub", ep["agg_pub"],
            "--state-snapshot", ep["agg_snap"], "--policy-sub", ep["pol_pub"],
            "--policy-req", ep["pol_rep"], "--seed", "7", "--base-ms", "0",
            "--prefill-tokens-per-s", "1000", "--running-cost-ms", "10", "--load-gate", "1000"])
        self.push = Zmtp(ep["agg_pull"], "PUSH")
        test.addCleanup(self.push.close)
        self.test = test

    def loads(self, running=0, kv_usage=0.1, health=UP, only=None):
        """A fresh LOAD for every worker (or those in `only`), and waits until the decider has
        them: decisions after this see exactly these figures (nothing routed since)."""
        names = only or WORKERS
        self.ts = max(int(time.time() * 1000), getattr(self, "ts", 0) + 1)  # this sample's
        for w in names:
            self.push.send([load(w, running=running, kv_usage=kv_usage, health=health,
                                 ts_ms=self.ts)])

        def seen():
            by = {w["name"]: w for w in self.state().get("workers", [])}
            return all(w in by and by[w]["sample_ts_ms"] == self.ts for w in names)
        wait_until(seen, 10, what="load samples at the decider")

    def state(self):
        return http_json("GET", self.decider.admin_url + "/debug/state")[2]

    def route(self, model="small-model", salt=1, **extra):
        body = {"model": model, "block_hashes": chain(6, salt=salt), "prompt_tokens": PROMPT}
        body.update(extra)
        status, _, doc = http_json("POST", self.decider.admin_url + "/v1/route", body)
        return status, doc

    def policy_hash(self, who):
        return http_json("GET", who.admin_url + "/debug/policy")[2]

    def rewrite(self, yaml_text):
        """Replaces the policy file atomically (rename), as an editor or a ConfigMap does."""
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            f.write(yaml_text)
        os.rename(tmp, self.path)


class TestPolicyRules(unittest.TestCase):
    def test_personal_data_stays_local(self):
        rules = """    - name: pii
      match: {labels: [pii]}
      keepLocal: {reason: "personal data is processed on local workers only"}
"""
        s = RulesStack(self, resources(rules=rules))
        # Saturated local workers (predicted 1100 ms, above the 500 ms SLO): still local.
        s.loads(running=100, kv_usage=0.99)
        for k in range(5):
            status, doc = s.route(salt=k, labels=["pii"])
            self.assertEqual(status, 200, doc)
            self.assertEqual(doc["target_kind"], "worker", doc)
            self.assertIn(doc["worker"], SMALL + LARGE)
            self.assertEqual(doc["rule"], "p/pii")
        # Local workers down: refused with 503 and the policy's reason, never the provider ...
        s.loads(health=DOWN, only=SMALL + LARGE)
        status, doc = s.route(labels=["pii", "other"])
        self.assertEqual(status, 503, doc)
        self.assertEqual(doc["reason"], "keep_local", doc)
        self.assertIn("personal data is processed on local workers only", doc["error"]["message"])
        self.assertIsNone(doc["worker"])
        # ... while the same request without the label overflows to the provider.
        status, doc = s.route()
        self.assertEqual(status, 200, doc)
        self.assertEqual((doc["target_kind"], doc["worker"], doc["backend"], doc["model"]),
                         ("provider", "cloud", "cloud-backend", "remote-small"), doc)
        self.assertEqual(doc["reason"], "overflow")
        self.assertEqual(doc["endpoint"], "http://127.0.0.1:9/v1")
        self.assertNotIn("rule", doc)

    def test_burst_spills_and_recovers_without_flapping(self):
        rules = """    - name: burst
      match: {models: [small-model]}
      spill:
        provider: cloud
        whilePredictedTtftAboveSlo: true
        hysteresis: {enterAbovePercent: 100, exitBelowPercent: 80, minHoldMs: 300}
"""
        s = RulesStack(self, resources(slo_ms=500, rules=rules))
        # running → predicted 100 + 10 R ms against the 500 ms SLO
        phases = [(10, 0.4), (20, 0.6),                 # 40%, 60%: local
                  (50, 1.2),                            # 120%: spill
                  (35, 0.9), (45, 1.1), (34, 0.88),     # between 80% and 120%: keep spilling
                  (38, 0.96), (42, 1.04), (36, 0.92),
                  (20, 0.6), (20, 0.6),                 # 60%: back (after the 300 ms hold)
                  (33, 0.86), (39, 0.98), (35, 0.9)]    # below the 100% to enter: stay local
        seen = []
        for i, (running, pct) in enumerate(phases):
            s.loads(running=running)
            status, doc = s.route(salt=100 + i)  # a new prompt each time: nothing cached
            self.assertEqual(status, 200, doc)
            best = min(c["predicted_ttft_ms"] for c in doc["candidates"] if c["eligible"]) \
                if doc["target_kind"] == "worker" else None
            if best is not None:  # the test's premise: the predictions it planned
                self.assertAlmostEqual(best, 500 * pct, delta=1.0, msg=doc)
            seen.append(doc["target_kind"])
            self.assertEqual(doc["rule"], "p/burst")
            time.sleep(0.12)  # the phases span more than the hold
        self.assertEqual(seen[:2], ["worker", "worker"], seen)
        self.assertEqual(seen[2:9], ["provider"] * 7, seen)
        self.assertEqual(seen[9:], ["worker"] * 5, seen)
        switches = sum(1 for a, b in zip(seen, seen[1:]) if a != b)
        self.assertEqual(switches, 2, seen)

    def test_batch_waits_while_busy(self):
        rules = """    - name: batch
      match:
        headers: [{name: x-inferplane-class, value: batch}]
      admitBatch: {maxUtilizationPercent: 60}
"""
        s = RulesStack(self, resources(rules=rules))
        s.loads(kv_usage=0.9)
        status, doc = s.route(headers={"X-Inferplane-Class": "batch"})
        self.assertEqual(status, 429, doc)
        self.assertEqual(doc["reason"], "deferred", doc)
        self.assertEqual(doc["rule"], "p/batch")
        status, doc = s.route(headers={"x-inferplane-class": "interactive"})
        self.assertEqual(status, 200, doc)  # interactive work is not held
        s.loads(kv_usage=0.2)
        status, doc = s.route(headers={"x-inferplane-class": "batch"})
        self.assertEqual(status, 200, doc)
        self.assertEqual(doc["target_kind"], "worker")

    def test_batch_waits_at_the_gateway_and_runs_when_idle(self):
        """Through the gateway to a simulated worker: a batch request is held while the pool is
        busy and served once it is idle; interactive requests are served meanwhile."""
        rules = """    - name: batch
      match:
        headers: [{name: x-inferplane-class, value: batch}]
      admitBatch: {maxUtilizationPercent: 60}
"""
        st = Stack(self)
        sim = st.start_sim(model="small-model")
        s = RulesStack(self, resources(rules=rules, url=sim.url))
        port = free_port()
        st.start("gateway", ["--listen", "127.0.0.1:%d" % port, "--decider", s.ep["decider"],
                             "--exporter", "", "--policy-sub", s.ep["pol_pub"],
                             "--policy-req", s.ep["pol_rep"], "--batch-max-wait-ms", "20000"])
        chat = "http://127.0.0.1:%d/v1/chat/completions" % port
        body = {"model": "small-model", "max_tokens": 4,
                "messages": [{"role": "user", "content": "summarise the quarterly report"}]}
        s.loads(kv_usage=0.9, only=["s0"])  # the others have no sample: never chosen
        held = {}

        def batch():
            t0 = time.monotonic()
            status, headers, doc = http_json("POST", chat, body,
                                             {"x-inferplane-class": "batch"}, timeout=30)
            held.update(status=status, doc=doc, took=time.monotonic() - t0,
                        rule=headers.get("x-inferplane-rule"))
        t = threading.Thread(target=batch)
        t.start()
        try:
            time.sleep(1.0)
            self.assertNotIn("status", held, "the batch request was not held")
            status, _, doc = http_json("POST", chat, body, {"x-inferplane-class": "interactive"})
            self.assertEqual(status, 200, doc)  # interactive work goes on meanwhile
            s.loads(kv_usage=0.2, only=["s0"])  # the pool goes idle
        finally:
            t.join(30)
        self.assertEqual(held.get("status"), 200, held)
        self.assertGreater(held["took"], 1.0)
        self.assertLess(held["took"], 10.0)
        self.assertEqual(held["rule"], "p/batch")
        self.assertEqual(held["doc"]["model"], "small-model")

    def test_small_unless_the_large_holds_the_prefix(self):
        rules = """    - name: small-first
      match: {models: [small-model], promptTokens: {max: 4000}}
      prefer: {pool: chat, target: small, unlessHolderPredictsLowerTtft: large}
"""
        s = RulesStack(self, resources(rules=rules))
        s.loads()
        status, doc = s.route(salt=5)  # nobody holds it: small
        self.assertEqual(status, 200, doc)
        self.assertIn(doc["worker"], SMALL, doc)
        self.assertIn("preferred", doc["detail"])
        # l0 holds the prompt's 6 blocks: 4 uncached tokens, 4 ms < 100 ms on small
        s.push.send([kv_event("l0", STORED, chain(6, salt=9))])
        wait_until(lambda: any(w["name"] == "l0" and w["blocks"] == 6
                               for w in s.state()["workers"]), 10, what="l0's blocks")
        status, doc = s.route(salt=9)
        self.assertEqual(status, 200, doc)
        self.assertEqual(doc["worker"], "l0", doc)
        self.assertEqual(doc["model"], "large-model")  # the large set's served model
        self.assertIn("holder", doc["detail"])
        # ... unless l0 is so busy that small predicts less: 4 + 10 × 50 = 504 ms > 100 ms
        s.loads(running=50, only=LARGE)
        status, doc = s.route(salt=9)
        self.assertEqual(status, 200, doc)
        self.assertIn(doc["worker"], SMALL, doc)

    def test_alias_swap_under_load_and_an_invalid_change(self):
        alias = """    - name: assistant
      targets: [{model: %s}]
"""
        s = RulesStack(self, resources(aliases=alias % "small-model"))
        s.loads()
        status, doc = s.route(model="assistant")
        self.assertEqual((status, doc["pool"]), (200, "chat"), doc)
        first = s.policy_hash(s.decider)

        results, stop = [], threading.Event()

        def steady():
            k = 0
            while not stop.is_set() and k < 5000:
                k += 1
                status, doc = s.route(model="assistant", salt=1000 + k)
                results.append((time.monotonic(), status, doc.get("pool")))
                time.sleep(0.005)
        t = threading.Thread(target=steady)
        t.start()
        try:
            time.sleep(0.3)
            swapped = time.monotonic()
            s.rewrite(resources(aliases=alias % "other-model"))
            wait_until(lambda: results and results[-1][2] == "other", 5,
                       what="the alias swap in decisions")
            took = results[-1][0] - swapped
            time.sleep(0.3)
        finally:
            stop.set()
            t.join(10)
        self.assertLess(took, 1.0, "the swap took effect after %.2f s" % took)
        failed = [r for r in results if r[1] != 200]
        self.assertEqual(failed, [], "requests failed during the swap")
        pools = [r[2] for r in results]
        self.assertEqual(set(pools), {"chat", "other"})
        cut = pools.index("other")
        self.assertEqual(pools[cut:], ["other"] * (len(pools) - cut), "decisions went back")
        second = s.policy_hash(s.decider)
        self.assertNotEqual(first["hash"], second["hash"])

        # An invalid change (an alias naming a model nothing serves): the last good policy
        # stays in service at the decider, and the policy service says why.
        s.rewrite(resources(aliases=alias % "missing-model"))
        wait_until(lambda: "missing-model" in json.dumps(s.policy_hash(s.policy)), 5,
                   what="the policy service reporting the bad change")
        time.sleep(0.5)
        self.assertEqual(s.policy_hash(s.decider)["hash"], second["hash"])
        status, doc = s.route(model="assistant")
        self.assertEqual((status, doc["pool"]), (200, "other"), doc)


if __name__ == "__main__":
    unittest.main()
