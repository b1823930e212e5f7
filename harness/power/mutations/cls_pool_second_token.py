"""CLS pooling reads the second token of each prompt instead of the first."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "pooling method"
REPLAYS = None
MODULE = "vllm.model_executor.layers.pooler.seqwise.methods"
FILES = ["vllm/model_executor/layers/pooler/seqwise/methods.py"]
CASES = ["*bert*"]  # CLS pooling: BERT / ModernBERT cross-encoders and classifiers


def apply(module):
    def forward(self, hidden_states, pooling_metadata):
        cursor = pooling_metadata.get_pooling_cursor()
        first, last = cursor.first_token_indices_gpu, cursor.last_token_indices_gpu
        return hidden_states[(first + 1).minimum(last)]

    module.CLSPool.forward = forward
