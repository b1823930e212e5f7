"""SigLIP dual encoders (SiglipModel) in the SigLIP 2 fixed-resolution layout: the Gemma tokenizer
(as google/siglip2-base-patch16-224 ships it), SigLIP's PIL image processor, a text tower pooled
at its last position and a vision tower with its attention-pooling head."""

from __future__ import annotations

from pathlib import Path

from harness.models.synthetic import ArchFamily, register
from harness.models.synthetic.colpali import SIGLIP_VISION, gemma_vocab_and_merges

TEXT_MAX_LEN = 64  # SigLIP's text length: texts are padded to it (the model cards' max_length)


def _siglip_tokenizer_and_processor(out: Path, config: dict) -> None:
    """Gemma tokenizer as SigLIP 2 ships it (pad <pad> 0, eos <eos> 1 appended, no bos, padding on
    the right, only input_ids: SigLIP's text tower runs without an attention mask) + SigLIP's PIL
    image processor, saved as one SiglipProcessor."""
    from transformers import GemmaTokenizer, SiglipProcessor
    from transformers.models.siglip.image_processing_pil_siglip import SiglipImageProcessorPil

    vocab, merges = gemma_vocab_and_merges()
    tok = GemmaTokenizer(
        vocab=vocab,
        merges=merges,
        model_max_length=config["text_config"]["max_position_embeddings"],
        # as transformers' convert_siglip2_to_hf.py sets up the published tokenizer
        add_bos_token=False,
        add_eos_token=True,
        padding_side="right",
        model_input_names=["input_ids"],
    )
    probe = tok("The cat sat quietly.", padding="max_length")
    ids, eos, pad = probe["input_ids"], tok.eos_token_id, tok.pad_token_id
    if (
        any(t.startswith("<0x") for t in tok.tokenize("The cat sat quietly."))
        or "attention_mask" in probe
        or (pad, eos)
        != (config["text_config"]["pad_token_id"], config["text_config"]["eos_token_id"])
        or len(ids) != config["text_config"]["max_position_embeddings"]
        or ids[0] == tok.bos_token_id
        or ids[ids.index(eos) + 1 :] != [pad] * (len(ids) - ids.index(eos) - 1)
    ):
        raise RuntimeError(f"synthetic SigLIP tokenizer is broken: {probe}")
    side = config["vision_config"]["image_size"]
    images = SiglipImageProcessorPil(size={"height": side, "width": side})
    SiglipProcessor(image_processor=images, tokenizer=tok).save_pretrained(out)


def _siglip_config() -> dict:
    vocab, _ = gemma_vocab_and_merges()
    return dict(
        # projection_size = the vision width: vLLM carries text and image embeddings in one
        # inputs_embeds buffer of projection_size
        text_config=dict(
            vocab_size=len(vocab),
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=2,
            max_position_embeddings=TEXT_MAX_LEN,
            projection_size=64,
            pad_token_id=0,
            eos_token_id=1,
            bos_token_id=2,
        ),
        vision_config=dict(SIGLIP_VISION),  # its own copy: a family never shares a dict
        initializer_range=0.2,
    )


register(
    "siglip",
    ArchFamily(
        model_type="siglip",
        config=_siglip_config(),
        tokenizer=_siglip_tokenizer_and_processor,
        archs=("SiglipModel",),
    ),
)
