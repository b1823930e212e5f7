"""MTEB scores side by side: a table (Markdown), a chart of each runner's score deltas against
their bounds (matplotlib: PNG, and SVG inline in the HTML page beside the table). Reads only the
report's results, so it works on merged reports too."""

from __future__ import annotations

import io
from collections import defaultdict
from pathlib import Path

from harness.matrix.runner_names import REFERENCE_RUNNER
from harness.report.model import Report

RUNNER_ORDER = ("hf", "vllm-v1", "vllm-v2", "vllm-auto")


def score_table(
    report: Report,
) -> tuple[list[str], list[tuple[str, str, str, dict[str, float | None]]]]:
    """(runners, rows of (case, task, metric, {runner: score}))."""
    by_key: dict[tuple[str, str], dict[str, float | None]] = defaultdict(dict)
    metric: dict[tuple[str, str], str] = {}
    runners: set[str] = set()
    for r in report.results:
        case, task = r.case_id.rsplit(":", 1)
        by_key[(case, task)][r.runner] = r.info.get("main_score")
        metric[(case, task)] = r.info.get("main_metric") or metric.get((case, task), "")
        runners.add(r.runner)
    ordered = sorted(runners, key=lambda x: (RUNNER_ORDER.index(x) if x in RUNNER_ORDER else 9, x))
    rows = [(c, t, metric[(c, t)], by_key[(c, t)]) for c, t in sorted(by_key)]
    return ordered, rows


def to_markdown(report: Report) -> str:
    runners, rows = score_table(report)
    head = "| model case | task | metric | " + " | ".join(runners) + " | max |Δ| vs hf |"
    lines = ["## MTEB main scores", "", head, "|" + "---|" * (len(runners) + 4)]
    for case, task, metric, scores in rows:
        hf = scores.get(REFERENCE_RUNNER)
        deltas = [
            abs(s - hf)
            for r, s in scores.items()
            if r != REFERENCE_RUNNER and s is not None and hf is not None
        ]
        cells = [f"{scores[r]:.6f}" if scores.get(r) is not None else "-" for r in runners]
        lines.append(
            f"| `{case}` | {task} | {metric} | "
            + " | ".join(cells)
            + f" | {max(deltas) if deltas else 0:.2e} |"
        )
    return "\n".join(lines) + "\n"


DELTAS = (
    ("main_score_delta_vs_hf", "|runner − hf|", "o"),
    ("main_score_delta_vs_expected", "|runner − expected|", "s"),
)
FLOOR = 1e-12  # a log axis has no 0: a delta of exactly 0 is drawn here, on a line labelled as such


def delta_rows(report: Report) -> list[tuple[str, dict[str, tuple[float, float | None]]]]:
    """(label, {metric: (value, bound)}) per (case:task, runner) with a gated delta, in table order:
    the values the verdict gated, so the chart shows what was judged."""
    runners, _ = score_table(report)
    names = {n for n, _, _ in DELTAS}
    rows = []
    for r in sorted(
        report.results,
        key=lambda r: (r.case_id, runners.index(r.runner) if r.runner in runners else 9),
    ):
        ms = {
            m.name: (m.value, m.bound) for m in r.metrics if m.name in names and m.value is not None
        }
        if ms:
            rows.append((f"{r.case_id} · {r.runner}", ms))
    return rows


def figure(report: Report):
    """|runner − hf| and |runner − expected| per (case:task, runner) against each one's bound,
    log scale."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = delta_rows(report)
    fig, ax = plt.subplots(figsize=(7.5, 1.4 + 0.3 * max(1, len(rows))), dpi=110)
    ys = list(range(len(rows)))[::-1]  # first row on top, as in the table
    for (name, label, marker), dy in zip(
        DELTAS, (0.14, -0.14)
    ):  # side by side, so equal deltas stay visible
        pts = [(max(ms[name][0], FLOOR), y + dy) for (_, ms), y in zip(rows, ys) if name in ms]
        if pts:
            ax.scatter(
                [x for x, _ in pts],
                [y for _, y in pts],
                marker=marker,
                s=34,
                alpha=0.8,
                label=label,
                gid=name,
                zorder=3,
            )
    bounds = [(b, y) for (_, ms), y in zip(rows, ys) for b in {v[1] for v in ms.values() if v[1]}]
    if bounds:
        ax.scatter(
            [b for b, _ in bounds],
            [y for _, y in bounds],
            marker="|",
            s=260,
            color="#c62828",
            linewidths=2,
            label="bound",
            gid="bound",
            zorder=2,
        )
    ax.axvline(FLOOR, color="#888", linestyle=":", linewidth=1)
    ax.text(FLOOR, len(rows) - 0.4, " 0 (drawn at 1e-12)", fontsize=7, color="#555", va="bottom")
    ax.set_xscale("log")
    top = max([b for b, _ in bounds] + [x for _, ms in rows for x, _ in ms.values()] + [1e-3])
    ax.set_xlim(FLOOR / 5, top * 20)
    ax.set_ylim(-0.7, len(rows) + 0.3)
    ax.set_yticks(ys)
    ax.set_yticklabels([label for label, _ in rows], fontsize=7)
    ax.set_xlabel("|Δ main score| (log); right of the red tick is outside the bound")
    ax.set_title(
        f"MTEB main-score deltas against their bounds ({report.device})", fontsize=10, pad=22
    )
    ax.legend(fontsize=7, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=3, frameon=False)
    ax.grid(axis="x", alpha=0.3, which="major")
    fig.tight_layout()
    return fig


def plot(report: Report, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig = figure(report)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def svg(report: Report) -> str:
    """The chart as inline SVG (crisp, and readable by a parser), without the XML prologue."""
    import matplotlib.pyplot as plt

    fig = figure(report)
    buf = io.StringIO()
    fig.savefig(buf, format="svg")
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg") :]


def to_html(report: Report) -> str:
    from harness.report.html_parts import Raw, badge, esc, num, page, table

    runners, rows = score_table(report)
    scores = table(
        ("case", "task", "metric", *runners),
        (
            [
                Raw(f"<code>{esc(case)}</code>"),
                task,
                metric,
                *(num(s.get(r), ".6f") for r in runners),
            ]
            for case, task, metric, s in rows
        ),
    )
    chart = Raw(f'<div class="chart">{svg(report)}</div>')
    verdicts = table(
        ("case:task", "runner", "verdict", "reason"),
        (
            [Raw(f"<code>{esc(r.case_id)}</code>"), r.runner, badge(r.status), r.reason]
            for r in sorted(report.results, key=lambda r: (r.status == "pass", r.case_id))
        ),
    )
    side_by_side = Raw(
        f'<div style="display:flex;gap:18px;flex-wrap:wrap;align-items:flex-start">'
        f'<div style="flex:1 1 420px">{scores}</div><div style="flex:0 1 auto">{chart}</div></div>'
    )
    lead = (
        f"<p>{badge('pass' if report.ok else 'fail', 'passed' if report.ok else 'FAILED')} device "
        f"{esc(report.device)} · matrix {esc(report.matrix)} · {report.wall_seconds or 0:.0f} s</p>"
    )
    return page(
        "MTEB parity",
        "MTEB parity",
        [
            ("scores", "Main scores and their deltas", side_by_side),
            ("verdicts", "Verdicts", verdicts),
        ],
        lead,
    )


def write(report: Report, out_dir: Path) -> dict[str, Path]:
    out_dir = Path(out_dir)
    png = plot(report, out_dir / "mteb-deltas.png")
    (out_dir / "mteb.md").write_text(to_markdown(report))
    (out_dir / "mteb.html").write_text(to_html(report))
    return {"png": png, "markdown": out_dir / "mteb.md", "html": out_dir / "mteb.html"}
