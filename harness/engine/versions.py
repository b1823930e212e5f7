"""Release against release: a matrix on several vLLM releases, one table.

    python -m harness.engine.versions [--releases 0.28.0 0.29.0 ...] [--matrix M|all]
                               [--against golden|hf] [--out runs/versions]
                               [--tables-only] [-- extra `parity run` args]

Each release gets its own environment (harness.engine.env, reused while unchanged) and runs
`parity run` on the matrix's offline rows (vllm-v1, vllm-v2, vllm-auto) against the committed
goldens (or HF, --against hf), into OUT/<release>/ (`--matrix all`: OUT/<release>/<matrix>/, every
matrix that runs offline). Exit codes are parity's, over every release: 0 parity holds, 1 a case
failed or errored, 2 usage or setup, 4 nothing compared. The table (OUT/versions.md,
versions.json) has one row per family and runner, one column per release: the verdict counts
there, and per release the default runner vLLM chose (vllm-auto). `parity report diff --outputs
OUT/A/report.json OUT/B/report.json` then shows every case whose answers moved between two
releases and by how much.
Standard library only until a report is read (the parent needs no engine of its own).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

from harness.engine.env import ROOT, release_env
from harness.engine.target import (
    DISTRIBUTION,
    EngineSpecError,
    check_supported,
    default_backend,
)

# `--matrix all`: the matrices whose offline rows run on one machine (gpu-modes needs two GPUs,
# mteb.yaml is `parity mteb`'s, serve.yaml has no offline rows)
ALL_MATRICES = ("pooling.yaml", "extended.yaml", "multimodal.yaml", "hub.yaml")
# every release that installs here and runs (docs/measurements/releases.md)
DEFAULT_RELEASES = ("0.28.0", "0.29.0", "0.30.0", "0.31.0", "0.32.0")
OFFLINE_RUNNERS = ("vllm-v1", "vllm-v2", "vllm-auto")
NOT_RUN = (
    "not run (the run was interrupted"  # harness.judge.verdict's reason for a row never reached
)
SHORT = {
    "not run": "n",
    "pass": "P",
    "fail": "F",
    "error": "E",
    "xfail": "x",
    "xpass": "X!",
    "skip": "s",
}


def run_release(
    release: str, out: Path, backend: str, extra: list[str], matrix: str, against: str
) -> dict:
    """Set up (or reuse) the release's environment and run the matrix (or each) there."""
    requirement = f"{DISTRIBUTION[backend]}=={release}"
    t0 = time.perf_counter()
    env = release_env(requirement, backend, ())
    setup = time.perf_counter() - t0
    t1 = time.perf_counter()
    codes = []
    for m, dest in matrix_runs(matrix, out / release):
        cmd = [env.python, "-m", "harness.cli", "run", "-m", m, "--against", against]
        cmd += ["--runners", *OFFLINE_RUNNERS, "--out", str(dest), *extra]
        codes.append(subprocess.run(cmd, cwd=ROOT, env=env.env()).returncode)
    code = next((c for c in (1, 2, 4) if c in codes), max(codes, default=4))
    return {
        "release": release,
        "requirement": requirement,
        "exit": code,
        "setup_seconds": round(setup, 1),
        "reused_env": env.reused,
        "run_seconds": round(time.perf_counter() - t1, 1),
    }


def matrix_runs(matrix: str, dest: Path) -> list[tuple[str, Path]]:
    """(matrix, report folder) of each run: one matrix into DEST, or with `all` each of
    ALL_MATRICES into DEST/<stem>."""
    if matrix != "all":
        return [(matrix, dest)]
    return [(f"matrices/{m}", dest / Path(m).stem) for m in ALL_MATRICES]


def read_reports(matrix: str, dest: Path) -> dict | None:
    """The report of one release: its report.json, or with `all` the matrices' results together;
    None when a report is missing."""
    docs = []
    for _, folder in matrix_runs(matrix, dest):
        path = folder / "report.json"
        if not path.is_file():
            print(f"parity versions: no report {path}", file=sys.stderr)
            return None
        docs.append(json.loads(path.read_text()))
    merged = dict(docs[0])
    for key in ("results", "audit", "vllm_under_test"):
        merged[key] = [x for d in docs for x in d.get(key) or []]
    return merged


def exit_code(reports: dict[str, dict], runs: list[dict]) -> int:
    """1 a case failed or errored (or a run did); 2 a release could not be set up; 4 nothing was
    compared; 0 parity holds on every release."""
    statuses = [r["status"] for rep in reports.values() for r in rep.get("results", [])]
    if any(s in ("fail", "error", "xpass") for s in statuses) or any(r["exit"] == 1 for r in runs):
        return 1
    if any(r["exit"] == 2 for r in runs):
        return 2
    return 0 if any(s != "skip" for s in statuses) else 4


def table(reports: dict[str, dict]) -> tuple[str, dict]:
    """(Markdown, JSON) of release x family x runner from each release's report.json."""
    cells: dict[tuple[str, str], dict[str, Counter]] = defaultdict(dict)
    chose: dict[str, Counter] = {}
    under: dict[str, str] = {}
    for rel, rep in reports.items():
        for r in rep.get("results", []):
            key = (r["family"], r["runner"])
            status = "not run" if r.get("reason", "").startswith(NOT_RUN) else r["status"]
            cells[key].setdefault(rel, Counter())[status] += 1
        chose[rel] = Counter(str(a.get("actual")).upper() for a in rep.get("audit", []))
        vut = rep.get("vllm_under_test") or []
        under[rel] = ", ".join(str(v.get("version")) for v in vut) or "?"
    rels = list(reports)
    lines = ["| family | runner | " + " | ".join(rels) + " |", "|---|---|" + "---|" * len(rels)]
    for fam, runner in sorted(cells):
        row = [_cell(cells[(fam, runner)].get(rel)) for rel in rels]
        lines.append(f"| {fam} | {runner} | " + " | ".join(row) + " |")
    lines.append(
        "| **default runner chosen** (vllm-auto) | | "
        + " | ".join(
            ", ".join(f"{k} x{n}" for k, n in sorted(chose[r].items())) or "-" for r in rels
        )
        + " |"
    )
    lines.append("| vLLM that ran | | " + " | ".join(under[r] for r in rels) + " |")
    legend = "Cells: verdict counts (" + ", ".join(f"{v} {k}" for k, v in SHORT.items()) + ")."
    doc = {
        "releases": rels,
        "vllm": under,
        "default_runner": {r: dict(chose[r]) for r in rels},
        "cells": [
            {"family": f, "runner": ru, **{rel: dict(c) for rel, c in by.items()}}
            for (f, ru), by in sorted(cells.items())
        ],
    }
    return "\n".join(lines) + "\n\n" + legend + "\n", doc


def _cell(c: Counter | None) -> str:
    if not c:
        return "-"
    return " ".join(f"{n}{SHORT.get(s, s)}" for s, n in sorted(c.items(), key=lambda x: x[0]))


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    ap = argparse.ArgumentParser(
        prog="python -m harness.engine.versions",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--releases", nargs="+", default=list(DEFAULT_RELEASES))
    ap.add_argument(
        "--matrix", "-m", default="matrices/pooling.yaml", help="a matrix, or `all` (ALL_MATRICES)"
    )
    ap.add_argument("--against", choices=("golden", "hf"), default="golden")
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / "versions")
    ap.add_argument(
        "--tables-only", action="store_true", help="only tabulate OUT/<release>/report.json"
    )
    args = ap.parse_args(argv)
    backend = default_backend()  # PARITY_BACKEND, else cuda where an NVIDIA driver is present
    try:
        for rel in args.releases:
            check_supported(rel, f"--releases {rel}")
        if args.matrix != "all" and not (ROOT / args.matrix).is_file():
            raise EngineSpecError(f"--matrix {args.matrix}: no such file (or give `all`)")
    except EngineSpecError as e:
        print(f"parity versions: {e}", file=sys.stderr)
        return 2
    runs = []
    if not args.tables_only:
        for rel in args.releases:
            runs.append(run_release(rel, args.out, backend, extra, args.matrix, args.against))
    reports = {}
    for rel in args.releases:
        rep = read_reports(args.matrix, args.out / rel)
        if rep is not None:
            reports[rel] = rep
    md, doc = table(reports)
    doc["runs"] = runs
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "versions.md").write_text(
        f"## {args.matrix}: offline rows, release by release (against {args.against})\n\n" + md
    )
    (args.out / "versions.json").write_text(json.dumps(doc, indent=1) + "\n")
    print(md)
    print(f"tables: {args.out / 'versions.md'} · {args.out / 'versions.json'}")
    if len(reports) < len(args.releases):
        return 1 if any(r["exit"] == 1 for r in runs) else 2  # a release wrote no report
    return exit_code(reports, runs)


if __name__ == "__main__":
    sys.exit(main())
