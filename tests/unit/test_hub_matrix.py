"""matrices/hub.yaml, the real checkpoints: on a machine without them every row skips with the
command that fetches its model (at its pinned revision), and the run says nothing was compared."""

import json

from harness.cli import main
from harness.matrix import HubCacheModel, load_matrix
from tests.conftest import ROOT

HUB = ROOT / "matrices" / "hub.yaml"


def test_every_hub_case_names_a_cached_checkpoint_and_covers_each_family():
    cases = load_matrix(HUB).cases
    assert all(isinstance(c.model, HubCacheModel) for c in cases)
    assert all(c.model.revision is None or len(c.model.revision) == 40 for c in cases)
    families = {c.family for c in cases}
    # every family of the default matrix except the outcome-reward one (its only real checkpoint
    # is 72B, see the comment in hub.yaml) has at least one real checkpoint
    wanted = {c.family for c in load_matrix(ROOT / "matrices" / "pooling.yaml").cases} - {"reward"}
    assert wanted - families == set()


def test_without_the_checkpoints_every_row_skips_with_its_download_command(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty-hf-home"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    rc = main(["run", "-m", str(HUB), "--out", str(tmp_path / "run")])
    results = json.loads((tmp_path / "run" / "report.json").read_text())["results"]
    assert rc == 4  # nothing compared is not a pass
    by_case = {c.id: c for c in load_matrix(HUB).cases}
    assert {r["case_id"].split("@")[0] for r in results} == set(by_case)
    for r in results:
        model = by_case[r["case_id"].split("@")[0]].model
        pin = f" --revision {model.revision}" if model.revision else ""
        assert r["status"] == "skip" and f"`hf download {model.repo}{pin}`" in r["reason"], r
