"""Last-token pooling reads the token before the last one (an index off by one)."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "pooling method"
REPLAYS = None
MODULE = "vllm.model_executor.layers.pooler.seqwise.methods"
FILES = ["vllm/model_executor/layers/pooler/seqwise/methods.py"]
CASES = ["qwen*"]  # LastPool serves the decoder embedders, classifiers and rerankers


def apply(module):
    def forward(self, hidden_states, pooling_metadata):
        cursor = pooling_metadata.get_pooling_cursor()
        last, first = cursor.last_token_indices_gpu, cursor.first_token_indices_gpu
        return hidden_states[(last - 1).maximum(first)]

    module.LastPool.forward = forward
