"""Rotary BERT-style encoders: NomicBert (nomic-embed-text-v1.5) and GTE (Snowflake's
snowflake-arctic-embed-m-v2.0, `GteModel`), which vLLM 0.32 runs in its bert_with_rope module.

The published checkpoints carry remote code (trust_remote_code) that no pip package ships;
transformers (>= 5) ships the same architectures natively (models/nomic_bert, models/gte) and
saves them in the published weight layout (its conversion_mapping reverses on save:
`encoder.layers.N.attn.Wqkv`, `mlp.fc11/fc12/fc2`, `norm1/norm2`, `emb_ln` for NomicBert;
`encoder.layer.N.attention.qkv_proj`, `mlp.up_gate_proj`, `attn_ln/mlp_ln` for GTE). So the
checkpoint is built and referenced by transformers' native classes, and its config.json also
carries the published remote-code keys vLLM reads (NomicBert's `n_embd`, `activation_function`,
`qkv_proj_bias`...; GTE's `position_embedding_type`), set to the same values as the native ones.
"""

from __future__ import annotations

from harness.models.synthetic import ArchFamily, register
from harness.models.synthetic.bert import bert_vocab, wordpiece_tokenizer

_HIDDEN, _LAYERS, _HEADS, _INNER, _POSITIONS = 64, 2, 2, 128, 128


def _encoder_config() -> dict:
    """The tiny BERT-sized shape both share (transformers' native config keys)."""
    v = bert_vocab()
    return dict(
        vocab_size=len(v),
        hidden_size=_HIDDEN,
        num_hidden_layers=_LAYERS,
        num_attention_heads=_HEADS,
        intermediate_size=_INNER,
        max_position_embeddings=_POSITIONS,
        layer_norm_eps=1e-12,
        pad_token_id=v.index("[PAD]"),
        initializer_range=0.2,
    )


def _nomic_config() -> dict:
    return dict(
        _encoder_config(),
        type_vocab_size=2,
        hidden_act="silu",  # SwiGLU: down(silu(fc12 x) * fc11 x)
        # nomic-embed-text-v1.5's rotary base; rope over the whole head (rotary_emb_fraction 1.0)
        rope_parameters={"rope_type": "default", "rope_theta": 1000.0},
        # the published remote-code keys (configuration_hf_nomic_bert.py), same values
        n_embd=_HIDDEN,
        n_layer=_LAYERS,
        n_head=_HEADS,
        n_inner=_INNER,
        n_positions=_POSITIONS,
        max_trained_positions=_POSITIONS,
        activation_function="swiglu",
        layer_norm_epsilon=1e-12,
        rotary_emb_fraction=1.0,
        rotary_emb_base=1000,
        rotary_emb_interleaved=False,
        rotary_emb_scale_base=None,
        rotary_scaling_factor=None,
        qkv_proj_bias=False,
        mlp_fc1_bias=False,
        mlp_fc2_bias=False,
        prenorm=False,
        causal=False,
    )


def _gte_config() -> dict:
    return dict(
        _encoder_config(),
        type_vocab_size=1,
        hidden_act="gelu",  # GeGLU: down(gelu(gate) * up), up/gate one up_gate_proj
        rope_parameters={"rope_type": "default", "rope_theta": 160000.0},
        position_embedding_type="rope",  # in the published config.json; vLLM requires it
    )


register(
    "nomic_bert",
    ArchFamily(
        model_type="nomic_bert",
        config=_nomic_config(),
        tokenizer=wordpiece_tokenizer,
        archs=("NomicBertModel",),
    ),
)

register(
    "gte",
    ArchFamily(
        model_type="gte",
        config=_gte_config(),
        tokenizer=wordpiece_tokenizer,
        archs=("GteModel",),
    ),
)
