"""A text's `truncation_side` in the st-embed reference (issue #42, class 5): vLLM's documented
rule ("left keeps the last N tokens", "right keeps the first N"), on the tokenizer's whole
encoding with its special tokens, every field cut alike."""

from harness.runners.hf.sentence_transformers import sided_text_encoding


def _tokenizer(text: str) -> dict:
    ids = [101, *(len(w) for w in text.split()), 102]
    return {"input_ids": ids, "token_type_ids": [0] * len(ids), "attention_mask": [1] * len(ids)}


def test_left_keeps_the_last_tokens_of_the_whole_encoding_and_drops_the_leading_cls():
    enc = sided_text_encoding(_tokenizer, "a bb ccc dddd", 3, "left")
    assert enc["input_ids"] == [3, 4, 102]
    assert enc["token_type_ids"] == [0, 0, 0] and enc["attention_mask"] == [1, 1, 1]


def test_right_keeps_the_first_tokens_and_drops_the_trailing_sep():
    enc = sided_text_encoding(_tokenizer, "a bb ccc dddd", 3, "right")
    assert enc["input_ids"] == [101, 1, 2]


def test_a_text_shorter_than_the_cut_is_kept_whole():
    assert sided_text_encoding(_tokenizer, "a", 8, "left")["input_ids"] == [101, 1, 102]
