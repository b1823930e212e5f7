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
from harness.models.synthetic.gemma import gemma_vocab_and_merges


def embedding_gemma_tokenizer(out: Path, config: dict) -> None:
    from tokenizers import processors
    from transformers import Qwen2Tokenizer

    vocab, merges = gemma_vocab_and_merges()
    tok = Qwen2Tokenizer(
        vocab=vocab,
        merges=merges,
        unk_token=None,
        bos_token="<bos>",
        eos_token="<eos>",
        pad_token="<pad>",
        model_max_length=config["max_position_embeddings"],
    )
    tok._tokenizer.post_processor = processors.TemplateProcessing(
        single="<bos>:0 $A:0 <eos>:0",
        pair="<bos>:0 $A:0 <eos>:0 $B:1 <eos>:1",
        special_tokens=[("<bos>", vocab["<bos>"]), ("<eos>", vocab["<eos>"])],
    )
    tok.save_pretrained(out)


_VOCAB = gemma_vocab_and_merges()[0]

register(
    "gemma3-text",
    ArchFamily(
        model_type="gemma3_text",
        config=dict(
            vocab_size=len(_VOCAB),
            hidden_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            num_key_value_heads=1,
            head_dim=32,  # vLLM's CPU attention rejects 16
            # not head_dim (EmbeddingGemma's equal 256): a scale read from head_dim is seen
            query_pre_attn_scalar=24,
            intermediate_size=128,
            hidden_activation="gelu_pytorch_tanh",
            max_position_embeddings=512,
            rms_norm_eps=1e-6,
            initializer_range=0.2,
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
            tie_word_embeddings=True,
            pad_token_id=_VOCAB["<pad>"],
            eos_token_id=_VOCAB["<eos>"],
            bos_token_id=_VOCAB["<bos>"],
        ),
        tokenizer=embedding_gemma_tokenizer,
        archs=("Gemma3TextModel",),
    ),
)
