"""A sequence classifier's token_classify pooler (DispatchPooler.for_seq_cls) classifies every
token whatever `tok_pooling_type` says: a STEP pooler config (a PRM served from a
*ForSequenceClassification checkpoint) is ignored and every token comes back, not the step tags."""

# replays vllm#55307 (fix merged 2026-09-04): for_seq_cls passed pooling=AllPool() to
# pooler_for_token_classify, which resolves the configured token pooling only when none is
# given. Replayed by passing AllPool() again, the pre-fix call.
TARGETS = ">=0.32,<0.33"
BUG_CLASS = "pooling method"
REPLAYS = "vllm#55307"
MODULE = "vllm.model_executor.layers.pooler.special"
FILES = ["vllm/model_executor/layers/pooler/special.py"]
CASES = ["qwen2-tiny-seq-classify-step-reward"]
MATRIX = "matrices/extended.yaml"


def apply(module):
    from vllm.model_executor.layers.pooler.tokwise import methods

    original = module.pooler_for_token_classify

    def pooler_for_token_classify(pooler_config, *, pooling=None, **kwargs):
        return original(pooler_config, pooling=pooling or methods.AllPool(), **kwargs)

    module.pooler_for_token_classify = pooler_for_token_classify
