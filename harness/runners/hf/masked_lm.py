"""A masked-LM head as per-token vocabulary scores: transformers' AutoModelForMaskedLM logits,
softmax over the vocabulary at every position (special tokens included), as transformers'
fill-mask pipeline scores a position (FillMaskPipeline.postprocess: logits.softmax(-1))."""

from __future__ import annotations

import numpy as np

from harness.matrix.request import Request
from harness.runners.hf import HFRunner, per_item, recipe


@recipe("hf-masked-lm")
def _masked_lm(runner: HFRunner, items: list, request: Request) -> list[np.ndarray]:
    """[tokens, vocab_size]: softmax(MLM logits) per token."""
    import torch

    model = runner.auto_model("AutoModelForMaskedLM")
    return per_item(
        runner,
        items,
        lambda enc: torch.softmax(model(**enc).logits[0], dim=-1),
        request.truncate,
    )
