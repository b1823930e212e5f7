"""The Qwen2-VL last-token embedder (DSE / GME style) and SigLIP's mixed-prompt rows of
matrices/multimodal.yaml: the DSE prompts, the card's dummy image, and the reference's pooling
checked against a second (numpy) implementation."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from harness.matrix import images
from harness.matrix.inputs import DSE_DOCUMENT, DSE_QUERY, input_set
from harness.run.matrices import load_matrix
from tests.requests import req

ROOT = Path(__file__).resolve().parents[2]


def test_the_blank_image_is_the_cards_black_dummy_of_the_size_named():
    im = images.image("blank/28")
    assert im.mode == "RGB" and im.size == (28, 28)
    assert not np.asarray(im).any()


def test_dse_queries_and_pages_interleave_captioned_queries_with_page_images():
    items = input_set("dse-queries-and-pages").items
    assert len(items) == 12 and all(images.is_image(it) for it in items)
    queries, pages = items[::2], items[1::2]
    assert all(q["image"] == "blank/28" and "Query: " in q["text"] for q in queries)
    assert len({q["text"] for q in queries}) == 6
    assert all(p["text"] == DSE_DOCUMENT and p["image"].startswith("synthetic-") for p in pages)
    assert len({p["image"] for p in pages}) == 6
    for it in items:  # one image placeholder each; the embedding token closes the prompt
        assert it["text"].count("<|image_pad|>") == 1
        assert it["text"].endswith("<|im_start|>assistant\n<|endoftext|>")


def test_the_dse_prompts_are_the_qwen2_vl_chat_template_with_its_default_system_message():
    # the template rendered by hand from Qwen2-VL's chat_template (a user turn holding an image
    # then a text, add_generation_prompt=True) plus the card's "<|endoftext|>"
    def rendered(text: str) -> str:
        turns = [
            ("system", "You are a helpful assistant."),
            ("user", "<|vision_start|><|image_pad|><|vision_end|>" + text),
        ]
        body = "".join(f"<|im_start|>{r}\n{c}<|im_end|>\n" for r, c in turns)
        return body + "<|im_start|>assistant\n" + "<|endoftext|>"

    assert DSE_QUERY.format("red fox") == rendered("Query: red fox")
    assert DSE_DOCUMENT == rendered("What is shown in this image?")


class _Model:
    """A stand-in Qwen2VLForConditionalGeneration: hidden states from the input ids."""

    def __init__(self, torch):
        self.torch, self.dtype, self.seen = torch, torch.float32, []

    def __call__(self, input_ids, output_hidden_states, return_dict, **kw):
        self.seen.append(sorted(kw))
        g = self.torch.Generator().manual_seed(int(input_ids.sum()))
        states = self.torch.randn(1, input_ids.shape[1], 8, generator=g)

        class Out:
            hidden_states = (self.torch.zeros_like(states), states)

        return Out()


class _Processor:
    def __init__(self, torch):
        self.torch = torch

    def __call__(self, text, images=None, return_tensors=None):
        ids = self.torch.tensor([[len(t) % 97 for t in text[0].split()]])
        enc = {"input_ids": ids, "attention_mask": self.torch.ones_like(ids)}
        if images:
            enc["pixel_values"] = self.torch.zeros(4, 6)
            enc["image_grid_thw"] = self.torch.tensor([[1, 2, 2]])
        return enc


def test_the_reference_takes_the_last_layers_last_token_l2_normalised():
    torch = pytest.importorskip("torch")
    from harness.runners import LoadRequest
    from harness.runners.hf import HFRunner
    from harness.runners.hf.qwen2_vl_embed import _qwen2_vl_last_embed

    runner = HFRunner(None)
    runner.req = LoadRequest(model_dir="unused", dtype="float32", device="cpu")
    model, proc = _Model(torch), _Processor(torch)
    runner._loaded.update({"Qwen2VLForConditionalGeneration": model, "processor": proc})
    items = [{"text": "a b cc <|image_pad|>", "image": "blank/28"}, "text only prompt"]
    out = _qwen2_vl_last_embed(runner, items, req())
    for it, got in zip(items, out):
        text = it["text"] if isinstance(it, dict) else it
        ids = proc([text])["input_ids"]
        last = model(ids, True, True).hidden_states[-1][0, -1].numpy().astype(np.float64)
        np.testing.assert_allclose(got, last / np.sqrt((last**2).sum()), rtol=1e-6)
    assert model.seen[0] == ["attention_mask", "image_grid_thw", "pixel_values"]
    assert model.seen[1] == ["attention_mask"]
    assert runner.tokens == [proc([it])["input_ids"][0].tolist() for it in (items[0]["text"],)] + [
        proc([items[1]])["input_ids"][0].tolist()
    ]


def test_the_reference_refuses_truncation_rather_than_cut_the_template():
    from harness.runners.hf.qwen2_vl_embed import _qwen2_vl_last_embed

    with pytest.raises(ValueError, match="truncation"):
        _qwen2_vl_last_embed(object(), ["x"], req(truncate=8))


def test_the_multimodal_matrix_holds_the_dse_embedder_and_siglips_mixed_rows():
    cases = {c.id: c for c in load_matrix(ROOT / "matrices/multimodal.yaml").cases}
    dse = cases["qwen2-vl-tiny-dse-embed"]
    assert dse.inputs == "dse-queries-and-pages" and dse.model.arch == (
        "Qwen2VLForConditionalGeneration"
    )
    refused = cases["siglip-tiny-text-with-image-refused"]
    assert refused.runners == ["vllm-v1", "vllm-v2"]  # a refusal has no HF reference
    said = "ValueError: SigLIP accepts text-only or image-only inputs, not both! You must pass an "
    assert re.search(refused.expect.refused, said)
    assert cases["siglip-tiny-text-and-image-embed"].inputs == "texts-and-images"
