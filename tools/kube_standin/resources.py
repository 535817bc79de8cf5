"""The resource types the stand-in serves, and the registry that maps URLs to them.

Built in: core/v1 namespaces, pods, secrets and apiextensions.k8s.io/v1
customresourcedefinitions. Every CustomResourceDefinition stored (created with kubectl apply,
or preloaded with --crds) adds its group, served versions and resource; deleting it removes
them. A ResourceType is one (group, plural); its objects are stored once, in the CRD's storage
version, and served in every served version with apiVersion rewritten (conversion strategy
None, the only one the stand-in has).

The registry is not thread-safe by itself: the Store holds its lock around every use.
"""
import json
import re

from .schema import check_crd_schema
from .selectors import JsonPathError, jsonpath

__all__ = ["Version", "ResourceType", "Registry", "version_key", "BUILTIN_GROUPS", "VERBS",
           "field_value", "crd_causes", "SchemaDecodeError", "DNS_SUBDOMAIN", "DNS_LABEL"]

VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
SUB_VERBS = ["get", "patch", "update"]
BUILTIN_GROUPS = ["", "apiextensions.k8s.io"]
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_KIND = re.compile(r"^[A-Za-z][A-Za-z0-9]*$")


def version_key(v):
    """Sort key putting Kubernetes versions in priority order: v2, v1, v1beta2, v1beta1,
    v1alpha1, then non-Kubernetes versions alphabetically."""
    m = re.match(r"^v([1-9][0-9]*)(?:(alpha|beta)([1-9][0-9]*))?$", v)
    if not m:
        return (3, 0, 0, v)
    stage = {None: 0, "beta": 1, "alpha": 2}[m.group(2)]
    return (stage, -int(m.group(1)), -int(m.group(3) or 0), v)


class Version:
    def __init__(self, name, served=True, storage=True, schema=None, columns=None, status=False,
                 selectable=None, deprecated=False, deprecation_warning=None):
        self.name = name
        self.served = served
        self.storage = storage
        self.schema = schema            # openAPIV3Schema (custom resources), else None
        self.columns = columns or []    # additionalPrinterColumns
        self.status = status            # has the status subresource
        self.selectable = selectable or []  # selectableFields jsonPaths, without the dot
        self.deprecated = deprecated
        self.deprecation_warning = deprecation_warning


class ResourceType:
    def __init__(self, group, plural, singular, kind, namespaced, versions, short_names=(),
                 categories=(), list_kind=None, builtin=None, crd_name=None):
        self.group = group
        self.plural = plural
        self.singular = singular
        self.kind = kind
        self.list_kind = list_kind or kind + "List"
        self.namespaced = namespaced
        self.versions = versions        # {name: Version}, any order
        self.short_names = list(short_names)
        self.categories = list(categories)
        self.builtin = builtin          # "namespace" | "pod" | "secret" | "crd" | None (custom)
        self.crd_name = crd_name

    @property
    def key(self):
        return (self.group, self.plural)

    @property
    def group_resource(self):
        return self.plural + "." + self.group if self.group else self.plural

    @property
    def qualified_kind(self):
        return self.kind + "." + self.group if self.group else self.kind

    @property
    def custom(self):
        return self.builtin is None

    def api_version(self, version):
        return self.group + "/" + version if self.group else version

    def served(self, version):
        v = self.versions.get(version)
        return v if v is not None and v.served else None

    def served_versions(self):
        return sorted((v for v in self.versions.values() if v.served), key=lambda v: version_key(v.name))

    def storage_version(self):
        for v in self.versions.values():
            if v.storage:
                return v.name
        return next(iter(self.versions))

    # The real server's per-type strategies, reduced to the flags that differ between types.
    @property
    def unconditional_update(self):
        """PUT without metadata.resourceVersion is allowed (custom resources and CRDs: no)."""
        return self.builtin in ("namespace", "pod", "secret")

    @property
    def has_generation(self):
        return self.builtin in (None, "crd")

    @property
    def returns_deleted_object(self):
        return self.builtin != "secret"

    def field_labels(self, version):
        labels = {"metadata.name"}
        if self.namespaced:
            labels.add("metadata.namespace")
        labels |= {"pod": {"spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
                           "spec.serviceAccountName", "spec.hostNetwork", "status.phase",
                           "status.podIP", "status.nominatedNodeName"},
                   "secret": {"type"}, "namespace": {"status.phase"}}.get(self.builtin, set())
        v = self.versions.get(version)
        if v is not None:
            labels |= set(v.selectable)
        return labels


def field_value(obj, label):
    """The string a field selector compares for `label` (a dotted path) in obj."""
    cur = obj
    for part in label.split("."):
        cur = cur.get(part) if isinstance(cur, dict) else None
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


def _builtin_types():
    v1 = lambda status: {"v1": Version("v1", status=status)}  # noqa: E731
    return [
        ResourceType("", "namespaces", "namespace", "Namespace", False, v1(True),
                     short_names=["ns"], builtin="namespace"),
        ResourceType("", "pods", "pod", "Pod", True, v1(True), short_names=["po"],
                     categories=["all"], builtin="pod"),
        ResourceType("", "secrets", "secret", "Secret", True, v1(False), builtin="secret"),
        ResourceType("apiextensions.k8s.io", "customresourcedefinitions",
                     "customresourcedefinition", "CustomResourceDefinition", False, v1(True),
                     short_names=["crd", "crds"], categories=["api-extensions"], builtin="crd"),
    ]


class Registry:
    def __init__(self):
        self.builtins = _builtin_types()
        self.crds = {}      # CRD name -> ResourceType
        self.epoch = 0      # bumped on every change (discovery and OpenAPI hashes)

    def all_types(self):
        return self.builtins + sorted(self.crds.values(), key=lambda t: t.key)

    def by_key(self, group, plural):
        for t in self.all_types():
            if t.group == group and t.plural == plural:
                return t
        return None

    def find(self, group, version, plural):
        """(ResourceType, Version) serving /<group>/<version>/<plural>, or None."""
        t = self.by_key(group, plural)
        if t is None:
            return None
        v = t.served(version)
        return (t, v) if v is not None else None

    def groups(self):
        """[(group, [versions in priority order])] for every served group, core ("") first."""
        seen = {}
        for t in self.all_types():
            for v in t.served_versions():
                seen.setdefault(t.group, set()).add(v.name)
        order = [g for g in BUILTIN_GROUPS if g in seen] + sorted(g for g in seen if g not in BUILTIN_GROUPS)
        return [(g, sorted(seen[g], key=version_key)) for g in order]

    def types_in(self, group, version):
        return [t for t in self.all_types() if t.group == group and t.served(version) is not None]

    def register_crd(self, crd):
        t = crd_type(crd)
        self.crds[crd["metadata"]["name"]] = t
        self.epoch += 1
        return t

    def unregister_crd(self, name):
        t = self.crds.pop(name, None)
        self.epoch += 1
        return t


def crd_type(crd):
    """The ResourceType a (valid) CustomResourceDefinition object defines."""
    spec = crd["spec"]
    names = spec["names"]
    versions = {}
    for v in spec["versions"]:
        subs = v.get("subresources") or {}
        versions[v["name"]] = Version(
            v["name"], served=bool(v.get("served")), storage=bool(v.get("storage")),
            schema=(v.get("schema") or {}).get("openAPIV3Schema"),
            columns=v.get("additionalPrinterColumns") or [],
            status=isinstance(subs, dict) and "status" in subs,
            selectable=[f["jsonPath"].lstrip(".") for f in v.get("selectableFields") or []
                        if isinstance(f, dict) and isinstance(f.get("jsonPath"), str)],
            deprecated=bool(v.get("deprecated")), deprecation_warning=v.get("deprecationWarning"))
    return ResourceType(spec["group"], names["plural"], names.get("singular") or names["kind"].lower(),
                        names["kind"], spec.get("scope") == "Namespaced", versions,
                        short_names=names.get("shortNames") or [],
                        categories=names.get("categories") or [],
                        list_kind=names.get("listKind"), crd_name=crd["metadata"]["name"])


def _req(causes, field, detail=None):
    causes.append({"reason": "FieldValueRequired", "field": field,
                   "message": "Required value" + (": " + detail if detail else "")})


def _inv(causes, field, value, detail):
    causes.append({"reason": "FieldValueInvalid", "field": field,
                   "message": "Invalid value: %s: %s" % (json.dumps(value), detail)})


class SchemaDecodeError(ValueError):
    """A CRD schema value of the wrong JSON type: the real server cannot decode the CRD (400)."""

    def __init__(self, problems):
        super().__init__("; ".join(problems))
        self.problems = problems


def crd_causes(crd, registry):
    """Validation of a CustomResourceDefinition, as apiextensions-apiserver does the parts that
    matter here. Returns a list of causes (empty when valid)."""
    causes = []
    spec = crd.get("spec")
    name = (crd.get("metadata") or {}).get("name", "")
    if not isinstance(spec, dict):
        _req(causes, "spec")
        return causes
    group = spec.get("group")
    names = spec.get("names") if isinstance(spec.get("names"), dict) else {}
    if not isinstance(group, str) or not group:
        _req(causes, "spec.group")
    elif "." not in group or not DNS_SUBDOMAIN.match(group):
        _inv(causes, "spec.group", group, "should be a domain with at least one dot")
    elif group in BUILTIN_GROUPS:
        _inv(causes, "spec.group", group, "is a built-in API group")
    plural, kind = names.get("plural"), names.get("kind")
    if not isinstance(plural, str) or not plural:
        _req(causes, "spec.names.plural")
    elif not DNS_LABEL.match(plural):
        _inv(causes, "spec.names.plural", plural, "a lowercase RFC 1123 label must consist of "
             "lower case alphanumeric characters or '-'")
    if not isinstance(kind, str) or not kind:
        _req(causes, "spec.names.kind")
    elif not _KIND.match(kind):
        _inv(causes, "spec.names.kind", kind, "may have mixed case, but should otherwise match: "
             "[a-z]([-a-z0-9]*[a-z0-9])?")
    for f in ("singular", "listKind"):
        if names.get(f) is not None and not isinstance(names.get(f), str):
            _inv(causes, "spec.names." + f, names.get(f), "must be a string")
    for f in ("shortNames", "categories"):
        if names.get(f) is not None and not (isinstance(names[f], list)
                                             and all(isinstance(x, str) for x in names[f])):
            _inv(causes, "spec.names." + f, names.get(f), "must be a list of strings")
    if isinstance(plural, str) and isinstance(group, str) and name != plural + "." + group:
        _inv(causes, "metadata.name", name, 'must be spec.names.plural+"."+spec.group')
    if spec.get("scope") not in ("Namespaced", "Cluster"):
        causes.append({"reason": "FieldValueNotSupported", "field": "spec.scope",
                       "message": 'Unsupported value: %r: supported values: "Cluster", "Namespaced"'
                       % spec.get("scope")})
    versions = spec.get("versions")
    if not isinstance(versions, list) or not versions:
        _inv(causes, "spec.versions", versions, "must have exactly one version marked as storage version")
        return causes
    seen, storage = set(), 0
    for i, v in enumerate(versions):
        f = "spec.versions[%d]" % i
        if not isinstance(v, dict) or not isinstance(v.get("name"), str) or not DNS_LABEL.match(v["name"]):
            _inv(causes, f + ".name", v.get("name") if isinstance(v, dict) else v,
                 "a DNS-1035 label must consist of lower case alphanumeric characters or '-'")
            continue
        if v["name"] in seen:
            causes.append({"reason": "FieldValueDuplicate", "field": f + ".name",
                           "message": "Duplicate value: %r" % v["name"]})
        seen.add(v["name"])
        storage += 1 if v.get("storage") is True else 0
        for flag in ("served", "storage"):
            if not isinstance(v.get(flag), bool):
                _req(causes, "%s.%s" % (f, flag))
        s = (v.get("schema") or {}).get("openAPIV3Schema") if isinstance(v.get("schema"), dict) else None
        if not isinstance(s, dict):
            _req(causes, f + ".schema.openAPIV3Schema", "schemas are required")
        elif s.get("type") != "object":
            _req(causes, f + ".schema.openAPIV3Schema.type", "must not be empty at the root"
                 if not s.get("type") else "must be object at the root")
        else:
            decode, more = check_crd_schema(s, f + ".schema.openAPIV3Schema")
            if decode:
                raise SchemaDecodeError(decode)
            causes += more
        cols = v.get("additionalPrinterColumns") or []
        if not isinstance(cols, list):
            _inv(causes, f + ".additionalPrinterColumns", cols, "must be a list")
            cols = []
        for j, c in enumerate(cols):
            cf = "%s.additionalPrinterColumns[%d]" % (f, j)
            if not isinstance(c, dict):
                _inv(causes, cf, c, "must be an object")
                continue
            for req in ("name", "type", "jsonPath"):
                if not isinstance(c.get(req), str) or not c.get(req):
                    _req(causes, cf + "." + req)
            if c.get("type") not in (None, "integer", "number", "string", "boolean", "date"):
                causes.append({"reason": "FieldValueNotSupported", "field": cf + ".type",
                               "message": 'Unsupported value: %r: supported values: "boolean", '
                               '"date", "integer", "number", "string"' % c.get("type")})
            if isinstance(c.get("jsonPath"), str):
                try:
                    jsonpath(c["jsonPath"], {})
                except JsonPathError as e:
                    _inv(causes, cf + ".jsonPath", c["jsonPath"], str(e))
        subs = v.get("subresources")
        if subs is not None and not isinstance(subs, dict):
            _inv(causes, f + ".subresources", subs, "must be an object")
    if storage != 1:
        _inv(causes, "spec.versions", [v.get("name") for v in versions if isinstance(v, dict)],
             "must have exactly one version marked as storage version")
    # The same plural in the same group from another CRD is impossible (the name is
    # plural.group); a kind or short name used twice in a group is a naming conflict.
    if not causes and registry is not None:
        for other in registry.crds.values():
            if other.crd_name != name and other.group == group and (
                    other.kind == kind or set(other.short_names) & set(names.get("shortNames") or [])):
                _inv(causes, "spec.names", names, 'conflicts with %s (kind or short name already '
                     'in use in group %s)' % (other.crd_name, group))
    return causes
