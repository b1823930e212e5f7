"""Writing a golden: its arrays, token ids and float32 reference under names that carry their
sha256, then the manifest atomically, then the old files removed (harness.judge.golden)."""

from __future__ import annotations

import datetime as dt
import json
import os
import tempfile
from pathlib import Path

import numpy as np

from harness import __version__
from harness.judge.golden_files import (
    FP32_KEY,
    LEGACY_FP32_SIDECAR,
    MANIFEST,
    SCHEMA_VERSION,
    case_dir,
    file_sha256,
    read_manifest,
    reference_key,
)
from harness.runners.outputs import save_items


def summary(items: list[np.ndarray]) -> list[dict]:
    """Per-item statistics a reviewer can read in a diff (the arrays stay the golden)."""
    out = []
    for a in items:
        a64 = np.asarray(a, dtype=np.float64)
        out.append(
            {
                "shape": list(a.shape),
                "mean": float(a64.mean()),
                "std": float(a64.std()),
                "min": float(a64.min()),
                "max": float(a64.max()),
            }
        )
    return out


def _tokens_text(token_ids: list | None) -> str:
    """The token ids as `<out>.requests.json` holds them, one item a line (reviewable in a diff)."""
    if token_ids is None:
        return "null\n"
    lines = [json.dumps({"prompt_token_ids": ids}) for ids in token_ids]
    return "[\n" + ",\n".join(lines) + "\n]\n"


def _write_named(d: Path, stem: str, suffix: str, save) -> tuple[Path, str]:
    """Write a file through `save(tmp_path)` under a temporary name, then rename it to
    `<stem>-<sha12><suffix>`: a reader never sees it half-written. (path, its sha256)."""
    fd, tmp = tempfile.mkstemp(prefix=f"{stem}.", suffix=".tmp", dir=d)
    os.close(fd)
    try:
        save(Path(tmp))
        digest = file_sha256(Path(tmp))
        path = d / f"{stem}-{digest[:12]}{suffix}"
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path, digest


def write(
    root: Path,
    case_id: str,
    items: list[np.ndarray],
    *,
    task: str,
    fingerprint: str,
    inputs: dict,
    dtype: str,
    device: str,
    versions: dict,
    model: str,
    key: dict,
    token_ids: list | None,
    fp32: tuple[list[np.ndarray], dict] | None = None,
) -> Path:
    """`token_ids`: the reference's prompt token ids per item (None for an item it did not tokenize
    as one sequence), or None when the reference recorded none at all. `fp32`: a half-precision
    golden's float32 reference (its items and their metadata), listed with its sha256."""
    if token_ids is not None and len(token_ids) != len(items):
        raise ValueError(
            f"golden {case_id!r}: {len(token_ids)} token-id entries for {len(items)} items"
        )
    d = case_dir(root, case_id)
    d.mkdir(parents=True, exist_ok=True)
    old = read_manifest(d) if (d / MANIFEST).exists() else None
    tokens, tokens_digest = _write_named(
        d, "tokens", ".json", lambda p: p.write_text(_tokens_text(token_ids))
    )
    arrays, digest = _write_named(
        d, "reference", ".safetensors", lambda p: save_items(p, items, {"case": case_id})
    )
    extra = {}
    if fp32 is not None:
        fp32_items, fp32_meta = fp32
        if len(fp32_items) != len(items):
            raise ValueError(
                f"golden {case_id!r}: {len(fp32_items)} float32 items for {len(items)} items"
            )
        path, fp32_digest = _write_named(
            d, "reference-float32", ".safetensors", lambda p: save_items(p, fp32_items, fp32_meta)
        )
        extra[FP32_KEY] = {"file": path.name, "sha256": fp32_digest}
    manifest = {
        "schema_version": SCHEMA_VERSION,
        "case_id": case_id,
        "task": task,
        "model": model,
        "model_fingerprint": fingerprint,
        "inputs": inputs,
        "dtype": dtype,
        "device": device,
        "versions": versions,
        "reference_key": key,
        "harness_version": __version__,
        "recorded": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "arrays": arrays.name,
        "arrays_sha256": digest,
        "items": summary(items),
        "token_ids": {
            "file": tokens.name,
            "sha256": tokens_digest,
            "items_with_ids": sum(1 for t in token_ids or [] if t is not None),
        },
        **extra,
    }
    fd, tmp = tempfile.mkstemp(prefix="manifest.", suffix=".tmp", dir=d)
    with os.fdopen(fd, "w") as f:
        json.dump(manifest, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(tmp, d / MANIFEST)
    if old and old.get("arrays") and old["arrays"] != arrays.name:
        (d / old["arrays"]).unlink(missing_ok=True)
    kept = {arrays.name, tokens.name, *(e["file"] for e in extra.values())}
    for key in ("token_ids", FP32_KEY):
        old_file = ((old or {}).get(key) or {}).get("file")
        if old_file and old_file not in kept:
            (d / old_file).unlink(missing_ok=True)
    (d / LEGACY_FP32_SIDECAR).unlink(missing_ok=True)
    return d


def write_obtained(root: Path, case_id: str, items: list[np.ndarray]) -> Path:
    """On a mismatch, keep what was obtained beside the golden for inspection (not committed)."""
    path = case_dir(root, case_id) / "reference.obtained"
    save_items(path, items, {"case": case_id, "obtained": True})
    return path


def record(
    root: Path,
    case,
    items: list[np.ndarray],
    token_ids: list | None,
    *,
    model,
    dtype: str,
    device: str,
    versions: dict,
    fp32_items: list[np.ndarray] | None = None,
) -> Path:
    """Write `case`'s golden from a fresh reference run (`model`: its ResolvedModel). A
    half-precision golden with calibrated bounds also keeps HF's float32 outputs (`fp32_items`)
    and, in their metadata, HF's own error per metric against them."""
    from harness.judge.metrics import METRICS
    from harness.matrix.inputs import input_set
    from harness.matrix.tasks import task_kind

    inputs = input_set(case.inputs)
    fp32 = None
    if fp32_items is not None:
        tol = case.tolerance(dtype)
        names = task_kind(case.task).metrics
        own = {m: METRICS[m](fp32_items, items, inputs.items, tol) for m in names}
        meta = {
            "dtype": "float32",
            "beside_dtype": dtype,
            "model_fingerprint": model.fingerprint,
            "inputs_sha256": inputs.sha256,
            "reference_own_error": own,
        }
        fp32 = (fp32_items, meta)
    return write(
        root,
        case.id,
        items,
        task=case.task,
        fingerprint=model.fingerprint,
        inputs={
            "name": inputs.name,
            "version": inputs.version,
            "sha256": inputs.sha256,
            "count": len(inputs.items),
        },
        dtype=dtype,
        device=device,
        versions=versions,
        model=model.description,
        key=reference_key(case, model.path, dtype, device),
        token_ids=token_ids,
        fp32=fp32,
    )
