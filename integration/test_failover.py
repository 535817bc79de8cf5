"""Failover before the first byte (issue 17, docs/failover.md), through real processes.

One stack: three simulated workers (w0, w1, w2) in pool "chat"; a provider "cloud" whose
GatewayBackend is another simulator (the stand-in, which wants a key), alone in pool
"cloud-chat" and the overflow of pool "mixed" (worker w3); the policy, aggregator, collector,
decider, exporter and a gateway with short failover settings. Faults are armed on the
simulators at run time (POST /sim/fault: the next N requests answer a status, or stall before
their first byte). A second gateway on the same decider has a retry budget of one.

Covered: a 429 moves the request to another worker; a stalled first byte (before the headers,
and a stream's after them) moves it after --first-byte-timeout-ms; a breaker opens, avoids its
worker, and closes after a probe; a provider's 500 then 200 is retried once; a worker's 500
moves to the provider (translated and authenticated anew); the retry budget caps retries; 431
and 414; a client that disconnects frees the worker's slot (vllm:num_requests_running) within
a second, streamed or not; killing a worker mid-load loses no request.

    cd integration && python3 -m unittest -v test_failover
"""
import json
import os
import socket
import threading
import time
import unittest

from lib.cluster import policy_yaml
from lib.harness import Stack, free_port, http, http_json, wait_until
from test_exporter import SANITIZER_MARKS, metric, scrape

CHAT = {"model": "sim-model", "messages": [{"role": "user", "content": "Hello there"}],
        "max_tokens": 3, "ignore_eos": True}
KEY = "sk-failover-standin-0123456789"
COOLDOWN_MS = 1500
FIRST_BYTE_MS = 1200

# after the worker set and pool of cluster.policy_yaml
RESOURCES = """---
apiVersion: inferplane.io/v1alpha1
kind: GatewayBackend
metadata: {name: cloud-backend}
spec:
  url: %(standin)s/v1
  protocol: openai
  auth: {type: bearer, file: %(key)s}
  timeouts: {connectMs: 1000, responseMs: 10000}
---
apiVersion: inferplane.io/v1alpha1
kind: InferenceProvider
metadata: {name: cloud}
spec:
  backend: cloud-backend
  models: [{name: cloud-chat, remoteName: remote-chat}, {name: mixed, remoteName: remote-chat}]
---
apiVersion: inferplane.io/v1alpha1
kind: InferencePool
metadata: {name: cloud-chat}
spec:
  model: cloud-chat
  targets:
    - {provider: cloud, role: overflow}
---
apiVersion: inferplane.io/v1alpha1
kind: InferenceWorkerSet
metadata: {name: solo}
spec:
  model: sim-model
  workers:
    - {name: w3, url: "%(w3)s", kvEvents: "%(w3kv)s", replay: "%(w3replay)s"}
---
apiVersion: inferplane.io/v1alpha1
kind: InferencePool
metadata: {name: mixed}
spec:
  model: mixed
  targets:
    - workerSet: solo
    - {provider: cloud, role: overflow}
"""


def arm(sim, **fault):
    status, _, body = http("POST", sim.url + "/sim/fault", fault)
    assert status == 200, body


def sim_metric(sim, name, **labels):
    return metric(scrape(sim.url), name, **labels)


def running(sims):
    return sum(sim_metric(s, "vllm:num_requests_running") for s in sims)


class TestFailover(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        st = cls.st = Stack()
        try:
            cls.sims = [st.start_sim("w%d" % i, extra=["--time-scale", "1"]) for i in range(3)]
            cls.solo = st.start_sim("w3")
            cls.standin = st.start_sim("standin", model="remote-chat",
                                       extra=["--api-key", KEY, "--time-scale", "20"])
            key = st.write("cloud-token", KEY + "\n")
            st.write("policy/resources.yaml", policy_yaml(cls.sims) + RESOURCES % {
                "standin": cls.standin.url, "key": key,
                "w3": cls.solo.url, "w3kv": cls.solo.kv, "w3replay": cls.solo.replay})
            cls.gw = st.start_chain(os.path.join(st.dir, "policy"), [
                "--first-byte-timeout-ms", str(FIRST_BYTE_MS), "--max-attempts", "3",
                "--retry-budget-min", "1000", "--breaker-failures", "2",
                "--breaker-cooldown-ms", str(COOLDOWN_MS), "--max-header-bytes", "16384",
                "--max-url-bytes", "2048"])
            cls.chat = cls.gw.api + "/v1/chat/completions"
            wait_until(lambda: http_json("POST", cls.chat, CHAT)[0] == 200, 15, 0.2,
                       "the first request through the gateway")
            # every worker has a load sample (the decider routes only to those)
            wait_until(lambda: len({http_json("POST", cls.chat, dict(
                CHAT, messages=[{"role": "user", "content": "warm %d" % i}]))[1].get(
                    "x-inferplane-worker") for i in range(6)}) >= 2, 10, 0.2, "two workers used")
        except BaseException:
            st.stop_all()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.st.stop_all()
        for p in cls.st.procs:  # a sanitizer build (BUILD=build-san) reports here
            for mark in SANITIZER_MARKS:
                if mark in p.log():
                    raise AssertionError("%s reported %r:\n%s" % (p.name, mark, p.log()[-6000:]))

    def tearDown(self):
        for s in self.sims + [self.solo, self.standin]:
            if s.alive():
                arm(s)

    def gw_metric(self, name, gw=None, **labels):
        return metric(scrape((gw or self.gw).admin_url), name, **labels)

    def ask(self, i, url=None, **extra):
        body = dict(CHAT, messages=[{"role": "user", "content": "question %d %s" % (i, extra)}])
        body.update(extra)
        return http_json("POST", url or self.chat, body)

    def until_attempts(self, n, url=None, tries=20, **extra):
        """Sends requests until one needed `n` attempts; returns its (headers, body)."""
        for i in range(tries):
            status, hdrs, body = self.ask(1000 * n + i + int(time.time()), url, **extra)
            self.assertEqual(status, 200, body)
            if hdrs.get("x-inferplane-attempts") == str(n):
                return hdrs, body
        self.fail("no request of %d took %d attempts" % (tries, n))

    def wait_breakers_closed(self):
        """After a test that opened breakers: wait out the cooldown, then probe until closed."""
        time.sleep(COOLDOWN_MS / 1000.0 + 0.1)

        def closed():
            self.ask(int(time.time() * 1000))
            s = scrape(self.gw.admin_url)
            return all(v == 0 for n, ls, v in s if n == "inferplane_gateway_breaker_state")
        wait_until(closed, 10, 0.05, "every breaker closed again")

    # ---- the tests, in name order (the last one kills a worker) ---------------------------

    def test_1_status_429_moves_to_another_worker(self):
        sick = self.sims[0]
        arm(sick, status=429, count=1000)
        before = self.gw_metric("inferplane_gateway_retries_total", reason="status_429")
        hdrs, _ = self.until_attempts(2)
        self.assertNotEqual(hdrs["x-inferplane-worker"], "w0")
        self.assertGreaterEqual(
            self.gw_metric("inferplane_gateway_retries_total", reason="status_429") - before, 1)
        # the breaker opens after 2 failures: then w0 is avoided, nothing is retried
        wait_until(lambda: self.ask(int(time.time() * 1e6))[0] == 200 and self.gw_metric(
            "inferplane_gateway_breaker_state", target="w0") == 1, 10, 0.01, "w0 open")
        for i in range(6):
            status, hdrs, _ = self.ask(i, max_tokens=1)
            self.assertEqual(status, 200)
            self.assertNotEqual(hdrs["x-inferplane-worker"], "w0")
            self.assertEqual(hdrs["x-inferplane-attempts"], "1")
        arm(sick)
        self.wait_breakers_closed()

    def test_2_stalled_first_byte_moves(self):
        stuck = self.sims[1]
        arm(stuck, stall_ms=8000, count=1000)
        before = self.gw_metric("inferplane_gateway_retries_total", reason="first_byte_timeout")
        t0 = time.monotonic()
        hdrs, _ = self.until_attempts(2)  # not streamed: no headers either
        self.assertNotEqual(hdrs["x-inferplane-worker"], "w1")
        # a stream: the worker's headers come, its first event does not
        hdrs, _ = self.until_attempts(2, stream=True)
        self.assertNotEqual(hdrs["x-inferplane-worker"], "w1")
        took = time.monotonic() - t0
        self.assertLess(took, 12, "each stall costs --first-byte-timeout-ms, not 8 s")
        self.assertGreaterEqual(self.gw_metric("inferplane_gateway_retries_total",
                                               reason="first_byte_timeout") - before, 2)
        arm(stuck)
        self.wait_breakers_closed()

    def test_3_breaker_opens_and_closes(self):
        sick = self.sims[2]
        arm(sick, status=500, count=1000)
        opened = self.gw_metric("inferplane_gateway_breaker_transitions_total", target="w2",
                                to="open")
        wait_until(lambda: self.ask(int(time.time() * 1e6))[0] == 200 and self.gw_metric(
            "inferplane_gateway_breaker_state", target="w2") == 1, 10, 0.01, "w2 open")
        self.assertEqual(self.gw_metric("inferplane_gateway_breaker_transitions_total",
                                        target="w2", to="open"), opened + 1)
        for i in range(5):  # avoided while open: every request on its first attempt
            status, hdrs, _ = self.ask(100 + i)
            self.assertEqual((status, hdrs["x-inferplane-attempts"]), (200, "1"))
            self.assertNotEqual(hdrs["x-inferplane-worker"], "w2")
        arm(sick)  # healthy again: after the cooldown one probe closes it
        self.wait_breakers_closed()
        self.assertGreaterEqual(self.gw_metric("inferplane_gateway_breaker_transitions_total",
                                               target="w2", to="half_open"), 1)
        self.assertGreaterEqual(self.gw_metric("inferplane_gateway_breaker_transitions_total",
                                               target="w2", to="closed"), 1)

    def test_4_provider_500_then_200_is_retried_once(self):
        arm(self.standin, status=500, count=1)
        before = self.gw_metric("inferplane_gateway_retries_total", reason="status_5xx")
        status, hdrs, body = http_json("POST", self.chat, dict(CHAT, model="cloud-chat"),
                                       headers={"Authorization": "Bearer client"})
        self.assertEqual(status, 200, body)
        self.assertEqual(hdrs["x-inferplane-attempts"], "2")
        self.assertEqual(hdrs["x-inferplane-target-kind"], "provider")
        self.assertEqual(body["model"], "cloud-chat")
        self.assertEqual(
            self.gw_metric("inferplane_gateway_retries_total", reason="status_5xx") - before, 1)
        self.assertEqual(sim_metric(self.standin, "inferplane_sim_injected_failures_total"), 1)
        # its record says so: answered after another attempt failed (RECORD.outcome)
        wait_until(lambda: metric(scrape(self.gw.exporter.admin_url),
                                  "inferplane_request_outcomes_total", model="cloud-chat",
                                  outcome="failed_over") >= 1, 5,
                   what="the failed-over outcome at the exporter")

    def test_4b_a_worker_failure_moves_to_the_provider(self):
        """A retry that lands on a provider is translated and authenticated anew: the worker
        got no credentials, the provider its key and its model name."""
        mixed = dict(CHAT, model="mixed")
        wait_until(lambda: http_json("POST", self.chat, mixed)[1].get("x-inferplane-worker")
                   == "w3", 10, 0.1, "w3 routed to (it has a load sample)")
        arm(self.solo, status=500, count=1)
        status, hdrs, body = http_json("POST", self.chat, mixed)
        self.assertEqual(status, 200, body)
        self.assertEqual(hdrs["x-inferplane-attempts"], "2")
        self.assertEqual(hdrs["x-inferplane-target-kind"], "provider")
        self.assertEqual(hdrs["x-inferplane-worker"], "cloud")
        self.assertEqual(body["model"], "mixed")  # the remote name rewritten back
        self.assertEqual(sim_metric(self.solo, "inferplane_sim_injected_failures_total"), 1)

    def test_5_retry_budget_caps_retries(self):
        # a second gateway on the same decider and policy, with a budget of one retry
        argv = self.gw.argv
        opt = lambda name: argv[argv.index(name) + 1]
        port = free_port()
        gw2 = self.st.start("gateway", [
            "--listen", "127.0.0.1:%d" % port, "--decider", opt("--decider"), "--exporter", "",
            "--policy-sub", opt("--policy-sub"), "--policy-req", opt("--policy-req"),
            "--retry-budget-percent", "0", "--retry-budget-min", "1",
            "--breaker-failures", "1000"])
        url = "http://127.0.0.1:%d/v1/chat/completions" % port
        wait_until(lambda: http_json("POST", url, CHAT)[0] == 200, 10, 0.1, "gateway 2")
        failures = sum(sim_metric(s, "inferplane_sim_injected_failures_total") for s in self.sims)
        for s in self.sims:
            arm(s, status=503, count=1000)
        statuses = [self.ask(200 + i, url)[0] for i in range(4)]
        self.assertEqual(statuses, [503] * 4)  # the worker's own answer, once out of budget
        self.assertEqual(self.gw_metric("inferplane_gateway_retries_total", gw2), 1)
        self.assertEqual(self.gw_metric("inferplane_gateway_retries_denied_total", gw2,
                                        why="budget"), 4)
        attempts = sum(sim_metric(s, "inferplane_sim_injected_failures_total")
                       for s in self.sims) - failures
        self.assertEqual(attempts, 5)  # 4 requests, 1 retry
        gw2.stop()

    def test_6_size_limits(self):
        status, _, body = http_json("POST", self.chat, CHAT, headers={"x-big": "a" * 20000})
        self.assertEqual(status, 431)
        self.assertIn("exceed the limit", body["error"]["message"])
        status, _, body = http_json("POST", self.chat + "?q=" + "b" * 3000, CHAT)
        self.assertEqual(status, 414)
        self.assertIn("limit of 2048", body["error"]["message"])

    def test_7_client_disconnect_frees_the_slot(self):
        self.assertEqual(running(self.sims), 0)
        gone = sum(sim_metric(s, "inferplane_sim_client_disconnects_total") for s in self.sims)
        port = int(self.gw.api.rsplit(":", 1)[1])
        for stream in (False, True):
            body = json.dumps(dict(CHAT, max_tokens=2000, stream=stream)).encode()
            c = socket.create_connection(("127.0.0.1", port), timeout=5)
            c.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                      b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                      % (len(body), body))
            wait_until(lambda: running(self.sims) == 1, 5, 0.02, "the request running")
            if stream:
                self.assertTrue(c.recv(1))  # the stream started: bytes reached the client
            t0 = time.monotonic()
            c.close()
            wait_until(lambda: running(self.sims) == 0, 3, 0.02, "the slot freed")
            freed = time.monotonic() - t0
            self.assertLess(freed, 1.0, "freed %.2f s after the client left" % freed)
        self.assertEqual(sum(sim_metric(s, "inferplane_sim_client_disconnects_total")
                             for s in self.sims) - gone, 2)
        self.assertGreaterEqual(self.gw_metric("inferplane_gateway_upstream_errors_total",
                                               kind="client_gone"), 2)

    def test_9_killing_a_worker_loses_no_unstarted_request(self):
        results = []
        lock = threading.Lock()

        def one(i):
            status, hdrs, body = self.ask(300 + i, max_tokens=40)
            with lock:
                results.append((status, hdrs.get("x-inferplane-attempts"), body))
        threads = [threading.Thread(target=one, args=(i,)) for i in range(24)]
        for i, t in enumerate(threads):
            t.start()
            if i == 8:  # mid-load: some requests are at w2 right now
                wait_until(lambda: sim_metric(self.sims[2], "vllm:num_requests_running") > 0,
                           5, 0.01, "requests at w2")
                self.sims[2].proc.kill()
        for t in threads:
            t.join(30)
        self.assertEqual(len(results), 24)
        # non-streamed: no byte reached a client before its answer, so none may be lost
        self.assertEqual([r[0] for r in results], [200] * 24, [r[2] for r in results if r[0] != 200])
        self.assertGreaterEqual(sum(1 for r in results if r[1] != "1"), 1)
        self.assertGreaterEqual(self.gw_metric("inferplane_gateway_retries_total",
                                               reason="connect"), 1)


if __name__ == "__main__":
    unittest.main()
