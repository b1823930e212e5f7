"""Qwen2-VL for jina-reranker-m0 (JinaVLForRanking) and for DSE/GME-style last-token embedders
(Qwen2VLForConditionalGeneration): Qwen tokenizer plus vision specials."""

from __future__ import annotations

import json
from pathlib import Path

from harness.models.synthetic import ArchFamily, register
from harness.models.synthetic.qwen import (
    QWEN_DECODER,
    QWEN_PAD,
    QWEN_SPECIALS,
    qwen_bpe_tokenizer,
    qwen_vocab_and_merges,
)

QWEN_VL_SPECIALS = [
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
]


def qwen_vl_vocab() -> dict[str, int]:
    vocab, _ = qwen_vocab_and_merges()
    return {**vocab, **{t: len(vocab) + i for i, t in enumerate(QWEN_VL_SPECIALS)}}


def qwen_vl_tokenizer(config: dict, family: str):
    """The Qwen tokenizer (qwen_bpe_tokenizer) over qwen_vl_vocab with the vision specials as
    special tokens, checked to give the config's image token id (`family` names the model)."""
    tok = qwen_bpe_tokenizer(
        qwen_vl_vocab(),
        config["text_config"]["max_position_embeddings"],
        QWEN_SPECIALS[1:] + QWEN_VL_SPECIALS,
    )
    if tok.convert_tokens_to_ids("<|image_pad|>") != config["image_token_id"]:
        raise RuntimeError(
            f"synthetic {family} tokenizer: <|image_pad|> id differs from the config's"
        )
    return tok


def qwen_vl_config(text: dict, vision: dict) -> dict:
    """A Qwen-VL family's config: the tiny Qwen decoder (QWEN_DECODER) over qwen_vl_vocab as its
    text model (`text` adds or overrides keys), the `vision` tower as given, and the vision token
    ids of that vocabulary."""
    vocab = qwen_vl_vocab()
    return dict(
        text_config={**QWEN_DECODER, "vocab_size": len(vocab), "bos_token_id": QWEN_PAD, **text},
        vision_config=vision,
        image_token_id=vocab["<|image_pad|>"],
        video_token_id=vocab["<|video_pad|>"],
        vision_start_token_id=vocab["<|vision_start|>"],
        vision_end_token_id=vocab["<|vision_end|>"],
        tie_word_embeddings=False,
        initializer_range=0.2,
    )


def _qwen_vl_tokenizer_and_processor(out: Path, config: dict) -> None:
    """Qwen2 byte-level BPE plus the vision specials, and Qwen2-VL's PIL image processor. The
    combined Qwen2VLProcessor cannot be built without torchvision (its video processor), so its
    parts are saved with a processor_config.json naming the class."""
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    qwen_vl_tokenizer(config, "Qwen2-VL").save_pretrained(out)
    vision = config["vision_config"]
    side = (
        vision["patch_size"] * vision["spatial_merge_size"] * 2
    )  # 64x64 images -> 56x56 -> 4 tokens
    Qwen2VLImageProcessorPil(
        min_pixels=side * side,
        max_pixels=4 * side * side,
        patch_size=vision["patch_size"],
        temporal_patch_size=vision["temporal_patch_size"],
        merge_size=vision["spatial_merge_size"],
    ).save_pretrained(out)
    (out / "processor_config.json").write_text(
        json.dumps({"processor_class": "Qwen2VLProcessor"}, indent=2)
    )


def _qwen2_vl_config() -> dict:
    text = dict(
        rope_parameters={"rope_type": "default", "rope_theta": 1e6, "mrope_section": [4, 6, 6]},
        num_labels=1,
    )
    vision = dict(
        depth=2,
        embed_dim=32,
        hidden_size=64,
        mlp_ratio=2,
        num_heads=2,
        in_channels=3,
        patch_size=14,
        spatial_merge_size=2,
        temporal_patch_size=2,
    )
    return qwen_vl_config(text, vision)


register(
    "qwen2-vl",
    ArchFamily(
        model_type="qwen2_vl",
        config=_qwen2_vl_config(),
        tokenizer=_qwen_vl_tokenizer_and_processor,
        archs=("JinaVLForRanking", "Qwen2VLForConditionalGeneration"),
    ),
)
