"""The collector with a simulated vLLM worker and an aggregator: KV events become blocks in the
aggregator's state, a prefix-cache reset clears them, loads are scraped, malformed KV-event
frames are counted and survived, SIGTERM is quick.
"""
import json
import time
import unittest

from lib.harness import Stack, free_port, http, http_json, wait_until, zmq_endpoint, zmq_poke
from test_aggregator import metric_sum, start_aggregator

POLICY = """\
apiVersion: inferplane.io/v1alpha1
kind: InferenceWorkerSet
metadata: {name: set1}
spec:
  model: sim-model
  blockSize: 16
  workers:
    - name: node1-w0
      url: %(url)s
      kvEvents: %(kv)s
      replay: %(replay)s
    - name: node2-w0
      url: %(dead)s
      kvEvents: %(kv2)s
---
apiVersion: inferplane.io/v1alpha1
kind: InferencePool
metadata: {name: chat}
spec:
  model: sim-model
  targets:
    - workerSet: set1
"""

PROMPT = " ".join("token%d" % i for i in range(300))  # well over 16 blocks


def worker_state(agg, name):
    status, _, state = http_json("GET", agg.admin_url + "/debug/state")
    if status != 200:
        return None
    for w in state["workers"]:
        if w["name"] == name:
            return w
    return None


def start_collector(st, agg, workers, extra=None):
    spec = ",".join("%s=%s|%s|%s" % (w.worker_name, w.url, w.kv, w.replay) for w in workers)
    return st.start("collector", ["--aggregator", agg.pull, "--workers", spec,
                                  "--scrape-interval-ms", "50"] + list(extra or []))


def complete(sim, prompt=PROMPT):
    status, _, body = http_json("POST", sim.url + "/v1/completions",
                                {"model": "sim-model", "prompt": prompt, "max_tokens": 2})
    assert status == 200, (status, body)
    return body


class TestCollector(unittest.TestCase):
    def test_blocks_appear_and_reset_clears_them(self):
        st = Stack(self)
        sim = st.start_sim("w0")
        agg = start_aggregator(st)
        col = start_collector(st, agg, [sim])
        # the collector is subscribed once it has seen the worker's load; give the SUB a moment
        wait_until(lambda: (worker_state(agg, "w0") or {}).get("health") == "up", timeout=10,
                   what="w0 up in the aggregator")
        time.sleep(0.3)  # SUB slow joiner
        body = complete(sim)
        prompt_tokens = body["usage"]["prompt_tokens"]
        w = wait_until(lambda: (worker_state(agg, "w0") or {}).get("blocks", 0) >=
                       prompt_tokens // 16 and worker_state(agg, "w0"),
                       timeout=10, what="w0's blocks in the aggregator")
        self.assertEqual(w["kv_state"], "exact")
        self.assertEqual(w["load"]["block_size"], 16)
        self.assertGreater(w["load"]["num_blocks"], 0)
        held = w["blocks"]

        # the same prompt again hits the cache: no new blocks beyond the generated ones
        body = complete(sim)
        self.assertGreaterEqual(body["usage"]["prompt_tokens_details"]["cached_tokens"], 16)

        # the collector's view agrees
        status, _, dbg = http_json("GET", col.admin_url + "/debug/workers")
        self.assertEqual(status, 200)
        cw = dbg["workers"][0]
        self.assertEqual(cw["name"], "w0")
        self.assertTrue(cw["subscribed"])
        self.assertGreaterEqual(cw["blocks_stored"], held)
        self.assertEqual(cw["unknown_parents"], 0)

        # reset_prefix_cache → AllBlocksCleared → the aggregator forgets w0's blocks
        status, _, _ = http("POST", sim.url + "/reset_prefix_cache")
        self.assertEqual(status, 200)
        wait_until(lambda: (worker_state(agg, "w0") or {}).get("blocks") == 0, timeout=10,
                   what="w0's blocks cleared")
        _, _, text = http("GET", col.admin_url + "/metrics")
        text = text.decode()
        self.assertGreaterEqual(metric_sum(text, "inferplane_collector_batches_total",
                                           worker="w0"), 2)
        self.assertGreaterEqual(metric_sum(text, "inferplane_collector_scrapes_total",
                                           worker="w0", result="ok"), 1)
        _, _, text = http("GET", agg.admin_url + "/metrics")
        self.assertGreaterEqual(metric_sum(text.decode(),
                                           "inferplane_aggregator_events_applied_total",
                                           op="cleared"), 1)

    def test_two_aggregators_get_everything(self):
        st = Stack(self)
        sim = st.start_sim("w0")
        a1, a2 = start_aggregator(st), start_aggregator(st)
        spec = "w0=%s|%s|%s" % (sim.url, sim.kv, sim.replay)
        st.start("collector", ["--aggregator", a1.pull + "," + a2.pull, "--workers", spec])
        wait_until(lambda: (worker_state(a2, "w0") or {}).get("health") == "up", timeout=10,
                   what="w0 up")
        time.sleep(0.3)
        complete(sim)
        for agg in (a1, a2):
            wait_until(lambda: (worker_state(agg, "w0") or {}).get("blocks", 0) > 0,
                       timeout=10, what="blocks in both aggregators")
        self.assertEqual(worker_state(a1, "w0")["blocks"], worker_state(a2, "w0")["blocks"])

    def test_unreachable_worker_is_down(self):
        st = Stack(self)
        agg = start_aggregator(st)
        dead = "http://127.0.0.1:%d" % free_port()
        col = st.start("collector", ["--aggregator", agg.pull, "--workers",
                                     "gone=%s|%s" % (dead, zmq_endpoint()),
                                     "--scrape-interval-ms", "50"])
        wait_until(lambda: (worker_state(agg, "gone") or {}).get("health") == "down",
                   timeout=10, what="gone reported down")
        _, _, text = http("GET", col.admin_url + "/metrics")
        self.assertGreaterEqual(metric_sum(text.decode(), "inferplane_collector_scrapes_total",
                                           worker="gone", result="failed"), 1)
        status, _, dbg = http_json("GET", col.admin_url + "/debug/workers")
        self.assertEqual(dbg["workers"][0]["health"], "down")
        self.assertTrue(dbg["workers"][0]["last_error"])

    def test_malformed_kv_frames_are_counted_and_survived(self):
        st = Stack(self)
        agg = start_aggregator(st)
        fake = zmq_endpoint()  # inferplanectl poke --socket pub binds here
        dead = "http://127.0.0.1:%d" % free_port()
        col = st.start("collector", ["--aggregator", agg.pull, "--workers",
                                     "fake=%s|%s" % (dead, fake)])
        self.assertEqual(zmq_poke(fake, "pub", count=300, seed=7), 0)

        def dropped():
            _, _, text = http("GET", col.admin_url + "/metrics")
            return metric_sum(text.decode(), "inferplane_frames_dropped_total") or 0
        wait_until(lambda: dropped() >= 50, timeout=10, what="dropped KV frames counted")
        self.assertTrue(col.alive())
        self.assertEqual(http("GET", col.admin_url + "/healthz")[0], 200)
        _, _, text = http("GET", col.admin_url + "/metrics")
        self.assertGreaterEqual(metric_sum(text.decode(),
                                           "inferplane_collector_decode_errors_total"), 50)
        self.assertLess(col.stop(), 2.0)

    def test_admin_endpoints_and_sigterm(self):
        st = Stack(self)
        agg = start_aggregator(st)
        col = st.start("collector", ["--aggregator", agg.pull, "--workers",
                                     "w=http://127.0.0.1:%d|%s" % (free_port(), zmq_endpoint())])
        for path in ("/healthz", "/readyz", "/metrics", "/version", "/debug/workers"):
            self.assertEqual(http("GET", col.admin_url + path)[0], 200, path)
        status, _, ready = http_json("GET", col.admin_url + "/readyz")
        self.assertTrue(ready["ready"])
        self.assertLess(col.stop(), 2.0)
        self.assertEqual(col.proc.returncode, 0)

    def test_policy_mode_waits_for_the_worker_list(self):
        st = Stack(self)
        agg = start_aggregator(st)
        col = st.start("collector", ["--aggregator", agg.pull, "--policy-sub", zmq_endpoint(),
                                     "--policy-req", zmq_endpoint()], ready=False)
        col.wait_ready(path="/healthz")
        status, _, ready = http_json("GET", col.admin_url + "/readyz")
        self.assertEqual(status, 503)
        self.assertFalse(ready["ready"])
        self.assertLess(col.stop(), 2.0)

    def test_policy_workers_filtered_by_prefix(self):
        st = Stack(self)
        sim = st.start_sim("node1-w0")
        dead = "http://127.0.0.1:%d" % free_port()
        st.write("policy/workers.yaml", POLICY % {"url": sim.url, "kv": sim.kv,
                                                  "replay": sim.replay, "dead": dead,
                                                  "kv2": zmq_endpoint()})
        pub, rep = zmq_endpoint(), zmq_endpoint()
        st.start("policy", ["--dir", st.dir + "/policy", "--pub", pub, "--rep", rep])
        agg = start_aggregator(st)
        col = st.start("collector", ["--aggregator", agg.pull, "--policy-sub", pub,
                                     "--policy-req", rep, "--worker-prefix", "node1-",
                                     "--scrape-interval-ms", "50"])
        status, _, dbg = http_json("GET", col.admin_url + "/debug/workers")
        self.assertEqual(dbg["source"], "policy")
        self.assertEqual([w["name"] for w in dbg["workers"]], ["node1-w0"])
        wait_until(lambda: (worker_state(agg, "node1-w0") or {}).get("health") == "up",
                   timeout=10, what="node1-w0 up")
        time.sleep(0.3)
        complete(sim)
        wait_until(lambda: (worker_state(agg, "node1-w0") or {}).get("blocks", 0) > 0,
                   timeout=10, what="node1-w0's blocks")
        self.assertIsNone(worker_state(agg, "node2-w0"))

    def test_worker_restart_clears_its_blocks(self):
        st = Stack(self)
        port, kv, replay = free_port(), zmq_endpoint(), zmq_endpoint()
        cfg = json.dumps({"enable_kv_cache_events": True, "publisher": "zmq", "endpoint": kv,
                          "replay_endpoint": replay, "topic": "kv-events"})
        # what Stack.start_sim does, with ports that stay the same across the restart
        args = ["--host", "127.0.0.1", "--port", str(port), "--served-model-name", "sim-model",
                "--kv-events-config", cfg, "--kv-events-bind", "bind"]

        def start_sim():
            p = st.start("sim", args, admin=False, ready=False)
            p.admin_url = p.url = "http://127.0.0.1:%d" % port
            p.kv, p.replay, p.worker_name = kv, replay, "w0"
            p.wait_ready(path="/health")
            return p
        sim = start_sim()
        agg = start_aggregator(st)
        col = start_collector(st, agg, [sim])
        wait_until(lambda: (worker_state(agg, "w0") or {}).get("health") == "up", timeout=10,
                   what="w0 up")
        time.sleep(0.3)
        complete(sim)
        complete(sim, "another prompt " * 40)
        first = wait_until(lambda: (worker_state(agg, "w0") or {}).get("blocks", 0) > 0 and
                           worker_state(agg, "w0")["blocks"], timeout=10, what="blocks")
        sim.stop()
        wait_until(lambda: (worker_state(agg, "w0") or {}).get("health") == "down", timeout=10,
                   what="w0 down while stopped")
        sim = start_sim()
        wait_until(lambda: (worker_state(agg, "w0") or {}).get("health") == "up", timeout=10,
                   what="w0 up again")
        time.sleep(0.3)
        body = complete(sim, "short " * 40)
        # the new process numbers its batches from 0 again: the collector sees a restart and
        # the aggregator drops what the old process held
        expect = (body["usage"]["prompt_tokens"] + 2) // 16
        w = wait_until(lambda: (worker_state(agg, "w0") or {}).get("blocks", 10 ** 9) <= expect
                       and worker_state(agg, "w0"), timeout=10, what="old blocks dropped")
        self.assertLess(w["blocks"], first)
        self.assertGreater(w["blocks"], 0)
        _, _, text = http("GET", col.admin_url + "/metrics")
        self.assertEqual(metric_sum(text.decode(), "inferplane_collector_worker_restarts_total",
                                    worker="w0"), 1)

    def test_bad_worker_list_is_a_clear_error(self):
        st = Stack(self)
        p = st.start("collector", ["--workers", "w0=http://x"], ready=False)
        self.assertEqual(p.proc.wait(10), 2)
        self.assertIn("name=url|kv_endpoint", p.log())


if __name__ == "__main__":
    unittest.main()
