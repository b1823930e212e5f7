"""report.html's margin chart: inline SVG, one row per (case, runner) with bounded metrics,
grouped by family, one mark per metric at value / bound on a log axis, the bound the line at 1."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

from harness.judge.verdict_types import is_failing
from harness.report.html_parts import Raw, esc
from harness.report.model import MetricOut, Result, margin

FLOOR = 1e-12  # a log scale has no 0: a value of 0 (or below this share of its bound) is drawn here
CEIL = 1e6  # value / bound beyond this (or any value over a bound of 0) is drawn at the right edge


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
