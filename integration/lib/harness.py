"""Integration-test harness: real inferplane processes on ephemeral loopback ports.

    from lib.harness import Stack, free_port, zmq_endpoint, http, http_json, zmq_poke

    class TestX(unittest.TestCase):
        def test_y(self):
            st = Stack(self)                      # stops everything at test cleanup
            agg = st.start("aggregator", ["--pull", zmq_endpoint(), ...])
            status, headers, body = http("GET", agg.admin_url + "/metrics")
            self.assertLess(agg.stop(), 2.0)      # seconds from SIGTERM to exit

Processes are the binaries in $BUILD (default build/), started with --admin-listen on a free
port and --log-level debug; their stderr goes to a log file printed when a test fails.
Everything listens on 127.0.0.1 only. Every wait is bounded.
"""
import functools
import json
import os
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.join(ROOT, os.environ.get("BUILD", "build"))
# The binaries are `make SANITIZE=1`'s (build-san/): AddressSanitizer makes every process cost
# about twice the CPU, which bounds on CPU time allow for.
SANITIZED = os.path.basename(os.path.normpath(BUILD)).startswith("build-san")
_used_ports = set()


def requires(available, what):
    """A class or test decorator for a tool that `make deps` installs (tools/deps.sh,
    tools/deps-node.sh): when it is missing the test FAILS, naming it, instead of skipping, so a
    machine or CI run that lost an install step cannot pass silently."""
    def deco(obj):
        if available:
            return obj
        why = "%s is missing: run `make deps` (tools/deps.sh, tools/deps-node.sh)" % what
        if isinstance(obj, type):
            def setUpClass(cls):
                raise AssertionError(why)
            obj.setUpClass = classmethod(setUpClass)
            return obj

        @functools.wraps(obj)
        def failing(*args, **kwargs):
            raise AssertionError(why)
        return failing
    return deco


def free_port():
    """A currently free TCP port on 127.0.0.1 (never handed out twice by this process)."""
    for _ in range(100):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        if port not in _used_ports:
            _used_ports.add(port)
            return port
    raise RuntimeError("no free port")


def zmq_endpoint():
    return "tcp://127.0.0.1:%d" % free_port()


def binary(name):
    """Path of build/inferplane-<name> (or build/<name> for tools such as inferplanectl)."""
    for cand in ("inferplane-" + name, name):
        p = os.path.join(BUILD, cand)
        if os.path.exists(p):
            return p
    raise FileNotFoundError("no binary for %s in %s (run make)" % (name, BUILD))


def http(method, url, body=None, headers=None, timeout=10.0):
    """One HTTP request. body: bytes, str or a JSON-able object. Returns (status, headers, bytes);
    HTTP errors are returned, not raised."""
    data = body
    hdrs = dict(headers or {})
    if body is not None and not isinstance(body, (bytes, str)):
        data = json.dumps(body)
        hdrs.setdefault("Content-Type", "application/json")
    if isinstance(data, str):
        data = data.encode()
    req = urllib.request.Request(url, data=data, method=method, headers=hdrs)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, dict(r.headers.items()), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers.items()), e.read()


def http_json(method, url, body=None, headers=None, timeout=10.0):
    """Like http() but decodes the JSON body (None when it is not JSON)."""
    status, hdrs, raw = http(method, url, body, headers, timeout)
    try:
        return status, hdrs, json.loads(raw)
    except ValueError:
        return status, hdrs, None


def sse_events(raw):
    """Splits an SSE body (bytes) into the list of `data:` payload strings."""
    out = []
    for line in raw.decode("utf-8", "replace").split("\n"):
        if line.startswith("data: "):
            out.append(line[6:])
    return out


def wait_until(fn, timeout=10.0, interval=0.05, what="condition"):
    """Polls fn() until it returns a truthy value; returns it, or raises AssertionError."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = fn()
            if last:
                return last
        except (OSError, ValueError) as e:  # connection refused while starting, etc.
            last = e
        time.sleep(interval)
    raise AssertionError("timed out after %.1fs waiting for %s (last: %r)" % (timeout, what, last))


def zmq_poke(endpoint, socket_type="dealer", count=200, seed=1, timeout=10.0):
    """Sends `count` malformed frames to a ZeroMQ endpoint with `inferplanectl poke`
    (socket_type: dealer | push | req | pub | sub | raw; raw = random bytes on plain TCP).
    Returns the tool's exit code."""
    cmd = [binary("inferplanectl"), "poke", "--endpoint", endpoint, "--socket", socket_type,
           "--count", str(count), "--seed", str(seed)]
    return subprocess.run(cmd, timeout=timeout, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode


def terminate(proc, timeout=5.0):
    """SIGTERM to a subprocess.Popen, then wait; SIGKILL after `timeout`. Returns the seconds
    until it exited (0.0 when it had already)."""
    if proc.poll() is not None:
        return 0.0
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)
    return time.monotonic() - t0


class Proc:
    def __init__(self, name, argv, log_path, admin_url, env):
        self.name = name
        self.argv = argv
        self.log_path = log_path
        self.admin_url = admin_url
        self._log = open(log_path, "wb")
        self.proc = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT, env=env,
                                     stdin=subprocess.DEVNULL)

    def alive(self):
        return self.proc.poll() is None

    def log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def wait_ready(self, timeout=10.0, path="/readyz"):
        def ready():
            if not self.alive():
                raise AssertionError("%s exited with %s:\n%s" % (self.name, self.proc.returncode,
                                                                 self.log()[-3000:]))
            status, _, _ = http("GET", self.admin_url + path, timeout=1.0)
            return status == 200
        wait_until(ready, timeout, what="%s %s" % (self.name, path))

    def signal(self, sig):
        if self.alive():
            self.proc.send_signal(sig)

    def stop(self, timeout=5.0):
        """SIGTERM, then wait; returns the seconds until exit (SIGKILL after `timeout`)."""
        seconds = terminate(self.proc, timeout)
        self._log.close()
        return seconds


class Stack:
    """Starts processes and stops all of them when the test ends (even on failure).

    With admin_token="..." every process started with an admin server gets
    INFERPLANE_ADMIN_TOKEN_FILE (--admin-token-file: a file in the stack's dir holding that
    token; binaries that predate the option ignore it and start as before): its protected admin
    routes (/debug/..., the decider's POST /v1/route) then need the token, which
    Proc.admin_headers carries; without one they answer loopback clients, as the tests are."""

    def __init__(self, test=None, admin_token=None, routing_headers=True, curve=None):
        self.procs = []
        # Gateways send clients the x-inferplane-worker, -endpoint, -reason, -predicted-ttft-ms
        # and -cached-tokens headers only with --expose-routing-headers (off by default: a
        # tenant could read others' prompts off them); the tests read them, so the stack turns
        # it on (INFERPLANE_EXPOSE_ROUTING_HEADERS) unless routing_headers=False.
        self.routing_headers = routing_headers
        self.dir = tempfile.mkdtemp(prefix="ipl-it-")
        self._test = test
        self.admin_token = admin_token
        self.admin_token_file = None
        if admin_token is not None:
            self.admin_token_file = os.path.join(self.dir, "admin-token")
            with open(self.admin_token_file, "w") as f:
                f.write(admin_token + "\n")
        # curve=True: a cluster certificate (inferplanectl curve-keygen) in the stack's dir,
        # given to every process but the simulated workers as INFERPLANE_CURVE_DIR
        # (--curve-dir): their ZeroMQ sockets then use CURVE (docs/security.md). vLLM's
        # KV-event sockets speak no CURVE, so neither do the sims'.
        # curve=None: on when INFERPLANE_TEST_CURVE=1 (so a whole suite, or a helper that makes
        # its own Stack, can run with CURVE on).
        if curve is None:
            curve = os.environ.get("INFERPLANE_TEST_CURVE") == "1"
        self.curve_dir = None
        if curve:
            self.curve_dir = os.path.join(self.dir, "curve")
            subprocess.run([binary("inferplanectl"), "curve-keygen", self.curve_dir],
                           check=True, capture_output=True, timeout=10)
        if test is not None:
            test.addCleanup(self.stop_all)

    def start(self, name, args, admin=True, ready=True, env=None, timeout=10.0, ready_path="/readyz"):
        """Starts build/inferplane-<name> (or a tool) with args. admin=True adds --admin-listen on
        a free port (and --log-level debug); ready=True waits for ready_path to answer 200."""
        argv = [binary(name)] + list(args)
        admin_url = None
        if admin:
            port = free_port()
            argv += ["--admin-listen", "127.0.0.1:%d" % port, "--log-level", "debug"]
            admin_url = "http://127.0.0.1:%d" % port
        e = dict(os.environ)
        # A gateway drains on SIGTERM (--drain-timeout-ms, 25 s): stop() would wait for what a
        # test leaves in flight. Half a second keeps the drain in play and stops quick.
        e.setdefault("INFERPLANE_DRAIN_TIMEOUT_MS", "500")
        if admin and self.admin_token_file:  # the env form: also read from --config users
            e["INFERPLANE_ADMIN_TOKEN_FILE"] = self.admin_token_file
        if self.curve_dir and name != "sim":
            e["INFERPLANE_CURVE_DIR"] = self.curve_dir
        if name == "gateway" and self.routing_headers:
            e.setdefault("INFERPLANE_EXPOSE_ROUTING_HEADERS", "true")
        e.update(env or {})
        log_path = os.path.join(self.dir, "%s-%d.log" % (name, len(self.procs)))
        p = Proc(name, argv, log_path, admin_url, e)
        p.admin_headers = ({"Authorization": "Bearer " + self.admin_token}
                           if admin and self.admin_token_file else {})
        self.procs.append(p)
        if ready and admin:
            p.wait_ready(timeout, ready_path)
        return p

    def start_sim(self, name="w0", model="sim-model", extra=None, ready=True):
        """Starts a simulated vLLM worker on free ports. Returns the Proc with .url, .kv, .replay
        (its API base URL and KV-event PUB / replay endpoints) and .admin_url = .url."""
        port = free_port()
        kv = zmq_endpoint()
        replay = zmq_endpoint()
        cfg = json.dumps({"enable_kv_cache_events": True, "publisher": "zmq", "endpoint": kv,
                          "replay_endpoint": replay, "topic": "kv-events"})
        args = ["--host", "127.0.0.1", "--port", str(port), "--served-model-name", model,
                "--kv-events-config", cfg, "--enable-prompt-tokens-details",
                # vLLM would *connect* a PUB to tcp://127.0.0.1:PORT; ours binds so that
                # collectors connect to each worker (the simulator-only --kv-events-bind).
                "--kv-events-bind", "bind"] + list(extra or [])
        p = self.start("sim", args, admin=False, ready=False)
        p.admin_url = p.url = "http://127.0.0.1:%d" % port
        p.kv, p.replay, p.worker_name = kv, replay, name
        if ready:
            p.wait_ready(path="/health")
        return p

    def write(self, relpath, text):
        """Writes a file under this stack's temp dir; returns its path."""
        path = os.path.join(self.dir, relpath)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
        return path

    def start_chain(self, policy_dir, gateway_args=(), exporter=True, decider_args=()):
        """The whole chain on the YAML in `policy_dir`: policy, aggregator, collector, decider
        (extra `decider_args`), exporter (unless not wanted) and gateway (extra `gateway_args`).
        Returns the gateway's Proc with .api (its API base URL) and .exporter (the exporter's
        Proc, or None)."""
        pol_pub, pol_rep = zmq_endpoint(), zmq_endpoint()
        self.start("policy", ["--dir", policy_dir, "--pub", pol_pub, "--rep", pol_rep])
        agg_pull, agg_pub, agg_snap = zmq_endpoint(), zmq_endpoint(), zmq_endpoint()
        self.start("aggregator", ["--pull", agg_pull, "--pub", agg_pub, "--snapshot", agg_snap])
        self.start("collector", ["--aggregator", agg_pull, "--policy-sub", pol_pub,
                                 "--policy-req", pol_rep], ready=False)
        dec = zmq_endpoint()
        self.start("decider", ["--listen", dec, "--state-sub", agg_pub, "--state-snapshot",
                               agg_snap, "--policy-sub", pol_pub, "--policy-req", pol_rep]
                   + list(decider_args), ready=False)
        pull = zmq_endpoint() if exporter else ""
        ex = self.start("exporter", ["--pull", pull]) if exporter else None
        port = free_port()
        gw = self.start("gateway", ["--listen", "127.0.0.1:%d" % port, "--decider", dec,
                                    "--exporter", pull, "--policy-sub", pol_pub,
                                    "--policy-req", pol_rep] + list(gateway_args))
        gw.api = "http://127.0.0.1:%d" % port
        gw.exporter = ex
        gw.chain = {"decider": dec, "exporter": pull, "policy_sub": pol_pub, "policy_req": pol_rep}
        return gw

    def add_gateway(self, like, gateway_args=()):
        """Another gateway replica on the chain that start_chain returned `like` for (the same
        decider, exporter and policy service), with extra `gateway_args`. Returns its Proc with
        .api and .chain, like start_chain's."""
        c = like.chain
        port = free_port()
        gw = self.start("gateway", ["--listen", "127.0.0.1:%d" % port, "--decider", c["decider"],
                                    "--exporter", c["exporter"], "--policy-sub", c["policy_sub"],
                                    "--policy-req", c["policy_req"]] + list(gateway_args))
        gw.api = "http://127.0.0.1:%d" % port
        gw.exporter = like.exporter
        gw.chain = c
        return gw

    def stop_all(self):
        failed = self._test is not None and _test_failed(self._test)
        for p in reversed(self.procs):
            p.stop()
        if failed:
            for p in self.procs:
                print("\n----- %s (%s) -----\n%s" % (p.name, " ".join(p.argv), p.log()[-4000:]))


def _test_failed(test):
    outcome = getattr(test, "_outcome", None)
    if outcome is None:
        return False
    result = getattr(outcome, "result", None)
    errors = getattr(result, "errors", []) + getattr(result, "failures", []) if result else []
    return any(t is test for t, _ in errors) or not getattr(outcome, "success", True)
