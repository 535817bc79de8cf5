"""The stand-in's storage: every object in memory, one global resourceVersion counter (as etcd's
revision: each create, update and delete takes the next number; a no-op update takes none),
a bounded history of watch events, and optionally a JSON state file.

Contracts
- Thread safety: every public method takes `lock` (an RLock); `cond` (on the same lock) is
  notified after every change, compaction and close_watches(), and on stop().
- Stored objects are never changed in place once committed: writers deep-copy, change the
  copy and commit it. Events and watchers may therefore share references to them.
- Events are contiguous: the history holds every event with rv in (compacted, rv]. A watch
  from resourceVersion R can be served iff R >= compacted; else it gets 410 Expired.
- Restart: with --state FILE the objects and the counter survive a restart, the history does
  not (compacted = rv at start), so a watch from an older resourceVersion gets 410 Expired and
  the client must relist, as after a real API server restart or an etcd compaction.
- The state file is rewritten after every change (write to FILE.tmp, fsync, rename).
"""
import collections
import copy
import json
import os
import random
import threading
import time
import uuid

from . import builtins, errors, schema
from .patch import (PatchError, PatchFormatError, json_equal, json_patch, merge_patch,
                    strategic_merge_patch)
from .resources import DNS_LABEL, DNS_SUBDOMAIN, Registry, field_value
from .selectors import LABEL_NAME, LABEL_VALUE

__all__ = ["Store", "Event", "PATCH_TYPES", "now_rfc3339"]

SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
UNDELETABLE_NAMESPACES = ("default", "kube-system", "kube-public")
PATCH_TYPES = {
    "application/json-patch+json": "json",
    "application/merge-patch+json": "merge",
    "application/strategic-merge-patch+json": "strategic",
    "application/apply-patch+yaml": "apply",
}
_CR_PATCH_TYPES = ["application/json-patch+json", "application/merge-patch+json",
                   "application/apply-patch+yaml"]
_GEN_CHARS = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apiserver names.SimpleNameGenerator


def now_rfc3339():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class Event:
    __slots__ = ("rv", "type", "key", "obj", "old")

    def __init__(self, rv, etype, key, obj, old):
        self.rv = rv        # int
        self.type = etype   # ADDED | MODIFIED | DELETED
        self.key = key      # (group, plural)
        self.obj = obj      # object after the change (DELETED: its last state, with the new rv)
        self.old = old      # object before the change, None for ADDED


class Store:
    def __init__(self, history=1000, state_file=None):
        self.lock = threading.RLock()
        self.cond = threading.Condition(self.lock)
        self.reg = Registry()
        self.objects = {}            # (group, plural) -> {(namespace, name): object}
        self.rv = 0
        self.history = collections.deque()
        self.history_limit = max(0, int(history))
        self.compacted = 0
        self.watch_epoch = 0         # bumped by close_watches(): every open watch ends
        self.stopping = False
        self.state_file = state_file
        self.open_watches = 0
        if state_file and os.path.exists(state_file):
            self._load(state_file)
        with self.lock:
            for ns in SYSTEM_NAMESPACES:
                if (None, ns) not in self.objects.get(("", "namespaces"), {}):
                    rt = self.reg.by_key("", "namespaces")
                    self.create(rt, rt.versions["v1"], None,
                                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})

    # -- persistence ------------------------------------------------------------------------------
    def _load(self, path):
        with open(path, "r", encoding="utf-8") as f:
            state = json.load(f)
        items = state.get("items") or []
        # CRDs first: their types must exist before their objects are put back.
        items.sort(key=lambda it: 0 if it.get("resource") == "customresourcedefinitions" else 1)
        for it in items:
            group, plural, obj = it.get("group", ""), it.get("resource"), it.get("object")
            if plural == "customresourcedefinitions" and group == "apiextensions.k8s.io":
                self.reg.register_crd(obj)
            rt = self.reg.by_key(group, plural)
            if rt is None or not isinstance(obj, dict):
                continue
            meta = obj.get("metadata") or {}
            self.objects.setdefault(rt.key, {})[(meta.get("namespace"), meta.get("name"))] = obj
        self.rv = int(state.get("resourceVersion") or 0)
        self.compacted = self.rv

    def _save(self):
        if not self.state_file:
            return
        items = []
        for (group, plural), bucket in sorted(self.objects.items()):
            for _, obj in sorted(bucket.items(), key=lambda kv: (kv[0][0] or "", kv[0][1])):
                items.append({"group": group, "resource": plural, "object": obj})
        tmp = self.state_file + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"resourceVersion": str(self.rv), "items": items}, f, separators=(",", ":"))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.state_file)

    # -- events and watches -----------------------------------------------------------------------
    def _commit(self, rt, ns, name, new, old, etype):
        """Stores new (None: deletes) under the next resourceVersion and records the event."""
        self.rv += 1
        bucket = self.objects.setdefault(rt.key, {})
        if new is not None:
            new["metadata"]["resourceVersion"] = str(self.rv)
            bucket[(ns, name)] = new
            ev_obj = new
        else:
            bucket.pop((ns, name), None)
            ev_obj = copy.deepcopy(old)
            ev_obj["metadata"]["resourceVersion"] = str(self.rv)
        self.history.append(Event(self.rv, etype, rt.key, ev_obj, old))
        while len(self.history) > self.history_limit:
            self.compacted = self.history.popleft().rv
        if self.history_limit == 0:
            self.compacted = self.rv
        self.cond.notify_all()
        return ev_obj

    def events_since(self, rv):
        """Events with resourceVersion > rv, oldest first; None when rv is older than the kept
        history (the caller answers 410 Expired)."""
        with self.lock:
            if rv < self.compacted:
                return None
            if not self.history:
                return []
            first = self.history[0].rv
            skip = max(0, rv - first + 1)
            return [self.history[i] for i in range(skip, len(self.history))]

    def compact(self):
        with self.lock:
            self.history.clear()
            self.compacted = self.rv
            self.cond.notify_all()
            return self.rv

    def close_watches(self):
        with self.lock:
            self.watch_epoch += 1
            self.cond.notify_all()

    def stop(self):
        with self.lock:
            self.stopping = True
            self.cond.notify_all()

    # -- reads ----------------------------------------------------------------------------------------
    def output(self, rt, ver, obj):
        """A copy of a stored object as served in version ver."""
        out = copy.deepcopy(obj)
        out["apiVersion"] = rt.api_version(ver.name)
        out["kind"] = rt.kind
        return out

    def matcher(self, rt, ver, ns, lsel, fsel):
        for f in (fsel.fields() if fsel else []):
            if f not in rt.field_labels(ver.name):
                raise errors.bad_request("field label not supported: %s" % f)

        def match(obj):
            meta = obj.get("metadata") or {}
            if ns is not None and meta.get("namespace") != ns:
                return False
            if lsel is not None and not lsel.matches(meta.get("labels")):
                return False
            if fsel is not None and not fsel.matches(lambda f: field_value(obj, f)):
                return False
            return True
        return match

    def get(self, rt, ver, ns, name):
        with self.lock:
            obj = self.objects.get(rt.key, {}).get((ns, name))
            if obj is None:
                raise errors.not_found(rt, name)
            return self.output(rt, ver, obj)

    def select(self, rt, match):
        """(stored objects matching, sorted by namespace/name; the current resourceVersion).
        The objects are shared: callers copy before changing them."""
        with self.lock:
            bucket = self.objects.get(rt.key, {})
            items = [bucket[k] for k in sorted(bucket, key=lambda k: (k[0] or "", k[1])) if match(bucket[k])]
            return items, self.rv

    # -- writes ---------------------------------------------------------------------------------------
    def _check_body(self, rt, ver, body):
        if not isinstance(body, dict):
            raise errors.bad_request("the object provided is unrecognized (must be of type %s)" % rt.kind)
        av, kind = body.get("apiVersion"), body.get("kind")
        want = rt.api_version(ver.name)
        if kind is not None and kind != rt.kind:
            raise errors.bad_request("the kind in the data (%s) does not match the expected kind (%s)"
                                     % (kind, rt.kind))
        if av is not None and av != want:
            raise errors.bad_request("the API version in the data (%s) does not match the expected "
                                     "API version (%s)" % (av, want))
        meta = body.get("metadata")
        if meta is None:
            body["metadata"] = meta = {}
        if not isinstance(meta, dict):
            raise errors.bad_request("metadata must be an object")
        return meta

    def _meta_causes(self, rt, obj):
        causes = []
        meta = obj["metadata"]
        name = meta.get("name")
        rx, limit, what = (DNS_LABEL, 63, "label") if rt.builtin == "namespace" else (DNS_SUBDOMAIN, 253, "subdomain")
        if not isinstance(name, str) or not name:
            causes.append({"reason": "FieldValueRequired", "field": "metadata.name",
                           "message": "Required value: name or generateName is required"})
        elif not rx.match(name) or len(name) > limit:
            causes.append({"reason": "FieldValueInvalid", "field": "metadata.name",
                           "message": "Invalid value: %s: a lowercase RFC 1123 %s must consist of lower "
                           "case alphanumeric characters, '-' or '.', and must start and end with an "
                           "alphanumeric character" % (json.dumps(name), what)})
        for field, check_values in (("labels", True), ("annotations", False)):
            m = meta.get(field)
            if m is None:
                continue
            if not isinstance(m, dict) or not all(isinstance(v, str) for v in m.values()):
                causes.append({"reason": "FieldValueInvalid", "field": "metadata." + field,
                               "message": "Invalid value: must be a map of strings"})
                continue
            for k, v in m.items():
                if not LABEL_NAME.match(k) or len(k.split("/")[-1]) > 63:
                    causes.append({"reason": "FieldValueInvalid", "field": "metadata.%s" % field,
                                   "message": "Invalid value: %s: name part must consist of alphanumeric "
                                   "characters, '-', '_' or '.'" % json.dumps(k)})
                elif check_values and (len(v) > 63 or not LABEL_VALUE.match(v)):
                    causes.append({"reason": "FieldValueInvalid", "field": "metadata.labels",
                                   "message": "Invalid value: %s: a valid label must be an empty string "
                                   "or consist of alphanumeric characters, '-', '_' or '.'" % json.dumps(v)})
            if field == "annotations" and sum(len(k) + len(v) for k, v in m.items()) > 256 * 1024:
                causes.append({"reason": "FieldValueTooLong", "field": "metadata.annotations",
                               "message": "Too long: must have at most 262144 bytes"})
        fin = meta.get("finalizers")
        if fin is not None and not (isinstance(fin, list) and all(isinstance(x, str) for x in fin)):
            causes.append({"reason": "FieldValueInvalid", "field": "metadata.finalizers",
                           "message": "Invalid value: must be a list of strings"})
        return causes

    def _admit(self, rt, ver, new, old, field_validation):
        """Defaults, pruning and validation of a candidate object; returns warnings."""
        warnings = []
        causes = self._meta_causes(rt, new)
        if rt.custom:
            s = ver.schema or {}
            dropped = schema.prune(new, s) if s else []
            if dropped:
                msgs = ['unknown field "%s"' % d for d in dropped]
                if field_validation == "Strict":
                    raise errors.bad_request('%s in version "%s" cannot be handled as a %s: strict '
                                             'decoding error: %s' % (rt.kind, ver.name, rt.kind, ", ".join(msgs)))
                if field_validation != "Ignore":
                    warnings.extend(msgs)
            schema.default(new, s)
            causes += schema.validate(new, s)
        else:
            builtins.prepare(rt, new, old, now_rfc3339())
            causes += builtins.validate(rt, new, old, self.reg)
        if causes:
            raise errors.invalid(rt, new["metadata"].get("name"), causes)
        if ver.deprecated:
            warnings.append(ver.deprecation_warning or "%s %s is deprecated" % (rt.api_version(ver.name), rt.kind))
        return warnings

    def _namespace_ok(self, rt, ns):
        if not rt.namespaced:
            return
        nsobj = self.objects.get(("", "namespaces"), {}).get((None, ns))
        if nsobj is None:
            raise errors.not_found(self.reg.by_key("", "namespaces"), ns)
        if nsobj["metadata"].get("deletionTimestamp"):
            raise errors.forbidden(rt, "", "unable to create new content in namespace %s because it "
                                   "is being terminated" % ns)

    def create(self, rt, ver, ns, body, dry_run=False, field_validation="Warn"):
        meta = self._check_body(rt, ver, body)
        if rt.namespaced:
            if meta.get("namespace") not in (None, "", ns):
                raise errors.bad_request("the namespace of the provided object does not match the "
                                         "namespace sent on the request")
        if meta.get("resourceVersion"):
            raise errors.internal("resourceVersion should not be set on objects to be created")
        with self.lock:
            self._namespace_ok(rt, ns)
            bucket = self.objects.setdefault(rt.key, {})
            new = copy.deepcopy(body)
            m = new["metadata"]
            if not m.get("name") and isinstance(m.get("generateName"), str) and m["generateName"]:
                for _ in range(8):
                    cand = m["generateName"] + "".join(random.choice(_GEN_CHARS) for _ in range(5))
                    if (ns, cand) not in bucket:
                        m["name"] = cand
                        break
            name = m.get("name")
            if isinstance(name, str) and (ns, name) in bucket:
                raise errors.already_exists(rt, name)
            if rt.namespaced:
                m["namespace"] = ns
            else:
                m.pop("namespace", None)
            for k in ("deletionTimestamp", "deletionGracePeriodSeconds", "selfLink", "managedFields"):
                m.pop(k, None)
            m["uid"] = str(uuid.uuid4())
            m["creationTimestamp"] = now_rfc3339()
            if rt.has_generation:
                m["generation"] = 1
            else:
                m.pop("generation", None)
            if rt.custom and ver.status:
                new.pop("status", None)
            warnings = self._admit(rt, ver, new, None, field_validation)
            new["apiVersion"] = rt.api_version(rt.storage_version())
            new["kind"] = rt.kind
            if dry_run:
                return self.output(rt, ver, new), warnings
            self._commit(rt, ns, name, new, None, "ADDED")
            if rt.builtin == "crd":
                self.reg.register_crd(new)
            self._save()
            return self.output(rt, ver, new), warnings

    def _candidate(self, rt, ver, old, body, sub):
        """The object an update of old with body (a full object) would store."""
        has_status = ver.status if rt.custom else rt.versions["v1"].status
        if sub == "status":
            new = copy.deepcopy(old)
            if isinstance(body, dict) and "status" in body:
                new["status"] = copy.deepcopy(body["status"])
            else:
                new.pop("status", None)
            return new
        new = copy.deepcopy(body)
        if has_status:
            if "status" in old:
                new["status"] = copy.deepcopy(old["status"])
            else:
                new.pop("status", None)
        m = new.setdefault("metadata", {})
        om = old["metadata"]
        for k in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
                  "generation", "namespace", "name"):
            if k in om:
                m[k] = om[k]
            else:
                m.pop(k, None)
        m.pop("managedFields", None)
        m.pop("selfLink", None)
        return new

    def _spec_changed(self, rt, ver, old, new):
        drop = ("metadata", "status") if (rt.builtin == "crd" or (rt.custom and ver.status)) else ("metadata",)
        a = {k: v for k, v in old.items() if k not in drop and k not in ("apiVersion", "kind")}
        b = {k: v for k, v in new.items() if k not in drop and k not in ("apiVersion", "kind")}
        return not json_equal(a, b)

    def _update(self, rt, ver, ns, name, old, new, dry_run, field_validation):
        warnings = self._admit(rt, ver, new, old, field_validation)
        m = new["metadata"]
        if rt.has_generation:
            m["generation"] = int(old["metadata"].get("generation") or 1) + (
                1 if self._spec_changed(rt, ver, old, new) else 0)
        new["apiVersion"] = rt.api_version(rt.storage_version())
        new["kind"] = rt.kind
        m["resourceVersion"] = old["metadata"]["resourceVersion"]
        if json_equal(new, old):
            return self.output(rt, ver, old), warnings      # a no-op: no new resourceVersion
        if dry_run:
            return self.output(rt, ver, new), warnings
        if m.get("deletionTimestamp") and not m.get("finalizers"):
            gone = self._delete_now(rt, ns, name, old)
            self._save()
            return self.output(rt, ver, gone), warnings
        self._commit(rt, ns, name, new, old, "MODIFIED")
        if rt.builtin == "crd":
            self.reg.register_crd(new)
        self._save()
        return self.output(rt, ver, new), warnings

    def replace(self, rt, ver, ns, name, body, sub=None, dry_run=False, field_validation="Warn"):
        meta = self._check_body(rt, ver, body)
        if meta.get("name") not in (None, "", name):
            raise errors.bad_request("the name of the object (%s) does not match the name on the URL (%s)"
                                     % (meta.get("name"), name))
        if rt.namespaced and meta.get("namespace") not in (None, "", ns):
            raise errors.bad_request("the namespace of the provided object does not match the "
                                     "namespace sent on the request")
        with self.lock:
            old = self.objects.get(rt.key, {}).get((ns, name))
            if old is None:
                raise errors.not_found(rt, name)
            rv = meta.get("resourceVersion")
            if rv:
                if rv != old["metadata"]["resourceVersion"]:
                    raise errors.conflict(rt, name)
            elif not rt.unconditional_update:
                raise errors.invalid(rt, name, [{
                    "reason": "FieldValueInvalid", "field": "metadata.resourceVersion",
                    "message": "Invalid value: 0x0: must be specified for an update"}])
            new = self._candidate(rt, ver, old, body, sub)
            return self._update(rt, ver, ns, name, old, new, dry_run, field_validation)

    def patch(self, rt, ver, ns, name, ptype, pbody, sub=None, dry_run=False,
              field_validation="Warn"):
        """ptype: json | merge | strategic | apply. Returns (object, created, warnings)."""
        if ptype == "strategic" and rt.custom:
            raise errors.unsupported_media_type("application/strategic-merge-patch+json", _CR_PATCH_TYPES)
        with self.lock:
            old = self.objects.get(rt.key, {}).get((ns, name))
            if old is None:
                if ptype == "apply" and sub is None:
                    body = copy.deepcopy(pbody) if isinstance(pbody, dict) else None
                    if body is None or not body.get("apiVersion") or not body.get("kind"):
                        raise errors.bad_request("apply patches must have apiVersion and kind set")
                    meta = self._check_body(rt, ver, body)
                    if meta.get("name") not in (None, name):
                        raise errors.bad_request("the name of the object (%s) does not match the "
                                                 "name on the URL (%s)" % (meta.get("name"), name))
                    meta["name"] = name
                    obj, warnings = self.create(rt, ver, ns, body, dry_run, field_validation)
                    return obj, True, warnings
                raise errors.not_found(rt, name)
            cur = self.output(rt, ver, old)
            try:
                if ptype == "json":
                    patched = json_patch(cur, pbody)
                elif ptype == "strategic":
                    patched = strategic_merge_patch(cur, pbody)
                else:  # merge, and apply (server-side apply without field management)
                    if not isinstance(pbody, dict):
                        raise PatchFormatError("a merge patch must be a JSON object")
                    patched = merge_patch(cur, pbody)
            except PatchFormatError as e:
                raise errors.bad_request(str(e))
            except PatchError as e:
                raise errors.ApiError(422, "Invalid", str(e))
            if not isinstance(patched, dict) or not isinstance(patched.get("metadata", {}), dict):
                raise errors.ApiError(422, "Invalid", "the patched object is not a JSON object with metadata")
            pm = patched.setdefault("metadata", {})
            if pm.get("name") != name or (rt.namespaced and pm.get("namespace") != ns):
                raise errors.invalid(rt, name, [{"reason": "FieldValueInvalid", "field": "metadata.name",
                                                 "message": "Invalid value: %s: field is immutable"
                                                 % json.dumps(pm.get("name"))}])
            prv = pm.get("resourceVersion")
            if prv and prv != old["metadata"]["resourceVersion"]:
                raise errors.conflict(rt, name)
            if patched.get("apiVersion") != cur["apiVersion"] or patched.get("kind") != cur["kind"]:
                raise errors.bad_request("a patch may not change apiVersion or kind")
            new = self._candidate(rt, ver, old, patched, sub)
            obj, warnings = self._update(rt, ver, ns, name, old, new, dry_run, field_validation)
            return obj, False, warnings

    def _delete_now(self, rt, ns, name, old):
        """Removes one object, with what the real server's controllers would do right after:
        a namespace's contents, a CRD's custom resources and type. Returns the event object."""
        if rt.builtin == "namespace":
            for key in list(self.objects):
                t = self.reg.by_key(*key)
                if t is None or not t.namespaced:
                    continue
                for (ons, oname), obj in sorted(self.objects[key].items(), key=lambda kv: kv[0][1]):
                    if ons == name:
                        self._commit(t, ons, oname, None, obj, "DELETED")
        if rt.builtin == "crd":
            t = self.reg.crds.get(name)
            if t is not None:
                for (ons, oname), obj in sorted(self.objects.get(t.key, {}).items(),
                                                key=lambda kv: (kv[0][0] or "", kv[0][1])):
                    self._commit(t, ons, oname, None, obj, "DELETED")
                self.objects.pop(t.key, None)
                self.reg.unregister_crd(name)
        return self._commit(rt, ns, name, None, old, "DELETED")

    def delete(self, rt, ver, ns, name, options=None, dry_run=False):
        """Returns the object (deleted, or marked for deletion while it has finalizers) or, for
        types whose real registry does so, a Status of kind Success."""
        options = options if isinstance(options, dict) else {}
        with self.lock:
            old = self.objects.get(rt.key, {}).get((ns, name))
            if old is None:
                raise errors.not_found(rt, name)
            pre = options.get("preconditions") or {}
            if isinstance(pre, dict):
                if pre.get("uid") and pre["uid"] != old["metadata"].get("uid"):
                    raise errors.conflict(rt, name, "Precondition failed: UID in precondition: %s, UID in "
                                          "object meta: %s" % (pre["uid"], old["metadata"].get("uid")))
                if pre.get("resourceVersion") and pre["resourceVersion"] != old["metadata"]["resourceVersion"]:
                    raise errors.conflict(rt, name, "Precondition failed: ResourceVersion in precondition: %s, "
                                          "ResourceVersion in object meta: %s"
                                          % (pre["resourceVersion"], old["metadata"]["resourceVersion"]))
            if rt.builtin == "namespace" and name in UNDELETABLE_NAMESPACES:
                raise errors.forbidden(rt, name, "this namespace may not be deleted")
            if dry_run:
                return self.output(rt, ver, old)
            if old["metadata"].get("finalizers"):
                if old["metadata"].get("deletionTimestamp"):
                    return self.output(rt, ver, old)
                new = copy.deepcopy(old)
                new["metadata"]["deletionTimestamp"] = now_rfc3339()
                new["metadata"]["deletionGracePeriodSeconds"] = 0
                if rt.has_generation:
                    new["metadata"]["generation"] = int(new["metadata"].get("generation") or 1) + 1
                self._commit(rt, ns, name, new, old, "MODIFIED")
                self._save()
                return self.output(rt, ver, new)
            gone = self._delete_now(rt, ns, name, old)
            self._save()
            if rt.returns_deleted_object:
                return self.output(rt, ver, gone)
            d = {"name": name, "kind": rt.plural, "uid": old["metadata"].get("uid")}
            if rt.group:
                d["group"] = rt.group
            return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": d}

    def delete_collection(self, rt, ver, match, options=None, dry_run=False):
        with self.lock:
            items, _ = self.select(rt, match)
            out = []
            for obj in items:
                m = obj["metadata"]
                if rt.builtin == "namespace" and m["name"] in UNDELETABLE_NAMESPACES:
                    continue
                r = self.delete(rt, ver, m.get("namespace"), m["name"], options, dry_run)
                if r.get("kind") != "Status":
                    out.append(r)
            return out, self.rv

    def stats(self):
        with self.lock:
            return {"resourceVersion": str(self.rv), "compactedResourceVersion": str(self.compacted),
                    "historyEvents": len(self.history), "historyLimit": self.history_limit,
                    "objects": sum(len(b) for b in self.objects.values()),
                    "openWatches": self.open_watches,
                    "customResourceDefinitions": sorted(self.reg.crds)}
