"""The recipe of Qwen2-VL last-token embedders (DSE / GME style): Qwen2VLForConditionalGeneration
run as an embedding model."""

from __future__ import annotations

import numpy as np

from harness.matrix.request import Request
from harness.runners.hf import HFRunner, recipe

# From the DSE model card (MrLight/dse-qwen2-2b-mrl-v1), not from vLLM: `get_embedding` takes
# `last_hidden_state[:, -1]` of `model(**inputs, output_hidden_states=True).hidden_states[-1]` and
# L2-normalises it (`torch.nn.functional.normalize(reps, p=2, dim=-1)`; full dimension here, no
# Matryoshka cut); the inputs come from the checkpoint's processor (`AutoProcessor`) over the
# chat-templated prompt ending in "<|endoftext|>" (the prompts are the input set's text:
# harness/matrix/inputs.py, DSE_QUERY / DSE_DOCUMENT).


@recipe("qwen2-vl-last-embed", default_for=[("Qwen2VLForConditionalGeneration", "embed")])
def _qwen2_vl_last_embed(runner: HFRunner, items: list, request: Request) -> list[np.ndarray]:
    """Each item (a prompt, with its image when it holds one) through the checkpoint's
    AutoProcessor as the card does (Qwen2VLProcessor: the tokenizer, and transformers' default
    Qwen2-VL image processor, its image pad expanded to one token per merged patch), then
    Qwen2VLForConditionalGeneration with output_hidden_states: the last layer's (final-normed)
    state at the last token, L2-normalised. One item per forward (no padding)."""
    import torch
    from transformers import AutoProcessor

    from harness.matrix.images import image, is_image

    if request.truncate:
        raise ValueError("qwen2-vl-last-embed: truncation would cut the prompt's template")
    assert runner.req is not None
    model = runner.auto_model("Qwen2VLForConditionalGeneration")
    proc = runner.loaded(
        "processor",
        lambda: AutoProcessor.from_pretrained(runner.req.model_dir, local_files_only=True),
    )
    device = runner.req.device
    out = []
    with torch.inference_mode():
        for it in items:
            if is_image(it):
                enc = proc(text=[it["text"]], images=[image(it["image"])], return_tensors="pt")
                enc["pixel_values"] = enc["pixel_values"].to(model.dtype)
            else:
                enc = proc(text=[it], return_tensors="pt")
            runner.note_tokens(enc["input_ids"])
            hidden = model(
                **{k: v.to(device) for k, v in enc.items()},
                output_hidden_states=True,
                return_dict=True,
            ).hidden_states[-1]
            reps = torch.nn.functional.normalize(hidden[0, -1].float(), p=2, dim=-1)
            out.append(reps.cpu().numpy())
    return out
