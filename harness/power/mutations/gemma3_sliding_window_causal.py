"""EmbeddingGemma's sliding-window layers attend causally: Gemma 3 with
use_bidirectional_attention builds its full layers bidirectional but its sliding layers as a
decoder's (the window looks back only), where transformers' window reaches both ways."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "head"
REPLAYS = None
MODULE = "vllm.model_executor.models.gemma3"
FILES = ["vllm/model_executor/models/gemma3.py"]
CASES = ["gemma3-tiny-embeddinggemma-*"]
MATRIX = "matrices/extended.yaml"


def apply(module):
    original = module.Gemma3Attention.__init__

    def __init__(self, config, *args, prefix="", **kwargs):
        # Gemma3TextModelConfig set is_causal from use_bidirectional_attention; a sliding layer
        # reads it back as causal while it is built
        layer = module.extract_layer_index(prefix)
        sliding = config.layer_types[layer] == "sliding_attention"
        was = getattr(config, "is_causal", True)
        if sliding and not was:
            config.is_causal = True
        try:
            original(self, config, *args, prefix=prefix, **kwargs)
        finally:
            config.is_causal = was

    module.Gemma3Attention.__init__ = __init__
