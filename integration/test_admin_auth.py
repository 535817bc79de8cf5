"""Admin endpoints that change state or show request-derived data need a token (issue 20,
defect 10), black-box on real processes over loopback:

  - the decider's POST /v1/route, unauthenticated, is refused (401, JSON error) and changes
    nothing: the decisions after it see no in-flight work of it;
  - every /debug endpoint of every service of the chain (collector, aggregator, policy,
    decider, gateway) refuses a missing or wrong token and answers the right one, and also
    the gateway's embedded decider's POST /v1/route;
  - /healthz, /readyz, /metrics and /version stay open, and so does the policy service's
    POST /validate (a pure check of the YAML sent, for admission webhooks);
  - refusals are counted (inferplane_admin_refused_total{reason}) and logged, the token never.

Without --admin-token-file the protected routes answer loopback clients only (what every other
test relies on); that a non-loopback peer gets 403 is the unit test's (test_ipl_admin), as
tests talk to 127.0.0.1 only.

    cd integration && python3 -m unittest -v test_admin_auth
"""
import json
import os
import re
import unittest

from lib.harness import Stack, free_port, http, http_json, wait_until, zmq_endpoint
from test_decider import MODEL, Zmtp, chain, load, policy_yaml

TOKEN = "it-admin-token-5f0c1d9e7a2b4c68a1d3"
OPEN = ("/healthz", "/readyz", "/metrics", "/version")


def bearer(token):
    return {"Authorization": "Bearer " + token}


def refused(text, reason):
    m = re.search(r'^inferplane_admin_refused_total\{reason="%s"\} (\S+)$' % reason, text, re.M)
    return float(m.group(1)) if m else None


class TestAdminAuth(unittest.TestCase):
    def assert_refused(self, method, url, body=None, headers=None):
        status, hdrs, doc = http_json(method, url, body, headers=headers)
        self.assertEqual(status, 401, (url, doc))
        self.assertEqual(doc["error"]["type"], "authentication_error", doc)
        self.assertEqual(doc["error"]["code"], 401, doc)
        self.assertNotIn(TOKEN, json.dumps(doc))
        self.assertIn("Bearer", hdrs.get("WWW-Authenticate", ""), hdrs)

    def assert_open(self, proc):
        for path in OPEN:  # readiness may be 503 (a collector still syncing), never 401/403
            status, _, _ = http("GET", proc.admin_url + path)
            self.assertIn(status, (200, 503) if path == "/readyz" else (200,), (proc.name, path))

    def test_unauthenticated_route_is_refused_and_changes_nothing(self):
        st = Stack(self, admin_token=TOKEN)
        workers = ["w0", "w1", "w2"]
        pdir = os.path.dirname(st.write("policy/p.yaml", policy_yaml(workers)))
        ep = {k: zmq_endpoint() for k in ("pol_pub", "pol_rep", "pull", "pub", "snap", "dec")}
        st.start("policy", ["--dir", pdir, "--pub", ep["pol_pub"], "--rep", ep["pol_rep"],
                            "--republish-ms", "300"])
        st.start("aggregator", ["--pull", ep["pull"], "--pub", ep["pub"], "--snapshot", ep["snap"],
                                "--heartbeat-ms", "200"])
        dec = st.start("decider", ["--listen", ep["dec"], "--state-sub", ep["pub"],
                                   "--state-snapshot", ep["snap"], "--policy-sub", ep["pol_pub"],
                                   "--policy-req", ep["pol_rep"], "--seed", "7"])
        push = Zmtp(ep["pull"], "PUSH")
        self.addCleanup(push.close)
        for w in workers:
            push.send([load(w)])
        url = dec.admin_url + "/v1/route"

        def has_loads():
            doc = http_json("GET", dec.admin_url + "/debug/state", headers=dec.admin_headers)[2]
            return doc and sum(1 for w in doc["workers"] if w["has_load"]) == len(workers)
        wait_until(has_loads, 10, what="load samples at the decider")

        # Unauthenticated and wrongly authenticated decisions: refused...
        for k in range(6):
            self.assert_refused("POST", url, {"model": MODEL, "block_hashes": chain(8, salt=k)},
                                headers=None if k % 2 else bearer("not-the-admin-token-000000"))
        # ... and they left nothing behind: the next decision sees no work in flight.
        status, _, doc = http_json("POST", url, {"model": MODEL, "block_hashes": chain(8, salt=9)},
                                   headers=dec.admin_headers)
        self.assertEqual(status, 200, doc)
        self.assertEqual([c["inflight"] for c in doc["candidates"]], [0, 0, 0], doc)
        # The authenticated one did count: the one after it sees it.
        status, _, doc = http_json("POST", url, {"model": MODEL, "block_hashes": chain(8, salt=10)},
                                   headers=dec.admin_headers)
        self.assertEqual(sum(c["inflight"] for c in doc["candidates"]), 1, doc)

        self.assert_open(dec)
        metrics = http("GET", dec.admin_url + "/metrics")[2].decode()
        self.assertEqual(refused(metrics, "missing_token"), 3, metrics[-2000:])
        self.assertEqual(refused(metrics, "invalid_token"), 3)
        log = dec.log()
        self.assertIn("msg=admin_refused", log)
        self.assertIn("msg=admin_access mode=token", log)
        self.assertNotIn(TOKEN, log)

    def test_every_debug_endpoint_needs_the_token(self):
        st = Stack(self, admin_token=TOKEN)
        sim = st.start_sim("w0")
        pdir = os.path.dirname(st.write("policy/p.yaml", "\n".join([
            "apiVersion: inferplane.io/v1alpha1", "kind: InferenceWorkerSet",
            "metadata: {name: sims}", "spec:", "  model: %s" % MODEL, "  blockSize: 16",
            "  workers:", "    - {name: w0, url: %s, kvEvents: %s, replay: %s}"
            % (sim.url, sim.kv, sim.replay),
            "---", "apiVersion: inferplane.io/v1alpha1", "kind: InferencePool",
            "metadata: {name: chat}", "spec:", "  model: %s" % MODEL,
            "  targets: [{workerSet: sims}]", ""])))
        gw = st.start_chain(pdir)
        # The API port is the gateway's clients', untouched by the admin token.
        def served():
            return http_json("POST", gw.api + "/v1/completions",
                             {"model": MODEL, "prompt": "hi", "max_tokens": 2})[0] == 200
        wait_until(served, 15, what="a completion through the chain")
        by = {p.name: p for p in st.procs if p.admin_url and p.name != "sim"}
        protected = {
            "collector": [("GET", "/debug/workers")],
            "aggregator": [("GET", "/debug/state")],
            "policy": [("GET", "/debug/policy")],
            "decider": [("GET", "/debug/state"), ("GET", "/debug/model"),
                        ("GET", "/debug/policy"), ("POST", "/v1/route")],
            "gateway": [("GET", "/debug/policy"), ("GET", "/debug/tenants")],
        }
        body = {"model": MODEL, "prompt": "hello"}
        for name, routes in protected.items():
            proc = by[name]
            for method, path in routes:
                url = proc.admin_url + path
                b = body if method == "POST" else None
                self.assert_refused(method, url, b)
                self.assert_refused(method, url, b, headers=bearer(TOKEN + "x"))
                status, _, doc = http_json(method, url, b, headers=proc.admin_headers)
                self.assertEqual(status, 200, (name, path, doc))
            self.assert_open(proc)
        self.assert_open(by["exporter"])
        # The policy service's /validate checks what it is sent, nothing more: open.
        status, _, doc = http_json("POST", by["policy"].admin_url + "/validate",
                                   {"files": {"p.yaml": "kind: Nothing\n"}})
        self.assertNotIn(status, (401, 403), doc)

    def test_embedded_decider_route_needs_the_token(self):
        st = Stack(self, admin_token=TOKEN)
        pdir = os.path.dirname(st.write("policy/p.yaml", policy_yaml(["w0"])))
        ep = {k: zmq_endpoint() for k in ("pol_pub", "pol_rep", "pull", "pub", "snap")}
        st.start("policy", ["--dir", pdir, "--pub", ep["pol_pub"], "--rep", ep["pol_rep"]])
        st.start("aggregator", ["--pull", ep["pull"], "--pub", ep["pub"], "--snapshot", ep["snap"]])
        env = {"INFERPLANE_DECIDER_STATE_SUB": ep["pub"],
               "INFERPLANE_DECIDER_STATE_SNAPSHOT": ep["snap"],
               "INFERPLANE_DECIDER_POLICY_SUB": ep["pol_pub"],
               "INFERPLANE_DECIDER_POLICY_REQ": ep["pol_rep"]}
        gw = st.start("gateway", ["--listen", "127.0.0.1:%d" % free_port(), "--decider",
                                  "embedded", "--exporter", "", "--policy-sub", ep["pol_pub"],
                                  "--policy-req", ep["pol_rep"]], env=env)
        url = gw.admin_url + "/v1/route"
        self.assert_refused("POST", url, {"model": MODEL, "block_hashes": chain(4)})
        status, _, doc = http_json("POST", url, {"model": MODEL, "block_hashes": chain(4)},
                                   headers=gw.admin_headers)
        self.assertNotIn(status, (401, 403), doc)  # decided (503 without loads is a decision)
        self.assert_refused("GET", gw.admin_url + "/debug/state")
        self.assert_open(gw)


if __name__ == "__main__":
    unittest.main()
