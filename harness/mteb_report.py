"""MTEB scores side by side: a table (Markdown), a bar chart (matplotlib PNG) and an HTML page
with both. Reads only the report's results, so it works on merged reports too."""

from __future__ import annotations

import base64
import html
from collections import defaultdict
from pathlib import Path

from harness.report import Report

RUNNER_ORDER = ("hf", "vllm-v1", "vllm-v2", "vllm-auto")


def score_table(report: Report) -> tuple[list[str], list[tuple[str, str, str, dict[str, float | None]]]]:
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
        hf = scores.get("hf")
        deltas = [abs(s - hf) for r, s in scores.items() if r != "hf" and s is not None and hf is not None]
        cells = [f"{scores[r]:.6f}" if scores.get(r) is not None else "-" for r in runners]
        lines.append(f"| `{case}` | {task} | {metric} | " + " | ".join(cells) + f" | {max(deltas) if deltas else 0:.2e} |")
    return "\n".join(lines) + "\n"


def plot(report: Report, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runners, rows = score_table(report)
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(rows) * max(1, len(runners)) / 2 + 2), 4.5), dpi=110)
    width = 0.8 / max(1, len(runners))
    for j, runner in enumerate(runners):
        xs = [i + (j - (len(runners) - 1) / 2) * width for i in range(len(rows))]
        ys = [row[3].get(runner) or 0.0 for row in rows]
        ax.bar(xs, ys, width=width, label=runner)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([f"{c}\n{t}" for c, t, _, _ in rows], rotation=30, ha="right", fontsize=7)
    ax.set_ylabel("main score")
    ax.set_ylim(0, 1.05)
    ax.set_title(f"MTEB main scores by runner ({report.device})")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def to_html(report: Report, png: Path) -> str:
    runners, rows = score_table(report)
    img = base64.b64encode(Path(png).read_bytes()).decode()
    th = "".join(f"<th>{html.escape(r)}</th>" for r in runners)
    trs = []
    for case, task, metric, scores in rows:
        tds = "".join(f"<td>{scores[r]:.6f}</td>" if scores.get(r) is not None else "<td>-</td>" for r in runners)
        trs.append(f"<tr><td>{html.escape(case)}</td><td>{html.escape(task)}</td><td>{html.escape(metric)}</td>{tds}</tr>")
    verdicts = "".join(
        f"<tr><td>{html.escape(r.case_id)}</td><td>{html.escape(r.runner)}</td><td>{r.status}</td>"
        f"<td>{html.escape(r.reason)}</td></tr>" for r in sorted(report.results, key=lambda r: (r.status == "pass", r.case_id)))
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>MTEB parity</title>
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:4px 8px}}</style>
</head><body><h1>MTEB parity: {'passed' if report.ok else 'FAILED'}</h1>
<p>device {html.escape(report.device)} · matrix {html.escape(report.matrix)} · {report.wall_seconds or 0:.0f} s</p>
<img alt="MTEB main scores by runner" src="data:image/png;base64,{img}">
<h2>Main scores</h2><table><tr><th>case</th><th>task</th><th>metric</th>{th}</tr>{''.join(trs)}</table>
<h2>Verdicts</h2><table><tr><th>case:task</th><th>runner</th><th>verdict</th><th>reason</th></tr>{verdicts}</table>
</body></html>
"""


def write(report: Report, out_dir: Path) -> dict[str, Path]:
    out_dir = Path(out_dir)
    png = plot(report, out_dir / "mteb-scores.png")
    (out_dir / "mteb.md").write_text(to_markdown(report))
    (out_dir / "mteb.html").write_text(to_html(report, png))
    return {"png": png, "markdown": out_dir / "mteb.md", "html": out_dir / "mteb.html"}
