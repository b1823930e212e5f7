"""The verdict rules (harness.judge.verdict): a recorded divergence is an envelope, never a blanket."""

import numpy as np
import pytest

from harness.judge.compare import compare
from harness.judge.verdict import (
    Measurement,
    Metric,
    Verdict,
    gate,
    judge,
    outcome_verdict,
    runner_error,
)
from harness.matrix.schema import Case, Tolerance
from harness.run.execute import RunOutcome

TOL = Tolerance(cosine_distance=1e-6, max_abs=1e-5)
ITEMS = tuple("abcd")


def make_case(**kw) -> Case:
    base = dict(
        id="c",
        family="f",
        task="embed",
        model={"source": "local", "path": "x"},
        inputs="short-texts",
        runners=["hf", "vllm-v1", "vllm-v2"],
        tolerances={"float32": TOL.model_dump()},
    )
    return Case.model_validate({**base, **kw})


def vecs(n=4, d=8, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=d).astype(np.float32) for _ in range(n)]


ENVELOPE = {
    "runners": ["vllm-v1"],
    "reason": "known",
    "bounds": {"max_abs": 0.2, "cosine_distance": 0.1},
}


def _shifted(ref, by):
    return [a + np.float32(by) * np.sign(a) for a in ref]


def test_a_divergence_inside_its_envelope_is_xfail_and_a_pass_is_strict_xpass():
    case, ref = make_case(divergence=ENVELOPE), vecs()
    v = compare(
        case, "vllm-v1", TOL, ("cosine_distance", "max_abs"), ref, _shifted(ref, 0.1), ITEMS
    )
    assert v.status == "xfail" and "inside the recorded envelope" in v.reason and v.ok
    assert v.envelope == ENVELOPE["bounds"]  # carried as data, for the reports
    v = compare(
        case, "vllm-v1", TOL, ("cosine_distance", "max_abs"), ref, [a.copy() for a in ref], ITEMS
    )
    assert v.status == "xpass" and not v.ok and "remove the mark" in v.reason
    # the mark applies only to the runners it names
    assert (
        compare(case, "vllm-v2", TOL, ("max_abs",), ref, _shifted(ref, 0.1), ITEMS).status == "fail"
    )


def test_a_difference_beyond_the_envelope_fails_as_a_changed_divergence():
    case, ref = make_case(divergence=ENVELOPE), vecs()
    v = compare(
        case, "vllm-v1", TOL, ("cosine_distance", "max_abs"), ref, _shifted(ref, 20.0), ITEMS
    )  # 100x
    assert (
        v.status == "fail"
        and "the recorded divergence changed" in v.reason
        and "envelope 0.2" in v.reason
    )


@pytest.mark.parametrize(
    "fault, text",
    [
        (lambda ref: [np.full_like(a, np.nan) for a in ref], "NaN in runner output"),
        (lambda ref: ref[:-1], "wrong count"),
        (lambda ref: [a[:4] for a in ref], "shape mismatch"),
    ],
)
def test_nan_count_and_shape_under_a_divergence_mark_fail(fault, text):
    case, ref = make_case(divergence=ENVELOPE), vecs()
    v = compare(case, "vllm-v1", TOL, ("cosine_distance", "max_abs"), ref, fault(ref), ITEMS)
    assert v.status == "fail" and "the recorded divergence changed" in v.reason and text in v.reason


# a release that answers every token where a row per step is due (vllm#55307's STEP pooling)
MALFORMED = {"runners": ["vllm-v1"], "reason": "every token", "problem_match": "runner [8, 2]"}


def test_a_divergence_of_malformed_outputs_holds_only_that_problem():
    rng = np.random.default_rng(0)
    case = make_case(divergence=MALFORMED)
    ref = [rng.normal(size=(3, 2)).astype(np.float32) for _ in range(4)]
    tokens = [rng.normal(size=(8, 2)).astype(np.float32) for _ in range(4)]
    v = compare(case, "vllm-v1", TOL, ("max_abs",), ref, tokens, ITEMS)
    assert v.status == "xfail" and "every token" in v.reason and "runner [8, 2]" in v.reason
    # another problem, another shape, or NaN: the divergence changed
    for fault in (
        [a[:, :1] for a in tokens],
        [np.full((3, 2), np.nan, np.float32) for _ in range(4)],
        ref[:2],
    ):
        v = compare(case, "vllm-v1", TOL, ("max_abs",), ref, fault, ITEMS)
        assert v.status == "fail" and "the recorded divergence changed" in v.reason
    # right again: stale; outputs of the right shape but other values: changed, not xfail
    assert compare(case, "vllm-v1", TOL, ("max_abs",), ref, ref, ITEMS).status == "xpass"
    off = [a + 1 for a in ref]
    assert compare(case, "vllm-v1", TOL, ("max_abs",), ref, off, ITEMS).status == "fail"
    # only its runners
    assert compare(case, "vllm-v2", TOL, ("max_abs",), ref, tokens, ITEMS).status == "fail"


@pytest.mark.parametrize(
    "extra", [{"bounds": {"max_abs": 1.0}}, {"error_match": "x"}, {"token_ids": "differ"}]
)
def test_a_divergence_of_malformed_outputs_takes_nothing_else(extra):
    with pytest.raises(ValueError, match="malformed outputs"):
        make_case(divergence={**MALFORMED, **extra})


def test_a_failing_metric_the_envelope_does_not_cover_fails():
    case = make_case(divergence={"runners": ["vllm-v1"], "reason": "k", "bounds": {"max_abs": 0.2}})
    v = judge(
        case,
        "vllm-v1",
        Measurement(metrics=[Metric("max_abs", 0.1, 1e-5), Metric("cosine_distance", 0.5, 1e-6)]),
    )
    assert v.status == "fail" and "cosine_distance 0.5 > 1e-06 (not in the envelope)" in v.reason


def test_a_divergence_needs_an_envelope_or_an_error():
    with pytest.raises(ValueError, match="exactly one"):
        make_case(divergence={"runners": ["vllm-v1"], "reason": "k"})
    with pytest.raises(ValueError, match="measured"):
        make_case(divergence={"runners": ["vllm-v1"], "reason": "k", "measured": "max_abs 0.5"})


def test_error_match_covers_only_that_error_and_only_its_own_message():
    case = make_case(
        divergence={"runners": ["vllm-v1"], "reason": "raises", "error_match": "1-D probability"}
    )
    err = "ValueError: pooled_data should be a 1-D probability vector"
    assert runner_error(case, "vllm-v1", "error", f"runner raised {err}", err).status == "xfail"
    assert (
        runner_error(
            case, "vllm-v1", "error", "worker died: SIGSEGV", "worker died: SIGSEGV"
        ).status
        == "error"
    )
    # a crash whose *log* mentions the text is not the recorded error
    crash = "worker died during case c (killed by SIGABRT).\n--- worker log tail ---\n" + err
    assert (
        runner_error(
            case, "vllm-v1", "error", crash, "worker died during case c (killed by SIGABRT)."
        ).status
        == "error"
    )
    # outputs from a runner recorded as raising: xpass when they pass, a changed divergence otherwise
    assert (
        judge(case, "vllm-v1", Measurement(metrics=[Metric("max_abs", 0.0, 1e-5)])).status
        == "xpass"
    )
    assert (
        judge(case, "vllm-v1", Measurement(problem="NaN in runner output at item 0")).status
        == "fail"
    )


def test_skip_if_error_matches_the_error_not_the_log_tail():
    case = make_case(
        skip_if_error={
            "runners": ["vllm-v1"],
            "error_match": "No module named 'torchvision'",
            "reason": "needs torchvision",
        }
    )
    own = "ModuleNotFoundError: No module named 'torchvision'"
    assert (
        runner_error(case, "vllm-v1", "error", f"engine/model failed to load: {own}", own).status
        == "skip"
    )
    crash = f"worker died during model load (killed by SIGSEGV).\n--- worker log tail ---\nwarning: {own}"
    v = runner_error(
        case,
        "vllm-v1",
        "error",
        f"worker failure: {crash}",
        "worker died during model load (killed by SIGSEGV).",
    )
    assert v.status == "error"


def test_a_reference_that_fails_for_a_known_reason_skips_the_rows_it_judges():
    known = {
        "runners": ["hf"],
        "error_match": "colpali-engine==0.3.18 is not installed",
        "reason": "pip install --no-deps colpali-engine==0.3.18",
    }
    case = make_case(skip_if_error=known)
    ok = RunOutcome("c", "vllm-v1", "ok", output="x", info={"actual_runner": "v1"})
    never = lambda: pytest.fail("measured without a reference")  # noqa: E731
    own = "RuntimeError: colpali-engine==0.3.18 is not installed in this environment"
    missing = RunOutcome("c", "hf", "error", f"runner raised {own}", error=own)
    v = outcome_verdict(case, "vllm-v1", missing, ok, never)
    assert v.status == "skip" and "pip install --no-deps colpali-engine==0.3.18" in v.reason
    # another reference error stays an error; so does a case that names no known reason
    other = RunOutcome("c", "hf", "error", "runner raised ValueError: x", error="ValueError: x")
    assert outcome_verdict(case, "vllm-v1", other, ok, never).status == "error"
    assert outcome_verdict(make_case(), "vllm-v1", missing, ok, never).status == "error"


def test_outcome_verdict_never_passes_without_a_comparison():
    case = make_case()
    ok = RunOutcome("c", "vllm-v1", "ok", output="x", info={"actual_runner": "v1"})
    never = lambda: pytest.fail("measured without outputs")  # noqa: E731
    assert outcome_verdict(case, "vllm-v1", None, None, never).status == "error"
    assert outcome_verdict(case, "vllm-v1", None, ok, never).status == "error"
    assert (
        outcome_verdict(
            case, "vllm-v1", RunOutcome("c", "hf", "skip", "no model"), ok, never
        ).status
        == "skip"
    )
    wrong = RunOutcome("c", "vllm-v1", "ok", output="x", info={"actual_runner": "v2"})
    assert (
        outcome_verdict(
            case, "vllm-v1", RunOutcome("c", "hf", "ok", output="y"), wrong, never
        ).status
        == "error"
    )
    broken = outcome_verdict(
        case, "vllm-v1", RunOutcome("c", "hf", "ok", output="y"), ok, lambda: 1 / 0
    )
    assert broken.status == "error" and "comparison failed" in broken.reason


def test_gate_fails_on_problems_and_unknown_statuses_are_refused():
    assert (
        gate([Metric("main_score_delta_vs_hf", 0.0, 5e-4)], ["no stored expected score"]).status
        == "fail"
    )
    assert gate([Metric("m", 1e-4, 5e-4)]).status == "pass"
    with pytest.raises(ValueError, match="unknown verdict status"):
        Verdict("passed")


def _derived(check: str) -> Case:
    from harness.matrix.checks import expand_checks

    base = make_case(checks=[check])
    return next(c for c in expand_checks([base]) if c.id == f"c@{check}")


def _outcome_with(effective: dict, requests: dict) -> RunOutcome:
    return RunOutcome(
        "c",
        "vllm-v1",
        "ok",
        output="x",
        info={"actual_runner": "v1", "effective": effective, "requests": requests},
    )


@pytest.mark.parametrize(
    "check, effective, requests, text",
    [
        (
            "chunked_prefill",
            {"enable_chunked_prefill": True, "max_num_batched_tokens": 16},
            {"max_prompt_tokens": 12, "split_prompts": 0},
            "split no prompt across engine steps (longest prompt 12 tokens",
        ),
        (
            "chunked_prefill",
            {"enable_chunked_prefill": False, "max_num_batched_tokens": 16},
            {"max_prompt_tokens": 40},
            "enable_chunked_prefill=False",
        ),
        (
            "prefix_cache",
            {"enable_prefix_caching": True, "block_size": 128},
            {"cached_tokens": 0, "min_prompt_tokens": 5, "max_prompt_tokens": 30},
            "read 0 tokens from the prefix cache",
        ),
        (
            "no_prefix_cache",
            {"enable_prefix_caching": True},
            {"cached_tokens": 0},
            "enable_prefix_caching=True",
        ),
    ],
)
def test_an_invariance_check_that_did_not_take_effect_is_an_error(check, effective, requests, text):
    case = _derived(check)
    ref = RunOutcome("c", "hf", "ok", output="y")
    same = lambda: Measurement(metrics=[Metric("max_abs", 0.0, 1e-5)])  # noqa: E731 - outputs agree
    v = outcome_verdict(case, "vllm-v1", ref, _outcome_with(effective, requests), same)
    assert (
        v.status == "error"
        and f"invariance check {check} did not take effect" in v.reason
        and text in v.reason
    )


def test_an_invariance_check_in_effect_is_compared():
    ref = RunOutcome("c", "hf", "ok", output="y")
    same = lambda: Measurement(metrics=[Metric("max_abs", 0.0, 1e-5)])  # noqa: E731
    chunked = _outcome_with(
        {"enable_chunked_prefill": True, "max_num_batched_tokens": 16},
        {"max_prompt_tokens": 40, "split_prompts": 3},
    )
    assert (
        outcome_verdict(_derived("chunked_prefill"), "vllm-v1", ref, chunked, same).status == "pass"
    )
    cached = _outcome_with(
        {"enable_prefix_caching": True, "block_size": 16}, {"cached_tokens": 320}
    )
    assert outcome_verdict(_derived("prefix_cache"), "vllm-v1", ref, cached, same).status == "pass"


def test_a_metric_recorded_at_its_ceiling_must_stay_there_and_is_named_as_not_held():
    """rank_disagreement 1 cannot be an envelope bound (it could never fail); a divergence that
    ranks every query otherwise names it in at_ceiling instead, and leaving 1 is a change."""
    div = {
        "runners": ["vllm-v1"],
        "reason": "k",
        "bounds": {"max_abs": 0.7},
        "at_ceiling": ["rank_disagreement"],
    }
    case = make_case(
        task="score",
        divergence=div,
        tolerances={"float32": {"max_abs": 1e-5, "rank_disagreement": 0.0}},
    )

    def measured(rank: float) -> Measurement:
        return Measurement(
            metrics=[Metric("max_abs", 0.5, 1e-5), Metric("rank_disagreement", rank, 0.0)]
        )

    at = judge(case, "vllm-v1", measured(1.0))
    assert at.status == "xfail", at.reason
    assert "rank_disagreement at its largest value, not held by the envelope" in at.reason
    half = judge(case, "vllm-v1", measured(0.5))
    assert half.status == "fail"
    assert "rank_disagreement 0.5, recorded at its largest value 1" in half.reason
    with pytest.raises(ValueError, match="only a metric with a largest value"):
        make_case(divergence={**div, "at_ceiling": ["max_abs"]})


# --- a divergence of token ids (`divergence: {token_ids: differ}`) --------------------------------

IDS = [[1, 2, 3], [1, 4], [1, 5, 6], [1, 7]]
PREFIXED = [[1, 9, 2, 3], [1, 9, 4], [1, 9, 5, 6], [1, 9, 7]]  # e.g. a default prompt not applied
TOKEN_DIV = {"runners": ["vllm-v1"], "reason": "default prompt not applied", "token_ids": "differ"}


def _cmp(case, got, got_ids, ref, runner="vllm-v1"):
    return compare(
        case, runner, TOL, ("cosine_distance", "max_abs"), ref, got, ITEMS,
        ref_ids=IDS, got_ids=got_ids,
    )  # fmt: skip


def test_without_the_key_a_token_id_mismatch_stays_a_structural_fail():
    ref = vecs()
    for div in (None, ENVELOPE):  # a numeric envelope does not cover token ids
        case = make_case(divergence=div) if div else make_case()
        v = _cmp(case, [a.copy() for a in ref], PREFIXED, ref)
        assert v.status == "fail" and "token ids differ at item 0, position 1" in v.reason
    # the mark covers only the runners it names
    v = _cmp(make_case(divergence=TOKEN_DIV), [a.copy() for a in ref], PREFIXED, ref, "vllm-v2")
    assert v.status == "fail" and "token ids differ" in v.reason


def test_a_token_id_divergence_is_xfail_while_the_ids_differ_and_the_rest_is_in_its_envelope():
    ref = vecs()
    # ids differ, outputs within the case's tolerance: still the recorded divergence
    v = _cmp(make_case(divergence=TOKEN_DIV), [a.copy() for a in ref], PREFIXED, ref)
    assert v.status == "xfail" and "token ids differ" in v.reason and "within tolerance" in v.reason
    # ids differ, outputs inside the envelope
    case = make_case(divergence={**TOKEN_DIV, "bounds": {"max_abs": 0.2, "cosine_distance": 0.1}})
    v = _cmp(case, _shifted(ref, 0.1), PREFIXED, ref)
    assert v.status == "xfail" and "inside the recorded envelope" in v.reason
    assert "token ids differ" in v.reason and v.envelope == {"max_abs": 0.2, "cosine_distance": 0.1}
    # ids differ, outputs beyond it: the divergence changed
    v = _cmp(case, _shifted(ref, 20.0), PREFIXED, ref)
    assert v.status == "fail" and "the recorded divergence changed" in v.reason
    # without an envelope, a metric out of the case's tolerance is not covered
    v = _cmp(make_case(divergence=TOKEN_DIV), _shifted(ref, 0.1), PREFIXED, ref)
    assert v.status == "fail" and "not in the envelope" in v.reason


def test_a_token_id_divergence_whose_ids_agree_is_xpass_or_a_changed_divergence():
    ref = vecs()
    case = make_case(divergence={**TOKEN_DIV, "bounds": {"max_abs": 0.2, "cosine_distance": 0.1}})
    v = _cmp(case, [a.copy() for a in ref], IDS, ref)
    assert (
        v.status == "xpass" and "token ids now agree" in v.reason and "remove the mark" in v.reason
    )
    # ids agree but the outputs differ (even inside the envelope): not the recorded divergence
    v = _cmp(case, _shifted(ref, 0.1), IDS, ref)
    assert v.status == "fail" and "token ids now agree" in v.reason and "changed" in v.reason


def test_a_token_id_divergence_with_no_ids_compared_or_a_wrong_shape_is_not_xfail():
    ref = vecs()
    case = make_case(divergence=TOKEN_DIV)
    v = _cmp(case, [a.copy() for a in ref], None, ref)  # the runner recorded no ids
    assert v.status == "error" and "were not compared" in v.reason
    v = _cmp(case, [a.copy() for a in ref[:3]], PREFIXED, ref)  # wrong count: structural
    assert v.status == "fail" and "the recorded divergence changed" in v.reason


def test_token_ids_differ_cannot_be_recorded_as_raising():
    with pytest.raises(ValueError, match="no token ids to differ"):
        make_case(divergence={**TOKEN_DIV, "error_match": "boom"})
    make_case(divergence=TOKEN_DIV)  # no envelope needed: then the case's own tolerance holds


# --- where the token ids differ (`token_positions`) ---------------------------------------------

CUT = [[9, 2, 3], [9, 4], [9, 5, 6], [9, 7]]  # position 0 only, e.g. [CLS] cut by a truncation
CUT_MORE = [[9, 2, 8], [9, 4], [9, 5, 6], [9, 7]]  # ... and position 2 of item 0


def test_differing_positions_are_the_union_over_items_or_none_when_lengths_differ():
    from harness.judge.compare import differing_positions

    assert differing_positions(IDS, CUT) == (0,)
    assert differing_positions(IDS, CUT_MORE) == (0, 2)
    assert differing_positions(IDS, IDS) == ()
    assert differing_positions(IDS, PREFIXED) is None  # lengths differ: positions do not line up
    assert differing_positions(IDS, [None, [1, 9], None, None]) == (1,)  # items without ids skipped


def test_a_token_divergence_at_recorded_positions_holds_only_while_they_are_the_ones():
    ref = vecs()
    case = make_case(divergence={**TOKEN_DIV, "token_positions": [0]})
    v = _cmp(case, [a.copy() for a in ref], CUT, ref)
    assert v.status == "xfail"
    v = _cmp(case, [a.copy() for a in ref], CUT_MORE, ref)
    assert v.status == "fail" and "now differ at positions 0, 2, recorded only at 0" in v.reason
    v = _cmp(case, [a.copy() for a in ref], PREFIXED, ref)
    assert v.status == "fail" and "now differ in length" in v.reason
    v = _cmp(case, [a.copy() for a in ref], IDS, ref)  # ids agree: xpass as without positions
    assert v.status == "xpass"
    with pytest.raises(ValueError, match="it needs token_ids"):
        make_case(divergence={**ENVELOPE, "token_positions": [0]})
