"""The faults of the suite (issue 20), each an inject() at t_fault and a heal() `hold_s` later,
acting on a Fleet (fleet.py) through a Ctx that records what was done and when:

    kill_<service>   kill -9 the collector, aggregator, policy, decider or exporter; start it
                     again with the same flags (same endpoints)
    kill_gateway     the same for one of the two gateways (gw0)
    kill_worker      kill -9 a worker; start it again (an empty cache) on the same ports
    stop_worker      SIGSTOP a worker (it keeps its sockets: connections hang), then SIGCONT
    slow_worker      every request to a worker stalls 5 s before its first byte (POST /sim/fault)
    cut_collector    SIGSTOP the collector: no KV event and no scrape from any worker reaches
                     the aggregator, while the workers and everything else run on
    restart_workers  every worker in turn killed and started again, empty, then the next
"""
import signal
import time

from lib.faults import wait_ready
from lib.harness import http


class Ctx:
    """What a fault did to the fleet, and when (wall clock, as the bench's report)."""

    def __init__(self, fleet, plan):
        self.fleet, self.plan = fleet, plan
        self.events = []         # (time, what)
        self.cut_at = []         # times a worker was killed or stopped under its streams
        self.down = {}           # gateway key -> [from, until]: it could not take requests
        self.restarted = []      # keys of the processes started again
        self.cache_lost = set()  # workers whose KV cache the fault emptied

    def mark(self, what):
        self.events.append((time.time(), what))

    def kill(self, key):
        p = self.fleet.procs[key]
        p.signal(signal.SIGKILL)
        t = time.time()
        self.mark("SIGKILL %s (pid %d)" % (key, p.proc.pid))
        p.proc.wait(5)
        return t

    def restart(self, key):
        self.fleet.restart(key)
        self.restarted.append(key)
        self.mark("started %s again (pid %d)" % (key, self.fleet.procs[key].proc.pid))

    def signal(self, key, sig):
        self.fleet.procs[key].signal(sig)
        self.mark("%s %s" % (signal.Signals(sig).name, key))
        return time.time()


SLOW_STALL_MS = 5000  # well past the gateways' first-byte timeout (fleet.TIMEOUT_MS)


class Fault:
    def __init__(self, name, hold_s, inject, heal, what, control_plane=False, stalls=None,
                 after_s=None):
        """what: a sentence with one %s for the hold time. control_plane: the data path does
        not need the process, so no request may fail at all (issue 20 says so of the
        aggregator, policy and exporter, and defect 4 of the decider). stalls(res, timeout_s):
        the requests that waited on a hung worker longer than the gateways' timeouts allow.
        after_s: a longer after window than the plan's, where a small shift must show."""
        self.name, self.hold_s, self.inject, self.heal = name, hold_s, inject, heal
        self.what, self.control_plane, self.stalls = what, control_plane, stalls
        self.after_s = after_s


def kill_restart(key):
    def inject(ctx):
        t = ctx.kill(key)
        if key.startswith("gw"):
            ctx.down[key] = [t, None]

    def heal(ctx):
        ctx.restart(key)
    name = "gateway %s" % key if key.startswith("gw") else key
    return inject, heal, "kill -9 the %s, start it again with the same flags %%s later" % name


def kill_worker(key):
    def inject(ctx):
        ctx.cut_at.append(ctx.kill(key))
        ctx.cache_lost.add(key)

    def heal(ctx):
        ctx.restart(key)
    return inject, heal, "kill -9 worker %s, start it again (empty cache) %%s later" % key


def stop_worker(key):
    def inject(ctx):
        ctx.cut_at.append(ctx.signal(key, signal.SIGSTOP))

    def heal(ctx):
        ctx.signal(key, signal.SIGCONT)
    return inject, heal, "SIGSTOP worker %s, SIGCONT %%s later" % key


def slow_worker(key, stall_ms):
    def arm(ctx, body):
        status, _, raw = http("POST", ctx.fleet.procs[key].url + "/sim/fault", body, timeout=5)
        if status != 200:
            raise AssertionError("POST /sim/fault %s: %d %r" % (body, status, raw[:200]))

    def inject(ctx):
        arm(ctx, {"stall_ms": stall_ms, "count": 100000})
        ctx.mark("%s: every request stalls %d ms before its first byte" % (key, stall_ms))

    def heal(ctx):
        arm(ctx, {})
        ctx.mark("%s: fault disarmed" % key)
    return inject, heal, ("worker %s stalls every request %d ms before its first byte "
                          "(POST /sim/fault) for %%s" % (key, stall_ms))


def cut_collector():
    def inject(ctx):
        ctx.signal("collector", signal.SIGSTOP)

    def heal(ctx):
        ctx.signal("collector", signal.SIGCONT)
    return inject, heal, ("cut the collector off from its workers (SIGSTOP: no KV event, no "
                          "scrape reaches the aggregator) for %s")


def restart_workers():
    def inject(ctx):
        for w in ctx.fleet.workers:
            key = w.worker_name
            ctx.cut_at.append(ctx.kill(key))
            ctx.cache_lost.add(key)
            ctx.restart(key)
            wait_ready(ctx.fleet.procs[key], 10)
            ctx.mark("%s ready" % key)
            time.sleep(0.3 * ctx.plan.scale)

    def heal(ctx):
        pass
    return inject, heal, ("restart every worker in turn (kill -9, start again with an empty "
                          "cache, wait for /health, 0.3 s, the next); the last %s before the end")


def faults():
    """The suite's faults, in the order they run."""
    out = [Fault("kill_" + key, hold, *kill_restart(key), control_plane=True)
           for key, hold in (("collector", 0.5), ("aggregator", 0.5), ("policy", 0.5),
                             ("decider", 1.0), ("exporter", 0.5))]
    out.append(Fault("kill_gateway", 1.0, *kill_restart("gw0")))
    # The restarted worker comes back empty: whether it takes its share of the load again
    # shows in TTFT over a longer window.
    out.append(Fault("kill_worker", 2.0, *kill_worker("w1"), after_s=4.0))
    out.append(Fault("stop_worker", 5.0, *stop_worker("w2"), stalls=stop_stalls))
    out.append(Fault("slow_worker", 2.5, *slow_worker("w0", SLOW_STALL_MS), stalls=slow_stalls))
    out.append(Fault("cut_collector", 2.0, *cut_collector(), control_plane=True))
    out.append(Fault("restart_workers", 0.3, *restart_workers()))
    return out


# ---- what a stalled worker may cost a request (issue 20, defect 8) ------------------------

def stop_stalls(res, timeout_s):
    """A worker stopped with SIGSTOP keeps its connections open: only the gateways'
    first-byte and stream-idle timeouts end what went to it. So no request in flight at the
    SIGSTOP is still running at SIGCONT (a stream on the stopped worker is cut timeout_s
    after its last byte; one elsewhere ends as usual), and every request sent early enough to
    be retried elsewhere (timeout_s, then 1.5 s for its first token there) had its first
    token, or its end, before SIGCONT; one that did not waited for the stopped worker."""
    t_stop, t_cont = res["t_fault"], res["t_heal"]
    latest = t_cont - timeout_s - 1.5
    out = []
    for r in res["requests"]:
        start, end = r["request_start_time"], r["request_end_time"]
        ttft = (r.get("time_to_first_token_ms") or 0) / 1000.0
        first = start + ttft if ttft else end
        if (start < t_stop and end > t_cont) or (t_stop <= start <= latest and first > t_cont):
            out.append(r)
    return out


def slow_stalls(res, timeout_s):
    """Requests to the stalled worker wait SLOW_STALL_MS for their first byte unless the
    gateways' first-byte timeout gives up on it first and retries elsewhere: none started
    while the fault was armed may have a first token later than the stall (less 0.5 s)."""
    bound = SLOW_STALL_MS / 1000.0 - 0.5
    return [r for r in res["requests"]
            if res["t_fault"] <= r["request_start_time"] <= res["t_heal"]
            and (r.get("time_to_first_token_ms") or 0) / 1000.0 > bound]
