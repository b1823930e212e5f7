"""What people read: the terminal shows the failures and a family x runner grid (V1, V2, auto,
served), every row only with --verbose; report.md and report.html open with the same grid. The
pytest plugin's options carry the `--parity-` prefix, and test doubles stay out of the help."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys

from rich.console import Console

from harness.cli.output import print_table
from harness.cli.parser import build_parser
from harness.report import grid
from harness.report.html import to_html
from harness.report.markdown import to_markdown
from harness.report.model import Report, Result
from tests.conftest import ROOT

ROWS = [
    ("bert-a", "encoder-embed", "vllm-v1", "pass"),
    ("bert-a", "encoder-embed", "vllm-v2", "fail"),
    ("bert-b", "encoder-embed", "vllm-v2", "pass"),
    ("bert-a", "encoder-embed", "vllm-auto", "pass"),
    ("bert-a", "encoder-embed", "vllm-serve-auto", "xfail"),
    ("rerank-a", "cross-encoder", "vllm-serve-v1", "skip"),
]


def _report() -> Report:
    return Report(
        harness_version="0",
        matrix="m.yaml",
        matrix_sha256="0" * 64,
        device="cpu",
        started=dt.datetime.now().isoformat(),
        results=[
            Result(
                case_id=c,
                family=f,
                task="embed",
                runner=r,
                runner_label=r,
                status=s,
                reason=f"{s} reason of {c}",
            )
            for c, f, r, s in ROWS
        ],
    )


def test_the_grid_counts_verdicts_per_family_and_column():
    cols, cells = grid.grid(_report().results)
    assert cols == ["V1", "V2", "auto", "served"]
    embed = cells["encoder-embed"]
    assert grid.cell(embed["V2"]) == "1 FAIL 1 pass"  # worst first
    assert grid.cell(embed["served"]) == "1 xfail"
    assert grid.cell(cells["cross-encoder"].get("V1")) == "-"
    assert grid.failing(embed["V2"]) and not grid.failing(embed["served"])


def _printed(verbose: bool) -> str:
    console = Console(record=True, width=200)
    print_table(_report(), console, verbose=verbose)
    return console.export_text()


def test_the_terminal_shows_failures_and_the_grid_and_every_row_only_when_verbose():
    short = _printed(verbose=False)
    assert "FAIL bert-a on vllm-v2" in short and "fail reason of bert-a" in short
    assert "encoder-embed" in short and "1 FAIL 1 pass" in short
    assert "bert-b" not in short  # a passing row is counted in the grid, not listed
    assert "bert-b" in _printed(verbose=True)


def test_report_md_and_html_open_with_the_same_grid():
    report = _report()
    md = to_markdown(report)
    table = grid.to_markdown(report.results)
    assert table in md and md.index(table) < md.index("| case | runner |")
    assert "| encoder-embed | 1 pass | **1 FAIL 1 pass** | 1 pass | 1 xfail |" in md
    html = to_html(report)
    assert html.index('id="grid"') < html.index('id="summary"')
    assert "1 FAIL 1 pass" in html


def test_help_names_every_command_and_no_test_double():
    text = build_parser().format_help()
    for command in ("branch", "check", "run", "golden", "mteb", "select", "models", "inputs"):
        assert f"\n    {command} " in text, command
    assert "report" in text and "power" in text
    run_help = build_parser()._subparsers._group_actions[0].choices["run"].format_help()
    assert "--vllm" in run_help and "fake" not in run_help


def test_the_pytest_plugin_options_carry_the_parity_prefix():
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--help", "-p", "no:cacheprovider"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    options = proc.stdout
    for name in ("matrix", "runners", "golden-dir", "update-golden", "against", "out"):
        assert f"--parity-{name}" in options, name
    for bare in ("--matrix", "--runners", "--golden-dir", "--update-golden"):
        assert f" {bare}" not in options.replace(f"--parity-{bare[2:]}", ""), bare
