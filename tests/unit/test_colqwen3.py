"""ColQwen3 on Qwen3-VL: the synthetic builder (config and weights a function of the seed), the
reference's checks around colpali-engine (the pinned version, the loaded weights, the prompts)
and the page prompt vLLM is sent."""

from __future__ import annotations

import importlib.util
import json
from types import SimpleNamespace

import numpy as np
import pytest

from harness.matrix.inputs import COLQWEN3_PAGE, COLQWEN3_QUERY_SUFFIX, input_set
from harness.matrix.schema import SyntheticModel
from harness.models.synthetic import ARCHS, build, seeded_values
from harness.models.synthetic import qwen3_vl as q3
from harness.models.synthetic.qwen2_vl import qwen_vl_vocab


def test_the_tiny_qwen3_vl_config_is_consistent_and_the_same_each_time():
    from transformers import AutoConfig

    fam = ARCHS["qwen3-vl"]
    assert fam.config == q3._qwen3_vl_config()
    assert fam.archs == ("ColQwen3", "Qwen3VLForConditionalGeneration", q3.SEQ_CLS)
    config = AutoConfig.for_model("qwen3_vl", **fam.config)
    text, vision = config.text_config, config.vision_config
    # M-RoPE sections cover the rotary half of a head; the vision tower feeds the text width
    assert sum(text.rope_parameters["mrope_section"]) == text.head_dim // 2
    assert vision.out_hidden_size == text.hidden_size
    assert max(vision.deepstack_visual_indexes) < vision.depth
    assert int(vision.num_position_embeddings**0.5) ** 2 == vision.num_position_embeddings
    vocab = qwen_vl_vocab()
    assert config.image_token_id == vocab["<|image_pad|>"] < text.vocab_size


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """One ColQwen3 checkpoint with its projection bias, one without (seed 5)."""
    root = tmp_path_factory.mktemp("colqwen3")
    out = {}
    for bias in (True, False):
        spec = SyntheticModel(source="synthetic", arch="ColQwen3", seed=5, head={"bias": bias})
        out[bias] = (root / str(bias), build(spec, root / str(bias)))
    return out


def test_every_saved_weight_is_the_seeded_value_of_its_name(built):
    from safetensors.numpy import load_file

    path, _ = built[True]
    weights = load_file(str(path / "model.safetensors"))
    assert weights["custom_text_proj.weight"].shape == (q3.COLQWEN3_DIM, 64)
    assert weights["custom_text_proj.bias"].shape == (q3.COLQWEN3_DIM,)
    backbone = [k for k in weights if not k.startswith("custom_text_proj.")]
    # the layout of Qwen3VLForConditionalGeneration checkpoints (vLLM's "ColPali / nvidia")
    assert backbone and all(
        k.startswith(("model.visual.", "model.language_model.")) for k in backbone
    )
    assert any(".deepstack_merger_list." in k for k in backbone)
    for name, value in weights.items():
        seeded = name.removeprefix("model.")  # the parameter's name when it was drawn
        np.testing.assert_array_equal(value, seeded_values(5, seeded, value.shape, 0.2), name)
    config = json.loads((path / "config.json").read_text())
    assert config["architectures"] == ["ColQwen3"] and config["model_type"] == "qwen3_vl"
    assert "dim" not in config  # colpali-engine's config names no width


def test_a_bias_free_head_differs_only_by_the_bias(built):
    from safetensors.numpy import load_file

    (with_bias, fp_with), (without, fp_without) = built[True], built[False]
    a = load_file(str(with_bias / "model.safetensors"))
    b = load_file(str(without / "model.safetensors"))
    assert set(a) - set(b) == {"custom_text_proj.bias"} and set(b) <= set(a)
    assert all(np.array_equal(a[k], b[k]) for k in b)
    assert fp_with != fp_without


def test_the_processor_files_are_qwen3_vl_s_and_match_the_config(built):
    from transformers import AutoProcessor

    path, _ = built[False]
    proc = AutoProcessor.from_pretrained(path)
    assert type(proc).__name__ == "Qwen3VLProcessor"
    assert proc.image_token_id == json.loads((path / "config.json").read_text())["image_token_id"]
    assert proc.image_processor.patch_size == 16 and proc.image_processor.merge_size == 2


def test_an_unknown_head_option_is_refused(tmp_path):
    spec = SyntheticModel(source="synthetic", arch="ColQwen3", seed=5, head={"bais": False})
    with pytest.raises(ValueError, match=r"bias: true\|false.*bais"):
        q3._colqwen3_projection(tmp_path, spec, None)


def test_head_options_on_a_family_that_writes_no_head_are_refused(tmp_path):
    spec = SyntheticModel(source="synthetic", arch="BertModel", seed=5, head={"bias": False})
    with pytest.raises(ValueError, match="writes no head"):
        build(spec, tmp_path / "m")


def test_a_missing_or_other_colpali_engine_is_a_skip_with_its_install_command(monkeypatch):
    from importlib import metadata

    from harness.runners import SkipCase
    from harness.runners.hf import colqwen3

    def version(name, have):
        assert name == "colpali-engine"
        if have is None:
            raise metadata.PackageNotFoundError(name)
        return have

    monkeypatch.setattr(metadata, "version", lambda n: version(n, None))
    with pytest.raises(SkipCase, match=r"pip install --no-deps colpali-engine==0\.3\.18"):
        colqwen3._colqwen3_encoder(None)
    monkeypatch.setattr(metadata, "version", lambda n: version(n, "0.3.17"))
    with pytest.raises(SkipCase, match="colpali-engine is 0.3.17 here"):
        colqwen3._colqwen3_encoder(None)


def test_the_reference_zeroes_a_missing_projection_bias_and_refuses_other_gaps():
    import torch

    from harness.runners.hf.colqwen3 import checked_load

    def model():
        m = SimpleNamespace(custom_text_proj=torch.nn.Linear(4, 3))
        torch.nn.init.constant_(m.custom_text_proj.bias, 0.5)
        return m

    none = {"missing_keys": set(), "unexpected_keys": set(), "mismatched_keys": set()}
    m = checked_load(model(), none)
    assert torch.all(m.custom_text_proj.bias == 0.5)  # read from the checkpoint: untouched
    m = checked_load(model(), {**none, "missing_keys": {"custom_text_proj.bias"}})
    assert torch.all(m.custom_text_proj.bias == 0)
    with pytest.raises(ValueError, match="missing.*custom_text_proj.weight"):
        checked_load(model(), {**none, "missing_keys": {"custom_text_proj.weight"}})
    with pytest.raises(ValueError, match="unexpected_keys.*lm_head.weight"):
        checked_load(model(), {**none, "unexpected_keys": {"lm_head.weight"}})


def test_the_input_sets_hold_colqwen3_queries_and_pages():
    items = input_set("colqwen3-queries-and-pages").items
    queries, pages = items[::2], items[1::2]
    assert len(queries) == len(pages) == 8
    assert all(isinstance(q, str) and q.endswith(COLQWEN3_QUERY_SUFFIX) for q in queries)
    assert all(p["text"] == COLQWEN3_PAGE for p in pages) and len({p["image"] for p in pages}) == 8
    pairs = input_set("colqwen3-query-page-pairs").items
    plain = input_set("query-image-pairs").items
    assert [(q.removesuffix(COLQWEN3_QUERY_SUFFIX), d["image"]) for q, d in pairs] == [
        (q, d["image"]) for q, d in plain
    ]


@pytest.mark.skipif(
    importlib.util.find_spec("colpali_engine") is None, reason="colpali-engine is not installed"
)
def test_the_colqwen3_prompts_are_colpali_engine_s():
    from colpali_engine.models import ColQwen3Processor

    assert COLQWEN3_PAGE == ColQwen3Processor.visual_prompt_prefix
    assert COLQWEN3_QUERY_SUFFIX == ColQwen3Processor.query_augmentation_token * 10
    assert ColQwen3Processor.query_prefix == ""


def test_vllm_is_sent_a_page_s_prompt_after_its_image(monkeypatch):
    from harness.runners.vllm_io import score_input

    page = {"text": COLQWEN3_PAGE, "image": "synthetic-images/0"}
    parts = score_input(page)["content"]
    assert [p["type"] for p in parts] == ["image_url", "text"]
    assert parts[1]["text"] == COLQWEN3_PAGE
    assert parts[0]["image_url"]["url"].startswith("data:image/png;base64,")
    # an image alone stays one part; a text stays a text
    assert len(score_input({"image": "synthetic-images/0"})["content"]) == 1
    assert score_input("a query") == "a query"
