"""The family x runner grid every human-readable report opens with: per family, the verdict counts
on vLLM V1, V2, auto (vLLM's own choice) and served (`vllm serve`, any runner)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from harness.judge.verdict_types import ORDER
from harness.matrix.runner_names import runner_info
from harness.report.model import Result

COLUMNS = ("V1", "V2", "auto", "served")
COLUMN_OF = {"v1": "V1", "v2": "V2", "auto": "auto"}  # an offline vLLM runner's variant
# one mark per verdict, worst first in a cell
MARK = {"error": "ERROR", "fail": "FAIL", "xpass": "XPASS"}
LEGEND = "cells: verdict counts (xfail: a recorded divergence; XPASS: a stale mark, a failure)"


def column(runner: str) -> str:
    """The grid column of a runner name (any served one: served; not vLLM's: its name)."""
    info = runner_info(runner)
    if info.is_server:
        return "served"
    return COLUMN_OF.get(info.variant or "", runner) if info.is_offline_vllm else runner


def grid(results: Iterable[Result]) -> tuple[list[str], dict[str, dict[str, Counter]]]:
    """(columns, {family: {column: Counter of verdicts}}): the four columns always, then any other
    runner (a test double, the reference in `golden verify`) in order of appearance."""
    cells: dict[str, dict[str, Counter]] = {}
    extra: list[str] = []
    for r in results:
        col = column(r.runner)
        if col not in COLUMNS and col not in extra:
            extra.append(col)
        cells.setdefault(r.family, {}).setdefault(col, Counter())[r.status] += 1
    return [*COLUMNS, *extra], dict(sorted(cells.items()))


def cell(counts: Counter | None) -> str:
    """'1 FAIL 3 pass': the count of each verdict, worst first; '-' for none."""
    if not counts:
        return "-"
    order = sorted(counts, key=lambda s: (ORDER.get(s, 9), s))
    return " ".join(f"{counts[s]} {MARK.get(s, s)}" for s in order)


def failing(counts: Counter | None) -> bool:
    return bool(counts) and any(s in ("fail", "error", "xpass") for s in counts)


def to_markdown(results: Iterable[Result]) -> str:
    """The grid as a Markdown table (a failing cell in bold), its legend below."""
    cols, cells = grid(results)
    if not cells:
        return "_no results_\n"
    lines = ["| family | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
    for family, row in cells.items():
        shown = [
            f"**{cell(row.get(c))}**" if failing(row.get(c)) else cell(row.get(c)) for c in cols
        ]
        lines.append(f"| {family} | " + " | ".join(shown) + " |")
    return "\n".join(lines) + f"\n\n_{LEGEND}_\n"
