"""The one comparison of every path (a live reference, `--against golden`, `golden verify`, the
pytest plugin) on outcomes on disk, and the verdict it leads to (harness.judge.verdict decides)."""

from __future__ import annotations

from harness.judge import compare
from harness.judge.verdict import Measurement, Verdict, outcome_verdict
from harness.matrix.inputs import input_set
from harness.matrix.prompt_forms import item_forms
from harness.matrix.schema import Case
from harness.matrix.tasks import task_kind
from harness.run.execute import RunOutcome
from harness.run.sides import Sides


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
        case, runner, ref, got, measure, ref32=ref32, calibrated=calibrated, refusals=refusals
    )
