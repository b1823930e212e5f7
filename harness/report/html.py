"""report.html: one self-contained page (inline CSS and SVG, no script, no network) derived from
report.json, plus the HTML helpers the diff and MTEB pages share. Verdicts come from the report
(harness.judge.verdict decided them); this module only lays them out. Every text is escaped."""

from __future__ import annotations

import html
import json
import math
import re
import shlex
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from harness.judge.verdict_types import ORDER, is_failing
from harness.report import grid as report_grid
from harness.report.model import MetricOut, Report, Result, headline, margin

FLOOR = 1e-12  # a log scale has no 0: a value of 0 (or below this share of its bound) is drawn here
CEIL = 1e6  # value / bound beyond this (or any value over a bound of 0) is drawn at the right edge
LOG_TAIL = re.compile(
    r"\n?--- (\w+) log tail ---\n"
)  # runners.pool / runners.serve end a reason so

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,
"DejaVu Sans",sans-serif;margin:0;color:#1d2430;background:#f6f7f9}
main{max-width:1240px;margin:0 auto;padding:18px 28px 60px}
h1{font-size:24px;margin:8px 0 6px}h2{font-size:18px;margin:0 0
10px;padding-bottom:4px;border-bottom:1px solid #dde1e7}
h3{font-size:15px;margin:14px 0 6px}
section{background:#fff;border:1px solid #dde1e7;border-radius:6px;padding:14px 18px;margin:14px 0}
nav{font-size:13px;color:#555}nav a{margin-right:12px;color:#2456a6;text-decoration:none}
table{border-collapse:collapse;font-size:12.5px;width:100%}
th,td{border-bottom:1px solid #e6e9ee;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f0f2f5;font-weight:600}
table.facts th{background:none;width:230px;color:#555;font-weight:500}
td code{white-space:nowrap}td.num{font-variant-numeric:tabular-nums;white-space:nowrap}
code,pre,.mono{font-family:"DejaVu Sans Mono",Menlo,Consolas,monospace;font-size:12px}
pre{background:#f3f4f6;border:1px solid
#e3e6ea;padding:8px;overflow:auto;max-height:420px;white-space:pre-wrap;word-break:break-word}
details{margin:4px 0}summary{cursor:pointer;color:#2456a6}
.st{display:inline-block;border-radius:3px;padding:0
6px;font-size:12px;font-weight:600;color:#fff;background:#6b7280}
.st-pass{background:#1f8a4c}.st-fail,.st-error,.st-xpass{background:#c62828}.st-xfail{background:#d9822b}.st-skip{background:#8a94a3}
.counts .st{font-size:13px;padding:2px 8px;margin-right:6px}
.card{border-left:4px solid #c62828;padding:6px 12px;margin:10px 0;background:#fdf6f6}
.muted{color:#667085}.bad{color:#c62828;font-weight:600}
.chart{overflow-x:auto}
table.inner{width:auto;font-size:12px}table.inner th{background:#f7f8fa}
table.divergences td:nth-child(4){width:42%}
svg text{font-family:system-ui,"DejaVu Sans",sans-serif}
"""


class Raw(str):
    """Markup built by these helpers; any other text placed in a page is escaped."""


def esc(x: object) -> str:
    return html.escape("" if x is None else str(x), quote=True)


def cell(x: object) -> str:
    return x if isinstance(x, Raw) else esc(x)


def table(headers: Iterable[str] | None, rows: Iterable[Iterable[object]], cls: str = "") -> Raw:
    """`headers` None: a table of facts, the first cell of each row its name."""
    head = (
        ""
        if headers is None
        else "<thead><tr>" + "".join(f"<th>{cell(h)}</th>" for h in headers) + "</tr></thead>"
    )
    tag = "td" if headers is not None else "th"
    body = "".join(
        "<tr>"
        + "".join(
            f"<{tag if i == 0 else 'td'}>{cell(c)}</{tag if i == 0 else 'td'}>"
            for i, c in enumerate(row)
        )
        + "</tr>"
        for row in rows
    )
    return Raw(f'<table class="{esc(cls)}">{head}<tbody>{body}</tbody></table>')


def num(v: float | None, fmt: str = ".3g") -> Raw:
    return Raw('<span class="num">' + ("-" if v is None else esc(format(v, fmt))) + "</span>")


def details(summary: object, body: str, open_: bool = False) -> Raw:
    return Raw(
        f"<details{' open' if open_ else ''}><summary>{cell(summary)}</summary>{body}</details>"
    )


def pre(text: str) -> Raw:
    return Raw(f"<pre>{esc(text)}</pre>")


def badge(status: str, text: str | None = None) -> Raw:
    return Raw(f'<span class="st st-{esc(status)}">{esc(status if text is None else text)}</span>')


def section(id_: str, title: str, body: str) -> Raw:
    return Raw(f'<section id="{esc(id_)}"><h2>{esc(title)}</h2>{body}</section>')


def page(title: str, heading: str, sections: list[tuple[str, str, str]], lead: str = "") -> str:
    """A whole document: (id, title, body) sections behind a navigation line; inline CSS only."""
    nav = "".join(f'<a href="#{esc(i)}">{esc(t)}</a>' for i, t, _ in sections)
    body = "".join(section(i, t, b) for i, t, b in sections)
    return (
        f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" '
        f'content="width=device-width,initial-scale=1"><title>{esc(title)}</title>'
        f"<style>{CSS}</style></head><body><main><h1>{esc(heading)}</h1>{lead}<nav>{nav}</nav>{body}"
        f"</main></body></html>\n"
    )


def split_log_tail(reason: str) -> tuple[str, str]:
    """(the reason itself, the worker or server log tail it ends with, or '')."""
    m = LOG_TAIL.search(reason)
    return (reason[: m.start()], reason[m.end() :]) if m else (reason, "")


def metric_rows(r: Result) -> list[list[object]]:
    """One row per metric; in half precision with calibrated bounds, also HF's own error in that
    dtype (against HF in float32) and the runner's error over it."""
    return [
        [
            m.name,
            num(m.value),
            num(m.bound),
            num(m.value / m.bound if m.bound and m.value is not None else None, ".2g"),
            num(m.ref_error),
            num(m.ratio, ".2g"),
            "ok" if m.ok else Raw('<span class="bad">over its bound</span>'),
        ]
        for m in r.metrics
    ]


METRIC_HEAD = (
    "metric",
    "value",
    "bound",
    "value / bound",
    "HF's own error (half)",
    "value / HF's own",
    "",
)


# ---- the margin chart: value / bound per (case, runner) metric, log scale, bound at 1 ----------


def chart_ratio(m: MetricOut) -> tuple[float, str]:
    """(where to draw value / bound, a note when it is not drawn where it is)."""
    v, b = m.value, m.bound
    if v is None or not math.isfinite(v):
        return CEIL, f"no finite value ({v}), drawn at the right edge"
    if b == 0:
        return (
            (FLOOR, "0 at a bound of 0, drawn at the floor")
            if v == 0
            else (CEIL, "over a bound of 0, drawn at the right edge")
        )
    r = v / b
    if r <= 0:
        return FLOOR, f"value {v:.3g}, drawn at the {FLOOR:.0e} floor"
    if r < FLOOR:
        return FLOOR, f"{r:.2g} of its bound, drawn at the {FLOOR:.0e} floor"
    if r > CEIL:
        return CEIL, f"{r:.3g} of its bound, drawn at the right edge"
    return r, ""


SHAPES = ("circle", "square", "triangle", "diamond", "down", "cross")


def _shape(kind: str, x: float, y: float, s: float = 4.2) -> tuple[str, str]:
    """(element, attributes) of a marker centred on (x, y)."""
    if kind == "circle":
        return "circle", f'cx="{x:.1f}" cy="{y:.1f}" r="{s:.1f}"'
    pts = {
        "square": [(-s, -s), (s, -s), (s, s), (-s, s)],
        "triangle": [(0, -s * 1.2), (s * 1.1, s * 0.9), (-s * 1.1, s * 0.9)],
        "diamond": [(0, -s * 1.3), (s * 1.1, 0), (0, s * 1.3), (-s * 1.1, 0)],
        "down": [(0, s * 1.2), (s * 1.1, -s * 0.9), (-s * 1.1, -s * 0.9)],
        "cross": [
            (-s, -s / 3),
            (-s / 3, -s / 3),
            (-s / 3, -s),
            (s / 3, -s),
            (s / 3, -s / 3),
            (s, -s / 3),
            (s, s / 3),
            (s / 3, s / 3),
            (s / 3, s),
            (-s / 3, s),
            (-s / 3, s / 3),
            (-s, s / 3),
        ],
    }[kind]
    return "polygon", 'points="' + " ".join(f"{x + dx:.1f},{y + dy:.1f}" for dx, dy in pts) + '"'


@dataclass(frozen=True)
class _Frame:
    """The margin chart's geometry: a log axis of value / bound from FLOOR to CEIL."""

    height: int
    lo: int = round(math.log10(FLOOR))
    hi: int = round(math.log10(CEIL))
    label_w: int = 420
    left: int = 432
    right: int = 1150
    width: int = 1180
    row_h: int = 13
    fam_h: int = 22
    top: int = 74

    def x_of(self, ratio: float) -> float:
        return self.left + (math.log10(ratio) - self.lo) / (self.hi - self.lo) * (
            self.right - self.left
        )


def margin_chart(results: list[Result]) -> Raw:
    """Inline SVG: one row per (case, runner) with bounded metrics, grouped by family; one mark per
    bounded metric at value / bound on a log axis; the bound is the line at 1."""
    rows = [r for r in results if any(m.bound is not None for m in r.metrics)]
    if not rows:
        return Raw('<p class="muted">No result has a bounded metric to draw.</p>')
    names = sorted({m.name for r in rows for m in r.metrics if m.bound is not None})
    shape_of = {n: SHAPES[i % len(SHAPES)] for i, n in enumerate(names)}
    by_family: dict[str, list[Result]] = defaultdict(list)
    for r in rows:
        by_family[r.family].append(r)
    f = _Frame(height=_Frame.top + len(by_family) * _Frame.fam_h + len(rows) * _Frame.row_h + 40)
    out: list[str] = [
        f'<svg id="margin-chart" xmlns="http://www.w3.org/2000/svg" width="{f.width}" '
        f'height="{f.height}" '
        f'viewBox="0 0 {f.width} {f.height}" role="img" aria-label="value over bound per metric, '
        'log scale">',
        f'<rect x="{f.x_of(1):.1f}" y="{f.top - 10}" width="{f.right - f.x_of(1):.1f}" '
        f'height="{f.height - f.top - 20}" fill="#fdecec"/>',
    ]
    out += _chart_legend(f, names, shape_of)
    out += _chart_axis(f)
    y = f.top
    for fam in sorted(by_family):
        rs = sorted(by_family[fam], key=lambda r: (r.case_id, r.runner))
        worst = (
            max((margin(r) or 0.0) for r in rs if r.status == "pass")
            if any(r.status == "pass" for r in rs)
            else None
        )
        note = f" · closest pass {worst:.2g} of its bound" if worst else ""
        out.append(
            f'<text x="6" y="{y + 15}" font-size="12.5" font-weight="700">{esc(fam)}'
            f'<tspan font-weight="400" fill="#667085">  {len(rs)} '
            f"result(s){esc(note)}</tspan></text>"
        )
        out.append(f'<line x1="6" y1="{y + 19}" x2="{f.right}" y2="{y + 19}" stroke="#c9ced6"/>')
        y += f.fam_h
        for i, r in enumerate(rs):
            out += _chart_row(f, r, y, i, shape_of)
            y += f.row_h
    out.append("</svg>")
    return Raw('<div class="chart">' + "".join(out) + "</div>")


def _chart_legend(f: _Frame, names: list[str], shape_of: dict[str, str]) -> list[str]:
    lx = f.left
    out = [
        f'<text x="{f.label_w}" y="16" text-anchor="end" font-size="12" font-weight="600">metric '
        "value / its bound</text>"
    ]
    for n in names:
        el, attrs = _shape(shape_of[n], lx + 5, 12)
        out.append(
            f'<{el} {attrs} fill="#555"/><text x="{lx + 14}" y="16" font-size="12">{esc(n)}</text>'
        )
        lx += 24 + 7 * len(n)
    out.append(
        f'<text x="{f.left - 200}" y="36" font-size="11.5"><tspan fill="#1f8a4c">● within its '
        "bound</tspan>"
        f'<tspan fill="#d9822b" dx="14">● outside, a recorded divergence (xfail)</tspan>'
        f'<tspan fill="#c62828" dx="14">● outside its bound</tspan>'
        f'<tspan fill="#333" dx="14">○ hollow: 0 or below {FLOOR:.0e}, drawn at the '
        "floor</tspan></text>"
    )
    return out


def _chart_axis(f: _Frame) -> list[str]:
    """A tick per decade, labelled every other; the floor's label and the bound's line at 1."""
    out: list[str] = []
    axis_y, lo, hi, height = f.top - 14, f.lo, f.hi, f.height
    for d in range(lo, hi + 1):
        x = f.x_of(10.0**d)
        out.append(
            f'<line x1="{x:.1f}" y1="{axis_y + 4}" x2="{x:.1f}" y2="{height - 24}" '
            'stroke="#e3e6ea" stroke-width="1"/>'
        )
        if d % 2 == 0 or d == hi:
            label = (
                f"≤1e{d}" if d == lo else (f"≥1e{d}" if d == hi else ("1" if d == 0 else f"1e{d}"))
            )
            out.append(
                f'<text x="{x:.1f}" y="{axis_y}" font-size="10.5" text-anchor="middle" '
                f'fill="#555">{label}</text>'
            )
    out.append(
        f'<text x="{f.x_of(FLOOR) + 3:.1f}" y="{height - 10}" font-size="10.5" fill="#555">floor: '
        "value 0</text>"
    )
    bx = f.x_of(1.0)
    out.append(
        f'<line id="bound-line" class="bound" x1="{bx:.1f}" y1="{axis_y + 4}" x2="{bx:.1f}" '
        f'y2="{height - 24}" '
        f'stroke="#c62828" stroke-width="2"/>'
    )
    out.append(
        f'<text x="{bx + 4:.1f}" y="{height - 10}" font-size="11" fill="#c62828" '
        'font-weight="600">bound (value = bound)</text>'
    )
    return out


def _chart_row(f: _Frame, r: Result, y: float, i: int, shape_of: dict[str, str]) -> list[str]:
    """One (case, runner): its label and a mark per bounded metric."""
    out: list[str] = []
    cy = y + f.row_h / 2
    if i % 2:
        out.append(
            f'<rect x="6" y="{y}" width="{f.right - 6}" height="{f.row_h}" fill="#000" '
            'fill-opacity="0.03"/>'
        )
    label = f"{r.case_id} · {r.runner}"
    colour = "#c62828" if is_failing(r.status) else "#1d2430"
    out.append(
        f'<text x="{f.label_w}" y="{cy + 3.8:.1f}" font-size="10.5" text-anchor="end" '
        f'fill="{colour}">'
        f"{esc(label)}</text>"
    )
    for m in r.metrics:
        if m.bound is None:
            continue
        ratio, note = chart_ratio(m)
        state = "ok" if m.ok else ("expected" if r.status == "xfail" else "over")
        fill = {"ok": "#1f8a4c", "expected": "#d9822b", "over": "#c62828"}[state]
        floored = ratio == FLOOR
        el, attrs = _shape(shape_of[m.name], f.x_of(ratio), cy)
        paint = (
            f'fill="none" stroke="{fill}" stroke-width="1.4"'
            if floored
            else f'fill="{fill}" fill-opacity="0.8"'
        )
        tip = (
            f"{r.case_id} on {r.runner} ({r.status}): {m.name} = {m.value!r}, bound "
            f"{m.bound!r}"
            + (f", {m.value / m.bound:.3g} of its bound" if m.bound and m.value is not None else "")
            + (f"; {note}" if note else "")
        )
        out.append(
            f'<{el} class="mark {state}{" floored" if floored else ""}" '
            f'data-case="{esc(r.case_id)}" '
            f'data-runner="{esc(r.runner)}" data-metric="{esc(m.name)}" '
            f'data-ratio="{ratio:.6g}" '
            f"{attrs} {paint}><title>{esc(tip)}</title></{el}>"
        )
    return out


# ---- report.html ------------------------------------------------------------------------------


def _counts(report: Report) -> Raw:
    c = report.counts()
    return Raw(
        '<p class="counts">' + "".join(badge(k, f"{c[k]} {k}") for k in ORDER if c.get(k)) + "</p>"
    )


def _grid(report: Report) -> str:
    """The grid report.md and the terminal open with (harness.report.grid)."""
    cols, cells = report_grid.grid(report.results)
    rows = [[fam, *(report_grid.cell(row.get(c)) for c in cols)] for fam, row in cells.items()]
    return (
        table(["family", *cols], rows, "grid") + f'<p class="muted">{esc(report_grid.LEGEND)}</p>'
    )


def _summary(report: Report) -> str:
    facts = [
        ("device", report.device),
        ("matrix", report.matrix),
        ("results", len(report.results)),
        ("wall time", f"{report.wall_seconds:.0f} s" if report.wall_seconds else "-"),
        ("started", report.started),
        ("finished", report.finished or "-"),
        ("exit code", report.exit_code()),
    ]
    if report.shard:
        facts.append(("shard", report.shard))
    if report.partial:
        facts.append(("PARTIAL", report.partial_reason))
    remote = sorted({r.case_id for r in report.results if r.model.get("trust_remote_code")})
    if remote:
        facts.append(("trust_remote_code opted into by", ", ".join(remote)))
    return _counts(report) + table(None, facts, "facts")


def _failure_card(r: Result) -> str:
    reason, tail = split_log_tail(r.reason)
    parts = [
        f'<div class="card" id="{esc("fail-" + r.case_id + "-" + r.runner)}">',
        f"<h3>{badge(r.status)} <code>{esc(r.case_id)}</code> on {esc(r.runner_label)}</h3>",
        f'<p class="muted">{esc(r.where)} · {esc(r.family)} · {esc(r.task)} · {esc(r.dtype)}</p>',
        pre(reason or "(no reason given)"),
    ]
    if r.metrics:
        parts.append(table(METRIC_HEAD, metric_rows(r)))
    if tail:
        parts.append(details("log tail", pre(tail)))
    if r.info:
        parts.append(
            details(
                "what the runner reported (info)",
                pre(json.dumps(r.info, indent=1, sort_keys=True, default=str)),
            )
        )
    return "".join(parts) + "</div>"


def _failures(report: Report) -> str:
    failing = sorted(
        (r for r in report.results if is_failing(r.status)),
        key=lambda r: (ORDER.get(r.status, 9), r.case_id, r.runner),
    )
    body = "".join(_failure_card(r) for r in failing) or "<p>None: no result failed or errored.</p>"
    bad_refs = [x for x in report.references if x.status != "ok"]
    if bad_refs:
        body += "<h3>Reference (hf) problems</h3>" + table(
            ("case", "status", "reason", "log tail"),
            (
                [
                    x.case_id,
                    badge(x.status),
                    split_log_tail(x.reason)[0],
                    details("log tail", pre(split_log_tail(x.reason)[1]))
                    if split_log_tail(x.reason)[1]
                    else "",
                ]
                for x in bad_refs
            ),
        )
    return body


def _divergences(report: Report) -> str:
    xf = sorted(
        (r for r in report.results if r.status == "xfail"), key=lambda r: (r.case_id, r.runner)
    )
    if not xf:
        return "<p>None recorded in this run.</p>"
    rows: list[list[object]] = []
    for r in xf:
        measured = (
            table(
                ("metric", "measured", "bound", "envelope", "of envelope"),
                (
                    [
                        m.name,
                        num(m.value),
                        num(m.bound),
                        num(r.envelope.get(m.name)),
                        num(
                            m.value / r.envelope[m.name]
                            if r.envelope.get(m.name) and m.value is not None
                            else None,
                            ".2g",
                        ),
                    ]
                    for m in r.metrics
                ),
                "inner",
            )
            if r.metrics
            else "recorded as raising an error"
        )
        rows.append(
            [
                Raw(f"<code>{esc(r.case_id)}</code>"),
                r.runner,
                measured,
                Raw(f'<span class="muted">{esc(r.reason)}</span>'),
            ]
        )
    note = (
        ""
        if any(r.envelope for r in xf)
        else '<p class="muted">This report predates envelopes stored as data (Result.envelope): '
        "each envelope is written in its reason.</p>"
    )
    return note + table(
        ("case", "runner", "measured now", "recorded divergence"), rows, "divergences"
    )


def _audit(report: Report) -> str:
    if not report.audit:
        return "<p>No vllm-auto result in this run.</p>"
    return table(
        ("family", "case", "expected", "actual", "why"),
        (
            [
                a.family,
                Raw(f"<code>{esc(a.case_id)}</code>"),
                (a.expected or "-").upper(),
                (a.actual or "-").upper()
                if a.ok
                else Raw(f'<span class="bad">{esc((a.actual or "-").upper())}</span>'),
                a.why,
            ]
            for a in sorted(report.audit, key=lambda a: (a.family, a.case_id))
        ),
    )


def _result_row(r: Result) -> list[object]:
    metrics = Raw(
        "<br>".join(
            f"{esc(m.name)} {num(m.value)}" + (f" ≤ {num(m.bound)}" if m.bound is not None else "")
            for m in r.metrics
        )
        or "-"
    )
    t = (r.load_seconds or 0) + (r.run_seconds or 0)
    return [
        Raw(f"<code>{esc(r.case_id)}</code>"),
        r.runner_label,
        badge(r.status),
        metrics,
        f"{t:.1f} s",
    ]


def _results(report: Report) -> str:
    skips = sorted(
        (r for r in report.results if r.status == "skip"), key=lambda r: (r.case_id, r.runner)
    )
    passes: dict[str, list[Result]] = defaultdict(list)
    for r in report.results:
        if r.status == "pass":
            passes[r.family].append(r)
    body = ""
    if skips:
        body += f"<h3>Skipped ({len(skips)})</h3>" + table(
            ("case", "runner", "verdict", "reason"),
            (
                [Raw(f"<code>{esc(r.case_id)}</code>"), r.runner_label, badge(r.status), r.reason]
                for r in skips
            ),
        )
    if passes:
        body += f"<h3>Passed ({sum(map(len, passes.values()))}), one fold per family</h3>"
        for fam in sorted(passes):
            rs = sorted(passes[fam], key=lambda r: (r.case_id, r.runner))
            body += details(
                f"{fam}: {len(rs)} passed",
                table(
                    ("case", "runner", "verdict", "metrics (value ≤ bound)", "time"),
                    map(_result_row, rs),
                ),
            )
    return body or "<p>No result.</p>"


def _versions(report: Report) -> list[tuple[str, str]]:
    """Library versions each runner's worker reported (identical ones folded)."""
    seen: dict[str, set[str]] = defaultdict(set)
    for who, info in [(r.runner, r.info) for r in report.results] + [
        ("hf", x.info) for x in report.references
    ]:
        v = info.get("versions")
        if v:
            seen[json.dumps(v, sort_keys=True)].add(who)
    return [
        (", ".join(sorted(who)), ", ".join(f"{k} {v}" for k, v in sorted(json.loads(doc).items())))
        for doc, who in sorted(seen.items())
    ]


def _provenance(report: Report) -> str:
    facts: list[tuple[object, object]] = [
        ("harness", report.harness_version),
        ("git commit", report.git_commit or "-"),
        (
            "command",
            Raw(f"<code>{esc(shlex.join(report.command))}</code>") if report.command else "-",
        ),
        ("matrix", report.matrix),
        ("matrix sha256", Raw(f"<code>{esc(report.matrix_sha256)}</code>")),
        ("selection", json.dumps(report.selection, sort_keys=True) if report.selection else "-"),
        ("device", report.device),
        ("shard", report.shard or "-"),
        ("started / finished", f"{report.started} / {report.finished or '-'}"),
    ]
    from harness.engine.target import describe_provenance

    facts += [("vLLM under test", describe_provenance(p)) for p in report.vllm_under_test]
    facts += [(f"versions ({who})", v) for who, v in _versions(report)]
    if report.phases:
        facts.append(("phases", ", ".join(f"{k} {v:.1f} s" for k, v in report.phases.items())))
    if report.peak_rss_mb:
        facts.append(
            ("peak RSS", ", ".join(f"{k} {v:.0f} MiB" for k, v in report.peak_rss_mb.items()))
        )
    body = table(None, facts, "facts")
    if report.workers:
        keys = sorted({k for w in report.workers for k in w})
        body += details(
            f"{len(report.workers)} worker process(es)",
            table(
                keys,
                (
                    [
                        w.get(k, "") if not isinstance(w.get(k), float) else f"{w[k]:.1f}"
                        for k in keys
                    ]
                    for w in report.workers
                ),
            ),
        )
    return body


def to_html(report: Report) -> str:
    results = sorted(report.results, key=lambda r: (ORDER.get(r.status, 9), r.case_id, r.runner))
    n_ungated = sum(m.bound is None for r in results for m in r.metrics)
    chart_note = (
        '<p class="muted">Each mark is one metric of one (case, runner): its value divided by its '
        "bound, "
        "on a log scale. Right of the red line is outside the bound. Hover a mark for its numbers."
        + (f" {n_ungated} metric(s) without a bound are not drawn." if n_ungated else "")
        + "</p>"
    )
    sections = [
        ("grid", "Family x runner", _grid(report)),
        ("summary", "Verdict and counts", _summary(report)),
        ("failures", "Failures and errors", _failures(report)),
        ("margins", "How close each metric is to its bound", chart_note + margin_chart(results)),
        ("divergences", "Recorded divergences (xfail) and their envelopes", _divergences(report)),
        ("audit", "Default-runner audit (vllm-auto)", _audit(report)),
        ("results", "Other results", _results(report)),
        ("provenance", "Provenance", _provenance(report)),
    ]
    status = "fail" if not report.ok else ("skip" if report.nothing_compared else "pass")
    word = {"fail": "FAILED", "skip": "nothing compared", "pass": "passed"}[status]
    lead = f"<p>{badge(status, word)}</p>"
    return page(f"parity: {report.matrix}", headline(report, marks=False), sections, lead)
