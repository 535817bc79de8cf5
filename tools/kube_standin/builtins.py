"""What kube-apiserver's registry strategies do for each kind on create and update, reduced to
what a controller or kubectl can observe here:

- Namespace: spec.finalizers [kubernetes], status.phase Active.
- Pod: the defaults of SetDefaults_Pod / PodSpec / Container that show in `kubectl get -o yaml`
  (restartPolicy, dnsPolicy, schedulerName, terminationGracePeriodSeconds, securityContext,
  enableServiceLinks, priority, preemptionPolicy, imagePullPolicy, terminationMessage*,
  port protocol); status reset to phase Pending with its qosClass on create; containers
  required (name + image, names unique); a spec that may change only in containers[*].image,
  initContainers[*].image, activeDeadlineSeconds and tolerations (additions), like the real
  pod update validation. No scheduler, kubelet or admission plugins run: a pod stays Pending
  until a client (a test acting as kubelet) writes its status through pods/status.
- Secret: stringData merged into data (base64) and dropped; type defaults to Opaque; data
  keys and base64 values checked; immutable secrets refuse data changes.
- CustomResourceDefinition: defaults (names.singular, names.listKind, conversion None),
  validation (resources.crd_causes) and the status the real server writes at once
  (NamesAccepted and Established True, acceptedNames, storedVersions).

Each function takes the object as decoded JSON and changes it in place; validation returns a
list of causes (see errors.invalid) and raises ApiError only for a body that does not decode.
"""
import base64
import copy
import json
import re

from . import errors
from .resources import DNS_LABEL, SchemaDecodeError, crd_causes

__all__ = ["prepare", "validate"]

_SECRET_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
_POD_MUTABLE_MSG = ("pod updates may not change fields other than `spec.containers[*].image`,"
                    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,"
                    "`spec.tolerations` (only additions to existing tolerations),"
                    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was "
                    "previously negative)")


def prepare(rt, obj, old, now):
    """Defaults and server-set fields, before validation. old is None on create."""
    kind = rt.builtin
    if kind == "namespace":
        if obj.get("spec") is None:
            obj["spec"] = {}
        if isinstance(obj["spec"], dict):
            obj["spec"].setdefault("finalizers", ["kubernetes"])
        if old is None:
            obj["status"] = {"phase": "Active"}
    elif kind == "pod":
        _pod_defaults(obj)
        if old is None:
            obj["status"] = {"phase": "Pending", "qosClass": _qos(obj)}
    elif kind == "secret":
        _secret_normalize(obj)
    elif kind == "crd":
        _crd_defaults(obj)
        _crd_status(obj, old, now)


def validate(rt, obj, old, registry):
    kind = rt.builtin
    if kind == "pod":
        return _pod_causes(obj, old)
    if kind == "secret":
        return _secret_causes(obj, old)
    if kind == "crd":
        try:
            causes = crd_causes(obj, registry)
        except SchemaDecodeError as e:
            raise errors.bad_request('CustomResourceDefinition in version "v1" cannot be handled as a '
                                     'CustomResourceDefinition: ' + "; ".join(e.problems[:5]))
        if old is not None and not causes:
            for f in ("group", "scope"):
                if obj["spec"].get(f) != old["spec"].get(f):
                    causes.append({"reason": "FieldValueInvalid", "field": "spec." + f,
                                   "message": "Invalid value: %s: field is immutable"
                                   % json.dumps(obj["spec"].get(f))})
            if obj["spec"]["names"].get("plural") != old["spec"]["names"].get("plural"):
                causes.append({"reason": "FieldValueInvalid", "field": "spec.names.plural",
                               "message": "Invalid value: %s: field is immutable"
                               % json.dumps(obj["spec"]["names"].get("plural"))})
        return causes
    return []


# -- pods ---------------------------------------------------------------------------------------
def _pod_defaults(pod):
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return
    for k, v in (("restartPolicy", "Always"), ("dnsPolicy", "ClusterFirst"),
                 ("schedulerName", "default-scheduler"), ("terminationGracePeriodSeconds", 30),
                 ("securityContext", {}), ("enableServiceLinks", True), ("priority", 0),
                 ("preemptionPolicy", "PreemptLowerPriority")):
        spec.setdefault(k, copy.deepcopy(v))
    for field in ("containers", "initContainers"):
        for c in spec.get(field) or []:
            if not isinstance(c, dict):
                continue
            c.setdefault("terminationMessagePath", "/dev/termination-log")
            c.setdefault("terminationMessagePolicy", "File")
            c.setdefault("resources", {})
            img = c.get("image")
            if isinstance(img, str) and "imagePullPolicy" not in c:
                tag = img.rsplit("/", 1)[-1]
                latest = "@" not in tag and (":" not in tag or tag.endswith(":latest"))
                c["imagePullPolicy"] = "Always" if latest else "IfNotPresent"
            for p in c.get("ports") or []:
                if isinstance(p, dict):
                    p.setdefault("protocol", "TCP")


def _qos(pod):
    cs = ((pod.get("spec") or {}).get("containers") or [])
    res = [c.get("resources") or {} for c in cs if isinstance(c, dict)]
    if not any((r.get("requests") or r.get("limits")) for r in res if isinstance(r, dict)):
        return "BestEffort"
    for r in res:
        lim, req = r.get("limits") or {}, r.get("requests") or {}
        if not all(k in lim for k in ("cpu", "memory")):
            return "Burstable"
        if any(req.get(k, lim[k]) != lim[k] for k in ("cpu", "memory")):
            return "Burstable"
    return "Guaranteed"


def _pod_causes(pod, old):
    causes = []
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return [{"reason": "FieldValueRequired", "field": "spec.containers", "message": "Required value"}]
    cs = spec.get("containers")
    if not isinstance(cs, list) or not cs:
        causes.append({"reason": "FieldValueRequired", "field": "spec.containers", "message": "Required value"})
        cs = []
    names = set()
    for i, c in enumerate(cs):
        f = "spec.containers[%d]" % i
        if not isinstance(c, dict):
            causes.append({"reason": "FieldValueInvalid", "field": f,
                           "message": "Invalid value: must be an object"})
            continue
        n = c.get("name")
        if not isinstance(n, str) or not n:
            causes.append({"reason": "FieldValueRequired", "field": f + ".name", "message": "Required value"})
        elif not DNS_LABEL.match(n) or len(n) > 63:
            causes.append({"reason": "FieldValueInvalid", "field": f + ".name",
                           "message": "Invalid value: %s: a lowercase RFC 1123 label must consist of "
                           "lower case alphanumeric characters or '-', and must start and end with an "
                           "alphanumeric character" % json.dumps(n)})
        elif n in names:
            causes.append({"reason": "FieldValueDuplicate", "field": f + ".name",
                           "message": "Duplicate value: %s" % json.dumps(n)})
        names.add(n)
        if not isinstance(c.get("image"), str) or not c.get("image"):
            causes.append({"reason": "FieldValueRequired", "field": f + ".image", "message": "Required value"})
    if old is not None and not causes:
        a, b = copy.deepcopy(spec), copy.deepcopy(old.get("spec") or {})
        for s in (a, b):
            for field in ("containers", "initContainers"):
                for c in s.get(field) or []:
                    if isinstance(c, dict):
                        c.pop("image", None)
            s.pop("activeDeadlineSeconds", None)
        old_tol = b.pop("tolerations", None) or []
        new_tol = a.pop("tolerations", None) or []
        if a != b or any(t not in new_tol for t in old_tol):
            causes.append({"reason": "FieldValueForbidden", "field": "spec",
                           "message": "Forbidden: " + _POD_MUTABLE_MSG})
    return causes


# -- secrets ------------------------------------------------------------------------------------
def _secret_normalize(sec):
    sd = sec.pop("stringData", None)
    if sd is not None:
        if not isinstance(sd, dict) or not all(isinstance(v, str) for v in sd.values()):
            raise errors.bad_request("Secret in version \"v1\" cannot be handled as a Secret: "
                                     "stringData must be a map of strings")
        data = sec.get("data") if isinstance(sec.get("data"), dict) else {}
        for k, v in sd.items():
            data[k] = base64.b64encode(v.encode("utf-8")).decode("ascii")
        sec["data"] = data
    sec.setdefault("type", "Opaque")
    data = sec.get("data")
    if data is not None:
        if not isinstance(data, dict):
            raise errors.bad_request("Secret in version \"v1\" cannot be handled as a Secret: "
                                     "data must be a map of base64 strings")
        for k, v in data.items():
            try:
                if not isinstance(v, str):
                    raise ValueError("not a string")
                base64.b64decode(v, validate=True)
            except (ValueError, TypeError) as e:
                raise errors.bad_request("Secret in version \"v1\" cannot be handled as a Secret: "
                                         "data[%s]: illegal base64 data (%s)" % (json.dumps(k), e))
        if not data:
            sec.pop("data")


def _secret_causes(sec, old):
    causes = []
    total = 0
    for k, v in (sec.get("data") or {}).items():
        if not _SECRET_KEY.match(k) or len(k) > 253:
            causes.append({"reason": "FieldValueInvalid", "field": "data[%s]" % k,
                           "message": "Invalid value: %s: a valid config key must consist of "
                           "alphanumeric characters, '-', '_' or '.'" % json.dumps(k)})
        total += len(v) * 3 // 4
    if total > 1024 * 1024:
        causes.append({"reason": "FieldValueTooLong", "field": "data",
                       "message": "Too long: may not be more than 1048576 bytes"})
    if not isinstance(sec.get("type"), str):
        causes.append({"reason": "FieldValueInvalid", "field": "type",
                       "message": "Invalid value: must be a string"})
    if old is not None:
        if sec.get("type") != old.get("type"):
            causes.append({"reason": "FieldValueInvalid", "field": "type",
                           "message": "Invalid value: %s: field is immutable" % json.dumps(sec.get("type"))})
        if old.get("immutable") is True:
            if sec.get("data") != old.get("data"):
                causes.append({"reason": "FieldValueForbidden", "field": "data",
                               "message": "Forbidden: field is immutable when `immutable` is set"})
            if sec.get("immutable") is not True:
                causes.append({"reason": "FieldValueForbidden", "field": "immutable",
                               "message": "Forbidden: field is immutable when `immutable` is set"})
    return causes


# -- custom resource definitions ---------------------------------------------------------------------
def _crd_defaults(crd):
    spec = crd.get("spec")
    if not isinstance(spec, dict):
        return
    names = spec.get("names")
    if isinstance(names, dict) and isinstance(names.get("kind"), str):
        names.setdefault("singular", names["kind"].lower())
        names.setdefault("listKind", names["kind"] + "List")
    spec.setdefault("conversion", {"strategy": "None"})


def _crd_status(crd, old, now):
    spec = crd.get("spec")
    if not isinstance(spec, dict) or not isinstance(spec.get("names"), dict):
        return
    old_status = (old or {}).get("status") or {}
    conds = {c.get("type"): c for c in old_status.get("conditions") or [] if isinstance(c, dict)}

    def cond(t, reason, message):
        c = conds.get(t)
        if c and c.get("status") == "True":
            return c
        return {"type": t, "status": "True", "lastTransitionTime": now, "reason": reason,
                "message": message}

    stored = list(old_status.get("storedVersions") or [])
    for v in spec.get("versions") or []:
        if isinstance(v, dict) and v.get("storage") is True and v.get("name") not in stored:
            stored.append(v.get("name"))
    crd["status"] = {
        "acceptedNames": copy.deepcopy(spec["names"]),
        "conditions": [cond("NamesAccepted", "NoConflicts", "no conflicts found"),
                       cond("Established", "InitialNamesAccepted", "the initial names have been accepted")],
        "storedVersions": stored,
    }
