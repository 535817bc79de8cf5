#!/usr/bin/env python3
"""bench_proxy — what the gateway costs as a proxy, side by side in one run with calling the
worker directly and with nginx as a plain reverse proxy, on the same simulated worker.

    bench/bench_proxy.py [--quick] [--seconds 10] [--gateway PATH] [--gateway-old PATH]
                                                    (tools/run-bench --only proxy)

One simulated worker (build/inferplane-sim at --time-scale 200: a non-streamed chat with
max_tokens 4 answers in ~1 ms), and in front of it, started by this script on ephemeral
loopback ports:

    direct   wrk → the worker
    nginx    wrk → nginx (Debian's, a config generated into a temp dir: one worker process
             per core, keepalive upstream, no buffering, no access log) → the worker
    gateway  wrk → inferplane-gateway → the worker, with the whole chain beside it (policy,
             aggregator, collector, decider over TCP, exporter: integration/lib/harness.py's
             Stack.start_chain, at log level info)
    gateway_old  the same chain with another gateway binary (--gateway-old PATH: a copy of
             the binary before a change), so before/after is one run

Measured, for each path:

    proxy_rps_<path>_c<N>             wrk, non-streamed chat, N = 16 / 64 / 200 connections
    proxy_p50_ms_<path>_c<N>, proxy_p99_ms_<path>_c<N>   wrk's latency percentiles
    proxy_cpu_us_per_request_<path>   the proxy process's CPU (utime + stime of
                                      /proc/<pid>/stat, all nginx processes) over the three
                                      wrk runs ÷ their requests
    proxy_worker_cpu_us_per_request_<path>[_c<N>]   the same for the simulated worker (all
                                      runs, and each connection count's)
    proxy_ttft_p50_ms_<path>, _p99_   TTFT of 200 concurrent streams (asyncio client,
                                      keep-alive, one stream after another per connection;
                                      rounds of 1 s, the paths taking turns)
    nginx_added_ttft_p50_ms / _p99    nginx's TTFT − direct TTFT, for comparison
    proxy_large_p50_ms_<path>_<2k|200k>  wrk p50 of a 2 KB and a 200 KB prompt, 50 connections
    <path>_large_prompt_added_cpu_ms  the proxy's CPU per request, 200 KB minus 2 KB

and the targets of issue 17:

    gateway_throughput_vs_nginx       gateway rps ÷ nginx rps at 64 connections (≥ 0.8)
    gateway_added_ttft_p50_ms / _p99  gateway TTFT − direct TTFT, 200 streams (≤ 0.5 / ≤ 2)
    gateway_large_prompt_added_ms     (gateway 200 KB − 2 KB p50) − (direct 200 KB − 2 KB p50),
                                      50 connections (≤ 2)
    gateway_cpu_us_per_request        the gateway process's CPU per request, wrk runs
                                      (target ≤ 2 × nginx's: gateway_cpu_vs_nginx ≤ 2)

One JSON object per line on stdout ({"name", "value", "unit"}), like the C benchmarks; progress
and wrk's own output on stderr. Needs `nginx` and `wrk` (tools/deps.sh). --quick: 2 s per point
(a check that everything runs, not figures to quote).
"""
import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "integration"))
from lib import harness  # noqa: E402
from lib.harness import Stack, free_port, http, wait_until, zmq_endpoint  # noqa: E402

MODEL = "sim-model"
CONNECTIONS = (16, 64, 200)
TICK = os.sysconf("SC_CLK_TCK")


def log(msg):
    print("bench_proxy: " + msg, file=sys.stderr, flush=True)


def emit(name, value, unit, note=""):
    fig = {"name": name, "value": round(float(value), 4), "unit": unit}
    if note:
        fig["note"] = note
    print(json.dumps(fig), flush=True)


def loadavg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def cpu_seconds(pids):
    """utime + stime of the processes (seconds); a process that is gone counts 0."""
    total = 0
    for pid in pids:
        try:
            with open("/proc/%d/stat" % pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15)
        except (OSError, IndexError, ValueError):
            pass
    return total / TICK


def children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def chat_body(content, max_tokens, stream=False):
    return json.dumps({"model": MODEL, "messages": [{"role": "user", "content": content}],
                       "max_tokens": max_tokens, "stream": stream})


def prompt_of(nbytes):
    words = ("the quick brown fox jumps over the lazy dog while a proxy forwards every "
             "byte of the prompt ").split()
    out, n, i = [], 0, 0
    while n < nbytes:
        w = words[i % len(words)] + str(i % 97)
        out.append(w)
        n += len(w) + 1
        i += 1
    return " ".join(out)[:nbytes]


# ---- processes -------------------------------------------------------------------------------


def start(st, name, args, ready=True, binary=None, ready_path="/readyz"):
    """A service (`binary`, or $BUILD's inferplane-<name>) in the Stack `st`, with its admin
    server on a free port and log level info (the harness's own start() adds debug logging,
    which would be measured too)."""
    port = free_port()
    argv = [binary or harness.binary(name)] + list(args) + [
        "--admin-listen", "127.0.0.1:%d" % port, "--log-level", "info"]
    log_path = os.path.join(st.dir, "%s-%d.log" % (name, len(st.procs)))
    p = harness.Proc(name, argv, log_path, "http://127.0.0.1:%d" % port, dict(os.environ))
    st.procs.append(p)
    if ready:
        p.wait_ready(timeout=30, path=ready_path)
    return p


def policy_yaml(url, kv):
    return "\n".join([
        "apiVersion: inferplane.io/v1alpha1", "kind: InferenceWorkerSet",
        "metadata: {name: bench}", "spec:", "  model: %s" % MODEL, "  blockSize: 16",
        "  workers:", "    - name: w0", "      url: %s" % url, "      kvEvents: %s" % kv,
        "---", "apiVersion: inferplane.io/v1alpha1", "kind: InferencePool",
        "metadata: {name: chat}", "spec:", "  model: %s" % MODEL, "  targets:",
        "    - workerSet: bench", ""])


def start_sim(st, time_scale):
    port = free_port()
    kv, replay = zmq_endpoint(), zmq_endpoint()
    cfg = json.dumps({"enable_kv_cache_events": True, "publisher": "zmq", "endpoint": kv,
                      "replay_endpoint": replay, "topic": "kv-events"})
    p = start(st, "sim", ["--host", "127.0.0.1", "--port", str(port), "--served-model-name",
                          MODEL, "--kv-events-config", cfg, "--kv-events-bind", "bind",
                          "--time-scale", str(time_scale), "--max-num-seqs", "1024",
                          "--max-model-len", "131072", "--num-gpu-blocks-override", "65536",
                          "--enable-prompt-tokens-details"], ready=False)
    p.url = "http://127.0.0.1:%d" % port
    p.kv = kv
    wait_until(lambda: http("GET", p.url + "/health", timeout=1.0)[0] == 200, 20,
               what="sim /health")
    return p


def start_chain(st, policy_dir, gateways):
    """policy, aggregator, collector, decider, exporter and one gateway per entry of
    `gateways` ({label: binary or None}), as Stack.start_chain wires them. Returns
    {label: Proc with .api}."""
    pol_pub, pol_rep = zmq_endpoint(), zmq_endpoint()
    start(st, "policy", ["--dir", policy_dir, "--pub", pol_pub, "--rep", pol_rep])
    agg_pull, agg_pub, agg_snap = zmq_endpoint(), zmq_endpoint(), zmq_endpoint()
    start(st, "aggregator", ["--pull", agg_pull, "--pub", agg_pub, "--snapshot", agg_snap])
    start(st, "collector", ["--aggregator", agg_pull, "--policy-sub", pol_pub,
                            "--policy-req", pol_rep], ready=False)
    dec = zmq_endpoint()
    start(st, "decider", ["--listen", dec, "--state-sub", agg_pub, "--state-snapshot", agg_snap,
                          "--policy-sub", pol_pub, "--policy-req", pol_rep], ready=False)
    pull = zmq_endpoint()
    start(st, "exporter", ["--pull", pull])
    out = {}
    for label, binary in gateways.items():
        port = free_port()
        gw = start(st, "gateway", ["--listen", "127.0.0.1:%d" % port, "--decider", dec,
                                   "--exporter", pull, "--policy-sub", pol_pub,
                                   "--policy-req", pol_rep], binary=binary)
        gw.api = "http://127.0.0.1:%d" % port
        out[label] = gw
    return out


NGINX_CONF = """worker_processes %(workers)d;
pid %(dir)s/nginx.pid;
error_log %(dir)s/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path %(dir)s/body;
    proxy_temp_path %(dir)s/proxy;
    fastcgi_temp_path %(dir)s/fastcgi;
    uwsgi_temp_path %(dir)s/uwsgi;
    scgi_temp_path %(dir)s/scgi;
    client_max_body_size 8m;
    client_body_buffer_size 1m;
    keepalive_requests 1000000;
    upstream workers {
        server %(upstream)s;
        keepalive 256;
    }
    server {
        listen 127.0.0.1:%(port)d;
        location / {
            proxy_pass http://workers;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
        }
    }
}
"""


def nginx_binary():
    """Debian's nginx is in /usr/sbin, which a user's PATH may lack."""
    return shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/sbin")


class Nginx:
    def __init__(self, upstream_url):
        if not nginx_binary():
            raise RuntimeError("nginx is missing: run `make deps` (tools/deps.sh)")
        self.dir = tempfile.mkdtemp(prefix="ipl-bench-nginx-")
        self.port = free_port()
        conf = os.path.join(self.dir, "nginx.conf")
        with open(conf, "w") as f:
            f.write(NGINX_CONF % {"workers": os.cpu_count() or 1, "dir": self.dir,
                                  "port": self.port,
                                  "upstream": upstream_url.split("//", 1)[1]})
        self.log = open(os.path.join(self.dir, "stderr.log"), "wb")
        argv = [nginx_binary(), "-p", self.dir, "-c", conf, "-g", "daemon off;"]
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        self.url = "http://127.0.0.1:%d" % self.port
        wait_until(lambda: self.proc.poll() is None and
                   http("GET", self.url + "/health", timeout=1.0)[0] == 200, 10,
                   what="nginx on %s" % self.url)

    def pids(self):
        return [self.proc.pid] + children(self.proc.pid)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)  # graceful: master and workers exit
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                for pid in self.pids():
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
                self.proc.wait(5)
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


# ---- wrk -------------------------------------------------------------------------------------

WRK_LUA = """wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local f = assert(io.open("%s", "rb"))
wrk.body = f:read("*a")
f:close()
"""


def wrk(url, body, connections, seconds, tmp):
    """Runs wrk; returns (requests/s, requests, p50 ms, p99 ms, non-2xx + socket errors)."""
    bpath = os.path.join(tmp, "body-%d.json" % len(body))
    with open(bpath, "w") as f:
        f.write(body)
    spath = os.path.join(tmp, "post-%d.lua" % len(body))
    with open(spath, "w") as f:
        f.write(WRK_LUA % bpath)
    cmd = ["wrk", "-t", "2", "-c", str(connections), "-d", "%ds" % seconds, "--latency",
           "--timeout", "10s", "-s", spath, url + "/v1/chat/completions"]
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         timeout=seconds + 30).stdout

    def ms(label):
        m = re.search(r"^\s+%s\s+([\d.]+)(us|ms|s)\s*$" % label, out, re.M)
        if not m:
            return float("nan")
        return float(m.group(1)) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[m.group(2)]
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    reqs = int(re.search(r"(\d+) requests in", out).group(1))
    bad = 0
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if m:
        bad += int(m.group(1))
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    if m:
        bad += sum(int(x) for x in m.groups())
    return rps, reqs, ms("50%"), ms("99%"), bad


# ---- TTFT of concurrent streams --------------------------------------------------------------


async def _stream_once(reader, writer, req, ttfts):
    """One streamed chat on a kept-alive connection; appends its TTFT (ms). The body is read
    in large pieces, not chunk by chunk (the client must not be what is measured): the first
    piece with a `data:` line is the first token, the chunked encoding's last chunk the end.
    A stream that was complete before its first byte was sent may come with a Content-Length
    (the gateway sends what it has whole): its first token comes with the body."""
    t0 = time.perf_counter()
    writer.write(req)
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    if b"transfer-encoding: chunked" not in head.lower():
        m = re.search(rb"content-length:\s*(\d+)", head.lower())
        body = await reader.readexactly(int(m.group(1)) if m else 0)
        if status != 200 or b"data:" not in body:
            raise RuntimeError("not a stream (status %d)" % status)
        ttfts.append((time.perf_counter() - t0) * 1e3)
        return
    first, tail = None, b""
    while True:
        piece = await reader.read(65536)
        if not piece:
            raise RuntimeError("connection closed mid-stream")
        if first is None and b"data:" in tail[-8:] + piece:
            first = time.perf_counter()
        tail = (tail + piece)[-16:]
        if tail.endswith(b"\r\n0\r\n\r\n"):
            break
    if status != 200:
        raise RuntimeError("stream answered %d" % status)
    ttfts.append((first - t0) * 1e3)


async def _streams(url, streams, seconds, max_tokens):
    host, port = url.split("//", 1)[1].split(":")
    body = chat_body("tell me a story about proxies", max_tokens, stream=True).encode()
    req = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
           b"Content-Length: %d\r\n\r\n%s" % (host.encode(), len(body), body))
    ttfts, errors = [], [0]
    end = time.monotonic() + seconds

    async def one(k):
        await asyncio.sleep(k * 0.002)  # spread the starts over 0.4 s
        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            while time.monotonic() < end:
                try:
                    await asyncio.wait_for(_stream_once(reader, writer, req, ttfts), 10)
                except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError,
                        RuntimeError, ValueError) as e:
                    if not errors[0]:
                        log("%s: a stream failed: %r (more are counted, not shown)" % (url, e))
                    errors[0] += 1
                    writer.close()
                    reader, writer = await asyncio.open_connection(host, int(port))
        finally:
            writer.close()
    await asyncio.gather(*(one(k) for k in range(streams)))
    return ttfts, errors[0]


def pct(values, p):
    v = sorted(values)
    if not v:
        return float("nan")
    return v[min(len(v) - 1, int(p / 100.0 * len(v)))]


# ---- the run ---------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="2 s per point (a check, not figures)")
    ap.add_argument("--seconds", type=int, default=10, help="wrk duration per point (10)")
    ap.add_argument("--time-scale", type=float, default=200.0)
    ap.add_argument("--max-tokens", type=int, default=4, help="non-streamed chats (4)")
    ap.add_argument("--streams", type=int, default=200)
    ap.add_argument("--stream-tokens", type=int, default=16, help="tokens per stream (16)")
    ap.add_argument("--gateway", metavar="PATH",
                    help="the gateway binary to measure (default: $BUILD's)")
    ap.add_argument("--gateway-old", metavar="PATH",
                    help="also measure this gateway binary (before/after in one run)")
    ap.add_argument("--skip", default="", help="comma-separated: throughput,ttft,large")
    a = ap.parse_args()
    secs = 2 if a.quick else a.seconds
    skip = set(a.skip.split(",")) if a.skip else set()
    for tool, found in (("wrk", shutil.which("wrk")), ("nginx", nginx_binary())):
        if not found:
            log("%s is missing: run `make deps` (tools/deps.sh)" % tool)
            return 1
    st = Stack(None)
    tmp = tempfile.mkdtemp(prefix="ipl-bench-proxy-")
    nginx = None
    failed = True
    try:
        sim = start_sim(st, a.time_scale)
        d = os.path.dirname(st.write("policy/bench.yaml", policy_yaml(sim.url, sim.kv)))
        gws = {"gateway": os.path.abspath(a.gateway) if a.gateway else None}
        if a.gateway_old:
            gws["gateway_old"] = os.path.abspath(a.gateway_old)
        gw = start_chain(st, d, gws)
        nginx = Nginx(sim.url)
        paths = [("direct", sim.url, []), ("nginx", nginx.url, nginx.pids)]
        for label, p in gw.items():
            paths.append((label, p.api, [p.proc.pid]))
        # warm every path (connections, the decider's state, the worker's prefix cache)
        body = chat_body("hello, how are you today? this is a benchmark", a.max_tokens)
        for label, url, _ in paths:
            s, _, raw = http("POST", url + "/v1/chat/completions", body,
                             {"Content-Type": "application/json"})
            if s != 200:
                raise RuntimeError("%s answered %d: %s" % (label, s, raw[:200]))
            wrk(url, body, 16, 1, tmp)
        log("load average %.2f, %d cores, %d s per point" % (loadavg(), os.cpu_count(), secs))
        emit("proxy_loadavg_start", loadavg(), "")
        res = {}
        if "throughput" not in skip:
            # interleaved by connection count, so that every path sees the same minutes
            cpu = {label: [0.0, 0.0, 0] for label, _, _ in paths}
            for c in CONNECTIONS:
                for label, url, pids in paths:
                    pl = pids() if callable(pids) else pids
                    c0, w0 = cpu_seconds(pl), cpu_seconds([sim.proc.pid])
                    rps, reqs, p50, p99, bad = wrk(url, body, c, secs, tmp)
                    pc, wc = cpu_seconds(pl) - c0, cpu_seconds([sim.proc.pid]) - w0
                    cpu[label][0] += pc
                    cpu[label][1] += wc
                    cpu[label][2] += reqs
                    res[(label, c)] = rps
                    log("%-11s c=%-3d %8.0f req/s  p50 %6.2f ms  p99 %7.2f ms  errors %d"
                        % (label, c, rps, p50, p99, bad))
                    emit("proxy_rps_%s_c%d" % (label, c), rps, "req/s")
                    emit("proxy_p50_ms_%s_c%d" % (label, c), p50, "ms")
                    emit("proxy_p99_ms_%s_c%d" % (label, c), p99, "ms")
                    emit("proxy_worker_cpu_us_per_request_%s_c%d" % (label, c),
                         wc / max(reqs, 1) * 1e6, "us")
                    if bad:
                        emit("proxy_errors_%s_c%d" % (label, c), bad, "")
            for label, (pc, wc, n) in cpu.items():
                if label != "direct":
                    emit("proxy_cpu_us_per_request_%s" % label, pc / max(n, 1) * 1e6, "us")
                    res[("cpu", label)] = pc / max(n, 1) * 1e6
                emit("proxy_worker_cpu_us_per_request_%s" % label, wc / max(n, 1) * 1e6, "us")
            emit("gateway_throughput_vs_nginx", res[("gateway", 64)] / res[("nginx", 64)], "x",
                 "64 connections, non-streamed chat")
            emit("gateway_cpu_us_per_request", res[("cpu", "gateway")], "us",
                 "target <= 2x nginx's (%.1f us)" % res[("cpu", "nginx")])
            emit("gateway_cpu_vs_nginx", res[("cpu", "gateway")] / res[("cpu", "nginx")], "x")
            if "gateway_old" in gw:
                emit("gateway_old_throughput_vs_nginx",
                     res[("gateway_old", 64)] / res[("nginx", 64)], "x")
        if "ttft" not in skip:
            # rounds of 1 s, the paths taking turns, so that each sees the same minutes
            samples = {label: ([], [0]) for label, _, _ in paths}
            for _ in range(secs):
                for label, url, _ in paths:
                    t, errs = asyncio.run(_streams(url, a.streams, 1, a.stream_tokens))
                    samples[label][0].extend(t)
                    samples[label][1][0] += errs
            ttft = {}
            for label, (t, errs) in samples.items():
                ttft[label] = (pct(t, 50), pct(t, 99))
                log("%-11s %d streams: %d TTFTs, p50 %.2f ms, p99 %.2f ms, errors %d"
                    % (label, a.streams, len(t), ttft[label][0], ttft[label][1], errs[0]))
                emit("proxy_ttft_p50_ms_%s" % label, ttft[label][0], "ms")
                emit("proxy_ttft_p99_ms_%s" % label, ttft[label][1], "ms")
            emit("nginx_added_ttft_p50_ms", ttft["nginx"][0] - ttft["direct"][0], "ms")
            emit("nginx_added_ttft_p99_ms", ttft["nginx"][1] - ttft["direct"][1], "ms")
            for label in gw:
                pre = "gateway" if label == "gateway" else label
                emit("%s_added_ttft_p50_ms" % pre, ttft[label][0] - ttft["direct"][0], "ms",
                     "%d concurrent streams, over direct" % a.streams)
                emit("%s_added_ttft_p99_ms" % pre, ttft[label][1] - ttft["direct"][1], "ms")
        if "large" not in skip:
            large = {}
            for size, tag in ((2000, "2k"), (200000, "200k")):
                b = chat_body(prompt_of(size), 1)
                for label, url, pids in paths:
                    wrk(url, b, 4, 1, tmp)  # warm: the prompt's blocks are cached after this
                    pl = pids() if callable(pids) else pids
                    c0 = cpu_seconds(pl)
                    rps, reqs, p50, p99, bad = wrk(url, b, 50, secs, tmp)
                    large[(label, tag)] = p50
                    large[("cpu", label, tag)] = (cpu_seconds(pl) - c0) / max(reqs, 1) * 1e3
                    log("%-11s %-4s prompt, 50 connections: %7.0f req/s p50 %.2f ms p99 %.2f ms"
                        " errors %d" % (label, tag, rps, p50, p99, bad))
                    emit("proxy_large_p50_ms_%s_%s" % (label, tag), p50, "ms")
                    emit("proxy_large_rps_%s_%s" % (label, tag), rps, "req/s")
            direct = large[("direct", "200k")] - large[("direct", "2k")]
            for label in gw:
                emit("%s_large_prompt_added_ms" % label,
                     large[(label, "200k")] - large[(label, "2k")] - direct, "ms",
                     "200 KB vs 2 KB prompt, 50 connections, over direct's difference")
            for label, _, _ in paths[1:]:
                emit("%s_large_prompt_added_cpu_ms" % label,
                     large[("cpu", label, "200k")] - large[("cpu", label, "2k")], "ms",
                     "the proxy's CPU per request, 200 KB prompt minus 2 KB")
        emit("proxy_loadavg_end", loadavg(), "")
        failed = False
    finally:
        if nginx:
            nginx.stop()
        for p in reversed(st.procs):
            p.stop()
        if failed:
            log("process logs kept in %s" % st.dir)
        else:
            shutil.rmtree(st.dir, ignore_errors=True)
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
