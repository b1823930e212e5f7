"""Under chunked prefill, a batch's classifier scores collapse onto the first request's score."""

# analogue of vllm#48831 / #48901 (reranker scores collapsed under dynamic batching + chunked
# prefill): wrong only when a request of the batch finished after more than one chunk
TARGETS = ">=0.32,<0.33"
BUG_CLASS = "chunked-prefill/prefix-cache state"
REPLAYS = "vllm#48901"
MODULE = "vllm.model_executor.layers.pooler.seqwise.heads"
FILES = ["vllm/model_executor/layers/pooler/seqwise/heads.py"]
CASES = ["qwen*score*", "qwen*classify*", "*cross-encoder-score*"]


def apply(module):
    original = module.ClassifierPoolerHead.forward

    def forward(self, pooled_data, pooling_metadata):
        out = original(self, pooled_data, pooling_metadata)
        cursor = pooling_metadata.get_pooling_cursor()
        chunked = bool((cursor.seq_lens_cpu > cursor.num_scheduled_tokens_cpu).any())
        if chunked and len(out) > 1:
            if isinstance(out, list):
                return [out[0]] * len(out)
            return out[:1].expand_as(out).clone()
        return out

    module.ClassifierPoolerHead.forward = forward
