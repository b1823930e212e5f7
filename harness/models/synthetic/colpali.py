"""ColPali (PaliGemma: Gemma byte-fallback BPE tokenizer, SigLIP image processor)."""

from __future__ import annotations

from pathlib import Path

from harness.models.synthetic import DATA, ArchFamily, add_merge_chain, register

# Gemma / PaliGemma: ids 0-5 are fixed by the family (5 is the image token)
_GEMMA_SPECIALS = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "<image>"]


def gemma_vocab_and_merges() -> tuple[dict[str, int], list[tuple[str, str]]]:
    """Gemma's byte-fallback BPE without training: the specials, the 256 `<0xNN>` byte tokens, a
    literal "\n" (PaliGemma prompts end in one: vLLM looks it up), "▁" and single characters,
    one merge chain per word (ColPali's prompt words first), then PaliGemma's `<locNNNN>` and
    `<segNNN>` tokens last, as in the real vocabulary."""
    vocab = {t: i for i, t in enumerate(_GEMMA_SPECIALS)}
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    chars = ["\n", "\u2581"] + [chr(c) for c in range(ord("a"), ord("z") + 1)]
    chars += [chr(c) for c in range(ord("A"), ord("Z") + 1)] + list("0123456789.,!?;:'\"-()+*/=")
    for c in chars:
        vocab.setdefault(c, len(vocab))
    merges: list[tuple[str, str]] = []
    words = ["Question", "Describe", "\u2581the", "\u2581image"]
    for w in (DATA / "words.txt").read_text().split():
        for form in ("\u2581" + w, "\u2581" + w.capitalize(), w):
            if form not in words:
                words.append(form)
    for w in words:
        add_merge_chain(list(w), vocab, merges)
    for i in range(1024):
        vocab[f"<loc{i:04d}>"] = len(vocab)
    for i in range(128):
        vocab[f"<seg{i:03d}>"] = len(vocab)
    return vocab, merges


# PaliGemma's vision tower is SigLIP's: ColPali's and siglip.py's dual encoder's are this one
# tiny tower (32x32 images in 8x8 patches: 16 image tokens), sized once for both
SIGLIP_VISION = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=2,
    image_size=32,
    patch_size=8,
    num_channels=3,
)


def _colpali_tokenizer_and_processor(out: Path, config: dict) -> None:
    """Gemma tokenizer + SigLIP's PIL image processor, saved as one ColPaliProcessor."""
    from transformers import ColPaliProcessor, GemmaTokenizer
    from transformers.models.siglip.image_processing_pil_siglip import SiglipImageProcessorPil

    vocab, merges = gemma_vocab_and_merges()
    tok = GemmaTokenizer(
        vocab=vocab,
        merges=merges,
        model_max_length=512,
        extra_special_tokens={"image_token": "<image>"},
    )
    probe = tok.tokenize("The cat sat quietly.")
    if any(t.startswith("<0x") for t in probe) or tok.convert_tokens_to_ids("<image>") != 5:
        raise RuntimeError(f"synthetic Gemma tokenizer is broken: {probe}")
    vision = config["vlm_config"]["vision_config"]
    side = vision["image_size"]
    seq_len = (side // vision["patch_size"]) ** 2
    images = SiglipImageProcessorPil(size={"height": side, "width": side}, image_seq_length=seq_len)
    ColPaliProcessor(image_processor=images, tokenizer=tok).save_pretrained(out)


def _colpali_config() -> dict:
    vocab, _ = gemma_vocab_and_merges()
    text = dict(
        model_type="gemma",
        vocab_size=len(vocab),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,
        hidden_activation="gelu_pytorch_tanh",
        max_position_embeddings=512,
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=2,
    )
    vision = dict(SIGLIP_VISION, model_type="siglip_vision_model", vision_use_head=False)
    vlm = dict(
        model_type="paligemma",
        text_config=text,
        vision_config=vision,
        image_token_index=5,
        projection_dim=64,
        hidden_size=64,
        pad_token_id=0,
    )
    return dict(vlm_config=vlm, embedding_dim=32, initializer_range=0.2)


register(
    "colpali",
    ArchFamily(
        model_type="colpali",
        config=_colpali_config(),
        tokenizer=_colpali_tokenizer_and_processor,
        archs=("ColPaliForRetrieval",),
        # transformers 5 saves `vlm.vision_tower.X`; the hub checkpoints (and vLLM) use
        # `vlm.vision_tower.vision_model.X`, and transformers loads both. First match wins, so a
        # name already in the hub layout stays as it is.
        checkpoint_prefixes={
            "vlm.vision_tower.vision_model.": "vlm.vision_tower.vision_model.",
            "vlm.vision_tower.": "vlm.vision_tower.vision_model.",
        },
    ),
)
