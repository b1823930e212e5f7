"""Recipes of ColQwen3 (late interaction on Qwen3-VL): multi-vector embeddings of queries and page
images, and their MaxSim, computed by the model's own published code, colpali-engine's ColQwen3
and ColQwen3Processor. transformers has no ColQwen3; colpali-engine requires torchvision from
PyPI (a CUDA build beside torch+cpu), so the engine environment installs it without its
dependencies (harness/engine/env.py) and it is imported here, when a case runs."""

from __future__ import annotations

import numpy as np

from harness.matrix.request import Request
from harness.runners.hf import HFRunner, once_per_item, recipe


def checked_load(model, info: dict):
    """The loaded ColQwen3, every weight from the checkpoint. One exception: a checkpoint whose
    projection has no bias (colpali-engine always builds one) is a bias-free projection, so its
    bias is set to zero here rather than left to transformers' initialisation."""
    import torch

    missing = set(info.get("missing_keys") or ())
    bias = "custom_text_proj.bias"
    unread = {k: sorted(v) for k, v in info.items() if v and k != "missing_keys"}
    if missing - {bias} or unread:
        raise ValueError(
            f"ColQwen3 checkpoint does not match colpali-engine's model: missing "
            f"{sorted(missing - {bias})}, {unread}"
        )
    if bias in missing:
        with torch.no_grad():
            model.custom_text_proj.bias.zero_()
    return model


def _colqwen3_encoder(runner: HFRunner):
    """(encode, processor): encode maps an item to its [tokens, 320] embeddings, one item per
    forward (a batch left-pads), prepared as ColQwen3Processor prepares it. A text is a query as
    the input set holds it, already in the form process_queries gives (the text then 10
    "<|endoftext|>"): it goes through process_texts. An image is a page: process_images, whose
    prompt is the processor's visual_prompt_prefix; the item's own text must be that prompt
    (it is what vLLM is sent), else the item is refused."""
    import torch

    from harness.engine.env import no_deps_pin
    from harness.matrix.images import image, is_image
    from harness.runners.hf.packages import pinned_package

    # the pinned colpali-engine or a skip naming the pip command (NO_DEPS_REFERENCES)
    pinned_package("colpali-engine", no_deps_pin("colpali-engine"), "colpali_engine")
    from colpali_engine.models import ColQwen3, ColQwen3Processor

    assert runner.req is not None
    req = runner.req

    def load_model():
        from harness.runners.hf import torch_dtype

        model, info = ColQwen3.from_pretrained(
            req.model_dir, dtype=torch_dtype(req.dtype), output_loading_info=True
        )
        return checked_load(model, info).to(req.device).eval()

    model = runner.loaded("colqwen3", load_model)
    proc = runner.loaded(
        "colqwen3-processor", lambda: ColQwen3Processor.from_pretrained(req.model_dir)
    )

    def encode(item):
        if is_image(item):
            if item.get("text") != proc.visual_prompt_prefix:
                raise ValueError(
                    f"a ColQwen3 page's prompt is ColQwen3Processor.visual_prompt_prefix "
                    f"({proc.visual_prompt_prefix!r}), not {item.get('text')!r}"
                )
            enc = proc.process_images(images=[image(item["image"])])
            enc["pixel_values"] = enc["pixel_values"].to(model.dtype)
        else:
            enc = proc.process_texts(texts=[item])
        with torch.inference_mode():
            out = model(**{k: v.to(req.device) for k, v in enc.items()})
        return enc["input_ids"], out[0].float()  # L2-normalised per token

    return encode, proc


@recipe("colqwen3-token-embed", default_for=[("ColQwen3", "token_embed")])
def _colqwen3_tokens(runner: HFRunner, items: list, request: Request) -> list[np.ndarray]:
    """ColQwen3 multi-vector embeddings of queries (texts) and pages (images)."""
    if request.truncate:
        raise ValueError("colqwen3-token-embed: truncation would cut the query's augmentation")
    encode, _ = _colqwen3_encoder(runner)
    out = []
    for it in items:
        ids, emb = encode(it)
        runner.note_tokens(ids)
        out.append(emb.cpu().numpy().astype(np.float32))
    return out


@recipe("colqwen3-maxsim", default_for=[("ColQwen3", "score")])
def _colqwen3_maxsim(runner: HFRunner, items: list, request: Request) -> list[np.ndarray]:
    """(query, page) -> ColQwen3Processor.score (score_multi_vector): the sum over query tokens
    of the best page-token dot product."""
    if request.truncate:
        raise ValueError("colqwen3-maxsim: truncation would cut the query's augmentation")
    encode, proc = _colqwen3_encoder(runner)
    embed = once_per_item(lambda it: encode(it)[1])
    return [
        np.asarray([float(proc.score([embed(q)], [embed(d)], device="cpu")[0, 0])], np.float32)
        for q, d in items
    ]
