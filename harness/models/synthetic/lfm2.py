"""ColBERT over LFM2 (Qwen tokenizer, a sentence-transformers Dense projection)."""

from __future__ import annotations

import json
from pathlib import Path

from harness.matrix.schema import SyntheticModel
from harness.models.synthetic import ArchFamily, register, seeded_values, update_config_json
from harness.models.synthetic.qwen import QWEN_PAD, QWEN_VOCAB_SIZE, qwen_tokenizer


def _colbert_dense(out: Path, spec: SyntheticModel, config) -> None:
    """ColBERT over a non-BERT backbone: a sentence-transformers Dense projection (1_Dense)
    applied per token, as vLLM's ColBERT models read it; `architectures` names the ColBERT model."""
    from safetensors.numpy import save_file

    dim = 32
    # save_pretrained wrote the backbone's class name
    update_config_json(out, {"architectures": [spec.arch]})
    dense = out / "1_Dense"
    dense.mkdir()
    weight = seeded_values(spec.seed, "1_Dense.linear.weight", (dim, config.hidden_size), 0.2)
    save_file({"linear.weight": weight}, str(dense / "model.safetensors"))
    (dense / "config.json").write_text(
        json.dumps(
            {
                "in_features": config.hidden_size,
                "out_features": dim,
                "bias": False,
                "activation_function": "torch.nn.modules.linear.Identity",
                "module_input_name": "token_embeddings",
            },
            indent=2,
            sort_keys=True,
        )
    )
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Dense", "type": "sentence_transformers.models.Dense"},
    ]
    (out / "modules.json").write_text(json.dumps(modules, indent=2))
    (out / "sentence_bert_config.json").write_text(
        json.dumps({"max_seq_length": 512, "do_lower_case": False})
    )


def _lfm2_config() -> dict:
    return dict(
        vocab_size=QWEN_VOCAB_SIZE,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        intermediate_size=192,
        block_multiple_of=32,
        block_auto_adjust_ff_dim=True,
        block_ffn_dim_multiplier=1.0,
        block_dim=64,
        conv_dim=64,
        conv_L_cache=3,
        conv_bias=False,
        layer_types=["conv", "conv"],
        max_position_embeddings=512,
        norm_eps=1e-5,
        rope_parameters={"rope_type": "default", "rope_theta": 1e6},
        initializer_range=0.2,
        tie_word_embeddings=False,
        pad_token_id=QWEN_PAD,
        eos_token_id=QWEN_PAD,
        bos_token_id=None,
    )


register(
    "lfm2",
    ArchFamily(
        model_type="lfm2",
        config=_lfm2_config(),
        tokenizer=qwen_tokenizer,
        archs=("ColBERTLfm2Model",),
        hf_class={"ColBERTLfm2Model": "Lfm2Model"},
        post_build=_colbert_dense,
    ),
)
