"""`parity golden | mteb | models | inputs`: the commands around a run."""

from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path

from rich.table import Table

from harness.cli.common import UsageError, err, out
from harness.cli.output import print_table
from harness.cli.run import device
from harness.matrix.loader import filter_cases
from harness.matrix.runner_names import runner_info
from harness.report.write import write_all
from harness.run.matrices import load_matrix
from harness.run.progress import progress_reporter
from harness.runners.platform import Platform


def cmd_golden(args: argparse.Namespace) -> int:
    from harness.run.golden_flow import golden_session

    matrix = load_matrix(args.matrix)
    cases = filter_cases(matrix, args.cases)
    platform = Platform(device(args.device))
    run_dir = Path(args.out or f"runs/golden-{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}")
    with progress_reporter(err, f"golden {args.mode}", len(cases)) as progress:
        report = golden_session(
            matrix, cases, run_dir, platform, Path(args.golden_dir), args.mode, progress=progress
        )
    paths = write_all(report, run_dir)
    print_table(report, verbose=args.verbose)
    err.print(f"report: {paths['json']}")
    return report.exit_code()


def cmd_mteb(args: argparse.Namespace) -> int:
    from harness.mteb import report as mteb_report
    from harness.mteb.session import mteb_session

    matrix = load_matrix(args.matrix)
    cases = [c for c in filter_cases(matrix, args.cases) if c.mteb_tasks]
    if not cases:
        raise UsageError(f"no case of {args.matrix} has mteb_tasks")
    platform = Platform(device(args.device))
    run_dir = Path(args.out or f"runs/mteb-{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}")
    total = sum(
        len(
            [
                r
                for r in c.runners
                if not args.runners or r in args.runners or runner_info(r).is_reference
            ]
        )
        for c in cases
    )
    with progress_reporter(err, "mteb", total) as progress:
        report = mteb_session(
            matrix,
            cases,
            run_dir,
            platform,
            Path(args.golden_dir),
            runners=args.runners,
            record_expected=args.record_expected,
            shuffle_seed=args.shuffle_seed,
            progress=progress,
        )
    paths = write_all(report, run_dir)
    extra = mteb_report.write(report, run_dir)
    out.print(mteb_report.to_markdown(report), markup=False, highlight=False)
    print_table(report, verbose=args.verbose)
    err.print(
        f"report: {paths['json']} · {extra['html']} · {extra['png']} · mteb results: "
        f"{run_dir / 'mteb'}"
    )
    return report.exit_code()


def cmd_models(args: argparse.Namespace) -> int:
    from harness.run.plan import ModelProblem, prepare_models

    matrix = load_matrix(args.matrix)
    t = Table(title=f"models of {args.matrix}")
    for col in ("case", "source", "fingerprint", "path / problem"):
        t.add_column(col, overflow="fold")
    code = 0
    cases = filter_cases(matrix, args.cases)
    models = prepare_models(cases, Path(matrix.path).parent)
    for case in cases:
        m = models[case.id]
        if isinstance(m, ModelProblem):
            t.add_row(
                case.id,
                case.model.source,
                "-",
                f"[{'yellow' if m.status == 'skip' else 'red'}]{m.reason}[/]",
            )
            code = code or int(m.status == "error")
        else:
            t.add_row(case.id, m.description, m.fingerprint[:16], str(m.path))
    out.print(t)
    return code


def cmd_inputs(args: argparse.Namespace) -> int:
    """What a case will send: an input set by name, or a file / folder of inputs users bring."""
    from harness.matrix.input_files import InputError, load
    from harness.matrix.inputs import INPUT_SET_NAMES, input_set, is_known

    if is_known(args.what):
        inputs = input_set(args.what)
    else:
        path = Path(args.what)
        spec = {"images": str(path.resolve())} if path.is_dir() else {"file": str(path.resolve())}
        if not path.exists():
            raise UsageError(
                f"{args.what!r} is neither an input set ({', '.join(INPUT_SET_NAMES)}) nor a "
                "file or folder"
            )
        try:
            inputs = load(
                spec, Path.cwd() / "matrices"
            )  # paths as a matrix in matrices/ would see them
        except InputError as e:
            raise UsageError(str(e)) from None
    out.print(
        f"{inputs.name} · version {inputs.version} · {len(inputs.items)} items · sha256 "
        f"{inputs.sha256}",
        highlight=False,
        markup=False,
    )
    for i, item in enumerate(inputs.items[: args.first]):
        out.print(f"  [{i}] {item!r}"[:240], highlight=False, markup=False)
    if len(inputs.items) > args.first:
        out.print(f"  … {len(inputs.items) - args.first} more", highlight=False, markup=False)
    return 0
