"""The recipe of SigLIP dual encoders (SiglipModel): text and image embeddings."""

from __future__ import annotations

import numpy as np

from harness.matrix.request import Request
from harness.runners.hf import HFRunner, recipe
from harness.runners.hf.clip import dual_encoder_embed


@recipe("siglip-embed", default_for=[("SiglipModel", "embed")], honours=["padding"])
def _siglip_embed(runner: HFRunner, items: list, request: Request) -> list[np.ndarray]:
    """SigLIP as its model cards use it (google/siglip-base-patch16-224,
    google/siglip2-base-patch16-224): texts through the checkpoint's processor with
    `padding="max_length"` ("we pass padding=max_length since the model was trained with this"),
    then get_text_features on what the tokenizer returns (SigLIP's checkpoints return input_ids
    only: the text tower attends to the pads, and pools the last position); images through the
    processor's image processor, then get_image_features (the attention-pooling head). Each
    vector L2-normalised, as SiglipModel.forward normalises both before its logits."""

    def tokenize(tokenizer, text: str) -> dict:
        enc = tokenizer(
            [text],
            padding="max_length",
            truncation=True,
            max_length=request.truncate or tokenizer.model_max_length,
            return_tensors="pt",
        )
        runner.note_tokens([int(t) for t in enc["input_ids"][0]])
        return enc

    return dual_encoder_embed(runner, items, "SiglipModel", tokenize)
