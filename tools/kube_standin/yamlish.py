"""A small YAML reader (Python stdlib only) for the stand-in's own inputs.

What it is: enough YAML for Kubernetes manifests as people write them — the files in crds/ and
examples/, and `application/yaml` request bodies: multi-document streams (`---`), block
mappings and sequences (including a sequence at the same indentation as its key), flow
collections (`{a: 1, b: [x, y]}`, also spread over several lines), plain / single-quoted /
double-quoted scalars (also continued on following lines), block scalars (`|`, `>`, with `-`
or `+`), comments. Plain scalars resolve like sigs.k8s.io/yaml (YAML 1.1, which kubectl
uses): null/~, true/false/yes/no/on/off, integers (decimal, 0x, 0o), floats.

What it is not: a full YAML 1.2 parser. Anchors, aliases, tags, complex keys and directives
are rejected with a YamlError naming the line; kubectl itself never sends YAML (it converts
manifests to JSON before sending them), so request bodies from kubectl never come here.

    load_all(text, strict=False, warnings=None) -> [document, ...]  (empty documents dropped)
    load(text, strict=False, warnings=None)     -> the single document (YamlError if several)

A key repeated in one mapping keeps its last value, as sigs.k8s.io/yaml (and so kubectl)
does; `warnings` (a list) receives "line N: duplicate key 'k'" for each, and strict=True makes
it a YamlError instead.
"""
import re

__all__ = ["YamlError", "load", "load_all"]


class YamlError(ValueError):
    """Malformed or unsupported YAML; the message names the line (1-based)."""


_DOC_SEP = re.compile(r"^---(\s|$)")
_INT = re.compile(r"^[-+]?(0|[1-9][0-9_]*)$")
_HEX = re.compile(r"^0x[0-9a-fA-F_]+$")
_OCT = re.compile(r"^0o?[0-7_]+$")
_FLOAT = re.compile(r"^[-+]?(\.[0-9]+|[0-9][0-9_]*(\.[0-9_]*)?)([eE][-+]?[0-9]+)?$")
_TRUE = {"true", "True", "TRUE", "y", "Y", "yes", "Yes", "YES", "on", "On", "ON"}
_FALSE = {"false", "False", "FALSE", "n", "N", "no", "No", "NO", "off", "Off", "OFF"}
_NULL = {"", "~", "null", "Null", "NULL"}
_MAX_DEPTH = 100  # nesting bound: deeper input is rejected, never a stack overflow


def load_all(text, strict=False, warnings=None):
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    if text.startswith("\ufeff"):
        text = text[1:]
    docs, cur, start = [], [], 1
    for n, line in enumerate(text.split("\n"), 1):
        line = line.rstrip("\r")
        if _DOC_SEP.match(line):
            docs.append((start, cur))
            rest = line[3:].strip()
            if rest and not rest.startswith("#"):
                raise YamlError("line %d: content after '---' is not supported" % n)
            cur, start = [], n + 1
        elif line.startswith("...") and line[3:].strip() == "":
            docs.append((start, cur))
            cur, start = [], n + 1
        elif line.startswith("%") and not cur:
            raise YamlError("line %d: YAML directives are not supported" % n)
        else:
            cur.append(line)
    docs.append((start, cur))
    out = []
    for first, lines in docs:
        p = _Parser(lines, first, strict, warnings)
        v = p.document()
        if v is not None:
            out.append(v)
    return out


def load(text, strict=False, warnings=None):
    docs = load_all(text, strict, warnings)
    if len(docs) > 1:
        raise YamlError("expected one YAML document, found %d" % len(docs))
    return docs[0] if docs else None


def _strip_comment(s):
    """s without a trailing comment (a '#' at the start or after a blank, outside quotes)."""
    q = None
    i = 0
    while i < len(s):
        c = s[i]
        if q:
            if c == "\\" and q == '"':
                i += 1
            elif c == q:
                if q == "'" and i + 1 < len(s) and s[i + 1] == "'":
                    i += 1
                else:
                    q = None
        elif c in "\"'" and (i == 0 or s[i - 1] in " \t[{,:-?"):
            q = c
        elif c == "#" and (i == 0 or s[i - 1] in " \t"):
            return s[:i].rstrip()
        i += 1
    return s.rstrip()


def _indent(s):
    return len(s) - len(s.lstrip(" "))


def _key_split(s):
    """(key, rest) when s (comment-free, stripped) starts a mapping entry, else None."""
    if not s or s[0] in "[{" or s.startswith("- ") or s == "-":
        return None
    if s[0] in "\"'":
        i = _quote_end(s)
        if i < 0:
            return None
        after = s[i + 1:].lstrip(" ")
        if after == ":" or after.startswith(": "):
            return s[:i + 1], after[1:].strip()
        return None
    for m in re.finditer(r":(\s|$)", s):
        key = s[:m.start()]
        if key.strip() == "":
            return None
        return key.rstrip(), s[m.end():].strip()
    return None


class _Parser:
    def __init__(self, lines, first_lineno, strict=False, warnings=None):
        self.lines = lines
        self.first = first_lineno
        self.i = 0
        self.depth = 0
        self.strict = strict
        self.warnings = warnings

    def duplicate(self, key, line=None):
        e = self.err("duplicate key %r" % key, line)
        if self.strict:
            raise e
        if self.warnings is not None:
            self.warnings.append(str(e))

    def err(self, msg, i=None):
        return YamlError("line %d: %s" % (self.first + (self.i if i is None else i), msg))

    # -- lines --------------------------------------------------------------------------
    def _next_significant(self):
        """Index of the next line that is not blank or a comment, or None."""
        j = self.i
        while j < len(self.lines):
            raw = self.lines[j]
            if "\t" in raw[:_indent(raw) + 1] and raw.strip() and raw.lstrip(" ")[0] == "\t":
                raise self.err("tabs are not allowed for indentation", j)
            if _strip_comment(raw).strip():
                return j
            j += 1
        return None

    def document(self):
        j = self._next_significant()
        if j is None:
            return None
        self.i = j
        v = self.block(_indent(self.lines[j]))
        j = self._next_significant()
        if j is not None:
            raise self.err("unexpected content (check the indentation)", j)
        return v

    # -- block nodes ----------------------------------------------------------------------
    def block(self, indent):
        """The block node starting at the next significant line, indented exactly `indent`."""
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            raise self.err("nesting deeper than %d" % _MAX_DEPTH)
        try:
            j = self._next_significant()
            if j is None:
                return None
            self.i = j
            text = _strip_comment(self.lines[j]).strip()
            if text == "-" or text.startswith("- "):
                return self.sequence(indent)
            if _key_split(text) is not None:
                return self.mapping(indent)
            return self.scalar_lines(indent - 1, text)
        finally:
            self.depth -= 1

    def mapping(self, indent):
        out = {}
        while True:
            j = self._next_significant()
            if j is None or _indent(self.lines[j]) < indent:
                return out
            if _indent(self.lines[j]) > indent:
                raise self.err("unexpected indentation", j)
            self.i = j
            text = _strip_comment(self.lines[j]).strip()
            kv = _key_split(text)
            if kv is None:
                if text == "-" or text.startswith("- "):
                    return out  # a sequence at the same indentation belongs to the parent
                raise self.err("expected 'key: value'")
            key = self.key(kv[0])
            if key in out:
                self.duplicate(key)
                del out[key]  # the last value wins, in the last position
            out[key] = self.value(indent, kv[1])

    def sequence(self, indent):
        out = []
        while True:
            j = self._next_significant()
            if j is None or _indent(self.lines[j]) != indent:
                if j is not None and _indent(self.lines[j]) > indent:
                    raise self.err("unexpected indentation", j)
                return out
            text = _strip_comment(self.lines[j]).strip()
            if not (text == "-" or text.startswith("- ")):
                return out
            self.i = j
            rest = text[1:].lstrip(" ")
            if rest == "":
                self.i += 1
                k = self._next_significant()
                if k is not None and _indent(self.lines[k]) > indent:
                    out.append(self.block(_indent(self.lines[k])))
                else:
                    out.append(None)
                continue
            raw = self.lines[j]
            after_dash = raw[indent + 1:]
            col = indent + 1 + len(after_dash) - len(after_dash.lstrip(" "))
            if _key_split(rest) is not None or rest == "-" or rest.startswith("- "):
                # "- key: v" starts a nested node at the column of "key": re-read this line
                # as if it were indented to that column.
                self.lines[j] = " " * col + raw[col:]
                out.append(self.block(col))
                continue
            out.append(self.value(indent, rest))

    def key(self, raw):
        if raw.startswith(("&", "*", "!", "?")):
            raise self.err("anchors, aliases, tags and complex keys are not supported")
        v = self.inline(raw)
        if isinstance(v, (dict, list)):
            raise self.err("a key must be a scalar")
        if v is None:
            return "null"
        if isinstance(v, bool):
            return "true" if v else "false"
        return str(v) if not isinstance(v, str) else v

    def value(self, indent, rest):
        """The value of an entry whose key (or '-') is at `indent`; rest = text after it."""
        if rest == "":
            self.i += 1
            k = self._next_significant()
            if k is None:
                return None
            ki = _indent(self.lines[k])
            text = _strip_comment(self.lines[k]).strip()
            if ki > indent:
                return self.block(ki)
            if ki == indent and (text == "-" or text.startswith("- ")):
                return self.sequence(indent)
            return None
        if rest[0] in "|>":
            return self.block_scalar(indent, rest)
        if rest[0] in "&*!":
            raise self.err("anchors, aliases and tags are not supported")
        return self.scalar_lines(indent, rest)

    def scalar_lines(self, indent, text):
        """An inline value that may continue on the following, more indented lines: a flow
        collection until its brackets close, a quoted scalar until its quote closes, or a
        plain scalar folded with the lines that follow."""
        start = self.i
        if text[0] in "[{":
            buf = text
            while not _balanced(buf):
                self.i += 1
                if self.i >= len(self.lines):
                    raise self.err("unclosed flow collection", start)
                buf += " " + _strip_comment(self.lines[self.i]).strip()
            self.i += 1
            return self.flow(buf, start)
        if text[0] in "\"'":
            buf = text
            while not _quote_closed(buf):
                self.i += 1
                if self.i >= len(self.lines):
                    raise self.err("unclosed quoted scalar", start)
                buf += " " + self.lines[self.i].strip()
            self.i += 1
            return self.inline(_strip_comment(buf))
        parts = [text]
        self.i += 1
        while True:
            k = self._next_significant()
            if k is None or _indent(self.lines[k]) <= indent:
                break
            nxt = _strip_comment(self.lines[k]).strip()
            if _key_split(nxt) is not None or nxt.startswith("- "):
                raise self.err("unexpected mapping or sequence after a scalar", k)
            parts.append(nxt)
            self.i = k + 1
        return self.inline(" ".join(parts)) if len(parts) > 1 else self.inline(text)

    def block_scalar(self, indent, header):
        m = re.match(r"^([|>])([-+]?)([1-9]?)([-+]?)\s*$", header)
        if not m:
            raise self.err("bad block scalar header %r" % header)
        style, chomp = m.group(1), (m.group(2) or m.group(4))
        self.i += 1
        body = []
        block_indent = int(m.group(3)) + indent if m.group(3) else None
        while self.i < len(self.lines):
            raw = self.lines[self.i]
            if raw.strip() == "":
                body.append("")
                self.i += 1
                continue
            ind = _indent(raw)
            if block_indent is None:
                if ind <= indent:
                    break
                block_indent = ind
            if ind < block_indent:
                break
            body.append(raw[block_indent:])
            self.i += 1
        # trailing blank lines belong to chomping, not to the content
        trail = 0
        while body and body[-1] == "":
            body.pop()
            trail += 1
        if style == "|":
            s = "\n".join(body)
        else:
            s, prev_blank = "", True
            for ln in body:
                if ln == "":
                    s += "\n"
                    prev_blank = True
                elif ln.startswith(" "):
                    s += ("" if prev_blank or s.endswith("\n") else "\n") + ln
                    prev_blank = False
                else:
                    s += ("" if prev_blank or s == "" or s.endswith("\n") else " ") + ln
                    prev_blank = False
        if not body:
            return ""
        if chomp == "-":
            return s
        if chomp == "+":
            return s + "\n" * (trail + 1)
        return s + "\n"

    # -- inline scalars and flow collections ------------------------------------------------
    def inline(self, s):
        s = s.strip()
        if s == "":
            return None
        if s[0] == '"':
            v, end = _double_quoted(s, 0, self)
            if s[end:].strip():
                raise self.err("unexpected text after a quoted scalar")
            return v
        if s[0] == "'":
            v, end = _single_quoted(s, 0, self)
            if s[end:].strip():
                raise self.err("unexpected text after a quoted scalar")
            return v
        if s[0] in "[{":
            return self.flow(s, self.i)
        if s[0] in "&*!%@`":
            raise self.err("%r: anchors, aliases, tags and reserved indicators are not supported" % s)
        return _resolve(s)

    def flow(self, s, line):
        pos = [0]

        def ws():
            while pos[0] < len(s) and s[pos[0]] in " \t":
                pos[0] += 1

        def node(depth):
            if depth > _MAX_DEPTH:
                raise self.err("nesting deeper than %d" % _MAX_DEPTH, line)
            ws()
            if pos[0] >= len(s):
                raise self.err("unexpected end of flow collection", line)
            c = s[pos[0]]
            if c == "[":
                pos[0] += 1
                out = []
                while True:
                    ws()
                    if pos[0] < len(s) and s[pos[0]] == "]":
                        pos[0] += 1
                        return out
                    item = node(depth + 1)
                    ws()
                    if pos[0] < len(s) and s[pos[0]] == ":":  # [a: b] is a one-pair map
                        pos[0] += 1
                        item = {str(item): node(depth + 1)}
                        ws()
                    out.append(item)
                    if pos[0] < len(s) and s[pos[0]] == ",":
                        pos[0] += 1
                    elif pos[0] < len(s) and s[pos[0]] == "]":
                        continue
                    else:
                        raise self.err("expected ',' or ']' in a flow sequence", line)
            if c == "{":
                pos[0] += 1
                out = {}
                while True:
                    ws()
                    if pos[0] < len(s) and s[pos[0]] == "}":
                        pos[0] += 1
                        return out
                    k = node(depth + 1)
                    if isinstance(k, (dict, list)):
                        raise self.err("a key must be a scalar", line)
                    ws()
                    v = None
                    if pos[0] < len(s) and s[pos[0]] == ":":
                        pos[0] += 1
                        ws()
                        if pos[0] < len(s) and s[pos[0]] not in ",}":
                            v = node(depth + 1)
                    if not isinstance(k, str):
                        k = "null" if k is None else str(k).lower() if isinstance(k, bool) else str(k)
                    if k in out:
                        self.duplicate(k, line)
                        del out[k]
                    out[k] = v
                    ws()
                    if pos[0] < len(s) and s[pos[0]] == ",":
                        pos[0] += 1
                    elif pos[0] < len(s) and s[pos[0]] == "}":
                        continue
                    else:
                        raise self.err("expected ',' or '}' in a flow mapping", line)
            if c == '"':
                v, pos[0] = _double_quoted(s, pos[0], self)
                return v
            if c == "'":
                v, pos[0] = _single_quoted(s, pos[0], self)
                return v
            start = pos[0]
            while pos[0] < len(s):
                ch = s[pos[0]]
                if ch in ",]}":
                    break
                if ch == ":" and (pos[0] + 1 >= len(s) or s[pos[0] + 1] in " ,]}"):
                    break
                pos[0] += 1
            return _resolve(s[start:pos[0]].strip())

        v = node(0)
        ws()
        if pos[0] != len(s):
            raise self.err("unexpected text after a flow collection", line)
        return v


def _balanced(s):
    depth, q, i = 0, None, 0
    while i < len(s):
        c = s[i]
        if q:
            if c == "\\" and q == '"':
                i += 1
            elif c == q:
                q = None
        elif c in "\"'":
            q = c
        elif c in "[{":
            depth += 1
        elif c in "]}":
            depth -= 1
        i += 1
    return depth <= 0


def _quote_end(s):
    """The index of the quote that closes the scalar s starts with (s[0] is ' or "): "\\x"
    escapes in double quotes, '' in single quotes; -1 when it is not closed."""
    q = s[0]
    i = 1
    while i < len(s):
        if s[i] == "\\" and q == '"':
            i += 2
            continue
        if s[i] == q:
            if q == "'" and i + 1 < len(s) and s[i + 1] == "'":
                i += 2
                continue
            return i
        i += 1
    return -1


def _quote_closed(s):
    return _quote_end(s) >= 0


_ESC = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "\\": "\\", '"': '"', "/": "/", " ": " ",
        "a": "\a", "b": "\b", "e": "\x1b", "f": "\f", "v": "\v", "N": "\x85", "_": "\xa0"}


def _double_quoted(s, i, p):
    out = []
    i += 1
    while i < len(s):
        c = s[i]
        if c == '"':
            return "".join(out), i + 1
        if c == "\\":
            i += 1
            if i >= len(s):
                break
            e = s[i]
            if e in _ESC:
                out.append(_ESC[e])
            elif e in "xuU":
                n = {"x": 2, "u": 4, "U": 8}[e]
                h = s[i + 1:i + 1 + n]
                if len(h) != n or not re.match(r"^[0-9a-fA-F]+$", h):
                    raise p.err("bad escape \\%s%s" % (e, h))
                out.append(chr(int(h, 16)))
                i += n
            else:
                raise p.err("bad escape \\%s" % e)
            i += 1
            continue
        out.append(c)
        i += 1
    raise p.err("unclosed double-quoted scalar")


def _single_quoted(s, i, p):
    out = []
    i += 1
    while i < len(s):
        if s[i] == "'":
            if i + 1 < len(s) and s[i + 1] == "'":
                out.append("'")
                i += 2
                continue
            return "".join(out), i + 1
        out.append(s[i])
        i += 1
    raise p.err("unclosed single-quoted scalar")


def _resolve(s):
    if s in _NULL:
        return None
    if s in _TRUE:
        return True
    if s in _FALSE:
        return False
    if _INT.match(s):
        return int(s.replace("_", ""))
    if _HEX.match(s):
        return int(s[2:].replace("_", ""), 16)
    if len(s) > 1 and s[0] == "0" and _OCT.match(s):
        return int(s.lstrip("0o").replace("_", "") or "0", 8)
    if _FLOAT.match(s) and any(ch.isdigit() for ch in s):
        return float(s.replace("_", ""))
    if s in (".inf", ".Inf", ".INF", "+.inf"):
        return float("inf")
    if s in ("-.inf", "-.Inf", "-.INF"):
        return float("-inf")
    if s in (".nan", ".NaN", ".NAN"):
        return float("nan")
    return s
