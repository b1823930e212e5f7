"""Recipes of ColBERT late-interaction models: token embeddings and MaxSim scores."""

from __future__ import annotations

import numpy as np

from harness.matrix.request import Request
from harness.runners.hf import HFRunner, once_per_item, recipe, reference_model


def _colbert_forward(runner: HFRunner, normalize: bool = True):
    """model inputs (batch of one) -> [tokens, dim] token embeddings, for both ColBERT layouts:
    `HF_ColBERT` (bert.* + linear, harness.models.refmodels) or a backbone + sentence-transformers
    1_Dense. `normalize` False (a case's `use_activation: false`): the projections themselves."""
    from pathlib import Path

    import torch

    from harness.models.refmodels import REFERENCE_ARCHS

    assert runner.req is not None
    d = Path(runner.req.model_dir)
    if runner.architecture() in REFERENCE_ARCHS:
        model = reference_model(runner)
        if normalize:
            forward = lambda enc: model(**enc)[0]  # noqa: E731
        elif type(model).__name__ == "BertColBERT":
            forward = lambda enc: model(**enc, normalize=False)[0]  # noqa: E731
        else:
            raise ValueError(
                f"use_activation false: the {type(model).__name__} reference normalises inside "
                f"its forward; HF_ColBERT and backbone + 1_Dense layouts implement it"
            )
    else:
        from safetensors.torch import load_file

        backbone = runner.auto_model("AutoModel")
        weight = runner.loaded(
            "dense", lambda: load_file(str(d / "1_Dense" / "model.safetensors"))["linear.weight"]
        )

        def forward(enc):
            hidden = backbone(**enc, use_cache=False).last_hidden_state[0]
            projected = hidden @ weight.to(hidden.device, hidden.dtype).T
            return torch.nn.functional.normalize(projected, dim=-1) if normalize else projected

    return forward


def _colbert_encoder(runner: HFRunner, normalize: bool = True):
    """text -> [tokens, dim] token embeddings of the text as the tokenizer encodes it."""
    import torch

    assert runner.req is not None
    tok = runner.tokenizer()
    forward = _colbert_forward(runner, normalize)

    def encode(text: str, max_length: int | None = None, note: bool = False):
        with torch.inference_mode():
            enc = tok(text, return_tensors="pt", truncation=True, max_length=max_length)
            if note:  # one item as the model ran it (not the texts of MaxSim pairs)
                runner.note_tokens(enc["input_ids"][0])
            return forward({k: v.to(runner.req.device) for k, v in enc.items()}).float()

    return encode


@recipe("colbert-token-embed", default_for=["token_embed"], honours=["use_activation"])
def _colbert_tokens(runner: HFRunner, items: list, request: Request) -> list[np.ndarray]:
    """Every token (special tokens included): projection, then per-token L2 normalisation (not
    with `use_activation: false`)."""
    encode = _colbert_encoder(runner, normalize=request.use_activation is not False)
    return [encode(t, request.truncate, note=True).cpu().numpy().astype(np.float32) for t in items]


@recipe("colbert-maxsim")
def _colbert_maxsim(runner: HFRunner, items: list, request: Request) -> list[np.ndarray]:
    """Late interaction: sum over query tokens of the max dot product over document tokens."""
    colbert = _colbert_encoder(runner)
    encode = once_per_item(lambda text: colbert(text, request.truncate))
    out = []
    for q, d in items:
        sim = encode(q) @ encode(d).T
        out.append(np.asarray([float(sim.max(dim=1).values.sum())], dtype=np.float32))
    return out


def pylate_ids(tokenizer, text: str, spec: dict, role: str) -> tuple[list[int], list[int]]:
    """(input ids, attention mask) of one text as pylate 1.6.0's `ColBERT.tokenize`
    (pylate/models/colbert.py) builds them: the sentence-transformers Transformer module
    tokenizes with max_seq_length = length - 1 (truncation, and for a query padding="max_length"
    with the pad id set to [MASK]: ColBERT.__init__ sets tokenizer.pad_token_id =
    mask_token_id), then `insert_prefix_token` puts the marker after the first token (attention
    1), and `attend_to_expansion_tokens` sets a query's whole attention mask to 1."""
    from harness.runners.colbert_ids import marker_id

    query = role == "query"
    length = int(spec["query_length"] if query else spec.get("document_length") or 0)
    length = length or int(tokenizer.model_max_length)
    prefix = marker_id(tokenizer, spec["query_prefix" if query else "document_prefix"])
    pad_token = tokenizer.pad_token
    tokenizer.pad_token = tokenizer.mask_token  # pylate's pad id; put back below
    try:
        enc = tokenizer(
            [text],
            padding="max_length" if query else True,
            truncation="longest_first",
            max_length=length - 1,
        )
    finally:
        tokenizer.pad_token = pad_token
    ids, mask = [int(t) for t in enc["input_ids"][0]], [int(m) for m in enc["attention_mask"][0]]
    ids, mask = ids[:1] + [prefix] + ids[1:], mask[:1] + [1] + mask[1:]
    if query and spec.get("attend_to_expansion_tokens"):
        mask = [1] * len(mask)
    return ids, mask


def _pylate_encoder(runner: HFRunner, spec: dict):
    """(text, role) -> [tokens, dim] embeddings of pylate's ids and attention mask."""
    import torch

    assert runner.req is not None
    tok = runner.tokenizer()
    forward = _colbert_forward(runner)

    def encode(text: str, role: str, note: bool = False):
        ids, mask = pylate_ids(tok, text, spec, role)
        if note:
            runner.note_tokens(ids)
        dev = runner.req.device
        enc = {"input_ids": torch.tensor([ids], device=dev)}
        if not all(mask):  # the reference models take an all-ones mask as none (Jina: only that)
            enc["attention_mask"] = torch.tensor([mask], device=dev)
        with torch.inference_mode():
            return forward(enc).float()

    return encode


def _colbert_spec(request: Request, recipe_name: str) -> dict:
    spec = request.colbert
    if spec is None:
        raise ValueError(
            f"reference recipe {recipe_name!r} builds ColBERT ids from the case's `colbert:` key "
            f"(markers, query length); the case has none"
        )
    return spec.model_dump()


@recipe("pylate-colbert-token-embed")
def _pylate_tokens(runner: HFRunner, items: list, request: Request) -> list[np.ndarray]:
    """Every token of pylate's ids (marker, [MASK] expansion of a query), projected and
    L2-normalised as pylate's ColBERT modules do (backbone, Dense, normalisation). No skiplist:
    pylate drops a document's punctuation tokens after the forward, as vLLM's user would."""
    spec = _colbert_spec(request, "pylate-colbert-token-embed")
    encode = _pylate_encoder(runner, spec)
    return [encode(t, spec["role"], note=True).cpu().numpy().astype(np.float32) for t in items]


@recipe("pylate-colbert-maxsim")
def _pylate_maxsim(runner: HFRunner, items: list, request: Request) -> list[np.ndarray]:
    """pylate's scoring of (query, document): the query's tokens as pylate builds them (marker,
    [MASK] expansion), the document's (marker) without its skiplist tokens (the case's
    `skiplist`, pylate's skiplist_words), then colbert_scores: the sum over query tokens of the
    max dot product over document tokens."""
    from harness.runners.colbert_ids import marker_id

    spec = _colbert_spec(request, "pylate-colbert-maxsim")
    encode = _pylate_encoder(runner, spec)
    tok = runner.tokenizer()
    skip = {marker_id(tok, w) for w in spec.get("skiplist") or []}
    out = []
    for q, d in items:
        ids, _ = pylate_ids(tok, d, spec, "document")
        doc = encode(d, "document")[[i for i, t in enumerate(ids) if t not in skip]]
        sim = encode(q, "query") @ doc.T
        out.append(np.asarray([float(sim.max(dim=1).values.sum())], dtype=np.float32))
    return out
