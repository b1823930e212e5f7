"""The token classifier head returns raw logits: its per-token softmax is skipped."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "head"
REPLAYS = None
MODULE = "vllm.model_executor.layers.pooler.tokwise.heads"
FILES = ["vllm/model_executor/layers/pooler/tokwise/heads.py"]
CASES = ["*token-classify*"]


def apply(module):
    original = module.TokenClassifierPoolerHead.forward_chunk

    def forward_chunk(self, pooled_data, pooling_param):
        activation, self.activation = self.activation, None
        try:
            return original(self, pooled_data, pooling_param)
        finally:
            self.activation = activation

    module.TokenClassifierPoolerHead.forward_chunk = forward_chunk
