"""ModernBERT's sequence-classification pooler pools the CLS token whatever
config.classifier_pooling says ("mean" in the fine-tunes that set it)."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "pooling method"
REPLAYS = None
MODULE = "vllm.model_executor.models.modernbert"
FILES = ["vllm/model_executor/models/modernbert.py"]
CASES = ["modernbert-tiny-classify-3-config-mean-pooling"]
MATRIX = "matrices/extended.yaml"


def apply(module):
    original = module.ModernBertPooler.__init__

    def __init__(self, model_config):
        config = model_config.hf_config
        configured = config.classifier_pooling
        config.classifier_pooling = "cls"  # the key not read: the architecture's default
        try:
            original(self, model_config)
        finally:
            config.classifier_pooling = configured

    module.ModernBertPooler.__init__ = __init__
