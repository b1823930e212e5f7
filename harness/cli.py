"""`parity run | check | models | report`.

Exit codes: 0 every compared case passed (or is a recorded divergence / skip); 1 a case failed,
errored, or a divergence mark is stale; 2 bad usage or a malformed matrix; 4 nothing was compared
(every result skipped, or --changed-files / --vllm-diff selected no row: a gate that proved
nothing does not pass).
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from harness.judge.verdict import is_failing
from harness.matrix.loader import filter_cases, parse_shard, shard_cases
from harness.matrix.runner_names import RUNNER_NAMES, runner_info
from harness.matrix.schema import MatrixError
from harness.report.markdown import metrics_cell
from harness.report.model import ORDER, Report, read_json
from harness.report.write import write_all
from harness.run import interrupt
from harness.run.execute import Timeouts
from harness.run.matrices import load_matrix
from harness.run.progress import progress_reporter
from harness.runners.platform import Platform, detect_device
from harness.select.rows import SelectionError
from harness.select.vllm_source import SourceError

DEFAULT_MATRIX = "matrices/pooling.yaml"
STYLE = {
    "pass": "green",
    "xfail": "yellow",
    "skip": "dim",
    "fail": "bold red",
    "error": "bold red",
    "xpass": "bold red",
}
# CI logs are not terminals: keep ids whole there instead of folding them at 80 columns
err = Console(stderr=True, width=None if sys.stderr.isatty() else 160)
out = Console(width=None if sys.stdout.isatty() else 160)


def _add_selection(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--matrix", "-m", default=DEFAULT_MATRIX, help=f"matrix YAML (default {DEFAULT_MATRIX})"
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
        help=f"only these runners ({', '.join(RUNNER_NAMES)}); hf runs as reference when needed",
    )


def _add_change(p: argparse.ArgumentParser) -> None:
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
    import json

    from harness.select.rows import to_text

    matrix = load_matrix(args.matrix)
    if not (args.changed_files or args.vllm_diff):
        err.print(
            "[red]parity select needs --changed-files FILE... or --vllm-diff RANGE --vllm-repo "
            "DIR[/]"
        )
        return 2
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


def progress_bar(name: str, total: int):
    """Progress on stderr: a bar on a terminal, plain lines and a heartbeat in a log."""
    return progress_reporter(err, name, total)


def print_table(report: Report, console: Console = out) -> None:
    t = Table(title=f"parity · {report.matrix} · device {report.device}", show_lines=False)
    for col in ("case", "runner", "verdict", "metrics", "time", "reason"):
        t.add_column(col, overflow="fold")
    for r in sorted(report.results, key=lambda r: (r.case_id, r.runner)):
        t.add_row(
            r.case_id,
            r.runner_label,
            f"[{STYLE.get(r.status, '')}]{r.status}[/]",
            metrics_cell(r).replace("<br>", "\n"),
            f"{(r.load_seconds or 0) + (r.run_seconds or 0):.1f}s",
            r.reason[:200],
        )
    console.print(t)
    for r in sorted(report.results, key=lambda r: (ORDER.get(r.status, 9), r.case_id, r.runner)):
        if is_failing(r.status):
            console.print(
                f"[bold red]{r.status.upper()}[/] {r.case_id} on {r.runner_label} ({r.where}): "
                f"{r.reason}",
                highlight=False,
                soft_wrap=True,
            )
    if report.audit:
        a = Table(title="default-runner audit (vllm-auto)")
        for col in ("family", "case", "expected", "actual", "why"):
            a.add_column(col, overflow="fold")
        for row in sorted(report.audit, key=lambda r: (r.family, r.case_id)):
            style = "" if row.ok else "bold red"
            a.add_row(
                row.family,
                row.case_id,
                (row.expected or "-").upper(),
                f"[{style}]{(row.actual or '-').upper()}[/]"
                if style
                else (row.actual or "-").upper(),
                row.why,
            )
        console.print(a)
    c = report.counts()
    summary = ", ".join(f"{c[k]} {k}" for k in ORDER if c.get(k))
    verdict = (
        (
            "[bold yellow]NOTHING COMPARED[/] (every result skipped; exit 4)"
            if report.nothing_compared
            else "[green]PASSED[/]"
        )
        if report.ok
        else "[bold red]FAILED[/]"
    )
    if report.partial:
        verdict += f" [bold red](partial: {report.partial_reason})[/]"
    console.print(f"{verdict} · {summary} · {report.wall_seconds or 0:.1f} s")


def cmd_run(args: argparse.Namespace) -> int:
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
    change = change_selection(args, matrix, cases)
    if change is not None and args.vllm_diff:
        from harness.engine.target import not_the_checkout

        other = not_the_checkout(Path(args.vllm_repo))
        if other:  # rows chosen by a change must run on the vLLM that has the change
            err.print(f"[red]parity: --vllm-diff {args.vllm_diff}: {other}[/]")
            return 2
    if change is not None:
        from harness.select.rows import narrow, to_text

        err.print(to_text(change), end="", highlight=False, markup=False)
        cases = narrow(cases, change)
        selection["change"] = {
            "vllm_range": change.vllm_range,
            "files": sorted(e.path for e in change.effects),
            "rows": len(change.rows),
        }
        if (
            not cases
        ):  # a run that compares nothing proves nothing: exit 4, as when everything skips
            report_dir = Path(args.out or "runs/nothing-selected")
            from harness.run.session import empty_report

            empty = empty_report(matrix, detect_device())
            empty.shard, empty.selection = args.shard, selection
            write_all(empty, report_dir)
            err.print(
                f"[bold yellow]NOTHING SELECTED[/] (exit 4): {change.summary()}; empty report in "
                f"{report_dir}"
            )
            return 4
    if args.shard:
        try:
            k, n = parse_shard(args.shard)
        except ValueError as e:
            err.print(f"[red]{e}[/]")
            return 2
        cases = shard_cases(cases, k, n)
        err.print(f"shard {k}/{n}: {len(cases)} case(s): {', '.join(c.id for c in cases)}")
        if not cases:
            # more shards than model groups: an empty shard is a valid, passing shard
            report_dir = Path(args.out or "runs/empty-shard")
            from harness.run.session import empty_report

            empty = empty_report(matrix, detect_device())
            empty.shard, empty.selection = f"{k}/{n}", selection
            write_all(empty, report_dir)
            return 0
    elif not cases:
        err.print(f"[red]no case of {args.matrix} matches {args.cases}[/]")
        return 2
    from harness.engine.target import unsupported_here

    refused = unsupported_here()
    if refused:  # its internals (runner detection, start-up hooks) were never checked: refuse
        err.print(f"[red]parity: {refused}[/]")
        return 2
    platform = Platform(args.device or detect_device(), in_process_engine=not args.naive)
    run_dir = Path(args.out or f"runs/{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}")
    from harness.matrix.checks import expand_checks
    from harness.run.plan import needs_fp32_reference

    total = sum(
        len(
            [
                r
                for r in c.runners
                if not args.runners or r in args.runners or runner_info(r).is_reference
            ]
        )
        for c in expand_checks(cases)
    )
    # half precision: HF also runs in float32 for each case with calibrated bounds
    total += sum(
        1
        for c in cases
        if any(runner_info(r).is_reference for r in c.runners)
        and needs_fp32_reference(c, args.dtype or c.dtype or platform.default_dtype)
    )
    with progress_bar("parity", total) as progress:
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
            shuffle_seed=args.shuffle_seed,
            naive=args.naive,
        )
    report.shard, report.selection = (args.shard if args.shard else None), selection
    paths = write_all(report, run_dir)
    print_table(report)
    err.print(f"report: {paths['json']} · {paths['markdown']} · {paths['junit']} · {paths['html']}")
    if args.junit:
        Path(args.junit).write_text(paths["junit"].read_text())
    if args.markdown:
        Path(args.markdown).write_text(paths["markdown"].read_text())
    return report.exit_code()


def cmd_check(args: argparse.Namespace) -> int:
    """Infer the cases of the user's own checkpoint, write them as a matrix, run it as `parity
    run -m` does. Exit 2 for a checkpoint it cannot read or classify."""
    import os
    import shlex

    from harness.check.cases import build_cases, locate, matrix_text
    from harness.check.infer import CheckError, default_families, infer

    try:
        model = locate(args.model)
        inf = infer(model.folder)
    except CheckError as e:
        err.print(f"[bold red]parity check:[/] {escape(str(e))}", highlight=False)
        return 2
    families = default_families()
    t = Table(title=f"parity check · {args.model}")
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
    if inf.trust_remote_code and not args.trust_remote_code:
        err.print(
            "[bold red]parity check:[/] the config names code of its own (config.json auto_map); "
            "read it, then pass --trust-remote-code to run it",
            highlight=False,
        )
        return 2
    run_dir = Path(args.out or f"runs/check-{model.slug()}-{dt.datetime.now():%Y%m%d-%H%M%S}")
    matrix_path = Path(args.write_matrix or run_dir / "check.yaml")
    matrix_path.parent.mkdir(parents=True, exist_ok=True)
    runners = list(args.runners or ["vllm-v1", "vllm-v2"])
    if args.serve:
        runners += [r for r in ("vllm-serve-v1", "vllm-serve-v2") if r not in runners]
    # the user named the checkpoint and inputs on the command line: they may live anywhere
    os.environ["PARITY_ALLOW_ABSOLUTE_PATHS"] = "1"
    try:
        used, cases, notes = build_cases(
            inf,
            model,
            matrix_path.parent,
            runners,
            args.dtype,
            Path(args.inputs) if args.inputs else None,
        )
    except CheckError as e:
        err.print(f"[bold red]parity check:[/] {escape(str(e))}", highlight=False)
        return 2
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
    run_args = ["run", "-m", str(matrix_path), "--out", str(run_dir)]
    if args.device:
        run_args += ["--device", args.device]
    return cmd_run(build_parser().parse_args(run_args))


def cmd_golden(args: argparse.Namespace) -> int:
    from harness.run.session import golden_session

    matrix = load_matrix(args.matrix)
    cases = filter_cases(matrix, args.cases)
    platform = Platform(args.device or detect_device())
    run_dir = Path(args.out or f"runs/golden-{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}")
    with progress_bar(f"golden {args.mode}", len(cases)) as progress:
        report = golden_session(
            matrix, cases, run_dir, platform, Path(args.golden_dir), args.mode, progress=progress
        )
    paths = write_all(report, run_dir)
    print_table(report)
    err.print(f"report: {paths['json']}")
    return report.exit_code()


def cmd_mteb(args: argparse.Namespace) -> int:
    from harness.mteb import report as mteb_report
    from harness.mteb.session import mteb_session

    matrix = load_matrix(args.matrix)
    cases = [c for c in filter_cases(matrix, args.cases) if c.mteb_tasks]
    if not cases:
        err.print(f"[red]no case of {args.matrix} has mteb_tasks[/]")
        return 2
    platform = Platform(args.device or detect_device())
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
    with progress_bar("mteb", total) as progress:
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
    print_table(report)
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
            err.print(
                f"[red]{args.what!r} is neither an input set ({', '.join(INPUT_SET_NAMES)}) nor a "
                "file or folder[/]"
            )
            return 2
        try:
            inputs = load(
                spec, Path.cwd() / "matrices"
            )  # paths as a matrix in matrices/ would see them
        except InputError as e:
            err.print(f"[red]{e}[/]")
            return 2
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


def cmd_report(args: argparse.Namespace) -> int:
    if args.action == "diff":
        from harness.report import diff as report_diff

        if len(args.reports) != 2:
            err.print("[red]parity report diff takes OLD.json NEW.json[/]")
            return 2
        old_path, new_path = (Path(p) for p in args.reports)
        old, new = read_json(old_path), read_json(new_path)
        d = report_diff.diff(old, new, args.drift_factor)
        if args.outputs:
            d.outputs = report_diff.compare_outputs(old, new, old_path.parent, new_path.parent)
            for x in d.outputs:
                if x.problem:  # reported, never a silent 0; the exit code stays the verdicts'
                    err.print(
                        f"outputs of {x.case_id} [{x.runner}] not compared: {x.problem}",
                        highlight=False,
                        markup=False,
                    )
        md = report_diff.to_markdown(d, old, new)
        page = report_diff.to_html(d, old, new)
        sys.stdout.write(page if args.format == "html" else md)
        if args.out:
            Path(args.out).mkdir(parents=True, exist_ok=True)
            (Path(args.out) / "diff.md").write_text(md)
            (Path(args.out) / "diff.html").write_text(page)
        return d.exit_code
    if args.action == "merge":
        from harness.report.model import merge

        if not args.out:
            err.print("[red]parity report merge needs --out DIR[/]")
            return 2
        try:
            report = merge([read_json(Path(p)) for p in args.reports])
        except ValueError as e:
            err.print(f"[red]cannot merge: {e}[/]")
            return 2
        paths = write_all(report, Path(args.out))
        print_table(report)
        err.print(
            f"merged {len(args.reports)} report(s): {paths['json']} · {paths['markdown']} · "
            f"{paths['junit']} · "
            f"{paths['html']}"
        )
        return report.exit_code()
    if len(args.reports) != 1:
        err.print("[red]parity report show takes one report.json[/]")
        return 2
    report = read_json(Path(args.reports[0]))
    if args.format == "markdown":
        from harness.report.markdown import to_markdown

        sys.stdout.write(to_markdown(report))
    elif args.format == "html":
        from harness.report.html import to_html

        sys.stdout.write(to_html(report))
    elif args.format == "junit":
        from harness.report.junit import to_junit

        sys.stdout.write(to_junit(report))
    else:
        print_table(report)
    return report.exit_code()


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="parity", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a matrix: HF reference versus each vLLM runner")
    _add_selection(run)
    run.add_argument("--out", "-o", help="run folder (default runs/<timestamp>)")
    run.add_argument(
        "--device", choices=("cpu", "cuda"), help="default: cuda if an NVIDIA driver is present"
    )
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
    run.add_argument(
        "--against",
        choices=("hf", "golden"),
        default="hf",
        help="reference: run HF live (default) or read golden/ (starts no HF process)",
    )
    run.add_argument("--golden-dir", default="golden", help="golden folder (default golden/)")
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
    _add_change(run)
    run.add_argument("--junit", help="also copy the JUnit XML here")
    run.add_argument("--markdown", help="also copy the Markdown summary here")
    run.set_defaults(func=cmd_run)
    chk = sub.add_parser(
        "check",
        help="parity of your own checkpoint: infer its cases, run them on HF, V1 and V2",
    )
    chk.add_argument(
        "model",
        help="a checkpoint folder, package:NAME[/SUBPATH], or a hub id in the HF cache "
        "(never downloaded)",
    )
    chk.add_argument("--inputs", help="your inputs: a .txt (a text a line) or .jsonl file")
    chk.add_argument(
        "--runners",
        "-r",
        nargs="+",
        choices=[r for r in RUNNER_NAMES if runner_info(r).is_vllm],
        metavar="RUNNER",
        help="vLLM runners to hold to HF (default vllm-v1 vllm-v2)",
    )
    chk.add_argument(
        "--serve", action="store_true", help="also through `vllm serve` (vllm-serve-v1, -v2)"
    )
    chk.add_argument(
        "--dtype",
        choices=("float32", "float16", "bfloat16"),
        help="default: the platform's (float32 on CPU); bounds are the family's for it",
    )
    chk.add_argument("--device", choices=("cpu", "cuda"))
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
    chk.set_defaults(func=cmd_check)
    gold = sub.add_parser("golden", help="record | verify | update HF goldens (golden/<case>/)")
    gold.add_argument("mode", choices=("record", "verify", "update"))
    _add_selection(gold)
    gold.add_argument("--golden-dir", default="golden", help="golden folder (default golden/)")
    gold.add_argument("--out", "-o", help="run folder (default runs/golden-<timestamp>)")
    gold.add_argument("--device", choices=("cpu", "cuda"))
    gold.set_defaults(func=cmd_golden)
    mt = sub.add_parser(
        "mteb", help="MTEB main scores of hf and each runner, gated on deltas and expected scores"
    )
    _add_selection(mt)
    mt.set_defaults(matrix="matrices/mteb.yaml")
    mt.add_argument("--out", "-o", help="run folder (default runs/mteb-<timestamp>)")
    mt.add_argument("--device", choices=("cpu", "cuda"))
    mt.add_argument(
        "--golden-dir", default="golden", help="expected scores live in <golden-dir>/mteb/"
    )
    mt.add_argument(
        "--record-expected", action="store_true", help="store HF's scores as the expected scores"
    )
    mt.add_argument(
        "--shuffle-seed", type=int, default=0, help="seed of the request shuffle (restored after)"
    )
    mt.set_defaults(func=cmd_mteb)
    sel = sub.add_parser(
        "select",
        help="the (case, runner) rows a change can affect, each with the file that "
        "selects it (exit 4: nothing selected)",
    )
    _add_selection(sel)
    _add_change(sel)
    sel.add_argument("--json", action="store_true", help="print the selection as JSON")
    sel.add_argument("--out", "-o", metavar="FILE", help="also write the JSON selection to FILE")
    sel.set_defaults(func=cmd_select)
    models = sub.add_parser(
        "models", help="resolve (and build) every case's model; print fingerprints"
    )
    _add_selection(models)
    models.set_defaults(func=cmd_models)
    inp = sub.add_parser("inputs", help="show what a case will send: count, hash and first items")
    inp.add_argument("action", choices=("show",))
    inp.add_argument(
        "what", help="a built-in input set's name, or a .txt / .jsonl file or a folder of images"
    )
    inp.add_argument("--first", type=int, default=5, help="how many items to print (default 5)")
    inp.set_defaults(func=cmd_inputs)
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
        help=(
            "for diff: also compare the two runs' stored outputs per (case, runner): max |OLD - "
            "NEW|"
        ),
    )
    rep.add_argument(
        "--drift-factor",
        type=float,
        default=10.0,
        help=(
            "for diff: a metric that grew by more than this factor inside its bound is drift "
            "(default 10)"
        ),
    )
    rep.set_defaults(func=cmd_report)
    from harness.repro.cli import add_repro_parser  # `parity repro`: harness/repro/cli.py

    add_repro_parser(sub)
    sub.add_parser(
        "power",
        add_help=False,
        help="detection power: vLLM mutations against the matrix "
        "(harness/power; `parity power --help`)",
    )
    return ap


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["power"]:  # its own parser: harness/power/cli.py
        from harness.power.cli import main as power_main

        return power_main(argv[1:])
    args = build_parser().parse_args(argv)
    try:
        with interrupt.handling():  # SIGINT/SIGTERM: stop every process, keep what was obtained
            return args.func(args)
    except KeyboardInterrupt:  # before any result (reading the matrix): nothing to report
        err.print("[bold red]interrupted[/]: nothing ran, no report")
        return 130
    except MatrixError as e:
        err.print(f"[bold red]matrix error[/]\n{e}", highlight=False)
        return 2
    except (SelectionError, SourceError) as e:
        err.print(f"[bold red]cannot select by change:[/] {escape(str(e))}", highlight=False)
        return 2


if __name__ == "__main__":
    sys.exit(main())
