"""Golden files: the committed memory of what the reference (HF) said, so CI can check a runner
without running HF.

One folder per case: `golden/<case>/manifest.json` (readable: model fingerprint, input hash,
task, dtype, device, library versions, date, per-item summary statistics) and the arrays it
names, `reference-<sha12>.safetensors`. An update writes the new arrays under a new name, then
replaces the manifest atomically, then removes the old arrays: a write killed at any point
leaves either the old golden or the new one, never a mix. The manifest records the arrays'
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
from harness.outputs import load_items, save_items

MANIFEST = "manifest.json"
SCHEMA_VERSION = 1


class GoldenError(Exception):
    """A golden is missing, corrupt, or made from other weights/inputs. `kind` says which."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind  # missing | corrupt | mismatch


@dataclass(frozen=True)
class Golden:
    items: list[np.ndarray]
    manifest: dict
    arrays_path: Path


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
        out.append({"shape": list(a.shape), "mean": float(a64.mean()), "std": float(a64.std()),
                    "min": float(a64.min()), "max": float(a64.max())})
    return out


def case_dir(root: Path, case_id: str) -> Path:
    return Path(root) / case_id


def reference_key(case, model_dir: Path, dtype: str, device: str) -> dict:
    """Everything besides weights and inputs that shapes what the reference computes for a case.
    A golden records it; a golden whose key differs from the case's is refused."""
    from harness.runners.hf import RECIPE_VERSIONS, resolve_recipe

    try:
        arch = (json.loads((Path(model_dir) / "config.json").read_text()).get("architectures") or [""])[0]
    except (OSError, json.JSONDecodeError):
        arch = ""
    name = resolve_recipe(case.task, arch, case.reference)
    return {"task": case.task, "dtype": dtype, "device": device, "truncate": case.truncate,
            "hf_options": dict(sorted(case.hf.items())), "recipe": name, "recipe_version": RECIPE_VERSIONS.get(name),
            # absent when unset: older keys stay valid; "truncate_dim": the cut follows
            # sentence-transformers' truncate_dim (no re-normalisation unless hf options ask)
            **({"dimensions": case.dimensions, "truncate_dim": "sentence-transformers"}
               if case.dimensions else {})}


def write(root: Path, case_id: str, items: list[np.ndarray], *, task: str, fingerprint: str,
          inputs: dict, dtype: str, device: str, versions: dict, model: str, key: dict) -> Path:
    d = case_dir(root, case_id)
    d.mkdir(parents=True, exist_ok=True)
    old = _read_manifest(d) if (d / MANIFEST).exists() else None
    fd, tmp = tempfile.mkstemp(prefix="reference.", suffix=".tmp", dir=d)
    os.close(fd)
    save_items(Path(tmp), items, {"case": case_id})
    digest = _sha256(Path(tmp))
    arrays = d / f"reference-{digest[:12]}.safetensors"
    os.replace(tmp, arrays)
    manifest = {
        "schema_version": SCHEMA_VERSION, "case_id": case_id, "task": task,
        "model": model, "model_fingerprint": fingerprint,
        "inputs": inputs, "dtype": dtype, "device": device, "versions": versions, "reference_key": key,
        "harness_version": __version__,
        "recorded": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "arrays": arrays.name, "arrays_sha256": digest, "items": summary(items),
    }
    fd, tmp = tempfile.mkstemp(prefix="manifest.", suffix=".tmp", dir=d)
    with os.fdopen(fd, "w") as f:
        json.dump(manifest, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(tmp, d / MANIFEST)
    if old and old.get("arrays") and old["arrays"] != arrays.name:
        (d / old["arrays"]).unlink(missing_ok=True)
    return d


def _read_manifest(d: Path) -> dict:
    try:
        return json.loads((d / MANIFEST).read_text())
    except json.JSONDecodeError as e:
        raise GoldenError("corrupt", f"{d / MANIFEST}: not valid JSON ({e})") from None


def read(root: Path, case_id: str) -> Golden:
    d = case_dir(root, case_id)
    if not (d / MANIFEST).exists():
        raise GoldenError("missing", f"no golden for case {case_id!r} in {root}; record it with "
                                     f"`parity golden record -k {case_id}`")
    manifest = _read_manifest(d)
    arrays = d / str(manifest.get("arrays", ""))
    if not arrays.is_file():
        raise GoldenError("corrupt", f"{d}: manifest names {manifest.get('arrays')!r}, which is missing")
    if _sha256(arrays) != manifest.get("arrays_sha256"):
        raise GoldenError("corrupt", f"{arrays}: contents do not match the manifest's sha256 (truncated or "
                                     f"edited); regenerate with `parity golden update -k {case_id}`")
    try:
        items, _ = load_items(arrays)
    except Exception as e:  # noqa: BLE001 - any unreadable file is a corrupt golden
        raise GoldenError("corrupt", f"{arrays}: unreadable ({e})") from None
    return Golden(items, manifest, arrays)


def check_matches(golden: Golden, case_id: str, fingerprint: str, inputs_sha256: str, key: dict) -> None:
    """Refuse a golden made from other weights, other inputs or another reference (task, dtype,
    device, truncation, options, recipe and its version), saying which and how to fix."""
    m = golden.manifest
    problems = []
    recorded = m.get("reference_key")
    if not isinstance(recorded, dict):
        problems.append("it records no reference key (made before goldens recorded task, dtype, device, "
                        "truncation, options and recipe)")
    else:
        problems += [f"{k} {recorded.get(k)!r} != case's {key.get(k)!r}" for k in sorted(set(key) | set(recorded))
                     if recorded.get(k) != key.get(k)]
    if m.get("model_fingerprint") != fingerprint:
        problems.append(f"model fingerprint {str(m.get('model_fingerprint'))[:12]} != case's {fingerprint[:12]}")
    if (m.get("inputs") or {}).get("sha256") != inputs_sha256:
        problems.append(f"input hash {str((m.get('inputs') or {}).get('sha256'))[:12]} != case's {inputs_sha256[:12]}")
    if problems:
        raise GoldenError("mismatch", f"golden for {case_id!r} was made from other weights, inputs or reference ("
                                      + "; ".join(problems) + f"); refused. If the change is intended, run "
                                      f"`parity golden update -k {case_id}`")


def write_obtained(root: Path, case_id: str, items: list[np.ndarray]) -> Path:
    """On a mismatch, keep what was obtained beside the golden for inspection (not committed)."""
    path = case_dir(root, case_id) / "reference.obtained"
    save_items(path, items, {"case": case_id, "obtained": True})
    return path
