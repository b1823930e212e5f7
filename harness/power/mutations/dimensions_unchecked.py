"""`dimensions` is not validated: a model without Matryoshka support, or more dimensions than the
model has, is answered (cut to what there is) instead of refused."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "head"
REPLAYS = None
MODULE = "vllm.pooling_params"
FILES = ["vllm/pooling_params.py"]
CASES = ["*-dims*-refused"]
MATRIX = "matrices/serve.yaml"


def apply(module):
    original = module.PoolingParams._set_default_parameters

    def _set_default_parameters(self, model_config):
        dims, self.dimensions = self.dimensions, None
        try:
            return original(self, model_config)
        finally:
            self.dimensions = dims

    module.PoolingParams._set_default_parameters = _set_default_parameters
