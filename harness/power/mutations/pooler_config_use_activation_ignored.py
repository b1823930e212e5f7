"""The engine's `pooler_config.use_activation` is not merged into the requests: a server or LLM
started with the activation off still normalises / applies softmax."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "normalisation/activation"
REPLAYS = None
MODULE = "vllm.pooling_params"
FILES = ["vllm/pooling_params.py", "vllm/config/pooler.py"]
CASES = ["*-engine-activation-*"]
MATRIX = "matrices/extended.yaml"


def apply(module):
    original = module.PoolingParams._merge_default_parameters

    def merge(self, model_config):
        pooler_config = model_config.pooler_config
        saved = getattr(pooler_config, "use_activation", None)
        if pooler_config is not None:
            pooler_config.use_activation = None
        try:
            return original(self, model_config)
        finally:
            if pooler_config is not None:
                pooler_config.use_activation = saved

    module.PoolingParams._merge_default_parameters = merge
