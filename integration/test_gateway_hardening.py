"""The gateway against hostile clients, SIGTERM and hung workers (issue 20, defects 3, 5, 8, 11).

Real processes on loopback: simulated workers, the chain, and a gateway whose new settings are
given through the environment (INFERPLANE_<OPTION>), so that a gateway built before them starts
all the same and fails the assertions rather than its flags.

  3  connections: 1,100 idle connections from one client leave the gateway serving everyone
     else (a per-address limit closes the surplus at accept, established ones keep working);
     a global limit closes the newest; a request that trickles in (slowloris), a connection
     that sends nothing and a kept-alive one that stays idle are closed after their timeouts.
  5  SIGTERM drains: /readyz 503 at once, new connections refused, 16 streams in flight all
     finish; a request arriving meanwhile gets 503 shutting_down (Anthropic's shape on
     /v1/messages) and Connection: close; a stream longer than --drain-timeout-ms is cut with
     an error event naming the shutdown and a drain_timeout log line; a second SIGTERM stops
     waiting at once.
  8  a worker stopped mid-stream (SIGSTOP) ends the client's stream after
     --stream-idle-timeout-ms with an error event (OpenAI's, Anthropic's on /v1/messages),
     counted in inferplane_gateway_upstream_errors_total{kind="stream_idle"}.
  11 raw sockets: Content-Length with Transfer-Encoding, two Content-Lengths, a
     Transfer-Encoding other than chunked and HTTP/1.1 without Host get 400 (the framing ones
     close the connection); a chunked body past --max-body-bytes gets 413 while it is still
     being sent; a body that is not UTF-8 gets 400 invalid_utf8 in the API's error shape; none
     of them reaches a worker.

    cd integration && python3 -m unittest -v test_gateway_hardening
"""
import contextlib
import http.client as http_client
import json
import os
import resource
import select
import signal
import socket
import threading
import time
import unittest

from lib.cluster import policy_yaml
from lib.harness import Stack, http, http_json, wait_until
from test_exporter import metric, scrape, checked_stack

MODEL = "sim-model"
CHAT = {"model": MODEL, "messages": [{"role": "user", "content": "Hello there"}],
        "max_tokens": 3, "ignore_eos": True}


@contextlib.contextmanager
def _environ(env):
    """os.environ with `env` added while processes start (they copy it)."""
    saved = dict(os.environ)
    os.environ.update(env or {})
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _chain(stack, env=None, args=(), workers=1, time_scale="1"):
    """Simulated workers and the chain, the gateway with `env` and `args`; returns (gw, sims)
    once a request went through."""
    sims = [stack.start_sim("w%d" % i, extra=["--time-scale", time_scale, "--seed", str(i)])
            for i in range(workers)]
    stack.write("policy/p.yaml", policy_yaml(sims))
    with _environ(env):
        gw = stack.start_chain(os.path.join(stack.dir, "policy"), list(args))
    gw.port = int(gw.api.rsplit(":", 1)[1])
    wait_until(lambda: http_json("POST", gw.api + "/v1/chat/completions", CHAT)[0] == 200, 15,
               0.2, "the first request through the gateway")
    return gw, sims


def _connect(port, source="127.0.0.1", timeout=5.0):
    return socket.create_connection(("127.0.0.1", port), timeout=timeout,
                                    source_address=(source, 0))


def _readable(sock, timeout):
    """poll(2), not select(2): the idle-connection test holds descriptors past 1024."""
    p = select.poll()
    p.register(sock, select.POLLIN)
    return bool(p.poll(max(0.0, timeout) * 1000))


def _closed(sock, timeout):
    """Whether the peer closes (EOF or reset) within `timeout` seconds, reading what comes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _readable(sock, deadline - time.monotonic()):
            continue
        try:
            if not sock.recv(65536):
                return True
        except OSError:
            return True
    return False


def _closed_among(socks, want, timeout):
    """The sockets of `socks` whose peer closes within `timeout`, waiting until `want` have
    (or the time is up); one poll(2) over all of them."""
    p, by_fd, closed = select.poll(), {s.fileno(): s for s in socks}, []
    for fd in by_fd:
        p.register(fd, select.POLLIN)
    deadline = time.monotonic() + timeout
    while len(closed) < want and time.monotonic() < deadline:
        for fd, _ in p.poll(100):
            s = by_fd[fd]
            try:
                gone = not s.recv(65536)
            except OSError:
                gone = True
            if gone:
                closed.append(s)
                p.unregister(fd)
    for s in socks:  # and any that closed meanwhile
        if s not in closed and _closed(s, 0):
            closed.append(s)
    return closed


def _read_all(sock, timeout=10.0):
    """Everything until the peer closes; raises AssertionError when it does not in time."""
    out = b""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError("the connection stayed open; got %r" % out[:300])
        if not _readable(sock, left):
            continue
        try:
            data = sock.recv(65536)
        except ConnectionResetError:
            return out
        if not data:
            return out
        out += data


def _parse(raw):
    """(status, headers with lower-case names, body) of one HTTP/1.1 response with a
    Content-Length."""
    head, _, rest = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    n = int(headers.get("content-length", len(rest)))
    return status, headers, rest[:n]


def _read_response(sock, timeout=5.0):
    """One response with a Content-Length, the connection left open: (status, headers,
    body) as _parse."""
    sock.settimeout(timeout)
    raw = b""
    while b"\r\n\r\n" not in raw:
        data = sock.recv(65536)
        if not data:
            raise AssertionError("the connection closed; got %r" % raw[:300])
        raw += data
    status, headers, body = _parse(raw)
    while len(body) < int(headers.get("content-length", 0)):
        body += sock.recv(65536)
    return status, headers, body


def _request(method, path, body=b"", headers=(), version="HTTP/1.1", host=True):
    lines = ["%s %s %s" % (method, path, version)]
    if host:
        lines.append("Host: 127.0.0.1")
    lines += list(headers)
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def _stream(port, path, body, timeout=10.0, on_event=None):
    """POSTs a streamed request; returns (status, [event lines]) — "data: ..." and
    "event: ..." lines as str — once the stream ends. on_event(n) after the n-th data line."""
    c = http_client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        r = c.getresponse()
        lines, n = [], 0
        while True:
            line = r.readline()
            if not line:
                break
            line = line.decode("utf-8", "replace").rstrip("\r\n")
            if line.startswith("data:") or line.startswith("event:"):
                lines.append(line)
            if line.startswith("data:"):
                n += 1
                if on_event:
                    on_event(n)
        return r.status, lines
    finally:
        c.close()


def _datas(lines):
    return [json.loads(l[5:]) if l[5:].strip() != "[DONE]" else "[DONE]"
            for l in lines if l.startswith("data:")]


def _prompt_tokens(sims):
    return sum(metric(scrape(s.url), "vllm:prompt_tokens_total") for s in sims)


# ---- defect 3: connections ------------------------------------------------------------------

class TestConnections(unittest.TestCase):

    def test_idle_connections_from_one_client_leave_the_others_served(self):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft < 2500 and hard >= 2500:
            resource.setrlimit(resource.RLIMIT_NOFILE, (2500, hard))
        st = checked_stack(self)
        gw, _ = _chain(st)  # the defaults: 1024 connections per client address
        held = []
        self.addCleanup(lambda: [s.close() for s in held])
        for _ in range(1100):
            held.append(_connect(gw.port))
        closed = _closed_among(held, 76, 5.0)
        self.assertGreaterEqual(len(closed), 76)  # the surplus over 1024, closed at once
        self.assertLessEqual(len(closed), 80)
        # another client is served meanwhile
        c = http_client.HTTPConnection("127.0.0.1", gw.port, timeout=10,
                                       source_address=("127.0.0.2", 0))
        c.request("POST", "/v1/chat/completions", json.dumps(CHAT),
                  {"Content-Type": "application/json"})
        self.assertEqual(c.getresponse().status, 200)
        c.close()
        # and the idle connections that were let in still work
        alive = next(s for s in held if s not in closed)
        body = json.dumps(CHAT).encode()
        alive.sendall(_request("POST", "/v1/chat/completions", body,
                               ["Content-Type: application/json",
                                "Content-Length: %d" % len(body), "Connection: close"]))
        self.assertEqual(_parse(_read_all(alive))[0], 200)
        refused = metric(scrape(gw.admin_url), "inferplane_gateway_connections_refused_total",
                         reason="per_ip")
        self.assertGreaterEqual(refused, 76)

    def test_the_connection_limit_closes_the_newest(self):
        st = checked_stack(self)
        gw, _ = _chain(st, {"INFERPLANE_MAX_CONNECTIONS": "16",
                            "INFERPLANE_MAX_CONNECTIONS_PER_IP": "0"})
        held = [_connect(gw.port, "127.0.0.2") for _ in range(16)]
        self.addCleanup(lambda: [s.close() for s in held])
        for s in held:  # each served once, and kept alive
            s.sendall(_request("GET", "/v1/models"))
            self.assertEqual(_read_response(s)[0], 200)
        extra = _connect(gw.port, "127.0.0.3")
        self.assertTrue(_closed(extra, 2.0), "the 17th connection was not closed")
        extra.close()
        body = json.dumps(CHAT).encode()
        for s in held[:2]:  # the established ones are untouched
            s.sendall(_request("POST", "/v1/chat/completions", body,
                               ["Content-Type: application/json",
                                "Content-Length: %d" % len(body), "Connection: close"]))
            self.assertEqual(_parse(_read_all(s))[0], 200)
        self.assertGreaterEqual(metric(scrape(gw.admin_url),
                                       "inferplane_gateway_connections_refused_total",
                                       reason="max_connections"), 1)
        # room again: a new client is served
        wait_until(lambda: metric(scrape(gw.admin_url), "inferplane_gateway_connections") <= 14,
                   5, what="the two connections to close")
        c = http_client.HTTPConnection("127.0.0.1", gw.port, timeout=10,
                                       source_address=("127.0.0.3", 0))
        c.request("GET", "/v1/models")
        self.assertEqual(c.getresponse().status, 200)
        c.close()

    def test_slow_and_idle_connections_are_closed(self):
        st = checked_stack(self)
        gw, _ = _chain(st, {"INFERPLANE_REQUEST_READ_TIMEOUT_MS": "1000",
                            "INFERPLANE_IDLE_TIMEOUT_MS": "1500"})
        # slowloris: a header byte every 200 ms, never the end of the head
        s = _connect(gw.port)
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        t0 = time.monotonic()
        cut = None
        while time.monotonic() - t0 < 6 and cut is None:
            if _closed(s, 0.2):
                cut = time.monotonic() - t0
                break
            try:
                s.send(b"a")
            except OSError:
                cut = time.monotonic() - t0
        s.close()
        self.assertIsNotNone(cut, "a request trickling in was never cut")
        self.assertGreater(cut, 0.8)
        self.assertLess(cut, 3.0)
        # a connection that sends nothing
        s = _connect(gw.port)
        t0 = time.monotonic()
        self.assertTrue(_closed(s, 5.0), "an idle new connection was never closed")
        self.assertGreater(time.monotonic() - t0, 1.2)
        s.close()
        # a kept-alive connection after its response
        c = http_client.HTTPConnection("127.0.0.1", gw.port, timeout=10)
        c.request("GET", "/v1/models")
        r = c.getresponse()
        r.read()
        self.assertEqual(r.status, 200)
        t0 = time.monotonic()
        self.assertTrue(_closed(c.sock, 5.0), "an idle kept-alive connection was never closed")
        self.assertGreater(time.monotonic() - t0, 1.2)
        c.close()
        # a body that trickles in but arrives in time is served
        body = json.dumps(CHAT).encode()
        s = _connect(gw.port)
        s.sendall(_request("POST", "/v1/chat/completions", b"",
                           ["Content-Type: application/json", "Content-Length: %d" % len(body),
                            "Connection: close"]))
        for i in range(0, len(body), len(body) // 4 + 1):
            time.sleep(0.15)
            s.sendall(body[i:i + len(body) // 4 + 1])
        self.assertEqual(_parse(_read_all(s))[0], 200)
        s.close()
        m = scrape(gw.admin_url)
        self.assertGreaterEqual(metric(m, "inferplane_gateway_connection_timeouts_total",
                                       state="read"), 1)
        self.assertGreaterEqual(metric(m, "inferplane_gateway_connection_timeouts_total",
                                       state="idle"), 2)


# ---- defect 5: SIGTERM drains -----------------------------------------------------------------

class TestDrain(unittest.TestCase):

    def _long_stream(self, gw, max_tokens, box, started):
        def run():
            try:
                box["r"] = _stream(gw.port, "/v1/chat/completions",
                                   dict(CHAT, stream=True, max_tokens=max_tokens), 40,
                                   lambda n: n == 1 and started.release())
            except OSError as e:
                box["error"] = e
        t = threading.Thread(target=run)
        t.start()
        self.addCleanup(t.join, 30)
        return t

    def test_sigterm_lets_16_streams_finish(self):
        st = checked_stack(self)
        gw, _ = _chain(st, {"INFERPLANE_DRAIN_TIMEOUT_MS": "20000"})
        started = threading.Semaphore(0)
        boxes = [{} for _ in range(16)]
        threads = [self._long_stream(gw, 80, b, started) for b in boxes]
        for _ in range(16):
            self.assertTrue(started.acquire(timeout=15), "the 16 streams did not start")
        gw.signal(signal.SIGTERM)
        t0 = time.monotonic()
        # out of load balancing at once, and no new connection
        wait_until(lambda: http("GET", gw.admin_url + "/readyz", timeout=1)[0] == 503, 1.0,
                   0.02, "/readyz 503")

        def refused():
            try:
                _connect(gw.port, timeout=1).close()
                return False
            except ConnectionRefusedError:
                return True
        wait_until(refused, 2.0, 0.02, "new connections refused")
        for t in threads:
            t.join(30)
        for b in boxes:
            self.assertNotIn("error", b)
            status, lines = b["r"]
            self.assertEqual(status, 200)
            datas = _datas(lines)
            self.assertEqual(datas[-1], "[DONE]")
            self.assertFalse([d for d in datas if isinstance(d, dict) and "error" in d], lines)
            reasons = [c.get("finish_reason") for d in datas if isinstance(d, dict)
                       for c in d.get("choices", [])]
            self.assertIn("length", reasons)
        gw.proc.wait(10)
        self.assertEqual(gw.proc.returncode, 0)
        self.assertLess(time.monotonic() - t0, 15)
        self.assertIn("drained", gw.log())

    def test_a_stream_longer_than_the_drain_timeout_is_cut(self):
        st = checked_stack(self)
        gw, _ = _chain(st, {"INFERPLANE_DRAIN_TIMEOUT_MS": "1000"})
        started, box = threading.Semaphore(0), {}
        t = self._long_stream(gw, 600, box, started)  # about 20 s of tokens
        self.assertTrue(started.acquire(timeout=15))
        gw.signal(signal.SIGTERM)
        t0 = time.monotonic()
        t.join(10)
        took = time.monotonic() - t0
        self.assertGreater(took, 0.9)
        self.assertLess(took, 4.0)
        status, lines = box["r"]
        datas = _datas(lines)
        self.assertEqual(datas[-1], "[DONE]")
        err = datas[-2]["error"]
        self.assertEqual(err["code"], "shutting_down")
        self.assertIn("drain timeout", err["message"])
        gw.proc.wait(5)
        self.assertEqual(gw.proc.returncode, 0)
        log = gw.log()
        self.assertIn("drain_timeout in_flight=1", log)
        self.assertIn("stream_cut_at_shutdown", log)

    def test_a_second_sigterm_stops_at_once(self):
        st = checked_stack(self)
        gw, _ = _chain(st, {"INFERPLANE_DRAIN_TIMEOUT_MS": "20000"})
        started, box = threading.Semaphore(0), {}
        self._long_stream(gw, 600, box, started)
        self.assertTrue(started.acquire(timeout=15))
        gw.signal(signal.SIGTERM)
        time.sleep(0.5)
        self.assertTrue(gw.alive(), "the gateway did not wait for its stream")
        t0 = time.monotonic()
        gw.signal(signal.SIGTERM)
        gw.proc.wait(5)
        self.assertLess(time.monotonic() - t0, 1.5)
        self.assertIn("drain_interrupted", gw.log())

    def test_requests_arriving_while_draining_get_503(self):
        st = checked_stack(self)
        gw, sims = _chain(st, {"INFERPLANE_DRAIN_TIMEOUT_MS": "20000"})
        started, box = threading.Semaphore(0), {}
        self._long_stream(gw, 600, box, started)  # keeps the gateway draining
        self.assertTrue(started.acquire(timeout=15))
        chat, msgs = json.dumps(CHAT).encode(), json.dumps(
            {"model": MODEL, "max_tokens": 3, "messages": [{"role": "user", "content": "hi"}]}
        ).encode()
        # their request lines are in before the signal, their heads complete after it
        late = []
        for path, body in (("/v1/chat/completions", chat), ("/v1/messages", msgs)):
            s = _connect(gw.port)
            s.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\n" % path.encode())
            late.append((s, body))
        time.sleep(0.2)
        before = _prompt_tokens(sims)
        gw.signal(signal.SIGTERM)
        wait_until(lambda: http("GET", gw.admin_url + "/readyz", timeout=1)[0] == 503, 1.0,
                   0.02, "/readyz 503")
        answers = []
        for s, body in late:
            s.sendall(b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                      % (len(body), body))
            answers.append(_parse(_read_all(s, 5)))  # and the connection closes
            s.close()
        (st1, h1, b1), (st2, h2, b2) = answers
        self.assertEqual((st1, st2), (503, 503))
        self.assertEqual((h1.get("connection"), h2.get("connection")), ("close", "close"))
        self.assertEqual(json.loads(b1)["error"]["code"], "shutting_down")
        anthropic = json.loads(b2)
        self.assertEqual(anthropic["type"], "error")
        self.assertIn("shutting down", anthropic["error"]["message"])
        self.assertEqual(_prompt_tokens(sims), before)
        gw.signal(signal.SIGTERM)  # done: stop waiting for the long stream


# ---- defect 8: a hung worker ------------------------------------------------------------------

class TestStreamIdleTimeout(unittest.TestCase):

    def _hang_mid_stream(self, path, body):
        st = checked_stack(self)
        gw, (sim,) = _chain(st, {"INFERPLANE_STREAM_IDLE_TIMEOUT_MS": "1000"})
        stopped = {}

        def on_event(n):
            if n == 5 and not stopped:
                os.kill(sim.proc.pid, signal.SIGSTOP)
                self.addCleanup(os.kill, sim.proc.pid, signal.SIGCONT)
                stopped["at"] = time.monotonic()
        status, lines = _stream(gw.port, path, body, timeout=8.0, on_event=on_event)
        took = time.monotonic() - stopped["at"]
        self.assertEqual(status, 200)
        self.assertGreater(took, 0.9)
        self.assertLess(took, 4.0)
        idle = metric(scrape(gw.admin_url), "inferplane_gateway_upstream_errors_total",
                      kind="stream_idle")
        self.assertEqual(idle, 1)
        return lines

    def test_openai_stream(self):
        lines = self._hang_mid_stream("/v1/chat/completions",
                                      dict(CHAT, stream=True, max_tokens=300))
        datas = _datas(lines)
        self.assertEqual(datas[-1], "[DONE]")
        err = datas[-2]["error"]
        self.assertEqual(err["code"], "stream_idle_timeout")
        self.assertEqual(err["type"], "server_error")
        self.assertIn("`w0`", err["message"])
        self.assertIn("1000 ms", err["message"])

    def test_anthropic_stream(self):
        lines = self._hang_mid_stream("/v1/messages", {
            "model": MODEL, "max_tokens": 300, "stream": True,
            "messages": [{"role": "user", "content": "Hello there"}]})
        self.assertEqual(lines[-2], "event: error")
        err = json.loads(lines[-1][5:])
        self.assertEqual(err["type"], "error")
        self.assertIn("1000 ms", err["error"]["message"])


# ---- defect 11: strict HTTP parsing -----------------------------------------------------------

class TestParsing(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.st = Stack()
        try:
            cls.gw, cls.sims = _chain(cls.st, args=["--max-body-bytes", "65536"])
        except BaseException:
            cls.st.stop_all()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.st.stop_all()

    def _send(self, data, expect_close=True):
        s = _connect(self.gw.port)
        try:
            s.sendall(data)
            return _parse(_read_all(s, 5)) if expect_close else _read_response(s)
        finally:
            s.close()

    def _assert_refused(self, data, status, close=True):
        before = _prompt_tokens(self.sims)
        got, headers, body = self._send(data, expect_close=close)
        self.assertEqual(got, status, body)
        if close:
            self.assertEqual(headers.get("connection"), "close")
        err = json.loads(body)["error"]
        self.assertEqual(err["type"], "invalid_request_error")
        self.assertTrue(err["message"])
        self.assertEqual(_prompt_tokens(self.sims), before)  # no worker saw it
        return err

    def test_content_length_with_transfer_encoding(self):
        body = json.dumps(CHAT).encode()
        err = self._assert_refused(_request(
            "POST", "/v1/chat/completions",
            b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body),
            ["Content-Type: application/json", "Content-Length: %d" % len(body),
             "Transfer-Encoding: chunked"]), 400)
        self.assertIn("Transfer-Encoding", err["message"])

    def test_two_content_lengths(self):
        body = json.dumps(CHAT).encode()
        self._assert_refused(_request(
            "POST", "/v1/chat/completions", body,
            ["Content-Type: application/json", "Content-Length: %d" % len(body),
             "Content-Length: 5"]), 400)

    def test_transfer_encoding_other_than_chunked(self):
        self._assert_refused(_request(
            "POST", "/v1/chat/completions", b"whatever",
            ["Content-Type: application/json", "Transfer-Encoding: gzip, chunked"]), 400)

    def test_http11_needs_host(self):
        body = json.dumps(CHAT).encode()
        headers = ["Content-Type: application/json", "Content-Length: %d" % len(body),
                   "Connection: close"]
        err = self._assert_refused(_request("POST", "/v1/chat/completions", body, headers,
                                            host=False), 400)
        self.assertIn("Host", err["message"])
        status, _, _ = self._send(_request("POST", "/v1/chat/completions", body, headers,
                                           version="HTTP/1.0", host=False))
        self.assertEqual(status, 200)  # HTTP/1.0 has no Host requirement

    def test_oversized_chunked_body_gets_413_while_it_is_sent(self):
        for first_chunk in (None, b"10000000\r\n"):  # many chunks; one announced 256 MiB chunk
            s = _connect(self.gw.port)
            s.sendall(_request("POST", "/v1/chat/completions", b"",
                               ["Content-Type: application/json",
                                "Transfer-Encoding: chunked"]))
            if first_chunk:
                s.sendall(first_chunk)
            piece = b"x" * 16384
            sent, raw, t0 = 0, b"", time.monotonic()
            try:
                while b"\r\n\r\n" not in raw and time.monotonic() - t0 < 5:
                    s.sendall(piece if first_chunk else b"4000\r\n%s\r\n" % piece)
                    sent += len(piece)
                    while _readable(s, 0):
                        data = s.recv(65536)
                        if not data:
                            break
                        raw += data
                    if sent >= 8 << 20:
                        break
            except OSError:
                pass
            raw += _read_all(s, 5)
            s.close()
            status, headers, body = _parse(raw)
            self.assertEqual(status, 413, raw[:200])
            self.assertEqual(headers.get("connection"), "close")
            self.assertEqual(json.loads(body)["error"]["code"], 413)
            self.assertLess(sent, 4 << 20)  # answered long before the client was done

    def test_invalid_utf8_is_refused_in_the_apis_shape(self):
        before = _prompt_tokens(self.sims)
        bad = json.dumps(dict(CHAT, messages=[{"role": "user", "content": "XX"}])).encode()
        bad = bad.replace(b"XX", b"caf\xc3 \xff")
        for path, payload in (("/v1/chat/completions", bad),
                              ("/v1/completions", json.dumps(
                                  {"model": MODEL, "prompt": "XX", "max_tokens": 3}).encode()
                               .replace(b"XX", b"\xed\xa0\x80"))):  # a UTF-16 surrogate
            status, _, body = http("POST", self.gw.api + path, payload,
                                   {"Content-Type": "application/json"})
            self.assertEqual(status, 400, body)
            err = json.loads(body)["error"]
            self.assertEqual((err["type"], err["code"]), ("invalid_request_error", "invalid_utf8"))
            self.assertIn("UTF-8", err["message"])
        msg = json.dumps({"model": MODEL, "max_tokens": 3,
                          "messages": [{"role": "user", "content": "XX"}]}).encode()
        for path in ("/v1/messages", "/v1/messages/count_tokens"):
            status, _, body = http("POST", self.gw.api + path, msg.replace(b"XX", b"\xc0\xaf"),
                                   {"Content-Type": "application/json"})
            self.assertEqual(status, 400, body)
            got = json.loads(body)
            self.assertEqual(got["type"], "error")
            self.assertEqual(got["error"]["type"], "invalid_request_error")
            self.assertIn("UTF-8", got["error"]["message"])
        self.assertEqual(_prompt_tokens(self.sims), before)
        status, _, _ = http("POST", self.gw.api + "/v1/chat/completions",
                            json.dumps(dict(CHAT, messages=[{"role": "user",
                                                             "content": "caf\u00e9"}])),
                            {"Content-Type": "application/json"})
        self.assertEqual(status, 200)  # valid UTF-8 passes


if __name__ == "__main__":
    unittest.main()
