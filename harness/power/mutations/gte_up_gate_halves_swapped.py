"""GTE's fused up_gate_proj is split the wrong way round (the gate half taken as up): GeGLU
becomes gelu(up) * gate."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "head"
REPLAYS = None
MODULE = "vllm.model_executor.models.bert_with_rope"
FILES = ["vllm/model_executor/models/bert_with_rope.py"]
CASES = ["gte-tiny-cls-embed"]
MATRIX = "matrices/extended.yaml"


def apply(module):
    def split_up_gate_proj(self, weights):
        n = "mlp.up_gate_proj"
        for name, weight in weights:
            if n in name:
                up, gate = weight.chunk(2, dim=0)
                yield name.replace(n, "mlp.up_proj"), gate
                yield name.replace(n, "mlp.gate_proj"), up
            else:
                yield name, weight

    module.GteNewModel.split_up_gate_proj = split_up_gate_proj
