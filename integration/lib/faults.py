"""Helpers for fault tests: restart a process of a Stack with the same flags, read its RSS, run
the project's load generator (inferplane-bench) in the background, and say what became of each
request it sent.

    p2 = restart(stack, p)                 # same argv (same ports), a new process and log
    rss_bytes(p2)                          # VmRSS from /proc, None once it has exited
    b = Bench(gw.api, ["--profile", "constant", "--rate", "10", "--max-seconds", "5"])
    reqs = b.wait()                        # every request of the report, with an outcome
    count_outcomes(reqs)                   # {"complete": n, "clear_error": n, ...}

Outcomes (outcome()): what a client saw, in the terms of issue 20's fault suite:
  complete     the whole answer
  clear_error  an HTTP error status, or an error event in the stream: the client knows
  lost         no answer and no error: the connection failed or was reset before the first
               byte ("connect"), or the answer ended without its end and without an error
               after some bytes ("transfer", "truncated", "malformed"); `got_bytes` says which
  hung         still not ended when the bench's --request-timeout passed ("timeout"), or
               cancelled at the end of the run after running longer than the hang bound
  cancelled    still running, normally, when the bench ended (not counted against anything)
"""
import json
import os
import subprocess
import tempfile

from lib.harness import binary

OUTCOMES = ("complete", "clear_error", "lost", "hung", "cancelled")


def rss_bytes(proc):
    """The resident set size of a harness Proc (or a pid), from /proc; None when it is gone."""
    pid = proc if isinstance(proc, int) else proc.proc.pid
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def restart(stack, proc, ready=True, timeout=15.0):
    """Starts `proc` again with exactly its argv (the same ports, admin port included) as a new
    process of `stack`, after it has exited (kill it first). The new Proc keeps the old one's
    attributes (url, kv, api, ...) and is stopped with the stack. ready: wait for its /readyz
    (or a sim's /health)."""
    if proc.alive():
        raise AssertionError("%s is still running: kill it before restarting" % proc.name)
    proc.stop()  # reaps it and closes its log
    env = getattr(proc, "extra_env", None)
    new = stack.start(proc.name, proc.argv[1:], admin=False, ready=False, env=env)
    for k, v in vars(proc).items():
        if k not in ("proc", "_log", "log_path", "argv", "name"):
            setattr(new, k, v)
    if ready:
        wait_ready(new, timeout)
    return new


def wait_ready(proc, timeout=15.0):
    """Waits for a Proc's /readyz, or /health for a simulated worker."""
    proc.wait_ready(timeout, "/health" if proc.name == "sim" else "/readyz")


class Bench:
    """inferplane-bench against `target` in the background, every request kept in its report
    (--sample-requests), no console output. wait() returns the requests (dicts as in the
    report, each with an added "outcome", "got_bytes" and "target")."""

    def __init__(self, target, args, hang_s, label=None):
        fd, self.out = tempfile.mkstemp(prefix="ipl-faults-bench-", suffix=".json")
        os.close(fd)
        os.unlink(self.out)
        self.target = target
        self.label = label or target
        self.hang_s = hang_s
        self.argv = [binary("inferplane-bench"), "--target", target, "--output", self.out,
                     "--no-progress", "--quiet", "--sample-requests", "1000000"] + list(args)
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)

    def wait(self, timeout=60.0):
        try:
            _, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()
            raise AssertionError("inferplane-bench did not end within %.0f s: %s"
                                 % (timeout, " ".join(self.argv)))
        try:
            if self.proc.returncode != 0 or not os.path.exists(self.out):
                raise AssertionError("inferplane-bench failed (exit %s): %s\n%s"
                                     % (self.proc.returncode, " ".join(self.argv), err[-2000:]))
            with open(self.out) as f:
                report = json.load(f)
        finally:
            if os.path.exists(self.out):
                os.unlink(self.out)
        b = report["benchmarks"][0]
        reqs = []
        for status in ("successful", "incomplete", "errored"):
            listed = b["requests"][status]
            if len(listed) != b["metrics"]["request_totals"][status]:
                raise AssertionError("the report lists %d of %d %s requests"
                                     % (len(listed), b["metrics"]["request_totals"][status],
                                        status))
            for r in listed:
                r["status"] = status
                r["target"] = self.label
                r["got_bytes"] = r.get("token_iterations", 0) > 0 or (
                    r.get("time_to_first_token_ms") or 0) > 0
                r["outcome"] = outcome(r, b["end_time"] if "end_time" in b else None,
                                       self.hang_s)
                reqs.append(r)
        return reqs


def outcome(r, bench_end=None, hang_s=None):
    """What became of one request of a bench report (see the module's comment)."""
    if r["status"] == "successful":
        return "complete"
    err = r.get("error")
    if err in ("http", "stream_error"):
        return "clear_error"
    if err == "timeout":
        return "hung"
    if err == "cancelled":
        running = (bench_end or r["request_end_time"]) - r["request_start_time"]
        return "hung" if hang_s is not None and running > hang_s else "cancelled"
    return "lost"


def count_outcomes(reqs):
    """{outcome: count} over `reqs`, every outcome present, plus "sent"."""
    out = {k: 0 for k in OUTCOMES}
    for r in reqs:
        out[r["outcome"]] += 1
    out["sent"] = len(reqs)
    return out


def median(xs):
    xs = sorted(xs)
    if not xs:
        return None
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2
