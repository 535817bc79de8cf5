"""inferplane-sim as a client sees it: vLLM's OpenAI API, /metrics, errors, shutdown.

The KV-event stream (ZeroMQ) is covered by services/sim/tests/test_sim_kvpub.c, which decodes
it with the collector's decoder, and end to end by the routing tests.
"""
import json
import signal
import time
import unittest

from lib.harness import Stack, http, http_json, sse_events

FAST = ["--time-scale", "20"]
LONG_PROMPT = "The quick brown fox jumps over the lazy dog near the river bank. " * 12


class TestSim(unittest.TestCase):
    def setUp(self):
        self.st = Stack(self)
        self.sim = self.st.start_sim(extra=FAST + ["--max-model-len", "2048"])
        self.url = self.sim.url

    def post(self, path, body, **kw):
        return http_json("POST", self.url + path, body, **kw)

    def stream(self, path, body):
        status, headers, raw = http("POST", self.url + path, body)
        self.assertEqual(status, 200, raw[:300])
        self.assertTrue(headers.get("Content-Type", "").startswith("text/event-stream"), headers)
        events = sse_events(raw)
        self.assertEqual(events[-1], "[DONE]")
        return [json.loads(e) for e in events[:-1]]

    # --- completions ------------------------------------------------------------------------

    def test_completion_non_streaming(self):
        status, _, body = self.post("/v1/completions", {
            "model": "sim-model", "prompt": "Hello, simulator", "max_tokens": 7,
            "ignore_eos": True})
        self.assertEqual(status, 200, body)
        self.assertEqual(body["object"], "text_completion")
        self.assertTrue(body["id"].startswith("cmpl-"))
        choice = body["choices"][0]
        self.assertEqual(choice["finish_reason"], "length")
        self.assertTrue(choice["text"])
        u = body["usage"]
        self.assertEqual(u["completion_tokens"], 7)
        self.assertEqual(u["total_tokens"], u["prompt_tokens"] + 7)
        self.assertEqual(u["prompt_tokens_details"], {"cached_tokens": 0})

    def test_completion_streaming_with_usage(self):
        chunks = self.stream("/v1/completions", {
            "prompt": "Stream me something", "max_tokens": 5, "ignore_eos": True,
            "stream": True, "stream_options": {"include_usage": True}})
        body, last = chunks[:-1], chunks[-1]
        self.assertGreaterEqual(len(body), 1)
        for c in body:
            self.assertEqual(c["object"], "text_completion")
            self.assertIsNone(c["usage"])
            self.assertEqual(len(c["choices"]), 1)
        self.assertEqual(body[-1]["choices"][0]["finish_reason"], "length")
        self.assertTrue(all(c["choices"][0]["finish_reason"] is None for c in body[:-1]))
        self.assertEqual(last["choices"], [])
        self.assertEqual(last["usage"]["completion_tokens"], 5)
        text = "".join(c["choices"][0]["text"] for c in body)
        # The same request without streaming says the same thing (deterministic output).
        _, _, whole = self.post("/v1/completions", {
            "prompt": "Stream me something", "max_tokens": 5, "ignore_eos": True})
        self.assertEqual(whole["choices"][0]["text"], text)

    def test_streaming_without_usage_has_no_usage_field(self):
        chunks = self.stream("/v1/completions", {"prompt": "x y z", "max_tokens": 3,
                                                  "ignore_eos": True, "stream": True})
        self.assertTrue(chunks)
        self.assertTrue(all("usage" not in c for c in chunks))

    # --- chat -------------------------------------------------------------------------------

    def test_chat_non_streaming(self):
        status, _, body = self.post("/v1/chat/completions", {
            "model": "sim-model", "max_tokens": 6, "ignore_eos": True,
            "messages": [{"role": "system", "content": "Be brief."},
                         {"role": "user", "content": "Hi!"}]})
        self.assertEqual(status, 200, body)
        self.assertEqual(body["object"], "chat.completion")
        self.assertTrue(body["id"].startswith("chatcmpl-"))
        msg = body["choices"][0]["message"]
        self.assertEqual(msg["role"], "assistant")
        self.assertTrue(msg["content"])
        self.assertEqual(body["usage"]["completion_tokens"], 6)

    def test_chat_streaming(self):
        chunks = self.stream("/v1/chat/completions", {
            "messages": [{"role": "user", "content": "Tell me a story"}], "max_tokens": 4,
            "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}})
        self.assertEqual(chunks[0]["choices"][0]["delta"], {"role": "assistant", "content": ""})
        for c in chunks[:-1]:
            self.assertEqual(c["object"], "chat.completion.chunk")
            self.assertIsNone(c["usage"])
        self.assertEqual(chunks[-2]["choices"][0]["finish_reason"], "length")
        self.assertEqual(chunks[-1]["choices"], [])
        self.assertEqual(chunks[-1]["usage"]["completion_tokens"], 4)

    def test_chat_prompt_tokens_match_tokenize(self):
        msgs = [{"role": "user", "content": "What is a prefix cache?"}]
        _, _, tok = self.post("/tokenize", {"messages": msgs})
        _, _, body = self.post("/v1/chat/completions", {"messages": msgs, "max_tokens": 1})
        self.assertEqual(body["usage"]["prompt_tokens"], tok["count"])

    # --- prefix cache -----------------------------------------------------------------------

    def test_cached_tokens_on_repeated_prompt(self):
        req = {"prompt": LONG_PROMPT, "max_tokens": 2, "ignore_eos": True}
        _, _, first = self.post("/v1/completions", req)
        _, _, second = self.post("/v1/completions", req)
        n = first["usage"]["prompt_tokens"]
        self.assertGreater(n, 64)
        self.assertEqual(first["usage"]["prompt_tokens_details"]["cached_tokens"], 0)
        # Whole blocks of 16, never the whole prompt (one token is always computed).
        self.assertEqual(second["usage"]["prompt_tokens_details"]["cached_tokens"],
                         (n - 1) // 16 * 16)
        # A prompt sharing only the first part hits only those blocks.
        _, _, third = self.post("/v1/completions", {
            "prompt": LONG_PROMPT[:200] + " something else entirely", "max_tokens": 1})
        cached = third["usage"]["prompt_tokens_details"]["cached_tokens"]
        self.assertGreater(cached, 0)
        self.assertLess(cached, n - 16)
        self.assertEqual(cached % 16, 0)

    def test_reset_prefix_cache(self):
        req = {"prompt": LONG_PROMPT, "max_tokens": 1}
        self.post("/v1/completions", req)
        status, _, _ = http("POST", self.url + "/reset_prefix_cache")
        self.assertEqual(status, 200)
        _, _, again = self.post("/v1/completions", req)
        self.assertEqual(again["usage"]["prompt_tokens_details"]["cached_tokens"], 0)

    # --- other endpoints --------------------------------------------------------------------

    def test_models_health_version(self):
        status, _, models = http_json("GET", self.url + "/v1/models")
        self.assertEqual(status, 200)
        self.assertEqual(models["object"], "list")
        self.assertEqual(models["data"][0]["id"], "sim-model")
        self.assertEqual(models["data"][0]["max_model_len"], 2048)
        status, _, raw = http("GET", self.url + "/health")
        self.assertEqual((status, raw), (200, b""))
        status, _, ver = http_json("GET", self.url + "/version")
        self.assertEqual(status, 200)
        self.assertRegex(ver["version"], r"^\d+\.\d+\.\d+")

    def test_tokenize_detokenize_round_trip(self):
        text = "Round trip, with punctuation!"
        status, _, tok = self.post("/tokenize", {"model": "sim-model", "prompt": text})
        self.assertEqual(status, 200, tok)
        self.assertEqual(tok["count"], len(tok["tokens"]))
        self.assertEqual(tok["max_model_len"], 2048)
        status, _, detok = self.post("/detokenize", {"tokens": tok["tokens"]})
        self.assertEqual(status, 200)
        self.assertEqual(detok["prompt"], text)

    def test_metrics(self):
        self.post("/v1/completions", {"prompt": LONG_PROMPT, "max_tokens": 3})
        self.post("/v1/completions", {"prompt": LONG_PROMPT, "max_tokens": 3})
        status, headers, raw = http("GET", self.url + "/metrics")
        self.assertEqual(status, 200)
        text = raw.decode()
        labels = 'engine="0",model_name="sim-model"'
        for name, kind in [("vllm:num_requests_running", "gauge"),
                           ("vllm:num_requests_waiting", "gauge"),
                           ("vllm:kv_cache_usage_perc", "gauge"),
                           ("vllm:prefix_cache_queries_total", "counter"),
                           ("vllm:prefix_cache_hits_total", "counter"),
                           ("vllm:prompt_tokens_total", "counter"),
                           ("vllm:generation_tokens_total", "counter"),
                           ("vllm:num_preemptions_total", "counter"),
                           ("vllm:time_to_first_token_seconds", "histogram"),
                           ("vllm:inter_token_latency_seconds", "histogram"),
                           ("vllm:e2e_request_latency_seconds", "histogram")]:
            self.assertRegex(text, r"# TYPE %s %s\n" % (name, kind))
            self.assertIn(name, text)
        self.assertIn('vllm:num_requests_running{%s} ' % labels, text)
        self.assertIn('vllm:time_to_first_token_seconds_count{%s} 2' % labels, text)
        self.assertRegex(text, r'vllm:time_to_first_token_seconds_bucket\{[^}]*le="0.001"')
        self.assertRegex(text, r'vllm:request_success_total\{[^}]*finished_reason="[a-z]+"')
        self.assertRegex(text, r'vllm:cache_config_info\{[^}]*block_size="16"[^}]*'
                               r'num_gpu_blocks="\d+"')
        hits = float(text.split("vllm:prefix_cache_hits_total{%s} " % labels)[1].split()[0])
        self.assertGreater(hits, 0)

    # --- errors -----------------------------------------------------------------------------

    def test_unknown_model_is_404(self):
        status, _, body = self.post("/v1/completions", {"model": "nope", "prompt": "x"})
        self.assertEqual(status, 404)
        self.assertEqual(body["error"]["code"], 404)
        self.assertIn("nope", body["error"]["message"])

    def test_too_long_prompt_is_400(self):
        status, _, body = self.post("/v1/completions", {"prompt": LONG_PROMPT * 8,
                                                        "max_tokens": 4})
        self.assertEqual(status, 400, body)
        self.assertIn("maximum context length is 2048", body["error"]["message"])

    def test_malformed_input_is_400(self):
        for path in ("/v1/completions", "/v1/chat/completions", "/tokenize", "/detokenize"):
            for raw in (b"{not json", b"[1,2]", b"", b"\xff\xfe"):
                status, _, _ = http("POST", self.url + path, raw,
                                    headers={"Content-Type": "application/json"})
                self.assertEqual(status, 400, (path, raw))
        for body in ({"prompt": 5}, {"prompt": "x", "max_tokens": "many"},
                     {"prompt": "x", "max_tokens": 0}, {"prompt": "x", "stream": "yes"},
                     {"prompt": "x", "min_tokens": 9, "max_tokens": 2}):
            status, _, _ = self.post("/v1/completions", body)
            self.assertEqual(status, 400, body)
        status, _, _ = self.post("/v1/chat/completions", {"messages": [{"content": 3}]})
        self.assertEqual(status, 400)
        status, _, _ = http("GET", self.url + "/health")
        self.assertEqual(status, 200)

    def test_sigterm_exits_quickly_mid_stream(self):
        import threading
        result = {}

        def client():  # the stream is cut by the shutdown: any ending is fine
            try:
                result["r"] = http("POST", self.url + "/v1/completions", {
                    "prompt": "long answer", "max_tokens": 2000, "ignore_eos": True,
                    "stream": True}, timeout=10)
            except Exception as e:  # noqa: BLE001
                result["r"] = e

        t = threading.Thread(target=client)
        t.start()
        time.sleep(0.3)
        self.assertLess(self.sim.stop(), 2.0)
        t.join(10)
        self.assertEqual(self.sim.proc.returncode, 0)


class TestSimFlags(unittest.TestCase):
    def test_help_and_bad_flags(self):
        st = Stack(self)
        p = st.start("sim", ["--help"], admin=False, ready=False)
        self.assertEqual(p.proc.wait(5), 0)
        self.assertIn("--kv-events-config", p.log())
        for bad in (["--profile", "a100-unknown"], ["--kv-events-format", "xml"],
                    ["--kv-events-config", "{not json"], ["--time-scale", "0"]):
            p = st.start("sim", bad + ["--port", "0"], admin=False, ready=False)
            self.assertEqual(p.proc.wait(5), 2, bad)


if __name__ == "__main__":
    unittest.main()
