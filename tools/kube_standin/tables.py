"""meta.k8s.io/v1 Table responses: what `kubectl get` prints (it asks with
`Accept: application/json;as=Table;v=v1;g=meta.k8s.io, ...`).

Custom resources get the columns of their CRD version's additionalPrinterColumns after Name
(or Age alone when there are none), with cells computed as apiextensions-apiserver does:
string columns print the JSONPath result, integer/number/boolean keep their JSON type, date
columns become an age such as "5m3s" (duration.HumanDuration). Built-in types get the columns
of kube-apiserver's printers (Pod: Name Ready Status Restarts Age + IP Node Nominated Node
Readiness Gates at priority 1; Secret: Name Type Data Age; Namespace: Name Status Age;
CustomResourceDefinition: Name Created At). Each row's `object` is, per ?includeObject=, a
PartialObjectMetadata (the default, Metadata), the whole object (Object) or absent (None).
"""
import calendar
import json
import time

from .selectors import jsonpath, JsonPathError

__all__ = ["table", "human_duration", "partial_metadata"]

_NAME_DESC = ("Name must be unique within a namespace. Is required when creating resources, "
              "although some resources may allow a client to request the generation of an "
              "appropriate name automatically. Name is primarily intended for creation "
              "idempotence and configuration definition. Cannot be updated. More info: "
              "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names")
_AGE_DESC = ("CreationTimestamp is a timestamp representing the server time when this object was "
             "created.")


def human_duration(seconds):
    """k8s.io/apimachinery/pkg/util/duration.HumanDuration, for whole seconds."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return "%ds" % s
    m = s // 60
    if m < 10:
        return "%dm" % m if s % 60 == 0 else "%dm%ds" % (m, s % 60)
    if m < 180:
        return "%dm" % m
    h = s // 3600
    if h < 8:
        return "%dh" % h if m % 60 == 0 else "%dh%dm" % (h, m % 60)
    if h < 48:
        return "%dh" % h
    if h < 24 * 8:
        return "%dd" % (h // 24) if h % 24 == 0 else "%dd%dh" % (h // 24, h % 24)
    if h < 24 * 365 * 2:
        return "%dd" % (h // 24)
    if h < 24 * 365 * 8:
        dy = (h // 24) % 365
        return "%dy" % (h // 24 // 365) if dy == 0 else "%dy%dd" % (h // 24 // 365, dy)
    return "%dy" % (h // 24 // 365)


def _age(ts, now):
    try:
        t = calendar.timegm(time.strptime(ts, "%Y-%m-%dT%H:%M:%SZ"))
    except (TypeError, ValueError):
        return "<unknown>" if ts is None else "<invalid>"
    return human_duration(now - t)


def partial_metadata(obj):
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
            "metadata": obj.get("metadata") or {}}


def _col(name, ctype, desc="", fmt="", priority=0):
    return {"name": name, "type": ctype, "format": fmt, "description": desc, "priority": priority}


def _custom_columns(ver):
    cols = ver.columns or [{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]
    defs = [_col("Name", "string", _NAME_DESC, "name")]
    for c in cols:
        defs.append(_col(c.get("name", ""), c.get("type", "string"), c.get("description", ""),
                         c.get("format", ""), int(c.get("priority") or 0)))
    return defs, cols


def _custom_cell(c, obj, now):
    try:
        found = jsonpath(c.get("jsonPath", ""), obj)
    except JsonPathError:
        return None
    if not found or found[0] is None:
        return None
    v, t = found[0], c.get("type", "string")
    if t == "string":
        if isinstance(v, str):
            return v
        if isinstance(v, bool):
            return "true" if v else "false"
        return json.dumps(v, separators=(",", ":")) if isinstance(v, (dict, list)) else str(v)
    if t == "integer":
        return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None
    if t == "number":
        return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None
    if t == "boolean":
        return v if isinstance(v, bool) else None
    if t == "date":
        return _age(v, now) if isinstance(v, str) else None
    return None


def _pod_row(pod, now):
    spec, st = pod.get("spec") or {}, pod.get("status") or {}
    cs = st.get("containerStatuses") or []
    ready = sum(1 for c in cs if isinstance(c, dict) and c.get("ready"))
    restarts = sum(int(c.get("restartCount") or 0) for c in cs if isinstance(c, dict))
    reason = st.get("reason") or st.get("phase") or ""
    for c in cs:
        if not isinstance(c, dict):
            continue
        state = c.get("state") or {}
        w = (state.get("waiting") or {}).get("reason")
        t = (state.get("terminated") or {}).get("reason")
        if w:
            reason = w
        elif t and reason == st.get("phase"):
            reason = t
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        reason = "Terminating"
    gates = spec.get("readinessGates") or []
    conds = {c.get("type"): c.get("status") for c in st.get("conditions") or [] if isinstance(c, dict)}
    gates_cell = "<none>" if not gates else "%d/%d" % (
        sum(1 for g in gates if conds.get((g or {}).get("conditionType")) == "True"), len(gates))
    return ["%d/%d" % (ready, len(spec.get("containers") or [])), reason, str(restarts),
            _age((pod.get("metadata") or {}).get("creationTimestamp"), now),
            st.get("podIP") or "<none>", spec.get("nodeName") or "<none>",
            st.get("nominatedNodeName") or "<none>", gates_cell]


_BUILTIN_COLUMNS = {
    "pod": [_col("Ready", "string", "The aggregate readiness state of this pod for accepting traffic."),
            _col("Status", "string", "The aggregate status of the containers in this pod."),
            _col("Restarts", "string", "The number of times the containers in this pod have been restarted."),
            _col("Age", "string", _AGE_DESC),
            _col("IP", "string", "IP address allocated to the pod.", priority=1),
            _col("Node", "string", "Name of the node the pod is assigned to.", priority=1),
            _col("Nominated Node", "string", "Name of the node the scheduler nominated.", priority=1),
            _col("Readiness Gates", "string", "Pod readiness gates.", priority=1)],
    "secret": [_col("Type", "string", "The type of the secret"),
               _col("Data", "string", "The number of entries in the data"),
               _col("Age", "string", _AGE_DESC)],
    "namespace": [_col("Status", "string", "The status of the namespace"),
                  _col("Age", "string", _AGE_DESC)],
    "crd": [_col("Created At", "date", _AGE_DESC)],
}


def _builtin_cells(kind, obj, now):
    meta = obj.get("metadata") or {}
    if kind == "pod":
        return _pod_row(obj, now)
    if kind == "secret":
        return [obj.get("type") or "", len(obj.get("data") or {}), _age(meta.get("creationTimestamp"), now)]
    if kind == "namespace":
        phase = (obj.get("status") or {}).get("phase") or ""
        return ["Terminating" if meta.get("deletionTimestamp") else phase,
                _age(meta.get("creationTimestamp"), now)]
    return [meta.get("creationTimestamp")]


def table(rt, ver, objs, rv, include_object="Metadata", cont=None, remaining=None, no_headers=False):
    """A Table of objs (already in the served version) with metadata.resourceVersion rv."""
    now = time.time()
    if rt.custom:
        defs, cols = _custom_columns(ver)
    else:
        defs, cols = [_col("Name", "string", _NAME_DESC, "name")] + _BUILTIN_COLUMNS[rt.builtin], None
    rows = []
    for o in objs:
        name = (o.get("metadata") or {}).get("name", "")
        cells = [name] + ([_custom_cell(c, o, now) for c in cols] if cols is not None
                          else _builtin_cells(rt.builtin, o, now))
        row = {"cells": cells}
        if include_object == "Object":
            row["object"] = o
        elif include_object != "None":
            row["object"] = partial_metadata(o)
        rows.append(row)
    meta = {"resourceVersion": rv}
    if cont:
        meta["continue"] = cont
    if remaining is not None:
        meta["remainingItemCount"] = remaining
    t = {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": meta, "rows": rows}
    t["columnDefinitions"] = [] if no_headers else defs
    return t
