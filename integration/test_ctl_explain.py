"""inferplanectl explain, black-box: the built binary against a copy of examples/policy-full in a
temporary directory (which rule decides, which did not and why, the action, --json, invalid
policies and bad input), and with --decider against a real policy + aggregator + decider
(the decision next to the explanation; inferplanectl route's --label and --header).

    cd integration && python3 -m unittest -v test_ctl_explain
"""
import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

from lib.harness import ROOT, Stack, binary, http_json, wait_until, zmq_endpoint

EXAMPLE = os.path.join(ROOT, "examples", "policy-full")
# The rules of examples/policy-full in evaluation order (priority, then list order).
RULES = ["guardrails/pii-stays-local", "guardrails/blocked-tenant", "guardrails/huge-prompts",
         "routing/nightly-batch", "routing/burst-to-cloud", "routing/busy-large",
         "routing/small-unless-large-is-faster", "routing/team-a-small-only"]


def ctl(*args, timeout=20):
    return subprocess.run([binary("inferplanectl")] + list(args), capture_output=True, text=True,
                          timeout=timeout)


def rule_lines(stdout):
    """{"policy/rule": (mark, why)} from explain's rule lines ("  ✓ policy/rule  why")."""
    out = {}
    for line in stdout.splitlines():
        m = re.match(r"^  ([✓✗·]) (\S+)\s+(.*)$", line)
        if m:
            out[m.group(2)] = (m.group(1), m.group(3))
    return out


class PolicyCopy:
    """examples/policy-full copied into a temporary directory (removed at test cleanup)."""

    def __init__(self, test):
        self.dir = os.path.join(tempfile.mkdtemp(prefix="ipl-explain-"), "policy")
        test.addCleanup(shutil.rmtree, os.path.dirname(self.dir), True)
        shutil.copytree(EXAMPLE, self.dir)

    def path(self, name):
        return os.path.join(self.dir, name)

    def edit(self, name, old, new):
        with open(self.path(name)) as f:
            text = f.read()
        assert old in text, (name, old)
        with open(self.path(name), "w") as f:
            f.write(text.replace(old, new, 1))

    def explain(self, *args):
        return ctl("explain", "--policy", self.dir, *args)


class TestCtlExplain(unittest.TestCase):
    def setUp(self):
        self.policy = PolicyCopy(self)

    def test_pii_request_stays_local(self):
        out = self.policy.explain("--model", "chat", "--tenant", "team-a", "--label", "pii",
                                  "--time", "Mon 14:05")
        self.assertEqual(out.returncode, 0, out.stderr)
        lines = rule_lines(out.stdout)
        self.assertEqual(list(lines), RULES, out.stdout)
        self.assertEqual(lines["guardrails/pii-stays-local"],
                         ("✓", "keepLocal: personal data is processed on local workers only"))
        for name in RULES[1:]:
            self.assertEqual(lines[name], ("·", "not evaluated (an earlier rule decided)"))
        self.assertIn("action (rule guardrails/pii-stays-local): keepLocal: personal data",
                      out.stdout)
        self.assertIn("labels [pii]", out.stdout)
        self.assertIn("an idle pool, the default", out.stdout)

    def test_labels_found_in_the_prompt(self):
        """The policy's spec.labels label --prompt as the gateway would: an e-mail address makes
        it personal data without any --label."""
        out = self.policy.explain("--model", "chat", "--time", "Mon 14:05", "--prompt",
                                  "Send the report to jan.novak@example.cz, thanks")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("labels found in --prompt (as the gateway finds them): pii, pii:email",
                      out.stderr)
        self.assertEqual(rule_lines(out.stdout)["guardrails/pii-stays-local"][0], "✓")
        out = self.policy.explain("--model", "chat", "--time", "Mon 14:05", "--prompt",
                                  "Send the report to the team, thanks")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertNotIn("pii", out.stderr)
        self.assertEqual(rule_lines(out.stdout)["guardrails/pii-stays-local"][0], "✗")

    def test_team_a_shows_every_earlier_rule_and_why(self):
        out = self.policy.explain("--model", "small-model", "--tenant", "team-a",
                                  "--prompt-tokens", "5000", "--time", "Wed 14:05")
        self.assertEqual(out.returncode, 0, out.stderr)
        lines = rule_lines(out.stdout)
        want = {
            "guardrails/pii-stays-local": ("✗", 'label "pii" missing'),
            "guardrails/blocked-tenant":
                ("✗", 'tenant "team-a" is not one of [suspended-team]'),
            "guardrails/huge-prompts": ("✗", "prompt 5000 tokens below min 100000"),
            "routing/nightly-batch":
                ("✗", "header x-inferplane-class=batch absent (no x-inferplane-class header)"),
            "routing/burst-to-cloud": ("✗", 'model "small-model" is not one of [chat]'),
            "routing/busy-large": ("✗", 'model "small-model" is not one of [large-model]'),
            "routing/small-unless-large-is-faster": ("✗", "prompt 5000 tokens above max 4000"),
            "routing/team-a-small-only": ("✓", "route: pool chat, targets [small]"),
        }
        self.assertEqual(lines, want, out.stdout)
        self.assertIn("(pool chat, TTFT SLO 800 ms)", out.stdout)
        self.assertIn("Wed 14:05 UTC", out.stdout)

    def test_pool_state_and_time(self):
        batch = ["--model", "chat", "--header", "X-Inferplane-Class=batch"]
        # the window is Mon-Fri 22:00-06:00: Tuesday night holds, Saturday 01:00 (Friday's
        # night) too, Wednesday morning does not
        for when, mark in (("Tue 23:00", "✓"), ("Sat 01:00", "✓"), ("Wed 07:00", "✗")):
            out = self.policy.explain(*batch, "--time", when, "--kv-utilization", "10")
            self.assertEqual(out.returncode, 0, out.stderr)
            got = rule_lines(out.stdout)["routing/nightly-batch"]
            self.assertEqual(got[0], mark, (when, out.stdout))
        self.assertEqual(got[1], "time Wed 07:00 UTC outside Mon-Fri 22:00-06:00")
        out = self.policy.explain(*batch, "--time", "Tue 23:00", "--kv-utilization", "70")
        self.assertEqual(rule_lines(out.stdout)["routing/nightly-batch"],
                         ("✓", "admitBatch: hold (KV utilization not under 60%)"))
        self.assertIn("queue depth 0 (default), KV utilization 70%", out.stdout)
        # predicted TTFT against the pool's SLO (800 ms): burst-to-cloud on chat matches whatever
        # the TTFT (its spill decides by the hysteresis); a copy with the match condition
        out = self.policy.explain("--model", "chat", "--predicted-ttft-ms", "120",
                                  "--time", "Wed 12:00")
        self.assertEqual(rule_lines(out.stdout)["routing/burst-to-cloud"][0], "✓", out.stdout)
        self.policy.edit("policy.yaml", "        models: [chat]                    #",
                         "        pool: {predictedTtftAboveSlo: true}\n        models: [chat] #")
        out = self.policy.explain("--model", "chat", "--predicted-ttft-ms", "900",
                                  "--time", "Wed 12:00")
        lines = rule_lines(out.stdout)
        self.assertEqual(lines["routing/burst-to-cloud"][0], "✓", out.stdout)
        self.assertIn("spill: to provider burst while the predicted TTFT is above the SLO",
                      lines["routing/burst-to-cloud"][1])
        out = self.policy.explain("--model", "chat", "--predicted-ttft-ms", "120",
                                  "--time", "Wed 12:00")
        self.assertEqual(rule_lines(out.stdout)["routing/burst-to-cloud"],
                         ("✗", "pool predicted TTFT 120.0 ms within the SLO 800 ms"))
        # queue depth and KV utilization of the large pool
        out = self.policy.explain("--model", "large-model", "--queue-depth", "33",
                                  "--kv-utilization", "50", "--time", "Wed 12:00")
        self.assertEqual(rule_lines(out.stdout)["routing/busy-large"],
                         ("✗", "pool KV utilization 50% not above 90%"))
        out = self.policy.explain("--model", "large-model", "--queue-depth", "33",
                                  "--kv-utilization", "91", "--time", "Wed 12:00")
        self.assertEqual(rule_lines(out.stdout)["routing/busy-large"],
                         ("✓", "route: pool large, targets [cloud]"))

    def test_prompt_is_tokenized_like_route(self):
        text = "hello world " * 2500
        tok = subprocess.run([binary("inferplanectl"), "tokenize", "--tokenizer", "builtin"],
                             input=text, capture_output=True, text=True, timeout=20)
        self.assertEqual(tok.returncode, 0, tok.stderr)
        n = len(tok.stdout.split())
        self.assertGreater(n, 4000)
        out = self.policy.explain("--model", "small-model", "--prompt", text,
                                  "--time", "Wed 12:00")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("%d prompt tokens (--prompt, tokenized)" % n, out.stdout)
        self.assertEqual(rule_lines(out.stdout)["routing/small-unless-large-is-faster"],
                         ("✗", "prompt %d tokens above max 4000" % n))

    def test_json(self):
        out = self.policy.explain("--model", "chat", "--tenant", "suspended-team",
                                  "--label", "eu", "--header", "X-Trace=1", "--json")
        self.assertEqual(out.returncode, 0, out.stderr)
        doc = json.loads(out.stdout)
        self.assertTrue(doc["valid"])
        self.assertEqual(doc["policy"], self.policy.dir)
        self.assertRegex(doc["hash"], r"^[0-9a-f]{16}$")
        self.assertEqual(["%s/%s" % (r["policy"], r["name"]) for r in doc["rules"]], RULES)
        self.assertEqual([(r["matched"], r["evaluated"]) for r in doc["rules"]],
                         [(False, True), (True, True)] + [(False, False)] * 6)
        self.assertEqual(doc["rules"][0]["why"], 'label "pii" missing')
        self.assertEqual(doc["rules"][2]["why"], "not evaluated")
        self.assertEqual(doc["action"], {
            "action": "reject", "rule": "guardrails/blocked-tenant", "status": 403,
            "reason": "tenant suspended; contact the platform team",
            "text": "reject: 403, tenant suspended; contact the platform team"})
        self.assertIsNone(doc["decision"])
        rq = doc["request"]
        self.assertEqual((rq["model"], rq["tenant"], rq["pool"], rq["ttft_slo_ms"]),
                         ("chat", "suspended-team", "chat", 800))
        self.assertEqual((rq["labels"], rq["headers"]), (["eu"], ["x-trace=1"]))
        self.assertEqual(rq["time_from"], "now")
        self.assertRegex(rq["time"], r"^(Mon|Tue|Wed|Thu|Fri|Sat|Sun) \d\d:\d\d$")
        self.assertTrue(doc["pool_state"]["assumed_idle"])
        # no rule matches: action none, every rule evaluated
        self.policy.edit("policy.yaml", "    - name: team-a-small-only\n"
                         "      match: {tenants: [team-a]}\n"
                         "      route: {pool: chat, targets: [small]}\n", "")
        doc = json.loads(self.policy.explain("--model", "large-model", "--json",
                                             "--time", "Wed 12:00").stdout)
        self.assertEqual(len(doc["rules"]), 7)
        self.assertTrue(all(r["evaluated"] and not r["matched"] for r in doc["rules"]), doc)
        self.assertEqual((doc["action"]["action"], doc["action"]["rule"]), ("none", None))

    def test_invalid_policy_exits_2_with_file_line_col(self):
        self.policy.edit("pools.yaml", "- {workerSet: large, role: primary, weight: 1}",
                         "- {workerSet: huge, role: primary, weight: 1}")
        out = self.policy.explain("--model", "chat")
        self.assertEqual(out.returncode, 2, out.stdout + out.stderr)
        self.assertRegex(out.stdout, r'(?m)^pools\.yaml:\d+:\d+: InferencePool "chat": '
                                     r'spec\.targets\[1\]\.workerSet "huge" does not exist')
        # (the prefer rule naming target "large" of that pool fails too)
        self.assertRegex(out.stdout, r'(?m)^policy\.yaml:\d+:\d+: InferencePolicy "routing": '
                                     r'spec\.rules\[3\]\.prefer')
        self.assertIn("invalid (2 errors): nothing to explain", out.stderr)
        # the same lines as inferplanectl validate prints
        self.assertEqual(out.stdout, ctl("validate", self.policy.dir).stdout)
        doc = json.loads(self.policy.explain("--model", "chat", "--json").stdout)
        self.assertFalse(doc["valid"])
        self.assertEqual(len(doc["errors"]), 2)
        self.assertRegex(doc["errors"][0], r"^pools\.yaml:\d+:\d+: ")

    def test_bad_input_exits_2(self):
        cases = [
            (["--model", "chat", "--bogus"], "unknown or incomplete option '--bogus'"),
            ([], "--policy DIR and --model MODEL are required"),
            (["--model", "chat", "--time", "Mon 25:00"], "--time 'Mon 25:00': want a weekday"),
            (["--model", "chat", "--time", "someday"], "--time 'someday': want a weekday"),
            (["--model", "chat", "--header", "x-class"], "--header 'x-class': want NAME=VALUE"),
            (["--model", "chat", "--kv-utilization", "101"], "from 0 to 100"),
            (["--model", "chat", "--prompt", "x", "--prompt-tokens", "1"], "not both"),
        ]
        for args, needle in cases:
            with self.subTest(args=args):
                out = self.policy.explain(*args)
                self.assertEqual(out.returncode, 2, out.stdout)
                self.assertIn(needle, out.stderr)
                self.assertEqual(out.stdout, "")
        self.assertEqual(ctl("explain", "--model", "chat").returncode, 2)  # no --policy
        out = ctl("explain", "--help")
        self.assertEqual(out.returncode, 0)
        self.assertIn("--predicted-ttft-ms", out.stdout)
        self.assertIn("explain", ctl("--help").stdout)


class TestCtlExplainWithDecider(unittest.TestCase):
    """explain --decider and route --label/--header against policy + aggregator + decider
    serving the copy of examples/policy-full, with load samples for its workers pushed by a
    test collector (test_decider's ZMTP PUSH), so that the decider can route."""

    WORKERS = ("s0", "s1", "l0")  # examples/policy-full's static workers

    def setUp(self):
        from test_decider import Zmtp, load  # the same plain-Python collector
        self.policy = PolicyCopy(self)
        st = Stack(self)
        ep = self.ep = {k: zmq_endpoint() for k in ("pol_pub", "pol_rep", "agg_pull", "agg_pub",
                                                     "agg_snap", "decider")}
        st.start("policy", ["--dir", self.policy.dir, "--pub", ep["pol_pub"], "--rep",
                            ep["pol_rep"], "--republish-ms", "300"])
        st.start("aggregator", ["--pull", ep["agg_pull"], "--pub", ep["agg_pub"], "--snapshot",
                                ep["agg_snap"], "--heartbeat-ms", "200"])
        self.decider = st.start("decider", ["--listen", ep["decider"], "--state-sub",
                                            ep["agg_pub"], "--state-snapshot", ep["agg_snap"],
                                            "--policy-sub", ep["pol_pub"], "--policy-req",
                                            ep["pol_rep"]])
        push = Zmtp(ep["agg_pull"], "PUSH")
        self.addCleanup(push.close)

        def loaded():
            for w in self.WORKERS:
                push.send([load(w)])
            doc = http_json("GET", self.decider.admin_url + "/debug/state")[2]
            have = {w["name"] for w in doc.get("workers", []) if w.get("has_load")}
            return have >= set(self.WORKERS)
        wait_until(loaded, 10.0, interval=0.2, what="load samples at the decider")

    def explain(self, *args):
        return self.policy.explain("--decider", self.ep["decider"], "--timeout-ms", "5000", *args)

    def test_rejected_by_the_rule_explained(self):
        out = self.explain("--model", "chat", "--tenant", "suspended-team")
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertEqual(rule_lines(out.stdout)["guardrails/blocked-tenant"][0], "✓", out.stdout)
        self.assertIn(": rejected (status 6, HTTP 403 at the gateway)", out.stdout)
        self.assertIn("rule guardrails/blocked-tenant; HTTP 403", out.stdout)
        self.assertIn("tenant suspended; contact the platform team", out.stdout)
        self.assertNotIn("note:", out.stdout)  # the decider agrees
        doc = json.loads(self.explain("--model", "chat", "--tenant", "suspended-team",
                                      "--json").stdout)
        d = doc["decision"]
        self.assertEqual((d["status"], d["status_code"], d["http_status"], d["rule"]),
                         ("rejected", 6, 403, "guardrails/blocked-tenant"), d)
        self.assertEqual(doc["action"]["rule"], d["rule"])

    def test_pii_label_reaches_the_decider(self):
        # the model, not the alias "chat", which the decider resolves by weight (to pool large
        # now and then, whose local workers are not in the policy)
        doc = json.loads(self.explain("--model", "small-model", "--label", "pii", "--prompt",
                                      "hello", "--json").stdout)
        self.assertEqual(doc["action"]["rule"], "guardrails/pii-stays-local")
        d = doc["decision"]
        self.assertEqual((d["status"], d["target_kind"], d["rule"]),
                         ("ok", "worker", "guardrails/pii-stays-local"), d)
        self.assertIn(d["worker"], self.WORKERS)
        out = self.explain("--model", "small-model", "--label", "pii")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertRegex(out.stdout, r"decision of the decider at \S+: ok \(status 0, HTTP 200")
        self.assertRegex(out.stdout, r"\n  worker (s0|s1|l0) http://127\.0\.0\.1:810\d \(pool chat")
        self.assertIn("target worker; rule guardrails/pii-stays-local", out.stdout)
        # route: the same labels and headers flags, the same reply fields
        out = ctl("route", "--decider", self.ep["decider"], "--model", "small-model", "--prompt",
                  "hi", "--label", "pii", "--header", "X-Inferplane-Class=batch")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("target worker; rule guardrails/pii-stays-local", out.stdout)
        out = ctl("route", "--decider", self.ep["decider"], "--model", "chat", "--prompt", "hi",
                  "--tenant", "suspended-team")
        self.assertEqual(out.returncode, 1, out.stdout)
        self.assertIn("not routed: reason rejected (status 6, HTTP 403 at the gateway)",
                      out.stdout)
        self.assertIn("rule guardrails/blocked-tenant; HTTP 403", out.stdout)
        out = ctl("route", "--decider", self.ep["decider"], "--model", "chat", "--prompt", "hi",
                  "--header", "no-equals-sign")
        self.assertEqual(out.returncode, 2)
        self.assertIn("want NAME=VALUE", out.stderr)

    def test_headers_reach_the_decider(self):
        # a rule on a header the copy of the policy gains (the decider follows the file)
        self.policy.edit("policy.yaml", "    - name: huge-prompts\n",
                         "    - name: header-check\n"
                         "      match: {headers: [{name: x-test, value: stop}]}\n"
                         "      reject: {status: 451, reason: \"the header was seen\"}\n"
                         "    - name: huge-prompts\n")

        def decided():
            doc = json.loads(self.explain("--model", "chat", "--header", "X-TEST=stop",
                                          "--json").stdout)
            return doc if doc["decision"]["rule"] == "guardrails/header-check" else None
        doc = wait_until(decided, 10.0, interval=0.2, what="the edited policy at the decider")
        self.assertEqual(doc["request"]["headers"], ["x-test=stop"])  # the name lower-cased
        self.assertEqual(doc["action"]["rule"], "guardrails/header-check")
        self.assertEqual((doc["decision"]["status"], doc["decision"]["http_status"]),
                         ("rejected", 451))
        doc = json.loads(self.explain("--model", "chat", "--header", "x-test=go", "--json").stdout)
        self.assertNotEqual(doc["decision"]["rule"], "guardrails/header-check", doc)
        self.assertEqual(doc["rules"][2]["why"], "header x-test=stop absent (x-test=go)")

    def test_no_answer_still_explains(self):
        quiet = zmq_endpoint()  # nothing listens there
        out = self.policy.explain("--model", "chat", "--decider", quiet, "--timeout-ms", "300")
        self.assertEqual(out.returncode, 1)
        self.assertIn("no answer from %s within 300 ms" % quiet, out.stderr)
        self.assertIn("action (rule ", out.stdout)
