"""`parity report show | merge | diff`: reports read again, shards merged, two runs compared."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pydantic import ValidationError

from harness.cli.common import UsageError, err
from harness.cli.output import print_table
from harness.report.model import Report, read_json
from harness.report.write import write_all


def read_report(path: str | Path) -> Report:
    """A report.json (or a run folder holding one); a UsageError naming the path otherwise."""
    p = Path(path)
    if p.is_dir():
        p = p / "report.json"
    if not p.is_file():
        raise UsageError(f"{path}: no such report (give a report.json or the run folder)")
    try:
        return read_json(p)
    except (json.JSONDecodeError, ValidationError, UnicodeDecodeError) as e:
        first = str(e).splitlines()[0]
        raise UsageError(f"{p}: not a report.json of this harness ({first})") from None


def cmd_diff(args: argparse.Namespace) -> int:
    from harness.report import diff as report_diff

    if len(args.reports) != 2:
        raise UsageError("parity report diff takes OLD.json NEW.json")
    old, new = (read_report(p) for p in args.reports)
    old_dir, new_dir = (Path(p) if Path(p).is_dir() else Path(p).parent for p in args.reports)
    d = report_diff.diff(old, new, args.drift_factor)
    if args.outputs:
        d.outputs = report_diff.compare_outputs(old, new, old_dir, new_dir)
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


def cmd_merge(args: argparse.Namespace) -> int:
    from harness.report.model import merge

    if not args.out:
        raise UsageError("parity report merge needs --out DIR")
    try:
        report = merge([read_report(p) for p in args.reports])
    except ValueError as e:
        raise UsageError(f"cannot merge: {e}") from None
    paths = write_all(report, Path(args.out))
    print_table(report, verbose=args.verbose)
    err.print(
        f"merged {len(args.reports)} report(s): {paths['json']} · {paths['markdown']} · "
        f"{paths['junit']} · {paths['html']}"
    )
    return report.exit_code()


def cmd_report(args: argparse.Namespace) -> int:
    if args.action == "diff":
        return cmd_diff(args)
    if args.action == "merge":
        return cmd_merge(args)
    if len(args.reports) != 1:
        raise UsageError("parity report show takes one report.json")
    report = read_report(args.reports[0])
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
        print_table(report, verbose=args.verbose)
    return report.exit_code()
