"""The Anthropic Messages API through real processes: policy, aggregator, collector, decider,
exporter, the gateway with tenants' keys, and a simulated worker that speaks only OpenAI chat —
so every /v1/messages request is translated (libs/api, services/gateway/gateway_messages) —
driven by the official @anthropic-ai/sdk and by plain HTTP.

    cd integration && python3 -m unittest -v test_anthropic
"""
import json
import os
import shutil
import subprocess
import unittest

from lib.harness import Stack, http, http_json, requires, wait_until
from test_tenants import KEYS, KEY_A, KEY_C

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NODE_SDK = os.path.join(ROOT, "tools", "node", "node_modules", "@anthropic-ai", "sdk")

POLICY = """apiVersion: inferplane.io/v1alpha1
kind: InferenceWorkerSet
metadata: {name: sims}
spec:
  model: sim-model
  blockSize: 16
  apis: %s
  workers:
    - {name: w0, url: "%s", kvEvents: "%s", replay: "%s"}
---
apiVersion: inferplane.io/v1alpha1
kind: InferencePool
metadata: {name: chat}
spec:
  model: sim-model
  targets: [{workerSet: sims}]
"""
LONG = ("The quarterly report covers revenue, costs, hiring and the roadmap for the next three "
        "quarters; each section has figures, risks and the owners of each item. ") * 12


def messages_body(text=LONG, **extra):
    body = {"model": "sim-model", "max_tokens": 8, "system": "You are terse.",
            "messages": [{"role": "user", "content": text}]}
    body.update(extra)
    return body


class TestAnthropic(unittest.TestCase):
    SIM_EXTRA = ()
    APIS = "[openai]"

    @classmethod
    def setUpClass(cls):
        cls.st = st = Stack(None)
        sim = cls.sim = st.start_sim("w0", extra=list(cls.SIM_EXTRA))
        st.write("policy/p.yaml", POLICY % (cls.APIS, sim.url, sim.kv, sim.replay))
        keys = st.write("keys.yaml", KEYS)
        gw = st.start_chain(os.path.join(st.dir, "policy"),
                            ["--keys-file", keys, "--max-body-bytes", "262144"])
        cls.api = gw.api
        wait_until(lambda: cls.post("/v1/messages", messages_body("hi"))[0] == 200, 15, 0.2,
                   "the first /v1/messages request")

    @classmethod
    def tearDownClass(cls):
        cls.st.stop_all()

    @classmethod
    def post(cls, path, body, key=KEY_A):
        return http_json("POST", cls.api + path, body,
                         {"x-api-key": key, "anthropic-version": "2023-06-01"} if key else {})

    def test_message_shape_and_usage(self):
        status, hdrs, doc = self.post("/v1/messages", messages_body("Say hello"))
        self.assertEqual(status, 200, doc)
        self.assertEqual((doc["type"], doc["role"], doc["model"]),
                         ("message", "assistant", "sim-model"))
        self.assertTrue(doc["id"].startswith("msg_"), doc)
        self.assertEqual(doc["content"][0]["type"], "text")
        self.assertIn(doc["stop_reason"], ("end_turn", "max_tokens"))
        u = doc["usage"]
        self.assertGreater(u["input_tokens"] + u.get("cache_read_input_tokens", 0), 0)
        self.assertGreater(u["output_tokens"], 0)
        self.assertIn(hdrs.get("x-inferplane-worker"), ("w0",))

    def test_stream_event_sequence(self):
        status, hdrs, raw = http("POST", self.api + "/v1/messages",
                                 messages_body("Count to five", stream=True),
                                 {"x-api-key": KEY_A})
        self.assertEqual(status, 200, raw)
        ctype = {k.lower(): v for k, v in hdrs.items()}.get("content-type", "")
        self.assertIn("text/event-stream", ctype)
        names = [line[len("event: "):] for line in raw.decode().splitlines()
                 if line.startswith("event: ")]
        self.assertEqual(names[0], "message_start")
        self.assertEqual(names[-2:], ["message_delta", "message_stop"])
        self.assertIn("content_block_start", names)
        self.assertIn("content_block_delta", names)
        self.assertIn("content_block_stop", names)
        self.assertLess(names.index("content_block_start"), names.index("content_block_delta"))

    def test_second_identical_request_is_a_cache_hit(self):
        body = messages_body(LONG + " (cache test)")
        first = self.post("/v1/messages", body)
        self.assertEqual(first[0], 200, first[2])
        second = self.post("/v1/messages", body)
        self.assertEqual(second[0], 200, second[2])
        self.assertEqual(second[1].get("x-inferplane-reason"), "cache_hit", second[1])
        self.assertGreater(int(second[1].get("x-inferplane-cached-tokens", "0")), 100)
        self.assertGreater(second[2]["usage"].get("cache_read_input_tokens", 0), 0, second[2])
        # the same conversation as a chat completion: the same prompt tokens, a cache hit too
        chat = {"model": "sim-model", "max_tokens": 8,
                "messages": [{"role": "system", "content": "You are terse."},
                             {"role": "user", "content": LONG + " (cache test)"}]}
        st, hdrs, doc = http_json("POST", self.api + "/v1/chat/completions", chat,
                                  {"Authorization": "Bearer " + KEY_A})
        self.assertEqual(st, 200, doc)
        self.assertEqual(hdrs.get("x-inferplane-reason"), "cache_hit", hdrs)

    def test_count_tokens_matches_the_routed_prompt(self):
        status, _, doc = self.post("/v1/messages/count_tokens",
                                   {"model": "sim-model", "system": "You are terse.",
                                    "messages": [{"role": "user", "content": "Hello there"}]})
        self.assertEqual(status, 200, doc)
        n = doc["input_tokens"]
        self.assertGreater(n, 3)
        status, _, doc = self.post("/v1/messages/count_tokens",
                                   {"model": "sim-model", "system": "You are terse.",
                                    "messages": [{"role": "user", "content": "Hello there" +
                                                  " again" * 10}]})
        self.assertGreater(doc["input_tokens"], n)

    def test_errors_in_anthropics_shape(self):
        cases = [
            ("/v1/messages", messages_body("x"), None, 401, "authentication_error"),
            ("/v1/messages", messages_body("x"), "ipk-wrong-key-000000000", 401,
             "authentication_error"),
            ("/v1/messages", messages_body("x"), KEY_C, 403, "permission_error"),
            ("/v1/messages", dict(messages_body("x"), model="no-such-model"), KEY_A, 404,
             "not_found_error"),
            ("/v1/messages/count_tokens", {"model": "no-such-model", "messages": [
                {"role": "user", "content": "x"}]}, KEY_A, 404, "not_found_error"),
            ("/v1/messages", {"model": "sim-model", "messages": []}, KEY_A, 400,
             "invalid_request_error"),  # no max_tokens
            ("/v1/messages", messages_body([{"type": "image", "source": {
                "type": "base64", "media_type": "image/png", "data": "AAAA"}}]), KEY_A, 400,
             "invalid_request_error"),
        ]
        for path, body, key, status, etype in cases:
            st, _, doc = self.post(path, body, key)
            self.assertEqual(st, status, (path, body, doc))
            self.assertEqual(doc.get("type"), "error", doc)
            self.assertEqual(doc["error"]["type"], etype, doc)
            self.assertNotIn("ipk-", json.dumps(doc))
        st, _, doc = self.post("/v1/messages", messages_body([{"type": "image", "source": {
            "type": "base64", "media_type": "image/png", "data": "AAAA"}}]))
        self.assertIn("messages.0.content.0", doc["error"]["message"])
        # a body above --max-body-bytes
        st, _, _ = self.post("/v1/messages", messages_body("word " * 80000))
        self.assertEqual(st, 413)

    def test_tool_round_trip_is_translated(self):
        body = messages_body("What is the weather in Prague?", tools=[{
            "name": "get_weather", "description": "Current weather",
            "input_schema": {"type": "object", "properties": {"city": {"type": "string"}},
                             "required": ["city"]}}])
        body["messages"] += [
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1",
                                               "name": "get_weather",
                                               "input": {"city": "Prague"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                          "content": "12 C, cloudy"}]}]
        status, _, doc = self.post("/v1/messages", body)
        self.assertEqual(status, 200, doc)
        self.assertEqual(doc["type"], "message")

    @requires(os.path.isdir(NODE_SDK) and shutil.which("node"),
              "node and the @anthropic-ai/sdk npm package (%s)" % NODE_SDK)
    def test_official_anthropic_sdk(self):
        script = """
const mod = require(%s);
const Anthropic = mod.default || mod.Anthropic || mod;
(async () => {
  const c = new Anthropic({apiKey: %s, baseURL: %s, maxRetries: 0});
  const m = await c.messages.create({model: "sim-model", max_tokens: 8,
    messages: [{role: "user", content: "Hello"}]});
  const types = [];
  const s = await c.messages.create({model: "sim-model", max_tokens: 8, stream: true,
    messages: [{role: "user", content: "Hello"}]});
  for await (const e of s) types.push(e.type);
  const final = await c.messages.stream({model: "sim-model", max_tokens: 8,
    messages: [{role: "user", content: "Hello"}]}).finalMessage();
  const ct = await c.messages.countTokens({model: "sim-model",
    messages: [{role: "user", content: "Hello"}]});
  const errs = {};
  for (const [name, key, model] of [["wrong_key", "ipk-wrong-key-000000000", "sim-model"],
                                    ["unknown_model", %s, "no-such-model"]]) {
    try {
      await new Anthropic({apiKey: key, baseURL: %s, maxRetries: 0}).messages.create(
        {model, max_tokens: 4, messages: [{role: "user", content: "x"}]});
      errs[name] = "no error";
    } catch (e) { errs[name] = [e.status, e.constructor.name]; }
  }
  console.log(JSON.stringify({type: m.type, text: m.content[0].type, out: m.usage.output_tokens,
                              types, final: final.stop_reason, count: ct.input_tokens, errs}));
})().catch(e => { console.error(e); process.exit(1); });
""" % (json.dumps(NODE_SDK), json.dumps(KEY_A), json.dumps(self.api), json.dumps(KEY_A),
       json.dumps(self.api))
        out = subprocess.run(["node", "-e", script], capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        res = json.loads(out.stdout)
        self.assertEqual((res["type"], res["text"]), ("message", "text"))
        self.assertGreater(res["out"], 0)
        self.assertEqual(res["types"][0], "message_start")
        self.assertEqual(res["types"][-1], "message_stop")
        self.assertIn(res["final"], ("end_turn", "max_tokens"))
        self.assertGreater(res["count"], 0)
        self.assertEqual(res["errs"]["wrong_key"], [401, "AuthenticationError"])
        self.assertEqual(res["errs"]["unknown_model"], [404, "NotFoundError"])


class TestAnthropicPassThrough(unittest.TestCase):
    """A worker set whose spec.apis lists anthropic (a simulator serving /v1/messages itself,
    as recent vLLM): the gateway passes Messages requests through untranslated."""

    @classmethod
    def setUpClass(cls):
        TestAnthropic.SIM_EXTRA, TestAnthropic.APIS = ("--serve-messages", "--stand-in"), \
            "[openai, anthropic]"
        try:
            TestAnthropic.setUpClass()
        finally:
            TestAnthropic.SIM_EXTRA, TestAnthropic.APIS = (), "[openai]"
        cls.t = TestAnthropic

    @classmethod
    def tearDownClass(cls):
        TestAnthropic.tearDownClass()

    def received(self):
        return http_json("GET", self.t.sim.url + "/stand-in/received")[2]

    def test_messages_pass_through(self):
        http("POST", self.t.sim.url + "/stand-in/reset", {})
        status, hdrs, doc = self.t.post("/v1/messages", messages_body("Say hello"))
        self.assertEqual(status, 200, doc)
        self.assertEqual((doc["type"], doc["role"]), ("message", "assistant"))
        status, _, raw = http("POST", self.t.api + "/v1/messages",
                              messages_body("Say hello", stream=True), {"x-api-key": KEY_A})
        self.assertEqual(status, 200)
        self.assertIn("event: message_stop", raw.decode())
        rec = json.dumps(self.received())
        self.assertIn("/v1/messages", rec)
        self.assertNotIn("/v1/chat/completions", rec)


if __name__ == "__main__":
    unittest.main()
