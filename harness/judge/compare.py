"""Metrics per task. Every metric is "lower is better" and gates as value <= bound; what a
measurement means (pass, fail, xfail, ...) is decided by harness.judge.verdict alone. What makes
outputs unusable is harness.judge.output_problems', what each side recorded beside them
harness.judge.recorded's; their names are importable from here too."""

from __future__ import annotations

import numpy as np

from harness.judge.metrics import METRICS, MTEB_BOUNDS, NOISE_FLOORED
from harness.judge.output_problems import (
    degenerate_reference,
    reference_problem,
    structural_problem,
)
from harness.judge.recorded import (
    ABSENT,
    differing_positions,
    form_problem,
    recorded_checks,
    token_problem,
)
from harness.judge.side import Side
from harness.judge.verdict import Measurement, Metric, Verdict, judge
from harness.matrix.evidence import RequestRecord
from harness.matrix.schema import Case, Tolerance

# every name other code imports from here, wherever it is defined
__all__ = [
    "ABSENT",
    "calibrated_metrics",
    "checks_yardstick",
    "compare",
    "degenerate_reference",
    "differing_positions",
    "form_problem",
    "measure",
    "recorded_checks",
    "reference_problem",
    "structural_problem",
    "token_problem",
]


def calibrated_metrics(
    tolerance: Tolerance,
    names: list[str],
    ref: list[np.ndarray],
    ref32: list[np.ndarray],
    got: list[np.ndarray],
    items: tuple,
) -> list[Metric]:
    """Half precision: each metric of the runner against HF in float32 (`ref32`), bounded by
    k x the same metric of HF in this dtype (`ref`) against HF in float32 + the floor."""
    assert tolerance.k is not None
    floors = tolerance.bounds()
    out = []
    for m in names:
        if m in NOISE_FLOORED:  # over the values above HF's own absolute error in this dtype
            metric, noise = NOISE_FLOORED[m]
            at = noise(ref32, ref)
            own, value = metric(ref32, ref, at), metric(ref32, got, at)
        else:
            own = METRICS[m](ref32, ref, items, tolerance)
            value = METRICS[m](ref32, got, items, tolerance)
        floor = floors.get(m)
        bound = None if floor is None else tolerance.k * own + floor
        out.append(Metric(m, value, bound, ref_error=own))
    return out


def checks_yardstick(
    tolerance: Tolerance, ref: list[np.ndarray], ref32: list[np.ndarray] | None, items: tuple
) -> tuple[Tolerance, list[np.ndarray]]:
    """The tolerance and reference of the checks beside the metrics (a server's /rerank scores,
    order and ties). With calibrated half-precision bounds (`k`), those of the metrics: HF in
    float32, and max_abs / max_rel at k x HF's own error + the floor, so a check is never held
    to the bare floor on the numbers the metric holds to the calibrated bound; else the case's."""
    if tolerance.k is None or ref32 is None:
        return tolerance, ref
    floors = tolerance.bounds()
    bounds = {
        name: tolerance.k * METRICS[name](ref32, ref, items, tolerance) + floors[name]
        for name in ("max_abs", "max_rel")
        if name in floors
    }
    return Tolerance(**bounds), ref32


def measure(
    tolerance: Tolerance,
    metric_names: tuple[str, ...],
    ref_side: Side,
    got_side: Side,
    items: tuple,
    ref32_side: Side | None = None,
    forms: list[str] | None = None,
) -> Measurement:
    """The one comparison every path makes (live, golden, pytest: harness.run.assemble
    .measure_outcomes), given whatever evidence each side has. An unusable reference first (an
    error), structural problems next (they make metrics meaningless), then what each side recorded
    beside its outputs (recorded_checks: token ids, a server's usage and /rerank answers), then a
    degenerate reference, then every metric of the task plus any other the tolerance bounds. A
    tolerance with `k` (half precision) is calibrated against `ref32_side`, HF in float32."""
    if ref_side.outputs is None or got_side.outputs is None:
        who = "the reference" if ref_side.outputs is None else "the runner"
        raise ValueError(f"{who} recorded no outputs to compare")
    ref, got = ref_side.outputs, got_side.outputs
    ref32 = ref32_side.outputs if ref32_side is not None else None
    ref_ids, got_ids, got_meta = ref_side.token_ids, got_side.token_ids, got_side.meta
    ref_meta = ref_side.meta
    if tolerance.k is not None and ref32 is None:
        raise ValueError(
            "calibrated half-precision bounds (k) need the float32 reference's outputs"
        )
    unusable = reference_problem(ref, len(items))
    if unusable is None and tolerance.k is not None:
        unusable = reference_problem(ref32, len(items))  # type: ignore[arg-type]
        unusable = unusable and f"the float32 reference: {unusable}"
    if unusable is not None:
        return Measurement(reference_problem=unusable)
    problem = structural_problem(ref, got, len(items))
    if problem is None and tolerance.k is not None:
        problem = structural_problem(ref32, got, len(items))
        problem = problem and f"against the float32 reference: {problem}"
    if problem is not None:
        return Measurement(problem=problem)
    check_tol, check_ref = checks_yardstick(tolerance, ref, ref32, items)
    found = recorded_checks(
        check_tol, check_ref, items, ref_ids, got_ids, got_meta, forms, ref_meta
    )
    failed = found.problem is not None or found.reference_problem is not None
    if failed and found.token_ids != "differ":
        return found
    if failed:
        # token ids differ: a structural problem, but measured on, so that a divergence recorded
        # as `token_ids: differ` can hold the rest to its envelope (harness.judge.verdict)
        try:
            metrics = _metrics(tolerance, metric_names, ref, got, items, ref32, dict(found.notes))
        except Exception:  # noqa: BLE001 - unmeasurable: the token-id problem alone stands
            return found
        return Measurement(
            problem=found.problem,
            degenerate=degenerate_reference(ref, items),
            metrics=metrics.metrics,
            notes=metrics.notes,
            token_ids="differ",
            id_positions=found.id_positions,
        )
    notes = dict(found.notes)
    degenerate = degenerate_reference(ref, items)
    if degenerate is not None:
        return Measurement(degenerate=degenerate, notes=notes, token_ids=found.token_ids)
    m = _metrics(tolerance, metric_names, ref, got, items, ref32, notes)
    m.token_ids = found.token_ids
    return m


def _metrics(
    tolerance: Tolerance,
    metric_names: tuple[str, ...],
    ref: list[np.ndarray],
    got: list[np.ndarray],
    items: tuple,
    ref32: list[np.ndarray] | None,
    notes: dict[str, str],
) -> Measurement:
    """Every metric of the task plus any other the tolerance bounds (calibrated with `k`)."""
    bounds = tolerance.bounds()
    unowned = sorted(set(bounds) - set(METRICS) - set(MTEB_BOUNDS))
    if unowned:  # a bound nothing measures must never be dropped silently
        raise ValueError(
            f"bounds {unowned} have no metric in harness.judge.metrics.METRICS nor in the MTEB path"
        )
    names = list(metric_names) + [m for m in bounds if m not in metric_names and m in METRICS]
    for m in MTEB_BOUNDS:
        if m in bounds:
            notes[m] = (
                f"{m} <= {bounds[m]:g} is gated by `parity mteb` (MTEB scores), "
                f"not by this comparison"
            )
    if tolerance.k is not None:
        assert ref32 is not None
        calibrated = calibrated_metrics(tolerance, names, ref, ref32, got, items)
        return Measurement(metrics=calibrated, notes=notes)
    values = {m: METRICS[m](ref, got, items, tolerance) for m in names}
    return Measurement(metrics=[Metric(m, values[m], bounds.get(m)) for m in names], notes=notes)


def compare(
    case: Case,
    runner: str,
    tolerance: Tolerance,
    metric_names: tuple[str, ...],
    ref: list[np.ndarray],
    got: list[np.ndarray],
    items: tuple,
    ref32: list[np.ndarray] | None = None,
    *,
    ref_ids: list | None = None,
    got_ids: list | None = None,
    got_meta: list[RequestRecord] | None = None,
    forms: list[str] | None = None,
    ref_meta: list[RequestRecord] | None = None,
) -> Verdict:
    """measure, then judge: the same checks as every other path, given the same evidence."""
    m = measure(
        tolerance,
        metric_names,
        Side(ref, ref_meta, ref_ids),
        Side(got, got_meta, got_ids),
        items,
        None if ref32 is None else Side(ref32),
        forms=forms,
    )
    return judge(case, runner, m)
