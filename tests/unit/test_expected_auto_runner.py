"""The default runner a case expects may depend on the vLLM release (0.31 -> 0.32 moved pooling
models to V2): `expected_auto_runner` takes a mapping of version specifiers."""

import pytest

from harness.engine import target
from harness.judge.verdict import outcome_verdict
from harness.matrix.schema import MatrixError
from harness.run.execute import RunOutcome
from harness.run.matrices import load_matrix
from tests.unit.test_matrix import BASE

BY_RELEASE = (
    BASE.replace("runners: [hf, vllm-v1]", "runners: [hf, vllm-auto]")
    + "    expected_auto_runner: {'>=0.31': v2, '<0.31': v1}\n"
)


def _auto(version: str, actual: str) -> RunOutcome:
    return RunOutcome(
        case_id="one",
        runner="vllm-auto",
        status="ok",
        info={"actual_runner": actual, "versions": {"vllm": version}, "runner_choice": "why"},
    )


def test_expected_runner_follows_the_release(write_matrix):
    (case,) = load_matrix(write_matrix(BY_RELEASE)).cases
    assert case.expected_auto_for("0.32.0") == ("v2", "")
    assert case.expected_auto_for("0.31.0") == ("v2", "")
    assert case.expected_auto_for("0.28.0") == ("v1", "")
    assert case.expected_auto_for("0.33.0.dev12+g1234") == ("v2", "")  # a checkout of main
    v = outcome_verdict(case, "vllm-auto", None, _auto("0.28.0", "v2"), lambda: None)
    assert v.status == "fail" and "expects V1" in v.reason  # 0.28 chose V2: the audit fails
    v = outcome_verdict(case, "vllm-auto", None, _auto("0.32.0", "v1"), lambda: None)
    assert v.status == "fail" and "expects V2" in v.reason


def test_no_or_several_matching_entries_is_an_error_naming_the_case(write_matrix):
    text = BY_RELEASE.replace("{'>=0.31': v2, '<0.31': v1}", "{'>=0.31': v2, '>=0.30': v1}")
    (case,) = load_matrix(write_matrix(text)).cases
    v = outcome_verdict(case, "vllm-auto", None, _auto("0.29.0", "v1"), lambda: None)
    assert (
        v.status == "error" and "no entry for vLLM 0.29.0" in v.reason and "m.yaml:11" in v.reason
    )
    v = outcome_verdict(case, "vllm-auto", None, _auto("0.32.0", "v2"), lambda: None)
    assert v.status == "error" and "several entries: >=0.31, >=0.30" in v.reason


@pytest.mark.parametrize(
    "value, said",
    [
        ("{'0.32': v2}", "is not a version specifier"),
        ("{'>=0.32': v3}", "'v1' or 'v2'"),
        ("{}", "an empty mapping"),
    ],
)
def test_bad_mappings_are_matrix_errors_with_their_line(write_matrix, value, said):
    p = write_matrix(BY_RELEASE.replace("{'>=0.31': v2, '<0.31': v1}", value))
    with pytest.raises(MatrixError) as e:
        load_matrix(p)
    assert said in str(e.value) and f"{p}:" in str(e.value)


def test_selection_follows_the_default_runner_of_the_vllm_under_test(write_matrix, monkeypatch):
    from harness.select import facts

    (case,) = load_matrix(write_matrix(BY_RELEASE)).cases
    for version, v1_rows, v2_rows in (
        ("0.32.0", False, True),
        ("0.28.0", True, False),
        (None, True, True),
    ):
        monkeypatch.setattr(target, "vllm_version", lambda v=version: v)
        assert facts._in_rows("v1", case, "vllm-auto") is v1_rows, version
        assert facts._in_rows("v2", case, "vllm-auto") is v2_rows, version
