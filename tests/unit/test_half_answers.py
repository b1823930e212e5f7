"""A server's /rerank answers in half precision are held to the calibrated bounds the metrics use
(harness.judge.compare.checks_yardstick): HF in float32 and k x HF's own error + the floor, not the
bare floor against HF in the half dtype (issue #41: serve-bert-tiny-cross-encoder-rerank in
bfloat16 failed its top_n score check by 6.7e-3 on a 3.9e-3 floor, its metrics well inside)."""

import numpy as np
import pytest

from harness.judge.compare import checks_yardstick, measure
from harness.judge.side import Side
from harness.judge.verdict import judge
from harness.matrix.schema import Case, Tolerance

BF16 = Tolerance(k=3, max_abs=3.9e-3, max_rel=3.9e-3)  # the cross-encoder family's bf16 floors
ITEMS = tuple((q, d) for q in ("q0", "q1") for d in ("d0", "d1", "d2"))
REF32 = np.array([0.78, 0.5, 0.2, 0.9, 0.1, 0.4], np.float32)  # HF in float32
OWN = np.array([0.008, -0.008, 0.008, -0.008, 0.008, -0.008], np.float32)  # HF's own bf16 error


def _scores(a) -> list[np.ndarray]:
    return [np.asarray([x], np.float32) for x in a]


def _metas(got: np.ndarray, top_n: int = 2, top_shift: float = 0.0) -> list[dict]:
    """What the server runner records per item (serve_decode.match_rerank): rank in the group's
    full answer and, with top_n, the rank and score in the top_n answer."""
    metas = []
    for g, idx in enumerate(([0, 1, 2], [3, 4, 5])):
        order = sorted(idx, key=lambda j: -got[j])
        for j in idx:
            rank = order.index(j)
            top = rank < top_n
            metas.append(
                {
                    "rerank": {
                        "group": g,
                        "rank": rank,
                        "document_matches": True,
                        "prompt_tokens": None,
                        "top_n": top_n,
                        "top_rank": rank if top else None,
                        "top_score": float(got[j]) + top_shift if top else None,
                    }
                }
            )
    return metas


def _measure(got: np.ndarray, **kw):
    return measure(
        BF16,
        ("max_abs", "max_rel", "rank_disagreement"),
        Side.of(_scores(REF32 + OWN)),
        Side.of(_scores(got), meta=_metas(got, **kw)),
        ITEMS,
        Side.of(_scores(REF32)),
    )


def _case() -> Case:
    return Case.model_validate(
        dict(
            id="c",
            family="cross-encoder",
            task="score",
            model={"source": "local", "path": "x"},
            inputs="query-document-pairs",
            runners=["hf", "vllm-serve-v1"],
            tolerances={"float32": {"max_abs": 1e-5}, "bfloat16": BF16.model_dump()},
        )
    )


def test_top_n_scores_within_the_calibrated_bound_pass_in_bfloat16():
    vllm_bf16 = REF32 - 0.75 * OWN  # rounds the other way: 1.4e-2 from HF in bf16, 6e-3 from fp32
    m = _measure(vllm_bf16)
    assert m.problem is None, m.problem  # main: "top_n=2 scores item 0 ... beyond the tolerance"
    assert "top_n=2 returned each group's top 2" in m.notes["rerank"]
    assert judge(_case(), "vllm-serve-v1", m, "bfloat16").status == "pass"


@pytest.mark.parametrize(
    "shift, expected",
    [(0.1, "top_n=2 scores item 0"), (-0.05, "top_n=2 scores item 0")],
)
def test_a_top_n_score_beyond_the_calibrated_bound_still_fails(shift, expected):
    m = _measure(REF32 - 0.75 * OWN, top_shift=shift)  # the top_n answer only: metrics pass
    assert m.problem is not None and expected in m.problem and "beyond" in m.problem
    assert judge(_case(), "vllm-serve-v1", m, "bfloat16").status == "fail"


def test_a_wrong_top_n_order_still_fails_in_bfloat16():
    swapped = REF32.copy()
    swapped[0], swapped[2] = REF32[2], REF32[0]  # the server ranks the worst document first
    m = _measure(swapped)
    assert m.problem is not None and "ranks items" in m.problem


def test_the_yardstick_is_the_cases_own_outside_calibrated_half_precision():
    plain = Tolerance(max_abs=1e-5, max_rel=1e-4)
    ref = _scores(REF32)
    assert checks_yardstick(plain, ref, None, ITEMS) == (plain, ref)
    tol, against = checks_yardstick(BF16, _scores(REF32 + OWN), ref, ITEMS)
    assert against is ref
    assert tol.max_abs == pytest.approx(3 * 0.008 + 3.9e-3, rel=1e-4) and tol.k is None
