"""`parity report diff OLD.json NEW.json`: what moved between two runs of a matrix.

Per (case, runner): the verdict and each metric before and after. New failures (a result that was
not failing and now is) fail the diff; drift, a metric that grew by more than a factor while still
inside its bound, is the early warning a maintainer wants and is listed as a warning.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.report import Report, Result, _md_escape
from harness.verdict import is_failing

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
class Diff:
    changes: list[Change] = field(default_factory=list)

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
                out.changes.append(Change(*key, "drift", f"{name} {vb:.3g}", f"{name} {va:.3g}",
                                          f"grew {grew:.3g}x, still inside{share}"))
    return out


TITLES = {"new-failure": "New failures", "fixed": "Fixed", "status": "Other verdict changes",
          "drift": "Drift inside the bounds (warnings)", "added": "Added", "removed": "Removed"}


def to_markdown(d: Diff, old: Report, new: Report) -> str:
    head = "❌ new failures" if d.exit_code else "✅ no new failure"
    lines = [f"## parity diff: {head}", "",
             f"`{old.matrix}` @ {(old.git_commit or '?')[:10]} ({old.started}) → "
             f"`{new.matrix}` @ {(new.git_commit or '?')[:10]} ({new.started})", ""]
    for kind, title in TITLES.items():
        rows = d.of(kind)
        if not rows:
            continue
        lines += [f"### {title} ({len(rows)})", "", "| case | runner | before | after | detail |", "|---|---|---|---|---|"]
        lines += [f"| `{c.case_id}` | {c.runner} | {c.before} | {c.after} | {_md_escape(c.detail)} |" for c in rows]
        lines.append("")
    if not d.changes:
        lines.append("Nothing moved.")
    return "\n".join(lines) + "\n"
