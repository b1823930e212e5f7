"""vLLM's fix of the recorded NomicBert dynamic NTK divergence (vllm#52665): served at or below the
trained length, the rope keeps its plain base, as transformers does; the mark must go (xpass)."""

# The record (matrices/real-bugs.yaml, nomic-bert-tiny-dynamic-ntk-short-embed) holds a live
# 0.32 bug: DynamicNTKScalingRotaryEmbedding builds its base from max_model_len /
# max_trained_positions at any length. This mutation is the fix, so the record must turn xpass:
# proof that the row sees the mechanism and will flag the release that fixes it.
TARGETS = ">=0.32,<0.33"
BUG_CLASS = "head"
REPLAYS = None
MODULE = "vllm.model_executor.layers.rotary_embedding.dynamic_ntk_scaling_rope"
FILES = ["vllm/model_executor/layers/rotary_embedding/dynamic_ntk_scaling_rope.py"]
CASES = ["nomic-bert-tiny-dynamic-ntk-*"]
MATRIX = "matrices/real-bugs.yaml"


def apply(module):
    cls = module.DynamicNTKScalingRotaryEmbedding
    original = cls._compute_cos_sin_cache

    def _compute_cos_sin_cache(self):
        if self.max_position_embeddings <= self.max_trained_positions:
            return module.RotaryEmbedding._compute_cos_sin_cache(self)
        return original(self)

    cls._compute_cos_sin_cache = _compute_cos_sin_cache
