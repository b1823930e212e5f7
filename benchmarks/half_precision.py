"""Half-precision figures of a run, per family: verdicts per runner, HF's own error in the run's
dtype (HF in that dtype against HF in float32) and the runner's error over it, per metric.

    python -m harness.cli run --dtype bfloat16 -r vllm-v1 vllm-v2 --out /tmp/half-bf16
    python benchmarks/half_precision.py /tmp/half-bf16/report.json [more reports ...]
    python benchmarks/half_precision.py --rejudge matrices/pooling.yaml /tmp/half-bf16/report.json

These are the measurements the calibrated bounds of matrices/pooling.yaml (k, floors) come from
(docs/explanation/tolerances.md). Every calibrated metric in report.json carries its value, HF's own
error (`ref_error`) and the ratio. `--rejudge MATRIX` first judges the run's outputs on disk again
with MATRIX's bounds (harness.run.assemble.verdict_for, the path a run takes), so candidate bounds
can be tried on one run's outputs without running the engines again.
"""

from __future__ import annotations

import json
import sys
from collections import Counter, defaultdict
from pathlib import Path


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.2g}"


def summarise(report: dict) -> str:
    dtypes = sorted({r.get("dtype") for r in report["results"]})
    lines = [
        f"## {Path(report.get('matrix', '?')).name} in {', '.join(map(str, dtypes))}",
        "",
        "(errors and ratios over pass/fail rows; recorded divergences, xfail, left out)",
        "",
        "| family | verdicts | metric | HF's own error (min-max) | runner error (max) "
        "| runner / HF's own (max) | value / bound (max) |",
        "|---|---|---|---|---|---|---|",
    ]
    verdicts: dict[str, Counter] = defaultdict(Counter)
    stats: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in report["results"]:
        verdicts[r["family"]][r["status"]] += 1
        if r["status"] in ("xfail", "xpass"):
            continue  # a recorded divergence: its error is the divergence, not precision
        for m in r["metrics"]:
            s = stats[(r["family"], m["name"])]
            if m.get("ref_error") is not None:
                s["own"].append(m["ref_error"])
            if m.get("value") is not None:
                s["value"].append(m["value"])
            if m.get("ratio") is not None:
                s["ratio"].append(m["ratio"])
            if m.get("bound"):
                s["margin"].append(m["value"] / m["bound"])
    for fam in sorted(verdicts):
        first = True
        for (f, name), s in sorted(stats.items()):
            if f != fam:
                continue
            tally = sorted(verdicts[fam].items())
            counts = ", ".join(f"{n} {k}" for k, n in tally) if first else ""
            own = f"{_fmt(min(s['own']))}-{_fmt(max(s['own']))}" if s["own"] else "-"
            worst = [_fmt(max(s[k], default=None)) for k in ("value", "ratio", "margin")]
            head = f"| {fam if first else ''} | {counts} | {name} | {own} | "
            lines.append(head + " | ".join(worst) + " |")
            first = False
    total = Counter(r["status"] for r in report["results"])
    lines += ["", "total: " + ", ".join(f"{n} {k}" for k, n in sorted(total.items()))]
    return "\n".join(lines)


def rejudge(matrix_path: str, report: dict) -> dict:
    """The report's results judged again from the outputs the run left on disk, with the bounds
    of `matrix_path`. Results without outputs (a runner error or skip) keep their verdict."""
    from harness.matrix.checks import expand_checks
    from harness.run.assemble import metric_out, verdict_for
    from harness.run.execute import RunOutcome
    from harness.run.matrices import load_matrix
    from harness.run.plan import REFERENCE_FP32, needs_fp32_reference

    cases = {c.id: c for c in expand_checks(load_matrix(matrix_path).cases)}
    out = []
    for r in report["results"]:
        case = cases.get(r["case_id"])
        if case is None or not r.get("output"):
            out.append(r)
            continue
        folder = Path(r["output"]).parent.parent / (case.variant_of or case.id)
        ref, ref32 = folder / "hf.safetensors", folder / f"{REFERENCE_FP32}.safetensors"
        got = RunOutcome(case.id, r["runner"], "ok", output=r["output"], info=r.get("info") or {})
        v = verdict_for(
            case,
            r["runner"],
            r["dtype"],
            RunOutcome(case.id, "hf", "ok", output=str(ref)) if ref.is_file() else None,
            got,
            RunOutcome(case.id, REFERENCE_FP32, "ok", output=str(ref32))
            if ref32.is_file()
            else None,
            calibrated=needs_fp32_reference(case, r["dtype"]),
        )
        out.append(
            {
                **r,
                "status": v.status,
                "reason": v.reason,
                "metrics": [metric_out(m).model_dump() for m in v.metrics],
            }
        )
    return {**report, "results": out}


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    matrix = None
    if argv[0] == "--rejudge":
        matrix, argv = argv[1], argv[2:]
    for path in argv:
        report = json.loads(Path(path).read_text())
        if matrix:
            report = rejudge(matrix, report)
            for r in report["results"]:
                if r["status"] not in ("pass", "xfail", "skip"):
                    print(f"{r['status']}: {r['case_id']} [{r['runner']}] {r['reason'][:300]}")
        print(summarise(report))
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
