"""A server's answers as per-item outputs (harness.runners.serve): base64 embeddings decoded and
checked for whole, equal-length float32 payloads; /rerank results matched to documents by index."""

from __future__ import annotations

import base64
from typing import Any

import numpy as np


class ServerFailure(RuntimeError):
    """The server did not start, died, or answered with an error; the message carries its log
    tail."""


EMBED_DTYPE = "<f4"  # what base64 embeddings are decoded as: the float32 little-endian asked for


def decode_base64(payload: str, i: int) -> np.ndarray:
    """One base64 embedding; a payload that is not base64 or not whole float32 values names its
    item."""
    import binascii

    try:
        raw = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError, TypeError) as e:
        raise ServerFailure(
            f"item {i}: the base64 embedding ({len(str(payload))} characters) does not decode: {e}"
        ) from None
    size = np.dtype(EMBED_DTYPE).itemsize
    if len(raw) % size:
        raise ServerFailure(
            f"item {i}: the base64 embedding decodes to {len(raw)} bytes, not a whole number of "
            f"{size}-byte float32 values (truncated?)"
        )
    return np.frombuffer(raw, dtype=EMBED_DTYPE).astype(np.float32)


def same_length(vectors: list[np.ndarray], numbers: list[int]) -> None:
    """Every embedding of a case has one length: an item (`numbers`: each vector's item number)
    whose base64 answer is shorter or longer than the others' was cut or padded; name it with the
    byte count expected."""
    lengths = [len(v) for v in vectors]
    common = max(set(lengths), key=lengths.count, default=0)
    size = np.dtype(EMBED_DTYPE).itemsize
    for i, n in zip(numbers, lengths):
        if n != common:
            raise ServerFailure(
                f"item {i}: the base64 embedding decodes to {n * size} bytes, expected "
                f"{common * size} "
                f"({common} float32 values, as {lengths.count(common)} of the {len(lengths)} items "
                "have)"
            )


def match_rerank(
    g: int, documents: list, full: dict, top: dict | None, top_n: int | None
) -> list[tuple[np.ndarray, dict]]:
    """One query group's /rerank answers as (score, meta) per document, in the order sent. Results
    are matched by their `index`, never by their position (the position is the server's ranking,
    kept as `rank`, and `top_rank` in the top_n answer); an index out of range or repeated is the
    server's error. `document_matches`: the result's document text is the one at its index."""

    def by_index(ans: dict, what: str) -> dict[int, tuple[int, float, bool]]:
        seen: dict[int, tuple[int, float, bool]] = {}
        for pos, res in enumerate(ans.get("results") or []):
            k = res.get("index")
            if not isinstance(k, int) or not 0 <= k < len(documents) or k in seen:
                raise ServerFailure(
                    f"/rerank answer ({what}) for query group {g}: result {pos} has index {k!r}; "
                    f"expected each of 0..{len(documents) - 1} at most once"
                )
            text = (res.get("document") or {}).get("text")
            seen[k] = (pos, float(res["relevance_score"]), text is None or text == documents[k])
        return seen

    full_by = by_index(full, "all documents")
    missing = [k for k in range(len(documents)) if k not in full_by]
    if missing:
        raise ServerFailure(
            f"/rerank answer (all documents) for query group {g} has no result for document(s) "
            f"{missing}"
        )
    top_by = by_index(top, f"top_n={top_n}") if top is not None else {}
    out = []
    for k in range(len(documents)):
        rank, score, doc_ok = full_by[k]
        info: dict[str, Any] = {
            "group": g,
            "rank": rank,
            "document_matches": doc_ok,
            "prompt_tokens": (full.get("usage") or {}).get("prompt_tokens"),
        }  # the whole group's
        if top is not None:
            top_rank, top_score, top_ok = top_by.get(k, (None, None, True))
            info.update(
                top_n=top_n,
                top_rank=top_rank,
                top_score=top_score,
                document_matches=doc_ok and top_ok,
            )
        out.append(
            (
                np.asarray([score], dtype=np.float32),
                {"prompt_token_ids": None, "num_cached_tokens": None, "rerank": info},
            )
        )
    return out
