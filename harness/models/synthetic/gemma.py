"""Gemma decoder (GemmaForCausalLM) for bge-reranker-v2-gemma: an LLM scored by its "Yes" logit.

The tokenizer is the byte-level BPE of qwen.py (words as single tokens, "Yes" among them) with
Gemma's special tokens and Gemma's convention: every encoding starts with <bos> (add_bos_token),
and <bos> differs from <pad> (FlagEmbedding's FlagLLMReranker prepends bos only then). Tied
embeddings, as gemma-2b under bge-reranker-v2-gemma: the "Yes" row is embed_tokens'."""

from __future__ import annotations

from pathlib import Path

from harness.models.synthetic import ArchFamily, register
from harness.models.synthetic.qwen import qwen_vocab_and_merges

GEMMA_SPECIALS = ["<pad>", "<eos>", "<bos>"]


def gemma_vocab_and_merges() -> tuple[dict[str, int], list[tuple[str, str]]]:
    vocab, merges = qwen_vocab_and_merges()
    vocab = dict(vocab)
    for tok in GEMMA_SPECIALS:
        vocab[tok] = len(vocab)
    return vocab, merges


def save_gemma_tokenizer(out: Path, config: dict, single: str, pair: str) -> None:
    """The byte-level BPE over gemma_vocab_and_merges with Gemma's special tokens; `single` and
    `pair` are the post-processor's templates (where <bos> and <eos> go: each family's own)."""
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
        single=single,
        pair=pair,
        special_tokens=[(t, vocab[t]) for t in ("<bos>", "<eos>") if t in f"{single} {pair}"],
    )
    tok.save_pretrained(out)


def gemma_tokenizer(out: Path, config: dict) -> None:
    save_gemma_tokenizer(out, config, single="<bos>:0 $A:0", pair="<bos>:0 $A:0 <bos>:1 $B:1")


_VOCAB = gemma_vocab_and_merges()[0]

# the tiny Gemma decoder every Gemma family starts from (gemma3.py's Gemma 3 too), over this
# vocabulary and its special tokens
GEMMA_DECODER = dict(
    vocab_size=len(_VOCAB),
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=2,
    num_key_value_heads=1,
    head_dim=32,  # vLLM's CPU attention rejects 16
    intermediate_size=128,
    hidden_activation="gelu_pytorch_tanh",
    max_position_embeddings=512,
    rms_norm_eps=1e-6,
    initializer_range=0.2,
    tie_word_embeddings=True,
    pad_token_id=_VOCAB["<pad>"],
    eos_token_id=_VOCAB["<eos>"],
    bos_token_id=_VOCAB["<bos>"],
)

register(
    "gemma",
    ArchFamily(
        model_type="gemma",
        config=dict(GEMMA_DECODER, hidden_act="gelu_pytorch_tanh"),
        tokenizer=gemma_tokenizer,
        archs=("GemmaForCausalLM",),
    ),
)
