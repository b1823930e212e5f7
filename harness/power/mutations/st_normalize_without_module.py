"""vLLM normalises an ST model's embeddings though its modules.json has no Normalize module."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "normalisation/activation"
REPLAYS = None
MODULE = "vllm.transformers_utils.config"
FILES = ["vllm/transformers_utils/config.py"]
CASES = ["bert-tiny-st-cls-embed-unnormalized"]  # an ST stack without Normalize
MATRIX = "matrices/extended.yaml"


class _EveryModule:
    """A module-type set that holds every type: any module counts as a Normalize."""

    def __contains__(self, item):
        return True


def apply(module):
    # get_pooling_config reads the set at call time: use_activation (normalise) is then true for
    # every sentence-transformers model with a Pooling module
    module._ST_NORMALIZE_MODULE_TYPES = _EveryModule()
