"""SPLADE's pooling formula (harness/runners/hf/splade.py) against a numpy implementation."""

from __future__ import annotations

import numpy as np
import pytest

from harness.runners.hf.splade import splade_vector

torch = pytest.importorskip("torch")


def _np_splade(logits: np.ndarray) -> np.ndarray:
    return np.log(1.0 + np.maximum(logits.astype(np.float64), 0.0)).max(axis=0)


@pytest.mark.parametrize("seed", [0, 1])
def test_splade_vector_agrees_with_numpy(seed):
    logits = np.random.default_rng(seed).normal(-3, 2, size=(7, 50)).astype(np.float32)
    got = splade_vector(torch.from_numpy(logits)).numpy()
    assert got.shape == (50,) and (got == 0).any() and (got > 0).any()
    np.testing.assert_allclose(got, _np_splade(logits), atol=1e-6)


def test_the_cross_check_bites():
    """Sum instead of max, or no log, is far from the numpy reference."""
    logits = np.random.default_rng(2).normal(-3, 2, size=(7, 50)).astype(np.float32)
    t = torch.from_numpy(logits)
    summed = torch.log1p(torch.relu(t)).sum(dim=0).numpy()
    no_log = torch.relu(t).max(dim=0).values.numpy()
    assert np.abs(summed - _np_splade(logits)).max() > 1e-1
    assert np.abs(no_log - _np_splade(logits)).max() > 1e-1
