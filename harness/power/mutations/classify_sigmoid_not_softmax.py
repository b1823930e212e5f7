"""Multi-class classification applies a sigmoid per label instead of a softmax over labels."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "normalisation/activation"
REPLAYS = None
MODULE = "vllm.model_executor.layers.pooler.activations"
FILES = ["vllm/model_executor/layers/pooler/activations.py"]
CASES = ["*classify*"]


def apply(module):
    import torch.nn.functional as F

    def forward_chunk(self, pooled_data):
        return F.sigmoid(pooled_data)

    module.PoolerClassify.forward_chunk = forward_chunk
