"""Classifier heads in float32 on a half-precision model: the transformers classifier recipes
(sequence.py) with every module after the backbone's last hidden state run in float32.

vLLM 0.32 runs the head of a pooling model in float32 by default (`ModelConfig.head_dtype`: "the
last Linear layer(s) ... the score or classifier in a classification model"; `hf_overrides
{"head_dtype": "model"}` turns it off). What that computes is written here in transformers'
terms only: the model loaded in the case's dtype; for the call, its head modules replaced by the
same modules of the checkpoint loaded in float32 (vLLM builds the head's layers in float32 and
loads the checkpoint's weights into them: a float32 checkpoint's head is not rounded to the half
dtype first), their input (the backbone's hidden states) upcast to float32; then put back."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import numpy as np

from harness.matrix.request import Request
from harness.runners.hf import HFRunner, recipe

# transformers' names of a classifier head's output layer (BERT/RoBERTa/... `classifier`,
# decoder LMs `score`), on the *For{Sequence,Token}Classification model itself
HEAD_NAMES = ("classifier", "score")


def head_modules(model, pooled: bool) -> list[str]:
    """The dotted names of the modules after the backbone's last hidden state: the base model's
    `pooler` where a sequence classifier has one (BERT: dense + tanh on the first token), then
    the classifier. A model with none of transformers' head names is refused: the recipe would
    otherwise run the whole model in the half dtype and call it a float32 head."""
    names = []
    base = getattr(model, "base_model_prefix", "")
    if pooled and getattr(getattr(model, base, None), "pooler", None) is not None:
        names.append(f"{base}.pooler")
    head = [n for n in HEAD_NAMES if getattr(model, n, None) is not None]
    if not head:
        raise ValueError(
            f"{type(model).__name__} has no classifier head named {' or '.join(HEAD_NAMES)}: "
            "the float32-head recipe cannot tell which modules are the head"
        )
    return names + head[:1]


@contextmanager
def float32_head(model, names: list[str], float32_model) -> Iterator[None]:
    """Each named submodule of `model` replaced, for the call, by the same submodule of
    `float32_model` (the checkpoint loaded in float32), its first input upcast to float32; the
    model's own modules are put back afterwards (a loaded model serves other cases of its load
    key)."""
    import torch

    class Float32(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, x, *args, **kwargs):
            return self.inner(x.float(), *args, **kwargs)

    saved = []
    try:
        for name in names:
            parent_name, _, attr = name.rpartition(".")
            parent = model.get_submodule(parent_name) if parent_name else model
            saved.append((parent, attr, getattr(parent, attr)))
            head = float32_model.get_submodule(name)
            if any(p.dtype != torch.float32 for p in head.parameters()):
                raise ValueError(f"float32_head: {name} of the float32 model is not float32")
            setattr(parent, attr, Float32(head))
        yield
    finally:
        for parent, attr, own in reversed(saved):
            setattr(parent, attr, own)


def _float32_model(runner: HFRunner, cls_name: str):
    """transformers.<cls_name> loaded from the case's checkpoint in float32 (cached per load)."""

    def make():
        import torch
        import transformers

        assert runner.req is not None
        return (
            getattr(transformers, cls_name)
            .from_pretrained(
                runner.req.model_dir,
                dtype=torch.float32,
                local_files_only=True,
                trust_remote_code=runner.req.trust_remote_code,
            )
            .to(runner.req.device)
            .eval()
        )

    return runner.loaded(f"{cls_name}@float32", make)


def _with_float32_head(runner: HFRunner, cls_name: str, base: str, pooled: bool, items, request):
    from harness.runners.hf import RECIPES

    assert runner.req is not None
    if runner.req.lora_dir:  # the float32 head would be the base model's, not the adapter's
        raise ValueError(f"{base}-fp32-head does not run a LoRA adapter; use {base}")
    model = runner.auto_model(cls_name)  # the very model the base recipe loads (cached)
    with float32_head(model, head_modules(model, pooled), _float32_model(runner, cls_name)):
        return RECIPES[base](runner, items, request)


@recipe("hf-sequence-classification-fp32-head", honours=["use_activation"])
def _seq_classify_fp32_head(runner: HFRunner, items: list, request: Request) -> list[np.ndarray]:
    """hf-sequence-classification with the pooler (if any) and classifier in float32."""
    return _with_float32_head(
        runner,
        "AutoModelForSequenceClassification",
        "hf-sequence-classification",
        True,
        items,
        request,
    )


@recipe("hf-token-classification-fp32-head", honours=["use_activation"])
def _token_classify_fp32_head(runner: HFRunner, items: list, request: Request) -> list[np.ndarray]:
    """hf-token-classification with the classifier in float32."""
    return _with_float32_head(
        runner,
        "AutoModelForTokenClassification",
        "hf-token-classification",
        False,
        items,
        request,
    )
