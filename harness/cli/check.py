"""`parity check MODEL [--vllm A --vllm B ...]`: the user's own checkpoint, its cases inferred
from its files, run on each vLLM named (V1, V2, auto and served auto by default), the drift
between consecutive ones, one report."""

from __future__ import annotations

import argparse
import datetime as dt
import shlex
import sys
from pathlib import Path

from rich.markup import escape
from rich.table import Table

from harness.cli import several
from harness.cli.common import UsageError, combine, err, out
from harness.cli.launch import launch, resolve, with_vllm
from harness.cli.parser import build_parser
from harness.cli.run import cmd_run
from harness.run.matrices import load_matrix
from harness.settings import overriding

# the runners a deployer gets: V1, V2, the one vLLM picks itself, and that one behind `vllm serve`
DEFAULT_RUNNERS = ["vllm-v1", "vllm-v2", "vllm-auto", "vllm-serve-auto"]


def _print_inference(model: str, inf) -> None:
    from harness.check.infer import default_families

    families = default_families()
    t = Table(title=f"parity check · {model}")
    for col in ("inferred", "value", "from"):
        t.add_column(col, overflow="fold")
    for f in inf.facts:
        t.add_row(escape(f.what), escape(f.value), escape(f.source))
    for u in inf.uses:
        fam = families[u.family]
        recipe = fam.get("reference") or "(by architecture)"
        t.add_row("use", f"{u.family}: task {fam['task']}, reference {recipe}", escape(u.why))
    if inf.engine:
        t.add_row("vLLM engine options", escape(str(inf.engine)), "see step tag above")
    out.print(t)


def _run_dir(args: argparse.Namespace, slug: str) -> Path:
    return Path(args.out or f"runs/check-{slug}-{dt.datetime.now():%Y%m%d-%H%M%S}")


def cmd_check(args: argparse.Namespace) -> int:
    """Infer the cases of the user's own checkpoint, write them as a matrix, run it as `parity
    run -m` does. Exit 2 for a checkpoint it cannot read or classify."""
    from harness.check.cases import locate
    from harness.check.infer import CheckError, infer

    try:
        model = locate(args.model)
        inf = infer(model.folder)
    except CheckError as e:
        raise UsageError(f"parity check: {e}") from None
    _print_inference(args.model, inf)
    if inf.trust_remote_code and not args.trust_remote_code:
        raise UsageError(
            "parity check: the config names code of its own (config.json auto_map); "
            "read it, then pass --trust-remote-code to run it"
        )
    run_dir = _run_dir(args, model.slug())
    matrix_path = Path(args.write_matrix or run_dir / "check.yaml")
    matrix_path.parent.mkdir(parents=True, exist_ok=True)
    runners = list(args.runners or DEFAULT_RUNNERS)
    if args.serve:
        runners += [r for r in ("vllm-serve-v1", "vllm-serve-v2") if r not in runners]
    # the user named the checkpoint and inputs on the command line: they may live anywhere
    with overriding(allow_absolute_paths=True):
        return _write_and_run(args, inf, model, matrix_path, run_dir, runners)


def _write_and_run(args, inf, model, matrix_path: Path, run_dir: Path, runners: list) -> int:
    """The inferred cases written as a matrix, loaded as `parity run -m` will, then run."""
    from harness.check.cases import build_cases, matrix_text
    from harness.check.infer import CheckError

    inputs = Path(args.inputs) if args.inputs else None
    try:
        used, cases, notes = build_cases(
            inf, model, matrix_path.parent, runners, args.dtype, inputs
        )
    except CheckError as e:
        raise UsageError(f"parity check: {e}") from None
    command = shlex.join(["parity", "check", *sys.argv[2:]]) if sys.argv[1:2] == ["check"] else ""
    matrix_path.write_text(matrix_text(inf, used, cases, notes, command or "parity check"))
    load_matrix(matrix_path)  # as `parity run -m` will: a MatrixError exits 2
    env = "PARITY_ALLOW_ABSOLUTE_PATHS=1 " if notes else ""
    err.print(
        f"{len(cases)} case(s) written to {matrix_path}; run them again with "
        f"`{env}parity run -m {matrix_path}`",
        highlight=False,
    )
    if args.no_run:
        return 0
    return cmd_run(build_parser().parse_args(_run_argv(args, matrix_path, run_dir)))


def _run_argv(args: argparse.Namespace, matrix: Path, run_dir: Path | None) -> list[str]:
    argv = ["run", "-m", str(matrix)]
    argv += ["--out", str(run_dir)] if run_dir is not None else []
    argv += ["--device", args.device] if args.device else []
    return argv + (["--verbose"] if args.verbose else [])


def cmd_check_several(args: argparse.Namespace, argv: list[str]) -> int:
    """`parity check MODEL --vllm A --vllm B ...`: the cases inferred once (in A's environment),
    then run on each vLLM into OUT/<vllm>/, the drift between consecutive ones, OUT/report.md."""
    specs = [resolve(text) for text in args.vllm]
    folder = _run_dir(args, several.slug(Path(args.model).name or args.model))
    matrix = Path(args.write_matrix or folder / "check.yaml")
    base = [a for a in _strip_vllm(argv) if a not in ("--no-run",)]
    infer_argv = [*base, "--no-run", "--write-matrix", str(matrix)]
    if "--out" not in infer_argv and "-o" not in infer_argv:
        infer_argv += ["--out", str(folder)]
    code = launch_or_here(specs[0], with_vllm(infer_argv, args.vllm[0]), "check")
    if code != 0 or args.no_run:
        return code
    runs = []
    with overriding(allow_absolute_paths=True):  # the checkpoint may live anywhere
        for text, spec in zip(args.vllm, specs):
            run = several.Run(text, spec, folder / several.slug(spec.describe()))
            runs.append(several.run_one(run, with_vllm(_run_argv(args, matrix, None), text)))
    drifts = [several.drift(a, b) for a, b in zip(runs, runs[1:])]
    code = several.show(runs, drifts, args.verbose)
    facts = [f"model: {args.model}", f"cases: {matrix}"]
    path = several.write(folder, f"parity check {args.model}", facts, runs, drifts, code)
    err.print(f"report: {path} · {folder / 'summary.json'}", highlight=False, markup=False)
    return combine([code])


def launch_or_here(spec, argv: list[str], command: str) -> int:
    from harness.cli.launch import is_here

    if is_here(spec):
        return cmd_check(build_parser().parse_args(argv))
    return launch(spec, argv, command)


def _strip_vllm(argv: list[str]) -> list[str]:
    """ARGV without its --vllm options (each child is given its own)."""
    kept, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == "--vllm":
            skip = True
        elif not a.startswith("--vllm="):
            kept.append(a)
    return kept
