"""The recipe of CLIP dual encoders: text and image embeddings."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from harness.matrix.request import Request
from harness.runners.hf import HFRunner, recipe


def dual_encoder_embed(
    runner: HFRunner, items: list, architecture: str, tokenize: Callable[[Any, str], dict]
) -> list[np.ndarray]:
    """A dual encoder's embeddings (CLIP, SigLIP): get_text_features for a text, tokenized by
    `tokenize(tokenizer, text)`, get_image_features for an image (through the checkpoint's
    image processor), each L2-normalised. An item holding a text AND an image is refused: these
    models embed one or the other, so no reference exists for it."""
    import torch
    from transformers import AutoProcessor

    from harness.matrix.images import image, is_image

    mixed = [it for it in items if is_image(it) and it.get("text")]
    if mixed:
        raise ValueError(
            f"{architecture} embeds a text or an image, never both in one prompt: no reference "
            f"for {len(mixed)} item(s), e.g. {str(mixed[0])[:80]!r}"
        )
    assert runner.req is not None
    model = runner.auto_model(architecture)
    proc = runner.loaded(
        "processor",
        lambda: AutoProcessor.from_pretrained(runner.req.model_dir, local_files_only=True),
    )
    device = runner.req.device
    outs = []
    with torch.inference_mode():
        for it in items:
            if is_image(it):
                pixels = proc.image_processor(images=[image(it["image"])], return_tensors="pt")[
                    "pixel_values"
                ]
                feats = model.get_image_features(pixel_values=pixels.to(device))
            else:
                enc = tokenize(proc.tokenizer, it)
                feats = model.get_text_features(**{k: v.to(device) for k, v in enc.items()})
            feats = getattr(feats, "pooler_output", feats)  # transformers 5 returns a model output
            outs.append(torch.nn.functional.normalize(feats[0].float(), dim=-1).cpu().numpy())
    return outs


@recipe("clip-embed", default_for=[("CLIPModel", "embed")])
def _clip_embed(runner: HFRunner, items: list, request: Request) -> list[np.ndarray]:
    """CLIP dual encoder: get_text_features for texts, get_image_features for images (processed
    by the checkpoint's image processor), each L2-normalised (vLLM's `embed` default)."""

    def tokenize(tokenizer, text: str) -> dict:
        return tokenizer([text], return_tensors="pt", truncation=True, max_length=request.truncate)

    return dual_encoder_embed(runner, items, "CLIPModel", tokenize)
