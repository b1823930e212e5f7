"""Refusals as outcomes (`expect: {refused: REGEX}`): the schema, the per-item record the runners
keep (harness.runners.options.run_expecting_refusal) and the verdict (harness.judge.verdict)."""

import numpy as np
import pytest
from pydantic import ValidationError

from harness.judge.verdict import outcome_verdict, refusal_verdict
from harness.matrix.schema import Case, Tolerance
from harness.run.execute import RunOutcome
from harness.runners.options import run_expecting_refusal
from tests.requests import nest

RULE = "maximum context length is 128 tokens"
MSG = "VLLMValidationError: This model's maximum context length is 128 tokens. However, ..."


def make_case(**kw) -> Case:
    base = dict(
        id="c",
        family="f",
        task="embed",
        model={"source": "local", "path": "x"},
        inputs="overlong-texts",
        runners=["vllm-v1", "vllm-v2"],
        tolerances={"float32": Tolerance(max_abs=1e-5).model_dump()},
        expect={"refused": RULE},
    )
    return Case.model_validate({**base, **nest(kw)})


def test_every_item_refused_with_the_expected_error_passes_and_says_no_reference_applies():
    v = refusal_verdict(RULE, [MSG, MSG, MSG])
    assert v.status == "pass"
    assert "refused as expected, all 3 items" in v.reason and "no HF reference" in v.reason
    assert v.notes == {"refusal": "3 of 3 refused"}


def test_one_accepted_item_fails_even_when_the_others_are_refused():
    v = refusal_verdict(RULE, [MSG, None, MSG])
    assert v.status == "fail"
    assert "accepted a request it must refuse: item(s) 1 answered" in v.reason


def test_another_error_is_an_error_not_a_pass():
    v = refusal_verdict(RULE, [MSG, "EngineDeadError: the engine core died"])
    assert v.status == "error" and "another error than expected" in v.reason
    assert "EngineDeadError" in v.reason


def test_no_record_or_no_item_never_passes():
    assert refusal_verdict(RULE, None).status == "error"
    assert refusal_verdict(RULE, []).status == "fail"


def test_outcome_verdict_judges_a_refusal_case_without_a_reference():
    case = make_case()
    ok = RunOutcome("c", "vllm-v1", "ok", output="x", info={"actual_runner": "v1"})
    never = lambda: pytest.fail("a refusal case measures nothing")  # noqa: E731
    assert outcome_verdict(case, "vllm-v1", None, ok, never, refusals=lambda: [MSG]).ok
    accepted = outcome_verdict(case, "vllm-v1", None, ok, never, refusals=lambda: [None])
    assert accepted.status == "fail"
    # the runner checks still come first: another model runner than asked is an error
    wrong = RunOutcome("c", "vllm-v1", "ok", output="x", info={"actual_runner": "v2"})
    assert outcome_verdict(case, "vllm-v1", None, wrong, never, refusals=lambda: [MSG]).status == (
        "error"
    )
    crashed = RunOutcome("c", "vllm-v1", "error", "runner raised", error="boom")
    assert outcome_verdict(case, "vllm-v1", None, crashed, never).status == "error"


def test_run_expecting_refusal_sends_each_item_alone_and_records_its_own_error():
    sent = []

    def call(batch):
        sent.append(list(batch))
        if batch[0] == "long":
            raise ValueError("too long")
        return [(np.ones(2, dtype=np.float32), {"prompt_token_ids": [1]})]

    answered = run_expecting_refusal(call, ["long", "short", "long"])
    assert sent == [["long"], ["short"], ["long"]]
    assert [m["refused"] for _, m in answered] == [
        "ValueError: too long",
        None,
        ("ValueError: too long"),
    ]
    assert answered[0][0].size == 0 and answered[1][0].tolist() == [1.0, 1.0]


@pytest.mark.parametrize(
    "kw, text",
    [
        ({"runners": ["hf", "vllm-v1"]}, "the reference of a refusal case is the refusal rule"),
        ({"expect": {"refused": "("}}, "is not a regular expression"),
        ({"checks": ["shuffle"]}, "a refusal case takes no checks"),
    ],
)
def test_malformed_refusal_cases_are_refused(kw, text):
    with pytest.raises(ValidationError, match=text):
        make_case(**kw)


@pytest.mark.parametrize("n", [-1, 2, 129])
def test_truncate_takes_a_count_or_minus_one(n):
    assert make_case(expect=None, runners=["hf", "vllm-v1"], truncate=n).request.truncate == n


@pytest.mark.parametrize("n", [-2, 0, 1])
def test_other_truncate_values_are_refused(n):
    with pytest.raises(ValidationError, match="a number of tokens >= 2, or -1"):
        make_case(expect=None, runners=["hf", "vllm-v1"], truncate=n)


def test_truncation_side_needs_truncate():
    with pytest.raises(ValidationError, match="truncation_side needs truncate"):
        make_case(expect=None, runners=["hf", "vllm-v1"], truncation_side="left")


# a release that answers what it must refuse (vllm#55551: chunked processing ignored max_embed_len)
ACCEPTED = {"runners": ["vllm-v1"], "reason": "limit not enforced", "accepted": True}


def _judged(case, refused):
    ok = RunOutcome("c", "vllm-v1", "ok", output="x", info={"actual_runner": "v1"})
    never = lambda: pytest.fail("a refusal case measures nothing")  # noqa: E731
    return outcome_verdict(case, "vllm-v1", None, ok, never, refusals=lambda: refused)


def test_a_refusal_divergence_is_expected_while_every_item_is_answered():
    case = make_case(divergence=ACCEPTED)
    v = _judged(case, [None, None, None])
    assert v.status == "xfail" and "limit not enforced" in v.reason
    assert "accepted a request it must refuse" in v.reason  # what it did, kept


def test_a_refusal_divergence_that_refuses_again_is_stale_and_a_partial_one_changed():
    case = make_case(divergence=ACCEPTED)
    assert _judged(case, [MSG, MSG]).status == "xpass"
    changed = _judged(case, [MSG, None])
    assert changed.status == "fail" and "the recorded divergence changed" in changed.reason
    assert _judged(case, [MSG, "EngineDeadError: died"]).status == "error"  # a crash stays one
    assert _judged(case, None).status == "error"  # nothing recorded proves nothing


def test_a_refusal_divergence_binds_only_its_runners():
    case = make_case(divergence={**ACCEPTED, "runners": ["vllm-v2"]})
    assert _judged(case, [None]).status == "fail"


# a release that refuses with an uncaught error (vllm#51801: a KeyError, HTTP 500)
OTHER_ERROR = {"runners": ["vllm-v1"], "reason": "uncaught KeyError", "error_match": "HTTP 500"}
HTTP_500 = "ServerFailure: HTTP 500 from /pooling for item 0: KeyError"


def test_a_refusal_divergence_of_another_error_holds_while_every_item_gets_it():
    case = make_case(divergence=OTHER_ERROR)
    v = _judged(case, [HTTP_500, HTTP_500])
    assert v.status == "xfail" and "uncaught KeyError" in v.reason
    assert _judged(case, [MSG, MSG]).status == "xpass"  # the clear refusal is back
    for changed in ([HTTP_500, None], [HTTP_500, MSG], [None, None]):
        v = _judged(case, changed)
        assert v.status == "fail" and "refusing every item with 'HTTP 500'" in v.reason, changed
    assert _judged(case, [HTTP_500, "EngineDeadError: died"]).status == "error"
    assert _judged(case, None).status == "error"


@pytest.mark.parametrize(
    "kw, text",
    [
        (
            {"divergence": {"runners": ["vllm-v1"], "reason": "r", "bounds": {"max_abs": 1.0}}},
            "a refusal case's divergence is `accepted: true`",
        ),
        (
            {"divergence": {**ACCEPTED, "bounds": {"max_abs": 1.0}}},
            r"no outputs to hold to an envelope: drop \['bounds'\]",
        ),
        (
            {"expect": None, "runners": ["hf", "vllm-v1"], "divergence": ACCEPTED},
            "divergence.accepted records a refusal not made: it needs expect.refused",
        ),
    ],
)
def test_an_accepted_divergence_is_a_refusal_case_s_only_kind(kw, text):
    with pytest.raises(ValidationError, match=text):
        make_case(**kw)
