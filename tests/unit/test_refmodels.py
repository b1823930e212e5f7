"""harness.models.refmodels both builds five synthetic architectures and is their HF-side reference, so
each class is checked here against a second implementation written independently of it: numpy
for every head (and the whole of Jina's ColBERT, whose modeling code is remote code), over
transformers' own base model where transformers ships one. Weights are random (seeded), float64,
so the two must agree to ~1e-6; a seeded mutation (a head weight moved by ~1e-3 after the second
implementation took its copy, a wrong activation, a wrong rotary layout) shows the check bites.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from harness.models import refmodels  # noqa: E402

TOL = 1e-6


def _np(state: dict) -> dict[str, np.ndarray]:
    """A copy of a state dict, float64 numpy: what the second implementation computes with."""
    return {k: v.detach().to(torch.float64).numpy().copy() for k, v in state.items()}


def _relu_mlp_head(w: dict, prefix: str, h: np.ndarray) -> np.ndarray:
    """`score = Linear -> ReLU -> Linear` (Qwen2ForRewardModel, JinaVLForRanking), in numpy."""
    z = h @ w[f"{prefix}.0.weight"].T + w[f"{prefix}.0.bias"]
    return np.maximum(z, 0.0) @ w[f"{prefix}.2.weight"].T + w[f"{prefix}.2.bias"]


def _l2(x: np.ndarray) -> np.ndarray:
    return x / np.sqrt((x * x).sum(-1, keepdims=True))


def _base(cls: type, config, weights: dict, prefix: str, **kw):
    """transformers' own base model `cls`, holding the `prefix.*` weights of the copy."""
    model = cls(config, **kw).to(torch.float64).eval()
    state = {
        k[len(prefix) :]: torch.from_numpy(v) for k, v in weights.items() if k.startswith(prefix)
    }
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not unexpected and all(k.endswith("_ids") for k in missing), (missing, unexpected)
    return model


# --- the architectures: a tiny config, inputs, and the second implementation of each ---


def _qwen2_config(num_labels: int):
    return transformers.Qwen2Config(
        vocab_size=97,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        num_labels=num_labels,
        max_position_embeddings=64,
    )


def _reward_second(ref, weights: dict, ids: torch.Tensor) -> np.ndarray:
    model = _base(transformers.Qwen2Model, ref.config, weights, "model.")
    hidden = model(input_ids=ids).last_hidden_state
    return _relu_mlp_head(weights, "score", hidden.detach().numpy())


def _bert_colbert_second(ref, weights: dict, ids: torch.Tensor) -> np.ndarray:
    bert = _base(transformers.BertModel, ref.config, weights, "bert.", add_pooling_layer=False)
    hidden = bert(input_ids=ids).last_hidden_state.detach().numpy()
    return _l2(hidden @ weights["linear.weight"].T)


def _layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def _rotary(x: np.ndarray, base: float) -> np.ndarray:
    """GPT-NeoX rotary, written pair by pair: dimension i rotates with i + hd/2 by angle
    position / base^(2i/hd). x is [heads, n, hd]."""
    hd, n = x.shape[-1], x.shape[-2]
    out = np.empty_like(x)
    for pos in range(n):
        for i in range(hd // 2):
            angle = pos / base ** (2 * i / hd)
            c, s = math.cos(angle), math.sin(angle)
            a, b = x[:, pos, i], x[:, pos, i + hd // 2]
            out[:, pos, i], out[:, pos, i + hd // 2] = a * c - b * s, b * c + a * s
    return out


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def _jina_colbert_second(ref, w: dict, ids: torch.Tensor) -> np.ndarray:
    """Jina's XLM-RoBERTa flash layout, all numpy: word + token-type(0) embeddings, LayerNorm; per
    layer fused Wqkv, rotary q/k, softmax(q k^T / sqrt(hd)) v, out_proj, residual + LayerNorm,
    fc1 -> exact GELU -> fc2, residual + LayerNorm; then the bias-free projection, L2 per token."""
    cfg = ref.config
    h, nh, eps = cfg.hidden_size, cfg.num_attention_heads, cfg.layer_norm_eps
    hd = h // nh
    x = w["roberta.embeddings.word_embeddings.weight"][ids[0].numpy()]
    x = x + w["roberta.embeddings.token_type_embeddings.weight"][0]
    x = _layer_norm(x, w["roberta.emb_ln.weight"], w["roberta.emb_ln.bias"], eps)
    for i in range(cfg.num_hidden_layers):
        p = f"roberta.encoder.layers.{i}."
        qkv = x @ w[p + "mixer.Wqkv.weight"].T + w[p + "mixer.Wqkv.bias"]
        q, k, v = (
            qkv[:, j * h : (j + 1) * h].reshape(-1, nh, hd).transpose(1, 0, 2) for j in range(3)
        )
        q, k = _rotary(q, cfg.rotary_emb_base), _rotary(k, cfg.rotary_emb_base)
        scores = q @ k.transpose(0, 2, 1) / math.sqrt(hd)
        att = np.exp(scores - scores.max(-1, keepdims=True))
        att /= att.sum(-1, keepdims=True)
        a = (att @ v).transpose(1, 0, 2).reshape(-1, h)
        a = a @ w[p + "mixer.out_proj.weight"].T + w[p + "mixer.out_proj.bias"]
        x = _layer_norm(x + a, w[p + "norm1.weight"], w[p + "norm1.bias"], eps)
        m = _gelu(x @ w[p + "mlp.fc1.weight"].T + w[p + "mlp.fc1.bias"])
        m = m @ w[p + "mlp.fc2.weight"].T + w[p + "mlp.fc2.bias"]
        x = _layer_norm(x + m, w[p + "norm2.weight"], w[p + "norm2.bias"], eps)
    return _l2(x @ w["linear.weight"].T)[None]


def _jina_vl_second(ref, weights: dict, ids: torch.Tensor) -> np.ndarray:
    model = _base(transformers.Qwen2VLModel, ref.config, weights, "model.")
    hidden = model(input_ids=ids, attention_mask=torch.ones_like(ids)).last_hidden_state
    return _relu_mlp_head(weights, "score", hidden[:, -1].detach().numpy())


def _jina_vl_config():
    from harness.models.synthetic.qwen2_vl import _qwen2_vl_config

    return transformers.Qwen2VLConfig(**_qwen2_vl_config())


def _bert_config():
    return transformers.BertConfig(
        vocab_size=97,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
    )


def _jina_colbert_config():
    return transformers.XLMRobertaConfig(
        vocab_size=97,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        type_vocab_size=1,
        layer_norm_eps=1e-5,
        rotary_emb_base=10000.0,
    )


# arch -> (config, second implementation, token ids drawn below this)
ARCHS: dict[str, tuple[Callable, Callable, int]] = {
    "Qwen2ForRewardModel": (lambda: _qwen2_config(1), _reward_second, 97),
    "Qwen2ForProcessRewardModel": (lambda: _qwen2_config(2), _reward_second, 97),
    "HF_ColBERT": (_bert_config, _bert_colbert_second, 97),
    "ColBERTJinaRobertaModel": (_jina_colbert_config, _jina_colbert_second, 97),
    "JinaVLForRanking": (_jina_vl_config, _jina_vl_second, 4000),  # below the vision specials
}
# the head weight a seeded mutation moves (after the second implementation took its copy)
HEAD = {
    "Qwen2ForRewardModel": "score.2.weight",
    "Qwen2ForProcessRewardModel": "score.2.weight",
    "HF_ColBERT": "linear.weight",
    "ColBERTJinaRobertaModel": "linear.weight",
    "JinaVLForRanking": "score.2.weight",
}


def _setup(arch: str, seed: int = 0):
    make_config, second, vocab = ARCHS[arch]
    torch.manual_seed(seed)
    cls, _ = refmodels.REFERENCE_ARCHS[arch]
    ref = cls(make_config()).to(torch.float64).eval()
    for p in ref.parameters():  # default inits leave biases and norms at 0 / 1: move them too
        p.data.add_(0.05 * torch.randn_like(p))
    ids = torch.randint(3, vocab, (1, 11), generator=torch.Generator().manual_seed(seed))
    return ref, _np(ref.state_dict()), second, ids


def _ours(ref, ids) -> np.ndarray:
    with torch.no_grad():
        return ref(ids).numpy()


@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_refmodels_agree_with_a_second_implementation(arch):
    assert set(ARCHS) == set(refmodels.REFERENCE_ARCHS)  # every reference class is cross-checked
    ref, weights, second, ids = _setup(arch)
    with torch.no_grad():
        theirs = second(ref, weights, ids)
    ours = _ours(ref, ids)
    assert ours.shape == theirs.shape
    np.testing.assert_allclose(ours, theirs, rtol=TOL, atol=TOL)


@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_the_cross_check_bites_on_a_seeded_weight_mutation(arch):
    ref, weights, second, ids = _setup(arch)
    state = ref.state_dict()[HEAD[arch]]
    noise = torch.randn(state.shape, generator=torch.Generator().manual_seed(7), dtype=state.dtype)
    state.add_(1e-3 * noise)  # in place: the reference runs with it, the copy does not
    with torch.no_grad():
        theirs = second(ref, weights, ids)
    assert np.abs(_ours(ref, ids) - theirs).max() > 10 * TOL


def test_the_cross_check_bites_on_a_wrong_activation_or_rotary_layout(monkeypatch):
    ref, weights, second, ids = _setup("Qwen2ForRewardModel")
    ref.score[1] = torch.nn.GELU()
    with torch.no_grad():
        assert np.abs(_ours(ref, ids) - second(ref, weights, ids)).max() > 10 * TOL

    neox = refmodels._rotate_neox

    def interleaved(x, base):  # GPT-J layout: pairs (0, 1), (2, 3), ... instead of (i, i + hd/2)
        hd = x.shape[-1]
        perm = torch.arange(hd).view(2, hd // 2).T.reshape(-1)
        return neox(x[..., perm], base)[..., torch.argsort(perm)]

    ref, weights, second, ids = _setup("ColBERTJinaRobertaModel")
    monkeypatch.setattr(refmodels, "_rotate_neox", interleaved)
    with torch.no_grad():
        assert np.abs(_ours(ref, ids) - second(ref, weights, ids)).max() > 10 * TOL
