"""Label selectors, field selectors and the JSONPath subset of printer columns.

    LabelSelector.parse("app=vllm,tier in (a,b),!canary").matches(labels) -> bool
    FieldSelector.parse("metadata.name=chat,status.phase!=Running").matches(getter) -> bool
    jsonpath(".status.conditions[?(@.type==\"Ready\")].status", obj) -> [values]

Label selectors follow k8s.io/apimachinery/pkg/labels: `k`, `!k`, `k=v`, `k==v`, `k!=v`,
`k in (a,b)`, `k notin (a,b)`, `k>N`, `k<N`, joined by commas. Field selectors follow
k8s.io/apimachinery/pkg/fields: `f=v`, `f==v`, `f!=v` with `\\,` `\\=` `\\\\` escapes; which
fields a resource supports is the caller's business (an unsupported field is a 400).
Parse errors raise SelectorError (the server answers 400 BadRequest).

The JSONPath subset is what CRD printer columns and selectableFields use: `.a.b`, `['a.b']`,
`[N]`, `[*]` and `[?(@.k=="v")]` / `[?(@.k!="v")]` filters.
"""
import re

__all__ = ["SelectorError", "LabelSelector", "FieldSelector", "jsonpath", "JsonPathError",
           "LABEL_NAME", "LABEL_VALUE"]

LABEL_NAME = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                         r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")


class SelectorError(ValueError):
    pass


class LabelSelector:
    """A parsed label selector: a list of (key, op, values) requirements, all must hold."""

    def __init__(self, reqs):
        self.reqs = reqs

    @classmethod
    def parse(cls, text):
        text = (text or "").strip()
        reqs = []
        if not text:
            return cls(reqs)
        if len(text) > 8192:
            raise SelectorError("label selector longer than 8192 characters")
        for part in _split_top(text):
            part = part.strip()
            if not part:
                raise SelectorError("unable to parse requirement: empty requirement in %r" % text)
            reqs.append(_parse_requirement(part))
        return cls(reqs)

    def empty(self):
        return not self.reqs

    def matches(self, labels):
        labels = labels if isinstance(labels, dict) else {}
        for key, op, vals in self.reqs:
            has = key in labels
            v = labels.get(key)
            if op == "exists" and not has:
                return False
            if op == "!" and has:
                return False
            if op in ("=", "in") and (not has or v not in vals):
                return False
            if op in ("!=", "notin") and has and v in vals:
                return False
            if op in (">", "<"):
                try:
                    n, lim = int(v), int(vals[0])
                except (TypeError, ValueError):
                    return False
                if (op == ">" and not n > lim) or (op == "<" and not n < lim):
                    return False
        return True


def _split_top(text):
    """Splits on commas outside parentheses."""
    parts, depth, cur = [], 0, ""
    for c in text:
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth < 0:
                raise SelectorError("unable to parse requirement: unbalanced ')' in %r" % text)
        if c == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += c
    if depth:
        raise SelectorError("unable to parse requirement: unclosed '(' in %r" % text)
    parts.append(cur)
    return parts


def _check_key(k, whole):
    if not LABEL_NAME.match(k) or len(k.split("/")[-1]) > 63:
        raise SelectorError("unable to parse requirement: invalid label key %r in %r" % (k, whole))
    return k


def _check_value(v, whole):
    if len(v) > 63 or not LABEL_VALUE.match(v):
        raise SelectorError("unable to parse requirement: invalid label value %r in %r" % (v, whole))
    return v


def _parse_requirement(part):
    m = re.match(r"^(\S+?)\s+(in|notin)\s*\((.*)\)$", part)
    if m:
        vals = [_check_value(v.strip(), part) for v in m.group(3).split(",")]
        if m.group(3).strip() == "":
            raise SelectorError("unable to parse requirement: %r: values in (...) are empty" % part)
        return (_check_key(m.group(1), part), m.group(2), set(vals))
    if part.startswith("!"):
        return (_check_key(part[1:].strip(), part), "!", set())
    for op in ("==", "!=", "=", ">", "<"):
        if op in part:
            k, v = part.split(op, 1)
            k, v = k.strip(), v.strip()
            if op in (">", "<"):
                if not re.match(r"^-?[0-9]+$", v):
                    raise SelectorError("unable to parse requirement: %r: %s needs an integer" % (part, op))
                return (_check_key(k, part), op, [v])
            return (_check_key(k, part), "=" if op == "==" else op, {_check_value(v, part)})
    return (_check_key(part, part), "exists", set())


class FieldSelector:
    """A parsed field selector: a list of (field, op, value), op '=' or '!='."""

    def __init__(self, reqs):
        self.reqs = reqs

    @classmethod
    def parse(cls, text):
        text = text or ""
        if len(text) > 8192:
            raise SelectorError("field selector longer than 8192 characters")
        reqs = []
        if not text.strip():
            return cls(reqs)
        for part in _split_escaped(text, ","):
            m = None
            for op in ("==", "!=", "="):
                idx = _find_unescaped(part, op)
                if idx >= 0:
                    m = (part[:idx], op, part[idx + len(op):])
                    break
            if m is None:
                raise SelectorError("invalid selector: %r; can't understand %r" % (text, part))
            field, op, value = m[0].strip(), ("=" if m[1] == "==" else m[1]), _unescape(m[2])
            if not field:
                raise SelectorError("invalid selector: %r: empty field name" % text)
            reqs.append((field, op, value))
        return cls(reqs)

    def fields(self):
        return [f for f, _, _ in self.reqs]

    def empty(self):
        return not self.reqs

    def value_for(self, field):
        """The value an '=' requirement demands for `field`, else None (for fast lookups)."""
        for f, op, v in self.reqs:
            if f == field and op == "=":
                return v
        return None

    def matches(self, getter):
        """getter(field) -> the object's value for that field, as a string."""
        for f, op, v in self.reqs:
            have = getter(f)
            if (op == "=") != (have == v):
                return False
        return True


def _find_unescaped(s, sub):
    i = 0
    while i <= len(s) - len(sub):
        if s[i] == "\\":
            i += 2
            continue
        if s.startswith(sub, i):
            return i
        i += 1
    return -1


def _split_escaped(s, sep):
    parts, cur, i = [], "", 0
    while i < len(s):
        if s[i] == "\\" and i + 1 < len(s):
            cur += s[i:i + 2]
            i += 2
            continue
        if s[i] == sep:
            parts.append(cur)
            cur = ""
        else:
            cur += s[i]
        i += 1
    parts.append(cur)
    return parts


def _unescape(s):
    out, i = "", 0
    while i < len(s):
        if s[i] == "\\" and i + 1 < len(s):
            out += s[i + 1]
            i += 2
        else:
            out += s[i]
            i += 1
    return out


# -- JSONPath subset ---------------------------------------------------------------------------
class JsonPathError(ValueError):
    pass


_JP_TOKEN = re.compile(r"""\.([A-Za-z0-9_$-]+)            # .field
                          |\[\s*'([^']*)'\s*\]            # ['field']
                          |\[\s*"([^"]*)"\s*\]            # ["field"]
                          |\[\s*(\*|-?[0-9]+)\s*\]        # [*] or [N]
                          |\[\?\(@\.([A-Za-z0-9_.-]+)\s*(==|!=)\s*(?:"([^"]*)"|'([^']*)'|([^)\s]+))\s*\)\]
                       """, re.X)
_jp_cache = {}


def _jp_compile(path):
    if path in _jp_cache:
        return _jp_cache[path]
    p = path.strip()
    if p.startswith("{") and p.endswith("}"):
        p = p[1:-1].strip()
    if p.startswith("$"):
        p = p[1:]
    steps, pos = [], 0
    while pos < len(p):
        m = _JP_TOKEN.match(p, pos)
        if not m:
            raise JsonPathError("unsupported JSONPath %r at %d" % (path, pos))
        if m.group(1) is not None or m.group(2) is not None or m.group(3) is not None:
            steps.append(("field", next(g for g in m.groups()[0:3] if g is not None)))
        elif m.group(4) is not None:
            steps.append(("all", None) if m.group(4) == "*" else ("index", int(m.group(4))))
        else:
            lit = next((g for g in m.groups()[6:9] if g is not None), "")
            steps.append(("filter", (m.group(5).split("."), m.group(6), lit)))
        pos = m.end()
    if len(_jp_cache) < 1000:
        _jp_cache[path] = steps
    return steps


def jsonpath(path, obj):
    """All values `path` selects in obj (an empty list when none)."""
    cur = [obj]
    for kind, arg in _jp_compile(path):
        nxt = []
        for v in cur:
            if kind == "field":
                if isinstance(v, dict) and arg in v:
                    nxt.append(v[arg])
            elif kind == "index":
                if isinstance(v, list) and -len(v) <= arg < len(v):
                    nxt.append(v[arg])
            elif kind == "all":
                if isinstance(v, list):
                    nxt.extend(v)
                elif isinstance(v, dict):
                    nxt.extend(v.values())
            else:
                keys, op, lit = arg
                for item in (v if isinstance(v, list) else []):
                    got = item
                    for k in keys:
                        got = got.get(k) if isinstance(got, dict) else None
                    s = _scalar_text(got) if got is not None else None
                    if (op == "==") == (s == lit):
                        nxt.append(item)
        cur = nxt
    return cur


def _scalar_text(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)
