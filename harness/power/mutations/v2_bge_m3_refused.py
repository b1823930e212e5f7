"""BGE-M3 (dense + sparse + ColBERT heads) fails to start under Model Runner V2."""

# replays vllm#50661 (BGE-M3 failed to start on V2)
TARGETS = ">=0.32,<0.33"
BUG_CLASS = "engine start"
REPLAYS = "vllm#50661"
MODULE = "vllm.model_executor.models.roberta"
FILES = ["vllm/model_executor/models/roberta.py"]


def apply(module):
    import functools
    import sys

    original = module.BgeM3EmbeddingModel.__init__

    # wraps: vLLM reads __init__'s signature (keyword-only vllm_config) to pick how to call it;
    # a bare (*args, **kwargs) made V1 fail too (TypeError: missing 'vllm_config')
    @functools.wraps(original)
    def __init__(self, *args, **kwargs):
        frame = sys._getframe(1)
        while frame is not None:  # built by V2's model runner?
            if frame.f_globals.get("__name__", "").startswith("vllm.v1.worker.gpu."):
                raise RuntimeError("BgeM3EmbeddingModel: pooler not supported by Model Runner V2")
            frame = frame.f_back
        original(self, *args, **kwargs)

    module.BgeM3EmbeddingModel.__init__ = __init__
