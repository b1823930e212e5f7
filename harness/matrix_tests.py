"""A matrix as pytest items, and nothing else: `pytest --pyargs harness.matrix_tests
--parity-matrix M`.

Each (case, compared runner) is one item, derived invariance cases (`<id>@<check>`) included. The
metrics go into pytest's JUnit XML as properties; the run's report.json / report.md / junit.xml
are written under --parity-out (default runs/pytest) as by `parity run`.
"""

from harness.matrix.runner_names import runner_info
from harness.pytest_plugin import check


def test_parity(parity_result, record_property):
    for m in parity_result.metrics:
        record_property(f"metric:{m.name}", m.value)
        record_property(f"bound:{m.name}", m.bound)
    record_property("verdict", parity_result.status)
    check(parity_result)
    # a pass is only a pass with measured metrics inside their bounds
    assert parity_result.metrics and all(m.ok for m in parity_result.metrics)
    runner = runner_info(parity_result.runner)
    if runner.is_offline_vllm and runner.variant == "v2" and parity_result.device == "cpu":
        assert parity_result.actual_runner == "v2"
        assert "interpreted Triton kernels" in parity_result.runner_label
