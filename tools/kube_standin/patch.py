"""The PATCH bodies the Kubernetes API accepts, applied to plain JSON values (dict/list/...).

    merge_patch(target, patch)              RFC 7386 JSON merge patch (application/merge-patch+json)
    json_patch(doc, ops)                    RFC 6902 JSON patch (application/json-patch+json)
    strategic_merge_patch(original, patch)  Kubernetes strategic merge patch, for built-in types
                                            (application/strategic-merge-patch+json)

None of them changes its arguments; each returns a new value. They raise PatchError for a
patch that cannot be applied (the server answers 422) and PatchFormatError for a patch that is
not of the right shape (400), as kube-apiserver does.

Strategic merge patch: the real server reads each field's patch strategy and merge key from the
Go types. The stand-in serves only Namespaces, Pods and Secrets among the built-in types, so
MERGE_KEYS below names the list fields of those types that merge by a key (containers by
name, env by name, ports by containerPort, conditions by type, ...) and MERGE_PRIMITIVES the
primitive lists that merge as sets (metadata.finalizers). Every other list is replaced, as for
a field without a patch strategy. The directives kubectl sends are honoured: $patch
(replace/delete/merge) in maps and in lists, $retainKeys, $setElementOrder/<field> and
$deleteFromPrimitiveList/<field>. Custom resources do not support strategic merge patch at
all (the server answers 415, as the real one does): that check is the caller's.
"""
import copy

__all__ = ["PatchError", "PatchFormatError", "merge_patch", "json_patch",
           "strategic_merge_patch", "json_equal", "MERGE_KEYS"]


class PatchError(ValueError):
    """The patch is well-formed but does not apply to this object (HTTP 422)."""


class PatchFormatError(ValueError):
    """The patch body is not a patch of this type (HTTP 400)."""


# Field name -> merge key, for the list fields of core/v1 Pod, Secret and Namespace (and
# ObjectMeta) whose Go type declares patchStrategy:"merge" with a patchMergeKey.
MERGE_KEYS = {
    "containers": "name", "initContainers": "name", "ephemeralContainers": "name",
    "env": "name", "volumes": "name", "volumeMounts": "mountPath", "volumeDevices": "devicePath",
    "ports": "containerPort", "imagePullSecrets": "name", "conditions": "type",
    "podIPs": "ip", "hostIPs": "ip", "ownerReferences": "uid", "hostAliases": "ip",
    "resourceClaims": "name", "schedulingGates": "name", "topologySpreadConstraints": "topologyKey",
    "resourceClaimStatuses": "name",
}
# Primitive lists with patchStrategy:"merge": merged as ordered sets.
MERGE_PRIMITIVES = {"finalizers"}
_MAX_DEPTH = 200


def json_equal(a, b):
    """JSON equality: 1 == 1.0 but True != 1 (Python's == says True == 1)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


# -- RFC 7386 -------------------------------------------------------------------------------
def merge_patch(target, patch, _depth=0):
    if _depth > _MAX_DEPTH:
        raise PatchError("patch nested deeper than %d" % _MAX_DEPTH)
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            result.pop(k, None)
        else:
            result[k] = merge_patch(result.get(k), v, _depth + 1)
    return result


# -- RFC 6902 -------------------------------------------------------------------------------
def _pointer(ptr, what="path"):
    if not isinstance(ptr, str):
        raise PatchFormatError("JSON patch: %s must be a string" % what)
    if ptr == "":
        return []
    if not ptr.startswith("/"):
        raise PatchFormatError("JSON patch: %s %r does not start with '/'" % (what, ptr))
    return [t.replace("~1", "/").replace("~0", "~") for t in ptr[1:].split("/")]


def _index(token, n, allow_end, ptr):
    if token == "-" and allow_end:
        return n
    if not token.isdigit() or (len(token) > 1 and token[0] == "0"):
        raise PatchError("JSON patch: %r: %r is not an array index" % (ptr, token))
    i = int(token)
    if i > n or (i == n and not allow_end):
        raise PatchError("JSON patch: %r: index %d out of range" % (ptr, i))
    return i


def _walk(doc, tokens, ptr, op):
    cur = doc
    for t in tokens:
        if isinstance(cur, dict):
            if t not in cur:
                raise PatchError("%s operation does not apply: doc is missing path: %r" % (op, ptr))
            cur = cur[t]
        elif isinstance(cur, list):
            cur = cur[_index(t, len(cur), False, ptr)]
        else:
            raise PatchError("%s operation does not apply: doc is missing path: %r" % (op, ptr))
    return cur


def _get(doc, ptr, op):
    return _walk(doc, _pointer(ptr), ptr, op)


def _add(doc, ptr, value, op="add"):
    tokens = _pointer(ptr)
    if not tokens:
        return copy.deepcopy(value)
    parent = _walk(doc, tokens[:-1], ptr, op)
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = copy.deepcopy(value)
    elif isinstance(parent, list):
        parent.insert(_index(last, len(parent), True, ptr), copy.deepcopy(value))
    else:
        raise PatchError("%s operation does not apply: doc is missing path: %r" % (op, ptr))
    return doc


def _remove(doc, ptr, op="remove"):
    tokens = _pointer(ptr)
    if not tokens:
        raise PatchError("%s operation does not apply: cannot remove the whole document" % op)
    parent = _walk(doc, tokens[:-1], ptr, op)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError("%s operation does not apply: doc is missing key: %r" % (op, ptr))
        return parent.pop(last)
    if isinstance(parent, list):
        return parent.pop(_index(last, len(parent), False, ptr))
    raise PatchError("%s operation does not apply: doc is missing path: %r" % (op, ptr))


def json_patch(doc, ops):
    if not isinstance(ops, list):
        raise PatchFormatError("a JSON patch is a JSON array of operations")
    if len(ops) > 10000:
        raise PatchFormatError("a JSON patch of %d operations is too long (at most 10000)" % len(ops))
    doc = copy.deepcopy(doc)
    for n, op in enumerate(ops):
        if not isinstance(op, dict) or not isinstance(op.get("op"), str):
            raise PatchFormatError("JSON patch: operation %d has no \"op\"" % n)
        kind, path = op["op"], op.get("path")
        if kind in ("add", "replace", "test") and "value" not in op:
            raise PatchFormatError("JSON patch: operation %d (%s) has no \"value\"" % (n, kind))
        if kind == "add":
            doc = _add(doc, path, op["value"])
        elif kind == "remove":
            _remove(doc, path)
        elif kind == "replace":
            if _pointer(path) == []:
                doc = copy.deepcopy(op["value"])
                continue
            _remove(doc, path, "replace")
            doc = _add(doc, path, op["value"], "replace")
        elif kind == "move":
            src = op.get("from")
            if _pointer(path)[:len(_pointer(src, "from"))] == _pointer(src, "from") and path != src:
                raise PatchError("JSON patch: cannot move %r into its own child %r" % (src, path))
            v = _remove(doc, src, "move")
            doc = _add(doc, path, v, "move")
        elif kind == "copy":
            v = _get(doc, op.get("from"), "copy")
            doc = _add(doc, path, v, "copy")
        elif kind == "test":
            if not json_equal(_get(doc, path, "test"), op["value"]):
                raise PatchError("testing value %s failed" % path)
        else:
            raise PatchFormatError("JSON patch: unknown operation %r" % kind)
    return doc


# -- strategic merge patch ----------------------------------------------------------------------
def strategic_merge_patch(original, patch):
    if not isinstance(patch, dict):
        raise PatchFormatError("a strategic merge patch is a JSON object")
    out = _smp_map(original if isinstance(original, dict) else {}, patch, 0)
    return out if out is not None else {}


def _smp_map(orig, patch, depth):
    """orig merged with patch (both dicts); None when the patch says $patch: delete."""
    if depth > _MAX_DEPTH:
        raise PatchError("patch nested deeper than %d" % _MAX_DEPTH)
    directive = patch.get("$patch")
    if directive is not None and directive not in ("replace", "delete", "merge"):
        raise PatchError("unknown patch type: %r in map: %r" % (directive, patch))
    if directive == "delete":
        return None
    if directive == "replace":
        return _smp_map({}, {k: v for k, v in patch.items() if k != "$patch"}, depth + 1)
    result = copy.deepcopy(orig)
    orders = {}
    retain = patch.get("$retainKeys")
    if retain is not None and not isinstance(retain, list):
        raise PatchError("$retainKeys must be a list of field names")
    for k, v in patch.items():
        if k in ("$patch", "$retainKeys"):
            continue
        if k.startswith("$setElementOrder/"):
            orders[k[len("$setElementOrder/"):]] = v
            continue
        if k.startswith("$deleteFromPrimitiveList/"):
            field = k[len("$deleteFromPrimitiveList/"):]
            if isinstance(result.get(field), list) and isinstance(v, list):
                result[field] = [x for x in result[field] if not any(json_equal(x, d) for d in v)]
            continue
        if k.startswith("$"):
            raise PatchError("unknown directive %r in a strategic merge patch" % k)
        if v is None:
            result.pop(k, None)
        elif isinstance(v, dict):
            cur = result.get(k)
            merged = _smp_map(cur if isinstance(cur, dict) else {}, v, depth + 1)
            if merged is None:
                result.pop(k, None)
            else:
                result[k] = merged
        elif isinstance(v, list):
            cur = result.get(k)
            result[k] = _smp_list(k, cur if isinstance(cur, list) else [], v, depth + 1)
        else:
            result[k] = copy.deepcopy(v)
    for field, order in orders.items():
        if isinstance(result.get(field), list) and isinstance(order, list):
            result[field] = _reorder(field, result[field], order)
    if retain is not None:
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _smp_list(field, cur, patch, depth):
    if any(isinstance(e, dict) and e.get("$patch") == "replace" for e in patch):
        return [_smp_map({}, e, depth) for e in patch
                if not (isinstance(e, dict) and e.get("$patch") == "replace")]
    key = MERGE_KEYS.get(field)
    if key is not None and all(isinstance(e, dict) for e in patch):
        result = copy.deepcopy(cur)
        for e in patch:
            if key not in e:
                raise PatchError("map: %r does not contain declared merge key: %s" % (e, key))
            idx = next((i for i, c in enumerate(result)
                        if isinstance(c, dict) and json_equal(c.get(key), e[key])), None)
            if e.get("$patch") == "delete":
                if idx is not None:
                    del result[idx]
                continue
            if idx is None:
                added = _smp_map({}, e, depth)
                if added is not None:
                    result.append(added)
            else:
                merged = _smp_map(result[idx], e, depth)
                if merged is None:
                    del result[idx]
                else:
                    result[idx] = merged
        return result
    if field in MERGE_PRIMITIVES and not any(isinstance(e, (dict, list)) for e in patch):
        result = list(cur)
        for e in patch:
            if not any(json_equal(e, c) for c in result):
                result.append(e)
        return result
    return copy.deepcopy(patch)


def _reorder(field, items, order):
    key = MERGE_KEYS.get(field)

    def ident(x):
        return x.get(key) if key is not None and isinstance(x, dict) else x

    wanted = [o.get(key) if key is not None and isinstance(o, dict) else o for o in order]
    first, rest = [], []
    for it in items:
        (first if any(json_equal(ident(it), w) for w in wanted) else rest).append(it)
    first.sort(key=lambda it: next(i for i, w in enumerate(wanted) if json_equal(ident(it), w)))
    return first + rest
