"""Recipes of sentence-transformers models: SentenceTransformer.encode and CrossEncoder.predict."""

from __future__ import annotations

import numpy as np

from harness.matrix.request import Request
from harness.runners.hf import HFRunner, form_inputs, limit, recipe, torch_dtype


@recipe(
    "st-embed",
    default_for=["embed"],
    honours=["use_activation", "prompt_name", "add_special_tokens", "truncation_side"],
)
def _st_embed(runner: HFRunner, items: list, request: Request) -> list[np.ndarray]:
    """sentence-transformers encode: its own pooling and normalize modules decide the vector.
    `dimensions` is encode's `truncate_dim`, with its semantics (sentence_transformer/model.py,
    encode): the model's output, Normalize module included, is cut to the first `dimensions`
    values and not normalised again unless the case says `hf: {normalize_embeddings: true}`
    (encode's own option, applied after the cut; what a Matryoshka model card asks for).
    `use_activation` (vLLM's name for an embedding's L2 normalisation): true is encode's
    normalize_embeddings; false is the model's modules without its Normalize module (encode of a
    SentenceTransformer built from the others), so the vector is the pooled (and Dense) one.
    `add_special_tokens` is the tokenizer's own argument, given through encode's
    processing_kwargs (sentence-transformers' per-call tokenizer options)."""
    st = runner.sentence_transformer()
    normalize = bool(request.hf.get("normalize_embeddings"))
    if request.use_activation is not None:
        if request.prompt_forms or request.hf.get("normalize_embeddings") is not None:
            raise ValueError(
                "use_activation with prompt forms or normalize_embeddings is not supported"
            )
        if request.use_activation:
            normalize = True
        else:
            st = runner.loaded("st-without-normalize", lambda: _without_normalize(st))
    if request.prompt_forms:
        return _st_embed_forms(runner, st, items, request)
    if request.truncation_side:
        return _st_embed_sided(runner, st, items, request)
    dims = int(request.dimensions) if request.dimensions else None
    full = st.get_sentence_embedding_dimension()
    if dims is not None and full is not None and dims > full:
        raise ValueError(f"dimensions {dims} is more than the model's {full}")
    prompt_name = request.prompt_name
    if prompt_name is not None and prompt_name not in (st.prompts or {}):
        raise ValueError(
            f"prompt_name {prompt_name!r}: the model's config_sentence_transformers.json has "
            f"prompts {sorted(st.prompts or {})}"
        )
    special = request.add_special_tokens
    text_kw = (
        {"processing_kwargs": {"text": {"add_special_tokens": special}}}
        if special is not None
        else {}
    )
    with limit(st, "max_seq_length", request.truncate):
        out = st.encode(
            list(items),
            batch_size=len(items),
            convert_to_numpy=True,
            show_progress_bar=False,
            truncate_dim=dims,
            normalize_embeddings=normalize,
            prompt_name=prompt_name,
            **text_kw,
        )
        # the prompt encode prepended: the named one, else the model's default_prompt_name's
        prompt = (st.prompts or {}).get(prompt_name or st.default_prompt_name or "", "")
        for it in items:  # preprocess is what encode tokenizes with, on the prompted text
            runner.note_tokens(st.preprocess([prompt + it], **text_kw)["input_ids"][0])
    return [np.asarray(v, dtype=np.float32) for v in out]


def sided_text_encoding(tokenizer, text: str, keep: int, side: str) -> dict:
    """A text truncated to `keep` tokens from `side`, the rule a request's `truncation_side`
    names (vLLM documents it: "left keeps the last N tokens", "right keeps the first N"): the
    tokenizer's whole encoding, special tokens included, then the last (left) or first (right)
    `keep` positions of every field. As for pairs (sided_pair_encoding): not the tokenizer's own
    `truncation_side`, which cuts the text and keeps the special tokens."""
    full = tokenizer(text)
    cut = slice(-keep, None) if side == "left" else slice(0, keep)
    return {k: list(v)[cut] for k, v in full.items()}


def _st_embed_sided(runner: HFRunner, st, items: list, request: Request) -> list[np.ndarray]:
    """`truncate` from the request's `truncation_side` (sided_text_encoding; -1: the model's
    max_seq_length), the kept tokens run through the model's own modules (`st.forward`:
    Transformer, Pooling, Normalize), as encode runs them."""
    import torch

    if request.dimensions or request.prompt_name or request.use_activation is not None:
        raise ValueError("truncation_side with dimensions, prompt_name or use_activation")
    if request.hf.get("normalize_embeddings") or not request.truncate:
        raise ValueError("truncation_side needs truncate, and no normalize_embeddings")
    keep = st.max_seq_length if request.truncate == -1 else int(request.truncate)
    outs = []
    with torch.inference_mode():
        for text in items:
            enc = sided_text_encoding(st.tokenizer, text, keep, str(request.truncation_side))
            runner.note_tokens(enc["input_ids"])
            features = {k: torch.tensor([v], device=st.device) for k, v in enc.items()}
            vec = st.forward(features)["sentence_embedding"][0]
            outs.append(vec.float().cpu().numpy().astype(np.float32))
    return outs


def _without_normalize(st):
    """The SentenceTransformer of `st`'s modules minus its Normalize modules (same weights)."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.models import Normalize

    kept = [m for m in st if not isinstance(m, Normalize)]
    out = SentenceTransformer(modules=kept, device=str(st.device))
    out.prompts, out.default_prompt_name = dict(st.prompts or {}), st.default_prompt_name
    return out


def _st_embed_forms(runner: HFRunner, st, items: list, request: Request) -> list[np.ndarray]:
    """sentence-transformers' own modules (Transformer, Pooling, Normalize: `st.forward`) on each
    item as its prompt form gives it: token ids, or the model's input embeddings of them as
    `inputs_embeds` (Transformer passes what its model's forward takes). A text is tokenized as
    encode would (the same ids: `form_inputs` records them, the verdict checks them)."""
    import torch

    if request.dimensions or request.hf.get("normalize_embeddings"):
        raise ValueError("prompt forms with dimensions / normalize_embeddings are not supported")
    if request.add_special_tokens is not None:
        raise ValueError("prompt forms with add_special_tokens are not supported")
    if request.prompt_name:
        raise ValueError("prompt forms with a prompt_name are not supported")
    outs = []
    with torch.inference_mode():
        for features in form_inputs(runner, st[0].auto_model, items, request.prompt_forms):
            vec = st.forward(features)["sentence_embedding"][0]
            outs.append(vec.float().cpu().numpy().astype(np.float32))
    return outs


@recipe(
    "st-cross-encoder",
    default_for=["score"],
    honours=["truncation_side", "max_tokens_per_query", "max_tokens_per_doc"],
)
def _cross_encoder(runner: HFRunner, items: list, request: Request) -> list[np.ndarray]:
    """sentence-transformers CrossEncoder.predict on (query, document) pairs; sigmoid for 1
    label. With `truncation_side` (a request's side of `truncate`), see `sided_pair_encoding`:
    the CrossEncoder's own tokenizer and model, run on the kept tokens, its activation after."""

    def make():
        from sentence_transformers import CrossEncoder

        assert runner.req is not None
        # in the case's dtype, as every other recipe (without it a half-precision run compared
        # vLLM in bf16 with a float32 CrossEncoder: HF's own half error read as 0)
        return CrossEncoder(
            runner.req.model_dir,
            device=runner.req.device,
            local_files_only=True,
            trust_remote_code=runner.req.trust_remote_code,
            model_kwargs={"dtype": torch_dtype(runner.req.dtype)},
        )

    ce = runner.loaded("CrossEncoder", make)
    if request.max_tokens_per_query or request.max_tokens_per_doc:
        if request.truncate:
            raise ValueError("max_tokens_per_query/doc with truncate: not implemented together")
        q, d = request.max_tokens_per_query, request.max_tokens_per_doc
        return _encoded_cross_encoder(
            runner, ce, items, lambda tok, query, doc: capped_pair_encoding(tok, query, doc, q, d)
        )
    if request.hf.get("tokenizer_truncation") and not request.truncation_side:
        raise ValueError("hf option tokenizer_truncation needs the case's truncation_side")
    if request.truncation_side:
        keep, side = int(request.truncate), str(request.truncation_side)
        sided = (
            tokenizer_pair_encoding
            if request.hf.get("tokenizer_truncation")
            else sided_pair_encoding
        )
        return _encoded_cross_encoder(
            runner,
            ce,
            items,
            lambda tok, query, doc: sided(tok, query, doc, keep, side),
        )
    with limit(ce, "max_length", request.truncate):
        scores = ce.predict(
            [tuple(p) for p in items],
            batch_size=len(items),
            show_progress_bar=False,
            convert_to_numpy=True,
        )
        for p in items:  # preprocess is what predict tokenizes with
            runner.note_tokens(ce.preprocess([tuple(p)])["input_ids"][0])
    return [np.asarray(s, dtype=np.float32).reshape(-1) for s in scores]


def sided_pair_encoding(tokenizer, query: str, document: str, keep: int, side: str) -> dict:
    """A pair truncated to `keep` tokens from `side`, the rule a request's `truncation_side`
    names (vLLM documents it: "left keeps the last N tokens", "right keeps the first N"): the
    tokenizer's whole encoding of the pair ([CLS] query [SEP] document [SEP] with token types 0
    then 1), then the last (left) or first (right) `keep` positions of every field, token types
    and attention mask with the ids they belong to. It is not the tokenizer's own
    `truncation_side` with `truncation=True`, which cuts inside the longer text and keeps the
    special tokens (docs/explanation/checks.md: measured, the scores differ by up to 0.22)."""
    full = tokenizer(query, document)
    cut = slice(-keep, None) if side == "left" else slice(0, keep)
    return {k: list(v)[cut] for k, v in full.items()}


def tokenizer_pair_encoding(tokenizer, query: str, document: str, keep: int, side: str) -> dict:
    """A pair truncated to `keep` tokens by the tokenizer's OWN rule (case option `hf:
    {tokenizer_truncation: true}`): `truncation_side` set on the tokenizer, `truncation=True`
    (longest_first), `max_length=keep`. It cuts inside the longer text, from `side`, and keeps the
    special tokens: a recorded divergence of token ids from vLLM's rule (sided_pair_encoding)."""
    before = tokenizer.truncation_side
    tokenizer.truncation_side = side
    try:
        enc = tokenizer(query, document, truncation=True, max_length=keep)
    finally:
        tokenizer.truncation_side = before
    return {k: list(v) for k, v in enc.items()}


def capped_pair_encoding(
    tokenizer, query: str, document: str, max_query: int | None, max_doc: int | None
) -> dict:
    """A pair whose query and document are each limited to a number of their own tokens, as
    vLLM documents the /score and /rerank request fields (entrypoints/pooling/scoring/
    protocol.py): max_tokens_per_query "Queries longer than this will be truncated to this
    length", max_tokens_per_doc "Documents longer than this will be truncated to this length.
    0 means no document-level truncation". Here: each text's own tokens (the tokenizer's, no
    special tokens) cut to its first `max` by the tokenizers library's `Encoding.truncate`, and
    the pair built by the tokenizer's own post-processor (tokenizer.json's pair template, e.g.
    [CLS] query [SEP] document [SEP] with token types 0, then 1)."""
    backend = tokenizer.backend_tokenizer  # a fast tokenizer's `tokenizers.Tokenizer`
    encs = []
    for text, cap in ((query, max_query), (document, max_doc)):
        enc = backend.encode(text, add_special_tokens=False)
        if cap:
            enc.truncate(int(cap))  # keeps the first `cap` tokens (direction "right")
        encs.append(enc)
    pair = backend.post_process(encs[0], encs[1], add_special_tokens=True)
    return {
        "input_ids": list(pair.ids),
        "token_type_ids": list(pair.type_ids),
        "attention_mask": list(pair.attention_mask),
    }


def _encoded_cross_encoder(runner: HFRunner, ce, items: list, encode) -> list[np.ndarray]:
    """The CrossEncoder's model and activation on each pair as `encode(tokenizer, q, d)` gives
    its input ids, token types and attention mask."""
    import torch

    device = runner.req.device if runner.req else "cpu"
    outs = []
    with torch.inference_mode():
        for q, d in items:
            enc = encode(ce.tokenizer, q, d)
            runner.note_tokens(enc["input_ids"])
            batch = {k: torch.tensor([v], device=device) for k, v in enc.items()}
            logits = ce.model(**batch).logits
            outs.append(ce.activation_fn(logits).float().cpu().numpy().astype(np.float32)[0])
    return [o.reshape(-1) for o in outs]


@recipe("st-embed-cosine")
def _st_embed_cosine(runner: HFRunner, items: list, request: Request) -> list[np.ndarray]:
    """An embedding model's score of a (query, document) pair: sentence-transformers' encode of
    each text, then its own `util.cos_sim` (the similarity its Semantic Textual Similarity
    documentation scores pairs with). Each distinct text is encoded once, all in one batch. No
    token ids are noted: a pair is two sequences, not one (as for MaxSim pairs)."""
    from sentence_transformers.util import cos_sim

    if request.truncate or request.dimensions or request.prompt_name:
        raise ValueError("st-embed-cosine takes no truncate, dimensions or prompt_name")
    st = runner.sentence_transformer()
    texts = list(dict.fromkeys(t for pair in items for t in pair))
    emb = st.encode(texts, batch_size=len(texts), convert_to_tensor=True, show_progress_bar=False)
    at = {t: k for k, t in enumerate(texts)}
    return [
        np.asarray([float(cos_sim(emb[at[q]], emb[at[d]])[0, 0])], dtype=np.float32)
        for q, d in items
    ]
