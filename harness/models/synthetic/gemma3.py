"""Gemma 3 text encoder (Gemma3TextModel) as EmbeddingGemma builds it: Gemma 3 with
`use_bidirectional_attention` (every layer attends both ways; the sliding layers within a window
on each side), under sentence-transformers' mean pooling, two Dense layers and Normalize (the
case's `pooling`, `dense`, `normalize`, `prompts`).

The tokenizer is the byte-level BPE of gemma.py with EmbeddingGemma's convention: <bos> before
and <eos> after every text (both pooled, as sentence-transformers pools every attended token).
The window is small (16 in config.json) so that the harness's long texts (47-92 tokens) span
several windows: a window applied on one side only, or not at all, changes every vector."""

from __future__ import annotations

from pathlib import Path

from harness.models.synthetic import ArchFamily, register
from harness.models.synthetic.gemma import GEMMA_DECODER, save_gemma_tokenizer


def embedding_gemma_tokenizer(out: Path, config: dict) -> None:
    save_gemma_tokenizer(
        out,
        config,
        single="<bos>:0 $A:0 <eos>:0",
        pair="<bos>:0 $A:0 <eos>:0 $B:1 <eos>:1",
    )


register(
    "gemma3-text",
    ArchFamily(
        model_type="gemma3_text",
        config=dict(
            GEMMA_DECODER,
            # not head_dim (EmbeddingGemma's equal 256): a scale read from head_dim is seen
            query_pre_attn_scalar=24,
            # EmbeddingGemma's keys: bidirectional, a sliding layer before the full one, the
            # window as config.json holds it (transformers keeps window // 2 + 1 in memory: an
            # even value round-trips), and rope per layer type (local base 1e4, global 1e6)
            use_bidirectional_attention=True,
            sliding_window=16,
            layer_types=["sliding_attention", "full_attention"],
            rope_parameters={
                "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                "full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
            },
        ),
        tokenizer=embedding_gemma_tokenizer,
        archs=("Gemma3TextModel",),
    ),
)
