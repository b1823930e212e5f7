"""The recipe of CLIP dual encoders: text and image embeddings."""

from __future__ import annotations

import numpy as np

from harness.runners.hf import HFRunner, recipe


@recipe("clip-embed", default_for=[("CLIPModel", "embed")])
def _clip_embed(runner: HFRunner, items: list, options: dict) -> list[np.ndarray]:
    """CLIP dual encoder: get_text_features for texts, get_image_features for images (processed
    by the checkpoint's image processor), each L2-normalised (vLLM's `embed` default)."""
    import torch
    from transformers import AutoProcessor

    from harness.matrix.images import image, is_image

    mixed = [it for it in items if is_image(it) and it.get("text")]
    if mixed:
        raise ValueError(
            "CLIP embeds a text or an image, never both in one prompt: no reference for "
            f"{len(mixed)} item(s), e.g. {str(mixed[0])[:80]!r}"
        )
    assert runner.req is not None
    model = runner.auto_model("CLIPModel")
    proc = runner.loaded(
        "processor",
        lambda: AutoProcessor.from_pretrained(runner.req.model_dir, local_files_only=True),
    )
    outs = []
    with torch.inference_mode():
        for it in items:
            if is_image(it):
                pixels = proc.image_processor(images=[image(it["image"])], return_tensors="pt")[
                    "pixel_values"
                ]
                feats = model.get_image_features(pixel_values=pixels.to(runner.req.device))
            else:
                enc = proc.tokenizer(
                    [it], return_tensors="pt", truncation=True, max_length=options.get("truncate")
                )
                feats = model.get_text_features(
                    **{k: v.to(runner.req.device) for k, v in enc.items()}
                )
            feats = getattr(feats, "pooler_output", feats)  # transformers 5 returns a model output
            outs.append(torch.nn.functional.normalize(feats[0].float(), dim=-1).cpu().numpy())
    return outs
