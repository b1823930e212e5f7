"""On a Matryoshka model without a list of allowed dimensions, `dimensions` above the embedding
size is accepted: the embedding is cut with `[..., :dimensions]`, which returns the whole vector,
and the request is answered instead of refused."""

# replays vllm#46313: PoolingParams._set_default_parameters checked only `dimensions >= 1` for a
# Matryoshka model with no matryoshka_dimensions; the fix added the upper bound (embedding_size).
# Replayed by validating against an embedding size no request exceeds; every other check (no
# Matryoshka support, a dimension outside matryoshka_dimensions) stays as shipped.
TARGETS = ">=0.32,<0.33"
BUG_CLASS = "head"
REPLAYS = "vllm#46313"
MODULE = "vllm.pooling_params"
FILES = ["vllm/pooling_params.py"]
CASES = ["*-matryoshka-embed-dims*"]
MATRIX = "matrices/serve.yaml"
# front-end code the V1 and V2 servers share: one server runner is the whole test
RUNNERS = ["vllm-serve-v1"]


class _UnboundedSize:
    """A model config whose embedding size is no limit; every other attribute is the model's."""

    def __init__(self, model_config):
        self._model_config = model_config

    def __getattr__(self, name):
        if name == "embedding_size":
            return 1 << 62
        return getattr(self._model_config, name)


def apply(module):
    original = module.PoolingParams._set_default_parameters

    def _set_default_parameters(self, model_config):
        return original(self, _UnboundedSize(model_config))

    module.PoolingParams._set_default_parameters = _set_default_parameters
