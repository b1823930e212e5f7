"""The one-way pipeline, orchestrated: matrix -> plan -> runs -> outputs -> comparisons -> report
(report assembly: harness.run.assemble; the golden flow: harness.run.golden_flow)."""

from __future__ import annotations

import time
from pathlib import Path

from harness.matrix.runner_names import runner_info
from harness.matrix.schema import Case, Matrix
from harness.report.model import Report
from harness.run import interrupt
from harness.run.assemble import build_report, new_report, utc_now
from harness.run.execute import Executor, Progress, Timeouts, execute
from harness.run.golden_flow import golden_references, golden_session
from harness.run.modes import Against, mode_of
from harness.run.plan import Plan, build_plan
from harness.runners.platform import Platform

# what callers above this module take from here: the session's entry points
__all__ = [
    "empty_report",
    "execute",
    "golden_session",
    "new_report",
    "run_cases",
    "utc_now",
    "warm_vllm_model_info",
]


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
    naive: bool = False,
) -> Report:
    """Run cases on their runners and compare each to the reference: HF live, or its golden.
    `cases` come with their checks expanded (harness.matrix.checks.expand_checks, with the run's
    shuffle seed), as the caller counted them; a check whose derived case is missing is refused,
    never silently left out."""
    against = mode_of(Against, against, "against")
    started, t0 = utc_now(), time.perf_counter()
    derived = {(c.variant_of, c.check) for c in cases if c.variant_of is not None}
    missing = [f"{c.id}@{n}" for c in cases for n in c.checks if (c.id, n) not in derived]
    if missing:
        raise ValueError(
            f"run_cases: checks not expanded ({', '.join(missing)}): pass "
            "harness.matrix.checks.expand_checks(cases, seed)"
        )
    try:
        plan = build_plan(
            cases,
            platform,
            Path(matrix.path).parent,
            runners=runners,
            dtype=dtype,
            with_reference=against == Against.HF,
            one_load_per_case=naive,
            fp32_reference=True,
        )
        warm_vllm_model_info(plan, progress)
    except KeyboardInterrupt as e:  # nothing ran: a partial report that says so
        why = interrupt.while_planning(e)
        return new_report(matrix, platform.device, started, time.perf_counter() - t0, why)
    t_plan = time.perf_counter()
    executor = Executor(
        plan, run_dir, timeouts=timeouts, jobs=jobs, progress=progress, fresh_worker_per_load=naive
    )
    outcomes, partial = execute(executor)
    t_exec = time.perf_counter()
    if against == Against.GOLDEN:
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


def empty_report(matrix: Matrix, device: str) -> Report:
    """The report of a shard that received no case."""
    return new_report(matrix, device, utc_now(), 0.0)
