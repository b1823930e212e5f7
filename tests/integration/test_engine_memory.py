"""Loads must not depend on the host's memory: a worker whose RSS is inflated (ballast allocated at
interpreter start, before vLLM is imported) still loads every model, and an engine refusal about
memory says what was asked and which knob fixes it."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

# above 10 % of any node of this machine kind (24 GiB): with vLLM's host-derived KV sizing
# (gpu_memory_utilization x node - RSS) every load of such a worker is refused
BALLAST_MIB = 3 * 1024

SITECUSTOMIZE = f"""
import sys
if any("harness.runners.worker" in a for a in sys.orig_argv):
    _n = {BALLAST_MIB} << 20
    _BALLAST = bytearray(_n)
    _BALLAST[::4096] = b"\\x01" * len(range(0, _n, 4096))  # touch every page: resident, not reserved
"""


def _run(
    tmp_path: Path, env: dict, matrix: str, *args: str
) -> tuple[subprocess.CompletedProcess, dict]:
    out = tmp_path / "run"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.cli",
            "run",
            "-m",
            matrix,
            "--against",
            "golden",
            "--out",
            str(out),
            *args,
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, **env},
    )
    return proc, json.loads((out / "report.json").read_text())


def test_a_worker_with_ballast_still_loads_and_is_recycled_past_its_rss_limit(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    env = {
        "PYTHONPATH": os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH")) if p),
        "PARITY_WORKER_RSS_LIMIT_MB": "2048",
    }
    # decoders: an encoder-only model has no KV cache, so vLLM never sizes one for it
    proc, report = _run(
        tmp_path,
        env,
        "matrices/pooling.yaml",
        "-k",
        "qwen3-tiny-seq-classify-3",
        "qwen2-tiny-reward",
        "-r",
        "vllm-v1",
    )
    results = report["results"]
    assert results and all(r["status"] == "pass" for r in results), (
        proc.stdout[-3000:] + proc.stderr[-3000:]
    )
    assert proc.returncode == 0
    # the ballast was really there: the worker was far above the limit, and was recycled for it
    (w,) = [w for w in report["workers"] if w["runner"] == "vllm-v1"]
    assert w["peak_rss_mb"] > BALLAST_MIB and w["loads"] == 2 and w["recycles"] == 1
    assert "recycling the vllm-v1 worker" in proc.stderr
    for r in results:
        eff = r["info"]["effective"]
        assert eff["kv_cache_memory_bytes"] == r["info"]["kv_budget"]["bytes"] > 0
        assert r["info"]["worker_rss_mb"] > BALLAST_MIB


def test_an_engine_refusal_about_memory_names_the_numbers_and_the_knob(tmp_path):
    # a KV cache no node can hold (10 TiB): vLLM refuses it at start (a decoder: an encoder-only
    # model has no KV cache to size)
    proc, report = _run(
        tmp_path,
        {"PARITY_KV_CACHE_MIB": str(10 << 20)},
        "matrices/pooling.yaml",
        "-k",
        "qwen3-tiny-lasttoken-embed",
        "-r",
        "vllm-v1",
    )
    assert proc.returncode == 1
    for r in report["results"]:
        assert r["status"] == "error", r
        assert (
            "engine/model failed to load" in r["reason"]
            and "less than requested memory for kv" in r["reason"]
        )
        assert "a resource refusal" in r["reason"] and "PARITY_KV_CACHE_MIB" in r["reason"]


@pytest.mark.parametrize("limit", ["", "lots"])
def test_rss_limit_env_is_validated(limit, monkeypatch):
    from harness.run.execute import DEFAULT_RSS_LIMIT_MB, rss_limit_mb

    monkeypatch.setenv("PARITY_WORKER_RSS_LIMIT_MB", limit)
    if limit:
        with pytest.raises(ValueError, match="PARITY_WORKER_RSS_LIMIT_MB"):
            rss_limit_mb()
    else:
        assert rss_limit_mb() == DEFAULT_RSS_LIMIT_MB
