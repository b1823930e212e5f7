"""ModernBERT's sliding-window layers attend one key fewer on each side than Hugging Face's: vLLM
takes the config's window as exclusive where transformers treats the boundary as inclusive."""

# replays vllm#44040 (2026-05-30, "vLLM's ModernBERT implementation had a few places where it did
# not follow the model config / HF implementation"): sliding-window attention was built with the
# config's window (local_attention // 2) directly; the fix passes sliding_window + 1. Replayed by
# building each ModernBertAttention against a config whose window is one smaller, which gives the
# attention layer the pre-fix window. Seen only where a prompt is longer than the window (the
# synthetic ModernBERT: local_attention 16, long-texts of 47-92 tokens).
TARGETS = ">=0.32,<0.33"
BUG_CLASS = "head"
REPLAYS = "vllm#44040"
MODULE = "vllm.model_executor.models.modernbert"
FILES = ["vllm/model_executor/models/modernbert.py"]
CASES = ["modernbert-*"]


def apply(module):
    original = module.ModernBertAttention.__init__

    def __init__(self, config, *args, **kwargs):
        window = getattr(config, "sliding_window", None)
        if window is None:
            return original(self, config, *args, **kwargs)
        config.sliding_window = window - 1
        try:
            return original(self, config, *args, **kwargs)
        finally:
            config.sliding_window = window

    module.ModernBertAttention.__init__ = __init__
