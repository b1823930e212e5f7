"""What goes into vLLM's offline calls and comes out of them (harness.runners.vllm, vllm_async):
an item as vLLM's prompt or score input, an output as a float32 array and the meta of its
request."""

from __future__ import annotations

from typing import Any

import numpy as np


def output_meta(output, sent: dict | None = None) -> dict[str, Any]:
    """What vLLM reports of one request: its id, the prompt token ids it ran, prefix-cache hits;
    with `sent`, what the runner sent it as. For prompt embeddings vLLM runs no ids (it reports
    placeholder zeros, kept as `engine_prompt_token_ids`): the ids compared with the reference's
    are those E was made from."""
    ids = getattr(output, "prompt_token_ids", None)
    cached = getattr(output, "num_cached_tokens", None)
    rid = getattr(output, "request_id", None)
    meta = {
        "request_id": str(rid) if rid is not None else None,
        "prompt_token_ids": [int(t) for t in ids] if ids is not None else None,
        "num_cached_tokens": int(cached) if cached is not None else None,
    }
    sent = dict(sent or {})
    if "ids" in sent:
        meta["engine_prompt_token_ids"] = meta["prompt_token_ids"]
        meta["prompt_token_ids"] = sent.pop("ids")
    return {**meta, **sent}


def engine_prompt(item):
    """A text prompt as is; an image reference as vLLM's multimodal prompt, with its text when the
    item holds one ({"text", "image"}), else an empty text."""
    from harness.matrix.images import image, is_image

    if is_image(item):
        return {
            "prompt": str(item.get("text", "")),
            "multi_modal_data": {"image": image(item["image"])},
        }
    return item


def score_input(item):
    """A text as is; an image as a score content part (a lossless PNG data URL: vLLM's score API
    takes images as `image_url` parts), followed by a text part when the item holds its prompt
    (a ColQwen3 page: vLLM keeps a prompt that already holds the image placeholder as it is)."""
    import base64
    import io

    from harness.matrix.images import image, is_image

    if not is_image(item):
        return item
    buf = io.BytesIO()
    image(item["image"]).save(buf, format="PNG")
    url = "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()
    parts: list[dict] = [{"type": "image_url", "image_url": {"url": url}}]
    if item.get("text"):
        parts.append({"type": "text", "text": str(item["text"])})
    return {"content": parts}


def to_numpy(data) -> np.ndarray:
    if hasattr(data, "detach"):
        return data.detach().float().cpu().numpy().astype(np.float32)
    return np.asarray(data, dtype=np.float32)
