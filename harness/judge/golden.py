"""Golden files: the committed memory of what the reference (HF) said, so CI can check a runner
without running HF.

One folder per case: `golden/<case>/manifest.json` (readable: model fingerprint, input hash,
task, dtype, device, library versions, date, per-item summary statistics) and the files it
names: the arrays, `reference-<sha12>.safetensors`; the reference's prompt token ids per item,
`tokens-<sha12>.json` (one item a line; null for an item the recipe does not tokenize as one
sequence), so the golden path runs the token-id and usage checks as the live path does; and for a
half-precision golden, HF's float32 outputs, `reference-float32-<sha12>.safetensors` (the
yardstick of its calibrated bounds). An update writes the new files under new names, then
replaces the manifest atomically, then removes the old files: a write killed at any point leaves
either the old golden or the new one, never a mix. The manifest records every file's sha256, so a
truncated or edited file is detected, not compared.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness import __version__
from harness.runners.outputs import load_items, save_items

MANIFEST = "manifest.json"
# 2: the manifest names the reference's token ids (`token_ids`); 3: a half-precision golden's
# float32 reference is named with its sha256 (`float32_reference`). Both are read.
SCHEMA_VERSION = 3
FP32_KEY = "float32_reference"
# where schema 2 put the float32 reference, unlisted and unhashed: refused, re-record
LEGACY_FP32_SIDECAR = "reference-float32.safetensors"


class GoldenError(Exception):
    """A golden is missing, corrupt, or made from other weights/inputs. `kind` says which."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind  # missing | corrupt | mismatch | stale


@dataclass(frozen=True)
class Golden:
    items: list[np.ndarray]
    manifest: dict
    arrays_path: Path
    # per item {"prompt_token_ids": [...] | None}, as a runner's `<out>.requests.json`; None when
    # the golden predates token ids (check_matches refuses it) or the reference recorded none
    requests: list[dict] | None = None
    requests_path: Path | None = None
    # a half-precision golden's float32 reference, its sha256 checked by `read`
    fp32_path: Path | None = None


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


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


def case_dir(root: Path, case_id: str) -> Path:
    return Path(root) / case_id


def reference_key(case, model_dir: Path, dtype: str, device: str) -> dict:
    """Everything besides weights and inputs that shapes what the reference computes for a case.
    A golden records it; a golden whose key differs from the case's is refused."""
    from harness.runners.hf import RECIPE_VERSIONS, resolve_recipe

    try:
        arch = (
            json.loads((Path(model_dir) / "config.json").read_text()).get("architectures") or [""]
        )[0]
    except (OSError, json.JSONDecodeError):
        arch = ""
    name = resolve_recipe(case.task, arch, case.reference)
    return {
        "task": case.task,
        "dtype": dtype,
        "device": device,
        "hf_options": dict(sorted(case.hf.items())),
        "recipe": name,
        "recipe_version": RECIPE_VERSIONS.get(name),
        # absent for text: the reference runs token ids or inputs_embeds per item otherwise
        **({"prompt_form": case.prompt_form} if case.prompt_form != "text" else {}),
        # the request's own dump (truncate always, the rest only when set: older keys hold)
        **case.request.reference_key(),
    }


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
        digest = _sha256(Path(tmp))
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
    old = _read_manifest(d) if (d / MANIFEST).exists() else None
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


def _read_manifest(d: Path) -> dict:
    try:
        return json.loads((d / MANIFEST).read_text())
    except json.JSONDecodeError as e:
        raise GoldenError("corrupt", f"{d / MANIFEST}: not valid JSON ({e})") from None


def read(root: Path, case_id: str) -> Golden:
    d = case_dir(root, case_id)
    if not (d / MANIFEST).exists():
        raise GoldenError(
            "missing",
            f"no golden for case {case_id!r} in {root}; record it with "
            f"`parity golden record -k {case_id}`",
        )
    manifest = _read_manifest(d)
    arrays = d / str(manifest.get("arrays", ""))
    if not arrays.is_file():
        raise GoldenError(
            "corrupt", f"{d}: manifest names {manifest.get('arrays')!r}, which is missing"
        )
    if _sha256(arrays) != manifest.get("arrays_sha256"):
        raise GoldenError(
            "corrupt",
            f"{arrays}: contents do not match the manifest's sha256 (truncated or "
            f"edited); regenerate with `parity golden update -k {case_id}`",
        )
    try:
        items, _ = load_items(arrays)
    except Exception as e:  # noqa: BLE001 - any unreadable file is a corrupt golden
        raise GoldenError("corrupt", f"{arrays}: unreadable ({e})") from None
    fp32 = manifest.get(FP32_KEY)
    fp32_path = _listed(d, fp32, "float32 reference", case_id) if fp32 is not None else None
    named = manifest.get("token_ids")
    if not isinstance(named, dict):  # older than token ids: loadable, refused by check_matches
        return Golden(items, manifest, arrays, fp32_path=fp32_path)
    tokens = _listed(d, named, "token ids", case_id)
    try:
        requests = json.loads(tokens.read_text())
    except json.JSONDecodeError as e:
        raise GoldenError("corrupt", f"{tokens}: not valid JSON ({e})") from None
    if requests is not None and (not isinstance(requests, list) or len(requests) != len(items)):
        raise GoldenError("corrupt", f"{tokens}: expected a list of {len(items)} per-item entries")
    return Golden(items, manifest, arrays, requests, tokens, fp32_path)


def _listed(d: Path, entry, what: str, case_id: str) -> Path:
    """The file a manifest entry {"file", "sha256"} names, present and with that sha256."""
    if not isinstance(entry, dict):
        raise GoldenError("corrupt", f"{d / MANIFEST}: {what} entry {entry!r} is not an object")
    path = d / str(entry.get("file", ""))
    if not path.is_file():
        raise GoldenError(
            "corrupt", f"{d}: manifest names {what} {entry.get('file')!r}, which is missing"
        )
    if _sha256(path) != entry.get("sha256"):
        raise GoldenError(
            "corrupt",
            f"{path}: contents do not match the manifest's sha256 "
            f"(truncated or edited); regenerate with "
            f"`parity golden update -k {case_id}`",
        )
    return path


def fp32_reference(golden: Golden, case_id: str, fingerprint: str, inputs_sha256: str) -> Path:
    """A half-precision golden's float32 reference (the yardstick of its calibrated bounds), its
    sha256 checked by `read`, made from the case's weights and inputs; a GoldenError otherwise."""
    fix = f"record the golden in this dtype again (`parity golden update -k {case_id}`)"
    path = golden.fp32_path
    if path is None:
        legacy = golden.arrays_path.parent / LEGACY_FP32_SIDECAR
        if legacy.is_file():
            raise GoldenError(
                "stale",
                f"{legacy} was written before goldens listed their float32 reference with its "
                f"sha256 in the manifest, so it cannot be trusted; {fix}",
            )
        raise GoldenError(
            "missing",
            f"golden {case_id!r} has no float32 reference beside it "
            f"({golden.arrays_path.parent}); {fix}, PARITY_DTYPE=..., so its calibrated "
            f"bounds can be measured",
        )
    try:
        _, meta = load_items(path)
    except Exception as e:  # noqa: BLE001 - any unreadable file is a corrupt golden
        raise GoldenError("corrupt", f"{path}: unreadable ({e})") from None
    want = {"model_fingerprint": fingerprint, "inputs_sha256": inputs_sha256}
    stale = [k for k, v in want.items() if meta.get(k) != v]
    if stale:
        raise GoldenError(
            "mismatch",
            f"golden float32 reference {path} was made from other {' and '.join(stale)}; {fix}",
        )
    return path


def check_matches(
    golden: Golden, case_id: str, fingerprint: str, inputs_sha256: str, key: dict
) -> None:
    """Refuse a golden made from other weights, other inputs or another reference (task, dtype,
    device, truncation, options, recipe and its version), saying which and how to fix."""
    m = golden.manifest
    problems = []
    recorded = m.get("reference_key")
    if not isinstance(recorded, dict):
        problems.append(
            "it records no reference key (made before goldens recorded task, dtype, device, "
            "truncation, options and recipe)"
        )
    else:
        problems += [
            f"{k} {recorded.get(k)!r} != case's {key.get(k)!r}"
            for k in sorted(set(key) | set(recorded))
            if recorded.get(k) != key.get(k)
        ]
    if not isinstance(m.get("token_ids"), dict):
        raise GoldenError(
            "stale",
            f"golden for {case_id!r} was recorded before goldens stored "
            f"the reference's prompt token ids, so the token-id and usage "
            f"checks could not run against it; refused. Re-record it with "
            f"`parity golden update -k {case_id}`",
        )
    if m.get("model_fingerprint") != fingerprint:
        problems.append(
            f"model fingerprint {str(m.get('model_fingerprint'))[:12]} != case's {fingerprint[:12]}"
        )
    if (m.get("inputs") or {}).get("sha256") != inputs_sha256:
        recorded_inputs = str((m.get("inputs") or {}).get("sha256"))
        problems.append(f"input hash {recorded_inputs[:12]} != case's {inputs_sha256[:12]}")
    if problems:
        raise GoldenError(
            "mismatch",
            f"golden for {case_id!r} was made from other weights, inputs or reference ("
            + "; ".join(problems)
            + f"); refused. If the change is intended, run "
            f"`parity golden update -k {case_id}`",
        )


def read_matching(root: Path, case, model_path: Path, fingerprint: str, dtype: str, device: str):
    """`case`'s golden, refused (a GoldenError) unless made from its weights, inputs and
    reference (see check_matches)."""
    from harness.matrix.inputs import input_set

    g = read(root, case.id)
    key = reference_key(case, model_path, dtype, device)
    check_matches(g, case.id, fingerprint, input_set(case.inputs).sha256, key)
    return g


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
