"""Prompt sets: named, seeded, versioned and hashed, so goldens know what they were made from.
The built-in sets are made in harness.matrix.text_inputs and harness.matrix.multimodal_inputs;
their names are importable from here too."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

from harness.matrix.multimodal_inputs import (
    COLQWEN3_PAGE,
    COLQWEN3_QUERY_SUFFIX,
    DSE_DOCUMENT,
    DSE_QUERY,
    GME_DEFAULT_INSTRUCTION,
    GME_IMAGE_PLACEHOLDER,
    GME_QUERY_INSTRUCTION,
    MULTIMODAL_SETS,
    gme_prompt,
)
from harness.matrix.text_inputs import (
    BGE_RERANKER_GEMMA_PROMPT,
    DATA,
    MXBAI_RERANK_V2_PREFIX,
    MXBAI_RERANK_V2_TAIL,
    QWEN3_RERANKER_INSTRUCTION,
    QWEN3_RERANKER_PREFIX,
    QWEN3_RERANKER_SUFFIX,
    TEXT_SETS,
    Item,
)

# every name other code imports from here, wherever it is defined
__all__ = [
    "BGE_RERANKER_GEMMA_PROMPT",
    "COLQWEN3_PAGE",
    "COLQWEN3_QUERY_SUFFIX",
    "DATA",
    "DSE_DOCUMENT",
    "DSE_QUERY",
    "GME_DEFAULT_INSTRUCTION",
    "GME_IMAGE_PLACEHOLDER",
    "GME_QUERY_INSTRUCTION",
    "INPUT_SET_NAMES",
    "MXBAI_RERANK_V2_PREFIX",
    "MXBAI_RERANK_V2_TAIL",
    "QWEN3_RERANKER_INSTRUCTION",
    "QWEN3_RERANKER_PREFIX",
    "QWEN3_RERANKER_SUFFIX",
    "InputSet",
    "Item",
    "distinct_inputs",
    "gme_prompt",
    "input_set",
    "is_known",
    "query_groups",
    "register",
]


@dataclass(frozen=True)
class InputSet:
    name: str
    version: int
    items: tuple[Item, ...]
    # what the hash sees when items hold machine-specific paths (files users bring)
    hash_items: tuple | None = None

    @property
    def sha256(self) -> str:
        items = self.hash_items if self.hash_items is not None else self.items
        payload = json.dumps({"name": self.name, "version": self.version, "items": items})
        parts = [x for it in self.items for x in (it if isinstance(it, tuple) else (it,))]
        refs = [x["image"] for x in parts if isinstance(x, dict) and "image" in x]
        if refs:  # images are hashed over their pixels, not over their references
            from harness.matrix.images import pixels_sha256

            payload += pixels_sha256(refs)
        return hashlib.sha256(payload.encode()).hexdigest()

    @property
    def pairs(self) -> bool:
        return bool(self.items) and isinstance(self.items[0], tuple)


_SETS: dict[str, tuple[int, Callable[[], tuple[Item, ...]]]] = {**TEXT_SETS, **MULTIMODAL_SETS}
INPUT_SET_NAMES = tuple(sorted(_SETS))


_REGISTERED: dict[
    str, InputSet
] = {}  # sets read from files or the matrix (harness.matrix.input_files)


def register(inputs: InputSet) -> InputSet:
    _REGISTERED[inputs.name] = inputs
    return inputs


def input_set(name: str) -> InputSet:
    if name in _REGISTERED:
        return _REGISTERED[name]
    return _builtin(name)


def is_known(name: str) -> bool:
    return name in _SETS or name in _REGISTERED


@lru_cache(maxsize=None)
def _builtin(name: str) -> InputSet:
    try:
        version, make = _SETS[name]
    except KeyError:
        raise ValueError(
            f"unknown input set {name!r}; valid: {', '.join(INPUT_SET_NAMES)}"
        ) from None
    return InputSet(name, version, make())


def distinct_inputs(items: tuple[Item, ...]) -> int:
    """How many different inputs a set holds (a duplicate counts once)."""
    return len({json.dumps(it, sort_keys=True, default=str) for it in items})


def query_groups(items: tuple[Item, ...]) -> list[list[int]]:
    """Indices of pairs grouped by query, in order: the unit a ranking is compared on."""
    groups: dict[str, list[int]] = {}
    for i, it in enumerate(items):
        groups.setdefault(str(it[0] if isinstance(it, tuple) else it), []).append(i)
    return list(groups.values())
