"""The CI matrix (matrices/ci.yaml, or --matrix) as pytest items: real HF and vLLM workers."""

from harness.pytest_plugin import check


def test_parity(parity_result):
    check(parity_result)
    # a pass is only a pass with measured metrics inside their bounds
    assert parity_result.metrics and all(m.ok for m in parity_result.metrics)
    if parity_result.runner == "vllm-v2" and parity_result.device == "cpu":
        assert parity_result.actual_runner == "v2"
        assert "interpreted Triton kernels" in parity_result.runner_label
