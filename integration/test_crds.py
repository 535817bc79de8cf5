"""crds/ stays consistent with the policy compiler, docs/crds.md and examples/.

- every CRD is a structural apiextensions.k8s.io/v1 CRD with a status subresource, printer
  columns, status conditions, and limits on every list and string;
- every object in examples/ validates against its CRD's schema (a small structural-schema
  validator: types, required, enum, properties with no unknown fields, ranges, lengths,
  patterns, int-or-string);
- every field docs/crds.md documents exists in the CRD, and every CRD field is documented;
- the compiler accepts exactly the CRD's fields at every level: a probe puts an unknown key
  into each mapping of each kind and reads the "(known: ...)" list of the compiler's error.

Reading YAML needs PyYAML (Debian python3-yaml, installed by `make deps`); without it these
tests fail.
"""
import glob
import json
import os
import re
import subprocess
import tempfile
import unittest

from lib.harness import ROOT, binary, requires

try:
    import yaml
except ImportError:  # pragma: no cover - depends on the machine
    yaml = None

SCHEMA_KEYS = {
    "type", "properties", "items", "required", "description", "enum", "default", "minimum",
    "maximum", "minLength", "maxLength", "pattern", "format", "minItems", "maxItems",
    "maxProperties", "additionalProperties", "x-kubernetes-validations",
    "x-kubernetes-int-or-string", "x-kubernetes-list-type", "x-kubernetes-list-map-keys",
    "x-kubernetes-preserve-unknown-fields", "anyOf", "nullable",
}
CONDITION_FIELDS = {"type", "status", "reason", "message", "observedGeneration",
                    "lastTransitionTime"}
KINDS = ["GatewayBackend", "InferenceProvider", "InferenceWorkerSet", "InferencePool",
         "InferencePolicy"]


def load_crds():
    crds = {}
    for path in sorted(glob.glob(os.path.join(ROOT, "crds", "*.yaml"))):
        with open(path) as f:
            crd = yaml.safe_load(f)
        crds[crd["spec"]["names"]["kind"]] = (os.path.relpath(path, ROOT), crd)
    return crds


def root_schema(crd):
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def child(schema, step):
    """The schema of `step` ("name" or "[]" for list items) below `schema`, or None."""
    if step == "[]":
        return schema.get("items")
    return schema.get("properties", {}).get(step)


def walk(schema, path=""):
    """Yields (path, schema) for every node; list items are written "[]"."""
    yield path, schema
    for name, sub in schema.get("properties", {}).items():
        yield from walk(sub, f"{path}.{name}" if path else name)
    if "items" in schema:
        yield from walk(schema["items"], path + "[]")


def validate(value, schema, path, errors):
    """A structural-schema validator: what the API server checks, minus CEL."""
    if schema.get("x-kubernetes-int-or-string"):
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            errors.append(f"{path}: must be an integer or a string")
            return
        for branch in schema.get("anyOf", []):
            if branch.get("type") == ("integer" if isinstance(value, int) else "string"):
                validate(value, branch, path, errors)
        return
    kind = schema.get("type")
    checks = {"object": dict, "array": list, "string": str, "boolean": bool}
    if kind == "integer":
        if isinstance(value, bool) or not isinstance(value, int):
            errors.append(f"{path}: must be an integer, got {value!r}")
            return
        if "minimum" in schema and value < schema["minimum"]:
            errors.append(f"{path}: {value} is below {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            errors.append(f"{path}: {value} is above {schema['maximum']}")
    elif kind in checks and not isinstance(value, checks[kind]):
        errors.append(f"{path}: must be {kind}, got {value!r}")
        return
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{path}: {value!r} is not one of {schema['enum']}")
    if kind == "string":
        if len(value) > schema.get("maxLength", 1 << 30) or len(value) < schema.get("minLength", 0):
            errors.append(f"{path}: length {len(value)} is out of range")
        if "pattern" in schema and not re.search(schema["pattern"], value):
            errors.append(f"{path}: {value!r} does not match {schema['pattern']}")
    elif kind == "array":
        if len(value) > schema.get("maxItems", 1 << 30) or len(value) < schema.get("minItems", 0):
            errors.append(f"{path}: {len(value)} items is out of range")
        for i, item in enumerate(value):
            validate(item, schema["items"], f"{path}[{i}]", errors)
    elif kind == "object":
        for name in schema.get("required", []):
            if name not in value:
                errors.append(f"{path}.{name}: is required")
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for name, sub in value.items():
            if name in props:
                validate(sub, props[name], f"{path}.{name}", errors)
            elif isinstance(extra, dict):
                validate(sub, extra, f"{path}.{name}", errors)
            elif not schema.get("x-kubernetes-preserve-unknown-fields") and path != ".metadata":
                errors.append(f"{path}.{name}: is not a field of the schema")


def documented_paths(doc):
    """{kind: set of paths} from the first column of docs/crds.md's field tables."""
    out, kind = {}, None
    for line in doc.splitlines():
        m = re.match(r"^## (\w+)\s*$", line)
        if m:
            kind = m.group(1) if m.group(1) in KINDS else None
            continue
        if not kind or not line.startswith("| `"):
            continue
        first = line.split("|")[1]
        parent = None
        for token in re.findall(r"`([^`]+)`", first):
            if token.startswith("spec"):
                path = token
            elif parent is not None:
                path = parent + (token if token.startswith(".") else "." + token)
            else:
                break
            parent = path.rsplit(".", 1)[0]
            out.setdefault(kind, set()).add(path.replace("[]", "[]"))
    return out


def schema_at(root, path):
    schema = root
    for step in re.findall(r"\[\]|[^.\[\]]+", path):
        schema = child(schema, step) if schema else None
    return schema


@requires(yaml is not None, "PyYAML (Debian python3-yaml)")
class TestCrds(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.crds = load_crds()

    def test_five_kinds(self):
        self.assertEqual(sorted(self.crds), sorted(KINDS))

    def test_every_crd_is_structural_with_status(self):
        for kind, (path, crd) in self.crds.items():
            with self.subTest(crd=path):
                self.assertEqual(crd["apiVersion"], "apiextensions.k8s.io/v1")
                self.assertEqual(crd["kind"], "CustomResourceDefinition")
                self.assertEqual(crd["spec"]["group"], "inferplane.io")
                names = crd["spec"]["names"]
                self.assertEqual(crd["metadata"]["name"], names["plural"] + ".inferplane.io")
                version = crd["spec"]["versions"][0]
                self.assertEqual(version["name"], "v1alpha1")
                self.assertEqual(version.get("subresources"), {"status": {}})
                self.assertTrue(version.get("additionalPrinterColumns"))
                root = root_schema(crd)
                status = root["properties"]["status"]
                self.assertEqual(status["properties"]["observedGeneration"]["type"], "integer")
                cond = status["properties"]["conditions"]["items"]
                self.assertEqual(set(cond["properties"]), CONDITION_FIELDS)
                for where, node in walk(root):
                    unknown = set(node) - SCHEMA_KEYS
                    self.assertFalse(unknown, f"{path}: {where}: unknown schema keys {unknown}")
                    if node.get("x-kubernetes-int-or-string"):
                        continue
                    self.assertIn("type", node, f"{path}: {where} has no type (not structural)")
                    if node["type"] == "array":
                        self.assertIn("maxItems", node, f"{path}: {where} has no maxItems")
                    if node["type"] == "string" and where not in ("apiVersion", "kind"):
                        self.assertTrue({"maxLength", "enum", "format"} & set(node),
                                        f"{path}: {where} has no maxLength")

    def test_examples_validate_against_their_crd(self):
        # every example but the gateway's keys files (examples/tenants/: not resources)
        files = sorted(f for f in glob.glob(os.path.join(ROOT, "examples", "**", "*.yaml"),
                                            recursive=True)
                       if os.sep + "tenants" + os.sep not in f)
        self.assertTrue(files)
        seen = set()
        for path in files:
            with open(path) as f:
                docs = [d for d in yaml.safe_load_all(f) if d]
            for i, obj in enumerate(docs):
                with self.subTest(file=os.path.relpath(path, ROOT), document=i):
                    self.assertIn(obj.get("kind"), self.crds)
                    self.assertEqual(obj.get("apiVersion"), "inferplane.io/v1alpha1")
                    errors = []
                    validate(obj, root_schema(self.crds[obj["kind"]][1]), "", errors)
                    self.assertEqual(errors, [])
                    seen.add(obj["kind"])
        self.assertEqual(seen, set(KINDS), "examples/ shows every kind")

    def test_docs_and_crds_list_the_same_fields(self):
        with open(os.path.join(ROOT, "docs", "crds.md")) as f:
            documented = documented_paths(f.read())
        for kind in KINDS:
            root = root_schema(self.crds[kind][1])
            paths = documented.get(kind, set())
            with self.subTest(kind=kind):
                self.assertTrue(paths, f"docs/crds.md has no field table for {kind}")
                for path in sorted(paths):
                    self.assertIsNotNone(schema_at(root, path),
                                         f"docs/crds.md documents {kind} {path}, which the CRD "
                                         "does not have")
                for path, _ in walk(root["properties"]["spec"], "spec"):
                    # Documented itself, through an ancestor, or (a mapping) through its fields.
                    covered = any(path == p or path.startswith(p + ".") or
                                  path.startswith(p + "[]") or p.startswith(path + ".") or
                                  p.startswith(path + "[].") for p in paths)
                    self.assertTrue(covered or path == "spec",
                                    f"{kind} {path} is in the CRD but not in docs/crds.md")

    def test_compiler_accepts_exactly_the_crd_fields(self):
        """An unknown key in each mapping: the compiler's "(known: ...)" is the CRD's list."""
        probes = []
        for kind in KINDS:
            spec = root_schema(self.crds[kind][1])["properties"]["spec"]
            for path, node in walk(spec, "spec"):
                if node.get("properties"):
                    probes.append((kind, path, set(node["properties"])))
        for n, (kind, path, fields) in enumerate(probes):
            obj = {"apiVersion": "inferplane.io/v1alpha1", "kind": kind,
                   "metadata": {"name": "probe"}}
            cursor, steps = obj, re.findall(r"\[\]|[^.\[\]]+", path)
            for i, step in enumerate(steps):
                last = i == len(steps) - 1
                nxt = {"zzzBogus": 1} if last else ([] if steps[i + 1] == "[]" else {})
                if step == "[]":
                    cursor.append(nxt)
                else:
                    cursor[step] = nxt
                cursor = nxt
            # One directory per probe: the compiler keeps at most 50 errors per compilation.
            with tempfile.TemporaryDirectory() as tmp:
                with open(os.path.join(tmp, "probe.yaml"), "w") as f:
                    json.dump(obj, f)  # JSON is YAML
                out = subprocess.run([binary("inferplanectl"), "validate", tmp],
                                     capture_output=True, timeout=10).stdout.decode()
            with self.subTest(kind=kind, path=path):
                m = re.search(r"zzzBogus is not a known field[^(]*\(known: ([^)]*)\)", out)
                self.assertIsNotNone(m, f"no unknown-field error for {kind} {path}:\n{out}")
                self.assertEqual(set(m.group(1).split(", ")), fields,
                                 f"{kind} {path}: the compiler and the CRD disagree")


if __name__ == "__main__":
    unittest.main()
