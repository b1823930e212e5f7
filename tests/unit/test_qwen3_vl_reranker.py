"""Qwen3-VL-Reranker: the published prompt as the reference renders it (the checkpoint's chat
template over format_mm_instruction's messages) and as vLLM is given it (the score template
named by the case, rendered over vLLM's "query" / "document" messages) are the same text, for
text and image documents; the template and its request field are refused where they cannot
apply."""

from __future__ import annotations

import pytest

from harness.matrix.request import RequestOptions
from harness.matrix.score_templates import SCORE_TEMPLATES
from harness.models.synthetic import qwen3_vl as q3
from harness.runners.hf.qwen3_vl_reranker import DEFAULT_INSTRUCTION, reranker_messages

IMAGE = {"image": "synthetic-images/0"}
PLACEHOLDER = "<|vision_start|><|image_pad|><|vision_end|>"  # vLLM's Qwen3-VL image placeholder


@pytest.fixture(scope="module")
def processor(tmp_path_factory):
    from transformers import AutoProcessor

    out = tmp_path_factory.mktemp("qwen3-vl-reranker")
    q3._qwen3_vl_tokenizer_and_processor(out, q3._qwen3_vl_config(), chat_template=True)
    return AutoProcessor.from_pretrained(out)


def vllm_prompt(query: str, document: str) -> str:
    from transformers.utils.chat_template_utils import _compile_jinja_template

    template = _compile_jinja_template(SCORE_TEMPLATES["qwen3-vl-reranker"])
    return template.render(
        messages=[{"role": "query", "content": query}, {"role": "document", "content": document}]
    )


@pytest.mark.parametrize(
    "document, as_vllm_sees_it",
    [("the red house on the hill", "the red house on the hill"), (IMAGE, PLACEHOLDER)],
)
def test_the_reference_and_vllm_get_the_same_prompt(processor, document, as_vllm_sees_it):
    reference = processor.apply_chat_template(
        reranker_messages("a red house", document), tokenize=False, add_generation_prompt=True
    )
    assert reference == vllm_prompt("a red house", as_vllm_sees_it)
    assert reference.startswith("<|im_start|>system\nJudge whether the Document")
    assert f"<Instruct>: {DEFAULT_INSTRUCTION}<Query>:a red house\n<Document>:" in reference
    assert reference.endswith("<|im_end|>\n<|im_start|>assistant\n")


def test_yes_and_no_are_single_tokens(processor):
    vocab = processor.tokenizer.get_vocab()
    assert "yes" in vocab and "no" in vocab


def test_an_unknown_score_template_is_refused_with_the_known_ones():
    with pytest.raises(ValueError, match="unknown score_template 'qwen3'.*qwen3-vl-reranker"):
        RequestOptions(score_template="qwen3")


def test_a_sequence_classifier_declares_its_labels_on_the_top_level_config_only(tmp_path):
    """The layout of vllm#50950's checkpoints: num_labels on the top-level config, the text
    config at transformers' default 2; score.weight of num_labels rows, no lm_head."""
    import json

    from safetensors.numpy import load_file

    from harness.matrix.schema import SyntheticModel
    from harness.models.synthetic import build

    spec = SyntheticModel(source="synthetic", arch=q3.SEQ_CLS, seed=291, config={"num_labels": 3})
    build(spec, tmp_path / "m")
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    assert config["architectures"] == [q3.SEQ_CLS] and len(config["id2label"]) == 3
    assert len(config["text_config"].get("id2label") or {0: 0, 1: 1}) == 2
    weights = load_file(str(tmp_path / "m" / "model.safetensors"))
    assert weights["score.weight"].shape == (3, 64)
    assert not any(k.startswith("lm_head.") for k in weights)


SCORE_CASE = """
defaults:
  inputs: query-document-pairs
  tolerances:
    float32: {max_abs: 1.0e-5}
families:
  vl-rerank:
    task: score
cases:
  - id: one
    family: vl-rerank
    runners: RUNNERS
    request: {score_template: qwen3-vl-reranker}
    model: {source: synthetic, arch: Qwen3VLForConditionalGeneration}
"""


@pytest.mark.parametrize(
    "runners, task, refused",
    [
        ("[hf, vllm-v1, vllm-v2]", "score", None),
        ("[hf, vllm-serve-v1]", "score", "on vllm-serve-v1"),
        ("[hf, vllm-v1]", "embed", "not task 'embed'"),
    ],
)
def test_a_score_template_goes_to_offline_score_cases_only(write_matrix, runners, task, refused):
    """vLLM's offline LLM.score takes the template per call; a server takes its template at start
    (not per request), and no other task renders a pair: both refused when the matrix loads."""
    from harness.matrix.schema import MatrixError
    from harness.run.matrices import load_matrix

    text = SCORE_CASE.replace("RUNNERS", runners).replace("task: score", f"task: {task}")
    if refused is None:
        (case,) = load_matrix(write_matrix(text)).cases
        assert case.request.score_template == "qwen3-vl-reranker"
        return
    with pytest.raises(MatrixError, match=f"score_template applies to task 'score'.*{refused}"):
        load_matrix(write_matrix(text))
