"""The decider, black-box: policy + aggregator + decider on loopback, with state fed by a test
collector (a ZeroMQ PUSH speaking ZMTP from plain Python, see Zmtp below) instead of real
workers, so that every figure of a decision is known in advance.

    cd integration && python3 -m unittest -v test_decider
"""
import json
import os
import socket
import struct
import subprocess
import time
import unittest

from lib.harness import (Stack, binary, free_port, http, http_json, wait_until, zmq_endpoint,
                         zmq_poke)

MODEL = "sim-model"
BLOCK = 16

# ---- a minimal msgpack and ZMTP 3.0 (NULL mechanism) for talking to our sockets ---------------


def mp_pack(v):
    """msgpack of None, bool, int, float, str, bytes, list (what proto/ipl_proto.h uses)."""
    if v is None:
        return b"\xc0"
    if v is True:
        return b"\xc3"
    if v is False:
        return b"\xc2"
    if isinstance(v, int):
        if 0 <= v < 128:
            return bytes([v])
        if 0 <= v < 2 ** 64:
            return b"\xcf" + struct.pack(">Q", v)
        if -32 <= v < 0:
            return struct.pack(">b", v)
        return b"\xd3" + struct.pack(">q", v)
    if isinstance(v, float):
        return b"\xcb" + struct.pack(">d", v)
    if isinstance(v, str):
        b = v.encode()
        return (bytes([0xa0 | len(b)]) if len(b) < 32 else b"\xdb" + struct.pack(">I", len(b))) + b
    if isinstance(v, bytes):
        return b"\xc6" + struct.pack(">I", len(v)) + v
    if isinstance(v, (list, tuple)):
        head = bytes([0x90 | len(v)]) if len(v) < 16 else b"\xdd" + struct.pack(">I", len(v))
        return head + b"".join(mp_pack(x) for x in v)
    raise TypeError(type(v))


def mp_unpack(b, i=0):
    """Decodes one value at b[i:]; returns (value, next index). Enough for our messages."""
    t = b[i]
    if t <= 0x7f:
        return t, i + 1
    if t >= 0xe0:
        return t - 256, i + 1
    if 0x90 <= t <= 0x9f or t in (0xdc, 0xdd):
        if t <= 0x9f:
            n, i = t & 0x0f, i + 1
        elif t == 0xdc:
            n, i = struct.unpack(">H", b[i + 1:i + 3])[0], i + 3
        else:
            n, i = struct.unpack(">I", b[i + 1:i + 5])[0], i + 5
        out = []
        for _ in range(n):
            x, i = mp_unpack(b, i)
            out.append(x)
        return out, i
    if 0xa0 <= t <= 0xbf or t in (0xd9, 0xda, 0xdb):
        if t <= 0xbf:
            n, i = t & 0x1f, i + 1
        else:
            w = {0xd9: 1, 0xda: 2, 0xdb: 4}[t]
            n, i = int.from_bytes(b[i + 1:i + 1 + w], "big"), i + 1 + w
        return b[i:i + n].decode(), i + n
    fixed = {0xc0: (None, 1), 0xc2: (False, 1), 0xc3: (True, 1)}
    if t in fixed:
        return fixed[t][0], i + fixed[t][1]
    ints = {0xcc: ">B", 0xcd: ">H", 0xce: ">I", 0xcf: ">Q", 0xd0: ">b", 0xd1: ">h", 0xd2: ">i",
            0xd3: ">q", 0xca: ">f", 0xcb: ">d"}
    if t in ints:
        n = struct.calcsize(ints[t])
        return struct.unpack(ints[t], b[i + 1:i + 1 + n])[0], i + 1 + n
    raise ValueError("msgpack type 0x%02x not handled" % t)


class Zmtp:
    """One ZMTP 3.0 connection (NULL security) to a libzmq socket on tcp://host:port.
    socket_type: PUSH, DEALER or SUB (SUB subscribes to everything)."""

    def __init__(self, endpoint, socket_type, timeout=5.0):
        host, port = endpoint[len("tcp://"):].rsplit(":", 1)
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.s = socket.create_connection((host, int(port)), timeout=timeout)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        greeting = b"\xff" + b"\x00" * 8 + b"\x7f" + bytes([3, 0]) + b"NULL".ljust(20, b"\x00")
        self.s.sendall(greeting + b"\x00" + b"\x00" * 31)
        self._read(64)
        prop = b"\x0bSocket-Type" + struct.pack(">I", len(socket_type)) + socket_type.encode()
        self._send_frame(b"\x05READY" + prop, command=True)
        flags, _ = self._recv_frame()  # the peer's READY
        assert flags & 0x04, "expected the peer's READY command"
        if socket_type == "SUB":
            self.send([b"\x01"])  # ZMTP 3.0 subscription message: subscribe to everything

    def _read(self, n):
        out = b""
        while len(out) < n:
            chunk = self.s.recv(n - len(out))
            if not chunk:
                raise ConnectionError("peer closed")
            out += chunk
        return out

    def _send_frame(self, body, more=False, command=False):
        flags = (0x01 if more else 0) | (0x04 if command else 0)
        if len(body) < 256:
            self.s.sendall(bytes([flags, len(body)]) + body)
        else:
            self.s.sendall(bytes([flags | 0x02]) + struct.pack(">Q", len(body)) + body)

    def _recv_frame(self):
        flags = self._read(1)[0]
        size = struct.unpack(">Q", self._read(8))[0] if flags & 0x02 else self._read(1)[0]
        return flags, self._read(size)

    def send(self, frames):
        for k, f in enumerate(frames):
            self._send_frame(f, more=k < len(frames) - 1)

    def recv(self, timeout=5.0):
        """The next message (list of frames), skipping commands."""
        self.s.settimeout(timeout)
        frames = []
        while True:
            flags, body = self._recv_frame()
            if flags & 0x04:
                continue
            frames.append(body)
            if not flags & 0x01:
                return frames

    def close(self):
        self.s.close()


# ---- our messages (proto/ipl_proto.h: [version, type, fields...]) -----------------------------
VERSION = 1
KV_EVENT, LOAD, SNAPSHOT_REQ, SNAPSHOT_END, POLICY, POLICY_REQ, ROUTE_REQ, ROUTE_REP = range(1, 9)
STORED, REMOVED, CLEARED = 1, 2, 3
UP, DOWN = 1, 2
EXACT, SYNCING, DEGRADED = 0, 1, 2
HEALTH_NAMES = {0: "unknown", UP: "up", DOWN: "down"}  # as the decider's /debug/state names them
KV_STATE_NAMES = {EXACT: "exact", SYNCING: "syncing", DEGRADED: "degraded"}


def kv_event(worker, op, hashes, src_seq=1):
    return mp_pack([VERSION, KV_EVENT, 0, worker, 1, src_seq, op, list(hashes), BLOCK])


def load(worker, running=0, waiting=0, kv_usage=0.0, health=UP, kv_state=EXACT, ts_ms=None):
    ts = int(time.time() * 1000) if ts_ms is None else ts_ms
    return mp_pack([VERSION, LOAD, 0, worker, ts, running, waiting, float(kv_usage), BLOCK, 1000,
                    health, kv_state])


def route_req(req_id, model, hashes, prompt_tokens=0, strategy="", explain=None, brief=None):
    """A ROUTE_REQ; explain / brief (optional trailing fields) only when given."""
    fields = [VERSION, ROUTE_REQ, req_id, model, "", prompt_tokens, BLOCK, list(hashes), strategy]
    if explain is not None or brief is not None:
        fields.append(explain or 0)
    if brief is not None:
        fields.append(brief)
    return mp_pack(fields)


ROUTE_REP_FIELDS = ["req_id", "status", "reason", "detail", "worker", "url", "pool", "model",
                    "predicted_ttft_s", "cached_tokens", "state_seq", "candidates"]
CANDIDATE_FIELDS = ["worker", "url", "predicted_ttft_s", "cached_tokens", "running", "waiting",
                    "inflight", "kv_usage", "eligible", "note"]


def decode_route_rep(frame):
    v, _ = mp_unpack(frame)
    assert v[0] == VERSION and v[1] == ROUTE_REP, v[:2]
    rep = dict(zip(ROUTE_REP_FIELDS, v[2:]))
    rep["candidates"] = [dict(zip(CANDIDATE_FIELDS, c)) for c in rep["candidates"]]
    return rep


def policy_yaml(workers, strategy="ttft", model=MODEL):
    lines = ["apiVersion: inferplane.io/v1alpha1", "kind: InferenceWorkerSet",
             "metadata: {name: sims}", "spec:", "  model: %s" % model,
             "  blockSize: %d" % BLOCK, "  workers:"]
    for i, w in enumerate(workers):
        lines += ["    - name: %s" % w, "      url: http://127.0.0.1:%d" % (18100 + i)]
    lines += ["---", "apiVersion: inferplane.io/v1alpha1", "kind: InferencePool",
              "metadata: {name: chat}", "spec:", "  model: %s" % model,
              "  strategy: %s" % strategy, "  targets:", "    - workerSet: sims", ""]
    return "\n".join(lines)


def chain(n, salt=0):
    """n made-up block hashes of one prompt (below 2^53, so JSON numbers carry them exactly)."""
    return [(0x1000000 * (salt + 1) + i) * 2654435761 % (2 ** 53) for i in range(n)]


class DeciderStack:
    """policy + aggregator + decider, and a test collector (PUSH) feeding the aggregator."""

    def __init__(self, test, workers=("w0", "w1", "w2"), strategy="ttft", decider_args=()):
        st = self.stack = Stack(test)
        self.workers = list(workers)
        self.policy_dir = os.path.dirname(st.write("policy/p.yaml",
                                                   policy_yaml(self.workers, strategy)))
        ep = self.ep = {k: zmq_endpoint() for k in ("pol_pub", "pol_rep", "agg_pull", "agg_pub",
                                                     "agg_snap", "decider")}
        self.policy = st.start("policy", ["--dir", self.policy_dir, "--pub", ep["pol_pub"],
                                          "--rep", ep["pol_rep"], "--republish-ms", "300"])
        self.aggregator = st.start("aggregator", ["--pull", ep["agg_pull"], "--pub", ep["agg_pub"],
                                                  "--snapshot", ep["agg_snap"],
                                                  "--heartbeat-ms", "200"])
        self.decider = self.start_decider(decider_args)
        self.push = Zmtp(ep["agg_pull"], "PUSH")
        test.addCleanup(self.push.close)

    def start_decider(self, extra=()):
        ep = self.ep
        return self.stack.start("decider", ["--listen", ep["decider"], "--state-sub", ep["agg_pub"],
                                            "--state-snapshot", ep["agg_snap"],
                                            "--policy-sub", ep["pol_pub"],
                                            "--policy-req", ep["pol_rep"], "--seed", "7"]
                                + list(extra))

    def send(self, *frames):
        for f in frames:
            self.push.send([f])

    def route(self, body):
        status, _, doc = http_json("POST", self.decider.admin_url + "/v1/route", body)
        return status, doc

    def state(self):
        return http_json("GET", self.decider.admin_url + "/debug/state")[2]

    def wait_state(self, pred, what, timeout=10.0):
        return wait_until(lambda: pred(self.state()), timeout, what=what)

    def loads(self, **per_worker):
        """Sends a LOAD for every worker: per_worker[name] = dict of load() arguments."""
        for w in self.workers:
            self.send(load(w, **per_worker.get(w, {})))

    def wait_loads(self, **per_worker):
        self.loads(**per_worker)

        def seen(doc):
            by = {w["name"]: w for w in doc.get("workers", [])}
            for w in self.workers:
                want = per_worker.get(w, {})
                got = by.get(w)
                if not got or not got["has_load"]:
                    return False
                if got["waiting"] != want.get("waiting", 0) or got["running"] != want.get("running", 0):
                    return False
                # health and kv_state too: a second wait that only changes them must not pass
                # on the first one's samples
                if got["health"] != HEALTH_NAMES[want.get("health", UP)]:
                    return False
                if got["kv_state"] != KV_STATE_NAMES[want.get("kv_state", EXACT)]:
                    return False
            return True
        self.wait_state(seen, "load samples at the decider")


def candidates(doc):
    return {c["worker"]: c for c in doc["candidates"]}


class TestDecider(unittest.TestCase):
    def test_routes_by_cache_and_load(self):
        s = DeciderStack(self)
        s.wait_loads()
        hot = chain(64)
        s.send(kv_event("w1", STORED, hot))
        s.wait_state(lambda d: any(w["name"] == "w1" and w["blocks"] == 64 for w in d["workers"]),
                     "w1's blocks at the decider")
        # A prompt sharing w1's 64 blocks (1024 tokens) goes to w1: a cache hit.
        status, doc = s.route({"model": MODEL, "block_hashes": hot + [12345],
                               "prompt_tokens": 65 * BLOCK})
        self.assertEqual(status, 200, doc)
        self.assertEqual(doc["worker"], "w1", doc)
        self.assertEqual(doc["reason"], "cache_hit", doc)
        self.assertEqual(doc["cached_tokens"], 64 * BLOCK)
        self.assertEqual(doc["endpoint"], "http://127.0.0.1:18101")
        self.assertEqual(doc["pool"], "chat")
        c = candidates(doc)
        self.assertEqual(set(c), {"w0", "w1", "w2"})
        self.assertEqual(c["w0"]["cached_tokens"], 0)
        self.assertTrue(all(x["eligible"] for x in c.values()), doc)
        self.assertLess(c["w1"]["predicted_ttft_ms"], c["w0"]["predicted_ttft_ms"])
        self.assertGreater(doc["state_seq"], 0)

        # Distinct prompts spread by load: in-flight accounting moves each to another worker.
        chosen = set()
        for k in range(3):
            status, doc = s.route({"model": MODEL, "block_hashes": chain(8, salt=100 + k)})
            self.assertEqual(status, 200, doc)
            chosen.add(doc["worker"])
        self.assertEqual(len(chosen), 3, "distinct prefixes should spread over the workers")

        # A long prefix on w1 would still win on predicted TTFT with 6 waiting (queue wait
        # ~0.5 s < 1.4 s of prefill), but the load gate (6 > 0 + 4) sends it elsewhere.
        longer = chain(256, salt=77)
        s.send(kv_event("w1", STORED, longer))
        s.wait_state(lambda d: any(w["name"] == "w1" and w["blocks"] == 64 + 256
                                   for w in d["workers"]), "w1's long prefix")
        s.wait_loads(w1={"waiting": 6})
        status, doc = s.route({"model": MODEL, "block_hashes": longer, "strategy": "ttft"})
        self.assertEqual(status, 200, doc)
        self.assertNotEqual(doc["worker"], "w1", doc)
        self.assertEqual(doc["reason"], "load_gate", doc)
        self.assertFalse(candidates(doc)["w1"]["eligible"])
        self.assertIn("load gate", candidates(doc)["w1"]["note"])

    def test_evicted_prefix_stops_attracting(self):
        s = DeciderStack(self, decider_args=["--optimistic-ttl-ms", "400"])
        s.wait_loads()
        hot = chain(64, salt=9)
        s.send(kv_event("w2", STORED, hot))
        s.wait_state(lambda d: any(w["name"] == "w2" and w["blocks"] == 64 for w in d["workers"]),
                     "w2's blocks")
        self.assertEqual(s.route({"model": MODEL, "block_hashes": hot})[1]["worker"], "w2")
        s.send(kv_event("w2", CLEARED, []))
        s.wait_state(lambda d: any(w["name"] == "w2" and w["blocks"] == 0 for w in d["workers"]),
                     "w2's blocks cleared")
        time.sleep(0.7)  # past 1.5 × the optimistic TTL
        s.wait_loads()   # fresh samples: nothing in flight
        status, doc = s.route({"model": MODEL, "block_hashes": hot})
        self.assertEqual(status, 200, doc)
        self.assertEqual(doc["cached_tokens"], 0, doc)
        self.assertEqual(doc["reason"], "least_loaded", doc)

    def test_optimistic_burst_sticks_together(self):
        s = DeciderStack(self)
        s.wait_loads()
        burst = chain(40, salt=3)
        first = s.route({"model": MODEL, "block_hashes": burst})[1]
        self.assertEqual(first["reason"], "least_loaded")
        # Before any KV event, the next identical prefix follows the first (optimistic blocks).
        second = s.route({"model": MODEL, "block_hashes": burst})[1]
        self.assertEqual(second["worker"], first["worker"], second)
        self.assertEqual(second["reason"], "cache_hit", second)
        self.assertEqual(second["cached_tokens"], 40 * BLOCK)

    def test_degraded_and_down_workers(self):
        s = DeciderStack(self)
        hot = chain(32, salt=5)
        s.send(kv_event("w0", STORED, hot))
        s.wait_loads(w0={"kv_state": DEGRADED}, w1={"health": DOWN})
        s.wait_state(lambda d: any(w["name"] == "w0" and w["kv_state"] == "degraded"
                                   for w in d["workers"]), "w0 degraded")
        status, doc = s.route({"model": MODEL, "block_hashes": hot})
        self.assertEqual(status, 200, doc)
        c = candidates(doc)
        self.assertEqual(c["w0"]["cached_tokens"], 0, "a degraded worker's cache is ignored")
        self.assertIn("kv degraded", c["w0"]["note"])
        self.assertFalse(c["w1"]["eligible"])
        self.assertEqual(c["w1"]["note"], "down")
        self.assertNotEqual(doc["worker"], "w1")
        # Every worker down: 503 with the reason.
        s.wait_loads(w0={"health": DOWN}, w1={"health": DOWN}, w2={"health": DOWN})
        status, doc = s.route({"model": MODEL, "prompt": "hello"})
        self.assertEqual(status, 503, doc)
        self.assertEqual(doc["reason"], "no_worker")
        self.assertEqual(doc["error"]["code"], 503)
        self.assertIn("down", doc["detail"])

    def test_http_errors(self):
        s = DeciderStack(self)
        s.wait_loads()
        url = s.decider.admin_url + "/v1/route"
        for body in [b"{not json", b"[1,2]", b'{"prompt": "x"}', b'{"model": 5, "prompt": "x"}',
                     b'{"model": "m"}', b'{"model": "m", "prompt": "x", "messages": []}',
                     b'{"model": "m", "prompt": 7}', b'{"model": "m", "messages": [{"role": 1}]}',
                     b'{"model": "m", "block_hashes": [1, -2]}',
                     b'{"model": "m", "block_hashes": "12"}',
                     b'{"model": "m", "prompt": "x", "prompt_tokens": "many"}',
                     b'{"model": "m", "prompt": "x", "strategy": "nope"}']:
            status, _, raw = http("POST", url, body, {"Content-Type": "application/json"})
            doc = json.loads(raw)
            if b"nope" in body:  # a well-formed request with an unknown strategy
                self.assertEqual(status, 404 if b'"m"' in body else 400, raw)
                continue
            self.assertEqual(status, 400, (body, raw))
            self.assertEqual(doc["error"]["type"], "invalid_request_error", raw)
            self.assertTrue(doc["error"]["message"], raw)
        status, doc = s.route({"model": MODEL, "prompt": "x", "strategy": "nope"})
        self.assertEqual(status, 400, doc)
        self.assertIn("unknown strategy", doc["detail"])
        status, _, raw = http("POST", url, b"{" + b" " * (2 << 20) + b"}",
                              {"Content-Type": "application/json"})
        self.assertEqual(status, 413, raw)
        status, doc = s.route({"model": "no-such-model", "prompt": "hello"})
        self.assertEqual(status, 404, doc)
        self.assertEqual(doc["reason"], "no_pool")
        self.assertIn("sim-model", doc["detail"])
        self.assertEqual(http("GET", url)[0], 405)
        self.assertTrue(s.decider.alive())

    def test_prompt_and_messages_are_hashed_like_the_gateway(self):
        s = DeciderStack(self)
        s.wait_loads()
        text = "The quick brown fox jumps over the lazy dog. " * 40
        status, doc = s.route({"model": MODEL, "prompt": text})
        self.assertEqual(status, 200, doc)
        self.assertGreater(doc["prompt_tokens"], 300)
        first = doc["worker"]
        status, doc = s.route({"model": MODEL, "prompt": text + " and more"})
        self.assertEqual(doc["worker"], first, "same prefix, optimistic blocks")
        self.assertGreater(doc["cached_tokens"], 300)
        msgs = [{"role": "system", "content": "You are helpful. " * 50},
                {"role": "user", "content": "hi"}]
        status, doc = s.route({"model": MODEL, "messages": msgs})
        self.assertEqual(status, 200, doc)
        status, doc2 = s.route({"model": MODEL, "messages": msgs[:1] + [{"role": "user",
                                                                       "content": "bye"}]})
        self.assertEqual(doc2["worker"], doc["worker"])
        self.assertGreater(doc2["cached_tokens"], 0)

    def test_zmq_route_and_malformed_frames(self):
        s = DeciderStack(self)
        s.wait_loads()
        dealer = Zmtp(s.ep["decider"], "DEALER")
        self.addCleanup(dealer.close)
        dealer.send([route_req(42, MODEL, chain(4), prompt_tokens=70)])
        rep = decode_route_rep(dealer.recv()[0])
        self.assertEqual(rep["req_id"], 42)
        self.assertEqual(rep["status"], 0, rep)
        self.assertIn(rep["worker"], s.workers)
        self.assertEqual(len(rep["candidates"]), 3)
        # brief (what gateways ask): the winner without the candidates, unless explained
        dealer.send([route_req(45, MODEL, chain(4), prompt_tokens=70, brief=1)])
        rep = decode_route_rep(dealer.recv()[0])
        self.assertEqual((rep["req_id"], rep["status"], rep["candidates"]), (45, 0, []))
        self.assertIn(rep["worker"], s.workers)
        dealer.send([route_req(46, MODEL, chain(4), prompt_tokens=70, explain=1, brief=1)])
        rep = decode_route_rep(dealer.recv()[0])
        self.assertEqual((rep["req_id"], len(rep["candidates"])), (46, 3))
        self.assertTrue(all(c["note"] for c in rep["candidates"]), rep)
        dealer.send([route_req(43, "nope", [])])
        rep = decode_route_rep(dealer.recv()[0])
        self.assertEqual((rep["req_id"], rep["status"], rep["reason"]), (43, 1, "no_pool"))
        _, _, metrics = http("GET", s.decider.admin_url + "/metrics")
        self.assertIn(b'inferplane_decider_decisions_total{reason="no_pool"} 1', metrics)
        # Garbage on every socket the decider listens on: dropped, counted, still serving (poke
        # never sends a frame that decodes, so nothing poked is decided: no_pool stays 1).
        self.assertEqual(zmq_poke(s.ep["decider"], "dealer", count=300), 0)
        self.assertEqual(zmq_poke(s.ep["decider"], "raw", count=50), 0)
        dealer.send([b"\x93\x01\x07"])  # truncated ROUTE_REQ
        dealer.send([b"one", b"two"])    # multipart
        dealer.send([route_req(44, MODEL, chain(2))])
        self.assertEqual(decode_route_rep(dealer.recv()[0])["req_id"], 44)
        status, _, metrics = http("GET", s.decider.admin_url + "/metrics")
        self.assertIn(b'inferplane_frames_dropped_total{reason="frames"}', metrics)
        self.assertIn(b'inferplane_decider_decisions_total{reason="no_pool"} 1', metrics)
        self.assertIn(b"inferplane_decider_decision_seconds_bucket", metrics)
        self.assertTrue(s.decider.alive())
        # inferplanectl route talks to the same socket.
        out = subprocess.run([binary("inferplanectl"), "route", "--decider", s.ep["decider"],
                              "--model", MODEL, "--prompt", "hello world " * 50, "--explain"],
                             capture_output=True, text=True, timeout=10)
        self.assertEqual(out.returncode, 0, out.stderr)
        for w in s.workers:
            self.assertIn(w, out.stdout)
        self.assertIn("reason", out.stdout)

    def test_busy_poll(self):
        """--busy-poll-us: the same answers, state still followed while it spins, a clean stop;
        out-of-range values refused."""
        s = DeciderStack(self, decider_args=["--busy-poll-us", "2000"])
        s.wait_loads()
        dealer = Zmtp(s.ep["decider"], "DEALER")
        self.addCleanup(dealer.close)
        for k in range(20):
            dealer.send([route_req(100 + k, MODEL, chain(4), prompt_tokens=70, brief=1)])
            rep = decode_route_rep(dealer.recv()[0])
            self.assertEqual((rep["req_id"], rep["status"]), (100 + k, 0), rep)
        s.send(kv_event("w1", STORED, chain(12, salt=9)))
        s.wait_state(lambda d: any(w["name"] == "w1" and w["blocks"] == 12 for w in d["workers"]),
                     "w1's blocks while busy-polling")
        dealer.send([route_req(200, MODEL, chain(12, salt=9), prompt_tokens=200, brief=1)])
        rep = decode_route_rep(dealer.recv()[0])
        self.assertEqual((rep["req_id"], rep["worker"]), (200, "w1"), rep)
        self.assertLess(s.decider.stop(), 2.0)
        for bad in ("-1", "10001"):
            out = subprocess.run([binary("inferplane-decider"), "--busy-poll-us", bad],
                                 capture_output=True, text=True, timeout=10)
            self.assertEqual(out.returncode, 2, out.stderr)
            self.assertIn("flag --busy-poll-us: %s is out of range (0..10000)" % bad, out.stderr)

    def test_cpu_pinning(self):
        """--cpu N: the loop thread (the main thread) and ZeroMQ's I/O thread run on core N only,
        the admin server's threads stay free, answers are unchanged; a core the process may not
        use is refused with the ones it may."""
        allowed = sorted(os.sched_getaffinity(0))
        core = allowed[-1]
        s = DeciderStack(self, decider_args=["--cpu", str(core)])
        s.wait_loads()
        dealer = Zmtp(s.ep["decider"], "DEALER")
        self.addCleanup(dealer.close)
        dealer.send([route_req(300, MODEL, chain(4), prompt_tokens=70, brief=1)])
        rep = decode_route_rep(dealer.recv()[0])
        self.assertEqual((rep["req_id"], rep["status"]), (300, 0), rep)
        pid = s.decider.proc.pid
        threads = {}
        for tid in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/comm" % (pid, tid)) as f:
                name = f.read().strip()
            threads[int(tid)] = (name, os.sched_getaffinity(int(tid)))
        self.assertEqual(threads[pid][1], {core}, threads)
        io = [aff for name, aff in threads.values() if name.startswith("ZMQbg/IO")]
        self.assertTrue(io, threads)
        for aff in io:
            self.assertEqual(aff, {core}, threads)
        if len(allowed) > 1:  # the others (admin HTTP, policy view) keep every core
            self.assertTrue(any(aff == set(allowed) for _, aff in threads.values()), threads)
        self.assertLess(s.decider.stop(), 2.0)
        for bad, msg in (("4095", "--cpu 4095: this process may run on cores "),
                         ("-2", "flag --cpu: -2 is out of range (-1..65535)")):
            out = subprocess.run([binary("inferplane-decider"), "--cpu", bad],
                                 capture_output=True, text=True, timeout=10)
            self.assertEqual(out.returncode, 2, out.stderr)
            self.assertIn(msg, out.stderr)

    def test_resync_after_aggregator_restart(self):
        s = DeciderStack(self)
        s.wait_loads()
        s.send(kv_event("w0", STORED, chain(10, salt=1)))
        s.wait_state(lambda d: any(w["name"] == "w0" and w["blocks"] == 10 for w in d["workers"]),
                     "w0's blocks")
        self.assertLess(s.aggregator.stop(), 2.0)
        args = s.aggregator.argv[1:]
        s.aggregator = s.stack.start("aggregator", args[:args.index("--admin-listen")])
        s.push.close()
        s.push = Zmtp(s.ep["agg_pull"], "PUSH")
        self.addCleanup(s.push.close)
        s.send(kv_event("w2", STORED, chain(5, salt=2)))
        s.loads()
        # A new aggregator (its seq starts again): the decider resyncs from a snapshot.
        s.wait_state(lambda d: sum(d["resyncs"].values()) >= 1
                     and any(w["name"] == "w2" and w["blocks"] == 5 for w in d["workers"]),
                     "a resync to the new aggregator's state")
        doc = s.state()
        self.assertFalse(any(w["name"] == "w0" and w["blocks"] for w in doc["workers"]), doc)

    def test_admin_endpoints_and_readiness(self):
        ep = {k: zmq_endpoint() for k in ("pol_pub", "pol_rep", "agg_pub", "agg_snap", "decider")}
        st = Stack(self)
        d = st.start("decider", ["--listen", ep["decider"], "--state-sub", ep["agg_pub"],
                                 "--state-snapshot", ep["agg_snap"], "--policy-sub", ep["pol_pub"],
                                 "--policy-req", ep["pol_rep"]], ready=False)
        wait_until(lambda: http("GET", d.admin_url + "/healthz")[0] == 200, what="healthz")
        status, _, doc = http_json("GET", d.admin_url + "/readyz")
        self.assertEqual(status, 503)
        self.assertIn("policy", doc["detail"])
        self.assertIn("snapshot", doc["detail"])
        status, doc = http_json("POST", d.admin_url + "/v1/route",
                                {"model": MODEL, "prompt": "x"})[0::2]
        self.assertEqual(status, 503, doc)
        self.assertEqual(doc["reason"], "not_ready")
        self.assertEqual(http_json("GET", d.admin_url + "/version")[2]["service"], "decider")
        self.assertEqual(http("GET", d.admin_url + "/debug/state")[0], 200)
        self.assertLess(d.stop(), 2.0)

        s = DeciderStack(self)
        status, _, doc = http_json("GET", s.decider.admin_url + "/readyz")
        self.assertEqual(status, 200)
        self.assertIn("state_seq=", doc["detail"])
        self.assertIn("lag_ms=", doc["detail"])
        status, _, metrics = http("GET", s.decider.admin_url + "/metrics")
        for name in (b"inferplane_decider_state_seq", b"inferplane_decider_resyncs_total",
                     b"inferplane_decider_policy_version", b"process_resident_memory_bytes"):
            self.assertIn(name, metrics)
        self.assertLess(s.decider.stop(), 2.0)


if __name__ == "__main__":
    unittest.main()
