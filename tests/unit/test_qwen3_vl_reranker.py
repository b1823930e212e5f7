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
    "runners, task, request_, refused",
    [
        ("[hf, vllm-v1, vllm-v2]", "score", "{score_template: qwen3-vl-reranker}", None),
        ("[hf, vllm-serve-v1]", "score", "{score_template: qwen3-vl-reranker}", None),
        (
            "[hf, vllm-v1, vllm-serve-v1]",
            "score",
            "{score_template: qwen3-vl-reranker, score_template_kwargs: {instruction: Find it.}}",
            None,
        ),
        ("[hf, vllm-v1]", "embed", "{score_template: qwen3-vl-reranker}", "not 'embed'"),
        (
            "[hf, vllm-v1]",
            "score",
            "{score_template_kwargs: {instruction: Find it.}}",
            "variables of a score template: name the template",
        ),
        (
            "[hf, vllm-v1]",
            "score",
            "{score_template: qwen3-vl-reranker, score_template_kwargs: {tokenize: x}}",
            "not tokenize",
        ),
    ],
)
def test_a_score_template_and_its_variables_go_to_score_cases_only(
    write_matrix, runners, task, request_, refused
):
    """LLM.score takes the template per call and a server at start (--chat-template), so both
    run a score template; no other task renders a pair, variables without a template have
    nothing to fill, and vLLM's own template arguments are not variables: all refused when the
    matrix loads."""
    from harness.matrix.schema import MatrixError
    from harness.run.matrices import load_matrix

    text = SCORE_CASE.replace("RUNNERS", runners).replace("task: score", f"task: {task}")
    text = text.replace("{score_template: qwen3-vl-reranker}", request_)
    if refused is None:
        (case,) = load_matrix(write_matrix(text)).cases
        assert case.request.score_template == "qwen3-vl-reranker"
        return
    with pytest.raises(MatrixError, match=refused):
        load_matrix(write_matrix(text))


def test_an_instruction_reaches_the_reference_prompt_and_the_template_alike(processor):
    """The request's `instruction` replaces the default on both sides: the published code's
    messages and the score template rendered with it as a variable give one text."""
    from transformers.utils.chat_template_utils import _compile_jinja_template

    asked = "Find the passage about houses."
    reference = processor.apply_chat_template(
        reranker_messages("a red house", "the hill", asked),
        tokenize=False,
        add_generation_prompt=True,
    )
    template = _compile_jinja_template(SCORE_TEMPLATES["qwen3-vl-reranker"])
    messages = [
        {"role": "query", "content": "a red house"},
        {"role": "document", "content": "the hill"},
    ]
    assert reference == template.render(messages=messages, instruction=asked)
    assert f"<Instruct>: {asked}<Query>:" in reference and DEFAULT_INSTRUCTION not in reference


def test_the_template_variables_travel_as_chat_template_kwargs_offline_and_served():
    """Offline, LLM.score's PoolingParams.extra_kwargs; on a server, the /score body's field."""
    from harness.matrix.request import offline_kwargs, served_fields

    request = RequestOptions(
        score_template="qwen3-vl-reranker", score_template_kwargs={"instruction": "Find it."}
    )
    _, params = offline_kwargs(request)
    assert params == {"extra_kwargs": {"chat_template_kwargs": {"instruction": "Find it."}}}
    assert served_fields(request) == {"chat_template_kwargs": {"instruction": "Find it."}}


def test_a_server_starts_with_the_score_template_and_shares_no_server_across_templates(
    write_matrix,
):
    """`vllm serve --chat-template` is a start option: the server runner's engine settings hold
    the template (and so its load key: a case without it gets a server of its own); the offline
    runners take it per call and the reference never sees vLLM's settings."""
    from harness.run.matrices import load_matrix
    from harness.run.plan import load_engine
    from harness.runners.serve_process import cli_args

    text = SCORE_CASE.replace("RUNNERS", "[hf, vllm-v1, vllm-serve-v1]")
    text += (
        text[text.index("  - id: one") :]
        .replace("id: one", "id: two")
        .replace("    request: {score_template: qwen3-vl-reranker}\n", "")
    )
    one, two = load_matrix(write_matrix(text)).cases
    served = load_engine("vllm-serve-v1", one)
    assert served["chat_template"] == SCORE_TEMPLATES["qwen3-vl-reranker"]
    assert "--chat-template" in cli_args(served)
    assert "chat_template" not in load_engine("vllm-v1", one)
    assert "chat_template" not in load_engine("vllm-serve-v1", two)


def test_the_reference_refuses_a_variable_the_published_code_does_not_take():
    from harness.matrix.request import Request
    from harness.runners.hf.qwen3_vl_reranker import _qwen3_vl_reranker

    request = Request(score_template="qwen3-vl-reranker", score_template_kwargs={"tone": "dry"})
    with pytest.raises(ValueError, match="takes `instruction` only, not tone"):
        _qwen3_vl_reranker(None, [("q", "d")], request)
