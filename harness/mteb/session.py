"""`parity mteb`: MTEB main scores of the reference and each runner, side by side, gated on
|runner - HF| and on |score - stored expected score| (vLLM's own CI stores expected scores per
model and checks 5e-4 for embedding models, 2e-3 for rerankers)."""

from __future__ import annotations

import datetime as dt
import json
import os
import tempfile
import time
from pathlib import Path

from harness import __version__
from harness.judge.verdict import Metric, gate
from harness.matrix.request import Request
from harness.matrix.runner_names import REFERENCE_RUNNER
from harness.matrix.schema import Case, Matrix
from harness.report.model import MetricOut, ReferenceResult, Report, Result
from harness.run.execute import Executor, Progress, RunOutcome
from harness.run.plan import ModelProblem, build_plan
from harness.run.session import execute, new_report, utc_now
from harness.runners.platform import Platform

EXPECTED_DIR = "mteb"  # under the golden folder: golden/mteb/<case>.json


def _request(shuffle_seed: int | None):
    def make(case: Case, runner: str, run_dir: Path) -> tuple[dict, Path]:
        out = Path(run_dir) / "outputs" / case.id / f"{runner}.mteb.json"
        hf = runner == REFERENCE_RUNNER
        # MTEB sends its own texts: of the case's request, only the recipe and truncate apply
        request = Request(
            truncate=case.request.truncate,
            **({"reference": case.reference, "hf": case.hf} if hf else {}),
        )
        msg = {
            "op": "mteb",
            "task": case.task,
            "tasks": list(case.mteb_tasks),
            "request": request.wire(),
            "model_name": case.hub_id or f"parity-harness/{case.id}",
            "revision": runner,
            "out_dir": str(Path(run_dir) / "mteb"),
            "out": str(out),
            "shuffle_seed": shuffle_seed,
        }
        return msg, out

    return make


def expected_path(golden_dir: Path, case_id: str) -> Path:
    return Path(golden_dir) / EXPECTED_DIR / f"{case_id}.json"


def read_expected(golden_dir: Path, case_id: str) -> dict | None:
    p = expected_path(golden_dir, case_id)
    return json.loads(p.read_text()) if p.exists() else None


def write_expected(
    golden_dir: Path, case: Case, fingerprint: str, scores: dict, info: dict
) -> Path:
    p = expected_path(golden_dir, case.id)
    p.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "case_id": case.id,
        "hub_id": case.hub_id,
        "model_fingerprint": fingerprint,
        "recorded": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "recorded_with": "hf",
        "versions": info.get("versions", {}),
        "harness_version": __version__,
        "tasks": {
            t: {"main_score": v["main_score"], "main_metric": v["main_metric"]}
            for t, v in sorted(scores.items())
        },
    }
    fd, tmp = tempfile.mkstemp(prefix=p.name, dir=p.parent)
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(tmp, p)
    return p


def _scores(outcome: RunOutcome | None) -> dict | None:
    if outcome is None or outcome.status != "ok" or not outcome.output:
        return None
    return json.loads(Path(outcome.output).read_text())


def mteb_session(
    matrix: Matrix,
    cases: list[Case],
    run_dir: Path,
    platform: Platform,
    golden_dir: Path,
    runners: list[str] | None = None,
    record_expected: bool = False,
    shuffle_seed: int | None = 0,
    progress: Progress | None = None,
) -> Report:
    cases = [c for c in cases if c.mteb_tasks]
    started, t0 = utc_now(), time.perf_counter()
    # HF's own scores are judged too (against the stored expected ones): it runs even where every
    # vLLM row is a platform skip
    plan = build_plan(
        cases, platform, Path(matrix.path).parent, runners=runners, reference_judged=True
    )
    outcomes, partial = execute(
        Executor(plan, run_dir, progress=progress, make_request=_request(shuffle_seed))
    )
    results: list[Result] = []
    refs: list[ReferenceResult] = []
    for case in plan.cases:
        model = plan.models[case.id]
        tol = case.tolerance(plan.dtypes[case.id]).main_score
        ref_out = outcomes.get((case.id, REFERENCE_RUNNER))
        ref = _scores(ref_out)
        refs.append(
            ReferenceResult(
                case_id=case.id,
                status=ref_out.status if ref_out else "error",
                reason=ref_out.reason if ref_out else "not run",
                info={"scores": ref or {}},
                output=ref_out.output if ref_out else None,
            )
        )
        expected = read_expected(golden_dir, case.id)
        if record_expected and ref is not None and not isinstance(model, ModelProblem):
            write_expected(golden_dir, case, model.fingerprint, ref, ref_out.info)
            expected = read_expected(golden_dir, case.id)
        for runner in plan.runners_of(case):
            got_out = outcomes.get((case.id, runner))
            got = _scores(got_out)
            for task in case.mteb_tasks:
                results.append(
                    _task_result(
                        case,
                        runner,
                        task,
                        tol,
                        got_out,
                        got,
                        ref,
                        expected,
                        model,
                        plan.platform,
                        record_expected,
                    )
                )
    return new_report(
        matrix,
        platform.device,
        started,
        time.perf_counter() - t0,
        partial,
        results=results,
        references=refs,
    )


def _task_result(
    case: Case,
    runner: str,
    task: str,
    tol: float | None,
    got_out: RunOutcome | None,
    got: dict | None,
    ref: dict | None,
    expected: dict | None,
    model,
    platform: Platform,
    recorded_now: bool,
) -> Result:
    base = dict(
        case_id=f"{case.id}:{task}",
        family=case.family,
        task=case.task,
        runner=runner,
        runner_label=platform.runner_label(
            runner, (got_out.info.get("actual_runner") if got_out else None)
        ),
        where=case.where,
        dtype="",
        device=platform.device,
        info=got_out.info if got_out else {},
        load_seconds=got_out.load_seconds if got_out else None,
        run_seconds=got_out.run_seconds if got_out else None,
    )
    if got_out is None or got is None:
        status = got_out.status if got_out is not None and got_out.status != "ok" else "error"
        return Result(**base, status=status, reason=got_out.reason if got_out else "not run")
    score = got[task]["main_score"]
    metrics: list[Metric] = []
    problems: list[str] = (
        [] if tol is not None else ["the case has no main_score bound for this dtype"]
    )
    if runner != REFERENCE_RUNNER:
        if ref is None:
            return Result(**base, status="error", reason="reference (hf) MTEB run failed")
        metrics.append(Metric("main_score_delta_vs_hf", abs(score - ref[task]["main_score"]), tol))
    exp = (expected or {}).get("tasks", {}).get(task)
    if exp is None:
        problems.append("no stored expected score (record with `parity mteb --record-expected`)")
    elif expected.get("model_fingerprint") != getattr(model, "fingerprint", None):
        problems.append("stored expected score was made from other weights: refused (re-record it)")
    else:
        metrics.append(Metric("main_score_delta_vs_expected", abs(score - exp["main_score"]), tol))
    base["info"] = {
        **base["info"],
        "main_score": score,
        "main_metric": got[task]["main_metric"],
        "expected": exp["main_score"] if exp else None,
        "hf": ref[task]["main_score"] if ref else None,
    }
    v = gate(metrics, problems)
    return Result(
        **base,
        status=v.status,
        reason=v.reason,
        metrics=[MetricOut(name=m.name, value=m.value, bound=m.bound, ok=m.ok) for m in v.metrics],
    )
