"""Inputs users bring: texts, pairs and images from files or inline in the matrix.

    inputs: {file: data/texts.txt}        # one text a line (blank lines skipped)
    inputs: {file: data/pairs.jsonl}      # a JSON object a line: {"text"} |
                                          #   {"query", "document"} | {"image": path}
    inputs: {images: data/pages/}         # every .png / .jpg / .jpeg of a folder, sorted by name
    inputs: {texts: [first, second]}      # inline
    inputs: {pairs: [[query, document], ...]}

Paths resolve against the matrix's folder and follow the model-path rule (inside the project or
the harness cache unless PARITY_ALLOW_ABSOLUTE_PATHS=1). Each set is hashed over its content
(image pixels, not paths), so a golden made from other inputs is refused. Every problem is an
InputError naming the input file and line; the matrix loader adds the matrix's file:line.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from harness.matrix.inputs import InputSet, Item, register

KINDS = ("file", "images", "texts", "pairs")
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")


class InputError(ValueError):
    """A malformed input spec or input file; the message says which file and line."""


def _safe(raw: str, base: Path, relative_to: Path | None = None) -> Path:
    """The model-path rule (harness.matrix.paths.contained_path), as an input error."""
    from harness.matrix.paths import UnsafePath, contained_path

    try:
        return contained_path(raw, base, "input path", relative_to)
    except UnsafePath as e:
        raise InputError(str(e)) from None


def _portable(path: Path, base: Path) -> str:
    """A path as the hash sees it: relative to the project, so every clone hashes alike."""
    try:
        return str(path.relative_to(Path(base).resolve().parent))
    except ValueError:
        return path.name


def _image_item(path: Path, where: str) -> dict:
    from PIL import Image

    if not path.is_file():
        raise InputError(f"{where}: image {path} does not exist")
    try:
        with Image.open(path) as im:
            im.verify()
    except Exception as e:  # noqa: BLE001 - any unreadable image is the user's input error
        raise InputError(f"{where}: image {path} cannot be read: {e}") from None
    return {"image": f"file:{path}"}


def _jsonl(path: Path, base: Path) -> list[Item]:
    items: list[Item] = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{n}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise InputError(f"{where}: not valid JSON ({e.msg})") from None
        if not isinstance(obj, dict):
            raise InputError(
                f"{where}: expected a JSON object with text, query + document, or image"
            )
        if isinstance(obj.get("text"), str):
            items.append(obj["text"])
        elif isinstance(obj.get("query"), str) and isinstance(obj.get("document"), str):
            items.append((obj["query"], obj["document"]))
        elif isinstance(obj.get("image"), str):
            items.append(_image_item(_safe(obj["image"], base, relative_to=path.parent), where))
        else:
            raise InputError(
                f"{where}: expected a string 'text', strings 'query' and 'document', or an "
                f"'image' path; got keys {sorted(obj)}"
            )
    kinds = {type(it).__name__ for it in items}
    if "tuple" in kinds and len(kinds) > 1:
        raise InputError(
            f"{path}: mixes (query, document) pairs with single items; a set is one or the other"
        )
    return items


def load(spec: Any, base: Path) -> InputSet:
    """Read an input spec (see the module doc) into a registered InputSet; its name goes in the
    case."""
    if not isinstance(spec, dict) or len(spec) != 1 or next(iter(spec)) not in KINDS:
        raise InputError(
            f"an input spec is a mapping with exactly one of {', '.join(KINDS)}, got {spec!r}"
        )
    kind, value = next(iter(spec.items()))
    portable: list = []
    if kind == "texts":
        if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
            raise InputError("inputs.texts must be a list of strings")
        items: list[Item] = list(value)
    elif kind == "pairs":
        if not isinstance(value, list) or not all(
            isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p)
            for p in value
        ):
            raise InputError("inputs.pairs must be a list of [query, document] string pairs")
        items = [tuple(p) for p in value]
    elif kind == "images":
        folder = _safe(str(value), base)
        if not folder.is_dir():
            raise InputError(f"inputs.images: folder {folder} does not exist")
        files = sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
        items = [_image_item(p, str(p)) for p in files]
    else:
        path = _safe(str(value), base)
        if not path.is_file():
            raise InputError(f"inputs.file: {path} does not exist")
        if path.suffix == ".jsonl":
            items = _jsonl(path, base)
        elif path.suffix == ".txt":
            items = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
        else:
            raise InputError(f"inputs.file: {path}: expected a .txt (a text a line) or .jsonl file")
    if not items:
        raise InputError(
            f"inputs.{kind}: the input set is empty "
            f"({value if kind in ('file', 'images') else 'inline'})"
        )
    for it in items:
        portable.append(
            {"image": "file:" + _portable(Path(it["image"][5:]), base)}
            if isinstance(it, dict)
            else it
        )
    digest = hashlib.sha256(json.dumps(portable, ensure_ascii=False).encode()).hexdigest()[:12]
    label = _portable(_safe(str(value), base), base) if kind in ("file", "images") else "inline"
    return register(
        InputSet(f"{kind}:{label}@{digest}", 1, tuple(items), hash_items=tuple(portable))
    )
