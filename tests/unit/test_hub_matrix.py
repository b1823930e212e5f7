"""matrices/hub.yaml, the real checkpoints: on a machine without them every row skips with the
command that fetches its model (at its pinned revision), and the run says nothing was compared."""

import json

from harness.cli import main
from harness.matrix.schema import HubCacheModel
from harness.run.matrices import load_matrix
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


def test_a_hub_case_with_mteb_tasks_fed_identical_outputs_passes_the_real_comparison(tmp_path):
    """hub.yaml merges a main_score bound into the output tolerances: the output comparison must
    gate the bounds it owns, leave main_score to `parity mteb` and say so, and never raise."""
    import numpy as np

    from harness.matrix.inputs import input_set
    from harness.run.assemble import verdict_for
    from harness.run.execute import RunOutcome
    from harness.runners.outputs import save_items

    cases = [c for c in load_matrix(HUB).cases if c.mteb_tasks and c.variant_of is None]
    assert {c.task for c in cases} == {"embed", "score"}
    for case in cases:
        items = input_set(case.inputs).items
        rng = np.random.default_rng(0)
        shape = (8,) if case.task == "embed" else (1,)
        outputs = [rng.normal(size=shape).astype(np.float32) for _ in items]
        ids = json.dumps([{"prompt_token_ids": [101, 7 + i, 102]} for i in range(len(items))])
        for name in ("ref", "got"):
            save_items(tmp_path / f"{name}.safetensors", outputs)
            (tmp_path / f"{name}.safetensors.requests.json").write_text(ids)
        ref = RunOutcome(case.id, "hf", "ok", output=str(tmp_path / "ref.safetensors"))
        got = RunOutcome(
            case.id,
            "vllm-v1",
            "ok",
            output=str(tmp_path / "got.safetensors"),
            info={"actual_runner": "v1"},
        )
        v = verdict_for(case, "vllm-v1", "float32", ref, got)
        assert v.status == "pass", (case.id, v.reason)
        assert "main_score" not in [m.name for m in v.metrics]
        assert "gated by `parity mteb`" in v.notes["main_score"]
        # the bounds the output comparison owns are still gated (the family's)
        owned = set(case.tolerance("float32").bounds()) - {"main_score"}
        assert owned and owned <= {m.name for m in v.metrics}


def test_a_main_score_bound_nothing_gates_is_a_matrix_error(write_matrix):
    text = """
cases:
  - id: one
    task: embed
    family: f
    model: {source: synthetic, arch: BertModel, pooling: mean}
    inputs: short-texts
    runners: [hf, vllm-v1]
    tolerances:
      float32: {cosine_distance: 1.0e-6, max_abs: 1.0e-5, main_score: 5.0e-4}
families: {f: {}}
"""
    import pytest

    from harness.matrix.schema import MatrixError

    p = write_matrix(text)
    with pytest.raises(
        MatrixError, match=r"m.yaml:10: case 'one', key 'tolerances': main_score is bounded"
    ):
        load_matrix(p)
    envelope = (
        "main_score: 5.0e-4}\n    divergence: {runners: [vllm-v1], reason: r, "
        "bounds: {max_abs: 0.1, main_score: 0.1}}\n    mteb_tasks: [ParitySTS]"
    )
    p = write_matrix(text.replace("main_score: 5.0e-4}", envelope))
    with pytest.raises(MatrixError, match="main_score cannot be an envelope bound"):
        load_matrix(p)
