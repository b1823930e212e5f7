"""EmbeddingGemma's sliding-window layers attend to the whole prompt: with bidirectional
(encoder-only) attention the layers are built without their window, so every token of a prompt
longer than the window sees every other, where transformers keeps |i - j| within the window."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "head"
REPLAYS = None
MODULE = "vllm.model_executor.models.gemma3"
FILES = ["vllm/model_executor/models/gemma3.py"]
CASES = ["gemma3-tiny-embeddinggemma-*"]
MATRIX = "matrices/extended.yaml"


def apply(module):
    original = module.Gemma3Attention.__init__

    def __init__(self, config, *args, **kwargs):
        window = getattr(config, "sliding_window", None)
        if getattr(config, "is_causal", True) or window is None:
            return original(self, config, *args, **kwargs)
        config.sliding_window = None  # the sliding layers read it as "no window"
        try:
            original(self, config, *args, **kwargs)
        finally:
            config.sliding_window = window

    module.Gemma3Attention.__init__ = __init__
