"""Qwen3 attention takes its head size from hidden_size / num_attention_heads and ignores
config.head_dim (Qwen3-Embedding-0.6B: 128, not 1024 / 16 = 64): the projections no longer fit
the checkpoint's weights."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "head"
REPLAYS = None
MODULE = "vllm.model_executor.models.qwen3"
FILES = ["vllm/model_executor/models/qwen3.py"]
CASES = ["qwen3-tiny-lasttoken-embed-config-wide-heads"]
MATRIX = "matrices/extended.yaml"


def apply(module):
    original = module.Qwen3Attention.__init__

    def __init__(self, *args, **kwargs):
        kwargs["head_dim"] = None  # the configured head size dropped
        original(self, *args, **kwargs)

    module.Qwen3Attention.__init__ = __init__
