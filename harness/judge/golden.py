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

harness.judge.golden_write writes a golden, harness.judge.golden_read reads and checks it,
harness.judge.golden_files holds what both share; every name is importable from here.
"""

from __future__ import annotations

from harness.judge.golden_files import (
    FP32_KEY,
    LEGACY_FP32_SIDECAR,
    MANIFEST,
    SCHEMA_VERSION,
    Golden,
    GoldenError,
    case_dir,
    file_sha256,
    read_manifest,
    reference_key,
)
from harness.judge.golden_read import (
    check_matches,
    fp32_reference,
    read,
    read_matching,
)
from harness.judge.golden_write import record, summary, write, write_obtained

# every name other code imports from here, wherever it is defined
__all__ = [
    "FP32_KEY",
    "LEGACY_FP32_SIDECAR",
    "MANIFEST",
    "SCHEMA_VERSION",
    "Golden",
    "GoldenError",
    "case_dir",
    "check_matches",
    "file_sha256",
    "fp32_reference",
    "read",
    "read_manifest",
    "read_matching",
    "record",
    "reference_key",
    "summary",
    "write",
    "write_obtained",
]
