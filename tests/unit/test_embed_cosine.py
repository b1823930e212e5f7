"""The st-embed-cosine reference (an embedding model's /score): sentence-transformers' cos_sim
of each pair's embeddings, held to a second implementation (numpy) on the same vectors, with
each text encoded once and the pairs matched to their own texts."""

import numpy as np
import torch

from harness.matrix.inputs import input_set
from harness.runners.hf import RECIPES
from tests.requests import req

PAIRS = [tuple(p) for p in input_set("query-document-pairs").items]


class _Encoder:
    """encode() as sentence-transformers' (a tensor per text), seeded per text; unnormalised
    and some negative values, so the cosine's normalisation matters."""

    def __init__(self):
        self.calls: list[list[str]] = []

    def encode(self, texts, batch_size, convert_to_tensor, show_progress_bar):
        assert convert_to_tensor and batch_size == len(texts)
        self.calls.append(list(texts))
        return torch.stack([torch.from_numpy(_vector(t)) for t in texts])


def _vector(text: str) -> np.ndarray:
    rng = np.random.default_rng(sum(map(ord, text)))
    return (rng.normal(size=16) * rng.uniform(0.5, 3.0)).astype(np.float32)


class _Runner:
    def __init__(self):
        self.st = _Encoder()

    def sentence_transformer(self):
        return self.st


def _numpy_cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.astype(np.float64), b.astype(np.float64)
    return float(a @ b / (np.sqrt(a @ a) * np.sqrt(b @ b)))


def test_the_reference_cosine_equals_numpys_on_the_same_vectors():
    runner = _Runner()
    got = RECIPES["st-embed-cosine"](runner, PAIRS, req())
    want = [_numpy_cosine(_vector(q), _vector(d)) for q, d in PAIRS]
    assert [g.shape for g in got] == [(1,)] * len(PAIRS)
    np.testing.assert_allclose([float(g[0]) for g in got], want, atol=1e-6, rtol=0)
    # one encode call, each distinct text once
    (texts,) = runner.st.calls
    assert len(texts) == len(set(texts)) == len({t for p in PAIRS for t in p})


def test_a_pair_is_scored_on_its_own_texts_not_its_neighbours():
    swapped = [(q, PAIRS[(k + 1) % len(PAIRS)][1]) for k, (q, _) in enumerate(PAIRS)]
    got = RECIPES["st-embed-cosine"](_Runner(), swapped, req())
    want = [_numpy_cosine(_vector(q), _vector(d)) for q, d in swapped]
    np.testing.assert_allclose([float(g[0]) for g in got], want, atol=1e-6, rtol=0)
    original = [_numpy_cosine(_vector(q), _vector(d)) for q, d in PAIRS]
    assert not np.allclose(want, original, atol=1e-3)
