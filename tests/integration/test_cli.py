"""`parity run` end to end, as a user runs it: a real fault must fail, naming case and metric."""

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.conftest import ROOT

DATA = Path(__file__).parent / "data"


def parity(*args, cwd=ROOT):
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, cwd=cwd
    )


FAULT_MARGIN = {"float32": 100, "bfloat16": 5, "float16": 5}


@pytest.fixture(scope="module")
def fault_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("faults")
    proc = parity("run", "--matrix", str(DATA / "faults.yaml"), "--out", str(out))
    return proc, out, json.loads((out / "report.json").read_text())


@pytest.mark.parametrize(
    "case_id, metric",
    [
        ("embed-cls-pooling-fault", "cosine_distance"),
        ("embed-no-normalize-fault", "max_abs"),
        ("classify-no-softmax-fault", "max_abs"),
        ("score-no-sigmoid-fault", "max_abs"),
        ("token-classify-no-softmax-fault", "max_abs"),
        ("reward-sigmoid-fault", "max_abs"),
        ("prm-wrong-step-tag-fault", "empty runner output"),
        ("colbert-no-normalize-fault", "max_abs"),
        ("clip-image-wrong-mean-std-fault", "max_abs"),
    ],
)
def test_real_faults_fail_naming_case_and_metric(fault_run, case_id, metric):
    proc, out, report = fault_run
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (res,) = [r for r in report["results"] if r["case_id"] == case_id]
    assert res["status"] == "fail" and res["actual_runner"] == "v1", res
    assert metric in res["reason"]
    if res["metrics"]:
        failed = {m["name"]: m for m in res["metrics"] if not m["ok"]}
        # a real, large difference: far beyond the bound in any dtype (half-precision bounds are
        # ~1000x wider than float32's, so the margin asked of them is smaller)
        assert failed[metric]["value"] > FAULT_MARGIN[res["dtype"]] * failed[metric]["bound"]
    assert f"FAIL {case_id} on vLLM V1" in proc.stdout  # the log line names case and reason
    assert metric in proc.stdout.split(f"FAIL {case_id}", 1)[1].splitlines()[0]


BF16_FAULTS = {
    "embed-cls-pooling-fault": "cosine_distance",
    "embed-no-normalize-fault": "norm_rel",
    "classify-no-softmax-fault": "max_abs",
    "score-no-sigmoid-fault": "max_abs",
}


@pytest.fixture(scope="module")
def bf16_fault_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("faults-bf16")
    proc = parity(
        "run",
        "--matrix",
        str(DATA / "faults.yaml"),
        "--dtype",
        "bfloat16",
        "--out",
        str(out),
        "-k",
        *BF16_FAULTS,
    )
    return proc, out, json.loads((out / "report.json").read_text())


@pytest.mark.parametrize("case_id", list(BF16_FAULTS))
def test_real_faults_fail_in_bfloat16_against_hfs_own_error(bf16_fault_run, case_id):
    """Wrong pooling, lost normalisation, a missing activation: each fails in bf16 with bounds
    calibrated from HF's own bf16 error (HF also ran in float32), far beyond that error."""
    proc, out, report = bf16_fault_run
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (res,) = [r for r in report["results"] if r["case_id"] == case_id]
    assert res["status"] == "fail" and res["dtype"] == "bfloat16", res
    m = {m["name"]: m for m in res["metrics"]}[BF16_FAULTS[case_id]]
    assert not m["ok"] and m["ref_error"] is not None and m["value"] > 5 * m["bound"], m
    assert (out / "outputs" / case_id / "hf-fp32.safetensors").is_file()


def test_fault_run_writes_every_report(fault_run):
    proc, out, report = fault_run
    md = (out / "report.md").read_text()
    assert md.startswith("## ❌ parity FAILED") and "**fail**" in md
    junit = ET.parse(out / "junit.xml").getroot()
    assert len(junit.findall(".//testcase/failure")) == len(report["results"]) == 9


def test_malformed_matrix_exits_2_with_location(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("cases:\n  - id: x\n    family: nope\n")
    proc = parity("run", "--matrix", str(bad), "--out", str(tmp_path / "run"))
    assert proc.returncode == 2
    assert f"{bad}:3" in proc.stderr and "unknown family 'nope'" in proc.stderr


def test_golden_backed_run_starts_no_hf_process(tmp_path):
    proc = parity(
        "run",
        "--matrix",
        "matrices/ci.yaml",
        "--against",
        "golden",
        "--runners",
        "vllm-v1",
        "--out",
        str(tmp_path),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not list((tmp_path / "logs").glob("hf*.log"))
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["results"] and all(r["status"] == "pass" for r in report["results"])
    assert all(
        ref["info"]["golden"].startswith(str(ROOT / "golden")) or "golden/" in ref["info"]["golden"]
        for ref in report["references"]
    )


def test_golden_verify_passes_on_committed_goldens(tmp_path):
    proc = parity("golden", "verify", "--matrix", "matrices/ci.yaml", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_multimodal_goldens_hold_where_vllm_cannot_run(tmp_path):
    """ColPali and the VL reranker: their HF side is held to the committed goldens (the
    synthetic checkpoints are rebuilt from scratch, so this also pins the builders); the vLLM
    rows that compare on CPU are in the default matrix and matrices/multimodal.yaml."""
    proc = parity("golden", "verify", "-k", "colpali-*", "jina-vl-*", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = json.loads((tmp_path / "report.json").read_text())["results"]
    assert sorted(r["case_id"] for r in results) == [
        "colpali-tiny-maxsim-score",
        "colpali-tiny-token-embed",
        "jina-vl-tiny-image-rerank",
        "jina-vl-tiny-text-rerank",
    ]
    assert all(r["status"] == "pass" for r in results)


def test_two_shards_merged_equal_the_unsharded_run(tmp_path):
    common = ["--matrix", "matrices/ci.yaml", "--against", "golden", "--runners", "vllm-v1"]
    for name, extra in (("all", []), ("s1", ["--shard", "1/2"]), ("s2", ["--shard", "2/2"])):
        proc = parity("run", *common, *extra, "--out", str(tmp_path / name))
        assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = parity(
        "report",
        "merge",
        str(tmp_path / "s1" / "report.json"),
        str(tmp_path / "s2" / "report.json"),
        "--out",
        str(tmp_path / "merged"),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr

    def key(path):
        report = json.loads(path.read_text())
        return sorted(
            (
                r["case_id"],
                r["runner"],
                r["status"],
                tuple((m["name"], m["value"]) for m in r["metrics"]),
            )
            for r in report["results"]
        )

    merged, whole = key(tmp_path / "merged" / "report.json"), key(tmp_path / "all" / "report.json")
    assert merged == whole and len(whole) >= 4
    s1 = {r[0] for r in key(tmp_path / "s1" / "report.json")}
    s2 = {r[0] for r in key(tmp_path / "s2" / "report.json")}
    assert s1 and s2 and not s1 & s2


def test_pytest_update_golden_rewrites_only_selected_goldens(tmp_path):
    import shutil

    golden = tmp_path / "golden"
    for case in ("bert-tiny-mean-embed", "minilm-l6-embed"):
        shutil.copytree(ROOT / "golden" / case, golden / case)
    (golden / "bert-tiny-mean-embed" / "manifest.json").write_text(
        (golden / "bert-tiny-mean-embed" / "manifest.json")
        .read_text()
        .replace('"recorded": "', '"recorded": "old-')
    )
    before = (golden / "minilm-l6-embed" / "manifest.json").read_text()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "tests/integration/test_matrix.py",
            "-q",
            "-p",
            "no:cacheprovider",
            "--parity-update-golden",
            "--parity-golden-dir",
            str(golden),
            "--parity-against",
            "golden",
            "--parity-runners",
            "vllm-v1",
            "-k",
            "bert-tiny-mean-embed",
            "--parity-out",
            str(tmp_path / "run"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    manifest = json.loads((golden / "bert-tiny-mean-embed" / "manifest.json").read_text())
    assert not manifest["recorded"].startswith("old-")
    assert (golden / "minilm-l6-embed" / "manifest.json").read_text() == before


def test_colpali_preprocessing_fault_fails_the_golden_gate(tmp_path):
    """The ColPali gate that runs on CPU (HF against its committed golden) catches a real fault."""
    import shutil

    case = "colpali-image-wrong-mean-std-fault"
    shutil.copytree(ROOT / "golden" / "colpali-tiny-token-embed", tmp_path / "golden" / case)
    verify = [
        "golden",
        "verify",
        "--matrix",
        str(DATA / "colpali-fault.yaml"),
        "--golden-dir",
        str(tmp_path / "golden"),
    ]
    # as committed, the golden was made with other `hf:` options than the fault case: refused, not compared
    proc = parity(*verify, "--out", str(tmp_path / "refused"))
    [result] = json.loads((tmp_path / "refused" / "report.json").read_text())["results"]
    assert (
        proc.returncode == 1 and result["status"] == "error" and "hf_options" in result["reason"]
    ), result
    # a golden whose key matches, made from the right preprocessing (a recipe regression that
    # kept its key): the numbers must catch it
    manifest = tmp_path / "golden" / case / "manifest.json"
    m = json.loads(manifest.read_text())
    m["reference_key"]["hf_options"] = {
        "image_processor_kwargs": {"image_mean": [0.0, 0.0, 0.0], "image_std": [1.0, 1.0, 1.0]}
    }
    manifest.write_text(json.dumps(m))
    proc = parity(*verify, "--out", str(tmp_path / "run"))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    [result] = json.loads((tmp_path / "run" / "report.json").read_text())["results"]
    assert result["case_id"] == case and result["status"] == "fail", result
    failed = {m["name"]: m["value"] for m in result["metrics"] if not m["ok"]}
    assert "max_abs" in failed and failed["max_abs"] > 1e-2, result
    assert f"FAIL {case}" in proc.stdout
