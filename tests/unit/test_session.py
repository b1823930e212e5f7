from harness.execute import RunOutcome
from harness.outputs import save_items
from harness.session import verdict_for
from tests.unit.test_compare import make_case, vecs


def _outcomes(tmp_path, runner, actual, items=None):
    ref_items = vecs(24)
    save_items(tmp_path / "ref.safetensors", ref_items)
    save_items(tmp_path / "got.safetensors", items if items is not None else [a.copy() for a in ref_items])
    ref = RunOutcome("c", "hf", "ok", output=str(tmp_path / "ref.safetensors"))
    got = RunOutcome("c", runner, "ok", output=str(tmp_path / "got.safetensors"),
                     info={"actual_runner": actual, "runner_choice": "vLLM's choice: Triton unavailable"})
    return ref, got


def test_explicit_runner_that_ran_the_other_one_is_an_error(tmp_path):
    ref, got = _outcomes(tmp_path, "vllm-v2", "v1")
    v = verdict_for(make_case(runners=["hf", "vllm-v2"], inputs="short-texts"), "vllm-v2", "float32", ref, got)
    assert v.status == "error" and "asked vLLM for model runner V2 but it ran V1" in v.reason


def test_default_runner_audit_fails_on_unexpected_choice(tmp_path):
    ref, got = _outcomes(tmp_path, "vllm-auto", "v1")
    case = make_case(runners=["hf", "vllm-auto"], expected_auto_runner="v2")
    v = verdict_for(case, "vllm-auto", "float32", ref, got)
    assert v.status == "fail" and "default-runner audit: vLLM chose V1 but this family expects V2" in v.reason
    assert "Triton unavailable" in v.reason
    ref, got = _outcomes(tmp_path, "vllm-auto", "v2")
    assert verdict_for(case, "vllm-auto", "float32", ref, got).status == "pass"


def test_failed_reference_never_yields_pass(tmp_path):
    ref, got = _outcomes(tmp_path, "vllm-v1", "v1")
    ref = RunOutcome("c", "hf", "error", reason="boom")
    v = verdict_for(make_case(), "vllm-v1", "float32", ref, got)
    assert v.status == "error" and "reference (hf) error: boom" in v.reason
    assert verdict_for(make_case(), "vllm-v1", "float32", None, None).status == "error"


def test_unreadable_output_is_an_error_of_that_case(tmp_path):
    ref, got = _outcomes(tmp_path, "vllm-v1", "v1")
    (tmp_path / "got.safetensors").write_bytes(b"garbage")
    v = verdict_for(make_case(), "vllm-v1", "float32", ref, got)
    assert v.status == "error" and v.reason.startswith("comparison failed")


def test_known_environment_error_is_a_skip_with_the_exact_error(tmp_path):
    ref, _ = _outcomes(tmp_path, "vllm-v1", "v1")
    case = make_case(skip_if_error={"runners": ["vllm-v1"], "error_match": "No module named 'torchvision'",
                                    "reason": "torchvision cannot sit beside torch+cpu"})
    missing = "engine/model failed to load: ModuleNotFoundError: No module named 'torchvision'"
    own = "ModuleNotFoundError: No module named 'torchvision'"
    v = verdict_for(case, "vllm-v1", "float32", ref, RunOutcome("c", "vllm-v1", "error", missing, error=own))
    assert v.status == "skip" and v.reason == f"{missing} (torchvision cannot sit beside torch+cpu)"
    # any other error stays an error; another runner is not covered
    other = RunOutcome("c", "vllm-v1", "error", "engine/model failed to load: RuntimeError: out of blocks")
    assert verdict_for(case, "vllm-v1", "float32", ref, other).status == "error"
    case2 = make_case(runners=["hf", "vllm-v1", "vllm-v2"], skip_if_error=case.skip_if_error.model_dump())
    assert verdict_for(case2, "vllm-v2", "float32", ref, RunOutcome("c", "vllm-v2", "error", missing, error=own)).status == "error"
    # where the runner does run, it is compared as usual
    ref, got = _outcomes(tmp_path, "vllm-v1", "v1")
    assert verdict_for(case, "vllm-v1", "float32", ref, got).status == "pass"
