"""Discovery documents and the OpenAPI v3 documents kubectl reads.

Discovery, both forms kube-apiserver 1.33 serves:
- aggregated (apidiscovery.k8s.io/v2 APIGroupDiscoveryList) at /api and /apis when the client
  asks for it in Accept, as kubectl 1.33 does: one request each gives every group, version
  and resource;
- legacy: /api (APIVersions), /apis (APIGroupList), /apis/<group> (APIGroup),
  /api/v1 and /apis/<group>/<version> (APIResourceList), which kubectl falls back to when
  the answer to /api is not the aggregated type (--no-aggregated-discovery shows that).

OpenAPI v3: /openapi/v3 lists one document per group-version; each document has the paths
and operations of that group-version's resources (with x-kubernetes-action and
x-kubernetes-group-version-kind, as kubectl's field-validation check looks for: a PATCH
operation of the kind with a `fieldValidation` query parameter) and a schema per kind: for
custom resources the CRD's openAPIV3Schema, so `kubectl explain` works; for built-in kinds a
minimal schema (the real ones are thousands of lines). The PATCH operations of built-in kinds
do not list application/strategic-merge-patch+json among their request bodies, unlike the
real server's: with the real ones kubectl would compute strategic merge patches from these
schemas, which are too thin for that, and would print a warning; without it kubectl uses its
compiled-in Go types, which give the same patches. /openapi/v2 is not served (404): it is
protobuf only, and kubectl needs it only when v3 is missing.
"""
import base64
import hashlib
import json

from .resources import SUB_VERBS, VERBS

__all__ = ["aggregated", "legacy_api", "legacy_groups", "legacy_group", "resource_list",
           "openapi_root", "openapi_gv", "AGGREGATED_CT"]

AGGREGATED_CT = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
_OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_LIST_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta"


def _subresources(rt, ver):
    has_status = ver.status if rt.custom else rt.versions["v1"].status
    return ["status"] if has_status else []


def _storage_hash(rt, version):
    h = hashlib.sha256(("%s/%s/%s" % (rt.group, version, rt.kind)).encode()).digest()
    return base64.b64encode(h[:8]).decode()


def aggregated(reg, core):
    """The APIGroupDiscoveryList for /api (core=True) or /apis."""
    items = []
    for group, versions in reg.groups():
        if (group == "") != core:
            continue
        vers = []
        for v in versions:
            res = []
            for rt in reg.types_in(group, v):
                ver = rt.served(v)
                kind = {"group": group, "version": v, "kind": rt.kind}
                r = {"resource": rt.plural, "responseKind": kind,
                     "scope": "Namespaced" if rt.namespaced else "Cluster",
                     "singularResource": rt.singular, "verbs": VERBS}
                if rt.short_names:
                    r["shortNames"] = rt.short_names
                if rt.categories:
                    r["categories"] = rt.categories
                subs = [{"subresource": s, "responseKind": kind, "verbs": SUB_VERBS}
                        for s in _subresources(rt, ver)]
                if subs:
                    r["subresources"] = subs
                res.append(r)
            vers.append({"version": v, "resources": res, "freshness": "Current"})
        meta = {"creationTimestamp": None}
        if group:
            meta["name"] = group
        items.append({"metadata": meta, "versions": vers})
    return {"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2",
            "metadata": {}, "items": items}


def legacy_api(server_address):
    return {"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]}


def _group_doc(group, versions):
    gvs = [{"groupVersion": "%s/%s" % (group, v), "version": v} for v in versions]
    return {"name": group, "versions": gvs, "preferredVersion": gvs[0]}


def legacy_groups(reg):
    return {"kind": "APIGroupList", "apiVersion": "v1",
            "groups": [_group_doc(g, vs) for g, vs in reg.groups() if g]}


def legacy_group(reg, group):
    for g, vs in reg.groups():
        if g == group and g:
            d = _group_doc(g, vs)
            d.update({"kind": "APIGroup", "apiVersion": "v1"})
            return d
    return None


def resource_list(reg, group, version):
    types = reg.types_in(group, version)
    if not types:
        return None
    res = []
    for rt in types:
        ver = rt.served(version)
        r = {"name": rt.plural, "singularName": rt.singular, "namespaced": rt.namespaced,
             "kind": rt.kind, "verbs": VERBS, "storageVersionHash": _storage_hash(rt, version)}
        if rt.short_names:
            r["shortNames"] = rt.short_names
        if rt.categories:
            r["categories"] = rt.categories
        res.append(r)
        for s in _subresources(rt, ver):
            res.append({"name": rt.plural + "/" + s, "singularName": "", "namespaced": rt.namespaced,
                        "kind": rt.kind, "verbs": SUB_VERBS})
    return {"kind": "APIResourceList", "apiVersion": "v1",
            "groupVersion": "%s/%s" % (group, version) if group else version, "resources": res}


# -- OpenAPI v3 ----------------------------------------------------------------------------------
def _gv_path(group, version):
    return "apis/%s/%s" % (group, version) if group else "api/" + version


def _schema_name(rt, version):
    if rt.builtin == "crd":
        return "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.%s.%s" % (version, rt.kind)
    if not rt.group:
        return "io.k8s.api.core.%s.%s" % (version, rt.kind)
    return "%s.%s.%s" % (".".join(reversed(rt.group.split("."))), version, rt.kind)


def openapi_root(reg):
    paths = {}
    for group, versions in reg.groups():
        for v in versions:
            doc = openapi_gv(reg, group, v)
            h = hashlib.sha512(json.dumps(doc, sort_keys=True).encode()).hexdigest().upper()[:128]
            p = _gv_path(group, v)
            paths[p] = {"serverRelativeURL": "/openapi/v3/%s?hash=%s" % (p, h)}
    return {"paths": paths}


def _param(name, where="query", required=False, desc=""):
    p = {"name": name, "in": where, "description": desc, "schema": {"type": "string", "uniqueItems": True}}
    if required:
        p["required"] = True
    return p


_QUERY_WRITE = [_param("dryRun", desc="When present, indicates that modifications should not be persisted."),
                _param("fieldManager", desc="fieldManager is a name associated with the actor or entity "
                       "that is making these changes."),
                _param("fieldValidation", desc="fieldValidation instructs the server on how to handle "
                       "objects in the request containing unknown or duplicate fields: Ignore, Warn "
                       "(the default) or Strict.")]
_QUERY_LIST = [_param(n) for n in ("allowWatchBookmarks", "continue", "fieldSelector", "labelSelector",
                                   "limit", "resourceVersion", "resourceVersionMatch",
                                   "sendInitialEvents", "timeoutSeconds", "watch")]


def _op(action, gvk, op_id, ref, params, body_types=None, desc=""):
    op = {"description": desc or "%s %s" % (action, gvk["kind"]), "operationId": op_id,
          "parameters": params, "x-kubernetes-action": action, "x-kubernetes-group-version-kind": gvk,
          "responses": {"200": {"description": "OK", "content": {
              "application/json": {"schema": {"$ref": "#/components/schemas/" + ref}}}},
              "401": {"description": "Unauthorized"}}}
    if body_types:
        op["requestBody"] = {"content": {t: {"schema": {"$ref": "#/components/schemas/" + ref}}
                                         for t in body_types}, "required": True}
    return op


def _kind_schema(rt, ver, version):
    gvk = [{"group": rt.group, "kind": rt.kind, "version": version}]
    meta = {"allOf": [{"$ref": "#/components/schemas/" + _OBJECT_META}], "default": {},
            "description": "Standard object's metadata."}
    if rt.custom and isinstance(ver.schema, dict):
        s = json.loads(json.dumps(ver.schema))
        s.setdefault("properties", {})["metadata"] = meta
        s["properties"].setdefault("apiVersion", {"type": "string"})
        s["properties"].setdefault("kind", {"type": "string"})
    else:
        props = {"apiVersion": {"type": "string", "description": "APIVersion defines the versioned "
                                "schema of this representation of an object."},
                 "kind": {"type": "string", "description": "Kind is a string value representing the "
                          "REST resource this object represents."},
                 "metadata": meta}
        if rt.builtin == "secret":
            props.update({"data": {"type": "object", "additionalProperties": {"type": "string", "format": "byte"}},
                          "stringData": {"type": "object", "additionalProperties": {"type": "string"}},
                          "type": {"type": "string"}, "immutable": {"type": "boolean"}})
        else:
            unpublished = "(the stand-in does not publish this schema)"
            props.update({"spec": {"type": "object", "description": "Spec " + unpublished},
                          "status": {"type": "object", "description": "Status " + unpublished}})
        s = {"type": "object", "description": rt.kind, "properties": props}
    s["x-kubernetes-group-version-kind"] = gvk
    return s


def openapi_gv(reg, group, version):
    paths, schemas = {}, {}
    prefix = "/" + _gv_path(group, version)
    for rt in reg.types_in(group, version):
        ver = rt.served(version)
        gvk = {"group": rt.group, "kind": rt.kind, "version": version}
        ref = _schema_name(rt, version)
        list_ref = ref + "List"
        schemas[ref] = _kind_schema(rt, ver, version)
        schemas[list_ref] = {"type": "object", "required": ["items"], "properties": {
            "apiVersion": {"type": "string"}, "kind": {"type": "string"},
            "items": {"type": "array", "items": {"$ref": "#/components/schemas/" + ref}},
            "metadata": {"allOf": [{"$ref": "#/components/schemas/" + _LIST_META}], "default": {}}},
            "x-kubernetes-group-version-kind": [{"group": rt.group, "kind": rt.list_kind, "version": version}]}
        base = prefix + ("/namespaces/{namespace}/" if rt.namespaced else "/") + rt.plural
        ns_param = [_param("namespace", "path", True)] if rt.namespaced else []
        name = rt.kind
        patch_types = ["application/apply-patch+yaml", "application/json-patch+json",
                       "application/merge-patch+json"]
        paths[base] = {
            "get": _op("list", gvk, "list" + name, list_ref, _QUERY_LIST),
            "post": _op("post", gvk, "create" + name, ref, _QUERY_WRITE, ["application/json", "application/yaml"]),
            "delete": _op("deletecollection", gvk, "deletecollection" + name, ref, _QUERY_LIST),
            "parameters": ns_param}
        if rt.namespaced:
            paths[prefix + "/" + rt.plural] = {
                "get": _op("list", gvk, "list%sForAllNamespaces" % name, list_ref, _QUERY_LIST),
                "parameters": []}
        item_params = [_param("name", "path", True)] + ns_param
        paths[base + "/{name}"] = {
            "get": _op("get", gvk, "read" + name, ref, []),
            "put": _op("put", gvk, "replace" + name, ref, _QUERY_WRITE, ["application/json", "application/yaml"]),
            "patch": _op("patch", gvk, "patch" + name, ref, _QUERY_WRITE + [_param("force")], patch_types),
            "delete": _op("delete", gvk, "delete" + name, ref, [_param("gracePeriodSeconds"),
                                                              _param("propagationPolicy")]),
            "parameters": item_params}
        for sub in _subresources(rt, ver):
            paths[base + "/{name}/" + sub] = {
                "get": _op("get", gvk, "read%sStatus" % name, ref, []),
                "put": _op("put", gvk, "replace%sStatus" % name, ref, _QUERY_WRITE, ["application/json"]),
                "patch": _op("patch", gvk, "patch%sStatus" % name, ref, _QUERY_WRITE + [_param("force")],
                             patch_types),
                "parameters": item_params}
    schemas[_OBJECT_META] = {"type": "object", "description": "ObjectMeta is metadata that all "
                             "persisted resources must have.", "properties": {
        "name": {"type": "string"}, "generateName": {"type": "string"}, "namespace": {"type": "string"},
        "uid": {"type": "string"}, "resourceVersion": {"type": "string"},
        "generation": {"type": "integer", "format": "int64"},
        "creationTimestamp": {"type": "string", "format": "date-time"},
        "deletionTimestamp": {"type": "string", "format": "date-time"},
        "deletionGracePeriodSeconds": {"type": "integer", "format": "int64"},
        "labels": {"type": "object", "additionalProperties": {"type": "string", "default": ""}},
        "annotations": {"type": "object", "additionalProperties": {"type": "string", "default": ""}},
        "finalizers": {"type": "array", "items": {"type": "string", "default": ""},
                       "x-kubernetes-list-type": "set"},
        "ownerReferences": {"type": "array", "items": {"type": "object"},
                            "x-kubernetes-patch-merge-key": "uid", "x-kubernetes-patch-strategy": "merge"},
        "managedFields": {"type": "array", "items": {"type": "object"}}}}
    schemas[_LIST_META] = {"type": "object", "properties": {
        "continue": {"type": "string"}, "remainingItemCount": {"type": "integer", "format": "int64"},
        "resourceVersion": {"type": "string"}}}
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "v1.33.0"},
            "paths": paths, "components": {"schemas": schemas}}
