"""CLIP dual encoders (CLIP BPE tokenizer, PIL image processor)."""

from __future__ import annotations

from pathlib import Path

from harness.models.synthetic import DATA, ArchFamily, add_merge_chain, bytes_to_unicode, register

_CLIP_SPECIALS = ("<|startoftext|>", "<|endoftext|>")


def _clip_vocab_and_merges() -> tuple[dict[str, int], list[tuple[str, str]]]:
    """CLIP's BPE without training: bytes, bytes + '</w>', one merge chain per word; the specials
    come LAST so that id 0 is a byte (vLLM uses token id 0 as CLIP's image placeholder)."""
    b2u = bytes_to_unicode()
    chars = [b2u[b] for b in range(256)]
    vocab = {c: i for i, c in enumerate(chars)}
    for c in chars:
        vocab[c + "</w>"] = len(vocab)
    merges: list[tuple[str, str]] = []
    words: list[str] = []
    for w in (DATA / "words.txt").read_text().lower().split():
        w = "".join(ch for ch in w if ch.isalpha())
        if len(w) > 1 and w not in words:
            words.append(w)
    for w in words:
        add_merge_chain(list(w[:-1]) + [w[-1] + "</w>"], vocab, merges)
    for tok in _CLIP_SPECIALS:
        vocab[tok] = len(vocab)
    return vocab, merges


def _clip_tokenizer_and_processor(out: Path, config: dict) -> None:
    """CLIP tokenizer plus the PIL image processor (transformers' default CLIP processor needs
    torchvision, which cannot sit beside torch+cpu; vLLM falls back to the same PIL one)."""
    from transformers import CLIPTokenizer
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

    vocab, merges = _clip_vocab_and_merges()
    tok = CLIPTokenizer(
        vocab=vocab,
        merges=merges,
        model_max_length=config["text_config"]["max_position_embeddings"],
    )
    if 0 in tok.all_special_ids:
        raise RuntimeError("CLIP tokenizer: id 0 must not be special (vLLM's image placeholder)")
    tok.save_pretrained(out)
    side = config["vision_config"]["image_size"]
    CLIPImageProcessorPil(
        size={"shortest_edge": side}, crop_size={"height": side, "width": side}
    ).save_pretrained(out)


def _clip_config() -> dict:
    vocab, _ = _clip_vocab_and_merges()
    bos, eos = vocab[_CLIP_SPECIALS[0]], vocab[_CLIP_SPECIALS[1]]
    return dict(
        # projection_dim inside both towers too (vLLM reads it there); eos must be the real EOS id,
        # else HF pools position 0 and every text gets the same vector
        text_config=dict(
            vocab_size=len(vocab),
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=2,
            max_position_embeddings=77,
            hidden_act="quick_gelu",
            projection_dim=64,
            bos_token_id=bos,
            eos_token_id=eos,
            pad_token_id=eos,
        ),
        vision_config=dict(
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=2,
            image_size=32,
            patch_size=8,
            num_channels=3,
            hidden_act="quick_gelu",
            projection_dim=64,
        ),
        projection_dim=64,
        initializer_range=0.2,
    )


register(
    "clip",
    ArchFamily(
        model_type="clip",
        config=_clip_config(),
        tokenizer=_clip_tokenizer_and_processor,
        archs=("CLIPModel",),
    ),
)
