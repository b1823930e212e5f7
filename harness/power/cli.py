"""`parity power` / `python -m harness.power`: a matrix's detection power against the catalogue."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from pathlib import Path

from harness.power import catalogue, report
from harness.power.runner import Outcome, other_matrix, run_power
from harness.run import interrupt
from harness.shards import ShardError, deal_round_robin, parse_shard

# --against golden|hf (one name per idea, as `parity run`): how run_power holds runs to HF
REFERENCE = {"golden": "recorded", "hf": "live"}


def declared_for(mutations: list, matrix: str) -> list:
    """The mutations written for this matrix's cases: MATRIX names it."""
    return [m for m in mutations if m.matrix is not None and other_matrix(m, matrix) is None]


def build_parser(ap: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    ap = ap or argparse.ArgumentParser(prog="parity power", description=__doc__)
    ap.add_argument("--only", nargs="+", metavar="NAME", help="only these mutations")
    ap.add_argument(
        "--matrix",
        "-m",
        default="matrices/pooling.yaml",
        help="matrix YAML (default matrices/pooling.yaml)",
    )
    ap.add_argument("--out", "-o", help="folder (default runs/power-<timestamp>)")
    ap.add_argument("--jobs", "-j", type=int, default=2, help="runner workers per run (default 2)")
    ap.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default="cpu",
        help="cuda also runs the NEEDS='gpu' mutations (default cpu)",
    )
    ap.add_argument(
        "--against",
        choices=("golden", "hf"),
        default="golden",
        help="golden (default): HF runs once, recorded, and every run reads its outputs as "
        "goldens; hf: HF runs again beside every mutation",
    )
    ap.add_argument(
        "--server-rows",
        choices=("lean", "all"),
        default="lean",
        help="lean (default): a mutation of engine-side code runs its offline rows, not its "
        "`vllm serve` rows (the same engine code behind a server start); all: every row",
    )
    ap.add_argument(
        "--declared",
        action="store_true",
        help="only the mutations whose MATRIX is this matrix (the ones written for its cases)",
    )
    ap.add_argument("--list", action="store_true", help="print the catalogue and exit")
    ap.add_argument(
        "--shard",
        metavar="K/N",
        help="judge every N-th mutation of the selection from the K-th (one CI agent's share); "
        "--merge joins the shards' reports",
    )
    ap.add_argument(
        "--merge",
        nargs="+",
        metavar="POWER_JSON",
        help="join the power.json (or its folder) of every shard of one run into one report "
        "in --out, refusing a missing, duplicate or foreign shard",
    )
    return ap


def merge_main(parts: list[str], out: Path) -> int:
    """`--merge`: one report from the shards' power.json; its exit code as one run's."""
    try:
        paths = [Path(p) / "power.json" if Path(p).is_dir() else Path(p) for p in parts]
        outcomes, meta = report.merge([json.loads(p.read_text()) for p in paths])
    except (ShardError, OSError, ValueError, KeyError) as e:
        print(f"parity power: --merge: {e}", file=sys.stderr)
        return 2
    paths = report.write(outcomes, meta, out)
    sys.stdout.write(paths["markdown"].read_text())
    print(f"power report: {paths['markdown']} · {paths['html']} · {paths['json']}", file=sys.stderr)
    return report.exit_code(outcomes)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    out = Path(args.out or f"runs/power-{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}")
    if args.merge:
        return merge_main(args.merge, out)
    try:
        mutations = catalogue.load(args.only)
        shard = parse_shard(args.shard) if args.shard else None
    except (catalogue.CatalogueError, ShardError) as e:
        print(f"parity power: {e}", file=sys.stderr)
        return 2
    if args.declared:
        mutations = declared_for(mutations, args.matrix)
        if not mutations:
            print(f"parity power: no mutation declares MATRIX = {args.matrix!r}", file=sys.stderr)
            return 2
    if args.list:
        for m in mutations:
            print(f"{m.name:<40} {m.bug_class:<36} {m.replays or '-':<12} {m.needs or ''} {m.doc}")
        return 0
    names = [m.name for m in mutations]
    if shard:
        mutations = deal_round_robin(mutations, *shard)
        print(
            f"parity power: shard {args.shard}: {len(mutations)} of {len(names)}", file=sys.stderr
        )
    with interrupt.handling():  # SIGINT/SIGTERM: every `parity run` below stopped, report kept
        return _run_and_report(args, mutations, out, names)


def interrupted(outcomes: list[Outcome], exc: BaseException) -> str:
    """After a signal: the mutations not judged yet say so; the power report's partial reason."""
    why = interrupt.reason(exc).split(":")[0]  # "interrupted (SIGTERM)"
    for o in outcomes:
        if o.status == "pending":
            o.status, o.reason = "interrupted", f"{why} before it was judged"
    return f"{why}: mutations not judged are reported as interrupted"


def _run_and_report(args: argparse.Namespace, mutations: list, out: Path, names: list[str]) -> int:
    """Judge `mutations` (this shard's share of the selection `names`) and write the report."""
    start = time.monotonic()
    outcomes = [Outcome(m) for m in mutations]
    partial = ""
    try:
        run_power(
            mutations,
            args.matrix,
            out,
            jobs=args.jobs,
            device=args.device,
            reference=REFERENCE[args.against],
            server_rows=args.server_rows,
            outcomes=outcomes,
        )
        interrupt.finishing()  # every result is in: a first signal now lets the report be written
    except KeyboardInterrupt as e:  # or SIGTERM (harness.run.interrupt): keep what was judged
        interrupt.finishing()  # (a second signal still stops at once)
        partial = interrupted(outcomes, e)
    meta = {
        "matrix": args.matrix,
        "device": args.device,
        "wall_seconds": time.monotonic() - start,
        "only": args.only,
        "reference": REFERENCE[args.against],
        "server_rows": args.server_rows,
        "catalogue": names,  # the whole selection, every shard's share of it
        **({"shard": args.shard} if args.shard else {}),
        **({"partial_reason": partial} if partial else {}),
    }
    paths = report.write(outcomes, meta, out)
    sys.stdout.write(paths["markdown"].read_text())
    where = f"{paths['markdown']} · {paths['html']} · {paths['json']}"
    print(f"power report: {where}", file=sys.stderr)
    return report.exit_code(outcomes)
