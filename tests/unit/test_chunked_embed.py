"""The chunk-and-average rule of st-embed-chunked (harness/runners/hf/chunked.py) checked against
a second, independent implementation in numpy."""

from __future__ import annotations

import numpy as np
import pytest

from harness.runners.hf.chunked import chunk_and_average, chunks_of


def test_chunks_cover_every_id_once_in_order():
    ids = list(range(100, 173))  # 73 ids
    parts = chunks_of(ids, 32)
    assert [len(p) for p in parts] == [32, 32, 9]
    assert sum(parts, []) == ids
    assert chunks_of(ids[:32], 32) == [ids[:32]]  # at the limit: one chunk
    with pytest.raises(ValueError):
        chunks_of(ids, 0)


@pytest.mark.parametrize("n, size", [(73, 32), (64, 32), (5, 32), (97, 10)])
def test_mean_pooled_chunks_average_to_the_mean_over_all_tokens(n, size):
    """For a mean-pooling embedder, the token-count-weighted average of the chunk means is the
    mean over every token of the prompt: computed here in numpy directly, with no chunks."""
    import torch

    rng = np.random.default_rng(n * 1000 + size)
    table = rng.normal(size=(200, 16))
    ids = rng.integers(0, 200, n).tolist()

    def embed(chunk):
        return torch.tensor(table[chunk].mean(axis=0))

    expected = table[ids].mean(axis=0)
    got = chunk_and_average(ids, size, embed, normalize=False).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    got_n = chunk_and_average(ids, size, embed, normalize=True).numpy()
    np.testing.assert_allclose(got_n, expected / np.linalg.norm(expected), rtol=1e-5, atol=1e-6)


def test_last_token_chunks_weighted_by_their_length():
    """A last-token embedder: the chunks' last tokens, weighted by chunk length (numpy, by hand)."""
    import torch

    rng = np.random.default_rng(3)
    table = rng.normal(size=(50, 8))
    ids = rng.integers(0, 50, 45).tolist()  # chunks of 20: lengths 20, 20, 5

    def embed(chunk):
        return torch.tensor(table[chunk[-1]])

    lasts = np.stack([table[ids[19]], table[ids[39]], table[ids[44]]])
    expected = (lasts * np.array([[20], [20], [5]])).sum(axis=0) / 45
    got = chunk_and_average(ids, 20, embed, normalize=False).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
