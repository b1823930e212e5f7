"""The server's /pooling request drops its `use_activation` field on the way to PoolingParams:
token classifiers, reward models and token embedders answer with their default post-processing."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "server encoding"
REPLAYS = None
MODULE = "vllm.entrypoints.pooling.pooling.protocol"
FILES = ["vllm/entrypoints/pooling/pooling/protocol.py"]
CASES = ["serve-*-activation-*"]
MATRIX = "matrices/serve.yaml"


def apply(module):
    for cls in (module.PoolingCompletionRequest, module.PoolingChatRequest):
        original = cls.to_pooling_params

        def to_pooling_params(self, _original=original):
            params = _original(self)
            params.use_activation = None
            return params

        cls.to_pooling_params = to_pooling_params
