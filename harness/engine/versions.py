"""Release against release: matrices on several vLLM releases, one table.

    python -m harness.engine.versions [--releases 0.28.0 0.29.0 ...] [--matrix M [M ...]|all]
                               [--against golden|hf] [--runners R ...] [--out runs/versions]
                               [--tables-only] [--shard K/N] [-- extra `parity run` args]
    python -m harness.engine.versions --merge PART [PART ...] --out runs/versions

Each release gets its own environment (harness.engine.env, reused while unchanged) and runs
`parity run` on each matrix's vLLM rows (offline: vllm-v1, vllm-v2, vllm-auto; served through
`vllm serve`: vllm-serve-v1, -v2, -auto; --runners narrows) against the committed goldens (or
HF, --against hf), into OUT/<release>/ (several matrices, or `all`: OUT/<release>/<matrix>/).
Exit codes are parity's, over every release: 0 parity holds, 1 a case failed or errored, 2 usage
or setup, 4 nothing compared. The table (OUT/versions.md, versions.json) has one row per family
and runner (per matrix, family and runner with several matrices), one column per release: the
verdict counts there, and per release the default runner vLLM chose (vllm-auto). `parity report
diff --outputs OUT/A/report.json OUT/B/report.json` then shows every case whose answers moved
between two releases and by how much.
Across CI agents: `--shard K/N` runs the K-th of N contiguous blocks of the (release, matrix)
runs (harness.shards: a release stays on few agents) and writes its share in OUT/PART; `--merge`
joins every agent's OUT into one table, refusing a missing, duplicate or foreign part.
Standard library only until a report is read (the parent needs no engine of its own).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

from harness.engine.env import ROOT, release_env
from harness.engine.target import (
    DISTRIBUTION,
    SPEC_ENV,
    EngineSpecError,
    check_supported,
    default_backend,
)
from harness.shards import ShardError, check_parts, deal_blocks, parse_shard

# `--matrix all`: the matrices that run on one machine (gpu-modes needs two GPUs, mteb.yaml is
# `parity mteb`'s; hub.yaml's rows skip unless the real checkpoints are in the HF cache)
ALL_MATRICES = ("pooling.yaml", "serve.yaml", "extended.yaml", "multimodal.yaml", "hub.yaml")
# every release that installs here and runs (docs/measurements/releases.md)
DEFAULT_RELEASES = ("0.28.0", "0.29.0", "0.30.0", "0.31.0", "0.32.0")
# the runners whose rows a release runs: offline (LLM) and served (`vllm serve`); the reference
# is the goldens or HF (--against)
VLLM_RUNNERS = (
    "vllm-v1",
    "vllm-v2",
    "vllm-auto",
    "vllm-serve-v1",
    "vllm-serve-v2",
    "vllm-serve-auto",
)
PART = "versions-part.json"  # a shard's manifest in its OUT: the whole plan and its share
NOT_RUN = (
    "not run (the run was interrupted"  # harness.judge.verdict's reason for a row never reached
)
# ...and for a row whose reference was never reached: in an interrupted (partial) run, not run
REF_NOT_RUN = "reference (hf) was not run"
SHORT = {
    "not run": "n",
    "pass": "P",
    "fail": "F",
    "error": "E",
    "timed out": "T",
    "xfail": "x",
    "xpass": "X!",
    "skip": "s",
}


def plan(releases: list[str], matrices: list[str]) -> list[tuple[str, str]]:
    """The (release, matrix) runs of a table, release by release: what shards split."""
    return [(rel, m) for rel in releases for m in matrices]


def matrices_of(arg: list[str]) -> list[str]:
    """--matrix as given, or with `all` each of ALL_MATRICES."""
    return [f"matrices/{m}" for m in ALL_MATRICES] if arg == ["all"] else list(arg)


def folder(out: Path, release: str, matrix: str, matrices: list[str]) -> Path:
    """Where one run's report goes: OUT/<release>, or with several matrices
    OUT/<release>/<matrix stem>."""
    return out / release / Path(matrix).stem if len(matrices) > 1 else out / release


def run_units(
    units: list[tuple[str, str]],
    out: Path,
    backend: str,
    extra: list[str],
    matrices: list[str],
    against: str,
    runners: list[str],
) -> list[dict]:
    """Each (release, matrix) run in its release's environment (set up, or reused, once): a
    record per run with its exit code and seconds."""
    runs, envs = [], {}
    for rel, m in units:
        requirement = f"{DISTRIBUTION[backend]}=={rel}"
        t0 = time.perf_counter()
        if rel not in envs:
            envs[rel] = release_env(requirement, backend, ())
        setup = time.perf_counter() - t0
        env, t1 = envs[rel], time.perf_counter()
        cmd = [env.python, "-m", "harness.cli", "run", "-m", m, "--against", against]
        cmd += ["--runners", *runners, "--out", str(folder(out, rel, m, matrices)), *extra]
        # the CLI runs the vLLM PARITY_VLLM names (unset: the pinned release), launching into
        # that one's environment: without it every column would be the pinned release
        child = env.env({**os.environ, SPEC_ENV: requirement})
        code = subprocess.run(cmd, cwd=ROOT, env=child).returncode
        runs.append(
            {
                "release": rel,
                "matrix": m,
                "requirement": requirement,
                "exit": code,
                "setup_seconds": round(setup, 1),
                "reused_env": env.reused,
                "run_seconds": round(time.perf_counter() - t1, 1),
            }
        )
    return runs


def read_reports(
    units: list[tuple[str, str]], where: dict[tuple[str, str], Path], matrices: list[str]
) -> dict[str, dict]:
    """release -> its reports' results together (each result tagged with its matrix's stem); a
    run that wrote no report is named on stderr and in the release's `missing` (the release keeps
    the matrices that did: their rows are not lost with it)."""
    by_release: dict[str, list[tuple[str, dict]]] = defaultdict(list)
    missing: dict[str, list[str]] = defaultdict(list)
    for rel, m in units:
        path = folder(where[(rel, m)], rel, m, matrices) / "report.json"
        if not path.is_file():
            print(f"parity versions: no report {path}", file=sys.stderr)
            missing[rel].append(Path(m).stem)
            continue
        by_release[rel].append((Path(m).stem, json.loads(path.read_text())))
    reports = {}
    for rel, docs in by_release.items():
        merged = dict(docs[0][1], missing=missing.get(rel, []))
        merged["results"] = [
            {**r, "matrix": s, "partial": bool(d.get("partial"))}
            for s, d in docs
            for r in d.get("results") or []
        ]
        for key in ("audit", "vllm_under_test"):
            merged[key] = [x for _, d in docs for x in d.get(key) or []]
        reports[rel] = merged
    return reports


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
    """(Markdown, JSON) of release x family x runner from each release's report.json; with the
    results of several matrices (their `matrix` tag), a row per matrix x family x runner."""
    cells: dict[tuple[str, ...], dict[str, Counter]] = defaultdict(dict)
    chose: dict[str, Counter] = {}
    under: dict[str, str] = {}
    several = len({r.get("matrix") for rep in reports.values() for r in rep.get("results", [])}) > 1
    for rel, rep in reports.items():
        for r in rep.get("results", []):
            key = (r.get("matrix"),) * several + (r["family"], r["runner"])
            status = "not run" if _never_reached(r) else r["status"]
            if status == "error" and r.get("timed_out"):  # a slow machine, not a verdict on vLLM
                status = "timed out"
            cells[key].setdefault(rel, Counter())[status] += 1
        chose[rel] = Counter(str(a.get("actual")).upper() for a in rep.get("audit", []))
        vut = rep.get("vllm_under_test") or []
        under[rel] = ", ".join(dict.fromkeys(str(v.get("version")) for v in vut)) or "?"
    rels, cols = list(reports), ("matrix",) * several + ("family", "runner")
    lead = "| " + " | ".join(cols) + " | "
    lines = [lead + " | ".join(rels) + " |", "|" + "---|" * (len(cols) + len(rels))]
    for key in sorted(cells):
        row = [_cell(cells[key].get(rel)) for rel in rels]
        lines.append("| " + " | ".join(key) + " | " + " | ".join(row) + " |")
    pad = " |" + " |" * (len(cols) - 1) + " "  # the label's cell, then the empty ones
    auto = [", ".join(f"{k} x{n}" for k, n in sorted(chose[r].items())) or "-" for r in rels]
    lines.append("| **default runner chosen** (vllm-auto)" + pad + " | ".join(auto) + " |")
    lines.append("| vLLM that ran" + pad + " | ".join(under[r] for r in rels) + " |")
    legend = "Cells: verdict counts (" + ", ".join(f"{v} {k}" for k, v in SHORT.items()) + ")."
    doc = {
        "releases": rels,
        "vllm": under,
        "default_runner": {r: dict(chose[r]) for r in rels},
        "cells": [
            {**dict(zip(cols, key)), **{rel: dict(c) for rel, c in by.items()}}
            for key, by in sorted(cells.items())
        ],
    }
    return "\n".join(lines) + "\n\n" + legend + "\n", doc


def _never_reached(result: dict) -> bool:
    """A row an interrupted run never reached (its `partial` tag: read_reports')."""
    reason = result.get("reason") or ""
    return reason.startswith(NOT_RUN) or bool(result.get("partial")) and reason == REF_NOT_RUN


def _cell(c: Counter | None) -> str:
    if not c:
        return "-"
    return " ".join(f"{n}{SHORT.get(s, s)}" for s, n in sorted(c.items(), key=lambda x: x[0]))


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m harness.engine.versions",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--releases", nargs="+", default=list(DEFAULT_RELEASES))
    ap.add_argument(
        "--matrix",
        "-m",
        nargs="+",
        default=["matrices/pooling.yaml"],
        help="one or more matrices, or `all` (ALL_MATRICES)",
    )
    ap.add_argument("--against", choices=("golden", "hf"), default="golden")
    ap.add_argument(
        "--runners",
        "-r",
        nargs="+",
        default=list(VLLM_RUNNERS),
        choices=VLLM_RUNNERS,
        help="the vLLM runners whose rows run (default all, offline and served)",
    )
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / "versions")
    ap.add_argument(
        "--tables-only", action="store_true", help="only tabulate the reports already in OUT"
    )
    ap.add_argument(
        "--shard",
        metavar="K/N",
        help="run the K-th of N blocks of the (release, matrix) runs; --merge joins the parts",
    )
    ap.add_argument(
        "--merge",
        nargs="+",
        type=Path,
        metavar="PART",
        help="join the OUT folders of every shard of one run into one table in --out",
    )
    return ap


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    args = parser().parse_args(argv)
    if args.merge:
        try:
            return merge(args.merge, args.out)
        except (ShardError, OSError, json.JSONDecodeError, KeyError) as e:
            print(f"parity versions: --merge: {e}", file=sys.stderr)
            return 2
    backend = default_backend()  # PARITY_BACKEND, else cuda where an NVIDIA driver is present
    matrices = matrices_of(args.matrix)
    try:
        for rel in args.releases:
            check_supported(rel, f"--releases {rel}")
        for m in matrices:
            if not (ROOT / m).is_file():
                raise EngineSpecError(f"--matrix {m}: no such file (or give `all`)")
        units = whole = plan(args.releases, matrices)
        if args.shard:
            units = deal_blocks(whole, *parse_shard(args.shard))
    except (EngineSpecError, ShardError) as e:
        print(f"parity versions: {e}", file=sys.stderr)
        return 2
    runs = []
    if not args.tables_only:
        runs = run_units(units, args.out, backend, extra, matrices, args.against, args.runners)
    setup = {"matrices": matrices, "against": args.against, "runners": args.runners}
    if args.shard:
        part = {"shard": args.shard, "plan": whole, "units": units, "runs": runs, **setup}
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / PART).write_text(json.dumps(part, indent=1) + "\n")
    where = dict.fromkeys(units, args.out)
    return write_table(units, where, setup, runs, args.out)


def merge(parts: list[Path], out: Path) -> int:
    """The table of a sharded run from its parts (each an OUT folder with its PART manifest):
    refused unless they are every shard of one run, each (release, matrix) run in one part."""
    docs = [(p, json.loads((p / PART).read_text())) for p in parts]
    check_parts([d.get("shard") for _, d in docs], "release-table parts")
    keys = ("plan", "matrices", "against", "runners")
    if len({json.dumps([d[k] for k in keys]) for _, d in docs}) > 1:
        raise ShardError(
            "foreign shard: the parts plan different runs (releases, matrices, reference or "
            f"runners): {[(str(p), d['shard']) for p, d in docs]}"
        )
    where: dict[tuple[str, str], Path] = {}
    for p, d in docs:
        for unit in map(tuple, d["units"]):
            if unit in where:
                raise ShardError(f"{unit} is in two parts: {where[unit]} and {p}")
            where[unit] = p
    whole = [tuple(u) for u in docs[0][1]["plan"]]
    if set(where) != set(whole):
        raise ShardError(
            f"the parts do not hold the runs they plan: {sorted(set(whole) ^ set(where))}"
        )
    setup = {k: docs[0][1][k] for k in keys[1:]}
    return write_table(whole, where, setup, [r for _, d in docs for r in d["runs"]], out)


def write_table(
    units: list[tuple[str, str]],
    where: dict[tuple[str, str], Path],
    setup: dict,
    runs: list[dict],
    out: Path,
) -> int:
    """OUT/versions.md and versions.json from the reports of these runs; the exit code."""
    matrices = setup["matrices"]
    reports = read_reports(units, where, matrices)
    md, doc = table(reports)
    doc.update(setup, runs=runs)
    out.mkdir(parents=True, exist_ok=True)
    title = (
        f"## {', '.join(matrices)}: rows of {', '.join(setup['runners'])}, release by release "
        f"(against {setup['against']})"
    )
    wanted = {rel for rel, _ in units}
    absent = [f"{rel} · {m}" for rel, rep in reports.items() for m in rep["missing"]]
    absent += [f"{rel} · every matrix" for rel in sorted(wanted - reports.keys())]
    if absent:  # a cell of those is "-": say it was never run, not that nothing was there
        md += f"\nNo report (not run, or stopped before it wrote one): {'; '.join(absent)}.\n"
    doc["missing"] = absent
    (out / "versions.md").write_text(f"{title}\n\n{md}")
    (out / "versions.json").write_text(json.dumps(doc, indent=1) + "\n")
    print(md)
    print(f"tables: {out / 'versions.md'} · {out / 'versions.json'}")
    if absent:
        return 1 if any(r["exit"] == 1 for r in runs) else 2  # a run wrote no report
    return exit_code(reports, runs)


if __name__ == "__main__":
    sys.exit(main())
