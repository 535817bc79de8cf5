"""A whole inferplane stack on ephemeral loopback ports, for end-to-end tests.

    c = Cluster(self, workers=3)          # sims + policy, aggregator, collector, decider,
                                          # exporter, gateway; everything /readyz
    status, hdrs, body = http_json("POST", c.api + "/v1/chat/completions", {...})
    c.services                            # {"policy": Proc, ...}: every service's Proc
    c.zmq_endpoints                       # [(service, endpoint, poke socket type), ...]
"""
import os

from lib.harness import Stack, free_port, http_json, wait_until, zmq_endpoint

MODEL = "sim-model"


def policy_yaml(sims, model=MODEL, pool="chat", strategy="ttft", block_size=16):
    lines = ["apiVersion: inferplane.io/v1alpha1", "kind: InferenceWorkerSet",
             "metadata: {name: sims}", "spec:", "  model: %s" % model,
             "  blockSize: %d" % block_size, "  workers:"]
    for s in sims:
        lines += ["    - name: %s" % s.worker_name, "      url: %s" % s.url,
                  "      kvEvents: %s" % s.kv, "      replay: %s" % s.replay]
    lines += ["---", "apiVersion: inferplane.io/v1alpha1", "kind: InferencePool",
              "metadata: {name: %s}" % pool, "spec:", "  model: %s" % model,
              "  strategy: %s" % strategy, "  targets:", "    - workerSet: sims", ""]
    return "\n".join(lines)


class Cluster:
    def __init__(self, test, workers=3, time_scale=10, sim_extra=None, strategy="ttft",
                 tokenizer=None, embedded=False):
        """embedded: no decider process; the gateway runs one (--decider embedded), which
        also listens on ep["decider"] (tcp://) and serves /v1/route on the gateway's admin."""
        st = self.stack = Stack(test)
        tok = ["--tokenizer", tokenizer] if tokenizer else []
        self.sims = [st.start_sim(name="w%d" % i,
                                  extra=["--time-scale", str(time_scale), "--seed", str(i)]
                                  + tok + list(sim_extra or []))
                     for i in range(workers)]
        self.policy_dir = os.path.dirname(st.write("policy/cluster.yaml",
                                                   policy_yaml(self.sims, strategy=strategy)))
        ep = {k: zmq_endpoint() for k in ("agg_pull", "agg_pub", "agg_snap", "pol_pub",
                                          "pol_rep", "decider", "exp_pull")}
        self.ep = ep
        policy_args = ["--policy-sub", ep["pol_pub"], "--policy-req", ep["pol_rep"]]
        s = self.services = {}
        s["policy"] = st.start("policy", ["--dir", self.policy_dir, "--pub", ep["pol_pub"],
                                          "--rep", ep["pol_rep"], "--republish-ms", "500"])
        s["aggregator"] = st.start("aggregator", ["--pull", ep["agg_pull"], "--pub", ep["agg_pub"],
                                                  "--snapshot", ep["agg_snap"]])
        s["collector"] = st.start("collector", ["--aggregator", ep["agg_pull"]] + policy_args)
        decider = ["--decider", ep["decider"]]
        if embedded:
            self.decider_config = st.write("decider.yaml", "".join(
                "%s: %s\n" % kv for kv in (
                    ("listen", ep["decider"]), ("state-sub", ep["agg_pub"]),
                    ("state-snapshot", ep["agg_snap"]), ("policy-sub", ep["pol_pub"]),
                    ("policy-req", ep["pol_rep"]), ("tokenizer", tokenizer or "builtin"))))
            decider = ["--decider", "embedded", "--decider-config", self.decider_config]
        else:
            s["decider"] = st.start("decider", ["--listen", ep["decider"],
                                                "--state-sub", ep["agg_pub"],
                                                "--state-snapshot", ep["agg_snap"]]
                                    + policy_args + tok)
        s["exporter"] = st.start("exporter", ["--pull", ep["exp_pull"]])
        gw_port = free_port()
        s["gateway"] = st.start("gateway", ["--listen", "127.0.0.1:%d" % gw_port,
                                            "--exporter", ep["exp_pull"]] + decider
                                + policy_args + tok)
        self.api = "http://127.0.0.1:%d" % gw_port
        self.decider_url = s["gateway" if embedded else "decider"].admin_url
        # Every ZeroMQ socket a service listens on, with the socket type that talks to it.
        self.zmq_endpoints = [
            ("aggregator", ep["agg_pull"], "push"), ("aggregator", ep["agg_snap"], "dealer"),
            ("aggregator", ep["agg_pub"], "sub"), ("policy", ep["pol_rep"], "dealer"),
            ("policy", ep["pol_pub"], "sub"),
            ("gateway" if embedded else "decider", ep["decider"], "dealer"),
            ("exporter", ep["exp_pull"], "push"),
        ]

    def route(self, body):
        """Asks the decider (HTTP /v1/route); returns (status, json)."""
        status, _, doc = http_json("POST", self.decider_url + "/v1/route", body)
        return status, doc

    def wait_workers_up(self, timeout=15.0):
        """Waits until the decider sees a load sample from every worker."""
        def all_up():
            status, doc = self.route({"model": MODEL, "prompt": "hello"})
            if status != 200:
                return False
            cands = doc.get("candidates", [])
            return len(cands) == len(self.sims) and all(c.get("eligible") for c in cands)
        wait_until(all_up, timeout, what="every worker eligible at the decider")
