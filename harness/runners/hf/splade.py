"""SPLADE sparse embeddings: the MLM logits of every token, log(1 + relu), max over the tokens.

The definition is SPLADE's own (github.com/naver/splade, `splade/models/transformer_rep.py`:
`torch.max(torch.log(1 + torch.relu(out)) * attention_mask.unsqueeze(-1), dim=1)`, `out` the
masked-LM logits of AutoModelForMaskedLM), one unpadded input at a time so no mask is needed.
`splade_vector` is cross-checked against numpy in tests/unit/test_splade_recipe.py. No vLLM import.
"""

from __future__ import annotations

import numpy as np

from harness.matrix.request import Request
from harness.runners.hf import HFRunner, per_item, recipe


def splade_vector(logits):
    """[tokens, vocab] MLM logits -> [vocab]: max over tokens of log(1 + relu(logit))."""
    import torch

    return torch.log1p(torch.relu(logits)).max(dim=0).values


@recipe("splade-max")
def _splade(runner: HFRunner, items: list, request: Request) -> list[np.ndarray]:
    """[vocab] per text, every token (special tokens included, as SPLADE pools them)."""
    model = runner.auto_model("AutoModelForMaskedLM")
    return per_item(
        runner,
        items,
        lambda enc: splade_vector(model(**enc).logits[0]),
        max_length=request.truncate,
    )
