"""SigLIP's text tower pooled at its first token, not its last (the per-sequence flip that brings
the last position under vLLM's CLS pooling skipped)."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "pooling method"
REPLAYS = None
MODULE = "vllm.model_executor.models.siglip"
FILES = ["vllm/model_executor/models/siglip.py"]
CASES = ["siglip-tiny-text-embed"]
MATRIX = "matrices/multimodal.yaml"


def apply(module):
    def _flip_sequences_by_position_ids(self, features, position_ids):
        return features  # each sequence left in order: CLS pooling reads its first token

    module.SiglipEmbeddingModel._flip_sequences_by_position_ids = _flip_sequences_by_position_ids
