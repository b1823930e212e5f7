"""report.md: the Markdown of a report, sized for a PR comment."""

from __future__ import annotations

from harness.judge.verdict_types import ORDER
from harness.report import grid
from harness.report.model import MetricOut, Report, Result, headline, margin


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.2e}"


def metrics_cell(r: Result) -> str:
    parts = []
    for m in r.metrics:
        op = "≤" if m.ok else ">"
        bound = f" {op} {_fmt(m.bound)}" if m.bound is not None else ""
        parts.append(f"{m.name} {_fmt(m.value)}{bound}{_own_error(m)}")
    return "<br>".join(parts) or "-"


def _own_error(m: MetricOut) -> str:
    """' (HF's own 2.1e-03, 1.3x)' for a calibrated half-precision metric, else ''."""
    if m.ref_error is None:
        return ""
    ratio = f", {m.ratio:.2g}x" if m.ratio is not None else ""
    return f" (HF's own {_fmt(m.ref_error)}{ratio})"


def md_escape(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


MARKDOWN_BUDGET = 60_000  # characters; GitHub refuses a comment over 65,536


def _folded_passes(passes: list[Result]) -> list[str]:
    """Passes folded into one line per family: count, runners and the closest call to a bound."""
    if not passes:
        return []
    by_family: dict[str, list[Result]] = {}
    for r in passes:
        by_family.setdefault(r.family, []).append(r)
    out = [
        "",
        f"<details><summary>{len(passes)} passes, one line per family, each with its closest call "
        "to a bound</summary>",
        "",
        "| family | passes | runners | closest to its bound |",
        "|---|---|---|---|",
    ]
    for fam, rs in sorted(by_family.items()):
        worst = max(rs, key=lambda r: margin(r) or 0.0)
        m = margin(worst)
        closest = (
            f"`{worst.case_id}` on {worst.runner}: {m:.2g} of its bound" if m is not None else "-"
        )
        out.append(
            f"| {fam} | {len(rs)} | {', '.join(sorted({r.runner for r in rs}))} | {closest} |"
        )
    return out + ["", "</details>"]


FULL_REASON = 2_500  # characters of one reason shown whole (a server log's first error block)


def _full_reasons(shown: list[Result], max_reason: int, used: int) -> list[str]:
    """The whole reason of each listed row the table cut or that runs over several lines (a
    server's or worker's first error block and log tail): folded, verbatim, within the budget."""
    long = [r for r in shown if len(r.reason) > max_reason or "\n" in r.reason.strip()]
    if not long:
        return []
    out = ["", "### Why, in full (the reasons the table cuts)", ""]
    for i, r in enumerate(long):
        text = r.reason.strip()
        text = text if len(text) <= FULL_REASON else text[: FULL_REASON - 1] + "…"
        block = [
            f"<details><summary><code>{r.case_id}</code> · {r.runner_label} · {r.status}</summary>",
            "",
            "~~~text",
            text.replace("~~~", "~ ~ ~"),
            "~~~",
            "</details>",
        ]
        if used + sum(len(x) + 1 for x in out + block) > MARKDOWN_BUDGET * 0.85:
            out.append(
                f"{len(long) - i} more not shown (the comment limit); all are in report.json"
            )
            break
        out += block
    return out


def to_markdown(report: Report, max_reason: int = 300) -> str:
    c = report.counts()
    head = headline(report)
    lines = [
        f"## {head}",
        "",
        " · ".join(f"{c[k]} {k}" for k in ORDER if c.get(k))
        + f" · device `{report.device}` · matrix `{report.matrix}`"
        + (f" · {report.wall_seconds:.0f} s" if report.wall_seconds else ""),
        "",
        grid.to_markdown(report.results),
        "| case | runner | verdict | metrics (value vs bound) | time | reason |",
        "|---|---|---|---|---|---|",
    ]
    rows = sorted(report.results, key=lambda r: (ORDER.get(r.status, 9), r.case_id, r.runner))
    shown = 0
    for r in rows:
        if r.status in ("xfail", "pass"):
            continue  # listed apart below
        t = (r.load_seconds or 0) + (r.run_seconds or 0)
        reason = r.reason if len(r.reason) <= max_reason else r.reason[: max_reason - 1] + "…"
        row = (
            f"| `{r.case_id}` | {r.runner_label} | **{r.status}** | {metrics_cell(r)} | "
            f"{t:.1f} s | {md_escape(reason)} |"
        )
        if sum(len(x) + 1 for x in lines) + len(row) > MARKDOWN_BUDGET * 0.7:
            rest = [x for x in rows if x.status not in ("xfail", "pass")][shown:]
            lines.append(
                f"| … | | | | | {len(rest)} more rows not shown (the comment limit); all are in "
                "report.json |"
            )
            break
        lines.append(row)
        shown += 1
    listed = [r for r in rows if r.status not in ("xfail", "pass")][:shown]
    lines += _full_reasons(listed, max_reason, len("\n".join(lines)))
    lines += _folded_passes([r for r in rows if r.status == "pass"])
    remote = sorted({r.case_id for r in report.results if r.model.get("trust_remote_code")})
    if remote:
        lines += [
            "",
            "⚠️ `trust_remote_code` was opted into by: " + ", ".join(f"`{c}`" for c in remote),
        ]
    lines += _expected_and_audit(report, [r for r in rows if r.status == "xfail"], max_reason)
    lines += _notices(report, max_reason)
    lines += [
        "",
        f"<sub>parity-harness {report.harness_version}"
        + (f" @ {report.git_commit[:10]}" if report.git_commit else "")
        + f" · started {report.started}</sub>",
        "",
    ]
    return "\n".join(lines)


def _expected_and_audit(report: Report, expected: list, max_reason: int) -> list[str]:
    """The recorded divergences measured now, and the default-runner audit."""
    lines: list[str] = []
    if expected:
        lines += [
            "",
            "### Expected divergences (recorded in the matrix; they do not fail the gate)",
            "",
            "| case | runner | measured now | recorded |",
            "|---|---|---|---|",
        ]
        for r in expected:
            lines.append(
                f"| `{r.case_id}` | {r.runner_label} | {metrics_cell(r)} | "
                f"{md_escape(r.reason[:max_reason])} |"
            )
    if report.audit:
        lines += [
            "",
            "### Default-runner audit (vLLM left to decide: `vllm-auto`)",
            "",
            "| family | case | expected | actual | why |",
            "|---|---|---|---|---|",
        ]
        for a in sorted(report.audit, key=lambda a: (a.family, a.case_id)):
            mark = "" if a.ok else " ❌"
            lines.append(
                f"| {a.family} | `{a.case_id}` | {(a.expected or '-').upper()} | "
                f"{(a.actual or '-').upper()}{mark} | {md_escape(a.why)} |"
            )
    return lines


def _notices(report: Report, max_reason: int) -> list[str]:
    """Reference problems, unproven runners and what was under test."""
    lines: list[str] = []
    # a skipped reference is no problem: every row of its case says why it did not run
    bad_refs = [x for x in report.references if x.status not in ("ok", "skip")]
    if bad_refs:
        lines += ["", "### Reference (hf) problems", ""]
        lines += [
            f"- `{x.case_id}`: **{x.status}** {md_escape(x.reason[:max_reason])}" for x in bad_refs
        ]
    unproven = sorted(
        {r.runner_label for r in report.results if r.info.get("runner_proven") is False}
    )
    if unproven:
        lines += [
            "",
            "⚠️ Which model runner ran was not read from the engine (server log only, "
            "unproven) for: " + ", ".join(unproven),
        ]
    from harness.engine.target import describe_provenance

    lines += ["", *(f"Under test: {describe_provenance(p)}" for p in report.vllm_under_test)]
    return lines
