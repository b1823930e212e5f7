"""The golden flow: goldens standing as the reference of a run (`--against golden`), and
record | verify | update of the goldens themselves from a fresh HF run."""

from __future__ import annotations

import time
from pathlib import Path

from harness.judge import golden
from harness.judge.verdict import Verdict, judge
from harness.matrix.inputs import input_set
from harness.matrix.runner_names import REFERENCE_RUNNER
from harness.matrix.schema import Case, Matrix
from harness.report.model import MetricOut, Report, Result
from harness.run.assemble import Outcomes, measure_outcomes, metric_out, new_report, utc_now
from harness.run.execute import Executor, Progress, RunOutcome, Timeouts, execute
from harness.run.modes import GoldenMode, mode_of
from harness.run.plan import REFERENCE_FP32, ModelProblem, Plan, build_plan
from harness.run.sides import Sides
from harness.runners.platform import Platform


def golden_references(plan: Plan, golden_dir: Path) -> Outcomes:
    """The reference outcome of each case, read from its golden instead of running HF."""
    out: Outcomes = {}
    for case in plan.cases:
        model = plan.models[case.id]
        if isinstance(model, ModelProblem) or case.variant_of is not None or case.expect:
            # nothing to compare, a derived check case (held to its base case's golden), or a
            # refusal case (its reference is the refusal rule: no golden)
            continue
        dtype = plan.dtypes[case.id]
        try:
            g = golden.read_matching(
                golden_dir, case, model.path, model.fingerprint, dtype, plan.platform.device
            )
        except golden.GoldenError as e:
            out[(case.id, REFERENCE_RUNNER)] = _golden_error(case, REFERENCE_RUNNER, e)
            continue
        out.update(golden_outcomes(case, g, model.fingerprint, plan.calibrated[case.id]))
    return out


def golden_reference(
    case: Case, model_path: Path, fingerprint: str, dtype: str, device: str, golden_dir: Path
) -> RunOutcome:
    """One case's reference outcome from its golden (see golden_outcomes); a golden that is
    missing, corrupt, made from other weights/inputs or older than token ids is an error outcome
    saying how to fix it."""
    try:
        g = golden.read_matching(golden_dir, case, model_path, fingerprint, dtype, device)
    except golden.GoldenError as e:
        return _golden_error(case, REFERENCE_RUNNER, e)
    return golden_outcomes(case, g, fingerprint, calibrated=False)[(case.id, REFERENCE_RUNNER)]


def golden_outcomes(case: Case, g: golden.Golden, fingerprint: str, calibrated: bool) -> Outcomes:
    """A golden as reference outcomes: its arrays, with its token ids standing where a live
    reference's `<out>.requests.json` would (so the token-id and usage checks run on the golden
    path exactly as on the live one), and when `calibrated` its float32 reference."""
    info = {
        "golden": str(g.arrays_path),
        "recorded": g.manifest.get("recorded"),
        "versions": g.manifest.get("versions", {}),
        "device": g.manifest.get("device"),
        "requests_file": str(g.requests_path),
    }
    ref = RunOutcome(case.id, REFERENCE_RUNNER, "ok", output=str(g.arrays_path), info=info)
    out = {(case.id, REFERENCE_RUNNER): ref}
    if calibrated:
        try:
            path = golden.fp32_reference(g, case.id, fingerprint, input_set(case.inputs).sha256)
            # the same tokenization as the golden's arrays: its token ids stand beside it too
            info32 = {**info, "golden": str(path)}
            ref32 = RunOutcome(case.id, REFERENCE_FP32, "ok", output=str(path), info=info32)
        except golden.GoldenError as e:
            ref32 = _golden_error(case, REFERENCE_FP32, e)
        out[(case.id, REFERENCE_FP32)] = ref32
    return out


def _golden_error(case: Case, runner: str, e: golden.GoldenError) -> RunOutcome:
    return RunOutcome(case.id, runner, "error", f"golden {e.kind}: {e}")


def golden_session(
    matrix: Matrix,
    cases: list[Case],
    run_dir: Path,
    platform: Platform,
    golden_dir: Path,
    mode: str,
    progress: Progress | None = None,
    timeouts: Timeouts | None = None,
) -> Report:
    """record | verify | update the goldens of `cases` from a fresh HF run.

    Like pytest-regressions: a missing golden is written and the case FAILS (record), or just
    fails (verify); a mismatch writes `reference.obtained` beside it and fails; `update` rewrites
    on purpose. A golden made from other weights or inputs is refused unless updating."""
    mode = mode_of(GoldenMode, mode, "mode")
    started, t0 = utc_now(), time.perf_counter()
    cases = [c for c in cases if c.expect is None]  # a refusal case has no reference to record
    plan = build_plan(
        cases, platform, Path(matrix.path).parent, runners=[REFERENCE_RUNNER], fp32_reference=True
    )
    outcomes, partial = execute(Executor(plan, run_dir, timeouts=timeouts, progress=progress))
    results = []
    for case in plan.cases:
        ref = outcomes.get((case.id, REFERENCE_RUNNER))
        model = plan.models[case.id]
        ref32 = outcomes.get((case.id, REFERENCE_FP32))
        v, metrics = _golden_verdict(case, plan, ref, model, golden_dir, mode, ref32)
        results.append(
            Result(
                case_id=case.id,
                family=case.family,
                task=case.task,
                runner=REFERENCE_RUNNER,
                runner_label=f"hf vs golden ({mode})",
                status=v.status,
                reason=v.reason,
                metrics=metrics,
                checks=v.notes,
                where=case.where,
                dtype=plan.dtypes[case.id],
                device=platform.device,
                info=ref.info if ref else {},
                run_seconds=ref.run_seconds if ref else None,
                model={"fingerprint": getattr(model, "fingerprint", None), "hub_id": case.hub_id},
                timed_out=v.status == "error"
                and any(o is not None and o.timed_out for o in (ref, ref32)),
            )
        )
    return new_report(
        matrix, platform.device, started, time.perf_counter() - t0, partial, results=results
    )


def _golden_verdict(
    case: Case,
    plan: Plan,
    ref: RunOutcome | None,
    model,
    golden_dir: Path,
    mode: str,
    ref32: RunOutcome | None = None,
) -> tuple[Verdict, list[MetricOut]]:
    if ref is None or ref.status != "ok":
        return Verdict(
            ref.status if ref else "error", ref.reason if ref else "reference not run"
        ), []
    dtype = plan.dtypes[case.id]
    device = plan.platform.device
    calibrated = plan.calibrated[case.id]
    if calibrated and (ref32 is None or ref32.status != "ok"):
        why = "was not run" if ref32 is None else f"{ref32.status}: {ref32.reason}"
        return Verdict(
            "error", f"float32 reference (recorded beside a half-precision golden) {why}"
        ), []
    sides = Sides()

    def record() -> Path:
        fresh = sides(ref)
        return golden.record(
            golden_dir,
            case,
            fresh.outputs,  # type: ignore[arg-type]
            fresh.token_ids,
            model=model,
            dtype=dtype,
            device=device,
            versions=ref.info.get("versions", {}),
            fp32_items=sides(ref32).outputs if calibrated else None,  # type: ignore[arg-type]
        )

    if mode == GoldenMode.UPDATE:
        return Verdict("pass", f"golden updated: {record()}"), []
    try:
        g = golden.read_matching(golden_dir, case, model.path, model.fingerprint, dtype, device)
    except golden.GoldenError as e:
        if e.kind == "missing" and mode == GoldenMode.RECORD:
            return Verdict(
                "fail", f"golden was missing; recorded now at {record()}: review and commit it"
            ), []
        return Verdict("error" if e.kind != "missing" else "fail", f"golden {e.kind}: {e}"), []
    v, metrics = _verify(
        case, golden_outcomes(case, g, model.fingerprint, calibrated), dtype, (ref, ref32), sides
    )
    if v.status != "pass":
        obtained = golden.write_obtained(golden_dir, case.id, sides(ref).outputs)  # type: ignore
        v.reason = f"HF differs from its golden: {v.reason}; obtained written to {obtained}"
    return v, metrics


def _verify(
    case: Case, stored: Outcomes, dtype: str, fresh: tuple, sides: Sides
) -> tuple[Verdict, list[MetricOut]]:
    """The same comparison as a runner's against HF, the golden standing as the reference and the
    fresh HF run as the runner; in the same dtype, calibrated half bounds hold as their floors.
    `fresh` is (HF, HF in float32); with a float32 golden beside, HF in float32 is held to it."""
    ref, ref32 = fresh
    tolerance = case.tolerance(dtype).model_copy(update={"k": None})
    v, metrics = _against_golden(case, tolerance, stored, REFERENCE_RUNNER, ref, sides)
    if v.status == "pass" and (case.id, REFERENCE_FP32) in stored:
        v32, m32 = _against_golden(
            case, case.tolerance("float32"), stored, REFERENCE_FP32, ref32, sides
        )
        metrics += [m.model_copy(update={"name": f"{m.name} (float32)"}) for m in m32]
        notes = {**v.notes, **{f"{k} (float32)": n for k, n in v32.notes.items()}}
        v = Verdict(v32.status, v32.reason, notes=notes)
        if v32.status != "pass":
            v.reason = f"HF in float32 against the golden's float32 reference: {v32.reason}"
    return v, metrics


def _against_golden(
    case: Case, tolerance, stored: Outcomes, runner: str, fresh: RunOutcome, sides: Sides
) -> tuple[Verdict, list[MetricOut]]:
    """A fresh HF outcome judged against the golden's outcome for `runner` (hf or hf-fp32)."""
    ref = stored[(case.id, runner)]
    if ref.status != "ok":
        return Verdict("error", ref.reason), []
    try:
        v = judge(case, runner, measure_outcomes(case, tolerance, ref, fresh, sides=sides))
    except Exception as e:  # noqa: BLE001 - as harness.judge.verdict.outcome_verdict
        return Verdict("error", f"comparison failed: {type(e).__name__}: {e}"), []
    return v, [metric_out(m) for m in v.metrics]
