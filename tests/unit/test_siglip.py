"""SigLIP (SiglipModel): the synthetic checkpoint's tokenizer as SigLIP 2 ships it, the case's
`padding: max_length` on both sides (vLLM's tokenization_kwargs, a recipe that pads), and the
SigLIP cases of matrices/multimodal.yaml."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from harness.matrix.request import offline_kwargs, served_fields
from harness.matrix.schema import Case
from tests.requests import nest, req

ROOT = Path(__file__).resolve().parents[2]


def make_case(**kw) -> Case:
    base = dict(
        id="c",
        family="f",
        task="embed",
        model={"source": "local", "path": "x"},
        inputs="short-texts",
        runners=["hf", "vllm-v1"],
        tolerances={"float32": {"cosine_distance": 1e-6, "max_abs": 1e-5}},
    )
    return Case.model_validate({**base, **nest(kw)})


def test_padding_is_max_length_or_nothing():
    assert make_case().request.padding is None
    assert make_case(padding="max_length").request.padding == "max_length"
    with pytest.raises(ValidationError):
        make_case(padding="longest")


def test_vllm_is_asked_to_pad_per_request_beside_any_truncation():
    assert offline_kwargs(req(padding="max_length"))[0] == {"padding": "max_length"}
    assert offline_kwargs(req(truncate=16, padding="max_length"))[0] == {
        "truncate_prompt_tokens": 16,
        "padding": "max_length",
    }
    assert offline_kwargs(req(truncate=None, padding=None)) == ({}, {})
    with pytest.raises(ValueError, match="does not implement a case's padding"):
        served_fields(req(padding="max_length"))  # the server runners do not pad


def test_a_recipe_that_does_not_pad_refuses_a_case_asking_for_padding():
    from harness.runners.hf import HFRunner

    with pytest.raises(
        ValueError, match="does not implement padding; recipes that do: siglip-embed"
    ):
        HFRunner(None).run("embed", ["a"], req(reference="st-embed", padding="max_length"))


def test_the_golden_key_names_the_padding_only_when_set(tmp_path):
    from harness.judge import golden

    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["SiglipModel"]}))
    padded = golden.reference_key(make_case(padding="max_length"), tmp_path, "float32", "cpu")
    assert padded["recipe"] == "siglip-embed" and padded["padding"] == "max_length"
    assert "padding" not in golden.reference_key(make_case(), tmp_path, "float32", "cpu")


def test_the_synthetic_tokenizer_pads_right_after_its_eos_and_returns_ids_only(tmp_path):
    pytest.importorskip("transformers")
    from transformers import AutoProcessor

    from harness.models.synthetic.siglip import (
        TEXT_MAX_LEN,
        _siglip_config,
        _siglip_tokenizer_and_processor,
    )

    _siglip_tokenizer_and_processor(tmp_path, _siglip_config())
    proc = AutoProcessor.from_pretrained(tmp_path, local_files_only=True)
    assert type(proc).__name__ == "SiglipProcessor"
    tok = proc.tokenizer
    enc = tok("a cat", padding="max_length")
    ids = enc["input_ids"]
    assert list(enc) == ["input_ids"] and len(ids) == TEXT_MAX_LEN
    n = len(tok("a cat")["input_ids"])  # the text, then <eos>; no <bos>
    assert ids[n - 1] == tok.eos_token_id and tok.bos_token_id not in ids
    assert ids[n:] == [tok.pad_token_id] * (TEXT_MAX_LEN - n) and tok.pad_token_id == 0


def test_the_multimodal_matrix_runs_siglip_text_padded_and_images_on_both_runners():
    from harness.run.matrices import load_matrix

    cases = {c.id: c for c in load_matrix(ROOT / "matrices/multimodal.yaml").cases}
    text, images = cases["siglip-tiny-text-embed"], cases["siglip-tiny-image-embed"]
    assert text.request.padding == "max_length" and text.reference == "siglip-embed"
    assert images.inputs == "synthetic-images" and images.model == text.model
    for case in (text, images):
        assert case.runners == ["hf", "vllm-v1", "vllm-v2"] and case.task == "embed"
