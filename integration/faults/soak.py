"""The fault suite, long form (`make soak`): the short form's faults (faults/catalogue.py) on
one cluster, every fault repeated $IPL_SOAK_ROUNDS times (2 by default), under more load (25
requests/s through each gateway, 20 in the short form), with 10 s windows before and after
each fault and its holds doubled (Plan.soak()): about six minutes a round.

The same checks as faults/test_faults.py for every fault of every round, and RSS: no process
may grow by more than 30 MB or 50% over the run, nor — the steady state, where a leak shows —
by more than STEADY_MB and STEADY_RATIO from the end of the first round to the end (a process
restarted since is measured from its new start).

    cd integration && IPL_SOAK_ROUNDS=2 IPL_FAULTS_FIGURES=/tmp/soak.json \\
        python3 -m unittest -v faults.soak
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
from faults.report import MB, log_excerpt, rss_problems, table, write_figures  # noqa: E402

STEADY_MB = 8
STEADY_RATIO = 0.2


class TestSoak(unittest.TestCase):
    def test_soak(self):
        plan = Plan.soak()
        rounds = int(os.environ.get("IPL_SOAK_ROUNDS", "2"))
        fleet = Fleet()
        self.addCleanup(fleet.stop)
        warm(fleet, plan, fleet.stack.dir, seconds=10)
        samples = [fleet.rss()]
        round_end = None
        figs, found = [], []
        index = 0
        for rnd in range(1, rounds + 1):
            for fault in faults():
                for key in fleet.dead():
                    fleet.restart(key, ready=True)
                index += 1
                res = run_phase(fleet, plan, fault, index, fleet.stack.dir)
                f = figures(res)
                f["round"] = rnd
                figs.append(f)
                samples.append(res["rss"])
                bad = request_problems(res, plan) + routing_problems(res, plan)
                for b in bad:
                    found.append("round %d, %s: %s" % (rnd, fault.name, b))
                if request_problems(res, plan):
                    found.append(log_excerpt(fleet, res, per_proc=6))
                sys.stderr.write("round %d %-16s %s\n" % (rnd, fault.name, json.dumps(
                    {k: f[k] for k in ("sent", "clear_error", "lost", "hung", "recovery_s",
                                       "ttft_before_ms", "ttft_after_ms",
                                       "ttft_net_change_pct", "machine_change_pct")})))
            if rnd == 1:
                round_end = fleet.rss()
        time.sleep(0.5)
        last = fleet.rss()
        grew, rss = rss_problems(samples, last)
        found += grew
        if round_end is not None and rounds > 1:
            steady, _ = rss_problems([round_end] + samples, last, STEADY_MB * MB,
                                              STEADY_RATIO)
            found += ["steady state (from the end of round 1): " + s for s in steady]
        write_figures(os.environ.get("IPL_FAULTS_FIGURES"), plan, figs, rss)
        sys.stderr.write("\n" + table(figs, rss) + "\n")
        if found:
            self.fail("\n".join(found))


if __name__ == "__main__":
    unittest.main()
