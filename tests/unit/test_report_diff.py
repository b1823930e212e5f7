"""`parity report diff`: new failures fail, drift inside the bounds warns, nothing moved says so."""

import json
import subprocess
import sys

from harness.report import MetricOut, Report, Result, write_json
from harness.report_diff import diff, to_markdown
from tests.conftest import ROOT


def _rep(**cases):
    results = [Result(case_id=cid, family="f", task="embed", runner="vllm-v2", runner_label="l", status=status,
                      metrics=[MetricOut(name="max_abs", value=value, bound=1e-5, ok=value <= 1e-5)])
               for cid, (status, value) in cases.items()]
    return Report(harness_version="0", matrix="m.yaml", matrix_sha256="0", device="cpu", started="t", results=results)


def test_new_failure_fails_and_drift_inside_the_bound_warns():
    old = _rep(a=("pass", 1e-8), b=("pass", 1e-8), c=("fail", 1.0), d=("pass", 2e-7))
    new = _rep(a=("fail", 1e-3), b=("pass", 5e-6), c=("pass", 1e-8), d=("pass", 3e-7), e=("error", 0.0))
    d = diff(old, new)
    assert {c.case_id for c in d.of("new-failure")} == {"a", "e"} and d.exit_code == 1
    assert [c.case_id for c in d.of("fixed")] == ["c"]
    (drift,) = d.of("drift")  # b grew 500x but stays inside 1e-5; d grew 1.5x: not drift
    assert drift.case_id == "b" and "grew 500x, still inside, 0.5 of its bound" in drift.detail
    md = to_markdown(d, old, new)
    assert "### New failures (2)" in md and "### Drift inside the bounds (warnings) (1)" in md


def test_nothing_moved_exits_0():
    r = _rep(a=("pass", 1e-8))
    d = diff(r, r)
    assert d.exit_code == 0 and not d.changes and "Nothing moved." in to_markdown(d, r, r)


def test_cli_exit_code(tmp_path):
    write_json(_rep(a=("pass", 1e-8)), tmp_path / "old.json")
    write_json(_rep(a=("fail", 1.0)), tmp_path / "new.json")
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "report", "diff", str(tmp_path / "old.json"),
                           str(tmp_path / "new.json"), "--out", str(tmp_path)], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 1 and "New failures (1)" in proc.stdout and (tmp_path / "diff.md").is_file()
    json.loads((tmp_path / "old.json").read_text())
