"""BGE-M3 (BAAI/bge-m3): XLM-RoBERTa with a dense (CLS), a sparse and a ColBERT head.

Laid out as the published checkpoint: config.json names `XLMRobertaModel` (vLLM runs it as
`BgeM3EmbeddingModel` through hf_overrides, as its docs say), the backbone in model.safetensors,
sentence-transformers modules (CLS pooling, Normalize), and the two extra heads FlagEmbedding
saves beside it: sparse_linear.pt (hidden -> 1) and colbert_linear.pt (hidden -> hidden).
"""

from __future__ import annotations

from pathlib import Path

from harness.matrix.schema import SyntheticModel
from harness.models.synthetic import ArchFamily, register, seeded_values, update_config_json
from harness.models.synthetic.xlm_roberta import XLMR_ABSOLUTE, xlmr_offset_tokenizer

# FlagEmbedding's head files: (file, output features; None = hidden size)
HEADS = {"sparse_linear": 1, "colbert_linear": None}


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
    update_config_json(out, {"architectures": ["XLMRobertaModel"]})


register(
    "bge-m3",
    ArchFamily(
        model_type="xlm-roberta",
        config=XLMR_ABSOLUTE,
        tokenizer=xlmr_offset_tokenizer,
        archs=("BgeM3EmbeddingModel",),
        hf_class={"BgeM3EmbeddingModel": "XLMRobertaModel"},
        post_build=_heads,
    ),
)
