"""End to end: every process of the stack, started for real on loopback, with sim workers.

Proves the foundation's promises: requests flow gateway → decider → worker and back; routing is
cache-aware from KV events (not from request history); every service serves its admin
endpoints, shrugs off malformed input on every socket, and stops within 2 s of SIGTERM.
"""
import json
import random
import threading
import time
import unittest

from lib.cluster import MODEL, Cluster
from lib.harness import http, http_json, sse_events, wait_until, zmq_poke

WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike "
         "november oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee "
         "zulu").split()


def text(seed, nwords):
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(nwords))


def chat(c, content, max_tokens=8, stream=False, timeout=30):
    body = {"model": MODEL, "messages": [{"role": "user", "content": content}],
            "max_tokens": max_tokens, "stream": stream}
    return http("POST", c.api + "/v1/chat/completions", body, timeout=timeout)


class TestStack(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.prefix = text(1, 900)  # ~1,800+ tokens with the built-in tokenizer

    def test_request_streams_through_every_process(self):
        c = Cluster(self, workers=2)
        c.wait_workers_up()
        status, hdrs, body = chat(c, "Say hello", max_tokens=12)
        self.assertEqual(status, 200, body)
        doc = json.loads(body)
        self.assertEqual(doc["object"], "chat.completion")
        self.assertTrue(doc["choices"][0]["message"]["content"])
        self.assertIn(hdrs.get("x-inferplane-worker"), ("w0", "w1"))
        self.assertTrue(hdrs.get("x-inferplane-reason"))

        status, hdrs, body = chat(c, "Say hello again", max_tokens=12, stream=True)
        self.assertEqual(status, 200, body)
        self.assertTrue(hdrs.get("Content-Type", "").startswith("text/event-stream"))
        events = sse_events(body)
        self.assertEqual(events[-1], "[DONE]")
        chunks = [json.loads(e) for e in events[:-1]]
        content = "".join(ch["choices"][0]["delta"].get("content", "") for ch in chunks
                          if ch.get("choices"))
        self.assertTrue(content)

        # the exporter received both records
        def recorded():
            _, _, m = http("GET", c.services["exporter"].admin_url + "/metrics")
            m = m.decode()
            return "inferplane_request_ttft_seconds_count" in m and m
        metrics = wait_until(recorded, 10, what="exporter records")
        self.assertIn('model="%s"' % MODEL, metrics)

    def test_cache_aware_routing_follows_kv_events(self):
        c = Cluster(self, workers=3)
        c.wait_workers_up()
        # 1. a client talks to the last worker directly, bypassing inferplane: the decider has
        # no history of this prefix, only the worker's KV events tell it where it lives
        sim = c.sims[-1]
        owner = sim.worker_name
        body = {"model": MODEL, "max_tokens": 4,
                "messages": [{"role": "user", "content": self.prefix + " question one"}]}
        status, _, raw = http("POST", sim.url + "/v1/chat/completions", body)
        self.assertEqual(status, 200, raw)

        # 2. once its KV events arrived, the decider sees the prefix cached on `owner` only
        probe = {"model": MODEL, "messages": [{"role": "user",
                                               "content": self.prefix + " question probe"}]}

        def indexed():
            status, doc = c.route(probe)
            return status == 200 and doc["worker"] == owner and doc["cached_tokens"] >= 1000 and doc
        doc = wait_until(indexed, 10, what="prefix indexed on " + owner)
        others = [x for x in doc["candidates"] if x["worker"] != owner]
        self.assertTrue(all(x["cached_tokens"] == 0 for x in others), doc)

        # 3. later requests sharing the prefix all go to `owner`, and hit its cache
        for i in range(4):
            status, hdrs, body = chat(c, self.prefix + " question %d" % (i + 2))
            self.assertEqual(status, 200, body)
            self.assertEqual(hdrs["x-inferplane-worker"], owner)
            usage = json.loads(body)["usage"]
            self.assertGreaterEqual(usage["prompt_tokens_details"]["cached_tokens"], 1000, usage)

        # 4. the worker evicts everything: it stops attracting the prefix once the
        # AllBlocksCleared event arrives (history would say otherwise)
        status, _, _ = http("POST", sim.url + "/reset_prefix_cache")
        self.assertEqual(status, 200)

        def forgotten():
            status, doc = c.route(probe)
            cand = next(x for x in doc["candidates"] if x["worker"] == owner)
            return status == 200 and cand["cached_tokens"] == 0 and doc
        doc = wait_until(forgotten, 10, what="prefix forgotten after reset")
        self.assertNotEqual(doc["reason"], "cache_hit", doc)

    def test_distinct_prefixes_spread_by_load(self):
        c = Cluster(self, workers=3)
        c.wait_workers_up()
        chosen = []
        lock = threading.Lock()

        def one(i):
            status, hdrs, body = chat(c, text(100 + i, 700), max_tokens=64)
            with lock:
                chosen.append((status, hdrs.get("x-inferplane-worker")))
        threads = [threading.Thread(target=one, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
            time.sleep(0.02)
        for t in threads:
            t.join(60)
        self.assertEqual([s for s, _ in chosen], [200] * 6, chosen)
        workers = {w for _, w in chosen}
        self.assertGreaterEqual(len(workers), 2, chosen)

    def test_admin_endpoints_malformed_input_and_sigterm(self):
        c = Cluster(self, workers=1)
        for name, p in c.services.items():
            for path in ("/healthz", "/readyz", "/metrics", "/version"):
                status, _, body = http("GET", p.admin_url + path)
                self.assertEqual(status, 200, "%s %s: %s" % (name, path, body[:200]))
            status, _, doc = http_json("GET", p.admin_url + "/version")
            self.assertIn("version", doc)
            _, _, m = http("GET", p.admin_url + "/metrics")
            self.assertIn(b"process_resident_memory_bytes", m, name)

        # random bytes and broken frames on every ZeroMQ endpoint
        for name, ep, kind in c.zmq_endpoints:
            self.assertEqual(zmq_poke(ep, kind, count=150, seed=7), 0, (name, ep))
            self.assertEqual(zmq_poke(ep, "raw", count=20, seed=8), 0, (name, ep))
        # invalid JSON, wrong types and oversized bodies on every HTTP endpoint that takes a body
        bad_bodies = [b"{not json", b'{"model": 5, "messages": "x"}', b"[1,2,3]",
                      b'{"model": "%s", "messages": [{"role": 1}]}' % MODEL.encode()]
        targets = [c.api + "/v1/chat/completions", c.api + "/v1/completions",
                   c.decider_url + "/v1/route"]
        for url in targets:
            for b in bad_bodies:
                status, _, body = http_json("POST", url, b, {"Content-Type": "application/json"})
                self.assertEqual(status, 400, (url, b, body))
                self.assertIn("message", body["error"], body)
            status, _, body = http("POST", url, b"x" * (9 << 20))
            self.assertIn(status, (400, 413), url)
        for name, p in c.services.items():
            self.assertTrue(p.alive(), name)
            status, _, _ = http("GET", p.admin_url + "/healthz")
            self.assertEqual(status, 200, name)
            _, _, m = http("GET", p.admin_url + "/metrics")
        # the droppers counted what they dropped
        for name in ("aggregator", "exporter", "decider", "policy"):
            _, _, m = http("GET", c.services[name].admin_url + "/metrics")
            self.assertIn(b"inferplane_frames_dropped_total", m, name)

        # and the stack still routes
        c.wait_workers_up()
        status, _, body = chat(c, "still alive?")
        self.assertEqual(status, 200, body)

        # SIGTERM stops every service within 2 s
        for name, p in c.services.items():
            elapsed = p.stop()
            self.assertLess(elapsed, 2.0, name)
            self.assertEqual(p.proc.returncode, 0, name)


if __name__ == "__main__":
    unittest.main()
