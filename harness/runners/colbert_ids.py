"""ColBERT token ids with markers and query [MASK] expansion, assembled from the tokenizer's own
parts (what the vLLM runners send as token-id prompts; harness.matrix.colbert).

Built independently of the reference's path (harness.runners.hf.colbert.pylate_ids, pylate's
ColBERT.tokenize): the text's tokens without special tokens, then [CLS] marker tokens [SEP], then
[MASK] up to the query length. The token-id check holds the two to each other on every item, and
tests/unit/test_colbert_ids.py over many texts and both tokenizer kinds."""

from __future__ import annotations


def marker_id(tokenizer, token: str) -> int:
    """The id of a marker token; a token the vocabulary lacks is an error, never [UNK]."""
    tid = tokenizer.convert_tokens_to_ids(token)
    if tid is None or (tid == tokenizer.unk_token_id and token != tokenizer.unk_token):
        raise ValueError(f"colbert marker {token!r} is not a token of the model's vocabulary")
    return int(tid)


def colbert_ids(tokenizer, text: str, spec: dict, role: str) -> list[int]:
    """`text` as a ColBERT `role` ("query" | "document") with the case's `spec`: [CLS] marker
    tokens [SEP], cut to the role's length (marker included), a query padded with [MASK]."""
    if role == "query":
        length = int(spec["query_length"])
    else:
        length = int(spec.get("document_length") or tokenizer.model_max_length)
    marker = marker_id(tokenizer, spec["query_prefix" if role == "query" else "document_prefix"])
    body = [int(t) for t in tokenizer(text, add_special_tokens=False)["input_ids"]]
    ids = [int(tokenizer.cls_token_id), marker, *body[: length - 3], int(tokenizer.sep_token_id)]
    if role == "query":
        ids += [int(tokenizer.mask_token_id)] * (length - len(ids))
    return ids
