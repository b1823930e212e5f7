"""report.json: the source of truth of a run (with provenance); every other format derives
from it (harness.report.model.markdown, junit, html)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, computed_field

from harness.judge.verdict_types import ORDER, is_failing

SCHEMA_VERSION = 1


class MetricOut(BaseModel):
    name: str
    value: float | None
    bound: float | None
    ok: bool
    # half precision, calibrated bounds: `value` is the runner against HF in float32; `ref_error`
    # is HF's own error in this dtype (HF in the dtype against HF in float32); ratio = value / it
    ref_error: float | None = None
    ratio: float | None = None


class Result(BaseModel):
    """One case on one compared runner."""

    case_id: str
    family: str
    task: str
    runner: str
    runner_label: str
    status: str
    reason: str = ""
    metrics: list[MetricOut] = Field(default_factory=list)
    envelope: dict[str, float] = Field(
        default_factory=dict
    )  # a recorded divergence's bounds (xfail), per metric
    checks: dict[str, str] = Field(
        default_factory=dict
    )  # what was compared besides metrics (token ids)
    where: str = ""
    model: dict[str, Any] = Field(default_factory=dict)
    inputs: dict[str, Any] = Field(default_factory=dict)
    dtype: str = ""
    device: str = ""
    actual_runner: str | None = None
    info: dict[str, Any] = Field(default_factory=dict)
    load_seconds: float | None = None
    run_seconds: float | None = None
    output: str | None = None
    # an error whose cause is a time limit running out (worker or server start), on either side:
    # detection power counts such a row as inconclusive, never as a catch
    timed_out: bool = False


class ReferenceResult(BaseModel):
    case_id: str
    status: str  # ok | skip | error
    reason: str = ""
    info: dict[str, Any] = Field(default_factory=dict)
    run_seconds: float | None = None
    output: str | None = None


class AuditRow(BaseModel):
    """Default-runner audit: which runner vLLM chose when left to decide, versus the expectation."""

    family: str
    case_id: str
    expected: str | None
    actual: str | None
    why: str = ""

    @property
    def ok(self) -> bool:
        return self.expected is None or self.expected == self.actual


class Report(BaseModel):
    schema_version: int = SCHEMA_VERSION
    harness_version: str
    git_commit: str | None = None
    command: list[str] = Field(default_factory=list)
    matrix: str
    matrix_sha256: str  # over the matrix file and every file it includes
    shard: str | None = None  # "K/N" when this is one shard of a sharded run
    selection: dict[str, Any] = Field(
        default_factory=dict
    )  # -k globs, runners: shards of one run agree
    device: str
    started: str
    finished: str | None = None
    wall_seconds: float | None = None
    partial: bool = False
    partial_reason: str = ""
    results: list[Result] = Field(default_factory=list)
    references: list[ReferenceResult] = Field(default_factory=list)
    audit: list[AuditRow] = Field(default_factory=list)
    phases: dict[str, float] = Field(default_factory=dict)  # plan / execute / compare seconds
    peak_rss_mb: dict[str, float] = Field(default_factory=dict)
    # one entry per worker process lineage: runner, lane, loads, recycles, peak and last RSS (MiB)
    workers: list[dict[str, Any]] = Field(default_factory=list)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def vllm_under_test(self) -> list[dict[str, Any]]:
        """Each distinct vLLM the runner workers ran (harness.engine.target.vllm_provenance): its
        version, and for a checkout its path, commit and whether the tree was dirty."""
        seen: dict[str, dict[str, Any]] = {}
        for r in self.results:
            p = r.info.get("vllm")
            if p:
                seen.setdefault(json.dumps(p, sort_keys=True), p)
        return [seen[k] for k in sorted(seen)]

    def counts(self) -> dict[str, int]:
        out = {k: 0 for k in ORDER}
        for r in self.results:
            out[r.status] = out.get(r.status, 0) + 1
        return out

    @property
    def ok(self) -> bool:
        return not self.partial and not any(is_failing(r.status) for r in self.results)

    @property
    def nothing_compared(self) -> bool:
        """Every result skipped (no model here, say): nothing was compared, so nothing is proven."""
        return bool(self.results) and all(r.status == "skip" for r in self.results)

    def exit_code(self) -> int:
        """0 parity holds; 1 a failure, error or stale mark (or a partial run); 4 nothing
        compared."""
        if not self.ok:
            return 1
        return 4 if self.nothing_compared else 0


def atomic_write(path: Path, text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", dir=path.parent)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def write_json(report: Report, path: Path) -> None:
    atomic_write(path, report.model_dump_json(indent=2) + "\n")


def read_json(path: Path) -> Report:
    return Report.model_validate(json.loads(Path(path).read_text()))


def margin(r: Result) -> float | None:
    """The largest value / bound over a result's bounded metrics (1.0 = at its bound)."""
    ratios = [m.value / m.bound for m in r.metrics if m.bound and m.value is not None]
    return max(ratios) if ratios else None


def headline(report: Report, marks: bool = True) -> str:
    """The one-line verdict of a run, as every human-readable report opens (`marks`: with its
    emoji)."""
    head = (
        (
            "⚠️ NOTHING COMPARED (every result skipped)"
            if report.nothing_compared
            else "✅ parity passed"
        )
        if report.ok
        else "❌ parity FAILED"
    )
    if not marks:
        head = head.split(" ", 1)[1]
    if report.partial:
        head += f" — PARTIAL report ({report.partial_reason})"
    return head


def _check_shards(reports: list[Report]) -> None:
    unsharded = [r.matrix for r in reports if r.shard is None]
    if unsharded:
        raise ValueError(
            f"{len(unsharded)} report(s) are not shard reports (run with --shard K/N): only shards "
            "of one run merge"
        )
    parsed = [tuple(int(x) for x in str(r.shard).split("/")) for r in reports]
    counts = {n for _, n in parsed}
    if len(counts) > 1:
        raise ValueError(
            "foreign shard: the reports split the run differently: "
            f"{sorted(str(r.shard) for r in reports)}"
        )
    (n,) = counts
    ks = [k for k, _ in parsed]
    dup = sorted({k for k in ks if ks.count(k) > 1})
    if dup:
        raise ValueError(f"duplicate shard(s): {', '.join(f'{k}/{n}' for k in dup)}")
    missing = sorted(set(range(1, n + 1)) - set(ks))
    if missing:
        raise ValueError(
            f"missing shard(s): {', '.join(f'{k}/{n}' for k in missing)}; parity cannot be claimed "
            f"for cases that no report covers"
        )


def merge(reports: list[Report], shards: bool = True) -> Report:
    """Combine the shard reports of one run into one report (results ordered by case, runner).
    Refuses a missing, duplicate or foreign shard: a merged report that says parity holds must
    cover every shard of one matrix and one selection. `shards=False` combines the disjoint parts
    of one session instead (pytest's model groups and xdist workers)."""
    if not reports:
        raise ValueError("nothing to merge")
    matrices = {r.matrix_sha256 for r in reports}
    if len(matrices) > 1:
        raise ValueError(
            f"foreign shard: the reports come from different matrices (or included files): "
            f"{sorted({(r.matrix, r.matrix_sha256[:12]) for r in reports})}"
        )
    selections = {json.dumps(r.selection, sort_keys=True) for r in reports}
    if len(selections) > 1:
        raise ValueError(
            f"foreign shard: the reports select different cases or runners: {sorted(selections)}"
        )
    if shards and (len(reports) > 1 or reports[0].shard is not None):
        _check_shards(reports)
    seen: dict[tuple[str, str], str] = {}
    for i, r in enumerate(reports):
        for res in r.results:
            key = (res.case_id, res.runner)
            if key in seen:
                raise ValueError(f"{res.case_id} [{res.runner}] appears in two shard reports")
            seen[key] = str(i)
    first = reports[0]
    partial = [r.partial_reason or "partial" for r in reports if r.partial]
    return Report(
        harness_version=first.harness_version,
        git_commit=first.git_commit,
        command=first.command,
        matrix=first.matrix,
        matrix_sha256=first.matrix_sha256,
        device=first.device,
        selection=first.selection,
        started=min(r.started for r in reports),
        finished=max((r.finished or "") for r in reports) or None,
        wall_seconds=max((r.wall_seconds or 0.0) for r in reports),
        partial=bool(partial),
        partial_reason="; ".join(partial),
        results=sorted(
            (x for r in reports for x in r.results), key=lambda x: (x.case_id, x.runner)
        ),
        references=sorted((x for r in reports for x in r.references), key=lambda x: x.case_id),
        audit=sorted((x for r in reports for x in r.audit), key=lambda x: (x.family, x.case_id)),
    )
