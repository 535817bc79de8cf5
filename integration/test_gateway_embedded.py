"""The gateway with its decider inside (`--decider embedded`): the whole stack but the decider
process, started for real on loopback with sim workers.

Proves: requests are routed cache-aware from KV events by the embedded decider, answered over
inproc://; the decisions' measured TTFTs come back to it (OBSERVED, calibration); its admin
routes and metrics are the gateway's; it also listens where --decider-config says (tcp://) for
inferplanectl and other gateways, shrugging off malformed frames there; readiness waits for
it; SIGTERM stops everything within 2 s; bad settings are refused with the file's position.
"""
import json
import os
import subprocess
import unittest

from lib.cluster import MODEL, Cluster
from lib.harness import Stack, binary, http, http_json, wait_until, zmq_endpoint, zmq_poke
from test_decider import policy_yaml
from test_stack import chat, text


class TestGatewayEmbedded(unittest.TestCase):
    def test_routes_calibrates_and_explains(self):
        c = Cluster(self, workers=3, embedded=True)
        self.assertNotIn("decider", c.services)
        gw = c.services["gateway"]
        c.wait_workers_up()  # /v1/route on the gateway's admin server

        # A prefix computed on the last worker behind inferplane's back: only its KV events
        # tell the embedded decider where it lives.
        sim = c.sims[-1]
        prefix = text(3, 900)
        body = {"model": MODEL, "max_tokens": 4,
                "messages": [{"role": "user", "content": prefix + " question one"}]}
        status, _, raw = http("POST", sim.url + "/v1/chat/completions", body)
        self.assertEqual(status, 200, raw)
        probe = {"model": MODEL, "messages": [{"role": "user", "content": prefix + " probe"}]}

        def indexed():
            status, doc = c.route(probe)
            return status == 200 and doc["worker"] == sim.worker_name and doc
        wait_until(indexed, 10, what="prefix indexed by the embedded decider")
        for i in range(4):
            status, hdrs, raw = chat(c, prefix + " question %d" % (i + 2), stream=i % 2 == 1)
            self.assertEqual(status, 200, raw)
            self.assertEqual(hdrs["x-inferplane-worker"], sim.worker_name)

        # The measured TTFTs reached the decider on the inproc:// connection that asked: the
        # streamed ones are learned, the others counted as unstreamed (no first-token time).
        def learned():
            _, _, doc = http_json("GET", gw.admin_url + "/debug/model")
            results = doc["observations"]["results"]
            return results["learned"] >= 2 and results["unstreamed"] >= 2 and doc
        wait_until(learned, 10, what="OBSERVED learned by the embedded decider")

        # One registry: the gateway's and the decider's metrics side by side.
        _, _, m = http("GET", gw.admin_url + "/metrics")
        m = m.decode()
        for name in ("inferplane_gateway_route_seconds_count", "inferplane_decider_decisions_total",
                     "inferplane_decider_observations_total"):
            self.assertIn(name, m)
        _, _, doc = http_json("GET", gw.admin_url + "/debug/state")
        self.assertEqual(len(doc["workers"]), 3, doc)
        status, _, raw = http("GET", gw.admin_url + "/readyz")
        self.assertEqual(status, 200, raw)

        # The tcp:// endpoint from --decider-config answers inferplanectl like a decider.
        out = subprocess.run([binary("inferplanectl"), "route", "--decider", c.ep["decider"],
                              "--model", MODEL, "--prompt", "hello world " * 60, "--explain",
                              "--admin", gw.admin_url],
                             capture_output=True, text=True, timeout=10)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("PRED_TTFT_MS", out.stdout)

        # Malformed frames there are counted and dropped; the gateway keeps serving.
        zmq_poke(c.ep["decider"], "dealer", count=200, seed=5)
        status, hdrs, raw = chat(c, "still there?")
        self.assertEqual(status, 200, raw)
        self.assertTrue(gw.alive())
        self.assertLess(gw.stop(), 2.0)
        self.assertEqual(gw.proc.returncode, 0, gw.log())

    def test_not_ready_until_the_decider_is(self):
        """A policy service but no aggregator: the gateway starts, and /readyz says what the
        embedded decider waits for. The decider tokenizes /v1/route prompts with the gateway's
        --tokenizer when its own file names none."""
        st = Stack(self)
        pol = {k: zmq_endpoint() for k in ("pub", "rep")}
        pdir = os.path.dirname(st.write("policy/p.yaml", policy_yaml(["w0", "w1"])))
        st.start("policy", ["--dir", pdir, "--pub", pol["pub"], "--rep", pol["rep"]])
        path = st.write("decider.yaml", "state-sub: tcp://127.0.0.1:9\n"
                                        "state-snapshot: tcp://127.0.0.1:9\n"
                                        "policy-sub: %s\npolicy-req: %s\n"
                                        % (pol["pub"], pol["rep"]))
        tok = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common", "tests",
                           "data", "bpe_qwen2_tiny.json")
        gw = st.start("gateway", ["--listen", "127.0.0.1:0", "--decider", "embedded",
                                  "--decider-config", path, "--policy-sub", pol["pub"],
                                  "--policy-req", pol["rep"], "--tokenizer", tok],
                      ready=False)

        def answered():
            try:
                return http("GET", gw.admin_url + "/readyz")
            except OSError:
                return None
        def decider_waits():
            r = answered()
            return r and b"embedded decider: waiting for a state snapshot" in r[2] and r
        status, _, raw = wait_until(decider_waits, 10, what="/readyz naming the decider")
        self.assertEqual(status, 503, raw)
        prompt = "the quick brown fox jumps over the lazy dog"  # 26 tokens here, 17 built in
        ids = subprocess.run([binary("inferplanectl"), "tokenize", "--tokenizer", tok],
                             input=prompt, capture_output=True, text=True, timeout=10)
        self.assertEqual(ids.returncode, 0, ids.stderr)
        status, _, doc = http_json("POST", gw.admin_url + "/v1/route",
                                   {"model": MODEL, "prompt": prompt})
        self.assertEqual(status, 503, doc)
        self.assertEqual(doc["prompt_tokens"], len(ids.stdout.split()), (doc, ids.stdout))
        self.assertLess(gw.stop(), 2.0)

    def test_bad_settings_are_refused(self):
        st = Stack(self)
        cases = [
            (["--decider-config", "/x.yaml"], {}, "--decider-config needs --decider embedded"),
            (["--decider", "embedded", "--decider-config", "/nonexistent/d.yaml"], {},
             "--decider-config: --config /nonexistent/d.yaml: cannot open"),
            (["--decider", "embedded", "--decider-config",
              st.write("typo.yaml", "strategy: ttft\nstale_msec: 9\n")], {},
             "typo.yaml:2:1: unknown key \"stale_msec\""),
            (["--decider", "embedded", "--decider-config", st.write("cpu.yaml", "cpu: 0\n")],
             {}, "unknown key \"cpu\""),
            (["--decider", "embedded", "--decider-config",
              st.write("range.yaml", "strategy: ttft\nbusy-poll-us: 20000\n")], {},
             "range.yaml:2: busy-poll-us: 20000 is out of range (0..10000)"),
            (["--decider", "embedded"], {"INFERPLANE_DECIDER_STRATEGY": "fastest"},
             "--decider-config: --strategy must be one of: ttft"),
        ]
        for args, env, msg in cases:
            out = subprocess.run([binary("inferplane-gateway")] + args, capture_output=True,
                                 text=True, timeout=10, env=dict(os.environ, **env))
            self.assertEqual(out.returncode, 2, (args, out.stderr))
            self.assertIn(msg, out.stderr, args)


if __name__ == "__main__":
    unittest.main()
