"""What a run prints once it is done: the failures, the family x runner grid and the verdict;
every row with --verbose."""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Console
from rich.table import Table

from harness.cli.common import out
from harness.judge.verdict_types import is_failing
from harness.report import grid as report_grid
from harness.report.markdown import metrics_cell
from harness.report.model import ORDER, Report, Result

STYLE = {
    "pass": "green",
    "xfail": "yellow",
    "skip": "dim",
    "fail": "bold red",
    "error": "bold red",
    "xpass": "bold red",
}


def print_rows(report: Report, console: Console = out) -> None:
    """Every (case, runner) row: verdict, metrics, time and reason."""
    t = Table(title=f"parity · {report.matrix} · device {report.device}", show_lines=False)
    for col in ("case", "runner", "verdict", "metrics", "time", "reason"):
        t.add_column(col, overflow="fold")
    for r in sorted(report.results, key=lambda r: (r.case_id, r.runner)):
        t.add_row(
            r.case_id,
            r.runner_label,
            f"[{STYLE.get(r.status, '')}]{r.status}[/]",
            metrics_cell(r).replace("<br>", "\n"),
            f"{(r.load_seconds or 0) + (r.run_seconds or 0):.1f}s",
            r.reason[:200],
        )
    console.print(t)


def print_failures(results: Iterable[Result], console: Console = out) -> None:
    for r in sorted(results, key=lambda r: (ORDER.get(r.status, 9), r.case_id, r.runner)):
        if is_failing(r.status):
            console.print(
                f"[bold red]{r.status.upper()}[/] {r.case_id} on {r.runner_label} ({r.where}): "
                f"{r.reason}",
                highlight=False,
                soft_wrap=True,
            )


def print_grid(results: list[Result], title: str, console: Console = out) -> None:
    """The family x runner grid (V1, V2, auto, served): verdict counts per cell."""
    cols, cells = report_grid.grid(results)
    t = Table(title=title, caption=report_grid.LEGEND)
    t.add_column("family", overflow="fold")
    for c in cols:
        t.add_column(c)
    for family, row in cells.items():
        shown = []
        for c in cols:
            text = report_grid.cell(row.get(c))
            shown.append(f"[bold red]{text}[/]" if report_grid.failing(row.get(c)) else text)
        t.add_row(family, *shown)
    console.print(t)


def print_audit(report: Report, verbose: bool, console: Console = out) -> None:
    """The default-runner audit: every row with --verbose, else only the rows that disagree."""
    rows = [r for r in report.audit if verbose or not r.ok]
    if not rows:
        return
    a = Table(title="default-runner audit (vllm-auto)")
    for col in ("family", "case", "expected", "actual", "why"):
        a.add_column(col, overflow="fold")
    for row in sorted(rows, key=lambda r: (r.family, r.case_id)):
        actual = (row.actual or "-").upper()
        a.add_row(
            row.family,
            row.case_id,
            (row.expected or "-").upper(),
            actual if row.ok else f"[bold red]{actual}[/]",
            row.why,
        )
    console.print(a)


def verdict_line(report: Report) -> str:
    c = report.counts()
    summary = ", ".join(f"{c[k]} {k}" for k in ORDER if c.get(k))
    if not report.ok:
        verdict = "[bold red]FAILED[/]"
    elif report.nothing_compared:
        verdict = "[bold yellow]NOTHING COMPARED[/] (every result skipped; exit 4)"
    else:
        verdict = "[green]PASSED[/]"
    if report.partial:
        verdict += f" [bold red](partial: {report.partial_reason})[/]"
    return f"{verdict} · {summary} · {report.wall_seconds or 0:.1f} s"


def print_table(report: Report, console: Console = out, verbose: bool = False) -> None:
    """The end of a run: every row (--verbose only), the failures, the grid, the verdict."""
    if verbose:
        print_rows(report, console)
    print_failures(report.results, console)
    print_audit(report, verbose, console)
    print_grid(report.results, f"parity · {report.matrix} · device {report.device}", console)
    console.print(verdict_line(report))
