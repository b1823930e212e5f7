"""Sentence-Transformers Dense modules load without their activation (a Tanh Dense is linear)."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "head"
REPLAYS = None
MODULE = "vllm.model_executor.models.adapters"
FILES = ["vllm/model_executor/models/adapters.py"]
# the ST Dense stack (Tanh then Identity) and the recorded use_residual divergence (Tanh)
CASES = ["bert-tiny-st-dense-embed", "bert-tiny-st-dense-residual-embed"]
MATRIX = "matrices/extended.yaml"


def apply(module):
    import torch.nn as nn

    # _load_st_projector looks get_act_fn up in its module at call time: every Dense's
    # activation_function becomes Identity, the Linear layers stay
    module.get_act_fn = lambda name: nn.Identity()
