"""inferplane-gateway: validation, decider status mapping, streaming proxy, records, shutdown.

Most tests run the real gateway (and the real exporter) against stand-ins written here, so
that every path can be forced: a fake decider (ZMTP ROUTER speaking our protocol), a fake
policy service and a fake OpenAI worker (HTTP/1.1 keep-alive, chunked SSE with a chosen pace).
TestGatewayStack then runs the whole chain with the real policy, decider and sim.
"""
import http.client as http_client
import json
import os
import socket
import threading
import time
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from lib.harness import (Stack, binary, free_port, http, http_json, sse_events, wait_until,
                         zmq_endpoint, zmq_poke)
from test_exporter import (MSG_ROUTE_REQ, checked_stack, ROUTE_BAD_REQUEST, ROUTE_NO_POOL, ROUTE_NO_WORKER,
                           ROUTE_NOT_READY, ROUTE_OVERLOADED, Zmtp, ZmtpRouter, decode, metric,
                           policy, route_rep, scrape)

CHAT = {"model": "m", "messages": [{"role": "user", "content": "Hello there, how are you?"}]}


# ---- stand-ins ----------------------------------------------------------------------------

class FakeWorker:
    """An OpenAI-compatible worker. `max_tokens` chunks are streamed `delay` s apart (chat
    deltas or completion texts), then a usage chunk and [DONE]; non-streamed answers come after
    the same total time. Remembers every request and the client ports it saw."""

    def __init__(self, delay=0.02):
        self.delay = delay
        self.requests = []
        self.ports = set()
        self.aborted = 0
        self.lock = threading.Lock()
        worker = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                raw = self.rfile.read(n)
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                with worker.lock:
                    worker.requests.append((self.path, dict(self.headers.items()), body))
                    worker.ports.add(self.client_address[1])
                if body is None or body.get("model") == "fail-400":
                    self._json(400, {"error": {"message": "bad", "type": "BadRequestError",
                                               "param": None, "code": 400}})
                    return
                try:
                    self._answer(body)
                except (BrokenPipeError, ConnectionResetError):
                    with worker.lock:
                        worker.aborted += 1
                    self.close_connection = True

            def _json(self, status, obj):
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _chunk(self, data):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()

            def _answer(self, body):
                chat = self.path.endswith("/chat/completions")
                count = int(body.get("max_tokens") or 5)
                usage = {"prompt_tokens": 40, "completion_tokens": count,
                         "total_tokens": 40 + count, "prompt_tokens_details": {"cached_tokens": 32}}
                if not body.get("stream"):
                    time.sleep(worker.delay * count)
                    choice = ({"index": 0, "message": {"role": "assistant", "content": "x" * count},
                               "finish_reason": "length"} if chat else
                              {"index": 0, "text": "x" * count, "finish_reason": "length"})
                    self._json(200, {"id": "cmpl-1", "object": "chat.completion" if chat else
                                     "text_completion", "model": body["model"],
                                     "choices": [choice], "usage": usage})
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                if chat:
                    self._chunk(b'data: {"choices":[{"index":0,"delta":{"role":"assistant",'
                                b'"content":""}}]}\n\n')
                for i in range(count):
                    time.sleep(worker.delay)
                    piece = ({"index": 0, "delta": {"content": "t%d " % i}} if chat else
                             {"index": 0, "text": "t%d " % i})
                    self._chunk(b"data: " + json.dumps({"choices": [piece]}).encode() + b"\n\n")
                self._chunk(b"data: " + json.dumps({"choices": [], "usage": usage}).encode() +
                            b"\n\n")
                self._chunk(b"data: [DONE]\n\n")
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class FakeDecider(ZmtpRouter):
    """Answers ROUTE_REQs by model name: nopool/busy/down/notready/badreq give those statuses,
    silent never answers, alias routes with model "real-model", noisy sends junk and a stale
    answer first, flaky routes to a dead port first and to the worker next, dead always to a
    dead port; anything else routes to the worker."""

    def __init__(self, worker_url):
        self.worker_url = worker_url
        self.dead_url = "http://127.0.0.1:%d" % free_port()  # nothing listens there
        self.asked = {}
        super().__init__(self._route)

    def _route(self, frames):
        kind, req = decode(frames[-1])
        if kind != MSG_ROUTE_REQ:
            return None
        model = req["model"]
        with self.lock:
            self.asked[model] = self.asked.get(model, 0) + 1
            nth = self.asked[model]
        rid = req["req_id"]
        statuses = {"nopool": ROUTE_NO_POOL, "busy": ROUTE_OVERLOADED, "down": ROUTE_NO_WORKER,
                    "notready": ROUTE_NOT_READY, "badreq": ROUTE_BAD_REQUEST}
        if model in statuses:
            return [[route_rep(rid, statuses[model], reason=model, detail="because " + model)]]
        if model == "silent":
            return None
        url = self.worker_url
        if model == "dead" or (model == "flaky" and nth % 2 == 1):
            url = self.dead_url
        ok = [route_rep(rid, worker="w0", url=url, pool="chat", reason="cache_hit",
                        model="real-model" if model == "alias" else model,
                        predicted_ttft_s=0.0421, cached_tokens=req["prompt_tokens"] // 16 * 16)]
        if model == "noisy":
            return [[b"\xc1junk"], [route_rep(rid + 12345, worker="stale")], ok]
        return [ok]


def stream_lines(url, body, headers=None, timeout=10.0, stop_after=None):
    """POSTs and reads the SSE answer incrementally. Returns (status, headers, [(t, line)])
    with t the arrival time (monotonic) of each data line. stop_after=N closes after N lines."""
    host, port = url.split("//")[1].split("/")[0].split(":")
    path = "/" + url.split("//")[1].split("/", 1)[1]
    conn = http_client.HTTPConnection(host, int(port), timeout=timeout)
    h = {"Content-Type": "application/json"}
    h.update(headers or {})
    conn.request("POST", path, json.dumps(body), h)
    resp = conn.getresponse()
    lines = []
    while True:
        line = resp.readline()
        if not line:
            break
        line = line.decode().rstrip("\r\n")
        if line.startswith("data: "):
            lines.append((time.monotonic(), line[6:]))
            if stop_after is not None and len(lines) >= stop_after:
                break
    hdrs = dict(resp.getheaders())
    conn.close()
    return resp.status, hdrs, lines


# ---- tests --------------------------------------------------------------------------------

class GatewayCase(unittest.TestCase):

    def start_gateway(self, st, decider=None, exporter=None, policy_req=None, extra=(),
                      ready_path="/healthz"):
        port = free_port()
        args = ["--listen", "127.0.0.1:%d" % port,
                "--decider", decider or zmq_endpoint(),
                "--exporter", exporter or zmq_endpoint(),
                "--policy-sub", zmq_endpoint(),
                "--policy-req", policy_req or zmq_endpoint(),
                "--route-timeout-ms", "400"] + list(extra)
        gw = st.start("gateway", args, ready_path=ready_path)
        gw.api = "http://127.0.0.1:%d" % port
        return gw

    def fakes(self, delay=0.02):
        worker = FakeWorker(delay)
        self.addCleanup(worker.close)
        dec = FakeDecider(worker.url)
        self.addCleanup(dec.close)
        return worker, dec


class TestGatewayValidation(GatewayCase):

    def assert_error(self, status, body, want_status, param=None, code=None, needle=None):
        self.assertEqual(status, want_status, body)
        self.assertIsInstance(body, dict)
        err = body["error"]
        self.assertEqual(set(err), {"message", "type", "param", "code"})
        self.assertIsInstance(err["message"], str)
        if want_status == 400:
            self.assertEqual(err["type"], "invalid_request_error")
        if param is not None:
            self.assertEqual(err["param"], param)
        if code is not None:
            self.assertEqual(err["code"], code)
        if needle:
            self.assertIn(needle, err["message"])

    def test_invalid_requests(self):
        st = checked_stack(self)
        gw = self.start_gateway(st, extra=["--max-body-bytes", "4096"])
        chat = gw.api + "/v1/chat/completions"
        comp = gw.api + "/v1/completions"
        cases = [
            (chat, b"{not json", None, "not valid JSON"),
            (chat, b"[1,2]", None, "JSON object"),
            (chat, {"messages": CHAT["messages"]}, "model", "model"),
            (chat, {"model": 3, "messages": CHAT["messages"]}, "model", "number"),
            (chat, {"model": "m"}, "messages", "messages"),
            (chat, {"model": "m", "messages": "hi"}, "messages", "array"),
            (chat, {"model": "m", "messages": []}, "messages", "at least one"),
            (chat, {"model": "m", "messages": [{"role": "user", "content": 5}]}, "messages", None),
            (chat, dict(CHAT, stream="yes"), "stream", "boolean"),
            (chat, dict(CHAT, max_tokens=0), "max_tokens", "positive integer"),
            (chat, dict(CHAT, max_tokens=2.5), "max_tokens", "positive integer"),
            (comp, {"model": "m"}, "prompt", "prompt"),
            (comp, {"model": "m", "prompt": [1, 2]}, "prompt", "string"),
            (comp, {"model": "m", "prompt": "x", "max_tokens": -1}, "max_tokens", None),
        ]
        for url, body, param, needle in cases:
            status, hdrs, got = http_json("POST", url, body)
            self.assert_error(status, got, 400, param=param, needle=needle)
            self.assertTrue(hdrs.get("x-request-id"), hdrs)
        # oversized body → 413 before any handler runs
        big = dict(CHAT, messages=[{"role": "user", "content": "x" * 10000}])
        status, _, got = http_json("POST", chat, big)
        self.assertEqual(status, 413)
        self.assertIn("error", got)
        # unknown path and wrong method are JSON errors too
        status, _, got = http_json("GET", gw.api + "/v1/nothing")
        self.assertEqual(status, 404)
        self.assertIn("error", got)
        status, _, got = http_json("GET", chat)
        self.assertEqual(status, 405)
        # a client's request id is kept
        status, hdrs, _ = http_json("POST", chat, {"model": "m"}, {"X-Request-Id": "abc-123"})
        self.assertEqual(hdrs.get("x-request-id"), "abc-123")
        s = scrape(gw.admin_url)
        self.assertEqual(metric(s, "inferplane_gateway_requests_total", api="chat",
                                status_code="400"), 12)
        self.assertTrue(gw.alive())

    def test_decider_down_is_503_in_bounded_time(self):
        st = checked_stack(self)
        gw = self.start_gateway(st)  # nothing listens on --decider
        t0 = time.monotonic()
        status, _, got = http_json("POST", gw.api + "/v1/chat/completions", CHAT)
        took = time.monotonic() - t0
        self.assertEqual(status, 503)
        self.assertEqual(got["error"]["code"], "route_timeout")
        self.assertIn("decider", got["error"]["message"])
        self.assertLess(took, 2.0)
        self.assertEqual(metric(scrape(gw.admin_url), "inferplane_gateway_route_timeouts_total"),
                         1)
        # /v1/models without a policy: a clear 503; not ready either
        status, _, got = http_json("GET", gw.api + "/v1/models")
        self.assertEqual(status, 503)
        self.assertIn("policy", got["error"]["message"])
        status, _, got = http_json("GET", gw.admin_url + "/readyz")
        self.assertEqual(status, 503)
        self.assertLess(gw.stop(), 2.0)


class TestGatewayRouting(GatewayCase):

    def test_decider_statuses_map_to_http(self):
        st = checked_stack(self)
        worker, dec = self.fakes()
        # no fair queue: OVERLOADED is answered at once (its waiting: test_fair_queue)
        gw = self.start_gateway(st, decider=dec.endpoint, extra=["--queue-max-wait-ms", "0"])
        chat = gw.api + "/v1/chat/completions"
        for model, want, code in [("nopool", 404, "model_not_found"), ("busy", 429, "overloaded"),
                                  ("down", 503, "no_worker_available"),
                                  ("notready", 503, "router_not_ready"),
                                  ("badreq", 400, "bad_request"),
                                  ("silent", 503, "route_timeout")]:
            status, _, got = http_json("POST", chat, dict(CHAT, model=model))
            self.assertEqual(status, want, (model, got))
            self.assertEqual(got["error"]["code"], code, model)
            if model != "silent":
                self.assertIn("because " + model, got["error"]["message"])
        status, _, got = http_json("POST", chat, dict(CHAT, model="nopool"))
        self.assertEqual(got["error"]["param"], "model")
        self.assertEqual(got["error"]["type"], "invalid_request_error")
        self.assertEqual(worker.requests, [])

    def test_junk_and_stale_replies_are_dropped(self):
        st = checked_stack(self)
        worker, dec = self.fakes()
        gw = self.start_gateway(st, decider=dec.endpoint)
        status, hdrs, got = http_json("POST", gw.api + "/v1/chat/completions",
                                      dict(CHAT, model="noisy"))
        self.assertEqual(status, 200, got)
        # the silent question earlier on the same socket may answer late: also dropped
        s = scrape(gw.admin_url)
        self.assertEqual(metric(s, "inferplane_gateway_route_replies_dropped_total",
                                reason="malformed"), 1)
        self.assertEqual(metric(s, "inferplane_gateway_route_replies_dropped_total",
                                reason="stale"), 1)

    def test_hashes_sent_to_the_decider(self):
        st = checked_stack(self)
        worker, dec = self.fakes()
        gw = self.start_gateway(st, decider=dec.endpoint, extra=["--block-size", "4"])
        long = dict(CHAT, messages=[{"role": "user", "content": "word " * 100}])
        status, _, _ = http_json("POST", gw.api + "/v1/chat/completions", long)
        self.assertEqual(status, 200)
        status, _, _ = http_json("POST", gw.api + "/v1/chat/completions", long)
        reqs = [decode(m[-1])[1] for m in dec.received]
        self.assertEqual(len(reqs), 2)
        a, b = reqs
        self.assertEqual(a["block_size"], 4)
        self.assertGreater(a["prompt_tokens"], 100)
        self.assertEqual(len(a["hashes"]), a["prompt_tokens"] // 4)
        self.assertEqual(a["hashes"], b["hashes"])  # same prompt, same chain
        self.assertEqual(len(set(a["hashes"])), len(a["hashes"]))
        self.assertNotEqual(a["req_id"], b["req_id"])


class TestGatewayProxy(GatewayCase):

    def setUp(self):
        self.st = checked_stack(self)
        self.worker, self.dec = self.fakes(delay=0.02)
        pull = zmq_endpoint()
        self.ex = self.st.start("exporter", ["--pull", pull])
        self.gw = self.start_gateway(self.st, decider=self.dec.endpoint, exporter=pull)
        self.chat = self.gw.api + "/v1/chat/completions"
        self.comp = self.gw.api + "/v1/completions"

    def assert_decision_headers(self, hdrs):
        h = {k.lower(): v for k, v in hdrs.items()}
        self.assertEqual(h["x-inferplane-worker"], "w0")
        self.assertEqual(h["x-inferplane-endpoint"], self.worker.url)
        self.assertEqual(h["x-inferplane-pool"], "chat")
        self.assertEqual(h["x-inferplane-reason"], "cache_hit")
        self.assertEqual(h["x-inferplane-predicted-ttft-ms"], "42.1")
        self.assertTrue(h["x-inferplane-cached-tokens"].isdigit())
        self.assertTrue(h["x-request-id"])

    def test_streaming_chat(self):
        status, hdrs, lines = stream_lines(self.chat, dict(CHAT, stream=True, max_tokens=8))
        self.assertEqual(status, 200)
        self.assertTrue(hdrs["Content-Type"].startswith("text/event-stream"))
        self.assert_decision_headers(hdrs)
        data = [l for _, l in lines]
        self.assertEqual(data[-1], "[DONE]")
        texts = [json.loads(d)["choices"][0]["delta"].get("content") for d in data[1:9]]
        self.assertEqual(texts, ["t%d " % i for i in range(8)])
        self.assertEqual(json.loads(data[-2])["usage"]["completion_tokens"], 8)
        # the worker saw the client's body and our request id
        path, wh, body = self.worker.requests[-1]
        self.assertEqual(path, "/v1/chat/completions")
        self.assertEqual(body["messages"], CHAT["messages"])
        self.assertEqual({k.lower(): v for k, v in wh.items()}["x-request-id"],
                         hdrs["x-request-id"])
        # the record reaches the exporter, with usage from the stream
        labels = dict(model="m", pool="chat", endpoint=self.worker.url)
        s = wait_until(lambda: (lambda s: s if metric(s, "inferplane_requests_total",
                                                      status_code="200", **labels) == 1 else None)
                       (scrape(self.ex.admin_url)), 5, what="the record at the exporter")
        self.assertEqual(metric(s, "inferplane_request_ttft_seconds_count", **labels), 1)
        self.assertEqual(metric(s, "inferplane_request_itl_seconds_count", **labels), 1)
        self.assertEqual(metric(s, "inferplane_prompt_tokens_cached_total", **labels), 32)
        self.assertEqual(metric(s, "inferplane_prompt_tokens_uncached_total", **labels), 8)
        self.assertEqual(metric(s, "inferplane_completion_tokens_total", **labels), 8)
        self.assertEqual(metric(s, "inferplane_ttft_prediction_error_seconds_count", **labels), 1)
        ttft = metric(s, "inferplane_request_ttft_seconds_sum", **labels)
        self.assertGreater(ttft, 0.015)  # the first token came after one worker delay
        self.assertLess(ttft, 2.0)

    def test_non_streaming_and_completions(self):
        status, hdrs, got = http_json("POST", self.chat, dict(CHAT, max_tokens=3))
        self.assertEqual(status, 200, got)
        self.assertTrue(hdrs["Content-Type"].startswith("application/json"))
        self.assert_decision_headers(hdrs)
        self.assertEqual(got["choices"][0]["message"]["content"], "xxx")
        status, hdrs, got = http_json("POST", self.comp, {"model": "m", "prompt": "Once upon",
                                                          "max_tokens": 4})
        self.assertEqual(status, 200, got)
        self.assertEqual(got["choices"][0]["text"], "xxxx")
        status, hdrs, raw = http("POST", self.comp, {"model": "m", "prompt": ["a", "b"],
                                                     "max_tokens": 2, "stream": True})
        self.assertEqual(status, 200)
        events = sse_events(raw)
        self.assertEqual(events[-1], "[DONE]")
        self.assertEqual(json.loads(events[0])["choices"][0]["text"], "t0 ")
        # an upstream error passes through with its status and body
        status, hdrs, got = http_json("POST", self.chat, dict(CHAT, model="fail-400"))
        self.assertEqual(status, 400)
        self.assertEqual(got["error"]["type"], "BadRequestError")
        self.assertEqual(hdrs["x-inferplane-worker"], "w0")

        def counted():
            s = scrape(self.ex.admin_url)
            return s if metric(s, "inferplane_requests_total") == 4 else None
        s = wait_until(counted, 5, what="4 records")
        self.assertEqual(metric(s, "inferplane_requests_total", status_code="400"), 1)
        self.assertEqual(metric(s, "inferplane_completion_tokens_total"), 3 + 4 + 2)
        # connections to the worker are kept alive and reused
        self.assertLessEqual(len(self.worker.ports), 2, self.worker.ports)

    def test_model_alias_is_rewritten(self):
        status, _, got = http_json("POST", self.chat, dict(CHAT, model="alias", max_tokens=1,
                                                           temperature=0.25))
        self.assertEqual(status, 200, got)
        _, _, body = self.worker.requests[-1]
        self.assertEqual(body["model"], "real-model")
        self.assertEqual(body["temperature"], 0.25)
        self.assertEqual(body["messages"], CHAT["messages"])

    def test_streaming_is_real(self):
        self.worker.delay = 0.25
        t0 = time.monotonic()
        status, _, lines = stream_lines(self.chat, dict(CHAT, stream=True, max_tokens=6))
        self.assertEqual(status, 200)
        content = [t for t, l in lines if '"content": "t' in l]
        self.assertEqual(len(content), 6)
        # the first token arrives ~0.25 s in, the last ~1.5 s in: nothing was held back
        self.assertLess(content[0] - t0, 0.9)
        self.assertGreater(content[-1] - content[0], 1.0)
        gaps = sorted(b - a for a, b in zip(content, content[1:]))
        self.assertGreater(gaps[len(gaps) // 2], 0.1, gaps)  # median: robust to a stall

    def test_unreachable_worker_is_retried(self):
        status, hdrs, got = http_json("POST", self.chat, dict(CHAT, model="flaky", max_tokens=1))
        self.assertEqual(status, 200, got)
        self.assertEqual(hdrs["x-inferplane-endpoint"], self.worker.url)
        self.assertEqual(self.dec.asked["flaky"], 2)
        status, hdrs, got = http_json("POST", self.chat, dict(CHAT, model="dead"))
        self.assertEqual(status, 502)
        self.assertEqual(got["error"]["code"], "upstream_unreachable")
        self.assertIn(self.dec.dead_url, got["error"]["message"])
        # "flaky": one retry; "dead": --max-attempts (3) attempts, each a connection failure
        s = scrape(self.gw.admin_url)
        self.assertEqual(metric(s, "inferplane_gateway_retries_total", reason="connect"), 3)
        self.assertEqual(metric(s, "inferplane_gateway_upstream_errors_total", kind="connect"), 4)
        self.assertEqual(hdrs["x-inferplane-attempts"], "3")

    def test_client_disconnect_aborts_upstream(self):
        self.worker.delay = 0.1
        status, _, lines = stream_lines(self.chat, dict(CHAT, stream=True, max_tokens=60),
                                        stop_after=2)
        self.assertEqual(status, 200)
        wait_until(lambda: self.worker.aborted == 1, 5, what="the worker to see the abort")
        s = wait_until(lambda: (lambda s: s if metric(s, "inferplane_requests_total",
                                                      status_code="499") == 1 else None)
                       (scrape(self.ex.admin_url)), 5, what="a 499 record")
        self.assertEqual(metric(scrape(self.gw.admin_url), "inferplane_gateway_upstream_errors_total",
                                kind="client_gone"), 1)
        self.assertEqual(metric(scrape(self.gw.admin_url), "inferplane_gateway_inflight"), 0)

    def test_concurrent_streams(self):
        self.worker.delay = 0.05
        results = []

        def one(i):
            results.append(stream_lines(self.chat, dict(CHAT, stream=True, max_tokens=5,
                                                        user="u%d" % i)))
        threads = [threading.Thread(target=one, args=(i,)) for i in range(12)]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join(15)
        self.assertEqual(len(results), 12)
        for status, _, lines in results:
            self.assertEqual(status, 200)
            self.assertEqual(lines[-1][1], "[DONE]")
        self.assertLess(time.monotonic() - t0, 5.0)  # they ran side by side

    def test_sigterm_during_a_stream(self):
        self.worker.delay = 0.1
        box = {}

        def reader():
            box["r"] = stream_lines(self.chat, dict(CHAT, stream=True, max_tokens=200))
        t = threading.Thread(target=reader)
        t.start()
        wait_until(lambda: metric(scrape(self.gw.admin_url), "inferplane_gateway_inflight") == 1,
                   5, what="the stream to start")
        time.sleep(0.3)
        self.assertLess(self.gw.stop(), 2.0)
        self.assertEqual(self.gw.proc.returncode, 0)
        t.join(5)
        self.assertFalse(t.is_alive())

    def test_sigterm_while_waiting_for_a_worker(self):
        self.worker.delay = 0.1  # a non-streamed answer of 200 tokens comes after 20 s
        box = {}

        def asker():
            box["r"] = http("POST", self.chat, dict(CHAT, max_tokens=200), timeout=10)
        t = threading.Thread(target=asker)
        t.start()
        wait_until(lambda: len(self.worker.requests) == 1, 5, what="the worker to be asked")
        self.assertLess(self.gw.stop(), 2.0)
        self.assertEqual(self.gw.proc.returncode, 0)
        t.join(5)
        self.assertFalse(t.is_alive())


class TestGatewayPolicy(GatewayCase):

    def test_models_and_readiness_follow_the_policy(self):
        st = checked_stack(self)
        pol = ZmtpRouter(lambda frames: [[policy(3, [("chat", "sim-model", "ttft"),
                                                     ("batch", "sim-model", ""),
                                                     ("big", "big-model", "ttft")])]])
        self.addCleanup(pol.close)
        gw = self.start_gateway(st, policy_req=pol.endpoint, ready_path="/readyz")
        status, _, got = http_json("GET", gw.admin_url + "/readyz")
        self.assertEqual(status, 200)
        self.assertIn("3", got["detail"])
        status, _, got = http_json("GET", gw.api + "/v1/models")
        self.assertEqual(status, 200)
        self.assertEqual(got["object"], "list")
        self.assertEqual([m["id"] for m in got["data"]], ["sim-model", "big-model"])
        self.assertEqual(got["data"][0]["pools"], ["chat", "batch"])
        self.assertEqual(got["data"][0]["object"], "model")


class TestGatewayRobustness(GatewayCase):

    def test_garbage_on_every_socket(self):
        st = checked_stack(self)
        worker, dec = self.fakes()
        gw = self.start_gateway(st, decider=dec.endpoint)
        port = int(gw.api.rsplit(":", 1)[1])
        for junk in (b"\x00\xff" * 500, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
                     b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 99999999999\r\n\r\n",
                     b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 5\r\n\r\n{\"a\"",
                     b"\r\n\r\n\r\n"):
            with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
                try:
                    s.sendall(junk)
                    s.shutdown(socket.SHUT_WR)
                    s.recv(4096)
                except OSError:
                    pass
        for body in (b"\xff\xfe", b"{\"model\": \"m\", \"messages\": [" + b"[" * 3000 + b"]",
                     json.dumps(dict(CHAT, messages=[{"role": 1}])).encode()):
            status, _, _ = http("POST", gw.api + "/v1/chat/completions", body,
                                {"Content-Type": "application/json"})
            self.assertEqual(status, 400)
        status, _, _ = http_json("POST", gw.api + "/v1/chat/completions", CHAT)
        self.assertEqual(status, 200)
        self.assertTrue(gw.alive())
        self.assertLess(gw.stop(), 2.0)


class SimCases:
    """Requests through the gateway to a real sim; start_stack() decides who routes."""

    def routed(self, gw, body):
        """Retries while the router is still warming up (503); returns the final answer."""
        def ask():
            status, hdrs, raw = http("POST", gw.api + "/v1/chat/completions", body, timeout=30)
            return (status, hdrs, raw) if status != 503 else None
        return wait_until(ask, 15, interval=0.2, what="a routed request")

    def test_stream_and_non_stream_through_the_sim(self):
        st = checked_stack(self)
        sim, gw, ex = self.start_stack(st)
        body = {"model": "sim-model", "max_tokens": 8,
                "messages": [{"role": "user", "content": "Tell me a story " * 20}]}
        status, hdrs, raw = self.routed(gw, dict(body, stream=True,
                                                 stream_options={"include_usage": True}))
        self.assertEqual(status, 200, raw[:500])
        self.assertTrue(hdrs["Content-Type"].startswith("text/event-stream"))
        self.assertEqual(hdrs["x-inferplane-worker"], "w0")
        self.assertEqual(hdrs["x-inferplane-endpoint"], sim.url)
        self.assertEqual(hdrs["x-inferplane-pool"], "chat")
        for h in ("x-inferplane-reason", "x-inferplane-predicted-ttft-ms",
                  "x-inferplane-cached-tokens", "x-request-id"):
            self.assertIn(h, hdrs)
        events = sse_events(raw)
        self.assertEqual(events[-1], "[DONE]")
        usage = [json.loads(e)["usage"] for e in events[:-1] if json.loads(e).get("usage")]
        self.assertEqual(usage[-1]["completion_tokens"], 8)
        status, hdrs, got = http_json("POST", gw.api + "/v1/chat/completions", body, timeout=30)
        self.assertEqual(status, 200, got)
        self.assertEqual(got["object"], "chat.completion")
        self.assertEqual(hdrs["x-inferplane-worker"], "w0")
        status, hdrs, got = http_json("POST", gw.api + "/v1/completions",
                                      {"model": "sim-model", "prompt": "Once upon a time",
                                       "max_tokens": 4}, timeout=30)
        self.assertEqual(status, 200, got)
        self.assertEqual(got["object"], "text_completion")

        def recorded():
            s = scrape(ex.admin_url)
            return s if metric(s, "inferplane_requests_total", model="sim-model",
                               endpoint=sim.url, status_code="200") >= 3 else None
        s = wait_until(recorded, 5, what="3 records at the exporter")
        self.assertEqual(metric(s, "inferplane_request_ttft_seconds_count", model="sim-model"), 3)
        self.assertEqual(metric(s, "inferplane_completion_tokens_total", model="sim-model"),
                         8 + 8 + 4)
        # the sim counts the prompt the way the gateway does (same tokenizer and template)
        self.assertEqual(metric(s, "inferplane_prompt_tokens_cached_total", model="sim-model") +
                         metric(s, "inferplane_prompt_tokens_uncached_total", model="sim-model"),
                         usage[-1]["prompt_tokens"] * 2 + got["usage"]["prompt_tokens"])

    def test_sim_stream_is_real(self):
        st = checked_stack(self)
        sim, gw, ex = self.start_stack(st)
        body = {"model": "sim-model", "max_tokens": 100, "stream": True,
                "messages": [{"role": "user", "content": "Count slowly."}]}
        self.routed(gw, dict(body, max_tokens=1, stream=False))  # warm up the route
        t0 = time.monotonic()
        status, _, lines = stream_lines(gw.api + "/v1/chat/completions", body, timeout=60)
        self.assertEqual(status, 200)
        content = [t for t, l in lines if l != "[DONE]" and json.loads(l).get("choices") and
                   (json.loads(l)["choices"][0].get("delta") or {}).get("content")]
        self.assertGreater(len(content), 50)
        total = lines[-1][0] - t0
        self.assertGreater(total, 0.5, "the sim answered too fast to tell streaming apart")
        self.assertLess(content[0] - t0, total / 4,
                        "first token at %.3fs, end at %.3fs" % (content[0] - t0, total))


class TestGatewaySim(SimCases, GatewayCase):
    """gateway → fake decider → real sim: the proxy against the sim's real SSE."""

    def start_stack(self, st):
        try:
            binary("sim")
        except FileNotFoundError:
            self.skipTest("inferplane-sim is not built yet")
        sim = st.start_sim("w0")
        dec = FakeDecider(sim.url)
        self.addCleanup(dec.close)
        pull = zmq_endpoint()
        ex = st.start("exporter", ["--pull", pull])
        gw = self.start_gateway(st, decider=dec.endpoint, exporter=pull)
        return sim, gw, ex


class TestGatewayStack(SimCases, GatewayCase):
    """The real chain: policy → decider (+ aggregator, collector when built) → sim."""

    def start_stack(self, st):
        for name in ("policy", "decider", "sim"):
            try:
                binary(name)
            except FileNotFoundError:
                self.skipTest("inferplane-%s is not built yet" % name)
        sim = st.start_sim("w0")
        st.write("policy/pool.yaml", """apiVersion: inferplane.io/v1alpha1
kind: InferenceWorkerSet
metadata: {name: sims}
spec:
  model: sim-model
  blockSize: 16
  workers:
    - name: w0
      url: %s
      kvEvents: %s
      replay: %s
---
apiVersion: inferplane.io/v1alpha1
kind: InferencePool
metadata: {name: chat}
spec:
  model: sim-model
  targets:
    - workerSet: sims
""" % (sim.url, sim.kv, sim.replay))
        pol_pub, pol_rep = zmq_endpoint(), zmq_endpoint()
        st.start("policy", ["--dir", os.path.join(st.dir, "policy"), "--pub", pol_pub,
                            "--rep", pol_rep])
        agg_pull, agg_pub, agg_snap = zmq_endpoint(), zmq_endpoint(), zmq_endpoint()
        built = set()
        for name in ("aggregator", "collector"):
            try:
                binary(name)
                built.add(name)
            except FileNotFoundError:
                pass
        if "aggregator" in built:
            st.start("aggregator", ["--pull", agg_pull, "--pub", agg_pub,
                                    "--snapshot", agg_snap])
            if "collector" in built:
                st.start("collector", ["--aggregator", agg_pull, "--policy-sub", pol_pub,
                                       "--policy-req", pol_rep], ready=False)
        dec_ep = zmq_endpoint()
        st.start("decider", ["--listen", dec_ep, "--state-sub", agg_pub,
                             "--state-snapshot", agg_snap, "--policy-sub", pol_pub,
                             "--policy-req", pol_rep], ready=False)
        pull = zmq_endpoint()
        ex = st.start("exporter", ["--pull", pull])
        port = free_port()
        gw = st.start("gateway", ["--listen", "127.0.0.1:%d" % port, "--decider", dec_ep,
                                  "--exporter", pull, "--policy-sub", pol_pub,
                                  "--policy-req", pol_rep])  # ready: it has the policy
        gw.api = "http://127.0.0.1:%d" % port
        status, _, models = http_json("GET", gw.api + "/v1/models")
        self.assertEqual(status, 200)
        self.assertEqual([m["id"] for m in models["data"]], ["sim-model"])
        return sim, gw, ex


if __name__ == "__main__":
    unittest.main()
