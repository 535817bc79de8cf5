"""The gateway's side of InferencePolicy decisions (issue 12), through real processes.

TestGatewayProvider: the policy service (a temp directory of YAML), aggregator, collector,
decider, exporter and gateway, with `inferplane-sim --api-key KEY --network-latency-ms 20` as
the provider stand-in. Pool "chat" has only `{provider: cloud, role: overflow}`, so every
request goes to the provider's GatewayBackend: the stand-in must receive the backend's
credentials and the remote model name, and the client must see neither.

TestGatewayVerdicts: the real policy service and gateway against a fake decider (a ZMTP
ROUTER speaking our protocol), so that every verdict can be forced: REJECTED, DEFERRED, the
labels and headers the ROUTE_REQ carries, a deferral cut short by shutdown.

TestGatewayTls: a provider backend over HTTPS (a Python stand-in with a self-signed
certificate): verified with tls.caBundle, refused without it, let through with
tls.insecureSkipVerify; the bearer secret from the gateway's environment.

    cd integration && python3 -m unittest -v test_gateway_provider
"""
import json
import os
import ssl
import threading
import time
import unittest

from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from lib.harness import free_port, http, http_json, sse_events, wait_until, zmq_endpoint
from test_exporter import (MSG_ROUTE_REP, MSG_ROUTE_REQ, PROTO_VERSION, ZmtpRouter,
                           checked_stack, metric, mp_pack, mp_unpack, scrape)
from test_gateway import FakeWorker

KEY = "sk-standin-provider-0123456789"
WRONG = "sk-wrong-provider-9876543210"
REF_KEY = "sk-secretref-abcdef0123"
CHAT = {"model": "chat-model", "messages": [{"role": "user", "content": "Hello there, provider"}],
        "max_tokens": 4, "ignore_eos": True}

ROUTE_REQ_FIELDS = ["req_id", "model", "tenant", "prompt_tokens", "block_size", "hashes",
                    "strategy", "explain", "brief", "labels", "headers"]
ROUTE_REP_FIELDS = ["req_id", "status", "reason", "detail", "worker", "url", "pool", "model",
                    "predicted_ttft_s", "cached_tokens", "state_seq", "candidates", "observe",
                    "target_kind", "backend", "rule", "http_status", "retry_after_ms"]
ROUTE_OK, ROUTE_REJECTED, ROUTE_DEFERRED = 0, 6, 7


# Pool chat → provider cloud (bearer from a file); pool ref → provider cloud2 (the x-api-key
# header from a Kubernetes-style secretRef under --secrets-dir). Both reach the one stand-in.
RESOURCES = """apiVersion: inferplane.io/v1alpha1
kind: GatewayBackend
metadata: {name: cloud-backend}
spec:
  url: %(url)s/v1
  protocol: openai
  auth: {type: bearer, file: %(file)s}
  timeouts: {connectMs: 1000, responseMs: 10000}
  maxConnections: 8
---
apiVersion: inferplane.io/v1alpha1
kind: GatewayBackend
metadata: {name: ref-backend}
spec:
  url: %(url)s/v1/
  auth:
    type: header
    header: x-api-key
    secretRef: {name: standin-credentials, key: token}
---
apiVersion: inferplane.io/v1alpha1
kind: InferenceProvider
metadata: {name: cloud}
spec:
  backend: cloud-backend
  models: [{name: chat-model, remoteName: remote-chat}]
  latencyHintMs: 20
---
apiVersion: inferplane.io/v1alpha1
kind: InferenceProvider
metadata: {name: cloud2}
spec:
  backend: ref-backend
  models: [{name: ref-model, remoteName: remote-chat}]
---
apiVersion: inferplane.io/v1alpha1
kind: InferencePool
metadata: {name: chat}
spec:
  model: chat-model
  targets:
    - {provider: cloud, role: overflow}
---
apiVersion: inferplane.io/v1alpha1
kind: InferencePool
metadata: {name: ref}
spec:
  model: ref-model
  targets:
    - {provider: cloud2, role: overflow}
---
apiVersion: inferplane.io/v1alpha1
kind: InferenceWorkerSet
metadata: {name: down}
spec:
  model: remote-chat
  workers: [{name: dead0, url: "%(dead)s"}]
---
apiVersion: inferplane.io/v1alpha1
kind: InferencePool
metadata: {name: private}
spec:
  model: private-model
  targets:
    - {workerSet: down}
    - {provider: cloud3, role: overflow}
---
apiVersion: inferplane.io/v1alpha1
kind: InferenceProvider
metadata: {name: cloud3}
spec:
  backend: cloud-backend
  models: [{name: private-model, remoteName: remote-chat}]
---
apiVersion: inferplane.io/v1alpha1
kind: InferencePolicy
metadata: {name: guard}
spec:
  rules:
    - name: pii-local
      match: {labels: [pii]}
      keepLocal: {reason: "personal data is processed on local workers only"}
"""


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


class TestGatewayProvider(unittest.TestCase):

    def start_stack(self):
        st = checked_stack(self)
        sim = st.start_sim("standin", model="remote-chat", extra=[
            "--api-key", KEY, REF_KEY, "--accept-x-api-key",
            "--network-latency-ms", "20", "--time-scale", "20"])
        self.secret = os.path.join(st.dir, "cloud-token")
        write(self.secret, KEY + "\n")
        secrets_dir = os.path.join(st.dir, "secrets")
        os.makedirs(os.path.join(secrets_dir, "standin-credentials"))
        write(os.path.join(secrets_dir, "standin-credentials", "token"), REF_KEY)
        st.write("policy/resources.yaml", RESOURCES % {
            "url": sim.url, "file": self.secret, "dead": "http://127.0.0.1:%d" % free_port()})
        gw = st.start_chain(os.path.join(st.dir, "policy"),
                            ["--secrets-dir", secrets_dir,
                             "--trusted-label-header", "x-inferplane-labels"])
        ex = gw.exporter
        # The decider answers once it has the policy (and the state stream): bounded wait.
        wait_until(lambda: http_json("POST", gw.api + "/v1/chat/completions", CHAT)[0] == 200,
                   15, 0.2, "the first request through the provider")
        http("POST", sim.url + "/stand-in/reset", {})
        return st, sim, gw, ex

    def received(self, sim, n):
        """The stand-in's report once it counted n requests (bounded)."""
        return wait_until(lambda: (lambda r: r if r["received"] >= n else None)(
            http_json("GET", sim.url + "/stand-in/received")[2]), 5, 0.05,
            "%d requests at the stand-in" % n)

    def assert_clean(self, raw):
        """Nothing the client gets names a secret or the remote model."""
        for needle in (KEY, WRONG, REF_KEY, "remote-chat", "sk-"):
            self.assertNotIn(needle.encode(), raw)

    def test_forwarded_with_credentials_and_model_rewritten(self):
        st, sim, gw, ex = self.start_stack()
        chat = gw.api + "/v1/chat/completions"
        # Not streamed.
        status, hdrs, raw = http("POST", chat, CHAT)
        self.assertEqual(status, 200, raw[:300])
        body = json.loads(raw)
        self.assertEqual(body["model"], "chat-model")
        self.assertEqual(body["usage"]["completion_tokens"], 4)
        self.assert_clean(raw)
        self.assertEqual(hdrs["x-inferplane-target-kind"], "provider")
        self.assertEqual(hdrs["x-inferplane-worker"], "cloud")
        self.assertEqual(hdrs["x-inferplane-backend"], "cloud-backend")
        self.assertEqual(hdrs["x-inferplane-pool"], "chat")
        self.assertEqual(hdrs["x-inferplane-endpoint"], sim.url + "/v1")
        self.assertNotIn(KEY, json.dumps(hdrs))
        # Streamed: every event renamed, usage intact.
        stream = dict(CHAT, stream=True, stream_options={"include_usage": True})
        status, hdrs, raw = http("POST", chat, stream)
        self.assertEqual(status, 200, raw[:300])
        self.assertTrue(hdrs["Content-Type"].startswith("text/event-stream"))
        events = sse_events(raw)
        self.assertEqual(events[-1], "[DONE]")
        chunks = [json.loads(e) for e in events[:-1]]
        # role, content and usage chunks; the simulator, like vLLM, puts the tokens produced
        # while its stream was behind into one chunk, so the count of content chunks varies
        self.assertGreaterEqual(len(chunks), 3, raw[:2000])
        self.assertTrue(any(c["choices"] and c["choices"][0].get("delta", {}).get("content")
                            for c in chunks), raw[:2000])
        self.assertEqual({c["model"] for c in chunks}, {"chat-model"})
        self.assertEqual(chunks[-1]["usage"]["completion_tokens"], 4)
        self.assert_clean(raw)
        # The completions API and the secretRef backend (x-api-key from --secrets-dir).
        status, _, raw = http("POST", gw.api + "/v1/completions",
                              {"model": "ref-model", "prompt": "Hi", "max_tokens": 2})
        self.assertEqual(status, 200, raw[:300])
        self.assertEqual(json.loads(raw)["model"], "ref-model")
        self.assert_clean(raw)

        r = self.received(sim, 3)
        self.assertEqual((r["received"], r["served"], r["unauthorized"]), (3, 3, 0))
        self.assertEqual(r["by_model"]["remote-chat"]["served"], 3)
        self.assertEqual([e["auth"] for e in r["last"]], ["ok", "ok", "ok"])
        self.assertEqual([e["model"] for e in r["last"]], ["remote-chat"] * 3)
        self.assertEqual([e["stream"] for e in r["last"]], [False, True, False])
        self.assertIn("authorization", r["last"][0]["headers"])
        self.assertNotIn("x-api-key", r["last"][0]["headers"])
        self.assertIn("x-api-key", r["last"][2]["headers"])
        self.assertNotIn("authorization", r["last"][2]["headers"])
        self.assertEqual(r["by_path"]["/v1/chat/completions"]["served"], 2)
        self.assertEqual(r["by_path"]["/v1/completions"]["served"], 1)

        # The exporter counts them like local requests: the pool, the backend's URL as the
        # endpoint, the usage's tokens (4 + 4 here, plus the first request of start_stack).
        def counted():
            s = scrape(ex.admin_url)
            n = metric(s, "inferplane_requests_total", model="chat-model", pool="chat",
                       endpoint=sim.url + "/v1", status_code="200")
            return s if n == 3 else None
        s = wait_until(counted, 5, 0.1, "3 chat records at the exporter")
        self.assertEqual(metric(s, "inferplane_completion_tokens_total", model="chat-model",
                                pool="chat", endpoint=sim.url + "/v1"), 12)
        self.assertGreater(metric(s, "inferplane_prompt_tokens_uncached_total",
                                  model="chat-model", pool="chat", endpoint=sim.url + "/v1"), 0)
        _, _, dbg = http("GET", gw.admin_url + "/debug/policy")
        _, _, metrics = http("GET", gw.admin_url + "/metrics")
        for needle in (KEY.encode(), REF_KEY.encode()):
            self.assertNotIn(needle, dbg)
            self.assertNotIn(needle, metrics)
        for p in st.procs:
            self.assertNotIn(KEY, p.log(), p.name)
            self.assertNotIn(REF_KEY, p.log(), p.name)

    def test_wrong_and_missing_secret(self):
        st, sim, gw, ex = self.start_stack()
        chat = gw.api + "/v1/chat/completions"
        # A wrong key (the file changed: re-read): the stand-in's 401, in the OpenAI shape.
        write(self.secret, WRONG + "\n")
        status, _, raw = http("POST", chat, CHAT)
        self.assertEqual(status, 401, raw[:300])
        err = json.loads(raw)["error"]
        self.assertEqual(set(err), {"message", "type", "param", "code"})
        self.assertEqual(err["code"], "provider_auth_failed")
        self.assertIn("cloud-backend", err["message"])
        self.assert_clean(raw)
        status, _, raw = http("POST", chat, dict(CHAT, stream=True))
        self.assertEqual(status, 401)
        self.assert_clean(raw)
        r = self.received(sim, 2)
        self.assertEqual((r["received"], r["unauthorized"]), (2, 2))
        self.assertEqual([e["auth"] for e in r["last"]], ["wrong", "wrong"])
        # Missing: 502 naming the backend and the file, and nothing reaches the stand-in.
        os.unlink(self.secret)
        status, _, raw = http("POST", chat, CHAT)
        self.assertEqual(status, 502, raw[:300])
        err = json.loads(raw)["error"]
        self.assertEqual((err["type"], err["code"]), ("server_error", "backend_credentials"))
        self.assertIn("cloud-backend", err["message"])
        self.assertIn(self.secret, err["message"])
        self.assert_clean(raw)
        # Fixed: served again, without a restart.
        write(self.secret, KEY)
        status, _, raw = http("POST", chat, CHAT)
        self.assertEqual(status, 200, raw[:300])
        r = self.received(sim, 3)
        self.assertEqual((r["received"], r["served"]), (3, 1))
        # The exporter counted the refusals with their status.
        s = wait_until(lambda: (lambda s: s if metric(
            s, "inferplane_requests_total", pool="chat", status_code="401") == 2 else None)(
            scrape(ex.admin_url)), 5, 0.1, "the 401 records")
        self.assertEqual(metric(s, "inferplane_requests_total", pool="chat",
                                status_code="502"), 1)
        for p in st.procs:
            self.assertNotIn(WRONG, p.log(), p.name)
            self.assertNotIn(KEY, p.log(), p.name)

    def test_personal_data_never_reaches_the_provider(self):
        st, sim, gw, ex = self.start_stack()
        chat = gw.api + "/v1/chat/completions"
        body = dict(CHAT, model="private-model")
        # Once the collector finds the local worker down, unlabelled work overflows to the
        # provider (bounded wait: the first scrapes).
        wait_until(lambda: (lambda r: r[0] == 200 and
                            r[1].get("x-inferplane-target-kind") == "provider")(
            http("POST", chat, body)), 10, 0.1, "private-model to overflow to the provider")
        before = self.received(sim, 0)["received"]
        # Labelled personal data: refused with the rule's reason, never sent to the provider.
        pii = {"x-inferplane-labels": "finance, pii"}
        for stream in (False, True):
            status, hdrs, raw = http("POST", chat, dict(body, stream=stream), pii)
            self.assertEqual(status, 503, raw[:300])
            err = json.loads(raw)["error"]
            self.assertEqual((err["type"], err["code"]), ("server_error", "policy_rejected"))
            self.assertIn("personal data is processed on local workers only", err["message"])
            self.assertEqual(hdrs["x-inferplane-rule"], "guard/pii-local")
        status, hdrs, _ = http("POST", chat, body, {"x-inferplane-labels": "finance"})
        self.assertEqual(status, 200)
        self.assertEqual(hdrs["x-inferplane-target-kind"], "provider")
        r = self.received(sim, before + 1)
        self.assertEqual(r["received"], before + 1)  # only the unlabelled one arrived
        # Personal data the gateway finds itself (libs/labels), no header: refused the same.
        for text in ("Please update my account: jan.novak@example.cz, thanks",
                     "Pay it to IBAN CZ65 0800 0000 1920 0014 5399 today",
                     "My card is 4111 1111 1111 1111, exp 12/29"):
            found = dict(body, messages=[{"role": "user", "content": text}])
            status, hdrs, raw = http("POST", chat, found)
            self.assertEqual(status, 503, (text, raw[:300]))
            self.assertEqual(hdrs["x-inferplane-rule"], "guard/pii-local")
        self.assertEqual(self.received(sim, before + 1)["received"], before + 1)
        # the labels reach the records: counted by name at the exporter
        wait_until(lambda: metric(scrape(ex.admin_url), "inferplane_request_labels_total",
                                  label="pii:email") >= 1, 5, what="pii:email at the exporter")
        self.assertGreaterEqual(metric(scrape(ex.admin_url), "inferplane_request_labels_total",
                                       label="pii"), 5)


# ---- verdicts, against a fake decider -----------------------------------------------------------

def encode_rep(req_id, **kw):
    values = {"req_id": req_id, "status": ROUTE_OK, "reason": "test", "detail": "", "worker": "",
              "url": "", "pool": "p", "model": "", "predicted_ttft_s": 0.0, "cached_tokens": 0,
              "state_seq": 0, "candidates": [], "observe": 0, "target_kind": "worker",
              "backend": "", "rule": "", "http_status": 0, "retry_after_ms": 0}
    values.update(kw)
    return mp_pack([PROTO_VERSION, MSG_ROUTE_REP] + [values[f] for f in ROUTE_REP_FIELDS])


class VerdictDecider(ZmtpRouter):
    """Answers by model: "pii" REJECTED 503, "blocked" REJECTED 403, "batch" DEFERRED twice
    then OK, "forever" always DEFERRED; anything else OK to the worker. Keeps every ROUTE_REQ."""

    def __init__(self, worker_url):
        self.worker_url = worker_url
        self.asks = []
        self.counts = {}
        super().__init__(self._route)

    def _route(self, frames):
        v = mp_unpack(frames[-1])
        if v[1] != MSG_ROUTE_REQ:
            return None
        req = dict(zip(ROUTE_REQ_FIELDS, v[2:] + [None] * len(ROUTE_REQ_FIELDS)))
        with self.lock:
            self.asks.append(req)
            n = self.counts[req["model"]] = self.counts.get(req["model"], 0) + 1
        rid, model = req["req_id"], req["model"]
        ok = dict(worker="w0", url=self.worker_url, pool="p", model=model)
        if model == "pii":
            rep = encode_rep(rid, status=ROUTE_REJECTED, reason="keep_local", rule="guard/pii",
                             detail="personal data is processed on local workers only")
        elif model == "blocked":
            rep = encode_rep(rid, status=ROUTE_REJECTED, http_status=403, rule="guard/blocked",
                             detail="tenant suspended")
        elif model == "batch" and n <= 2:
            rep = encode_rep(rid, status=ROUTE_DEFERRED, retry_after_ms=100,
                             rule="routing/batch", reason="deferred")
        elif model == "forever":
            rep = encode_rep(rid, status=ROUTE_DEFERRED, retry_after_ms=1500,
                             rule="routing/batch", reason="deferred")
        elif model.startswith("tls-"):  # a provider decision: backend named as the model
            rep = encode_rep(rid, target_kind="provider", worker="tlsprov", backend=model,
                             url="https://127.0.0.1/v1", pool="p", model="remote-x",
                             reason="overflow")
        else:
            rep = encode_rep(rid, rule="routing/batch" if model == "batch" else "", **ok)
        return [[rep]]


RULES = """apiVersion: inferplane.io/v1alpha1
kind: InferenceWorkerSet
metadata: {name: ws}
spec:
  model: m
  workers: [{name: w0, url: "http://127.0.0.1:9"}]
---
apiVersion: inferplane.io/v1alpha1
kind: InferencePool
metadata: {name: p}
spec:
  model: m
  targets: [{workerSet: ws}]
---
apiVersion: inferplane.io/v1alpha1
kind: InferencePolicy
metadata: {name: routing}
spec:
  rules:
    - name: batch
      match:
        headers: [{name: X-Inferplane-Class, value: batch}, {name: x-team}]
      admitBatch: {maxUtilizationPercent: 60}
    - name: pii
      match: {labels: [pii]}
      keepLocal: {reason: "personal data stays"}
"""


class TestGatewayVerdicts(unittest.TestCase):

    def setUp(self):
        self.st = checked_stack(self)
        self.worker = FakeWorker(0.01)
        self.addCleanup(self.worker.close)
        self.dec = VerdictDecider(self.worker.url)
        self.addCleanup(self.dec.close)
        self.st.write("policy/rules.yaml", RULES)
        pub, rep = zmq_endpoint(), zmq_endpoint()
        self.st.start("policy", ["--dir", os.path.join(self.st.dir, "policy"), "--pub", pub,
                                 "--rep", rep])
        port = free_port()
        self.gw = self.st.start("gateway", [
            "--listen", "127.0.0.1:%d" % port, "--decider", self.dec.endpoint,
            "--exporter", "", "--policy-sub", pub, "--policy-req", rep,
            "--trusted-label-header", "X-Test-Labels", "--batch-max-wait-ms", "1000"])
        self.chat = "http://127.0.0.1:%d/v1/chat/completions" % port

    def ask(self, model, headers=None):
        return http_json("POST", self.chat, {"model": model, "messages": [
            {"role": "user", "content": "hi"}], "max_tokens": 2}, headers)

    def test_rejected(self):
        status, hdrs, body = self.ask("pii")
        self.assertEqual(status, 503, body)
        self.assertEqual(body["error"]["type"], "server_error")
        self.assertEqual(body["error"]["code"], "policy_rejected")
        self.assertIn("personal data is processed on local workers only", body["error"]["message"])
        self.assertIn("guard/pii", body["error"]["message"])
        self.assertEqual(hdrs["x-inferplane-rule"], "guard/pii")
        status, hdrs, body = self.ask("blocked")
        self.assertEqual(status, 403, body)
        self.assertEqual(body["error"]["type"], "permission_error")
        self.assertIn("tenant suspended", body["error"]["message"])
        self.assertEqual(hdrs["x-inferplane-rule"], "guard/blocked")
        # a plain decision names no rule, and says it went to a worker
        status, hdrs, body = self.ask("m")
        self.assertEqual(status, 200, body)
        self.assertNotIn("x-inferplane-rule", hdrs)
        self.assertEqual(hdrs["x-inferplane-target-kind"], "worker")

    def test_deferred_then_served_or_429(self):
        t0 = time.monotonic()
        status, hdrs, body = self.ask("batch")
        elapsed = time.monotonic() - t0
        self.assertEqual(status, 200, body)
        self.assertEqual(self.dec.counts["batch"], 3)
        self.assertGreater(elapsed, 0.19)  # held 2 x 100 ms
        self.assertEqual(hdrs["x-inferplane-rule"], "routing/batch")
        # Always deferred: 1500 ms does not fit in --batch-max-wait-ms 1000 → 429 at once.
        t0 = time.monotonic()
        status, hdrs, body = self.ask("forever")
        self.assertLess(time.monotonic() - t0, 0.9)
        self.assertEqual(status, 429, body)
        self.assertEqual((body["error"]["type"], body["error"]["code"]),
                         ("rate_limit_error", "batch_deferred"))
        self.assertEqual(hdrs["Retry-After"], "2")
        self.assertEqual(hdrs["x-inferplane-rule"], "routing/batch")
        s = scrape(self.gw.admin_url)
        self.assertEqual(metric(s, "inferplane_gateway_deferrals_total"), 3)

    def test_shutdown_ends_a_deferral(self):
        self.dec.counts["batch"] = -1000  # deferred for every ask from now on
        result = {}

        def client():
            try:
                result["r"] = self.ask("batch")
            except OSError as e:  # the connection closed as the gateway stopped
                result["error"] = e
        t = threading.Thread(target=client)
        t.start()
        wait_until(lambda: self.dec.counts["batch"] > -999, 5, 0.02, "the first ask")
        self.assertLess(self.gw.stop(), 1.5)
        t.join(5)
        self.assertFalse(t.is_alive())
        status = result.get("r", (None,))[0]
        self.assertIn(status, (503, None), result)  # shutting_down, or the connection closed

    def test_labels_and_rule_headers_in_route_req(self):
        hdrs = {"X-Test-Labels": " pii, finance,,pii ", "x-inferplane-labels": "nope",
                "X-Inferplane-Class": "batch", "X-Team": "blue", "X-Other": "secret",
                "Authorization": "Bearer sk-client"}
        status, _, body = self.ask("m", hdrs)
        self.assertEqual(status, 200, body)
        req = self.dec.asks[-1]
        self.assertEqual(req["labels"], ["pii", "finance"])
        self.assertEqual(sorted(req["headers"]), ["x-inferplane-class=batch", "x-team=blue"])
        # Without the header: no labels; with one too many: 400 before any decision.
        n = len(self.dec.asks)
        status, _, body = self.ask("m", {"X-Team": "red"})
        self.assertEqual(status, 200)
        self.assertEqual(self.dec.asks[-1]["labels"], [])
        self.assertEqual(self.dec.asks[-1]["headers"], ["x-team=red"])
        status, _, body = self.ask("m", {"X-Test-Labels": ",".join("l%d" % i for i in range(33))})
        self.assertEqual(status, 400, body)
        self.assertEqual(body["error"]["code"], "invalid_labels")
        self.assertIn("X-Test-Labels", body["error"]["message"])
        self.assertEqual(len(self.dec.asks), n + 1)


# A self-signed certificate for 127.0.0.1 (EC P-256, valid until 2126), made with
#   openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 36500 \
#     -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1
CERT = """-----BEGIN CERTIFICATE-----
MIIBkDCCATagAwIBAgIUUwIRoaWUGqengDmntzxoQS9lOmEwCgYIKoZIzj0EAwIw
FDESMBAGA1UEAwwJMTI3LjAuMC4xMCAXDTI2MTIwMjAxMjc1OVoYDzIxMjYxMTA4
MDEyNzU5WjAUMRIwEAYDVQQDDAkxMjcuMC4wLjEwWTATBgcqhkjOPQIBBggqhkjO
PQMBBwNCAASLD1aZfAG3tVCIjZrh2vuiQXS/f+IUmaQpkcyWE4WuzhmlGAFcdfqc
C0rY06URMozdvn4WYSm7Cq+goBny1SAjo2QwYjAdBgNVHQ4EFgQUjOwoLOoNIrfF
qvORQEeq+q7eVrQwHwYDVR0jBBgwFoAUjOwoLOoNIrfFqvORQEeq+q7eVrQwDwYD
VR0TAQH/BAUwAwEB/zAPBgNVHREECDAGhwR/AAABMAoGCCqGSM49BAMCA0gAMEUC
IAYWyKVzOhG5HCoLpk+/9iGr3m6B5S0xEfdVdDsIVR5AAiEAguY4iTy9E+nTO5Ks
LvcU3fZ3YPqmlFGQ9gFq8TYOthw=
-----END CERTIFICATE-----
"""
KEY_PEM = """-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgj01ycip9bfS26Lp+
TTNCDnQ5W3uH1WacQBIi388z3fmhRANCAASLD1aZfAG3tVCIjZrh2vuiQXS/f+IU
maQpkcyWE4WuzhmlGAFcdfqcC0rY06URMozdvn4WYSm7Cq+goBny1SAj
-----END PRIVATE KEY-----
"""
TLS_KEY = "sk-tls-env-5566778899"


class TlsProvider:
    """An HTTPS OpenAI stand-in: answers any POST with a completion naming model "remote-x"
    and remembers the Authorization header and the model of each request."""

    def __init__(self, cert, key):
        self.seen = []
        provider = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
                provider.seen.append((self.path, self.headers.get("Authorization"),
                                      body.get("model")))
                data = json.dumps({"id": "x", "object": "chat.completion", "model": "remote-x",
                                   "choices": [{"index": 0, "message": {
                                       "role": "assistant", "content": "ok"}}],
                                   "usage": {"prompt_tokens": 3, "completion_tokens": 1,
                                             "total_tokens": 4}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.url = "https://127.0.0.1:%d/v1" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class TestGatewayTls(unittest.TestCase):
    """A provider backend over HTTPS: verified with its caBundle, refused without it (the
    system's CAs do not know a self-signed certificate), let through with insecureSkipVerify;
    the bearer secret from the gateway's environment."""

    def test_ca_bundle_and_insecure_skip_verify(self):
        st = checked_stack(self)
        cert, key = st.write("tls/cert.pem", CERT), st.write("tls/key.pem", KEY_PEM)
        prov = TlsProvider(cert, key)
        self.addCleanup(prov.close)
        dec = VerdictDecider("http://127.0.0.1:9")
        self.addCleanup(dec.close)
        backends = [("tls-ca", "tls: {caBundle: %s}" % cert),
                    ("tls-insecure", "tls: {insecureSkipVerify: true}"),
                    ("tls-plain", "")]
        docs = [RULES.split("---\napiVersion: inferplane.io/v1alpha1\nkind: InferencePolicy")[0]]
        for name, tls in backends:
            docs.append("""apiVersion: inferplane.io/v1alpha1
kind: GatewayBackend
metadata: {name: %s}
spec:
  url: %s
  auth: {type: bearer, env: TEST_TLS_KEY}
  timeouts: {connectMs: 2000, responseMs: 5000}
  %s
""" % (name, prov.url, tls))
        st.write("policy/tls.yaml", "---\n".join(d.rstrip("\n") + "\n" for d in docs))
        pub, rep = zmq_endpoint(), zmq_endpoint()
        st.start("policy", ["--dir", os.path.join(st.dir, "policy"), "--pub", pub, "--rep", rep])
        port = free_port()
        gw = st.start("gateway", ["--listen", "127.0.0.1:%d" % port, "--decider", dec.endpoint,
                                  "--exporter", "", "--policy-sub", pub, "--policy-req", rep],
                      env={"TEST_TLS_KEY": TLS_KEY})
        chat = "http://127.0.0.1:%d/v1/chat/completions" % port

        def ask(model):
            return http("POST", chat, {"model": model, "messages": [
                {"role": "user", "content": "hi"}], "max_tokens": 1})
        for model in ("tls-ca", "tls-insecure"):
            status, hdrs, raw = ask(model)
            self.assertEqual(status, 200, raw[:300])
            self.assertEqual(json.loads(raw)["model"], model)  # as asked, not "remote-x"
            self.assertEqual(hdrs["x-inferplane-backend"], model)
            self.assertNotIn(b"remote-x", raw)
        self.assertEqual(prov.seen, [("/v1/chat/completions", "Bearer " + TLS_KEY, "remote-x")] * 2)
        status, _, raw = ask("tls-plain")
        self.assertEqual(status, 502, raw[:300])
        self.assertEqual(json.loads(raw)["error"]["code"], "upstream_unreachable")
        self.assertEqual(len(prov.seen), 2)
        self.assertEqual(ask("tls-insecure")[0], 200)
        # The warning about the unverified backend: once, however often it is used.
        self.assertIn("msg=backend_insecure backend=tls-insecure", gw.log())
        self.assertEqual(gw.log().count("msg=backend_insecure"), 1)
        self.assertNotIn(TLS_KEY, gw.log())


if __name__ == "__main__":
    unittest.main()
