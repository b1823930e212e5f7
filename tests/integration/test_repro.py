"""Every recorded divergence that is a vLLM bug (tests/unit/test_repro.py, VLLM_BUGS) exported as a
standalone folder whose repro.py, run by this engine's Python with the harness made unimportable,
reproduces it: the recorded error, or a largest difference beyond the case's tolerance and of the
order of the recorded envelope. A passing row's export reports a difference within the tolerance,
so the check can go both ways. One process per reproduction, vLLM V1 on CPU."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

import pytest

from harness.repro.export import ReproError, export_case
from harness.repro.script import ERROR_PREFIX, RESULT_PREFIX
from harness.run.matrices import load_matrix
from tests.conftest import ROOT
from tests.unit.test_repro import VLLM_BUGS

TIMEOUT = 1800  # seconds per reproduction: a ColQwen3 one took 330 s on a loaded 2-core host
# the script run as `python repro.py`, with `import harness` failing: it must need none of it
STANDALONE = (
    "import runpy, sys; sys.modules['harness'] = None; sys.argv = ['repro.py']; "
    "runpy.run_path('repro.py', run_name='__main__')"
)


def run_repro(folder: Path) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [sys.executable, "-c", STANDALONE],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=env,
    )
    return proc.returncode, proc.stdout + proc.stderr[-3000:]


def measured(out: str) -> float:
    found = re.findall(rf"^{re.escape(RESULT_PREFIX)} (\S+)$", out, re.M)
    assert len(found) == 1, f"no single '{RESULT_PREFIX}' line:\n{out[-3000:]}"
    return float(found[0])


def exported(case_id: str, matrix_name: str, runner: str, out: Path):
    matrix = load_matrix(ROOT / "matrices" / matrix_name)
    case = matrix.case(case_id)
    if getattr(case.model, "arch", "") == "ColQwen3" and not find_spec("colpali_engine"):
        pytest.skip("colpali-engine (ColQwen3's own code, the reference) is not installed here")
    try:
        export_case(case, runner, out, matrix.path)
    except ReproError as e:
        if "no script template" in str(e):
            pytest.skip(f"not reproduced yet: {e}")
        raise
    return case


@pytest.mark.parametrize("case_id", sorted(VLLM_BUGS))
def test_a_recorded_vllm_bug_reproduces_standalone(case_id, tmp_path):
    matrix_name, runner = VLLM_BUGS[case_id]
    case = exported(case_id, matrix_name, runner, tmp_path / "repro")
    code, out = run_repro(tmp_path / "repro")
    div = case.divergence
    assert div is not None
    if div.error_match:
        said = [ln for ln in out.splitlines() if ln.startswith(ERROR_PREFIX)]
        assert code == 1 and said, f"vLLM did not raise:\n{out[-3000:]}"
        assert div.error_match in said[0], said[0]
        print(f"{case_id}: {said[0]}")
        return
    assert div.bounds is not None and div.bounds.max_abs is not None
    got, bound = measured(out), case.tolerances["float32"].max_abs
    envelope = div.bounds.max_abs
    print(f"{case_id}: max_abs_diff {got:.6g} (tolerance {bound:g}, envelope {envelope:g})")
    assert bound is not None and got > bound, f"{got} within the tolerance {bound}"
    # the recorded envelope is the measured figure plus a margin: the same order of magnitude
    assert envelope / 10 <= got <= envelope, f"{got} is not the recorded ~{envelope}"
    assert code == 1


def test_a_passing_row_reproduces_within_the_tolerance(tmp_path):
    case = exported("bert-tiny-mean-embed", "pooling.yaml", "vllm-v1", tmp_path / "repro")
    code, out = run_repro(tmp_path / "repro")
    got, bound = measured(out), case.tolerances["float32"].max_abs
    assert bound is not None and got <= bound, out[-3000:]
    print(f"bert-tiny-mean-embed: max_abs_diff {got:.6g} (tolerance {bound:g})")
    assert code == 0


def test_a_row_of_a_real_run_exports_and_reproduces_its_recorded_figure(tmp_path):
    """`parity run` records the row, `parity repro` exports it from report.json: the script's
    difference is the one the run recorded (same checkpoint, inputs and engine arguments)."""
    case_id = "bert-tiny-cross-encoder-score-transformers-backend"
    run, folder = tmp_path / "run", tmp_path / "repro"
    for args in (
        ["run", "-m", "matrices/pooling.yaml", "-k", case_id, "-r", "vllm-v1", "--out", str(run)],
        ["repro", case_id, "--from", str(run), "--out", str(folder)],
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "harness.cli", *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    row = json.loads((folder / "row.json").read_text())
    recorded = {m["name"]: m["value"] for m in row["metrics"]}["max_abs"]
    code, out = run_repro(folder)
    got = measured(out)
    print(f"{case_id}: recorded {recorded:.6g}, reproduced {got:.6g}")
    assert code == 1 and got == pytest.approx(recorded, rel=1e-4)
