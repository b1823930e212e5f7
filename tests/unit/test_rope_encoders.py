"""NomicBert and GTE tiny checkpoints (harness/models/synthetic/rope_encoders.py).

The reference of their cases is transformers' native NomicBertModel / GteModel. These tests hold
that reference to a second implementation: a numpy forward written from the published remote
code (nomic-ai's modeling_hf_nomic_bert.py: fc11 is the up projection, fc12 the gate, SwiGLU,
post-norm; Alibaba-NLP/new-impl's modeling.py: one up_gate_proj split [up, gate], GeGLU,
post-norm; both rotate_half rope over the whole head) on the weights as saved, under the
published names. And they check the config carries the published remote-code keys vLLM reads,
with the values of the native ones.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from harness.matrix.schema import SyntheticModel
from harness.models import synthetic

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

TEXTS = ["the cat sat on the mat", "a dog ran far away from the house today"]


def _build(tmp_path, arch: str, seed: int):
    spec = SyntheticModel(source="synthetic", arch=arch, seed=seed)
    target = tmp_path / arch
    synthetic.build(spec, target)
    from safetensors.numpy import load_file

    weights = load_file(str(target / "model.safetensors"))
    config = json.loads((target / "config.json").read_text())
    return target, weights, config


def _layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def _rope(x, base):
    """x [heads, tokens, head_dim]: rotate_half (GPT-NeoX) rope over the whole head."""
    d = x.shape[-1]
    inv = 1.0 / base ** (np.arange(0, d, 2, dtype=np.float64) / d)
    ang = np.arange(x.shape[1], dtype=np.float64)[:, None] * inv[None, :]
    cos, sin = np.cos(np.concatenate([ang, ang], -1)), np.sin(np.concatenate([ang, ang], -1))
    rot = np.concatenate([-x[..., d // 2 :], x[..., : d // 2]], -1)
    return x * cos + rot * sin


def _gelu(x):
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def _silu(x):
    return x / (1.0 + np.exp(-x))


def _attention(x, qkv_w, qkv_b, out_w, out_b, heads, base):
    t, h = x.shape
    qkv = x @ qkv_w.T + (qkv_b if qkv_b is not None else 0.0)
    q, k, v = (m.reshape(t, heads, h // heads).transpose(1, 0, 2) for m in np.split(qkv, 3, -1))
    q, k = _rope(q, base), _rope(k, base)
    s = q @ k.transpose(0, 2, 1) / math.sqrt(h // heads)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    o = (p @ v).transpose(1, 0, 2).reshape(t, h)
    return o @ out_w.T + (out_b if out_b is not None else 0.0)


def _nomic_forward(w, cfg, ids):
    """nomic-ai's NomicBertModel (prenorm false, no biases, swiglu), from the published code."""
    eps = cfg["layer_norm_epsilon"]
    x = (
        w["embeddings.word_embeddings.weight"][ids]
        + w["embeddings.token_type_embeddings.weight"][0]
    )
    x = _layer_norm(x, w["emb_ln.weight"], w["emb_ln.bias"], eps)
    for i in range(cfg["n_layer"]):
        p = f"encoder.layers.{i}."
        a = _attention(
            x, w[p + "attn.Wqkv.weight"], None, w[p + "attn.out_proj.weight"], None,
            cfg["n_head"], cfg["rotary_emb_base"],
        )  # fmt: skip
        x = _layer_norm(x + a, w[p + "norm1.weight"], w[p + "norm1.bias"], eps)
        y, gate = x @ w[p + "mlp.fc11.weight"].T, x @ w[p + "mlp.fc12.weight"].T
        m = (y * _silu(gate)) @ w[p + "mlp.fc2.weight"].T
        x = _layer_norm(x + m, w[p + "norm2.weight"], w[p + "norm2.bias"], eps)
    return x


def _gte_forward(w, cfg, ids):
    """Alibaba-NLP/new-impl's NewModel (as Snowflake's GteModel checkpoints), from its code."""
    eps, inner = cfg["layer_norm_eps"], cfg["intermediate_size"]
    x = (
        w["embeddings.word_embeddings.weight"][ids]
        + w["embeddings.token_type_embeddings.weight"][0]
    )
    x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        a = _attention(
            x, w[p + "attention.qkv_proj.weight"], w[p + "attention.qkv_proj.bias"],
            w[p + "attention.o_proj.weight"], w[p + "attention.o_proj.bias"],
            cfg["num_attention_heads"], cfg["rope_parameters"]["rope_theta"],
        )  # fmt: skip
        x = _layer_norm(x + a, w[p + "attn_ln.weight"], w[p + "attn_ln.bias"], eps)
        up_gate = x @ w[p + "mlp.up_gate_proj.weight"].T
        up, gate = up_gate[:, :inner], up_gate[:, inner:]
        m = (_gelu(gate) * up) @ w[p + "mlp.down_proj.weight"].T + w[p + "mlp.down_proj.bias"]
        x = _layer_norm(x + m, w[p + "mlp_ln.weight"], w[p + "mlp_ln.bias"], eps)
    return x


@pytest.mark.parametrize(
    ("arch", "forward"), [("NomicBertModel", _nomic_forward), ("GteModel", _gte_forward)]
)
def test_transformers_native_class_matches_the_published_math(tmp_path, arch, forward):
    path, weights, cfg = _build(tmp_path, arch, seed=5)
    weights = {k: v.astype(np.float64) for k, v in weights.items()}
    tok = transformers.AutoTokenizer.from_pretrained(path)
    model = transformers.AutoModel.from_pretrained(path, dtype=torch.float32).eval()
    assert type(model).__name__ == arch
    for text in TEXTS:
        ids = tok(text)["input_ids"]
        with torch.no_grad():
            hf = model(input_ids=torch.tensor([ids])).last_hidden_state[0].numpy()
        ref = forward(weights, cfg, np.array(ids))
        assert hf.shape == ref.shape
        np.testing.assert_allclose(hf, ref, atol=2e-5, rtol=0)


def test_a_wrong_convention_is_told_apart(tmp_path):
    """The cross-check bites: the numpy NomicBert with fc11/fc12 swapped differs."""
    path, weights, cfg = _build(tmp_path, "NomicBertModel", seed=5)
    w = {k: v.astype(np.float64) for k, v in weights.items()}
    swapped = dict(w)
    for i in range(cfg["n_layer"]):
        p = f"encoder.layers.{i}.mlp."
        swapped[p + "fc11.weight"], swapped[p + "fc12.weight"] = (
            w[p + "fc12.weight"],
            w[p + "fc11.weight"],
        )
    ids = np.array(transformers.AutoTokenizer.from_pretrained(path)(TEXTS[0])["input_ids"])
    assert np.abs(_nomic_forward(w, cfg, ids) - _nomic_forward(swapped, cfg, ids)).max() > 1e-2


def test_config_carries_the_published_keys_vllm_reads(tmp_path):
    _, weights, nomic = _build(tmp_path, "NomicBertModel", seed=5)
    assert (nomic["n_embd"], nomic["n_layer"], nomic["n_head"], nomic["n_inner"]) == (
        nomic["hidden_size"], nomic["num_hidden_layers"], nomic["num_attention_heads"],
        nomic["intermediate_size"],
    )  # fmt: skip
    assert nomic["activation_function"] == "swiglu" and nomic["hidden_act"] == "silu"
    assert nomic["rotary_emb_base"] == nomic["rope_parameters"]["rope_theta"]
    assert nomic["layer_norm_epsilon"] == nomic["layer_norm_eps"]
    assert not (nomic["qkv_proj_bias"] or nomic["mlp_fc1_bias"] or nomic["mlp_fc2_bias"])
    assert not any(k.endswith(".bias") and "norm" not in k and "ln" not in k for k in weights)
    _, _, gte = _build(tmp_path, "GteModel", seed=5)
    assert gte["model_type"] == "gte" and gte["position_embedding_type"] == "rope"
