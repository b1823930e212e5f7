"""bge-reranker-v2-gemma's recipe (FlagEmbedding's FlagLLMReranker): the prompt against the input
set written apart, the token ids against the model card's prepare_for_model route, and the
synthetic Gemma tokenizer's conventions the recipe relies on (<bos> first, "Yes" one token)."""

from __future__ import annotations

import numpy as np
import pytest

from harness.matrix.inputs import BGE_RERANKER_GEMMA_PROMPT, input_set
from harness.runners.hf.flag_llm_reranker import FLAG_PROMPT, flag_fields, flag_input_ids

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    from transformers import AutoTokenizer

    from harness.models.synthetic.gemma import gemma_tokenizer

    out = tmp_path_factory.mktemp("gemma-tok")
    gemma_tokenizer(out, {"max_position_embeddings": 512})
    return AutoTokenizer.from_pretrained(out)


def test_the_pairs_are_flag_embedding_prompt_split_in_two():
    pairs, raw = input_set("bge-reranker-v2-gemma-pairs").items, input_set("query-document-pairs")
    assert FLAG_PROMPT == BGE_RERANKER_GEMMA_PROMPT  # two transcriptions of FlagEmbedding's
    assert len(pairs) == len(raw.items) == 24
    for (q, d), (query, doc) in zip(pairs, raw.items):
        assert flag_fields(q, d) == (query, doc)
        assert q + d == f"A: {query}\nB: {doc}\n{FLAG_PROMPT}"


def test_a_pair_outside_the_prompt_is_refused():
    with pytest.raises(ValueError, match="bge-reranker-v2-gemma-pairs"):
        flag_fields("what is a cat", "a cat is an animal")


def test_the_ids_are_the_model_card_get_inputs(tok):
    """The card's transformers usage (BAAI/bge-reranker-v2-gemma: prepare_for_model over
    [bos] + query ids and sep + passage ids, then sep + prompt ids, as FlagEmbedding 1.4.2 runs it
    on transformers 4 and 5) gives the recipe's ids; and
    vLLM's joined text tokenizes to them too (the synthetic tokenizer splits at the newlines)."""

    def card(query: str, passage: str) -> list[int]:
        sep = tok("\n", add_special_tokens=False)["input_ids"]
        prompt = tok(FLAG_PROMPT, add_special_tokens=False)["input_ids"]
        q = tok(f"A: {query}", add_special_tokens=False)["input_ids"]
        p = tok(f"B: {passage}", add_special_tokens=False)["input_ids"]
        first, second = [tok.bos_token_id] + q, sep + p
        legacy = getattr(tok, "prepare_for_model", None)  # gone in transformers 5
        if callable(legacy):
            item = legacy(first, second, truncation="only_second", add_special_tokens=False)
            return list(item["input_ids"]) + sep + prompt
        # FlagEmbedding's prepare_for_model_compat without special tokens (utils/
        # tokenizer_compat.py): the two id lists joined, the second cut only past max_length
        return first + second + sep + prompt

    for q, d in input_set("bge-reranker-v2-gemma-pairs").items:
        ids = flag_input_ids(tok, *flag_fields(q, d))
        assert ids == card(*flag_fields(q, d))
        assert ids[0] == tok.bos_token_id != tok.pad_token_id
        assert ids == list(tok(q + d)["input_ids"])


def test_yes_is_one_token_distinct_from_yes_lowercase(tok):
    """The recipe's yes_loc is FlagEmbedding's tokenizer('Yes')[0]: one whole token here, and
    "yes" another (mutation classifier_token_lowercased reads that row)."""
    yes = tok("Yes", add_special_tokens=False)["input_ids"]
    assert len(yes) == 1 and tok.convert_ids_to_tokens(yes[0]) == "Yes"
    assert tok.convert_tokens_to_ids("yes") not in (None, yes[0], tok.unk_token_id)


def test_the_score_is_the_sigmoid_of_the_yes_logit():
    """FlagEmbedding's normalize: its sigmoid, 1 / (1 + exp(-x)) in Python floats, against the
    recipe's torch.sigmoid in float32."""
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(27).normal(0.0, 5.0, 64).astype(np.float32)
    ours = torch.sigmoid(torch.from_numpy(x)).numpy()
    theirs = np.array([1.0 / (1.0 + np.exp(-float(v))) for v in x])
    np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-7)
