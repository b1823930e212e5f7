"""Texts sent as token ids or as prompt embeddings, the same way on every side (inside workers).

Token ids are the model's own tokenizer's (`tokenizer(text)["input_ids"]`, special tokens as the
tokenizer adds them for a text). Prompt embeddings E are the HF model's input embeddings of those
ids (`get_input_embeddings()(ids)`: a row lookup, so every side that computes them from the same
checkpoint, dtype and ids gets the same bytes). `digest` names E by its bytes: the runner, the
engine trace and the reference each record it, and the verdict holds them to one another."""

from __future__ import annotations

import hashlib
from typing import Any

FORM_KEY = "prompt_form"  # an item paired with its form: {"prompt_form": f, "text": t}


def paired(items: list, forms: list[str] | None) -> list:
    """Each item with the form it is sent as (so shuffles and batches keep them together); the
    items as they are when the case sends text."""
    if not forms:
        return list(items)
    if len(forms) != len(items):
        raise ValueError(f"{len(forms)} prompt forms for {len(items)} items")
    return [{FORM_KEY: f, "text": it} for it, f in zip(items, forms)]


def form_of(item: Any) -> tuple[str, Any]:
    """(form, text) of an item `paired` made; ("text", item) for any other item."""
    if isinstance(item, dict) and FORM_KEY in item:
        return item[FORM_KEY], item["text"]
    return "text", item


def token_ids(tokenizer, text: str) -> list[int]:
    return [int(t) for t in tokenizer(text)["input_ids"]]


def input_embeddings(model, ids: list[int]):
    """The model's input embeddings of `ids`, shape (len(ids), hidden), on the model's device and
    in its dtype."""
    import torch

    emb = model.get_input_embeddings()
    with torch.inference_mode():
        return emb(torch.tensor(ids, dtype=torch.long, device=emb.weight.device)).detach()


def digest(embeds) -> str:
    """sha256 over E's dtype, shape and values (as float32: exact for float16 and bfloat16)."""
    t = embeds.detach().cpu()
    head = f"{t.dtype}:{list(t.shape)}:".encode()
    return hashlib.sha256(head + t.float().contiguous().numpy().tobytes()).hexdigest()


def st_prompt(model_dir: str, name: str) -> str:
    """The sentence-transformers prompt `name` of a checkpoint (config_sentence_transformers.json
    `prompts`): what a vLLM user prepends to each text, as the model card asks. A name the model
    does not define is an error, never an empty prompt."""
    import json
    from pathlib import Path

    path = Path(model_dir) / "config_sentence_transformers.json"
    try:
        prompts = json.loads(path.read_text()).get("prompts") or {}
    except (OSError, ValueError) as e:
        raise ValueError(f"prompt_name {name!r}: cannot read {path}: {e}") from None
    if name not in prompts:
        raise ValueError(f"prompt_name {name!r}: {path} has prompts {sorted(prompts)}")
    return str(prompts[name])
