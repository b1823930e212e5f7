"""GritLM (architecture `GritLM`, as parasail-ai/GritLM-7B-vllm names it): a Mistral decoder whose
embeddings are a mean over the non-instruction tokens under bidirectional attention.

The tokenizer is Llama/Mistral's byte-fallback BPE ("▁" word starts, `<s>` first, a newline as
the byte token `<0x0A>`), built without training like colpali.py's Gemma one. The GritLM prompt
format ("<|user|>\\n{instruction}\\n<|embed|>\\n{text}", from the GritLM README) must come out as
the tokens Mistral's vocabulary gives it, `▁<` `|` `user` `|` `>` `<0x0A>` ... `<0x0A>` `<` `|`
`embed` `|` `>` `<0x0A>`: those merges come first, so no word merge takes their letters. The
weights are MistralForCausalLM's (the class GritLM's own loading uses); vLLM reads config.json's
architecture name."""

from __future__ import annotations

from pathlib import Path

from harness.matrix.schema import SyntheticModel
from harness.models.synthetic import (
    DATA,
    ArchFamily,
    add_merge_chain,
    register,
    update_config_json,
)

LLAMA_SPECIALS = ["<unk>", "<s>", "</s>"]  # ids 0, 1, 2 as in Llama and Mistral
# the pieces of GritLM's prompt format, merged first (lowest rank)
GRITLM_PIECES = ["\u2581<", "user", "embed", "assistant"]


def llama_vocab_and_merges() -> tuple[dict[str, int], list[tuple[str, str]]]:
    """Specials, the 256 `<0xNN>` byte tokens, "▁" and single characters (no "\\n": it falls
    back to `<0x0A>`, as in Mistral's vocabulary), GRITLM_PIECES' merge chains, then one chain
    per word of harness/data/words.txt ("▁word", "▁Word", "word", "Word")."""
    vocab = {t: i for i, t in enumerate(LLAMA_SPECIALS)}
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    chars = ["\u2581"] + [chr(c) for c in range(ord("a"), ord("z") + 1)]
    chars += [chr(c) for c in range(ord("A"), ord("Z") + 1)]
    chars += list("0123456789.,!?;:'\"-()+*/=<>|")
    for c in chars:
        vocab.setdefault(c, len(vocab))
    merges: list[tuple[str, str]] = []
    words = list(GRITLM_PIECES)
    for w in (DATA / "words.txt").read_text().split():
        for form in ("\u2581" + w, "\u2581" + w.capitalize(), w, w.capitalize()):
            if form not in words:
                words.append(form)
    for w in words:
        add_merge_chain(list(w), vocab, merges)
    return vocab, merges


def llama_tokenizer(out: Path, config: dict) -> None:
    """transformers' LlamaTokenizer over that vocabulary (Metaspace "▁", byte fallback, `<s>`
    added first), checked to give GritLM's prompt pieces."""
    from transformers import LlamaTokenizer

    vocab, merges = llama_vocab_and_merges()
    tok = LlamaTokenizer(
        vocab=vocab,
        merges=merges,
        model_max_length=config["max_position_embeddings"],
        add_bos_token=True,
        add_eos_token=False,
    )
    probe = tok.tokenize("<|user|>\nThe time\n<|embed|>\nThe day.")
    want = ["\u2581<", "|", "user", "|", ">", "<0x0A>", "The", "\u2581time", "<0x0A>"]
    want += ["<", "|", "embed", "|", ">", "<0x0A>", "The", "\u2581day", "."]
    if probe != want or tok("x")["input_ids"][0] != vocab["<s>"]:
        raise RuntimeError(f"synthetic Llama tokenizer is broken: {probe}")
    tok.save_pretrained(out)


def _name_the_architecture(out: Path, spec: SyntheticModel, config) -> None:
    """config.json's `architectures` names GritLM (save_pretrained wrote MistralForCausalLM):
    the name vLLM's registry maps to its GritLM model; transformers loads by model_type."""
    update_config_json(out, {"architectures": [spec.arch]})


_VOCAB = llama_vocab_and_merges()[0]

register(
    "gritlm",
    ArchFamily(
        model_type="mistral",
        config=dict(
            vocab_size=len(_VOCAB),
            hidden_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            num_key_value_heads=1,
            head_dim=32,
            intermediate_size=128,
            max_position_embeddings=512,
            rms_norm_eps=1e-5,
            initializer_range=0.2,
            tie_word_embeddings=False,
            sliding_window=None,  # GritLM embeds with full attention (vLLM's GritLM sets None)
            bos_token_id=_VOCAB["<s>"],
            eos_token_id=_VOCAB["</s>"],
            pad_token_id=None,
        ),
        tokenizer=llama_tokenizer,
        archs=("GritLM",),
        hf_class={"GritLM": "MistralForCausalLM"},
        post_build=_name_the_architecture,
    ),
)
