"""A decider outage under load (issue 20, defect 4): the decider was a single point of failure
invisible to readiness — stopped for 2 s, 100% of requests failed (503 route_timeout /
router_not_ready) while the gateway's /readyz said 200. Black-box, on real processes:

  - one decider, SIGSTOP for 2 s under steady load: every request still succeeds (the
    gateway's backup decides, load only, from its policy); the degraded mode shows in /readyz
    (200, "degraded: no decider answers"), in inferplane_gateway_decider_up and
    inferplane_gateway_route_backup_total, and in one log line; it ends when the decider
    answers again;
  - one decider killed (SIGKILL) and restarted on the same endpoint: the same, and the new
    decider decides again once it is back and has its snapshot;
  - two deciders (--decider a,b), one stopped: every request answered by the other (no backup
    decision), "1 of 2 answering" in /readyz.

    cd integration && python3 -m unittest -v test_decider_failover
"""
import os
import re
import signal
import threading
import time
import unittest

from lib.cluster import MODEL, policy_yaml
from lib.harness import Stack, free_port, http, http_json, wait_until, zmq_endpoint

OUTAGE_S = 2.0


def metric(text, name, labels=""):
    m = re.search(r"^%s%s (\S+)$" % (re.escape(name), re.escape(labels)), text, re.M)
    return float(m.group(1)) if m else None


class Chain:
    """Two sims, policy, aggregator, collector, `deciders` deciders, exporter and a gateway
    that lists them all in --decider."""

    def __init__(self, test, deciders=1):
        st = self.stack = Stack(test)
        self.sims = [st.start_sim("w%d" % i, extra=["--time-scale", "20", "--seed", str(i)])
                     for i in range(2)]
        pdir = os.path.dirname(st.write("policy/p.yaml", policy_yaml(self.sims)))
        ep = self.ep = {k: zmq_endpoint() for k in ("agg_pull", "agg_pub", "agg_snap", "pol_pub",
                                                    "pol_rep", "exp_pull")}
        self.policy_args = ["--policy-sub", ep["pol_pub"], "--policy-req", ep["pol_rep"]]
        st.start("policy", ["--dir", pdir, "--pub", ep["pol_pub"], "--rep", ep["pol_rep"],
                            "--republish-ms", "500"])
        st.start("aggregator", ["--pull", ep["agg_pull"], "--pub", ep["agg_pub"],
                                "--snapshot", ep["agg_snap"]])
        st.start("collector", ["--aggregator", ep["agg_pull"]] + self.policy_args)
        self.decider_eps = [zmq_endpoint() for _ in range(deciders)]
        self.deciders = [self.start_decider(e) for e in self.decider_eps]
        st.start("exporter", ["--pull", ep["exp_pull"]])
        port = free_port()
        self.gateway = st.start("gateway", ["--listen", "127.0.0.1:%d" % port,
                                            "--decider", ",".join(self.decider_eps),
                                            "--exporter", ep["exp_pull"]] + self.policy_args)
        self.api = "http://127.0.0.1:%d" % port

    def start_decider(self, endpoint):
        return self.stack.start("decider", ["--listen", endpoint, "--state-sub",
                                            self.ep["agg_pub"], "--state-snapshot",
                                            self.ep["agg_snap"]] + self.policy_args)

    def complete(self, k, timeout=10):
        body = {"model": MODEL, "prompt": "failover probe %d: tell me a short story" % k,
                "max_tokens": 4}
        status, _, doc = http_json("POST", self.api + "/v1/completions", body, timeout=timeout)
        return status, doc

    def wait_served(self):
        """Until a request is decided by a decider (not the backup) and succeeds."""
        def served():
            before = self.backups()
            return self.complete(0)[0] == 200 and self.backups() == before
        wait_until(served, 20, what="a request decided by a decider")

    def readyz(self):
        status, _, doc = http_json("GET", self.gateway.admin_url + "/readyz")
        return status, (doc or {}).get("detail", "")

    def metrics(self):
        return http("GET", self.gateway.admin_url + "/metrics")[2].decode()

    def backups(self):
        return metric(self.metrics(), "inferplane_gateway_route_backup_total") or 0


class Load:
    """`threads` clients sending completions back to back; every result kept."""

    def __init__(self, chain, threads=4):
        self.chain = chain
        self.results = []  # (start monotonic, status, error code or "")
        self.lock = threading.Lock()
        self.stop_flag = threading.Event()
        self.threads = [threading.Thread(target=self.run, args=(i,)) for i in range(threads)]
        for t in self.threads:
            t.start()

    def run(self, i):
        k = 0
        while not self.stop_flag.is_set() and k < 5000:
            k += 1
            t0 = time.monotonic()
            try:
                status, doc = self.chain.complete(i * 100000 + k)
                code = "" if status == 200 else str(((doc or {}).get("error") or {}).get("code"))
            except OSError as e:
                status, code = 0, repr(e)
            with self.lock:
                self.results.append((t0, status, code))

    def stop(self):
        self.stop_flag.set()
        for t in self.threads:
            t.join(30)
        return self.results


class TestDeciderFailover(unittest.TestCase):
    def assert_all_served(self, results, during):
        failed = [r for r in results if r[1] != 200]
        self.assertEqual(failed, [], "%d of %d requests failed" % (len(failed), len(results)))
        self.assertGreater(during, 0, "no request was made during the outage")

    def test_stopped_decider_under_load(self):
        c = Chain(self)
        c.wait_served()
        self.assertEqual(c.readyz(), (200, c.readyz()[1]))
        self.assertNotIn("degraded", c.readyz()[1])
        load = Load(c)
        time.sleep(0.5)
        c.deciders[0].signal(signal.SIGSTOP)
        t_stop = time.monotonic()
        try:
            # Degraded and saying so, while still ready: it can serve.
            def degraded():
                status, detail = c.readyz()
                return status == 200 and "degraded: no decider answers" in detail and detail
            detail = wait_until(degraded, OUTAGE_S, what="/readyz saying degraded")
            self.assertIn("routing load-only from the gateway's policy", detail)
            # a stopped process answers nothing: questions time out, new connections never
            # complete their handshake
            self.assertRegex(detail, r"\((timeout|unreachable)\)")
            m = c.metrics()
            self.assertEqual(metric(m, "inferplane_gateway_decider_up",
                                    '{endpoint="%s"}' % c.decider_eps[0]), 0)
            time.sleep(max(0, t_stop + OUTAGE_S - time.monotonic()))
        finally:
            c.deciders[0].signal(signal.SIGCONT)
        t_cont = time.monotonic()
        # Back: the decider decides again, /readyz says nothing more.
        wait_until(lambda: "degraded" not in c.readyz()[1] and c.readyz()[0] == 200, 10,
                   what="/readyz no longer degraded")
        time.sleep(0.5)
        results = load.stop()
        during = sum(1 for r in results if t_stop <= r[0] < t_cont)
        self.assert_all_served(results, during)
        self.assertGreater(c.backups(), 0)
        m = c.metrics()
        self.assertEqual(metric(m, "inferplane_gateway_decider_up",
                                '{endpoint="%s"}' % c.decider_eps[0]), 1)
        log = c.gateway.log()
        self.assertEqual(log.count("msg=route_degraded"), 1, log[-3000:])
        self.assertRegex(log, r"msg=decider_down endpoint=%s reason=(timeout|unreachable)"
                         % re.escape(c.decider_eps[0]))
        self.assertIn("msg=decider_up endpoint=%s" % c.decider_eps[0], log)
        self.assertIn("msg=route_recovered", log)

    def test_killed_and_restarted_decider_under_load(self):
        c = Chain(self)
        c.wait_served()
        load = Load(c)
        time.sleep(0.5)
        c.deciders[0].signal(signal.SIGKILL)
        t_kill = time.monotonic()
        wait_until(lambda: "degraded" in c.readyz()[1], OUTAGE_S, what="/readyz degraded")
        time.sleep(max(0, t_kill + OUTAGE_S - time.monotonic()))
        c.deciders[0] = c.start_decider(c.decider_eps[0])  # the same endpoint, a new process
        t_back = time.monotonic()
        wait_until(lambda: "degraded" not in c.readyz()[1], 15, what="a decider deciding again")
        results = load.stop()
        during = sum(1 for r in results if t_kill <= r[0] < t_back)
        self.assert_all_served(results, during)
        self.assertGreater(c.backups(), 0)
        before = c.backups()
        self.assertEqual(c.complete(1)[0], 200)
        self.assertEqual(c.backups(), before)  # decided by the new decider

    def test_two_deciders_one_stopped(self):
        c = Chain(self, deciders=2)
        c.wait_served()
        load = Load(c)
        time.sleep(0.5)
        c.deciders[0].signal(signal.SIGSTOP)
        t_stop = time.monotonic()
        try:
            def one_of_two():
                status, detail = c.readyz()
                return status == 200 and "1 of 2 answering" in detail and detail
            detail = wait_until(one_of_two, OUTAGE_S, what="/readyz: 1 of 2 deciders answering")
            self.assertIn("decider %s down" % c.decider_eps[0], detail)
            self.assertNotIn("degraded", detail)
            time.sleep(max(0, t_stop + OUTAGE_S - time.monotonic()))
        finally:
            c.deciders[0].signal(signal.SIGCONT)
        t_cont = time.monotonic()
        wait_until(lambda: "answering" not in c.readyz()[1], 10, what="both deciders up again")
        results = load.stop()
        during = sum(1 for r in results if t_stop <= r[0] < t_cont)
        self.assert_all_served(results, during)
        self.assertEqual(c.backups(), 0)  # the other decider answered every question
        m = c.metrics()
        self.assertGreater(metric(m, "inferplane_gateway_route_failovers_total"), 0)


if __name__ == "__main__":
    unittest.main()
