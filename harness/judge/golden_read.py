"""Reading a golden: every file the manifest lists, present and with its sha256, and refused
unless made from the case's weights, inputs and reference (harness.judge.golden)."""

from __future__ import annotations

import json
from pathlib import Path

from harness.judge.golden_files import (
    FP32_KEY,
    LEGACY_FP32_SIDECAR,
    MANIFEST,
    Golden,
    GoldenError,
    case_dir,
    file_sha256,
    read_manifest,
    reference_key,
)
from harness.runners.outputs import load_items


def read(root: Path, case_id: str) -> Golden:
    d = case_dir(root, case_id)
    if not (d / MANIFEST).exists():
        raise GoldenError(
            "missing",
            f"no golden for case {case_id!r} in {root}; record it with "
            f"`parity golden record -k {case_id}`",
        )
    manifest = read_manifest(d)
    arrays = d / str(manifest.get("arrays", ""))
    if not arrays.is_file():
        raise GoldenError(
            "corrupt", f"{d}: manifest names {manifest.get('arrays')!r}, which is missing"
        )
    if file_sha256(arrays) != manifest.get("arrays_sha256"):
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
    if file_sha256(path) != entry.get("sha256"):
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
