"""Recipes of reward models (harness.models.refmodels architectures): outcome and process
rewards."""

from __future__ import annotations

import numpy as np

from harness.matrix.request import Request
from harness.runners.hf import HFRunner, per_item, recipe, reference_model


@recipe("reference-token-reward", default_for=["reward"], honours=["use_activation"])
def _token_reward(runner: HFRunner, items: list, request: Request) -> list[np.ndarray]:
    """Outcome reward model: the head's raw output at every token, [tokens, 1] (vLLM's default);
    with `use_activation: true`, its sigmoid (one label: the probability reading a single-logit
    head gets, as sentence-transformers' CrossEncoder and the hf-sequence-classification recipe
    apply it)."""
    import torch

    model = reference_model(runner)
    on = request.use_activation is True

    def forward(enc):
        raw = model(enc["input_ids"], enc.get("attention_mask"))[0]
        return torch.sigmoid(raw) if on else raw

    return per_item(
        runner,
        items,
        forward,
        request.truncate,
    )


@recipe("reference-step-reward", default_for=["step_reward"])
def _step_reward(runner: HFRunner, items: list, request: Request) -> list[np.ndarray]:
    """Process reward model: softmax of the head at the step-tag tokens only, [steps, 2]."""
    import torch

    model = reference_model(runner)
    tag = request.hf.get("step_tag")
    if not tag:
        raise ValueError(
            "the step-reward recipe needs `hf: {step_tag: <token>}` in the matrix case"
        )
    tag_id = runner.tokenizer().convert_tokens_to_ids(tag)

    def forward(enc):
        logits = model(enc["input_ids"], enc.get("attention_mask"))[0]
        return torch.softmax(logits[enc["input_ids"][0] == tag_id], dim=-1)

    return per_item(runner, items, forward, request.truncate)


@recipe("hf-sequence-classification-step-reward")
def _seq_classify_step_reward(runner: HFRunner, items: list, request: Request) -> list[np.ndarray]:
    """A decoder *ForSequenceClassification model read as a process reward model: its `score`
    head on every token's last hidden state (transformers computes it so before pooling the last
    token), softmax at the step-tag tokens only, [steps, num_labels]."""
    import torch

    model = runner.auto_model("AutoModelForSequenceClassification")
    head = getattr(model, "score", None)
    if head is None:
        raise ValueError(
            f"hf-sequence-classification-step-reward: {type(model).__name__} has no `score` "
            "head on its hidden states (a decoder *ForSequenceClassification has one)"
        )
    tag = request.hf.get("step_tag")
    if not tag:
        raise ValueError(
            "hf-sequence-classification-step-reward needs `hf: {step_tag: <token>}` in the case"
        )
    tag_id = runner.tokenizer().convert_tokens_to_ids(tag)

    def forward(enc):
        hidden = model.base_model(**enc).last_hidden_state[0]
        logits = head(hidden)
        return torch.softmax(logits[enc["input_ids"][0] == tag_id], dim=-1)

    return per_item(runner, items, forward, request.truncate)
