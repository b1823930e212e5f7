"""Recipes of ColBERT late-interaction models: token embeddings and MaxSim scores."""

from __future__ import annotations

import numpy as np

from harness.runners.hf import HFRunner, once_per_item, recipe, reference_model


def _colbert_encoder(runner: HFRunner, normalize: bool = True):
    """text -> [tokens, dim] L2-normalised token embeddings, for both ColBERT layouts:
    `HF_ColBERT` (bert.* + linear, harness.models.refmodels) or a backbone + sentence-transformers
    1_Dense. `normalize` False (a case's `use_activation: false`): the projections themselves."""
    from pathlib import Path

    import torch

    from harness.models.refmodels import REFERENCE_ARCHS

    assert runner.req is not None
    d = Path(runner.req.model_dir)
    tok = runner.tokenizer()
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

    def encode(text: str, max_length: int | None = None, note: bool = False):
        with torch.inference_mode():
            enc = tok(text, return_tensors="pt", truncation=True, max_length=max_length)
            if note:  # one item as the model ran it (not the texts of MaxSim pairs)
                runner.note_tokens(enc["input_ids"][0])
            return forward({k: v.to(runner.req.device) for k, v in enc.items()}).float()

    return encode


@recipe("colbert-token-embed", default_for=["token_embed"], activation=True)
def _colbert_tokens(runner: HFRunner, items: list, options: dict) -> list[np.ndarray]:
    """Every token (special tokens included): projection, then per-token L2 normalisation (not
    with `use_activation: false`)."""
    encode = _colbert_encoder(runner, normalize=options.get("use_activation") is not False)
    return [
        encode(t, options.get("truncate"), note=True).cpu().numpy().astype(np.float32)
        for t in items
    ]


@recipe("colbert-maxsim")
def _colbert_maxsim(runner: HFRunner, items: list, options: dict) -> list[np.ndarray]:
    """Late interaction: sum over query tokens of the max dot product over document tokens."""
    colbert = _colbert_encoder(runner)
    encode = once_per_item(lambda text: colbert(text, options.get("truncate")))
    out = []
    for q, d in items:
        sim = encode(q) @ encode(d).T
        out.append(np.asarray([float(sim.max(dim=1).values.sum())], dtype=np.float32))
    return out
