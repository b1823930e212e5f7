"""Recipes of transformers' AutoModelFor{Sequence,Token}Classification heads."""

from __future__ import annotations

import numpy as np

from harness.matrix.request import Request
from harness.runners.hf import HFRunner, form_inputs, per_item, recipe


def _activation(logits, num_labels: int, on: bool = True):
    """What vLLM's classify/score apply by default: sigmoid for one label, softmax for more
    (sentence-transformers' CrossEncoder default for one label; softmax over the labels for
    more). `on` False: the raw logits (a case's `use_activation: false`)."""
    import torch

    if not on:
        return logits
    return torch.sigmoid(logits) if num_labels == 1 else torch.softmax(logits, dim=-1)


@recipe("hf-sequence-classification", default_for=["classify"], honours=["use_activation"])
def _seq_classify(runner: HFRunner, items: list, request: Request) -> list[np.ndarray]:
    """AutoModelForSequenceClassification logits -> sigmoid (1 label) or softmax (n labels);
    with `use_activation: false` the logits themselves."""
    model = runner.auto_model("AutoModelForSequenceClassification")
    n = model.config.num_labels
    on = request.use_activation is not False
    if request.prompt_forms:  # token ids or inputs_embeds per item, batch of one
        import torch

        with torch.inference_mode():
            return [
                _activation(model(**kw).logits[0], n, on).float().cpu().numpy().astype(np.float32)
                for kw in form_inputs(runner, model, items, request.prompt_forms)
            ]
    return per_item(
        runner,
        items,
        lambda enc: _activation(model(**enc).logits[0], n, on),
        request.truncate,
    )


@recipe("hf-token-classification", default_for=["token_classify"], honours=["use_activation"])
def _token_classify(runner: HFRunner, items: list, request: Request) -> list[np.ndarray]:
    """AutoModelForTokenClassification logits -> softmax per token (special tokens included);
    with `use_activation: false` the logits themselves."""
    import torch

    model = runner.auto_model("AutoModelForTokenClassification")
    on = request.use_activation is not False
    return per_item(
        runner,
        items,
        lambda enc: (torch.softmax if on else _raw)(model(**enc).logits[0], dim=-1),
        request.truncate,
    )


def _raw(logits, dim: int = -1):
    """No activation: the logits as the head computed them."""
    return logits


@recipe("hf-multi-label-classification")
def _multi_label_classify(runner: HFRunner, items: list, request: Request) -> list[np.ndarray]:
    """A classifier whose config.json says `problem_type: multi_label_classification`: one
    independent probability per label, sigmoid(logit), as transformers defines that problem type
    (its *ForSequenceClassification trains it with BCEWithLogitsLoss, one binary decision per
    label; the probabilities do not sum to 1). A model not configured so is refused: the recipe
    would otherwise claim a rule its model card does not state."""
    import torch

    model = runner.auto_model("AutoModelForSequenceClassification")
    kind = getattr(model.config, "problem_type", None)
    if kind != "multi_label_classification":
        raise ValueError(
            f"hf-multi-label-classification: the model's problem_type is {kind!r}, not "
            "'multi_label_classification'"
        )
    return per_item(
        runner, items, lambda enc: torch.sigmoid(model(**enc).logits[0]), request.truncate
    )
