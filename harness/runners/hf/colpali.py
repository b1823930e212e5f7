"""Recipes of ColPali: multi-vector embeddings of queries and page images, and their MaxSim."""

from __future__ import annotations

import numpy as np

from harness.matrix.request import Request
from harness.runners.hf import HFRunner, once_per_item, recipe


def _colpali_encoder(runner: HFRunner, request: Request):
    """(encode, processor): encode maps an item to its [tokens, dim] ColPali embeddings, one item
    per forward, as ColPaliProcessor prepares it: a text is a query (`<bos>Question: {text}` + 10
    pad tokens + `\\n`), an image a page (image tokens + `<bos>Describe the image.\\n`). One at a
    time: a batch left-pads the queries. Options: truncate; image_processor_kwargs (e.g.
    image_mean / image_std, as vLLM's mm_processor_kwargs)."""
    import torch
    from transformers import ColPaliProcessor

    from harness.matrix.images import image, is_image

    assert runner.req is not None
    model = runner.auto_model("ColPaliForRetrieval")
    proc = runner.loaded(
        "processor",
        lambda: ColPaliProcessor.from_pretrained(runner.req.model_dir, local_files_only=True),
    )
    truncate = request.truncate
    text_kwargs = {"truncation": True, "max_length": truncate} if truncate else {}
    image_kwargs = dict(request.hf.get("image_processor_kwargs") or {})

    def encode(item):
        with torch.inference_mode():
            if is_image(item):
                enc = proc.process_images(images=[image(item["image"])], **image_kwargs)
            else:
                enc = proc.process_queries(text=[item], **text_kwargs)
            enc = {k: v.to(runner.req.device) for k, v in enc.items() if k != "labels"}
            return model(**enc).embeddings[0].float()  # L2-normalised per token, padding zeroed

    return encode, proc


@recipe("colpali-token-embed", default_for=[("ColPaliForRetrieval", "token_embed")])
def _colpali_tokens(runner: HFRunner, items: list, request: Request) -> list[np.ndarray]:
    """ColPali multi-vector embeddings of texts (queries) and images (pages)."""
    encode, _ = _colpali_encoder(runner, request)
    return [encode(it).cpu().numpy().astype(np.float32) for it in items]


@recipe("colpali-maxsim", default_for=[("ColPaliForRetrieval", "score")])
def _colpali_maxsim(runner: HFRunner, items: list, request: Request) -> list[np.ndarray]:
    """(query text, page image) -> ColPaliProcessor.score_retrieval: sum over query tokens of the
    best page-token dot product."""
    encode, proc = _colpali_encoder(runner, request)
    encode = once_per_item(encode)
    return [
        np.asarray([float(proc.score_retrieval([encode(q)], [encode(d)])[0, 0])], dtype=np.float32)
        for q, d in items
    ]
