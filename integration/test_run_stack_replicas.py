"""`make run REPLICAS="decider=3 gateway=2"`: tools/run-stack starts that many deciders and
gateways on the documented ports (replica k: the first one's + 100*k), the deciders subscribed
to one another's routings and the gateways to one another's limits, and --check sends a request
through every gateway. A REPLICAS value it cannot honour is refused before anything starts.

Like test_run_stack, the full run uses the fixed ports and is skipped (with the reason) when one
of them is in use.

    cd integration && python3 -m unittest -v test_run_stack_replicas
"""
import os
import re
import tempfile
import time
import unittest

from test_run_stack import PORTS, RC_BUSY, busy_ports, run_stack

# The replicas' own ports (tools/run-stack: REPLICAS).
REPLICA_PORTS = [9204, 9304, 7121, 7221, 7022, 7122, 7222,  # deciders 2, 3: admin, ROUTER, peers
                 8180, 9206, 7041, 7141]                    # gateway 2: API, admin; limits PUBs


class TestRunStackReplicas(unittest.TestCase):
    def setUp(self):
        self.logs = tempfile.mkdtemp(prefix="ipl-run-stack-")

    def test_three_deciders_and_two_gateways(self):
        busy = busy_ports(PORTS + REPLICA_PORTS)
        if busy:
            self.skipTest("the local stack's fixed ports are in use (%s)" % ", ".join(map(str, busy)))
        env = {"INFERPLANE_RUN_LOG_DIR": self.logs, "REPLICAS": "decider=3 gateway=2"}
        rc, out, err = run_stack(["--check"], env)
        if rc == RC_BUSY:
            self.skipTest("run-stack could not start (another stack is running?): " + err[-300:])
        self.assertEqual(rc, 0, "run-stack --check failed:\n%s\n%s" % (out, err[-4000:]))
        self.assertTrue(out.startswith("OK: 13 processes ready"), out)
        self.assertIn("through each of the 2 gateways", out)
        deadline = time.monotonic() + 5
        while busy_ports(PORTS + REPLICA_PORTS) and time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertEqual(busy_ports(PORTS + REPLICA_PORTS), [], "ports still held after --check")

        def log(name):
            with open(os.path.join(self.logs, name + ".log")) as f:
                return f.read()
        ep = "tcp://127.0.0.1:%d"
        for k, name in enumerate(("decider", "decider-2", "decider-3")):
            m = re.search(r'msg=listening listen="([^"]+)".* peer_pub="([^"]+)" peers="([^"]+)"',
                          log(name))
            self.assertIsNotNone(m, log(name)[-2000:])
            self.assertEqual(m.group(1), ep % (7021 + 100 * k))
            self.assertEqual(m.group(2), ep % (7022 + 100 * k))
            others = sorted(ep % (7022 + 100 * j) for j in range(3) if j != k)
            self.assertEqual(sorted(m.group(3).split(",")), others)
        for k, name in enumerate(("gateway", "gateway-2")):
            text = log(name)
            self.assertRegex(text, r'msg=listening api="127\.0\.0\.1:%d"' % (8080 + 100 * k))
            self.assertIn("decider=" + ep % (7021 + 100 * k), text, "gateway k asks decider k")
            self.assertRegex(text, r"msg=limits .*listen=%s peers=1" % re.escape(ep % (7041 + 100 * k)))

    def test_unknown_service_or_count_is_refused(self):
        for bad, why in (("exporter=2", "'exporter=2' is not decider=N or gateway=N"),
                         ("decider=0", "'decider=0'"), ("gateway=10", "'gateway=10'"),
                         ("decider", "'decider'")):
            rc, out, err = run_stack(["--check"], {"INFERPLANE_RUN_LOG_DIR": self.logs,
                                                   "REPLICAS": bad}, timeout=30)
            self.assertEqual(rc, 2, (bad, out, err))
            self.assertIn(why, err)
        self.assertEqual(os.listdir(self.logs), [], "nothing may start")


if __name__ == "__main__":
    unittest.main()
