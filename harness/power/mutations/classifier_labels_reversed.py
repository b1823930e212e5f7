"""The sequence classifier head returns its labels in reverse order (a label-mapping bug)."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "head"
REPLAYS = None
MODULE = "vllm.model_executor.layers.pooler.seqwise.heads"
FILES = ["vllm/model_executor/layers/pooler/seqwise/heads.py"]
CASES = ["*classify*"]


def apply(module):
    original = module.ClassifierPoolerHead.forward

    def forward(self, pooled_data, pooling_metadata):
        out = original(self, pooled_data, pooling_metadata)
        if isinstance(out, list):
            return [o.flip(-1) for o in out]
        return out.flip(-1)

    module.ClassifierPoolerHead.forward = forward
