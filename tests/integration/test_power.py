"""`parity power` through the real runner: three mutations, each caught by the rows it breaks, and
evidence that the import hook patched vLLM inside the in-process engine core of a V1 and a V2
offline worker and inside `vllm serve` (API server, engine core, worker) on V1 and on V2."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, SUBPROCESS_GUARD

MATRIX = Path(__file__).parent / "data" / "power.yaml"
MUTATIONS = ["normalize_l1", "mean_pool_segment_overrun", "base64_wrong_endianness"]


@pytest.fixture(scope="module")
def power_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("power")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.cli",
            "power",
            "-m",
            str(MATRIX),
            "--out",
            str(out),
            "--only",
            *MUTATIONS,
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=SUBPROCESS_GUARD,
    )
    report = json.loads((out / "power.json").read_text())
    return proc, out, {m["name"]: m for m in report["mutations"]}


def _red(m):
    return {(c["case"], c["runner"]) for c in m["caught"]}


def test_every_mutation_is_caught_and_the_run_passes(power_run):
    proc, out, muts = power_run
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert {n: m["status"] for n, m in muts.items()} == {n: "caught" for n in MUTATIONS}
    assert _red(muts["normalize_l1"]) == {
        ("pw-bert-tiny-mean-embed", "vllm-v1"),
        ("pw-bert-tiny-mean-embed", "vllm-v2"),
    }
    assert _red(muts["base64_wrong_endianness"]) == {
        ("pw-serve-bert-tiny-base64", "vllm-serve-v1"),
        ("pw-serve-bert-tiny-base64", "vllm-serve-v2"),
    }
    assert ("pw-bert-tiny-mean-embed", "vllm-v1") in _red(muts["mean_pool_segment_overrun"])
    for m in muts.values():
        assert all(c["message"] for c in m["caught"])
    md = (out / "power.md").read_text()
    assert "3 caught, 0 not caught" in md and "pw-bert-tiny-mean-embed · vllm-v2 (fail)" in md
    assert (out / "power.html").read_text().count("<tr") == 4


def _applied(m):
    return [e for e in m["applied_in"] if e["status"] == "applied"]


def test_hook_patched_the_in_process_engine_core_of_v1_and_v2_offline_workers(power_run):
    _, _, muts = power_run
    events = _applied(muts["normalize_l1"])
    workers = {
        (e["argv"][1], e["VLLM_USE_V2_MODEL_RUNNER"])
        for e in events
        if e["argv"][0].endswith("worker.py")
    }
    # the pooler module is imported where the model runs: in-process, the worker is the engine core
    assert workers == {("vllm-v1", "0"), ("vllm-v2", "1")}
    assert not [
        e for e in events if len(e["argv"]) > 1 and e["argv"][1] == "hf"
    ]  # reference untouched


def test_hook_patched_vllm_serve_and_its_engine_processes_on_v1_and_v2(power_run):
    _, _, muts = power_run
    events = _applied(muts["base64_wrong_endianness"])
    seen = {
        (e["process"], e["VLLM_USE_V2_MODEL_RUNNER"])
        for e in events
        if e["argv"][0].endswith("api_server.py")
    }
    for v2 in ("0", "1"):
        assert ("MainProcess", v2) in seen, seen  # the API server, which encodes the answers
        assert ("EngineCore", v2) in seen, seen  # the engine-core process it spawned
    pids = {e["pid"] for e in events}
    assert len(pids) == len(events)  # one application per process
