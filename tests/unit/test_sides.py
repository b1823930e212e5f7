"""Each side of a comparison is read from disk once per (case, runner) (harness.run.sides)."""

from __future__ import annotations

import json

from harness.run import sides as sides_mod
from harness.run.assemble import verdict_for
from harness.run.execute import RunOutcome
from harness.run.sides import Sides, load_side
from tests.unit.test_compare import make_case
from tests.unit.test_session import _outcomes


def test_the_reference_shared_by_two_runners_is_loaded_once(tmp_path, monkeypatch):
    ref, got = _outcomes(tmp_path, "vllm-v1", "v1")
    other = RunOutcome("c", "vllm-v2", "ok", output=got.output, info={"actual_runner": "v2"})
    loaded: list[tuple[str, str]] = []

    def counting(outcome):
        loaded.append((outcome.case_id, outcome.runner))
        return load_side(outcome)

    monkeypatch.setattr(sides_mod, "load_side", counting)
    case = make_case(runners=["hf", "vllm-v1", "vllm-v2"])
    shared = Sides()
    for runner, outcome in (("vllm-v1", got), ("vllm-v2", other)):
        assert verdict_for(case, runner, "float32", ref, outcome, sides=shared).status == "pass"
    assert sorted(loaded) == [("c", "hf"), ("c", "vllm-v1"), ("c", "vllm-v2")]
    loaded.clear()
    for runner, outcome in (("vllm-v1", got), ("vllm-v2", other)):  # without sharing: per verdict
        verdict_for(case, runner, "float32", ref, outcome)
    assert loaded.count(("c", "hf")) == 2


def test_a_side_carries_its_records_token_ids_and_refusals(tmp_path):
    ref, got = _outcomes(tmp_path, "vllm-v1", "v1")
    records = [{"prompt_token_ids": [1, 2]}, {"refused": "too long"}]
    (tmp_path / "got.safetensors.requests.json").write_text(json.dumps(records))
    side = load_side(got)
    assert side.token_ids == [[1, 2], None] and side.refusals() == [None, "too long"]
    assert load_side(ref).meta is None and len(load_side(ref).outputs) == 24
    refused = RunOutcome("c", "vllm-v1", "ok", output=str(tmp_path / "none.safetensors"))
    assert load_side(refused).outputs is None  # records alone: nothing to compare, said later
