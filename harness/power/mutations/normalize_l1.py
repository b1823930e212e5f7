"""Embedding normalisation divides by the L1 norm instead of the L2 norm."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "normalisation/activation"
REPLAYS = None
MODULE = "vllm.model_executor.layers.pooler.activations"
FILES = ["vllm/model_executor/layers/pooler/activations.py"]
CASES = ["*embed*"]


def apply(module):
    import torch.nn.functional as F

    def forward_chunk(self, pooled_data):
        return F.normalize(pooled_data, p=1, dim=-1)

    module.PoolerNormalize.forward_chunk = forward_chunk
