"""BGE-M3 (BAAI/bge-m3): XLM-RoBERTa with a dense (CLS), a sparse and a ColBERT head.

Laid out as the published checkpoint: config.json names `XLMRobertaModel` (vLLM runs it as
`BgeM3EmbeddingModel` through hf_overrides, as its docs say), the backbone in model.safetensors,
sentence-transformers modules (CLS pooling, Normalize), and the two extra heads FlagEmbedding
saves beside it: sparse_linear.pt (hidden -> 1) and colbert_linear.pt (hidden -> hidden).
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.matrix.schema import SyntheticModel
from harness.models.synthetic import ArchFamily, register, seeded_values
from harness.models.synthetic.xlm_roberta import xlmr_tokenizer, xlmr_vocab

# FlagEmbedding's head files: (file, output features; None = hidden size)
HEADS = {"sparse_linear": 1, "colbert_linear": None}


def _tokenizer(out: Path, config: dict) -> None:
    """The Unigram XLM-R tokenizer, 2 positions shorter than the model: RoBERTa's positions run
    from pad_token_id + 1, so a full-length input needs max_position_embeddings = length + 2."""
    xlmr_tokenizer(
        out, {**config, "max_position_embeddings": config["max_position_embeddings"] - 2}
    )


def _heads(out: Path, spec: SyntheticModel, config) -> None:
    """The two head files, seeded like every other parameter, and the published config (which
    names XLMRobertaModel: the heads are not part of the transformers model).

    They are written with torch.save because that is the format FlagEmbedding saves and both
    FlagEmbedding (`torch.load`) and vLLM 0.32 (`BgeM3EmbeddingModel.secondary_weight_files`,
    only `*.pt`) read; the harness's own data stays safetensors. Plain tensors only, so a reader
    can (and ours does) load them with weights_only=True."""
    import torch

    hidden = int(config.hidden_size)
    std = float(getattr(config, "initializer_range", 0.2))
    for name, features in HEADS.items():
        shape = (features or hidden, hidden)
        state = {
            "weight": torch.from_numpy(seeded_values(spec.seed, f"{name}.weight", shape, std)),
            "bias": torch.from_numpy(seeded_values(spec.seed, f"{name}.bias", shape[:1], std)),
        }
        torch.save(state, out / f"{name}.pt")
    cfg = json.loads((out / "config.json").read_text())
    cfg["architectures"] = ["XLMRobertaModel"]
    (out / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")


register(
    "bge-m3",
    ArchFamily(
        model_type="xlm-roberta",
        config=dict(
            vocab_size=len(xlmr_vocab()),
            hidden_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=128,
            hidden_act="gelu",
            max_position_embeddings=130,
            type_vocab_size=1,
            layer_norm_eps=1e-5,
            pad_token_id=1,
            bos_token_id=0,
            eos_token_id=2,
            initializer_range=0.2,
        ),
        tokenizer=_tokenizer,
        archs=("BgeM3EmbeddingModel",),
        hf_class={"BgeM3EmbeddingModel": "XLMRobertaModel"},
        post_build=_heads,
    ),
)
