#!/usr/bin/env python3
"""bench_loadgen — inferplane-bench must not be the bottleneck: one bench process, pinned to
one core, drives streamed chat completions against a fast simulated worker (inferplane-sim
with a large --time-scale, pinned to the other core), and we measure how many streamed
requests per second it completes and how much of its core it used for them.

    python3 bench/bench_loadgen.py [--seconds 8] [--streams 64,128,256] [--output-tokens 16]

Prints one JSON object per figure on stdout (as tools/run-bench expects):
    loadgen_streamed_requests_per_s   the best run's successful streamed requests per second
    loadgen_bench_cpu_fraction        the bench's CPU over that run (1.0 = its whole core)
    loadgen_requests_per_bench_cpu_s  requests per CPU-second of the bench: what one bench
                                      core could drive if the worker kept up
    loadgen_bench_cpu_us_per_request  the same, inverted
    loadgen_worker_cpu_fraction       the simulated worker's CPU over that run (its core)
and the same five with the prefix loadgen_canned_ for a worker that costs next to nothing:
nginx (Debian's; tools/deps.sh) answering every POST with the same complete stream (16
content events, usage, [DONE]) from its configuration, on the other core — the bench's own
ceiling, which the simulated worker (tokenizing, scheduling, KV events) cannot reach on a
small machine. Progress and each run's table go to stderr. Exit status 1 when a run failed.

The worker is the limit when its CPU fraction is near 1.0 (or it is starved by other load)
while the bench's is well below: then the bench's capacity is loadgen_requests_per_bench_cpu_s.
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "integration"))
from lib.harness import Stack, binary, free_port, http, wait_until  # noqa: E402

CLK = os.sysconf("SC_CLK_TCK")


def log(msg):
    print("bench_loadgen: " + msg, file=sys.stderr, flush=True)


def cpu_s(pid):
    """User + system CPU seconds of a process so far (/proc/PID/stat)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK


def figure(name, value, unit, note):
    print(json.dumps({"name": name, "value": round(value, 4), "unit": unit, "note": note,
                      "strategy": "", "workload": "loadgen"}), flush=True)


def canned_stream(tokens):
    """The complete answer nginx returns: a chat stream of `tokens` content events."""
    chunk = 'data: {"choices":[{"index":0,"delta":{"content":" of"},"finish_reason":null}]}'
    events = [chunk] * tokens + [
        'data: {"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}',
        'data: {"choices":[],"usage":{"prompt_tokens":64,"completion_tokens":%d,'
        '"total_tokens":%d}}' % (tokens, 64 + tokens), "data: [DONE]"]
    return "".join(e + "\n\n" for e in events)


class CannedWorker:
    """nginx answering every request with canned_stream, one worker process on `core`."""

    def __init__(self, core, tokens):
        nginx = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/sbin")
        if not nginx:
            raise RuntimeError("nginx is missing: run `make deps` (tools/deps.sh)")
        self.dir = tempfile.mkdtemp(prefix="ipl-loadgen-nginx-")
        port = free_port()
        body = canned_stream(tokens).replace("\\", "\\\\").replace("'", "\\'")
        conf = os.path.join(self.dir, "nginx.conf")
        with open(conf, "w") as f:
            f.write("worker_processes 1;\npid %(d)s/nginx.pid;\nerror_log %(d)s/error.log warn;\n"
                    "events { worker_connections 4096; }\nhttp {\n  access_log off;\n"
                    "  client_body_temp_path %(d)s/body;\n  keepalive_requests 10000000;\n"
                    "  server {\n    listen 127.0.0.1:%(p)d;\n    location / {\n"
                    "      default_type text/event-stream;\n      return 200 '%(b)s';\n    }\n"
                    "  }\n}\n" % {"d": self.dir, "p": port, "b": body})
        self.log = open(os.path.join(self.dir, "stderr.log"), "wb")
        self.proc = subprocess.Popen(["taskset", "-c", str(core), nginx, "-p", self.dir, "-c",
                                      conf, "-g", "daemon off;"], stdout=self.log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.url = "http://127.0.0.1:%d" % port
        wait_until(lambda: self.proc.poll() is None and
                   http("GET", self.url + "/", timeout=1.0)[0] == 200, 10,
                   what="nginx on %s" % self.url)

    def cpu_s(self):
        """CPU of the master and its worker (its children)."""
        total = cpu_s(self.proc.pid)
        try:
            kids = open("/proc/%d/task/%d/children" % (self.proc.pid, self.proc.pid)).read()
        except OSError:
            kids = ""
        for pid in kids.split():
            try:
                total += cpu_s(int(pid))
            except OSError:
                pass
        return total

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def run_streams(a, url, streams, bench_core, worker_cpu, workdir):
    """One bench run of `streams` closed-loop streams; returns its figures (or None)."""
    out = os.path.join(workdir, "loadgen-%d.json" % streams)
    argv = ["taskset", "-c", str(bench_core), binary("inferplane-bench"), "--target", url,
            "--profile", "concurrent", "--streams", str(streams), "--max-seconds",
            str(a.seconds), "--prompt-tokens", str(a.prompt_tokens), "--output-tokens",
            str(a.output_tokens), "--output", out, "--no-progress", "--sample-requests", "0",
            "--max-concurrency", str(max(streams, 512))]
    log(" ".join(argv))
    w0 = worker_cpu()
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=a.seconds + 60)
    w1 = worker_cpu()
    sys.stderr.write(p.stdout)
    if p.returncode != 0:
        raise RuntimeError("run failed: %s" % p.stderr)
    with open(out) as f:
        b = json.load(f)["benchmarks"][0]
    m, ours = b["metrics"], b["inferplane"]
    ok = m["request_totals"]["successful"]
    cpu, wall = ours["bench_cpu_seconds"], ours["bench_wall_seconds"]
    run = {"streams": streams, "rps": m["requests_per_second"]["successful"]["mean"],
           "cpu_frac": cpu / wall, "per_cpu": ok / cpu if cpu > 0 else 0,
           "worker_frac": (w1 - w0) / wall, "errored": m["request_totals"]["errored"]}
    log("%d streams: %.0f req/s, bench CPU %.2f, worker CPU %.2f, %.0f req per bench CPU-s, "
        "%d errored" % (streams, run["rps"], run["cpu_frac"], run["worker_frac"],
                        run["per_cpu"], run["errored"]))
    return None if run["errored"] else run


def report(prefix, best, note):
    figure(prefix + "streamed_requests_per_s", best["rps"], "req/s", note)
    figure(prefix + "bench_cpu_fraction", best["cpu_frac"], "cores", note)
    figure(prefix + "requests_per_bench_cpu_s", best["per_cpu"], "req/cpu-s", note)
    figure(prefix + "bench_cpu_us_per_request", 1e6 / best["per_cpu"] if best["per_cpu"] else 0,
           "us", note)
    figure(prefix + "worker_cpu_fraction", best["worker_frac"], "cores", note)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=8)
    ap.add_argument("--streams", default="64,128,256")
    ap.add_argument("--prompt-tokens", type=int, default=64)
    ap.add_argument("--output-tokens", type=int, default=16)
    ap.add_argument("--no-canned", action="store_true", help="skip the nginx runs")
    a = ap.parse_args()
    cores = sorted(os.sched_getaffinity(0))
    bench_core, worker_core = cores[0], cores[-1]
    streams = [int(x) for x in a.streams.split(",")]
    st = Stack(None)
    results = {}
    try:
        # h100-8b at 100000x: steps of microseconds; the worker's HTTP and SSE work remain
        sim = st.start_sim("w0", extra=["--time-scale", "100000", "--profile", "h100-8b",
                                        "--max-num-seqs", "1024"], ready=False)
        subprocess.run(["taskset", "-pc", str(worker_core), str(sim.proc.pid)], check=True,
                       stdout=subprocess.DEVNULL)
        sim.wait_ready(path="/health")
        runs = [run_streams(a, sim.url, n, bench_core, lambda: cpu_s(sim.proc.pid), st.dir)
                for n in streams]
        results["loadgen_"] = [r for r in runs if r]
        sim.stop()
        if not a.no_canned:
            canned = CannedWorker(worker_core, a.output_tokens)
            try:
                runs = [run_streams(a, canned.url, n, bench_core, canned.cpu_s, st.dir)
                        for n in streams]
            finally:
                canned.stop()
            results["loadgen_canned_"] = [r for r in runs if r]
    except (RuntimeError, OSError, subprocess.SubprocessError) as e:
        log(str(e))
        return 1
    finally:
        st.stop_all()
    status = 0
    for prefix, runs in results.items():
        if not runs:
            log("%s: no clean run" % prefix)
            status = 1
            continue
        best = max(runs, key=lambda r: r["rps"])
        worker = ("inferplane-sim --time-scale 100000" if prefix == "loadgen_"
                  else "nginx returning a canned stream")
        note = ("%d streams, %d-token prompts, %d-token streamed answers; bench on core %d, %s "
                "on core %d; load average %.1f" % (best["streams"], a.prompt_tokens,
                                                   a.output_tokens, bench_core, worker,
                                                   worker_core, os.getloadavg()[0]))
        report(prefix, best, note)
    return status


if __name__ == "__main__":
    sys.exit(main())
