"""Benchmark of the harness itself, in one invocation:

  (a) the default matrix as the harness runs it (persistent workers, one load per model for all
      its cases, in-process engines, lanes sized to the machine);
  (a') the fixed subset (benchmarks/subset.yaml) the same way;
  (b) the same subset the naive way: a fresh worker process and engine per case per runner, with
      vLLM's default process layout (as vLLM's own tests run);
  (B) the whole default matrix the naive way (long: ~1 hour here; run once whatever --repeat);
  (c) the default matrix against the committed goldens (no HF process);
  (d) the whole surface the nightly runs: the default, extended, serve and multimodal matrices,
      one run each, summed (long; only when asked: --modes d_surface).

Prints wall time, per-phase time (worker process start, engine start + model load — the first
load of a worker includes importing torch and vLLM —, forward, compare + report), engine loads,
peak RSS, the ratios (b)/(a'), (B)/(a) and (a)/(c), and proves the naive runs produced the same
outputs as the harness's (bit for bit, or the largest difference). Median over --repeat runs;
figures also written as JSON.

    python benchmarks/bench.py [--repeat 1] [--out runs/bench] [--modes ...]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


MODES = {
    "a_default_matrix": ["--matrix", "matrices/pooling.yaml"],
    "a_subset": ["--matrix", "benchmarks/subset.yaml"],
    "b_subset_naive": ["--matrix", "benchmarks/subset.yaml", "--naive"],
    "B_default_matrix_naive": ["--matrix", "matrices/pooling.yaml", "--naive"],
    "c_default_matrix_golden": ["--matrix", "matrices/pooling.yaml", "--against", "golden"],
}


ONCE = {"B_default_matrix_naive", "d_surface"}  # long: one run is the measurement

# (d): each matrix its own `parity run`, the figures summed (SURFACE_MODE is never a default)
SURFACE_MODE = "d_surface"
SURFACE = (
    "matrices/pooling.yaml",
    "matrices/extended.yaml",
    "matrices/serve.yaml",
    "matrices/multimodal.yaml",
)


def run_once(mode: str, args: list[str], out: Path) -> dict:
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", *args, "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - t0
    report = json.loads((out / "report.json").read_text())
    results = report["results"]
    # per-load figures are repeated on each of the load's cases: count each load once
    loads = {
        (r["runner"], r["info"].get("load_seconds"), r["info"].get("worker_start_seconds")): r[
            "info"
        ]
        for r in results
        if r["info"]
    }
    ref_run = sum((x.get("run_seconds") or 0) for x in report["references"])
    return {
        "mode": mode,
        "exit_code": proc.returncode,
        "wall_seconds": wall,
        "comparisons": len(results),
        "passed_or_expected": sum(r["status"] in ("pass", "xfail") for r in results),
        "phases": {
            "worker_start_s": sum(
                (i.get("worker_start_seconds") or 0) + (i.get("import_seconds") or 0)
                for i in loads.values()
            ),
            "engine_start_and_model_load_s": sum(
                (i.get("load_seconds") or 0)
                for (r, *_), i in loads.items()
                if not r.startswith("vllm-serve")
            ),
            # the server rows' own phase: each load there is a `vllm serve` start (3 processes)
            "server_start_s": sum(
                (i.get("load_seconds") or 0)
                for (r, *_), i in loads.items()
                if r.startswith("vllm-serve")
            ),
            "server_rows": sum(r["runner"].startswith("vllm-serve") for r in results),
            "forward_s": sum((r["run_seconds"] or 0) for r in results) + ref_run,
            "plan_and_model_build_s": report["phases"].get("plan_seconds"),
            "compare_and_report_s": report["phases"].get("compare_seconds"),
            "loads": len(loads),
        },
        "peak_rss_mb": report.get("peak_rss_mb", {}),
        "report": str(out / "report.json"),
    }


def combined(parts: dict[str, dict]) -> dict:
    """One figure set for runs made one after another (the surface's matrices): times, counts and
    loads add up, the exit code is the worst, peak RSS the largest; `parts` keeps each run's."""
    first = next(iter(parts.values()))
    phases = {k: sum((p["phases"][k] or 0) for p in parts.values()) for k in first["phases"]}
    rss_keys = {k for p in parts.values() for k in p["peak_rss_mb"]}
    return {
        "mode": SURFACE_MODE,
        "exit_code": max((p["exit_code"] for p in parts.values()), key=abs),
        "wall_seconds": sum(p["wall_seconds"] for p in parts.values()),
        "comparisons": sum(p["comparisons"] for p in parts.values()),
        "passed_or_expected": sum(p["passed_or_expected"] for p in parts.values()),
        "phases": phases,
        "peak_rss_mb": {
            k: max(p["peak_rss_mb"].get(k, 0) for p in parts.values()) for k in rss_keys
        },
        "report": first["report"],
        "parts": parts,
    }


def run_mode(mode: str, out: Path) -> dict:
    """One run of `mode`; the surface is one run per matrix, combined."""
    if mode != SURFACE_MODE:
        return run_once(mode, MODES[mode], out)
    parts = {}
    for matrix in SURFACE:
        stem = Path(matrix).stem
        parts[stem] = run_once(f"{mode}-{stem}", ["--matrix", matrix], out / stem)
        print(f"    {stem}: {parts[stem]['wall_seconds']:.1f} s", flush=True)
    return combined(parts)


def identical_outputs(a: Path, b: Path) -> dict:
    """Max abs difference between the vLLM outputs of two runs of the same cases (`parity report
    diff --outputs`' comparison, hf's reference outputs left out)."""
    from harness.report.diff import compare_outputs
    from harness.report.model import read_json

    deltas = [
        d
        for d in compare_outputs(read_json(a), read_json(b), a.parent, b.parent)
        if d.runner != "hf" and d.max_abs is not None
    ]
    worst = max((d.max_abs for d in deltas), default=0.0)
    return {
        "compared": len(deltas),
        "max_abs_difference": worst,
        "identical": bool(deltas) and worst == 0.0,
    }


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--out", default="runs/bench")
    ap.add_argument("--modes", nargs="*", default=list(MODES), choices=[*MODES, SURFACE_MODE])
    args = ap.parse_args()
    out = ROOT / args.out
    runs: dict[str, list[dict]] = {m: [] for m in args.modes}
    for i in range(args.repeat):
        for mode in args.modes:
            if mode in ONCE and i > 0:
                continue
            r = run_mode(mode, out / f"{mode}-{i}")
            runs[mode].append(r)
            print(
                f"[{i + 1}/{args.repeat}] {mode}: {r['wall_seconds']:.1f} s, exit "
                f"{r['exit_code']}, "
                f"{r['passed_or_expected']}/{r['comparisons']} pass/xfail",
                flush=True,
            )
    med = {m: statistics.median(x["wall_seconds"] for x in rs) for m, rs in runs.items() if rs}
    summary = {"median_wall_seconds": med, "repeat": args.repeat, "runs": runs}
    if "a_subset" in med and "b_subset_naive" in med:
        summary["ratio_b_over_a_subset"] = med["b_subset_naive"] / med["a_subset"]
        summary["outputs_a_subset_vs_b_naive"] = identical_outputs(
            Path(runs["a_subset"][0]["report"]), Path(runs["b_subset_naive"][0]["report"])
        )
    if "a_default_matrix" in med and "B_default_matrix_naive" in med:
        summary["ratio_B_over_a_default_matrix"] = (
            med["B_default_matrix_naive"] / med["a_default_matrix"]
        )
        summary["outputs_a_vs_B_naive"] = identical_outputs(
            Path(runs["a_default_matrix"][0]["report"]),
            Path(runs["B_default_matrix_naive"][0]["report"]),
        )
    if "a_default_matrix" in med and "c_default_matrix_golden" in med:
        summary["ratio_a_over_c"] = med["a_default_matrix"] / med["c_default_matrix_golden"]
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench.json").write_text(json.dumps(summary, indent=2))
    print(
        "\nmode                       median wall  w.start  engine+load  server start (rows)  "
        "forward  compare  "
        "loads  peak RSS (harness / worker)"
    )
    for m, rs in runs.items():
        p = rs[0]["phases"]
        rss = rs[0]["peak_rss_mb"]
        print(
            f"{m:26s} {med[m]:10.1f} s {p['worker_start_s']:8.1f} "
            f"{p['engine_start_and_model_load_s']:12.1f} "
            f"{p['server_start_s']:13.1f} ({p['server_rows']:3d}) {p['forward_s']:8.1f} "
            f"{p['compare_and_report_s'] or 0:8.2f} {p['loads']:6d}  "
            f"{rss.get('harness', 0):.0f} / {rss.get('largest_worker', 0):.0f} MB"
        )
    for k in ("ratio_b_over_a_subset", "ratio_B_over_a_default_matrix", "ratio_a_over_c"):
        if k in summary:
            print(f"{k}: {summary[k]:.2f}")
    for k, what in (
        ("outputs_a_subset_vs_b_naive", "(a') vs (b)"),
        ("outputs_a_vs_B_naive", "(a) vs (B)"),
    ):
        if k in summary:
            print(f"outputs {what}: {summary[k]}")
    print(f"figures: {out / 'bench.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
