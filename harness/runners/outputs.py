"""Per-item output arrays on disk: safetensors (no pickle), one tensor per input item, with a JSON
metadata blob. Writes are atomic (temp file + rename)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file, save_file


def item_key(i: int) -> str:
    return f"item.{i:05d}"


def save_items(path: Path, items: list[np.ndarray], meta: dict | None = None) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tensors = {item_key(i): np.ascontiguousarray(a) for i, a in enumerate(items)}
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        save_file(tensors, tmp, metadata={"parity": json.dumps(meta or {}, sort_keys=True)})
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_items(path: Path) -> tuple[list[np.ndarray], dict]:
    tensors = load_file(str(path))
    with safe_open(str(path), framework="numpy") as f:
        meta = json.loads((f.metadata() or {}).get("parity", "{}"))
    n = len(tensors)
    missing = [item_key(i) for i in range(n) if item_key(i) not in tensors]
    if missing:
        raise ValueError(f"{path}: items are not numbered 0..{n - 1} (missing {missing[:3]})")
    return [tensors[item_key(i)] for i in range(n)], meta
