"""ColBERT ids with markers and query [MASK] expansion: the reference's builder (pylate's
ColBERT.tokenize, rewritten: harness.runners.hf.colbert.pylate_ids) against the vLLM runners'
independent one (harness.runners.colbert_ids), on both synthetic tokenizer kinds."""

from __future__ import annotations

import pytest

from harness.matrix.inputs import input_set
from harness.runners.colbert_ids import colbert_ids
from harness.runners.hf.colbert import pylate_ids
from tests.requests import req

COLBERTV2 = {"query_prefix": "q", "document_prefix": "d", "query_length": 32}
JINA = {"query_prefix": "\u2581Q", "document_prefix": "\u2581D", "query_length": 32}


@pytest.fixture(scope="module")
def tokenizers(tmp_path_factory):
    from transformers import AutoTokenizer

    from harness.models.synthetic.bert import wordpiece_tokenizer
    from harness.models.synthetic.xlm_roberta import xlmr_tokenizer

    out = {}
    for name, write in (("wordpiece", wordpiece_tokenizer), ("unigram", xlmr_tokenizer)):
        d = tmp_path_factory.mktemp(name)
        write(d, {"max_position_embeddings": 128})
        out[name] = AutoTokenizer.from_pretrained(d)
    return out


def _texts() -> list[str]:
    return (
        list(input_set("short-texts").items)
        + list(input_set("overlong-texts").items)
        + [t for pair in input_set("query-document-pairs").items for t in pair]
        + ["", "a"]
    )


CASES = [("wordpiece", COLBERTV2), ("unigram", JINA)]


@pytest.mark.parametrize("kind,spec", CASES)
@pytest.mark.parametrize("role", ["query", "document"])
@pytest.mark.parametrize("doc_len", [None, 16])
def test_both_builders_agree(tokenizers, kind, spec, role, doc_len):
    tok = tokenizers[kind]
    spec = {**spec, "document_length": doc_len}
    for text in _texts():
        ids, mask = pylate_ids(tok, text, spec, role)
        assert ids == colbert_ids(tok, text, spec, role), (kind, role, text[:40])
        assert len(mask) == len(ids)


@pytest.mark.parametrize("kind,spec", CASES)
def test_query_layout(tokenizers, kind, spec):
    tok = tokenizers[kind]
    text = input_set("short-texts").items[0]
    plain = tok(text)["input_ids"]
    for attend in (False, True):
        ids, mask = pylate_ids(tok, text, {**spec, "attend_to_expansion_tokens": attend}, "query")
        n = len(plain) + 1  # the text's own tokens and the marker
        assert len(ids) == spec["query_length"]
        assert ids[0] == plain[0] and ids[2:n] == plain[1:]
        assert ids[1] == tok.convert_tokens_to_ids(spec["query_prefix"])
        assert ids[n:] == [tok.mask_token_id] * (spec["query_length"] - n)
        assert mask == [1] * n + [int(attend)] * (spec["query_length"] - n)


@pytest.mark.parametrize("kind,spec", CASES)
def test_document_layout_and_truncation(tokenizers, kind, spec):
    tok = tokenizers[kind]
    text = input_set("overlong-texts").items[0]
    ids, mask = pylate_ids(tok, text, {**spec, "document_length": 16}, "document")
    plain = tok(text)["input_ids"]
    assert len(plain) > 16 and len(ids) == 16 and mask == [1] * 16
    assert ids[1] == tok.convert_tokens_to_ids(spec["document_prefix"])
    assert ids[:1] + ids[2:-1] == plain[:14] and ids[-1] == plain[-1]
    assert tok.mask_token_id not in ids


def test_tokenizer_left_as_found(tokenizers):
    tok = tokenizers["wordpiece"]
    pad = tok.pad_token
    pylate_ids(tok, "the cat", COLBERTV2, "query")
    padded = tok("a b", padding="max_length", max_length=8)["input_ids"]
    assert tok.pad_token == pad and padded[-1] == tok.convert_tokens_to_ids(pad)


def test_unknown_marker_refused(tokenizers):
    with pytest.raises(ValueError, match="not a token"):
        colbert_ids(tokenizers["wordpiece"], "x", {**COLBERTV2, "query_prefix": "[Q]"}, "query")


COLBERT_CASE = """
defaults:
  runners: [hf, vllm-v1]
  inputs: short-texts
  tolerances:
    float32: {cosine_distance: 1.0e-6, max_abs: 1.0e-5}
families:
  colbert:
    task: token_embed
cases:
  - id: one
    family: colbert
    reference: pylate-colbert-token-embed
    model: {source: synthetic, arch: HF_ColBERT, seed: 30}
    request:
      colbert: {query_prefix: q, document_prefix: d, role: query}
"""


def test_matrix_takes_the_colbert_key(write_matrix):
    from harness.run.matrices import load_matrix

    (case,) = load_matrix(write_matrix(COLBERT_CASE)).cases
    spec = case.request.colbert
    assert spec.role == "query" and spec.query_length == 32
    assert spec.send == "token_ids" and not spec.attend_to_expansion_tokens


@pytest.mark.parametrize(
    "old,new,message",
    [
        (", role: query}", "}", "role: query | document"),
        ("reference: pylate-colbert-token-embed", "reference: colbert-token-embed", "must build"),
        ("runners: [hf, vllm-v1]", "runners: [hf, vllm-serve-v1]", "offline LLM API only"),
        ("role: query}", "role: query, skiplist: [.]}", "skiplist applies to score"),
        ("      colbert:", "      truncate: 8\n      colbert:", "drop truncate"),
    ],
)
def test_matrix_refuses_a_colbert_key_a_side_cannot_follow(write_matrix, old, new, message):
    from harness.matrix.schema import MatrixError
    from harness.run.matrices import load_matrix

    assert old in COLBERT_CASE
    with pytest.raises(MatrixError, match=message):
        load_matrix(write_matrix(COLBERT_CASE.replace(old, new)))


def test_pylate_maxsim_is_colbert_scores_without_skiplist_tokens(monkeypatch, tokenizers):
    """The MaxSim of pylate-colbert-maxsim against a plain loop in float64, the encoder replaced
    by seeded random token vectors (one row per id pylate builds)."""
    from types import SimpleNamespace

    import numpy as np
    import torch

    import harness.runners.hf.colbert as mod

    tok = tokenizers["wordpiece"]
    spec = {**COLBERTV2, "skiplist": [".", ","]}
    rng = np.random.default_rng(0)
    vectors: dict = {}

    def encoder(runner, spec):
        def encode(text, role, note=False):
            n = len(pylate_ids(tok, text, spec, role)[0])
            return vectors.setdefault(
                (text, role), torch.tensor(rng.standard_normal((n, 8)), dtype=torch.float32)
            )

        return encode

    monkeypatch.setattr(mod, "_pylate_encoder", encoder)
    pairs = list(input_set("query-document-pairs").items)
    got = mod._pylate_maxsim(SimpleNamespace(tokenizer=lambda: tok), pairs, req(colbert=spec))
    skip = {tok.convert_tokens_to_ids(w) for w in spec["skiplist"]}
    skipped = 0
    for (q, d), g in zip(pairs, got):
        ids = pylate_ids(tok, d, spec, "document")[0]
        skipped += sum(t in skip for t in ids)
        qv = vectors[(q, "query")].numpy().astype(np.float64)
        dv = vectors[(d, "document")].numpy().astype(np.float64)
        kept = [row for row, t in zip(dv, ids) if t not in skip]
        expected = sum(max(float(a @ b) for b in kept) for a in qv)
        assert len(qv) == 32 and abs(float(g[0]) - expected) < 1e-4 * max(1.0, abs(expected))
    assert skipped > 0  # the documents hold skiplist tokens: the skip is exercised
