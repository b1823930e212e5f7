"""Several runs in one report folder (`parity check --vllm A --vllm B`, `parity branch`): each
run launched in the environment of its vLLM, their grids side by side, the drift between them,
one report.md and one summary.json, one exit code."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from harness.cli.common import combine, err, out
from harness.cli.launch import child_env, is_here, launch
from harness.cli.output import print_failures, print_grid
from harness.engine.env import EngineEnv
from harness.engine.target import EngineSpec
from harness.report import grid as report_grid
from harness.report.model import Report, Result, read_json


@dataclass
class Run:
    """One `parity run` of the set: what it ran on, where it wrote, how it ended."""

    label: str
    spec: EngineSpec
    out: Path
    code: int | None = None
    report: Report | None = None

    @property
    def results(self) -> list[Result]:
        return self.report.results if self.report else []


@dataclass
class Drift:
    """The answers of `new` against `old`: verdict changes and max |OLD - NEW| per output."""

    old: Run
    new: Run
    markdown: str = ""
    changes: int = 0
    moved: list[str] = field(default_factory=list)


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "-", text).strip("-")[:60]


def run_one(run: Run, argv: list[str]) -> Run:
    """`parity run ARGV --out run.out` in run.spec's environment; its report read back."""
    argv = [*argv, "--out", str(run.out)]
    err.print(f"parity: {run.label}: parity {' '.join(argv)}", highlight=False, markup=False)
    if is_here(run.spec):
        env = EngineEnv(run.spec.describe(), sys.executable)
        cmd = [sys.executable, "-m", "harness.cli", *argv]
        run.code = subprocess.run(cmd, env=child_env(run.spec, env)).returncode
    else:
        run.code = launch(run.spec, argv, "run")
    report = run.out / "report.json"
    run.report = read_json(report) if report.is_file() else None
    return run


def drift(old: Run, new: Run) -> Drift:
    """What moved from `old` to `new` (both with reports): `parity report diff --outputs`."""
    from harness.report import diff as report_diff

    d = Drift(old, new)
    if old.report is None or new.report is None:
        d.markdown = "_not compared: a run wrote no report_\n"
        return d
    diff = report_diff.diff(old.report, new.report)
    diff.outputs = report_diff.compare_outputs(old.report, new.report, old.out, new.out)
    d.changes = len(diff.changes)
    d.moved = [f"{x.case_id} [{x.runner}] {x.max_abs:.2e}" for x in diff.outputs if x.max_abs]
    d.markdown = report_diff.to_markdown(diff, old.report, new.report)
    return d


def grids_markdown(runs: list[Run]) -> str:
    parts = []
    for r in runs:
        head = f"### {r.label}: {r.spec.describe()} (exit {r.code})"
        body = report_grid.to_markdown(r.results) if r.report else "_no report written_\n"
        parts.append(f"{head}\n\n{body}")
    return "\n".join(parts)


def drift_line(d: Drift) -> str:
    moved = f"{len(d.moved)} output(s) moved" if d.moved else "no output moved"
    return f"{d.old.label} -> {d.new.label}: {d.changes} verdict/metric change(s), {moved}"


def write(
    folder: Path, title: str, facts: list[str], runs: list[Run], drifts: list[Drift], code: int
) -> Path:
    """folder/report.md (grids, drift) and folder/summary.json; the report.md path."""
    folder.mkdir(parents=True, exist_ok=True)
    verdict = {0: "✅ parity holds", 1: "❌ parity FAILED", 2: "⚠️ could not run", 4: "⚠️ NOTHING"}
    lines = [f"# {title}", "", f"**{verdict.get(code, code)}** (exit {code})", ""]
    lines += [f"- {f}" for f in facts] + ["", "## Verdicts", "", grids_markdown(runs)]
    for d in drifts:
        lines += [f"## Drift: {drift_line(d)}", "", d.markdown]
    (folder / "report.md").write_text("\n".join(lines) + "\n")
    summary = {
        "title": title,
        "exit": code,
        "facts": facts,
        "runs": [
            {"label": r.label, "vllm": r.spec.describe(), "out": str(r.out), "exit": r.code}
            for r in runs
        ],
        "drift": [
            {"old": d.old.label, "new": d.new.label, "changes": d.changes, "moved": d.moved}
            for d in drifts
        ],
    }
    (folder / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    return folder / "report.md"


def show(runs: list[Run], drifts: list[Drift], verbose: bool) -> int:
    """The terminal end of several runs: failures, a grid per run, the drift lines; the exit."""
    for r in runs:
        print_failures(r.results, out)
        print_grid(r.results, f"{r.label}: {r.spec.describe()} (exit {r.code})", out)
    for d in drifts:
        out.print(f"drift {drift_line(d)}", highlight=False, markup=False)
        for m in d.moved if verbose else d.moved[:10]:
            out.print(f"  moved: {m}", highlight=False, markup=False)
    return combine([r.code if r.code is not None else 2 for r in runs])
