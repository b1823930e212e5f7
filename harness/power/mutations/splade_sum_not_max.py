"""SPLADE's sparse pooler sums the token scores where it should take their max."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "pooling method"
REPLAYS = None
MODULE = "vllm.model_executor.models.bert"
FILES = ["vllm/model_executor/models/bert.py"]
CASES = ["splade-*"]


def apply(module):
    original = module.SPLADESparsePooler.forward

    def forward(self, hidden_states, pooling_metadata):
        pooling, self.pooling = self.pooling, "sum"
        try:
            return original(self, hidden_states, pooling_metadata)
        finally:
            self.pooling = pooling

    module.SPLADESparsePooler.forward = forward
