import numpy as np
import pytest

from harness.judge.compare import compare, degenerate_reference
from harness.judge.metrics import cosine_distance, max_abs, max_rel, rank_disagreement
from harness.judge.side import Side
from harness.matrix.schema import Case, Tolerance
from tests.requests import nest

TOL = Tolerance(cosine_distance=1e-6, max_abs=1e-5)


def make_case(**kw) -> Case:
    base = dict(
        id="c",
        family="f",
        task="embed",
        model={"source": "local", "path": "x"},
        inputs="short-texts",
        runners=["hf", "vllm-v1"],
        tolerances={"float32": TOL.model_dump()},
    )
    return Case.model_validate({**base, **nest(kw)})


def vecs(n=4, d=8, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=d).astype(np.float32) for _ in range(n)]


def test_identical_outputs_pass_with_zero_metrics():
    ref = vecs()
    v = compare(
        make_case(),
        "vllm-v1",
        TOL,
        ("cosine_distance", "max_abs"),
        ref,
        [a.copy() for a in ref],
        tuple("abcd"),
    )
    assert v.status == "pass"
    assert [(m.name, m.value) for m in v.metrics] == [("cosine_distance", 0.0), ("max_abs", 0.0)]


def test_tiny_noise_passes_and_bigger_noise_fails_naming_metric():
    ref = vecs()
    small = [a + np.float32(1e-7) for a in ref]
    assert (
        compare(
            make_case(), "vllm-v1", TOL, ("cosine_distance", "max_abs"), ref, small, tuple("abcd")
        ).status
        == "pass"
    )
    big = [a + np.float32(1e-3) for a in ref]
    v = compare(
        make_case(), "vllm-v1", TOL, ("cosine_distance", "max_abs"), ref, big, tuple("abcd")
    )
    assert v.status == "fail" and "max_abs 0.001 > 1e-05" in v.reason


def test_metric_values():
    a = [np.array([1.0, 0.0], np.float32)]
    b = [np.array([0.0, 1.0], np.float32)]
    assert cosine_distance(a, b) == pytest.approx(1.0)
    assert max_abs(a, b) == pytest.approx(1.0)
    assert max_rel([np.array([2.0])], [np.array([1.0])]) == pytest.approx(0.5)
    # token outputs: the worst token counts
    t_ref = [np.array([[1.0, 0.0], [0.0, 1.0]])]
    t_got = [np.array([[1.0, 0.0], [1.0, 0.0]])]
    assert cosine_distance(t_ref, t_got) == pytest.approx(1.0)


def test_rank_disagreement_counts_groups():
    items = (("q1", "a"), ("q1", "b"), ("q2", "c"), ("q2", "d"))
    ref = [np.array(x) for x in (0.9, 0.1, 0.2, 0.8)]
    same = [np.array(x) for x in (0.8, 0.2, 0.1, 0.7)]
    swapped = [np.array(x) for x in (0.1, 0.9, 0.1, 0.7)]
    assert rank_disagreement(ref, same, items) == 0.0
    assert rank_disagreement(ref, swapped, items) == 0.5


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda g: g[:-1], "wrong count: 3 outputs for 4 inputs"),
        (lambda g: [g[0][:4], *g[1:]], "shape mismatch at item 0: reference [8], runner [4]"),
        (lambda g: [np.full_like(g[0], np.nan), *g[1:]], "NaN in runner output at item 0"),
        (lambda g: [g[0], np.full_like(g[1], np.inf), *g[2:]], "Inf in runner output at item 1"),
    ],
)
def test_structural_faults_fail_with_their_own_message(mutate, message):
    ref = vecs()
    v = compare(
        make_case(),
        "vllm-v1",
        TOL,
        ("cosine_distance", "max_abs"),
        ref,
        mutate([a.copy() for a in ref]),
        tuple("abcd"),
    )
    assert v.status == "fail" and v.reason == message


def test_degenerate_reference_is_an_error_not_a_pass():
    same = [np.full(8, 0.5, np.float32) + np.float32(1e-6 * i) for i in range(4)]
    assert degenerate_reference(same) is not None
    v = compare(
        make_case(), "vllm-v1", TOL, ("max_abs",), same, [a.copy() for a in same], tuple("abcd")
    )
    assert v.status == "error" and "do not vary across inputs" in v.reason
    assert degenerate_reference(vecs()) is None


def test_nan_metric_never_passes():
    from harness.judge.verdict import Metric

    assert not Metric("max_abs", float("nan"), 1.0).ok
    assert Metric("max_abs", 0.5, None).ok


def test_reference_with_many_identical_outputs_is_degenerate():
    # e.g. a tokenizer mapping every word to [UNK]: outputs vary only with length
    a, b = vecs(2)
    assert "only 2 distinct outputs for 6" in degenerate_reference([a, a, a, b, b, b])


def test_per_token_collapse_of_the_reference_is_degenerate():
    # every token of an item gives the same vector: the per-item means still differ, so a check
    # that averages over tokens first let this through
    rng = np.random.default_rng(0)
    collapsed = [np.tile(rng.normal(size=(1, 8)), (6, 1)).astype(np.float32) for _ in range(4)]
    assert "per-token outputs collapse" in degenerate_reference(collapsed)
    healthy = [rng.normal(size=(6, 8)).astype(np.float32) for _ in range(4)]
    assert degenerate_reference(healthy) is None


def test_token_ids_must_be_equal_and_the_first_difference_is_named():
    from harness.judge.compare import measure

    ref = vecs()
    same = [a.copy() for a in ref]
    ids = [[2, 10, 11, 3], [2, 12, 3], [2, 13, 3], [2, 14, 15, 3]]
    m = measure(
        TOL,
        ("cosine_distance", "max_abs"),
        Side(ref, token_ids=ids),
        Side(same, token_ids=[list(x) for x in ids]),
        ITEMS4,
    )
    assert m.problem is None and m.notes["token_ids"] == "token ids equal for 4 of 4 items"
    # a template that slipped a token in (vLLM #19522 put the text "None" between query and document)
    bad = [list(x) for x in ids]
    bad[1] = [2, 12, 999, 3]
    m = measure(
        TOL,
        ("cosine_distance", "max_abs"),
        Side(ref, token_ids=ids),
        Side(same, token_ids=bad),
        ITEMS4,
    )
    assert m.problem == (
        "token ids differ at item 1, position 2: reference 3, runner 999 (lengths 3 and 4; "
        "input 'b')"
    )
    # a lost trailing EOS
    short = [list(x) for x in ids]
    short[3] = [2, 14, 15]
    assert (
        "position 3: reference 3, runner (end)"
        in measure(
            TOL, ("max_abs",), Side(ref, token_ids=ids), Side(same, token_ids=short), ITEMS4
        ).problem
    )
    # the runner recorded ids the reference did not (e.g. a golden without them): the check was
    # expected and could not run, an error naming the reference, never a note
    m = measure(TOL, ("max_abs",), Side(ref, token_ids=None), Side(same, token_ids=ids), ITEMS4)
    assert (
        "the reference recorded none, so the token-id and usage checks could not run"
        in m.reference_problem
    )
    # a runner that records none: the report says so
    m = measure(TOL, ("max_abs",), Side(ref, token_ids=ids), Side(same, token_ids=None), ITEMS4)
    assert m.problem is None and "the runner recorded none" in m.notes["token_ids"]
    m = measure(
        TOL, ("max_abs",), Side(ref, token_ids=[None] * 4), Side(same, token_ids=ids), ITEMS4
    )
    assert "tokenizes no item as one sequence" in m.notes["token_ids"]


def test_a_token_mismatch_fails_even_when_the_numbers_agree():
    v = compare_ids(make_case(), [[1, 2]] * 4, [[1, 2]] * 3 + [[1, 3]])
    assert v.status == "fail" and "token ids differ at item 3" in v.reason


ITEMS4 = tuple("abcd")


def test_compare_runs_the_token_and_usage_checks_when_given_their_evidence():
    """compare() is measure() then judge(): handed token ids and a server's answers it runs the
    same checks (on `layout` it took outputs only, and a wrong token id passed through it)."""
    ref = vecs()
    same = [a.copy() for a in ref]
    ids = [[2, 10 + i, 3] for i in range(4)]
    shifted = [[2, 99, 10 + i, 3] for i in range(4)]
    args = (make_case(), "vllm-v1", TOL, ("cosine_distance", "max_abs"), ref, same, ITEMS4)
    v = compare(*args, ref_ids=ids, got_ids=shifted)
    assert v.status == "fail" and "token ids differ at item 0, position 1" in v.reason
    metas = [{"prompt_token_ids": x, "usage_prompt_tokens": len(x) + 1} for x in ids]
    v = compare(*args, ref_ids=ids, got_ids=ids, got_meta=metas)
    assert v.status == "fail" and "usage.prompt_tokens of item 0 is 4" in v.reason
    v = compare(*args, ref_ids=ids, got_ids=ids)
    assert v.status == "pass", v.reason


def test_the_notes_name_each_check_that_could_not_run_and_why():
    ref = vecs()
    m = measure_(ref, [a.copy() for a in ref])
    assert m.problem is None
    assert m.notes["token_ids"] == "token ids not compared: the reference recorded none"
    assert "usage.prompt_tokens not compared: the runner reported none" in m.notes["usage"]
    assert m.notes["rerank"] == "rerank order not compared: the runner gave no /rerank answers"


def measure_(ref, got):
    from harness.judge.compare import measure

    return measure(TOL, ("max_abs",), Side(ref), Side(got), ITEMS4)


def compare_ids(case, ref_ids, got_ids):
    from harness.judge.compare import measure
    from harness.judge.verdict import judge

    ref = vecs()
    return judge(
        case,
        "vllm-v1",
        measure(
            TOL,
            ("max_abs",),
            Side(ref, token_ids=ref_ids),
            Side([a.copy() for a in ref], token_ids=got_ids),
            ITEMS4,
        ),
    )


def _tied_adversarial_scores():
    """Reference scores of the adversarial cross-encoder pairs, shaped as its golden is: the NFC
    and NFD spellings of one word (items 3, 4) score exactly alike, and so does the duplicate pair
    (items 11, 12, one query group of its own)."""
    from harness.matrix.inputs import input_set, query_groups

    items = input_set("adversarial-pairs").items
    groups = query_groups(items)
    assert [3, 4] == [i for i in groups[0] if i in (3, 4)] and [11, 12] in groups
    ref = [np.array([s], np.float32) for s in np.linspace(0.9, 0.1, len(items))]
    ref[4], ref[12] = ref[3].copy(), ref[11].copy()
    return items, ref


def test_reference_ties_are_not_rank_disagreement_but_a_real_swap_is():
    """One tie rule for the offline metric and the /rerank check
    (server_answers.ranks_as_reference)."""
    from harness.judge.metrics import ranks_as_reference

    items, ref = _tied_adversarial_scores()
    tol = Tolerance(max_abs=1e-5, max_rel=1e-4, rank_disagreement=0.0)
    got = [a.copy() for a in ref]
    for i in (4, 12):  # one ulp up: the runner now orders each tie the other way round
        got[i] = np.nextafter(got[i], np.float32(1))
    assert rank_disagreement(ref, got, items, tol) == 0.0
    assert rank_disagreement(ref, got, items) == 0.0  # exact ties, without a tolerance, too
    case = make_case(
        task="score", inputs="adversarial-pairs", tolerances={"float32": tol.model_dump()}
    )
    metrics = ("max_abs", "max_rel", "rank_disagreement")
    assert compare(case, "vllm-v1", tol, metrics, ref, got, items).status == "pass"
    # a real swap of two untied items (0.9 and 0.85, far beyond the slack) still disagrees
    swapped = [a.copy() for a in got]
    swapped[0], swapped[1] = got[1].copy(), got[0].copy()
    assert rank_disagreement(ref, swapped, items, tol) == 0.5
    v = compare(case, "vllm-v1", tol, metrics, ref, swapped, items)
    assert v.status == "fail" and "rank_disagreement" in v.reason
    # the server's rank check uses the same rule: the tied order passes, the swapped one does not
    r = np.array([float(a[0]) for a in ref])
    assert ranks_as_reference([0, 1, 2, 4, 3], r, tol)
    assert not ranks_as_reference([1, 0, 2, 3, 4], r, tol)


def test_a_chain_of_near_ties_cannot_hide_an_inversion():
    from harness.judge.metrics import ranks_as_reference

    tol = Tolerance(max_abs=1e-3)
    r = np.array([0.0, 0.0009, 0.0018])  # neighbours within 1e-3, the ends 1.8e-3 apart
    assert ranks_as_reference([2, 1, 0], r, tol) and not ranks_as_reference([0, 1, 2], r, tol)


@pytest.mark.parametrize(
    "fault, text",
    [
        (lambda r: [np.full_like(r[0], np.nan), *r[1:]], "NaN in reference output at item 0"),
        (lambda r: [r[0], np.full_like(r[1], np.inf), *r[2:]], "Inf in reference output at item 1"),
        (lambda r: r[:-1], "it returned 3 outputs for 4 inputs"),
    ],
)
def test_an_unusable_reference_is_an_error_naming_the_reference_not_a_fail(fault, text):
    """NaN in the REFERENCE is the reference's fault: an error, never a fail blaming vLLM,
    marked or not."""
    ref = vecs()
    got = [a.copy() for a in ref]
    marked = make_case(
        divergence={"runners": ["vllm-v1"], "reason": "k", "bounds": {"max_abs": 1.0}}
    )
    for case in (make_case(), marked):
        bad = fault(ref)
        v = compare(
            case,
            "vllm-v1",
            TOL,
            ("cosine_distance", "max_abs"),
            bad,
            got[: len(bad)],
            tuple("abcd"),
        )
        assert v.status == "error" and "the reference is unusable" in v.reason, v.reason
        assert text in v.reason


def test_a_single_item_cannot_pass_a_constant_model():
    """One item shows nothing about whether the reference varies: a constant model must not pass."""
    const = [np.full(8, 0.5, np.float32)]
    v = compare(
        make_case(),
        "vllm-v1",
        TOL,
        ("cosine_distance", "max_abs"),
        const,
        [const[0].copy()],
        ("only",),
    )
    assert v.status == "error" and ">= 2 distinct inputs" in v.reason


def test_duplicate_inputs_are_counted_once_when_judging_a_degenerate_reference():
    """Two identical inputs owe no distinct outputs: count distinct INPUTS, not items."""
    a, b = vecs(2)
    items = ("same text",) * 5 + ("other text",)  # healthy: two distinct inputs, two outputs
    ref = [a.copy() for _ in range(5)] + [b]
    v = compare(
        make_case(),
        "vllm-v1",
        TOL,
        ("cosine_distance", "max_abs"),
        ref,
        [x.copy() for x in ref],
        items,
    )
    assert v.status == "pass", v.reason
    # two identical inputs only: one distinct input, whatever the outputs
    assert ">= 2 distinct inputs" in degenerate_reference([a, a.copy()], ("same", "same"))
    # many outputs alike over many distinct inputs is still degenerate, counted over distinct inputs
    assert "only 2 distinct outputs for 6 distinct inputs" in degenerate_reference(
        [a, a, a, b, b, b], tuple("uvwxyz")
    )
