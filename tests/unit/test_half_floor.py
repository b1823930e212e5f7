"""Relative metrics in half precision (harness.judge.metrics.NOISE_FLOORED): over the values whose
float32 reference exceeds HF's own absolute error in the dtype, the others held by max_abs
(issue #41, bfloat16 on matrices/extended.yaml: `bert-tiny-seq-classify-3-activation-off`,
raw logits, failed max_rel 1.75 > 1.05 on a logit of 0.0046 with vLLM's absolute error equal to
HF's own; `bge-m3-tiny-sparse-token-classify` failed norm_rel inf > inf on an all-zero float32
item). A relative fault far above the dtype's noise still fails."""

import numpy as np
import pytest

from harness.judge.compare import calibrated_metrics
from harness.judge.metrics import max_rel, norm_abs, norm_rel
from harness.matrix.schema import Tolerance

BF16 = Tolerance(k=3, max_abs=3.9e-3, max_rel=3.9e-3, norm_rel=1.2e-2)
ITEMS = ("a", "b")


def _arrays(*rows):
    return [np.asarray(r, np.float32) for r in rows]


def _by_name(metrics):
    return {m.name: m for m in metrics}


REF32 = _arrays([0.0046, 0.1, 1.0], [0.5, -0.8, 2.0])  # raw logits, one near zero
HF_BF16 = _arrays([0.0046, 0.1, 1.03], [0.5, -0.8, 2.0])  # HF's own error: 0.03 on 1.0


def _calibrated(names, got, ref=HF_BF16, ref32=REF32):
    return _by_name(calibrated_metrics(BF16, names, ref, ref32, got, ITEMS))


def test_a_near_zero_logit_is_left_to_max_abs_not_measured_relative_to_itself():
    vllm = _arrays([0.0126, 0.1, 1.0], [0.5, -0.8, 2.0])  # 0.008 off on 0.0046: under the noise
    assert max_rel(REF32, vllm) == pytest.approx(1.74, rel=1e-2)  # relative to itself: a red
    m = _calibrated(["max_abs", "max_rel"], vllm)
    assert m["max_rel"].value == 0.0 and m["max_rel"].ok  # main: 1.74 > 0.094
    assert m["max_rel"].ref_error == pytest.approx(0.03, rel=1e-3) and m["max_abs"].ok


def test_a_fault_still_fails_on_max_abs_under_the_noise_and_on_max_rel_above_it():
    wrong = _arrays([0.3046, 0.1, 1.0], [0.5, -0.8, 2.0])  # 0.3 off a near-zero logit
    m = _calibrated(["max_abs", "max_rel"], wrong)
    assert not m["max_abs"].ok and m["max_abs"].value == pytest.approx(0.3, rel=1e-3)
    scaled = _arrays([0.0046, 0.1, 1.25], [0.5, -0.8, 2.5])  # x1.25 far above the noise
    m = _calibrated(["max_rel"], scaled)
    assert not m["max_rel"].ok and m["max_rel"].value == pytest.approx(0.25, rel=1e-3)


def test_an_all_zero_float32_vector_is_left_to_max_abs_in_norm_rel():
    ref32 = _arrays(np.zeros(17), np.full(17, 0.5))  # a sparse item whose weights are all 0
    hf = _arrays(np.r_[0.01, np.zeros(16)], np.full(17, 0.5))
    vllm = _arrays(np.r_[0.02, np.zeros(16)], np.full(17, 0.5))
    assert norm_rel(ref32, vllm) == np.inf  # the float32 definition: a red on rounding
    assert norm_abs(ref32, hf) == pytest.approx(0.01)
    m = _calibrated(["norm_rel"], vllm, hf, ref32)
    assert m["norm_rel"].value == 0.0 and m["norm_rel"].ok  # main: inf > inf
    lost = _arrays(np.zeros(17), np.full(17, 0.5) * 1.25)  # a wrong norm far above the noise
    m = _calibrated(["norm_rel"], lost, hf, ref32)
    assert not m["norm_rel"].ok and m["norm_rel"].value == pytest.approx(0.25, rel=1e-3)
