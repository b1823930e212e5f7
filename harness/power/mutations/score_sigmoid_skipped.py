"""Single-label scores come out as raw logits: the sigmoid of one-label classifiers is skipped."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "normalisation/activation"
REPLAYS = None
MODULE = "vllm.model_executor.layers.pooler.activations"
FILES = ["vllm/model_executor/layers/pooler/activations.py"]
CASES = ["*cross-encoder*", "*rerank*"]


def apply(module):
    original = module.PoolerClassify.forward_chunk

    def forward_chunk(self, pooled_data):
        if (self.num_labels or pooled_data.shape[-1]) < 2:
            return pooled_data
        return original(self, pooled_data)

    module.PoolerClassify.forward_chunk = forward_chunk
