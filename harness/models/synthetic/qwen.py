"""Qwen2 and Qwen3 decoders (byte-level BPE tokenizer): embedding, classification and reward
models."""

from __future__ import annotations

from pathlib import Path

from harness.models.synthetic import DATA, ArchFamily, add_merge_chain, bytes_to_unicode, register

QWEN_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<extra_0>"]


def qwen_vocab_and_merges() -> tuple[dict[str, int], list[tuple[str, str]]]:
    """Byte-level BPE without training: a merge chain per word (space-prefixed forms first)."""
    b2u = bytes_to_unicode()
    vocab = {b2u[b]: b for b in range(256)}
    merges: list[tuple[str, str]] = []
    words: list[str] = []
    for w in (DATA / "words.txt").read_text().split():
        for form in (w, w.capitalize()):
            if form not in words:
                words.append(form)
    for form in ["\u0120" + w for w in words] + words:
        add_merge_chain(list(form), vocab, merges)
    for tok in QWEN_SPECIALS:
        vocab[tok] = len(vocab)
    return vocab, merges


QWEN_VOCAB_SIZE = len(qwen_vocab_and_merges()[0])
QWEN_PAD = qwen_vocab_and_merges()[0]["<|endoftext|>"]


# A ChatML chat template in Qwen's layout (<|im_start|>role\ncontent<|im_end|>\n), with the
# assistant header on add_generation_prompt and Qwen3's empty think block when the template
# variable enable_thinking is false. Written only when a case asks (`tokenizer: {chat_template:
# true}`), so the tokenizer files of every other synthetic Qwen model stay as they were.
QWEN_CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{{- '<|im_start|>assistant\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}"
    "{{- '<think>\n\n</think>\n\n' }}"
    "{%- endif %}"
    "{%- endif %}"
)


def qwen_bpe_tokenizer(vocab: dict[str, int], max_length: int, specials: list[str]):
    """transformers' Qwen2Tokenizer over `vocab` (qwen_vocab_and_merges' or a superset of it, the
    merges theirs) as real Qwen tokenizers are: no bos, no unk, <|endoftext|> pad and eos, the
    `specials` added as special tokens."""
    from transformers import Qwen2Tokenizer

    return Qwen2Tokenizer(
        vocab=vocab,
        merges=qwen_vocab_and_merges()[1],
        unk_token=None,
        bos_token=None,
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
        model_max_length=max_length,
        additional_special_tokens=specials,
    )


def qwen_tokenizer(
    out: Path, config: dict, append_eos: bool = False, chat_template: bool = False
) -> None:
    """Like real Qwen tokenizers: no EOS appended, <|endoftext|> is pad and eos.

    `append_eos=True` appends <|endoftext|> to every input: only to reproduce the divergence where
    HF pools the last non-pad token and vLLM the literal last token. `chat_template=True` saves
    QWEN_CHAT_TEMPLATE with the tokenizer."""
    from tokenizers import processors

    vocab = qwen_vocab_and_merges()[0]
    tok = qwen_bpe_tokenizer(vocab, config["max_position_embeddings"], QWEN_SPECIALS[1:])
    if append_eos:
        eos = QWEN_SPECIALS[0]
        tok._tokenizer.post_processor = processors.TemplateProcessing(
            single=f"$A:0 {eos}:0", pair=f"$A:0 $B:1 {eos}:1", special_tokens=[(eos, vocab[eos])]
        )
    if chat_template:
        tok.chat_template = QWEN_CHAT_TEMPLATE
    tok.save_pretrained(out)


# the tiny Qwen decoder: Qwen2's and Qwen3's here, the text model of qwen2_vl.py and qwen3_vl.py
QWEN_DECODER = dict(
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=2,
    num_key_value_heads=1,
    intermediate_size=128,
    max_position_embeddings=512,
    rms_norm_eps=1e-6,
    tie_word_embeddings=False,
    pad_token_id=QWEN_PAD,
    eos_token_id=QWEN_PAD,
)
_QWEN_BASE = dict(
    QWEN_DECODER, vocab_size=QWEN_VOCAB_SIZE, initializer_range=0.2, bos_token_id=None
)


register(
    "qwen2",
    ArchFamily(
        model_type="qwen2",
        config=_QWEN_BASE,
        tokenizer=qwen_tokenizer,
        archs=(
            "Qwen2Model",
            "Qwen2ForSequenceClassification",
            "Qwen2ForRewardModel",
            "Qwen2ForProcessRewardModel",
            "Qwen2ForCausalLM",  # an LLM as a "0"/"1" reranker (mxbai-rerank-v2)
        ),
    ),
)


register(
    "qwen3",
    ArchFamily(
        model_type="qwen3",
        config=dict(_QWEN_BASE, head_dim=32),
        tokenizer=qwen_tokenizer,
        # Qwen3ForCausalLM: an LLM as a yes/no reranker (Qwen3-Reranker), whose "yes" and "no"
        # are single tokens of this vocabulary (words.txt); the chat tokens are QWEN_SPECIALS
        archs=("Qwen3Model", "Qwen3ForSequenceClassification", "Qwen3ForCausalLM"),
    ),
)
