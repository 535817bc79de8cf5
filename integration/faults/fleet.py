"""The cluster the fault suite runs on: three simulated workers and every service once (policy,
aggregator, collector, decider, exporter) with two gateway replicas behind the client, on
ephemeral loopback ports. Every process can be killed, stopped and restarted with its own
flags (lib.faults.restart), so a restarted service binds the same endpoints as before.

Settings an operator would choose for fast failure detection, and nothing else off default:
  - gateways: --first-byte-timeout-ms and --stream-idle-timeout-ms of TIMEOUT_MS (60 s by
    default, for long prefills): a stopped or stalled worker costs a request that long;
  - collector: --checkpoint-dir (docs/operations.md, "The collector: restarts and checkpoints")
    and workers with a small replay buffer (BUFFER_STEPS batches, vLLM's buffer_steps), so
    that a collector restart cannot simply replay each worker's whole history (defect 2);
  - decider: --optimistic-ttl-ms of OPTIMISTIC_TTL_MS (2 s by default): a routed prompt is
    assumed cached for up to 1.5 x that, so a probe waits that long to see the KV-event state;
  - workers: --time-scale, so that a run of seconds is minutes of simulated serving, and a
    KV cache of KV_BLOCKS blocks (the profile's 4,000 evict a probe's prompt within a soak
    phase under this load: the probe would measure eviction, not routing).

Beside the cluster, a control worker (self.control) that no fault touches: the suite loads
it directly, as one of the fleet's workers is loaded, to tell a slower cluster from a slower
machine (phase.py, the TTFT check).
"""
import json
import os

from lib.cluster import MODEL, policy_yaml
from lib.faults import restart, rss_bytes
from lib.harness import Stack, free_port, zmq_endpoint

TIMEOUT_MS = 2000
OPTIMISTIC_TTL_MS = 1000
BUFFER_STEPS = 300
KV_BLOCKS = 16000
SERVICES = ("policy", "aggregator", "collector", "decider", "exporter", "gw0", "gw1")


class Fleet:
    def __init__(self, workers=3, time_scale=2.0, test=None):
        st = self.stack = Stack(test)
        self.model = MODEL
        self.procs = {}
        self.sims = []
        for i in range(workers):
            self.sims.append(self._start_sim("w%d" % i, time_scale, seed=i))
        pdir = os.path.dirname(st.write("policy/cluster.yaml", policy_yaml(self.sims)))
        ep = self.ep = {k: zmq_endpoint() for k in ("agg_pull", "agg_pub", "agg_snap", "pol_pub",
                                                    "pol_rep", "decider", "exp_pull")}
        pol = ["--policy-sub", ep["pol_pub"], "--policy-req", ep["pol_rep"]]
        p = self.procs
        p["policy"] = st.start("policy", ["--dir", pdir, "--pub", ep["pol_pub"],
                                          "--rep", ep["pol_rep"], "--republish-ms", "500"])
        p["aggregator"] = st.start("aggregator", ["--pull", ep["agg_pull"], "--pub", ep["agg_pub"],
                                                  "--snapshot", ep["agg_snap"]])
        ckpt = os.path.join(st.dir, "checkpoints")
        os.makedirs(ckpt)
        p["collector"] = st.start("collector", ["--aggregator", ep["agg_pull"],
                                                "--checkpoint-dir", ckpt] + pol)
        p["decider"] = st.start("decider", ["--listen", ep["decider"], "--state-sub",
                                            ep["agg_pub"], "--state-snapshot", ep["agg_snap"],
                                            "--optimistic-ttl-ms", str(OPTIMISTIC_TTL_MS)] + pol)
        p["exporter"] = st.start("exporter", ["--pull", ep["exp_pull"]])
        for g in ("gw0", "gw1"):
            port = free_port()
            p[g] = st.start("gateway", ["--listen", "127.0.0.1:%d" % port, "--decider",
                                        ep["decider"], "--exporter", ep["exp_pull"],
                                        "--first-byte-timeout-ms", str(TIMEOUT_MS),
                                        "--stream-idle-timeout-ms", str(TIMEOUT_MS)] + pol)
            p[g].api = "http://127.0.0.1:%d" % port
        for s in self.sims:
            p[s.worker_name] = s
        # Outside the cluster, never faulted: a worker loaded directly, like one of the
        # fleet's, whose TTFT says how fast this (shared) machine is at the moment.
        self.control = self._start_sim("control", time_scale, seed=99)

    def _start_sim(self, name, time_scale, seed):
        port = free_port()
        kv, replay = zmq_endpoint(), zmq_endpoint()
        cfg = json.dumps({"enable_kv_cache_events": True, "publisher": "zmq", "endpoint": kv,
                          "replay_endpoint": replay, "topic": "kv-events",
                          "buffer_steps": BUFFER_STEPS})
        p = self.stack.start("sim", ["--host", "127.0.0.1", "--port", str(port),
                                     "--served-model-name", MODEL, "--kv-events-config", cfg,
                                     "--kv-events-bind", "bind", "--enable-prompt-tokens-details",
                                     "--time-scale", str(time_scale), "--seed", str(seed),
                                     "--num-gpu-blocks-override", str(KV_BLOCKS)],
                             admin=False, ready=False)
        p.admin_url = p.url = "http://127.0.0.1:%d" % port
        p.kv, p.replay, p.worker_name = kv, replay, name
        p.wait_ready(path="/health")
        return p

    @property
    def gateways(self):
        return [self.procs["gw0"], self.procs["gw1"]]

    @property
    def workers(self):
        return [self.procs[s.worker_name] for s in self.sims]

    def restart(self, key, ready=False):
        """Starts self.procs[key] again with its flags (it must have exited)."""
        self.procs[key] = restart(self.stack, self.procs[key], ready=ready)
        return self.procs[key]

    def dead(self):
        """Keys of the processes that have exited, with their exit status."""
        return {k: p.proc.returncode for k, p in self.procs.items() if not p.alive()}

    def rss(self):
        """{key: (pid, RSS bytes)} of every process now."""
        return {k: (p.proc.pid, rss_bytes(p)) for k, p in self.procs.items()}

    def log_tail(self, key, chars=3000):
        return self.procs[key].log()[-chars:]

    def stop(self):
        self.stack.stop_all()
