"""The HTTP side of the stand-in: routing, content negotiation, list/watch streaming, the
/standin/ test controls, and main().

One thread per connection (ThreadingHTTPServer), HTTP/1.1 with keep-alive; a watch holds its
connection and streams `{"type": ..., "object": ...}` lines with chunked transfer encoding
until its timeoutSeconds (else --watch-timeout) passes, the client goes away, the resource's
CRD is deleted, POST /standin/close-watches is called, or the server stops. Every wait is
bounded (at most 1 s at a time) and every request body is limited to 3 MiB, as
kube-apiserver's is. A handler that fails answers 500 with a Status and the server goes on.
"""
import argparse
import base64
import http
import json
import os
import signal
import sys
import threading
import time
import traceback
import uuid
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

from . import VERSION, discovery, errors, protobuf, yamlish
from .selectors import FieldSelector, LabelSelector, SelectorError
from .store import PATCH_TYPES, Store
from .tables import partial_metadata, table

__all__ = ["main", "StandinServer"]

MAX_BODY = 3 * 1024 * 1024
MAX_DEPTH = 100  # nesting of a request body; deeper ones are refused (400), never recursed into
_REASONS = {400: "BadRequest", 404: "NotFound", 405: "MethodNotAllowed", 408: "Timeout",
            413: "RequestEntityTooLarge", 414: "RequestURITooLong", 431: "RequestHeaderFieldsTooLarge",
            501: "NotImplemented", 505: "HTTPVersionNotSupported"}
_TABLE_CT = "application/json;as=Table;v=%s;g=meta.k8s.io"
_POM_CT = "application/json;as=%s;v=v1;g=meta.k8s.io"


def _bool(v, name):
    if v is None or v == "":
        return False
    if v.lower() in ("true", "1"):
        return True
    if v.lower() in ("false", "0"):
        return False
    raise errors.bad_request("invalid value %r for the boolean parameter %s" % (v, name))


def _int(v, name, minimum=0):
    try:
        n = int(v)
    except (TypeError, ValueError):
        raise errors.bad_request("invalid value %r for the integer parameter %s" % (v, name))
    if n < minimum:
        raise errors.bad_request("%s must be at least %d" % (name, minimum))
    return n


def _depth(doc):
    """Nesting depth of a decoded JSON value, computed without recursion."""
    deepest, stack = 0, [(doc, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, (dict, list)):
            deepest = max(deepest, d)
            if d > MAX_DEPTH:
                return d
            stack.extend((x, d + 1) for x in (v.values() if isinstance(v, dict) else v))
    return deepest


def _media_types(header):
    """[(type, {param: value})] of an Accept or Content-Type header, in order."""
    out = []
    for part in (header or "").split(","):
        bits = [b.strip() for b in part.split(";")]
        if not bits[0]:
            continue
        params = {}
        for b in bits[1:]:
            if "=" in b:
                k, v = b.split("=", 1)
                params[k.strip().lower()] = v.strip().strip('"')
        out.append((bits[0].lower(), params))
    return out


class StandinServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def __init__(self, addr, store, opts):
        super().__init__(addr, Handler)
        self.store = store
        self.opts = opts
        self.requests = deque(maxlen=2000)
        self.requests_total = 0
        self.req_lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "kube-apiserver-standin/" + VERSION
    sys_version = ""
    timeout = 300  # seconds a blocking socket read or write may take

    def log_message(self, fmt, *args):
        if self.server.opts.log_requests:
            sys.stderr.write("standin: %s %s\n" % (self.address_string(), fmt % args))

    def send_error(self, code, message=None, explain=None):
        """Errors found by http.server itself (bad request line, headers): a Status too."""
        try:
            phrase = http.HTTPStatus(code).phrase
        except ValueError:
            phrase = "Error"
        st = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
              "message": message or phrase, "reason": _REASONS.get(code, "InternalError"), "code": code}
        body = (json.dumps(st) + "\n").encode()
        self.close_connection = True
        try:
            self.send_response(code, message)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            self.end_headers()
            if getattr(self, "command", None) != "HEAD":
                self.wfile.write(body)
        except OSError:
            pass

    def do_GET(self):
        self._handle("GET")

    def do_POST(self):
        self._handle("POST")

    def do_PUT(self):
        self._handle("PUT")

    def do_PATCH(self):
        self._handle("PATCH")

    def do_DELETE(self):
        self._handle("DELETE")

    def do_HEAD(self):
        self._handle("HEAD")

    def do_OPTIONS(self):
        self._handle("OPTIONS")

    # -- plumbing -------------------------------------------------------------------------------
    def _handle(self, method):
        self.warnings = []
        self.body = b""
        try:
            url = urlsplit(self.path)
            self.q = parse_qs(url.query, keep_blank_values=True)
            self._read_body()
            self._record(method, url)
            self._route(method, url.path)
        except errors.ApiError as e:
            self._send_status(e)
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            self.close_connection = True
        except Exception as e:  # a bug here must not take the server down
            sys.stderr.write("standin: %s %s failed:\n%s" % (method, self.path, traceback.format_exc()))
            try:
                self._send_status(errors.internal("%s: %s" % (type(e).__name__, e)))
            except OSError:
                self.close_connection = True

    def _read_body(self):
        te = (self.headers.get("Transfer-Encoding") or "").lower()
        if "chunked" in te:
            chunks, total = [], 0
            for _ in range(100000):
                line = self.rfile.readline(1024)
                try:
                    n = int(line.split(b";")[0].strip() or b"x", 16)
                except ValueError:
                    self.close_connection = True
                    raise errors.bad_request("malformed chunked request body")
                if n == 0:
                    while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                        pass
                    break
                total += n
                if total > MAX_BODY:
                    self.close_connection = True
                    raise errors.too_large(MAX_BODY)
                chunks.append(self.rfile.read(n))
                self.rfile.readline(1024)
            self.body = b"".join(chunks)
            return
        cl = self.headers.get("Content-Length")
        if cl is None:
            return
        try:
            n = int(cl)
            if n < 0:
                raise ValueError
        except ValueError:
            self.close_connection = True
            raise errors.bad_request("invalid Content-Length %r" % cl)
        if n > MAX_BODY:
            self.close_connection = True
            raise errors.too_large(MAX_BODY)
        self.body = self.rfile.read(n)
        if len(self.body) != n:
            self.close_connection = True
            raise errors.bad_request("request body shorter than its Content-Length")

    def _record(self, method, url):
        entry = {"method": method, "path": url.path, "query": url.query,
                 "contentType": self.headers.get("Content-Type") or "",
                 "accept": self.headers.get("Accept") or "",
                 "userAgent": self.headers.get("User-Agent") or "", "time": time.time()}
        if self.body:
            entry["body"] = self.body[:4096].decode("utf-8", "replace")
        with self.server.req_lock:
            self.server.requests.append(entry)
            self.server.requests_total += 1

    def _param(self, name, default=None):
        v = self.q.get(name)
        return v[-1] if v else default

    def _headers_common(self, ctype, length=None):
        self.send_header("Content-Type", ctype)
        if length is not None:
            self.send_header("Content-Length", str(length))
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Audit-Id", str(uuid.uuid4()))
        for w in self.warnings[:20]:
            self.send_header("Warning", '299 - "%s"' % w.replace("\\", "\\\\").replace('"', '\\"'))

    def _send_json(self, code, obj, ctype="application/json"):
        data = (json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n").encode("utf-8")
        self.send_response(code)
        self._headers_common(ctype, len(data))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _send_text(self, code, text):
        data = text.encode()
        self.send_response(code)
        self._headers_common("text/plain; charset=utf-8", len(data))
        self.end_headers()
        self.wfile.write(data)

    def _send_status(self, e):
        self._send_json(e.code, e.status())

    def _accept(self, allow=("json",)):
        """The response form the client asked for: json | table | pom | pomlist | aggregated,
        with its version; 406 when none of its Accept entries can be served."""
        types = _media_types(self.headers.get("Accept"))
        if not types:
            return ("json", None)
        for mt, p in types:
            if mt not in ("application/json", "*/*", "application/*"):
                continue
            form = p.get("as")
            if form is None:
                return ("json", None)
            if form == "Table" and p.get("g") == "meta.k8s.io" and p.get("v") in ("v1", "v1beta1") \
                    and "table" in allow:
                return ("table", p["v"])
            if form in ("PartialObjectMetadata", "PartialObjectMetadataList") and \
                    p.get("g") == "meta.k8s.io" and p.get("v") == "v1" and "pom" in allow:
                return ("pom", form)
            if form == "APIGroupDiscoveryList" and p.get("g") == "apidiscovery.k8s.io" and \
                    p.get("v") == "v2" and "aggregated" in allow:
                return ("aggregated", "v2")
        raise errors.not_acceptable(["application/json"])

    def _body_json(self, kind):
        ct = _media_types(self.headers.get("Content-Type"))
        mt = ct[0][0] if ct else "application/json"
        if mt == protobuf.CONTENT_TYPE:
            try:
                return protobuf.decode(self.body)
            except protobuf.ProtoUnsupported as e:
                raise errors.unsupported_media_type(mt, [
                    "application/json", "application/yaml",
                    "application/vnd.kubernetes.protobuf (Secret and Namespace only, not %s)" % e])
            except protobuf.ProtoError as e:
                raise errors.bad_request("the body of the request could not be decoded as a %s: "
                                         "protobuf: %s" % (kind, e))
        if mt not in ("application/json", "application/yaml", "text/yaml", "*/*"):
            raise errors.unsupported_media_type(mt, ["application/json", "application/yaml"])
        return self._decode(mt, kind)

    def _decode(self, mt, kind):
        doc = self._decode_any(mt, kind)
        if _depth(doc) > MAX_DEPTH:
            raise errors.bad_request("the body of the request is nested deeper than %d levels" % MAX_DEPTH)
        return doc

    def _decode_any(self, mt, kind):
        if not self.body.strip():
            raise errors.bad_request("the request body is empty; expected a %s" % kind)
        text = self.body.decode("utf-8", "replace")
        try:
            return json.loads(text)
        except RecursionError:
            raise errors.bad_request("the body of the request could not be decoded as a %s: "
                                     "nested too deeply" % kind)
        except ValueError as e:
            if mt in ("application/json", "*/*"):
                raise errors.bad_request("the body of the request could not be decoded as a %s: "
                                         "json parse error: %s" % (kind, e))
        try:
            return yamlish.load(text)
        except (yamlish.YamlError, RecursionError) as e:
            raise errors.bad_request("the body of the request could not be decoded as a %s: "
                                     "yaml: %s" % (kind, e))

    def _write_options(self):
        dry = self.q.get("dryRun")
        if dry and any(d != "All" for d in dry):
            raise errors.bad_request("Invalid dryRun value: %s (supported: All)" % ",".join(dry))
        fv = self._param("fieldValidation") or "Warn"
        if fv not in ("Ignore", "Warn", "Strict"):
            raise errors.bad_request("Invalid fieldValidation value: %s (supported: Ignore, Warn, Strict)" % fv)
        fm = self._param("fieldManager")
        if fm is not None and len(fm) > 128:
            raise errors.bad_request("fieldManager: Too long: may not be more than 128 bytes")
        return bool(dry), fv

    # -- routing -----------------------------------------------------------------------------------
    def _route(self, method, path):
        segs = [unquote(s) for s in path.split("/") if s]
        st = self.server.store
        if method == "OPTIONS":
            raise errors.method_not_allowed()
        if segs and segs[0] == "standin":
            return self._admin(method, segs[1:])
        if segs[:1] in (["healthz"], ["livez"], ["readyz"]):
            return self._send_text(200, "ok")
        if segs == ["version"]:
            return self._send_json(200, {"major": "1", "minor": "33", "gitVersion": "v1.33.0-standin",
                                         "gitCommit": "0000000000000000000000000000000000000000",
                                         "gitTreeState": "clean", "buildDate": "2025-04-23T00:00:00Z",
                                         "goVersion": "go1.24.2", "compiler": "gc",
                                         "platform": "linux/amd64", "emulationMajor": "1",
                                         "emulationMinor": "33", "minCompatibilityMajor": "1",
                                         "minCompatibilityMinor": "32"})
        if segs and segs[0] == "openapi":
            return self._openapi(method, segs[1:])
        if segs in (["api"], ["apis"]):
            if method not in ("GET", "HEAD"):
                raise errors.method_not_allowed()
            allow = ("json",) if self.server.opts.no_aggregated_discovery else ("json", "aggregated")
            form, _ = self._accept(allow)
            with st.lock:
                if form == "aggregated":
                    return self._send_json(200, discovery.aggregated(st.reg, segs == ["api"]),
                                           discovery.AGGREGATED_CT)
                if segs == ["api"]:
                    return self._send_json(200, discovery.legacy_api("%s:%d" % self.server.server_address[:2]))
                return self._send_json(200, discovery.legacy_groups(st.reg))
        if len(segs) >= 2 and segs[0] == "api":
            return self._resource(method, "", segs[1], segs[2:])
        if len(segs) == 2 and segs[0] == "apis":
            if method not in ("GET", "HEAD"):
                raise errors.method_not_allowed()
            with st.lock:
                doc = discovery.legacy_group(st.reg, segs[1])
            if doc is None:
                raise errors.path_not_found()
            return self._send_json(200, doc)
        if len(segs) >= 3 and segs[0] == "apis":
            return self._resource(method, segs[1], segs[2], segs[3:])
        raise errors.path_not_found()

    def _openapi(self, method, segs):
        if method not in ("GET", "HEAD"):
            raise errors.method_not_allowed()
        st = self.server.store
        if segs == ["v3"]:
            with st.lock:
                return self._send_json(200, discovery.openapi_root(st.reg))
        if len(segs) >= 3 and segs[0] == "v3":
            if segs[1] == "api" and len(segs) == 3:
                group, version = "", segs[2]
            elif segs[1] == "apis" and len(segs) == 4:
                group, version = segs[2], segs[3]
            else:
                raise errors.path_not_found()
            with st.lock:
                if not st.reg.types_in(group, version):
                    raise errors.path_not_found()
                doc = discovery.openapi_gv(st.reg, group, version)
            return self._send_json(200, doc)
        raise errors.path_not_found()

    def _resource(self, method, group, version, rest):
        st = self.server.store
        with st.lock:
            if not rest:
                if method not in ("GET", "HEAD"):
                    raise errors.method_not_allowed()
                doc = discovery.resource_list(st.reg, group, version)
                if doc is None:
                    raise errors.path_not_found()
                return self._send_json(200, doc)
            watch_prefix = rest[0] == "watch"
            if watch_prefix:
                rest = rest[1:]
            ns = None
            if len(rest) >= 3 and rest[0] == "namespaces":
                t = st.reg.find(group, version, rest[2])
                if t is not None and t[0].namespaced:
                    ns, rest = rest[1], rest[2:]
            if not rest or len(rest) > 3:
                raise errors.path_not_found()
            found = st.reg.find(group, version, rest[0])
        if found is None:
            raise errors.path_not_found()
        rt, ver = found
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if (ns is not None and not rt.namespaced) or (rt.namespaced and name is not None and ns is None):
            raise errors.path_not_found()
        if sub is not None:
            has_status = ver.status if rt.custom else rt.versions["v1"].status
            if sub != "status" or not has_status:
                raise errors.path_not_found()
        if name is not None and name in (".", "..") or (name is not None and "/" in name):
            raise errors.bad_request("invalid resource name %r: may not be '.', '..' or contain '/'" % name)
        if name is None:
            if method in ("GET", "HEAD"):
                if watch_prefix or _bool(self._param("watch"), "watch"):
                    return self._watch(rt, ver, ns, None)
                return self._list(rt, ver, ns)
            if method == "POST":
                if rt.namespaced and ns is None:
                    raise errors.method_not_allowed()
                return self._create(rt, ver, ns)
            if method == "DELETE":
                return self._delete_collection(rt, ver, ns)
            raise errors.method_not_allowed()
        if watch_prefix:
            if method != "GET" or sub is not None:
                raise errors.method_not_allowed()
            return self._watch(rt, ver, ns, name)
        if method in ("GET", "HEAD"):
            form, fv = self._accept(("json", "table", "pom"))
            obj = st.get(rt, ver, ns, name)
            return self._send_one(rt, ver, obj, form, fv)
        if method == "PUT":
            dry, fval = self._write_options()
            body = self._body_json(rt.kind)
            obj, self.warnings = st.replace(rt, ver, ns, name, body, sub, dry, fval)
            return self._send_json(200, obj)
        if method == "PATCH":
            return self._patch(rt, ver, ns, name, sub)
        if method == "DELETE" and sub is None:
            return self._delete(rt, ver, ns, name)
        raise errors.method_not_allowed()

    # -- verbs ---------------------------------------------------------------------------------------
    def _send_one(self, rt, ver, obj, form, fv):
        if form == "table":
            t = table(rt, ver, [obj], obj["metadata"].get("resourceVersion", ""), self._include())
            t["apiVersion"] = "meta.k8s.io/" + fv
            return self._send_json(200, t, _TABLE_CT % fv)
        if form == "pom":
            return self._send_json(200, partial_metadata(obj), _POM_CT % "PartialObjectMetadata")
        return self._send_json(200, obj)

    def _include(self):
        inc = self._param("includeObject") or "Metadata"
        if inc not in ("None", "Metadata", "Object"):
            raise errors.bad_request("includeObject must be one of None, Metadata, Object")
        return inc

    def _selectors(self, rt, ver, ns, name=None):
        try:
            lsel = LabelSelector.parse(self._param("labelSelector"))
            fsel = FieldSelector.parse(self._param("fieldSelector"))
        except SelectorError as e:
            raise errors.bad_request(str(e))
        if name is not None:
            fsel.reqs.append(("metadata.name", "=", name))
        return self.server.store.matcher(rt, ver, ns, lsel, fsel)

    def _wait_for_rv(self, rv):
        """Waits (at most 3 s, as the watch cache does) until the store has reached rv."""
        st = self.server.store
        deadline = time.monotonic() + 3.0
        with st.cond:
            while st.rv < rv and time.monotonic() < deadline and not st.stopping:
                st.cond.wait(min(0.5, max(0.01, deadline - time.monotonic())))
            if st.rv < rv:
                raise errors.timeout("Too large resource version: %d, current: %d" % (rv, st.rv),
                                     [{"reason": "ResourceVersionTooLarge",
                                       "message": "Too large resource version"}])

    def _list(self, rt, ver, ns):
        st = self.server.store
        form, fv = self._accept(("json", "table", "pom"))
        match = self._selectors(rt, ver, ns)
        rvp, rvm = self._param("resourceVersion"), self._param("resourceVersionMatch")
        if rvm not in (None, "", "NotOlderThan", "Exact"):
            raise errors.bad_request("resourceVersionMatch: Unsupported value: %r" % rvm)
        if rvm and not rvp:
            raise errors.ApiError(422, "Invalid", "resourceVersionMatch is forbidden unless "
                                  "resourceVersion is provided")
        limit = _int(self._param("limit"), "limit") if self._param("limit") not in (None, "") else 0
        if rvp not in (None, "", "0"):
            want = _int(rvp, "resourceVersion")
            self._wait_for_rv(want)
            if rvm == "Exact" and want != st.rv:
                raise errors.expired("too old resource version: %d (%d): the stand-in serves lists "
                                     "at the current resourceVersion only" % (want, st.rv))
        items, rv = st.select(rt, match)
        list_rv = str(rv)
        token = self._param("continue")
        if token:
            try:
                tok = json.loads(base64.urlsafe_b64decode(token.encode()).decode())
                start, list_rv = (tok["start"][0], tok["start"][1]), str(int(tok["rv"]))
            except (ValueError, KeyError, TypeError, IndexError):
                raise errors.bad_request("continue key is not valid: the token is not one this server issued")
            if int(list_rv) < st.compacted:
                raise errors.expired("The provided continue parameter is too old to display a consistent "
                                     "list result. You can start a new list without the continue parameter.")
            items = [o for o in items if ((o["metadata"].get("namespace") or ""), o["metadata"]["name"]) > start]
        cont, remaining = None, None
        if limit and len(items) > limit:
            last = items[limit - 1]["metadata"]
            cont = base64.urlsafe_b64encode(json.dumps(
                {"rv": list_rv, "start": [last.get("namespace") or "", last["name"]]}).encode()).decode()
            remaining = len(items) - limit
            items = items[:limit]
        objs = [st.output(rt, ver, o) for o in items]
        if form == "table":
            t = table(rt, ver, objs, list_rv, self._include(), cont, remaining)
            t["apiVersion"] = "meta.k8s.io/" + fv
            return self._send_json(200, t, _TABLE_CT % fv)
        meta = {"resourceVersion": list_rv}
        if cont:
            meta["continue"] = cont
            meta["remainingItemCount"] = remaining
        if form == "pom":
            return self._send_json(200, {"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1",
                                         "metadata": meta, "items": [partial_metadata(o) for o in objs]},
                                   _POM_CT % "PartialObjectMetadataList")
        if not rt.custom:  # typed lists carry no apiVersion/kind in their items
            for o in objs:
                o.pop("apiVersion", None)
                o.pop("kind", None)
        return self._send_json(200, {"kind": rt.list_kind, "apiVersion": rt.api_version(ver.name),
                                     "metadata": meta, "items": objs})

    def _create(self, rt, ver, ns):
        dry, fv = self._write_options()
        body = self._body_json(rt.kind)
        obj, self.warnings = self.server.store.create(rt, ver, ns, body, dry, fv)
        return self._send_json(201, obj)

    def _patch(self, rt, ver, ns, name, sub):
        dry, fv = self._write_options()
        ct = _media_types(self.headers.get("Content-Type"))
        mt = ct[0][0] if ct else ""
        ptype = PATCH_TYPES.get(mt)
        if ptype is None:
            accepted = list(PATCH_TYPES) if not rt.custom else [
                t for t in PATCH_TYPES if PATCH_TYPES[t] != "strategic"]
            raise errors.unsupported_media_type(mt, accepted)
        if ptype == "apply" and not self._param("fieldManager"):
            raise errors.bad_request("PATCH, application/apply-patch+yaml requires a non-empty fieldManager "
                                     "query parameter")
        body = self._decode("application/yaml" if ptype == "apply" else "application/json", "patch")
        obj, created, self.warnings = self.server.store.patch(rt, ver, ns, name, ptype, body, sub, dry, fv)
        return self._send_json(201 if created else 200, obj)

    def _delete_options(self):
        opts = {}
        if self.body.strip():
            opts = self._decode("application/json", "DeleteOptions")
            if not isinstance(opts, dict):
                raise errors.bad_request("DeleteOptions must be a JSON object")
        dry, _ = self._write_options()
        dry = dry or bool(opts.get("dryRun"))
        return opts, dry

    def _delete(self, rt, ver, ns, name):
        opts, dry = self._delete_options()
        res = self.server.store.delete(rt, ver, ns, name, opts, dry)
        return self._send_json(200, res)

    def _delete_collection(self, rt, ver, ns):
        opts, dry = self._delete_options()
        match = self._selectors(rt, ver, ns)
        items, rv = self.server.store.delete_collection(rt, ver, match, opts, dry)
        return self._send_json(200, {"kind": rt.list_kind, "apiVersion": rt.api_version(ver.name),
                                     "metadata": {"resourceVersion": str(rv)}, "items": items})

    # -- watch ---------------------------------------------------------------------------------------
    def _watch(self, rt, ver, ns, name):
        st, opts = self.server.store, self.server.opts
        form, fv = self._accept(("json", "table", "pom"))
        match = self._selectors(rt, ver, ns, name)
        tparam = self._param("timeoutSeconds")
        timeout = float(_int(tparam, "timeoutSeconds")) if tparam not in (None, "") else opts.watch_timeout
        timeout = min(timeout, opts.watch_timeout * 2)
        bookmarks = _bool(self._param("allowWatchBookmarks"), "allowWatchBookmarks")
        initial_flag = self._param("sendInitialEvents")
        send_initial = _bool(initial_flag, "sendInitialEvents")
        rvm, rvp = self._param("resourceVersionMatch"), self._param("resourceVersion")
        if initial_flag not in (None, ""):
            if rvm != "NotOlderThan":
                raise errors.ApiError(422, "Invalid", "sendInitialEvents: Forbidden: sendInitialEvents "
                                      "requires setting resourceVersionMatch to NotOlderThan")
            if send_initial and not bookmarks:
                raise errors.ApiError(422, "Invalid", "allowWatchBookmarks: Forbidden: sendInitialEvents "
                                      "requires allowWatchBookmarks=true")
        elif rvm:
            raise errors.ApiError(422, "Invalid", "resourceVersionMatch: Forbidden: resourceVersionMatch is "
                                  "forbidden for watch unless sendInitialEvents is provided")
        start = None if rvp in (None, "", "0") else _int(rvp, "resourceVersion")
        if start is not None:
            self._wait_for_rv(start)
        with st.lock:
            # sendInitialEvents serves the current state (NotOlderThan), so it never expires.
            expired = not send_initial and start is not None and start < st.compacted
            initial = None
            if start is None or send_initial:
                initial, start = st.select(rt, match)
            compacted = st.compacted
            epoch = st.watch_epoch
            st.open_watches += 1
        try:
            self.send_response(200)
            self._headers_common(_TABLE_CT % fv if form == "table" else "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.close_connection = True
            if expired:
                gone = errors.expired("too old resource version: %d (%d)" % (start, compacted))
                self._event("ERROR", gone.status())
            else:
                self._stream(rt, ver, match, form, fv, start, initial, send_initial, bookmarks, timeout, epoch)
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError, TimeoutError, OSError):
            pass
        finally:
            with st.lock:
                st.open_watches -= 1

    def _event(self, etype, obj):
        data = json.dumps({"type": etype, "object": obj}, separators=(",", ":"), ensure_ascii=False)
        data = (data + "\n").encode("utf-8")
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def _emit(self, rt, ver, form, fv, etype, obj):
        o = self.server.store.output(rt, ver, obj)
        if form == "table":
            t = table(rt, ver, [o], o["metadata"].get("resourceVersion", ""), self._include())
            t["apiVersion"] = "meta.k8s.io/" + fv
            o = t
        elif form == "pom":
            o = partial_metadata(o)
        self._event(etype, o)

    def _bookmark(self, rt, ver, form, rv, initial_end=False):
        meta = {"resourceVersion": str(rv), "creationTimestamp": None}
        if initial_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        if form == "table":
            obj = {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": str(rv)},
                   "columnDefinitions": None, "rows": None}
        elif form == "pom":
            obj = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": meta}
        else:
            obj = {"kind": rt.kind, "apiVersion": rt.api_version(ver.name), "metadata": meta}
        self._event("BOOKMARK", obj)

    def _stream(self, rt, ver, match, form, fv, last, initial, send_initial, bookmarks, timeout, epoch):
        st, opts = self.server.store, self.server.opts
        for obj in initial or []:
            self._emit(rt, ver, form, fv, "ADDED", obj)
        if send_initial:
            self._bookmark(rt, ver, form, last, initial_end=True)
        now = time.monotonic()
        deadline = now + timeout
        interval = max(0.05, opts.bookmark_interval)
        next_bm = now + interval
        while True:
            with st.cond:
                while True:
                    evs = st.events_since(last)
                    if evs is None:
                        return  # fell behind the kept history: the client rewatches (and gets 410)
                    cur = st.rv
                    if evs:
                        break  # deliver what happened before looking at why we might stop
                    if st.stopping or st.watch_epoch != epoch or st.reg.by_key(*rt.key) is None:
                        return
                    now = time.monotonic()
                    if now >= deadline or (bookmarks and now >= next_bm):
                        break
                    wait = min(1.0, deadline - now, (next_bm - now) if bookmarks else 1.0)
                    st.cond.wait(max(0.01, wait))
            for e in evs:
                if e.key != rt.key:
                    continue
                new_ok = match(e.obj)
                old_ok = e.old is not None and match(e.old)
                if e.type == "ADDED" and new_ok:
                    self._emit(rt, ver, form, fv, "ADDED", e.obj)
                elif e.type == "MODIFIED" and (new_ok or old_ok):
                    etype = "MODIFIED" if new_ok and old_ok else ("ADDED" if new_ok else "DELETED")
                    self._emit(rt, ver, form, fv, etype, e.obj)
                elif e.type == "DELETED" and new_ok:
                    self._emit(rt, ver, form, fv, "DELETED", e.obj)
            last = cur
            now = time.monotonic()
            if bookmarks and now >= next_bm:
                self._bookmark(rt, ver, form, last)
                next_bm = now + interval
            if now >= deadline:
                return

    # -- test controls -------------------------------------------------------------------------------
    def _admin(self, method, segs):
        st, srv = self.server.store, self.server
        if segs == ["stats"] and method == "GET":
            s = st.stats()
            s["requests"] = srv.requests_total
            return self._send_json(200, s)
        if segs == ["requests"]:
            if method == "GET":
                with srv.req_lock:
                    items = list(srv.requests)
                return self._send_json(200, {"items": items})
            if method == "DELETE":
                with srv.req_lock:
                    srv.requests.clear()
                return self._send_json(200, {"items": []})
        if segs == ["compact"] and method == "POST":
            rv = st.compact()
            if _bool(self._param("closeWatches"), "closeWatches"):
                st.close_watches()
            return self._send_json(200, {"compactedResourceVersion": str(rv)})
        if segs == ["close-watches"] and method == "POST":
            st.close_watches()
            return self._send_json(200, {"closed": True})
        raise errors.path_not_found()


class PreloadError(Exception):
    pass


def _preload(store, paths):
    """Creates (or replaces) every CustomResourceDefinition in the given files/directories."""
    rt = store.reg.by_key("apiextensions.k8s.io", "customresourcedefinitions")
    ver = rt.versions["v1"]
    files = []
    for p in paths:
        if os.path.isdir(p):
            files += [os.path.join(p, f) for f in sorted(os.listdir(p))
                      if f.endswith((".yaml", ".yml", ".json"))]
        else:
            files.append(p)
    for f in files:
        warnings = []
        with open(f, encoding="utf-8") as fh:
            docs = yamlish.load_all(fh.read(), warnings=warnings)
        for w in warnings:  # kubectl accepts these too (the last value wins): say so
            sys.stderr.write("kube-apiserver-standin: warning: %s: %s\n" % (f, w))
        for doc in docs:
            if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
                continue
            name = (doc.get("metadata") or {}).get("name")
            try:
                try:
                    store.create(rt, ver, None, doc, field_validation="Strict")
                except errors.ApiError as e:
                    if e.reason != "AlreadyExists":
                        raise
                    cur = store.get(rt, ver, None, name)
                    doc["metadata"]["resourceVersion"] = cur["metadata"]["resourceVersion"]
                    store.replace(rt, ver, None, name, doc, field_validation="Strict")
            except errors.ApiError as e:
                raise PreloadError("%s: %s" % (f, e.message))


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="kube-apiserver-standin",
        description="An in-memory stand-in for the Kubernetes API server (namespaces, pods, "
                    "secrets, CustomResourceDefinitions and their custom resources), for tests. "
                    "See docs/kubernetes.md.")
    ap.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    ap.add_argument("--port", type=int, default=0, help="port (default 0: an ephemeral port)")
    ap.add_argument("--history", type=int, default=1000, metavar="N",
                    help="watch events kept; a watch from an older resourceVersion gets 410 Gone (default 1000)")
    ap.add_argument("--state", metavar="FILE", help="keep the objects in FILE (JSON) across restarts")
    ap.add_argument("--crds", action="append", default=[], metavar="PATH",
                    help="preload the CustomResourceDefinitions in this file or directory (repeatable)")
    ap.add_argument("--bookmark-interval", type=float, default=60.0, metavar="SECONDS",
                    help="seconds between BOOKMARK events on watches that allow them (default 60)")
    ap.add_argument("--watch-timeout", type=float, default=1800.0, metavar="SECONDS",
                    help="how long a watch without timeoutSeconds lasts (default 1800)")
    ap.add_argument("--no-aggregated-discovery", action="store_true",
                    help="serve only the legacy discovery documents")
    ap.add_argument("--log-requests", action="store_true", help="log every request on stderr")
    ap.add_argument("--version", action="version", version="kube-apiserver-standin " + VERSION)
    args = ap.parse_args(argv)
    try:
        store = Store(history=args.history, state_file=args.state)
    except (OSError, ValueError) as e:
        sys.stderr.write("kube-apiserver-standin: cannot load --state %s: %s\n" % (args.state, e))
        return 2
    try:
        _preload(store, args.crds)
    except (OSError, yamlish.YamlError, PreloadError) as e:
        sys.stderr.write("kube-apiserver-standin: --crds: %s\n" % e)
        return 2
    try:
        httpd = StandinServer((args.host, args.port), store, args)
    except OSError as e:
        sys.stderr.write("kube-apiserver-standin: cannot listen on %s:%d: %s\n" % (args.host, args.port, e))
        return 2
    host, port = httpd.server_address[:2]
    sys.stdout.write("listening http://%s:%d\n" % (host, port))
    sys.stdout.flush()

    def stop(signum, frame):
        store.stop()
        threading.Thread(target=httpd.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        httpd.serve_forever(poll_interval=0.1)
    finally:
        httpd.server_close()
    return 0
