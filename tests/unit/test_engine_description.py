"""The engine description (harness.engine.description): what the pipeline asks of the engine."""

from __future__ import annotations

from harness.engine import target
from harness.engine.description import ENGINE, VLLM
from harness.runners.platform import Platform
from tests.unit.test_compare import make_case


def test_vllm_is_the_engine_and_its_runner_is_asked_for_by_its_variable():
    assert ENGINE is VLLM and ENGINE.runner_env == "VLLM_USE_V2_MODEL_RUNNER"
    assert ENGINE.forced_variants == ("v1", "v2") and ENGINE.default_variant == "auto"
    for variant in ("v1", "v2", "auto"):
        env = Platform("cpu").worker_env(f"vllm-{variant}")
        assert env.get(ENGINE.runner_env) == ENGINE.runner_env_value(variant)


def test_what_a_run_recorded_of_the_engine_is_read_in_one_place():
    info = {"versions": {"vllm": "0.32.0"}, "actual_runner": "v2", "runner_choice": "default"}
    assert ENGINE.version_of(info) == "0.32.0" and ENGINE.version_of({}) is None
    assert ENGINE.chosen_runner(info) == "v2" and ENGINE.why_chosen({}, "none") == "none"


def test_the_release_gate_and_the_expected_choice_read_the_case(monkeypatch):
    gated = make_case(vllm_releases={"specifier": ">=0.30", "reason": "new family"})
    assert ENGINE.gated(gated) and not ENGINE.gated(make_case())
    assert "outside vllm_releases" in ENGINE.release_gate(gated, "0.28.0")
    assert ENGINE.release_gate(gated, "0.32.0") is None
    case = make_case(expected_auto_runner={"<0.31": "v1", ">=0.31": "v2"})
    assert ENGINE.expected_choice(case, {"versions": {"vllm": "0.32.0"}}) == ("v2", "")
    monkeypatch.setattr(target, "vllm_version", lambda: "0.29.0")
    assert ENGINE.version_here() == "0.29.0"
