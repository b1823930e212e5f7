"""`parity run` and `parity select`: a matrix (or the rows a change can affect) through the
reference and each vLLM runner."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path

from harness.cli.common import UsageError, err
from harness.cli.output import print_table
from harness.matrix.loader import filter_cases, parse_shard, shard_cases
from harness.matrix.runner_names import runner_info
from harness.report.write import write_all
from harness.run.matrices import load_matrix
from harness.run.progress import progress_reporter
from harness.runners.platform import Platform, detect_device


def device(asked: str | None) -> str:
    """--device, else detected; a GPU host whose torch cannot use CUDA is a setup error."""
    if asked:
        return asked
    try:
        return detect_device()
    except (RuntimeError, ValueError) as e:
        raise UsageError(str(e)) from None


def change_selection(args: argparse.Namespace, matrix, cases):
    """The Selection of --changed-files / --vllm-diff over `cases`, or None when neither is given.
    Raises SelectionError or SourceError (a usage error) when the change or vLLM's source cannot be
    read."""
    from harness.select.rows import SelectionError, git_changed_files, select
    from harness.select.vllm_source import VllmSource

    if not (args.changed_files or args.vllm_diff):
        if args.vllm_repo:
            raise SelectionError("--vllm-repo needs --vllm-diff RANGE or --changed-files")
        return None
    if args.changed_files and args.vllm_diff:
        raise SelectionError("give --changed-files or --vllm-diff, not both")
    if args.vllm_diff and not args.vllm_repo:
        raise SelectionError("--vllm-diff RANGE needs --vllm-repo DIR (the vLLM checkout to diff)")
    changed = (
        git_changed_files(args.vllm_diff, args.vllm_repo) if args.vllm_diff else args.changed_files
    )
    return select(
        matrix,
        cases,
        changed,
        "vllm" if args.vllm_diff else "any",
        VllmSource.locate(args.vllm_repo),
        vllm_range=args.vllm_diff,
    )


def cmd_select(args: argparse.Namespace) -> int:
    """Print the rows a change can affect; exit 4 when nothing is selected, as a run would."""
    from harness.select.rows import to_text

    matrix = load_matrix(args.matrix)
    if not (args.changed_files or args.vllm_diff):
        raise UsageError("parity select needs --changed-files FILE... or --vllm-diff RANGE")
    sel = change_selection(args, matrix, filter_cases(matrix, args.cases))
    if args.runners:
        sel.rows = {k: v for k, v in sel.rows.items() if k[1] in args.runners}
    if args.json:
        sys.stdout.write(json.dumps(sel.to_json(), indent=2) + "\n")
    else:
        sys.stdout.write(to_text(sel))
    if args.out:
        Path(args.out).write_text(json.dumps(sel.to_json(), indent=2) + "\n")
    return 0 if sel.rows else 4


def _empty(matrix, out: Path, shard: str | None, selection: dict) -> None:
    from harness.run.session import empty_report

    empty = empty_report(matrix, device(None))
    empty.shard, empty.selection = shard, selection
    write_all(empty, out)


def _narrow_by_change(args, matrix, cases, selection: dict) -> list | int:
    """The cases a change selects (the selection printed and recorded), or an exit code: 2 when
    the vLLM under test is not the checkout of --vllm-diff, 4 when nothing is selected."""
    change = change_selection(args, matrix, cases)
    if change is None:
        return cases
    if args.vllm_diff:
        from harness.engine.target import not_the_checkout

        other = not_the_checkout(Path(args.vllm_repo))
        if other:  # rows chosen by a change must run on the vLLM that has the change
            raise UsageError(f"--vllm-diff {args.vllm_diff}: {other}")
    from harness.select.rows import narrow, to_text

    err.print(to_text(change), end="", highlight=False, markup=False)
    cases = narrow(cases, change)
    selection["change"] = {
        "vllm_range": change.vllm_range,
        "files": sorted(e.path for e in change.effects),
        "rows": len(change.rows),
    }
    if not cases:  # a run that compares nothing proves nothing: exit 4, as when everything skips
        report_dir = Path(args.out or "runs/nothing-selected")
        _empty(matrix, report_dir, args.shard, selection)
        err.print(
            f"[bold yellow]NOTHING SELECTED[/] (exit 4): {change.summary()}; empty report in "
            f"{report_dir}"
        )
        return 4
    return cases


def check_model_files(matrix, cases) -> None:
    """A `local` or `package` model that is not there is a typo or a missing install, not a skip
    (a skip would let the gate pass on the other cases): a UsageError naming each case. A model
    from the HF cache that is absent stays a skip (the hub matrix names models users may lack)."""
    from harness.matrix.schema import LocalModel, PackageModel
    from harness.models.cache import ModelUnavailable
    from harness.models.resolve import stored_model_dir

    problems = []
    for case in cases:
        if isinstance(case.model, (LocalModel, PackageModel)):
            try:
                stored_model_dir(case.model, Path(matrix.path).parent)
            except ModelUnavailable as e:
                problems.append(f"{case.where}: case {case.id!r}: {e}")
    if problems:
        raise UsageError("model files not found:\n" + "\n".join(problems))


def _rows_total(cases, args, platform: Platform) -> int:
    """How many results the run will produce (the progress bar's total), from the cases with
    their checks expanded."""
    from harness.run.plan import needs_fp32_reference

    wanted = lambda r: not args.runners or r in args.runners or runner_info(r).is_reference  # noqa: E731
    total = sum(len([r for r in c.runners if wanted(r)]) for c in cases)
    # half precision: HF also runs in float32 for each case with calibrated bounds
    return total + sum(
        1
        for c in cases
        if any(runner_info(r).is_reference for r in c.runners)
        and needs_fp32_reference(c, args.dtype or c.dtype or platform.default_dtype)
    )


def cmd_run(args: argparse.Namespace) -> int:
    from harness.engine.target import unsupported_here
    from harness.matrix.checks import expand_checks
    from harness.run.execute import Timeouts
    from harness.run.session import run_cases

    matrix = load_matrix(args.matrix)
    cases = filter_cases(matrix, args.cases)
    # shards of one run must agree on this; `parity report merge` refuses reports that differ
    selection = {
        "cases": sorted(args.cases or []),
        "runners": sorted(args.runners or []),
        "against": args.against,
        "dtype": args.dtype,
    }
    cases = _narrow_by_change(args, matrix, cases, selection)
    if isinstance(cases, int):
        return cases
    if args.shard:
        try:
            k, n = parse_shard(args.shard)
        except ValueError as e:
            raise UsageError(str(e)) from None
        cases = shard_cases(cases, k, n)
        err.print(f"shard {k}/{n}: {len(cases)} case(s): {', '.join(c.id for c in cases)}")
        if not cases:  # more shards than model groups: an empty shard is a valid, passing shard
            _empty(matrix, Path(args.out or "runs/empty-shard"), f"{k}/{n}", selection)
            return 0
    elif not cases:
        raise UsageError(f"no case of {args.matrix} matches {args.cases}")
    check_model_files(matrix, cases)
    refused = unsupported_here()
    if refused:  # its internals (runner detection, start-up hooks) were never checked: refuse
        raise UsageError(refused)
    platform = Platform(device(args.device), in_process_engine=not args.naive)
    run_dir = Path(args.out or f"runs/{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}")
    cases = expand_checks(cases, seed=args.shuffle_seed)  # one derived case per check, once
    with progress_reporter(err, "parity", _rows_total(cases, args, platform)) as progress:
        report = run_cases(
            matrix,
            cases,
            run_dir,
            platform,
            runners=args.runners,
            dtype=args.dtype,
            jobs=args.jobs,
            timeouts=Timeouts(case=args.case_timeout, load=args.load_timeout),
            progress=progress,
            against=args.against,
            golden_dir=Path(args.golden_dir),
            naive=args.naive,
        )
    report.shard, report.selection = (args.shard if args.shard else None), selection
    paths = write_all(report, run_dir)
    print_table(report, verbose=args.verbose)
    err.print(f"report: {paths['json']} · {paths['markdown']} · {paths['junit']} · {paths['html']}")
    if args.junit:
        Path(args.junit).write_text(paths["junit"].read_text())
    if args.markdown:
        Path(args.markdown).write_text(paths["markdown"].read_text())
    return report.exit_code()
