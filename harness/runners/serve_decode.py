"""A server's answers as per-item outputs (harness.runners.serve): base64 and bytes embeddings
decoded (float32, float16 or bfloat16, little- or big-endian, as asked) and checked for whole,
equal-length payloads; /rerank results matched to documents by index."""

from __future__ import annotations

import base64
import json
from typing import Any

import numpy as np


class ServerFailure(RuntimeError):
    """The server did not start, died, or answered with an error; the message carries its log
    tail."""


class ServerTimeout(ServerFailure):
    """The server was not healthy within its start limit (PARITY_SERVE_START_TIMEOUT): a slow
    machine looks the same as a hung server, so the worker reports it as `timed_out`."""

    timed_out = True


# The binary encodings of /v1/embeddings (vLLM's EncodingRequestMixin, entrypoints/pooling/base/
# protocol.py: `embed_dtype` float32 | float16 | bfloat16, `endianness` little | big; the harness
# always names both, never vLLM's default "native" order). Each is read here from its published
# format, not from vLLM's code: float32 and float16 are IEEE 754 binary32 / binary16 (numpy's
# "f4" / "f2"); bfloat16 is the upper 16 bits of a binary32 (same sign and 8-bit exponent, 7
# mantissa bits: Google's bfloat16 definition), so its value is those bits shifted left by 16
# and read as binary32.
NUMPY_DTYPE = {"float32": "f4", "float16": "f2", "bfloat16": "u2"}  # bfloat16: its raw bits
BYTE_ORDER = {"little": "<", "big": ">"}
ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2}


def decode_values(raw: bytes, embed_dtype: str, endianness: str) -> np.ndarray:
    """Bytes of `embed_dtype` values in `endianness` order, as float32 (half values exactly)."""
    if embed_dtype not in NUMPY_DTYPE or endianness not in BYTE_ORDER:
        raise ValueError(
            f"embed_dtype {embed_dtype!r}, endianness {endianness!r}; valid: "
            f"{', '.join(NUMPY_DTYPE)} and {', '.join(BYTE_ORDER)}"
        )
    values = np.frombuffer(raw, dtype=BYTE_ORDER[endianness] + NUMPY_DTYPE[embed_dtype])
    if embed_dtype == "bfloat16":  # the top half of a float32: shift into place, read as one
        return (values.astype(np.uint32) << np.uint32(16)).view(np.float32)
    return values.astype(np.float32)


def _whole(raw: bytes, i: int, what: str, embed_dtype: str) -> None:
    size = ITEMSIZE.get(embed_dtype, 0)
    if size and len(raw) % size:
        raise ServerFailure(
            f"item {i}: {what} decodes to {len(raw)} bytes, not a whole number of "
            f"{size}-byte {embed_dtype} values (truncated?)"
        )


def decode_base64(
    payload: str, i: int, embed_dtype: str = "float32", endianness: str = "little"
) -> np.ndarray:
    """One base64 embedding; a payload that is not base64 or not whole values names its item."""
    import binascii

    try:
        raw = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError, TypeError) as e:
        raise ServerFailure(
            f"item {i}: the base64 embedding ({len(str(payload))} characters) does not decode: {e}"
        ) from None
    _whole(raw, i, "the base64 embedding", embed_dtype)
    return decode_values(raw, embed_dtype, endianness)


def decode_bytes(
    body: bytes, metadata: str | None, i: int, embed_dtype: str, endianness: str
) -> np.ndarray:
    """One `bytes` (or `bytes_only`: metadata None) answer of a one-input request. vLLM documents
    the body as the embeddings' raw values back to back and, for `bytes`, a `metadata` header
    (JSON: data[] with index, embed_dtype, endianness, start, end, shape per input): the one
    item's metadata must say what was asked, span the whole body and hold as many values as its
    shape."""
    what = "the bytes embedding"
    if metadata is None:
        _whole(body, i, what, embed_dtype)
        return decode_values(body, embed_dtype, endianness)
    try:
        items = json.loads(metadata)["data"]
        (item,) = items
        start, end, shape = int(item["start"]), int(item["end"]), [int(n) for n in item["shape"]]
        said = (item["embed_dtype"], item["endianness"])
    except (ValueError, KeyError, TypeError) as e:
        raise ServerFailure(
            f"item {i}: the metadata header of the bytes answer is not one item's "
            f"{{start, end, shape, embed_dtype, endianness}} ({type(e).__name__}: {e}): "
            f"{metadata[:300]}"
        ) from None
    if said != (embed_dtype, endianness):
        raise ServerFailure(
            f"item {i}: the bytes answer says it holds {said[0]} {said[1]}-endian values; "
            f"asked for {embed_dtype} {endianness}-endian"
        )
    if (start, end) != (0, len(body)):
        raise ServerFailure(
            f"item {i}: the bytes answer's metadata spans bytes {start}..{end} of a "
            f"{len(body)}-byte body"
        )
    _whole(body, i, what, embed_dtype)
    out = decode_values(body, embed_dtype, endianness)
    if out.size != int(np.prod(shape)):
        raise ServerFailure(
            f"item {i}: the bytes answer holds {out.size} {embed_dtype} values; its metadata "
            f"says shape {shape}"
        )
    return out.reshape(shape)


def same_length(
    vectors: list[np.ndarray], numbers: list[int], fmt: str = "base64", embed_dtype: str = "float32"
) -> None:
    """Every embedding of a case has one length: an item (`numbers`: each vector's item number)
    whose binary answer is shorter or longer than the others' was cut or padded; name it with the
    byte count expected."""
    lengths = [len(v) for v in vectors]
    common = max(set(lengths), key=lengths.count, default=0)
    size = ITEMSIZE[embed_dtype]
    for i, n in zip(numbers, lengths):
        if n != common:
            raise ServerFailure(
                f"item {i}: the {fmt} embedding decodes to {n * size} bytes, expected "
                f"{common * size} "
                f"({common} {embed_dtype} values, as {lengths.count(common)} of the "
                f"{len(lengths)} items have)"
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


def match_by_index(ans: dict, n: int, what: str) -> list[dict]:
    """The `data` of a request that carried `n` inputs (a list `input` on /v1/embeddings,
    /classify), one entry per input in the order sent, matched by each entry's `index`, never by
    its position: an index out of range, repeated or missing is the server's error."""
    seen: dict[int, dict] = {}
    for pos, entry in enumerate(ans.get("data") or []):
        k = entry.get("index")
        if not isinstance(k, int) or not 0 <= k < n or k in seen:
            raise ServerFailure(
                f"{what}: answer entry {pos} has index {k!r}; expected each of 0..{n - 1} once"
            )
        seen[k] = entry
    missing = [k for k in range(n) if k not in seen]
    if missing:
        raise ServerFailure(f"{what}: the answer has no entry for input(s) {missing} of {n}")
    return [seen[k] for k in range(n)]
