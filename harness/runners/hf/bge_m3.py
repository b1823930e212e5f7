"""Recipes of BGE-M3 (BAAI/bge-m3): dense, sparse (lexical) and ColBERT outputs of one forward.

The reference is FlagEmbedding's own definition (github.com/FlagOpen/FlagEmbedding):
`FlagEmbedding/finetune/embedder/encoder_only/m3/modeling.py` (EncoderOnlyEmbedderM3Model:
`_dense_embedding` cls, `_sparse_embedding` relu(sparse_linear(h)), `_colbert_embedding`
colbert_linear(h[:, 1:]); normalize_embeddings L2-normalises dense and ColBERT vectors) and
`FlagEmbedding/inference/embedder/encoder_only/m3.py` (M3Embedder: the backbone is
transformers' AutoModel, the heads are `torch.load`ed from sparse_linear.pt / colbert_linear.pt;
`_process_token_weights` drops the cls, eos, pad and unk ids and keeps the max weight per id;
`_process_colbert_vecs` keeps tokens_num - 1 vectors, i.e. every token but the cls, eos included).

vLLM returns the sparse weights per token, cls and eos dropped (not the id -> weight dict): the
`bge-m3-sparse` recipe returns FlagEmbedding's token weights at those positions, and
`lexical_weights` is its dict (the same numbers keyed by id) for whoever needs that view. Each
formula here is a small public function, cross-checked against numpy in
tests/unit/test_bge_m3_recipes.py. No vLLM import.
"""

from __future__ import annotations

import numpy as np

from harness.matrix.request import Request
from harness.runners.hf import HFRunner, recipe


def dense_vector(hidden):
    """[tokens, hidden] -> the CLS hidden state, L2-normalised (pooling "cls", normalized)."""
    import torch

    return torch.nn.functional.normalize(hidden[0], dim=-1)


def sparse_token_weights(hidden, sparse_linear):
    """[tokens, hidden] -> [tokens]: relu(sparse_linear(h)) per token."""
    import torch

    return torch.relu(sparse_linear(hidden)).squeeze(-1)


def colbert_vectors(hidden, colbert_linear):
    """[tokens, hidden] -> [tokens - 1, dim]: colbert_linear of every token but the first (cls),
    each L2-normalised."""
    import torch

    return torch.nn.functional.normalize(colbert_linear(hidden[1:]), dim=-1)


def lexical_weights(weights, input_ids, unused_ids) -> dict[int, float]:
    """FlagEmbedding's lexical weights: token id -> its largest weight, special ids (cls, eos,
    pad, unk) and zero weights left out."""
    out: dict[int, float] = {}
    for w, idx in zip(np.asarray(weights).tolist(), np.asarray(input_ids).tolist()):
        if int(idx) not in unused_ids and w > 0 and w > out.get(int(idx), 0.0):
            out[int(idx)] = float(w)
    return out


def _m3(runner: HFRunner):
    """text -> (hidden [tokens, hidden], input_ids [tokens]) and the two heads, loaded once."""
    from pathlib import Path

    import torch

    assert runner.req is not None
    backbone = runner.auto_model("XLMRobertaModel")
    tok = runner.tokenizer()
    d = Path(runner.req.model_dir)

    def head(name: str):
        # FlagEmbedding: nn.Linear(hidden, out).load_state_dict(torch.load(name.pt)); plain
        # tensors, so weights_only (no code can run) reads them the same
        state = torch.load(str(d / f"{name}.pt"), map_location="cpu", weights_only=True)
        out_f, in_f = state["weight"].shape
        lin = torch.nn.Linear(in_f, out_f)
        lin.load_state_dict(state)
        dtype = next(backbone.parameters()).dtype
        return lin.to(runner.req.device, dtype).eval()

    heads = runner.loaded(
        "bge-m3-heads", lambda: {n: head(n) for n in ("sparse_linear", "colbert_linear")}
    )

    def encode(text: str, max_length: int | None):
        with torch.inference_mode():
            enc = tok(text, return_tensors="pt", truncation=True, max_length=max_length)
            runner.note_tokens(enc["input_ids"][0])
            enc = {k: v.to(runner.req.device) for k, v in enc.items()}
            hidden = backbone(**enc, return_dict=True).last_hidden_state[0]
            return hidden, enc["input_ids"][0]

    return encode, heads


def _special_filtered(weights, input_ids, tok):
    """The per-token weights without the leading cls and the trailing eos, as vLLM returns them
    (FlagEmbedding drops both ids from its lexical weights)."""
    ids = input_ids.tolist()
    start = 1 if ids and ids[0] == tok.cls_token_id else 0
    end = len(ids) - 1 if ids and ids[-1] == tok.eos_token_id else len(ids)
    return weights[start:end]


def _each(runner: HFRunner, items: list, request: Request, fn) -> list[np.ndarray]:
    import torch

    encode, heads = _m3(runner)
    out = []
    with torch.inference_mode():
        for text in items:
            hidden, ids = encode(text, request.truncate)
            out.append(fn(hidden, ids, heads).float().cpu().numpy().astype(np.float32))
    return out


@recipe("bge-m3-dense")
def _dense(runner: HFRunner, items: list, request: Request) -> list[np.ndarray]:
    """[hidden]: the CLS hidden state, L2-normalised."""
    return _each(runner, items, request, lambda h, ids, heads: dense_vector(h))


@recipe("bge-m3-sparse")
def _sparse(runner: HFRunner, items: list, request: Request) -> list[np.ndarray]:
    """[tokens - 2]: relu(sparse_linear(h)) per token, the cls and eos positions dropped."""
    tok = runner.tokenizer()
    return _each(
        runner,
        items,
        request,
        lambda h, ids, heads: _special_filtered(
            sparse_token_weights(h, heads["sparse_linear"]), ids, tok
        ),
    )


@recipe("bge-m3-colbert")
def _colbert(runner: HFRunner, items: list, request: Request) -> list[np.ndarray]:
    """[tokens - 1, dim]: colbert_linear(h[1:]) per token, each L2-normalised."""
    return _each(
        runner, items, request, lambda h, ids, heads: colbert_vectors(h, heads["colbert_linear"])
    )


@recipe("bge-m3-dense-and-sparse")
def _dense_and_sparse(runner: HFRunner, items: list, request: Request) -> list[np.ndarray]:
    """[hidden + tokens - 2]: vLLM's combined `embed&token_classify` output, the dense vector
    followed by the sparse token weights (cls and eos dropped)."""
    import torch

    tok = runner.tokenizer()
    return _each(
        runner,
        items,
        request,
        lambda h, ids, heads: torch.cat(
            [
                dense_vector(h),
                _special_filtered(sparse_token_weights(h, heads["sparse_linear"]), ids, tok),
            ]
        ),
    )
