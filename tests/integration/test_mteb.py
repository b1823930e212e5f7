"""`parity mteb` end to end on real weights (all-MiniLM-L6-v2) and the shipped offline tasks."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytest.importorskip("mteb", reason="the `mteb` extra is not installed")
DATA = Path(__file__).parent / "data"


def parity(*args):
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, cwd=ROOT
    )


def test_minilm_scores_match_across_runners_and_stored_expected(tmp_path):
    proc = parity("mteb", "-k", "mteb-minilm-l6", "--runners", "vllm-v1", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads((tmp_path / "report.json").read_text())
    tasks = {r["case_id"].split(":")[1] for r in report["results"]}
    assert tasks == {"ParitySTS", "ParityClassification", "ParityRetrieval", "ParityReranking"}
    for r in report["results"]:
        assert r["status"] == "pass"
        if r["runner"] != "hf":
            (d,) = [m for m in r["metrics"] if m["name"] == "main_score_delta_vs_hf"]
            assert d["value"] <= 5e-4
    assert (tmp_path / "mteb-deltas.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "<svg" in (tmp_path / "mteb.html").read_text()
    # mteb's own result layout, one folder per runner
    results = tmp_path / "mteb" / "results" / "sentence-transformers__all-MiniLM-L6-v2"
    assert (results / "vllm-v1" / "ParitySTS.json").exists() and (
        results / "hf" / "ParitySTS.json"
    ).exists()


def test_cls_pooling_fault_moves_the_score_outside_tolerance(tmp_path):
    proc = parity(
        "mteb",
        "--matrix",
        str(DATA / "mteb-fault.yaml"),
        "--golden-dir",
        str(tmp_path / "golden"),
        "--record-expected",
        "--out",
        str(tmp_path / "run"),
    )
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    (bad,) = [r for r in report["results"] if r["runner"] == "vllm-v1"]
    assert bad["status"] == "fail" and "main_score_delta_vs_hf" in bad["reason"]
    (delta,) = [m for m in bad["metrics"] if m["name"] == "main_score_delta_vs_hf"]
    assert delta["value"] > 10 * delta["bound"]
    (ref,) = [r for r in report["results"] if r["runner"] == "hf"]
    assert ref["status"] == "pass"  # the reference agrees with its just-recorded expected score
