"""A request's `use_activation` is ignored: every request gets the pooler's default (normalised
embeddings, softmax / sigmoid on classifiers, raw reward logits) whatever it asked for."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "normalisation/activation"
REPLAYS = None
MODULE = "vllm.pooling_params"
FILES = ["vllm/pooling_params.py"]
CASES = ["*-activation-*"]
MATRIX = "matrices/extended.yaml"


def apply(module):
    original = module.PoolingParams.verify

    def verify(self, model_config):
        if self.task in ("embed", "classify", "token_embed", "token_classify"):
            self.use_activation = None  # dropped: the engine's / the task's default decides
        return original(self, model_config)

    module.PoolingParams.verify = verify
