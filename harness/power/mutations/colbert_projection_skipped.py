"""The per-token embedding head skips its projector (ColBERT's linear layer is not applied)."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "head"
REPLAYS = None
MODULE = "vllm.model_executor.layers.pooler.tokwise.heads"
FILES = ["vllm/model_executor/layers/pooler/tokwise/heads.py"]
CASES = ["colbert-*"]


def apply(module):
    original = module.TokenEmbeddingPoolerHead.forward_chunk

    def forward_chunk(self, pooled_data, pooling_param):
        projector, self.projector = self.projector, None
        try:
            return original(self, pooled_data, pooling_param)
        finally:
            self.projector = projector

    module.TokenEmbeddingPoolerHead.forward_chunk = forward_chunk
