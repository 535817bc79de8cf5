"""inferplane-bench against real processes: every API and profile briefly against a simulated
worker, and once through the gateway stack; the report's numbers must agree with each other
(request counts, TTFT <= latency, rates over the window, the asked-for output lengths),
errors must be counted when the worker dies mid-run, and traces must replay on time.

Each benchmark is bounded by --max-requests or --max-seconds (a second or less), so the
whole file runs in well under a minute.
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib.cluster import Cluster  # noqa: E402
from lib.harness import Stack, binary  # noqa: E402

BENCH = binary("inferplane-bench")


def run_bench(target, args, timeout=60):
    """Runs the bench; returns (exit status, report dict or None, stdout, stderr)."""
    fd, out = tempfile.mkstemp(prefix="ipl-bench-", suffix=".json")
    os.close(fd)
    os.unlink(out)
    try:
        p = subprocess.run([BENCH, "--target", target, "--output", out, "--no-progress",
                            "--sample-requests", "100000"] + list(args),
                           capture_output=True, text=True, timeout=timeout)
        report = None
        if os.path.exists(out):
            with open(out) as f:
                report = json.load(f)
        return p.returncode, report, p.stdout, p.stderr
    finally:
        if os.path.exists(out):
            os.unlink(out)


class BenchCase(unittest.TestCase):
    def check_consistent(self, b, streamed=True):
        """The invariants every benchmark's numbers keep."""
        m = b["metrics"]
        tot = m["request_totals"]
        reqs = b["requests"]
        self.assertEqual(tot["total"], tot["successful"] + tot["incomplete"] + tot["errored"])
        for status in ("successful", "incomplete", "errored"):
            self.assertEqual(len(reqs[status]), tot[status], status)
        self.assertEqual(m["time_to_first_token_ms"]["total"]["count"], tot["total"])
        for r in reqs["successful"]:
            self.assertEqual(r["error"], "none")
            self.assertEqual(r["http_status"], 200)
            ttft_s = r["time_to_first_token_ms"] / 1000
            self.assertGreater(ttft_s, 0)
            self.assertLessEqual(ttft_s, r["request_latency"] + 1e-6)
            self.assertLessEqual(r["request_start_time"], r["request_end_time"])
            if streamed:
                self.assertGreaterEqual(r["token_iterations"], 1)
        for r in reqs["incomplete"]:
            self.assertEqual(r["error"], "cancelled")
        if tot["successful"]:
            dur = b["duration"]
            self.assertGreater(dur, 0)
            rps = m["requests_per_second"]["successful"]["mean"]
            self.assertAlmostEqual(rps, tot["successful"] / dur, delta=0.02 * rps + 0.01)
            lat = m["request_latency"]["successful"]
            ttft = m["time_to_first_token_ms"]["successful"]
            self.assertLessEqual(ttft["median"] / 1000, lat["max"] + 1e-6)
            self.assertLessEqual(lat["min"], lat["median"])
            self.assertLessEqual(lat["median"], lat["percentiles"]["p99"])
            self.assertLessEqual(lat["percentiles"]["p99"], lat["max"])
            # one stream or more never ran more requests at once than were sent
            self.assertLessEqual(m["request_concurrency"]["total"]["max"], tot["total"])
        errors = sum(v for k, v in b["inferplane"]["errors"].items() if k != "cancelled")
        self.assertEqual(errors, tot["errored"])
        self.assertEqual(b["inferplane"]["errors"]["cancelled"], tot["incomplete"])


class TestBenchAgainstSim(BenchCase):
    @classmethod
    def setUpClass(cls):
        cls.st = Stack(None)
        cls.sim = cls.st.start_sim("w0", extra=["--time-scale", "50", "--serve-messages",
                                                "--profile", "h100-8b"])

    @classmethod
    def tearDownClass(cls):
        cls.st.stop_all()

    def bench(self, args, **kw):
        rc, report, out, err = run_bench(self.sim.url, args, **kw)
        self.assertEqual(rc, 0, err)
        self.assertIsNotNone(report, err)
        for b in report["benchmarks"]:
            self.check_consistent(b, streamed="--no-stream" not in args)
        return report, out

    def test_every_api_and_profile(self):
        profiles = [["--profile", "synchronous", "--max-requests", "6"],
                    ["--profile", "concurrent", "--streams", "4", "--max-requests", "12"],
                    ["--profile", "throughput", "--max-concurrency", "8", "--max-requests", "16"],
                    ["--profile", "constant", "--rate", "100", "--max-requests", "10"],
                    ["--profile", "poisson", "--rate", "100", "--max-requests", "10"]]
        for api in ("chat", "completions", "messages"):
            for prof in profiles:
                with self.subTest(api=api, profile=prof[1]):
                    report, out = self.bench(["--api", api, "--prompt-tokens", "32",
                                              "--output-tokens", "8"] + prof)
                    b = report["benchmarks"][0]
                    tot = b["metrics"]["request_totals"]
                    want = int(prof[-1])
                    self.assertEqual(tot["successful"], want, out)
                    self.assertEqual(tot["errored"] + tot["incomplete"], 0)
                    self.assertEqual(b["config"]["strategy"]["type_"], prof[1])
                    # ignore_eos: exactly the asked-for output; Anthropic's API has no
                    # ignore_eos, so a messages answer may stop earlier on its own
                    otc = b["metrics"]["output_token_count"]["successful"]
                    if api == "messages":
                        self.assertLessEqual(otc["max"], 8)
                        self.assertGreaterEqual(otc["min"], 1)
                    else:
                        self.assertEqual(otc["mean"], 8)
                    self.assertGreaterEqual(
                        b["metrics"]["prompt_token_count"]["successful"]["min"], 32)
                    if prof[1] == "synchronous":
                        self.assertLessEqual(b["metrics"]["request_concurrency"]["total"]["max"], 1)
                    if prof[1] == "concurrent":
                        self.assertLessEqual(b["metrics"]["request_concurrency"]["total"]["max"], 4)
        self.assertIn("req/s", out)  # the console table

    def test_sweep(self):
        report, _ = self.bench(["--profile", "sweep", "--sweep-size", "4", "--max-requests", "12",
                                "--prompt-tokens", "16", "--output-tokens", "4"])
        kinds = [b["config"]["strategy"]["type_"] for b in report["benchmarks"]]
        self.assertEqual(kinds, ["synchronous", "throughput", "constant", "constant"])
        rps = [b["metrics"]["requests_per_second"]["successful"]["mean"]
               for b in report["benchmarks"]]
        rates = [b["config"]["strategy"]["rate"] for b in report["benchmarks"][2:]]
        # linspace(sync, throughput, 3)[1:]: the middle, then the throughput rate itself
        self.assertAlmostEqual(rates[0], (rps[0] + rps[1]) / 2, delta=1e-6 * rates[0])
        self.assertAlmostEqual(rates[1], rps[1], delta=1e-6 * rates[1])

    def test_shared_prefix_and_multi_turn(self):
        report, _ = self.bench(["--profile", "concurrent", "--streams", "2", "--max-requests",
                                "12", "--prefix-tokens", "512", "--prefix-count", "1",
                                "--prompt-tokens", "32", "--output-tokens", "8"])
        b = report["benchmarks"][0]
        cache = b["inferplane"]["cache"]
        self.assertEqual(cache["requests_reporting"], 12)
        self.assertGreater(cache["hit_ratio"], 0.5)  # 512 of ~560 tokens, but the first
        report, _ = self.bench(["--profile", "concurrent", "--streams", "2", "--max-requests",
                                "9", "--turns", "3", "--think-ms", "20", "--prompt-tokens", "40",
                                "--output-tokens", "8"])
        reqs = report["benchmarks"][0]["requests"]["successful"]
        self.assertEqual(len(reqs), 9)
        by = {}
        for r in reqs:
            by.setdefault(r["conversation"], {})[r["turn"]] = r
        for conv in by.values():
            turns = sorted(conv)
            for a, c in zip(turns, turns[1:]):
                # each turn resends the history: the prompt grows by the answer and new text
                self.assertGreaterEqual(conv[c]["prompt_tokens"], conv[a]["prompt_tokens"] + 48)
                # and waited its think time after the previous answer
                self.assertGreaterEqual(conv[c]["request_start_time"],
                                        conv[a]["request_end_time"] + 0.019)
                self.assertGreater(conv[c]["cached_tokens"], 0)

    def test_non_streamed(self):
        report, _ = self.bench(["--no-stream", "--profile", "synchronous", "--max-requests", "4",
                                "--output-tokens", "8"])
        for r in report["benchmarks"][0]["requests"]["successful"]:
            self.assertAlmostEqual(r["time_to_first_token_ms"] / 1000, r["request_latency"],
                                   delta=1e-3)
            self.assertEqual(r["output_tokens"], 8)

    def test_trace_replay(self):
        lines = [json.dumps({"timestamp": 100 * i, "input_length": 600, "output_length": 4,
                             "hash_ids": [1, 2 + i]}) for i in range(6)]
        lines += ["# ours", json.dumps({"arrival_s": 0.65, "prompt_tokens": 300,
                                         "output_tokens": 4, "prefix_group": "sys"})]
        path = self.st.write("trace.jsonl", "\n".join(lines) + "\n")
        t0 = time.monotonic()
        report, _ = self.bench(["--trace", path, "--profile", "replay", "--trace-speed", "2"])
        b = report["benchmarks"][0]
        self.assertEqual(b["metrics"]["request_totals"]["successful"], 7)
        starts = sorted(r["request_start_time"] for r in b["requests"]["successful"])
        # 0.65 s of trace at speed 2: the last arrives ~0.325 s after the first
        self.assertGreater(starts[-1] - starts[0], 0.3)
        self.assertLess(time.monotonic() - t0, 10)
        # the shared 512-token block of hash id 1 hits the cache after the first request
        self.assertGreater(b["inferplane"]["cache"]["cached_tokens"], 0)

    def test_figures_csv_and_labels(self):
        d = tempfile.mkdtemp(prefix="ipl-bench-")
        figs, csv = os.path.join(d, "f.jsonl"), os.path.join(d, "r.csv")
        report, _ = self.bench(["--profile", "concurrent", "--streams", "2,3", "--max-requests",
                                "6", "--figures", figs, "--csv", csv, "--slo-ttft-ms", "10000",
                                "--label", "strategy=direct,workload=no-prefix,run=7"])
        with open(figs) as f:
            lines = [json.loads(x) for x in f]
        names = {x["name"] for x in lines}
        self.assertTrue({"ttft_p50_ms", "ttft_p99_ms", "goodput_per_min", "requests_per_s",
                         "e2e_p50_s", "cache_hit_ratio", "errored"} <= names)
        for x in lines:
            self.assertEqual((x["strategy"], x["workload"], x["run"]),
                             ("direct", "no-prefix", "7"))
            self.assertIn(x["benchmark"], ("concurrent@2", "concurrent@3"))
            self.assertIn("unit", x)
        good = [x["value"] for x in lines if x["name"] == "goodput_per_min"]
        b = report["benchmarks"][0]
        self.assertAlmostEqual(good[0], 6 / b["duration"] * 60, delta=1e-6 * good[0])
        with open(csv) as f:
            rows = f.read().splitlines()
        self.assertEqual(len(rows), 3)
        self.assertTrue(rows[0].startswith("benchmark,profile,strategy,workload,run,"))

    def test_usage_errors(self):
        for args, what in ((["--profile", "warp"], "--profile warp"),
                           (["--profile", "constant"], "--rate"),
                           (["--prompt-tokens", "gamma:1,2"], "gamma"),
                           (["--api", "grpc"], "--api grpc"),
                           (["--profile", "throughput"], "nothing bounds")):
            rc, report, _, err = run_bench(self.sim.url, args)
            self.assertNotEqual(rc, 0, args)
            self.assertIn(what, err)
            self.assertIsNone(report)
        path = self.st.write("bad.jsonl", '{"arrival_s": 0, "prompt_tokens": 5, "output_tokens": 1}\n'
                                          '{"arrival_s": 1, "prompt_tokens": "x"}\n')
        rc, _, _, err = run_bench(self.sim.url, ["--trace", path, "--profile", "replay"])
        self.assertEqual(rc, 2)
        self.assertIn(path + ":2:", err)


class TestBenchFailures(BenchCase):
    def test_worker_killed_mid_run(self):
        st = Stack(self)
        # real time, long answers: streams are mid-flight when the worker dies
        sim = st.start_sim("w0", extra=["--time-scale", "1", "--profile", "h100-8b"])
        p = subprocess.Popen([BENCH, "--target", sim.url, "--profile", "concurrent", "--streams",
                              "6", "--max-seconds", "3", "--max-requests", "20000",
                              "--output-tokens", "400",
                              "--prompt-tokens", "16", "--request-timeout", "10", "--output",
                              os.path.join(st.dir, "r.json"), "--no-progress", "--quiet",
                              "--sample-requests", "100000"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(1.0)
        sim.signal(signal.SIGKILL)
        out, err = p.communicate(timeout=20)
        self.assertEqual(p.returncode, 0, err)
        with open(os.path.join(st.dir, "r.json")) as f:
            b = json.load(f)["benchmarks"][0]
        self.check_consistent(b)
        tot = b["metrics"]["request_totals"]
        errs = b["inferplane"]["errors"]
        # the six streams broke mid-answer, then every retry found nobody listening (refused
        # at once: an idle machine makes ~60,000 of them a second, so the run is bounded in
        # requests as well as in time, below --sample-requests)
        self.assertGreaterEqual(errs["transfer"] + errs["truncated"], 6, errs)
        self.assertGreater(errs["connect"], 0, errs)
        self.assertEqual(tot["errored"], sum(errs.values()) - errs["cancelled"])
        for r in b["requests"]["errored"]:
            self.assertIn(r["error"], ("transfer", "truncated", "connect"))


class TestBenchThroughGateway(BenchCase):
    def test_gateway_stack(self):
        c = Cluster(self, workers=2, time_scale=50)
        c.wait_workers_up()
        for api in ("chat", "messages"):
            with self.subTest(api=api):
                rc, report, _, err = run_bench(c.api, ["--api", api, "--profile", "concurrent",
                                                       "--streams", "4", "--max-requests", "16",
                                                       "--prefix-tokens", "256",
                                                       "--output-tokens", "8"])
                self.assertEqual(rc, 0, err)
                b = report["benchmarks"][0]
                self.check_consistent(b)
                self.assertEqual(b["metrics"]["request_totals"]["successful"], 16)
                self.assertLessEqual(b["metrics"]["output_token_count"]["successful"]["max"], 8)
                self.assertGreater(b["inferplane"]["cache"]["hit_ratio"], 0.2)


if __name__ == "__main__":
    unittest.main()
