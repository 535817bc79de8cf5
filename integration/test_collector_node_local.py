"""Node-local collectors (the chart's DaemonSet, one collector per node): the policy service in
Kubernetes mode records each selector-discovered pod's spec.nodeName on its worker (POLICY's
worker.node), and a collector with --node-name follows only the workers of its node.

Against the in-repo API stand-in (tools/kube-apiserver-standin) driven by the real kubectl:
two Pods on nodes node-a and node-b, each a simulated vLLM worker on loopback (podIP
127.0.0.1, its ports named in the pod), selected by one InferenceWorkerSet that also lists a
static worker named node-a-static. Then:

- /debug/policy shows each pod's worker with its node, the static one without;
- the collector with --node-name node-a --worker-prefix node-a- (the chart with
  collector.workerPrefixFromNode) follows vllm-a and node-a-static (static workers have no
  node: the prefix decides for them); the one with --node-name node-b follows vllm-b only;
  one without --node-name follows all three; each scrapes its pods' /metrics;
- a pod added on node-b later joins node-b's collector only, and a deleted one leaves.

Skipped, with the reason, without kubectl (tools/deps-node.sh installs it). Every process
runs on ephemeral loopback ports and is stopped at cleanup; every wait is bounded.

    cd integration && python3 -m unittest -v test_collector_node_local
"""
import os
import subprocess
import unittest

from lib.harness import Stack, free_port, http_json, requires, wait_until, zmq_endpoint
from test_kube_standin import CRDS, KUBECTL, Standin

WORKERSET = """apiVersion: inferplane.io/v1alpha1
kind: InferenceWorkerSet
metadata:
  name: vllm
spec:
  model: sim-model
  selector:
    matchLabels: {app: vllm}
  ports: {api: http, kvEvents: kv-events, replay: kv-replay, metrics: http}
  workers:
    - name: node-a-static
      url: http://127.0.0.1:%(static_port)d
---
apiVersion: inferplane.io/v1alpha1
kind: InferencePool
metadata:
  name: chat
spec:
  model: sim-model
  targets:
    - workerSet: vllm
"""

POD = """apiVersion: v1
kind: Pod
metadata:
  name: %(name)s
  labels: {app: vllm}
spec:
  nodeName: %(node)s
  containers:
    - name: vllm
      image: vllm/vllm-openai:latest
      ports:
        - {name: http, containerPort: %(http)d}
        - {name: kv-events, containerPort: %(kv)d}
        - {name: kv-replay, containerPort: %(replay)d}
"""


def port_of(endpoint):
    return int(endpoint.rsplit(":", 1)[1])


@requires(os.access(KUBECTL, os.X_OK), "kubectl (%s, from npm)" % KUBECTL)
class NodeLocalCollectorTests(unittest.TestCase):
    def setUp(self):
        self.api = Standin(self, "--crds", CRDS)
        self.kubeconfig = os.path.join(self.api.dir, "kubeconfig")
        with open(self.kubeconfig, "w") as f:
            f.write("apiVersion: v1\nkind: Config\n"
                    "clusters: [{name: s, cluster: {server: \"%s\"}}]\n"
                    "users: [{name: u, user: {}}]\n"
                    "contexts: [{name: s, context: {cluster: s, user: u, namespace: default}}]\n"
                    "current-context: s\n" % self.api.url)
        self.st = Stack(self)

    def kubectl(self, *args, stdin=None):
        env = dict(os.environ, KUBECONFIG=self.kubeconfig, HOME=self.api.dir)
        p = subprocess.run([KUBECTL] + list(args), input=stdin, capture_output=True, text=True,
                           env=env, timeout=60)
        self.assertEqual(p.returncode, 0, "kubectl %s: %s%s" % (args, p.stdout, p.stderr))
        return p

    def pod(self, name, node):
        """A simulated worker and the Running pod on `node` that stands for it (the stand-in
        has no kubelet: the test writes pods/status)."""
        sim = self.st.start_sim(name)
        self.kubectl("apply", "-f", "-", stdin=POD % {
            "name": name, "node": node, "http": port_of(sim.url), "kv": port_of(sim.kv),
            "replay": port_of(sim.replay)})
        self.api.ok("PATCH", "/api/v1/namespaces/default/pods/%s/status" % name,
                    {"status": {"phase": "Running", "podIP": "127.0.0.1"}},
                    ctype="application/merge-patch+json")
        return sim

    def collector(self, *flags):
        return self.st.start("collector", ["--aggregator", zmq_endpoint(), "--policy-sub",
                                           self.pub, "--policy-req", self.rep,
                                           "--scrape-interval-ms", "50"] + list(flags))

    @staticmethod
    def followed(col):
        status, _, d = http_json("GET", col.admin_url + "/debug/workers", timeout=2.0)
        return sorted(w["name"] for w in d["workers"]) if status == 200 else None

    def wait_followed(self, col, want, what):
        return wait_until(lambda: self.followed(col) == want, 5,
                          what="%s to follow %s (follows %s)" % (what, want, self.followed(col)))

    def test_each_collector_follows_the_workers_of_its_node(self):
        self.kubectl("apply", "-f", CRDS)
        self.kubectl("apply", "-f", "-", stdin=WORKERSET % {"static_port": free_port()})
        sim_a = self.pod("vllm-a", "node-a")
        self.pod("vllm-b", "node-b")
        self.pub, self.rep = zmq_endpoint(), zmq_endpoint()
        policy = self.st.start("policy", ["--kube-api", self.api.url, "--pub", self.pub,
                                          "--rep", self.rep])

        def nodes():
            status, _, d = http_json("GET", policy.admin_url + "/debug/policy")
            got = {w["name"]: w.get("node") for w in d.get("workers", [])}
            return got if status == 200 and len(got) == 3 else None
        got = wait_until(nodes, 5, what="the policy's three workers")
        self.assertEqual(got, {"node-a-static": None, "vllm-a": "node-a", "vllm-b": "node-b"})

        col_a = self.collector("--node-name", "node-a", "--worker-prefix", "node-a-")
        col_b = self.collector("--node-name", "node-b")
        col_all = self.collector()
        self.wait_followed(col_a, ["node-a-static", "vllm-a"], "node-a's collector")
        self.wait_followed(col_b, ["vllm-b"], "node-b's collector")
        self.wait_followed(col_all, ["node-a-static", "vllm-a", "vllm-b"], "the unfiltered one")

        # each follows its pod for real: the URL from the pod IP and named port, scraped
        def scraped(col, name):
            status, _, d = http_json("GET", col.admin_url + "/debug/workers", timeout=2.0)
            w = [x for x in d["workers"] if x["name"] == name]
            return w[0] if status == 200 and w and w[0].get("scrapes_ok", 0) > 0 else None
        w = wait_until(lambda: scraped(col_a, "vllm-a"), 5, what="vllm-a scraped by node-a's")
        self.assertEqual(w["url"], sim_a.url)
        wait_until(lambda: scraped(col_b, "vllm-b"), 5, what="vllm-b scraped by node-b's")

        # a pod added on node-b joins node-b's collector only; a deleted one leaves
        self.pod("vllm-c", "node-b")
        self.wait_followed(col_b, ["vllm-b", "vllm-c"], "node-b's collector")
        self.wait_followed(col_all, ["node-a-static", "vllm-a", "vllm-b", "vllm-c"],
                           "the unfiltered one")
        self.assertEqual(self.followed(col_a), ["node-a-static", "vllm-a"])
        self.kubectl("delete", "pod", "vllm-a")
        self.wait_followed(col_a, ["node-a-static"], "node-a's collector")
        self.assertEqual(self.followed(col_b), ["vllm-b", "vllm-c"])


if __name__ == "__main__":
    unittest.main()
