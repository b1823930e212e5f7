"""A matrix's YAML files as layers (harness.matrix.loader merges them): each file parsed with its
node tree, so every key has its line; `include` followed (cycles refused); defaults, families,
cases and `select` collected in order; and which layer (case, family, defaults) set a key."""

from __future__ import annotations

import copy
import hashlib
from pathlib import Path
from typing import Any

import yaml

from harness.matrix.schema import MatrixError

TOP_LEVEL_KEYS = ("include", "defaults", "families", "cases", "select")


class YamlDoc:
    """One parsed YAML file: plain data plus its node tree, for line numbers."""

    def __init__(self, path: Path):
        self.path = path
        try:
            text = path.read_text()
        except OSError as e:
            raise MatrixError(f"{path}: cannot read matrix: {e.strerror}") from None
        try:
            self.node = yaml.compose(text, Loader=yaml.SafeLoader)
            self.data = yaml.safe_load(text)
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            where = f"{path}:{mark.line + 1}" if mark else str(path)
            problem = getattr(e, "problem", None) or str(e)
            raise MatrixError(f"{where}: invalid YAML: {problem}") from None
        if self.data is None:
            self.data = {}
        if not isinstance(self.data, dict):
            raise MatrixError(f"{path}:1: a matrix must be a mapping with keys {TOP_LEVEL_KEYS}")
        unknown = sorted(set(self.data) - set(TOP_LEVEL_KEYS))
        if unknown:
            raise MatrixError(
                f"{self.where(unknown[0])}: unknown top-level key {unknown[0]!r}; "
                f"valid keys: {', '.join(TOP_LEVEL_KEYS)}"
            )

    def line(self, *loc: str | int) -> int | None:
        node = self.node
        line = node.start_mark.line + 1 if node is not None else None
        for key in loc:
            if isinstance(node, yaml.MappingNode):
                match = [v for k, v in node.value if k.value == key]
                if not match:
                    break
                node = match[0]
            elif isinstance(node, yaml.SequenceNode) and isinstance(key, int):
                if key >= len(node.value):
                    break
                node = node.value[key]
            else:
                break
            line = node.start_mark.line + 1
        return line

    def where(self, *loc: str | int) -> str:
        return f"{self.path}:{self.line(*loc)}"


def _deep_merge(base: dict, over: dict) -> dict:
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def merge_layers(*layers: dict) -> dict:
    """Deep merge, except that a `model` of another `source` replaces the inherited one whole."""
    out: dict = {}
    for layer in layers:
        model = layer.get("model")
        if (
            isinstance(model, dict)
            and isinstance(out.get("model"), dict)
            and "source" in model
            and model["source"] != out["model"].get("source")
        ):
            out = {k: v for k, v in out.items() if k != "model"}
        out = _deep_merge(out, layer)
    return out


def _expect(doc: YamlDoc, value: Any, kind: type, *loc: str | int) -> Any:
    if not isinstance(value, kind):
        raise MatrixError(
            f"{doc.where(*loc)}: key {'.'.join(map(str, loc))!r} must be a "
            f"{'mapping' if kind is dict else 'list'}, got {type(value).__name__}"
        )
    return value


class Layers:
    """Accumulates defaults, families and raw cases across included files."""

    def __init__(self) -> None:
        self.defaults: dict = {}
        self.defaults_src: list[YamlDoc] = []  # the files with `defaults:`, in the order merged
        self.families: dict[str, tuple[dict, YamlDoc]] = {}
        self.cases: list[tuple[dict, YamlDoc, int]] = []
        self.select: tuple[list[str], YamlDoc] | None = None
        self.digest = hashlib.sha256()  # every file read, in order
        self.files: list[str] = []


def collect(path: Path, layers: Layers, seen: tuple[Path, ...]) -> None:
    path = path.resolve()
    if path in seen:
        chain = " -> ".join(str(p) for p in (*seen, path))
        raise MatrixError(f"{path}: include cycle: {chain}")
    doc = YamlDoc(path)
    layers.digest.update(str(path.name).encode() + b"\0" + path.read_bytes() + b"\0")
    layers.files.append(str(path))
    data = doc.data
    includes = data.get("include", [])
    if isinstance(includes, str):
        includes = [includes]
    _expect(doc, includes, list, "include")
    for i, inc in enumerate(includes):
        target = (path.parent / str(inc)).resolve()
        if not target.is_file():
            raise MatrixError(
                f"{doc.where('include', i)}: included file {inc!r} not found ({target})"
            )
        collect(target, layers, (*seen, path))
    defaults = _expect(doc, data.get("defaults", {}) or {}, dict, "defaults")
    layers.defaults = _deep_merge(layers.defaults, defaults)
    if defaults:
        layers.defaults_src.append(doc)
    families = _expect(doc, data.get("families", {}) or {}, dict, "families")
    for name, fam in families.items():
        _expect(doc, fam, dict, "families", name)
        layers.families[str(name)] = (fam, doc)
    cases = _expect(doc, data.get("cases", []) or [], list, "cases")
    for i, raw in enumerate(cases):
        _expect(doc, raw, dict, "cases", i)
        layers.cases.append((raw, doc, i))
    if "select" in data:
        layers.select = (_expect(doc, data["select"], list, "select"), doc)


def error_location(
    loc: tuple,
    raw: dict,
    doc: YamlDoc,
    i: int,
    fam: tuple[dict, YamlDoc] | None,
    fam_name: str,
    defaults: list[YamlDoc],
) -> str:
    """Find which layer (case, family, defaults) set the offending key, and its line."""
    key = loc[0] if loc else None
    if key is None or key in raw:
        return doc.where("cases", i, *loc)
    if fam is not None and key in fam[0]:
        return fam[1].where("families", fam_name, *loc)
    src = _defaults_source(defaults, loc)
    if src is not None:
        return src.where("defaults", *loc)
    return doc.where("cases", i)


def _defaults_source(defaults: list[YamlDoc], loc: tuple) -> YamlDoc | None:
    """The file whose `defaults:` holds the value at `loc`: of the files that set loc[0], the one
    that goes deepest along `loc` (merged last on a tie: it overrides the earlier ones)."""
    best, depth = None, 0
    for d in defaults:
        node, n = d.data.get("defaults"), 0
        for key in loc:
            if isinstance(node, dict) and key in node:
                node = node[key]
            elif isinstance(node, list) and isinstance(key, int) and 0 <= key < len(node):
                node = node[key]
            else:
                break
            n += 1
        if n and n >= depth:
            best, depth = d, n
    return best
