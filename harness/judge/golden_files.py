"""What a golden is on disk, shared by its writer (harness.judge.golden_write) and its reader
(harness.judge.golden_read): the manifest's name and schema, the files it lists, the errors, and
the reference key a golden records (harness.judge.golden describes the layout)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

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


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


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


def read_manifest(d: Path) -> dict:
    try:
        return json.loads((d / MANIFEST).read_text())
    except json.JSONDecodeError as e:
        raise GoldenError("corrupt", f"{d / MANIFEST}: not valid JSON ({e})") from None
