"""Golden files: the committed memory of what the reference (HF) said, so CI can check a runner
without running HF.

One folder per case: `golden/<case>/manifest.json` (readable: model fingerprint, input hash,
task, dtype, device, library versions, date, per-item summary statistics) and the arrays it
names, `reference-<sha12>.safetensors`, and the reference's prompt token ids per item,
`tokens-<sha12>.json` (one item a line; null for an item the recipe does not tokenize as one
sequence), so the golden path runs the token-id and usage checks as the live path does. An
update writes the new arrays under a new name, then replaces the manifest atomically, then
removes the old arrays and token ids: a write killed at any point leaves either the old golden or the new one, never a mix. The manifest records the arrays'
sha256, so a truncated or edited arrays file is detected, not compared.
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
SCHEMA_VERSION = 2  # 2: the manifest names the reference's token ids (`token_ids`)


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
        "truncate": case.truncate,
        "hf_options": dict(sorted(case.hf.items())),
        "recipe": name,
        "recipe_version": RECIPE_VERSIONS.get(name),
        # absent when unset: older keys stay valid; "truncate_dim": the cut follows
        # sentence-transformers' truncate_dim (no re-normalisation unless hf options ask)
        **(
            {"dimensions": case.dimensions, "truncate_dim": "sentence-transformers"}
            if case.dimensions
            else {}
        ),
    }


def _tokens_text(token_ids: list | None) -> str:
    """The token ids as `<out>.requests.json` holds them, one item a line (reviewable in a diff)."""
    if token_ids is None:
        return "null\n"
    lines = [json.dumps({"prompt_token_ids": ids}) for ids in token_ids]
    return "[\n" + ",\n".join(lines) + "\n]\n"


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
) -> Path:
    """`token_ids`: the reference's prompt token ids per item (None for an item it did not tokenize
    as one sequence), or None when the reference recorded none at all."""
    if token_ids is not None and len(token_ids) != len(items):
        raise ValueError(
            f"golden {case_id!r}: {len(token_ids)} token-id entries for {len(items)} items"
        )
    d = case_dir(root, case_id)
    d.mkdir(parents=True, exist_ok=True)
    old = _read_manifest(d) if (d / MANIFEST).exists() else None
    fd, tmp = tempfile.mkstemp(prefix="tokens.", suffix=".tmp", dir=d)
    with os.fdopen(fd, "w") as f:
        f.write(_tokens_text(token_ids))
    tokens_digest = _sha256(Path(tmp))
    tokens = d / f"tokens-{tokens_digest[:12]}.json"
    os.replace(tmp, tokens)
    fd, tmp = tempfile.mkstemp(prefix="reference.", suffix=".tmp", dir=d)
    os.close(fd)
    save_items(Path(tmp), items, {"case": case_id})
    digest = _sha256(Path(tmp))
    arrays = d / f"reference-{digest[:12]}.safetensors"
    os.replace(tmp, arrays)
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
    }
    fd, tmp = tempfile.mkstemp(prefix="manifest.", suffix=".tmp", dir=d)
    with os.fdopen(fd, "w") as f:
        json.dump(manifest, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(tmp, d / MANIFEST)
    if old and old.get("arrays") and old["arrays"] != arrays.name:
        (d / old["arrays"]).unlink(missing_ok=True)
    old_tokens = ((old or {}).get("token_ids") or {}).get("file")
    if old_tokens and old_tokens != tokens.name:
        (d / old_tokens).unlink(missing_ok=True)
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
    named = manifest.get("token_ids")
    if not isinstance(named, dict):  # older than token ids: loadable, refused by check_matches
        return Golden(items, manifest, arrays)
    tokens = d / str(named.get("file", ""))
    if not tokens.is_file():
        raise GoldenError(
            "corrupt", f"{d}: manifest names token ids {named.get('file')!r}, which is missing"
        )
    if _sha256(tokens) != named.get("sha256"):
        raise GoldenError(
            "corrupt",
            f"{tokens}: contents do not match the manifest's sha256 "
            f"(truncated or edited); regenerate with "
            f"`parity golden update -k {case_id}`",
        )
    try:
        requests = json.loads(tokens.read_text())
    except json.JSONDecodeError as e:
        raise GoldenError("corrupt", f"{tokens}: not valid JSON ({e})") from None
    if requests is not None and (not isinstance(requests, list) or len(requests) != len(items)):
        raise GoldenError("corrupt", f"{tokens}: expected a list of {len(items)} per-item entries")
    return Golden(items, manifest, arrays, requests, tokens)


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
        problems.append(
            f"input hash {str((m.get('inputs') or {}).get('sha256'))[:12]} != case's {inputs_sha256[:12]}"
        )
    if problems:
        raise GoldenError(
            "mismatch",
            f"golden for {case_id!r} was made from other weights, inputs or reference ("
            + "; ".join(problems)
            + f"); refused. If the change is intended, run "
            f"`parity golden update -k {case_id}`",
        )


def write_obtained(root: Path, case_id: str, items: list[np.ndarray]) -> Path:
    """On a mismatch, keep what was obtained beside the golden for inspection (not committed)."""
    path = case_dir(root, case_id) / "reference.obtained"
    save_items(path, items, {"case": case_id, "obtained": True})
    return path
