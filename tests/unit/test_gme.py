"""GME (gme-Qwen2-VL) rows of matrices/multimodal.yaml: the card's prompt, its image resize checked
against transformers' own smart_resize, and the recipe's positions and pooling checked against a
second (numpy) implementation on a stand-in model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from harness.matrix import images
from harness.matrix.inputs import (
    GME_DEFAULT_INSTRUCTION,
    GME_QUERY_INSTRUCTION,
    gme_prompt,
    input_set,
)
from harness.run.matrices import load_matrix
from harness.runners.hf.gme import card_fetch_image, card_smart_resize
from tests.requests import req

ROOT = Path(__file__).resolve().parents[2]


def test_the_gme_prompt_is_the_qwen2_vl_chat_layout_with_the_instruction_as_system_message():
    def rendered(system: str, user: str) -> str:  # by hand, turn by turn
        turns = [("system", system), ("user", user)]
        body = "".join(f"<|im_start|>{r}\n{c}<|im_end|>\n" for r, c in turns)
        return body + "<|im_start|>assistant\n" + "<|endoftext|>"

    assert gme_prompt("red fox", False, "Find it.") == rendered("Find it.", "red fox")
    vision = "<|vision_start|><|image_pad|><|vision_end|>"
    assert gme_prompt(None, True) == rendered("You are a helpful assistant.", vision)
    assert gme_prompt("a page", True) == rendered(GME_DEFAULT_INSTRUCTION, vision + "a page")


def test_the_gme_input_sets_text_queries_image_corpus_and_both_interleaved():
    texts = input_set("gme-text-queries").items
    imgs = input_set("gme-images").items
    mixed = input_set("gme-queries-and-images").items
    assert len(texts) == len(imgs) == 6 and all(isinstance(t, str) for t in texts)
    assert all(f"system\n{GME_QUERY_INSTRUCTION}<|im_end|>" in t for t in texts)
    assert all("<|image_pad|>" not in t for t in texts)
    for it in imgs:
        assert images.is_image(it) and it["text"] == gme_prompt(None, True)
        assert images.image(it["image"]).size == (56, 56)
    assert list(mixed[::2]) == list(texts) and list(mixed[1::2]) == list(imgs)


@pytest.mark.parametrize(
    "hw",
    [(64, 64), (56, 56), (28, 28), (10, 10), (100, 37), (3000, 4000), (480, 640), (33, 1500)],
)
@pytest.mark.parametrize("lo_hi", [(4 * 784, 16384 * 784), (256 * 784, 1280 * 784)])
def test_the_cards_smart_resize_equals_transformers_qwen2_vl_smart_resize(hw, lo_hi):
    from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize

    lo, hi = lo_hi
    got = card_smart_resize(*hw, min_pixels=lo, max_pixels=hi)
    assert got == smart_resize(*hw, factor=28, min_pixels=lo, max_pixels=hi)
    assert got[0] % 28 == 0 and got[1] % 28 == 0 and lo <= got[0] * got[1] <= hi


def test_the_cards_smart_resize_clamps_an_extreme_ratio_where_transformers_raises():
    assert card_smart_resize(28, 28 * 300) == (28, 28 * 200)


def test_the_cards_pre_resize_leaves_a_56_pixel_image_as_it_is_and_resizes_a_64_pixel_one():
    im = images.image("synthetic-images-56/3")
    assert np.array_equal(np.asarray(card_fetch_image(im)), np.asarray(im))
    assert card_fetch_image(images.image("synthetic-images/3")).size == (56, 56)
    centre = np.asarray(images.image("synthetic-images/5"))[4:60, 4:60]
    assert np.array_equal(np.asarray(images.image("synthetic-images-56/5")), centre)


class _Lang:
    """The text decoder: hidden states from the embeddings and 3-axis positions."""

    def __init__(self, torch):
        self.torch, self.seen = torch, []

    def __call__(self, inputs_embeds, attention_mask, position_ids):
        torch = self.torch
        self.seen.append(position_ids)
        n = inputs_embeds.shape[1]
        pos = (
            torch.arange(n).view(1, 1, -1).expand(3, 1, -1)
            if position_ids is None
            else position_ids
        )
        weights = torch.tensor([1.0, 0.5, 0.25]).view(3, 1, 1, 1)
        h = inputs_embeds + (pos.unsqueeze(-1).float() * weights).sum(0) / 7.0

        class Out:
            last_hidden_state = h

        return Out()


class _Model:
    """A stand-in Qwen2VLForConditionalGeneration: embeddings, vision features, rope index."""

    def __init__(self, torch):
        self.torch, self.dtype = torch, torch.float32
        self.config = type("C", (), {"image_token_id": 5})()
        self.table = torch.randn(16, 4, generator=torch.Generator().manual_seed(0))
        outer = self

        class Inner:
            language_model = _Lang(torch)

            @staticmethod
            def get_image_features(pixel_values, grid_thw):
                feats = pixel_values.reshape(-1, 4) * 3.0
                return type("O", (), {"pooler_output": (feats,)})()

            @staticmethod
            def get_rope_index(ids, mm_types, grid, video, mask):
                n = ids.shape[1]
                pos = torch.stack([torch.arange(n), torch.arange(n) * 2, torch.arange(n) * 3])
                return pos.view(3, 1, n), None

        self.model = Inner()
        outer.calls = self.model.language_model.seen

    def get_input_embeddings(self):
        return lambda ids: self.table[ids].clone()


class _Processor:
    def __init__(self, torch):
        self.torch = torch

    def __call__(self, text, images=None, return_tensors=None):
        ids = [6 + len(w) % 9 for w in text[0].split()]  # never 5, the image pad
        if images:
            ids += [5, 5]  # two image pads
        t = self.torch.tensor([ids])
        enc = {"input_ids": t, "attention_mask": self.torch.ones_like(t)}
        if images:
            enc["pixel_values"] = self.torch.arange(8.0).view(2, 4)
            enc["image_grid_thw"] = self.torch.tensor([[1, 2, 4]])
        return enc


@pytest.mark.parametrize("positions", ["card", "mrope"])
def test_the_recipe_pools_the_last_token_l2_normalised_at_the_positions_asked(positions):
    torch = pytest.importorskip("torch")
    from harness.runners import LoadRequest
    from harness.runners.hf import HFRunner
    from harness.runners.hf.gme import CARD_MAX_IMAGE_TOKENS, CARD_MIN_IMAGE_TOKENS, _gme_embed

    runner = HFRunner(None)
    runner.req = LoadRequest(model_dir="unused", dtype="float32", device="cpu")
    model, proc = _Model(torch), _Processor(torch)
    key = f"gme-processor-{CARD_MIN_IMAGE_TOKENS * 784}-{CARD_MAX_IMAGE_TOKENS * 784}"
    runner._loaded.update({"Qwen2VLForConditionalGeneration": model, key: proc})
    items = ["a bb ccc", {"text": "dd e", "image": "synthetic-images-56/0"}]
    out = _gme_embed(runner, items, req(hf={"positions": positions}))

    # numpy: the embeddings with image pads overwritten, the stand-in decoder, the last row, L2
    table = model.table.numpy().astype(np.float64)
    for it, got in zip(items, out):
        text = it if isinstance(it, str) else it["text"]
        enc = proc([text], images=[0] if not isinstance(it, str) else None)
        ids = enc["input_ids"][0].numpy()
        x = table[ids]
        if "pixel_values" in enc:
            x[ids == 5] = enc["pixel_values"].numpy().reshape(-1, 4) * 3.0
        n = len(ids)
        scale = np.array([1, 2, 3]) if positions == "mrope" else np.ones(3)
        pos = np.arange(n)[None, :] * scale[:, None]
        h = x + (pos[..., None] * np.array([1.0, 0.5, 0.25])[:, None, None]).sum(0) / 7.0
        want = h[-1] / np.sqrt((h[-1] ** 2).sum())
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    if positions == "card":
        assert all(p is None for p in model.calls)  # the card passes no position_ids
    else:
        assert all(p is not None for p in model.calls)


def test_the_recipe_refuses_an_unknown_positions_reading_and_truncation():
    from harness.runners.hf.gme import _gme_embed

    with pytest.raises(ValueError, match="positions 'rope'; valid: card, mrope"):
        _gme_embed(object(), ["x"], req(hf={"positions": "rope"}))
    with pytest.raises(ValueError, match="truncation"):
        _gme_embed(object(), ["x"], req(truncate=8))


def test_the_multimodal_matrix_holds_the_three_gme_rows_and_the_hub_row_reads_its_family():
    cases = {c.id: c for c in load_matrix(ROOT / "matrices/multimodal.yaml").cases}
    text = cases["qwen2-vl-tiny-gme-text-embed"]
    image = cases["qwen2-vl-tiny-gme-image-embed"]
    mixed = cases["qwen2-vl-tiny-gme-mixed-embed-mrope"]
    assert {c.reference for c in (text, image, mixed)} == {"gme-qwen2-vl-embed"}
    assert (
        text.divergence is None and mixed.divergence is None and mixed.hf == {"positions": "mrope"}
    )
    assert image.divergence is not None and image.divergence.runners == ["vllm-v1", "vllm-v2"]
    # vLLM gets the card's processor pixel range
    kw = text.engine["mm_processor_kwargs"]
    assert (kw["min_pixels"], kw["max_pixels"]) == (256 * 28 * 28, 1280 * 28 * 28)
    hub = {c.id: c for c in load_matrix(ROOT / "matrices/hub.yaml").cases}
    row = hub["hub-gme-qwen2-vl-2b-text-embed"]
    assert row.family == "vlm-last-embed" and row.tolerances == text.tolerances
    assert row.inputs == "gme-text-queries" and row.reference == "gme-qwen2-vl-embed"
