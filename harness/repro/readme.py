"""README.md of an exported row: what the row is, the exact command, the versions that ran."""

from __future__ import annotations

from harness.matrix.schema import Case
from harness.report.model import Result
from harness.repro.script import ScriptSpec


def _versions(result: Result | None, reference: dict[str, str]) -> str:
    info = result.info if result else {}
    found = {**reference, **(info.get("versions") or {})}
    dist = (info.get("vllm") or {}).get("distribution")
    if dist:
        found["vllm"] = f"{found.get('vllm', '')} ({dist})".strip()
    if not found:
        return "not recorded here: repro.py prints the versions it runs with, first line"
    return ", ".join(f"{k} {v}" for k, v in sorted(found.items()))


def readme(
    spec: ScriptSpec,
    case: Case,
    runner: str,
    recipe: str,
    matrix_path: str,
    result: Result | None,
    reference_versions: dict[str, str],
) -> str:
    """The folder's README: enough for a vLLM issue (command, versions, expected vs got)."""
    status = result.status if result else "recorded divergence"
    recorded = ", ".join(f"{k} {v}" for k, v in spec.recorded.items()) or "(nothing)"
    bounds = ", ".join(f"{k} {v:g}" for k, v in spec.tolerance.items()) or "(none)"
    hub = f" It stands for `{case.hub_id}`." if case.hub_id else ""
    return f"""# Reproduction: `{case.id}` on `{runner}`

{spec.reason or "(no reason recorded)"}

- Row: case `{case.id}` ({case.family}, task `{case.task}`) of `{matrix_path}`, runner `{runner}`
  (vLLM model runner {spec.variant}), {spec.dtype} on {spec.device}; status **{status}**.
- Checkpoint: `model/`, {case.model.model_dump(exclude_none=True)}.{hub}
- Inputs: `inputs.json`, input set `{case.inputs}`.
- Reference: the harness's recipe `{recipe}`, written out in `repro.py` as plain
  {spec.reference.needs} code; vLLM: `LLM(..., runner="pooling")` with the engine arguments in
  `repro.py` (`ENGINE`).
- Recorded by parity-harness: {recorded}.
- Tolerance ({spec.dtype}): {bounds}.
- Versions of the recorded run: {_versions(result, reference_versions)}.

## Run

```
python repro.py
```

Needs only {spec.reference.needs} and vLLM (no parity-harness). It prints the versions it runs
with, both outputs and the largest absolute difference (`max_abs_diff: X`), or vLLM's own error
(`vllm raised: ...`); exit 0 when the difference is within the tolerance, 1 otherwise.
"""
