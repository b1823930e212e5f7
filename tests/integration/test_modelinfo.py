"""The one-process model-class inspection caches exactly what vLLM's own subprocess route does."""

import os
import subprocess
import sys

import pytest

from tests.conftest import SUBPROCESS_GUARD

pytest.importorskip("vllm")

ARCHS = ("BertModel", "Qwen3ForCausalLM")


def test_one_process_inspection_caches_what_vllms_own_subprocess_caches(tmp_path):
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    subprocess.run(
        [sys.executable, "-m", "harness.runners.modelinfo", *ARCHS],
        env={**os.environ, "VLLM_CACHE_ROOT": str(ours)},
        check=True,
        capture_output=True,
        timeout=SUBPROCESS_GUARD,
    )
    # vLLM's route: each inspection in a subprocess of its own (registry._run_in_subprocess)
    code = (
        "from vllm.model_executor.models.registry import ModelRegistry as R\n"
        f"for a in {ARCHS!r}: R.models[a].inspect_model_cls()\n"
    )
    subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "VLLM_CACHE_ROOT": str(theirs)},
        check=True,
        capture_output=True,
        timeout=SUBPROCESS_GUARD,
    )
    want = sorted(p.name for p in (theirs / "modelinfos").glob("*.json"))
    assert len(want) == len(ARCHS)
    got = sorted(
        p.name for p in (ours / "modelinfos").glob("*.json") if p.name != "parity-warmed.json"
    )
    assert got == want
    for name in want:
        assert (ours / "modelinfos" / name).read_text() == (
            theirs / "modelinfos" / name
        ).read_text()
