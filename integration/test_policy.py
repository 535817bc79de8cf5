"""The policy service, black-box: readable errors for broken YAML, hot reload (inotify,
debounced; the 1 s poll as the fallback) that keeps the last good policy, the content hash
on the policy service, a decider and a gateway, POST /validate, `inferplanectl validate`,
POLICY_REQ / PUB on the wire, malformed frames, admin endpoints, SIGTERM.

    cd integration && python3 -m unittest -v test_policy
"""
import os
import re
import subprocess
import sys
import tempfile
import time
import unittest

from lib.harness import (ROOT, Stack, binary, free_port, http, http_json, wait_until,
                         zmq_endpoint, zmq_poke)
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


# A second worker set, b0 on other ports.
BIG = (SET.replace("name: qwen-small", "name: qwen-big").replace("name: w0", "name: b0")
       .replace(":8100", ":8200").replace(":5600", ":5800"))

# The error of a pool naming a worker set that does not exist, at pool.yaml's line 8.
MISSING = ('InferencePool "chat": spec.targets[0].workerSet "qwen-big" does not exist '
           '(known: qwen-small)')


def decode_policy(frame):
    v, _ = mp_unpack(frame)
    assert v[0] == VERSION and v[1] == POLICY, v[:2]
    return {"version": v[2], "source": v[3],
            "pools": [dict(zip(["name", "model", "strategy"], p)) for p in v[4]],
            "workers": [dict(zip(WORKER_FIELDS, w)) for w in v[5]],
            "hash": v[6] if len(v) > 6 else 0}


def hex16(h):
    return "%016x" % h


def metric(text, name):
    """The value of one series in Prometheus text (bytes), or None."""
    m = re.search(rb"^" + re.escape(name.encode()) + rb" (\S+)$", text, re.M)
    return float(m.group(1)) if m else None


def ctl_validate(*args):
    return subprocess.run([binary("inferplanectl"), "validate"] + list(args),
                          capture_output=True, text=True, timeout=30)


class PolicyStack:
    def __init__(self, test, files, ready=True, extra=()):
        self.st = Stack(test)
        self.dir = os.path.join(self.st.dir, "policy")
        os.makedirs(self.dir)
        for name, text in files.items():
            self.write(name, text)
        self.pub, self.rep = zmq_endpoint(), zmq_endpoint()
        self.extra = list(extra)
        self.start(ready)

    def start(self, ready=True):
        self.proc = self.st.start("policy", ["--dir", self.dir, "--pub", self.pub,
                                             "--rep", self.rep, "--republish-ms", "200"]
                                  + self.extra, ready=ready)
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

    def metrics(self):
        return http("GET", self.url("/metrics"))[2]

    def validate(self, body, content_type="application/yaml"):
        return http_json("POST", self.url("/validate"), body,
                         headers={"Content-Type": content_type})

    def wait_version_above(self, version, timeout=3.0):
        """Polls /debug/policy every 5 ms until its version exceeds `version`; returns it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            d = self.debug()
            if d["version"] > version:
                return d
            time.sleep(0.005)
        raise AssertionError("no version above %d within %.1f s" % (version, timeout))

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
        self.assertNotEqual(first["hash"], 0)
        self.assertEqual(p.debug()["hash"], hex16(first["hash"]))
        sub = Zmtp(p.pub, "SUB")
        self.addCleanup(sub.close)
        self.assertEqual(decode_policy(sub.recv()[0])["version"], first["version"])  # republish

        # A valid edit: a new version, published.
        p.write("sets.yaml", SET + "    - name: w1\n      url: http://127.0.0.1:8101\n")
        wait_until(lambda: p.debug()["version"] > first["version"], 5, what="a new version")
        second = p.ask()
        self.assertGreater(second["version"], first["version"])
        self.assertEqual([w["name"] for w in second["workers"]], ["w0", "w1"])
        self.assertNotEqual(second["hash"], first["hash"])
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
        self.assertEqual(dbg["hash"], hex16(second["hash"]))
        self.assertEqual(len(dbg["workers"]), 2)
        error = 'pool.yaml:6:13: InferencePool "chat": spec.strategy "fastest" is not a known strategy'
        self.assertIn(error, dbg["errors"][0])
        self.assertEqual(dbg["reloads"]["error"], 1)
        status, _, ready = http_json("GET", p.url("/readyz"))
        self.assertEqual(status, 200)
        self.assertIn("reload failed", ready["detail"])
        self.assertIn("hash=%s (last good)" % hex16(second["hash"]), ready["detail"])
        metrics = p.metrics()
        self.assertEqual(metric(metrics, "inferplane_policy_errors"), 1)
        self.assertIn(b"inferplane_policy_files_valid 0", metrics)
        self.assertIn(b'inferplane_policy_reloads_total{result="error"} 1', metrics)
        log = p.proc.log()
        self.assertIn(error.replace('"', '\\"'), log)  # msg=policy_error error="..."
        self.assertIn("msg=policy_invalid", log)
        self.assertIn("kept_version=%d kept_hash=%s" % (second["version"], hex16(second["hash"])),
                      log)
        kept = p.ask()
        self.assertEqual((kept["version"], kept["hash"]), (second["version"], second["hash"]))

        # Unchanged content (touch) keeps the version; a fix makes a new one.
        p.write("sets.yaml", SET + "    - name: w1\n      url: http://127.0.0.1:8101\n")
        p.write("pool.yaml", POOL.replace("strategy: ttft", "strategy: least-loaded"))
        wait_until(lambda: p.debug()["valid"], 5, what="the fix")
        third = p.ask()
        self.assertGreater(third["version"], second["version"])
        self.assertEqual(third["pools"][0]["strategy"], "least-loaded")
        self.assertEqual(metric(p.metrics(), "inferplane_policy_errors"), 0)

    def test_inotify_reload_latency(self):
        """A change is served ~100 ms after it is written (the debounce), well inside the 1 s
        of the poll it replaces; the watch mode is in the log, /debug/policy and a metric."""
        p = PolicyStack(self, {"sets.yaml": SET, "pool.yaml": POOL})
        dbg = p.debug()
        self.assertEqual(dbg["watch"]["mode"], "inotify", dbg["watch"])
        self.assertEqual(dbg["watch"]["reason"], "")
        self.assertEqual(dbg["watch"]["debounce_ms"], 100)
        self.assertIn("msg=policy_watch mode=inotify", p.proc.log())
        self.assertIn("watch=inotify", p.proc.log())  # the listening line
        self.assertEqual(metric(p.metrics(), "inferplane_policy_watch_inotify"), 1)
        latencies, version = [], dbg["version"]
        for i in range(5):
            port = 8200 + i
            t0 = time.monotonic()
            p.write("sets.yaml", SET.replace("8100", str(port)))
            d = p.wait_version_above(version)
            latencies.append(time.monotonic() - t0)
            version = d["version"]
            self.assertEqual(d["workers"][0]["url"], "http://127.0.0.1:%d" % port)
        latencies.sort()
        print("\nreload latency (write to /debug/policy), ms: %s"
              % " ".join("%.0f" % (x * 1000) for x in latencies), file=sys.stderr)
        self.assertGreaterEqual(latencies[0], 0.095)  # debounced: 100 ms after the last event
        self.assertLess(latencies[2], 0.3)            # the median: inotify, not the 1 s poll
        self.assertLess(latencies[-1], 0.6)

    def test_burst_compiles_once(self):
        """An editor's write + rename, a cp over a file and a new file, written together,
        compile once (no intermediate policy: the new pool names a worker set of the new
        file); events that name no policy file compile nothing."""
        p = PolicyStack(self, {"sets.yaml": SET, "pool.yaml": POOL})
        before = p.debug()
        changed = metric(p.metrics(), 'inferplane_policy_reloads_total{result="changed"}')
        pool = POOL.replace("    - workerSet: qwen-small\n",
                            "    - workerSet: qwen-small\n    - workerSet: qwen-big\n")
        sets = SET.replace("8100", "8101")
        # 20 ms apart: more than an undebounced watch would take to compile in between,
        # well inside the 100 ms of quiet the service waits for
        p.write("sets.yaml", sets)                                    # write + rename
        time.sleep(0.02)
        with open(os.path.join(p.dir, "pool.yaml"), "w") as f:        # in place, as cp does
            f.write(pool)
        time.sleep(0.02)
        with open(os.path.join(p.dir, "big.yaml"), "w") as f:         # a new file, last
            f.write(BIG)
        d = p.wait_version_above(before["version"])
        time.sleep(0.4)  # a second compilation would come 100 ms after a straggling event
        d = p.debug()
        self.assertTrue(d["valid"], d["errors"])
        self.assertEqual(sorted(w["name"] for w in d["workers"]), ["b0", "w0"])
        self.assertEqual(d["reloads"], {"changed": before["reloads"]["changed"] + 1,
                                        "unchanged": before["reloads"]["unchanged"],
                                        "error": before["reloads"]["error"]})
        self.assertEqual(metric(p.metrics(), 'inferplane_policy_reloads_total{result="changed"}'),
                         changed + 1)
        # Swap files, temporary files, notes: looked at, never compiled.
        for name in (".pool.yaml.swp", "notes.txt", "pool.yaml.tmp"):
            with open(os.path.join(p.dir, name), "w") as f:
                f.write("not: [policy\n")
        time.sleep(0.4)
        self.assertEqual(p.debug()["reloads"], d["reloads"])
        self.assertGreater(p.debug()["watch"]["events"], 0)

    def test_poll_fallback(self):
        """--watch poll (what runs where inotify cannot): said so, and a change is still
        picked up within the second."""
        p = PolicyStack(self, {"sets.yaml": SET, "pool.yaml": POOL}, extra=["--watch", "poll"])
        dbg = p.debug()
        self.assertEqual(dbg["watch"]["mode"], "poll")
        self.assertIn("--watch poll", dbg["watch"]["reason"])
        self.assertEqual(dbg["watch"]["poll_ms"], 1000)
        self.assertIn("msg=policy_watch mode=poll", p.proc.log())
        self.assertEqual(metric(p.metrics(), "inferplane_policy_watch_inotify"), 0)
        p.write("sets.yaml", SET.replace("8100", "8105"))
        d = p.wait_version_above(dbg["version"], timeout=2.5)
        self.assertEqual(d["workers"][0]["url"], "http://127.0.0.1:8105")

    def test_same_hash_on_policy_decider_and_gateway(self):
        """The policy service, a decider and a gateway show the same version and hash in
        /debug/policy, switch together, and a restart of the policy service keeps the hash
        (under a new version); inferplanectl validate computes the same hash."""
        p = PolicyStack(self, {"sets.yaml": SET, "pool.yaml": POOL})
        st = p.st
        dec = st.start("decider", ["--listen", zmq_endpoint(), "--state-sub", zmq_endpoint(),
                                   "--state-snapshot", zmq_endpoint(), "--policy-sub", p.pub,
                                   "--policy-req", p.rep], ready=False)
        wait_until(lambda: http("GET", dec.admin_url + "/healthz")[0] == 200, what="decider")
        gw = st.start("gateway", ["--listen", "127.0.0.1:%d" % free_port(),
                                  "--decider", zmq_endpoint(), "--exporter", "",
                                  "--policy-sub", p.pub, "--policy-req", p.rep])

        def views():
            return [http_json("GET", u + "/debug/policy")[2]
                    for u in (p.proc.admin_url, dec.admin_url, gw.admin_url)]

        def agree(above=0):
            """The three views when they hold the same policy, of a version above `above`."""
            v = views()
            key = [(x["version"], x["hash"]) for x in v]
            return v if key[0][0] > above and key.count(key[0]) == 3 else None

        first = wait_until(agree, 5, what="the three to hold the same policy")
        self.assertRegex(first[0]["hash"], "^[0-9a-f]{16}$")
        for v in first[1:]:
            self.assertEqual(v["pools"], first[0]["pools"])  # the pools each one runs
            self.assertEqual(v["pools"][0]["workers"], ["w0"])
            self.assertEqual(v["source"], p.dir)

        p.write("sets.yaml", SET.replace("8100", "8110"))  # all three switch
        second = wait_until(lambda: agree(first[0]["version"]), 5,
                            what="the new version everywhere")
        self.assertNotEqual(second[0]["hash"], first[0]["hash"])
        self.assertEqual(second[1]["workers"][0]["url"], "http://127.0.0.1:8110")
        self.assertEqual(second[2]["workers"][0]["url"], "http://127.0.0.1:8110")

        p.proc.stop()  # a restart: a new version, the same hash
        p.start()
        third = wait_until(lambda: agree(second[0]["version"]), 10,
                           what="the restarted service's version everywhere")
        self.assertEqual(third[0]["hash"], second[0]["hash"])

        r = ctl_validate(p.dir)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("hash %s)" % second[0]["hash"], r.stdout)

    def test_validate_endpoint(self):
        """POST /validate compiles YAML (or {"files": ...}) without installing it: 200 with
        the counts and the hash the service would publish, 422 with file:line:col errors,
        413 above 1 MiB, 415 for another content type."""
        p = PolicyStack(self, {"sets.yaml": SET, "pool.yaml": POOL})
        served = p.debug()
        status, _, doc = p.validate(SET + "---\n" + POOL)
        self.assertEqual(status, 200, doc)
        self.assertEqual((doc["valid"], doc["pools"], doc["worker_sets"], doc["workers"]),
                         (True, 1, 1, 1))
        self.assertEqual(doc["hash"], served["hash"])  # the same resources, the same hash
        self.assertEqual(doc["errors"], [])

        bad = POOL.replace("workerSet: qwen-small", "workerSet: qwen-big")
        status, _, doc = p.validate(SET + "---\n" + bad, "text/yaml; charset=utf-8")
        self.assertEqual(status, 422, doc)
        self.assertFalse(doc["valid"])
        line = SET.count("\n") + 1 + 8  # "---", then the pool's line 8
        self.assertEqual(doc["errors"], ["request.yaml:%d:18: %s" % (line, MISSING)])

        status, _, doc = p.validate({"files": {"sets.yaml": SET, "pool.yaml": bad}},
                                    "application/json")
        self.assertEqual(status, 422, doc)
        self.assertEqual(doc["errors"], ["pool.yaml:8:18: " + MISSING])
        self.assertEqual(doc["files"], ["pool.yaml", "sets.yaml"])
        status, _, doc = p.validate({"files": {"sets.yaml": SET, "big.yaml": BIG,
                                               "pool.yaml": POOL}}, "application/json")
        self.assertEqual(status, 200, doc)
        self.assertEqual((doc["worker_sets"], doc["workers"]), (2, 2))
        self.assertTrue(any("qwen-big" in w for w in doc["warnings"]), doc)  # untargeted set

        status, _, doc = p.validate(b"#" * ((1 << 20) + 1))
        self.assertEqual(status, 413)
        status, _, doc = p.validate(SET, "text/plain")
        self.assertEqual(status, 415)
        self.assertIn("application/yaml", doc["errors"][0])
        status, _, doc = p.validate("{not json", "application/json")
        self.assertEqual(status, 400)
        self.assertIn("not valid JSON", doc["errors"][0])

        after = p.debug()  # nothing was installed
        self.assertEqual((after["version"], after["hash"]), (served["version"], served["hash"]))
        self.assertEqual(after["reloads"], served["reloads"])

    def test_inferplanectl_validate(self):
        r = ctl_validate(os.path.join(ROOT, "examples", "policy"))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertRegex(r.stdout, r"^.*examples/policy: valid \(1 pool, 1 worker set; "
                                   r"hash [0-9a-f]{16}\)\n$")
        with tempfile.TemporaryDirectory(prefix="ipl-validate-") as d:
            for name, text in (("sets.yaml", SET),
                               ("pool.yaml", POOL.replace("qwen-small", "qwen-big"))):
                with open(os.path.join(d, name), "w") as f:
                    f.write(text)
            r = ctl_validate(d)
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertEqual(r.stdout, "pool.yaml:8:18: %s\n" % MISSING)
            self.assertIn("invalid (1 error)", r.stderr)
        r = ctl_validate("/nonexistent-policy-dir")
        self.assertEqual(r.returncode, 1)
        self.assertIn("cannot open the policy directory", r.stdout)
        for args in ((), ("a", "b"), ("--bogus",)):
            r = ctl_validate(*args)
            self.assertEqual(r.returncode, 2, args)
            self.assertIn("usage: inferplanectl validate DIR", r.stderr)
        self.assertEqual(ctl_validate("--help").returncode, 0)

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
        p = st.start("policy", ["--dir", st.dir, "--watch", "inotifyy"], admin=False, ready=False)
        p.proc.wait(5)
        self.assertEqual(p.proc.returncode, 2)
        self.assertIn('--watch "inotifyy" is not known; use auto or poll', p.log())


    def test_decider_receives_the_full_policy(self):
        """With examples/policy-full loaded, a decider's /debug/policy shows the backends,
        providers, rules, aliases and limits it received in POLICY, as the policy service
        shows them, and no secret's value."""
        full = os.path.join(ROOT, "examples", "policy-full")
        files = {}
        for name in sorted(os.listdir(full)):
            with open(os.path.join(full, name)) as f:
                files[name] = f.read()
        p = PolicyStack(self, files)
        dec = p.st.start("decider", ["--listen", zmq_endpoint(), "--state-sub", zmq_endpoint(),
                                     "--state-snapshot", zmq_endpoint(), "--policy-sub", p.pub,
                                     "--policy-req", p.rep], ready=False)

        def received():
            v = http_json("GET", dec.admin_url + "/debug/policy")[2]
            return v if v["version"] > 0 else None

        got = wait_until(received, 5, what="the decider to receive the policy")
        self.assertEqual([x["name"] for x in got["providers"]], ["burst", "cloud"])
        self.assertEqual(got["providers"][1]["backend"], "cloud-openai")
        self.assertEqual(got["rules"][0]["name"], "pii-stays-local")  # evaluation order
        self.assertEqual(got["rules"][0]["action"], "keepLocal")
        self.assertEqual([r["name"] for r in got["rules"]][3:5], ["nightly-batch",
                                                                  "burst-to-cloud"])
        self.assertEqual(got["rules"][4]["provider"], "burst")
        self.assertEqual(got["pools"][0]["ttft_slo_ms"], 800)
        self.assertEqual(len(got["pool_targets"]), 5)
        self.assertEqual([a["name"] for a in got["aliases"]], ["assistant", "chat"])
        self.assertEqual([x["tenant"] for x in got["limits"]], ["*", "team-a"])
        stand_in = got["backends"][1]
        self.assertEqual((stand_in["secret_source"], stand_in["secret_name"]),
                         ("env", "STANDIN_API_KEY"))
        ours = p.debug()
        self.assertEqual(got["hash"], ours["hash"])
        for key in ("backends", "providers", "provider_models", "pool_targets", "rules",
                    "aliases", "alias_targets", "limits"):
            self.assertEqual(got[key], ours[key], key)


if __name__ == "__main__":
    unittest.main()
