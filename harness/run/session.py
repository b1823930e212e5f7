"""The one-way pipeline: matrix -> plan -> runs -> outputs -> comparisons -> report."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
import time
from pathlib import Path

from harness import __version__
from harness.judge import compare, golden
from harness.judge.verdict import Measurement, Metric, Verdict, judge, outcome_verdict
from harness.matrix.checks import expand_checks
from harness.matrix.inputs import input_set
from harness.matrix.prompt_forms import item_forms
from harness.matrix.runner_names import REFERENCE_RUNNER, runner_info
from harness.matrix.schema import Case, Matrix
from harness.matrix.tasks import task_kind
from harness.report.model import AuditRow, MetricOut, ReferenceResult, Report, Result
from harness.run.execute import Executor, Progress, RunOutcome, Timeouts
from harness.run.plan import REFERENCE_FP32, ModelProblem, Plan, build_plan, needs_fp32_reference
from harness.runners.outputs import load_items
from harness.runners.platform import Platform


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


def execute(executor: Executor) -> tuple[dict[tuple[str, str], RunOutcome], str]:
    """(outcomes, partial reason). Ctrl-C keeps the outcomes so far and marks the report partial."""
    try:
        return executor.run(), ""
    except KeyboardInterrupt:
        return executor.outcomes, "interrupted (Ctrl-C): cases not reached are reported as errors"


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


def _request_meta(outcome: RunOutcome | None) -> list[dict] | None:
    """What a runner recorded per item beside its outputs (prompt token ids, server answers), if
    anything."""
    import json

    if outcome is not None and outcome.info.get("requests_file"):  # a golden's token ids
        path: Path | None = Path(outcome.info["requests_file"])
    else:
        out = outcome.output if outcome is not None else None
        path = Path(f"{out}.requests.json") if out else None
    if path is None or not path.is_file():
        return None
    return json.loads(path.read_text())


def _token_ids(outcome: RunOutcome | None) -> list | None:
    meta = _request_meta(outcome)
    return None if meta is None else [m.get("prompt_token_ids") for m in meta]


def measure_outcomes(
    case: Case,
    tolerance,
    ref: RunOutcome,
    got: RunOutcome,
    ref32: RunOutcome | None = None,
) -> Measurement:
    """The one comparison of every path (live HF, `--against golden`, `golden verify`, the pytest
    plugin): each side's outputs and what was recorded beside them per item (prompt token ids, a
    server's answers), read from its outcome; a golden's token ids stand where a live reference's
    `<out>.requests.json` would. harness.judge.compare.measure runs every check whose inputs
    exist and says in its notes which could not run and why."""
    return compare.measure(
        tolerance,
        task_kind(case.task).metrics,
        load_items(Path(ref.output))[0],  # type: ignore[arg-type]
        load_items(Path(got.output))[0],  # type: ignore[arg-type]
        input_set(case.inputs).items,
        _token_ids(ref),
        _token_ids(got),
        _request_meta(got),
        ref32=load_items(Path(ref32.output))[0] if ref32 is not None else None,  # type: ignore
        forms=(
            item_forms(case.prompt_form, len(input_set(case.inputs).items))
            if case.prompt_form != "text"
            else None
        ),
        ref_meta=_request_meta(ref),
    )


def verdict_for(
    case: Case,
    runner: str,
    dtype: str,
    ref: RunOutcome | None,
    got: RunOutcome | None,
    ref32: RunOutcome | None = None,
) -> Verdict:
    """The verdict (harness.judge.verdict decides) of a case on one runner, comparing the outputs
    on disk. In half precision with calibrated bounds, `ref32` is the reference run in float32."""
    calibrated = needs_fp32_reference(case, dtype)

    def measure() -> Measurement:
        tolerance = case.tolerance(dtype)
        return measure_outcomes(case, tolerance, ref, got, ref32 if calibrated else None)  # type: ignore[arg-type]

    def refusals() -> list[str | None] | None:
        meta = _request_meta(got)
        return None if meta is None else [m.get("refused") for m in meta]

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


def build_report(
    matrix: Matrix,
    plan: Plan,
    outcomes: dict[tuple[str, str], RunOutcome],
    started: str,
    wall: float,
    partial_reason: str = "",
) -> Report:
    results: list[Result] = []
    references: list[ReferenceResult] = []
    audit: list[AuditRow] = []
    for case in plan.cases:
        dtype = plan.dtypes[case.id]
        model = plan.models[case.id]
        model_info = (
            {
                "description": model.description,
                "fingerprint": model.fingerprint,
                "path": str(model.path),
            }
            if not isinstance(model, ModelProblem)
            else {"problem": model.reason}
        )
        model_info["hub_id"] = case.hub_id
        model_info["trust_remote_code"] = case.trust_remote_code  # opted into per case, shown
        inputs = input_set(case.inputs)
        ref = outcomes.get((case.variant_of or case.id, REFERENCE_RUNNER))
        if case.variant_of is None and (
            ref is not None or REFERENCE_RUNNER in plan.runners_of(case)
        ):
            references.append(
                ReferenceResult(
                    case_id=case.id,
                    status=ref.status if ref else "error",
                    reason=(ref.reason if ref else "not run"),
                    info=ref.info if ref else {},
                    run_seconds=ref.run_seconds if ref else None,
                    output=ref.output if ref else None,
                )
            )
        for runner in plan.runners_of(case):
            if runner == REFERENCE_RUNNER:
                continue
            got = outcomes.get((case.id, runner))
            ref32 = outcomes.get((case.variant_of or case.id, REFERENCE_FP32))
            v = verdict_for(case, runner, dtype, ref, got, ref32)
            actual = got.info.get("actual_runner") if got else None
            auto = runner_info(runner).is_offline_vllm and runner_info(runner).variant == "auto"
            if auto and got is not None and got.status == "ok":
                expected, _ = case.expected_auto_for(got.info.get("versions", {}).get("vllm"))
                audit.append(
                    AuditRow(
                        family=case.family,
                        case_id=case.id,
                        expected=expected,
                        actual=actual,
                        why=got.info.get("runner_choice", ""),
                    )
                )
            results.append(
                Result(
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
                    model=model_info,
                    inputs={
                        "name": inputs.name,
                        "sha256": inputs.sha256,
                        "count": len(inputs.items),
                    },
                    dtype=dtype,
                    device=plan.platform.device,
                    actual_runner=actual,
                    info=got.info if got else {},
                    load_seconds=got.load_seconds if got else None,
                    run_seconds=got.run_seconds if got else None,
                    output=got.output if got else None,
                    timed_out=v.status == "error"
                    and any(o is not None and o.timed_out for o in (ref, got, ref32)),
                )
            )
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


def golden_references(plan: Plan, golden_dir: Path) -> dict[tuple[str, str], RunOutcome]:
    """The reference outcome of each case, read from its golden instead of running HF."""
    out: dict[tuple[str, str], RunOutcome] = {}
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
        out.update(golden_outcomes(case, g, model.fingerprint, needs_fp32_reference(case, dtype)))
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


def golden_outcomes(
    case: Case, g: golden.Golden, fingerprint: str, calibrated: bool
) -> dict[tuple[str, str], RunOutcome]:
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


def warm_vllm_model_info(plan: Plan, progress: Progress | None = None) -> dict:
    """Have vLLM inspect the plan's architectures in one process before its engines start (about
    10 s per new architecture otherwise, each in an engine load; harness.runners.modelinfo)."""
    from harness.runners.modelinfo import TRANSFORMERS_BACKEND, case_archs, warm

    loads = [
        load
        for runner, queue in plan.queues.items()
        if runner_info(runner).is_vllm
        for load in queue
    ]
    if not loads:
        return {"skipped": "no vLLM runner"}
    archs = {a for load in loads for a in case_archs(load.model.path, load.engine)}
    # vLLM also inspects its Transformers-backend classes for a name it has no class of its own
    # for (Qwen3Model, Qwen3ForSequenceClassification), as the fallback it would take
    archs.add(TRANSFORMERS_BACKEND)
    info = warm(archs, plan.platform.worker_env(loads[0].runner))
    if progress is not None and "skipped" not in info:
        classes = [a for a in info.get("inspected", []) if a != TRANSFORMERS_BACKEND]  # type: ignore
        said = f"vLLM inspected {len(classes)} model classes in one process"
        said += f" ({info.get('seconds', '?')} s)"
        if info.get("not_inspected") or info.get("error"):
            left = info.get("error") or ", ".join(sorted(info["not_inspected"]))  # type: ignore
            said += f"; left to each engine: {left}"
        note = getattr(progress, "note", None)  # a plain-lines log: not a lane's state
        note(said) if note is not None else progress(said, None)
    return info


def run_cases(
    matrix: Matrix,
    cases: list[Case],
    run_dir: Path,
    platform: Platform,
    runners: list[str] | None = None,
    dtype: str | None = None,
    jobs: int | None = None,
    timeouts: Timeouts | None = None,
    progress: Progress | None = None,
    against: str = "hf",
    golden_dir: Path | None = None,
    shuffle_seed: int = 0,
    naive: bool = False,
) -> Report:
    """Run cases on their runners and compare each to the reference: HF live, or its golden."""
    if against not in ("hf", "golden"):
        raise ValueError(f"against must be 'hf' or 'golden', got {against!r}")
    started, t0 = utc_now(), time.perf_counter()
    cases = expand_checks(cases, seed=shuffle_seed)
    plan = build_plan(
        cases,
        platform,
        Path(matrix.path).parent,
        runners=runners,
        dtype=dtype,
        with_reference=against == "hf",
        one_load_per_case=naive,
        fp32_reference=True,
    )
    warm_vllm_model_info(plan, progress)
    t_plan = time.perf_counter()
    executor = Executor(
        plan, run_dir, timeouts=timeouts, jobs=jobs, progress=progress, fresh_worker_per_load=naive
    )
    outcomes, partial = execute(executor)
    t_exec = time.perf_counter()
    if against == "golden":
        outcomes = {**outcomes, **golden_references(plan, Path(golden_dir or "golden"))}
    report = build_report(matrix, plan, outcomes, started, time.perf_counter() - t0, partial)
    report.phases = {
        "plan_seconds": t_plan - t0,
        "execute_seconds": t_exec - t_plan,
        "compare_seconds": time.perf_counter() - t_exec,
    }
    report.peak_rss_mb = peak_rss_mb()
    report.workers = [w.stats() for w in executor.workers]
    return report


def peak_rss_mb() -> dict[str, float]:
    """Peak resident memory of this process and of the largest finished child (a worker)."""
    import resource

    return {
        "harness": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "largest_worker": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
    }


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
    if mode not in ("record", "verify", "update"):
        raise ValueError(f"mode must be record, verify or update, got {mode!r}")
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
):
    if ref is None or ref.status != "ok":
        return Verdict(
            ref.status if ref else "error", ref.reason if ref else "reference not run"
        ), []
    dtype = plan.dtypes[case.id]
    device = plan.platform.device
    calibrated = needs_fp32_reference(case, dtype)
    if calibrated and (ref32 is None or ref32.status != "ok"):
        why = "was not run" if ref32 is None else f"{ref32.status}: {ref32.reason}"
        return Verdict(
            "error", f"float32 reference (recorded beside a half-precision golden) {why}"
        ), []

    def record() -> Path:
        return golden.record(
            golden_dir,
            case,
            load_items(Path(ref.output))[0],  # type: ignore[arg-type]
            _token_ids(ref),
            model=model,
            dtype=dtype,
            device=device,
            versions=ref.info.get("versions", {}),
            fp32_items=load_items(Path(ref32.output))[0] if calibrated else None,  # type: ignore
        )

    if mode == "update":
        return Verdict("pass", f"golden updated: {record()}"), []
    try:
        g = golden.read_matching(golden_dir, case, model.path, model.fingerprint, dtype, device)
    except golden.GoldenError as e:
        if e.kind == "missing" and mode == "record":
            return Verdict(
                "fail", f"golden was missing; recorded now at {record()}: review and commit it"
            ), []
        return Verdict("error" if e.kind != "missing" else "fail", f"golden {e.kind}: {e}"), []
    # the same comparison as a runner's against HF, the golden standing as the reference and the
    # fresh HF run as the runner; in the same dtype, calibrated half bounds hold as their floors
    stored = golden_outcomes(case, g, model.fingerprint, calibrated)
    v, metrics = _against_golden(
        case, case.tolerance(dtype).model_copy(update={"k": None}), stored, REFERENCE_RUNNER, ref
    )
    if v.status == "pass" and calibrated:  # and HF in float32 against the golden's yardstick
        v32, m32 = _against_golden(
            case,
            case.tolerance("float32"),
            stored,
            REFERENCE_FP32,
            ref32,  # type: ignore[arg-type]
        )
        metrics += [m.model_copy(update={"name": f"{m.name} (float32)"}) for m in m32]
        notes = {**v.notes, **{f"{k} (float32)": n for k, n in v32.notes.items()}}
        v = Verdict(v32.status, v32.reason, notes=notes)
        if v32.status != "pass":
            v.reason = f"HF in float32 against the golden's float32 reference: {v32.reason}"
    if v.status != "pass":
        fresh = load_items(Path(ref.output))[0]  # type: ignore[arg-type]
        obtained = golden.write_obtained(golden_dir, case.id, fresh)
        v.reason = f"HF differs from its golden: {v.reason}; obtained written to {obtained}"
    return v, metrics


def _against_golden(
    case: Case, tolerance, stored: dict, runner: str, fresh: RunOutcome
) -> tuple[Verdict, list[MetricOut]]:
    """A fresh HF outcome judged against the golden's outcome for `runner` (hf or hf-fp32)."""
    ref = stored[(case.id, runner)]
    if ref.status != "ok":
        return Verdict("error", ref.reason), []
    try:
        v = judge(case, runner, measure_outcomes(case, tolerance, ref, fresh))
    except Exception as e:  # noqa: BLE001 - as harness.judge.verdict.outcome_verdict
        return Verdict("error", f"comparison failed: {type(e).__name__}: {e}"), []
    return v, [metric_out(m) for m in v.metrics]


def empty_report(matrix: Matrix, device: str) -> Report:
    """The report of a shard that received no case."""
    return new_report(matrix, device, utc_now(), 0.0)
