"""`parity run` end to end, as a user runs it: a real fault must fail, naming case and metric."""

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from tests.conftest import ROOT

DATA = Path(__file__).parent / "data"


def parity(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, cwd=cwd)


def test_cls_pooling_instead_of_mean_fails_naming_case_and_metric(tmp_path):
    proc = parity("run", "--matrix", str(DATA / "fault-cls-pooling.yaml"), "--out", str(tmp_path))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    (res,) = report["results"]
    assert res["case_id"] == "bert-tiny-mean-embed-cls-fault" and res["status"] == "fail"
    assert res["actual_runner"] == "v1"
    assert "cosine_distance" in res["reason"] and "> 1e-06" in res["reason"]
    failed = {m["name"]: m for m in res["metrics"] if not m["ok"]}
    assert failed["cosine_distance"]["value"] > 1e-3  # a real, large difference
    md = (tmp_path / "report.md").read_text()
    assert "bert-tiny-mean-embed-cls-fault" in md and "**fail**" in md and "cosine_distance" in md
    junit = ET.parse(tmp_path / "junit.xml").getroot()
    assert junit.find(".//testcase/failure") is not None
    assert "bert-tiny-mean-embed-cls-fault" in proc.stdout


def test_malformed_matrix_exits_2_with_location(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("cases:\n  - id: x\n    family: nope\n")
    proc = parity("run", "--matrix", str(bad), "--out", str(tmp_path / "run"))
    assert proc.returncode == 2
    assert f"{bad}:3" in proc.stderr and "unknown family 'nope'" in proc.stderr
