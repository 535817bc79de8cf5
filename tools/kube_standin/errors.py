"""Kubernetes API errors: an ApiError carries the HTTP code and the `Status` object the real
server sends (kind Status, apiVersion v1, status Failure, message, reason, details, code).
The constructors below use kube-apiserver's reasons and wording, e.g.
`inferencepools.inferplane.io "chat" not found` (404 NotFound) or
`InferencePool.inferplane.io "chat" is invalid: spec.model: Required value` (422 Invalid)."""

__all__ = ["ApiError", "not_found", "already_exists", "conflict", "invalid", "bad_request",
           "method_not_allowed", "expired", "unsupported_media_type", "not_acceptable",
           "too_large", "forbidden", "internal", "timeout", "path_not_found"]


class ApiError(Exception):
    def __init__(self, code, reason, message, details=None, headers=None):
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers or {}

    def status(self):
        st = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
              "message": self.message, "reason": self.reason, "code": self.code}
        if self.details is not None:
            st["details"] = self.details
        return st


def _res_details(rt, name):
    d = {"name": name, "kind": rt.plural} if name else {"kind": rt.plural}
    if rt.group:
        d["group"] = rt.group
    return d


def not_found(rt, name):
    return ApiError(404, "NotFound", '%s "%s" not found' % (rt.group_resource, name),
                    _res_details(rt, name))


def path_not_found():
    return ApiError(404, "NotFound", "the server could not find the requested resource", {})


def already_exists(rt, name):
    return ApiError(409, "AlreadyExists", '%s "%s" already exists' % (rt.group_resource, name),
                    _res_details(rt, name))


def conflict(rt, name, why="the object has been modified; please apply your changes to the "
                          "latest version and try again"):
    return ApiError(409, "Conflict", 'Operation cannot be fulfilled on %s "%s": %s'
                    % (rt.group_resource, name, why), _res_details(rt, name))


def invalid(rt, name, causes):
    parts = ["%s: %s" % (c["field"], c["message"]) for c in causes]
    text = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
    d = {"name": name or "", "kind": rt.kind, "causes": causes}
    if rt.group:
        d["group"] = rt.group
    return ApiError(422, "Invalid", '%s "%s" is invalid: %s' % (rt.qualified_kind, name or "", text), d)


def bad_request(message):
    return ApiError(400, "BadRequest", message)


def method_not_allowed():
    return ApiError(405, "MethodNotAllowed",
                    "the server does not allow this method on the requested resource", {})


def expired(message):
    return ApiError(410, "Expired", message)


def unsupported_media_type(content_type, accepted):
    return ApiError(415, "UnsupportedMediaType",
                    "the body of the request was in an unknown format - accepted media types "
                    "include: " + ", ".join(accepted), {})


def not_acceptable(accepted):
    return ApiError(406, "NotAcceptable", "only the following media types are accepted: "
                    + ", ".join(accepted))


def too_large(limit):
    return ApiError(413, "RequestEntityTooLarge",
                    "the request body is larger than %d bytes" % limit)


def forbidden(rt, name, why):
    return ApiError(403, "Forbidden", '%s "%s" is forbidden: %s' % (rt.group_resource, name, why),
                    _res_details(rt, name))


def internal(message):
    return ApiError(500, "InternalError", "Internal error occurred: " + message)


def timeout(message, causes=None):
    d = {"causes": causes} if causes else None
    return ApiError(504, "Timeout", message, d)
