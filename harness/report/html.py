"""report.html: one self-contained page (inline CSS and SVG, no script, no network) derived from
report.json, built of harness.report.html_parts, with the margin chart of
harness.report.margin_chart. Verdicts come from the report (harness.judge.verdict decided them);
this module only lays them out. Every text is escaped."""

from __future__ import annotations

import json
import re
import shlex
from collections import defaultdict

from harness.judge.verdict_types import ORDER, is_failing
from harness.report import grid as report_grid
from harness.report.html_parts import Raw, badge, details, esc, num, page, pre, table
from harness.report.margin_chart import margin_chart
from harness.report.model import Report, Result, headline

LOG_TAIL = re.compile(
    r"\n?--- (\w+) log tail ---\n"
)  # runners.pool / runners.serve end a reason so
# runners.serve_log: a part of the server log above its tail (its first error), heading kept
LOG_PART = re.compile(r"\n(?=--- \w+ log, [^\n]* ---\n)")


def split_log_tail(reason: str) -> tuple[str, str]:
    """(the reason itself, the worker or server log tail it ends with, or ''); a server log's
    first error above its tail goes with the tail, under their headings."""
    m, part = LOG_TAIL.search(reason), LOG_PART.search(reason)
    if part and (m is None or part.start() < m.start()):
        return reason[: part.start()], reason[part.end() :]
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
    # a skipped reference is no problem: every row of its case says why it did not run
    bad_refs = [x for x in report.references if x.status not in ("ok", "skip")]
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
