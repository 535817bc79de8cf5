"""YAML for the stand-in's own inputs (the files of --crds and `application/yaml` bodies), read
with PyYAML's safe loader (Debian python3-yaml, which tools/deps.sh installs).

PyYAML resolves plain scalars as YAML 1.1 does (yes/no/on/off are booleans, 0x1F an integer),
as sigs.k8s.io/yaml — and so kubectl and the API server — do. Two things are added:

- a key repeated in one mapping keeps its last value, as sigs.k8s.io/yaml does; `warnings` (a
  list) receives "line N: duplicate key 'k'" for each, and strict=True makes it an error;
- every error is a YamlError whose message names the line (1-based).

    load_all(text, strict=False, warnings=None) -> [document, ...]  (empty documents dropped)
    load(text, strict=False, warnings=None)     -> the single document (YamlError if several)
"""
import yaml

__all__ = ["YamlError", "load", "load_all"]


class YamlError(ValueError):
    """Malformed YAML; the message names the line (1-based)."""


def _loader(strict, warnings):
    class Loader(yaml.SafeLoader):
        pass

    def mapping(loader, node, deep=False):
        loader.flatten_mapping(node)
        out = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=deep)
            try:
                hash(key)
            except TypeError:
                raise YamlError("line %d: a mapping key must be a scalar"
                                % (key_node.start_mark.line + 1))
            if key in out:
                msg = "line %d: duplicate key %r" % (key_node.start_mark.line + 1, key)
                if strict:
                    raise YamlError(msg)
                if warnings is not None:
                    warnings.append(msg)
            out[key] = loader.construct_object(value_node, deep=deep)
        return out

    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    return Loader


def load_all(text, strict=False, warnings=None):
    try:
        docs = list(yaml.load_all(text, Loader=_loader(strict, warnings)))
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = mark.line + 1 if mark else 0
        raise YamlError("line %d: %s" % (line, e.problem or e.context or "malformed YAML")) from None
    except yaml.YAMLError as e:
        raise YamlError("line 0: %s" % e) from None
    return [d for d in docs if d is not None]


def load(text, strict=False, warnings=None):
    docs = load_all(text, strict, warnings)
    if len(docs) > 1:
        raise YamlError("line 1: %d documents where one was expected" % len(docs))
    return docs[0] if docs else None
