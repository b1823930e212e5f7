"""`parity check FOLDER` end to end, as a new user runs it: a checkpoint of the default matrix laid
out as a plain folder gets its matrix case's verdict on HF, V1 and V2; the matrix it writes runs
with `parity run -m`; and a deliberately wrong inference goes red."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from harness.check.cases import ModelRef, build_cases, matrix_text
from harness.check.infer import infer
from harness.matrix.schema import SyntheticModel
from harness.models.resolve import build_synthetic
from harness.run.matrices import load_matrix
from tests.conftest import ROOT

# bert-tiny-mean-embed's checkpoint (and bert-tiny-mean-embed-adversarial's)
SPEC = SyntheticModel(source="synthetic", arch="BertModel", seed=0, pooling="mean", normalize=True)


def parity(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
    )


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    dst = tmp_path_factory.mktemp("user") / "my-embedder"
    shutil.copytree(build_synthetic(SPEC), dst, ignore=shutil.ignore_patterns("fingerprint.txt"))
    return dst


def test_check_gives_the_matrix_verdict_and_its_matrix_runs(folder, tmp_path):
    texts = tmp_path / "mine.txt"
    texts.write_text("my first text\nanother one, longer than the first\nthird\n")
    written = tmp_path / "mine.yaml"
    out = tmp_path / "check"
    proc = parity(
        "check",
        str(folder),
        "--inputs",
        str(texts),
        "--write-matrix",
        str(written),
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "1_Pooling/config.json" in proc.stdout  # says what it inferred, and from where
    report = json.loads((out / "report.json").read_text())
    got = {(r["case_id"], r["runner"]): r["status"] for r in report["results"]}
    sets = ("short-texts", "adversarial-texts", "your-inputs")
    # by default the runners a deployer gets: V1, V2, vLLM's own choice, and it served
    runners = ("vllm-v1", "vllm-v2", "vllm-auto", "vllm-serve-auto")
    assert got == {(f"my-embedder-encoder-embed-{s}", r): "pass" for s in sets for r in runners}
    # the matrix's own cases on this checkpoint and these input sets: the same verdict (pass)
    matrix = load_matrix(ROOT / "matrices" / "pooling.yaml")
    for cid in ("bert-tiny-mean-embed", "bert-tiny-mean-embed-adversarial"):
        case = matrix.case(cid)
        assert case.model == SPEC and case.divergence is None and case.family == "encoder-embed"
    for name in ("report.md", "report.html"):
        assert (out / name).is_file()
    # the written matrix, as committed into a project: `parity run -m` loads and runs it
    again = parity(
        "run",
        "-m",
        str(written),
        "-r",
        "vllm-v1",
        "-k",
        "*-your-inputs",
        "--out",
        str(tmp_path / "again"),
        env={"PARITY_ALLOW_ABSOLUTE_PATHS": "1"},
    )
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-2000:]
    assert "PASSED · 1 pass" in again.stdout


def test_a_wrong_inference_is_caught_red(folder, tmp_path, monkeypatch):
    """Seeded proof that the check can go red: an inference that asks vLLM for CLS pooling on
    this mean-pooled model (what a wrong pooling guess would do) fails on cosine distance."""
    monkeypatch.setenv("PARITY_ALLOW_ABSOLUTE_PATHS", "1")
    inf = infer(folder)
    inf.engine = {"pooler_config": {"pooling_type": "CLS"}}  # the deliberate mistake
    used, cases, notes = build_cases(inf, ModelRef("local", folder), tmp_path, ["vllm-v1"])
    path = tmp_path / "wrong.yaml"
    path.write_text(matrix_text(inf, used, cases, notes, "test"))
    proc = parity(
        "run",
        "-m",
        str(path),
        "-k",
        "*-short-texts",
        "--out",
        str(tmp_path / "o"),
        env={"PARITY_ALLOW_ABSOLUTE_PATHS": "1"},
    )
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    (res,) = json.loads((tmp_path / "o" / "report.json").read_text())["results"]
    assert res["status"] == "fail" and "cosine_distance" in res["reason"], res
