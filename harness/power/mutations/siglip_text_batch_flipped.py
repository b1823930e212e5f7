"""SigLIP's text tower reverses the whole flattened batch (`flip(0)`) instead of each sequence:
with more than one text in a step, each request's pooled token comes from another request."""

# replays vllm#28365 (SigLIP text embeddings wrong for batch size > 1, 2025-11): the text
# features of the batch, flattened into one sequence, were flipped as one tensor, "mixing
# features across different sequences"; the fix flips each sequence by its position_ids
# (_flip_sequences_by_position_ids). Replayed by the pre-fix whole-batch flip.
TARGETS = ">=0.32,<0.33"
BUG_CLASS = "batching/order"
REPLAYS = "vllm#28365"
MODULE = "vllm.model_executor.models.siglip"
FILES = ["vllm/model_executor/models/siglip.py"]
CASES = ["siglip-tiny-text-embed"]
MATRIX = "matrices/multimodal.yaml"


def apply(module):
    def _flip_sequences_by_position_ids(self, features, position_ids):
        return features.flip(0)

    module.SiglipEmbeddingModel._flip_sequences_by_position_ids = _flip_sequences_by_position_ids
