"""`make run`'s script, tools/run-stack: the local stack starts, gets ready, routes a request
through the gateway and stops without leaving a process behind; and it refuses clearly to start
when it cannot (ports busy, another instance, missing binaries).

The stack uses the fixed ports of docs/operations.md, so the full run is skipped (with the
reason) when any of them is in use, e.g. while a developer's `make run` is up.
"""
import os
import signal
import socket
import subprocess
import tempfile
import time
import unittest

from lib.harness import BUILD, ROOT

RUN_STACK = os.path.join(ROOT, "tools", "run-stack")
LOCK = os.path.join(os.environ.get("TMPDIR", "/tmp"), "inferplane-run-stack.lock")

# Every port the local stack binds (run-stack's PORT_OWNER table).
PORTS = ([8080] + list(range(9101, 9107)) + [7001, 7002, 7003, 7011, 7012, 7021, 7031]
         + list(range(8100, 8104)) + list(range(5600, 5604)) + list(range(5700, 5704)))

RC_BUSY = 75  # run-stack: ports busy or another run-stack holds the lock


def busy_ports(ports=PORTS):
    """Ports that cannot be bound on 127.0.0.1 (SO_REUSEADDR, like the services)."""
    out = []
    for p in ports:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", p))
        except OSError:
            out.append(p)
        finally:
            s.close()
    return out


def run_stack(args, env_extra=None, timeout=120.0):
    """Runs tools/run-stack in its own session; returns (rc, stdout, stderr). On timeout it is
    sent SIGTERM (its trap stops its children), then the whole session gets SIGKILL."""
    env = dict(os.environ)
    env["BUILD"] = BUILD
    env.update(env_extra or {})
    p = subprocess.Popen([RUN_STACK] + list(args), cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGTERM)
        try:
            out, err = p.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, err = p.communicate()
        raise AssertionError("run-stack %s did not finish within %.0fs:\n%s\n%s"
                             % (" ".join(args), timeout, out.decode(errors="replace"),
                                err.decode(errors="replace")[-4000:]))
    return p.returncode, out.decode(errors="replace"), err.decode(errors="replace")


class TestRunStack(unittest.TestCase):
    def setUp(self):
        self.logs = tempfile.mkdtemp(prefix="ipl-run-stack-")
        self.env = {"INFERPLANE_RUN_LOG_DIR": self.logs}

    def test_check_starts_routes_and_stops(self):
        busy = busy_ports()
        if busy:
            self.skipTest("the local stack's fixed ports are in use (%s); stop `make run` or "
                          "whatever holds them to run this test" % ", ".join(map(str, busy)))
        rc, out, err = run_stack(["--check"], self.env)
        if rc == RC_BUSY:
            self.skipTest("run-stack could not start (another stack is running?): "
                          + err.strip()[-300:])
        self.assertEqual(rc, 0, "run-stack --check failed:\n%s\n%s" % (out, err[-4000:]))
        self.assertTrue(out.startswith("OK"), out)
        # Every process it started is gone: all its ports can be bound again (bounded wait).
        deadline = time.monotonic() + 5
        while busy_ports() and time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertEqual(busy_ports(), [], "ports still held after run-stack --check exited")
        # One log per process, where the docs say.
        names = sorted(os.listdir(self.logs))
        for n in ("aggregator", "collector", "decider", "exporter", "gateway", "policy",
                  "sim-w0", "sim-w1", "sim-w2", "sim-w3"):
            self.assertIn(n + ".log", names)

    def test_port_in_use_is_refused_with_its_name(self):
        port = 5703  # sim w3's replay ROUTER; the last port the stack binds
        if busy_ports([port]):
            self.skipTest("port %d is already in use" % port)
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            s.close()
            self.skipTest("port %d was taken meanwhile" % port)
        s.listen(1)
        try:
            rc, out, err = run_stack(["--check"], self.env, timeout=30)
        finally:
            s.close()
        if rc == RC_BUSY and "another tools/run-stack" in err:
            self.skipTest("another run-stack is running on this machine")
        self.assertEqual(rc, RC_BUSY, out + err)
        self.assertIn("port 5703 (sim w3 replay ROUTER) is already in use", err)
        self.assertEqual(os.listdir(self.logs), [], "nothing may start when a port is busy")

    def test_second_instance_is_refused(self):
        import fcntl
        with open(LOCK, "a") as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                self.skipTest("another run-stack is running on this machine")
            rc, out, err = run_stack(["--check"], self.env, timeout=30)
        self.assertEqual(rc, RC_BUSY, out + err)
        self.assertIn("another tools/run-stack is running", err)

    def test_missing_binaries_are_named(self):
        rc, out, err = run_stack(["--check"], dict(self.env, BUILD="/nonexistent-build"),
                                 timeout=30)
        self.assertEqual(rc, 2, out + err)
        self.assertIn("missing binaries: /nonexistent-build/inferplane-sim", err)
        self.assertIn("make", err)

    def test_unknown_argument_is_a_usage_error(self):
        rc, out, err = run_stack(["--chek"], self.env, timeout=30)
        self.assertEqual(rc, 2, out + err)
        self.assertIn("unknown argument '--chek'", err)


if __name__ == "__main__":
    unittest.main()
