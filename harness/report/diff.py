"""`parity report diff OLD.json NEW.json`: what moved between two runs of a matrix.

Per (case, runner): the verdict and each metric before and after. New failures (a result that was
not failing and now is) fail the diff; drift, a metric that grew by more than a factor while still
inside its bound, is the early warning a maintainer wants and is listed as a warning. With
`--outputs`, the two runs' stored outputs are compared directly, per (case, runner), hf included:
the largest absolute difference, which says what moved even where both runs passed.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from harness.judge.verdict_types import is_failing
from harness.report.markdown import md_escape
from harness.report.model import Report, Result, headline
from harness.runners.outputs import load_items

DRIFT_FACTOR = 10.0
FLOOR = 1e-9  # a metric at 0 that becomes 1e-12 is not drift: below this both count as this


@dataclass
class Change:
    case_id: str
    runner: str
    kind: str  # new-failure | fixed | status | drift | added | removed
    before: str
    after: str
    detail: str = ""


@dataclass
class OutputDelta:
    """OLD's and NEW's stored outputs of one (case, runner), compared directly."""

    case_id: str
    runner: str
    max_abs: float | None  # None when they could not be compared (see problem)
    problem: str = ""


@dataclass
class Diff:
    changes: list[Change] = field(default_factory=list)
    outputs: list[OutputDelta] | None = None  # with --outputs

    def of(self, kind: str) -> list[Change]:
        return [c for c in self.changes if c.kind == kind]

    @property
    def exit_code(self) -> int:
        return 1 if self.of("new-failure") else 0


def _metric_values(r: Result) -> dict[str, tuple[float | None, float | None]]:
    return {m.name: (m.value, m.bound) for m in r.metrics}


def diff(old: Report, new: Report, factor: float = DRIFT_FACTOR) -> Diff:
    before = {(r.case_id, r.runner): r for r in old.results}
    after = {(r.case_id, r.runner): r for r in new.results}
    out = Diff()
    for key in sorted(set(before) | set(after)):
        b, a = before.get(key), after.get(key)
        if b is None:
            kind = "new-failure" if is_failing(a.status) else "added"
            out.changes.append(Change(*key, kind, "-", a.status, a.reason[:200]))
            continue
        if a is None:
            out.changes.append(Change(*key, "removed", b.status, "-"))
            continue
        if is_failing(a.status) and not is_failing(b.status):
            out.changes.append(Change(*key, "new-failure", b.status, a.status, a.reason[:200]))
        elif is_failing(b.status) and not is_failing(a.status):
            out.changes.append(Change(*key, "fixed", b.status, a.status))
        elif a.status != b.status:
            out.changes.append(Change(*key, "status", b.status, a.status, a.reason[:200]))
        bm, am = _metric_values(b), _metric_values(a)
        for name in sorted(set(bm) & set(am)):
            (vb, _), (va, bound) = bm[name], am[name]
            if vb is None or va is None:
                continue
            grew = max(va, FLOOR) / max(vb, FLOOR)
            inside = bound is None or va <= bound
            if grew > factor and inside and a.status == "pass":
                share = f", {va / bound:.2g} of its bound" if bound else ""
                out.changes.append(
                    Change(
                        *key,
                        "drift",
                        f"{name} {vb:.3g}",
                        f"{name} {va:.3g}",
                        f"grew {grew:.3g}x, still inside{share}",
                    )
                )
    return out


def resolve_output(output: str, report_dir: Path) -> Path | None:
    """Where a recorded output file is now. A run writes `<run dir>/outputs/...` and records that
    path as the run saw it; a report read from elsewhere finds it beside itself. The recorded path
    is used as it stands only when absolute (a merged report's shards): a relative one could name
    the other run's file."""
    p = Path(output)
    if "outputs" in p.parts:
        i = len(p.parts) - 1 - p.parts[::-1].index("outputs")
        beside = Path(report_dir).joinpath(*p.parts[i:])
        if beside.is_file():
            return beside
    return p if p.is_absolute() and p.is_file() else None


def _numbers(doc: object, at: str = "") -> dict[str, float]:
    """The numeric leaves of a JSON document (MTEB score files), by path."""
    if isinstance(doc, dict):
        return {k: v for key, val in doc.items() for k, v in _numbers(val, f"{at}/{key}").items()}
    if isinstance(doc, list):
        return {k: v for i, val in enumerate(doc) for k, v in _numbers(val, f"{at}/{i}").items()}
    return {at: float(doc)} if isinstance(doc, (int, float)) and not isinstance(doc, bool) else {}


def output_difference(a: Path, b: Path) -> tuple[float | None, str]:
    """(max |a - b| over every item, a problem that prevents or qualifies it, or '')."""
    if a.suffix == ".json":
        x, y = _numbers(json.loads(a.read_text())), _numbers(json.loads(b.read_text()))
        if x.keys() != y.keys():
            return None, f"different entries: {sorted(x.keys() ^ y.keys())[:3]}"
        return max((abs(x[k] - y[k]) for k in x), default=0.0), ""
    xs, _ = load_items(a)
    ys, _ = load_items(b)
    if len(xs) != len(ys):
        return None, f"{len(xs)} items in OLD, {len(ys)} in NEW"
    worst = 0.0
    for i, (p, q) in enumerate(zip(xs, ys)):
        if p.shape != q.shape:
            return None, f"item {i}: shape {p.shape} in OLD, {q.shape} in NEW"
        p64, q64 = p.astype(np.float64), q.astype(np.float64)
        d = np.where((p64 == q64) | (np.isnan(p64) & np.isnan(q64)), 0.0, np.abs(p64 - q64))
        if np.isnan(d).any():
            return math.nan, f"item {i}: NaN in one run only"
        worst = max(worst, float(d.max()) if d.size else 0.0)
    return worst, ""


def compare_outputs(old: Report, new: Report, old_dir: Path, new_dir: Path) -> list[OutputDelta]:
    """Per (case, runner) present in both runs, hf's reference outputs included: OLD's outputs
    versus NEW's."""

    def recorded(r: Report) -> dict[tuple[str, str], tuple[str | None, str]]:
        out = {(x.case_id, x.runner): (x.output, x.status) for x in r.results}
        out.update({(x.case_id, "hf"): (x.output, x.status) for x in r.references})
        return out

    before, after = recorded(old), recorded(new)
    deltas: list[OutputDelta] = []
    for key in sorted(set(before) & set(after)):
        (ob, sb), (oa, sa) = before[key], after[key]
        if ob is None and oa is None:
            continue  # neither run produced outputs here (skip, error): nothing to compare
        if ob is None or oa is None:
            side, status = ("OLD", sb) if ob is None else ("NEW", sa)
            deltas.append(OutputDelta(*key, None, f"{side} recorded no output ({status})"))
            continue
        pb, pa = resolve_output(ob, old_dir), resolve_output(oa, new_dir)
        missing = [
            f"{side} output file missing: {rec} (looked beside {where})"
            for side, p, rec, where in (("OLD", pb, ob, old_dir), ("NEW", pa, oa, new_dir))
            if p is None
        ]
        if missing:
            deltas.append(OutputDelta(*key, None, "; ".join(missing)))
        elif pb.resolve() == pa.resolve():
            deltas.append(
                OutputDelta(*key, None, f"OLD and NEW name the same file {pa}: nothing to compare")
            )
        else:
            try:
                deltas.append(OutputDelta(*key, *output_difference(pb, pa)))
            except Exception as e:  # noqa: BLE001 - a broken file is reported, the diff goes on
                deltas.append(OutputDelta(*key, None, f"unreadable: {type(e).__name__}: {e}"))
    return deltas


TITLES = {
    "new-failure": "New failures",
    "fixed": "Fixed",
    "status": "Other verdict changes",
    "drift": "Drift inside the bounds (warnings)",
    "added": "Added",
    "removed": "Removed",
}
CHANGE_HEAD = ("case", "runner", "before", "after", "detail")
OUTPUT_HEAD = ("case", "runner", "max abs difference (OLD vs NEW)", "problem")


def change_tables(d: Diff) -> list[tuple[str, str, list[tuple[str, str, str, str, str]]]]:
    """(kind, title, rows) for each kind of change there is; Markdown and HTML lay these out."""
    return [
        (
            kind,
            f"{title} ({len(d.of(kind))})",
            [(c.case_id, c.runner, c.before, c.after, c.detail) for c in d.of(kind)],
        )
        for kind, title in TITLES.items()
        if d.of(kind)
    ]


def output_summary(deltas: list[OutputDelta]) -> tuple[str, list[OutputDelta], list[OutputDelta]]:
    """(a sentence, the rows that moved or could not be compared, largest first; the identical
    ones)."""
    problems = [x for x in deltas if x.problem]
    identical = [x for x in deltas if not x.problem and x.max_abs == 0]
    moved = sorted(
        (x for x in deltas if not x.problem and x.max_abs != 0), key=lambda x: -(x.max_abs or 0)
    )
    top = (
        f", largest {moved[0].max_abs:.3g} ({moved[0].case_id} on {moved[0].runner})"
        if moved
        else ""
    )
    text = (
        f"{len(deltas)} (case, runner) outputs compared: {len(identical)} identical, {len(moved)} "
        f"differ{top}, "
        f"{len(problems)} could not be compared"
    )
    return text, problems + moved, identical


def _fmt_delta(x: OutputDelta) -> str:
    return "-" if x.max_abs is None else f"{x.max_abs:.3g}"


def to_markdown(d: Diff, old: Report, new: Report) -> str:
    head = "❌ new failures" if d.exit_code else "✅ no new failure"
    lines = [
        f"## parity diff: {head}",
        "",
        f"`{old.matrix}` @ {(old.git_commit or '?')[:10]} ({old.started}) → "
        f"`{new.matrix}` @ {(new.git_commit or '?')[:10]} ({new.started})",
        "",
    ]
    for _, title, rows in change_tables(d):
        lines += [
            f"### {title}",
            "",
            "| " + " | ".join(CHANGE_HEAD) + " |",
            "|---" * len(CHANGE_HEAD) + "|",
        ]
        lines += [f"| `{c}` | {r} | {b} | {a} | {md_escape(x)} |" for c, r, b, a, x in rows]
        lines.append("")
    if not d.changes:
        lines += ["Nothing moved.", ""]
    if d.outputs is not None:
        text, shown, identical = output_summary(d.outputs)
        lines += ["### Outputs compared directly (OLD vs NEW)", "", text + ".", ""]
        row = lambda x: f"| `{x.case_id}` | {x.runner} | {_fmt_delta(x)} | {md_escape(x.problem)} |"
        head = ["| " + " | ".join(OUTPUT_HEAD) + " |", "|---" * len(OUTPUT_HEAD) + "|"]
        if shown:
            lines += head + [row(x) for x in shown] + [""]
        if identical:
            lines += (
                [f"<details><summary>{len(identical)} identical</summary>", ""]
                + head
                + [row(x) for x in identical]
            )
            lines += ["", "</details>", ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def to_html(d: Diff, old: Report, new: Report) -> str:
    from harness.report.html_parts import Raw, badge, details, esc, page, table

    def side(r: Report) -> str:
        return (
            f"{r.matrix} @ {(r.git_commit or '?')[:10]} ({r.started}); {headline(r, marks=False)}"
        )

    verdict = "new failures" if d.exit_code else "no new failure"
    lead = (
        f"<p>{badge('fail' if d.exit_code else 'pass', verdict)}</p>"
        f"<p>OLD: {esc(side(old))}<br>NEW: {esc(side(new))}</p>"
    )
    sections = [
        (
            kind,
            title,
            table(
                CHANGE_HEAD, ([Raw(f"<code>{esc(c)}</code>"), r, b, a, x] for c, r, b, a, x in rows)
            ),
        )
        for kind, title, rows in change_tables(d)
    ]
    if not d.changes:
        sections.append(("changes", "Verdicts and metrics", "<p>Nothing moved.</p>"))
    if d.outputs is not None:
        text, shown, identical = output_summary(d.outputs)

        def rows(xs: list[OutputDelta]):
            return (
                [
                    Raw(f"<code>{esc(x.case_id)}</code>"),
                    x.runner,
                    _fmt_delta(x),
                    Raw(f'<span class="bad">{esc(x.problem)}</span>') if x.problem else "",
                ]
                for x in xs
            )

        body = f"<p>{esc(text)}.</p>" + (table(OUTPUT_HEAD, rows(shown)) if shown else "")
        if identical:
            body += details(f"{len(identical)} identical", table(OUTPUT_HEAD, rows(identical)))
        sections.append(("outputs", "Outputs compared directly (OLD vs NEW)", body))
    return page("parity diff", "parity diff", sections, lead)
