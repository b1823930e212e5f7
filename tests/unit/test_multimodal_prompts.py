"""Multimodal prompts: a text and an image in one prompt (`texts-with-images`), how the vLLM
runner sends it, and the refusal case of matrices/multimodal.yaml that holds vLLM's CLIP to
refusing it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.matrix import images
from harness.matrix.inputs import input_set
from harness.run.matrices import load_matrix
from tests.requests import req

ROOT = Path(__file__).resolve().parents[2]


def test_texts_with_images_pair_a_distinct_caption_with_a_distinct_image_in_each_prompt():
    items = input_set("texts-with-images").items
    assert len(items) == 8
    assert all(images.is_image(it) and isinstance(it["text"], str) and it["text"] for it in items)
    assert len({it["text"] for it in items}) == 8 and len({it["image"] for it in items}) == 8


def test_texts_with_images_are_hashed_over_their_pixels(monkeypatch):
    inputs = input_set("texts-with-images")
    before = inputs.sha256
    real = images.synthetic_images()
    monkeypatch.setattr(images, "synthetic_images", lambda: (real[1],) + real[1:])
    assert inputs.sha256 != before


def test_the_vllm_prompt_of_a_text_with_an_image_holds_both():
    from harness.runners.vllm_io import engine_prompt

    item = input_set("texts-with-images").items[2]
    prompt = engine_prompt(item)
    assert prompt["prompt"] == item["text"]
    assert prompt["multi_modal_data"]["image"] is images.image(item["image"])
    # an image alone keeps its empty text; a text stays a plain string
    assert engine_prompt({"image": item["image"]})["prompt"] == ""
    assert engine_prompt("a text") == "a text"


def test_the_clip_reference_refuses_a_mixed_prompt_before_loading_a_model():
    from harness.runners.hf.clip import _clip_embed

    class NoModel:  # any model access would be an AttributeError, not the refusal
        req = None

    with pytest.raises(ValueError, match="never both in one prompt"):
        _clip_embed(NoModel(), list(input_set("texts-with-images").items[:2]), req())


def test_the_multimodal_matrix_expects_vllm_to_refuse_a_clip_text_with_image():
    cases = {c.id: c for c in load_matrix(ROOT / "matrices/multimodal.yaml").cases}
    case = cases["clip-tiny-text-with-image-refused"]
    assert case.inputs == "texts-with-images" and case.expect is not None
    assert case.runners == ["vllm-v1", "vllm-v2"]  # a refusal has no HF reference
    # the message of vLLM 0.32's CLIPMultiModalProcessor.apply, as raised
    said = "ValueError: CLIP accepts text-only or image-only inputs, not both! You must pass an "
    assert re.search(case.expect.refused, said)
