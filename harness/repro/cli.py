"""`parity repro ROW --from RUN --out DIR`: a red row of a run as a standalone reproduction."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.matrix.schema import MatrixError
from harness.models.cache import ModelUnavailable
from harness.repro.export import ReproError, export_row


def add_repro_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "repro",
        help="export a failing or diverging row as a standalone folder: checkpoint, inputs and a "
        "script in plain transformers / sentence-transformers and vLLM (a vLLM issue's repro)",
    )
    p.add_argument(
        "row", help="CASE_ID (its one red vLLM row) or CASE_ID/RUNNER, e.g. my-case/vllm-v1"
    )
    p.add_argument(
        "--from",
        dest="report",
        required=True,
        metavar="RUN",
        help="the run folder (or its report.json) holding the row",
    )
    p.add_argument("--out", "-o", required=True, help="the folder to write (new or empty)")
    p.add_argument(
        "--matrix", "-m", help="the case's matrix (default: the one the report names for it)"
    )
    p.set_defaults(func=cmd_repro)
    return p


def cmd_repro(args: argparse.Namespace) -> int:
    """0 exported; 2 a row, report, matrix, model or folder that cannot be used (a usage or
    setup error)."""
    try:
        done = export_row(Path(args.report), args.row, Path(args.out), args.matrix)
    except (ReproError, MatrixError) as e:
        print(f"parity repro: {e}", file=sys.stderr)
        return 2
    except ModelUnavailable as e:
        print(f"parity repro: the row's model is not here: {e}", file=sys.stderr)
        return 2
    print(
        f"exported {done.case_id} on {done.runner} (reference recipe {done.recipe}) to "
        f"{done.folder}\nrun it: cd {done.folder} && python repro.py"
    )
    return 0
