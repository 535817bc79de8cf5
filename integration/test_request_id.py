"""One request followed through every process by its id (issue 19): the client's x-request-id
(or the one the gateway makes) travels gateway -> decider (ROUTE_REQ.request_id) -> worker
(the X-Request-Id header) -> exporter (RECORD.request_id), and each process writes it in its
debug log line about that request: the gateway's access line, the decider's decision line
(with its explanation), the simulated worker's request_added line, the exporter's record line.

    cd integration && python3 -m unittest -v test_request_id
"""
import json
import re
import unittest

from lib.cluster import policy_yaml
from lib.harness import Stack, free_port, http, wait_until, zmq_endpoint
from test_exporter import metric, scrape

KEYS = 'tenants:\n  - {name: team-a, keys: ["ipk-test-reqid-team-a-5e6f7a8b9c0d1e2f"]}\n'
KEY = "ipk-test-reqid-team-a-5e6f7a8b9c0d1e2f"


def lines_with(proc, msg, request_id):
    """The log lines of `proc` whose msg is `msg` and whose id is `request_id` (the value may
    be quoted)."""
    pat = re.compile(r'\bmsg=%s\b.*\bid="?%s"?(\s|$)' % (re.escape(msg), re.escape(request_id)))
    return [line for line in proc.log().splitlines() if pat.search(line)]


class TestRequestIdInEveryLog(unittest.TestCase):
    def setUp(self):
        st = self.st = Stack(self)
        # the harness starts the others with --log-level debug, a worker without an admin port
        self.w0 = st.start_sim("w0", extra=["--log-level", "debug"])
        st.write("policy/p.yaml", policy_yaml([self.w0]))
        keys = st.write("keys.yaml", KEYS)
        self.gw = st.start_chain(st.dir + "/policy", ["--keys-file", keys])
        self.dec = [p for p in st.procs if p.name == "decider"][0]
        wait_until(lambda: metric(scrape(self.dec.admin_url),
                                  "inferplane_decider_state_workers") == 1, 15,
                   what="the decider to know the worker")

    def chat(self, headers, stream=False):
        body = {"model": "sim-model", "max_tokens": 3, "stream": stream,
                "messages": [{"role": "user", "content": "Where does this request go?"}]}
        h = {"content-type": "application/json", "authorization": "Bearer " + KEY}
        h.update(headers)
        status, rh, _ = http("POST", self.gw.api + "/v1/chat/completions",
                             json.dumps(body).encode(), h, timeout=10)
        self.assertEqual(status, 200)
        return {k.lower(): v for k, v in rh.items()}

    def assert_in_every_log(self, rid):
        ex = self.gw.exporter
        # the exporter's line comes last (the record is sent when the answer is complete)
        wait_until(lambda: lines_with(ex, "record", rid), 10,
                   what="the exporter's record line for %s" % rid)
        found = {
            "gateway": lines_with(self.gw, "request", rid),
            "decider": lines_with(self.dec, "decision", rid),
            "sim": lines_with(self.w0, "request_added", rid),
            "exporter": lines_with(ex, "record", rid),
        }
        for proc, lines in found.items():
            self.assertEqual(len(lines), 1, "%s's lines with id %s: %s" % (proc, rid, lines))
        # what each line says about the request
        self.assertIn("tenant=team-a", found["gateway"][0])
        self.assertIn("worker=w0", found["gateway"][0])
        dec = found["decider"][0]
        self.assertIn("level=debug", dec)
        self.assertIn("via=route_req", dec)
        self.assertIn("pool=chat", dec)
        self.assertIn("target=w0", dec)
        self.assertIn('tenant="team-a"', dec)
        # the explanation: a terse decision (info level) would have an empty detail
        detail = re.search(r'detail="((?:[^"\\]|\\.)*)"', dec)
        self.assertTrue(detail and detail.group(1), dec)
        self.assertIn("level=debug", found["sim"][0])
        self.assertIn('tenant="team-a"', found["exporter"][0])
        self.assertIn("worker=w0", found["exporter"][0])
        self.assertIn("status=200", found["exporter"][0])
        return found

    def test_client_request_id_in_every_log(self):
        rid = "client-req-7f3a9c"
        rh = self.chat({"x-request-id": rid})
        self.assertEqual(rh.get("x-request-id"), rid)
        self.assert_in_every_log(rid)
        # a streamed request too, with another id
        self.chat({"x-request-id": "client-req-stream-1"}, stream=True)
        self.assert_in_every_log("client-req-stream-1")

    def test_gateway_made_request_id_in_every_log(self):
        rh = self.chat({})
        rid = rh.get("x-request-id")
        self.assertTrue(rid and rid.startswith("ipl-"), rh)
        self.assert_in_every_log(rid)


class TestDecisionsNotLoggedAtInfo(unittest.TestCase):
    def test_info_level_writes_no_decision_lines(self):
        # A second decider at --log-level info (its own admin port: the harness would add
        # debug) and a gateway on it: requests route, and no decision line is written.
        st = Stack(self)
        w0 = st.start_sim("w0")
        st.write("policy/p.yaml", policy_yaml([w0]))
        gw = st.start_chain(st.dir + "/policy")
        agg = [p for p in st.procs if p.name == "aggregator"][0].argv
        c = gw.chain
        listen, port = zmq_endpoint(), free_port()
        dec = st.start("decider", [
            "--listen", listen, "--state-sub", agg[agg.index("--pub") + 1],
            "--state-snapshot", agg[agg.index("--snapshot") + 1], "--policy-sub",
            c["policy_sub"], "--policy-req", c["policy_req"],
            "--admin-listen", "127.0.0.1:%d" % port, "--log-level", "info"], admin=False)
        dec.admin_url = "http://127.0.0.1:%d" % port
        wait_until(lambda: metric(scrape(dec.admin_url), "inferplane_decider_state_workers") == 1,
                   15, what="the info-level decider to know the worker")
        api_port = free_port()
        quiet = st.start("gateway", ["--listen", "127.0.0.1:%d" % api_port, "--decider", listen,
                                     "--exporter", c["exporter"], "--policy-sub",
                                     c["policy_sub"], "--policy-req", c["policy_req"]])
        body = {"model": "sim-model", "max_tokens": 2,
                "messages": [{"role": "user", "content": "quiet"}]}
        status, _, _ = http("POST", "http://127.0.0.1:%d/v1/chat/completions" % api_port,
                            json.dumps(body).encode(),
                            {"content-type": "application/json", "x-request-id": "quiet-1"})
        self.assertEqual(status, 200)
        wait_until(lambda: lines_with(gw.exporter, "record", "quiet-1"), 10, what="the record")
        self.assertTrue(lines_with(quiet, "request", "quiet-1"))  # the gateway is at debug
        self.assertEqual(metric(scrape(dec.admin_url), "inferplane_decider_decisions_total"), 1)
        self.assertNotIn("msg=decision", dec.log())


if __name__ == "__main__":
    unittest.main()
