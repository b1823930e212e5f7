"""Truncation options as the runners send them and as the reference computes them."""

from pathlib import Path

import pytest

from harness.matrix.request import offline_kwargs, served_fields
from tests.requests import req


def _tok(request):
    return offline_kwargs(request)[0]


def test_vllm_truncation_kwargs():
    assert _tok(req()) == {}
    assert _tok(req(truncate=32)) == {"truncate_prompt_tokens": 32}
    assert _tok(req(truncate=-1)) == {"truncate_prompt_tokens": -1}
    assert _tok(req(truncate=32, truncation_side="left")) == {
        "truncate_prompt_tokens": 32,
        "truncation_side": "left",
    }


def test_the_server_is_sent_the_same_truncation_as_request_fields():
    assert served_fields(req(truncate=32, truncation_side="left")) == {
        "truncate_prompt_tokens": 32,
        "truncation_side": "left",
    }


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    pytest.importorskip("transformers")
    from transformers import AutoTokenizer

    from harness.models.synthetic.bert import wordpiece_tokenizer

    out: Path = tmp_path_factory.mktemp("tok")
    wordpiece_tokenizer(out, {"max_position_embeddings": 128})
    return AutoTokenizer.from_pretrained(str(out), local_files_only=True)


def _by_parts(tok, query: str, document: str, keep: int, side: str) -> dict:
    """A second implementation of sided_pair_encoding: the pair assembled from its texts'
    own ids ([CLS] q [SEP] d [SEP], types 0 then 1), then cut."""
    q = tok.encode(query, add_special_tokens=False)
    d = tok.encode(document, add_special_tokens=False)
    ids = [tok.cls_token_id, *q, tok.sep_token_id, *d, tok.sep_token_id]
    types = [0] * (len(q) + 2) + [1] * (len(d) + 1)
    cut = slice(-keep, None) if side == "left" else slice(0, keep)
    return {
        "input_ids": ids[cut],
        "token_type_ids": types[cut],
        "attention_mask": [1] * len(ids[cut]),
    }


@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("keep", [5, 12, 40])
def test_sided_pair_encoding_matches_a_pair_assembled_by_parts(tokenizer, side, keep):
    from harness.matrix.inputs import input_set
    from harness.runners.hf.sentence_transformers import sided_pair_encoding

    for q, d in input_set("long-document-query-pairs").items[:4]:
        got = sided_pair_encoding(tokenizer, q, d, keep, side)
        assert got == _by_parts(tokenizer, q, d, keep, side)
        assert len(got["input_ids"]) == keep


def test_a_left_cut_of_the_long_first_text_keeps_both_token_types(tokenizer):
    """What the left-truncated case relies on: the boundary survives the cut, so token types
    placed on the wrong side change the model's input."""
    from harness.matrix.inputs import input_set
    from harness.runners.hf.sentence_transformers import sided_pair_encoding

    for q, d in input_set("long-document-query-pairs").items:
        types = sided_pair_encoding(tokenizer, q, d, 32, "left")["token_type_ids"]
        assert 0 in types and 1 in types


def _capped_by_parts(tok, query: str, document: str, max_q, max_d) -> dict:
    """A second implementation of capped_pair_encoding: each text's ids by the tokenizer's
    `encode` (no special tokens), sliced, then [CLS] q [SEP] d [SEP] assembled by hand."""
    q = tok.encode(query, add_special_tokens=False)
    d = tok.encode(document, add_special_tokens=False)
    q = q if not max_q else q[:max_q]
    d = d if not max_d else d[:max_d]
    ids = [tok.cls_token_id, *q, tok.sep_token_id, *d, tok.sep_token_id]
    return {
        "input_ids": ids,
        "token_type_ids": [0] * (len(q) + 2) + [1] * (len(d) + 1),
        "attention_mask": [1] * len(ids),
    }


@pytest.mark.parametrize("max_q, max_d", [(3, 12), (None, 12), (3, None), (1, 1), (50, 200)])
def test_capped_pair_encoding_matches_a_pair_assembled_by_parts(tokenizer, max_q, max_d):
    from harness.matrix.inputs import input_set
    from harness.runners.hf.sentence_transformers import capped_pair_encoding

    pairs = input_set("long-query-document-pairs").items
    for q, d in pairs:
        got = capped_pair_encoding(tokenizer, q, d, max_q, max_d)
        assert got == _capped_by_parts(tokenizer, q, d, max_q, max_d)
    # what serve-bert-tiny-cross-encoder-*-capped relies on: both limits bite on every pair
    for q, d in pairs:
        assert len(tokenizer.encode(q, add_special_tokens=False)) > 3
        assert len(tokenizer.encode(d, add_special_tokens=False)) > 12 + 1


def test_text_caps_are_request_fields_of_score_cases_only():
    from harness.matrix.schema import Case

    assert req(max_tokens_per_doc=12, max_tokens_per_query=None).text_caps() == {
        "max_tokens_per_doc": 12
    }
    base = {
        "id": "c",
        "family": "f",
        "task": "score",
        "model": {"source": "synthetic", "arch": "BertModel"},
        "inputs": "query-document-pairs",
        "runners": ["hf", "vllm-serve-v1"],
        "tolerances": {"float32": {"max_abs": 1e-5}},
        "request": {"max_tokens_per_doc": 12},
    }
    Case.model_validate(base)
    # offline too: LLM.score takes them as PoolingParams(extra_kwargs=...) (vllm 0.32)
    Case.model_validate({**base, "runners": ["hf", "vllm-v1", "vllm-v2"]})
    assert req(max_tokens_per_query=3).text_caps() == {"max_tokens_per_query": 3}
    assert req(truncate=8).text_caps() == {}
    with pytest.raises(ValueError, match="max_tokens_per_doc applies to task 'score' only"):
        Case.model_validate({**base, "task": "embed"})


@pytest.mark.parametrize("side", ["left", "right"])
def test_the_tokenizers_own_truncation_keeps_the_special_tokens_and_cuts_inside_the_texts(
    tokenizer, side
):
    """tokenizer_pair_encoding (hf: {tokenizer_truncation: true}) is the tokenizer's rule, not
    vLLM's: [CLS] first, [SEP] between and last, the longer text cut from `side`; checked against
    the pair assembled by parts with the long (first) text cut by hand."""
    from harness.matrix.inputs import input_set
    from harness.runners.hf.sentence_transformers import (
        sided_pair_encoding,
        tokenizer_pair_encoding,
    )

    keep = 32
    for q, d in input_set("long-document-query-pairs").items[:4]:
        got = tokenizer_pair_encoding(tokenizer, q, d, keep, side)
        qi = tokenizer.encode(q, add_special_tokens=False)
        di = tokenizer.encode(d, add_special_tokens=False)
        assert len(qi) > len(di) and len(qi) + len(di) + 3 > keep  # the first text is cut
        room = keep - 3 - len(di)
        qi = qi[-room:] if side == "left" else qi[:room]
        ids = [tokenizer.cls_token_id, *qi, tokenizer.sep_token_id, *di, tokenizer.sep_token_id]
        assert got["input_ids"] == ids
        assert got["token_type_ids"] == [0] * (len(qi) + 2) + [1] * (len(di) + 1)
        assert tokenizer.truncation_side == "right"  # the tokenizer is left as it was
        if side == "left":  # vLLM's rule cuts the [CLS] and the start of the pair instead
            assert got["input_ids"] != sided_pair_encoding(tokenizer, q, d, keep, side)["input_ids"]
