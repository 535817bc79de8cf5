"""inferplane-exporter: RECORDs pushed over ZeroMQ become Prometheus series on /metrics.

Python has no ZeroMQ here, so this file also carries a minimal ZMTP 3.0 (NULL mechanism)
peer and a minimal msgpack codec, enough to speak our wire protocol (proto/ipl_proto.h) from
tests: `Zmtp` (a PUSH or DEALER client), `ZmtpRouter` (a threaded ROUTER-like server that
answers each message with a handler) and `record()` (an encoded RECORD). test_gateway.py
imports them.
"""
import re
import socket
import struct
import threading
import time
import unittest

from lib.harness import Stack, free_port, http, wait_until, zmq_endpoint, zmq_poke

# ---- msgpack (the subset our protocol uses) -----------------------------------------------


def mp_pack(obj):
    if obj is None:
        return b"\xc0"
    if obj is True:
        return b"\xc3"
    if obj is False:
        return b"\xc2"
    if isinstance(obj, int):
        if 0 <= obj < 0x80:
            return bytes([obj])
        if 0 <= obj <= 0xFF:
            return b"\xcc" + bytes([obj])
        if 0 <= obj <= 0xFFFF:
            return b"\xcd" + struct.pack(">H", obj)
        if 0 <= obj <= 0xFFFFFFFF:
            return b"\xce" + struct.pack(">I", obj)
        if 0 <= obj < 1 << 64:
            return b"\xcf" + struct.pack(">Q", obj)
        return b"\xd3" + struct.pack(">q", obj)
    if isinstance(obj, float):
        return b"\xcb" + struct.pack(">d", obj)
    if isinstance(obj, str):
        obj = obj.encode()
        n = len(obj)
        if n < 32:
            return bytes([0xA0 | n]) + obj
        if n <= 0xFF:
            return b"\xd9" + bytes([n]) + obj
        if n <= 0xFFFF:
            return b"\xda" + struct.pack(">H", n) + obj
        return b"\xdb" + struct.pack(">I", n) + obj
    if isinstance(obj, (bytes, bytearray)):
        return b"\xc6" + struct.pack(">I", len(obj)) + bytes(obj)
    if isinstance(obj, (list, tuple)):
        n = len(obj)
        head = bytes([0x90 | n]) if n < 16 else (b"\xdc" + struct.pack(">H", n) if n <= 0xFFFF
                                                 else b"\xdd" + struct.pack(">I", n))
        return head + b"".join(mp_pack(x) for x in obj)
    raise TypeError("cannot pack %r" % (obj,))


def mp_unpack(data):
    """Decodes one value; returns it (maps become dicts). Raises ValueError on bad input."""
    value, pos = _mp_read(data, 0)
    if pos != len(data):
        raise ValueError("trailing bytes")
    return value


def _mp_read(d, i):
    if i >= len(d):
        raise ValueError("truncated")
    b = d[i]
    i += 1
    if b < 0x80:
        return b, i
    if b >= 0xE0:
        return b - 0x100, i
    if 0x80 <= b <= 0x8F:
        return _mp_map(d, i, b & 0x0F)
    if 0x90 <= b <= 0x9F:
        return _mp_array(d, i, b & 0x0F)
    if 0xA0 <= b <= 0xBF:
        n = b & 0x1F
        return d[i:i + n].decode("utf-8", "replace"), i + n
    simple = {0xC0: None, 0xC2: False, 0xC3: True}
    if b in simple:
        return simple[b], i
    fixed = {0xCC: ">B", 0xCD: ">H", 0xCE: ">I", 0xCF: ">Q", 0xD0: ">b", 0xD1: ">h",
             0xD2: ">i", 0xD3: ">q", 0xCA: ">f", 0xCB: ">d"}
    if b in fixed:
        size = struct.calcsize(fixed[b])
        if i + size > len(d):
            raise ValueError("truncated")
        return struct.unpack(fixed[b], d[i:i + size])[0], i + size
    lens = {0xD9: (">B", "s"), 0xDA: (">H", "s"), 0xDB: (">I", "s"), 0xC4: (">B", "b"),
            0xC5: (">H", "b"), 0xC6: (">I", "b"), 0xDC: (">H", "a"), 0xDD: (">I", "a"),
            0xDE: (">H", "m"), 0xDF: (">I", "m")}
    if b in lens:
        fmt, kind = lens[b]
        size = struct.calcsize(fmt)
        n = struct.unpack(fmt, d[i:i + size])[0]
        i += size
        if kind == "s":
            return d[i:i + n].decode("utf-8", "replace"), i + n
        if kind == "b":
            return bytes(d[i:i + n]), i + n
        if kind == "a":
            return _mp_array(d, i, n)
        return _mp_map(d, i, n)
    raise ValueError("unsupported msgpack byte 0x%02x" % b)


def _mp_array(d, i, n):
    out = []
    for _ in range(n):
        v, i = _mp_read(d, i)
        out.append(v)
    return out, i


def _mp_map(d, i, n):
    out = {}
    for _ in range(n):
        k, i = _mp_read(d, i)
        v, i = _mp_read(d, i)
        out[k] = v
    return out, i


# ---- our messages (proto/ipl_proto.h) -----------------------------------------------------

PROTO_VERSION = 1
MSG_POLICY, MSG_POLICY_REQ, MSG_ROUTE_REQ, MSG_ROUTE_REP, MSG_RECORD = 5, 6, 7, 8, 9
RECORD_FIELDS = ["request_id", "model", "tenant", "pool", "worker", "endpoint", "api",
                 "status_code", "reason", "stream", "ttft_s", "e2e_s", "itl_s", "prompt_tokens",
                 "cached_tokens", "completion_tokens", "predicted_ttft_s"]
ROUTE_REQ_FIELDS = ["req_id", "model", "tenant", "prompt_tokens", "block_size", "hashes",
                    "strategy"]
ROUTE_REP_FIELDS = ["req_id", "status", "reason", "detail", "worker", "url", "pool", "model",
                    "predicted_ttft_s", "cached_tokens", "state_seq", "candidates"]
ROUTE_OK, ROUTE_NO_POOL, ROUTE_NO_WORKER, ROUTE_OVERLOADED, ROUTE_BAD_REQUEST, \
    ROUTE_NOT_READY = range(6)


def encode(msg_type, fields, values):
    """Envelope [version, type, field...] with `values` (a dict) in `fields` order."""
    return mp_pack([PROTO_VERSION, msg_type] + [values[f] for f in fields])


def decode(frame):
    """Returns (type, dict of fields) for the messages tests read, else (type, list)."""
    v = mp_unpack(frame)
    if not isinstance(v, list) or len(v) < 2:
        raise ValueError("not an envelope")
    names = {MSG_ROUTE_REQ: ROUTE_REQ_FIELDS, MSG_RECORD: RECORD_FIELDS,
             MSG_ROUTE_REP: ROUTE_REP_FIELDS}.get(v[1])
    if names is None:
        return v[1], v[2:]
    return v[1], dict(zip(names, v[2:]))


def record(**kw):
    """An encoded RECORD with sensible defaults."""
    values = {"request_id": "r1", "model": "m", "tenant": "t", "pool": "p", "worker": "w0",
              "endpoint": "http://w0", "api": "chat", "status_code": 200, "reason": "cache_hit",
              "stream": True, "ttft_s": 0.3, "e2e_s": 2.0, "itl_s": 0.02, "prompt_tokens": 100,
              "cached_tokens": 64, "completion_tokens": 10, "predicted_ttft_s": 0.25}
    values.update(kw)
    return encode(MSG_RECORD, RECORD_FIELDS, values)


def route_rep(req_id, status=ROUTE_OK, **kw):
    values = {"req_id": req_id, "status": status, "reason": "test", "detail": "", "worker": "",
              "url": "", "pool": "", "model": "", "predicted_ttft_s": 0.0, "cached_tokens": 0,
              "state_seq": 0, "candidates": []}
    values.update(kw)
    return encode(MSG_ROUTE_REP, ROUTE_REP_FIELDS, values)


def policy(version, pools, workers=()):
    """POLICY: pools [(name, model, strategy)], workers [(name, pool, model, url, kv, replay,
    metrics_url, block_size)]."""
    return mp_pack([PROTO_VERSION, MSG_POLICY, version, "test",
                    [list(p) for p in pools], [list(w) for w in workers]])


# ---- ZMTP 3.0, NULL mechanism -------------------------------------------------------------

def _greeting():
    return (b"\xff" + b"\x00" * 8 + b"\x7f" + b"\x03\x00" + b"NULL".ljust(20, b"\x00") +
            b"\x00" + b"\x00" * 31)


def _frame(body, more=False, command=False):
    flags = (1 if more else 0) | (4 if command else 0)
    if len(body) > 255:
        return bytes([flags | 2]) + struct.pack(">Q", len(body)) + body
    return bytes([flags, len(body)]) + body


def _ready(socket_type):
    name = b"Socket-Type"
    value = socket_type.encode()
    return _frame(b"\x05READY" + bytes([len(name)]) + name + struct.pack(">I", len(value)) +
                  value, command=True)


def _recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("peer closed")
        buf += chunk
    return buf


def _recv_frame(sock):
    """Returns (flags, body)."""
    flags = _recv_exact(sock, 1)[0]
    if flags & 2:
        size = struct.unpack(">Q", _recv_exact(sock, 8))[0]
    else:
        size = _recv_exact(sock, 1)[0]
    return flags, _recv_exact(sock, size)


def _handshake(sock, socket_type):
    sock.sendall(_greeting())
    _recv_exact(sock, 64)
    sock.sendall(_ready(socket_type))
    while True:  # the peer's READY (skip any other command)
        flags, body = _recv_frame(sock)
        if flags & 4 and body[1:6] == b"READY":
            return


def _recv_message(sock):
    frames = []
    while True:
        flags, body = _recv_frame(sock)
        if flags & 4:
            continue  # a command (PING...) between messages
        frames.append(body)
        if not flags & 1:
            return frames


def _send_message(sock, frames):
    sock.sendall(b"".join(_frame(f, more=i + 1 < len(frames)) for i, f in enumerate(frames)))


def _host_port(endpoint):
    m = re.match(r"tcp://([^:]+):(\d+)$", endpoint)
    if not m:
        raise ValueError("not a tcp endpoint: %s" % endpoint)
    return m.group(1), int(m.group(2))


class Zmtp:
    """A ZMTP client connected to `endpoint` as `socket_type` (PUSH, DEALER...)."""

    def __init__(self, endpoint, socket_type="PUSH", timeout=5.0):
        self.sock = socket.create_connection(_host_port(endpoint), timeout=timeout)
        _handshake(self.sock, socket_type)

    def send(self, *frames):
        _send_message(self.sock, list(frames))

    def recv(self):
        return _recv_message(self.sock)

    def close(self):
        self.sock.close()


class ZmtpRouter:
    """A ZMTP server on a free loopback port that answers every message. `handler(frames)`
    returns a list of reply messages (each a list of frames), or None for no reply. Runs until
    close()."""

    def __init__(self, handler, socket_type="ROUTER"):
        self.handler = handler
        self.socket_type = socket_type
        self.port = free_port()
        self.endpoint = "tcp://127.0.0.1:%d" % self.port
        self.received = []
        self.lock = threading.Lock()
        self._srv = socket.socket()
        self._srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._srv.bind(("127.0.0.1", self.port))
        self._srv.listen(64)
        self._srv.settimeout(0.2)
        self._stop = False
        self._conns = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self):
        while not self._stop:
            try:
                conn, _ = self._srv.accept()
            except OSError:
                continue
            self._conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        try:
            conn.settimeout(None)
            _handshake(conn, self.socket_type)
            while not self._stop:
                frames = _recv_message(conn)
                with self.lock:
                    self.received.append(frames)
                for reply in self.handler(frames) or []:
                    _send_message(conn, reply)
        except (OSError, ConnectionError, ValueError):
            pass
        finally:
            conn.close()

    def close(self):
        self._stop = True
        self._srv.close()
        for c in self._conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            c.close()
        self._thread.join(2)


# ---- Prometheus text ----------------------------------------------------------------------

_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)$')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_metrics(text):
    """Returns a list of (name, {label: raw value}, float)."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if m:
            out.append((m.group(1), dict(_LABEL.findall(m.group(2) or "")), float(m.group(3))))
    return out


def metric(samples, name, **labels):
    """Sum of the samples of `name` whose labels include `labels` (values as raw text)."""
    return sum(v for n, ls, v in samples
               if n == name and all(ls.get(k) == str(val) for k, val in labels.items()))


def scrape(url):
    status, _, body = http("GET", url + "/metrics")
    if status != 200:
        raise AssertionError("GET %s/metrics: %d" % (url, status))
    return parse_metrics(body.decode())


# ---- tests --------------------------------------------------------------------------------

SANITIZER_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:")


def checked_stack(test):
    """A Stack whose processes' logs are checked for sanitizer reports after they stopped
    (the check is registered first, so it runs after the Stack's own cleanup)."""
    box = []

    def check():
        for p in box[0].procs:
            log = p.log()
            for mark in SANITIZER_MARKS:
                if mark in log:
                    raise AssertionError("%s reported %r:\n%s" % (p.name, mark, log[-6000:]))
    test.addCleanup(check)
    box.append(Stack(test))
    return box[0]


class TestExporter(unittest.TestCase):

    def start(self, st):
        pull = zmq_endpoint()
        ex = st.start("exporter", ["--pull", pull])
        ex.pull = pull
        return ex

    def test_records_become_series(self):
        st = checked_stack(self)
        ex = self.start(st)
        c = Zmtp(ex.pull, "PUSH")
        c.send(record())
        c.send(record(request_id="r2", ttft_s=0.05, cached_tokens=0, predicted_ttft_s=0.15))
        c.send(record(request_id="r3", status_code=503, reason="no_worker", ttft_s=0.0))
        c.send(record(model='we"ird\\name', tenant="", endpoint="http://w1"))
        labels = dict(model="m", tenant="t", pool="p", endpoint="http://w0")

        def arrived():
            s = scrape(ex.admin_url)
            return s if metric(s, "inferplane_requests_total", **labels) == 3 else None
        s = wait_until(arrived, 5, what="3 records in /metrics")
        c.close()
        self.assertEqual(metric(s, "inferplane_requests_total", status_code="200", **labels), 2)
        self.assertEqual(metric(s, "inferplane_requests_total", status_code="503", **labels), 1)
        self.assertEqual(metric(s, "inferplane_request_ttft_seconds_count", **labels), 2)
        self.assertAlmostEqual(metric(s, "inferplane_request_ttft_seconds_sum", **labels), 0.35)
        # vLLM's TTFT buckets: 0.05 is in le=0.06, both are in le=0.5
        self.assertEqual(metric(s, "inferplane_request_ttft_seconds_bucket", le="0.06",
                                **labels), 1)
        self.assertEqual(metric(s, "inferplane_request_ttft_seconds_bucket", le="0.5",
                                **labels), 2)
        self.assertEqual(metric(s, "inferplane_request_ttft_seconds_bucket", le="+Inf",
                                **labels), 2)
        self.assertEqual(metric(s, "inferplane_request_e2e_seconds_count", **labels), 2)
        self.assertEqual(metric(s, "inferplane_request_itl_seconds_count", **labels), 2)
        self.assertEqual(metric(s, "inferplane_prompt_tokens_cached_total", **labels), 64)
        self.assertEqual(metric(s, "inferplane_prompt_tokens_uncached_total", **labels), 136)
        self.assertEqual(metric(s, "inferplane_completion_tokens_total", **labels), 20)
        self.assertEqual(metric(s, "inferplane_ttft_prediction_error_seconds_count", **labels), 2)
        self.assertAlmostEqual(metric(s, "inferplane_ttft_prediction_error_seconds_sum",
                                      **labels), 0.15)
        # label values from the wire are escaped
        self.assertEqual(metric(s, "inferplane_requests_total", model='we\\"ird\\\\name',
                                tenant="", endpoint="http://w1"), 1)

    def test_malformed_frames_are_counted_and_dropped(self):
        st = checked_stack(self)
        ex = self.start(st)
        c = Zmtp(ex.pull, "PUSH")
        good = record()
        for cut in (0, 1, 5, len(good) // 2, len(good) - 1):
            c.send(good[:cut])                       # truncated
        c.send(good + b"\x00")                       # trailing bytes
        c.send(b"\xc1" * 10)                         # not msgpack
        c.send(mp_pack([99, 9]))                     # unknown version
        c.send(mp_pack([1, 3, 0]))                   # a SNAPSHOT_REQ: not for the exporter
        c.send(good, good)                           # multipart
        c.send(good)                                 # and a good one still works

        def settled():
            s = scrape(ex.admin_url)
            return s if metric(s, "inferplane_requests_total") == 1 and \
                metric(s, "inferplane_frames_dropped_total") == 10 else None
        s = wait_until(settled, 5, what="10 drops and 1 record")
        self.assertEqual(metric(s, "inferplane_frames_dropped_total", reason="multipart"), 1)
        self.assertEqual(metric(s, "inferplane_frames_dropped_total",
                                reason="unexpected_type"), 1)
        self.assertGreaterEqual(metric(s, "inferplane_frames_dropped_total",
                                       reason="truncated"), 4)
        c.close()
        # random frames from the project's poke tool, and raw bytes on the TCP port
        try:
            if zmq_poke(ex.pull, "push", count=200) == 0:  # (the tool itself may be unwell)
                wait_until(lambda: metric(scrape(ex.admin_url),
                                          "inferplane_frames_dropped_total") >= 10 + 150, 5,
                           what="the poked frames to be counted")
            zmq_poke(ex.pull, "raw", count=50)
        except FileNotFoundError:
            pass  # inferplanectl not built: the frames above already cover the decoder
        with socket.create_connection(("127.0.0.1", int(ex.pull.rsplit(":", 1)[1]))) as raw:
            raw.sendall(bytes(range(256)) * 8)
        # (PULL queues fairly between connections: this record may overtake the last poked
        # frames, so wait for it by its label; poke never sends a frame that decodes, so none
        # of them is counted as a request)
        c = Zmtp(ex.pull, "PUSH")
        c.send(record(request_id="after", model="after-the-junk"))
        wait_until(lambda: metric(scrape(ex.admin_url), "inferplane_requests_total",
                                  model="after-the-junk") == 1, 5,
                   what="a record after the junk")
        self.assertEqual(metric(scrape(ex.admin_url), "inferplane_requests_total"), 2)
        c.close()
        self.assertTrue(ex.alive())
        self.assertLess(ex.stop(), 2.0)

    def test_admin_endpoints_and_sigterm(self):
        st = checked_stack(self)
        ex = self.start(st)
        for path in ("/healthz", "/readyz", "/version", "/metrics"):
            status, _, body = http("GET", ex.admin_url + path)
            self.assertEqual(status, 200, path)
        status, _, body = http("GET", ex.admin_url + "/version")
        self.assertIn(b"exporter", body)
        s = scrape(ex.admin_url)
        self.assertEqual(metric(s, "inferplane_build_info", service="exporter"), 1)
        self.assertLess(ex.stop(), 2.0)
        self.assertEqual(ex.proc.returncode, 0)

    def test_bad_flags_exit_2(self):
        st = checked_stack(self)
        busy = zmq_endpoint()
        a = st.start("exporter", ["--pull", busy])
        b = st.start("exporter", ["--pull", busy], ready=False)  # port taken
        self.assertEqual(b.proc.wait(5), 2)
        self.assertIn("--pull", b.log())
        c = st.start("exporter", ["--pull", zmq_endpoint(), "--max-label-sets", "0"], ready=False)
        self.assertEqual(c.proc.wait(5), 2)
        self.assertTrue(a.alive())


if __name__ == "__main__":
    unittest.main()
