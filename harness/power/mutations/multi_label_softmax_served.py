"""multi_label_softmax through the server (`vllm serve`, /classify): a multi-label classifier
(config problem_type multi_label_classification) gets a softmax over its labels instead of one
sigmoid per label, as if get_act_fn ignored problem_type."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "normalisation/activation"
REPLAYS = None
MODULE = "vllm.model_executor.layers.pooler.activations"
FILES = ["vllm/model_executor/layers/pooler/activations.py"]
CASES = ["serve-*multilabel*"]
RUNNERS = ["vllm-serve-v1", "vllm-serve-v2"]
MATRIX = "matrices/serve.yaml"


def apply(module):
    import torch.nn.functional as F

    def forward_chunk(self, pooled_data):
        return F.softmax(pooled_data, dim=-1)

    module.PoolerMultiLabelClassify.forward_chunk = forward_chunk
