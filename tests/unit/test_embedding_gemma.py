"""EmbeddingGemma's synthetic checkpoint (Gemma3TextModel, harness/models/synthetic/gemma3.py):
the config keys vLLM and transformers read for its attention, its tokenizer's <bos>/<eos>, and
the sentence-transformers stack of the matrix's case (mean pooling, two Dense, Normalize)."""

from __future__ import annotations

import json

import pytest

from harness.matrix.schema import StDense, SyntheticModel
from harness.models.synthetic import build

IDENTITY = "torch.nn.modules.linear.Identity"
SPEC = SyntheticModel(
    source="synthetic",
    arch="Gemma3TextModel",
    seed=420,
    pooling="mean",
    normalize=True,
    dense=[
        StDense(out_features=256, bias=False, activation_function=IDENTITY),
        StDense(out_features=64, bias=False, activation_function=IDENTITY),
    ],
    prompts={"query": "task: search result | query: ", "document": "title: none | text: "},
)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    path = tmp_path_factory.mktemp("embeddinggemma") / "m"
    build(SPEC, path)
    return path


def test_the_config_is_bidirectional_with_a_window_before_a_full_layer(built):
    from transformers import AutoConfig

    saved = json.loads((built / "config.json").read_text())
    assert saved["architectures"] == ["Gemma3TextModel"] and saved["model_type"] == "gemma3_text"
    assert saved["use_bidirectional_attention"] is True
    assert saved["layer_types"] == ["sliding_attention", "full_attention"]
    # config.json holds the window as EmbeddingGemma's does; transformers keeps window // 2 + 1
    # in memory (|i - j| < 9 both ways) and writes it back unchanged
    assert saved["sliding_window"] == 16
    assert AutoConfig.from_pretrained(built).sliding_window == 9
    assert saved["query_pre_attn_scalar"] != saved["head_dim"]


def test_every_text_is_wrapped_in_bos_and_eos(built):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(built)
    ids = tok("the red house")["input_ids"]
    assert ids[0] == tok.bos_token_id and ids[-1] == tok.eos_token_id
    assert tok.pad_token_id not in (tok.bos_token_id, tok.eos_token_id)


def test_the_sentence_transformers_stack_is_embeddinggemma_s(built):
    modules = [
        m["type"].rsplit(".", 1)[-1] for m in json.loads((built / "modules.json").read_text())
    ]
    assert modules == ["Transformer", "Pooling", "Dense", "Dense", "Normalize"]
    dense = [json.loads((built / f"{i}_Dense" / "config.json").read_text()) for i in (2, 3)]
    assert [(d["in_features"], d["out_features"], d["bias"]) for d in dense] == [
        (64, 256, False),
        (256, 64, False),
    ]
    prompts = json.loads((built / "config_sentence_transformers.json").read_text())["prompts"]
    assert prompts["query"] == "task: search result | query: "
