"""Fault injection through the real worker machinery: one clear verdict per fault, nothing lost."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT

DATA = Path(__file__).parent / "data"
# the case limit of the fault run: `hang` must run into it, while every other case of the run (the
# HF reference's included) must finish inside it on a loaded host (5 s did not leave that margin)
CASE_TIMEOUT = 30

EXPECTED = {
    "crash": ("error", "worker died during case crash (killed by SIGABRT)"),
    "exit": ("error", "worker died during case exit (exit code 3)"),
    "oom": ("error", "killed by SIGKILL (killed: out of memory?)"),
    "hang": ("error", f"timed out after {CASE_TIMEOUT} s during case hang; killed"),
    "fail-load": (
        "error",
        "engine/model failed to load: RuntimeError: engine refused to start (fake)",
    ),
    "start-timeout": ("error", "ServerTimeout: vllm serve was not healthy after 1 s (fake)"),
    "fail-load-timeout-words": (
        "error",
        "engine/model failed to load: RuntimeError: engine refused",
    ),
    "raise": ("error", "runner raised ValueError: fake runner raised on purpose"),
    "nan": ("fail", "NaN in runner output at item 0"),
    "inf": ("fail", "Inf in runner output at item 1"),
    "short": ("fail", "wrong count: 23 outputs for 24 inputs"),
    "wrong-shape": ("fail", "shape mismatch at item 0: reference [64], runner [8]"),
    "model-missing-offline": (
        "skip",
        "parity-harness/not-in-any-cache is not in the Hugging Face cache",
    ),
    "crash-log-mentions-known-skip": (
        "error",
        "worker died during case crash-log-mentions-known-skip (killed by SIGABRT)",
    ),
}


@pytest.fixture(scope="module")
def fault_report(tmp_path_factory):
    out = tmp_path_factory.mktemp("worker-faults")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.cli",
            "run",
            "--matrix",
            str(DATA / "worker-faults.yaml"),
            "--case-timeout",
            str(CASE_TIMEOUT),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    return proc, out, json.loads((out / "report.json").read_text())


@pytest.mark.parametrize("case_id", sorted(EXPECTED))
def test_each_fault_gets_one_clear_verdict(fault_report, case_id):
    proc, out, report = fault_report
    (res,) = [r for r in report["results"] if r["case_id"] == case_id]
    status, text = EXPECTED[case_id]
    assert res["status"] == status and text in res["reason"], res["reason"]
    # only these ran out of time (the worker's limit, a server's start limit): detection power
    # holds such a row inconclusive, never a catch; words in a message are not a cause
    assert res["timed_out"] == (case_id in ("hang", "start-timeout")), res
    if status == "error" and case_id not in (
        "fail-load",
        "start-timeout",
        "fail-load-timeout-words",
        "raise",
    ):
        assert "worker log tail" in res["reason"]


def test_the_run_completes_and_reports_everything(fault_report):
    proc, out, report = fault_report
    assert proc.returncode == 1
    assert len(report["results"]) == len(EXPECTED) and not report["partial"]
    for name in ("report.md", "junit.xml"):
        text = (out / name).read_text()
        assert all(case in text for case in EXPECTED)
    # stderr is a pipe here, as in a CI log: one plain progress line per finished (case, runner)
    for case in EXPECTED:
        assert f"{case} [fake]" in proc.stderr, proc.stderr[-2000:]
    assert f"[{2 * len(EXPECTED)}/{2 * len(EXPECTED)}]" in proc.stderr


def test_corrupt_golden_is_an_error_not_a_comparison(tmp_path):
    import shutil

    golden = tmp_path / "golden"
    shutil.copytree(ROOT / "golden" / "bert-tiny-mean-embed", golden / "bert-tiny-mean-embed")
    arrays = next((golden / "bert-tiny-mean-embed").glob("reference-*.safetensors"))
    arrays.write_bytes(arrays.read_bytes()[:100])  # truncated
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.cli",
            "run",
            "-m",
            "matrices/ci.yaml",
            "-k",
            "bert-tiny-mean-embed",
            "--runners",
            "vllm-v1",
            "--against",
            "golden",
            "--golden-dir",
            str(golden),
            "--out",
            str(tmp_path / "run"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == 1
    results = json.loads((tmp_path / "run" / "report.json").read_text())["results"]
    assert {r["case_id"] for r in results} >= {
        "bert-tiny-mean-embed",
        "bert-tiny-mean-embed@shuffle",
    }
    for res in results:  # the base case and its derived check cases, all held to the same golden
        assert (
            res["status"] == "error"
            and "golden corrupt" in res["reason"]
            and "sha256" in res["reason"]
        )


def test_ctrl_c_keeps_results_and_writes_a_partial_report(tmp_path):
    # cases run in id order: `crash` completes (as an error) before `hang` blocks
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "harness.cli",
            "run",
            "--matrix",
            str(DATA / "worker-faults.yaml"),
            "-k",
            "crash",
            "hang",
            "--jobs",
            "1",
            "--case-timeout",
            "300",
            "--out",
            str(tmp_path),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    log = tmp_path / "logs" / "fake.log"
    deadline = time.monotonic() + 240  # a hang guard, not a budget
    # an event, not a pause: the restarted fake worker says it is inside the hanging case
    while time.monotonic() < deadline and not (
        log.exists() and "fake run: hang" in log.read_text()
    ):
        assert proc.poll() is None, proc.communicate()[0]
        time.sleep(0.1)
    os.kill(proc.pid, signal.SIGINT)
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode == 1, output
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["partial"] and "interrupted" in report["partial_reason"]
    by_id = {r["case_id"]: r for r in report["results"]}
    assert (
        "killed by SIGABRT" in by_id["crash"]["reason"]
    )  # the result obtained before Ctrl-C is kept
    assert by_id["hang"]["status"] == "error"
    assert "PARTIAL" in (tmp_path / "report.md").read_text()
