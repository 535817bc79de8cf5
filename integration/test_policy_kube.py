"""The policy service in Kubernetes mode (--kube-api), against the in-repo API stand-in
(tools/kube-apiserver-standin) driven by the real kubectl:

- `kubectl apply -f crds/` and `-f examples/policy/`, then inferplane-policy --kube-api serves
  that policy, and a decider following it shows the same version and hash;
- a `kubectl apply` of a change (the pool's strategy) reaches the decider within a second
  (measured and printed);
- `kubectl get inferencepools -o yaml` shows status.conditions Accepted / ResolvedRefs True
  with observedGeneration, and nothing is written again while nothing changes;
- an invalid object (a pool naming a worker set that does not exist) gets Accepted=False
  (Invalid) and ResolvedRefs=False (RefNotFound) with the compiler's message, and the last
  good policy stays in service; the fix is accepted again;
- a forced 410 (/standin/compact?closeWatches=true, after a change of one kind only) is a
  relist (inferplane_policy_kube_relists_total) and the service goes on; so is a restart of
  the stand-in (--state FILE, same port): connection errors counted, backoff, relist, and a
  change applied after the restart is published;
- bookmarks move a quiet kind's resourceVersion (/debug/policy kube.kinds);
- --dir and --kube-api together are refused.

Skipped, with the reason, without kubectl (tools/deps-node.sh installs it). Every process
runs on ephemeral loopback ports and is stopped at cleanup; every wait is bounded.

    cd integration && python3 -m unittest -v test_policy_kube
"""
import json
import os
import shutil
import subprocess
import tempfile
import time
import unittest

from lib.harness import Stack, http, http_json, requires, wait_until, zmq_endpoint
from test_kube_standin import CRD_FILES, CRDS, EXAMPLES, KUBECTL, Standin
from test_policy import metric

POOLS = "/apis/inferplane.io/v1alpha1/namespaces/default/inferencepools"

POOL = """apiVersion: inferplane.io/v1alpha1
kind: InferencePool
metadata:
  name: %(name)s
spec:
  model: %(model)s
  strategy: %(strategy)s
  targets:
    - workerSet: %(set)s
"""

HUGE = """apiVersion: inferplane.io/v1alpha1
kind: InferenceWorkerSet
metadata:
  name: sim-huge
spec:
  model: other
  workers:
    - name: h0
      url: http://127.0.0.1:8200
      kvEvents: tcp://127.0.0.1:5800
"""


def condition(obj, type_):
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == type_:
            return c
    return None

# A worker set found through a selector, and its pool.
GPU = """apiVersion: inferplane.io/v1alpha1
kind: InferenceWorkerSet
metadata:
  name: gpu
spec:
  model: big-model
  selector:
    matchLabels: {app: vllm}
    matchExpressions:
      - {key: tier, operator: In, values: [gpu]}
  ports: {api: http, kvEvents: 5557, metrics: http}
---
apiVersion: inferplane.io/v1alpha1
kind: InferencePool
metadata:
  name: big
spec:
  model: big-model
  targets:
    - workerSet: gpu
"""

POD = """apiVersion: v1
kind: Pod
metadata:
  name: %(name)s
  labels: {app: vllm, tier: %(tier)s}
spec:
  containers:
    - name: vllm
      image: vllm/vllm-openai:latest
      ports: [{name: http, containerPort: 8000}]
"""


@requires(os.access(KUBECTL, os.X_OK), "kubectl (%s, from npm)" % KUBECTL)
class KubeModeTests(unittest.TestCase):
    def start(self, *standin_args, bookmarks=None, crds=(CRDS,)):
        args = sum((["--crds", c] for c in crds), []) + list(standin_args)
        if bookmarks is not None:
            args += ["--bookmark-interval", str(bookmarks)]
        self.api = Standin(self, *args)
        self.kubeconfig = os.path.join(self.api.dir, "kubeconfig")
        self.write_kubeconfig()
        self.st = Stack(self)
        self.tmp = tempfile.mkdtemp(prefix="ipl-kube-it-", dir=self.st.dir)

    def write_kubeconfig(self):
        with open(self.kubeconfig, "w") as f:
            f.write("apiVersion: v1\nkind: Config\n"
                    "clusters: [{name: s, cluster: {server: \"%s\"}}]\n"
                    "users: [{name: u, user: {}}]\n"
                    "contexts: [{name: s, context: {cluster: s, user: u, namespace: default}}]\n"
                    "current-context: s\n" % self.api.url)

    def kubectl(self, *args, stdin=None, ok=True):
        env = dict(os.environ, KUBECONFIG=self.kubeconfig, HOME=self.api.dir)
        p = subprocess.run([KUBECTL] + list(args), input=stdin, capture_output=True, text=True,
                           env=env, timeout=60)
        if ok:
            self.assertEqual(p.returncode, 0, "kubectl %s: %s%s" % (args, p.stdout, p.stderr))
        return p

    def apply_pool(self, name="chat", model="sim-model", strategy="ttft", set_="sim-local"):
        doc = POOL % {"name": name, "model": model, "strategy": strategy, "set": set_}
        return self.kubectl("apply", "-f", "-", stdin=doc)

    def start_policy(self, extra=(), ready_path="/readyz"):
        self.pub, self.rep = zmq_endpoint(), zmq_endpoint()
        self.policy = self.st.start("policy", ["--kube-api", self.api.url, "--pub", self.pub,
                                               "--rep", self.rep] + list(extra),
                                    ready_path=ready_path)
        return self.policy

    def debug(self, proc=None):
        status, _, doc = http_json("GET", (proc or self.policy).admin_url + "/debug/policy")
        self.assertEqual(status, 200)
        return doc

    def metrics(self):
        return http("GET", self.policy.admin_url + "/metrics")[2]

    def get(self, plural, name):
        p = self.kubectl("get", plural, name, "-o", "json")
        return json.loads(p.stdout)

    def wait_condition(self, plural, name, type_, status, generation=None, timeout=5.0):
        def ok():
            obj = self.get(plural, name)
            c = condition(obj, type_)
            gen = obj["metadata"]["generation"] if generation is None else generation
            if c and c["status"] == status and c.get("observedGeneration") == gen:
                return obj
            return None
        return wait_until(ok, timeout, interval=0.1,
                          what="%s/%s %s=%s" % (plural, name, type_, status))

    # ---- the tests ----------------------------------------------------------------------------

    def test_apply_publishes_within_a_second_and_writes_status(self):
        self.start()
        self.kubectl("apply", "-f", EXAMPLES)
        self.start_policy()
        dbg = self.debug()
        self.assertEqual(dbg["mode"], "kubernetes")
        self.assertEqual(dbg["source"], "kubernetes")
        self.assertTrue(dbg["valid"])
        self.assertEqual([p["name"] for p in dbg["pools"]], ["chat"])
        self.assertEqual(sorted(dbg["files"]),
                         ["InferencePool/default/chat", "InferenceWorkerSet/default/sim-local"])
        kinds = {k["kind"]: k for k in dbg["kube"]["kinds"]}
        self.assertEqual(set(kinds), {"InferenceWorkerSet", "InferencePool", "GatewayBackend",
                                      "InferenceProvider", "InferencePolicy", "Pod"})
        for k in kinds.values():
            self.assertRegex(k["resourceVersion"], r"^\d+$")
            self.assertEqual(k["lists"], 1)
        self.assertEqual(metric(self.metrics(), "inferplane_policy_kube_relists_total"), 0)

        dec = self.st.start("decider", ["--listen", zmq_endpoint(), "--state-sub", zmq_endpoint(),
                                        "--state-snapshot", zmq_endpoint(), "--policy-sub",
                                        self.pub, "--policy-req", self.rep], ready=False)

        def decider_policy(above=0):
            status, _, d = http_json("GET", dec.admin_url + "/debug/policy", timeout=1.0)
            return d if status == 200 and d.get("version", 0) > above else None
        first = wait_until(decider_policy, 5, what="the decider to hold the policy")
        self.assertEqual((first["version"], first["hash"]), (dbg["version"], dbg["hash"]))
        self.assertEqual(first["pools"][0]["strategy"], "ttft")

        # conditions written back, as kubectl shows them
        out = self.kubectl("get", "inferencepools", "-o", "yaml").stdout
        self.assertIn("type: Accepted", out)
        pool = self.wait_condition("inferencepools", "chat", "Accepted", "True", generation=1)
        self.assertEqual(pool["status"]["observedGeneration"], 1)
        self.assertEqual(condition(pool, "Accepted")["reason"], "Accepted")
        self.assertEqual(condition(pool, "ResolvedRefs")["reason"], "ResolvedRefs")
        self.assertEqual(condition(pool, "ResolvedRefs")["status"], "True")
        self.wait_condition("inferenceworkersets", "sim-local", "Accepted", "True")
        printed = self.kubectl("get", "inferencepools").stdout  # the Accepted printer column
        self.assertRegex(printed, r"chat\s+sim-model\s+ttft\s+2000\s+True")

        # kubectl apply → the decider runs the new strategy within a second
        t0 = time.monotonic()
        self.apply_pool(strategy="least-loaded")
        applied = time.monotonic()
        second = wait_until(lambda: decider_policy(first["version"]), 3, interval=0.005,
                            what="the new policy on the decider")
        seen = time.monotonic()
        print("\napply→decider: %.0f ms after kubectl returned (%.0f ms including kubectl)"
              % ((seen - applied) * 1000, (seen - t0) * 1000))
        self.assertLess(seen - applied, 1.0)
        self.assertEqual(second["pools"][0]["strategy"], "least-loaded")
        self.assertNotEqual(second["hash"], first["hash"])
        self.wait_condition("inferencepools", "chat", "Accepted", "True", generation=2)
        # the same change as kubectl's merge patch, timed from the API server's answer
        t0 = time.monotonic()
        self.api.ok("PATCH", POOLS + "/chat", {"spec": {"strategy": "random"}},
                    ctype="application/merge-patch+json")
        third = wait_until(lambda: decider_policy(second["version"]), 3, interval=0.002,
                           what="the patched policy on the decider")
        print("PATCH answered→decider: %.0f ms" % ((time.monotonic() - t0) * 1000))
        self.assertLess(time.monotonic() - t0, 1.0)
        self.assertEqual(third["pools"][0]["strategy"], "random")
        self.apply_pool(strategy="least-loaded")
        second = wait_until(lambda: decider_policy(third["version"]), 3, what="back again")
        self.wait_condition("inferencepools", "chat", "Accepted", "True", generation=4)

        # no write storm: nothing changes, nothing is written (our own writes come back as
        # MODIFIED events and change nothing); a re-apply without change writes nothing either
        time.sleep(0.5)
        writes = metric(self.metrics(), "inferplane_policy_kube_status_writes_total")
        self.assertGreaterEqual(writes, 5)  # the set, the pool at generations 1 to 4
        self.apply_pool(strategy="least-loaded")
        time.sleep(1.0)
        self.assertEqual(metric(self.metrics(), "inferplane_policy_kube_status_writes_total"),
                         writes)
        self.assertEqual(self.debug()["version"], second["version"])
        # a restart of the policy service finds every status as it should be: writes nothing
        self.assertLess(self.policy.stop(), 2.0)
        self.start_policy()
        self.assertEqual(self.debug()["hash"], second["hash"])
        time.sleep(0.5)
        self.assertEqual(metric(self.metrics(), "inferplane_policy_kube_status_writes_total"), 0)
        # a deletion is a new object set, compiled
        self.kubectl("delete", "inferencepool", "chat")
        d = wait_until(lambda: (lambda x: x if x["files"] == ["InferenceWorkerSet/default/sim-local"]
                                else None)(self.debug()), 3, what="a compilation without the pool")
        self.assertEqual(d["kube"]["kinds"][1]["kind"], "InferencePool")

    def test_invalid_object_gets_accepted_false_and_last_good_stays(self):
        self.start()
        self.kubectl("apply", "-f", EXAMPLES)
        self.start_policy()
        good = self.debug()
        self.wait_condition("inferencepools", "chat", "Accepted", "True")
        # a second pool naming a worker set that does not exist: the schema allows it, the
        # compiler does not
        self.apply_pool(name="broken", model="other", set_="sim-huge")
        obj = self.wait_condition("inferencepools", "broken", "Accepted", "False")
        acc, ref = condition(obj, "Accepted"), condition(obj, "ResolvedRefs")
        self.assertEqual(acc["reason"], "Invalid")
        self.assertEqual(ref["status"], "False")
        self.assertEqual(ref["reason"], "RefNotFound")
        self.assertIn('InferencePool/default/broken:', acc["message"])
        self.assertIn('workerSet "sim-huge" does not exist (known: sim-local)', acc["message"])
        self.assertEqual(obj["status"]["observedGeneration"], 1)
        out = self.kubectl("get", "inferencepool", "broken", "-o", "yaml").stdout
        self.assertIn("reason: RefNotFound", out)
        # the last good policy stays, and says why
        d = self.debug()
        self.assertFalse(d["valid"])
        self.assertEqual((d["version"], d["hash"]), (good["version"], good["hash"]))
        self.assertIn("sim-huge", " ".join(d["errors"]))
        self.assertIn("last good", http("GET", self.policy.admin_url + "/readyz")[2].decode())
        self.assertEqual(metric(self.metrics(),
                                'inferplane_policy_reloads_total{result="error"}'), 1)
        # the other objects are fine in themselves: still Accepted
        chat = self.get("inferencepools", "chat")
        self.assertEqual(condition(chat, "Accepted")["status"], "True")
        # the fix: the worker set it names is created; accepted, and a new policy with both
        # pools (the pool itself did not change: generation 1)
        t_before = condition(obj, "Accepted")["lastTransitionTime"]
        self.kubectl("apply", "-f", "-", stdin=HUGE)
        fixed = self.wait_condition("inferencepools", "broken", "Accepted", "True", generation=1)
        self.assertEqual(condition(fixed, "ResolvedRefs")["status"], "True")
        self.assertGreaterEqual(condition(fixed, "Accepted")["lastTransitionTime"], t_before)
        d = wait_until(lambda: (lambda x: x if x["valid"] else None)(self.debug()), 3,
                       what="the fixed policy")
        self.assertEqual(sorted(p["name"] for p in d["pools"]), ["broken", "chat"])
        self.assertGreater(d["version"], good["version"])

    def test_survives_410_and_a_restart_of_the_api(self):
        state_dir = tempfile.mkdtemp(prefix="ipl-kube-state-")
        self.addCleanup(shutil.rmtree, state_dir, True)
        state = os.path.join(state_dir, "state.json")
        self.start("--state", state)  # bookmarks every 60 s: a quiet kind's RV stays old
        self.kubectl("apply", "-f", EXAMPLES)
        self.start_policy()
        v0 = self.debug()["version"]
        # one kind moves on, the others' resourceVersions stay behind; a compaction with the
        # watches closed makes their rewatch 410 Gone → relist
        self.apply_pool(strategy="random")
        d1 = wait_until(lambda: (lambda x: x if x["version"] > v0 else None)(self.debug()), 3,
                        what="the random strategy")
        self.assertEqual(d1["pools"][0]["strategy"], "random")
        self.api.ok("POST", "/standin/compact?closeWatches=true")
        wait_until(lambda: (metric(self.metrics(), "inferplane_policy_kube_relists_total") or 0)
                   >= 1, 5, what="a relist after 410")
        kinds = {k["kind"]: k for k in self.debug()["kube"]["kinds"]}
        self.assertGreaterEqual(kinds["InferenceWorkerSet"]["relists"], 1)
        wait_until(lambda: all(k["state"] == "watching" for k in self.debug()["kube"]["kinds"]),
                   5, what="every kind watching again")
        self.assertTrue(self.debug()["valid"])
        self.assertEqual(self.debug()["version"], d1["version"])  # a relist of the same objects
        # still following: a change after the compaction is published
        self.apply_pool(strategy="least-loaded")
        d2 = wait_until(lambda: (lambda x: x if x["version"] > d1["version"] else None)(
            self.debug()), 3, what="the change after the 410")
        self.assertEqual(d2["pools"][0]["strategy"], "least-loaded")

        # a restart of the API server (same port, objects kept in --state; history lost)
        relists = metric(self.metrics(), "inferplane_policy_kube_relists_total")
        self.api.stop()
        wait_until(lambda: metric(self.metrics(),
                                  'inferplane_policy_kube_errors_total{reason="connect"}') >= 2,
                   5, what="connection errors while the API is down")
        self.assertTrue(self.policy.alive())
        self.assertEqual(self.debug()["version"], d2["version"])  # serving the last policy
        kube = self.debug()["kube"]
        self.assertIn(self.api.url, kube["last_error"])  # which error comes last is a race
        self.assertTrue(kube["last_error_at"])
        self.api.start(self.api.port)
        # the resourceVersions the service holds are older than the restarted server keeps
        # for quiet kinds (its history is gone): relists, and every kind watching again
        wait_until(lambda: metric(self.metrics(), "inferplane_policy_kube_relists_total")
                   > relists, 10, what="a relist after the restart")
        wait_until(lambda: all(k["state"] == "watching" for k in self.debug()["kube"]["kinds"]),
                   10, what="every kind watching after the restart")
        self.apply_pool(strategy="round-robin")
        d3 = wait_until(lambda: (lambda x: x if x["version"] > d2["version"] else None)(
            self.debug()), 3, what="a change after the restart")
        self.assertEqual(d3["pools"][0]["strategy"], "round-robin")
        self.wait_condition("inferencepools", "chat", "Accepted", "True")
        self.assertIn("kube_error", self.policy.log())  # logged, rate-limited
        self.assertLess(self.policy.log().count("msg=kube_error"), 20)

    def test_bookmarks_move_quiet_kinds(self):
        self.start(bookmarks=0.3)
        self.kubectl("apply", "-f", EXAMPLES)
        self.start_policy()
        self.apply_pool(strategy="random")  # the pools' RV moves; the others only by bookmark
        rv = self.api.ok("GET", "/standin/stats")["resourceVersion"]

        def caught_up():
            kinds = self.debug()["kube"]["kinds"]
            return all(int(k["resourceVersion"]) >= int(rv) for k in kinds)
        wait_until(caught_up, 5, what="bookmarks to bring every kind to RV %s" % rv)

    def test_pods_found_through_the_selector(self):
        """An InferenceWorkerSet with a selector gets the Running pods it selects as workers
        (url from the pod IP and the named port, kvEvents from the numbered one); a pod that
        starts running joins, one deleted leaves, one that is not selected never appears."""
        self.start()
        self.kubectl("apply", "-f", EXAMPLES)
        self.kubectl("apply", "-f", "-", stdin=GPU)
        pods = "".join("---\n" + POD % {"name": n, "tier": t}
                       for n, t in (("gpu-a", "gpu"), ("cpu-a", "cpu"), ("gpu-b", "gpu")))
        self.kubectl("apply", "-f", "-", stdin=pods)

        def kubelet(name, ip):  # the stand-in has no kubelet: the test writes pods/status
            self.api.ok("PATCH", "/api/v1/namespaces/default/pods/%s/status" % name,
                        {"status": {"phase": "Running", "podIP": ip}},
                        ctype="application/merge-patch+json")
        kubelet("gpu-a", "10.1.0.1")
        kubelet("cpu-a", "10.1.0.2")
        self.start_policy()

        def workers(want):
            d = self.debug()
            big = [p for p in d["pools"] if p["name"] == "big"]
            return d if d["valid"] and big and big[0]["workers"] == want else None
        d = wait_until(lambda: workers(["gpu-a"]), 5, what="gpu-a in pool big")
        w = [x for x in d["workers"] if x["name"] == "gpu-a"][0]
        self.assertEqual(w["url"], "http://10.1.0.1:8000")
        self.assertEqual(w["kv_endpoint"], "tcp://10.1.0.1:5557")
        self.assertEqual(w["metrics_url"], "http://10.1.0.1:8000/metrics")
        self.assertNotIn("cpu-a", [x["name"] for x in d["workers"]])
        self.wait_condition("inferenceworkersets", "gpu", "Accepted", "True")
        t0 = time.monotonic()
        kubelet("gpu-b", "10.1.0.3")  # starts running: joins
        wait_until(lambda: workers(["gpu-a", "gpu-b"]), 3, what="gpu-b to join")
        self.assertLess(time.monotonic() - t0, 1.0)
        self.kubectl("delete", "pod", "gpu-a")  # leaves
        wait_until(lambda: workers(["gpu-b"]), 3, what="gpu-a to leave")

    def test_kinds_without_a_crd_are_empty(self):
        """Only the InferenceWorkerSet and InferencePool CRDs installed: the other kinds answer
        404, count as empty (no relist, no error), and the policy is served."""
        self.start(crds=CRD_FILES)
        self.kubectl("apply", "-f", EXAMPLES)
        self.start_policy()
        d = self.debug()
        self.assertTrue(d["valid"])
        self.assertEqual([p["name"] for p in d["pools"]], ["chat"])
        kinds = {k["kind"]: k for k in d["kube"]["kinds"]}
        self.assertEqual(kinds["GatewayBackend"]["errors"], 0)
        self.assertEqual(kinds["InferencePool"]["state"], "watching")
        self.assertIn("msg=kube_kind_missing", self.policy.log())
        self.assertEqual(metric(self.metrics(), "inferplane_policy_kube_relists_total"), 0)
        self.assertEqual(metric(self.metrics(), 'inferplane_policy_kube_errors_total{reason="http"}'),
                         0)

    def test_namespace_and_flags(self):
        self.start()
        self.kubectl("apply", "-f", EXAMPLES)
        self.kubectl("create", "namespace", "other")
        # --kube-namespace other: the objects of default are not seen; no resources is an error
        self.start_policy(["--kube-namespace", "other"], ready_path="/healthz")
        # (wait for the first compilation's report: /debug/policy answers before it is made)
        dbg = wait_until(lambda: (lambda s, d: d if s == 200 and "files" in d else None)(
            *http_json("GET", self.policy.admin_url + "/debug/policy")[::2]), 5,
            what="/debug/policy after the first compilation")
        self.assertEqual(dbg["kube"]["namespace"], "other")
        self.assertFalse(dbg["valid"])
        self.assertEqual(dbg["files"], [])
        self.assertEqual(http("GET", self.policy.admin_url + "/readyz")[0], 503)
        # an object in the namespace: it is the policy
        self.kubectl("apply", "-n", "other", "-f", EXAMPLES)
        d = wait_until(lambda: (lambda x: x if x["valid"] else None)(self.debug()), 5,
                       what="the policy of namespace other")
        self.assertEqual(sorted(d["files"]),
                         ["InferencePool/other/chat", "InferenceWorkerSet/other/sim-local"])
        # --dir and --kube-api are exclusive
        p = self.st.start("policy", ["--kube-api", self.api.url, "--dir", self.tmp], admin=False,
                          ready=False)
        p.proc.wait(5)
        self.assertEqual(p.proc.returncode, 2)
        self.assertIn("--dir (from the flag) and --kube-api are exclusive", p.log())
        p = self.st.start("policy", ["--kube-api", "localhost:6443"], admin=False, ready=False)
        p.proc.wait(5)
        self.assertEqual(p.proc.returncode, 2)
        self.assertIn("is not an http:// or https:// URL", p.log())


if __name__ == "__main__":
    unittest.main()
