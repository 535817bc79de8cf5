"""inferplane-sim as a remote provider's stand-in (issue 12, "Providers"): it requires an API key
(vLLM's --api-key), adds a network latency, and counts what reached it (GET /stand-in/received),
so that gateway tests can prove what did and did not get through.

The official `openai` npm client (tools/node, installed by `make deps`) is driven against it.
"""
import http.client as http_client
import json
import os
import shutil
import subprocess
import time
import unittest

from lib.harness import ROOT, Stack, http, http_json, requires, sse_events

KEY = "sk-standin-0123456789"
WRONG = "sk-wrong-9876543210"
LATENCY_MS = 150
FAST = ["--time-scale", "20"]
CHAT = {"model": "remote-big", "messages": [{"role": "user", "content": "Hello there"}],
        "max_tokens": 4, "ignore_eos": True}
NODE_OPENAI = os.path.join(ROOT, "tools", "node", "node_modules", "openai")


def bearer(key):
    return {"Authorization": "Bearer " + key}


def engine_prompt_tokens(url):
    """vllm:prompt_tokens_total as the engine counted it (what reached the engine)."""
    _, _, raw = http("GET", url + "/metrics")
    total = 0.0
    for line in raw.decode().splitlines():
        if line.startswith("vllm:prompt_tokens_total"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def ttfb(url, path, body, headers):
    """Seconds from sending a request to its response's status line and headers."""
    host, port = url.split("//")[1].split(":")
    conn = http_client.HTTPConnection(host, int(port), timeout=10)
    data = json.dumps(body)
    hdrs = dict(headers, **{"Content-Type": "application/json"})
    try:
        t0 = time.monotonic()
        conn.request("POST", path, data, hdrs)
        resp = conn.getresponse()
        elapsed = time.monotonic() - t0
        resp.read()
        return resp.status, elapsed
    finally:
        conn.close()


class TestSimProvider(unittest.TestCase):
    def setUp(self):
        self.st = Stack(self)

    def start(self, *extra):
        sim = self.st.start_sim(model="remote-big", extra=FAST + [
            "--served-model-name", "remote-big", "remote-alias"] + list(extra))
        return sim.url

    def received(self, url):
        status, _, body = http_json("GET", url + "/stand-in/received")
        self.assertEqual(status, 200, body)
        return body

    def test_key_required_and_counted(self):
        url = self.start("--api-key", KEY)
        before = engine_prompt_tokens(url)
        # No key: OpenAI's 401, and the engine never sees it.
        status, _, body = http_json("POST", url + "/v1/chat/completions", CHAT)
        self.assertEqual(status, 401, body)
        self.assertEqual(set(body["error"]), {"message", "type", "param", "code"})
        self.assertEqual(body["error"]["type"], "invalid_request_error")
        self.assertIsNone(body["error"]["code"])
        # Wrong key (and a non-bearer scheme): 401 invalid_api_key.
        status, _, body = http_json("POST", url + "/v1/chat/completions", CHAT, bearer(WRONG))
        self.assertEqual(status, 401, body)
        self.assertEqual(body["error"]["code"], "invalid_api_key")
        self.assertNotIn(WRONG, json.dumps(body))
        status, _, _ = http_json("POST", url + "/v1/chat/completions", CHAT,
                                 {"Authorization": "Basic " + KEY})
        self.assertEqual(status, 401)
        # x-api-key is not a credential without --accept-x-api-key.
        status, _, _ = http_json("POST", url + "/v1/chat/completions", CHAT, {"x-api-key": KEY})
        self.assertEqual(status, 401)
        self.assertEqual(engine_prompt_tokens(url), before, "a rejected request reached the engine")
        r = self.received(url)
        self.assertEqual((r["received"], r["served"], r["unauthorized"]), (4, 0, 4))
        self.assertEqual(r["by_model"]["remote-big"]["served"], 0)
        self.assertEqual([e["auth"] for e in r["last"]], ["missing", "wrong", "missing", "missing"])
        self.assertTrue(all(e["outcome"] == "unauthorized" for e in r["last"]))

        # The right key: served and counted with its model name and tokens.
        status, _, body = http_json("POST", url + "/v1/chat/completions", CHAT, bearer(KEY))
        self.assertEqual(status, 200, body)
        self.assertEqual(body["model"], "remote-big")
        self.assertEqual(body["usage"]["completion_tokens"], 4)
        # Another served name is accepted; responses name the first, as vLLM.
        status, _, body = http_json("POST", url + "/v1/completions",
                                    {"model": "remote-alias", "prompt": "Hi", "max_tokens": 2},
                                    {"authorization": "bearer " + KEY})
        self.assertEqual(status, 200, body)
        self.assertEqual(body["model"], "remote-big")
        self.assertGreater(engine_prompt_tokens(url), before)
        r = self.received(url)
        self.assertEqual((r["received"], r["served"], r["rejected"]), (6, 2, 4))
        big = r["by_model"]["remote-big"]
        self.assertEqual((big["received"], big["served"], big["rejected"]), (5, 1, 4))
        self.assertEqual(big["completion_tokens"], 4)
        self.assertGreater(big["prompt_tokens"], 0)
        self.assertEqual(r["by_model"]["remote-alias"]["served"], 1)
        self.assertEqual(r["by_path"]["/v1/completions"]["served"], 1)
        last = r["last"][-2]
        self.assertEqual((last["status"], last["outcome"], last["auth"], last["model"],
                          last["stream"]), (200, "served", "ok", "remote-big", False))
        self.assertIn("authorization", last["headers"])
        self.assertIn("content-type", last["headers"])
        self.assertNotIn("x-api-key", last["headers"])
        _, _, raw = http("GET", url + "/stand-in/received")
        self.assertNotIn(KEY.encode(), raw)  # names only, never a secret
        self.assertNotIn(WRONG.encode(), raw)

        # Outside /v1 nothing is guarded, as vLLM (health checks, scrapes).
        self.assertEqual(http("GET", url + "/health")[0], 200)
        self.assertEqual(http("GET", url + "/metrics")[0], 200)
        self.assertEqual(http("GET", url + "/v1/models")[0], 401)
        status, _, models = http_json("GET", url + "/v1/models", headers=bearer(KEY))
        self.assertEqual([m["id"] for m in models["data"]], ["remote-big", "remote-alias"])

        status, _, _ = http_json("POST", url + "/stand-in/reset", {})
        self.assertEqual(status, 200)
        r = self.received(url)
        self.assertEqual((r["received"], r["last"]), (0, []))

    def test_unknown_model_is_openais_404(self):
        url = self.start("--api-key", KEY)
        body = dict(CHAT, model="gpt-4o")
        status, _, err = http_json("POST", url + "/v1/chat/completions", body, bearer(KEY))
        self.assertEqual(status, 404, err)
        self.assertEqual(set(err["error"]), {"message", "type", "param", "code"})
        self.assertEqual(err["error"]["type"], "NotFoundError")
        self.assertIn("gpt-4o", err["error"]["message"])
        r = self.received(url)
        self.assertEqual(r["by_model"]["gpt-4o"], {"received": 1, "served": 0, "rejected": 1,
                                                   "prompt_tokens": 0, "completion_tokens": 0})
        self.assertEqual(r["last"][0]["status"], 404)
        self.assertEqual(r["last"][0]["auth"], "ok")

    def test_streaming_with_the_key(self):
        url = self.start("--api-key", KEY)
        body = dict(CHAT, stream=True, stream_options={"include_usage": True})
        status, headers, raw = http("POST", url + "/v1/chat/completions", body, bearer(KEY))
        self.assertEqual(status, 200, raw[:300])
        self.assertTrue(headers.get("Content-Type", "").startswith("text/event-stream"))
        events = sse_events(raw)
        self.assertEqual(events[-1], "[DONE]")
        chunks = [json.loads(e) for e in events[:-1]]
        self.assertEqual(chunks[-1]["usage"]["completion_tokens"], 4)
        status, _, raw = http("POST", url + "/v1/chat/completions", body)
        self.assertEqual(status, 401)
        # The stream is recorded when it ends (its writer thread files it).
        r = None
        for _ in range(40):
            r = self.received(url)
            if r["received"] == 2:
                break
            time.sleep(0.05)
        self.assertEqual((r["received"], r["served"], r["unauthorized"]), (2, 1, 1))
        served = [e for e in r["last"] if e["outcome"] == "served"][0]
        self.assertTrue(served["stream"])
        self.assertEqual(served["completion_tokens"], 4)
        self.assertEqual(r["tokens"]["completion"], 4)

    def test_x_api_key_when_accepted(self):
        url = self.start("--api-key", KEY, "--accept-x-api-key", "--stand-in-headers",
                         "X-Client-Secret-Header")
        status, _, _ = http_json("POST", url + "/v1/chat/completions", CHAT,
                                 {"x-api-key": KEY, "X-Client-Secret-Header": "v"})
        self.assertEqual(status, 200)
        status, _, _ = http_json("POST", url + "/v1/chat/completions", CHAT, {"x-api-key": WRONG})
        self.assertEqual(status, 401)
        r = self.received(url)
        self.assertEqual([e["auth"] for e in r["last"]], ["ok", "wrong"])
        self.assertIn("x-api-key", r["last"][0]["headers"])
        self.assertIn("x-client-secret-header", r["last"][0]["headers"])
        self.assertNotIn("authorization", r["last"][0]["headers"])

    def test_network_latency_is_added(self):
        plain = self.start("--api-key", KEY)
        slow = self.start("--api-key", KEY, "--network-latency-ms", str(LATENCY_MS))
        body = dict(CHAT, stream=True)

        def median_ttfb(url, headers, n=5):
            times = []
            for _ in range(n):  # bounded: n requests, 10 s timeout each
                status, t = ttfb(url, "/v1/chat/completions", body, headers)
                times.append(t)
            times.sort()
            return status, times[len(times) // 2]

        s0, base = median_ttfb(plain, bearer(KEY))
        s1, slowed = median_ttfb(slow, bearer(KEY))
        s2, rejected = median_ttfb(slow, {}, n=3)  # the network delays a 401 as well
        self.assertEqual((s0, s1, s2), (200, 200, 401))
        added = slowed - base
        print("\nTTFB (streaming, median of 5): without %.1f ms, with --network-latency-ms %d: "
              "%.1f ms (added %.1f ms); 401 through the latency: %.1f ms"
              % (base * 1e3, LATENCY_MS, slowed * 1e3, added * 1e3, rejected * 1e3))
        self.assertGreaterEqual(slowed, LATENCY_MS / 1e3)
        self.assertGreaterEqual(rejected, LATENCY_MS / 1e3)
        self.assertLess(rejected, LATENCY_MS / 1e3 + 0.15)
        self.assertGreater(added, LATENCY_MS / 1e3 * 0.9)
        self.assertLess(added, LATENCY_MS / 1e3 + 0.15)  # slack for a busy 2-core machine
        r = self.received(slow)
        self.assertEqual(r["network_latency_ms"], LATENCY_MS)

    @requires(os.path.isdir(NODE_OPENAI) and shutil.which("node"),
              "node and the openai npm package (%s)" % NODE_OPENAI)
    def test_official_openai_client(self):
        url = self.start("--api-key", KEY)
        script = """
const OpenAI = require(%s);
(async () => {
  const ok = new OpenAI({apiKey: %s, baseURL: %s, maxRetries: 0});
  const r = await ok.chat.completions.create({model: "remote-big", max_tokens: 3,
    messages: [{role: "user", content: "hi"}]});
  let n = 0;
  const s = await ok.chat.completions.create({model: "remote-big", max_tokens: 3, stream: true,
    messages: [{role: "user", content: "hi"}]});
  for await (const c of s) n++;
  let status = 0;
  try {
    await new OpenAI({apiKey: %s, baseURL: %s, maxRetries: 0}).models.list();
  } catch (e) { status = e.status; }
  console.log(JSON.stringify({model: r.model, tokens: r.usage.completion_tokens, chunks: n,
                              status}));
})().catch(e => { console.error(e); process.exit(1); });
""" % (json.dumps(NODE_OPENAI), json.dumps(KEY), json.dumps(url + "/v1"), json.dumps(WRONG),
       json.dumps(url + "/v1"))
        out = subprocess.run(["node", "-e", script], capture_output=True, text=True, timeout=30)
        self.assertEqual(out.returncode, 0, out.stderr)
        res = json.loads(out.stdout)
        self.assertEqual((res["model"], res["tokens"], res["status"]), ("remote-big", 3, 401))
        self.assertGreater(res["chunks"], 0)


if __name__ == "__main__":
    unittest.main()
