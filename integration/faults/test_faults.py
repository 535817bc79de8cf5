"""The fault suite, short form (issue 20; part of `make test`): one cluster — three simulated
workers, policy, aggregator, collector, decider, exporter and two gateways (faults/fleet.py) —
under steady load from inferplane-bench through both gateways, and each fault once, in turn
(faults/catalogue.py): kill -9 and restart the collector, aggregator, policy, decider,
exporter and one gateway; kill a worker; SIGSTOP a worker; stall a worker's requests; cut the
collector off from its workers; restart every worker.

Each fault is two tests (faults/phase.py):
  test_NN_<fault>           for clients: no request lost (each ends with its whole answer or
                            a clear error, counted per gateway; only requests in flight on
                            what was killed or stopped may fail, none at all for a
                            control-plane process), none hung (the bench's --request-timeout
                            bounds each) or stalled past the gateways' timeouts, no process died
  test_NN_<fault>_routing   routing cache-aware again within 5 s of the fault's end (the probe,
                            faults/probe.py), no healthy worker still avoided then, median TTFT
                            and cache-hit ratio in a window 5 s after the end within 10% of
                            the window before
and test_99_rss_bounded: no process grew by more than 30 MB or 50% of its RSS over the run.

$IPL_FAULTS_FIGURES names a file for the figures (JSON); a table goes to stderr. The long form
is faults/soak.py (`make soak`). About two and a half minutes:

    cd integration && python3 -m unittest -v faults.test_faults
"""
import json
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from faults.catalogue import faults  # noqa: E402
from faults.fleet import Fleet  # noqa: E402
from faults.phase import (Plan, figures, request_problems, routing_problems,  # noqa: E402
                          run_phase, warm)
from faults.report import log_excerpt, rss_problems, table, write_figures  # noqa: E402

FAULTS = {f.name: f for f in faults()}


class TestFaults(unittest.TestCase):
    plan = Plan.short()
    results = {}
    rss_table = {}

    @classmethod
    def setUpClass(cls):
        cls.fleet = Fleet()
        try:
            warm(cls.fleet, cls.plan, cls.fleet.stack.dir)
        except BaseException:
            cls.fleet.stop()
            raise
        cls.rss_samples = [cls.fleet.rss()]

    @classmethod
    def tearDownClass(cls):
        cls.fleet.stop()
        figs = [figures(r) for r in cls.results.values()]
        write_figures(os.environ.get("IPL_FAULTS_FIGURES"), cls.plan, figs, cls.rss_table)
        sys.stderr.write("\n" + table(figs, cls.rss_table) + "\n")

    def fault(self, name):
        """Runs the fault and checks what clients saw."""
        dead = self.fleet.dead()
        if dead:  # an earlier fault left a process dead: that test failed; start it again
            for key in dead:
                self.fleet.restart(key, ready=True)
        res = run_phase(self.fleet, self.plan, FAULTS[name], len(self.results) + 1,
                        self.fleet.stack.dir)
        self.results[name] = res
        self.rss_samples.append(res["rss"])
        res["log_excerpt"] = log_excerpt(self.fleet, res)
        found = request_problems(res, self.plan)
        if found:
            self.fail("%s:\n- %s\n%s\n%s" % (name, "\n- ".join(found), json.dumps(figures(res)),
                                             res["log_excerpt"]))

    def routing(self, name):
        """Checks how routing came back after the fault (run by the test before)."""
        res = self.results.get(name)
        if res is None:
            self.fail("%s did not run" % name)
        found = routing_problems(res, self.plan)
        if found:
            self.fail("%s:\n- %s\n%s\n%s" % (name, "\n- ".join(found), json.dumps(figures(res)),
                                             res["log_excerpt"]))

    def test_01_kill_collector(self):
        self.fault("kill_collector")

    def test_01_kill_collector_routing(self):
        self.routing("kill_collector")

    def test_02_kill_aggregator(self):
        self.fault("kill_aggregator")

    def test_02_kill_aggregator_routing(self):
        self.routing("kill_aggregator")

    def test_03_kill_policy(self):
        self.fault("kill_policy")

    def test_03_kill_policy_routing(self):
        self.routing("kill_policy")

    def test_04_kill_decider(self):
        self.fault("kill_decider")

    # Fails in some runs (docs/faults.md, "What it found", 3): while the decider is down the
    # gateways' backup routes by load only, and early in a run, when each prefix is cached on
    # one worker, the misses leave queues past the 2 s first-byte timeout; retries on top of
    # them keep routing degraded 7-8 s after the decider is back.
    def test_04_kill_decider_routing(self):
        self.routing("kill_decider")

    def test_05_kill_exporter(self):
        self.fault("kill_exporter")

    def test_05_kill_exporter_routing(self):
        self.routing("kill_exporter")

    def test_06_kill_gateway(self):
        self.fault("kill_gateway")

    def test_06_kill_gateway_routing(self):
        self.routing("kill_gateway")

    def test_07_kill_worker(self):
        self.fault("kill_worker")

    # Was defect 2 (docs/faults.md): a worker restarted with an empty cache took back only
    # 7-23% of the requests; ttft now rebalances toward a newcomer (decider_strategies.c).
    def test_07_kill_worker_routing(self):
        self.routing("kill_worker")

    def test_08_stop_worker(self):
        self.fault("stop_worker")

    # Was defect 1 (docs/faults.md): the breaker now opens for --breaker-base-cooldown-ms
    # (1 s), doubling only while probes fail, so the worker is back within about a second.
    def test_08_stop_worker_routing(self):
        self.routing("stop_worker")

    def test_09_slow_worker(self):
        self.fault("slow_worker")

    # Was defect 1 (docs/faults.md): fixed by the breaker's backoff.
    def test_09_slow_worker_routing(self):
        self.routing("slow_worker")

    def test_10_cut_collector(self):
        self.fault("cut_collector")

    def test_10_cut_collector_routing(self):
        self.routing("cut_collector")

    def test_11_restart_workers(self):
        self.fault("restart_workers")

    def test_11_restart_workers_routing(self):
        self.routing("restart_workers")

    def test_99_rss_bounded(self):
        time.sleep(0.5)
        found, type(self).rss_table = rss_problems(self.rss_samples, self.fleet.rss())
        if found:
            self.fail("\n".join(found))


if __name__ == "__main__":
    unittest.main()
