"""Matryoshka `dimensions` cut the vector after normalisation: the result is not re-normalised."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "head"
REPLAYS = None
MODULE = "vllm.model_executor.layers.pooler.seqwise.heads"
FILES = ["vllm/model_executor/layers/pooler/seqwise/heads.py"]
CASES = ["*matryoshka*"]


def apply(module):
    original = module.EmbeddingPoolerHead.forward

    def forward(self, pooled_data, pooling_metadata):
        params = pooling_metadata.pooling_params
        dims = [p.dimensions for p in params]
        if all(d is None for d in dims):
            return original(self, pooled_data, pooling_metadata)
        for p in params:
            p.dimensions = None
        try:
            full = original(self, pooled_data, pooling_metadata)
        finally:
            for p, d in zip(params, dims):
                p.dimensions = d
        return [v if d is None else v[..., :d] for v, d in zip(full, dims)]

    module.EmbeddingPoolerHead.forward = forward
