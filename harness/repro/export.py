"""Export one (case, runner) row as a standalone reproduction folder:

    model/       the checkpoint the row ran (copied: safetensors, config, tokenizer, modules)
    inputs.json  the items both sides were given
    repro.py     reference and vLLM in plain code (harness.repro.script), both outputs, the diff
    README.md    the exact command, the versions that ran, what was recorded
    row.json     the row as the harness recorded it (or the case's recorded divergence)

A row comes from a run's report.json (`export_row`) or straight from a matrix case
(`export_case`: what tests use to hold every recorded vLLM divergence to a reproduction)."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.matrix.images import image, is_image
from harness.matrix.inputs import input_set
from harness.matrix.request import RequestOptions
from harness.matrix.runner_names import runner_info
from harness.matrix.schema import Case
from harness.models.resolve import resolve
from harness.report.model import Report, Result, read_json
from harness.repro.readme import readme
from harness.repro.script import ScriptSpec, render
from harness.repro.templates import REFERENCES, VLLM
from harness.run.matrices import load_matrix
from harness.runners.hf import resolve_recipe
from harness.runners.memory import kv_budget_of
from harness.runners.platform import Platform

# the row statuses worth a bug report; a passing row exports too (it shows the check agrees)
RED = ("fail", "error", "xfail", "xpass")


class ReproError(Exception):
    """A row that cannot be exported: what, where, and what would be right."""


@dataclass(frozen=True)
class Exported:
    folder: Path
    case_id: str
    runner: str
    recipe: str


def find_result(report: Report, case_id: str, runner: str | None, where: str) -> Result:
    """The report's row of `case_id` on `runner` (default: its one red vLLM row)."""
    rows = [r for r in report.results if r.case_id == case_id]
    if not rows:
        ids = sorted({r.case_id for r in report.results})
        raise ReproError(f"{where}: no row of case {case_id!r}; its cases: {', '.join(ids)}")
    if runner is not None:
        for r in rows:
            if r.runner == runner:
                return r
        names = ", ".join(r.runner for r in rows)
        raise ReproError(f"{where}: case {case_id!r} has no row on {runner!r}; runners: {names}")
    red = [r for r in rows if r.status in RED and runner_info(r.runner).is_vllm]
    if not red:
        names = ", ".join(f"{r.runner} ({r.status})" for r in rows)
        raise ReproError(
            f"{where}: case {case_id!r} has no red vLLM row; name one as {case_id}/RUNNER "
            f"(its rows: {names})"
        )
    # V1 first: the model runner a CPU build runs without Triton, so the script runs anywhere
    order = {"v1": 0, "v2": 1, "auto": 2}
    return min(red, key=lambda r: order.get(str(runner_info(r.runner).variant), 3))


def export_row(report_dir: Path, row: str, out: Path, matrix: str | None = None) -> Exported:
    """The row `CASE_ID` or `CASE_ID/RUNNER` of the run in `report_dir`, exported to `out`."""
    path = report_dir / "report.json" if report_dir.is_dir() else report_dir
    if not path.is_file():
        raise ReproError(f"{report_dir}: no report.json (give a run folder or its report.json)")
    report = read_json(path)
    case_id, _, runner = row.partition("/")
    result = find_result(report, case_id, runner or None, str(path))
    if result.status == "skip":
        raise ReproError(f"{path}: {case_id} on {result.runner} was skipped: nothing to reproduce")
    matrix_path = matrix or (result.where.rpartition(":")[0] if result.where else report.matrix)
    if not Path(matrix_path).is_file():
        raise ReproError(
            f"{path}: the matrix of {case_id} ({matrix_path}) is not there; give it with --matrix"
        )
    case = next((c for c in load_matrix(matrix_path).cases if c.id == case_id), None)
    if case is None:
        raise ReproError(f"{matrix_path}: no case {case_id!r} (the run's matrix changed?)")
    model_dir = Path(str(result.model.get("path") or ""))
    reference = next((x for x in report.references if x.case_id == case_id), None)
    return export_case(
        case,
        result.runner,
        out,
        matrix_path,
        result=result,
        model_dir=model_dir if model_dir.is_dir() else None,
        device=result.device or "cpu",
        reference_versions=dict(reference.info.get("versions") or {}) if reference else {},
    )


def export_case(
    case: Case,
    runner: str,
    out: Path,
    matrix_path: str,
    result: Result | None = None,
    model_dir: Path | None = None,
    device: str = "cpu",
    reference_versions: dict[str, str] | None = None,
) -> Exported:
    """`case` on `runner` as a folder in `out` (refused when `out` holds anything);
    `reference_versions`: the libraries the recorded reference ran with, for the README."""
    info = runner_info(runner)
    if not info.is_vllm or info.is_server:
        raise ReproError(
            f"{case.where}: {case.id} on {runner}: only offline vLLM rows (vllm-v1, vllm-v2, "
            "vllm-auto) export as a script"
        )
    if out.exists() and any(out.iterdir()):
        raise ReproError(f"{out}: not empty; give a new folder to --out")
    dtype = (result.dtype if result and result.dtype else None) or case.dtype or "float32"
    if model_dir is None:
        model_dir = resolve(case.model, Path(matrix_path).parent).path
    arch = (json.loads((model_dir / "config.json").read_text()).get("architectures") or [""])[0]
    recipe = resolve_recipe(case.task, arch, case.reference) or ""
    if recipe == "colbert-token-embed" and not (model_dir / "1_Dense").is_dir():
        raise ReproError(
            f"{case.where}: {case.id}: no script template for a ColBERT without 1_Dense (its "
            "reference is a module of the harness, harness/models/refmodels.py)"
        )
    spec = _spec(case, runner, str(info.variant), recipe, dtype, device, model_dir, result)
    out.mkdir(parents=True, exist_ok=True)
    shutil.copytree(model_dir, out / "model", symlinks=False)
    items = [_item(it, out) for it in input_set(case.inputs).items]
    (out / "inputs.json").write_text(json.dumps({"name": case.inputs, "items": items}, indent=1))
    (out / "repro.py").write_text(render(spec))
    (out / "row.json").write_text(json.dumps(_row(case, runner, result), indent=1))
    (out / "README.md").write_text(
        readme(spec, case, runner, recipe, matrix_path, result, reference_versions or {})
    )
    return Exported(out, case.id, runner, recipe)


def _item(item: Any, out: Path) -> Any:
    """An input as JSON: a pair as a list, an image reference as a PNG file in out/inputs/."""
    if isinstance(item, tuple):
        return [_item(x, out) for x in item]
    if is_image(item):
        name = "inputs/" + str(item["image"]).replace("/", "-") + ".png"
        (out / "inputs").mkdir(exist_ok=True)
        if not (out / name).exists():
            image(item["image"]).save(out / name, format="PNG")  # lossless
        return {**item, "image": name}
    return item


# the request options a script is given as values (harness.matrix.request: every field but the
# server runners' own and the nested ones, which go as their JSON below)
REQUEST_FIELDS = tuple(
    name for name in RequestOptions.model_fields if name not in ("serve", "chat", "colbert")
)


def _options(case: Case) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(request options both sides take, reference-only options, vLLM-only options)."""
    # a case's request options: under its `request:` where the schema has one, else on the case
    request = getattr(case, "request", None) or case
    common: dict[str, Any] = {}
    for name in REQUEST_FIELDS:
        if getattr(request, name, None) is not None:
            common[name] = getattr(request, name)
    for name in ("chat", "colbert"):
        if getattr(request, name, None) is not None:
            common[name] = getattr(request, name).model_dump()
    if case.lora is not None:
        common["lora"] = case.lora.model_dump()
    if case.prompt_form != "text":
        common["prompt_form"] = case.prompt_form
    if case.expect is not None:
        common["expect"] = case.expect.model_dump()
    return common, dict(case.hf), dict(case.run_options)


def _spec(
    case: Case,
    runner: str,
    variant: str,
    recipe: str,
    dtype: str,
    device: str,
    model_dir: Path,
    result: Result | None,
) -> ScriptSpec:
    ref = REFERENCES.get(recipe)
    vllm = VLLM.get(case.task)
    if ref is None:
        raise ReproError(
            f"{case.where}: {case.id}: no script template for reference recipe {recipe!r} "
            f"(templates: {', '.join(sorted(REFERENCES))}; harness/repro/templates.py)"
        )
    if vllm is None:
        raise ReproError(f"{case.where}: {case.id}: no vLLM script template for task {case.task!r}")
    common, hf_only, vllm_only = _options(case)
    missing = sorted(
        {k for k in common if k not in ref.options or k not in vllm.options}
        | {k for k in hf_only if k not in ref.options}
        | {k for k in vllm_only if k not in vllm.options}
    )
    if missing:
        raise ReproError(
            f"{case.where}: {case.id}: the script templates do not implement {missing} "
            f"(recipe {recipe!r}, task {case.task!r}); a script without them would not be the row"
        )
    recorded_engine = (result.info.get("engine_kwargs") if result else None) or None
    engine = recorded_engine or {
        **Platform(device).engine_defaults(kv_budget_of(str(model_dir), dtype, case.engine).bytes),
        "seed": 0,
        **case.engine,
    }
    tolerance = case.tolerances.get(dtype)
    return ScriptSpec(
        title=f"{case.id} on {runner} ({case.task}, {dtype}, {device})",
        reason=case.divergence.reason if case.divergence else (result.reason if result else ""),
        variant=variant,
        device=device,
        dtype=dtype,
        trust_remote_code=case.trust_remote_code,
        options={**common, **hf_only, **vllm_only},
        engine=engine,
        tolerance=tolerance.bounds() if tolerance else {},
        recorded=_recorded(case, result),
        reference=ref,
        vllm=vllm,
    )


def _recorded(case: Case, result: Result | None) -> dict[str, Any]:
    if result is not None:
        got: dict[str, Any] = {"status": result.status}
        got.update({m.name: m.value for m in result.metrics if m.value is not None})
        if result.status in ("error", "xfail") and not result.metrics:
            got["reason"] = result.reason
        return got
    div = case.divergence
    if div is None:
        return {}
    if div.error_match:
        return {"error_match": div.error_match}
    return {"envelope": div.bounds.bounds() if div.bounds else {}}


def _row(case: Case, runner: str, result: Result | None) -> dict[str, Any]:
    if result is not None:
        return result.model_dump(mode="json")
    return {
        "case_id": case.id,
        "runner": runner,
        "where": case.where,
        "divergence": case.divergence.model_dump(mode="json") if case.divergence else None,
    }
