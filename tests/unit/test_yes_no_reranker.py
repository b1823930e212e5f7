"""The LLM-reranker recipes (Qwen3-Reranker's model card, mxbai-rerank-v2's published code), each
part against a second, independent implementation: the score formula, the prompt, the token ids."""

from __future__ import annotations

import numpy as np
import pytest

from harness.matrix.inputs import QWEN3_RERANKER_INSTRUCTION, input_set
from harness.runners.hf.yes_no_reranker import (
    CARD_PREFIX,
    CARD_SUFFIX,
    MXBAI_PREFIX,
    MXBAI_SEP,
    MXBAI_SUFFIX,
    MXBAI_TASK,
    card_fields,
    card_input_ids,
    format_instruction,
    mxbai_fields,
    mxbai_input_ids,
    mxbai_relevance,
    yes_probability,
)

torch = pytest.importorskip("torch")


def _sigmoid_of_yes_minus_no(logits: np.ndarray, no: int, yes: int) -> np.ndarray:
    """softmax([no, yes])[1] = 1 / (1 + exp(no - yes)): numpy, float64, no log-softmax."""
    return 1.0 / (1.0 + np.exp(logits[..., no] - logits[..., yes]))


def test_the_card_score_is_the_sigmoid_of_the_yes_minus_no_logit():
    rng = np.random.default_rng(27)
    logits = rng.normal(0.0, 6.0, (200, 40))
    logits[:3, 5], logits[:3, 9] = [80.0, -80.0, 0.0], [-80.0, 80.0, 0.0]  # far tails, a tie
    ours = yes_probability(torch.from_numpy(logits), 5, 9).numpy()
    assert np.isfinite(ours).all()
    np.testing.assert_allclose(ours, _sigmoid_of_yes_minus_no(logits, 5, 9), rtol=1e-12, atol=0)
    assert ours[2] == 0.5 and ours[0] < 1e-60 and ours[1] == 1.0
    # only the two logits count: the card's softmax is over [no, yes], not over the vocabulary
    moved = logits.copy()
    moved[:, [0, 1, 2, 20, 39]] += 30.0
    np.testing.assert_array_equal(yes_probability(torch.from_numpy(moved), 5, 9).numpy(), ours)
    # the rows swapped (mutation yes_no_tokens_swapped) give 1 - P(yes): far from it
    swapped = yes_probability(torch.from_numpy(logits), 9, 5).numpy()
    np.testing.assert_allclose(swapped, 1.0 - ours, atol=1e-12)
    assert np.abs(swapped - ours).max() > 0.5


def test_the_pairs_are_the_card_prompt_split_in_two():
    """The input set (written from the card's template as vLLM's example splits it) and the
    recipe (the card's transformers usage, transcribed separately) give the same prompt."""
    pairs, raw = input_set("qwen3-reranker-pairs").items, input_set("query-document-pairs").items
    assert len(pairs) == len(raw) == 24
    for (q, d), (query, doc) in zip(pairs, raw):
        instruction, q_back, d_back = card_fields(q, d)
        assert (instruction, q_back, d_back) == (QWEN3_RERANKER_INSTRUCTION, query, doc)
        assert q + d == CARD_PREFIX + format_instruction(instruction, query, doc) + CARD_SUFFIX
    assert format_instruction("I", "Q", "D") == "<Instruct>: I\n<Query>: Q\n<Document>: D"


@pytest.mark.parametrize(
    "pair",
    [
        ("where does the cat sit", "The cat sat on the stone."),  # a plain pair: no prompt
        (CARD_PREFIX + "<Query>: q\n", "<Document>: d" + CARD_SUFFIX),  # no instruction
        (CARD_PREFIX + "<Instruct>: i\n<Query>: q\n", "<Document>: d"),  # no suffix
    ],
)
def test_a_pair_not_in_the_card_prompt_is_refused(pair):
    with pytest.raises(ValueError, match="not in Qwen3-Reranker's prompt"):
        card_fields(*pair)


def test_the_card_ids_are_the_tokenization_of_the_whole_prompt(tmp_path):
    """prefix + body + suffix tokenized apart (the card) equal the joined text tokenized once
    (what vLLM's score API does with an LLM reranker's pair): with the synthetic Qwen tokenizer,
    whose "yes" and "no" are single tokens."""
    pytest.importorskip("transformers")
    from transformers import AutoTokenizer

    from harness.models.synthetic.qwen import qwen_tokenizer

    qwen_tokenizer(tmp_path, {"max_position_embeddings": 512})
    tok = AutoTokenizer.from_pretrained(tmp_path)
    for word in ("yes", "no"):
        assert tok.convert_ids_to_tokens(tok.convert_tokens_to_ids(word)) == word
    for q, d in input_set("qwen3-reranker-pairs").items:
        ids = card_input_ids(tok, *card_fields(q, d))
        assert ids == tok(q + d)["input_ids"]
        assert ids[0] == tok.convert_tokens_to_ids("<|im_start|>") and len(ids) > 100


# mxbai-rerank-v2: "1" against "0", its published code's prompt


def test_the_mxbai_relevance_is_the_two_way_softmax_of_zero_and_one():
    """sigmoid(logit "1" - logit "0") (the recipe, as mxbai's code) against numpy's softmax over
    the two logits, normalised by their maximum."""
    rng = np.random.default_rng(28)
    logits = rng.normal(0.0, 6.0, (200, 60))
    two = logits[:, [3, 4]]
    e = np.exp(two - two.max(axis=1, keepdims=True))
    softmax_one = e[:, 1] / e.sum(axis=1)
    ours = mxbai_relevance(torch.from_numpy(logits), 3, 4).numpy()
    np.testing.assert_allclose(ours, softmax_one, rtol=1e-12, atol=1e-300)
    swapped = mxbai_relevance(torch.from_numpy(logits), 4, 3).numpy()
    np.testing.assert_allclose(swapped, 1.0 - ours, atol=1e-12)


def test_the_mxbai_pairs_are_its_prompt_split_at_the_separator():
    pairs, raw = input_set("mxbai-rerank-v2-pairs").items, input_set("query-document-pairs").items
    assert len(pairs) == len(raw) == 24
    for (q, d), (query, doc) in zip(pairs, raw):
        assert mxbai_fields(q, d) == (query, doc)
        assert q + d == (
            MXBAI_PREFIX
            + f"query: {query}"
            + MXBAI_SEP
            + f"document: {doc}"
            + MXBAI_SEP
            + MXBAI_TASK
            + MXBAI_SUFFIX
        )
    with pytest.raises(ValueError, match="not in mxbai-rerank-v2's prompt"):
        mxbai_fields(*input_set("qwen3-reranker-pairs").items[0])


def test_the_mxbai_ids_are_the_tokenization_of_the_whole_prompt(tmp_path):
    pytest.importorskip("transformers")
    from transformers import AutoTokenizer

    from harness.models.synthetic.qwen import qwen_tokenizer

    qwen_tokenizer(tmp_path, {"max_position_embeddings": 512})
    tok = AutoTokenizer.from_pretrained(tmp_path)
    for digit in ("0", "1"):
        assert len(tok(digit, add_special_tokens=False)["input_ids"]) == 1
    for q, d in input_set("mxbai-rerank-v2-pairs").items:
        ids = mxbai_input_ids(tok, *mxbai_fields(q, d))
        assert ids == tok(q + d)["input_ids"] and len(ids) < 512
