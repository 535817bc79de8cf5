"""What kube-apiserver does with a CRD's structural OpenAPI v3 schema, for the keywords our
CRDs use: defaulting, pruning of unknown fields, and validation.

    default(obj, schema)             fills `default` values in place (absent fields only)
    prune(obj, schema) -> [paths]    drops fields the schema does not declare, in place;
                                     returns them ("spec.foo") for fieldValidation Strict/Warn
    validate(obj, schema) -> [cause] each cause {"reason", "message", "field"} as in a
                                     422 Status's details.causes
    check_crd_schema(schema, path)   (decode errors, causes) of a CRD's schema itself: values
                                     of the wrong JSON type (the real server cannot decode
                                     them: 400) and non-structural nodes (422)

Validated: type (object, array, string, integer, number, boolean), nullable, required, enum,
pattern, minLength/maxLength, minimum/maximum (and exclusive*), minItems/maxItems,
uniqueItems, minProperties/maxProperties, properties/additionalProperties/items,
x-kubernetes-preserve-unknown-fields, x-kubernetes-int-or-string,
x-kubernetes-embedded-resource, x-kubernetes-list-type (set / map uniqueness).
Not evaluated: x-kubernetes-validations (CEL rules), format, allOf/anyOf/oneOf/not. The messages
follow kube-apiserver's wording (`spec.model: Required value`, `spec.strategy: Unsupported
value: "x": supported values: "ttft", ...`, `spec.blockSize: Invalid value: 0:
spec.blockSize in body should be greater than or equal to 1`).

At the root, apiVersion, kind and metadata are never pruned (the server keeps ObjectMeta
whatever the schema says); of metadata only name is validated against the schema.
Patterns are Go RE2 syntax; Python's `re` reads the ones CRDs use (classes, anchors, \\S, \\d).
"""
import copy
import json
import re

from .patch import json_equal

__all__ = ["default", "prune", "validate", "check_crd_schema"]

_MAX_DEPTH = 100
_re_cache = {}


def _regex(p):
    r = _re_cache.get(p)
    if r is None:
        try:
            r = re.compile(p)
        except re.error:
            r = False
        if len(_re_cache) < 1000:
            _re_cache[p] = r
    return r


def _join(path, key):
    return key if not path else path + "." + key


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _type_ok(t, v, s):
    if s.get("x-kubernetes-int-or-string"):
        return _is_int(v) or isinstance(v, str)
    return {"object": lambda: isinstance(v, dict), "array": lambda: isinstance(v, list),
            "string": lambda: isinstance(v, str), "integer": lambda: _is_int(v),
            "number": lambda: _is_num(v), "boolean": lambda: isinstance(v, bool)}.get(
        t, lambda: True)()


def _gofmt(v):
    """A value as kube-apiserver prints it in a message (roughly Go's %#v of JSON)."""
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (dict, list)):
        return json.dumps(v, separators=(",", ":"), sort_keys=True)
    return str(v)


# -- defaulting --------------------------------------------------------------------------------
def default(obj, s, _depth=0):
    if not isinstance(s, dict) or _depth > _MAX_DEPTH:
        return
    if isinstance(obj, dict):
        props = s.get("properties") or {}
        for k, ps in props.items():
            if not isinstance(ps, dict):
                continue
            if k not in obj and "default" in ps:
                obj[k] = copy.deepcopy(ps["default"])
            if k in obj:
                default(obj[k], ps, _depth + 1)
        ap = s.get("additionalProperties")
        if isinstance(ap, dict):
            for k, v in obj.items():
                if k not in props:
                    default(v, ap, _depth + 1)
    elif isinstance(obj, list) and isinstance(s.get("items"), dict):
        for v in obj:
            default(v, s["items"], _depth + 1)


# -- pruning -------------------------------------------------------------------------------------
def prune(obj, s, path="", _root=True, _depth=0):
    dropped = []
    _prune(obj, s, path, _root, _depth, dropped)
    return dropped


def _prune(obj, s, path, root, depth, dropped):
    if not isinstance(s, dict) or depth > _MAX_DEPTH:
        return
    if isinstance(obj, dict):
        props = s.get("properties")
        ap = s.get("additionalProperties")
        keep_all = s.get("x-kubernetes-preserve-unknown-fields") is True
        embedded = s.get("x-kubernetes-embedded-resource") is True
        for k in list(obj.keys()):
            if root and k in ("apiVersion", "kind", "metadata"):
                continue
            if embedded and k in ("apiVersion", "kind", "metadata"):
                continue
            if props is not None and k in props:
                _prune(obj[k], props[k], _join(path, k), False, depth + 1, dropped)
            elif isinstance(ap, dict):
                _prune(obj[k], ap, _join(path, k), False, depth + 1, dropped)
            elif ap is True or keep_all:
                continue
            elif props is not None or s.get("type") == "object" or root:
                dropped.append(_join(path, k))
                del obj[k]
    elif isinstance(obj, list) and isinstance(s.get("items"), dict):
        for i, v in enumerate(obj):
            _prune(v, s["items"], "%s[%d]" % (path, i), False, depth + 1, dropped)


# -- validation ----------------------------------------------------------------------------------
def validate(obj, s):
    causes = []
    _validate(obj, s, "", True, 0, causes)
    return causes


def _cause(causes, reason, field, message):
    if len(causes) < 100:  # the real server also stops listing after many errors
        causes.append({"reason": reason, "message": message, "field": field})


def _invalid(causes, field, v, detail):
    _cause(causes, "FieldValueInvalid", field, "Invalid value: %s: %s" % (_gofmt(v), detail))


def _validate(v, s, path, root, depth, causes):
    if not isinstance(s, dict):
        return
    if depth > _MAX_DEPTH:
        _invalid(causes, path, "...", "nested deeper than %d" % _MAX_DEPTH)
        return
    field = path or "<root>"
    if v is None:
        if not s.get("nullable") and s.get("type"):
            _invalid(causes, field, v, "%s in body must be of type %s: \"null\"" % (field, s["type"]))
        return
    t = s.get("type")
    if t and not _type_ok(t, v, s):
        _invalid(causes, field, _jtype(v), "%s in body must be of type %s: \"%s\""
                 % (field, t, _jtype(v)))
        return
    if "enum" in s and isinstance(s["enum"], list):
        if not any(json_equal(v, e) for e in s["enum"]):
            _cause(causes, "FieldValueNotSupported", field, "Unsupported value: %s: supported values: %s"
                   % (_gofmt(v), ", ".join(_gofmt(e) for e in s["enum"])))
    if isinstance(v, str):
        if _is_int(s.get("maxLength")) and len(v) > s["maxLength"]:
            _cause(causes, "FieldValueTooLong", field, "Too long: may not be more than %d bytes"
                   % s["maxLength"])
        if _is_int(s.get("minLength")) and len(v) < s["minLength"]:
            _invalid(causes, field, v, "%s in body should be at least %d chars long" % (field, s["minLength"]))
        if isinstance(s.get("pattern"), str):
            r = _regex(s["pattern"])
            if r is not False and not r.search(v):
                _invalid(causes, field, v, "%s in body should match '%s'" % (field, s["pattern"]))
    if _is_num(v):
        if _is_num(s.get("minimum")):
            if s.get("exclusiveMinimum") is True and not v > s["minimum"]:
                _invalid(causes, field, v, "%s in body should be greater than %s" % (field, s["minimum"]))
            elif v < s["minimum"]:
                _invalid(causes, field, v, "%s in body should be greater than or equal to %s"
                         % (field, s["minimum"]))
        if _is_num(s.get("maximum")):
            if s.get("exclusiveMaximum") is True and not v < s["maximum"]:
                _invalid(causes, field, v, "%s in body should be less than %s" % (field, s["maximum"]))
            elif v > s["maximum"]:
                _invalid(causes, field, v, "%s in body should be less than or equal to %s"
                         % (field, s["maximum"]))
        if _is_num(s.get("multipleOf")) and s["multipleOf"] and (v / s["multipleOf"]) % 1:
            _invalid(causes, field, v, "%s in body should be a multiple of %s" % (field, s["multipleOf"]))
    if isinstance(v, list):
        if _is_int(s.get("maxItems")) and len(v) > s["maxItems"]:
            _cause(causes, "FieldValueTooMany", field, "Too many: %d: must have at most %d items"
                   % (len(v), s["maxItems"]))
        if _is_int(s.get("minItems")) and len(v) < s["minItems"]:
            _invalid(causes, field, v, "%s in body should have at least %d items" % (field, s["minItems"]))
        lt = s.get("x-kubernetes-list-type")
        if s.get("uniqueItems") is True or lt == "set":
            seen = []
            for i, item in enumerate(v):
                if item in seen:
                    _cause(causes, "FieldValueDuplicate", "%s[%d]" % (path, i),
                           "Duplicate value: %s" % _gofmt(item))
                else:
                    seen.append(item)
        if lt == "map" and isinstance(s.get("x-kubernetes-list-map-keys"), list):
            keys = s["x-kubernetes-list-map-keys"]
            seen = []
            for i, item in enumerate(v):
                k = tuple(_gofmt(item.get(x)) if isinstance(item, dict) else None for x in keys)
                if k in seen:
                    shown = ", ".join("%s: %s" % (x, y) for x, y in zip(keys, k))
                    _cause(causes, "FieldValueDuplicate", "%s[%d]" % (path, i),
                           "Duplicate value: {%s}" % shown)
                else:
                    seen.append(k)
        if isinstance(s.get("items"), dict):
            for i, item in enumerate(v):
                _validate(item, s["items"], "%s[%d]" % (path, i), False, depth + 1, causes)
    if isinstance(v, dict):
        for r in s.get("required") or []:
            if isinstance(r, str) and r not in v:
                _cause(causes, "FieldValueRequired", _join(path, r), "Required value")
        if _is_int(s.get("maxProperties")) and len(v) > s["maxProperties"]:
            _cause(causes, "FieldValueTooMany", field, "Too many: %d: must have at most %d items"
                   % (len(v), s["maxProperties"]))
        if _is_int(s.get("minProperties")) and len(v) < s["minProperties"]:
            _invalid(causes, field, v, "%s in body should have at least %d properties"
                     % (field, s["minProperties"]))
        props = s.get("properties") or {}
        ap = s.get("additionalProperties")
        for k, item in v.items():
            if root and k in ("apiVersion", "kind"):
                continue
            if root and k == "metadata":
                ms = props.get("metadata")
                name_s = ((ms or {}).get("properties") or {}).get("name")
                if isinstance(item, dict) and isinstance(name_s, dict) and "name" in item:
                    _validate(item["name"], name_s, "metadata.name", False, depth + 1, causes)
                continue
            if k in props:
                _validate(item, props[k], _join(path, k), False, depth + 1, causes)
            elif isinstance(ap, dict):
                _validate(item, ap, _join(path, k), False, depth + 1, causes)


def _jtype(v):
    if isinstance(v, bool):
        return "boolean"
    if _is_int(v):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "object"
    return "null"


# -- the shape of a CRD's schema ---------------------------------------------------------------------
# kube-apiserver decodes openAPIV3Schema into Go's JSONSchemaProps: a value of the wrong JSON
# type fails that decoding (400 BadRequest, "cannot unmarshal"), and a schema that is not
# structural fails validation (422 Invalid). check_crd_schema finds both, for what our CRDs use.
_SCHEMA_MAPS = ("properties", "patternProperties", "definitions", "dependencies")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf")
_STRINGS = ("type", "description", "pattern", "format", "title", "$ref", "$schema", "id",
            "x-kubernetes-list-type", "x-kubernetes-map-type")
_BOOLS = ("nullable", "uniqueItems", "exclusiveMinimum", "exclusiveMaximum",
          "x-kubernetes-preserve-unknown-fields", "x-kubernetes-int-or-string",
          "x-kubernetes-embedded-resource")
_INTS = ("maxLength", "minLength", "maxItems", "minItems", "maxProperties", "minProperties")
_NUMS = ("maximum", "minimum", "multipleOf")
_TYPES = ("array", "boolean", "integer", "number", "object", "string")


def _go_type(v):
    return {dict: "object", list: "array", str: "string", bool: "bool"}.get(
        type(v), "number" if _is_num(v) else "null")


def check_crd_schema(s, path):
    """(decode_errors, causes) of a CRD version's openAPIV3Schema at `path`."""
    decode, causes = [], []
    _check_node(s, path, decode, causes, 0)
    return decode, causes


def _check_node(s, path, decode, causes, depth):
    if len(decode) + len(causes) > 50 or depth > _MAX_DEPTH:
        return
    if not isinstance(s, dict):
        decode.append("json: cannot unmarshal %s into Go struct field %s of type v1.JSONSchemaProps"
                      % (_go_type(s), path))
        return
    for k, v in s.items():
        f = "%s.%s" % (path, k)
        if k in _STRINGS and not isinstance(v, str):
            decode.append("json: cannot unmarshal %s into Go struct field %s of type string" % (_go_type(v), f))
        elif k in _BOOLS and not isinstance(v, bool):
            decode.append("json: cannot unmarshal %s into Go struct field %s of type bool" % (_go_type(v), f))
        elif k in _INTS and not _is_int(v):
            decode.append("json: cannot unmarshal %s into Go struct field %s of type int64" % (_go_type(v), f))
        elif k in _NUMS and not _is_num(v):
            decode.append("json: cannot unmarshal %s into Go struct field %s of type float64" % (_go_type(v), f))
        elif k in ("required", "x-kubernetes-list-map-keys") and not (
                isinstance(v, list) and all(isinstance(x, str) for x in v)):
            decode.append("json: cannot unmarshal %s into Go struct field %s of type []string" % (_go_type(v), f))
        elif k in ("enum",) and not isinstance(v, list):
            decode.append("json: cannot unmarshal %s into Go struct field %s of type []v1.JSON" % (_go_type(v), f))
        elif k in _SCHEMA_MAPS:
            if not isinstance(v, dict):
                decode.append("json: cannot unmarshal %s into Go struct field %s of type "
                              "map[string]v1.JSONSchemaProps" % (_go_type(v), f))
            else:
                for name, sub in v.items():
                    _check_node(sub, "%s[%s]" % (f, name), decode, causes, depth + 1)
        elif k in _SCHEMA_LISTS:
            if not isinstance(v, list):
                decode.append("json: cannot unmarshal %s into Go struct field %s of type "
                              "[]v1.JSONSchemaProps" % (_go_type(v), f))
            else:
                for i, sub in enumerate(v):
                    _check_node(sub, "%s[%d]" % (f, i), decode, causes, depth + 1)
        elif k in ("items", "not", "additionalItems"):
            if isinstance(v, list) and k == "items":
                for i, sub in enumerate(v):
                    _check_node(sub, "%s[%d]" % (f, i), decode, causes, depth + 1)
            elif not isinstance(v, bool) or k == "not":
                _check_node(v, f, decode, causes, depth + 1)
        elif k == "additionalProperties" and not isinstance(v, bool):
            _check_node(v, f, decode, causes, depth + 1)
        elif k == "x-kubernetes-validations":
            if not isinstance(v, list) or not all(isinstance(r, dict) and isinstance(r.get("rule"), str)
                                                  for r in v):
                decode.append("json: cannot unmarshal %s into Go struct field %s of type "
                              "v1.ValidationRules (a list of {rule, message})" % (_go_type(v), f))
    if decode:
        return
    t = s.get("type")
    free = s.get("x-kubernetes-int-or-string") is True or s.get("x-kubernetes-preserve-unknown-fields") is True
    if t is not None and t not in _TYPES:
        causes.append({"reason": "FieldValueNotSupported", "field": path + ".type",
                       "message": "Unsupported value: %s: supported values: %s"
                       % (json.dumps(t), ", ".join('"%s"' % x for x in _TYPES))})
    if t is None and not free and depth > 0 and not any(k in s for k in _SCHEMA_LISTS + ("not",)):
        causes.append({"reason": "FieldValueRequired", "field": path + ".type",
                       "message": "Required value: must not be empty for specified %s fields"
                       % ("array" if "items" in s else "object")})
    if t == "array" and "items" not in s:
        causes.append({"reason": "FieldValueRequired", "field": path + ".items",
                       "message": "Required value: must be specified"})
    if t in ("object",) and "properties" in s and isinstance(s.get("additionalProperties"), dict):
        causes.append({"reason": "FieldValueForbidden", "field": path + ".additionalProperties",
                       "message": "Forbidden: additionalProperties and properties are mutual exclusive"})
