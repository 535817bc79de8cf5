"""Kubernetes protobuf request bodies, decoded for the kinds kubectl sends that way.

kubectl 1.33's typed clients send built-in objects as `application/vnd.kubernetes.protobuf`
(`kubectl create secret ...`, `kubectl create namespace ...`); only its dynamic paths (apply,
patch, delete, get) speak JSON. This module decodes the protobuf envelope ("k8s\\0" then a
runtime.Unknown holding typeMeta and the raw message) and the messages of Secret and
Namespace (with ObjectMeta) from k8s.io/api/core/v1/generated.proto into the same JSON shape
the JSON API uses (Secret data as base64 strings, times as RFC 3339). Responses are always
JSON, which kubectl also accepts. Any other kind raises ProtoUnsupported (the server answers
415); a malformed message raises ProtoError (400).
"""
import base64
import time

__all__ = ["decode", "ProtoError", "ProtoUnsupported", "CONTENT_TYPE"]

CONTENT_TYPE = "application/vnd.kubernetes.protobuf"
_MAGIC = b"k8s\x00"


class ProtoError(ValueError):
    pass


class ProtoUnsupported(ValueError):
    pass


def _varint(buf, i):
    shift, out = 0, 0
    for _ in range(10):
        if i >= len(buf):
            raise ProtoError("truncated varint")
        b = buf[i]
        i += 1
        out |= (b & 0x7F) << shift
        if not b & 0x80:
            return out, i
        shift += 7
    raise ProtoError("varint longer than 10 bytes")


def _fields(buf):
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        fn, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _varint(buf, i)
        elif wt == 2:
            n, i = _varint(buf, i)
            if i + n > len(buf):
                raise ProtoError("field %d: length %d past the end of the message" % (fn, n))
            v, i = buf[i:i + n], i + n
        elif wt in (1, 5):
            n = 8 if wt == 1 else 4
            if i + n > len(buf):
                raise ProtoError("truncated fixed-size field %d" % fn)
            v, i = buf[i:i + n], i + n
        else:
            raise ProtoError("unsupported wire type %d (field %d)" % (wt, fn))
        yield fn, wt, v


def _text(v):
    try:
        return bytes(v).decode("utf-8")
    except (UnicodeDecodeError, TypeError):
        raise ProtoError("a string field is not UTF-8")


def _sint64(v):
    return v - (1 << 64) if v >= 1 << 63 else v


_TIME = {1: ("seconds", "int"), 2: ("nanos", "int")}
_OWNER = {5: ("apiVersion", "string"), 1: ("kind", "string"), 3: ("name", "string"), 4: ("uid", "string"),
          6: ("controller", "bool"), 7: ("blockOwnerDeletion", "bool")}
_META = {1: ("name", "string"), 2: ("generateName", "string"), 3: ("namespace", "string"),
         4: ("selfLink", "string"), 5: ("uid", "string"), 6: ("resourceVersion", "string"),
         7: ("generation", "int"), 8: ("creationTimestamp", "time"), 9: ("deletionTimestamp", "time"),
         10: ("deletionGracePeriodSeconds", "int"), 11: ("labels", ("map", "string")),
         12: ("annotations", ("map", "string")), 13: ("ownerReferences", ("repeated", _OWNER)),
         14: ("finalizers", ("repeated", "string"))}
_SECRET = {1: ("metadata", _META), 2: ("data", ("map", "bytes")), 3: ("type", "string"),
           4: ("stringData", ("map", "string")), 5: ("immutable", "bool")}
_NS_SPEC = {1: ("finalizers", ("repeated", "string"))}
_NS_STATUS = {1: ("phase", "string")}
_NAMESPACE = {1: ("metadata", _META), 2: ("spec", _NS_SPEC), 3: ("status", _NS_STATUS)}
_KINDS = {("v1", "Secret"): _SECRET, ("v1", "Namespace"): _NAMESPACE}


def _scalar(kind, wt, v):
    if kind == "string":
        return _text(v)
    if kind == "bytes":
        return base64.b64encode(bytes(v)).decode("ascii")
    if kind == "int":
        if wt != 0:
            raise ProtoError("an integer field has wire type %d" % wt)
        return _sint64(v)
    if kind == "bool":
        return bool(v)
    if kind == "time":
        t = _message(v, _TIME, 0)
        if not t.get("seconds"):
            return None  # the zero time: JSON null, i.e. unset
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t["seconds"]))
    raise ProtoError("unknown field kind %r" % (kind,))


def _message(buf, schema, depth):
    if depth > 20:
        raise ProtoError("nested too deeply")
    out = {}
    for fn, wt, v in _fields(buf):
        spec = schema.get(fn)
        if spec is None:
            continue  # a field the stand-in does not keep
        name, kind = spec
        if isinstance(kind, dict):
            if wt != 2:
                raise ProtoError("%s: expected a message" % name)
            out[name] = _message(v, kind, depth + 1)
        elif isinstance(kind, tuple) and kind[0] == "map":
            entry = {k: val for k, _, val in _fields(v)}
            key = _text(entry.get(1, b""))
            out.setdefault(name, {})[key] = _scalar(kind[1], 2, entry.get(2, b""))
        elif isinstance(kind, tuple) and kind[0] == "repeated":
            item = kind[1]
            out.setdefault(name, []).append(_message(v, item, depth + 1) if isinstance(item, dict)
                                            else _scalar(item, wt, v))
        else:
            val = _scalar(kind, wt, v)
            if val not in ("", 0, None) or kind == "bool":  # JSON's omitempty: unset, not empty
                out[name] = val
    return out


def decode(body):
    """The object in a Kubernetes protobuf request body, as JSON-shaped dicts."""
    if not body.startswith(_MAGIC):
        raise ProtoError("a Kubernetes protobuf body starts with k8s\\0")
    unknown = {fn: v for fn, _, v in _fields(body[len(_MAGIC):])}
    tm = {fn: _text(v) for fn, _, v in _fields(unknown.get(1, b""))}
    api_version, kind = tm.get(1, ""), tm.get(2, "")
    schema = _KINDS.get((api_version, kind))
    if schema is None:
        raise ProtoUnsupported("%s %s" % (api_version, kind))
    obj = _message(unknown.get(2, b""), schema, 0)
    obj["apiVersion"], obj["kind"] = api_version, kind
    return obj
