"""The recipe of SigLIP dual encoders (SiglipModel): text and image embeddings."""

from __future__ import annotations

import numpy as np

from harness.runners.hf import HFRunner, recipe


@recipe("siglip-embed", default_for=[("SiglipModel", "embed")], padding=True)
def _siglip_embed(runner: HFRunner, items: list, options: dict) -> list[np.ndarray]:
    """SigLIP as its model cards use it (google/siglip-base-patch16-224,
    google/siglip2-base-patch16-224): texts through the checkpoint's processor with
    `padding="max_length"` ("we pass padding=max_length since the model was trained with this"),
    then get_text_features on what the tokenizer returns (SigLIP's checkpoints return input_ids
    only: the text tower attends to the pads, and pools the last position); images through the
    processor's image processor, then get_image_features (the attention-pooling head). Each
    vector L2-normalised, as SiglipModel.forward normalises both before its logits."""
    import torch
    from transformers import AutoProcessor

    from harness.matrix.images import image, is_image

    mixed = [it for it in items if is_image(it) and it.get("text")]
    if mixed:
        raise ValueError(
            "SigLIP embeds a text or an image, never both in one prompt: no reference for "
            f"{len(mixed)} item(s), e.g. {str(mixed[0])[:80]!r}"
        )
    assert runner.req is not None
    model = runner.auto_model("SiglipModel")
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
                enc = proc.tokenizer(
                    [it],
                    padding="max_length",
                    truncation=True,
                    max_length=options.get("truncate") or proc.tokenizer.model_max_length,
                    return_tensors="pt",
                )
                runner.note_tokens([int(t) for t in enc["input_ids"][0]])
                feats = model.get_text_features(**{k: v.to(device) for k, v in enc.items()})
            feats = getattr(feats, "pooler_output", feats)  # transformers 5 returns a model output
            outs.append(torch.nn.functional.normalize(feats[0].float(), dim=-1).cpu().numpy())
    return outs
