"""`parity branch`: where the checkout and its base come from, and the exit codes before any run
(2: not a checkout, no base; 4: the branch's diff can affect no row of any matrix). The runs
themselves are tests/integration/test_cli_branch.py's."""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path

import pytest

from harness.cli.common import combine
from harness.cli.entry import main


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t", *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


@pytest.fixture
def checkout(tmp_path) -> Path:
    """A vLLM 'checkout' whose vllm/ is the installed package (a symlink: the selection reads its
    source as text), on a branch off main."""
    site = Path(importlib.util.find_spec("vllm").origin).parent
    root = tmp_path / "vllm-checkout"
    root.mkdir()
    (root / "vllm").symlink_to(site)
    (root / "docs").mkdir()
    (root / "docs" / "pooling.md").write_text("# pooling\n")
    _git(root, "init", "-q", "-b", "main")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "base")
    _git(root, "checkout", "-qb", "my-branch")
    return root


def test_a_branch_that_can_affect_no_row_exits_4_with_a_report(checkout, tmp_path):
    (checkout / "docs" / "pooling.md").write_text("# pooling, reworded\n")
    _git(checkout, "commit", "-qam", "docs only")
    out = tmp_path / "report"
    assert main(["branch", str(checkout), "--out", str(out)]) == 4
    summary = json.loads((out / "summary.json").read_text())
    assert summary["exit"] == 4 and summary["runs"] == []
    assert "merge-base" in (out / "report.md").read_text()


def test_the_current_folder_is_the_default_checkout(checkout, tmp_path, monkeypatch):
    monkeypatch.chdir(checkout)
    monkeypatch.delenv("PARITY_VLLM_REPO", raising=False)
    assert main(["branch", "--out", str(tmp_path / "r")]) == 4  # nothing changed yet: nothing


def test_not_a_checkout_exits_2(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PARITY_VLLM_REPO", raising=False)
    assert main(["branch"]) == 2
    assert "is not a vLLM checkout" in capsys.readouterr().err


def test_no_base_exits_2_naming_the_option(checkout, capsys):
    assert main(["branch", str(checkout), "--base", "no-such-ref"]) == 2
    assert "--base no-such-ref: no such ref" in capsys.readouterr().err
    _git(checkout, "branch", "-m", "main", "trunk")
    assert main(["branch", str(checkout)]) == 2
    assert "name the branch's base with --base REF" in " ".join(capsys.readouterr().err.split())


@pytest.mark.parametrize(
    "codes, code",
    [([0, 4], 0), ([4, 4], 4), ([0, 1, 4], 1), ([0, 2], 2), ([2, 1], 1), ([], 4)],
)
def test_several_runs_combine_into_one_exit_code(codes, code):
    assert combine(codes) == code
