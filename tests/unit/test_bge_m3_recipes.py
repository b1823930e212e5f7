"""BGE-M3's reference formulas (harness/runners/hf/bge_m3.py, FlagEmbedding's definitions) against
a second, independent implementation in numpy; and the synthetic checkpoint's published layout."""

from __future__ import annotations

import json

import numpy as np
import pytest

from harness.runners.hf import bge_m3

torch = pytest.importorskip("torch")


def _np_normalize(x: np.ndarray) -> np.ndarray:
    return x / np.sqrt((x.astype(np.float64) ** 2).sum(axis=-1, keepdims=True)).astype(np.float32)


def _np_dense(h: np.ndarray) -> np.ndarray:
    return _np_normalize(h[0])


def _np_sparse(h: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.maximum(np.einsum("th,oh->to", h, w) + b, 0.0)[:, 0]


def _np_colbert(h: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    return _np_normalize(np.einsum("th,oh->to", h[1:], w) + b)


def _random(seed: int, tokens: int = 9, hidden: int = 16):  # seeds 0, 1, 3: mixed signs
    rng = np.random.default_rng(seed)
    h = rng.normal(size=(tokens, hidden)).astype(np.float32)
    sparse = torch.nn.Linear(hidden, 1)
    colbert = torch.nn.Linear(hidden, hidden)
    with torch.no_grad():
        for lin in (sparse, colbert):
            lin.weight.copy_(torch.from_numpy(rng.normal(size=lin.weight.shape).astype(np.float32)))
            lin.bias.copy_(torch.from_numpy(rng.normal(size=lin.bias.shape).astype(np.float32)))
    return h, sparse, colbert


def _np_heads(lin):
    return lin.weight.detach().numpy(), lin.bias.detach().numpy()


@pytest.mark.parametrize("seed", [0, 1, 3])
def test_formulas_agree_with_numpy(seed):
    h, sparse, colbert = _random(seed)
    th = torch.from_numpy(h)
    with torch.no_grad():
        dense = bge_m3.dense_vector(th).numpy()
        weights = bge_m3.sparse_token_weights(th, sparse).numpy()
        vecs = bge_m3.colbert_vectors(th, colbert).numpy()
    np.testing.assert_allclose(dense, _np_dense(h), atol=1e-6)
    expected = _np_sparse(h, *_np_heads(sparse))
    assert weights.shape == (9,) and (expected == 0).any() and (expected > 0).any()
    np.testing.assert_allclose(weights, expected, atol=1e-5)
    assert vecs.shape == (8, 16)  # every token but the cls
    np.testing.assert_allclose(vecs, _np_colbert(h, *_np_heads(colbert)), atol=1e-6)


def test_the_cross_check_bites():
    """The numpy side tells a missing relu, a missing normalisation and a kept cls apart."""
    h, sparse, colbert = _random(4)
    th = torch.from_numpy(h)
    with torch.no_grad():
        no_relu = sparse(th).squeeze(-1).numpy()
        unnormalised = colbert(th[1:]).numpy()
        with_cls = torch.nn.functional.normalize(colbert(th), dim=-1).numpy()
    assert np.abs(no_relu - _np_sparse(h, *_np_heads(sparse))).max() > 1e-2
    assert np.abs(unnormalised - _np_colbert(h, *_np_heads(colbert))).max() > 1e-2
    assert with_cls.shape != _np_colbert(h, *_np_heads(colbert)).shape


def test_lexical_weights_follow_flagembedding():
    """FlagEmbedding's _process_token_weights: max per id, special ids and zeros left out."""
    ids = [0, 7, 9, 7, 3, 9, 2]  # cls, tokens, unk (3), eos
    weights = [5.0, 0.25, 0.0, 0.75, 9.0, 0.5, 9.0]
    assert bge_m3.lexical_weights(weights, ids, {0, 1, 2, 3}) == {7: 0.75, 9: 0.5}


def test_synthetic_checkpoint_has_the_published_layout(tmp_path):
    """config.json names XLMRobertaModel; the heads are FlagEmbedding's .pt state dicts
    (sparse hidden -> 1, colbert hidden -> hidden) that nn.Linear loads as they are."""
    from harness.matrix.schema import SyntheticModel
    from harness.models.synthetic import build

    d = tmp_path / "m"
    build(SyntheticModel(source="synthetic", arch="BgeM3EmbeddingModel", seed=82), d)
    cfg = json.loads((d / "config.json").read_text())
    assert cfg["architectures"] == ["XLMRobertaModel"]
    hidden = cfg["hidden_size"]
    for name, out in (("sparse_linear", 1), ("colbert_linear", hidden)):
        state = torch.load(str(d / f"{name}.pt"), weights_only=True)
        torch.nn.Linear(hidden, out).load_state_dict(state)  # strict: names and shapes
