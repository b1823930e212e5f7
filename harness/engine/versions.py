"""Release against release: the default matrix on several vLLM releases, one table.

    python -m harness.engine.versions [--releases 0.28.0 0.29.0 ...] [--out runs/versions]
                               [--tables-only] [-- extra `parity run` args]

Each release gets its own environment (harness.engine.env, reused while unchanged) and runs
`parity run` on the matrix's offline rows (vllm-v1, vllm-v2, vllm-auto) against the committed
goldens, into OUT/<release>/. The table (OUT/versions.md, versions.json) has one row per family
and runner, one column per release: the verdict counts there, and per release the default runner
vLLM chose (vllm-auto). `parity report diff --outputs OUT/A/report.json OUT/B/report.json` then
shows every case whose answers moved between two releases and by how much.
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
from harness.engine.target import DISTRIBUTION, EngineSpecError, check_supported
from harness.settings import current

# every release that installs here and runs (docs/releases.md)
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


def run_release(release: str, out: Path, backend: str, extra: list[str]) -> dict:
    """Set up (or reuse) the release's environment and run the matrix there."""
    requirement = f"{DISTRIBUTION[backend]}=={release}"
    t0 = time.perf_counter()
    env = release_env(requirement, backend, ())
    setup = time.perf_counter() - t0
    cmd = [
        env.python,
        "-m",
        "harness.cli",
        "run",
        "-m",
        "matrices/pooling.yaml",
        "--against",
        "golden",
        "--runners",
        *OFFLINE_RUNNERS,
        "--out",
        str(out / release),
        *extra,
    ]
    t1 = time.perf_counter()
    code = subprocess.run(cmd, cwd=ROOT, env=env.env()).returncode
    return {
        "release": release,
        "requirement": requirement,
        "exit": code,
        "setup_seconds": round(setup, 1),
        "reused_env": env.reused,
        "run_seconds": round(time.perf_counter() - t1, 1),
    }


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
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / "versions")
    ap.add_argument(
        "--tables-only", action="store_true", help="only tabulate OUT/<release>/report.json"
    )
    args = ap.parse_args(argv)
    backend = current().backend
    try:
        for rel in args.releases:
            check_supported(rel, f"--releases {rel}")
    except EngineSpecError as e:
        print(f"parity versions: {e}", file=sys.stderr)
        return 2
    runs = (
        []
        if args.tables_only
        else [run_release(rel, args.out, backend, extra) for rel in args.releases]
    )
    reports = {}
    for rel in args.releases:
        path = args.out / rel / "report.json"
        if path.is_file():
            reports[rel] = json.loads(path.read_text())
        else:
            print(f"parity versions: no report for {rel} ({path})", file=sys.stderr)
    md, doc = table(reports)
    doc["runs"] = runs
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "versions.md").write_text(
        "## The default matrix's offline rows, release by release\n\n" + md
    )
    (args.out / "versions.json").write_text(json.dumps(doc, indent=1) + "\n")
    print(md)
    print(f"tables: {args.out / 'versions.md'} · {args.out / 'versions.json'}")
    return 0 if reports and len(reports) == len(args.releases) else 1


if __name__ == "__main__":
    sys.exit(main())
