"""The recipe of GME (Alibaba-NLP/gme-Qwen2-VL-2B-Instruct): a Qwen2-VL last-token embedder, read
from the model card's published inference code (gme_inference.py, class GmeQwen2VL), not from
vLLM.

What the card's code does, and what this recipe does alike:
- `_fetch_image`: the image as RGB, resized with PIL to `_smart_resize` (sides rounded to
  multiples of 28 within [4, 16384] x 28 x 28 pixels), then the checkpoint's AutoProcessor built
  with min_pixels / max_pixels of min_image_tokens=256 / max_image_tokens=1280 x 28 x 28;
- `forward`: the token embeddings, the vision tower's features written over the image pads,
  then `self.base.model(input_ids=None, position_ids=None, inputs_embeds=...)`: in the
  transformers the card was written for (4.45-4.51) `base.model` is the text decoder, which
  without position_ids numbers every token 0..n-1 on all three M-RoPE axes, image patches
  included (`positions: card`, the default). `positions: mrope` gives the same prompt the
  positions transformers' own Qwen2VLForConditionalGeneration computes (get_rope_index: image
  patches on their grid), as a reading of the checkpoint without the card's position quirk;
- the last token's last hidden state (final norm applied), L2-normalised.
One item per forward (the card right-pads a batch and pools at each row's last real token: the
same token)."""

from __future__ import annotations

import math

import numpy as np

from harness.matrix.request import Request
from harness.runners.hf import HFRunner, recipe

# GmeQwen2VL.__init__ defaults; 28 = Qwen2-VL's patch (14) x spatial merge (2)
CARD_MIN_IMAGE_TOKENS = 256
CARD_MAX_IMAGE_TOKENS = 1280
FACTOR = 28


def card_smart_resize(
    height: int,
    width: int,
    factor: int = FACTOR,
    min_pixels: int = 4 * 28 * 28,
    max_pixels: int = 16384 * 28 * 28,
    max_ratio: int = 200,
) -> tuple[int, int]:
    """GmeQwen2VL._smart_resize: (height, width) rounded to multiples of `factor`, scaled into
    [min_pixels, max_pixels] keeping the aspect ratio; an extreme ratio is clamped (the card warns
    and clamps where transformers' smart_resize raises)."""
    h = max(factor, round(height / factor) * factor)
    w = max(factor, round(width / factor) * factor)
    if h * w > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h = math.floor(height / beta / factor) * factor
        w = math.floor(width / beta / factor) * factor
    elif h * w < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h = math.ceil(height * beta / factor) * factor
        w = math.ceil(width * beta / factor) * factor
    if max(h, w) / min(h, w) > max_ratio:
        if h > w:
            h = w * max_ratio
        else:
            w = h * max_ratio
    return h, w


def card_fetch_image(im):
    """GmeQwen2VL._fetch_image for a PIL image: RGB, resized (PIL's default filter) to
    card_smart_resize of its size."""
    im = im.convert("RGB")
    h, w = card_smart_resize(im.height, im.width)
    return im.resize((w, h))


@recipe("gme-qwen2-vl-embed")
def _gme_embed(runner: HFRunner, items: list, request: Request) -> list[np.ndarray]:
    """Each item (a GME prompt, with its image when it holds one: harness/matrix/inputs.py,
    gme_prompt) as GmeQwen2VL.embed + forward run it; options `positions` (card | mrope),
    `min_image_tokens`, `max_image_tokens` (the card's constructor arguments)."""
    import torch
    from transformers import AutoProcessor

    from harness.matrix.images import image, is_image

    positions = request.hf.get("positions", "card")
    if positions not in ("card", "mrope"):
        raise ValueError(f"gme-qwen2-vl-embed: positions {positions!r}; valid: card, mrope")
    if request.truncate:
        raise ValueError("gme-qwen2-vl-embed: truncation would cut the prompt's template")
    assert runner.req is not None
    lo = request.hf.get("min_image_tokens", CARD_MIN_IMAGE_TOKENS) * FACTOR * FACTOR
    hi = request.hf.get("max_image_tokens", CARD_MAX_IMAGE_TOKENS) * FACTOR * FACTOR
    model = runner.auto_model("Qwen2VLForConditionalGeneration")
    proc = runner.loaded(
        f"gme-processor-{lo}-{hi}",
        lambda: AutoProcessor.from_pretrained(
            runner.req.model_dir, local_files_only=True, min_pixels=lo, max_pixels=hi
        ),
    )
    device = runner.req.device
    out = []
    with torch.inference_mode():
        for it in items:
            if is_image(it):
                im = card_fetch_image(image(it["image"]))
                enc = proc(text=[it["text"]], images=[im], return_tensors="pt")
            else:
                enc = proc(text=[it], return_tensors="pt")
            runner.note_tokens(enc["input_ids"])
            enc = {k: v.to(device) for k, v in enc.items()}
            ids = enc["input_ids"]
            embeds = model.get_input_embeddings()(ids)
            if "pixel_values" in enc:
                feats = model.model.get_image_features(
                    enc["pixel_values"].to(model.dtype), enc["image_grid_thw"]
                ).pooler_output
                embeds[ids == model.config.image_token_id] = torch.cat(feats).to(embeds.dtype)
            position_ids = None  # the card's: 0..n-1 on every axis
            if positions == "mrope":
                position_ids, _ = model.model.get_rope_index(
                    ids,
                    enc.get("mm_token_type_ids", torch.zeros_like(ids)),
                    enc.get("image_grid_thw"),
                    None,
                    enc["attention_mask"],
                )
            # the text decoder itself: Qwen2VLModel.forward keeps rope_deltas from earlier calls
            # and would shift the positions of a call without input_ids
            hidden = model.model.language_model(
                inputs_embeds=embeds,
                attention_mask=enc["attention_mask"],
                position_ids=position_ids,
            ).last_hidden_state
            reps = torch.nn.functional.normalize(hidden[:, -1].float(), p=2, dim=1)
            out.append(reps[0].cpu().numpy())
    return out
