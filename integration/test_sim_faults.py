"""inferplane-sim's vLLM wire variants and fault injection, seen from outside.

- Every --prefix-caching-hash-algo, with int or bytes block hashes on the wire
  (VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES) and every --kv-events-format, is consumed by the real
  collector: the worker's blocks reach the aggregator, kept "exact" (no unknown parents).
- LoRA adapters (--enable-lora --lora-modules) and cache_salt: adapters are listed and
  served, and their blocks never hit the base model's (vLLM's extra keys).
- --fail-rate answers a fraction of requests with vLLM's 500 body; --startup-delay gives 503
  until the "model" is loaded; POST /sim/restart (and SIGUSR1) cut streams, empty the cache and
  restart the KV-event sequence at 0, which the collector detects as a worker restart.
"""
import json
import signal
import threading
import time
import unittest

from lib.harness import Stack, free_port, http, http_json, sse_events, wait_until, zmq_endpoint
from test_aggregator import metric_sum, start_aggregator
from test_collector import PROMPT as COLLECTOR_PROMPT
from test_collector import complete, start_collector, worker_state

FAST = ["--time-scale", "20"]
PROMPT = " ".join("word%d" % i for i in range(200))


def start_sim_env(st, name, extra, env):
    """Stack.start_sim with an environment (PYTHONHASHSEED, VLLM_KV_EVENTS_*...)."""
    port, kv, replay = free_port(), zmq_endpoint(), zmq_endpoint()
    cfg = json.dumps({"enable_kv_cache_events": True, "publisher": "zmq", "endpoint": kv,
                      "replay_endpoint": replay, "topic": "kv-events"})
    p = st.start("sim", ["--host", "127.0.0.1", "--port", str(port), "--kv-events-config", cfg,
                         "--enable-prompt-tokens-details", "--kv-events-bind", "bind"]
                 + list(extra), admin=False, ready=False, env=env)
    p.admin_url = p.url = "http://127.0.0.1:%d" % port
    p.kv, p.replay, p.worker_name = kv, replay, name
    p.wait_ready(path="/health")
    return p


def cached(sim, prompt=PROMPT, **extra):
    body = dict({"prompt": prompt, "max_tokens": 1}, **extra)
    status, _, doc = http_json("POST", sim.url + "/v1/completions", body)
    assert status == 200, (status, doc)
    return doc["usage"]["prompt_tokens_details"]["cached_tokens"], doc


class TestSimWireVariants(unittest.TestCase):
    def check_variant(self, algo, fmt, int_hashes):
        st = Stack(self)
        env = {"PYTHONHASHSEED": "0",
               "VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES": "1" if int_hashes else "0"}
        sim2 = start_sim_env(st, "w0", FAST + ["--prefix-caching-hash-algo", algo,
                                               "--kv-events-format", fmt], env)
        _, _, text = http("GET", sim2.url + "/metrics")
        self.assertIn('prefix_caching_hash_algo="%s"' % algo, text.decode())
        agg = start_aggregator(st)
        col = start_collector(st, agg, [sim2])
        wait_until(lambda: (worker_state(agg, "w0") or {}).get("health") == "up", timeout=10,
                   what="w0 up")
        time.sleep(0.3)  # SUB slow joiner
        body = complete(sim2)
        want = body["usage"]["prompt_tokens"] // 16
        w = wait_until(lambda: (worker_state(agg, "w0") or {}).get("blocks", 0) >= want
                       and worker_state(agg, "w0"), timeout=10, what="blocks")
        self.assertEqual(w["kv_state"], "exact")
        # the repeated prompt hits, and its decode blocks chain onto the known parents
        complete(sim2)
        time.sleep(0.3)
        status, _, dbg = http_json("GET", col.admin_url + "/debug/workers")
        self.assertEqual(dbg["workers"][0]["unknown_parents"], 0, (algo, fmt, int_hashes))

    def test_sha256_map_int(self):
        self.check_variant("sha256", "map", True)

    def test_sha256_cbor_map_bytes(self):
        self.check_variant("sha256_cbor", "map", False)

    def test_xxhash_array_bytes(self):
        self.check_variant("xxhash", "array", False)

    def test_xxhash_cbor_legacy_int(self):
        self.check_variant("xxhash_cbor", "array-legacy", True)

    def test_bad_values_refused(self):
        st = Stack(self)
        for args, env in ((["--prefix-caching-hash-algo", "builtin"], None),
                          ([], {"VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES": "false"}),
                          (["--lora-modules", "a=/x"], None),  # needs --enable-lora
                          (["--enable-lora", "--lora-modules", "nopath"], None),
                          (["--fail-rate", "1.5"], None), (["--startup-delay", "-1"], None)):
            p = st.start("sim", args + ["--port", "0"], admin=False, ready=False, env=env)
            self.assertEqual(p.proc.wait(5), 2, (args, env))


class TestSimLoraAndSalt(unittest.TestCase):
    def test_lora_adapters_and_cache_salt(self):
        st = Stack(self)
        # vLLM's syntax: several name=path values after one --lora-modules
        sim = st.start_sim(extra=FAST + ["--enable-lora", "--lora-modules", "sql=/loras/sql",
                                         "chat=/loras/chat", "--max-loras", "2"])
        status, _, models = http_json("GET", sim.url + "/v1/models")
        self.assertEqual(status, 200)
        ids = [m["id"] for m in models["data"]]
        self.assertEqual(ids, ["sim-model", "sql", "chat"])
        self.assertEqual(models["data"][1]["parent"], "sim-model")
        self.assertEqual(models["data"][1]["root"], "/loras/sql")
        n, base = cached(sim)
        self.assertEqual(n, 0)
        self.assertEqual(base["model"], "sim-model")
        # the same prompt under an adapter: its own hash space, then its own hits
        n, doc = cached(sim, model="sql")
        self.assertEqual((n, doc["model"]), (0, "sql"))
        self.assertGreater(cached(sim, model="sql")[0], 0)
        self.assertEqual(cached(sim, model="chat")[0], 0)
        # a cache salt isolates the chain from its first block
        self.assertEqual(cached(sim, cache_salt="tenant-a")[0], 0)
        self.assertEqual(cached(sim, cache_salt="tenant-b")[0], 0)
        self.assertGreater(cached(sim, cache_salt="tenant-a")[0], 0)
        self.assertGreater(cached(sim)[0], 0)  # the base model's blocks are still there
        status, _, err = http_json("POST", sim.url + "/v1/completions",
                                   {"prompt": "x", "cache_salt": ""})
        self.assertEqual(status, 400)
        self.assertIn("cache_salt", err["error"]["message"])
        status, _, _ = http_json("POST", sim.url + "/v1/completions",
                                 {"prompt": "x", "model": "unknown-adapter"})
        self.assertEqual(status, 404)


class TestSimFaults(unittest.TestCase):
    def test_fail_rate(self):
        st = Stack(self)
        sim = st.start_sim(extra=FAST + ["--fail-rate", "0.5", "--seed", "3"])
        codes = []
        for i in range(40):
            status, _, doc = http_json("POST", sim.url + "/v1/completions",
                                       {"prompt": "hello %d" % i, "max_tokens": 2,
                                        "stream": i % 2 == 0})
            codes.append(status)
            if status == 500:
                self.assertEqual(doc["error"]["code"], 500)
                self.assertEqual(doc["error"]["type"], "InternalServerError")
        failed = codes.count(500)
        self.assertEqual(failed + codes.count(200), 40, codes)
        self.assertTrue(8 <= failed <= 32, codes)  # ~Binomial(40, 0.5)
        _, _, text = http("GET", sim.url + "/metrics")
        self.assertEqual(metric_sum(text.decode(), "inferplane_sim_injected_failures_total"),
                         failed)
        # bad requests are still 400, never a simulated 500
        status, _, _ = http_json("POST", sim.url + "/v1/completions", {"prompt": 5})
        self.assertEqual(status, 400)

    def test_startup_delay(self):
        st = Stack(self)
        t0 = time.monotonic()
        # 20 simulated seconds at --time-scale 20: one real second of "model loading"
        sim = st.start_sim(extra=FAST + ["--startup-delay", "20"], ready=False)
        wait_until(lambda: http("GET", sim.url + "/health", timeout=1)[0] == 503, timeout=5,
                   what="503 while starting")
        status, _, doc = http_json("POST", sim.url + "/v1/completions", {"prompt": "x"})
        self.assertEqual(status, 503)
        self.assertIn("starting", doc["error"]["message"])
        self.assertEqual(http("GET", sim.url + "/metrics")[0], 503)
        wait_until(lambda: http("GET", sim.url + "/health", timeout=1)[0] == 200, timeout=10,
                   what="healthy after the delay")
        self.assertGreaterEqual(time.monotonic() - t0, 0.9)
        self.assertEqual(cached(sim)[0], 0)

    def test_restart_cuts_streams_and_resets_kv_sequence(self):
        st = Stack(self)
        sim = st.start_sim("w0", extra=FAST + ["--startup-delay", "10"], ready=False)
        wait_until(lambda: http("GET", sim.url + "/health", timeout=1)[0] == 200, timeout=10,
                   what="sim up")
        agg = start_aggregator(st)
        col = start_collector(st, agg, [sim])
        wait_until(lambda: (worker_state(agg, "w0") or {}).get("health") == "up", timeout=10,
                   what="w0 up")
        time.sleep(0.3)
        complete(sim)
        wait_until(lambda: (worker_state(agg, "w0") or {}).get("blocks", 0) > 0, timeout=10,
                   what="blocks")
        self.assertGreater(cached(sim, COLLECTOR_PROMPT)[0], 0)
        result = {}

        def stream():
            result["r"] = http("POST", sim.url + "/v1/completions",
                               {"prompt": "a long one", "max_tokens": 5000, "ignore_eos": True,
                                "stream": True}, timeout=20)

        t = threading.Thread(target=stream)
        t.start()
        time.sleep(0.3)
        status, _, _ = http("POST", sim.url + "/sim/restart")
        self.assertEqual(status, 200)
        t.join(20)
        status, _, raw = result["r"]
        events = sse_events(raw)
        self.assertTrue(events, raw[:200])
        self.assertNotEqual(events[-1], "[DONE]")  # cut, as by a dying process
        # --startup-delay again (10 simulated s = 0.5 s real), then an empty cache
        self.assertEqual(http("GET", sim.url + "/health", timeout=1)[0], 503)
        wait_until(lambda: http("GET", sim.url + "/health", timeout=1)[0] == 200, timeout=10,
                   what="back up")
        self.assertEqual(cached(sim, COLLECTOR_PROMPT)[0], 0)
        # the new process's first batch is seq 0 again: the collector sees a restart
        wait_until(lambda: metric_sum(http("GET", col.admin_url + "/metrics")[2].decode(),
                                      "inferplane_collector_worker_restarts_total",
                                      worker="w0") >= 1, timeout=10, what="restart detected")
        # SIGUSR1 does the same
        sim.signal(signal.SIGUSR1)
        wait_until(lambda: http("GET", sim.url + "/health", timeout=1)[0] == 503, timeout=5,
                   what="restarting after SIGUSR1")
        self.assertTrue(sim.alive())


if __name__ == "__main__":
    unittest.main()
