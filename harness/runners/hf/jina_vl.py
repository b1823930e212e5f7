"""The recipe of jina-reranker-m0 (JinaVLForRanking): text or image documents reranked."""

from __future__ import annotations

import numpy as np

from harness.matrix.request import Request
from harness.runners.hf import HFRunner, recipe, reference_model

# From jina-reranker-m0's own published code, not vLLM's: its modeling.py
# (https://huggingface.co/jinaai/jina-reranker-m0/blob/main/modeling.py; the hub is not reachable
# here, its text was read through the `search` tool's code index, a stored copy of that file):
# `LOGIT_BIAS = 2.65` and forward's `torch.sigmoid(pooled_logits - LOGIT_BIAS)`;
# `self.score_token_id = 100`, appended to every prompt by compute_score; and
# `formatting_prompts_func`: "**Document**:\n{doc}" + "\n" + "**Query**:\n{query}", an image
# document (doc_type "image") or an image query (query_type "image") as
# "<|vision_start|><|image_pad|><|vision_end|>". The model card of
# jinaai/jina-reranker-m0-GGUF states the same prompt and `sigmoid(mlp(h_last) - logit_bias)`.
# Not followed: compute_score's separate query/document length limits (`truncate` cuts the prompt).
JINA_VL_LOGIT_MEAN = 2.65
JINA_VL_SCORE_TOKEN = 100
JINA_VL_IMAGE = "<|vision_start|><|image_pad|><|vision_end|>"


@recipe("jina-vl-rerank", default_for=[("JinaVLForRanking", "score")])
def _jina_vl_rerank(runner: HFRunner, items: list, request: Request) -> list[np.ndarray]:
    """(query, document) -> sigmoid(score head(last token) - 2.65) over the prompt
    `**Document**:\n{document}\n**Query**:\n{query}` + token 100, where an image document or an
    image query is the vision placeholder, its image pad expanded to one token per merged patch
    (grid_t*h*w / merge^2); the images go to the model in the prompt's order (the document's
    first). One pair per forward."""
    import torch
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    from harness.matrix.images import image, is_image

    assert runner.req is not None
    model = reference_model(runner)
    tok = runner.tokenizer()
    images = runner.loaded(
        "image_processor",
        lambda: Qwen2VLImageProcessorPil.from_pretrained(
            runner.req.model_dir, local_files_only=True
        ),
    )
    pad = model.config.image_token_id
    out = []
    with torch.inference_mode():
        for query, doc in items:
            kw = {}
            parts = [JINA_VL_IMAGE if is_image(x) else x for x in (doc, query)]
            ids = tok(
                f"**Document**:\n{parts[0]}\n**Query**:\n{parts[1]}",
                truncation=bool(request.truncate),
                max_length=request.truncate,
            )["input_ids"]
            pictures = [image(x["image"]) for x in (doc, query) if is_image(x)]  # prompt order
            if pictures:
                enc = images(images=pictures, return_tensors="pt")
                grids = [[int(v) for v in g] for g in enc["image_grid_thw"]]
                ids = expand_image_pads(ids, pad, grids, images.merge_size)
                kw = {
                    "pixel_values": enc["pixel_values"].to(
                        runner.req.device, model.score[0].weight.dtype
                    ),
                    "image_grid_thw": enc["image_grid_thw"].to(runner.req.device),
                }
            input_ids = torch.tensor([ids + [JINA_VL_SCORE_TOKEN]], device=runner.req.device)
            logit = model(input_ids, **kw)[0, 0].float()
            out.append(
                np.asarray([float(torch.sigmoid(logit - JINA_VL_LOGIT_MEAN))], dtype=np.float32)
            )
    return out


def expand_image_pads(ids: list[int], pad: int, grids: list[list[int]], merge: int) -> list[int]:
    """The prompt's image pads, each expanded in order to its image's tokens: one per merged
    patch, grid_t*h*w / merge^2 (the i-th pad belongs to the i-th image)."""
    if ids.count(pad) != len(grids):
        raise ValueError(f"{ids.count(pad)} image pad(s) in the prompt for {len(grids)} image(s)")
    out: list[int] = []
    it = iter(grids)
    for t in ids:
        if t == pad:
            t_, h, w = next(it)
            out += [pad] * (t_ * h * w // merge**2)
        else:
            out.append(t)
    return out
