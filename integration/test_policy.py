"""The policy service, black-box: readable errors for broken YAML, hot reload that keeps the
last good policy, POLICY_REQ / PUB on the wire, malformed frames, admin endpoints, SIGTERM.

    cd integration && python3 -m unittest -v test_policy
"""
import os
import time
import unittest

from lib.harness import Stack, http, http_json, wait_until, zmq_endpoint, zmq_poke
from test_decider import POLICY, POLICY_REQ, VERSION, Zmtp, mp_pack, mp_unpack

SET = """apiVersion: inferplane.io/v1alpha1
kind: InferenceWorkerSet
metadata: {name: qwen-small}
spec:
  model: qwen
  workers:
    - name: w0
      url: http://127.0.0.1:8100
      kvEvents: tcp://127.0.0.1:5600
"""

POOL = """apiVersion: inferplane.io/v1alpha1
kind: InferencePool
metadata: {name: chat}
spec:
  model: qwen
  strategy: ttft
  targets:
    - workerSet: qwen-small
"""

WORKER_FIELDS = ["name", "pool", "model", "url", "kv_endpoint", "replay_endpoint", "metrics_url",
                 "block_size"]


def decode_policy(frame):
    v, _ = mp_unpack(frame)
    assert v[0] == VERSION and v[1] == POLICY, v[:2]
    return {"version": v[2], "source": v[3],
            "pools": [dict(zip(["name", "model", "strategy"], p)) for p in v[4]],
            "workers": [dict(zip(WORKER_FIELDS, w)) for w in v[5]]}


class PolicyStack:
    def __init__(self, test, files, ready=True):
        self.st = Stack(test)
        self.dir = os.path.join(self.st.dir, "policy")
        os.makedirs(self.dir)
        for name, text in files.items():
            self.write(name, text)
        self.pub, self.rep = zmq_endpoint(), zmq_endpoint()
        self.proc = self.st.start("policy", ["--dir", self.dir, "--pub", self.pub,
                                             "--rep", self.rep, "--republish-ms", "200"],
                                  ready=ready)
        if not ready:
            wait_until(lambda: http("GET", self.url("/healthz"))[0] == 200, what="healthz")

    def write(self, name, text):
        path = os.path.join(self.dir, name)
        with open(path + ".tmp", "w") as f:
            f.write(text)
        os.rename(path + ".tmp", path)  # as editors and ConfigMap mounts do: atomic

    def url(self, path):
        return self.proc.admin_url + path

    def debug(self):
        return http_json("GET", self.url("/debug/policy"))[2]

    def ask(self, have=0):
        d = Zmtp(self.rep, "DEALER")
        try:
            d.send([mp_pack([VERSION, POLICY_REQ, have])])
            return decode_policy(d.recv()[0])
        finally:
            d.close()


class TestPolicy(unittest.TestCase):
    def test_broken_yaml_gives_file_line_column(self):
        pool = POOL.replace("workerSet: qwen-small", "workerSet: qwen-big")
        p = PolicyStack(self, {"sets.yaml": SET, "pool.yaml": pool}, ready=False)
        status, _, doc = http_json("GET", p.url("/readyz"))
        self.assertEqual(status, 503)
        want = ('pool.yaml:8:18: InferencePool "chat": spec.targets[0].workerSet "qwen-big" does '
                'not exist (known: qwen-small)')
        self.assertIn(want, doc["detail"])
        dbg = p.debug()
        self.assertEqual(dbg["version"], 0)
        self.assertFalse(dbg["valid"])
        self.assertIn(want, dbg["errors"])
        self.assertEqual(sorted(dbg["files"]), ["pool.yaml", "sets.yaml"])
        self.assertIn(want.replace('"', '\\"'), p.proc.log())  # quoted in the log line
        metrics = http("GET", p.url("/metrics"))[2]
        self.assertIn(b"inferplane_policy_errors 1", metrics)
        self.assertIn(b"inferplane_policy_version 0", metrics)

        # Fix it: ready, with a policy.
        p.write("pool.yaml", POOL)
        p.proc.wait_ready(timeout=5)
        self.assertTrue(p.debug()["valid"])

    def test_yaml_syntax_and_unknown_fields(self):
        bad = SET.replace("  model: qwen\n", "  model: qwen\n  modle: x\n") + "  workers: [\n"
        p = PolicyStack(self, {"sets.yaml": bad, "pool.yaml": POOL}, ready=False)
        errors = p.debug()["errors"]
        self.assertTrue(any(e.startswith("sets.yaml:") and "YAML syntax error" in e
                            for e in errors), errors)
        p.write("sets.yaml", SET.replace("  model: qwen\n", "  model: qwen\n  modle: x\n"))
        wait_until(lambda: any("spec.modle is not a known field" in e
                               for e in p.debug()["errors"]), 5, what="the unknown-field error")
        e = [e for e in p.debug()["errors"] if "modle" in e][0]
        self.assertTrue(e.startswith('sets.yaml:6:3: InferenceWorkerSet "qwen-small": '), e)
        self.assertIn('did you mean "model"?', e)

    def test_hot_reload_keeps_last_good_policy(self):
        p = PolicyStack(self, {"sets.yaml": SET, "pool.yaml": POOL})
        first = p.ask()
        self.assertGreater(first["version"], 0)
        self.assertEqual(first["pools"], [{"name": "chat", "model": "qwen", "strategy": "ttft"}])
        self.assertEqual(first["workers"][0]["name"], "w0")
        self.assertEqual(first["workers"][0]["metrics_url"], "http://127.0.0.1:8100/metrics")
        self.assertEqual(first["workers"][0]["block_size"], 16)
        self.assertEqual(first["source"], p.dir)
        sub = Zmtp(p.pub, "SUB")
        self.addCleanup(sub.close)
        self.assertEqual(decode_policy(sub.recv()[0])["version"], first["version"])  # republish

        # A valid edit: a new version, published.
        p.write("sets.yaml", SET + "    - name: w1\n      url: http://127.0.0.1:8101\n")
        wait_until(lambda: p.debug()["version"] > first["version"], 5, what="a new version")
        second = p.ask()
        self.assertGreater(second["version"], first["version"])
        self.assertEqual([w["name"] for w in second["workers"]], ["w0", "w1"])
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if decode_policy(sub.recv()[0])["version"] == second["version"]:
                break
        else:
            self.fail("the new version was not published")

        # A broken edit: the last good policy stays in service, the error is visible.
        p.write("pool.yaml", POOL.replace("strategy: ttft", "strategy: fastest"))
        wait_until(lambda: not p.debug()["valid"], 5, what="the broken edit to be noticed")
        dbg = p.debug()
        self.assertEqual(dbg["version"], second["version"])
        self.assertEqual(len(dbg["workers"]), 2)
        self.assertIn('pool.yaml:6:13: InferencePool "chat": spec.strategy "fastest" is not a '
                      'known strategy', dbg["errors"][0])
        status, _, ready = http_json("GET", p.url("/readyz"))
        self.assertEqual(status, 200)
        self.assertIn("reload failed", ready["detail"])
        metrics = http("GET", p.url("/metrics"))[2]
        self.assertIn(b"inferplane_policy_files_valid 0", metrics)
        self.assertIn(b'inferplane_policy_reloads_total{result="error"} 1', metrics)
        self.assertEqual(p.ask()["version"], second["version"])

        # Unchanged content (touch) keeps the version; a fix makes a new one.
        p.write("sets.yaml", SET + "    - name: w1\n      url: http://127.0.0.1:8101\n")
        p.write("pool.yaml", POOL.replace("strategy: ttft", "strategy: least-loaded"))
        wait_until(lambda: p.debug()["valid"], 5, what="the fix")
        third = p.ask()
        self.assertGreater(third["version"], second["version"])
        self.assertEqual(third["pools"][0]["strategy"], "least-loaded")

    def test_malformed_frames_and_admin(self):
        p = PolicyStack(self, {"all.yaml": SET + "---\n" + POOL})
        self.assertEqual(zmq_poke(p.rep, "dealer", count=300), 0)
        self.assertEqual(zmq_poke(p.rep, "raw", count=50), 0)
        d = Zmtp(p.rep, "DEALER")
        self.addCleanup(d.close)
        d.send([b"\x93\x01"])                           # truncated
        d.send([mp_pack([VERSION, 99, 1])])             # unknown type
        d.send([mp_pack([VERSION, POLICY, 1, "x", [], []])])  # not a request
        d.send([mp_pack([VERSION, POLICY_REQ, 0])])
        self.assertGreater(decode_policy(d.recv()[0])["version"], 0)
        self.assertTrue(p.proc.alive())
        metrics = http("GET", p.url("/metrics"))[2].decode()
        self.assertIn('inferplane_frames_dropped_total{reason="unexpected_type"}', metrics)
        self.assertIn("inferplane_policy_requests_total", metrics)
        self.assertEqual(http("GET", p.url("/healthz"))[0], 200)
        self.assertEqual(http_json("GET", p.url("/version"))[2]["service"], "policy")
        dbg = p.debug()
        self.assertEqual(dbg["pools"][0]["workers"], ["w0"])
        self.assertEqual(dbg["workers"][0]["kv_endpoint"], "tcp://127.0.0.1:5600")
        self.assertLess(p.proc.stop(), 2.0)

    def test_bad_flags(self):
        st = Stack(self)
        p = st.start("policy", ["--dir", st.dir, "--pub", "nonsense", "--rep", zmq_endpoint()],
                     admin=False, ready=False)
        p.proc.wait(5)
        self.assertEqual(p.proc.returncode, 2)
        self.assertIn("cannot bind --pub", p.log())
        p = st.start("policy", ["--dri", st.dir], admin=False, ready=False)
        p.proc.wait(5)
        self.assertEqual(p.proc.returncode, 2)
        self.assertIn("--dir", p.log())


if __name__ == "__main__":
    unittest.main()
