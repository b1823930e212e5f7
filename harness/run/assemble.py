"""Report assembly: outcomes on disk judged (the one comparison of every path: a live reference,
`--against golden`, `golden verify`, the pytest plugin; harness.judge.verdict decides) and
assembled into a Report with the provenance every report carries (versions, git commit, matrix
hash)."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
from pathlib import Path

from harness import __version__
from harness.engine.description import ENGINE
from harness.judge import compare
from harness.judge.verdict import Measurement, Metric, Verdict, outcome_verdict
from harness.matrix.inputs import input_set
from harness.matrix.prompt_forms import item_forms
from harness.matrix.runner_names import REFERENCE_RUNNER, runner_info
from harness.matrix.schema import Case, Matrix
from harness.matrix.tasks import task_kind
from harness.report.model import AuditRow, MetricOut, ReferenceResult, Report, Result
from harness.run.execute import RunOutcome
from harness.run.plan import REFERENCE_FP32, ModelProblem, Plan
from harness.run.sides import Sides

Outcomes = dict[tuple[str, str], RunOutcome]


def _git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            cwd=Path(__file__).parent,
            timeout=10,
        )
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def new_report(
    matrix: Matrix, device: str, started: str, wall: float, partial: str = "", **fields
) -> Report:
    """A report with the provenance every report carries (versions, git commit, matrix hash)."""
    return Report(
        harness_version=__version__,
        git_commit=_git_commit(),
        command=list(sys.argv),
        matrix=matrix.path,
        matrix_sha256=matrix.sha256,
        device=device,
        started=started,
        finished=utc_now(),
        wall_seconds=wall,
        partial=bool(partial),
        partial_reason=partial,
        **fields,
    )


def measure_outcomes(
    case: Case,
    tolerance,
    ref: RunOutcome,
    got: RunOutcome,
    ref32: RunOutcome | None = None,
    sides: Sides | None = None,
) -> Measurement:
    """Each side's outputs and what was recorded beside them per item (prompt token ids, a
    server's answers), read once from its outcome (harness.run.sides); a golden's token ids stand
    where a live reference's `<out>.requests.json` would. harness.judge.compare.measure runs every
    check whose inputs exist and says in its notes which could not run and why."""
    side = sides or Sides()
    items = input_set(case.inputs).items
    return compare.measure(
        tolerance,
        task_kind(case.task).metrics,
        side(ref),
        side(got),
        items,
        side(ref32) if ref32 is not None else None,
        forms=item_forms(case.prompt_form, len(items)) if case.prompt_form != "text" else None,
    )


def verdict_for(
    case: Case,
    runner: str,
    dtype: str,
    ref: RunOutcome | None,
    got: RunOutcome | None,
    ref32: RunOutcome | None = None,
    calibrated: bool = False,
    sides: Sides | None = None,
) -> Verdict:
    """The verdict of a case on one runner, comparing the outputs on disk. `calibrated` (the
    plan's decision, Plan.calibrated): half-precision bounds measured against `ref32`, the
    reference run in float32."""
    side = sides or Sides()

    def measure() -> Measurement:
        tolerance = case.tolerance(dtype)
        return measure_outcomes(
            case,
            tolerance,
            ref,
            got,
            ref32 if calibrated else None,
            side,  # type: ignore[arg-type]
        )

    def refusals() -> list[str | None] | None:
        return side(got).refusals()  # type: ignore[arg-type]

    return outcome_verdict(
        case,
        runner,
        ref,
        got,
        measure,
        ref32=ref32,
        calibrated=calibrated,
        refusals=refusals,
        dtype=dtype,
    )


def metric_out(m: Metric) -> MetricOut:
    return MetricOut(
        name=m.name, value=m.value, bound=m.bound, ok=m.ok, ref_error=m.ref_error, ratio=m.ratio
    )


def model_info(case: Case, model) -> dict:
    """What the report says of a case's model: where it came from, or why there is none."""
    info = (
        {
            "description": model.description,
            "fingerprint": model.fingerprint,
            "path": str(model.path),
        }
        if not isinstance(model, ModelProblem)
        else {"problem": model.reason}
    )
    info["hub_id"] = case.hub_id
    info["trust_remote_code"] = case.trust_remote_code  # opted into per case, shown
    return info


def reference_result(case: Case, ref: RunOutcome | None) -> ReferenceResult:
    return ReferenceResult(
        case_id=case.id,
        status=ref.status if ref else "error",
        reason=(ref.reason if ref else "not run"),
        info=ref.info if ref else {},
        run_seconds=ref.run_seconds if ref else None,
        output=ref.output if ref else None,
    )


def audit_row(case: Case, runner: str, got: RunOutcome | None) -> AuditRow | None:
    """The default-runner audit of an `auto` runner's case: what the engine chose and why."""
    info = runner_info(runner)
    audited = info.is_offline_vllm and info.variant == ENGINE.default_variant
    if not audited or got is None or got.status != "ok":
        return None
    expected, _ = ENGINE.expected_choice(case, got.info)
    return AuditRow(
        family=case.family,
        case_id=case.id,
        expected=expected,
        actual=ENGINE.chosen_runner(got.info),
        why=ENGINE.why_chosen(got.info, ""),
    )


def runner_result(
    plan: Plan, case: Case, runner: str, v: Verdict, outcomes: tuple, model: dict
) -> Result:
    """A case's row on one runner; `outcomes` are its (reference, runner, float32 reference)."""
    ref, got, ref32 = outcomes
    actual = ENGINE.chosen_runner(got.info) if got else None
    inputs = input_set(case.inputs)
    return Result(
        case_id=case.id,
        family=case.family,
        task=case.task,
        runner=runner,
        runner_label=plan.platform.runner_label(runner, actual),
        status=v.status,
        reason=v.reason,
        metrics=[metric_out(m) for m in v.metrics],
        envelope=v.envelope,
        checks=v.notes,
        where=case.where,
        model=model,
        inputs={"name": inputs.name, "sha256": inputs.sha256, "count": len(inputs.items)},
        dtype=plan.dtypes[case.id],
        device=plan.platform.device,
        actual_runner=actual,
        info=got.info if got else {},
        load_seconds=got.load_seconds if got else None,
        run_seconds=got.run_seconds if got else None,
        output=got.output if got else None,
        timed_out=v.status == "error"
        and any(o is not None and o.timed_out for o in (ref, got, ref32)),
    )


def build_report(
    matrix: Matrix,
    plan: Plan,
    outcomes: Outcomes,
    started: str,
    wall: float,
    partial_reason: str = "",
) -> Report:
    """Every case's verdict on each of its runners, its reference's row and the default-runner
    audit; each side's files are read once (harness.run.sides)."""
    results: list[Result] = []
    references: list[ReferenceResult] = []
    audit: list[AuditRow] = []
    sides = Sides()
    for case in plan.cases:
        model = model_info(case, plan.models[case.id])
        ref = outcomes.get((case.variant_of or case.id, REFERENCE_RUNNER))
        ref32 = outcomes.get((case.variant_of or case.id, REFERENCE_FP32))
        runners = plan.runners_of(case)
        if case.variant_of is None and (ref is not None or REFERENCE_RUNNER in runners):
            references.append(reference_result(case, ref))
        for runner in runners:
            if runner == REFERENCE_RUNNER:
                continue
            got = outcomes.get((case.id, runner))
            dtype, calibrated = plan.dtypes[case.id], plan.calibrated.get(case.id, False)
            v = verdict_for(case, runner, dtype, ref, got, ref32, calibrated, sides)
            row = audit_row(case, runner, got)
            if row is not None:
                audit.append(row)
            results.append(runner_result(plan, case, runner, v, (ref, got, ref32), model))
    return new_report(
        matrix,
        plan.platform.device,
        started,
        wall,
        partial_reason,
        results=results,
        references=references,
        audit=audit,
    )
